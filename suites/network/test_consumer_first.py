"""The consumer comes first (004_05e35cdd7bc39ede.txt, "Next Steps": the network is tested by creating a consumer
on MyBroker2, and only then a producer on MyBroker1 that sends to MyQueue, a queue neither broker had before).

network-first: B1's connector forwards every queue and the topic `alerts` to B2 (network TTL 1).
network-line: B1 -> B2 -> B3, network TTL 2: messages cross B2 to reach B3, and demand travels back through it.

Each case attaches its consumers or subscribers before anything of its queue or topic exists on the brokers
between them and the producer: queues get a name no case used before, and `alerts` is declared only on the
consumers' broker. A broker whose demand reached another before the queue or topic did must not leave it at that:
when the producer comes, its messages go to the consumer that was waiting. They also run with reference brokers
among the session's vendor's (conftest.PAIRINGS; network-line with a reference B2 in the middle), since whether
"not there yet" is told and heard is part of the wire between brokers; network-first also with B1 on the vendor's
previous release (`previous-dials`).

A topic case waits until probes published after every subscriber attached reach them all (conftest's
wait_topic_ready: a topic's messages published before its subscription reached the producer's broker go nowhere,
on every vendor), then publishes N and counts each subscriber's copies once the network has settled.
"""

import pytest

from harness import checkers

from ..conftest import pairing_params
from .conftest import (PAIRINGS, WAIT, Network, depths, paired, send_accepted, stats_or_reason, unique, wait_all,
                       wait_settled, wait_topic_ready)

pytestmark = pytest.mark.requires("network-of-brokers")

N = 100
ALERTS = "alerts"  # declared on the consumers' broker only (topologies/network-first.yaml, network-line.yaml)
# network-line: a reference broker in the middle, dialled by the vendor's B1 and dialling the vendor's B3, so that
# what each end says about a missing queue or address reaches the other through two vendors
LINE_PAIRINGS = {"same": None, "reference-b2": {"B2": "reference"}}


@pytest.fixture(params=pairing_params(PAIRINGS))
def first(request, topology, clients, interop):
    return _connected(Network(topology("network-first", vendors=paired(interop, PAIRINGS[request.param])), clients),
                      [("producer", "consumer")])


@pytest.fixture(params=list(LINE_PAIRINGS))
def line(request, topology, clients, interop):
    return _connected(Network(topology("network-line", vendors=paired(interop, LINE_PAIRINGS[request.param])),
                              clients), [("b1", "b2"), ("b2", "b3")])


def _connected(net: Network, hops) -> Network:
    """`net` once each network connection (source client, sink client) forwards: a message sent first to a queue of
    its own on the source's broker reaches a consumer that attaches on the sink's broker after it (the order every
    vendor forwards in). A topology's brokers dial each other after they start, so without this a consumer could
    come before the network did, and its demand would reach the producer's broker after the producer: the case
    would not be the one it says it is."""
    for source, sink in hops:
        queue = unique(f"connected-{source}-{sink}")
        probe = net.producer(source, queue)
        send_accepted(probe, 1)
        taker = net.consumer(sink, queue)
        wait_all([taker], probe, 1, f"(the network from {source} to {sink} is up)", WAIT)
        taker.detach()
    return net


def _queue_view(net: Network, queue: str) -> str:
    """What each broker says of `queue`: absent, or its depth and consumers (a pull from another broker is one)."""
    def one(peer) -> str:
        row, why = stats_or_reason(peer, queue)
        if row is None:
            return f"not known ({why})"
        return f"{row['depth']} waiting, {row['consumers']} consumer(s)" if row.get("exists", True) else "absent"
    return "; ".join(f"{node}: {one(peer)}" for node, peer in net.brokers().items())


