"""Sending: the pump that hands waiting copies to consumers as they grant credit, in priority order.

Outbound copies wait in a per-consumer FIFO until the consumer grants credit. Sending is done by a pump
that runs once per batch of I/O events, per connection, and serves the consumer links of that connection
in priority order (003_9cdc7c48796dae4f.txt §12.1.3): the head copy with the highest priority goes first;
address priority, when configured, replaces the message's own priority (forwarding.py sets it on each copy).

An inter-router connection carries every address on one data link, so there the copies wait in one queue
per priority (`PriorityPending`): a later high-priority copy overtakes earlier low-priority ones still
waiting for the neighbour's credit. And the pump hands that link no more while the connection's output is
backed up (`OUTPUT_HOLD_BYTES` not yet written to the socket), so that copies wait in the router, where they
can still be overtaken, rather than in the engine's buffers, where they cannot. qdrouterd gets the same
effect from one inter-router link per priority and its "Q3" limit on a session's outgoing bytes.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING

from . import raw
from .settlement import ACCEPTED
from .state import ConnectionState, Consumer, Outbound

if TYPE_CHECKING:
    from .router import Router

OUTPUT_HOLD_BYTES = 256 * 1024  # an inter-router link is served no more while this much output waits


class PriorityPending:
    """The copies waiting on an inter-router data link: FIFO within a priority, highest priority first.
    Stands in for the deque a consumer link's copies wait in (append, popleft, [0], len, iteration, clear).

    Every message to a neighbour goes through here, so the queue the next copy comes from is kept at hand
    (`_head`) instead of being looked for on each look and each pop."""

    def __init__(self):
        self._queues: dict[int, deque] = {}  # priority -> copies, highest priority first
        self._size = 0  # asked for on every pump, so counted rather than summed
        self._head: deque | None = None  # the highest-priority queue with a copy in it; None when empty
        self._head_priority = -1

    def append(self, out: Outbound) -> None:
        priority = out.priority
        queue = self._queues.get(priority)
        if queue is None:
            queue = self._queues[priority] = deque()
            self._queues = dict(sorted(self._queues.items(), reverse=True))
        queue.append(out)
        self._size += 1
        if priority > self._head_priority:  # an empty queue's head priority is -1, below any message's
            self._head, self._head_priority = queue, priority

    def _find_head(self) -> None:
        for priority, queue in self._queues.items():
            if queue:
                self._head, self._head_priority = queue, priority
                return
        self._head, self._head_priority = None, -1

    def popleft(self) -> Outbound:
        head = self._head
        if head is None:
            raise IndexError("no copy waiting")
        out = head.popleft()
        self._size -= 1
        if not head:
            self._find_head()
        return out

    def __getitem__(self, index: int) -> Outbound:
        if index != 0 or self._head is None:
            raise IndexError("only the head copy can be looked at")
        return self._head[0]

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self):
        for queue in self._queues.values():
            yield from queue

    def clear(self) -> None:
        self._queues.clear()
        self._size = 0
        self._head, self._head_priority = None, -1


class Pump:
    """Serves the consumer links of the connections that have copies to send or credit to use."""

    def __init__(self, router: Router):
        self.router = router  # its `now`: the end of the last batch of I/O, when a connection last had a delivery
        self._dirty = router._dirty  # connections to serve at the end of this batch of I/O
        self._held: set[ConnectionState] = set()  # inter-router connections whose output is backed up
        self._tags = itertools.count()
        self.outbound_of = router.outbound_of
        self._copy_sent_or_dropped = router.outcomes._copy_sent_or_dropped
        self._copy_final = router.outcomes._copy_final

    def serve(self) -> None:
        """The end of a batch of I/O: serve every connection that has something to send."""
        # A backed-up inter-router connection is looked at again after every batch of I/O: the socket may
        # have taken some of its output.
        self._dirty |= self._held
        while self._dirty:
            self._pump(self._dirty.pop())

    def _pump(self, conn_state: ConnectionState):
        consumers = [c for c in conn_state.consumers if not c.closed]
        while True:
            best, best_key, held = None, None, False
            for consumer in consumers:
                if consumer.pending and raw.credit(consumer.impl) > 0:
                    if consumer.neighbour and raw.outgoing_bytes(consumer.session_impl) >= OUTPUT_HOLD_BYTES:
                        held = True  # let it wait here, where a later higher-priority copy can overtake it
                        continue
                    head = consumer.pending[0]
                    key = (-head.priority, head.seq)
                    if best_key is None or key < best_key:
                        best, best_key = consumer, key
            if best is None:
                break
            self._send(best, best.pending.popleft())
        if held:
            self._held.add(conn_state)
        else:
            self._held.discard(conn_state)
        for consumer in consumers:
            link = consumer.link
            if link.drain_mode and not consumer.pending and link.credit > 0:
                link.drained()

    def _send(self, consumer: Consumer, out: Outbound):
        dlv = raw.send_copy(consumer.impl, b"%x" % next(self._tags), out.data)
        counts = consumer.counts
        counts["delivered"] += 1
        consumer.conn.last_delivery = self.router.now
        if out.inbound.presettled or consumer.at_most_once:
            counts["presettled"] += 1
        self._copy_sent_or_dropped(out.inbound)
        if out.inbound.presettled:
            raw.settle(dlv)
        elif consumer.at_most_once:
            # The consumer asked for at-most-once: the copy is settled on sending and counts as delivered.
            raw.settle(dlv)
            self._copy_final(out, ACCEPTED)
        else:
            out.delivery = dlv
            self.outbound_of[dlv] = out
            consumer.in_flight.add(out)
