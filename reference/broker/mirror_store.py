"""What mirroring does to this broker's queues (002_f23507c2891d6d06.txt "Mirroring", "Dual Mirror (Disaster
Recovery)"). mirror.py speaks the mirror's wire and links; this is the broker it talks to: a MirrorSource or a
MirrorTarget is given this object as its `broker`.

* Source side: every started `<mirror>` (a MirrorSource) hears of each address, queue, message and
  acknowledgement here (registry.py tells it), and appends its events to its own store-and-forward queue, an
  *internal* queue (never mirrored or linked itself), journaled with the batch that caused them.
* Target side: the events of another broker's mirror are applied as if they happened here. A sent message is
  routed to its address and remembered under its origin (node id, internal id). A `postAck` removes that
  message, or expires it (to this broker's expiry address) when its reason is an expiry; one for a message a
  consumer here holds is applied when the message comes back unaccepted (the seed: both brokers may deliver
  it); one for a message that is not here yet is kept a while and applied when the message comes (as Artemis
  2.40's AckManager retries it).
* No echo (dual mirror): while an event from node `via` is applied, the mirrors do not send what it causes back
  to that node.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import logging
import time
from typing import TYPE_CHECKING

from proton import Delivery

from ..peek import peek
from . import mirror as mirroring
from .config import ANYCAST, MULTICAST
from .messages import decode, expiry_of, fields_of
from .model import Entry, Queue

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("BROKER")

# A mirrored acknowledgement whose message has not arrived is kept this long (and at most this many), then dropped.
# Artemis 2.40 retries one 5 times on the queue at 100 ms, then twice in its paging store; a longer wait costs
# nothing here, since a message id is never used twice (durability.py, ID_BLOCK).
EARLY_ACK_S = 30.0
EARLY_ACKS_KEPT = 100_000


class MirrorStore:
    """The mirrors of this broker (source side) and the events applied from others' (target side)."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self.mirrors: list = []  # MirrorSource of every started <mirror>
        self.mirror_seen: dict = {}  # origin node id -> internal ids already applied (mirror.py)
        # (queue, origin node, internal id) -> (ack reason, deadline): mirrored acknowledgements that came before
        # their message, applied when it comes (mirror_ack)
        self.mirror_early_acks: collections.OrderedDict = collections.OrderedDict()
        self.index_entries = False  # keep Queue.keyed: once this broker mirrors or is mirrored to
        self.via: str | None = None  # while applying a mirror event: the node it came from

    @property
    def addresses(self) -> dict:
        """The broker's addresses (a starting MirrorSource announces them)."""
        return self.broker.addresses

    # ---- source side -----------------------------------------------------------------------------------------

    def add_mirror(self, source) -> None:
        """A `<mirror>` starts: events from now on go to its store-and-forward queue."""
        self.mirrors.append(source)
        self.index_entries = True
        source.start()

    def internal_queue(self, name: str) -> Queue:
        """A mirror's store-and-forward queue: created durable, or the one the journal recovered."""
        queue = self.broker.queues.get(name)
        if queue is None:
            queue = self.broker.registry.create_queue(name, name, ANYCAST, durable=True, internal=True)
        queue.internal = True
        return queue

    def append_internal(self, queue: Queue, data: bytes) -> None:
        """Store one mirror event at the end of its queue (journaled with the batch that caused it)."""
        broker = self.broker
        msg_id = next(broker.ids)
        entry = Entry(msg_id, data, queue.durable and broker.journal is not None, None)
        if entry.durable:
            broker.journal.enqueue(msg_id, queue.name, data)
        heapq.heappush(queue.available, entry)
        broker.dirty.add(queue)
        broker.stats_dirty = True

    # ---- target side -----------------------------------------------------------------------------------------

    def store_mirrored(self, data: bytes, address: str | None, origin: tuple, via: str) -> bool:
        """Route a message a mirror brought (the same address, remembered under its origin); returns whether
        it is durable here (its acceptance then waits for the journal)."""
        broker = self.broker
        fields = peek(data) or fields_of(decode(data))
        address = address or fields.to
        if not address:
            raise ValueError("a mirrored message with no address")
        info, _ = broker.registry.resolve(address, None, for_consumer=False)
        if info is None:
            raise ValueError(f"address {address!r} does not exist here and auto-create is off")
        durable = bool(fields.durable) and broker.journal is not None
        with self._applying(via):
            broker.registry.route(info, next(broker.ids), data, durable, expiry_of(fields), origin=origin)
            if self.mirror_early_acks:
                self._apply_early_acks(info, origin)
        return durable

    def _apply_early_acks(self, info: dict, origin: tuple) -> None:
        now = time.monotonic()
        for queue in info["queues"]:
            early = self.mirror_early_acks.pop((queue.name, *origin), None)
            entry = queue.keyed.get(origin)
            if early is None or entry is None or early[1] < now:
                continue
            log.info("Mirrored acknowledgement for %s/%s on %r applied as its message arrived", *origin, queue.name)
            self._drop_mirror_acked(queue, entry, early[0])

    @contextlib.contextmanager
    def _applying(self, via: str):
        """While a mirror event from node `via` is applied: the mirrors do not send what it causes back there."""
        self.via = via
        try:
            yield
        finally:
            self.via = None

    def accept_when_durable(self, dlv: Delivery, durable: bool) -> None:
        self.broker.durability.accept_when_durable(dlv, durable)

    def mirror_add_address(self, name: str | None, routings: set[str], via: str) -> None:
        """An `addAddress`: declare `name` with the routing types it names (anycast when it names none)."""
        if not name:
            return
        with self._applying(via):
            self.broker.registry.declare_address(name, routings & {ANYCAST, MULTICAST} or {ANYCAST})
        log.info("Address %r added by the mirror from %s (%s)", name, via, ", ".join(sorted(routings)) or "anycast")
        self.broker.stats_dirty = True

    def mirror_create_queue(self, name: str | None, address: str | None, routing, durable: bool, via: str) -> None:
        if not name or name in self.broker.queues:
            return
        routing = str(routing or ANYCAST).lower()
        with self._applying(via):
            self.broker.registry.create_queue(name, address or name,
                                              routing if routing in (ANYCAST, MULTICAST) else ANYCAST, durable=durable)

    def mirror_delete_queue(self, name: str, via: str) -> None:
        queue = self.broker.queues.get(name)
        if queue is None or queue.internal:
            return
        with self._applying(via):
            self.broker.delete_queue(queue)

    def mirror_delete_address(self, name: str | None, via: str) -> None:
        info = self.broker.addresses.get(name or "")
        if info is not None and not info["queues"]:
            del self.broker.addresses[name]
            self.broker.stats_dirty = True

    def mirror_ack(self, queue_name: str | None, node: str, internal: int, via: str,
                   reason: str = mirroring.NORMAL) -> None:
        """A `postAck`: the message (origin `node`, id `internal`) was acknowledged on the other broker, for
        `reason`: an expired message is expired here too (to this broker's expiry address, as Artemis's AckManager
        does), any other is removed."""
        queue = self.broker.queues.get(queue_name or "")
        entry = queue.keyed.get((node, internal)) if queue is not None else None
        if entry is None:
            # Not here (yet): Artemis's AckManager keeps such an acknowledgement and tries again; so does this
            # broker, for a while, in case the message is still on its way (store_mirrored applies it).
            if queue is not None:
                self.mirror_early_acks[(queue.name, node, internal)] = (reason, time.monotonic() + EARLY_ACK_S)
                while len(self.mirror_early_acks) > EARLY_ACKS_KEPT:
                    self.mirror_early_acks.popitem(last=False)
            log.debug("Mirrored acknowledgement for %s/%s on %r: no such message here yet", node, internal,
                      queue_name)
            return
        if entry.in_flight:
            # Held by a consumer here: it may still get it (the seed: both brokers can deliver it); if it
            # comes back unaccepted it is dropped then (outcomes.py, requeue).
            entry.mirror_acked = reason
            return
        with self._applying(via):
            self._drop_mirror_acked(queue, entry, reason)

    def _drop_mirror_acked(self, queue: Queue, entry: Entry, reason: str) -> None:
        """Apply a mirrored acknowledgement to a stored entry that no consumer holds (removed lazily from the
        heap, as `dead`)."""
        self.broker.outcomes.mirror_acked(queue, entry, reason)
        if entry in queue.delayed:
            queue.delayed.remove(entry)
        else:
            entry.removed = True
            queue.dead += 1
        self.broker.stats_dirty = True
