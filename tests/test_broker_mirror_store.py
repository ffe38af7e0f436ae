"""What mirroring does to the reference broker's queues (reference/broker/mirror_store.py): the events a mirror
target applies, and the store-and-forward queue of a mirror source.

Source: seed 002 "Mirroring" and "Dual Mirror (Disaster Recovery)" (no echo; both brokers may deliver a message
acknowledged on the other), and Artemis 2.40's AckManager (an acknowledgement that comes before its message is
kept a while). tests/test_mirror_wire.py pins the wire; these pin the rules behind it.
"""

from __future__ import annotations

from proton import Message

from reference.broker import mirror_store
from reference.broker.config import ANYCAST, MULTICAST
from tests.test_broker_logic import broker_with, take


class EchoCheck:
    """A MirrorSource that records through which node each event it hears was caused."""

    def __init__(self):
        self.vias: list = []

    def address_added(self, name, routings, via):
        self.vias.append(("address", via))

    def queue_created(self, queue, via):
        self.vias.append(("queue", via))

    def sent(self, address, msg_id, data, origin, via):
        self.vias.append(("sent", via))

    def acked(self, queue, entry, via, reason):
        self.vias.append(("acked", via))


def mirrored(body: str) -> bytes:
    return Message(address="orders", body=body).encode()


def test_events_applied_from_a_node_are_marked_with_it_and_own_events_are_not():
    broker = broker_with()
    source = EchoCheck()
    store = broker.mirror_store
    store.mirrors.append(source)
    store.store_mirrored(mirrored("theirs"), "orders", ("node-a", 1), "node-a")
    broker.route_new(broker.addresses["orders"], mirrored("mine"), durable=False, expiry=None)
    assert source.vias == [("sent", "node-a"), ("sent", None)]
    assert store.via is None, "only while the event is applied"


def test_an_early_acknowledgement_past_its_deadline_is_not_applied():
    broker = broker_with()
    store = broker.mirror_store
    store.index_entries = True
    store.mirror_ack("orders", "node-a", 5, via="node-a")
    key = ("orders", "node-a", 5)
    store.mirror_early_acks[key] = (store.mirror_early_acks[key][0], 0.0)  # its deadline has passed
    store.store_mirrored(mirrored("late"), "orders", ("node-a", 5), "node-a")
    assert broker.queues["orders"].depth == 1 and not store.mirror_early_acks


def test_early_acknowledgements_are_bounded_oldest_first(monkeypatch):
    monkeypatch.setattr(mirror_store, "EARLY_ACKS_KEPT", 2)
    broker = broker_with()
    for internal in (1, 2, 3):
        broker.mirror_store.mirror_ack("orders", "node-a", internal, via="node-a")
    assert [key[2] for key in broker.mirror_store.mirror_early_acks] == [2, 3]


def test_an_acknowledgement_for_an_unknown_queue_is_not_kept():
    broker = broker_with()
    broker.mirror_store.mirror_ack("nowhere", "node-a", 1, via="node-a")
    assert not broker.mirror_store.mirror_early_acks


def test_an_acknowledgement_for_a_message_a_consumer_holds_waits_for_it_to_come_back():
    broker = broker_with()
    store = broker.mirror_store
    store.index_entries = True
    consumer, (first, *_) = take(broker, count=1)
    first.in_flight = True
    first.origin = ("node-a", 9)
    consumer.queue.keyed[first.origin] = first
    store.mirror_ack("orders", "node-a", 9, via="node-a", reason="normal")
    assert first.mirror_acked == "normal" and not first.removed, "the consumer here may still get it"


def test_an_acknowledgement_for_a_stored_message_removes_it_lazily():
    broker = broker_with()
    store = broker.mirror_store
    store.index_entries = True
    store.store_mirrored(mirrored("x"), "orders", ("node-a", 3), "node-a")
    queue = broker.queues["orders"]
    store.mirror_ack("orders", "node-a", 3, via="node-a")
    (entry,) = queue.available
    assert entry.removed and queue.dead == 1 and queue.depth == 0


def test_a_mirrored_queue_takes_the_routing_it_names_or_anycast():
    broker = broker_with()
    store = broker.mirror_store
    store.mirror_create_queue("news.q", "news", "MULTICAST", True, via="node-a")
    store.mirror_create_queue("odd.q", None, "sideways", False, via="node-a")
    store.mirror_create_queue("orders", "elsewhere", ANYCAST, True, via="node-a")  # exists: left alone
    assert (broker.queues["news.q"].routing, broker.queues["odd.q"].routing) == (MULTICAST, ANYCAST)
    assert broker.queues["odd.q"].address == "odd.q", "no address: the queue's name"
    assert broker.queues["orders"].address == "orders"


def test_a_mirrored_address_deletion_leaves_an_address_that_still_has_queues():
    broker = broker_with()
    store = broker.mirror_store
    store.mirror_add_address("empty", set(), via="node-a")
    assert broker.addresses["empty"]["routings"] == {ANYCAST}, "no routing type named: anycast"
    store.mirror_delete_address("empty", via="node-a")
    store.mirror_delete_address("orders", via="node-a")
    assert "empty" not in broker.addresses and "orders" in broker.addresses


def test_a_mirrored_queue_deletion_never_touches_an_internal_queue():
    broker = broker_with()
    store = broker.mirror_store
    store.internal_queue("$ACTIVEMQ_ARTEMIS_MIRROR_dr")
    store.mirror_delete_queue("$ACTIVEMQ_ARTEMIS_MIRROR_dr", via="node-a")
    store.mirror_delete_queue("orders", via="node-a")
    assert "$ACTIVEMQ_ARTEMIS_MIRROR_dr" in broker.queues and "orders" not in broker.queues


def test_a_mirror_event_is_appended_to_the_end_of_its_internal_queue():
    broker = broker_with()
    store = broker.mirror_store
    queue = store.internal_queue("$ACTIVEMQ_ARTEMIS_MIRROR_dr")
    store.append_internal(queue, b"first")
    store.append_internal(queue, b"second")
    assert queue.internal and [e.data for e in sorted(queue.available)] == [b"first", b"second"]
    assert queue in broker.dirty
