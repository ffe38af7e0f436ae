"""The reference broker's logic, without sockets: what each consumer outcome does to the message, expiry, and
how addresses resolve.

Source: seed 000 (the broker's queues, dead letters, redelivery and address model; Artemis's address settings)
and AMQP 1.0 §3.4 (the outcomes). The broker suites check the same behaviour end to end on every broker vendor;
these cases pin the bookkeeping (delivery-count, exclusion, dead letters, redelivery delay, auto-creation) that a
suite only sees through the wire.
"""

from __future__ import annotations

import pytest
from types import SimpleNamespace

from proton import Delivery, Terminus

from reference.broker.broker import Broker
from reference.broker.config import ANYCAST, MULTICAST, parse_config
from reference.broker.model import Consumer, Entry


def broker_with(settings: str = "<dead-letter-address>DLQ</dead-letter-address>") -> Broker:
    config = parse_config(f"""\
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <persistence-enabled>false</persistence-enabled>
    <security-enabled>false</security-enabled>
    <acceptors><acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP</acceptor></acceptors>
    <address-settings>
      <address-setting match="#">
        {settings}
      </address-setting>
    </address-settings>
    <addresses>
      <address name="DLQ"><anycast><queue name="DLQ"/></anycast></address>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
    </addresses>
  </core>
</configuration>
""")
    broker = Broker(config)
    broker.start()
    return broker


def take(broker: Broker, consumer_id: int = 1, count: int = 3) -> tuple[Consumer, list[Entry]]:
    """`count` messages stored on 'orders', then all handed to one consumer (in flight, unsettled)."""
    queue = broker.queues["orders"]
    for n in range(count):
        broker.route_new(broker.addresses["orders"], f"m{n}".encode(), durable=False, expiry=None)
    entries = [queue.available.pop(0) for _ in range(count)]  # the heap's order is arrival order here
    queue.in_flight += count
    return Consumer(link=None, queue=queue, id=consumer_id), entries


def available(broker: Broker, name: str) -> list[int]:
    return sorted(e.msg_id for e in broker.queues[name].available)


def test_accepted_removes_the_message():
    broker = broker_with()
    consumer, (first, *_) = take(broker)
    broker.apply_outcome(consumer, first, Delivery.ACCEPTED)
    assert consumer.queue.in_flight == 2
    assert consumer.queue.depth == 2
    assert available(broker, "orders") == [] and available(broker, "DLQ") == []


def test_released_goes_back_in_its_place_with_its_delivery_count():
    broker = broker_with()
    consumer, (first, second, third) = take(broker)
    broker.apply_outcome(consumer, third, Delivery.RELEASED)
    broker.apply_outcome(consumer, first, Delivery.RELEASED)
    queue = consumer.queue
    assert [e.msg_id for e in sorted(queue.available)] == [first.msg_id, third.msg_id], "arrival order kept"
    assert queue.available[0] is first, "the oldest is next"
    assert (first.delivery_count, third.delivery_count) == (0, 0), "released does not count as an attempt"
    assert queue.in_flight == 1 and queue in broker.dirty


def test_modified_delivery_failed_counts_an_attempt_and_requeues():
    broker = broker_with()
    consumer, (first, *_) = take(broker)
    broker.apply_outcome(consumer, first, Delivery.MODIFIED, failed=True)
    assert first.delivery_count == 1
    assert available(broker, "orders") == [first.msg_id]
    assert first.excluded == set(), "not undeliverable-here: this consumer may get it again"


def test_modified_without_delivery_failed_is_a_release():
    broker = broker_with()
    consumer, (first, *_) = take(broker)
    broker.apply_outcome(consumer, first, Delivery.MODIFIED)
    assert first.delivery_count == 0
    assert available(broker, "orders") == [first.msg_id]


def test_undeliverable_here_keeps_the_message_from_that_consumer_only():
    broker = broker_with()
    consumer, (first, *_) = take(broker, consumer_id=7)
    broker.apply_outcome(consumer, first, Delivery.MODIFIED, failed=False, undeliverable=True)
    assert first.excluded == {7}
    assert first.delivery_count == 0
    assert available(broker, "orders") == [first.msg_id], "still there for other consumers"


