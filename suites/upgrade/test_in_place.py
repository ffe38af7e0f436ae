"""A broker upgraded in place under traffic, and downgraded in place (UPGRADE-ROLLING-1, UPGRADE-DOWNGRADE-1).

The upgrade: B1 starts on the previous release of the session's broker vendor (harness/peers/versions.py,
`previous`); durable producers and consumers run on three queues (two with live consumers, one storing for a
consumer that comes after); then B1 is stopped, gracefully or with kill -9, its binary replaced by the session's
release over the same data directory and configuration (Peer.replace_binary), and started again; a second
generation of producers and consumers attaches, and every queue is drained. The checkers judge both generations
together: nothing accepted is lost, a duplicate is only a redelivery across the step (its first copy's
acknowledgement went with the connection) and is counted, each producer's messages arrive in the order sent
(redeliveries aside). `resume_s` is the downtime: from the stop to the first message accepted by the new release.

The downgrade: B1 runs the session's release, stores durable messages (one queue also consumed, so its journal
holds acknowledgements too), is stopped, and the previous release is started on that data. The first downgrade case
asks that it reads it (every stored message, once, in order); where a product refuses, that case fails with the
refusal and is a recorded difference in harness/vendors/<vendor>/expected.yaml. The second judges the refusal itself,
so that an expected refusal can never hide a dirty one: the data's checksums are the same after it, and the session's
release then starts on it again and serves every message (not-applicable where the previous release reads the data).
"""

import time

import pytest

from harness import checkers
from harness.peers.base import PeerStartError, PeerUnavailable
from harness.pytest_plugin import NOT_APPLICABLE
from harness.wait import wait_for

from ..conftest import PREVIOUS, mixed_releases
from .conftest import (AFTER, LIVE, NODE, QUEUES, STOPS, STORED, TOPOLOGY, WAIT, checksums, judge, releases,
                       start_generation, wait_delivered, wait_drained, wait_running)

DOWNGRADE_SENT = 100  # durable messages per queue before the downgrade


def _judge(clients, gens, details, *, allow_duplicates: bool) -> checkers.Verdict:
    """conftest.judge with the first generation's consumers before the step and the others' after it."""
    return judge(clients, gens, details, before=gens[0].consumers.values(),
                 after=[r for g in gens[1:] for r in g.consumers.values()], allow_duplicates=allow_duplicates)


@pytest.mark.spec("UPGRADE-ROLLING-1")
@pytest.mark.requires("durable")
@pytest.mark.parametrize("stop", list(STOPS))
def test_a_broker_upgraded_in_place_under_traffic_loses_nothing(stop, upgrade_topology, clients, interop, details):
    _previous, current = releases(interop)
    broker = upgrade_topology(mixed_releases(interop, "broker", {NODE: PREVIOUS}))[NODE]
    details.update(topology=TOPOLOGY, step="upgrade", stop=stop, from_version=broker.info.version)
    first = start_generation(clients, broker, "before")
    wait_running(first)
    began = time.monotonic()
    try:
        broker.replace_binary(current, kill=STOPS[stop])
    except PeerUnavailable as exc:
        pytest.skip(f"cannot upgrade {NODE} in place: {exc}")
    details.update(to_version=broker.info.version, start_s=round(time.monotonic() - began, 3),
                   stored_after_step=broker.queue_stats(STORED)["depth"])
    second = start_generation(clients, broker, "after", consumers_on=QUEUES, send=AFTER)
    wait_for(lambda: any(o.outcome == "accepted" for p in second.producers.values()
                         for o in dict(p.outcomes).values()), WAIT,
             f"a message accepted by {NODE} on release {broker.info.version}")
    details["resume_s"] = round(time.monotonic() - began, 3)
    for snd in second.producers.values():
        snd.wait_outcomes(AFTER, timeout=WAIT)
    missing = wait_delivered([first, second])
    if missing is None:
        wait_drained(broker, [first, second])
    details.update(accepted_before={q: len(a) for q, a in first.accepted().items()},
                   in_doubt_at_step={q: p.sent - p.settled_count() for q, p in first.producers.items()},
                   accepted_after={q: len(a) for q, a in second.accepted().items()})
    verdict = _judge(clients, [first, second], details, allow_duplicates=True)
    assert missing is None and verdict.ok, (
        f"upgrade {details['from_version']} -> {details['to_version']} after a {stop} stop: {missing or ''}\n"
        f"{verdict.failures()}")


