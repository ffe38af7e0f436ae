"""Mirroring through a faulty link (002_f23507c2891d6d06.txt, "Mirroring", "Reconnecting and Failover"): the
DC1->DC2 mirror link goes through the fault proxy, which resets, slows or cuts it while DC1's producer goes
on. The producer is never held up; the events wait on DC1's mirror queue; once the link is back the mirror
catches up and DC2 holds every message exactly once.

Each fault stays until it has visibly acted on the mirror (a condition, not a time). Figures per fault in the
result record: lost, duplicated, recovered (the checkers' counts on DC2's queue), lag (mirror events not yet
confirmed when the link came back), in_doubt (of those, how many DC2 had already applied: a reset that eats
DC2's answers leaves most of them so, and DC1 must send them again without DC2 applying them twice),
failed_dials and resume_s (seconds from the link's return until the mirror queue was empty).

As in test_mirror.py, each fault also runs with one end a reference broker (`into-reference`, `from-reference`)
where the session's broker vendor is another: a reset that leaves events in doubt is where the two vendors'
duplicate detection (by origin node and message id) must agree; and with one end the vendor's previous release
(`into-previous`, `from-previous`), where two releases' duplicate detection must agree.
"""

import time

import pytest

from harness import checkers
from harness.wait import wait_for

from ..conftest import pairing_params
from .conftest import (PAIRS, WAIT, configured, connection, depth, mirror_queue, mirror_ready,
                       paired_with_reference, send_accepted, sender, stats, wait_depth, wait_mirror_idle)

pytestmark = pytest.mark.requires("mirror", "store-and-forward")

MIRROR = "DC2"
N = 100


@pytest.fixture(params=pairing_params(PAIRS))
def faulty(request, topology, clients, interop):
    running = topology("broker-mirror", vendors=paired_with_reference(interop, PAIRS[request.param]))
    if running.faults is None:
        pytest.skip("broker-mirror's DC1->DC2 link does not go through the fault proxy here")
    mirror_ready(clients, running, MIRROR)
    yield running
    running.faults.reset()  # every case leaves the link clean for the next


def _mirror_link(running) -> str:
    return next(link.name for link in running.topology.links if link.from_ == "DC1" and link.to == "DC2")


def _break(faults, link: str, fault: str) -> None:
    if fault == "reset":
        # DC1's events get through, DC2's answers do not: its first one resets the connection, so DC2 has
        # applied events DC1 never saw confirmed (in doubt: DC1 must send them again, DC2 must not apply them
        # twice); every redial is reset by DC2's first bytes until the toxic goes.
        faults.toxic(link, "reset_peer", stream="downstream", timeout=0)
    elif fault == "latency":  # each way
        faults.toxic(link, "latency", stream="upstream", latency=300, jitter=50)
        faults.toxic(link, "latency", stream="downstream", latency=300, jitter=50)
    elif fault == "outage":  # open connections dropped, new ones refused
        faults.set_enabled(link, False)
    else:
        raise ValueError(fault)


def _wait_biting(dc1, dc2, fault: str) -> dict:
    """Keep the fault until it has visibly acted on the mirror (its connection as the broker sees it then):
    a reset or cut link has failed the broker's redials twice; through a slow link half the messages have
    crawled to DC2."""
    last: dict = {}
    # A broker whose view counts a TCP connection as a connect (Artemis: its connected flag is the socket's)
    # sees each redial that the fault then breaks as a connect and a loss, not as a failed dial; two of
    # those since the fault are the same two failed redials.
    connects_before = connection(dc1, MIRROR)["connects"]

    def bitten():
        last.update(connection(dc1, MIRROR))
        if fault == "latency":
            return depth(dc2, "orders") >= N // 2
        return not last["connected"] and (last["attempts"] >= 2 or last["connects"] >= connects_before + 2)
    wait_for(bitten, WAIT, f"the {fault} to act on the mirror link",
             describe=lambda: f"DC1's mirror connection {last}; DC2 {stats(dc2, 'orders')}")
    return dict(last)


@pytest.mark.spec("MIRROR-FAULT-1", "MIRROR-ASYNC-1", "MIRROR-STORE-1")
@pytest.mark.parametrize("fault", ["reset", "latency", "outage"])
def test_the_mirror_catches_up_after_a_link_fault_with_nothing_lost_or_doubled(faulty, clients, details, fault):
    dc1, dc2 = faulty["DC1"], faulty["DC2"]
    link = _mirror_link(faulty)
    retry = configured(faulty, "DC1", MIRROR).retry_interval_ms / 1000
    details["fault"] = fault
    _break(faulty.faults, link, fault)
    snd = sender(clients.connect(faulty.client_url("primary")), "orders")
    send_accepted(snd, N)  # mirroring never holds a producer up, whatever the link does
    during = _wait_biting(dc1, dc2, fault)
    lag = depth(dc1, mirror_queue(MIRROR))
    in_doubt = depth(dc2, "orders")  # applied on DC2 while DC1 still counts them unconfirmed
    back = time.monotonic()
    faulty.faults.reset()
    wait_mirror_idle(dc1, MIRROR, timeout=WAIT + 10 * retry)
    resume_s = round(time.monotonic() - back, 3)
    # Everything the mirror will ever send is on DC2 now: what DC2 holds, it holds for good.
    held = depth(dc2, "orders")
    reader = clients.connect(faulty.client_url("mirror")).receiver("orders", credit=N)
    wait_for(lambda: len(set(reader.seqs(snd.name))) >= N, WAIT, f"the {N} messages on DC2",
             describe=lambda: f"{len(set(reader.seqs(snd.name)))} distinct, {reader.count} in all; "
                              f"DC2 {stats(dc2, 'orders')}")
    wait_depth(dc2, "orders", 0)
    reader.conn.sync()
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=reader.name,
                                   allow_duplicates=False)
    details.update(lost=verdict.lost, duplicated=verdict.duplicated, recovered=verdict.recovered,
                   resume_s=resume_s, lag=lag, in_doubt=min(in_doubt, lag), held_on_dc2=held,
                   failed_dials=during["attempts"],
                   **checkers.checks_details(total_queue=verdict))
    if fault == "outage":
        assert lag >= N, f"with the link cut, the {N} events must wait on DC1's mirror queue; it held {lag}"
    assert verdict.lost == 0, verdict.as_details()
    assert verdict.duplicated == 0, verdict.as_details()
    assert held == N, f"DC2's orders held {held} messages once the mirror had caught up; {N} were sent"
