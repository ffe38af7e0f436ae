"""A router mesh in front of a broker, upgraded router by router under traffic (UPGRADE-ROLLING-1).

upgrade-mesh-broker: interior routers R1, R2, R3, fully connected, each with out- and in-autolinks to B1's three
queues (waypoints). All three start on the previous release of the session's router vendor. Then each router in
turn is stopped (gracefully, or with kill -9), its binary replaced by the session's release with the same
qdrouterd.conf and port (Peer.replace_binary), and started again. During each router's step, durable producers on
the next router and consumers on the one after it keep running: their own routers stay up, and what the router
being replaced carries (the messages its in-autolinks pulled from B1, and mesh transit) is at stake.

Judged over every step: nothing accepted is lost; duplicates are counted (a message a lost router had pulled from B1
and not settled back is released by B1 and delivered again: at-least-once). Order is not judged: three routers pull
from each queue, so one producer's messages reach the consumer by three paths, and no document promises order
across them. `resume_s` per step: from the stop until a producer attached to the replaced router has a message
accepted (the router is back in the mesh and its autolinks to B1 are up).
"""

import time
from functools import partial

import pytest

from harness import checkers
from harness.peers.base import PeerUnavailable
from harness.wait import wait_for

from ..conftest import PREVIOUS, mixed_releases
from .conftest import QUEUES, STOPS, WAIT, WINDOW, releases

TOPOLOGY = "upgrade-mesh-broker"
ROUTERS = ("R1", "R2", "R3")
PER_STEP = 200  # durable messages per producer in each router's step
AT_STEP = 30  # outcomes each producer has had when the step is taken


@pytest.fixture
def mesh(topology, interop, request):
    """The mesh on the previous release, started anew for the next case (it leaves every router upgraded)."""
    releases(interop, "router")
    running = topology(TOPOLOGY, vendors=mixed_releases(interop, "router", dict.fromkeys(ROUTERS, PREVIOUS)))
    yield running
    running.silent.update(dict.fromkeys(ROUTERS, f"its release was replaced in place by {request.node.name}"))


def _links(clients, running, router: str, make):
    """One connection per queue to `router`, `make(conn, queue)` on each: queue -> link."""
    return {queue: make(clients.connect(running[router].url), queue) for queue in QUEUES}


@pytest.mark.spec("UPGRADE-ROLLING-1")
@pytest.mark.requires("router:mesh", "router:waypoint", "durable")
@pytest.mark.parametrize("stop", list(STOPS))
def test_a_router_mesh_upgraded_router_by_router_in_front_of_a_broker_loses_nothing(stop, mesh, clients, interop,
                                                                                   details):
    _previous, current = releases(interop, "router")
    details.update(topology=TOPOLOGY, stop=stop, from_version=mesh["R1"].info.version)
    producers, consumers, steps = [], [], []
    for index, router in enumerate(ROUTERS):
        senders, receivers, row = _step(clients, mesh, index, router, stop, current)
        producers += senders
        consumers += receivers
        steps.append(row)
    details.update(step="upgrade", to_version=steps[-1]["to_version"], steps=steps,
                   resume_s=max(s["resume_s"] for s in steps))  # the longest of the three routers' downtimes
    verdict = checkers.compose(
        clients.history,
        total_queue=partial(checkers.total_queue, producer=[p.name for p in producers],
                            receivers=[r.name for r in consumers], allow_duplicates=True),
    ).fill(details, "lost", "duplicated")
    assert verdict.ok, f"routers upgraded one by one after a {stop} stop:\n{verdict.failures()}"


def _step(clients, mesh, index: int, router: str, stop: str, current: str | None) -> tuple[list, list, dict]:
    """Replace `router`'s binary while producers on the next router send to consumers on the one after it: the
    step's producers (the probe among them), its consumers, and its row (lost, duplicated, resume_s)."""
    source, sink = ROUTERS[(index + 1) % 3], ROUTERS[(index + 2) % 3]
    tag = f"{router}-{stop}"
    receivers = _links(clients, mesh, sink, lambda conn, q: conn.receiver(q, f"rcv-{tag}-{q}", credit=50))
    senders = _links(clients, mesh, source,
                     lambda conn, q: conn.sender(q, f"snd-{tag}-{q}", durable=True, window=WINDOW))
    for snd in senders.values():
        snd.send(PER_STEP, durable=True)
    wait_for(lambda: all(s.settled_count() >= AT_STEP for s in senders.values()), WAIT,
             f"{AT_STEP} outcomes at each producer on {source} before {router}'s step",
             describe=lambda: str([s.settled_count() for s in senders.values()]))
    began = time.monotonic()
    try:
        mesh[router].replace_binary(current, kill=STOPS[stop])
    except PeerUnavailable as exc:
        pytest.skip(f"cannot upgrade {router} in place: {exc}")
    # One probe message per poll until the first outcome: the replaced router gives credit for a waypoint only once
    # it is back and its autolinks to B1 are up.
    probe = clients.connect(mesh[router].url).sender(QUEUES[0], f"probe-{tag}", durable=True)
    wait_for(lambda: probe.settled_count() or probe.send(1) and False, WAIT,
             f"a message accepted through {router} on its new release", interval=0.05)
    resume_s = round(time.monotonic() - began, 3)
    for snd in senders.values():
        snd.wait_outcomes(PER_STEP, timeout=WAIT)
    gone = _undelivered(senders, probe, receivers)
    wait_for(lambda: not gone(), WAIT, f"every accepted message of {router}'s step at {sink}'s consumers",
             describe=lambda: f"missing {gone()}")
    for receiver in receivers.values():
        receiver.conn.sync()
    step_producers = [*senders.values(), probe]
    verdict = checkers.total_queue(clients.history, producer=[p.name for p in step_producers],
                                   receivers=[r.name for r in receivers.values()])
    row = {"router": router, "to_version": mesh[router].info.version, "resume_s": resume_s,
           "lost": verdict.lost, "duplicated": verdict.duplicated}
    for link in (*receivers.values(), *step_producers):
        link.conn.close()
    return step_producers, list(receivers.values()), row


def _undelivered(senders, probe, receivers):
    """() -> {producer: how many of its accepted messages no consumer of its queue has had}."""
    def gone() -> dict[str, int]:
        out = {}
        for queue, snd in [*senders.items(), (QUEUES[0], probe)]:
            accepted = {seq for seq, o in dict(snd.outcomes).items() if o.outcome == "accepted"}
            missing = accepted - set(receivers[queue].seqs(snd.name))
            if missing:
                out[snd.name] = len(missing)
        return out
    return gone
