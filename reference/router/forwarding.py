"""Forwarding: where each message goes, and the copies the router makes of it.

003_9cdc7c48796dae4f.txt §12.1.1.3: a message is routed when it arrives, by its address (a link's target, or
for an anonymous sender the message's `to`), to the consumers the address's distribution picks (§12.1.2:
balanced, closest or multicast, here and on the other routers of the network). A router stores nothing: with
no consumer reachable an unsettled message goes back released (§12.1.1.4), or to the address's fallback
destination when it has one (§12.1.4.3); an in-autolink's waits, parked, for the next consumer (credit.py).
Priority (§12.1.3): the address's priority, when configured, replaces the message's own on each copy.

A message from a neighbour router says where it goes in the router's own annotations (annotations.py), and is
routed by those. The router's management agent gets the requests sent to its addresses (_to_agent), and its
answers go out like any message of the router's own (inject).
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING

from proton import Condition, Delivery, Message

from ..links import read_message
from ..peek import routing_view
from . import raw
from .annotations import NO_ROUTING, routing_from
from .config import AddressSection
from .distribution import BALANCED, MULTICAST, RoundRobin, pick_anycast
from .interrouter import DESTS
from .keys import FALLBACK, plain_address
from .outcomes import finish
from .settlement import ACCEPTED, REJECTED, RELEASED
from .state import CACHE_LIMIT as _CACHE_LIMIT
from .state import Consumer, Inbound, Outbound, Producer, RemotePath, state_of

if TYPE_CHECKING:
    from .router import Router

log = logging.getLogger("ROUTER")
msglog = logging.getLogger("MESSAGE")

DEFAULT_MESSAGE_PRIORITY = 4  # AMQP 1.0 §3.2.1 header.priority default


class Forwarding:
    """Routes each message a producer sends: plans its destinations and queues a copy for each."""

    def __init__(self, router: Router):
        self.router = router  # its address_config (management replaces it)
        self.router_id = router.router_id
        self.consumers = router.consumers
        self.mesh = router.mesh
        self.remote_paths = router.remote_paths
        self.agent = router.agent
        self._agent_keys = router.agent.keys
        self._dirty = router._dirty  # connections the pump serves at the end of this batch of I/O
        self._ties: dict[str, RoundRobin] = {}
        self._seq = itertools.count()
        self.stats = {"routed": 0, "no_route": 0}
        # The MESSAGE log at debug (one line per message), asked once: the server configures logging before it
        # makes the router, and asking per message was some 3% of the router's CPU.
        self._trace_messages = msglog.isEnabledFor(logging.DEBUG)
        # Plans that involve no choice (one destination, multicast, none), by (address, distribution, dests);
        # emptied whenever consumers or the network change (_routes_changed).
        self._fixed_plans: dict = {}
        # What routing asks of the router's other parts, message by message:
        self._park = router.credit._park
        self._top_up = router.credit._top_up
        self._count_in = router.counters._count_in
        self._count_out = router.counters._count_out
        self._count_outcome = router.counters._count_outcome
        self.totals = router.counters.totals
        self._counted_parked = router.counters._counted_parked
        self._routing_of = router.annotations._routing_of
        self._annotated = router.annotations._annotated
        self._annotations_for = router.annotations._annotations_for
        self._without_router_annotations = router.annotations._without_router_annotations

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
        routing = NO_ROUTING
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
                finish(dlv, REJECTED, condition=Condition("amqp:decode-error", f"cannot decode message: {exc}"),
                        held=False)
                self._count_outcome(producer, REJECTED)
                self._top_up(producer)
                return
            to, priority = message.address, message.priority
            if producer.from_neighbour:
                routing = routing_from(message.annotations or {})
        presettled = raw.settled_by_peer(dlv)
        dests = None
        exclude = None
        if producer.from_neighbour:  # routed to us by a neighbour: the annotations say where it goes
            key = routing.to
            neighbour = producer.neighbour
            if neighbour is None:  # looked up once per link: it is the same for every message
                neighbour = producer.neighbour = getattr(state_of(link.connection), "neighbour", None)
            if neighbour is not None and neighbour.edge:
                exclude = state_of(link.connection)  # from an edge: route it anew, but not back to that edge
            elif routing.dests is not None:
                dests = routing.dests
            else:
                dests = frozenset((self.router_id,))  # from our interior uplink (we are an edge): deliver here
        else:
            key = producer.route_key or to
        if not key:
            if not presettled:
                finish(dlv, REJECTED, condition=Condition(
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
        section = self.router.address_config.lookup(address)
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
                finish(dlv, RELEASED, held=False)
                self._count_outcome(producer, RELEASED)
            self._top_up(producer)
            return
        inbound = Inbound(delivery=dlv, producer=producer, presettled=presettled, multicast=multicast,
                          credit_on_send=presettled or producer.from_neighbour)
        if presettled:
            raw.settle(dlv)  # the router settles pre-settled deliveries itself (§12.1.1.4)
        else:
            raw.hold(dlv)  # kept until its outcome is known: finish lets go
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

    def _to_agent(self, producer: Producer, dlv, data, presettled: bool) -> None:
        """A request for our management agent: answered at once, the request accepted."""
        request = Message()
        try:
            request.decode(data)
        except Exception as exc:
            if not presettled:
                finish(dlv, REJECTED, condition=Condition("amqp:decode-error", f"cannot decode message: {exc}"),
                        held=False)
                self._count_outcome(producer, REJECTED)
            else:
                raw.settle(dlv)
            self._top_up(producer)
            return
        if presettled:
            raw.settle(dlv)
        else:
            finish(dlv, ACCEPTED, held=False)
            self._count_outcome(producer, ACCEPTED)
        self._top_up(producer)
        response = self.agent.respond(request)
        if response is not None:
            self.inject(response.address, response.encode())

    def inject(self, address: str, data: bytes) -> bool:
        """Send a message of the router's own (pre-settled) to `address`, wherever its consumer is; False if
        none is reachable (the message is dropped, as a pre-settled one with no route is)."""
        key = address
        section = self.router.address_config.lookup(plain_address(key)) if not key.startswith("amqp:/") else None
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


def _effective_priority(section: AddressSection | None, priority: int | None) -> int:
    if section is not None and section.priority is not None and section.priority >= 0:
        return section.priority
    return DEFAULT_MESSAGE_PRIORITY if priority is None else priority
