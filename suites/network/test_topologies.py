"""Network shapes (004_05e35cdd7bc39ede.txt: "concentrator, hub-and-spokes, tree, or mesh"): messages cross more
than one broker, or could reach a broker by more than one way.

network-hub-spoke: spokes S1..S3 each dial hub H (duplex, network TTL 2): spoke to spoke goes through the hub.
network-mesh: B1, B2, B3 pairwise joined by duplex connectors (network TTL 1): a message could come round
through the third broker, or loop; it must do neither.

Both shapes also run with reference brokers among the session's vendor's (conftest.HUB_PAIRINGS, MESH_PAIRINGS):
a network is a wire format between brokers, and messages that cross two vendors' brokers show whether the hop
count and the demand rules mean the same on both.

"Exactly once" is judged once the network has settled: what every consumer or subscriber counted, and every
broker's queue depth, unchanged over several polls in a row (conftest.wait_settled).
"""

import pytest

from harness import checkers

from .conftest import (HUB_PAIRINGS, MESH_PAIRINGS, PRICES, depths, drained_network, paired, send_accepted,
                       wait_all, wait_consumed, wait_settled, wait_topic_ready)

pytestmark = pytest.mark.requires("network-of-brokers")

N = 100


@pytest.fixture(params=list(HUB_PAIRINGS))
def hub(request, topology, clients, interop):
    return drained_network(topology("network-hub-spoke", vendors=paired(interop, HUB_PAIRINGS[request.param])), clients)


@pytest.fixture(params=list(MESH_PAIRINGS))
def mesh(request, topology, clients, interop):
    return drained_network(topology("network-mesh", vendors=paired(interop, MESH_PAIRINGS[request.param])), clients)


def _exactly_once(clients, details, pub, subscribers: dict, probe=None) -> None:
    """Each subscriber (where -> receiver) had each of `pub`'s messages exactly once."""
    per = {where: checkers.total_queue(clients.history, producer=pub.name, receivers=sub.name,
                                       allow_duplicates=False)
           for where, sub in subscribers.items()}
    details.update(sent=pub.sent, delivered={w: v.delivered for w, v in per.items()},
                   duplicated={w: v.duplicated for w, v in per.items()},
                   copies={w: v.copies for w, v in per.items()},
                   lost=sum(v.lost for v in per.values()),
                   **({"probes": probe.sent} if probe is not None else {}),
                   **checkers.checks_details(**{f"total_queue_{w}": v for w, v in per.items()}))
    for where, verdict in per.items():
        assert verdict.ok, f"the subscriber on {where}: {verdict.as_details()}"


def _publish_exactly_once(net, client: str, subscribers: dict, clients, details) -> None:
    """Once probes reach every subscriber (where -> receiver), publish N messages on `prices` at `client`'s
    broker; each subscriber must have each of them exactly once. A copy through a third broker, or one going
    round a ring, would arrive after the first: wait until nothing more arrives anywhere, then count."""
    receivers = list(subscribers.values())
    probe = wait_topic_ready(net, client, receivers)
    pub = net.producer(client, PRICES)
    send_accepted(pub, N)
    *others, last = subscribers
    wait_all(receivers, pub, N, f"at the subscribers on {', '.join(others)} and {last}")
    wait_settled(lambda: tuple(s.count for s in receivers), "what the subscribers received")
    _exactly_once(clients, details, pub, subscribers, probe)


@pytest.mark.spec("NETWORK-HUBSPOKE-1")
def test_queue_messages_from_one_spoke_reach_a_consumer_on_another_through_the_hub(hub, clients, details):
    consumer = hub.consumer("s2")
    snd = hub.producer("s1")
    send_accepted(snd, N)
    settled = wait_consumed(hub, consumer, snd, N, "at S2's consumer (S1 -> H -> S2)", "S2's consumer")
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=consumer.name,
                                   allow_duplicates=False)
    order = checkers.ordering(clients.history, producer=snd.name, receivers=consumer.name)
    details.update(sent=N, delivered=verdict.delivered, lost=verdict.lost, duplicated=verdict.duplicated,
                   depths_after=depths(hub), **checkers.checks_details(total_queue=verdict, ordering=order))
    assert verdict.ok, verdict.as_details()
    left = {node: d for node, d in zip(depths(hub), settled[1:], strict=True) if d}
    assert not left, f"copies left waiting on brokers of the network after S2's consumer had all {N}: {left}"


@pytest.mark.spec("NETWORK-HUBSPOKE-1")
def test_a_topic_message_from_one_spoke_reaches_the_hub_and_every_spoke_once(hub, clients, details):
    """Its own spoke included (NETWORK-HUBSPOKE-1: none twice): S1's subscriber makes S1 take `prices` copies
    from the hub too, so the hub must not hand back the ones that came to it from S1, or S1's subscriber would
    get them twice."""
    subs = {"H": hub.subscriber("hub"), "S1": hub.subscriber("s1"), "S2": hub.subscriber("s2"),
            "S3": hub.subscriber("s3")}
    _publish_exactly_once(hub, "s1", subs, clients, details)


@pytest.mark.spec("NETWORK-MESH-1")
def test_a_topic_message_reaches_each_other_broker_of_the_mesh_exactly_once(mesh, clients, details):
    subs = {"B1": mesh.subscriber("b1"), "B2": mesh.subscriber("b2"), "B3": mesh.subscriber("b3")}
    _publish_exactly_once(mesh, "b1", subs, clients, details)


@pytest.mark.spec("NETWORK-MESH-2")
def test_queue_messages_produced_on_b1_reach_a_consumer_on_b3_each_once(mesh, clients, details):
    consumer = mesh.consumer("b3")
    snd = mesh.producer("b1")
    send_accepted(snd, N)
    settled = wait_consumed(mesh, consumer, snd, N, "at B3's consumer", "B3's consumer")
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=consumer.name,
                                   allow_duplicates=False)
    details.update(sent=N, delivered=verdict.delivered, lost=verdict.lost, duplicated=verdict.duplicated,
                   depths_after=depths(mesh), **checkers.checks_details(total_queue=verdict))
    assert verdict.ok, verdict.as_details()
    left = {node: d for node, d in zip(depths(mesh), settled[1:], strict=True) if d}
    assert not left, f"copies left waiting on brokers of the mesh after B3's consumer had all {N}: {left}"
