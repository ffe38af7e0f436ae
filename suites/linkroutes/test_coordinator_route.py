"""Transactions through a `$coordinator` link route to one broker (003 §12.2.2), end to end.

The topology (coordinator-link-route) gives R1 two brokers and routes transactions to B1 only; R2 has the
same `$coordinator` link route and no connection, so it has no route to a coordinator.
"""

import pytest

from harness.wait import wait_for

from ..conftest import attach_when_routed

pytestmark = pytest.mark.requires("link-route", "coordinator-link-route")

B1_QUEUE, B2_QUEUE = "b1.orders", "b2.orders"


@pytest.fixture
def routed(topology):
    return topology("coordinator-link-route")


def _depth_of(broker, queue: str, depth: int, in_flight: int = 0) -> None:
    wait_for(lambda: (broker.queue_stats(queue)["depth"], broker.queue_stats(queue)["in_flight"]) == (depth, in_flight),
             10, f"{queue} on {broker.name} to hold {depth} ({in_flight} in flight)",
             describe=lambda: str(broker.queue_stats(queue)))


def _controller(routed, clients):
    conn = clients.connect(routed.client_url("producer"))
    return attach_when_routed(conn, lambda: conn.coordinator(timeout=3))


def _posted(controller, queue: str, txn: bytes, count: int):
    sender = attach_when_routed(controller.conn, lambda: controller.sender(queue, timeout=3))
    sender.send(count, txn=txn)
    return sender.wait_outcomes(count)


@pytest.mark.spec("LINKROUTE-COORDINATOR-1")
@pytest.mark.requires("transactions")
def test_transactions_through_the_coordinator_route_commit_and_roll_back_on_the_broker(routed, clients, details):
    b1 = routed["B1"]
    controller = _controller(routed, clients)
    # The broker's coordinator target came back across the route, capabilities and all.
    assert "amqp:local-transactions" in controller.capabilities, controller.capabilities
    # Posting: the broker's transactional-state answers come back across the route; B1 stores only at commit.
    txn = controller.declare()
    outcomes = _posted(controller, B1_QUEUE, txn, 3)
    assert {(o.outcome, o.txn) for o in outcomes.values()} == {("accepted", txn.hex())}, outcomes
    assert b1.queue_stats(B1_QUEUE)["depth"] == 0, "posted in an open transaction: not on the broker's queue yet"
    assert controller.commit(txn).outcome == "accepted"
    _depth_of(b1, B1_QUEUE, 3)
    rolled_back = controller.declare()
    _posted(controller, B1_QUEUE, rolled_back, 2)
    assert controller.rollback(rolled_back).outcome == "accepted"
    assert b1.queue_stats(B1_QUEUE)["depth"] == 3, "the rolled-back posts never reached the queue"

    # Retirement: acceptances within a transaction travel to B1 as transactional dispositions.
    receiver = controller.receiver(B1_QUEUE, credit=3, auto_credit=False, outcome="hold")
    first = receiver.wait_received(3)
    undone = controller.declare()
    receiver.settle("accept", txn=undone)
    assert controller.rollback(undone).outcome == "accepted"
    _depth_of(b1, B1_QUEUE, 3)  # released back to the queue by the rollback
    receiver.flow(3)
    again = receiver.wait_received(6)[3:]
    assert [m.seq for m in again] == [m.seq for m in first], "the same messages, back after the rollback"
    done = controller.declare()
    receiver.settle("accept", txn=done)
    assert controller.commit(done).outcome == "accepted"
    _depth_of(b1, B1_QUEUE, 0)
    details.update(committed=3, rolled_back=2, redelivered=len(again))


@pytest.mark.spec("LINKROUTE-COORDINATOR-2")
@pytest.mark.requires("transactions")
def test_work_for_another_broker_cannot_join_the_routed_transaction(routed, clients, details):
    controller = _controller(routed, clients)
    txn = controller.declare()
    outcomes = _posted(controller, B2_QUEUE, txn, 1)
    details.update(outcome=outcomes[0].outcome, condition=outcomes[0].condition)
    assert outcomes[0].outcome == "rejected", "B2 does not know a transaction B1 declared"
    assert (outcomes[0].condition or "").startswith("amqp:transaction:unknown-id"), outcomes[0]
    assert controller.commit(txn).outcome == "accepted"
    assert routed["B2"].queue_stats(B2_QUEUE)["depth"] == 0


@pytest.mark.spec("LINKROUTE-COORDINATOR-3")
def test_coordinator_attach_without_a_route_is_refused(routed, clients, details):
    conn = clients.connect(routed.client_url("unrouted"))
    with pytest.raises(ConnectionError) as refused:
        conn.coordinator(timeout=5)
    details.update(refusal=str(refused.value))
    assert "qd:no-route-to-dest" in str(refused.value)
    assert not conn.ended, "only the link is refused, not the connection"


@pytest.mark.spec("LINKROUTE-COORDINATOR-4")
def test_a_router_without_a_coordinator_route_refuses_the_coordinator(topology, clients, details):
    conn = clients.connect(topology("single-router").client_url("producer"))
    with pytest.raises(ConnectionError) as refused:
        conn.coordinator(timeout=5)
    details.update(refusal=str(refused.value))
    # Qpid Dispatch refuses it with precondition-failed ("the router can't coordinate transactions by itself");
    # clients written against the real router see that condition.
    assert "amqp:precondition-failed" in str(refused.value)
    assert not conn.ended, "only the link is refused, not the connection"