def test_rejected_goes_to_the_dead_letter_address_with_its_delivery_count():
    broker = broker_with()
    consumer, (first, *_) = take(broker)
    first.delivery_count = 2
    broker.apply_outcome(consumer, first, Delivery.REJECTED)
    assert available(broker, "orders") == []
    (dead,) = broker.queues["DLQ"].available
    assert (dead.data, dead.delivery_count) == (first.data, 2)


def test_rejected_without_a_dead_letter_address_is_dropped():
    broker = broker_with(settings="<max-delivery-attempts>3</max-delivery-attempts>")
    consumer, (first, *_) = take(broker)
    broker.apply_outcome(consumer, first, Delivery.REJECTED)
    assert available(broker, "orders") == [] and available(broker, "DLQ") == []
    assert consumer.queue.depth == 2


@pytest.mark.parametrize("limit, dead_after", [(1, 1), (3, 3)])
def test_max_delivery_attempts_dead_letters_on_the_last_failed_attempt(limit, dead_after):
    broker = broker_with(f"<dead-letter-address>DLQ</dead-letter-address>"
                         f"<max-delivery-attempts>{limit}</max-delivery-attempts>")
    consumer, (first, *_) = take(broker)
    queue = consumer.queue
    for attempt in range(1, dead_after + 1):
        assert available(broker, "DLQ") == [], f"dead-lettered before attempt {attempt}"
        if attempt > 1:  # handed out again
            queue.available.remove(first)
            queue.in_flight += 1
        broker.apply_outcome(consumer, first, Delivery.MODIFIED, failed=True)
    assert first.delivery_count == dead_after
    assert first not in queue.available
    assert [e.data for e in broker.queues["DLQ"].available] == [first.data]


def test_minus_one_attempts_means_never_dead_lettered():
    broker = broker_with("<dead-letter-address>DLQ</dead-letter-address>"
                         "<max-delivery-attempts>-1</max-delivery-attempts>")
    consumer, (first, *_) = take(broker)
    for _ in range(25):
        broker.apply_outcome(consumer, first, Delivery.MODIFIED, failed=True)
        consumer.queue.available.remove(first)
        consumer.queue.in_flight += 1
    assert first.delivery_count == 25 and available(broker, "DLQ") == []


def test_redelivery_delay_holds_a_failed_message_but_not_a_released_one():
    broker = broker_with("<redelivery-delay>5000</redelivery-delay>")
    consumer, (first, second, _) = take(broker)
    broker.apply_outcome(consumer, first, Delivery.MODIFIED, failed=True)
    broker.apply_outcome(consumer, second, Delivery.RELEASED)
    queue = consumer.queue
    assert queue.delayed == [first], "a failed attempt waits out the redelivery delay"
    assert first.ready_at > 0
    assert available(broker, "orders") == [second.msg_id], "a release (no attempt counted) is not delayed"
    assert queue.depth == 3


def test_a_delayed_message_becomes_available_only_when_its_delay_has_passed():
    broker = broker_with("<redelivery-delay>5000</redelivery-delay>")
    consumer, (first, second, _) = take(broker)
    broker.apply_outcome(consumer, first, Delivery.MODIFIED, failed=True)
    broker.apply_outcome(consumer, second, Delivery.MODIFIED, failed=True)
    queue = consumer.queue
    second.ready_at = 0.0  # its delay is over; the first's (5 s from now) is not
    broker.dispatcher.dispatch(queue)
    assert queue.delayed == [first]
    assert available(broker, "orders") == [second.msg_id]


class CreditOnlyLink:
    """Stands in for a consumer's link in `Dispatcher.dispatch`, which reads only its credit, drain mode and its
    session's unsent output (none: no session) before it sends; a send is what these cases must not see."""

    credit, drain_mode, session = 5, False, None

    def delivery(self, tag):
        raise AssertionError("an expired message was sent to a consumer")


