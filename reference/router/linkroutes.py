"""Link routing (003_9cdc7c48796dae4f.txt §12.2): the router routes the *attach*, then relays the link.

A client attach whose address matches a `linkRoute` (direction `in` for client senders, `out` for client
receivers) is not message-routed. The router opens a twin link towards the broker: on the route-container
connection named by the link route when this router holds it, else towards the neighbour on the lowest-cost
path to a router that advertises the route. Once the far end answers, the client's link is opened with the
terminus the far end gave, and from then on the pair relays transfers, credit (the receiver's credit
reaches the sender, §12.2.1.1), drain, dispositions, settlement and detach, in both directions.

Transactions ride a link route too (§12.2.2): a link whose target is a transaction coordinator matches
the link-route address `$coordinator` and is routed to the one broker that route names, with the client's
coordinator target (and its capabilities) as is. Delivery states are relayed by type and content, so the
coordinator's `declared` and the `transactional-state` of transactional transfers and dispositions (AMQP 1.0
§4.5) pass end to end in both directions, not only the five standard outcomes.

Errors, named as the real router names them so clients behave the same:
* no holder anywhere: the attach is refused with `qd:no-route-to-dest`;
* the broker connection fails: routed links are detached with `qd:routed-link-lost`; the client's
  connection stays open and it can attach again once the broker is back (§12.2.2).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field

from proton import Condition, Delivery, Endpoint, Link, Terminus

from ..attach_caps import copy_termini, remote_termini
from ..links import answer_refused, refuse
from .addressing import AddressTable, pattern_matches
from .config import LinkRoute
from .state import connection_name, state_of

log = logging.getLogger("ROUTER")

NO_ROUTE = "qd:no-route-to-dest"
ROUTED_LINK_LOST = "qd:routed-link-lost"
COORDINATOR = "$coordinator"


def route_key(direction: str, pattern: str) -> str:
    return f"{direction}:{pattern}"


@dataclass(eq=False)
class LinkPair:
    """A client-side link and its twin towards the broker; `rx` receives, `tx` sends (router's view)."""

    near: Link  # the link whose attach we are routing
    far: Link  # the twin we opened
    rx: Link
    tx: Link
    deliveries: dict = field(default_factory=dict)  # rx delivery tag -> tx delivery, and back
    closed: bool = False
    draining: bool = False  # a drain from tx's peer was passed on to rx's peer, which has not answered it yet
    counts: dict = field(default_factory=lambda: _zero_counts())  # management's router.link counters, both ends

    def counts_of(self, link) -> dict:
        return self.counts["rx" if link is self.rx else "tx"]


class LinkRouter:
    def __init__(self, router, sections: list[LinkRoute]):
        self.router = router
        self.sections = list(sections)  # management may add and remove some (live configuration)
        self._build_tables()
        self._tags = itertools.count(1)
        self._advertised: dict[str, AddressTable] = {"in": AddressTable(), "out": AddressTable()}

    def may_route(self) -> bool:
        """Whether an attach arriving now could be link-routed: a link route of ours, or a network whose routers
        may advertise theirs. (A connection accepted while this is false is not tapped for termini.)"""
        return bool(self.sections) or self.router.mesh is not None

    def _build_tables(self) -> None:
        self.tables = {"in": AddressTable(), "out": AddressTable()}
        for section in self.sections:
            self.tables[section.direction].add(section.match_pattern, section)

    def add(self, section: LinkRoute) -> None:
        """A link route created through management: attaches that match it are routed from now on."""
        self.sections.append(section)
        self.tables[section.direction].add(section.match_pattern, section)

    def remove(self, section: LinkRoute) -> None:
        """A link route deleted through management: new attaches no longer match it; links routed already stay."""
        self.sections.remove(section)
        self._build_tables()

    # ---- which link routes this router can serve --------------------------------------------------------

    def local_keys(self) -> set[str]:
        """Link routes whose broker connection is up here: what we advertise to the network."""
        return {route_key(s.direction, s.match_pattern) for s in self.sections if self._holder(s) is not None}

    def _holder(self, section: LinkRoute):
        """The open connection to the broker this link route names, if any."""
        for conn in self.router.open_connections():
            state = getattr(conn, "router_state", None)
            if state is None or state.role not in ("route-container", "normal") or state.closed:
                continue
            if section.connection and section.connection == state.name:
                return conn
            if section.container_id and section.container_id == conn.remote_container:
                return conn
        return None

    # ---- attaches ---------------------------------------------------------------------------------------------

    def match(self, link) -> tuple[str, str] | None:
        """(direction, address) when this attach is link-routed (own config or advertised routes)."""
        direction = "in" if link.is_receiver else "out"  # client sender -> router receiver -> direction in
        terminus = link.remote_target if link.is_receiver else link.remote_source
        if terminus.type == Terminus.COORDINATOR:
            address = COORDINATOR
        else:
            address = terminus.address
        if not address:
            return None
        if self.tables[direction].lookup(address) is not None or self._advertised_match(direction, address):
            return direction, address
        return None

    def _advertised_match(self, direction: str, address: str) -> str | None:
        mesh = self.router.mesh
        if mesh is None:
            return None
        for _origin, (_seq, keys) in mesh.state.link_routes.items():
            for key in keys:
                d, _, pattern = key.partition(":")
                if d == direction and pattern_matches(pattern, address):
                    return key
        return None

    def attach(self, link, direction: str, address: str) -> None:
        """Route one attach: to the broker if we hold it, else one hop towards a router that does."""
        section = self.tables[direction].lookup(address)
        target_conn = self._holder(section) if section is not None else None
        to_broker = target_conn is not None
        if target_conn is None:
            target_conn = self._next_hop(direction, address, section)
        if target_conn is None:
            refuse(link, NO_ROUTE, f"no route to a broker for {address!r} (link route, direction {direction})", log)
            return
        target_state = state_of(target_conn, create=True)
        session = target_state.lr_session
        if session is None or not session.state & Endpoint.LOCAL_ACTIVE:
            session = target_conn.session()
            session.open()
            target_state.lr_session = session
        far = session.receiver(link.name) if link.is_sender else session.sender(link.name)
        copy_termini(far, link, remote_termini(link))  # as the client sent them, an empty source too
        if to_broker and address != COORDINATOR:  # the broker's own names; neighbours route on ours
            external = _external_address(section, address)
            (far.target if link.is_receiver else far.source).address = external
        far.snd_settle_mode = link.remote_snd_settle_mode
        far.rcv_settle_mode = link.remote_rcv_settle_mode
        pair = LinkPair(near=link, far=far, rx=far if far.is_receiver else link, tx=link if far.is_receiver else far)
        link.router_pair = far.router_pair = pair
        far.open()
        log.info("Link route: attach %r (%s) routed to %s", address, direction,
                 connection_name(target_conn, target_conn.remote_container))

    def _next_hop(self, direction: str, address: str, section: LinkRoute | None):
        mesh = self.router.mesh
        if mesh is None:
            return None
        key = route_key(direction, section.match_pattern) if section is not None else self._advertised_match(
            direction, address)
        if key is None:
            return None
        routes = mesh.routes()
        holders = [rid for rid in mesh.state.routers_with_link_route(key) if rid in routes]
        if not holders:
            return None
        best = min(holders, key=lambda rid: (routes[rid].cost, rid))
        neighbour = mesh.neighbours.get(routes[best].next_hop)
        return neighbour.connection if neighbour is not None else None

    def far_attached(self, link) -> None:
        """The far end answered our twin's attach: open the client's link with what it said."""
        pair = link.router_pair
        near = pair.near
        present = remote_termini(link)
        source_sent, target_sent = present or (link.remote_source.type != Terminus.UNSPECIFIED,
                                               link.remote_target.type != Terminus.UNSPECIFIED)
        # AMQP 1.0 §2.6.3: a peer that refuses an attach answers with a null terminus on its own side: the source of
        # a link it would send on (ours receives), the target of one it would receive on. The other terminus may be
        # echoed (Qpid Broker-J echoes an empty one), so it says nothing either way.
        if link.remote_condition is not None or not (source_sent if link.is_receiver else target_sent):
            return  # refused: the detach that follows carries the reason to the client
        copy_termini(near, link, present)
        if near.is_receiver and near.remote_target.type != Terminus.COORDINATOR:
            near.target.address = near.remote_target.address  # the client sees its own address, not the external one
        elif near.is_sender:
            near.source.address = near.remote_source.address
        near.open()
        self.flow(pair)

    # ---- relaying ---------------------------------------------------------------------------------------------

    def flow(self, pair: LinkPair) -> None:
        """The receiving side's credit reaches the sending side (§12.2.1.1)."""
        if pair.closed:
            return
        rx, tx = pair.rx, pair.tx
        if not rx.state & Endpoint.LOCAL_ACTIVE:
            return
        if tx.drain_mode and tx.credit > 0:
            self._relay_drain(pair)
            return
        if pair.draining:  # the drain is over without an answer to wait for: its credit was all used, or the
            rx.drain_mode = False  # receiver gave credit again without drain
            pair.draining = False
        self._pass_credit(pair)

    @staticmethod
    def _pass_credit(pair: LinkPair) -> None:
        """Give the sending side what the receiving side granted and it has not been given yet."""
        want = pair.tx.credit - pair.rx.credit - pair.rx.queued
        if want > 0:
            pair.rx.flow(want)

    def _relay_drain(self, pair: LinkPair) -> None:
        """The receiver asked for a drain (AMQP 1.0 §2.6.7): the sender at the far end answers it, not the router.
        The drain goes on once, with the receiver's credit; once the sender has used or handed back all of it
        (and every message it sent is relayed) the receiver's unused credit is handed back to it. Until then no
        credit is given again: the sender's answer (its credit down to 0) is no cue to top it up."""
        rx, tx = pair.rx, pair.tx
        if not pair.draining:
            self._pass_credit(pair)
            rx.drain(0)
            pair.draining = True
        if rx.credit == 0 and rx.queued == 0:
            tx.drained()
            rx.drain_mode = False
            pair.draining = False

    def delivery(self, link, dlv: Delivery) -> None:
        pair = link.router_pair
        if pair.closed:
            return
        if link == pair.rx:
            self._transfer(pair, dlv)
        else:
            self._disposition(pair, dlv)

    def _transfer(self, pair: LinkPair, dlv: Delivery) -> None:
        twin = pair.deliveries.get(dlv.tag)
        if twin is not None:  # a delivery we relayed already: the sender settled it after the outcome
            if dlv.settled:
                twin.settle()
                dlv.settle()
                pair.deliveries.pop(dlv.tag, None)
            return
        if dlv.aborted:
            dlv.settle()
            return
        if dlv.partial or not dlv.readable:
            return  # relay whole messages; proton holds the partial bytes until the rest arrives
        data = pair.rx.recv(dlv.pending)
        pair.rx.advance()
        twin = pair.tx.delivery(dlv.tag)
        pair.tx.stream(data)
        pair.tx.advance()
        if dlv.remote_state:  # a transfer's own state (a transactional-state): set before the frame leaves
            _copy_state(dlv, twin)
        twin.router_twin = dlv
        for end in self.counts_pair(pair):
            end["delivered"] += 1
            if dlv.settled:
                end["presettled"] += 1
        if dlv.settled:
            twin.settle()
            dlv.settle()
        else:
            pair.deliveries[dlv.tag] = twin
        self.flow(pair)

    def _disposition(self, pair: LinkPair, twin: Delivery) -> None:
        dlv = getattr(twin, "router_twin", None)
        if dlv is None:
            return
        if twin.remote_state:
            _copy_state(twin, dlv)
            outcome = _OUTCOMES.get(twin.remote_state)
            if outcome is not None and twin.settled:
                for end in self.counts_pair(pair):
                    end[outcome] += 1
        if twin.settled:
            dlv.settle()
            twin.settle()
            pair.deliveries.pop(dlv.tag, None)

    @staticmethod
    def counts_pair(pair: LinkPair) -> tuple[dict, dict]:
        return pair.counts["rx"], pair.counts["tx"]

    # ---- detach -----------------------------------------------------------------------------------------------

    def detached(self, link, closed: bool) -> None:
        """One side detached: pass the detach (and its error) to the other side."""
        pair = getattr(link, "router_pair", None)
        if pair is None or pair.closed:
            return
        pair.closed = True
        other = pair.far if link == pair.near else pair.near
        if other.state & Endpoint.LOCAL_ACTIVE or other.state & Endpoint.LOCAL_UNINIT:
            # the far end's reason: its detach's, or that of the session it ended instead (RabbitMQ ends the
            # session on a link error), so that the client learns why
            condition = link.remote_condition or link.session.remote_condition
            if condition is not None:
                other.condition = condition
            if other.state & Endpoint.LOCAL_UNINIT:
                answer_refused(other)
            other.close() if closed else other.detach()

    def connection_lost(self, conn) -> None:
        """The broker (or neighbour) connection dropped: detach the client side of its routed links."""
        for link in self.router.links_of(conn):
            pair = getattr(link, "router_pair", None)
            if pair is None or pair.closed or link != pair.far:
                continue
            pair.closed = True
            near = pair.near
            near.condition = Condition(ROUTED_LINK_LOST, "the connection to the broker behind this link route was lost")
            if near.state & Endpoint.LOCAL_UNINIT:
                answer_refused(near)
            if not near.state & Endpoint.LOCAL_CLOSED:
                near.close()


_STANDARD = (Delivery.RECEIVED, Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED)


_OUTCOMES = {Delivery.ACCEPTED: "accepted", Delivery.REJECTED: "rejected", Delivery.RELEASED: "released",
             Delivery.MODIFIED: "modified"}


def _zero_counts() -> dict:
    return {end: {"delivered": 0, "presettled": 0, "accepted": 0, "rejected": 0, "released": 0, "modified": 0}
            for end in ("rx", "tx")}


def _copy_state(source: Delivery, target: Delivery) -> None:
    """Give `target` the delivery state `source` received: the standard outcomes field by field, any other
    state (declared, transactional-state, ...) as its descriptor and fields, which proton re-encodes as is."""
    state, remote, local = source.remote_state, source.remote, target.local
    if state not in _STANDARD:
        local.data = remote.data
    elif state == Delivery.MODIFIED:
        local.failed, local.undeliverable = remote.failed, remote.undeliverable
        if remote.annotations:
            local.annotations = remote.annotations
    elif state == Delivery.REJECTED and remote.condition is not None:
        local.condition = remote.condition
    elif state == Delivery.RECEIVED:
        local.section_number, local.section_offset = remote.section_number, remote.section_offset
    target.update(state)


def _external_address(section: LinkRoute, address: str) -> str:
    if section.del_external_prefix and address.startswith(section.del_external_prefix):
        address = address[len(section.del_external_prefix):]
    if section.add_external_prefix:
        address = section.add_external_prefix + address
    return address
