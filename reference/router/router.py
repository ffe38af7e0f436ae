"""Message routing on one reference router, over Qpid Proton's protocol engine.

The router is a proton event handler. It never stores messages: a producer gets credit only while its
address has a consumer (003_9cdc7c48796dae4f.txt §12.1.1.1), each message is routed when it arrives
(§12.1.1.3), and outcomes travel back from consumers to producers by the rules of §12.1.1.4.

Vocabulary used below (the router's point of view is reversed from the client's):
* a *producer* is a client sender; the router holds the receiving end of its link;
* a *consumer* is a client receiver; the router holds the sending end of its link;
* an *inbound* delivery is one a producer sent; each copy the router makes for a consumer is an *outbound*.

Outbound copies wait in a per-consumer FIFO until the consumer grants credit. Sending is done by a pump
that runs once per batch of I/O events, per connection, and serves the consumer links of that connection
in priority order (§12.1.3): the head copy with the highest priority goes first; address priority, when
configured, replaces the message's own priority.

An inter-router connection carries every address on one data link, so there the copies wait in one queue
per priority (`PriorityPending`): a later high-priority copy overtakes earlier low-priority ones still
waiting for the neighbour's credit. And the pump hands that link no more while the connection's output is
backed up (`OUTPUT_HOLD_BYTES` not yet written to the socket), so that copies wait in the router, where they
can still be overtaken, rather than in the engine's buffers, where they cannot. qdrouterd gets the same
effect from one inter-router link per priority and its "Q3" limit on a session's outgoing bytes.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass, field

from proton import Condition, Delivery, Endpoint, Link, Message, Terminus, symbol

from ..links import ServedConnections, links_of, read_message, refuse, terminus_symbols
from ..security import authenticated_user, peer_certificate_cn
from ..peek import annotation_keys, annotations, encode_annotations, replace_section, routing_view, with_annotations
from . import raw
from .addressing import AddressTable
from .config import AddressSection, AutoLink, Connector, LinkRoute, Listener, RouterConfig
from .connectors import Connectors
from .distribution import BALANCED, MULTICAST, RoundRobin, pick_anycast
from .autolinks import AutoLinks
from .interrouter import CONTROL_CREDIT, DESTS, TO, Mesh
from .keys import FALLBACK, PHASE1, plain_address
from .linkroutes import LinkRouter
from .management import Agent
from .settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED, combine_multicast

log = logging.getLogger("ROUTER")
msglog = logging.getLogger("MESSAGE")

DEFAULT_LINK_CAPACITY = 250
CONTROL_LOW_CREDIT = 500
DEFAULT_MESSAGE_PRIORITY = 4  # AMQP 1.0 §3.2.1 header.priority default
OUTPUT_HOLD_BYTES = 256 * 1024  # an inter-router link is served no more while this much output waits

_TERMINAL = {
    Delivery.ACCEPTED: ACCEPTED,
    Delivery.REJECTED: REJECTED,
    Delivery.RELEASED: RELEASED,
    Delivery.MODIFIED: MODIFIED,
}
_STATE_OF = {name: state for state, name in _TERMINAL.items()}
# The delivery counters management shows (router.link, router.address, router): kept here, where routing happens
_ZERO_COUNTS = {"delivered": 0, "presettled": 0, ACCEPTED: 0, REJECTED: 0, RELEASED: 0, MODIFIED: 0}
_ZERO_ADDRESS = {"ingress": 0, "egress": 0, "transit": 0, "to_container": 0, "from_container": 0, "fallback": 0}
_ZERO_TOTALS = {**_ZERO_ADDRESS, "presettled": 0, ACCEPTED: 0, REJECTED: 0, RELEASED: 0, MODIFIED: 0,
                "ingress_route_container": 0, "egress_route_container": 0}
_OUTCOME_OF = {state.value: name for state, name in _TERMINAL.items()}  # remote state number -> outcome


@dataclass(eq=False)
class Producer:
    link: Link
    address: str | None  # None: anonymous sender, routed per message by its `to`
    capacity: int
    undelivered: int = 0  # inbound deliveries not finished (copies unsent, or unsettled ones not yet settled)
    closed: bool = False
    from_neighbour: bool = False  # the data link from a neighbour router
    neighbour: object = None  # that router (interrouter.Neighbour), once a message came
    route_key: str | None = None  # where its messages go; the address, or a phase-1 key for in-autolinks
    allow_fallback: bool = True  # in-autolinks must not send back to a fallback destination
    draining: bool = False  # we asked for its credit back (_revoke_one) and have not called that off since
    container: bool = False  # on a route-container connection (an in-autolink or waypoint link from a broker)
    conn_state: object = None  # its connection's ConnectionState
    # An in-autolink's messages that came with no consumer reachable (on credit granted while one was, or
    # during the drain that withdraws it): kept unsettled, in order, for the next consumer (_park)
    parked: deque = field(default_factory=deque)
    counts: dict = field(default_factory=lambda: dict(_ZERO_COUNTS))  # management's router.link counters

    def __post_init__(self):
        self.impl = self.link._impl  # the engine's link, for the per-message calls (raw.py)


@dataclass(eq=False)
class Consumer:
    link: Link
    address: str
    conn: ConnectionState
    pending: deque = field(default_factory=deque)  # Outbound copies waiting for credit
    in_flight: set = field(default_factory=set)  # Outbound copies sent and not yet settled
    cost: int = 0  # a local consumer; router networks add path costs
    closed: bool = False
    neighbour: bool = False  # the data link to a neighbour router, not a client
    edge: bool = False  # stands for an edge router's consumers of this address (interior side)
    counts: dict = field(default_factory=lambda: dict(_ZERO_COUNTS))  # management's router.link counters
    container: bool = False  # on a route-container connection (an out-autolink or waypoint link to a broker)

    def __post_init__(self):
        self.impl = self.link._impl  # the engine's link, for the per-message calls (raw.py)
        self.session_impl = raw.link_session(self.impl)  # its session, whose output the pump watches (neighbours)
        # Read once: a sending link's settle mode is fixed when it is attached, which is before it is a consumer.
        self.at_most_once = self.link.snd_settle_mode == Link.SND_SETTLED

    @property
    def outstanding(self) -> int:
        return len(self.pending) + len(self.in_flight)


@dataclass(eq=False, slots=True)
class Inbound:
    delivery: object  # the engine's delivery (a pointer, held until settled: raw.hold / raw.release)
    producer: Producer
    presettled: bool
    multicast: bool
    copies: int = 0
    unsent: int = 0
    credit_on_send: bool = False  # its producer's credit comes back once every copy is sent (_copy_sent_or_dropped)
    outcomes: list = field(default_factory=list)
    done: bool = False


@dataclass(eq=False, slots=True)
class Outbound:
    inbound: Inbound
    consumer: Consumer
    data: bytes
    priority: int
    seq: int
    delivery: object = None  # the engine's delivery once sent unsettled (a key of Router.outbound_of)
    dests: tuple = ()  # remote routers this copy is for (copies sent to a neighbour)


class PriorityPending:
    """The copies waiting on an inter-router data link: FIFO within a priority, highest priority first.
    Stands in for the deque a consumer link's copies wait in (append, popleft, [0], len, iteration, clear).

    Every message to a neighbour goes through here, so the queue the next copy comes from is kept at hand
    (`_head`) instead of being looked for on each look and each pop."""

    def __init__(self):
        self._queues: dict[int, deque] = {}  # priority -> copies, highest priority first
        self._size = 0  # asked for on every pump, so counted rather than summed
        self._head: deque | None = None  # the highest-priority queue with a copy in it; None when empty
        self._head_priority = -1

    def append(self, out: Outbound) -> None:
        priority = out.priority
        queue = self._queues.get(priority)
        if queue is None:
            queue = self._queues[priority] = deque()
            self._queues = dict(sorted(self._queues.items(), reverse=True))
        queue.append(out)
        self._size += 1
        if priority > self._head_priority:  # an empty queue's head priority is -1, below any message's
            self._head, self._head_priority = queue, priority

    def _find_head(self) -> None:
        for priority, queue in self._queues.items():
            if queue:
                self._head, self._head_priority = queue, priority
                return
        self._head, self._head_priority = None, -1

    def popleft(self) -> Outbound:
        head = self._head
        if head is None:
            raise IndexError("no copy waiting")
        out = head.popleft()
        self._size -= 1
        if not head:
            self._find_head()
        return out

    def __getitem__(self, index: int) -> Outbound:
        if index != 0 or self._head is None:
            raise IndexError("only the head copy can be looked at")
        return self._head[0]

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self):
        for queue in self._queues.values():
            yield from queue

    def clear(self) -> None:
        self._queues.clear()
        self._size = 0
        self._head, self._head_priority = None, -1


@dataclass(eq=False)
class ConnectionState:
    role: str = "normal"  # normal | inter-router | route-container | edge
    producers: set = field(default_factory=set)
    consumers: set = field(default_factory=set)
    closed: bool = False
    last_delivery: float | None = None  # when a message last came or went on it (management's lastDlvSeconds)


@dataclass(eq=False)
class RemotePath:
    """The way to a remote router, as a destination anycast can choose (cost = path cost)."""

    router_id: str
    cost: int
    outstanding: int = 0


class Router(ServedConnections):
    """The proton handler implementing message routing for one router."""

    STATE_PREFIX = "router_"

    def __init__(self, config: RouterConfig, link_capacity: int | None = None):
        self.config = config
        self.router_id = config.router.id or "Router.A"
        self.link_capacity = link_capacity or DEFAULT_LINK_CAPACITY
        self.address_config: AddressTable[AddressSection] = AddressTable()
        for section in config.addresses:
            self.address_config.add(section.match_pattern, section)
        self.consumers: dict[str, list[Consumer]] = {}
        self.producers: dict[str, set[Producer]] = {}
        self._ties: dict[str, RoundRobin] = {}
        self._dirty: set[ConnectionState] = set()
        self._held: set[ConnectionState] = set()  # inter-router connections whose output is backed up
        self._seq = itertools.count()
        self._tags = itertools.count()
        self.stats = {"routed": 0, "no_route": 0}
        self._connections: set = set()
        self.listener_of: dict = {}  # acceptor -> listener section (set by the server)
        self.connectors = Connectors(self, config.connectors, config)
        self.mesh = Mesh(self, config.router.mode) if config.router.mode in ("interior", "edge") else None
        self.remote_paths: dict[str, RemotePath] = {}
        self._reachable_remote: set[str] = set()
        self.link_router = LinkRouter(self, config.link_routes)
        self.autolinks = AutoLinks(self, config.auto_links)
        # The message path finds its state by the engine's pointers (raw.py), not through proton's wrappers:
        self.message_links: dict = {}  # link pointer -> Producer or Consumer
        self.outbound_of: dict = {}  # pointer of a copy sent unsettled -> Outbound
        # The MESSAGE log at debug (one line per message), asked once: the server configures logging before it
        # makes the router, and asking per message was some 3% of the router's CPU.
        self._trace_messages = msglog.isEnabledFor(logging.DEBUG)
        self._encoded_annotations: dict = {}  # (key, router ids) -> peek.Annotations for copies to neighbours
        self._routing_by_section: dict = {}  # a neighbour's message-annotations section -> _Routing
        # Plans that involve no choice (one destination, multicast, none), by (address, distribution, dests);
        # emptied whenever consumers or the network change (_routes_changed).
        self._fixed_plans: dict = {}
        # Delivery counters for management (reference/router/management.py), counted where routing happens:
        self.totals = dict(_ZERO_TOTALS)  # the router entity's
        self.address_stats: dict[str, dict] = {}  # routing key -> the router.address entity's
        self._counted_parked: set = set()  # parked deliveries counted already (parked for want of a route)
        self.now = time.time()  # the end of the last batch of I/O: read per message, so not asked per message
        self.listen_hook = None  # set by the server: listener section -> acceptor (a listener created live)
        self.listening_port = lambda _listener: None  # set by the server: a listener section's bound port
        self.agent = Agent(self)
        self._agent_keys = self.agent.keys

    def on_reactor_init(self, event):
        self.connectors.start(event.container)
        self._advertise()  # our management agent's address, before any consumer comes

    # ---- shutdown ---------------------------------------------------------------------------------------

    on_shutdown = None  # set by the server: what to do when a shutdown is requested

    def on_router_shutdown(self, _event):
        if self.on_shutdown is not None:
            self.on_shutdown()

    # ---- connection and session lifecycle -------------------------------------------------------------

    def on_connection_init(self, event):
        conn = event.connection
        self._connections.add(conn)
        conn.container = self.router_id
        conn.offered_capabilities = symbol("ANONYMOUS-RELAY")
        listener = self.listener_of.get(getattr(conn, "_acceptor", None))
        role = getattr(conn, "router_role", None) or (listener.role if listener else "normal")
        _state_of(conn, create=True).role = role
        conn.router_cost = listener.cost if listener else self._dialer_cost(conn)
        dialer = getattr(conn, "router_dialer", None)
        conn.router_name = dialer.config.name if dialer is not None else (listener.name if listener else None)

    def open_connections(self):
        return [c for c in self._connections if c.state & Endpoint.LOCAL_ACTIVE and c.state & Endpoint.REMOTE_ACTIVE]

    def links_of(self, conn):
        return list(links_of(conn))

    def _advertise_link_routes(self) -> None:
        if self.mesh is not None:
            self.mesh.publish_link_routes(self.link_router.local_keys())

    def _dialer_cost(self, conn) -> int:
        dialer = getattr(conn, "router_dialer", None)
        return dialer.config.cost if dialer is not None else 1

    def on_connection_remote_open(self, event):
        conn = event.connection
        if conn.state & Endpoint.LOCAL_UNINIT:
            conn.open()
        self._note_for_management(conn)
        self.connectors.opened(conn)
        state = _state_of(conn, create=True)
        log.info("Connection from %s opened (container %s, role %s)", _peer_of(conn), conn.remote_container,
                 state.role)
        if state.role in ("inter-router", "edge") and self.mesh is not None:
            self.mesh.connection_up(conn, conn.router_cost)
        if state.role == "route-container":
            self._advertise_link_routes()
        self.autolinks.connection_up(conn)

    def _note_for_management(self, conn) -> None:
        """What management shows of a connection that it cannot read later: the peer's address, when it opened."""
        conn.mgmt_opened = time.time()
        container = self.connectors.container
        peers = getattr(container, "_peers", None)
        if peers is not None:
            from ..loop import _name_of
            conn.mgmt_host = _name_of(conn, peers)
        user = authenticated_user(conn)  # the loop's own SASL layer (a listener with a SASL policy)
        if user is not None:
            conn.mgmt_user = user
            conn.mgmt_sasl = "ANONYMOUS" if user == "anonymous" else (
                "EXTERNAL" if peer_certificate_cn(conn) else "PLAIN")
            return
        transport = conn.transport  # else proton's: its ANONYMOUS exchange, when the client did one
        try:
            if transport is not None and transport.authenticated:
                conn.mgmt_user = transport.user
                conn.mgmt_sasl = transport.sasl().mech or None
        except Exception:  # no SASL on this transport
            pass

    def on_session_remote_close(self, event):
        """A peer ended a session (RabbitMQ does so on any link error): its links are gone with it."""
        session = event.session
        ended = [link for link in links_of(session.connection) if link.session == session]
        for link in ended:
            pair = getattr(link, "router_pair", None)
            if pair is not None:
                self.link_router.detached(link, closed=True)
            else:
                self._link_gone(link)
        session.close()
        self.autolinks.session_ended(ended, session.connection, self.connectors.container)

    def _transport_gone(self, conn):
        self.connectors.closed(conn)  # a connector's connection: it redials from here

    def _connection_gone(self, conn):
        state = _state_of(conn)
        if state is None or state.closed:
            return
        state.closed = True
        self._dirty.discard(state)
        self._held.discard(state)
        for consumer in list(state.consumers):
            self._drop_consumer(consumer)
        for producer in list(state.producers):
            self._drop_producer(producer)
        if state.role in ("inter-router", "edge") and self.mesh is not None:
            self.mesh.connection_lost(conn)
        self._routed_links_lost(conn)
        if state.role == "route-container":
            self._advertise_link_routes()
        log.info("Connection from %s closed", _peer_of(conn))

    def _routed_links_lost(self, conn) -> None:
        """Link-routed pairs with one end on a lost connection: tell the other end."""
        self.link_router.connection_lost(conn)
        for link in links_of(conn):
            pair = getattr(link, "router_pair", None)
            if pair is not None and link == pair.near and not pair.closed:
                pair.closed = True
                if pair.far.state & Endpoint.LOCAL_ACTIVE:
                    pair.far.close()

    # ---- link attach and detach ------------------------------------------------------------------------

    def on_link_remote_open(self, event):
        link = event.link
        if getattr(link, "router_pair", None) is not None and link.state & Endpoint.LOCAL_ACTIVE:
            self.link_router.far_attached(link)
            return
        if self.autolinks.is_autolink(link):
            self.autolinks.attached(link)
            return
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        role = _state_of(link.connection, create=True).role
        if role in ("inter-router", "edge") and self.mesh is not None and self.mesh.attach(link):
            return
        routed = self.link_router.match(link)
        if routed is not None:
            self.link_router.attach(link, *routed)
        elif role == "inter-router":
            refuse(link, "amqp:not-allowed", "unexpected link on an inter-router connection", log)
        elif link.is_receiver and link.remote_target.type == Terminus.COORDINATOR:
            # The router is no coordinator (003 §12.2.2): without a $coordinator link route, say so at
            # once rather than take the link as an anonymous sender whose declares nobody answers.
            refuse(link, "amqp:precondition-failed",
                   "the router does not coordinate transactions; a linkRoute for $coordinator is needed", log)
        elif link.is_sender:
            self._attach_consumer(link)
        else:
            self._attach_producer(link)

    def _attach_consumer(self, link):
        source = link.remote_source
        if self._attached_as_waypoint(link, source):
            return
        if source.dynamic:
            address = f"amqp:/_topo/0/{self.router_id}/temp.{secrets.token_hex(8)}"
        elif source.address:
            address = source.address
        else:
            refuse(link, "amqp:invalid-field", "a receiver needs a source address or a dynamic source", log)
            return
        link.source.copy(source)
        link.source.address = address
        link.target.copy(link.remote_target)
        link.open()
        self.add_consumer(link, self._consumer_key(address))

    def _attached_as_waypoint(self, link, terminus) -> bool:
        """A link whose terminus (the source a consumer asks for, the target a producer sends to) has an address
        and a qd.waypoint capability is a broker's waypoint link: True once _attach_waypoint has taken it."""
        ordinal = _waypoint_ordinal(terminus.capabilities)
        if terminus.address and ordinal:
            self._attach_waypoint(link, terminus.address, ordinal)
            return True
        return False

    def _attach_waypoint(self, link, address: str, ordinal: int) -> None:
        """A broker that is the waypoint's store attaches with the `qd.waypoint` terminus capability (an Artemis
        `<peer>` broker connection, 002_f23507c2891d6d06.txt "Peers"): in place of the router's autolinks, its
        receiving link consumes phase 0 of the address (what producers send) and its sending link feeds phase 1
        (what consumers receive), as qdrouterd does for ordinal 1 (`qd.waypoint` or `qd.waypoint.1`). The
        reference has two phases, so higher ordinals are refused."""
        if ordinal != 1:
            refuse(link, "amqp:not-implemented", f"waypoint ordinal {ordinal} (the reference router has one "
                   "waypoint per address: qd.waypoint or qd.waypoint.1)", log)
            return
        section = self.address_config.lookup(address)
        if section is None or not section.waypoint:
            refuse(link, "amqp:precondition-failed", f"{address!r} is no waypoint address of this router "
                   "(an address section with waypoint: yes is needed)", log)
            return
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        if link.is_sender:
            self.add_consumer(link, address)
        else:
            self.add_producer(link, PHASE1 + address, allow_fallback=False)
        log.info("Waypoint %r: the broker's %s link attached", address, "receiving" if link.is_sender else "sending")

    def _consumer_key(self, address: str) -> str:
        section = self.address_config.lookup(address)
        return PHASE1 + address if section is not None and section.waypoint else address

    def add_consumer(self, link, key: str) -> Consumer:
        """Register an open sending link as a destination for `key` (clients and out-autolinks alike)."""
        conn_state = _state_of(link.connection, create=True)
        consumer = Consumer(link=link, address=key, conn=conn_state, container=conn_state.role == "route-container")
        link.router_consumer = consumer
        self.message_links[consumer.impl] = consumer
        conn_state.consumers.add(consumer)
        first = key not in self.consumers
        self.consumers.setdefault(key, []).append(consumer)
        self._routes_changed()
        log.info("Consumer attached on %r (%d now)", key, len(self.consumers[key]))
        if first:
            self._credit_changed(key)
            self._advertise()
        self._dirty.add(conn_state)
        return consumer

    def _attach_producer(self, link):
        target = link.remote_target
        if self._attached_as_waypoint(link, target):
            return
        if target.dynamic:
            refuse(link, "amqp:not-implemented", "dynamic targets are not supported by the reference router", log)
            return
        address = target.address or None
        link.target.copy(target)
        link.source.copy(link.remote_source)
        link.open()
        self.add_producer(link, address)

    def add_producer(self, link, key: str | None, allow_fallback: bool = True) -> Producer:
        """Register an open receiving link as a source of messages for `key` (None: routed per message)."""
        conn_state = _state_of(link.connection, create=True)
        producer = Producer(link=link, address=key, capacity=self.link_capacity, route_key=key,
                            allow_fallback=allow_fallback, container=conn_state.role == "route-container",
                            conn_state=conn_state)
        link.router_producer = producer
        self.message_links[producer.impl] = producer
        conn_state.producers.add(producer)
        if key is not None:
            self.producers.setdefault(key, set()).add(producer)
        log.info("Producer attached on %s", repr(key) if key else "anonymous link")
        self._top_up(producer)
        return producer

    def on_link_remote_close(self, event):
        link = event.link
        if self._pair_ended(link, closed=True):
            return
        self._link_gone(link)
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.close()

    def on_link_remote_detach(self, event):
        if not self._pair_ended(event.link, closed=False):
            self.on_link_remote_close(event)

    def _pair_ended(self, link, closed: bool) -> bool:
        """A link-routed link's detach (closing or not) is its pair's: the far end gets the same one, and this
        end is answered in kind. False for any other link."""
        if getattr(link, "router_pair", None) is None:
            return False
        self.link_router.detached(link, closed=closed)
        if link.state & Endpoint.LOCAL_ACTIVE:
            if closed:
                link.close()
            else:
                link.detach()
        return True

    def _link_gone(self, link):
        consumer = getattr(link, "router_consumer", None)
        if consumer is not None:
            self._drop_consumer(consumer)
        producer = getattr(link, "router_producer", None)
        if producer is not None:
            self._drop_producer(producer)

    def _drop_consumer(self, consumer: Consumer):
        """A consumer left: copies it never got are released, copies it may have got are in doubt."""
        if consumer.closed:
            return
        consumer.closed = True
        self._routes_changed()
        if self.message_links.get(consumer.impl) is consumer:
            del self.message_links[consumer.impl]
        consumer.conn.consumers.discard(consumer)
        remaining = self.consumers.get(consumer.address, [])
        if consumer in remaining:
            remaining.remove(consumer)
        if not remaining and not consumer.neighbour:
            self.consumers.pop(consumer.address, None)
            self._advertise()
            self._credit_changed(consumer.address)
        stranded, in_doubt = list(consumer.pending), list(consumer.in_flight)
        consumer.pending.clear()
        consumer.in_flight.clear()
        for out in stranded:
            self._copy_sent_or_dropped(out.inbound)
            self._copy_final(out, RELEASED)
        for out in in_doubt:
            self.outbound_of.pop(out.delivery, None)
            self._copy_final(out, MODIFIED)
        log.info("%s detached from %r: %d released, %d modified (in doubt)",
                 "Neighbour data link" if consumer.neighbour else "Consumer", consumer.address, len(stranded),
                 len(in_doubt))

    def _drop_producer(self, producer: Producer):
        if producer.closed:
            return
        producer.closed = True
        for dlv, _ in producer.parked:  # gone with the link: the broker keeps them, unsettled
            self._counted_parked.discard(dlv)
            raw.release(dlv)
        producer.parked.clear()
        if self.message_links.get(producer.impl) is producer:
            del self.message_links[producer.impl]
        if producer.address is not None:
            peers = self.producers.get(producer.address)
            if peers is not None:
                peers.discard(producer)
                if not peers:
                    del self.producers[producer.address]
        conn_state = _state_of(producer.link.connection)
        if conn_state is not None:
            conn_state.producers.discard(producer)

    # ---- credit ------------------------------------------------------------------------------------------

    def _reachable(self, key: str, fallback: bool = True) -> bool:
        if self.consumers.get(key) or key in self._reachable_remote or self.agent.is_mine(key):
            return True
        if fallback and key == plain_address(key):
            section = self.address_config.lookup(key)
            if section is not None and section.enable_fallback:
                return self._reachable(FALLBACK + key, fallback=False)
        return False

    def _credit_changed(self, key: str) -> None:
        """Destinations for `key` came or went: open or withdraw credit of the producers it concerns."""
        affected = set(self.producers.get(key, ()))
        if key.startswith(FALLBACK):
            affected |= self.producers.get(plain_address(key), set())
        for producer in affected:
            if self._reachable(producer.route_key, producer.allow_fallback):
                self._unpark(producer)
                self._top_up(producer)
            else:
                self._revoke_one(producer)

    def _park(self, producer: Producer, dlv, data) -> None:
        """Keep an in-autolink's message that has nowhere to go, unsettled, until a consumer comes back.

        Released instead, it would go back to the broker, which puts it back in the queue as it sees fit: the
        fallback and waypoint queues keep their order (003 §12.1.4.3: the order of messages stored at a fallback
        destination is preserved), but a broker that puts each released message back at the head turned 5, 6
        into 6, 5 when both had come on credit still open after the last consumer left. What is parked counts
        against the link's capacity, so no more is asked for meanwhile."""
        raw.hold(dlv)
        producer.parked.append((dlv, data))
        producer.undelivered += 1

    def _unpark(self, producer: Producer) -> None:
        """A consumer is reachable again: route the parked messages first, in the order they came."""
        parked, producer.parked = producer.parked, deque()
        for dlv, data in parked:
            producer.undelivered -= 1
            self._route(producer, dlv, data, unparking=True)
            raw.release(dlv)  # _route holds what it keeps

    # ---- the router network --------------------------------------------------------------------------------

    def _advertise(self) -> None:
        """Tell the network which addresses have consumers here (mobile addresses, §12.1.1.2)."""
        if self.mesh is not None:
            self.mesh.publish_addresses(self.consumers.keys() | set(self.agent.own_topological))
            self.mesh.publish_reach()

    def edge_addresses(self, neighbour, keys: set) -> None:
        """An edge router's consumer addresses: served here through the edge's data link, as local ones."""
        for key in set(neighbour.edge_consumers) - keys:
            self._drop_consumer(neighbour.edge_consumers.pop(key))
        for key in keys - set(neighbour.edge_consumers):
            consumer = self.add_consumer(neighbour.data_consumer.link, key)
            consumer.edge = True
            neighbour.edge_consumers[key] = consumer
        neighbour.data_consumer.link.router_consumer = neighbour.data_consumer
        self.message_links[neighbour.data_consumer.impl] = neighbour.data_consumer

    def reach_for_edge(self, neighbour) -> set:
        """Addresses an edge reaches through us: consumers anywhere but on that edge itself."""
        edge_state = _state_of(neighbour.connection)
        local = {key for key, consumers in self.consumers.items()
                 if any(not c.closed and c.conn is not edge_state for c in consumers)}
        return local | self._reachable_remote

    def network_changed(self) -> None:
        """Paths or remote addresses changed: refresh remote paths, then open or close producer credit."""
        self._routes_changed()
        routes = self.mesh.routes() if self.mesh is not None else {}
        for rid in list(self.remote_paths):
            if rid not in routes:
                del self.remote_paths[rid]
        for rid, route in routes.items():
            path = self.remote_paths.setdefault(rid, RemotePath(rid, route.cost))
            path.cost = route.cost
        before, self._reachable_remote = self._reachable_remote, (
            self.mesh.state.reachable_addresses() if self.mesh is not None else set())
        for key in before ^ self._reachable_remote:
            self._credit_changed(key)
        if self.mesh is not None:
            self.mesh.publish_reach()

    def add_neighbour_sender(self, conn, link) -> Consumer:
        """Our data link towards a neighbour: the pump serves it like a consumer link."""
        state = _state_of(conn, create=True)
        consumer = Consumer(link=link, address="", conn=state, neighbour=True, pending=PriorityPending())
        link.router_consumer = consumer
        self.message_links[consumer.impl] = consumer
        state.consumers.add(consumer)
        return consumer

    def add_neighbour_receiver(self, link) -> None:
        """The neighbour's data link to us: an anonymous producer whose messages say where they go."""
        state = _state_of(link.connection, create=True)
        producer = Producer(link=link, address=None, capacity=self.link_capacity, from_neighbour=True,
                            conn_state=state)
        link.router_producer = producer
        self.message_links[producer.impl] = producer
        state.producers.add(producer)
        link.open()
        self._top_up(producer)

    def _top_up(self, producer: Producer):
        """Keep a producer's credit window full while its address can be delivered to."""
        link = producer.impl
        credit = raw.credit(link)
        want = producer.capacity - producer.undelivered - credit
        # Grant in batches (a quarter window at least) unless the producer ran dry. Asked after every message,
        # so what decides that no grant is due comes first, and is cheap.
        if (want <= 0 or credit and want * 4 < producer.capacity) and not producer.draining:
            return
        if producer.closed or not raw.link_active(link):
            return
        if producer.route_key is not None and not self._reachable(producer.route_key, producer.allow_fallback):
            return
        if producer.draining:
            # A destination is back while our drain is unanswered (the producer may answer it late, or its
            # answer may still be on the wire): call the drain off now, with a window, rather than wait for an
            # answer that may never come (issue 53: a producer that answered 0.2 s or more later never got credit
            # again, as this returned on the credit it still seemed to hold). AMQP 1.0 §2.6.7: a flow with drain
            # false ends the drain; an answer that crosses it only lowers the credit seen here, and its flow event
            # tops the window up again. The flow must change the credit for proton to send it at all, hence 1.
            producer.draining = False
            raw.set_drain_mode(link, False)
            want = max(want, 1)
        raw.flow(link, want)

    def _revoke_one(self, producer: Producer):
        """No destination left: ask the producer to give back unused credit (drain), so none is sent on."""
        link = producer.link
        if not producer.closed and link.state & Endpoint.LOCAL_ACTIVE and link.credit > 0:
            link.drain(0)
            producer.draining = True

    def on_link_flow(self, event):
        pair = getattr(event.link, "router_pair", None)
        if pair is not None:
            self.link_router.flow(pair)
            return
        producer = getattr(event.link, "router_producer", None)
        if producer is not None:
            # The producer changed its side of the credit, most often by answering a drain. That answer may
            # come after a consumer became reachable again (the grant then was held back because the old
            # credit still looked unused): its window is ours to refill now, or it never gets credit again.
            self._top_up(producer)
            return
        consumer = getattr(event.link, "router_consumer", None)
        if consumer is not None and not consumer.closed:
            self._dirty.add(consumer.conn)

    # ---- deliveries ----------------------------------------------------------------------------------------

    def on_delivery(self, event):
        # The message path first, on the engine's pointers (raw.py): a complete message from a producer, or an
        # outcome for a copy. Whatever it does not take (partial or aborted transfers, other links) goes on below.
        event_impl = event.raw
        role = self.message_links.get(raw.event_link(event_impl))
        if role is not None:
            impl = raw.event_delivery(event_impl)
            if role.__class__ is Producer:
                data = raw.read_complete(role.impl, impl)
                if data is not None:
                    self._route(role, impl, data)
                    return
            else:
                out = self.outbound_of.get(impl)
                if out is not None:
                    self._consumer_disposition(out, impl)
                    return
        dlv, link = event.delivery, event.link
        if getattr(link, "control_from", False):
            self._control(link, dlv)
            return
        if getattr(link, "router_pair", None) is not None:
            self.link_router.delivery(link, dlv)
            return
        producer = getattr(link, "router_producer", None)
        if producer is not None:
            self._receive(producer, dlv)
            return
        if dlv.settled:
            dlv.settle()  # a copy we had already let go of: just free it

    def _receive(self, producer: Producer, dlv: Delivery):
        data = read_message(producer.link, dlv)
        if data is not None:
            self._route(producer, dlv._impl, data)

    def _route(self, producer: Producer, dlv, data, unparking: bool = False):
        """Route one complete message (`dlv` is the engine's delivery, see raw.py)."""
        if producer.parked and not unparking:  # behind the parked ones, to keep the order
            self._park(producer, dlv, data)
            return
        link = producer.link
        # Most messages need only `to` and the priority, and from a neighbour the two annotations it added: read
        # those in one walk, without a decode (reference/peek.py), the annotations once per distinct section.
        view = routing_view(data)
        routing = _NO_ROUTING
        if view is not None and producer.from_neighbour and view.has_annotations:
            routing = self._routing_of(data, view)
            if routing is None:
                view = None
        if view is not None:
            to, priority = view.to, view.priority
        else:
            message = Message()
            try:
                message.decode(data)
            except Exception as exc:  # a malformed message is refused, the link carries on
                _finish(dlv, REJECTED, condition=Condition("amqp:decode-error", f"cannot decode message: {exc}"),
                        held=False)
                self._count_outcome(producer, REJECTED)
                self._top_up(producer)
                return
            to, priority = message.address, message.priority
            if producer.from_neighbour:
                routing = _routing_from(message.annotations or {})
        presettled = raw.settled_by_peer(dlv)
        dests = None
        exclude = None
        if producer.from_neighbour:  # routed to us by a neighbour: the annotations say where it goes
            key = routing.to
            neighbour = producer.neighbour
            if neighbour is None:  # looked up once per link: it is the same for every message
                neighbour = producer.neighbour = getattr(link.connection, "router_neighbour", None)
            if neighbour is not None and neighbour.edge:
                exclude = _state_of(link.connection)  # from an edge: route it anew, but not back to that edge
            elif routing.dests is not None:
                dests = routing.dests
            else:
                dests = frozenset((self.router_id,))  # from our interior uplink (we are an edge): deliver here
        else:
            key = producer.route_key or to
        if not key:
            if not presettled:
                _finish(dlv, REJECTED, condition=Condition(
                    "amqp:invalid-field", "anonymous link: the message has no 'to' address"), held=False)
                self._count_outcome(producer, REJECTED)
            else:
                raw.settle(dlv)
            producer.counts["delivered"] += 1
            self._top_up(producer)
            return
        address = plain_address(key)
        counted = unparking and dlv in self._counted_parked  # parked after it was counted (below)
        if counted:
            self._counted_parked.discard(dlv)
        stats = self._count_in(producer, key, presettled, counted)
        if address in self._agent_keys and (dests is None or self.router_id in dests):
            self._to_agent(producer, dlv, data, presettled)
            return
        section = self.address_config.lookup(address)
        distribution = section.distribution if section else BALANCED
        priority = _effective_priority(section, priority)
        if dests is None and producer.allow_fallback and section is not None and section.enable_fallback \
                and not self._has_destinations(key):
            key = FALLBACK + key  # no consumer reachable: divert to the fallback destinations (§12.1.4.3)
            stats["fallback"] += 1
            self.totals["fallback"] += 1
        local, remote, unroutable = self._plan(key, distribution, dests, exclude)
        multicast = distribution == MULTICAST
        if not local and not remote or (unroutable and not multicast):
            # No route: a router stores nothing, so an unsettled message goes back released; but one from an
            # in-autolink waits for the next consumer (_park).
            if not presettled and not producer.allow_fallback and not producer.closed:
                self._park(producer, dlv, data)
                self._counted_parked.add(dlv)
                return
            self.stats["no_route"] += 1
            if presettled:
                raw.settle(dlv)
            else:
                _finish(dlv, RELEASED, held=False)
                self._count_outcome(producer, RELEASED)
            self._top_up(producer)
            return
        inbound = Inbound(delivery=dlv, producer=producer, presettled=presettled, multicast=multicast,
                          credit_on_send=presettled or producer.from_neighbour)
        if presettled:
            raw.settle(dlv)  # the router settles pre-settled deliveries itself (§12.1.1.4)
        else:
            raw.hold(dlv)  # kept until its outcome is known: _finish lets go
        inbound.copies = len(local) + len(remote) + unroutable
        inbound.unsent = len(local) + len(remote)
        inbound.outcomes.extend([RELEASED] * unroutable)  # destinations gone meanwhile: reached none there
        producer.undelivered += 1
        delivered = None
        for consumer in local:
            if consumer.edge:  # an edge's consumers sit behind one anonymous link: say where it goes
                payload = self._annotated(data, view, self._annotations_for(key, None), drop=(DESTS,))
            elif producer.from_neighbour:  # leaving the network: the router's own annotations stay behind
                payload = delivered = delivered or self._without_router_annotations(data, view, routing)
            else:
                payload = data
            consumer.pending.append(Outbound(inbound, consumer, payload, priority, next(self._seq)))
            self._dirty.add(consumer.conn)
        if local:
            self._count_out(key, local)
        if remote:  # qdrouterd counts as transit every delivery it sends on to another router, the ingress one's too
            stats["transit"] += 1
            self.totals["transit"] += 1
        self._to_neighbours(inbound, data, view, key, remote, priority)
        self.stats["routed"] += 1
        self._top_up(producer)
        if self._trace_messages:
            msglog.debug("Routed %r (%s, priority %d): %d local, %d via neighbours", key, distribution,
                         priority, len(local), len(remote))

    def _annotations_for(self, key: str, routers: list[str] | None):
        """The annotations a copy for `routers` carries (for an edge, None: only where it goes), encoded once per
        destination, not per message."""
        cache_key = (key, *routers) if routers is not None else (key,)
        found = self._encoded_annotations.get(cache_key)
        if found is None:
            if len(self._encoded_annotations) >= _CACHE_LIMIT:  # addresses come and go: keep it bounded
                self._encoded_annotations.clear()
            values = {str(TO): key} if routers is None else {str(TO): key, str(DESTS): sorted(routers)}
            found = self._encoded_annotations[cache_key] = encode_annotations(values)
        return found

    def _routing_of(self, data, view) -> _Routing | None:
        """The router's annotations in a message's message-annotations section (None: not readable without a
        decode). A neighbour's copies for one address and set of routers carry the very same section, so it is
        read once and then found by its bytes."""
        section = bytes(data[view.annotations_at:view.annotations_end])  # (a bytearray when read by proton's wrapper)
        found = self._routing_by_section.get(section)
        if found is None:
            values, keys = annotations(section, _ROUTING_KEYS), annotation_keys(section)
            if values is None or keys is None:
                return None
            if len(self._routing_by_section) >= _CACHE_LIMIT:
                self._routing_by_section.clear()
            found = self._routing_by_section[section] = _routing_from(values, keys)
        return found

    def _without_router_annotations(self, data, view, routing: _Routing) -> bytes:
        """A neighbour's copy as its producer sent it, for a client: without the router's annotations, as
        qdrouterd strips its own (`stripAnnotations`, by default) and as one router delivers it. AMQP 1.0
        §3.2.3 lets an intermediary add annotations; leaving ours on made every consumer behind a mesh decode
        two it never asked for. (`routing`: what _route read of the section, _NO_ROUTING when it has none.)"""
        if view is not None:
            if not view.has_annotations:
                return data
            if routing.only_router_keys:  # read from this very section by _routing_of
                return replace_section(data, view, b"")
        return _annotated(data, encode_annotations({}), drop=_ROUTING_KEYS)

    def _annotated(self, data, view, values, drop: tuple = ()) -> bytes:
        """The message with the router's annotations `values` set and `drop` removed, other bytes as they came.
        A section that holds nothing but the router's own annotations (a neighbour's copy), or none, is replaced
        whole; one with other annotations in it is merged, entry by entry (_annotated)."""
        if self._section_is_ours(data, view):
            return replace_section(data, view, values.section)
        return _annotated(data, values, drop)

    def _section_is_ours(self, data, view) -> bool:
        """May the message's message-annotations section be replaced whole: it has none (`view` says where one
        goes), or one with nothing but the router's own annotations in it?"""
        if view is None:
            return False
        if not view.has_annotations:
            return True
        routing = self._routing_of(data, view)
        return routing is not None and routing.only_router_keys

    def _has_destinations(self, key: str) -> bool:
        return bool(self.consumers.get(key)) or (self.mesh is not None and bool(self.mesh.state.routers_with(key)))

    def _plan(self, address: str, distribution: str, dests: frozenset | None, exclude=None):
        """Where one message goes: (local consumers, {next hop: [router ids]}, destinations now unreachable).

        At the ingress router (`dests` None) anycast picks one destination among local consumers (cost 0)
        and remote routers with consumers (their path cost); multicast takes all of them. A message from a
        neighbour carries the routers it must still reach; this router delivers locally if it is one of
        them and splits the rest by next hop, so every destination router gets exactly one copy.

        A plan that involved no choice (one destination, multicast, none at all) is kept until consumers or the
        network change (_routes_changed): most messages are routed the way the one before them was.
        """
        if exclude is not None:  # from an edge, not back to it: rare, planned each time
            return self._plan_anew(address, distribution, dests, exclude)[0]
        cache_key = (address, distribution, dests)
        plan = self._fixed_plans.get(cache_key)
        if plan is None:
            plan, chose = self._plan_anew(address, distribution, dests)
            if not chose:
                if len(self._fixed_plans) >= _CACHE_LIMIT:
                    self._fixed_plans.clear()
                self._fixed_plans[cache_key] = plan
        return plan

    def _routes_changed(self) -> None:
        """Consumers came or went, or the network changed: plans made before may be wrong now."""
        self._fixed_plans.clear()

    def _plan_anew(self, address: str, distribution: str, dests: frozenset | None, exclude=None):
        """(the plan, whether an anycast choice among several destinations was made in it)."""
        consumers = [c for c in self.consumers.get(address, ()) if not c.closed and c.conn is not exclude]
        choice = distribution != MULTICAST
        if self.mesh is None:  # a standalone router: local consumers are all there is
            if len(consumers) < 2 or not choice:
                return (consumers, {}, 0), False
            return ([pick_anycast(distribution, consumers, self._ties.setdefault(address, RoundRobin()))], {}, 0), True
        ties = self._ties.setdefault(address, RoundRobin())
        routes = self.mesh.routes()
        chose = False
        if dests is None:
            remote_ids = self.mesh.state.routers_with(address)
            chosen = consumers + [self.remote_paths[r] for r in sorted(remote_ids) if r in self.remote_paths]
            if len(chosen) > 1 and choice:
                chosen, chose = [pick_anycast(distribution, chosen, ties)], True
            local = [c for c in chosen if c.__class__ is Consumer]
            targets = [c.router_id for c in chosen if c.__class__ is RemotePath]
        else:
            local = []
            if self.router_id in dests and consumers:
                local = consumers
                if len(consumers) > 1 and choice:
                    local, chose = [pick_anycast(distribution, consumers, ties)], True
            targets = sorted(dests - {self.router_id})
        remote: dict[str, list[str]] = {}
        unroutable = 0 if dests is None or self.router_id not in dests or consumers else 1
        for rid in targets:
            route = routes.get(rid)
            if route is None or route.next_hop not in self.mesh.neighbours:
                unroutable += 1
            else:
                remote.setdefault(route.next_hop, []).append(rid)
        return (local, remote, unroutable), chose

    def _control(self, link, dlv: Delivery):
        data = read_message(link, dlv)
        if data is None:
            return
        dlv.settle()
        if link.credit < CONTROL_LOW_CREDIT:
            link.flow(CONTROL_CREDIT - link.credit)
        message = Message()
        message.decode(data)
        self.mesh.control_message(link, message)

    def _consumer_disposition(self, out: Outbound, dlv):
        """A consumer's disposition for a copy (`dlv` is the engine's delivery)."""
        state = raw.remote_state(dlv)
        outcome = _OUTCOME_OF.get(state)
        if outcome is None:
            if not raw.settled_by_peer(dlv):
                return  # a non-terminal state (received): wait for the outcome
            outcome = MODIFIED  # settled with no outcome: it reached the consumer, we cannot say more
        consumer = out.consumer
        consumer.counts[outcome] += 1
        consumer.in_flight.discard(out)
        del self.outbound_of[dlv]
        # The consumer's details (modified's flags, rejected's error) travel only with those outcomes.
        remote = Delivery.wrap(dlv).remote if outcome in (MODIFIED, REJECTED) else None
        self._copy_final(out, outcome, remote=remote)
        raw.settle(dlv)
        if not consumer.closed:
            self._dirty.add(consumer.conn)  # balanced choice and drain may depend on this

    # ---- sending: the per-connection pump -------------------------------------------------------------------

    def on_reactor_quiesced(self, event):
        self.now = time.time()  # the time messages of the next batch are stamped with (counting, below)
        # A backed-up inter-router connection is looked at again after every batch of I/O: the socket may
        # have taken some of its output.
        self._dirty |= self._held
        while self._dirty:
            self._pump(self._dirty.pop())

    def _pump(self, conn_state: ConnectionState):
        consumers = [c for c in conn_state.consumers if not c.closed]
        while True:
            best, best_key, held = None, None, False
            for consumer in consumers:
                if consumer.pending and raw.credit(consumer.impl) > 0:
                    if consumer.neighbour and raw.outgoing_bytes(consumer.session_impl) >= OUTPUT_HOLD_BYTES:
                        held = True  # let it wait here, where a later higher-priority copy can overtake it
                        continue
                    head = consumer.pending[0]
                    key = (-head.priority, head.seq)
                    if best_key is None or key < best_key:
                        best, best_key = consumer, key
            if best is None:
                break
            self._send(best, best.pending.popleft())
        if held:
            self._held.add(conn_state)
        else:
            self._held.discard(conn_state)
        for consumer in consumers:
            link = consumer.link
            if link.drain_mode and not consumer.pending and link.credit > 0:
                link.drained()

    def _send(self, consumer: Consumer, out: Outbound):
        dlv = raw.send_copy(consumer.impl, b"%x" % next(self._tags), out.data)
        counts = consumer.counts
        counts["delivered"] += 1
        consumer.conn.last_delivery = self.now
        if out.inbound.presettled or consumer.at_most_once:
            counts["presettled"] += 1
        self._copy_sent_or_dropped(out.inbound)
        if out.inbound.presettled:
            raw.settle(dlv)
        elif consumer.at_most_once:
            # The consumer asked for at-most-once: the copy is settled on sending and counts as delivered.
            raw.settle(dlv)
            self._copy_final(out, ACCEPTED)
        else:
            out.delivery = dlv
            self.outbound_of[dlv] = out
            consumer.in_flight.add(out)

    def _copy_sent_or_dropped(self, inbound: Inbound):
        """One copy left the router's queues. Once all have, a producer's credit for the delivery comes back
        when it was pre-settled or came from a neighbour router (`credit_on_send`); a client's unsettled one
        gives it back only when its outcome is known too (_copy_final).

        So at most a window of a client's messages is in flight per producer, as with qdrouterd: returning it on
        sending let a fast producer fill the consumer's whole window and wait there (p50 ~280 ms against
        qdrouterd's ~50 ms with Python clients). Between routers that bound is already kept by the ingress
        router, and the window only limits what waits here for a consumer's credit: tying it to the outcome
        too made a mesh as slow as one window per outcome round trip through both routers. qdrouterd, too,
        replenishes inter-router credit without waiting for settlement."""
        inbound.unsent -= 1
        if inbound.unsent == 0 and (inbound.credit_on_send or inbound.done):
            inbound.producer.undelivered -= 1
            self._top_up(inbound.producer)

    # ---- outcomes back to the producer (§12.1.1.4) --------------------------------------------------------------

    def _copy_final(self, out: Outbound, outcome: str, remote=None):
        for rid in out.dests:
            path = self.remote_paths.get(rid)
            if path is not None:
                path.outstanding -= 1
        inbound = out.inbound
        if inbound.presettled or inbound.done:
            return
        if inbound.multicast:
            inbound.outcomes.append(outcome)
            if len(inbound.outcomes) < inbound.copies:
                return
            outcome, remote = combine_multicast(inbound.outcomes), None
        inbound.done = True
        if inbound.unsent == 0 and not inbound.credit_on_send:  # every copy is out and the outcome known
            inbound.producer.undelivered -= 1
            self._top_up(inbound.producer)
        if inbound.producer.closed:
            raw.release(inbound.delivery)
            return  # nobody left to tell
        _finish(inbound.delivery, outcome, remote=remote)
        self._count_outcome(inbound.producer, outcome)


    # ---- counting, for management (reference/router/management.py) ------------------------------------------------

    def _address_stats(self, key: str) -> dict:
        stats = self.address_stats.get(key)
        if stats is None:
            if len(self.address_stats) >= _CACHE_LIMIT:  # addresses come and go: keep those still in use
                live = set(self.consumers) | set(self.producers)
                self.address_stats = {k: v for k, v in self.address_stats.items() if k in live}
            stats = self.address_stats[key] = dict(_ZERO_ADDRESS)
        return stats

    def _count_in(self, producer: Producer, key: str, presettled: bool, again: bool) -> dict:
        """A message arrived on `producer` for routing key `key` (`again`: a parked one, counted already)."""
        stats = self._address_stats(key)
        if again:
            return stats
        counts = producer.counts
        counts["delivered"] += 1
        if producer.conn_state is not None:
            producer.conn_state.last_delivery = self.now
        totals = self.totals
        if presettled:
            counts["presettled"] += 1
        if not producer.from_neighbour:
            stats["ingress"] += 1
            totals["ingress"] += 1
            if presettled:
                totals["presettled"] += 1
            if producer.container:
                stats["from_container"] += 1
                totals["ingress_route_container"] += 1
        return stats

    def _count_out(self, key: str, local) -> None:
        stats = self._address_stats(key)
        totals = self.totals
        for consumer in local:
            if consumer.container:
                stats["to_container"] += 1
                totals["egress_route_container"] += 1
            else:
                stats["egress"] += 1
            totals["egress"] += 1

    def _count_outcome(self, producer: Producer, outcome: str) -> None:
        """The router settled a producer's delivery with `outcome` (qdrouterd counts outcomes on incoming links)."""
        producer.counts[outcome] += 1
        self.totals[outcome] += 1

    # ---- the management agent --------------------------------------------------------------------------------------

    def _to_agent(self, producer: Producer, dlv, data, presettled: bool) -> None:
        """A request for our management agent: answered at once, the request accepted."""
        request = Message()
        try:
            request.decode(data)
        except Exception as exc:
            if not presettled:
                _finish(dlv, REJECTED, condition=Condition("amqp:decode-error", f"cannot decode message: {exc}"),
                        held=False)
                self._count_outcome(producer, REJECTED)
            else:
                raw.settle(dlv)
            self._top_up(producer)
            return
        if presettled:
            raw.settle(dlv)
        else:
            _finish(dlv, ACCEPTED, held=False)
            self._count_outcome(producer, ACCEPTED)
        self._top_up(producer)
        response = self.agent.respond(request)
        if response is not None:
            self.inject(response.address, response.encode())

    def inject(self, address: str, data: bytes) -> bool:
        """Send a message of the router's own (pre-settled) to `address`, wherever its consumer is; False if
        none is reachable (the message is dropped, as a pre-settled one with no route is)."""
        key = address
        section = self.address_config.lookup(plain_address(key)) if not key.startswith("amqp:/") else None
        distribution = section.distribution if section is not None else BALANCED
        local, remote, _unroutable = self._plan(key, distribution, None)
        if not local and not remote:
            log.info("No route for the router's message to %r: dropped", address)
            return False
        inbound = Inbound(delivery=None, producer=None, presettled=True, multicast=distribution == MULTICAST)
        inbound.copies = inbound.unsent = len(local) + len(remote)
        view = routing_view(data)
        for consumer in local:
            payload = self._annotated(data, view, self._annotations_for(key, None), drop=(DESTS,)) \
                if consumer.edge else data
            consumer.pending.append(Outbound(inbound, consumer, payload, DEFAULT_MESSAGE_PRIORITY, next(self._seq)))
            self._dirty.add(consumer.conn)
        if local:
            self._count_out(key, local)
        self._to_neighbours(inbound, data, view, key, remote, DEFAULT_MESSAGE_PRIORITY)
        return True

    def _to_neighbours(self, inbound, data: bytes, view, key: str, remote: dict, priority: int) -> None:
        """Queue a delivery on each next hop's data link, annotated with the routers it is for there (`remote`:
        next hop -> those routers), and count it outstanding on each router's path."""
        for next_hop, routers in remote.items():
            neighbour = self.mesh.neighbours[next_hop].data_consumer
            payload = self._annotated(data, view, self._annotations_for(key, routers))
            neighbour.pending.append(Outbound(inbound, neighbour, payload, priority, next(self._seq),
                                              dests=tuple(routers)))
            for rid in routers:
                self.remote_paths[rid].outstanding += 1
            self._dirty.add(neighbour.conn)

    # ---- live configuration (management CREATE and DELETE) -----------------------------------------------------

    def address_sections(self) -> list[AddressSection]:
        return [section for _, section in self.address_config.items()]

    def add_address_section(self, section: AddressSection) -> None:
        self.address_config.add(section.match_pattern, section)
        self._routes_changed()

    def remove_address_section(self, section: AddressSection) -> None:
        table: AddressTable[AddressSection] = AddressTable()
        for kept in self.address_sections():
            if kept is not section:
                table.add(kept.match_pattern, kept)
        self.address_config = table
        self._routes_changed()

    def add_link_route(self, section: LinkRoute) -> None:
        self.link_router.add(section)
        self._advertise_link_routes()

    def remove_link_route(self, section: LinkRoute) -> None:
        self.link_router.remove(section)
        self._advertise_link_routes()

    def add_autolink(self, config: AutoLink) -> None:
        self.autolinks.add(config, self.open_connections())

    def remove_autolink(self, config: AutoLink) -> None:
        for link in self.autolinks.remove(config, self.open_connections()):
            self._link_gone(link)
            if link.state & Endpoint.LOCAL_ACTIVE:
                link.close()

    def add_listener(self, section: Listener) -> None:
        if self.listen_hook is None:
            raise OSError("this router cannot open listeners while it runs")
        self.listen_hook(section)

    def remove_listener(self, section: Listener) -> None:
        for acceptor, listener in list(self.listener_of.items()):
            if listener is section:
                acceptor.close()
                del self.listener_of[acceptor]
                log.info("Listener %r closed", section.name or f"{section.host}:{section.port}")

    def add_connector(self, config: Connector):
        return self.connectors.add(config)

    def remove_connector(self, dialer) -> None:
        self.connectors.remove(dialer)