def test_a_message_that_expired_in_the_queue_is_not_sent_to_a_waiting_consumer():
    # The TTL scan runs every 100 ms; a consumer whose credit arrives between two scans must still not get a
    # message whose expiry has passed: dispatch checks it too.
    broker = broker_with("<expiry-address>DLQ</expiry-address>")
    queue = broker.queues["orders"]
    broker.route_new(broker.addresses["orders"], b"stale", durable=False, expiry=1.0)  # long past
    queue.consumers.append(Consumer(link=CreditOnlyLink(), queue=queue, id=1))
    broker.dispatcher.dispatch(queue)
    assert available(broker, "orders") == []
    assert [e.data for e in broker.queues["DLQ"].available] == [b"stale"], "moved to the expiry address"


# ---- address resolution --------------------------------------------------------------------------------------


def test_an_unknown_address_is_created_with_the_default_routing_type():
    broker = broker_with("<default-address-routing-type>ANYCAST</default-address-routing-type>")
    info, routing = broker.registry.resolve("invoices", None, for_consumer=False)
    assert routing == ANYCAST
    assert broker.addresses["invoices"] is info
    assert [q.name for q in info["queues"]] == ["invoices"], "and its anycast queue (auto-create-queues)"


def test_without_auto_create_addresses_an_unknown_address_is_refused():
    broker = broker_with("<auto-create-addresses>false</auto-create-addresses>")
    assert broker.registry.resolve("invoices", None, for_consumer=False) == (None, "")
    assert "invoices" not in broker.addresses
    info, routing = broker.registry.resolve("orders", None, for_consumer=True)
    assert (info is broker.addresses["orders"], routing) == (True, ANYCAST), "a declared address still resolves"


def test_without_auto_create_addresses_a_new_routing_type_is_refused():
    broker = broker_with("<auto-create-addresses>false</auto-create-addresses>")
    assert broker.registry.resolve("orders", MULTICAST, for_consumer=True) == (None, "")
    assert broker.addresses["orders"]["routings"] == {ANYCAST}


def test_with_auto_create_addresses_a_new_routing_type_is_added():
    broker = broker_with("")
    info, routing = broker.registry.resolve("orders", MULTICAST, for_consumer=False)
    assert routing == MULTICAST
    assert info["routings"] == {ANYCAST, MULTICAST}


def test_message_ids_are_never_handed_out_again_after_restarts(tmp_path):
    """A mirror target knows a message by (node id, message id) for good (Artemis keeps a persistent duplicate
    cache per origin), and the node id survives a restart: so must the ids used. Non-durable messages leave no
    journal record, and consumed ones are compacted away; before the journal's id mark, a restart started again
    above the highest *live* id and handed out 2, 3, ... a second time."""
    from reference.broker.journal import Journal

    used: list[int] = []
    for _restart in range(3):
        broker = Broker(broker_with().config)  # the same configuration, started on the journal
        broker.start(Journal(tmp_path / "journal"))
        for n in range(3):
            broker.route_new(broker.addresses["orders"], f"m{n}".encode(), durable=False, expiry=None)
        queue = broker.queues["orders"]
        used += [e.msg_id for e in queue.available]
        broker.journal.commit()
        broker.journal.close()
    assert len(used) == 9 and len(set(used)) == 9, f"ids handed out twice across restarts: {sorted(used)}"


def test_a_mirrored_acknowledgement_that_comes_before_its_message_is_applied_when_the_message_comes():
    """Artemis 2.40's AckManager keeps an acknowledgement whose message is not there yet and tries again; the
    reference used to drop it, so the message, once it came, stayed on the mirror for good."""
    from proton import Message

    broker = broker_with()
    broker.mirror_store.index_entries = True  # as on a broker that is mirrored to
    broker.mirror_store.mirror_ack("orders", "node-a", 5, via="node-a")
    data = Message(address="orders", body="late").encode()
    mirrors = broker.mirror_store
    mirrors.store_mirrored(data, "orders", ("node-a", 5), "node-a")
    mirrors.store_mirrored(Message(address="orders", body="other").encode(), "orders", ("node-a", 6), "node-a")
    queue = broker.queues["orders"]
    assert [e.origin for e in queue.available if not e.removed] == [("node-a", 6)]
    assert queue.depth == 1 and not broker.mirror_store.mirror_early_acks


