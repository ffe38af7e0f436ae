"""Routing and delivery guarantees under link and process faults (003 §12.1.4, §12.2.2).

Network faults go through the fault proxy on the topology's `R1->B1` link (Toxiproxy's API); histories
are judged by the checkers and their counts go into the result record.
"""

from functools import partial

import pytest

from harness import checkers
from harness.wait import wait_for

from ..conftest import attach_when_routed

pytestmark = pytest.mark.requires("store-and-forward")

LINK = "R1->B1"


@pytest.fixture
def faulty(topology):
    running = topology("router-broker-faults")
    yield running
    running.faults.reset()  # every case leaves the link clean for the next


@pytest.mark.spec("FAULT-LINKROUTE-1", "LINKROUTE-DETACH-1")
@pytest.mark.requires("link-route")
def test_reset_broker_connection_detaches_routed_links_keeps_the_client(faulty, clients, details):
    conn = clients.connect(faulty.client_url("consumer"))
    receiver = attach_when_routed(conn, lambda: conn.receiver("lr.events", timeout=3))
    # Like Toxiproxy's, reset_peer acts on the next data through the link: make some (a routed attach).
    faulty.faults.toxic(LINK, "reset_peer", stream="downstream", timeout=0)
    try:
        conn.sender("lr.events", timeout=3)
    except ConnectionError:
        pass  # the attach itself may be what the reset cuts off
    receiver.wait_detached(15)
    faulty.faults.reset()
    details.update(condition=receiver.condition)
    assert receiver.condition and receiver.condition.startswith("qd:routed-link-lost"), receiver.condition
    assert not conn.ended, "the client's connection must stay open"
    again = attach_when_routed(conn, lambda: conn.receiver("lr.events", timeout=3), timeout=30)
    assert again.attached.is_set()


@pytest.mark.spec("FAULT-WAYPOINT-1")
@pytest.mark.requires("waypoint")
def test_no_loss_through_a_waypoint_over_a_slow_sliced_link(faulty, clients, details):
    faulty.faults.toxic(LINK, "latency", stream="downstream", latency=20, jitter=10)
    faulty.faults.toxic(LINK, "slicer", stream="upstream", average_size=64, size_variation=32, delay=100)
    receiver = clients.connect(faulty.client_url("consumer")).receiver("queue.orders")
    sender = clients.connect(faulty.client_url("producer")).sender("queue.orders")
    sender.wait_credit(1, timeout=30)
    sender.send(200)
    sender.wait_outcomes(200, timeout=60)
    wait_for(lambda: len(set(receiver.seqs(sender.name))) >= sender.outcome_counts().get("accepted", 0), 60,
             "every accepted message at the consumer")
    receiver.conn.sync()
    verdict = checkers.compose(clients.history, total_queue=partial(checkers.total_queue, producer=sender.name,
                                                                    allow_duplicates=False)).fill(details)
    assert verdict.ok, f"no accepted message lost or duplicated over the slow sliced link:\n{verdict.failures()}"


@pytest.mark.spec("FAULT-WAYPOINT-2", "BROKERED-RECOVER-1")
@pytest.mark.requires("waypoint")
def test_reset_mid_stream_then_resend_gets_everything_through(faulty, clients, details):
    receiver = clients.connect(faulty.client_url("consumer")).receiver("queue.orders")
    sender = clients.connect(faulty.client_url("producer")).sender("queue.orders", window=20)
    sender.wait_credit(1, timeout=30)
    total = 300
    sender.send(total)
    wait_for(lambda: sender.settled_count() >= total // 3, 30, "a third of the messages settled")
    faulty.faults.toxic(LINK, "reset_peer", stream="downstream", timeout=0)
    wait_for(lambda: sender.settled_count() >= total, 60, "an outcome for every message",
             describe=lambda: f"{sender.settled_count()} outcomes {sender.outcome_counts()}")
    faulty.faults.reset()
    # At-least-once producer: what did not come back accepted is sent again, by its payload.
    retry = [seq for seq, o in sender.outcomes.items() if o.outcome != "accepted"]
    details.update(first_outcomes=sender.outcome_counts(), resent=len(retry))
    assert {o.outcome for o in sender.outcomes.values()} <= {"accepted", "released", "modified"}
    for seq in retry:
        sender.send(1, properties={"original": seq})
    sender.wait_outcomes(total + len(retry), timeout=60)
    wanted = set(range(total))

    def delivered():
        got = {m.properties.get("original", m.seq) for m in receiver.messages() if m.producer == sender.name}
        return wanted <= got
    wait_for(delivered, 60, "every message delivered at least once after the resend")
    verdict = checkers.total_queue(clients.history, producer=sender.name, allow_duplicates=True)
    details.update(checkers.checks_details(total_queue=verdict))
    assert verdict.lost == 0, verdict.as_details()


@pytest.mark.spec("FAULT-FALLBACK-1", "FALLBACK-1")
@pytest.mark.requires("fallback")
def test_fallback_takes_over_when_the_last_consumer_goes(topology, clients, details):
    running = topology("fallback")
    sender = clients.connect(running.client_url("producer")).sender("fb.orders")
    # Credit with no consumer attached yet: the fallback destination is reachable (FALLBACK-1). A router may
    # still be attaching its autolinks to a broker that just started; until then it has nowhere to put the
    # messages sent after the consumer goes.
    sender.wait_credit(1, timeout=15)
    consumer = clients.connect(running.client_url("consumer")).receiver("fb.orders")
    sender.send(5)
    consumer.wait_received(5)
    consumer.detach()
    sender.send(5)  # nobody is consuming: these go to the fallback queue and are accepted
    outcomes = sender.wait_outcomes(10, timeout=15)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}, sender.outcome_counts()
    back = clients.connect(running.client_url("consumer")).receiver("fb.orders")
    wait_for(lambda: set(range(5, 10)) <= set(back.seqs(sender.name)), 15, "the fallback messages on return")
    details.update(after_switch=back.seqs(sender.name))
    assert back.seqs(sender.name)[:5] == [5, 6, 7, 8, 9]
