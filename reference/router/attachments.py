"""Attaching and detaching links, and the address registry: which consumers and producers each address has.

A client's receiver becomes a consumer of its source address, its sender a producer for its target address
(an anonymous one, without an address, is routed per message); a dynamic receiver gets an address of its own.
Addresses are mobile (003_9cdc7c48796dae4f.txt §12.1.1.2): learned from attaching consumers and told to the
router network. Before that, an attach may be the router network's own (interrouter.py), an autolink's or a
broker's waypoint link (§12.1.4.2; autolinks.py), or a link route's (§12.2; linkroutes.py), which takes the
whole link elsewhere; the router coordinates no transactions (a `$coordinator` target needs a link route).

When a consumer leaves, the copies it never got are released and those it may have got are in doubt
(§12.1.1.4); when the first consumer of an address comes or the last goes, its producers' credit opens or
closes (credit.py).
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from proton import Endpoint, Terminus

from ..links import refuse, terminus_symbols
from . import raw
from .keys import PHASE1
from .sending import PriorityPending
from .settlement import MODIFIED, RELEASED
from .state import Consumer, Producer, state_of

if TYPE_CHECKING:
    from .router import Router

log = logging.getLogger("ROUTER")


class Attachments:
    """Takes each link a peer attaches to its place, and keeps the registry of consumers and producers."""

    def __init__(self, router: Router):
        self.router = router  # its address_config (management replaces it)
        self.router_id = router.router_id
        self.link_capacity = router.link_capacity
        self.consumers = router.consumers
        self.producers = router.producers
        self.message_links = router.message_links
        self.outbound_of = router.outbound_of
        self._dirty = router._dirty  # connections the pump serves at the end of this batch of I/O
        self.mesh = router.mesh
        self.link_router = router.link_router
        self.autolinks = router.autolinks
        # What consumers and producers coming and going change in the router's other parts:
        self._advertise = router._advertise  # the addresses told to the router network
        self._credit_changed = router.credit._credit_changed
        self._top_up = router.credit._top_up
        self._routes_changed = router.forwarding._routes_changed
        self._copy_sent_or_dropped = router.outcomes._copy_sent_or_dropped
        self._copy_final = router.outcomes._copy_final
        self._counted_parked = router.counters._counted_parked

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
        role = state_of(link.connection, create=True).role
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
        section = self.router.address_config.lookup(address)
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
        section = self.router.address_config.lookup(address)
        return PHASE1 + address if section is not None and section.waypoint else address

    def add_consumer(self, link, key: str) -> Consumer:
        """Register an open sending link as a destination for `key` (clients and out-autolinks alike)."""
        conn_state = state_of(link.connection, create=True)
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
        conn_state = state_of(link.connection, create=True)
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
        conn_state = state_of(producer.link.connection)
        if conn_state is not None:
            conn_state.producers.discard(producer)

    # ---- the router network's data links --------------------------------------------------------------------

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

    def add_neighbour_sender(self, conn, link) -> Consumer:
        """Our data link towards a neighbour: the pump serves it like a consumer link."""
        state = state_of(conn, create=True)
        consumer = Consumer(link=link, address="", conn=state, neighbour=True, pending=PriorityPending())
        link.router_consumer = consumer
        self.message_links[consumer.impl] = consumer
        state.consumers.add(consumer)
        return consumer

    def add_neighbour_receiver(self, link) -> None:
        """The neighbour's data link to us: an anonymous producer whose messages say where they go."""
        state = state_of(link.connection, create=True)
        producer = Producer(link=link, address=None, capacity=self.link_capacity, from_neighbour=True,
                            conn_state=state)
        link.router_producer = producer
        self.message_links[producer.impl] = producer
        state.producers.add(producer)
        link.open()
        self._top_up(producer)


def _waypoint_ordinal(capabilities) -> int:
    """qdrouterd's reading of a terminus's `qd.waypoint[.N]` capability (a symbol or an array of them): N, 1 for
    the bare name, 0 when there is none."""
    for text in terminus_symbols(capabilities):
        if text == "qd.waypoint":
            return 1
        if text.startswith("qd.waypoint.") and text[12:].isdigit() and len(text) == 13 and text[12] != "0":
            return int(text[12:])
    return 0