def _downgrade(upgrade_topology, clients, interop, details) -> tuple:
    """Store durable messages on the session's release (one queue also consumed, so that its journal holds
    acknowledgements), stop it and start the previous release on that data. (the first generation, the refusal's
    reason or None where the previous release started, the data files the refusal changed)."""
    previous, current = releases(interop)
    broker = upgrade_topology()[NODE]
    details.update(topology=TOPOLOGY, step="downgrade", stop="graceful", from_version=broker.info.version,
                   to_version=previous)
    first = start_generation(clients, broker, "new", consumers_on=LIVE[:1], send=DOWNGRADE_SENT)
    for snd in first.producers.values():
        outcomes = snd.wait_outcomes(DOWNGRADE_SENT, timeout=WAIT)
        assert all(o.outcome == "accepted" for o in outcomes.values()), f"{snd.name}: not all accepted"
    assert wait_delivered([first], queues=LIVE[:1]) is None
    first.consumers[LIVE[0]].conn.sync()  # its acknowledgements are with the broker before it stops
    before: dict = {}

    def read_data(peer):
        before.update(checksums(peer.data_dir))
    try:
        broker.replace_binary(previous, before_start=read_data)
    except PeerUnavailable as exc:
        pytest.skip(f"cannot downgrade {NODE} in place: {exc}")
    except PeerStartError as exc:
        said = [line for line in str(exc).splitlines() if line.strip()]
        refusal = " / ".join(dict.fromkeys([said[0], said[-1]]))  # what failed, and the product's last word
        after = checksums(broker.data_dir)
        changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
        details.update(downgrade="refused", refusal=refusal, refusal_log=_error_lines(broker), data_files=len(after),
                       changed_files=changed[:20])
        return broker, first, refusal, changed, current
    details["downgrade"] = "read"
    return broker, first, None, [], current


def _all_stored_messages(broker, clients, first, details, what: str) -> None:
    """Every message stored before the downgrade reaches a consumer once, in order (a graceful stop with every
    acknowledgement in: nothing may come twice)."""
    second = start_generation(clients, broker, "old", consumers_on=QUEUES, send=0)
    missing = wait_delivered([first, second])
    if missing is None:
        wait_drained(broker, [first, second])
    verdict = _judge(clients, [first, second], details, allow_duplicates=False)
    assert missing is None and verdict.ok, f"{what}: {missing or ''}\n{verdict.failures()}"


@pytest.mark.spec("UPGRADE-DOWNGRADE-1")
@pytest.mark.requires("durable")
def test_a_broker_downgraded_in_place_reads_the_new_release_data(upgrade_topology, clients, interop, details):
    broker, first, refusal, _changed, _current = _downgrade(upgrade_topology, clients, interop, details)
    if refusal is not None:  # a refusal's cleanliness is the next case's to judge
        pytest.fail(f"release {details['to_version']} refuses the data of {details['from_version']}: {refusal}",
                    pytrace=False)
    _all_stored_messages(broker, clients, first, details, f"after the downgrade to {details['to_version']}")


@pytest.mark.spec("UPGRADE-DOWNGRADE-1")
@pytest.mark.requires("durable")
def test_a_refused_downgrade_leaves_the_data_for_the_new_release(upgrade_topology, clients, interop, details):
    broker, first, refusal, changed, current = _downgrade(upgrade_topology, clients, interop, details)
    if refusal is None:
        pytest.skip(f"{NOT_APPLICABLE}release {details['to_version']} reads the data of {details['from_version']}: "
                    "there is no refusal to judge")
    assert not changed, f"the refused downgrade ({refusal}) changed the data: {changed[:5]}"
    broker.replace_binary(current)  # the release that wrote the data must read it again
    details["back_on"] = broker.info.version
    _all_stored_messages(broker, clients, first, details, f"back on {broker.info.version} after a refused downgrade")


def _error_lines(broker, limit: int = 5) -> list[str]:
    """The lines of the refusing run's log that say why (errors and exceptions), for the record."""
    lines = [line for line in broker.logs().splitlines() if "ERROR" in line or "Exception" in line]
    return lines[:limit]
