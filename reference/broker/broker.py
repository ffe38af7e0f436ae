"""The reference broker: addresses and queues, store-and-forward, outcomes, journal, over proton's engine.

Semantics (Artemis-compatible where the documents are silent; AMQP 1.0 §3.4 for outcomes):
* An *address* routes to its queues. Anycast: one queue, competing consumers, each message to one of them.
  Multicast: one subscription queue per subscriber, each gets a copy. A link asking for the `topic`
  capability (or attaching to an address declared `<multicast/>`) subscribes; `queue` asks for anycast.
* Producers get credit whether or not anyone consumes (store-and-forward, 000_902de7174695f2b6.txt);
  queues are FIFO.
* Outcomes from consumers: accepted removes the message; released puts it back in its place with the same
  delivery-count; modified with delivery-failed counts a failed attempt, and undeliverable-here keeps it
  from that consumer link; rejected dead-letters it. When the failed attempts reach max-delivery-attempts
  it is dead-lettered too. A message whose TTL ran out is expired (to the expiry address, or dropped).
* A durable message is accepted only once its journal batch is on disk (see journal.py); so is the broker's
  settlement of a consumer's outcome for a durable message. In a running server the batches are written by
  the journal's writer thread (GroupCommitter), so a slow disk never stalls routing and dispatch.
* Local transactions (AMQP 1.0 part 4) are in transactions.py; this module calls it from a few hooks.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import heapq
import itertools
import logging
import os
import queue as queue_module
import threading
import time
import uuid
from dataclasses import dataclass, field

from proton import Condition, Delivery, Endpoint, Link, Message, Terminus
from proton.reactor import ApplicationEvent, EventInjector

from ..links import ServedConnections, links_of, read_message, refuse, terminus_symbols
from ..peek import Peek, peek, redelivered
from . import federation as federating
from . import access as access_module
from . import mirror as mirroring
from .access import AccessControl
from .config import ANYCAST, MULTICAST, BrokerConfig
from .connections import BrokerConnections
from .journal import GroupCommitter, Journal
from .management_amqp import AmqpManagement
from .transactions import TRANSACTIONAL_STATE, Transactions

log = logging.getLogger("BROKER")

PRODUCER_CREDIT = 1000  # Artemis's amqpCredits default
PRODUCER_LOW_CREDIT = 300  # top up below this (Artemis's amqpMinCredits)
EXPIRY_SCAN_S = 0.1
# A consumer is sent no more while this much of its connection's output waits to be written. Credit alone does
# not bound what the broker buffers for a client that grants a million and then stops reading: every message
# would be encoded into that connection's output, in the broker's memory. Messages wait in the queue instead,
# where expiry, other consumers and redelivery still apply.
OUTPUT_HOLD_BYTES = 1 << 20
# A mirrored acknowledgement whose message has not arrived is kept this long (and at most this many), then dropped.
# Artemis 2.40 retries one 5 times on the queue at 100 ms, then twice in its paging store; a longer wait costs
# nothing here, since a message id is never used twice (ID_BLOCK).
EARLY_ACK_S = 30.0
EARLY_ACKS_KEPT = 100_000
ID_BLOCK = 1 << 20  # message ids reserved at a time in the journal (its id mark); a restart skips what is left


@dataclass(eq=False)
class Entry:
    """One message in one queue."""

    msg_id: int
    data: bytes
    durable: bool
    expiry: float | None  # wall-clock seconds, or None
    delivery_count: int = 0
    excluded: set = field(default_factory=set)  # consumer ids that said undeliverable-here
    ready_at: float = 0.0  # redelivery delay
    origin: tuple | None = None  # (node id, internal id) of a message a mirror brought here
    in_flight: bool = False  # sent to a consumer, not settled yet
    removed: bool = False  # acknowledged through a mirror while waiting in `available` (skipped, not sent)
    # acknowledged through a mirror while in flight: its ack reason (mirror.NORMAL, EXPIRED, ...), and the entry
    # is dropped (or expired) if it comes back
    mirror_acked: str | None = None
    hops: int = 0  # brokers of a network it crossed to get here (federation.py)
    came_from: str | None = None  # node id of the broker it was pulled from

    def __lt__(self, other: Entry) -> bool:  # heap order: message id, i.e. arrival order
        return self.msg_id < other.msg_id


@dataclass(eq=False)
class Queue:
    name: str
    address: str
    routing: str
    durable: bool  # survives restarts (journaled)
    temporary: bool = False  # deleted when its (only) consumer leaves
    durable_subscription: bool = False  # kept across detach; ended when its link is closed
    available: list = field(default_factory=list)  # heap of Entry
    delayed: list = field(default_factory=list)
    consumers: list = field(default_factory=list)
    in_flight: int = 0
    turn: int = 0
    internal: bool = False  # a mirror's store-and-forward queue: never mirrored or linked itself
    dead: int = 0  # entries of `available` marked removed, not popped yet
    keyed: dict = field(default_factory=dict)  # (node id, internal id) -> Entry, while mirrors need to find them
    federation_filter: tuple | None = None  # (node, max hops) of the broker whose pull made this subscription

    @property
    def depth(self) -> int:
        return len(self.available) - self.dead + len(self.delayed) + self.in_flight


@dataclass(eq=False)
class Consumer:
    link: Link
    queue: Queue
    id: int
    unsettled: dict = field(default_factory=dict)  # delivery tag -> Entry
    closed: bool = False
    federation_node: str | None = None  # another broker pulling (federation.py): its node id
    max_hops: int = -1  # ... and how many brokers a message may have crossed to go to it


@dataclass(eq=False)
class Producer:
    link: Link
    address: str | None
    routing_hint: str | None  # from the target's capabilities
    closed: bool = False
    federation_side: object = None  # our pull from another broker (federation.py): its Side


class Broker(ServedConnections):
    """The proton handler of the reference broker."""

    STATE_PREFIX = "broker_"

    def __init__(self, config: BrokerConfig, journal: Journal | None = None):
        """Nothing is declared or logged yet: `start` does that, once the server holds its acceptors."""
        self.config = config
        self.journal = journal
        self.queues: dict[str, Queue] = {}
        self.addresses: dict[str, dict] = {}  # name -> {"routings": set, "queues": [Queue]}
        self._ids = itertools.count(1)
        self._consumer_ids = itertools.count(1)
        self._tags = itertools.count(1)
        self._dirty: set[Queue] = set()
        self._held: set[Queue] = set()  # queues with a consumer held back by its connection's unwritten output
        # (delivery, state to answer or None to settle only), done once the journal batch is on disk
        self._awaiting_commit: list[tuple[Delivery, int | None]] = []
        self._committer: GroupCommitter | None = None
        self._stats_lock = threading.Lock()
        self._stats: list[dict] = []
        self._stats_dirty = True
        self._connections: set = set()
        self.on_shutdown = None
        self.transactions = Transactions(self)
        self.node_id = ""  # set by start(); mirrors identify brokers by it
        self.mirrors: list = []  # MirrorSource of every started <mirror>
        self.mirror_seen: dict = {}  # origin node id -> internal ids already applied (mirror.py)
        # (queue, origin node, internal id) -> (ack reason, deadline): mirrored acknowledgements that came before
        # their message, applied when it comes (mirror_ack)
        self.mirror_early_acks: collections.OrderedDict = collections.OrderedDict()
        self.index_entries = False  # keep Queue.keyed: once this broker mirrors or is mirrored to
        self._via: str | None = None  # while applying a mirror event: the node it came from
        self.connections = BrokerConnections(self, config.broker_connections)
        # Security on: every attach is checked for the connection's user (access.py); off: no check at all.
        self.access = AccessControl(config) if config.security_enabled else None
        self.federation = federating.Federation(self)
        self.management = AmqpManagement(self)  # requests to the management address (management_amqp.py)
        self._calls: queue_module.SimpleQueue = queue_module.SimpleQueue()  # (function, Future) from other threads
        self._call_injector: EventInjector | None = None

    # ---- start-up ------------------------------------------------------------------------------------------------

    def start(self, journal: Journal | None = None) -> tuple[int, int]:
        """Declare the configured addresses and queues, then recover `journal` (if given, it replaces the one
        passed to the constructor): returns (messages recovered, bytes of torn tail discarded)."""
        if journal is not None:
            self.journal = journal
        for address in self.config.addresses:
            self._declare_address(address.name, set(address.routings))
            for q in address.queues:
                self._create_queue(q.name, address.name, q.routing, durable=q.durable, journal=False)
        recovered = self.recover()
        self.node_id = mirroring.node_id(self.journal.directory if self.journal is not None else None)
        self.connections.install()
        # The management endpoint answers from this snapshot, and it can be asked as soon as the broker logs
        # that it is ready, before the event loop's first turn would publish it: a recovered queue was then
        # "no queue" for a moment (tests/test_broker_process.py saw it in 1 of ~45 restarts).
        self._publish_stats()
        return recovered

    def recover(self) -> tuple[int, int]:
        """Load the journal: returns (messages recovered, bytes of torn tail discarded)."""
        if self.journal is None:
            return 0, 0
        recovered, highest, torn = self.journal.recover()
        count = 0
        for rq in recovered.values():
            queue = self.queues.get(rq.name)
            if queue is None:
                self._declare_address(rq.address, {rq.routing})
                queue = self._create_queue(rq.name, rq.address, rq.routing, durable=True, journal=False,
                                           internal=rq.name.startswith(mirroring.SNF_PREFIX))
            for msg_id, data in rq.messages.items():
                fields = peek(data) or _fields_of(_decode(data))
                heapq.heappush(queue.available, Entry(msg_id, data, True, _expiry_of(fields)))
                count += 1
            self._dirty.add(queue)
        for queue in self.queues.values():
            if queue.durable and queue.name not in recovered:
                self.journal.add_queue(queue.name, queue.address, queue.routing)
        self._id_ceiling = highest + ID_BLOCK
        self.journal.mark_ids(self._id_ceiling)
        self.journal.commit()
        self._ids = self._journalled_ids(highest + 1)
        return count, torn

    def _journalled_ids(self, first: int):
        """Message ids from `first`, each used once for good: the journal's id mark stays half a block ahead of the
        ids handed out (a mark written now is on disk with this batch, long before the ids it covers are used),
        so a restart goes on above every id used before (journal.py, "id mark")."""
        msg_id = first
        while True:
            if msg_id > self._id_ceiling - ID_BLOCK // 2:
                self._id_ceiling += ID_BLOCK
                self.journal.mark_ids(self._id_ceiling)
            yield msg_id
            msg_id += 1

    # ---- addresses and queues ---------------------------------------------------------------------------------

    def _declare_address(self, name: str, routings: set) -> dict:
        entry = self.addresses.get(name)
        if entry is None:
            entry = self.addresses[name] = {"name": name, "routings": set(routings), "queues": []}
            for source in self.mirrors:
                source.address_added(name, routings, self._via)
            self.federation.added(name)  # a network's pull refused for want of it goes again (federation.py)
        entry["routings"] |= routings
        return entry

    def _create_queue(self, name, address, routing, durable=True, temporary=False, journal=True,
                      internal=False) -> Queue:
        queue = Queue(name, address, routing, durable=durable and not temporary, temporary=temporary,
                      internal=internal)
        self.queues[name] = queue
        self._declare_address(address, {routing})["queues"].append(queue)
        if journal and queue.durable and self.journal is not None:
            self.journal.add_queue(name, address, routing)
        self._stats_dirty = True
        log.info("Queue %r created on address %r (%s%s)", name, address, routing,
                 ", temporary" if temporary else "")
        if not internal:
            for source in self.mirrors:
                source.queue_created(queue, self._via)
            self.connections.queue_created(queue)
            self.federation.added(address, name)
        return queue

    def _delete_queue(self, queue: Queue) -> None:
        self.queues.pop(queue.name, None)
        info = self.addresses.get(queue.address)
        if info and queue in info["queues"]:
            info["queues"].remove(queue)
        if queue.durable and self.journal is not None:
            for entry in queue.available + queue.delayed:
                if entry.durable:
                    self.journal.delete(entry.msg_id, queue.name)
            self.journal.delete_queue(queue.name)
        self._dirty.discard(queue)
        self._stats_dirty = True
        for source in self.mirrors:
            source.queue_deleted(queue, self._via)
        self.federation.demand_changed(queue.address)

    def auto_create(self, address: str, routing: str) -> dict | None:
        """`address` (for anycast, with its queue of that name) as a consumer's attach finds or creates it, where
        the address settings allow: its info, or None. For another broker's pull (federation.py)."""
        return self._resolve(address, routing, for_consumer=True)[0]

    def _resolve(self, address: str, hint: str | None, for_consumer: bool) -> tuple[dict | None, str]:
        """Find or auto-create an address; returns (address info or None, routing to use)."""
        info = self.addresses.get(address)
        settings = self.config.settings_for(address)
        if info is None:
            if not settings["auto-create-addresses"]:
                return None, ""
            routing = hint or settings["default-address-routing-type"]
            info = self._declare_address(address, {routing})
        routings = info["routings"]
        routing = hint if hint in routings else (ANYCAST if ANYCAST in routings else MULTICAST)
        if hint and hint not in routings:
            if not settings["auto-create-addresses"]:
                return None, ""
            routings.add(hint)
            routing = hint
        if routing == ANYCAST and not any(q.routing == ANYCAST for q in info["queues"]):
            if not settings["auto-create-queues"]:
                return (None, "") if for_consumer else (info, routing)
            self._create_queue(address, address, ANYCAST)
        return info, routing

    # ---- connections ----------------------------------------------------------------------------------------------

    def on_connection_init(self, event):
        self._connections.add(event.connection)
        event.connection.container = self.config.name

    def on_connection_remote_open(self, event):
        conn = event.connection
        # Read the container-id now: one that is not valid UTF-8 is a decode error, and the loop closes the
        # connection with amqp:decode-error (reading it later, in some other handler, would do the same then).
        container = conn.remote_container
        if getattr(conn, "broker_connection", None) is not None:
            self.connections.opened(conn)  # one of our broker connections came up
            return
        if conn.state & Endpoint.LOCAL_UNINIT:
            conn.open()
        log.debug("Connection from %s opened (container %s)", getattr(conn, "url", "?"), container)

    def on_session_remote_close(self, event):
        bc = getattr(event.session.connection, "broker_connection", None)
        if bc is not None:  # the remote ended our broker connection's session: its links are gone, start again
            self.connections.error(bc, f"the remote ended the session: {event.session.remote_condition}")
        for link in links_of(event.session.connection):
            if link.session == event.session:
                self._link_gone(link, closed=True)
        event.session.close()

    def _transport_gone(self, conn):
        if getattr(conn, "broker_connection", None) is not None:
            self.connections.closed(conn)  # one of our broker connections: it redials from here
        self.federation.connection_gone(conn)

    def _connection_gone(self, conn):
        for link in links_of(conn):
            self._link_gone(link, closed=False)

    def on_broker_shutdown(self, _event):
        self.connections.stop()  # closing our connections must not redial them
        if self.on_shutdown is not None:
            self.on_shutdown()

    # ---- links -----------------------------------------------------------------------------------------------

    def on_link_remote_open(self, event):
        link = event.link
        answered = getattr(link, "federation_answer", None)
        if answered is not None:  # another broker answered one of our federation pulls (federation.py)
            answered(link)
            return
        if getattr(link, "broker_outgoing", None) is not None:
            self.connections.link_opened(link)  # the remote answered an attach of a broker connection
            return
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        if link.is_sender:
            self._attach_consumer(link)
        elif link.remote_target.type == Terminus.COORDINATOR:
            self.transactions.attach(link)
        else:
            self._attach_producer(link)

    def _attach_producer(self, link):
        kind = federating.incoming_kind(link)  # Artemis's federation links go by their desired capability
        if kind is not None:
            if self.access is not None and self._unauthorized(link, ["send"], federating.FEDERATION_ADDRESS):
                return
            attach = self.federation.control_attach if kind == federating.wire.CONTROL_LINK \
                else self.federation.event_attach
            why = attach(link)
            if why is not None:
                refuse(link, "amqp:precondition-failed", why, log)
            return
        if mirroring.is_mirror_attach(link):
            if self.access is not None and self._unauthorized(link, ["send"], link.remote_target.address or ""):
                return
            target = mirroring.MirrorTarget(self, link)
            why = target.open(self.node_id)
            if why is not None:
                refuse(link, "amqp:precondition-failed", why, log)
                return
            link.broker_mirror_target = target
            self.index_entries = True
            return
        target = link.remote_target
        address = target.address or None
        hint = _routing_hint(target.capabilities)
        # The management address is no address of queues: a producer there needs `send` on it, and creates nothing
        managing = self.management.is_management(address)
        if address is not None and self.access is not None:
            needed = ["send"] if managing else self.access.needed(self.addresses, address, hint, consumer=False)
            if self._unauthorized(link, needed, address):
                return
        if address is not None and not managing:
            info, _ = self._resolve(address, hint, for_consumer=False)
            if info is None:
                refuse(link, "amqp:not-found", f"address {address!r} does not exist and auto-create is off", log)
                return
        link.target.copy(target)
        link.source.copy(link.remote_source)
        link.broker_producer = Producer(link, address, hint)
        link.open()
        link.flow(PRODUCER_CREDIT)

    def _attach_consumer(self, link):
        kind = federating.receiver_kind(link)
        if kind is not None:
            self._attach_federation_receiver(link, kind)
            return
        source = link.remote_source
        address = source.address
        if not address:
            refuse(link, "amqp:invalid-field", "a receiver needs a source address", log)
            return
        hint = _routing_hint(source.capabilities)
        if self.access is not None:
            needed = self.access.needed(self.addresses, address, hint, consumer=True,
                                        subscription=self._new_subscription(link, address, source))
            if self._unauthorized(link, needed, address):
                return
        info, routing = self._resolve(address, hint, for_consumer=True)
        if info is None:
            refuse(link, "amqp:not-found", f"address {address!r} has no queue and auto-create is off", log)
            return
        if routing == ANYCAST:
            queue = next(q for q in info["queues"] if q.routing == ANYCAST)
        else:
            queue = self._subscription(link, address, source)
            if queue is None:
                refuse(link, "amqp:resource-locked",
                       f"durable subscription {link.connection.remote_container}.{link.name} is in use on another "
                       "address", log)
                return
        link.source.copy(source)
        # AMQP 1.0 §3.5.3: the filter a sending link answers is the one in place. The reference applies none to a
        # client's consumer (no selectors), so it answers none: a receiver that needs one (a JMS selector) then
        # sees that it is missing and can detach, instead of being told that it holds.
        link.source.filter.clear()
        link.target.copy(link.remote_target)
        self.add_consumer(link, queue)
        link.open()
        self.federation.demand_changed(queue.address)

    def _attach_federation_receiver(self, link, kind: str):
        """Another broker of a network pulls from us (federation.py): a queue by its FQQN, or an address into a
        subscription of its own; an event link is answered and kept."""
        if kind == federating.wire.EVENT_LINK:
            why = self.federation.event_attach(link)
            if why is not None:
                refuse(link, "amqp:illegal-state", why, log)
            return
        why, queue, address, selector = self.federation.serve(link, kind)
        if why is not None:
            federating.refuse_pull(link, "amqp:not-found" if "exist" in why else "amqp:illegal-state", why)
            return
        if self.access is not None:
            hint = ANYCAST if queue is not None else MULTICAST
            needed = self.access.needed(self.addresses, address, hint, consumer=True,
                                        subscription=None if queue is not None else "non-durable")
            if self._unauthorized(link, needed, address):
                return
        if queue is None:
            queue = self._create_queue(f"{address}.sub.{uuid.uuid4().hex[:12]}", address, MULTICAST, temporary=True)
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = Link.RCV_FIRST
        consumer = self.add_consumer(link, queue)
        self.federation.serving(link, kind, consumer, selector)
        link.open()
        self.federation.demand_changed(queue.address)

    def _unauthorized(self, link, operations: list[str], address: str) -> bool:
        why = self.access.refuse(link, operations, address)
        if why is not None:
            refuse(link, access_module.UNAUTHORIZED, why, log)
        return why is not None

    def _new_subscription(self, link, address, source) -> str | None:
        """What queue a consumer's attach would create if it ends up multicast (see _subscription): "durable",
        "non-durable", or None when its durable subscription exists already."""
        if source.durability != Terminus.NONDURABLE and source.expiry_policy == Terminus.EXPIRE_NEVER:
            existing = self.queues.get(f"{link.connection.remote_container}.{link.name}")
            return None if existing is not None and existing.address == address else "durable"
        return "non-durable"

    def _subscription(self, link, address, source) -> Queue | None:
        durable = source.durability != Terminus.NONDURABLE and source.expiry_policy == Terminus.EXPIRE_NEVER
        if durable:  # Artemis names a durable subscription after the client's container id and link name
            name = f"{link.connection.remote_container}.{link.name}"
            existing = self.queues.get(name)
            if existing is not None and existing.address == address:
                return existing
            if existing is not None:
                # The same subscription name on another address: the old subscription ends and a new one
                # starts (as Artemis does when a durable subscriber changes its address).
                if existing.consumers:
                    return None
                log.info("Durable subscription %r moves from address %r to %r", name, existing.address, address)
                self._delete_queue(existing)
            queue = self._create_queue(name, address, MULTICAST)
            queue.durable_subscription = True
            return queue
        return self._create_queue(f"{address}.sub.{uuid.uuid4().hex[:12]}", address, MULTICAST, temporary=True)

    def on_link_remote_close(self, event):
        if getattr(event.link, "broker_outgoing", None) is not None:
            self.connections.link_closed(event.link)
        self._link_gone(event.link, closed=True)
        if event.link.state & Endpoint.LOCAL_ACTIVE:
            event.link.close()

    def on_link_remote_detach(self, event):
        if getattr(event.link, "broker_outgoing", None) is not None:
            self.connections.link_closed(event.link)
        self._link_gone(event.link, closed=False)
        if event.link.state & Endpoint.LOCAL_ACTIVE:
            event.link.detach()

    def _link_gone(self, link, closed: bool):
        if getattr(link, "broker_coordinator", False):
            self.transactions.link_gone(link)
        producer = getattr(link, "broker_producer", None)
        if producer is not None:
            producer.closed = True
            if producer.federation_side is not None:
                producer.federation_side.link_lost(link)
        if getattr(link, "broker_federation_side", None) is not None:
            self.federation.control_closed(link)
        consumer = getattr(link, "broker_consumer", None)
        if consumer is None or consumer.closed:
            return
        consumer.closed = True
        queue = consumer.queue
        if consumer in queue.consumers:
            queue.consumers.remove(consumer)
        # Delivered but unsettled: back to the queue as a failed attempt (the consumer may have seen them). A
        # mirror's events go back as they were: a link that failed is no failed delivery of the event.
        for entry in consumer.unsettled.values():
            queue.in_flight -= 1
            entry.in_flight = False
            if queue.internal or consumer.federation_node is not None:  # a link, not a delivery, failed
                self._requeue(queue, entry)
                continue
            entry.delivery_count += 1
            self._requeue_or_dead_letter(queue, entry)
        consumer.unsettled.clear()
        # A closed (not merely detached) durable subscriber ends its subscription, as in AMQP 1.0 §2.6.3.
        ends_subscription = queue.temporary or (closed and queue.durable_subscription)
        if ends_subscription and not queue.consumers:
            self._delete_queue(queue)
        else:
            self._dirty.add(queue)
        self._stats_dirty = True
        self.federation.demand_changed(queue.address)

    # ---- producers' messages --------------------------------------------------------------------------------------

    def on_delivery(self, event):
        dlv, link = event.delivery, event.link
        producer = getattr(link, "broker_producer", None)
        if producer is not None:
            self._receive(producer, dlv)
            return
        target = getattr(link, "broker_mirror_target", None)
        if target is not None:
            target.delivery(dlv)
            return
        consumer = getattr(link, "broker_consumer", None)
        if consumer is not None:
            self._consumer_outcome(consumer, dlv)
        elif getattr(link, "federation_deliveries", None) is not None:  # federation control and event links
            link.federation_deliveries(dlv)
        elif getattr(link, "broker_coordinator", False):
            self.transactions.control(link, dlv)

    def _receive(self, producer: Producer, dlv: Delivery):
        link = producer.link
        data = read_message(link, dlv)
        if data is None:
            return
        if link.credit < PRODUCER_LOW_CREDIT:
            link.flow(PRODUCER_CREDIT - link.credit)
        hops, came_from = 0, None
        if producer.federation_side is not None:  # pulled from another broker of a network
            data, hops, came_from = federating.incoming(data, producer.federation_side.remote_node)
        fields = peek(data)  # durable, ttl and `to` without a full decode; None: decode to be sure
        if fields is None:
            try:
                fields = _fields_of(_decode(data))
            except Exception as exc:  # noqa: BLE001 - any decode failure is the sender's problem, not ours
                _finish(dlv, Delivery.REJECTED, Condition("amqp:decode-error", f"cannot decode message: {exc}"))
                return
        address = producer.address or fields.to
        if not address:
            _finish(dlv, Delivery.REJECTED, Condition("amqp:invalid-field", "message has no 'to' address"))
            return
        if self.management.is_management(address):  # a management request (management_amqp.py), not routed
            _finish(dlv, *self.management.handle(link, data))
            return
        if producer.address is None and self.access is not None:  # the anonymous relay: checked per message
            why = self.access.refuse_message(
                link, self.access.needed(self.addresses, address, producer.routing_hint, consumer=False), address)
            if why is not None:
                _finish(dlv, Delivery.REJECTED, Condition(access_module.UNAUTHORIZED, why))
                return
        info, _ = self._resolve(address, producer.routing_hint, for_consumer=False)
        if info is None:
            _finish(dlv, Delivery.REJECTED, Condition("amqp:not-found", f"address {address!r} does not exist"))
            return
        durable = fields.durable and self.journal is not None
        if dlv.remote_state == TRANSACTIONAL_STATE:  # held for the commit, answered by transactions.py
            self.transactions.post(dlv, info, data, durable, _expiry_of(fields))
            return
        self._route(info, next(self._ids), data, durable, _expiry_of(fields), hops=hops, came_from=came_from)
        if dlv.settled:
            dlv.settle()
        elif durable and self.config.journal_sync_non_transactional:  # false: accepted before the write (Artemis)
            self._awaiting_commit.append((dlv, Delivery.ACCEPTED))  # accepted once its batch is on disk
        else:
            _finish(dlv, Delivery.ACCEPTED)

    def _route(self, info: dict, msg_id: int, data: bytes, durable: bool, expiry: float | None,
               delivery_count: int = 0, origin: tuple | None = None, hops: int = 0,
               came_from: str | None = None, mirrored: bool = True) -> int:
        anycast = [q for q in info["queues"] if q.routing == ANYCAST]
        targets = [q for q in info["queues"] if q.routing == MULTICAST
                   and (q.federation_filter is None or federating.may_forward(came_from, hops, *q.federation_filter))]
        if anycast:
            targets.append(anycast[msg_id % len(anycast)])
        for queue in targets:
            entry = Entry(msg_id, data, durable and queue.durable, expiry, delivery_count, origin=origin, hops=hops,
                          came_from=came_from)
            if entry.durable:
                self.journal.enqueue(msg_id, queue.name, data)
            heapq.heappush(queue.available, entry)
            if self.index_entries:
                queue.keyed[origin or (self.node_id, msg_id)] = entry
            self._dirty.add(queue)
        if mirrored:  # (not an expired message's copy: see _move)
            for source in self.mirrors:
                source.sent(info["name"], msg_id, data, origin, self._via)
        self._stats_dirty = True
        return len(targets)

    # ---- consumers' outcomes ---------------------------------------------------------------------------------------

    def _consumer_outcome(self, consumer: Consumer, dlv: Delivery):
        if dlv.remote_state == TRANSACTIONAL_STATE:  # an outcome within a transaction: applied at commit
            self.transactions.retire(consumer, dlv)
            return
        state = dlv.remote_state
        if state not in (Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED):
            if not dlv.settled:
                return
            state = Delivery.ACCEPTED  # settled with no outcome: the consumer is done with it
        entry = consumer.unsettled.pop(dlv.tag, None)
        if entry is not None and entry.durable and not dlv.settled and self.config.journal_sync_non_transactional:
            # The consumer waits for our settlement (rcv-settle-mode second): give it once the outcome's journal
            # records (the delete, or the dead-letter copy) are on disk.
            self._awaiting_commit.append((dlv, None))
        else:
            dlv.settle()
        if entry is None:
            return
        remote = dlv.remote
        self.apply_outcome(consumer, entry, state, bool(remote.failed), bool(remote.undeliverable))

    def apply_outcome(self, consumer: Consumer, entry: Entry, state, failed: bool = False,
                      undeliverable: bool = False) -> None:
        """A consumer's outcome for a message it held (now or, for a transaction, at commit)."""
        queue = consumer.queue
        queue.in_flight -= 1
        entry.in_flight = False
        if state == Delivery.ACCEPTED:
            self._remove(queue, entry)
        elif state == Delivery.RELEASED:
            self._requeue(queue, entry)  # back in its place, delivery-count unchanged
        elif state == Delivery.MODIFIED:
            if undeliverable:
                entry.excluded.add(consumer.id)
            if failed:
                entry.delivery_count += 1
                self._requeue_or_dead_letter(queue, entry)
            else:
                self._requeue(queue, entry)
        else:  # rejected: the message is not wanted here, dead-letter it
            self._dead_letter(queue, entry, "rejected")
        self._dirty.add(queue)
        self._stats_dirty = True

    # ---- broker connections and mirrors (connections.py, mirror.py) ----------------------------------------------

    def add_mirror(self, source) -> None:
        """A `<mirror>` starts: events from now on go to its store-and-forward queue."""
        self.mirrors.append(source)
        self.index_entries = True
        source.start()

    def internal_queue(self, name: str) -> Queue:
        """A mirror's store-and-forward queue: created durable, or the one the journal recovered."""
        queue = self.queues.get(name)
        if queue is None:
            queue = self._create_queue(name, name, ANYCAST, durable=True, internal=True)
        queue.internal = True
        return queue

    def append_internal(self, queue: Queue, data: bytes) -> None:
        """Store one mirror event at the end of its queue (journaled with the batch that caused it)."""
        msg_id = next(self._ids)
        entry = Entry(msg_id, data, queue.durable and self.journal is not None, None)
        if entry.durable:
            self.journal.enqueue(msg_id, queue.name, data)
        heapq.heappush(queue.available, entry)
        self._dirty.add(queue)
        self._stats_dirty = True

    def add_consumer(self, link, queue: Queue) -> Consumer:
        """`link` consumes `queue`: a client's, or a sending link of a broker connection."""
        consumer = Consumer(link, queue, next(self._consumer_ids))
        link.broker_consumer = consumer
        queue.consumers.append(consumer)
        self._dirty.add(queue)
        self._stats_dirty = True
        return consumer

    def add_outgoing_producer(self, link, address: str, routing: str, federation_side=None) -> None:
        """A receiving link this broker opened produces into `address`: a broker connection's receiver, or a pull
        from another broker of a network (`federation_side`, federation.py)."""
        producer = Producer(link, address, routing)
        producer.federation_side = federation_side
        link.broker_producer = producer
        link.flow(PRODUCER_CREDIT)

    def store_mirrored(self, data: bytes, address: str | None, origin: tuple, via: str) -> bool:
        """Route a message a mirror brought (the same address, remembered under its origin); returns whether
        it is durable here (its acceptance then waits for the journal)."""
        fields = peek(data) or _fields_of(_decode(data))
        address = address or fields.to
        if not address:
            raise ValueError("a mirrored message with no address")
        info, _ = self._resolve(address, None, for_consumer=False)
        if info is None:
            raise ValueError(f"address {address!r} does not exist here and auto-create is off")
        durable = bool(fields.durable) and self.journal is not None
        with self._applying(via):
            self._route(info, next(self._ids), data, durable, _expiry_of(fields), origin=origin)
            if self.mirror_early_acks:
                self._apply_early_acks(info, origin)
        return durable

    def _apply_early_acks(self, info: dict, origin: tuple) -> None:
        now = time.monotonic()
        for queue in info["queues"]:
            early = self.mirror_early_acks.pop((queue.name, *origin), None)
            entry = queue.keyed.get(origin)
            if early is None or entry is None or early[1] < now:
                continue
            log.info("Mirrored acknowledgement for %s/%s on %r applied as its message arrived", *origin, queue.name)
            self._drop_mirror_acked(queue, entry, early[0])

    @contextlib.contextmanager
    def _applying(self, via: str):
        """While a mirror event from node `via` is applied: the mirrors do not send what it causes back there."""
        self._via = via
        try:
            yield
        finally:
            self._via = None

    def accept_when_durable(self, dlv: Delivery, durable: bool) -> None:
        if durable and self.config.journal_sync_non_transactional:
            self._awaiting_commit.append((dlv, Delivery.ACCEPTED))
        else:
            _finish(dlv, Delivery.ACCEPTED)

    def mirror_add_address(self, name: str | None, routings: set[str], via: str) -> None:
        """An `addAddress`: declare `name` with the routing types it names (anycast when it names none)."""
        if not name:
            return
        with self._applying(via):
            self._declare_address(name, routings & {ANYCAST, MULTICAST} or {ANYCAST})
        log.info("Address %r added by the mirror from %s (%s)", name, via, ", ".join(sorted(routings)) or "anycast")
        self._stats_dirty = True

    def mirror_create_queue(self, name: str | None, address: str | None, routing, durable: bool, via: str) -> None:
        if not name or name in self.queues:
            return
        routing = str(routing or ANYCAST).lower()
        with self._applying(via):
            self._create_queue(name, address or name, routing if routing in (ANYCAST, MULTICAST) else ANYCAST,
                               durable=durable)

    def mirror_delete_queue(self, name: str, via: str) -> None:
        queue = self.queues.get(name)
        if queue is None or queue.internal:
            return
        with self._applying(via):
            self.delete_queue(queue)

    def mirror_delete_address(self, name: str | None, via: str) -> None:
        info = self.addresses.get(name or "")
        if info is not None and not info["queues"]:
            del self.addresses[name]
            self._stats_dirty = True

    def mirror_ack(self, queue_name: str | None, node: str, internal: int, via: str,
                   reason: str = mirroring.NORMAL) -> None:
        """A `postAck`: the message (origin `node`, id `internal`) was acknowledged on the other broker, for
        `reason`: an expired message is expired here too (to this broker's expiry address, as Artemis's AckManager
        does), any other is removed."""
        queue = self.queues.get(queue_name or "")
        entry = queue.keyed.get((node, internal)) if queue is not None else None
        if entry is None:
            # Not here (yet): Artemis's AckManager keeps such an acknowledgement and tries again; so does this
            # broker, for a while, in case the message is still on its way (store_mirrored applies it).
            if queue is not None:
                self.mirror_early_acks[(queue.name, node, internal)] = (reason, time.monotonic() + EARLY_ACK_S)
                while len(self.mirror_early_acks) > EARLY_ACKS_KEPT:
                    self.mirror_early_acks.popitem(last=False)
            log.debug("Mirrored acknowledgement for %s/%s on %r: no such message here yet", node, internal,
                      queue_name)
            return
        if entry.in_flight:
            # Held by a consumer here: it may still get it (the seed: both brokers can deliver it); if it
            # comes back unaccepted it is dropped then (_requeue).
            entry.mirror_acked = reason
            return
        with self._applying(via):
            self._drop_mirror_acked(queue, entry, reason)

    def _drop_mirror_acked(self, queue: Queue, entry: Entry, reason: str) -> None:
        """Apply a mirrored acknowledgement to a stored entry that no consumer holds (removed lazily from the
        heap, as `dead`)."""
        self._mirror_acked(queue, entry, reason)
        if entry in queue.delayed:
            queue.delayed.remove(entry)
        else:
            entry.removed = True
            queue.dead += 1
        self._stats_dirty = True

    def delete_queue(self, queue: Queue) -> None:
        """Destroy a queue with its messages (management, or a mirrored deleteQueue); its consumers' links are
        closed with amqp:resource-deleted."""
        self.federation.queue_deleted(queue)
        for consumer in list(queue.consumers):
            self.close_link(consumer.link, "amqp:resource-deleted", f"queue {queue.name!r} was deleted")
        if queue.name in self.queues:
            self._delete_queue(queue)
        # Now, not at the end of this turn of the loop: the management endpoint answers a DELETE as soon as this
        # returns, and a GET right after it must not find the queue in the snapshot (Artemis's destroyQueue is
        # as synchronous). Seen under load: GET /queues/NAME 200 just after DELETE /queues/NAME 200.
        self._publish_stats()
        log.info("Queue %r deleted", queue.name)

    # ---- calls from other threads (the management endpoint) ------------------------------------------------------

    def call_soon(self, function) -> concurrent.futures.Future:
        """Run `function()` on the event loop's thread; the Future has its result."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((function, future))
        if self._call_injector is not None:
            self._call_injector.trigger(ApplicationEvent("broker_call"))
        return future

    def on_broker_call(self, _event):
        while True:
            try:
                function, future = self._calls.get_nowait()
            except queue_module.Empty:
                return
            try:
                future.set_result(function())
            except Exception as exc:  # noqa: BLE001 - the caller gets the error
                future.set_exception(exc)
            self._stats_dirty = True

    # ---- hooks for management_amqp.py and transactions.py ----------------------------------------------------------

    def route_reply(self, info: dict, data: bytes) -> None:
        """A management reply (management_amqp.py) to the queues of its reply-to address; never mirrored."""
        self._route(info, next(self._ids), data, False, None, mirrored=False)

    def route_new(self, info: dict, data: bytes, durable: bool, expiry: float | None) -> None:
        """Store a message as a producer's would be, with the next message id (arrival order)."""
        self._route(info, next(self._ids), data, durable, expiry)

    def after_journal_commit(self, dlv: Delivery) -> None:
        """Accept `dlv` once this batch's journal commit is on disk."""
        self._awaiting_commit.append((dlv, Delivery.ACCEPTED))

    def close_link(self, link, name: str, description: str) -> None:
        """End a link with an error, as if its peer had closed it."""
        link.condition = Condition(name, description)
        self._link_gone(link, closed=True)
        link.close()
        log.warning("Closed link %r: %s", link.name, description)

    def _remove(self, queue: Queue, entry: Entry, reason: str = mirroring.NORMAL) -> None:
        if entry.durable:
            self.journal.delete(entry.msg_id, queue.name)
        if queue.keyed:
            queue.keyed.pop(entry.origin or (self.node_id, entry.msg_id), None)
        if not queue.internal:
            for source in self.mirrors:
                source.acked(queue, entry, self._via, reason)

    def _mirror_acked(self, queue: Queue, entry: Entry, reason: str) -> None:
        if reason == mirroring.EXPIRED:
            self._move(queue, entry, self.config.settings_for(queue.address)["expiry-address"],
                       "expired on the mirror's source", "expiry")
        else:
            self._remove(queue, entry, reason)

    def _requeue(self, queue: Queue, entry: Entry) -> None:
        if entry.mirror_acked:  # acknowledged on the other broker meanwhile: done with here too
            self._mirror_acked(queue, entry, entry.mirror_acked)
            return
        if queue.name not in self.queues:
            self._remove(queue, entry)
            return
        delay = self.config.settings_for(queue.address)["redelivery-delay"]
        if delay > 0 and entry.delivery_count > 0:
            entry.ready_at = time.monotonic() + delay / 1000.0
            queue.delayed.append(entry)
        else:
            heapq.heappush(queue.available, entry)
        self._dirty.add(queue)

    def _requeue_or_dead_letter(self, queue: Queue, entry: Entry) -> None:
        limit = self.config.settings_for(queue.address)["max-delivery-attempts"]
        if limit >= 0 and entry.delivery_count >= limit:
            self._dead_letter(queue, entry, f"{entry.delivery_count} failed delivery attempts")
        else:
            self._requeue(queue, entry)

    def _dead_letter(self, queue: Queue, entry: Entry, why: str) -> None:
        self._move(queue, entry, self.config.settings_for(queue.address)["dead-letter-address"], why, "dead-letter")

    def _move(self, queue: Queue, entry: Entry, target: str | None, why: str, kind: str) -> None:
        """Dead-letter or expire `entry`. The mirrors get its acknowledgement with the reason (killed, expired).
        A dead letter's copy is mirrored as a send; an expired one's is not, since the mirror expires its own copy
        on that acknowledgement (Artemis 2.40 QueueImpl.move: "we Disable mirror on expiration")."""
        expiry = kind == "expiry"
        self._remove(queue, entry, mirroring.EXPIRED if expiry else mirroring.KILLED)
        if not target:
            log.info("Dropped message %d from %r (%s; no %s address)", entry.msg_id, queue.name, why, kind)
            return
        info, _ = self._resolve(target, ANYCAST, for_consumer=False)
        if info is not None:
            self._route(info, next(self._ids), entry.data, entry.durable, None, entry.delivery_count,
                        mirrored=not expiry)
            log.info("Moved message %d from %r to %s address %r (%s)", entry.msg_id, queue.name, kind, target, why)

    # ---- dispatch --------------------------------------------------------------------------------------------------

    def on_link_flow(self, event):
        consumer = getattr(event.link, "broker_consumer", None)
        if consumer is not None and not consumer.closed:
            self._dirty.add(consumer.queue)

    def on_reactor_quiesced(self, _event):
        # End of a batch of I/O events: dispatch, then one journal batch (one fsync) for everything this batch
        # stored, acknowledged or moved; the producers' `accepted` (and the settlements that depend on the
        # batch) are answered once it is on disk: by the writer thread's wake-up (on_journal_durable), or, with
        # no writer thread, right here after a synchronous commit, before any frame queued here is written.
        if self._committer is not None:
            # Answers for batches that reached the disk meanwhile leave with this turn's frames, rather than in a
            # turn (and a wake-up of the client) of their own.
            self.on_journal_durable(None)
        self._dirty |= self._held  # their consumers' output may have gone out since: look again
        self._held.clear()
        while self._dirty:
            self._dispatch(self._dirty.pop())
        awaiting, self._awaiting_commit = self._awaiting_commit, []
        if self.journal is not None and self.journal.dirty:
            if self._committer is not None:
                self._committer.submit(functools.partial(_answer, awaiting))
                awaiting = []
            else:
                self.journal.commit()
        _answer(awaiting)  # nothing of theirs to write (e.g. a durable message no queue took)
        if self._stats_dirty:
            self._publish_stats()

    def on_journal_durable(self, _event):
        try:
            done = self._committer.completed()
        except OSError as exc:
            # Like Artemis on a critical journal I/O error: stop at once, without acknowledging anything more.
            log.critical("%s; stopping the broker", exc)
            logging.shutdown()
            os._exit(1)
        for on_durable in done:
            on_durable()

    def close_journal(self) -> None:
        """Shutdown: everything handed to the writer thread is on disk, then the journal is closed."""
        if self._committer is not None:
            self._committer.close()
            self._committer = None
        if self.journal is not None:
            self.journal.close()

    def _dispatch(self, queue: Queue) -> None:
        now_wall, now = time.time(), time.monotonic()
        if queue.delayed:
            ready = [e for e in queue.delayed if e.ready_at <= now]
            queue.delayed = [e for e in queue.delayed if e.ready_at > now]
            for entry in ready:
                heapq.heappush(queue.available, entry)
        skipped = []
        # Output each consumer's session already holds, plus what this call adds (read once per consumer and
        # call, then counted here).
        backlog = {c.id: _unwritten(c.link) for c in queue.consumers if not c.closed and c.link.credit > 0}
        # With no consumer of its own here, a queue gives its messages back to the network broker they came from
        # when that broker pulls them (federation.py: the consumer moved there).
        replay = queue.routing == ANYCAST and not any(c.federation_node is None for c in queue.consumers
                                                      if not c.closed)
        while queue.available:
            ready_consumers = [c for c in queue.consumers if not c.closed and c.link.credit > 0
                               and backlog.get(c.id, 0) < OUTPUT_HOLD_BYTES]
            if not ready_consumers:
                if any(b >= OUTPUT_HOLD_BYTES for b in backlog.values()):
                    self._held.add(queue)
                break
            entry = heapq.heappop(queue.available)
            if entry.removed:
                queue.dead -= 1
                continue
            if entry.expiry is not None and entry.expiry <= now_wall:
                self._move(queue, entry, self.config.settings_for(queue.address)["expiry-address"], "expired",
                           "expiry")
                continue
            eligible = [c for c in ready_consumers if c.id not in entry.excluded and (
                c.federation_node is None
                or federating.may_forward(entry.came_from, entry.hops, c.federation_node, c.max_hops)
                or (replay and entry.came_from == c.federation_node))]
            if not eligible:
                skipped.append(entry)
                continue
            consumer = eligible[queue.turn % len(eligible)]
            queue.turn += 1
            self._send(consumer, entry)
            backlog[consumer.id] = backlog.get(consumer.id, 0) + len(entry.data)
        for entry in skipped:
            heapq.heappush(queue.available, entry)
        for consumer in queue.consumers:
            link = consumer.link
            if link.drain_mode and link.credit > 0 and len(queue.available) == queue.dead:
                link.drained()
        self._stats_dirty = True

    def _send(self, consumer: Consumer, entry: Entry) -> None:
        link = consumer.link
        data = entry.data
        if entry.delivery_count:
            data = redelivered(data, entry.delivery_count) or _redelivered_by_decode(data, entry.delivery_count)
        dlv = link.delivery(str(next(self._tags)))
        link.stream(data)
        link.advance()
        if link.snd_settle_mode == Link.SND_SETTLED:
            dlv.settle()  # at-most-once consumer: settled on sending, done
            self._remove(consumer.queue, entry)
            return
        consumer.unsettled[dlv.tag] = entry
        consumer.queue.in_flight += 1
        entry.in_flight = True

    # ---- periodic work: redelivery delays and TTL ---------------------------------------------------------------

    def on_reactor_init(self, event):
        event.container.schedule(EXPIRY_SCAN_S, self)
        # Management requests (another thread) run here, on the loop's thread, woken through a pipe.
        self._call_injector = EventInjector()
        event.container.selectable(self._call_injector)
        self.connections.run(event.container)
        if self.journal is not None:
            # The writer thread wakes the event loop through a pipe when a batch is on disk.
            injector = EventInjector()
            event.container.selectable(injector)
            self._committer = GroupCommitter(
                self.journal, lambda: injector.trigger(ApplicationEvent("journal_durable")))

    def on_timer_task(self, event):
        now_wall, now = time.time(), time.monotonic()
        for queue in list(self.queues.values()):
            if any(e.ready_at <= now for e in queue.delayed):
                self._dirty.add(queue)
            expired = [e for e in queue.available if e.expiry is not None and e.expiry <= now_wall and not e.removed]
            if expired:
                queue.available = [e for e in queue.available if e not in expired]
                heapq.heapify(queue.available)
                settings = self.config.settings_for(queue.address)
                for entry in expired:
                    self._move(queue, entry, settings["expiry-address"], "expired", "expiry")
                self._stats_dirty = True
        event.container.schedule(EXPIRY_SCAN_S, self)

    # ---- management snapshot (read by the HTTP endpoint's thread) ----------------------------------------------

    def _publish_stats(self) -> None:
        rows = [{"name": q.name, "address": q.address, "routing": q.routing, "durable": q.durable,
                 "depth": q.depth, "available": len(q.available) - q.dead + len(q.delayed), "in_flight": q.in_flight,
                 "consumers": len(q.consumers), "internal": q.internal} for q in self.queues.values()]
        with self._stats_lock:
            self._stats = rows
        self._stats_dirty = False

    def stats(self) -> list[dict]:
        with self._stats_lock:
            return list(self._stats)