def test_a_mirror_hears_why_a_message_went_and_an_expired_ones_copy_is_not_mirrored():
    """Artemis 2.40: a postAck carries the reason (killed for a dead letter, expired), and the copy an expiry
    routes to the expiry address is not mirrored (QueueImpl.move), since the target expires its own copy."""
    broker = broker_with("<dead-letter-address>DLQ</dead-letter-address><expiry-address>DLQ</expiry-address>")
    events = []

    class Mirror:
        def sent(self, address, *_):
            events.append(("send", address))

        def acked(self, queue, entry, via, reason):
            events.append(("ack", queue.name, reason))

    consumer, (first, second, _third) = take(broker)
    broker.mirror_store.mirrors.append(Mirror())
    broker.apply_outcome(consumer, first, Delivery.REJECTED)
    assert events == [("ack", "orders", "killed"), ("send", "DLQ")]
    events.clear()
    queue = broker.queues["orders"]
    queue.in_flight -= 1
    broker.outcomes.move(queue, second, "DLQ", "expired", "expiry")
    assert events == [("ack", "orders", "expired")], "an expired message's copy is not mirrored"
    assert len(broker.queues["DLQ"].available) == 2, "the expired message still went to the expiry address"


# ---- which queue a multicast consumer's attach would create -------------------------------------------------------
# What the permission check asks for (Artemis's createDurableQueue or createNonDurableQueue: broker/access.py): a
# durable subscription is a source terminus that is durable and never expires (the AMQP JMS mapping's durable
# subscriber); anything else gets a queue that lives with its link.


@pytest.mark.parametrize(("durability", "expiry", "expected"), [
    (Terminus.NONDURABLE, Terminus.EXPIRE_WITH_LINK, "non-durable"),
    (Terminus.NONDURABLE, Terminus.EXPIRE_NEVER, "non-durable"),
    (Terminus.CONFIGURATION, Terminus.EXPIRE_WITH_LINK, "non-durable"),
    (Terminus.CONFIGURATION, Terminus.EXPIRE_NEVER, "durable"),
    (Terminus.DELIVERIES, Terminus.EXPIRE_NEVER, "durable"),
])
def test_a_multicast_consumer_asks_for_the_subscription_its_source_describes(durability, expiry, expected):
    broker = broker_with()
    link = SimpleNamespace(name="news-sub", connection=SimpleNamespace(remote_container="client-1"))
    source = SimpleNamespace(durability=durability, expiry_policy=expiry)
    assert broker.attachments.new_subscription(link, "news", source) == expected


def test_a_durable_subscription_that_exists_creates_nothing():
    broker = broker_with()
    broker.registry.declare_address("news", {MULTICAST})
    broker.registry.create_queue("client-1.news-sub", "news", MULTICAST, durable=True)
    link = SimpleNamespace(name="news-sub", connection=SimpleNamespace(remote_container="client-1"))
    source = SimpleNamespace(durability=Terminus.DELIVERIES, expiry_policy=Terminus.EXPIRE_NEVER)
    assert broker.attachments.new_subscription(link, "news", source) is None
    assert broker.attachments.new_subscription(link, "other-topic", source) == "durable"  # same name, another address


def test_a_deleted_queue_leaves_the_management_snapshot_at_once():
    """The management endpoint answers DELETE /queues/NAME when delete_queue returns and serves GETs from the
    snapshot: a GET right after must not find the queue (seen under load before the snapshot was refreshed here:
    200 for a queue just deleted, tests/test_broker_process.py::test_management_endpoint)."""
    broker = broker_with()
    broker._publish_stats()
    assert "orders" in {row["name"] for row in broker.stats()}
    broker.delete_queue(broker.queues["orders"])
    assert {row["name"] for row in broker.stats()} == {"DLQ"}
