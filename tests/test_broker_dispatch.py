"""The reference broker's dispatch (reference/broker/dispatch.py): which consumer gets which message, and when.

Source: Artemis's queue semantics (competing consumers in turn, FIFO), AMQP 1.0 §2.6.7 (credit and drain),
§3.2.1 (a redelivered message's delivery-count and first-acquirer), §2.6.12 (a sender that settles on sending);
Artemis's expiry-address. End to end the broker suites check the same on every vendor; these pin the rules
without sockets.
"""

from __future__ import annotations

from types import SimpleNamespace

from proton import Link, Message

from reference.broker.dispatch import OUTPUT_HOLD_BYTES
from reference.broker.model import Consumer
from tests.test_broker_logic import available, broker_with


class SendingLink:
    """A consumer's link as the dispatcher uses it: credit, drain, its session's unwritten output, and sends."""

    def __init__(self, credit=10, settle_mode=Link.SND_UNSETTLED, unwritten=0, drain=False):
        self.credit, self.snd_settle_mode, self.drain_mode = credit, settle_mode, drain
        self.session = SimpleNamespace(outgoing_bytes=unwritten)
        self.sent: list[bytes] = []
        self.was_drained = False

    def delivery(self, tag):
        return SimpleNamespace(tag=tag, settle=lambda: None)

    def stream(self, data):
        self.sent.append(data)

    def advance(self):
        self.credit -= 1

    def drained(self):
        self.was_drained = True


def consumer_on(broker, queue_name="orders", consumer_id=1, **link):
    queue = broker.queues[queue_name]
    consumer = Consumer(link=SendingLink(**link), queue=queue, id=consumer_id)
    queue.consumers.append(consumer)
    return consumer


def store(broker, *bodies, address="orders"):
    for body in bodies:
        broker.route_new(broker.addresses[address], Message(body=body).encode(), durable=False, expiry=None)


def bodies(link):
    message = Message()
    out = []
    for data in link.sent:
        message.decode(data)
        out.append(message.body)
    return out


def test_competing_consumers_take_messages_in_turn_in_arrival_order():
    broker = broker_with()
    first, second = consumer_on(broker, consumer_id=1), consumer_on(broker, consumer_id=2)
    store(broker, "a", "b", "c", "d")
    broker.dispatcher.dispatch(broker.queues["orders"])
    assert (bodies(first.link), bodies(second.link)) == (["a", "c"], ["b", "d"])
    assert broker.queues["orders"].in_flight == 4 and len(first.unsettled) == 2


def test_a_consumer_without_credit_gets_nothing():
    broker = broker_with()
    waiting, ready = consumer_on(broker, consumer_id=1, credit=0), consumer_on(broker, consumer_id=2, credit=1)
    store(broker, "a", "b")
    broker.dispatcher.dispatch(broker.queues["orders"])
    assert (bodies(waiting.link), bodies(ready.link)) == ([], ["a"])
    assert len(available(broker, "orders")) == 1


def test_a_consumer_that_settles_on_sending_is_done_with_the_message():
    broker = broker_with()
    consumer = consumer_on(broker, settle_mode=Link.SND_SETTLED)
    store(broker, "a")
    queue = broker.queues["orders"]
    broker.dispatcher.dispatch(queue)
    assert bodies(consumer.link) == ["a"]
    assert (queue.depth, consumer.unsettled) == (0, {})


def test_a_message_a_consumer_called_undeliverable_skips_it_and_stays_for_others():
    broker = broker_with()
    consumer = consumer_on(broker, consumer_id=1)
    store(broker, "a", "b")
    queue = broker.queues["orders"]
    queue.available[0].excluded.add(1)  # "a" (the oldest is at the heap's top)
    broker.dispatcher.dispatch(queue)
    assert bodies(consumer.link) == ["b"]
    (left,) = queue.available
    assert Message(body="a").encode() == left.data, "still there for another consumer"


def test_a_redelivered_message_carries_its_delivery_count_and_is_not_first_acquired():
    broker = broker_with()
    consumer = consumer_on(broker)
    store(broker, "a")
    queue = broker.queues["orders"]
    queue.available[0].delivery_count = 3
    broker.dispatcher.dispatch(queue)
    message = Message()
    message.decode(consumer.link.sent[0])
    assert (message.delivery_count, message.first_acquirer) == (3, False)


def test_a_first_delivery_goes_out_as_it_was_stored():
    broker = broker_with()
    consumer = consumer_on(broker)
    store(broker, "a")
    stored = broker.queues["orders"].available[0].data
    broker.dispatcher.dispatch(broker.queues["orders"])
    assert consumer.link.sent == [stored]


def test_a_consumer_whose_connection_output_is_full_is_held_and_looked_at_again_next_turn():
    broker = broker_with()
    consumer = consumer_on(broker, unwritten=OUTPUT_HOLD_BYTES)
    store(broker, "a")
    queue = broker.queues["orders"]
    broker.dirty.clear()
    broker.dispatcher.dispatch(queue)
    assert consumer.link.sent == [] and queue in broker.dispatcher.held
    consumer.link.session.outgoing_bytes = 0  # written meanwhile
    broker.dispatcher.pump()
    assert bodies(consumer.link) == ["a"] and not broker.dispatcher.held


def test_a_draining_consumer_is_told_when_nothing_is_left():
    broker = broker_with()
    consumer = consumer_on(broker, credit=5, drain=True)
    store(broker, "a")
    broker.dispatcher.dispatch(broker.queues["orders"])
    assert bodies(consumer.link) == ["a"] and consumer.link.was_drained


def test_the_scan_moves_expired_messages_and_wakes_queues_whose_delay_is_over():
    broker = broker_with("<expiry-address>DLQ</expiry-address>")
    broker.route_new(broker.addresses["orders"], b"stale", durable=False, expiry=1.0)  # long past
    broker.route_new(broker.addresses["orders"], b"fresh", durable=False, expiry=None)
    queue = broker.queues["orders"]
    delayed = queue.available.pop()
    delayed.ready_at = 0.0
    queue.delayed.append(delayed)
    broker.dirty.clear()
    broker.dispatcher.scan()
    assert [e.data for e in broker.queues["DLQ"].available] == [b"stale"]
    assert queue in broker.dirty, "a delayed redelivery that is due gets dispatched"


def test_a_removed_entry_is_skipped_and_counted_out_of_the_dead():
    broker = broker_with()
    consumer = consumer_on(broker)
    store(broker, "a", "b")
    queue = broker.queues["orders"]
    queue.available[0].removed, queue.dead = True, 1
    broker.dispatcher.dispatch(queue)
    assert bodies(consumer.link) == ["b"] and queue.dead == 0
