"""What each consumer outcome does to a stored message (AMQP 1.0 §3.4), dead-lettering and TTL."""

import time

import pytest

from harness.wait import wait_for


def stored(connect, queue, count=1, **send):
    """Put `count` messages on `queue` and wait until the broker accepted them all."""
    sender = connect().sender(queue)
    sender.send(count, **send)
    assert {o.outcome for o in sender.wait_outcomes(count).values()} == {"accepted"}
    return sender


@pytest.fixture
def dead_letters(connect, address):
    """A consumer of the dead-letter address; cases look only at their own producer's messages."""
    return connect().receiver(address("DLQ"), credit=100)


@pytest.mark.spec("BROKER-OUTCOME-RELEASED")
@pytest.mark.requires("outcome.released")
def test_released_message_comes_back_first_with_unchanged_delivery_count(connect, queue, details):
    sender = stored(connect, queue, 3)
    receiver = connect().receiver(queue, credit=1, auto_credit=False, outcome="hold")
    first = receiver.wait_received(1)[0]
    receiver.settle("release")
    receiver.flow(1)
    again = receiver.wait_received(2)[1]
    details.update(first=first.seq, redelivered=again.seq, delivery_count=again.delivery_count)
    assert again.seq == first.seq == 0, "a released message goes back to its place at the head"
    assert again.delivery_count == first.delivery_count, "released is not a failed attempt"
    receiver.settle("accept")
    receiver.flow(5)
    rest = receiver.wait_received(4)[2:]
    assert [m.seq for m in rest] == [1, 2] and all(m.producer == sender.name for m in rest)


@pytest.mark.spec("BROKER-OUTCOME-MODIFIED")
@pytest.mark.requires("outcome.modified")
def test_modified_delivery_failed_raises_the_delivery_count(connect, queue, details):
    stored(connect, queue, 1)
    receiver = connect().receiver(queue, credit=1, auto_credit=False, outcome="hold")
    first = receiver.wait_received(1)[0]
    receiver.settle("modify")
    receiver.flow(1)
    again = receiver.wait_received(2)[1]
    details.update(delivery_counts=[first.delivery_count, again.delivery_count])
    assert again.seq == first.seq
    assert again.delivery_count == first.delivery_count + 1
    receiver.settle("accept")


@pytest.mark.spec("BROKER-OUTCOME-MODIFIED")
@pytest.mark.requires("outcome.modified", "competing-consumers")
def test_modified_undeliverable_here_goes_to_another_consumer(connect, queue, details):
    stored(connect, queue, 1)
    picky = connect().receiver(queue, credit=1, auto_credit=False, outcome="hold")
    picky.wait_received(1)
    other = connect().receiver(queue, credit=5)
    picky.flow(1)  # picky could take it again: it must not be offered the message it refused
    picky.settle("modify-undeliverable")
    got = other.wait_received(1)
    picky.conn.sync()
    details.update(picky=picky.count, other=other.count)
    assert got[0].seq == 0
    assert picky.count == 1, "undeliverable-here: never redelivered to the link that said so"


@pytest.mark.spec("BROKER-OUTCOME-REJECTED")
@pytest.mark.requires("outcome.rejected", "dead-letter")
def test_rejected_message_is_dead_lettered_not_redelivered(connect, queue, dead_letters, details):
    sender = stored(connect, queue, 1)
    receiver = connect().receiver(queue, outcome="reject")
    receiver.wait_received(1)
    wait_for(lambda: sender.name in {m.producer for m in dead_letters.messages()}, 10,
             "the rejected message on the dead-letter address")
    receiver.conn.sync()
    details.update(deliveries=receiver.count)
    assert receiver.count == 1, "a rejected message is not delivered to the queue's consumers again"


@pytest.mark.spec("BROKER-DLQ-1", "BROKER-OUTCOME-MODIFIED")
@pytest.mark.requires("outcome.modified", "dead-letter")
def test_failed_deliveries_up_to_the_limit_then_dead_letter(connect, queue, dead_letters, broker_topology, details):
    limit = broker_topology.topology.nodes["B1"].settings.max_delivery_attempts
    sender = stored(connect, queue, 1)
    receiver = connect().receiver(queue, outcome="modify")
    wait_for(lambda: sender.name in {m.producer for m in dead_letters.messages()}, 10,
             f"the message on the dead-letter address after {limit} failed attempts",
             describe=lambda: f"{receiver.count} deliveries so far")
    receiver.conn.sync()
    details.update(deliveries=receiver.count, limit=limit)
    assert receiver.count == limit, f"exactly {limit} delivery attempts before dead-lettering"
    assert [m.delivery_count for m in receiver.messages()] == list(range(limit))


@pytest.mark.spec("BROKER-TTL-1")
@pytest.mark.requires("ttl")
def test_expired_messages_are_not_delivered(connect, queue, details):
    ttl = 0.3
    sender = connect().sender(queue)
    sender.send(1, properties={"kind": "short-lived"}, ttl=ttl)
    sender.send(1, properties={"kind": "long-lived"}, ttl=120)  # a TTL not yet passed: still deliverable
    sender.send(1, properties={"kind": "lasting"})
    sender.wait_outcomes(3)
    sent_at = time.monotonic()
    # The state awaited here is the passing of the TTL itself, with a margin for clock granularity.
    wait_for(lambda: time.monotonic() - sent_at > ttl * 2, ttl * 4, "the short-lived message's TTL to pass")
    receiver = connect().receiver(queue)
    got = receiver.wait_received(2)
    receiver.conn.sync()
    details.update(received=[m.properties.get("kind") for m in receiver.messages()])
    assert [m.properties.get("kind") for m in got] == ["long-lived", "lasting"], "only the expired one is gone"
    assert receiver.count == 2
