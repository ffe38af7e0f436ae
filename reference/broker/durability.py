"""The broker's side of its journal (journal.py is the journal itself): recovery at start, message ids that are
never used twice, and the answers that wait until their journal batch is on disk.

* A durable message is accepted only once its journal batch is on disk; so is the broker's settlement of a
  consumer's outcome for a durable message (with `journal-sync-non-transactional` false, as Artemis, a message is
  accepted before the write). In a running server the batches are written by the journal's writer thread
  (GroupCommitter), so a slow disk never stalls routing and dispatch.
* One batch (one fsync) per turn of the event loop, for everything that turn stored, acknowledged or moved.
* A journal I/O error stops the broker at once, as Artemis does on a critical journal error.
"""

from __future__ import annotations

import functools
import heapq
import logging
import os
from typing import TYPE_CHECKING

from proton import Delivery
from proton.reactor import ApplicationEvent, EventInjector

from ..peek import peek
from . import mirror as mirroring
from .journal import GroupCommitter
from .messages import answer, decode, expiry_of, fields_of, finish
from .model import Entry

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("BROKER")

ID_BLOCK = 1 << 20  # message ids reserved at a time in the journal (its id mark); a restart skips what is left


class Durability:
    """Recovers the journal into the broker's queues and holds the answers that wait for the disk."""

    def __init__(self, broker: Broker):
        self.broker = broker
        # (delivery, state to answer or None to settle only), done once the journal batch is on disk
        self.awaiting_commit: list[tuple[Delivery, int | None]] = []
        self.committer: GroupCommitter | None = None
        self._id_ceiling = 0  # the id mark last written (recover sets it)

    def recover(self) -> tuple[int, int]:
        """Load the journal: returns (messages recovered, bytes of torn tail discarded)."""
        broker = self.broker
        if broker.journal is None:
            return 0, 0
        recovered, highest, torn = broker.journal.recover()
        count = 0
        for rq in recovered.values():
            queue = broker.queues.get(rq.name)
            if queue is None:
                broker.registry.declare_address(rq.address, {rq.routing})
                queue = broker.registry.create_queue(rq.name, rq.address, rq.routing, durable=True, journal=False,
                                                     internal=rq.name.startswith(mirroring.SNF_PREFIX))
            for msg_id, data in rq.messages.items():
                fields = peek(data) or fields_of(decode(data))
                heapq.heappush(queue.available, Entry(msg_id, data, True, expiry_of(fields)))
                count += 1
            broker.dirty.add(queue)
        for queue in broker.queues.values():
            if queue.durable and queue.name not in recovered:
                broker.journal.add_queue(queue.name, queue.address, queue.routing)
        self._id_ceiling = highest + ID_BLOCK
        broker.journal.mark_ids(self._id_ceiling)
        broker.journal.commit()
        broker.ids = self.journalled_ids(highest + 1)
        return count, torn

    def journalled_ids(self, first: int):
        """Message ids from `first`, each used once for good: the journal's id mark stays half a block ahead of the
        ids handed out (a mark written now is on disk with this batch, long before the ids it covers are used),
        so a restart goes on above every id used before (journal.py, "id mark")."""
        msg_id = first
        while True:
            if msg_id > self._id_ceiling - ID_BLOCK // 2:
                self._id_ceiling += ID_BLOCK
                self.broker.journal.mark_ids(self._id_ceiling)
            yield msg_id
            msg_id += 1

    def after_journal_commit(self, dlv: Delivery) -> None:
        """Accept `dlv` once this batch's journal commit is on disk."""
        self.awaiting_commit.append((dlv, Delivery.ACCEPTED))

    def accept_when_durable(self, dlv: Delivery, durable: bool) -> None:
        if durable and self.broker.config.journal_sync_non_transactional:
            self.awaiting_commit.append((dlv, Delivery.ACCEPTED))
        else:
            finish(dlv, Delivery.ACCEPTED)

    def start_writer(self, container) -> None:
        """In a running server the journal's batches are written by a thread of their own (GroupCommitter)."""
        journal = self.broker.journal
        if journal is not None:
            # The writer thread wakes the event loop through a pipe when a batch is on disk.
            injector = EventInjector()
            container.selectable(injector)
            self.committer = GroupCommitter(
                journal, lambda: injector.trigger(ApplicationEvent("journal_durable")))

    def answer_durable(self) -> None:
        """Answer what waited for batches that are on disk now."""
        if self.committer is not None:
            # Answers for batches that reached the disk meanwhile leave with this turn's frames, rather than in a
            # turn (and a wake-up of the client) of their own.
            self.on_journal_durable()

    def commit_turn(self) -> None:
        """One journal batch (one fsync) for everything this turn stored, acknowledged or moved; the answers that
        wait for it are given once it is on disk: by the writer thread's wake-up (on_journal_durable), or, with no
        writer thread, right here after a synchronous commit, before any frame queued here is written."""
        journal = self.broker.journal
        awaiting, self.awaiting_commit = self.awaiting_commit, []
        if journal is not None and journal.dirty:
            if self.committer is not None:
                self.committer.submit(functools.partial(answer, awaiting))
                awaiting = []
            else:
                journal.commit()
        answer(awaiting)  # nothing of theirs to write (e.g. a durable message no queue took)

    def on_journal_durable(self) -> None:
        try:
            done = self.committer.completed()
        except OSError as exc:
            # Like Artemis on a critical journal I/O error: stop at once, without acknowledging anything more.
            log.critical("%s; stopping the broker", exc)
            logging.shutdown()
            os._exit(1)
        for on_durable in done:
            on_durable()

    def close(self) -> None:
        """Shutdown: everything handed to the writer thread is on disk, then the journal is closed."""
        if self.committer is not None:
            self.committer.close()
            self.committer = None
        if self.broker.journal is not None:
            self.broker.journal.close()
