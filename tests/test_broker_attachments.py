"""Links attaching to the reference broker and going away (reference/broker/attachments.py).

Source: Artemis's AMQP conventions where the documents are silent (the `topic` and `queue` capabilities, durable
subscriptions named container-id.link-name), AMQP 1.0 §2.6.3 (a closed link ends its durable subscription, a
detached one keeps it), §3.4 (what a consumer held and never settled is a failed delivery attempt).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from proton import Data, Terminus

from reference.broker.attachments import routing_hint
from reference.broker.config import ANYCAST, MULTICAST
from reference.links import put_symbols
from tests.test_broker_logic import available, broker_with


def capabilities(*names) -> Data:
    data = Data()
    put_symbols(data, names)
    return data


class Link:
    """A client's link as attachments.py reads it: its name and its connection's container id."""

    def __init__(self, name: str, container: str):
        self.name, self.connection = name, SimpleNamespace(remote_container=container)


def client_link(name="sub", container="client-1") -> Link:
    return Link(name, container)


def durable_source():
    return SimpleNamespace(durability=Terminus.DELIVERIES, expiry_policy=Terminus.EXPIRE_NEVER)


@pytest.mark.parametrize(("names", "expected"), [
    (("topic",), MULTICAST), (("queue",), ANYCAST), (("shared", "topic"), MULTICAST), ((), None),
])
def test_the_topic_capability_asks_for_multicast_and_queue_for_anycast(names, expected):
    assert routing_hint(capabilities(*names)) == expected


def test_a_durable_subscription_is_named_after_the_container_and_link_and_found_again():
    broker = broker_with()
    link = client_link()
    queue = broker.attachments.subscription(link, "news", durable_source())
    assert (queue.name, queue.routing, queue.durable, queue.durable_subscription) == (
        "client-1.sub", MULTICAST, True, True)
    assert broker.attachments.subscription(client_link(), "news", durable_source()) is queue


def test_a_durable_subscription_moves_to_another_address_only_when_nobody_consumes_it():
    broker = broker_with()
    attachments = broker.attachments
    old = attachments.subscription(client_link(), "news", durable_source())
    attachments.add_consumer(client_link(), old)
    assert attachments.subscription(client_link(), "sports", durable_source()) is None, "in use: refused"
    old.consumers.clear()
    moved = attachments.subscription(client_link(), "sports", durable_source())
    assert moved.address == "sports" and old not in broker.addresses["news"]["queues"]


def test_any_other_subscription_is_a_temporary_queue_of_its_own():
    broker = broker_with()
    source = SimpleNamespace(durability=Terminus.NONDURABLE, expiry_policy=Terminus.EXPIRE_WITH_LINK)
    first = broker.attachments.subscription(client_link(), "news", source)
    second = broker.attachments.subscription(client_link(), "news", source)
    assert first is not second and first.temporary and not first.durable


def test_consumers_get_ids_of_their_own_and_their_queue_is_dispatched():
    broker = broker_with()
    queue = broker.queues["orders"]
    broker.dirty.clear()
    links = [client_link(n) for n in ("a", "b")]
    first, second = (broker.attachments.add_consumer(link, queue) for link in links)
    assert first.id != second.id and queue.consumers == [first, second]
    assert queue in broker.dirty
    assert [broker.link_states.get(link).consumer for link in links] == [first, second]


def held_by_a_consumer(broker, queue, *bodies):
    link = client_link()
    consumer = broker.attachments.add_consumer(link, queue)
    for n, body in enumerate(bodies):
        broker.route_new(broker.addresses[queue.address], body, durable=False, expiry=None)
        entry = queue.available.pop()
        entry.in_flight = True
        queue.in_flight += 1
        consumer.unsettled[str(n)] = entry
    return link, consumer


def test_what_a_consumer_held_when_its_link_went_is_back_as_a_failed_attempt():
    broker = broker_with()
    queue = broker.queues["orders"]
    link, consumer = held_by_a_consumer(broker, queue, b"a", b"b")
    broker.attachments.link_gone(link, closed=False)
    assert consumer.closed and queue.consumers == [] and queue.in_flight == 0
    assert [e.delivery_count for e in queue.available] == [1, 1]
    assert len(available(broker, "orders")) == 2


def test_a_mirror_event_a_link_held_goes_back_uncounted():
    broker = broker_with()
    queue = broker.mirror_store.internal_queue("$ACTIVEMQ_ARTEMIS_MIRROR_dr")
    link, _ = held_by_a_consumer(broker, queue, b"event")
    broker.attachments.link_gone(link, closed=True)
    assert [e.delivery_count for e in queue.available] == [0], "a failed link is no failed delivery"


def test_a_link_going_twice_is_harmless():
    broker = broker_with()
    queue = broker.queues["orders"]
    link, _ = held_by_a_consumer(broker, queue, b"a")
    broker.attachments.link_gone(link, closed=False)
    broker.attachments.link_gone(link, closed=True)
    assert [e.delivery_count for e in queue.available] == [1]


def test_a_detached_durable_subscriber_keeps_its_subscription_and_a_closed_one_ends_it():
    broker = broker_with()
    for closed, kept in ((False, True), (True, False)):
        queue = broker.attachments.subscription(client_link(), "news", durable_source())
        link, _ = held_by_a_consumer(broker, queue)
        broker.attachments.link_gone(link, closed=closed)
        assert ("client-1.sub" in broker.queues) is kept


def test_a_temporary_subscription_ends_with_its_last_consumer():
    broker = broker_with()
    source = SimpleNamespace(durability=Terminus.NONDURABLE, expiry_policy=Terminus.EXPIRE_WITH_LINK)
    queue = broker.attachments.subscription(client_link(), "news", source)
    first, _ = held_by_a_consumer(broker, queue)
    second, _ = held_by_a_consumer(broker, queue)
    broker.attachments.link_gone(first, closed=False)
    assert queue.name in broker.queues
    broker.attachments.link_gone(second, closed=False)
    assert queue.name not in broker.queues