# ---- helpers --------------------------------------------------------------------------------------------------


_ROUTING_KEYS = (str(TO), str(DESTS))
_CACHE_LIMIT = 10000  # entries in each of the router's per-address caches: addresses come and go


@dataclass(frozen=True)
class _Routing:
    """The router's own annotations on a neighbour's copy: the address key it goes to, the routers it must
    still reach (None: not said, e.g. from our interior uplink), and whether the section holds nothing else."""

    to: str | None
    dests: frozenset | None
    only_router_keys: bool


_NO_ROUTING = _Routing(None, None, True)


def _routing_from(values: dict, keys=None) -> _Routing:
    """From the router's annotations `values` (the section's `keys`, when it holds others; default: those)."""
    dests = values.get(DESTS)
    return _Routing(values.get(TO), None if DESTS not in values else frozenset(dests or ()),
                    all(k in _ROUTING_KEYS for k in (values.keys() if keys is None else keys)))


def _annotated(data, values, drop: tuple = ()) -> bytes:
    """The message with the router's annotations (a dict, or peek.Annotations) set and `drop` removed, its other
    bytes as they came (reference/peek.py); a message peek cannot walk is decoded and encoded whole."""
    if isinstance(values, dict):
        values = encode_annotations({str(k): v for k, v in values.items()})
    spliced = with_annotations(data, values, tuple(str(k) for k in drop))
    if spliced is not None:
        return spliced
    message = Message()
    message.decode(data)
    message.annotations = {**(message.annotations or {}), **{symbol(k): v for k, v in values.values.items()}}
    for key in drop:
        message.annotations.pop(key, None)
    return message.encode()


