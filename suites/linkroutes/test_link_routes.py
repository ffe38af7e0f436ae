"""Link routes across a router network to a broker (003 §12.2, the R1/R2/R3/B2 example)."""

import pytest

from harness.wait import wait_for

from ..conftest import attach_when_routed, kill_or_skip, refusal_of, restart_or_skip
from ..large_bodies import MIN_MAX_FRAME_SIZE, TIMEOUT, KiB, assert_intact, body_of, send_bodies

pytestmark = pytest.mark.requires("link-route", "store-and-forward")

QUEUE = "b2.event-queue"


@pytest.fixture
def line(topology):
    return topology("three-router-line-broker")


def _stored(conn, n: int):
    """A producer on `conn` that sent `n` messages through the link route, each stored (settled) by the broker."""
    sender = attach_when_routed(conn, lambda: conn.sender(QUEUE, timeout=3))
    sender.send(n)
    sender.wait_outcomes(n)
    return sender


@pytest.mark.spec("LINKROUTE-1")
def test_client_far_from_the_broker_sends_and_receives_through_the_link_route(line, clients, details):
    conn = clients.connect(line.client_url("consumer"))
    sender = attach_when_routed(conn, lambda: conn.sender(QUEUE, timeout=3))
    sender.send(10)
    assert {o.outcome for o in sender.wait_outcomes(10).values()} == {"accepted"}
    receiver = conn.receiver(QUEUE)
    got = receiver.wait_received(10)
    details.update(received=len(got))
    assert [m.seq for m in got if m.producer == sender.name] == list(range(10))
    # The consumer's acceptances travel back over the link route: the broker's queue empties.
    wait_for(lambda: line["B2"].queue_stats(QUEUE)["depth"] == 0, 10, "the broker queue to be empty",
             describe=lambda: str(line["B2"].queue_stats(QUEUE)))


@pytest.mark.spec("LINKROUTE-FLOW-1")
def test_receiver_credit_limits_what_the_broker_sends(line, clients, details):
    conn = clients.connect(line.client_url("consumer"))
    _stored(conn, 10)
    receiver = conn.receiver(QUEUE, credit=3, auto_credit=False)
    receiver.wait_received(3)
    conn.sync()
    details.update(received_with_3_credits=receiver.count)
    assert receiver.count == 3, "the broker may send only as many messages as the client granted credit"
    receiver.flow(7)
    receiver.wait_received(10)


@pytest.mark.spec("LINKROUTE-FLOW-1")
@pytest.mark.requires("drain")
def test_a_drain_reaches_the_broker_and_its_answer_the_receiver(line, clients, details):
    """003 §12.2.1.1: on a link route the receiver and the broker handle flow control between them, and a drain
    (AMQP 1.0 §2.6.7) is part of it: the broker delivers what it has, hands the rest of the credit back, and the
    receiver learns it through the routers. Nothing is left queued at a router for a receiver with no credit."""
    conn = clients.connect(line.client_url("consumer"))
    sender = _stored(conn, 2)
    receiver = conn.receiver(QUEUE, credit=0, auto_credit=False)
    receiver.drain(5)
    receiver.wait_received(2)
    wait_for(lambda: receiver.credit == 0, 10, "the broker's drained answer to reach the receiver",
             describe=lambda: f"credit {receiver.credit}, {receiver.count} received")
    receiver.drain(3)  # the queue is empty: the credit comes straight back
    wait_for(lambda: receiver.credit == 0, 10, "an empty queue's drained answer to reach the receiver",
             describe=lambda: f"credit {receiver.credit}, {receiver.count} received")
    sender.send(1)  # stored at the broker: the receiver has no credit for it
    sender.wait_outcomes(3)
    receiver.flow(1)
    got = receiver.wait_received(3)
    details.update(received=[m.seq for m in got])
    assert [m.seq for m in got if m.producer == sender.name] == [0, 1, 2]


@pytest.mark.spec("LINKROUTE-1")
def test_a_message_of_many_transfers_crosses_the_link_route_whole(line, clients, details):
    """003 §12.2.1.2: the router passes deliveries between the two ends. A message larger than a frame arrives in
    several transfers (AMQP 1.0 §2.6.14): both ways through the routers it must reach the broker, and come back
    from it, as one message with its body intact. The clients offer the smallest max-frame-size, so every hop
    splits."""
    conn = clients.connect(line.client_url("consumer"), max_frame_size=MIN_MAX_FRAME_SIZE)
    sender = attach_when_routed(conn, lambda: conn.sender(QUEUE, timeout=3))
    bodies = [body_of(size, seed) for size, seed in ((64 * KiB, 7), (KiB, 8), (200 * KiB, 9))]
    seqs = send_bodies(sender, bodies)
    outcomes = sender.wait_outcomes(len(bodies), timeout=TIMEOUT)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    receiver = conn.receiver(QUEUE, credit=len(bodies))
    got = receiver.wait_received(len(bodies), timeout=TIMEOUT)
    details.update(sizes=[len(b) for b in bodies], received=len(got))
    assert [m.seq for m in got if m.producer == sender.name] == seqs
    assert_intact(got, bodies, "bodies through the link route")


@pytest.mark.spec("LINKROUTE-DISPOSITION-1")
@pytest.mark.requires("outcome.modified")
def test_outcome_reaches_the_broker_across_the_link_route(line, clients, details):
    conn = clients.connect(line.client_url("consumer"))
    _stored(conn, 1)
    receiver = conn.receiver(QUEUE, credit=1, auto_credit=False, outcome="hold")
    first = receiver.wait_received(1)[0]
    receiver.settle("modify")
    receiver.flow(1)
    again = receiver.wait_received(2)[1]
    receiver.settle("accept")
    details.update(delivery_counts=[first.delivery_count, again.delivery_count])
    assert again.seq == first.seq and again.delivery_count == first.delivery_count + 1


@pytest.mark.spec("LINKROUTE-DETACH-1", "LINKROUTE-NOROUTE-1")
def test_broker_loss_detaches_routed_links_and_reattach_works_after(line, clients, details):
    conn = clients.connect(line.client_url("consumer"))
    receiver = attach_when_routed(conn, lambda: conn.receiver(QUEUE, timeout=3))
    broker = line["B2"]
    kill_or_skip(broker)
    try:
        receiver.wait_detached(15)
        details.update(detach_condition=receiver.condition)
        assert receiver.condition and receiver.condition.startswith("qd:routed-link-lost"), receiver.condition
        assert not conn.ended, "the client's connection stays open when its routed link is lost"

        refusal = wait_for(lambda: refusal_of(lambda: conn.receiver(QUEUE, timeout=3)), 15,
                           "attaches to be refused while the broker is down")
        details.update(refusal=refusal)
        assert "qd:no-route-to-dest" in refusal
    finally:
        restart_or_skip(broker)
    again = attach_when_routed(conn, lambda: conn.receiver(QUEUE, timeout=3), timeout=30)
    assert again.attached.is_set() and not conn.ended
