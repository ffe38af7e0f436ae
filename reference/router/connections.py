"""Connection life on the reference router: a connection's role, its opening and its loss.

A connection's role comes from the listener that accepted it or the connector that dialled it (`normal`,
`inter-router`, `route-container`, `edge`; 003_9cdc7c48796dae4f.txt §12.1.4.1: a broker is reached over a
route-container connection). An inter-router or edge connection joins the router network (interrouter.py); a
route-container one brings the link routes and autolinks that name it (§12.2, §12.1.4.2). When a connection
is lost, so are its consumers and producers (attachments.py), the network's paths through it, and the far
ends of link-routed links that went through it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from proton import Endpoint, symbol

from ..links import links_of
from ..security import authenticated_user, peer_certificate_cn
from .state import state_of

if TYPE_CHECKING:
    from .router import Router

log = logging.getLogger("ROUTER")


class ConnectionLife:
    """Opens, describes and forgets the router's connections."""

    def __init__(self, router: Router):
        self.router_id = router.router_id
        self._connections = router._connections
        self.listener_of = router.listener_of  # acceptor -> listener section (set by the server)
        self.connectors = router.connectors
        self.mesh = router.mesh
        self.link_router = router.link_router
        self.autolinks = router.autolinks
        self._advertise_link_routes = router._advertise_link_routes
        self._dirty = router._dirty
        self._held = router.pump._held
        self._link_gone = router.attachments._link_gone
        self._drop_consumer = router.attachments._drop_consumer
        self._drop_producer = router.attachments._drop_producer

    def on_connection_init(self, event):
        conn = event.connection
        self._connections.add(conn)
        conn.container = self.router_id
        conn.offered_capabilities = symbol("ANONYMOUS-RELAY")
        listener = self.listener_of.get(getattr(conn, "_acceptor", None))
        role = getattr(conn, "router_role", None) or (listener.role if listener else "normal")
        state = state_of(conn, create=True)
        state.role = role
        state.cost = listener.cost if listener else self._dialer_cost(conn)
        dialer = getattr(conn, "router_dialer", None)
        state.name = dialer.config.name if dialer is not None else (listener.name if listener else None)

    def _dialer_cost(self, conn) -> int:
        dialer = getattr(conn, "router_dialer", None)
        return dialer.config.cost if dialer is not None else 1

    def on_connection_remote_open(self, event):
        conn = event.connection
        if conn.state & Endpoint.LOCAL_UNINIT:
            conn.open()
        self._note_for_management(conn)
        self.connectors.opened(conn)
        state = state_of(conn, create=True)
        log.info("Connection from %s opened (container %s, role %s)", _peer_of(conn), conn.remote_container,
                 state.role)
        if state.role in ("inter-router", "edge") and self.mesh is not None:
            self.mesh.connection_up(conn, state.cost)
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

    def _connection_gone(self, conn):
        state = state_of(conn)
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


def _peer_of(conn) -> str:
    transport = conn.transport
    url = getattr(conn, "url", None)
    return str(url) if url else (str(transport) if transport else "?")
