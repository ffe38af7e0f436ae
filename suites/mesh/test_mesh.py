"""Message routing across interior router networks (001 seed; 003 §12.1.1.2-3)."""

import time

import pytest

from harness import checkers
from harness.wait import wait_for

from .conftest import across_releases

pytestmark = pytest.mark.requires("mesh")


@pytest.fixture
def mesh(topology):
    return topology("two-router-mesh")


@pytest.fixture
def triangle(topology):
    return topology("router-triangle")


def _wait_route(sender, what="credit from a consumer elsewhere in the network"):
    # Address records travel between routers asynchronously: wait for the credit that says a route exists.
    sender.wait_credit(1, timeout=10)


def _wait_multicast_reaches(clients, url, address, receivers, timeout=30):
    """Wait until a multicast from `url` reaches every receiver. Credit says only that *some* consumer is
    reachable; each router learns the others' consumers on its own schedule (qdrouterd after its
    router-advertisement exchange, seconds after an attach). A probe sent too early is routed to the consumers
    known then and never reaches the others, so a new probe goes out each time the previous one is settled."""
    probe = clients.connect(url).sender(address)

    def reached_all():
        if all(r.seqs(probe.name) for r in receivers):
            return True
        if probe.settled_count() == probe.sent and not probe.queued:
            probe.send(1)
        return False
    wait_for(reached_all, timeout, f"a multicast probe to {address} to reach every consumer", interval=0.1,
             describe=lambda: ", ".join(f"{r.name}: {len(r.seqs(probe.name))} probes" for r in receivers))
    return probe.sent


@pytest.mark.spec("MESH-ADDR-1")
def test_consumer_on_another_router_is_reached(mesh, clients, details):
    address = clients.unique("balanced.far.")
    receiver = clients.connect(mesh.client_url("far")).receiver(address)
    sender = clients.connect(mesh.client_url("producer")).sender(address)
    _wait_route(sender)
    sender.send(20)
    outcomes = sender.wait_outcomes(20)
    details.update(received=receiver.count)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    receiver.wait_received(20)
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, receiver.name))
    verdict.fill(details)
    assert verdict.ok, f"the consumer on the other router gets each message once, in order:\n{verdict.failures()}"


@pytest.mark.spec("MESH-PATH-1", "ROUTING-CLOSEST-1")
@pytest.mark.requires("distribution.closest")
def test_closest_prefers_the_consumer_on_the_producers_router(mesh, clients, details):
    address = clients.unique("closest.mesh.")
    far = clients.connect(mesh.client_url("far")).receiver(address)
    sender = clients.connect(mesh.client_url("producer")).sender(address)
    _wait_route(sender)
    near = clients.connect(mesh.client_url("near")).receiver(address)
    near.conn.sync()
    sender.send(30)
    sender.wait_outcomes(30)
    details.update(near=near.count, far=far.count)
    assert near.count == 30 and far.count == 0, "all messages take the lowest-cost path to the local consumer"


@pytest.mark.spec("MESH-BALANCED-1", "ROUTING-BALANCED-1")
@pytest.mark.requires("distribution.balanced")
def test_balanced_spreads_over_routers(mesh, clients, details):
    # §12.1.1.3 chooses a balanced path by its current number of unsettled deliveries, whatever its length. A
    # consumer that settles at once leaves its path free, so a router may rightly send it everything; to see the
    # spread, the near consumer settles nothing: its unsettled count grows and the far path must take over.
    # The producer keeps at most 10 messages in flight, so a settlement can come back between routing choices
    # (a burst routed before any settlement returns sees every path equally busy).
    address = clients.unique("balanced.mesh.")
    far = clients.connect(mesh.client_url("far")).receiver(address)
    sender = clients.connect(mesh.client_url("producer")).sender(address, window=10)
    _wait_route(sender)  # before the near consumer exists, credit proves R1 knows the far one
    near = clients.connect(mesh.client_url("near")).receiver(address, credit=100, outcome="hold")
    sender.send(60)
    wait_for(lambda: near.count + far.count >= 60, 15, "60 messages over both consumers",
             describe=lambda: f"near {near.count}, far {far.count}")
    near.conn.sync()
    details.update(near=near.count, far=far.count)
    assert near.count + far.count == 60, "each message goes to exactly one consumer"
    assert near.count > 0 and far.count > 0, "balanced uses both paths, whatever their length"
    assert far.count > near.count, "more messages go where deliveries are settled (the far path)"


@pytest.mark.spec("MESH-MULTICAST-1", "ROUTING-MULTICAST-1")
@pytest.mark.requires("distribution.multicast")
@pytest.mark.parametrize("name", ["router-triangle", "router-triangle-equal"])
def test_multicast_reaches_each_consumer_once_over_redundant_paths(topology, name, clients, details):
    triangle = topology(name)
    address = clients.unique("multicast.tri.")
    receivers = {name: clients.connect(triangle.client_url(name)).receiver(address)
                 for name in ("producer", "middle", "far")}
    sender = clients.connect(triangle.client_url("producer")).sender(address)
    _wait_route(sender)
    t0 = time.monotonic()
    probes = _wait_multicast_reaches(clients, triangle.client_url("producer"), address, receivers.values())
    details.update(probes=probes, probe_s=round(time.monotonic() - t0, 3))
    sender.send(25)
    sender.wait_outcomes(25)
    for r in receivers.values():
        wait_for(lambda r=r: len(r.seqs(sender.name)) >= 25, 10, f"25 copies at {r.name}")
    for r in receivers.values():
        r.conn.sync()
    details.update(received={n: len(r.seqs(sender.name)) for n, r in receivers.items()})
    checks = {}
    for name, r in receivers.items():  # each consumer is asked for every message on its own
        checks.update(checkers.every_message_once(sender.name, r.name, suffix=f"_{name}"))
    verdict = checkers.compose(clients.history, **checks).fill(details, "duplicated")
    assert verdict.ok, f"each consumer gets each message exactly once, in order:\n{verdict.failures()}"