def _queue_once_in_order(net, clients, details, consumer, snd, queue: str, where: str) -> None:
    """`consumer` must get each of `snd`'s N messages on `queue` once, in order, and none may be left waiting on a
    broker of the network once its count and the depths have settled."""
    wait_all([consumer], snd, N, f"at {where}'s consumer, which attached before {queue} existed",
             describe=lambda: f"{queue} on each broker: {_queue_view(net, queue)}")
    settled = wait_settled(lambda: (consumer.count, *depths(net, queue).values()), f"{where}'s consumer and the "
                           f"depths of {queue}")
    consumer.conn.sync()
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=consumer.name,
                                   allow_duplicates=False)
    order = checkers.ordering(clients.history, producer=snd.name, receivers=consumer.name)
    details.update(sent=N, delivered=verdict.delivered, lost=verdict.lost, duplicated=verdict.duplicated,
                   depths_after=depths(net, queue), **checkers.checks_details(total_queue=verdict, ordering=order))
    assert verdict.ok, verdict.as_details()
    assert order.ok, order.as_details()
    left = {node: d for node, d in zip(depths(net, queue), settled[1:], strict=True) if d}
    assert not left, f"copies left waiting on brokers of the network after {where}'s consumer had all {N}: {left}"


def _topic_exactly_once(net, clients, details, subscribers: dict, producer: str) -> None:
    """Subscribers (where -> receiver) attached; probes on `alerts` from `producer`'s broker until each has had one,
    then N messages: each subscriber must have each exactly once."""
    topic = net.topic(ALERTS)
    receivers = list(subscribers.values())
    probe = wait_topic_ready(net, producer, receivers, ALERTS, address=topic)
    pub = net.producer(producer, ALERTS, address=topic)
    send_accepted(pub, N)
    wait_all(receivers, pub, N, f"at the subscribers on {', '.join(subscribers)}")
    wait_settled(lambda: tuple(s.count for s in receivers), "what the subscribers received")
    per = {where: checkers.total_queue(clients.history, producer=pub.name, receivers=sub.name,
                                       allow_duplicates=False)
           for where, sub in subscribers.items()}
    details.update(sent=N, probes=probe.sent, delivered={w: v.delivered for w, v in per.items()},
                   duplicated={w: v.duplicated for w, v in per.items()}, lost=sum(v.lost for v in per.values()),
                   **checkers.checks_details(**{f"total_queue_{w}": v for w, v in per.items()}))
    for where, verdict in per.items():
        assert verdict.ok, f"the subscriber on {where}: {verdict.as_details()}"


@pytest.mark.spec("NETWORK-FIRST-1")
def test_a_consumer_on_b2_that_comes_before_its_queue_exists_gets_what_b1_produces_later(first, clients, details):
    queue = unique("first")
    consumer = first.consumer("consumer", queue)
    snd = first.producer("producer", queue)
    send_accepted(snd, N)
    _queue_once_in_order(first, clients, details, consumer, snd, queue, "B2")


@pytest.mark.spec("NETWORK-FIRST-2")
def test_a_subscriber_on_b2_that_comes_before_its_topic_exists_on_b1_gets_what_b1_publishes(first, clients,
                                                                                          details):
    """B1's own subscriber attaches second (as its clients say it, a topic): the network must bring B2's copies
    and add none for it."""
    topic = first.topic(ALERTS)
    subscribers = {"B2": first.subscriber("consumer", ALERTS, address=topic)}
    subscribers["B1"] = first.subscriber("producer", ALERTS, address=topic)
    _topic_exactly_once(first, clients, details, subscribers, "producer")


@pytest.mark.spec("NETWORK-FIRST-3", "NETWORK-FIRST-1")
def test_a_consumer_two_brokers_away_that_comes_first_gets_what_b1_produces_later(line, clients, details):
    queue = unique("first")
    consumer = line.consumer("b3", queue)
    snd = line.producer("b1", queue)
    send_accepted(snd, N)
    _queue_once_in_order(line, clients, details, consumer, snd, queue, "B3")


@pytest.mark.spec("NETWORK-FIRST-3", "NETWORK-FIRST-2")
def test_a_subscriber_two_brokers_away_that_comes_first_gets_what_b1_publishes(line, clients, details):
    topic = line.topic(ALERTS)
    subscribers = {"B3": line.subscriber("b3", ALERTS, address=topic)}
    subscribers["B1"] = line.subscriber("b1", ALERTS, address=topic)
    _topic_exactly_once(line, clients, details, subscribers, "b1")
