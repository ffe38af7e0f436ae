"""Links attaching to the broker, and going away: producers, consumers, mirrors and another broker's pulls.

Semantics (Artemis-compatible where the documents are silent):
* A receiving link is a producer: it gets credit whether or not anyone consumes (store-and-forward,
  000_902de7174695f2b6.txt), PRODUCER_CREDIT at a time. One with no target address is the anonymous relay.
* A sending link is a consumer of a queue. A link asking for the `topic` capability (or attaching to an address
  declared `<multicast/>`) subscribes; `queue` asks for anycast. A subscription whose source is durable and never
  expires is a durable subscription, named after the client's container id and link name (the AMQP JMS mapping)
  and kept across detach; any other lives with its link.
* An unknown address is created where the address settings allow (registry.py), else the attach is refused.
* With security on, every attach is checked for the connection's user (access.py).
* A consumer's link that goes away puts what it held back in the queue as a failed attempt (it may have seen
  them); a closed (not merely detached) durable subscriber ends its subscription (AMQP 1.0 §2.6.3).
* Mirror links (mirror.py) and the federation links of a broker network (federation.py) are recognised by their
  capabilities and handed to those modules.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from typing import TYPE_CHECKING

from proton import Link, Terminus

from ..links import refuse, terminus_symbols
from . import access as access_module
from . import federation as federating
from . import mirror as mirroring
from .config import ANYCAST, MULTICAST
from .model import Consumer, Producer, Queue

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("BROKER")

PRODUCER_CREDIT = 1000  # Artemis's amqpCredits default
PRODUCER_LOW_CREDIT = 300  # top up below this (Artemis's amqpMinCredits)


class Attachments:
    """Answers the attach of a link the broker did not open, and ends what a link held when it goes."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self._consumer_ids = itertools.count(1)

    def attach_producer(self, link):
        broker = self.broker
        kind = federating.incoming_kind(link)  # Artemis's federation links go by their desired capability
        if kind is not None:
            if broker.access is not None and self.unauthorized(link, ["send"], federating.FEDERATION_ADDRESS):
                return
            attach = broker.federation.control_attach if kind == federating.wire.CONTROL_LINK \
                else broker.federation.event_attach
            why = attach(link)
            if why is not None:
                refuse(link, "amqp:precondition-failed", why, log)
            return
        if mirroring.is_mirror_attach(link):
            if broker.access is not None and self.unauthorized(link, ["send"], link.remote_target.address or ""):
                return
            target = mirroring.MirrorTarget(broker.mirror_store, link)
            why = target.open(broker.node_id)
            if why is not None:
                refuse(link, "amqp:precondition-failed", why, log)
                return
            broker.link_states.of(link).mirror_target = target
            broker.mirror_store.index_entries = True
            return
        target = link.remote_target
        address = target.address or None
        hint = routing_hint(target.capabilities)
        # The management address is no address of queues: a producer there needs `send` on it, and creates nothing
        managing = broker.management.is_management(address)
        if address is not None and broker.access is not None:
            needed = ["send"] if managing else broker.access.needed(broker.addresses, address, hint, consumer=False)
            if self.unauthorized(link, needed, address):
                return
        if address is not None and not managing:
            info, _ = broker.registry.resolve(address, hint, for_consumer=False)
            if info is None:
                refuse(link, "amqp:not-found", f"address {address!r} does not exist and auto-create is off", log)
                return
        link.target.copy(target)
        link.source.copy(link.remote_source)
        broker.link_states.of(link).producer = Producer(link, address, hint)
        link.open()
        link.flow(PRODUCER_CREDIT)

    def attach_consumer(self, link):
        broker = self.broker
        kind = federating.receiver_kind(link)
        if kind is not None:
            self.attach_federation_receiver(link, kind)
            return
        source = link.remote_source
        address = source.address
        if not address:
            refuse(link, "amqp:invalid-field", "a receiver needs a source address", log)
            return
        hint = routing_hint(source.capabilities)
        if broker.access is not None:
            needed = broker.access.needed(broker.addresses, address, hint, consumer=True,
                                          subscription=self.new_subscription(link, address, source))
            if self.unauthorized(link, needed, address):
                return
        info, routing = broker.registry.resolve(address, hint, for_consumer=True)
        if info is None:
            refuse(link, "amqp:not-found", f"address {address!r} has no queue and auto-create is off", log)
            return
        if routing == ANYCAST:
            queue = next(q for q in info["queues"] if q.routing == ANYCAST)
        else:
            queue = self.subscription(link, address, source)
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
        broker.federation.demand_changed(queue.address)

    def attach_federation_receiver(self, link, kind: str):
        """Another broker of a network pulls from us (federation.py): a queue by its FQQN, or an address into a
        subscription of its own; an event link is answered and kept."""
        broker = self.broker
        if kind == federating.wire.EVENT_LINK:
            why = broker.federation.event_attach(link)
            if why is not None:
                refuse(link, "amqp:illegal-state", why, log)
            return
        why, queue, address, selector = broker.federation.serve(link, kind)
        if why is not None:
            federating.refuse_pull(link, "amqp:not-found" if "exist" in why else "amqp:illegal-state", why)
            return
        if broker.access is not None:
            hint = ANYCAST if queue is not None else MULTICAST
            needed = broker.access.needed(broker.addresses, address, hint, consumer=True,
                                          subscription=None if queue is not None else "non-durable")
            if self.unauthorized(link, needed, address):
                return
        if queue is None:
            queue = broker.registry.create_queue(f"{address}.sub.{uuid.uuid4().hex[:12]}", address, MULTICAST,
                                                 temporary=True)
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = Link.RCV_FIRST
        consumer = self.add_consumer(link, queue)
        broker.federation.serving(link, kind, consumer, selector)
        link.open()
        broker.federation.demand_changed(queue.address)

    def unauthorized(self, link, operations: list[str], address: str) -> bool:
        why = self.broker.access.refuse(link, operations, address)
        if why is not None:
            refuse(link, access_module.UNAUTHORIZED, why, log)
        return why is not None

    def new_subscription(self, link, address, source) -> str | None:
        """What queue a consumer's attach would create if it ends up multicast (see subscription): "durable",
        "non-durable", or None when its durable subscription exists already."""
        if source.durability != Terminus.NONDURABLE and source.expiry_policy == Terminus.EXPIRE_NEVER:
            existing = self.broker.queues.get(f"{link.connection.remote_container}.{link.name}")
            return None if existing is not None and existing.address == address else "durable"
        return "non-durable"

    def subscription(self, link, address, source) -> Queue | None:
        registry = self.broker.registry
        durable = source.durability != Terminus.NONDURABLE and source.expiry_policy == Terminus.EXPIRE_NEVER
        if durable:  # Artemis names a durable subscription after the client's container id and link name
            name = f"{link.connection.remote_container}.{link.name}"
            existing = self.broker.queues.get(name)
            if existing is not None and existing.address == address:
                return existing
            if existing is not None:
                # The same subscription name on another address: the old subscription ends and a new one
                # starts (as Artemis does when a durable subscriber changes its address).
                if existing.consumers:
                    return None
                log.info("Durable subscription %r moves from address %r to %r", name, existing.address, address)
                registry.delete_queue(existing)
            queue = registry.create_queue(name, address, MULTICAST)
            queue.durable_subscription = True
            return queue
        return registry.create_queue(f"{address}.sub.{uuid.uuid4().hex[:12]}", address, MULTICAST, temporary=True)

    def add_consumer(self, link, queue: Queue) -> Consumer:
        """`link` consumes `queue`: a client's, or a sending link of a broker connection."""
        consumer = Consumer(link, queue, next(self._consumer_ids))
        self.broker.link_states.of(link).consumer = consumer
        queue.consumers.append(consumer)
        self.broker.dirty.add(queue)
        self.broker.stats_dirty = True
        return consumer

    def add_outgoing_producer(self, link, address: str, routing: str, federation_side=None) -> None:
        """A receiving link this broker opened produces into `address`: a broker connection's receiver, or a pull
        from another broker of a network (`federation_side`, federation.py)."""
        producer = Producer(link, address, routing)
        producer.federation_side = federation_side
        self.broker.link_states.of(link).producer = producer
        link.flow(PRODUCER_CREDIT)

    def link_gone(self, link, closed: bool):
        broker = self.broker
        state = broker.link_states.get(link)
        if state.coordinator:
            broker.transactions.link_gone(link)
        producer = state.producer
        if producer is not None:
            producer.closed = True
            if producer.federation_side is not None:
                producer.federation_side.link_lost(link)
        if getattr(link, "broker_federation_side", None) is not None:
            broker.federation.control_closed(link)
        consumer = state.consumer
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
                broker.outcomes.requeue(queue, entry)
                continue
            entry.delivery_count += 1
            broker.outcomes.requeue_or_dead_letter(queue, entry)
        consumer.unsettled.clear()
        # A closed (not merely detached) durable subscriber ends its subscription, as in AMQP 1.0 §2.6.3.
        ends_subscription = queue.temporary or (closed and queue.durable_subscription)
        if ends_subscription and not queue.consumers:
            broker.registry.delete_queue(queue)
        else:
            broker.dirty.add(queue)
        broker.stats_dirty = True
        broker.federation.demand_changed(queue.address)


def routing_hint(capabilities) -> str | None:
    """`topic` asks for a multicast subscription, `queue` for anycast (Artemis's AMQP conventions)."""
    caps = terminus_symbols(capabilities)
    if "topic" in caps:
        return MULTICAST
    if "queue" in caps:
        return ANYCAST
    return None
