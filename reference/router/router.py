"""Message routing on one reference router, over Qpid Proton's protocol engine.

The router is a proton event handler. It never stores messages: a producer gets credit only while its
address has a consumer (003_9cdc7c48796dae4f.txt §12.1.1.1), each message is routed when it arrives
(§12.1.1.3), and outcomes travel back from consumers to producers by the rules of §12.1.1.4.

This module is the handler: it owns the router's shared tables and hands each event to the part whose rules
it is, one module each:
* state.py: its records of links, connections and deliveries (producers, consumers, inbound and outbound);
* connections.py: connection life (roles, opening, loss);
* attachments.py: the attach rules and the address registry (consumers and producers by address);
* credit.py: producer credit: granted while a consumer is reachable, drained when none is, parked messages;
* forwarding.py: where each message goes (distribution, fallback, the network) and its copies;
* annotations.py: the router's own annotations on copies between routers;
* sending.py: the pump that sends waiting copies as consumers grant credit, in priority order (§12.1.3);
* outcomes.py: outcomes from consumers back to producers (§12.1.1.4);
* counters.py: the delivery counters management shows.
The router network (interrouter.py), link routes (linkroutes.py), autolinks (autolinks.py), connectors
(connectors.py) and the management agent (management.py) are collaborators of their own.
"""

from __future__ import annotations

import logging
import time

from proton import Delivery, Endpoint, Message

from ..links import ServedConnections, links_of, read_message
from . import raw
from .addressing import AddressTable
from .annotations import RouterAnnotations
from .attachments import Attachments
from .autolinks import AutoLinks
from .config import AddressSection, AutoLink, Connector, LinkRoute, Listener, RouterConfig, SslProfile
from .connections import ConnectionLife
from .connectors import Connectors
from .counters import DeliveryCounters
from .credit import Credit
from .forwarding import Forwarding
from .interrouter import CONTROL_CREDIT, Mesh
from .linkroutes import LinkRouter
from .management import Agent
from .outcomes import Outcomes
from .sending import Pump
from .state import Consumer, ConnectionState, Producer, RemotePath, state_of

log = logging.getLogger("ROUTER")

