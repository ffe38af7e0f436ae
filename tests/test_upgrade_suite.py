"""The rolling-upgrade suite's own logic (suites/upgrade): which duplicates a step explains, the data's checksums, and
that a provider that cannot replace a binary says so before stopping anything."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.peers.base import PeerInfo, PeerUnavailable
from harness.peers.process import ProcessPeer
from suites.upgrade.conftest import checksums, redeliveries_across


def receiver(*seqs, producer="p"):
    return SimpleNamespace(messages=lambda: [SimpleNamespace(producer=producer, seq=s) for s in seqs])


def test_a_duplicate_is_explained_only_as_one_copy_before_the_step_and_one_after():
    judged = redeliveries_across([receiver(0, 1, 2)], [receiver(2, 3), receiver(4)])
    assert judged.ok and judged.explained == 1 and judged.unexplained == 0
    twice_after = redeliveries_across([receiver(0)], [receiver(3, 3)])
    assert not twice_after.ok and twice_after.unexplained_ids == [["p", 3]]
    twice_before = redeliveries_across([receiver(1), receiver(1)], [receiver(1)])
    assert not twice_before.ok and twice_before.unexplained == 1


def test_checksums_see_a_changed_byte_and_a_new_file(tmp_path):
    (tmp_path / "journal").mkdir()
    (tmp_path / "journal" / "a.amq").write_bytes(b"one")
    before = checksums(tmp_path)
    (tmp_path / "journal" / "a.amq").write_bytes(b"onf")
    (tmp_path / "server.lock").write_bytes(b"")
    after = checksums(tmp_path)
    assert set(after) == {"journal/a.amq", "server.lock"} and after["journal/a.amq"] != before["journal/a.amq"]


class Plain(ProcessPeer):
    def start(self, timeout=30.0):
        raise AssertionError("must not start")


def test_a_provider_without_another_install_refuses_before_stopping_anything(tmp_path):
    peer = Plain("B1", "broker", PeerInfo("x", "1", "native"), frozenset(), tmp_path)
    peer.restart = lambda *a, **k: pytest.fail("stopped a peer it could not upgrade")
    with pytest.raises(PeerUnavailable, match="cannot replace its binary in place"):
        peer.replace_binary("2")
