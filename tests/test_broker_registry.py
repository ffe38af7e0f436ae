"""The reference broker's queue registry (reference/broker/registry.py): addresses and queues, auto-creation, and
where a message is routed.

Source: Artemis's address model and address settings (the documents are silent on them): an anycast address
routes each message to one of its queues, a multicast one a copy to each subscription; store-and-forward
(seed 000). Each creation, message and removal is told to the mirrors (seed 002 "Mirroring").
"""

from __future__ import annotations

from reference.broker.config import ANYCAST, MULTICAST
from tests.test_broker_logic import broker_with


class RecordingMirror:
    """What a MirrorSource hears from the registry."""

    def __init__(self):
        self.events: list[tuple] = []

    def address_added(self, name, routings, via):
        self.events.append(("address", name, via))

    def queue_created(self, queue, via):
        self.events.append(("queue", queue.name, via))

    def queue_deleted(self, queue, via):
        self.events.append(("deleted", queue.name, via))

    def sent(self, address, msg_id, data, origin, via):
        self.events.append(("sent", address, via))

    def acked(self, queue, entry, via, reason):
        self.events.append(("acked", queue.name, reason))


class RecordingJournal:
    directory = None

    def __init__(self):
        self.records: list[tuple] = []

    def add_queue(self, name, address, routing):
        self.records.append(("queue", name))

    def delete_queue(self, name):
        self.records.append(("delete-queue", name))

    def enqueue(self, msg_id, queue, data):
        self.records.append(("enqueue", msg_id, queue))

    def delete(self, msg_id, queue):
        self.records.append(("delete", msg_id, queue))


def test_declaring_an_address_again_adds_routing_types_and_announces_it_once():
    broker = broker_with()
    mirror = RecordingMirror()
    broker.mirror_store.mirrors.append(mirror)
    first = broker.registry.declare_address("news", {MULTICAST})
    again = broker.registry.declare_address("news", {ANYCAST})
    assert first is again and again["routings"] == {ANYCAST, MULTICAST}
    assert mirror.events == [("address", "news", None)], "the mirrors hear of a new address only"


def test_a_temporary_queue_is_never_durable_nor_journaled():
    broker = broker_with()
    broker.journal = RecordingJournal()
    temporary = broker.registry.create_queue("news.sub.1", "news", MULTICAST, durable=True, temporary=True)
    durable = broker.registry.create_queue("kept", "news", MULTICAST)
    assert (temporary.durable, durable.durable) == (False, True)
    assert broker.journal.records == [("queue", "kept")]
    assert broker.addresses["news"]["queues"] == [temporary, durable]


def test_an_internal_queue_is_not_told_to_the_mirrors():
    broker = broker_with()
    mirror = RecordingMirror()
    broker.mirror_store.mirrors.append(mirror)
    broker.registry.create_queue("$ACTIVEMQ_ARTEMIS_MIRROR_x", "$ACTIVEMQ_ARTEMIS_MIRROR_x", ANYCAST, internal=True)
    broker.registry.create_queue("invoices", "invoices", ANYCAST)
    assert [e for e in mirror.events if e[0] == "queue"] == [("queue", "invoices", None)]


def test_deleting_a_queue_deletes_its_durable_messages_from_the_journal():
    broker = broker_with()
    broker.journal = RecordingJournal()
    queue = broker.registry.create_queue("invoices", "invoices", ANYCAST)
    broker.route_new(broker.addresses["invoices"], b"kept", durable=True, expiry=None)
    broker.route_new(broker.addresses["invoices"], b"not kept", durable=False, expiry=None)
    (durable_id,) = [e.msg_id for e in queue.available if e.durable]
    broker.journal.records.clear()
    broker.registry.delete_queue(queue)
    assert "invoices" not in broker.queues and queue not in broker.addresses["invoices"]["queues"]
    assert broker.journal.records == [("delete", durable_id, "invoices"), ("delete-queue", "invoices")]


def test_without_auto_create_queues_a_producer_still_resolves_but_a_consumer_does_not():
    broker = broker_with("<auto-create-queues>false</auto-create-queues>")
    broker.registry.declare_address("empty", {ANYCAST})
    assert broker.registry.resolve("empty", None, for_consumer=True) == (None, "")
    info, routing = broker.registry.resolve("empty", None, for_consumer=False)
    assert (info["name"], routing, info["queues"]) == ("empty", ANYCAST, [])


def test_auto_create_makes_the_anycast_queue_of_the_address_name():
    broker = broker_with()
    info = broker.registry.auto_create("payments", ANYCAST)
    assert [(q.name, q.routing) for q in info["queues"]] == [("payments", ANYCAST)]


def test_a_message_goes_to_every_subscription_and_one_anycast_queue():
    broker = broker_with()
    registry = broker.registry
    subs = [registry.create_queue(f"news.sub.{n}", "news", MULTICAST) for n in range(2)]
    shared = [registry.create_queue(f"news.q{n}", "news", ANYCAST) for n in range(2)]
    info = broker.addresses["news"]
    assert registry.route(info, 7, b"x", False, None) == 3
    assert registry.route(info, 8, b"y", False, None) == 3
    assert [len(q.available) for q in subs] == [2, 2], "a copy for each subscription"
    assert [[e.msg_id for e in q.available] for q in shared] == [[8], [7]], "anycast: one queue, by message id"
    assert set(subs + shared) <= broker.dirty


def test_a_routed_message_is_indexed_under_its_origin_once_mirroring_is_on():
    broker = broker_with()
    info = broker.addresses["orders"]
    broker.registry.route(info, 1, b"local", False, None)
    assert broker.queues["orders"].keyed == {}, "no index while nothing mirrors"
    broker.mirror_store.index_entries = True
    broker.registry.route(info, 2, b"mine", False, None)
    broker.registry.route(info, 3, b"theirs", False, None, origin=("node-b", 40))
    assert set(broker.queues["orders"].keyed) == {(broker.node_id, 2), ("node-b", 40)}


def test_a_removed_message_leaves_the_journal_and_the_index_and_the_mirrors_hear_why():
    broker = broker_with()
    broker.journal = RecordingJournal()
    broker.mirror_store.index_entries = True
    mirror = RecordingMirror()
    broker.mirror_store.mirrors.append(mirror)
    queue = broker.queues["orders"]
    broker.registry.route(broker.addresses["orders"], 5, b"x", True, None, origin=("node-b", 9))
    entry = queue.available.pop()
    broker.registry.remove(queue, entry, "killed")
    assert ("delete", 5, "orders") in broker.journal.records
    assert queue.keyed == {}
    assert mirror.events[-1] == ("acked", "orders", "killed")
