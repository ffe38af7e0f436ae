"""Store-and-forward, ordering, competing consumers, topics and drain (000 seed; AMQP 1.0 §2.6.7, §3.5.3)."""

import uuid

import pytest

from harness import checkers
from harness.wait import wait_for


@pytest.mark.spec("BROKER-SAF-1", "BROKER-SAF-2", "BROKER-ORDER-1")
@pytest.mark.requires("store-and-forward")
def test_producer_first_consumer_later_drains_everything_in_order(clients, connect, queue, details):
    sender = connect().sender(queue)
    sender.wait_credit(1)  # a broker gives credit with nobody consuming: it stores
    total = 50
    sender.send(total)
    outcomes = sender.wait_outcomes(total)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}, sender.outcome_counts()
    receiver = connect().receiver(queue)
    receiver.wait_received(total)
    receiver.conn.sync()
    details.update(stored=total, received=receiver.count)
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, receiver.name))
    verdict.fill(details)
    assert verdict.ok, f"every stored message, once, in the order sent:\n{verdict.failures()}"


@pytest.mark.spec("BROKER-SAF-1")
@pytest.mark.requires("store-and-forward")
def test_a_producer_that_closes_one_link_goes_on_sending_on_its_connection(clients, connect, queue, details):
    """A link ends on its own (AMQP 1.0 §2.6.3): the connection and its other links stay. A client that closes a
    sender and sends on another over the same connection (a pooled connection does so all day) has every message
    stored, the ones before the close and after."""
    conn = connect()
    first = conn.sender(queue)
    first.send(3)
    assert {o.outcome for o in first.wait_outcomes(3).values()} == {"accepted"}, first.outcome_counts()
    other = conn.sender(queue)
    first.detach()
    other.send(2)
    later = conn.sender(queue)
    later.send(2)
    outcomes = {**other.wait_outcomes(2), **{10 + k: v for k, v in later.wait_outcomes(2).items()}}
    details.update(outcomes=[o.outcome for o in outcomes.values()], condition=conn.condition)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}, f"after one link closed: {outcomes}"
    receiver = connect().receiver(queue)
    receiver.wait_received(7)
    assert sorted((m.producer, m.seq) for m in receiver.messages()) == sorted(
        [(first.name, n) for n in range(3)] + [(other.name, n) for n in range(2)] + [(later.name, n) for n in range(2)])


@pytest.mark.spec("BROKER-ANYCAST-1", "BROKER-OUTCOME-ACCEPTED")
@pytest.mark.requires("competing-consumers")
def test_competing_consumers_share_a_queue_each_message_once(clients, connect, queue, details):
    receivers = [connect().receiver(queue, credit=10) for _ in range(3)]
    sender = connect().sender(queue)
    total = 90
    sender.send(total)
    sender.wait_outcomes(total)
    wait_for(lambda: sum(r.count for r in receivers) >= total, 10, f"{total} messages across 3 consumers",
             describe=lambda: str([r.count for r in receivers]))
    details.update(received=[r.count for r in receivers])
    verdict = checkers.compose(clients.history, **checkers.every_message_once(
        sender.name, [r.name for r in receivers], in_order=False)).fill(details)
    assert verdict.ok, f"each message to exactly one consumer:\n{verdict.failures()}"
    assert sum(1 for r in receivers if r.count) >= 2, "competing consumers should all get a share"


@pytest.mark.spec("BROKER-OUTCOME-ACCEPTED")
@pytest.mark.requires("store-and-forward")
def test_accepted_messages_are_not_delivered_again(connect, queue):
    sender = connect().sender(queue)
    sender.send(5)
    sender.wait_outcomes(5)
    first = connect().receiver(queue)
    first.wait_received(5)
    first.conn.sync()
    first.detach()
    second = connect().receiver(queue)
    second.conn.sync()
    second.conn.sync()
    assert second.count == 0, "accepted messages were removed from the queue"


@pytest.mark.spec("BROKER-MULTICAST-1")
@pytest.mark.requires("multicast-subscription")
def test_every_subscriber_of_a_topic_gets_a_copy(clients, connect, address, details):
    topic = address("news")
    subscribers = [connect().receiver(topic, capabilities=("topic",)) for _ in range(2)]
    sender = connect().sender(topic)
    sender.send(5)
    sender.wait_outcomes(5)
    for s in subscribers:
        s.wait_received(5)
    details.update(received=[s.count for s in subscribers])
    checks = {}
    for i, s in enumerate(subscribers):  # each subscriber is asked for every message on its own
        checks.update(checkers.every_message_once(sender.name, s.name, suffix=f"_{i}"))
    verdict = checkers.compose(clients.history, **checks).fill(details, "duplicated")
    assert verdict.ok, f"every subscriber gets each message once, in order:\n{verdict.failures()}"


