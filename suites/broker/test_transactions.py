"""Local transactions on a broker (AMQP 1.0 part 4): declare, transactional posting and retirement, discharge.

To show that a message is *not* in a queue, a case sends a non-transactional marker after it and receives up
to the marker: queues are FIFO, so anything that was there comes first.
"""

import pytest

from harness.wait import wait_for

from ..conftest import restart_or_skip

pytestmark = pytest.mark.requires("transactions")

UNKNOWN_ID = "amqp:transaction:unknown-id"


def _received_up_to_a_marker(connect, queue, **receiver_options) -> list:
    """Everything a fresh consumer of `queue` gets before a marker message sent now: what the queue held."""
    marker = connect().sender(queue, name="marker", **receiver_options)
    marker.send(1, body="marker", durable=bool(receiver_options))
    marker.wait_outcomes(1)
    receiver = connect().receiver(queue, **receiver_options)
    got = wait_for(lambda: receiver.messages() if any(m.producer == "marker" for m in receiver.messages()) else None,
                   10, f"the marker on {queue}", describe=lambda: f"{receiver.count} received")
    return [m for m in got if m.producer != "marker"]


def _posted(controller, queue: str, txn: bytes, count: int, **send_options):
    sender = controller.sender(queue, durable=bool(send_options))
    sender.send(count, txn=txn, **send_options)
    outcomes = sender.wait_outcomes(count)
    # §4.4.1: the resource tells the provisional outcome, bound to the transaction, before the discharge.
    assert {(o.outcome, o.txn) for o in outcomes.values()} == {("accepted", txn.hex())}, outcomes
    return sender


@pytest.mark.spec("TXN-DECLARE-1", "TXN-POST-1")
def test_commit_makes_sent_messages_visible(connect, queue, details):
    controller = connect().coordinator()
    assert "amqp:local-transactions" in controller.capabilities, "the coordinator offers what was asked (§4.2)"
    txn = controller.declare()
    assert 0 < len(txn) <= 32, "a txn-id is up to 32 octets of binary (§4.5)"
    sender = _posted(controller, queue, txn, 3)
    receiver = connect().receiver(queue)
    receiver.conn.sync()
    assert receiver.count == 0, "a message posted in a transaction is not available before the commit"
    answer = controller.commit(txn)
    details.update(commit=answer.outcome)
    assert (answer.outcome, answer.condition) == ("accepted", None)
    got = receiver.wait_received(3)
    assert [m.seq for m in got if m.producer == sender.name] == [0, 1, 2]


@pytest.mark.spec("TXN-ROLLBACK-1")
def test_rollback_discards_sent_messages(connect, queue, details):
    controller = connect().coordinator()
    txn = controller.declare()
    _posted(controller, queue, txn, 3)
    answer = controller.rollback(txn)
    assert (answer.outcome, answer.condition) == ("accepted", None), "a rollback can always be done (§4.3)"
    left = _received_up_to_a_marker(connect, queue)
    details.update(left_after_rollback=len(left))
    assert left == [], "rolled-back messages never reach the queue"


def _held_by_controller(connect, controller, queue: str, count: int):
    producer = connect().sender(queue)
    producer.send(count)
    producer.wait_outcomes(count)
    receiver = controller.receiver(queue, credit=count, auto_credit=False, outcome="hold")
    receiver.wait_received(count)
    return producer, receiver


@pytest.mark.spec("TXN-RETIRE-1")
def test_transactional_accept_removes_the_messages_on_commit(connect, queue, details):
    controller = connect().coordinator()
    _, receiver = _held_by_controller(connect, controller, queue, 2)
    txn = controller.declare()
    assert receiver.settle("accept", txn=txn) == 2
    assert controller.commit(txn).outcome == "accepted"
    left = _received_up_to_a_marker(connect, queue)
    details.update(left_after_commit=len(left))
    assert left == [], "committed acceptances removed the messages"


@pytest.mark.spec("TXN-RETIRE-1")
def test_transactional_accept_rolled_back_returns_the_messages(connect, queue, details):
    controller = connect().coordinator()
    producer, receiver = _held_by_controller(connect, controller, queue, 2)
    txn = controller.declare()
    receiver.settle("accept", txn=txn)  # settled: after a rollback only the broker can decide their fate
    assert controller.rollback(txn).outcome == "accepted"
    left = _received_up_to_a_marker(connect, queue)
    counts = [m.delivery_count for m in left]
    details.update(returned=len(left), delivery_counts=counts)
    assert [(m.producer, m.seq) for m in left] == [(producer.name, 0), (producer.name, 1)]
    # The broker's default outcome, which no source here declares: released (delivery-count unchanged) or modified
    # with delivery-failed (counted as a failed attempt: Artemis, and the reference with it). Either way the same
    # for both messages.
    assert counts in ([0, 0], [1, 1]), "back in place, as released (count unchanged) or as a failed delivery (+1)"


