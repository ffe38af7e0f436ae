"""Edge routers attached to an interior router (001 seed, "Edge vs interior routers")."""

import pytest

from harness import checkers
from harness.wait import wait_for

from .conftest import across_releases
from .late_drain import LATE_DRAIN_DELAYS, LATE_DRAIN_IDS, answers_drain_late

pytestmark = pytest.mark.requires("edge")


@pytest.fixture
def edges(topology):
    return topology("edge-interior")


@pytest.mark.spec("MESH-EDGE-1", "MESH-ADDR-1")
def test_client_on_one_edge_reaches_a_consumer_on_another(edges, clients, details):
    address = clients.unique("edge.any.")
    receiver = clients.connect(edges.client_url("other-edge")).receiver(address)
    sender = clients.connect(edges.client_url("producer")).sender(address)
    sender.wait_credit(1, timeout=15)  # the edge learns from its interior that the address is reachable
    sender.send(20)
    outcomes = sender.wait_outcomes(20)
    details.update(received=receiver.count)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    receiver.wait_received(20)
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, receiver.name))
    verdict.fill(details)
    assert verdict.ok, f"the consumer on the other edge gets each message once, in order:\n{verdict.failures()}"


@pytest.mark.spec("MESH-EDGE-1", "MESH-MULTICAST-1")
@pytest.mark.requires("distribution.multicast")
def test_multicast_from_an_edge_reaches_every_consumer_once(edges, clients, details):
    address = clients.unique("multicast.edge.")
    receivers = {name: clients.connect(edges.client_url(name)).receiver(address)
                 for name in ("local", "interior", "other-edge")}
    sender = clients.connect(edges.client_url("producer")).sender(address)
    sender.wait_credit(1, timeout=15)
    probe = clients.connect(edges.client_url("producer")).sender(address)

    def probed():
        # One probe per poll until each consumer has had one: a probe sent before every router has learned of
        # every consumer reaches only some of them (qdrouterd 1.18 here needed about 5 s after a fresh start).
        if all(r.count >= 1 for r in receivers.values()):
            return True
        if probe.settled_count() >= probe.sent and not probe.queued:
            probe.send(1)
        return False

    wait_for(probed, 15, "a probe to reach all three consumers",
             describe=lambda: {n: r.count for n, r in receivers.items()})
    sender.send(15)
    sender.wait_outcomes(15)
    for r in receivers.values():
        wait_for(lambda r=r: len(r.seqs(sender.name)) >= 15, 10, f"15 copies at {r.name}")
        r.conn.sync()
    details.update(received={n: len(r.seqs(sender.name)) for n, r in receivers.items()})
    checks = {}
    for name, r in receivers.items():  # each consumer is asked for every message on its own
        checks.update(checkers.every_message_once(sender.name, r.name, suffix=f"_{name}"))
    verdict = checkers.compose(clients.history, **checks).fill(details, "duplicated")
    assert verdict.ok, f"each consumer gets each message exactly once, in order:\n{verdict.failures()}"


# ---- the same cases with the interior router on the previous release (conftest.py, UPGRADE-MIXED-1) --------------


@pytest.mark.spec("MESH-EDGE-1", "MESH-ADDR-1", "UPGRADE-MIXED-1")
def test_client_on_one_edge_reaches_a_consumer_on_another_across_releases(topology, interop, clients, details):
    test_client_on_one_edge_reaches_a_consumer_on_another(across_releases(topology, interop, "edge-interior"),
                                                          clients, details)


@pytest.mark.spec("MESH-EDGE-1", "MESH-MULTICAST-1", "UPGRADE-MIXED-1")
@pytest.mark.requires("distribution.multicast")
def test_multicast_from_an_edge_reaches_every_consumer_once_across_releases(topology, interop, clients, details):
    test_multicast_from_an_edge_reaches_every_consumer_once(across_releases(topology, interop, "edge-interior"),
                                                            clients, details)


@pytest.mark.spec("MESH-CREDIT-3", "MESH-EDGE-1")
@pytest.mark.parametrize("delay", LATE_DRAIN_DELAYS, ids=LATE_DRAIN_IDS)
def test_a_producer_on_an_edge_that_answers_a_drain_late_gets_credit_when_a_consumer_returns(edges, details, delay):
    """MESH-CREDIT-3 with the producer on one edge router and its consumers on another (suites/mesh/late_drain.py):
    the edge's own credit path, and the interior's towards the edge, must not wait for the answer either."""
    details.update(answers_drain_late(edges, "producer", "other-edge", f"edge.late-drain-{delay}", delay))
