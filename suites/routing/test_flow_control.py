"""Message routing flow control: credit follows consumer availability (003 §12.1.1.1)."""

import pytest

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
    assert sorted(m.seq for m in got) == [0, 1, 2, 3, 4]
    assert {o.outcome for o in outcomes.values()} == {"accepted"}


@pytest.mark.spec("ROUTING-FLOW-3")
def test_credit_is_withdrawn_when_the_last_consumer_leaves(connect, clients, details):
    address = clients.unique("balanced.flow.")
    conn = connect()
    sender = conn.sender(address)
    first = connect().receiver(address)
    second = connect().receiver(address)
    sender.wait_credit(1)

    first.detach()
    conn.sync()
    assert sender.credit > 0, "one consumer is still attached: the producer keeps its credit"

    second.detach()
    # The router asks for its credit back (drain); a well-behaved sender with nothing queued returns it.
    sender.wait_credit_at_most(0)
    sender.send(3)
    conn.sync()
    details.update(sent_after_last_consumer_left=sender.sent)
    assert sender.sent == 0, "with no consumer left the producer must not be able to send"

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
