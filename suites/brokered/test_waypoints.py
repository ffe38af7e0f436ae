"""Brokered messaging through waypoints and autolinks, sharded queues (003 §12.1.4)."""

import pytest

from harness import checkers
from harness.wait import wait_for

from ..conftest import restart_or_skip

pytestmark = pytest.mark.requires("waypoint", "store-and-forward")
SHARD_BATCHES = 8  # batches of 10 before a router that keeps one shard empty fails


@pytest.mark.spec("BROKERED-WAYPOINT-1", "BROKER-ORDER-1")
def test_waypoint_stores_on_the_broker_until_a_consumer_comes(topology, clients, details):
    running = topology("router-broker-waypoint")
    url = running.client_url("producer")
    sender = clients.connect(url).sender("queue.orders")
    sender.wait_credit(1, timeout=15)  # the out-autolink to the broker is the consumer that opens credit
    sender.send(20)
    outcomes = sender.wait_outcomes(20, timeout=15)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}, sender.outcome_counts()
    receiver = clients.connect(running.client_url("consumer")).receiver("queue.orders")
    got = receiver.wait_received(20, timeout=15)
    details.update(stored=20, received=len(got))
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, receiver.name))
    verdict.fill(details)
    assert verdict.ok, f"the stored messages reach the consumer once each, in order:\n{verdict.failures()}"


@pytest.mark.spec("BROKERED-SHARD-1")
def test_sharded_queue_uses_every_shard_and_drains_them_all(topology, clients, details):
    running = topology("sharded-queue")
    sender = clients.connect(running.client_url("producer")).sender("queue.sharded")
    sender.wait_credit(1, timeout=15)
    wait_for(lambda: all(running[b].queue_stats("queue.sharded")["consumers"] >= 1 for b in ("B1", "B2")), 15,
             "both shards to have the router's in-autolink (a consumer there) attached")
    # The consumers count above sees the autolinks that drain a shard, not those that fill it: the router's
    # link into a broker that started last may get its credit a moment later, and a router may rightly put
    # a first batch on the one shard it can reach. So batches of 10 go until each shard holds part of them (a
    # router that never balances fails at the cap), instead of one batch of 40 whose spread depends on when
    # the second link got credit.
    depths: dict = {}
    sent = 0
    for _ in range(SHARD_BATCHES):
        sent += len(sender.send(10))
        sender.wait_outcomes(sent, timeout=15)
        depths = {b: running[b].queue_stats("queue.sharded")["depth"] for b in ("B1", "B2")}
        if all(d > 0 for d in depths.values()):
            break
    details.update(shard_depths=depths, sent=sent)
    assert all(d > 0 for d in depths.values()), f"every shard holds part of the {sent} messages: {depths}"
    receiver = clients.connect(running.client_url("consumer")).receiver("queue.sharded")
    wait_for(lambda: len(receiver.seqs(sender.name)) >= sent, 15, f"all {sent} messages from both shards",
             describe=lambda: f"{len(receiver.seqs(sender.name))} received")
    # in_order off: the shards drain side by side, so no order is asked across them
    verdict = checkers.compose(clients.history, **checkers.every_message_once(sender.name, receiver.name,
                                                                              in_order=False)).fill(details)
    assert verdict.ok, f"every message from both shards, once each:\n{verdict.failures()}"


@pytest.mark.spec("BROKERED-RECOVER-1")
def test_autolinks_carry_traffic_again_after_the_broker_restarts(topology, clients, details):
    running = topology("router-broker-waypoint")
    broker = running["B1"]
    receiver = clients.connect(running.client_url("consumer")).receiver("queue.orders")
    sender = clients.connect(running.client_url("producer")).sender("queue.orders")
    sender.wait_credit(1, timeout=15)
    sender.send(5)
    receiver.wait_received(5, timeout=15)
    restart_or_skip(broker, kill=True)
    sender.send(5)
    outcomes = wait_for(lambda: sender.settled_count() >= 10 and sender.outcomes, 30,
                        "outcomes for the messages sent across the broker restart")
    lost = {seq for seq, o in outcomes.items() if o.outcome != "accepted"}
    details.update(outcomes=sender.outcome_counts())
    assert {o.outcome for o in outcomes.values()} <= {"accepted", "released", "modified"}
    sender.send(5)  # after the restart the waypoint works again
    wait_for(lambda: set(range(10, 15)) <= set(receiver.seqs(sender.name)), 30,
             "messages sent after the restart to come through the re-attached autolinks",
             describe=lambda: f"received {sorted(receiver.seqs(sender.name))}, not accepted {sorted(lost)}")
