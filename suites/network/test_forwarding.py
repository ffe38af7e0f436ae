"""Produce on one broker, consume on another (004_05e35cdd7bc39ede.txt, "Configure Network Connectors for Your
Broker" and "Next Steps": a producer on MyBroker1, a consumer on MyBroker2, the network connector between).

network-pair: B1's connector forwards every queue and the `prices` topics to B2's consumers, one way.
network-duplex: B1's one duplex connector carries both ways; B2 declares none.

Both run in conftest.PAIRINGS: all the session's vendor, a reference broker on one end, and B1 on the vendor's
previous release dialling its current one (`previous-dials`, UPGRADE-MIXED-1).

Figures per case in the result record: the checkers' counts (`checks`), and where a broker's queue depth
matters, the depths seen.
"""

import pytest

from harness import checkers

from ..conftest import pairing_params
from .conftest import (ORDERS, PAIRINGS, PRICES, depths, drained_network, send_accepted, stats_or_reason, wait_all,
                       wait_consumed, wait_settled, wait_topic_ready, paired)

pytestmark = pytest.mark.requires("network-of-brokers")

N = 100


@pytest.fixture(params=pairing_params(PAIRINGS))
def pair(request, topology, clients, interop):
    return drained_network(topology("network-pair", vendors=paired(interop, PAIRINGS[request.param])), clients)


@pytest.fixture(params=pairing_params(PAIRINGS))
def duplex(request, topology, clients, interop):
    return drained_network(topology("network-duplex", vendors=paired(interop, PAIRINGS[request.param])), clients)


def _once_in_order(clients, details, snd, receivers, **figures) -> None:
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=[r.name for r in receivers],
                                   allow_duplicates=False)
    order = checkers.ordering(clients.history, producer=snd.name, receivers=[r.name for r in receivers])
    details.update(sent=verdict.attempted, delivered=verdict.delivered, lost=verdict.lost,
                   duplicated=verdict.duplicated, **figures,
                   **checkers.checks_details(total_queue=verdict, ordering=order))
    assert verdict.ok, verdict.as_details()
    assert order.ok, order.as_details()


@pytest.mark.spec("NETWORK-QUEUE-1")
def test_queue_messages_produced_on_b1_reach_a_consumer_on_b2_once_and_in_order(pair, clients, details):
    consumer = pair.consumer("consumer")
    snd = pair.producer("producer")
    send_accepted(snd, N)
    wait_consumed(pair, consumer, snd, N, "at B2's consumer", "B2's consumer")
    _once_in_order(clients, details, snd, [consumer], depths_after=depths(pair))


@pytest.mark.spec("NETWORK-TOPIC-1")
def test_a_topic_message_published_on_b1_reaches_subscribers_on_b2_and_b1_exactly_once(pair, clients, details):
    far, near = pair.subscriber("consumer"), pair.subscriber("producer")
    probe = wait_topic_ready(pair, "producer", [far, near])
    pub = pair.producer("producer", PRICES)
    send_accepted(pub, N)
    wait_all([far, near], pub, N, "at the subscribers on B2 and B1")
    wait_settled(lambda: (far.count, near.count), "what the subscribers received")
    per = {}
    for where, sub in (("B2", far), ("B1", near)):
        verdict = checkers.total_queue(clients.history, producer=pub.name, receivers=sub.name,
                                       allow_duplicates=False)
        per[where] = verdict
    details.update(sent=N, probes=probe.sent, delivered={w: v.delivered for w, v in per.items()},
                   duplicated={w: v.duplicated for w, v in per.items()},
                   lost=sum(v.lost for v in per.values()),
                   **checkers.checks_details(**{f"total_queue_{w}": v for w, v in per.items()}))
    for where, verdict in per.items():
        assert verdict.ok, f"the subscriber on {where}: {verdict.as_details()}"


@pytest.mark.spec("NETWORK-STORE-1", "NETWORK-QUEUE-1")
def test_messages_wait_on_b1_while_no_consumer_and_go_to_b2_when_one_appears(pair, clients, details):
    b1, b2 = pair.peer("producer"), pair.peer("consumer")
    snd = pair.producer("producer")
    send_accepted(snd, N)
    # No consumer anywhere: nothing demands the messages on B2, so B1 keeps them (a network forwards to where
    # consumers are). Judged on the depths once they have stopped changing.
    row, why = stats_or_reason(b1, ORDERS)
    if row is None:
        details["stored_on_b1"] = f"not checked: {why}"
    else:
        held = wait_settled(lambda: (b1.queue_stats(ORDERS)["depth"], b2.queue_stats(ORDERS)["depth"]),
                            "the depths of orders on B1 and B2 with no consumer")
        details.update(stored_on_b1=held[0], on_b2_before_consumer=held[1])
        assert held == (N, 0), (f"with no consumer, the {N} messages must wait on B1 and none on B2; "
                                f"B1 held {held[0]}, B2 {held[1]}")
    consumer = pair.consumer("consumer")
    wait_consumed(pair, consumer, snd, N, "at the consumer that appeared on B2", "B2's consumer")
    _once_in_order(clients, details, snd, [consumer], depths_after=depths(pair))


@pytest.mark.spec("NETWORK-DUPLEX-1")
@pytest.mark.parametrize("source,target", [("b1", "b2"), ("b2", "b1")], ids=["b1-to-b2", "b2-to-b1"])
def test_a_duplex_connector_carries_queue_messages_both_ways(duplex, clients, details, source, target):
    consumer = duplex.consumer(target)
    snd = duplex.producer(source)
    send_accepted(snd, N)
    wait_consumed(duplex, consumer, snd, N, f"at {target}'s consumer", f"{target}'s consumer")
    _once_in_order(clients, details, snd, [consumer], depths_after=depths(duplex))


@pytest.mark.spec("NETWORK-DUPLEX-1")
@pytest.mark.parametrize("source,target", [("b1", "b2"), ("b2", "b1")], ids=["b1-to-b2", "b2-to-b1"])
def test_a_duplex_connector_carries_topic_messages_both_ways(duplex, clients, details, source, target):
    sub = duplex.subscriber(target)
    probe = wait_topic_ready(duplex, source, [sub])
    pub = duplex.producer(source, PRICES)
    send_accepted(pub, N)
    wait_all([sub], pub, N, f"at {target}'s subscriber")
    wait_settled(lambda: sub.count, f"what {target}'s subscriber received")
    verdict = checkers.total_queue(clients.history, producer=pub.name, receivers=sub.name, allow_duplicates=False)
    details.update(sent=N, probes=probe.sent, delivered=verdict.delivered, lost=verdict.lost,
                   duplicated=verdict.duplicated, **checkers.checks_details(total_queue=verdict))
    assert verdict.ok, verdict.as_details()