def _effective_priority(section: AddressSection | None, priority: int | None) -> int:
    if section is not None and section.priority is not None and section.priority >= 0:
        return section.priority
    return DEFAULT_MESSAGE_PRIORITY if priority is None else priority


def _finish(impl, outcome: str, remote=None, condition: Condition | None = None, held: bool = True):
    """Set a terminal outcome on an inbound delivery (the engine's, see raw.py), copying the consumer's details,
    and settle it; let go of the router's reference on it (raw.hold) when it `held` one."""
    if outcome == ACCEPTED:
        raw.accept_and_settle(impl)
    elif outcome == RELEASED:
        raw.update(impl, raw.RELEASED)
        raw.settle(impl)
    else:
        _finish_with_details(Delivery.wrap(impl), outcome, remote, condition)
    if held:
        raw.release(impl)


def _finish_with_details(dlv: Delivery, outcome: str, remote, condition: Condition | None):
    local = dlv.local
    if outcome == MODIFIED:
        if remote is not None:
            local.failed = remote.failed
            local.undeliverable = remote.undeliverable
            if remote.annotations:
                local.annotations = remote.annotations
        else:
            local.failed = True  # in doubt: the consumer may have seen it
    elif outcome == REJECTED:
        cond = condition or (remote.condition if remote is not None else None)
        if cond is not None:
            local.condition = cond
    dlv.update(_STATE_OF[outcome])
    dlv.settle()


def _state_of(conn, create: bool = False) -> ConnectionState | None:
    state = getattr(conn, "router_state", None)
    if state is None and create:
        state = ConnectionState()
        conn.router_state = state
    return state


def _peer_of(conn) -> str:
    transport = conn.transport
    url = getattr(conn, "url", None)
    return str(url) if url else (str(transport) if transport else "?")


def _waypoint_ordinal(capabilities) -> int:
    """qdrouterd's reading of a terminus's `qd.waypoint[.N]` capability (a symbol or an array of them): N, 1 for
    the bare name, 0 when there is none."""
    for text in terminus_symbols(capabilities):
        if text == "qd.waypoint":
            return 1
        if text.startswith("qd.waypoint.") and text[12:].isdigit() and len(text) == 13 and text[12] != "0":
            return int(text[12:])
    return 0
