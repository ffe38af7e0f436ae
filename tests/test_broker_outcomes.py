"""The reference broker's outcome rules (reference/broker/outcomes.py): what a consumer's disposition does to its
message, requeue, dead letters and expiry.

Source: AMQP 1.0 §3.4 (the outcomes), §2.6.12 (settlement), Artemis's address settings (dead-letter-address,
expiry-address, max-delivery-attempts), seed 002 "Mirroring" (a message acknowledged on the other broker).
tests/test_broker_logic.py pins apply_outcome's bookkeeping; these pin the rest of the module.
"""

from __future__ import annotations

from types import SimpleNamespace

from proton import Delivery

from reference.broker.model import Consumer
from tests.test_broker_logic import available, broker_with, take


class FakeDelivery:
    """A consumer's disposition as outcomes.py reads it."""

    def __init__(self, tag, remote_state, settled, failed=False, undeliverable=False):
        self.tag, self.remote_state, self.settled = tag, remote_state, settled
        self.remote = SimpleNamespace(failed=failed, undeliverable=undeliverable)
        self.settled_here = False

    def settle(self):
        self.settled_here = True


def holding(broker, count=1):
    consumer, entries = take(broker, count=count)
    for n, entry in enumerate(entries):
        consumer.unsettled[f"t{n}"] = entry
    return consumer, entries


def test_settled_without_an_outcome_counts_as_accepted():
    broker = broker_with()
    consumer, (first,) = holding(broker)
    dlv = FakeDelivery("t0", None, settled=True)
    broker.outcomes.consumer_outcome(consumer, dlv)
    assert dlv.settled_here and consumer.unsettled == {}
    assert consumer.queue.depth == 0, "the consumer is done with it: removed"


def test_no_outcome_yet_and_unsettled_changes_nothing():
    broker = broker_with()
    consumer, (first,) = holding(broker)
    dlv = FakeDelivery("t0", None, settled=False)
    broker.outcomes.consumer_outcome(consumer, dlv)
    assert not dlv.settled_here and consumer.unsettled == {"t0": first}


def test_the_outcome_of_a_durable_message_is_settled_once_its_journal_batch_is_on_disk():
    broker = broker_with()
    consumer, (first,) = holding(broker)
    first.durable = True
    broker.journal = SimpleNamespace(delete=lambda *_: None)
    dlv = FakeDelivery("t0", Delivery.ACCEPTED, settled=False)
    broker.outcomes.consumer_outcome(consumer, dlv)
    assert not dlv.settled_here
    assert broker.durability.awaiting_commit == [(dlv, None)], "settled only, with the batch"


def test_the_delivery_failed_and_undeliverable_flags_of_modified_are_read():
    broker = broker_with()
    consumer, (first,) = holding(broker)
    broker.outcomes.consumer_outcome(consumer, FakeDelivery("t0", Delivery.MODIFIED, True, failed=True,
                                                            undeliverable=True))
    assert (first.delivery_count, first.excluded) == (1, {consumer.id})


def test_a_message_whose_queue_is_gone_is_not_requeued():
    broker = broker_with()
    consumer, (first, _) = take(broker, count=2)
    broker.registry.delete_queue(consumer.queue)
    broker.outcomes.requeue(consumer.queue, first)
    assert first not in consumer.queue.available


def test_a_message_acknowledged_through_a_mirror_while_held_is_dropped_when_it_comes_back():
    broker = broker_with()
    consumer, (first, *_) = take(broker)
    first.mirror_acked = "normal"
    broker.apply_outcome(consumer, first, Delivery.RELEASED)
    assert first.msg_id not in available(broker, "orders")
    assert available(broker, "DLQ") == []


def test_a_message_expired_through_a_mirror_while_held_goes_to_the_expiry_address_when_it_comes_back():
    broker = broker_with("<expiry-address>DLQ</expiry-address>")
    consumer, (first, *_) = take(broker)
    first.mirror_acked = "expired"
    broker.apply_outcome(consumer, first, Delivery.RELEASED)
    assert first.msg_id not in available(broker, "orders")
    assert [e.data for e in broker.queues["DLQ"].available] == [first.data]


def test_a_moved_message_keeps_its_delivery_count_and_durability_under_a_new_id():
    broker = broker_with()
    queue = broker.queues["orders"]
    consumer, (first, *_) = take(broker)
    first.delivery_count = 4
    broker.outcomes.move(queue, first, "DLQ", "test", "dead-letter")
    (moved,) = broker.queues["DLQ"].available
    assert (moved.data, moved.delivery_count, moved.durable) == (first.data, 4, first.durable)
    assert moved.msg_id > first.msg_id, "a new message id, in arrival order"


def test_a_dead_letter_with_no_dead_letter_address_is_dropped():
    broker = broker_with("")
    consumer, (first, *_) = take(broker)
    broker.outcomes.dead_letter(consumer.queue, first, "rejected")
    assert available(broker, "DLQ") == [] and first not in consumer.queue.available


def test_undeliverable_here_excludes_the_consumer_that_said_it():
    broker = broker_with()
    consumer, (first, *_) = take(broker)
    other = Consumer(link=None, queue=consumer.queue, id=consumer.id + 1)
    broker.apply_outcome(other, first, Delivery.MODIFIED, undeliverable=True)
    assert first.excluded == {other.id}
