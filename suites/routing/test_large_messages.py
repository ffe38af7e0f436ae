"""Large messages through one router: big bodies, multi-frame transfers, a producer ahead of a slow consumer,
and aborted transfers (003 §12.1.1; AMQP 1.0 §2.6.14, §2.7.1, §2.7.5 where the seeds are silent).

The consumer is attached before the producer sends: a router stores nothing (003 §12.1.1.1). Bodies are random
bytes with their digest beside them (suites/large_bodies.py). No case asserts a time: each waits for its
condition with a deadline.
"""

import pytest

from harness.wait import wait_for

from ..large_bodies import (ABORTS, KiB, MIN_MAX_FRAME_SIZE, SIZES, TIMEOUT, assert_intact,
                            assert_small_frame_transfer, body_of,
                            inter_arrival_ms, send_bodies)


def wait_settled_or_detached(sender, n: int) -> None:
    wait_for(lambda: sender.settled_count() >= n or sender.detached.is_set(), TIMEOUT, f"outcomes for {n} messages",
             describe=lambda: f"{sender.outcome_counts()}, {sender.sent} sent, detached: {sender.condition}")
    assert not sender.detached.is_set(), f"the router ended the producer's link: {sender.condition}"


@pytest.mark.spec("ROUTING-LARGE-1", "ROUTING-SETTLE-2")
@pytest.mark.parametrize("size", SIZES)
def test_large_bodies_reach_the_consumer_intact(connect, clients, details, size):
    address = clients.unique("balanced.large.")
    receiver = connect().receiver(address, credit=10)
    sender = connect().sender(address)
    sender.wait_credit(1)
    bodies = [body_of(size, seed) for seed in (1, 2)]
    seqs = send_bodies(sender, bodies)
    wait_settled_or_detached(sender, len(bodies))
    got = receiver.wait_received(len(bodies), timeout=TIMEOUT)
    details.update(size=size, received=len(got), outcomes=sender.outcome_counts())
    assert [m.seq for m in got] == seqs, "each message once, in the order sent"
    assert_intact(got, bodies, f"{size}-byte bodies")
    assert sender.outcome_counts() == {"accepted": len(bodies)}, "the consumer's outcome travels back"


@pytest.mark.spec("ROUTING-FRAME-1", "ROUTING-LARGE-1")
@pytest.mark.parametrize("size", [pytest.param(64 * KiB, id="64KiB"), pytest.param(256 * KiB, id="256KiB")])
def test_multi_frame_deliveries_with_the_smallest_max_frame_size(clients, single_router, details, size):
    """Producer and consumer both offer a max-frame-size of 512: the router must split what it sends each of
    them; the producer's transfers are split to the router's own max-frame-size."""
    url = single_router.client_url("producer")
    address = clients.unique("balanced.frames.")
    consumer = clients.connect(url, max_frame_size=MIN_MAX_FRAME_SIZE)
    before = consumer.frames()["in"]
    receiver = consumer.receiver(address, credit=2)
    producer = clients.connect(url, max_frame_size=MIN_MAX_FRAME_SIZE)
    sender = producer.sender(address)
    sender.wait_credit(1)
    bodies = [body_of(size, seed) for seed in (3, 4, 5)]
    seqs = send_bodies(sender, bodies)
    wait_settled_or_detached(sender, len(bodies))
    got = receiver.wait_received(len(bodies), timeout=TIMEOUT)
    consumer.sync()
    assert_small_frame_transfer(details, producer, consumer, before, got, bodies, seqs, size, "router")


@pytest.mark.spec("ROUTING-LARGE-2")
def test_a_producer_ahead_of_a_slow_consumer_loses_nothing(connect, clients, details):
    total, size, step = 30, 256 * KiB, 2
    address = clients.unique("balanced.backlog.")
    receiver = connect().receiver(address, credit=step, auto_credit=False)
    sender = connect().sender(address)
    sender.wait_credit(1)
    bodies = [body_of(size, 100 + i) for i in range(total)]
    seqs = send_bodies(sender, bodies)  # all queued at once: they go out as the router gives credit
    granted, most_ahead = step, 0
    while granted < total:
        wait_for(lambda g=granted: receiver.count >= g, TIMEOUT, f"the consumer to get the {granted} messages it "
                 "gave credit for", describe=lambda: f"{receiver.count} received, {sender.sent} sent")
        assert receiver.count <= granted, f"the router sent {receiver.count} messages on credit for {granted}"
        most_ahead = max(most_ahead, sender.sent - receiver.count)
        receiver.flow(step)
        granted += step
    got = receiver.wait_received(total, timeout=TIMEOUT)
    wait_settled_or_detached(sender, total)
    receiver.conn.sync()
    details.update(sent=total, size=size, credit_step=step, received=receiver.count,
                   producer_most_ahead=most_ahead, **inter_arrival_ms(clients, receiver))
    assert receiver.count == total, "nothing more than was sent"
    assert [m.seq for m in got] == seqs, "every message, once, in the order sent"
    assert_intact(got, bodies, f"{total} x {size} bytes to a slow consumer")
    assert sender.outcome_counts() == {"accepted": total}


@pytest.mark.spec("ROUTING-ABORT-1")
@pytest.mark.parametrize("size,part", ABORTS)
def test_an_aborted_transfer_never_arrives_as_a_message(connect, clients, details, size, part):
    address = clients.unique("balanced.abort.")
    receiver = connect().receiver(address, credit=10)
    sender = connect().sender(address)
    sender.wait_credit(1)
    aborted = sender.send_aborted(body=body_of(size, 7), part=part, timeout=TIMEOUT)
    bodies = [body_of(size, seed) for seed in (8, 9, 10)]
    seqs = send_bodies(sender, bodies)
    wait_settled_or_detached(sender, len(bodies))
    got = receiver.wait_received(len(bodies), timeout=TIMEOUT)
    sender.conn.sync()
    receiver.conn.sync()
    details.update(size=size, aborted_after=part, received=receiver.count, aborted_seen=receiver.aborted,
                   outcomes=sender.outcome_counts())
    assert aborted not in [m.seq for m in got], "the aborted message reached the consumer as a complete message"
    assert receiver.aborted <= 1, "one aborted delivery, seen aborted at most once"
    assert aborted not in sender.outcomes, "an aborted delivery is settled by its sender and has no outcome"
    assert [m.seq for m in got] == seqs, "the messages after the aborted one, each once, in order"
    assert_intact(got, bodies, "messages sent after an aborted one")
    assert [sender.outcomes[s].outcome for s in seqs] == ["accepted"] * len(bodies), sender.outcome_counts()