@pytest.mark.spec("BROKER-MULTICAST-2")
@pytest.mark.requires("multicast-subscription", "durable")
def test_durable_subscription_keeps_messages_while_detached(clients, connect, address, details):
    topic = address("news")
    name = clients.unique("durable-sub-")
    # A subscription is the client container's (container-id, link name): the subscriber comes back on a new
    # connection of the same container, once its first one is closed.
    container = f"durable-{uuid.uuid4().hex[:10]}"
    subscriber = connect(container_id=container).receiver(topic, name=name, capabilities=("topic",), durable=True)
    subscriber.detach(close=False)  # detach, not close: the subscription stays
    subscriber.conn.close()
    sender = connect().sender(topic)
    sender.send(3)
    sender.wait_outcomes(3)
    again = connect(container_id=container).receiver(topic, name=name, capabilities=("topic",), durable=True)
    got = again.wait_received(3)
    details.update(received_after_reattach=len(got))
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, again.name))
    verdict.fill(details)
    assert verdict.ok, f"the subscription kept each message once, in order, while detached:\n{verdict.failures()}"
    again.detach(close=True)  # closing ends the subscription (AMQP 1.0 §2.6.3: a closed link's terminus is gone)
    again.conn.close()
    sender.send(2)  # published while no subscription exists: nobody keeps them
    sender.wait_outcomes(5)
    fresh = connect(container_id=container).receiver(topic, name=name, capabilities=("topic",), durable=True)
    sender.send(1)  # the new subscription's first message
    got = fresh.wait_received(1)
    fresh.conn.sync()
    details.update(after_close=[m.seq for m in fresh.messages()])
    assert [m.seq for m in fresh.messages() if m.producer == sender.name] == [5], (
        "a subscription attached anew after the last one was closed starts empty: it must not hold what was "
        f"published while none existed, got {[m.seq for m in got]}")
    fresh.detach(close=True)


@pytest.mark.spec("BROKER-FILTER-1")
def test_a_filter_the_broker_answers_is_in_place(connect, queue, details):
    """A receiver asks for a JMS selector (a source filter) and reads the broker's answer: if the broker says the
    filter is in place, only matching messages may reach it; if it cannot apply it, it must say so by leaving it
    out. Telling a receiver that a selector holds and then delivering everything is what §3.5.3 forbids."""
    sender = connect().sender(queue)
    for color in ("red", "blue", "red"):
        sender.send(properties={"color": color})
    sender.wait_outcomes(3)
    receiver = connect().receiver(queue, selector="color = 'red'", credit=10)
    in_place = bool(receiver.answered_filter)
    wait_for(lambda: receiver.count >= (2 if in_place else 3), 10, "the messages the answered filter lets through",
             describe=lambda: f"{receiver.count} received")
    receiver.conn.sync()  # anything more the broker sends arrives before the count is read again
    colors = [m.properties.get("color") for m in receiver.messages()]
    details.update(filter_answered=receiver.answered_filter and list(receiver.answered_filter), received=colors)
    if in_place:
        assert colors == ["red", "red"], f"the broker answered the selector as in place, yet delivered {colors}"
    else:
        assert colors == ["red", "blue", "red"], "no filter in place: every message, in order"


@pytest.mark.spec("BROKER-DRAIN-1")
@pytest.mark.requires("drain")
def test_drain_delivers_what_is_there_then_returns_the_credit(connect, queue, details):
    sender = connect().sender(queue)
    sender.send(2)
    sender.wait_outcomes(2)
    receiver = connect().receiver(queue, credit=0, auto_credit=False)
    receiver.drain(10)
    receiver.wait_received(2)
    wait_for(lambda: receiver.credit == 0, 5, "the broker to hand back unused credit after draining",
             describe=lambda: f"credit {receiver.credit}")
    receiver.drain(5)  # nothing left: the credit must come straight back
    wait_for(lambda: receiver.credit == 0, 5, "an empty queue to hand back drained credit at once",
             describe=lambda: f"credit {receiver.credit}")
    details.update(received=receiver.count)
    assert receiver.count == 2