@pytest.mark.spec("TXN-RETIRE-1", "BROKER-DRAIN-1")
@pytest.mark.requires("drain")
def test_a_drain_after_settled_transactional_accepts_is_answered(connect, queue, details):
    """What a JMS transacted session does before every rollback (Qpid JMS): it settles its transactional accepts,
    then drains its consumer so that nothing more arrives while it discharges. The broker must answer that drain
    (AMQP 1.0 §2.6.7) with the retirements pending; the reference once did not, and the rollback then hung."""
    controller = connect().coordinator()
    _, receiver = _held_by_controller(connect, controller, queue, 2)
    txn = controller.declare()
    assert receiver.settle("accept", txn=txn) == 2
    receiver.drain(10)  # the queue has nothing more for it: the credit must come straight back
    wait_for(lambda: receiver.credit == 0, 5, "the broker to answer the drain while the transaction is open",
             describe=lambda: f"credit {receiver.credit}")
    assert controller.rollback(txn).outcome == "accepted"
    details.update(credit_after_drain=receiver.credit)


@pytest.mark.spec("TXN-RETIRE-2")
def test_rolled_back_unsettled_accept_leaves_the_messages_with_their_consumer(connect, queue, details):
    controller = connect().coordinator()
    producer, receiver = _held_by_controller(connect, controller, queue, 2)
    txn = controller.declare()
    receiver.settle("accept", txn=txn, settle=False)
    assert controller.rollback(txn).outcome == "accepted"
    other = connect().receiver(queue)
    other.conn.sync()
    assert other.count == 0, "after the rollback the messages are still acquired by the first consumer"
    assert receiver.settle("release") == 2, "and it may now give them another outcome"
    got = other.wait_received(2)
    details.update(redelivered=len(got))
    assert [m.seq for m in got] == [0, 1]


@pytest.mark.spec("TXN-UNKNOWN-1")
def test_discharge_of_an_unknown_txn_id_is_rejected(connect, details):
    controller = connect().coordinator()
    never = controller.commit(b"no-such-transaction")
    txn = controller.declare()
    assert controller.commit(txn).outcome == "accepted"
    again = controller.commit(txn)
    details.update(never_declared=never.condition, discharged_twice=again.condition)
    for answer in (never, again):
        assert answer.outcome == "rejected" and (answer.condition or "").startswith(UNKNOWN_ID), answer


@pytest.mark.spec("TXN-CONTROL-LINK-1")
@pytest.mark.parametrize("ending", ["detach", "connection-drop"])
def test_losing_the_controller_rolls_back_its_transactions(connect, queue, details, ending):
    controller = connect().coordinator()
    producer, receiver = _held_by_controller(connect, controller, queue, 1)
    txn = controller.declare()
    _posted(controller, queue, txn, 2)
    receiver.settle("accept", txn=txn)
    if ending == "detach":
        controller.detach()
    else:
        controller.conn.kill()  # TCP gone without an AMQP close: the links end with the connection
    left = _received_up_to_a_marker(connect, queue)
    details.update(left=len(left))
    # §4.1: the open transaction is rolled back: the accepted message is back, the two posted never arrive.
    assert [(m.producer, m.seq) for m in left] == [(producer.name, 0)]


@pytest.mark.spec("TXN-DURABLE-1")
@pytest.mark.requires("durable")
def test_committed_durable_transaction_survives_kill_9_and_an_open_one_does_not(connect, queue, broker, details):
    controller = connect().coordinator()
    committed = controller.declare()
    _posted(controller, queue, committed, 5, durable=True)
    assert controller.commit(committed).outcome == "accepted"
    open_txn = controller.declare()
    left_open = _posted(controller, queue, open_txn, 3, durable=True)
    restart_or_skip(broker, kill=True)
    left = _received_up_to_a_marker(connect, queue, durable=True)
    details.update(recovered=len(left))
    assert [m.seq for m in left] == [0, 1, 2, 3, 4], "the committed transaction's messages, once, in order"
    assert not [m for m in left if m.producer == left_open.name], "nothing of the transaction left open"


@pytest.mark.spec("TXN-UNKNOWN-1")
def test_work_naming_an_unknown_txn_id_is_refused(connect, queue, details):
    controller = connect().coordinator()
    sender = controller.sender(queue)
    sender.send(1, txn=b"no-such-transaction")
    refused = sender.wait_outcomes(1)[0]
    producer, receiver = _held_by_controller(connect, controller, queue, 1)
    receiver.settle("accept", txn=b"no-such-transaction")
    receiver.wait_detached()
    details.update(transfer=refused.condition, disposition=receiver.condition)
    assert refused.outcome == "rejected" and (refused.condition or "").startswith(UNKNOWN_ID), refused
    assert (receiver.condition or "").startswith(UNKNOWN_ID), "an outcome in an unknown transaction ends the link"
    left = _received_up_to_a_marker(connect, queue)
    assert [(m.producer, m.seq) for m in left] == [(producer.name, 0)], "the outcome was not applied"
