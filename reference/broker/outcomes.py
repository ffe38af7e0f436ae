"""What a consumer's outcome does to its message (AMQP 1.0 §3.4), and where a message goes when it cannot stay:
back in its queue, to the dead-letter address, or to the expiry address. Artemis's address settings where the
documents are silent.

* accepted removes the message; released puts it back in its place with the same delivery-count; modified
  with delivery-failed counts a failed attempt, and undeliverable-here keeps it from that consumer link;
  rejected dead-letters it. When the failed attempts reach `max-delivery-attempts` (-1: never) it is
  dead-lettered too. A failed attempt waits out `redelivery-delay` before it is delivered again.
* A message settled with no outcome is done with, as if accepted. An outcome within a transaction is applied
  at its commit (transactions.py).
* A dead letter or an expired message goes to its address setting's `dead-letter-address` or
  `expiry-address`, or is dropped when there is none. The mirrors hear why it went (killed, expired).
* A message the other broker of a mirror acknowledged while a consumer here held it is done with here too
  when it comes back (mirror_store.py).
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import TYPE_CHECKING

from proton import Delivery

from . import mirror as mirroring
from .config import ANYCAST
from .model import Consumer, Entry, Queue
from .transactions import TRANSACTIONAL_STATE

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("BROKER")


class Outcomes:
    """Consumers' outcomes, requeues, dead letters and expiries."""

    def __init__(self, broker: Broker):
        self.broker = broker

    def consumer_outcome(self, consumer: Consumer, dlv: Delivery):
        broker = self.broker
        if dlv.remote_state == TRANSACTIONAL_STATE:  # an outcome within a transaction: applied at commit
            broker.transactions.retire(consumer, dlv)
            return
        state = dlv.remote_state
        if state not in (Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED):
            if not dlv.settled:
                return
            state = Delivery.ACCEPTED  # settled with no outcome: the consumer is done with it
        entry = consumer.unsettled.pop(dlv.tag, None)
        if entry is not None and entry.durable and not dlv.settled and broker.config.journal_sync_non_transactional:
            # The consumer waits for our settlement (rcv-settle-mode second): give it once the outcome's journal
            # records (the delete, or the dead-letter copy) are on disk.
            broker.durability.awaiting_commit.append((dlv, None))
        else:
            dlv.settle()
        if entry is None:
            return
        remote = dlv.remote
        self.apply_outcome(consumer, entry, state, bool(remote.failed), bool(remote.undeliverable))

    def apply_outcome(self, consumer: Consumer, entry: Entry, state, failed: bool = False,
                      undeliverable: bool = False) -> None:
        """A consumer's outcome for a message it held (now or, for a transaction, at commit)."""
        queue = consumer.queue
        queue.in_flight -= 1
        entry.in_flight = False
        if state == Delivery.ACCEPTED:
            self.broker.registry.remove(queue, entry)
        elif state == Delivery.RELEASED:
            self.requeue(queue, entry)  # back in its place, delivery-count unchanged
        elif state == Delivery.MODIFIED:
            if undeliverable:
                entry.excluded.add(consumer.id)
            if failed:
                entry.delivery_count += 1
                self.requeue_or_dead_letter(queue, entry)
            else:
                self.requeue(queue, entry)
        else:  # rejected: the message is not wanted here, dead-letter it
            self.dead_letter(queue, entry, "rejected")
        self.broker.dirty.add(queue)
        self.broker.stats_dirty = True

    def mirror_acked(self, queue: Queue, entry: Entry, reason: str) -> None:
        """The other broker of a mirror acknowledged `entry` for `reason`: expired here too, or removed."""
        if reason == mirroring.EXPIRED:
            self.move(queue, entry, self.broker.config.settings_for(queue.address)["expiry-address"],
                      "expired on the mirror's source", "expiry")
        else:
            self.broker.registry.remove(queue, entry, reason)

    def requeue(self, queue: Queue, entry: Entry) -> None:
        """Back in its place (message id order), after the redelivery delay if it failed an attempt."""
        broker = self.broker
        if entry.mirror_acked:  # acknowledged on the other broker meanwhile: done with here too
            self.mirror_acked(queue, entry, entry.mirror_acked)
            return
        if queue.name not in broker.queues:
            broker.registry.remove(queue, entry)
            return
        delay = broker.config.settings_for(queue.address)["redelivery-delay"]
        if delay > 0 and entry.delivery_count > 0:
            entry.ready_at = time.monotonic() + delay / 1000.0
            queue.delayed.append(entry)
        else:
            heapq.heappush(queue.available, entry)
        broker.dirty.add(queue)

    def requeue_or_dead_letter(self, queue: Queue, entry: Entry) -> None:
        limit = self.broker.config.settings_for(queue.address)["max-delivery-attempts"]
        if limit >= 0 and entry.delivery_count >= limit:
            self.dead_letter(queue, entry, f"{entry.delivery_count} failed delivery attempts")
        else:
            self.requeue(queue, entry)

    def dead_letter(self, queue: Queue, entry: Entry, why: str) -> None:
        self.move(queue, entry, self.broker.config.settings_for(queue.address)["dead-letter-address"], why,
                  "dead-letter")

    def move(self, queue: Queue, entry: Entry, target: str | None, why: str, kind: str) -> None:
        """Dead-letter or expire `entry`. The mirrors get its acknowledgement with the reason (killed, expired).
        A dead letter's copy is mirrored as a send; an expired one's is not, since the mirror expires its own copy
        on that acknowledgement (Artemis 2.40 QueueImpl.move: "we Disable mirror on expiration")."""
        broker = self.broker
        expiry = kind == "expiry"
        broker.registry.remove(queue, entry, mirroring.EXPIRED if expiry else mirroring.KILLED)
        if not target:
            log.info("Dropped message %d from %r (%s; no %s address)", entry.msg_id, queue.name, why, kind)
            return
        info, _ = broker.registry.resolve(target, ANYCAST, for_consumer=False)
        if info is not None:
            broker.registry.route(info, next(broker.ids), entry.data, entry.durable, None, entry.delivery_count,
                                  mirrored=not expiry)
            log.info("Moved message %d from %r to %s address %r (%s)", entry.msg_id, queue.name, kind, target, why)
