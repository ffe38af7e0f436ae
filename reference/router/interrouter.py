"""The protocol between interior reference routers, over their inter-router connections.

Each side of an inter-router connection opens two sending links to the other:
* `_interop/control` carries pre-settled control messages whose body is a map with an `op`:
  HELLO (who I am, my cost for this connection), LSU (link-state record), MAU (address record),
  LRU (link-route record); records are flooded to every other neighbour when they are news;
* `_interop/data` carries routed messages, each annotated with the address it is routed on
  (`x-opt-interop.to`) and the routers it must still reach (`x-opt-interop.dests`).

This is the reference router's own protocol: a mesh is made of reference routers only; mixing vendors
happens at the edges of the mesh (clients, brokers), as in the interop matrix.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, field

from proton import Condition, Endpoint, Link, Message, symbol

from .edge import EdgeState
from .network import NetworkState
from .state import state_of

log = logging.getLogger("ROUTER_HELLO")

CONTROL = "_interop/control"
DATA = "_interop/data"
TO = symbol("x-opt-interop.to")
DESTS = symbol("x-opt-interop.dests")
CONTROL_CREDIT = 1000


@dataclass(eq=False)
class Neighbour:
    connection: object
    control: Link | None = None
    data_consumer: object = None  # the router's Consumer record for our data sender on this connection
    router_id: str | None = None
    cost: int = 1
    edge: bool = False  # the far end is an edge router (seen from an interior one)
    edge_consumers: dict = field(default_factory=dict)  # key -> the router's Consumer standing for the edge
    reach_sent: frozenset = frozenset()


class Mesh:
    """Neighbours, flooding and path computation for one interior router."""

    def __init__(self, router, mode: str = "interior"):
        self.router = router
        self.mode = mode
        self.my_id = router.router_id
        self.state = NetworkState(self.my_id) if mode == "interior" else EdgeState(self.my_id)
        self.neighbours: dict[str, Neighbour] = {}  # router id -> neighbour (an edge's: its uplink)
        self.edges: dict[str, Neighbour] = {}  # interior only: edge router id -> its connection
        # Records are stamped with numbers that keep growing across this router's restarts (microseconds since the
        # epoch when it started, then one more per record): its neighbours keep the records of the router that was
        # lost, and a restarted one counting from 1 again would be older than those until it had caught up, so
        # what it says of its consumers and neighbours would be ignored (tests/test_router_flooding.py)
        self._seq = itertools.count(time.time_ns() // 1000)
        self._addresses: frozenset[str] = frozenset()
        self._link_routes: frozenset[str] = frozenset()
        if mode == "interior":
            self.state.update_link_state(self.my_id, next(self._seq), {})
            self.state.update_addresses(self.my_id, next(self._seq), ())

    def routes(self):
        return self.state.routes()

    # ---- connection life --------------------------------------------------------------------------------

    def connection_up(self, conn, cost: int) -> None:
        """Our side of a new inter-router connection: open control and data links, say hello."""
        neighbour = Neighbour(conn, cost=cost)
        state_of(conn, create=True).neighbour = neighbour
        session = conn.session()
        session.open()
        control = session.sender(f"{self.my_id}-control")
        control.target.address = CONTROL
        control.snd_settle_mode = Link.SND_SETTLED
        control.open()
        neighbour.control = control
        data = session.sender(f"{self.my_id}-data")
        data.target.address = DATA
        data.open()
        neighbour.data_consumer = self.router.add_neighbour_sender(conn, data)
        self._send(neighbour, {"op": "HELLO", "id": self.my_id, "cost": cost, "mode": self.mode})

    def attach(self, link) -> bool:
        """A link the neighbour opened to us; True if it was one of ours to handle."""
        address = link.remote_target.address if link.is_receiver else None
        if address == CONTROL:
            link.target.copy(link.remote_target)
            link.control_from = True
            link.open()
            link.flow(CONTROL_CREDIT)
            return True
        if address == DATA:
            link.target.copy(link.remote_target)
            self.router.add_neighbour_receiver(link)
            return True
        return False

    def connection_lost(self, conn) -> None:
        neighbour = getattr(state_of(conn), "neighbour", None)
        if neighbour is None or neighbour.router_id is None:
            return
        if self.edges.get(neighbour.router_id) is neighbour:
            del self.edges[neighbour.router_id]
            log.info("Edge router %s lost", neighbour.router_id)
            return
        if self.mode == "edge":
            self.neighbours.pop(neighbour.router_id, None)
            self.state.uplink_id, self.state.reach = None, frozenset()
            log.info("Uplink to interior router %s lost", neighbour.router_id)
            self.router.network_changed()
            return
        if self.neighbours.get(neighbour.router_id) is neighbour:
            del self.neighbours[neighbour.router_id]
            log.info("Neighbour %s lost", neighbour.router_id)
            self._publish_link_state()

    # ---- control messages ----------------------------------------------------------------------------

    def control_message(self, link, message: Message) -> None:
        body = message.body
        if not isinstance(body, dict) or "op" not in body:
            return
        neighbour = getattr(state_of(link.connection), "neighbour", None)
        op = body["op"]
        if op == "HELLO":
            self._hello(neighbour, link.connection, body)
        elif op == "LSU" and self.state.update_link_state(body["origin"], body["seq"], body["neighbours"]):
            self._flood(body, neighbour)
            self.router.network_changed()
        elif op == "MAU" and self.state.update_addresses(body["origin"], body["seq"], body["addresses"]):
            self._flood(body, neighbour)
            self.router.network_changed()
        elif op == "LRU" and self.state.update_link_routes(body["origin"], body["seq"], body["patterns"]):
            self._flood(body, neighbour)
            self.router.network_changed()
        elif op == "EDGE_ADDR" and neighbour is not None and neighbour.edge:
            self.router.edge_addresses(neighbour, set(body.get("addresses") or ()))
            self.publish_reach()
        elif op == "REACH" and self.mode == "edge":
            self.state.reach = frozenset(body.get("addresses") or ())
            self.router.network_changed()

    def _hello(self, neighbour: Neighbour | None, conn, body: dict) -> None:
        other = str(body.get("id"))
        if neighbour is None:
            return
        if other == self.my_id:
            log.error("Refusing inter-router connection: the peer claims our own router id %r", other)
            conn.condition = Condition("amqp:invalid-field", f"duplicate router id {other!r}")
            conn.close()
            return
        neighbour.router_id = other
        neighbour.cost = max(neighbour.cost, int(body.get("cost", 1)))
        if body.get("mode") == "edge" and self.mode == "interior":
            neighbour.edge = True  # an edge takes no part in route computation: serve it, don't route through it
            self.edges[other] = neighbour
            log.info("Edge router %s attached", other)
            self.publish_reach()
            return
        self.neighbours[other] = neighbour
        if self.mode == "edge":
            self.state.uplink_id = other
            log.info("Uplink to interior router %s up", other)
            self._send(neighbour, {"op": "EDGE_ADDR", "addresses": sorted(self._addresses)})
            self.router.network_changed()
            return
        log.info("Neighbour %s up (cost %d)", other, neighbour.cost)
        for record in self.state.records():  # bring it up to date with everything we know
            self._send(neighbour, record)
        self._publish_link_state()

    # ---- what we publish ----------------------------------------------------------------------------------

    def _publish_link_state(self) -> None:
        if self.mode != "interior":
            return
        neighbours = {rid: n.cost for rid, n in self.neighbours.items()}
        record = {"op": "LSU", "origin": self.my_id, "seq": next(self._seq), "neighbours": neighbours}
        self.state.update_link_state(self.my_id, record["seq"], neighbours)
        self._flood(record, None)
        self.router.network_changed()

    def publish_addresses(self, addresses) -> None:
        addresses = frozenset(addresses)
        if addresses == self._addresses:
            return
        self._addresses = addresses
        if self.mode == "edge":  # an edge tells its uplink only
            for neighbour in self.neighbours.values():
                self._send(neighbour, {"op": "EDGE_ADDR", "addresses": sorted(addresses)})
            return
        record = {"op": "MAU", "origin": self.my_id, "seq": next(self._seq), "addresses": sorted(addresses)}
        self.state.update_addresses(self.my_id, record["seq"], addresses)
        self._flood(record, None)

    def publish_link_routes(self, patterns) -> None:
        if self.mode != "interior":
            return
        patterns = frozenset(patterns)
        if patterns == self._link_routes:
            return
        self._link_routes = patterns
        record = {"op": "LRU", "origin": self.my_id, "seq": next(self._seq), "patterns": sorted(patterns)}
        self.state.update_link_routes(self.my_id, record["seq"], patterns)
        self._flood(record, None)

    def publish_reach(self) -> None:
        """Interior: tell each edge which addresses it can reach through us (what is not only its own)."""
        for neighbour in self.edges.values():
            reach = frozenset(self.router.reach_for_edge(neighbour))
            if reach != neighbour.reach_sent:
                neighbour.reach_sent = reach
                self._send(neighbour, {"op": "REACH", "addresses": sorted(reach)})

    def _flood(self, record: dict, came_from: Neighbour | None) -> None:
        for neighbour in self.neighbours.values():
            if neighbour is not came_from:
                self._send(neighbour, record)

    def _send(self, neighbour: Neighbour, body: dict) -> None:
        link = neighbour.control
        if link is None or not link.state & Endpoint.LOCAL_ACTIVE:
            return
        dlv = link.delivery(str(next(self._seq)))
        link.stream(Message(body=body).encode())
        link.advance()
        dlv.settle()