# ---- helpers ---------------------------------------------------------------------------------------------------


def _decode(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def _unwritten(link: Link) -> int:
    """Bytes the link's session holds that are not yet encoded into frames: what a client that stops reading
    makes pile up (the transport itself encodes only as much as its output buffer takes, tens of KiB)."""
    session = link.session
    return session.outgoing_bytes if session is not None else 0


def _redelivered_by_decode(data: bytes, delivery_count: int) -> bytes:
    """Redelivery header by a full decode, for a header peek cannot read. A message this broker cannot decode
    goes out as it came (its header unchanged) rather than stopping the broker: it was accepted once."""
    try:
        message = _decode(data)
    except Exception as exc:  # noqa: BLE001 - a stored message must never stop the dispatch of every queue
        log.warning("Redelivering a message whose header cannot be rewritten (%s): sent as it was stored", exc)
        return data
    message.delivery_count = delivery_count
    message.first_acquirer = False
    return message.encode()


def _fields_of(message: Message) -> Peek:
    return Peek(durable=bool(message.durable), priority=message.priority, to=message.address,
                ttl_ms=int(round(message.ttl * 1000)) if message.ttl else None,
                absolute_expiry_ms=int(message.expiry_time * 1000) if message.expiry_time else None)


def _expiry_of(fields: Peek) -> float | None:
    """Wall-clock expiry from the header ttl (ms) or the properties' absolute-expiry-time (ms since epoch)."""
    if fields.ttl_ms:
        return time.time() + fields.ttl_ms / 1000.0
    if fields.absolute_expiry_ms:
        return fields.absolute_expiry_ms / 1000.0
    return None


def _routing_hint(capabilities) -> str | None:
    """`topic` asks for a multicast subscription, `queue` for anycast (Artemis's AMQP conventions)."""
    caps = terminus_symbols(capabilities)
    if "topic" in caps:
        return MULTICAST
    if "queue" in caps:
        return ANYCAST
    return None


def _answer(awaiting: list[tuple[Delivery, int | None]]) -> None:
    for dlv, state in awaiting:
        if state is None:
            dlv.settle()
        else:
            _finish(dlv, state)


def _finish(dlv: Delivery, state, condition: Condition | None = None) -> None:
    if condition is not None:
        dlv.local.condition = condition
    dlv.update(state)
    dlv.settle()
