"""Message routing flow control: credit follows consumer availability (003 §12.1.1.1)."""

import pytest

from harness import checkers
from harness.wait import wait_for

pytestmark = pytest.mark.requires("credit-gating")


@pytest.mark.spec("ROUTING-FLOW-1", "ROUTING-FLOW-2")
def test_producer_blocks_until_a_consumer_arrives(connect, clients, details):
    address = clients.unique("balanced.flow.")
    conn = connect()
    sender = conn.sender(address)
    sender.send(5)
    conn.sync()
    assert sender.credit == 0, "a producer with no consumer on its address must get no credit"
    assert sender.sent == 0, "no message may leave a producer that has no credit"

    receiver = connect().receiver(address)
    got = receiver.wait_received(5)
    outcomes = sender.wait_outcomes(5)
    details.update(sent=sender.sent, received=len(got))
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, receiver.name,
                                                                              in_order=False)).fill(details)
    assert verdict.ok, f"the held messages reach the consumer once each:\n{verdict.failures()}"
    assert {o.outcome for o in outcomes.values()} == {"accepted"}


def attach_two_then_leave(connect, address):
    """A producer with two consumers, both of which then detach: returns the producer's connection and sender.
    Credit is still expected while one consumer is left."""
    conn = connect()
    sender = conn.sender(address)
    first = connect().receiver(address)
    second = connect().receiver(address)
    sender.wait_credit(1)
    first.detach()
    conn.sync()
    assert sender.credit > 0, "one consumer is still attached: the producer keeps its credit"
    second.detach()
    return conn, sender


@pytest.mark.spec("ROUTING-FLOW-3")
def test_nothing_gets_through_once_the_last_consumer_leaves(connect, clients, details):
    # 003 §12.1.1.1 grants credit only while a consumer is available. It does not say whether credit granted
    # earlier is withdrawn before the producer spends it, so the producer may still send a little with it:
    # those messages must come back released (none accepted, none lost), and the producer must be stopped
    # (left with no credit) and not given new credit until a consumer returns.
    address = clients.unique("balanced.flow.")
    conn, sender = attach_two_then_leave(connect, address)
    sender.send(3)
    sender.wait_credit_at_most(0)
    conn.sync()
    spent = sender.sent  # what went out on credit held from before
    sender.wait_outcomes(spent)
    conn.sync()
    details.update(sent_on_old_credit=spent)
    assert sender.outcome_counts() == ({"released": spent} if spent else {}), (
        "with no consumer, a message the producer sends must come back released")
    assert sender.credit == 0 and sender.sent == spent, "no new credit while no consumer exists"

    sender.send(3)  # queued at the producer until credit comes back
    conn.sync()
    assert sender.sent == spent, "a producer without credit sends nothing"
    third = connect().receiver(address)
    held = list(range(spent, 6))
    third.wait_received(len(held))
    sender.wait_outcomes(6)
    details.update(delivered_after_return=third.count)
    assert third.seqs(sender.name) == held, "what waited at the producer goes to the returning consumer"
    assert {sender.outcomes[s].outcome for s in held} == {"accepted"}


@pytest.mark.spec("ROUTING-FLOW-4")
@pytest.mark.requires("credit-withdrawal")
def test_unused_credit_is_taken_back_when_the_last_consumer_leaves(connect, clients, details):
    address = clients.unique("balanced.flow.")
    conn, sender = attach_two_then_leave(connect, address)
    # The router asks for its credit back (drain); a well-behaved sender with nothing queued returns it.
    sender.wait_credit_at_most(0)
    sender.send(3)
    conn.sync()
    details.update(sent_after_last_consumer_left=sender.sent)
    assert sender.sent == 0, "with its credit taken back the producer sends nothing, so nothing is released"

    third = connect().receiver(address)
    third.wait_received(3)
    assert sender.wait_outcomes(3) and sender.outcome_counts() == {"accepted": 3}


@pytest.mark.spec("ROUTING-FLOW-1", "ROUTING-ADDR-3")
def test_anonymous_sender_gets_credit_and_unroutable_messages_come_back_released(connect, clients):
    conn = connect()
    sender = conn.sender(None)
    sender.wait_credit(1)  # an anonymous link has no single address to wait for: it is routed per message
    sender.send(2, to=clients.unique("balanced.nobody."))
    outcomes = sender.wait_outcomes(2)
    assert [o.outcome for o in outcomes.values()] == ["released", "released"]


@pytest.mark.spec("ROUTING-DRAIN-1")
def test_a_consumer_draining_with_nothing_to_deliver_gets_its_credit_back_at_once(connect, clients, details):
    address = clients.unique("balanced.drain.")
    receiver = connect().receiver(address, credit=0, auto_credit=False)
    receiver.wait_attached()
    receiver.drain(5)  # nothing is waiting for this address: the router must use up the credit now
    receiver.conn.sync()
    wait_for(lambda: receiver.credit == 0, 10, "the router to answer the drain (credit back to 0)",
             describe=lambda: f"credit {receiver.credit}")
    sender = connect().sender(address)
    sender.send(1)
    sender.wait_sent(1)
    sender.conn.sync()  # the router has the message ...
    receiver.conn.sync()  # ... and anything it sent this consumer on credit it should not have is here
    details.update(received_after_drain=receiver.count)
    assert receiver.count == 0, "a drained link has no credit: nothing may be sent on it"
    receiver.flow(1)
    got = receiver.wait_received(1)
    assert [m.seq for m in got] == [0], "new credit: the waiting message goes out"


@pytest.mark.spec("ROUTING-FLOW-5")
def test_credit_keeps_coming_while_a_consumer_keeps_taking(connect, clients, details):
    # Many link windows' worth (a router's window is a few hundred; qdrouterd's and the reference's are 250)
    # from one unsettled producer: each settled message must reopen the window, or the producer stops for good
    # after the first one.
    total = 1200
    address = clients.unique("balanced.window.")
    receiver = connect().receiver(address, credit=100)
    sender = connect().sender(address)
    sender.send(total)
    outcomes = sender.wait_outcomes(total, timeout=30)
    details.update(received=receiver.count, outcomes=sender.outcome_counts())
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    receiver.wait_received(total)
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, receiver.name))
    verdict.fill(details)
    assert verdict.ok, f"one producer, one consumer: each message once, in order:\n{verdict.failures()}"
