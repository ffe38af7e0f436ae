"""The reference broker's side of its journal (reference/broker/durability.py): recovery, message ids that are never
used twice, and answers that wait until their batch is on disk.

Source: Artemis's journal semantics where the documents are silent (a durable message is accepted once it is on
disk, unless journal-sync-non-transactional is false; one batch per turn); seed 002 "Mirroring" (a mirror's
store-and-forward queue survives a restart, and a message id is never used twice).
"""

from __future__ import annotations

from types import SimpleNamespace

from proton import Delivery

from reference.broker.broker import Broker
from reference.broker.durability import ID_BLOCK
from reference.broker.journal import Journal
from tests.test_broker_logic import broker_with


class AnsweredDelivery:
    def __init__(self):
        self.state, self.settled = None, False

    def update(self, state):
        self.state = state

    def settle(self):
        self.settled = True


class MarkingJournal:
    """Records the id marks written."""

    def __init__(self):
        self.marks: list[int] = []

    def mark_ids(self, highest):
        self.marks.append(highest)


def test_ids_go_on_one_by_one_and_the_mark_is_written_half_a_block_ahead():
    broker = broker_with()
    broker.journal = MarkingJournal()
    durability = broker.durability
    durability._id_ceiling = ID_BLOCK  # as recover leaves it after an empty journal
    ids = durability.journalled_ids(1)
    taken = [next(ids) for _ in range(ID_BLOCK // 2)]
    assert taken == list(range(1, ID_BLOCK // 2 + 1)) and broker.journal.marks == []
    assert next(ids) == ID_BLOCK // 2 + 1
    assert broker.journal.marks == [2 * ID_BLOCK], "the next block is marked before an id of it could be used"


def test_recovery_puts_durable_messages_back_and_creates_their_queues(tmp_path):
    journal = Journal(tmp_path / "journal")
    journal.recover()
    journal.add_queue("invoices", "invoices", "anycast")
    journal.add_queue("$ACTIVEMQ_ARTEMIS_MIRROR_dr", "$ACTIVEMQ_ARTEMIS_MIRROR_dr", "anycast")
    journal.enqueue(41, "invoices", b"kept")
    journal.enqueue(42, "$ACTIVEMQ_ARTEMIS_MIRROR_dr", b"event")
    journal.close()
    broker = Broker(broker_with().config)
    assert broker.start(Journal(tmp_path / "journal")) == (2, 0)
    invoices, snf = broker.queues["invoices"], broker.queues["$ACTIVEMQ_ARTEMIS_MIRROR_dr"]
    assert [(e.msg_id, e.data, e.durable) for e in invoices.available] == [(41, b"kept", True)]
    assert (invoices.internal, snf.internal) == (False, True), "a mirror's store-and-forward queue stays internal"
    assert next(broker.ids) == 43, "ids go on above every id used before"
    broker.close_journal()


def test_without_a_writer_thread_the_turn_commits_and_then_answers():
    broker = broker_with()
    commits = []
    broker.journal = SimpleNamespace(dirty=True, commit=lambda: commits.append("commit"))
    dlv = AnsweredDelivery()
    broker.durability.after_journal_commit(dlv)
    broker.durability.commit_turn()
    assert commits == ["commit"] and (dlv.state, dlv.settled) == (Delivery.ACCEPTED, True)
    assert broker.durability.awaiting_commit == []


def test_with_a_writer_thread_the_answers_wait_for_its_batch():
    broker = broker_with()
    submitted = []
    broker.journal = SimpleNamespace(dirty=True)
    broker.durability.committer = SimpleNamespace(submit=submitted.append, completed=lambda: list(submitted))
    dlv = AnsweredDelivery()
    broker.durability.after_journal_commit(dlv)
    broker.durability.commit_turn()
    assert dlv.state is None, "not before the batch is on disk"
    broker.durability.on_journal_durable()
    assert (dlv.state, dlv.settled) == (Delivery.ACCEPTED, True)


def test_answers_with_nothing_to_write_go_at_once():
    broker = broker_with()
    broker.journal = SimpleNamespace(dirty=False)
    broker.durability.committer = SimpleNamespace(submit=lambda _: None)
    settle_only = AnsweredDelivery()
    broker.durability.awaiting_commit.append((settle_only, None))
    broker.durability.commit_turn()
    assert (settle_only.state, settle_only.settled) == (None, True)


def test_a_durable_message_is_accepted_after_the_write_unless_sync_is_off():
    broker = broker_with()
    durable, transient = AnsweredDelivery(), AnsweredDelivery()
    broker.durability.accept_when_durable(durable, True)
    broker.durability.accept_when_durable(transient, False)
    assert broker.durability.awaiting_commit == [(durable, Delivery.ACCEPTED)] and durable.state is None
    assert transient.state == Delivery.ACCEPTED
    broker.config.journal_sync_non_transactional = False  # Artemis: accepted before the write
    early = AnsweredDelivery()
    broker.durability.accept_when_durable(early, True)
    assert early.state == Delivery.ACCEPTED