DEFAULT_LINK_CAPACITY = 250
CONTROL_LOW_CREDIT = 500


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
        self._dirty: set[ConnectionState] = set()
        self._connections: set = set()
        self.listener_of: dict = {}  # acceptor -> listener section (set by the server)
        # The sslProfiles a listener or connector made from now on may name (management CREATE and DELETE them)
        self.ssl_profiles: dict[str, SslProfile] = {p.name: p for p in config.ssl_profiles}
        self.connectors = Connectors(self, config.connectors, config)
        self.mesh = Mesh(self, config.router.mode) if config.router.mode in ("interior", "edge") else None
        self.remote_paths: dict[str, RemotePath] = {}
        self._reachable_remote: set[str] = set()
        self.link_router = LinkRouter(self, config.link_routes)
        self.autolinks = AutoLinks(self, config.auto_links)
        # The message path finds its state by the engine's pointers (raw.py), not through proton's wrappers:
        self.message_links: dict = {}  # link pointer -> Producer or Consumer
        self.outbound_of: dict = {}  # pointer of a copy sent unsettled -> Outbound
        self.now = time.time()  # the end of the last batch of I/O: read per message, so not asked per message
        self.listen_hook = None  # set by the server: listener section -> acceptor (a listener created live)
        self.listening_port = lambda _listener: None  # set by the server: a listener section's bound port
        self.agent = Agent(self)
        # The parts of the router, each with its own rules (see the module docstring); made in the order they use
        # each other in.
        self.counters = DeliveryCounters(self)
        self.credit = Credit(self)
        self.annotations = RouterAnnotations()
        self.outcomes = Outcomes(self)
        self.pump = Pump(self)
        self.forwarding = Forwarding(self)
        self.attachments = Attachments(self)
        self.connections = ConnectionLife(self)
        # The message path's calls (on_delivery), bound once:
        self._route = self.forwarding._route
        self._consumer_disposition = self.outcomes._consumer_disposition

    def on_reactor_init(self, event):
        self.connectors.start(event.container)
        self._advertise()  # our management agent's address, before any consumer comes

    # ---- shutdown ---------------------------------------------------------------------------------------

    on_shutdown = None  # set by the server: what to do when a shutdown is requested

    def on_router_shutdown(self, _event):
        if self.on_shutdown is not None:
            self.on_shutdown()

    # ---- connection and session lifecycle (connections.py) ------------------------------------------------

    def on_connection_init(self, event):
        self.connections.on_connection_init(event)

    def open_connections(self):
        return [c for c in self._connections if c.state & Endpoint.LOCAL_ACTIVE and c.state & Endpoint.REMOTE_ACTIVE]

    def links_of(self, conn):
        return list(links_of(conn))

    def _advertise_link_routes(self) -> None:
        if self.mesh is not None:
            self.mesh.publish_link_routes(self.link_router.local_keys())

    def on_connection_remote_open(self, event):
        self.connections.on_connection_remote_open(event)

    def on_session_remote_close(self, event):
        self.connections.on_session_remote_close(event)

    def _transport_gone(self, conn):
        self.connectors.closed(conn)  # a connector's connection: it redials from here

    def _connection_gone(self, conn):
        self.connections._connection_gone(conn)

    # ---- link attach and detach (attachments.py) -------------------------------------------------------------

    def on_link_remote_open(self, event):
        self.attachments.on_link_remote_open(event)

    def on_link_remote_close(self, event):
        self.attachments.on_link_remote_close(event)

    def on_link_remote_detach(self, event):
        self.attachments.on_link_remote_detach(event)

    def add_consumer(self, link, key: str) -> Consumer:
        """An out-autolink's or waypoint's sending link, open: a destination for `key` (autolinks.py)."""
        return self.attachments.add_consumer(link, key)

    def add_producer(self, link, key: str | None, allow_fallback: bool = True) -> Producer:
        """An in-autolink's or waypoint's receiving link, open: a source of messages for `key` (autolinks.py)."""
        return self.attachments.add_producer(link, key, allow_fallback)

    # ---- the router network --------------------------------------------------------------------------------

    def _advertise(self) -> None:
        """Tell the network which addresses have consumers here (mobile addresses, §12.1.1.2)."""
        if self.mesh is not None:
            self.mesh.publish_addresses(self.consumers.keys() | set(self.agent.own_topological))
            self.mesh.publish_reach()

    def edge_addresses(self, neighbour, keys: set) -> None:
        """An edge router's consumer addresses: served here through the edge's data link, as local ones."""
        self.attachments.edge_addresses(neighbour, keys)

    def reach_for_edge(self, neighbour) -> set:
        """Addresses an edge reaches through us: consumers anywhere but on that edge itself."""
        edge_state = state_of(neighbour.connection)
        local = {key for key, consumers in self.consumers.items()
                 if any(not c.closed and c.conn is not edge_state for c in consumers)}
        return local | self._reachable_remote

    def network_changed(self) -> None:
        """Paths or remote addresses changed: refresh remote paths, then open or close producer credit."""
        self.forwarding._routes_changed()
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
            self.credit._credit_changed(key)
        if self.mesh is not None:
            self.mesh.publish_reach()

    def add_neighbour_sender(self, conn, link) -> Consumer:
        """Our data link towards a neighbour: the pump serves it like a consumer link."""
        return self.attachments.add_neighbour_sender(conn, link)

    def add_neighbour_receiver(self, link) -> None:
        """The neighbour's data link to us: an anonymous producer whose messages say where they go."""
        self.attachments.add_neighbour_receiver(link)

    # ---- credit (credit.py) -----------------------------------------------------------------------------

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
            self.credit._top_up(producer)
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
            self.forwarding._receive(producer, dlv)
            return
        if dlv.settled:
            dlv.settle()  # a copy we had already let go of: just free it

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

    # ---- sending (sending.py) ------------------------------------------------------------------------------

    def on_reactor_quiesced(self, event):
        self.now = time.time()  # the time messages of the next batch are stamped with (counters.py, sending.py)
        self.pump.serve()

    # ---- live configuration (management CREATE and DELETE) -----------------------------------------------------

    def address_sections(self) -> list[AddressSection]:
        return [section for _, section in self.address_config.items()]

    def add_address_section(self, section: AddressSection) -> None:
        self.address_config.add(section.match_pattern, section)
        self.forwarding._routes_changed()

    def remove_address_section(self, section: AddressSection) -> None:
        table: AddressTable[AddressSection] = AddressTable()
        for kept in self.address_sections():
            if kept is not section:
                table.add(kept.match_pattern, kept)
        self.address_config = table
        self.forwarding._routes_changed()

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
            self.attachments._link_gone(link)
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

    def add_ssl_profile(self, profile: SslProfile) -> None:
        self.ssl_profiles[profile.name] = profile

    def remove_ssl_profile(self, profile: SslProfile) -> None:
        """Listeners and connectors made with it keep the TLS settings they were made with (qdrouterd copies them)."""
        if self.ssl_profiles.get(profile.name) is profile:
            del self.ssl_profiles[profile.name]

    def add_connector(self, config: Connector):
        return self.connectors.add(config)

    def remove_connector(self, dialer) -> None:
        self.connectors.remove(dialer)