def _send_until_accepted(sender, timeout, what):
    """Send one message at a time until one sent from now on is accepted; returns the seconds it took. While
    routes settle (qdrouterd recomputes them on its hello and router-advertisement timers, seconds) a message
    may come back released or in doubt, or wait for credit; each outcome lets the next one go."""
    t0, first = time.monotonic(), sender.sent + sender.queued

    def accepted():
        outcomes = dict(sender.outcomes)
        if any(o.outcome == "accepted" for seq, o in outcomes.items() if seq >= first):
            return True
        if len(outcomes) == sender.sent and not sender.queued:
            sender.send(1)
        return False
    wait_for(accepted, timeout, what, interval=0.1,
             describe=lambda: f"outcomes {sender.outcome_counts()}, {sender.queued} waiting, credit {sender.credit}")
    return time.monotonic() - t0


@pytest.mark.spec("MESH-REROUTE-1")
def test_traffic_reroutes_when_a_router_is_lost(triangle, clients, details):
    address = clients.unique("closest.reroute.")
    receiver = clients.connect(triangle.client_url("far")).receiver(address)
    sender = clients.connect(triangle.client_url("producer")).sender(address)
    _wait_route(sender)
    _send_until_accepted(sender, 30, "a message from R1 to be accepted by the consumer on R3")
    middle = triangle["R2"]
    try:
        middle.kill()
        # The direct, expensive R1-R3 connection is all that is left.
        before = sender.sent
        reroute_s = _send_until_accepted(sender, 30, "a message sent after losing R2 to be accepted")
        accepted = {seq for seq, o in sender.outcomes.items() if o.outcome == "accepted"}
        wait_for(lambda: accepted <= set(receiver.seqs(sender.name)), 10, "every accepted message at the consumer",
                 describe=lambda: f"missing {sorted(accepted - set(receiver.seqs(sender.name)))}")
        details.update(sent_after_loss=sender.sent - before, outcomes=sender.outcome_counts(),
                       received=receiver.count, reroute_s=round(reroute_s, 3))
        assert set(sender.outcome_counts()) <= {"accepted", "released", "modified"}
    finally:
        middle.restart()  # put the topology back (same ports) for the next case


@pytest.mark.spec("MESH-ADDR-1", "MESH-REROUTE-1")
def test_consumers_on_a_restarted_router_are_learned_anew(mesh, clients, details):
    """A router that is lost and comes back (a crash, an upgrade) is a new member of the network: consumers that
    attach to it afterwards are reached from the other routers like any others (§12.1.1.2: addresses are mobile).
    Before the restart, consumers come and go on R2 so that R2 has told R1 about its addresses several times: what
    the restarted R2 says must count for R1 however often the earlier R2 spoke."""
    for n in range(4):
        address = clients.unique(f"balanced.before-restart-{n}.")
        consumer = clients.connect(mesh.client_url("far")).receiver(address)
        _wait_route(clients.connect(mesh.client_url("producer")).sender(address))
        consumer.detach()
    far = mesh["R2"]
    far.kill()
    far.restart()
    address = clients.unique("balanced.after-restart.")
    receiver = clients.connect(mesh.client_url("far")).receiver(address)
    sender = clients.connect(mesh.client_url("producer")).sender(address)
    t0 = time.monotonic()
    _wait_route(sender, "credit for a consumer on the restarted router")
    details.update(route_s=round(time.monotonic() - t0, 3))
    sender.send(5)
    assert {o.outcome for o in sender.wait_outcomes(5).values()} == {"accepted"}
    assert [m.seq for m in receiver.wait_received(5)] == list(range(5))


# ---- the same cases with one router on the previous release (conftest.py, UPGRADE-MIXED-1) ----------------------


@pytest.mark.spec("MESH-ADDR-1", "UPGRADE-MIXED-1")
def test_consumer_on_another_router_is_reached_across_releases(topology, interop, clients, details):
    test_consumer_on_another_router_is_reached(across_releases(topology, interop, "two-router-mesh"), clients, details)


@pytest.mark.spec("MESH-PATH-1", "ROUTING-CLOSEST-1", "UPGRADE-MIXED-1")
@pytest.mark.requires("distribution.closest")
def test_closest_prefers_the_consumer_on_the_producers_router_across_releases(topology, interop, clients, details):
    test_closest_prefers_the_consumer_on_the_producers_router(across_releases(topology, interop, "two-router-mesh"),
                                                              clients, details)


@pytest.mark.spec("MESH-MULTICAST-1", "ROUTING-MULTICAST-1", "UPGRADE-MIXED-1")
@pytest.mark.requires("distribution.multicast")
@pytest.mark.parametrize("name", ["router-triangle", "router-triangle-equal"])
def test_multicast_reaches_each_consumer_once_over_redundant_paths_across_releases(topology, interop, name, clients,
                                                                                   details):
    # the case asks its `topology` fixture for `name`: here it gets the mixed pairing of it
    test_multicast_reaches_each_consumer_once_over_redundant_paths(
        lambda topology_name: across_releases(topology, interop, topology_name), name, clients, details)


@pytest.mark.spec("MESH-REROUTE-1", "UPGRADE-MIXED-1")
def test_traffic_reroutes_when_a_router_is_lost_across_releases(topology, interop, clients, details):
    test_traffic_reroutes_when_a_router_is_lost(across_releases(topology, interop, "router-triangle"), clients,
                                                details)
