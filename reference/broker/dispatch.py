"""Which consumer gets which message, and when: the broker's dispatch of its queues.

* Anycast: competing consumers, each message to one of them, taken in turn among those with credit; a queue
  is FIFO (message id order). A message a consumer called undeliverable-here (outcomes.py) skips that consumer.
* A delayed redelivery (redelivery-delay) becomes available once its time has come; a message whose TTL ran out
  is expired instead of sent (to the expiry address, or dropped), at dispatch and by a periodic scan.
* A redelivered message goes out with its delivery-count and first-acquirer false (AMQP 1.0 §3.2.1).
* A consumer that settles on sending (at-most-once) is done with the message as it goes.
* A consumer is held back while its connection's output is full (OUTPUT_HOLD_BYTES); a drained consumer
  (AMQP 1.0 §2.6.7) is told once its queue has nothing for it.
* Another broker of a network gets only what the network lets it (federation.py: max hops, not back where a
  message came from), except that a queue with no consumer of its own gives messages back to the broker they
  came from.
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import TYPE_CHECKING

from proton import Link

from ..peek import redelivered
from . import federation as federating
from .config import ANYCAST
from .messages import redelivered_by_decode
from .model import Consumer, Entry, Queue

if TYPE_CHECKING:
    from .broker import Broker

# A consumer is sent no more while this much of its connection's output waits to be written. Credit alone does
# not bound what the broker buffers for a client that grants a million and then stops reading: every message
# would be encoded into that connection's output, in the broker's memory. Messages wait in the queue instead,
# where expiry, other consumers and redelivery still apply.
OUTPUT_HOLD_BYTES = 1 << 20


class Dispatcher:
    """Sends the queues' messages to their consumers; the broker calls it once per turn of its event loop."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self.held: set[Queue] = set()  # queues with a consumer held back by its connection's unwritten output
        self._tags = itertools.count(1)

    def pump(self) -> None:
        """Dispatch every queue that changed since the last turn (broker.dirty), and those held back then."""
        broker = self.broker
        broker.dirty |= self.held  # their consumers' output may have gone out since: look again
        self.held.clear()
        while broker.dirty:
            self.dispatch(broker.dirty.pop())

    def dispatch(self, queue: Queue) -> None:
        broker = self.broker
        now_wall, now = time.time(), time.monotonic()
        if queue.delayed:
            ready = [e for e in queue.delayed if e.ready_at <= now]
            queue.delayed = [e for e in queue.delayed if e.ready_at > now]
            for entry in ready:
                heapq.heappush(queue.available, entry)
        skipped = []
        # Output each consumer's session already holds, plus what this call adds (read once per consumer and
        # call, then counted here).
        backlog = {c.id: unwritten(c.link) for c in queue.consumers if not c.closed and c.link.credit > 0}
        # With no consumer of its own here, a queue gives its messages back to the network broker they came from
        # when that broker pulls them (federation.py: the consumer moved there).
        replay = queue.routing == ANYCAST and not any(c.federation_node is None for c in queue.consumers
                                                      if not c.closed)
        while queue.available:
            ready_consumers = [c for c in queue.consumers if not c.closed and c.link.credit > 0
                               and backlog.get(c.id, 0) < OUTPUT_HOLD_BYTES]
            if not ready_consumers:
                if any(b >= OUTPUT_HOLD_BYTES for b in backlog.values()):
                    self.held.add(queue)
                break
            entry = heapq.heappop(queue.available)
            if entry.removed:
                queue.dead -= 1
                continue
            if entry.expiry is not None and entry.expiry <= now_wall:
                broker.outcomes.move(queue, entry, broker.config.settings_for(queue.address)["expiry-address"],
                                     "expired", "expiry")
                continue
            eligible = [c for c in ready_consumers if c.id not in entry.excluded and (
                c.federation_node is None
                or federating.may_forward(entry.came_from, entry.hops, c.federation_node, c.max_hops)
                or (replay and entry.came_from == c.federation_node))]
            if not eligible:
                skipped.append(entry)
                continue
            consumer = eligible[queue.turn % len(eligible)]
            queue.turn += 1
            self.send(consumer, entry)
            backlog[consumer.id] = backlog.get(consumer.id, 0) + len(entry.data)
        for entry in skipped:
            heapq.heappush(queue.available, entry)
        for consumer in queue.consumers:
            link = consumer.link
            if link.drain_mode and link.credit > 0 and len(queue.available) == queue.dead:
                link.drained()
        broker.stats_dirty = True

    def send(self, consumer: Consumer, entry: Entry) -> None:
        link = consumer.link
        data = entry.data
        if entry.delivery_count:
            data = redelivered(data, entry.delivery_count) or redelivered_by_decode(data, entry.delivery_count)
        dlv = link.delivery(str(next(self._tags)))
        link.stream(data)
        link.advance()
        if link.snd_settle_mode == Link.SND_SETTLED:
            dlv.settle()  # at-most-once consumer: settled on sending, done
            self.broker.registry.remove(consumer.queue, entry)
            return
        consumer.unsettled[dlv.tag] = entry
        consumer.queue.in_flight += 1
        entry.in_flight = True

    def scan(self) -> None:
        """The periodic scan: queues with a delayed redelivery now due are dispatched, expired messages moved."""
        broker = self.broker
        now_wall, now = time.time(), time.monotonic()
        for queue in list(broker.queues.values()):
            if any(e.ready_at <= now for e in queue.delayed):
                broker.dirty.add(queue)
            expired = [e for e in queue.available if e.expiry is not None and e.expiry <= now_wall and not e.removed]
            if expired:
                queue.available = [e for e in queue.available if e not in expired]
                heapq.heapify(queue.available)
                settings = broker.config.settings_for(queue.address)
                for entry in expired:
                    broker.outcomes.move(queue, entry, settings["expiry-address"], "expired", "expiry")
                broker.stats_dirty = True


def unwritten(link: Link) -> int:
    """Bytes the link's session holds that are not yet encoded into frames: what a client that stops reading
    makes pile up (the transport itself encodes only as much as its output buffer takes, tens of KiB)."""
    session = link.session
    return session.outgoing_bytes if session is not None else 0
