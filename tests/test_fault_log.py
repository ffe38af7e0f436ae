"""The faults a case injected reach its record (harness/fault_log.py): the log itself, and the peers' kill, pause
and restart noting themselves for every provider class (harness/peers/base.py). The suites' records are checked
end to end in tests/test_fault_records.py."""

from __future__ import annotations

import pytest

from harness import fault_log
from harness.peers.base import Peer, PeerInfo


@pytest.fixture(autouse=True)
def closed_log():
    fault_log.take()
    yield
    fault_log.take()


def test_nothing_is_noted_outside_a_case():
    fault_log.note("kill -9", "broker B1")
    fault_log.begin()
    assert fault_log.take() is None


def test_a_case_gets_its_first_fault_and_every_fault_in_order():
    fault_log.begin()
    fault_log.note("latency", "link R1-R2", stream="upstream", latency=20)
    fault_log.note("kill -9", "router R2")
    fault = fault_log.take()
    assert (fault["name"], fault["target"]) == ("latency", "link R1-R2")
    assert [f["name"] for f in fault["faults"]] == ["latency", "kill -9"]
    assert fault["faults"][0]["latency"] == 20 and fault["at_s"] >= 0
    assert fault_log.take() is None, "the log is closed once taken"


def test_what_the_harness_does_quietly_is_not_a_fault():
    fault_log.begin()
    with fault_log.quiet():
        fault_log.note("kill -9", "broker B1")
    assert fault_log.take() is None


class Stand(Peer):
    """A provider whose restart kills through its own kill, as the process providers' do."""

    def __init__(self, can_pause: bool = True):
        self.name, self.role = "B1", "broker"
        self.info = PeerInfo(vendor="stand-in", version="0", provider="test")
        self.capabilities, self.endpoints = frozenset(), {}
        self.can_pause, self.calls = can_pause, []

    def start(self, timeout: float = 30.0) -> None:
        self.calls.append("start")

    def stop(self, timeout: float = 10.0) -> None:
        self.calls.append("stop")

    def kill(self) -> None:
        self.calls.append("kill")

    def pause(self) -> None:
        if not self.can_pause:
            raise NotImplementedError("cannot pause")
        self.calls.append("pause")

    def restart(self, timeout: float = 30.0, *, kill: bool = False) -> None:
        self.kill() if kill else self.stop()
        self.start()

    def is_running(self) -> bool:
        return True

    def logs(self) -> str:
        return ""


class Sub(Stand):
    def kill(self) -> None:  # an override that calls its parent's: still one fault
        super().kill()


def names() -> list[str]:
    fault = fault_log.take()
    return [f["name"] for f in fault["faults"]] if fault else []


@pytest.mark.parametrize("cls", [Stand, Sub])
def test_a_peer_notes_each_fault_once_whichever_class_implements_it(cls):
    peer = cls()
    fault_log.begin()
    peer.kill()
    peer.restart(kill=True)
    peer.pause()
    assert names() == ["kill -9", "kill -9 and restart", "pause"]
    assert peer.calls == ["kill", "kill", "start", "pause"]


def test_a_plain_restart_and_a_fault_the_provider_cannot_do_are_not_noted():
    peer = Stand(can_pause=False)
    fault_log.begin()
    peer.restart()
    with pytest.raises(NotImplementedError):
        peer.pause()
    assert names() == []
