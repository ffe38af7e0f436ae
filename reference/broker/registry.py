"""The broker's addresses and queues: which exist, which a link or a message creates, and where a message goes.

Semantics (Artemis-compatible where the documents are silent):
* An *address* routes to its queues. Anycast: one queue, competing consumers, each message to one of them.
  Multicast: one subscription queue per subscriber, each gets a copy.
* An unknown address, or a routing type an address lacks, is created when the address settings allow it
  (`auto-create-addresses`, `default-address-routing-type`); an anycast address gets its queue of the same
  name (`auto-create-queues`).
* Producers' messages are stored whether or not anyone consumes (store-and-forward, 000_902de7174695f2b6.txt);
  queues are FIFO (message ids are arrival order).
* Every creation, deletion, message stored and message gone is told to the mirrors (mirror.py), to the broker
  connections (connections.py) and to the network's federation (federation.py), which act on it.
"""

from __future__ import annotations

import heapq
import logging
from typing import TYPE_CHECKING

from . import federation as federating
from . import mirror as mirroring
from .config import ANYCAST, MULTICAST
from .model import Entry, Queue

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("BROKER")


class QueueRegistry:
    """The broker's `addresses` and `queues` (held by the broker, which many modules read), changed here."""

    def __init__(self, broker: Broker):
        self.broker = broker

    def declare_address(self, name: str, routings: set) -> dict:
        broker = self.broker
        entry = broker.addresses.get(name)
        if entry is None:
            entry = broker.addresses[name] = {"name": name, "routings": set(routings), "queues": []}
            for source in broker.mirror_store.mirrors:
                source.address_added(name, routings, broker.mirror_store.via)
            broker.federation.added(name)  # a network's pull refused for want of it goes again (federation.py)
        entry["routings"] |= routings
        return entry

    def create_queue(self, name, address, routing, durable=True, temporary=False, journal=True,
                     internal=False) -> Queue:
        broker = self.broker
        queue = Queue(name, address, routing, durable=durable and not temporary, temporary=temporary,
                      internal=internal)
        broker.queues[name] = queue
        self.declare_address(address, {routing})["queues"].append(queue)
        if journal and queue.durable and broker.journal is not None:
            broker.journal.add_queue(name, address, routing)
        broker.stats_dirty = True
        log.info("Queue %r created on address %r (%s%s)", name, address, routing,
                 ", temporary" if temporary else "")
        if not internal:
            for source in broker.mirror_store.mirrors:
                source.queue_created(queue, broker.mirror_store.via)
            broker.connections.queue_created(queue)
            broker.federation.added(address, name)
        return queue

    def delete_queue(self, queue: Queue) -> None:
        """The queue and the journal records of its stored messages go. Its consumers are not told: that is
        Broker.delete_queue, for management and the mirrors."""
        broker = self.broker
        broker.queues.pop(queue.name, None)
        info = broker.addresses.get(queue.address)
        if info and queue in info["queues"]:
            info["queues"].remove(queue)
        if queue.durable and broker.journal is not None:
            for entry in queue.available + queue.delayed:
                if entry.durable:
                    broker.journal.delete(entry.msg_id, queue.name)
            broker.journal.delete_queue(queue.name)
        broker.dirty.discard(queue)
        broker.stats_dirty = True
        for source in broker.mirror_store.mirrors:
            source.queue_deleted(queue, broker.mirror_store.via)
        broker.federation.demand_changed(queue.address)

    def auto_create(self, address: str, routing: str) -> dict | None:
        """`address` (for anycast, with its queue of that name) as a consumer's attach finds or creates it, where
        the address settings allow: its info, or None. For another broker's pull (federation.py)."""
        return self.resolve(address, routing, for_consumer=True)[0]

    def resolve(self, address: str, hint: str | None, for_consumer: bool) -> tuple[dict | None, str]:
        """Find or auto-create an address; returns (address info or None, routing to use)."""
        info = self.broker.addresses.get(address)
        settings = self.broker.config.settings_for(address)
        if info is None:
            if not settings["auto-create-addresses"]:
                return None, ""
            routing = hint or settings["default-address-routing-type"]
            info = self.declare_address(address, {routing})
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
            self.create_queue(address, address, ANYCAST)
        return info, routing

    def route(self, info: dict, msg_id: int, data: bytes, durable: bool, expiry: float | None,
              delivery_count: int = 0, origin: tuple | None = None, hops: int = 0,
              came_from: str | None = None, mirrored: bool = True) -> int:
        """Store a message in the queues of its address: a copy in every multicast queue (but the subscriptions of
        a network broker it must not go back to), one anycast queue by message id; returns how many took it."""
        broker = self.broker
        anycast = [q for q in info["queues"] if q.routing == ANYCAST]
        targets = [q for q in info["queues"] if q.routing == MULTICAST
                   and (q.federation_filter is None or federating.may_forward(came_from, hops, *q.federation_filter))]
        if anycast:
            targets.append(anycast[msg_id % len(anycast)])
        for queue in targets:
            entry = Entry(msg_id, data, durable and queue.durable, expiry, delivery_count, origin=origin, hops=hops,
                          came_from=came_from)
            if entry.durable:
                broker.journal.enqueue(msg_id, queue.name, data)
            heapq.heappush(queue.available, entry)
            if broker.mirror_store.index_entries:
                queue.keyed[origin or (broker.node_id, msg_id)] = entry
            broker.dirty.add(queue)
        if mirrored:  # (not an expired message's copy: see outcomes.py, move)
            for source in broker.mirror_store.mirrors:
                source.sent(info["name"], msg_id, data, origin, broker.mirror_store.via)
        broker.stats_dirty = True
        return len(targets)

    def remove(self, queue: Queue, entry: Entry, reason: str = mirroring.NORMAL) -> None:
        """`entry` leaves `queue` for good (acknowledged, or moved away for `reason`): its journal record goes and
        the mirrors hear of it."""
        broker = self.broker
        if entry.durable:
            broker.journal.delete(entry.msg_id, queue.name)
        if queue.keyed:
            queue.keyed.pop(entry.origin or (broker.node_id, entry.msg_id), None)
        if not queue.internal:
            for source in broker.mirror_store.mirrors:
                source.acked(queue, entry, broker.mirror_store.via, reason)
