"""Message routing across interior router networks (001 seed; 003 §12.1.1.2-3)."""

import pytest

from harness.wait import wait_for

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
    assert receiver.wait_received(20) and receiver.seqs(sender.name) == list(range(20))


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


@pytest.mark.spec("MESH-BALANCED-1")
@pytest.mark.requires("distribution.balanced")
def test_balanced_spreads_over_routers(mesh, clients, details):
    address = clients.unique("balanced.mesh.")
    far = clients.connect(mesh.client_url("far")).receiver(address)
    near = clients.connect(mesh.client_url("near")).receiver(address)
    sender = clients.connect(mesh.client_url("producer")).sender(address)
    _wait_route(sender)
    sender.send(60)
    sender.wait_outcomes(60)
    details.update(near=near.count, far=far.count)
    assert near.count + far.count == 60
    assert near.count > 0 and far.count > 0, "balanced uses both paths, whatever their length"


@pytest.mark.spec("MESH-MULTICAST-1", "ROUTING-MULTICAST-1")
@pytest.mark.requires("distribution.multicast")
def test_multicast_reaches_each_consumer_once_over_redundant_paths(triangle, clients, details):
    address = clients.unique("multicast.tri.")
    receivers = {name: clients.connect(triangle.client_url(name)).receiver(address)
                 for name in ("producer", "middle", "far")}
    sender = clients.connect(triangle.client_url("producer")).sender(address)
    _wait_route(sender)
    # Every router must know every consumer before the burst: wait until the far one is reachable from R1.
    probe = clients.connect(triangle.client_url("producer")).sender(address)
    probe.send(1)
    wait_for(lambda: all(r.count >= 1 for r in receivers.values()), 10, "a probe to reach all three routers")
    sender.send(25)
    sender.wait_outcomes(25)
    for r in receivers.values():
        wait_for(lambda r=r: len(r.seqs(sender.name)) >= 25, 10, f"25 copies at {r.name}")
    for r in receivers.values():
        r.conn.sync()
    details.update(received={n: len(r.seqs(sender.name)) for n, r in receivers.items()})
    for name, r in receivers.items():
        assert r.seqs(sender.name) == list(range(25)), f"consumer on {name}: each message exactly once"


@pytest.mark.spec("MESH-REROUTE-1")
def test_traffic_reroutes_when_a_router_is_lost(triangle, clients, details):
    address = clients.unique("closest.reroute.")
    receiver = clients.connect(triangle.client_url("far")).receiver(address)
    sender = clients.connect(triangle.client_url("producer")).sender(address)
    _wait_route(sender)
    sender.send(10)
    assert {o.outcome for o in sender.wait_outcomes(10).values()} == {"accepted"}
    middle = triangle["R2"]
    try:
        middle.kill()
        # The direct, expensive R1-R3 connection is all that is left: new messages must still arrive.
        before = sender.settled_count()
        sender.send(10)
        wait_for(lambda: sender.settled_count() >= before + 10, 20, "10 more outcomes after losing R2")
        in_doubt = {seq for seq, o in sender.outcomes.items() if o.outcome != "accepted"}
        details.update(in_doubt=len(in_doubt), received=receiver.count)
        got = set(receiver.seqs(sender.name))
        assert set(range(10, 20)) - in_doubt <= got, "accepted messages after the loss reached the consumer"
        assert any(seq in got for seq in range(10, 20)), "traffic flows again over the remaining path"
    finally:
        middle.restart()  # put the topology back (same ports) for the next case
