"""The reference broker: addresses and queues, store-and-forward, outcomes, journal, over proton's engine.

`Broker` is the proton handler: it owns the broker's state (addresses, queues, the journal) and hands each event
to the module that holds its rules. Where each rule is:
* registry.py: addresses and queues, auto-creation, routing a message to its queues (Artemis-compatible where
  the documents are silent); store-and-forward (000_902de7174695f2b6.txt);
* attachments.py: links attaching and going away (producers, consumers, subscriptions, security checks);
* intake.py: a producer's message, how it is stored and answered;
* dispatch.py: which consumer gets which message, redelivery delays and TTL;
* outcomes.py: consumers' outcomes (AMQP 1.0 §3.4), requeue, dead letters and expiry;
* durability.py: the journal side (recovery, message ids, answers that wait for the disk; journal.py is the
  journal itself);
* mirror_store.py: what mirroring does to the queues (mirror.py is the mirror's wire and links);
* transactions.py (AMQP 1.0 part 4), connections.py (broker connections), federation.py (network of brokers),
  management_amqp.py (management requests), access.py (security); model.py holds the records.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import queue as queue_module
import threading

from proton import Condition, Endpoint, Terminus
from proton.reactor import ApplicationEvent, EventInjector

from ..links import ServedConnections, links_of
from . import federation as federating
from .access import AccessControl
from .attachments import Attachments
from .config import BrokerConfig
from .connections import BrokerConnections
from .dispatch import Dispatcher
from .durability import Durability
from .intake import Intake
from .journal import Journal
from .link_state import LinkStates
from .management_amqp import AmqpManagement
from .mirror import node_id
from .mirror_store import MirrorStore
from .model import Consumer, Queue
from .outcomes import Outcomes
from .registry import QueueRegistry
from .transactions import Transactions

log = logging.getLogger("BROKER")

EXPIRY_SCAN_S = 0.1


class Broker(ServedConnections):
    """The proton handler of the reference broker."""

    STATE_PREFIX = "broker_"

    def __init__(self, config: BrokerConfig, journal: Journal | None = None):
        """Nothing is declared or logged yet: `start` does that, once the server holds its acceptors."""
        self.config = config
        self.journal = journal
        self.queues: dict[str, Queue] = {}
        self.addresses: dict[str, dict] = {}  # name -> {"routings": set, "queues": [Queue]}
        self.ids = itertools.count(1)  # message ids, in arrival order (durability.py: never used twice)
        self.dirty: set[Queue] = set()  # queues to dispatch at the end of this turn of the loop
        self.stats_dirty = True  # the management snapshot is to be published again
        self._stats_lock = threading.Lock()
        self._stats: list[dict] = []
        self._connections: set = set()
        self.on_shutdown = None
        self.node_id = ""  # set by start(); mirrors identify brokers by it
        self.link_states = LinkStates()  # the role of each link a client or another broker attached
        # The rules, each in one place; they change the state above.
        self.registry = QueueRegistry(self)
        self.attachments = Attachments(self)
        self.intake = Intake(self)
        self.dispatcher = Dispatcher(self)
        self.outcomes = Outcomes(self)
        self.durability = Durability(self)
        self.mirror_store = MirrorStore(self)
        self.transactions = Transactions(self)
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
            self.registry.declare_address(address.name, set(address.routings))
            for q in address.queues:
                self.registry.create_queue(q.name, address.name, q.routing, durable=q.durable, journal=False)
        recovered = self.durability.recover()
        self.node_id = node_id(self.journal.directory if self.journal is not None else None)
        self.connections.install()
        # The management endpoint answers from this snapshot, and it can be asked as soon as the broker logs
        # that it is ready, before the event loop's first turn would publish it: a recovered queue was then
        # "no queue" for a moment (tests/test_broker_process.py saw it in 1 of ~45 restarts).
        self._publish_stats()
        return recovered

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
                self.attachments.link_gone(link, closed=True)
        event.session.close()

    def _transport_gone(self, conn):
        if getattr(conn, "broker_connection", None) is not None:
            self.connections.closed(conn)  # one of our broker connections: it redials from here
        self.federation.connection_gone(conn)
        self.link_states.forget(conn)  # after _connection_gone, which ended what its links held

    def _connection_gone(self, conn):
        for link in links_of(conn):
            self.attachments.link_gone(link, closed=False)

    def on_broker_shutdown(self, _event):
        self.connections.stop()  # closing our connections must not redial them
        if self.on_shutdown is not None:
            self.on_shutdown()

    # ---- links -----------------------------------------------------------------------------------------------

    def on_link_remote_open(self, event):
        link = event.link
        answered = getattr(link, "broker_federation_answer", None)
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
            self.attachments.attach_consumer(link)
        elif link.remote_target.type == Terminus.COORDINATOR:
            self.transactions.attach(link)
        else:
            self.attachments.attach_producer(link)

    def on_link_remote_close(self, event):
        if getattr(event.link, "broker_outgoing", None) is not None:
            self.connections.link_closed(event.link)
        self.attachments.link_gone(event.link, closed=True)
        if event.link.state & Endpoint.LOCAL_ACTIVE:
            event.link.close()

    def on_link_remote_detach(self, event):
        if getattr(event.link, "broker_outgoing", None) is not None:
            self.connections.link_closed(event.link)
        self.attachments.link_gone(event.link, closed=False)
        if event.link.state & Endpoint.LOCAL_ACTIVE:
            event.link.detach()

    # ---- deliveries ----------------------------------------------------------------------------------------------

    def on_delivery(self, event):
        dlv, link = event.delivery, event.link
        state = self.link_states.get(link)
        if state.producer is not None:
            self.intake.receive(state.producer, dlv)
            return
        if state.mirror_target is not None:
            state.mirror_target.delivery(dlv)
            return
        consumer = state.consumer
        if consumer is not None:
            self.outcomes.consumer_outcome(consumer, dlv)
        elif getattr(link, "broker_federation_deliveries", None) is not None:  # federation control and event links
            link.broker_federation_deliveries(dlv)
        elif state.coordinator:
            self.transactions.control(link, dlv)

    def on_link_flow(self, event):
        consumer = self.link_states.get(event.link).consumer
        if consumer is not None and not consumer.closed:
            self.dirty.add(consumer.queue)

    # ---- the end of each turn of the event loop ------------------------------------------------------------------

    def on_reactor_quiesced(self, _event):
        # End of a batch of I/O events: dispatch, then one journal batch (one fsync) for everything this batch
        # stored, acknowledged or moved, answered once it is on disk (durability.py).
        self.durability.answer_durable()
        self.dispatcher.pump()
        self.durability.commit_turn()
        if self.stats_dirty:
            self._publish_stats()

    def on_journal_durable(self, _event):
        self.durability.on_journal_durable()

    def close_journal(self) -> None:
        """Shutdown: everything handed to the writer thread is on disk, then the journal is closed."""
        self.durability.close()

    # ---- periodic work: redelivery delays and TTL ---------------------------------------------------------------

    def on_reactor_init(self, event):
        event.container.schedule(EXPIRY_SCAN_S, self)
        # Management requests (another thread) run here, on the loop's thread, woken through a pipe.
        self._call_injector = EventInjector()
        event.container.selectable(self._call_injector)
        self.connections.run(event.container)
        self.durability.start_writer(event.container)

    def on_timer_task(self, event):
        self.dispatcher.scan()
        event.container.schedule(EXPIRY_SCAN_S, self)

    # ---- hooks for connections.py, federation.py, management_amqp.py and transactions.py ------------------------

    def add_consumer(self, link, queue: Queue) -> Consumer:
        """`link` consumes `queue`: a client's, or a sending link of a broker connection."""
        return self.attachments.add_consumer(link, queue)

    def add_outgoing_producer(self, link, address: str, routing: str, federation_side=None) -> None:
        """A receiving link this broker opened produces into `address` (attachments.py)."""
        self.attachments.add_outgoing_producer(link, address, routing, federation_side)

    def auto_create(self, address: str, routing: str) -> dict | None:
        """`address` as a consumer's attach finds or creates it (registry.py), for another broker's pull."""
        return self.registry.auto_create(address, routing)

    def route_reply(self, info: dict, data: bytes) -> None:
        """A management reply (management_amqp.py) to the queues of its reply-to address; never mirrored."""
        self.registry.route(info, next(self.ids), data, False, None, mirrored=False)

    def route_new(self, info: dict, data: bytes, durable: bool, expiry: float | None) -> None:
        """Store a message as a producer's would be, with the next message id (arrival order)."""
        self.registry.route(info, next(self.ids), data, durable, expiry)

    def apply_outcome(self, consumer: Consumer, entry, state, failed: bool = False,
                      undeliverable: bool = False) -> None:
        """A consumer's outcome for a message it held (outcomes.py), now or, for a transaction, at commit."""
        self.outcomes.apply_outcome(consumer, entry, state, failed, undeliverable)

    def after_journal_commit(self, dlv) -> None:
        """Accept `dlv` once this batch's journal commit is on disk."""
        self.durability.after_journal_commit(dlv)

    def close_link(self, link, name: str, description: str) -> None:
        """End a link with an error, as if its peer had closed it."""
        link.condition = Condition(name, description)
        self.attachments.link_gone(link, closed=True)
        link.close()
        log.warning("Closed link %r: %s", link.name, description)

    def delete_queue(self, queue: Queue) -> None:
        """Destroy a queue with its messages (management, or a mirrored deleteQueue); its consumers' links are
        closed with amqp:resource-deleted."""
        self.federation.queue_deleted(queue)
        for consumer in list(queue.consumers):
            self.close_link(consumer.link, "amqp:resource-deleted", f"queue {queue.name!r} was deleted")
        if queue.name in self.queues:
            self.registry.delete_queue(queue)
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
            self.stats_dirty = True

    # ---- management snapshot (read by the HTTP endpoint's thread) ----------------------------------------------

    def _publish_stats(self) -> None:
        rows = [{"name": q.name, "address": q.address, "routing": q.routing, "durable": q.durable,
                 "depth": q.depth, "available": len(q.available) - q.dead + len(q.delayed), "in_flight": q.in_flight,
                 "consumers": len(q.consumers), "internal": q.internal} for q in self.queues.values()]
        with self._stats_lock:
            self._stats = rows
        self.stats_dirty = False

    def stats(self) -> list[dict]:
        with self._stats_lock:
            return list(self._stats)
