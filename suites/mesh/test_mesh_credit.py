"""Credit across a router network when the only consumer, on another router, leaves and returns.

003_9cdc7c48796dae4f.txt §12.1.1.1: a producer gets credit only while at least one consumer is available
to receive its messages, and a producer without credit waits until credit is made available again.
§12.1.1.2: addresses are mobile, so a consumer that leaves one router and attaches again is learned anew.

The producer is on R1, its consumer on R2 (topology two-router-mesh). The document says when credit is
granted; it does not say that credit granted earlier is taken back. So these cases accept a producer
that still holds some credit after its consumer has left, and a drain at any moment or none. What they
require: whatever the producer sends while no consumer exists comes back released (never accepted, never
lost); once the producer is stopped (its held credit spent or drained) it gets no new credit while no
consumer exists; and it gets credit again, and its messages reach the new consumer, when one returns.
"""

import pytest

from harness.wait import WaitTimeout, wait_for

from .late_drain import LATE_DRAIN_DELAYS, LATE_DRAIN_IDS, answers_drain_late

pytestmark = pytest.mark.requires("mesh", "credit-gating")

FIRST = 5  # messages the first consumer takes before it leaves
BACKLOG = 20  # messages the producer has waiting when the first consumer leaves (FIRST + BACKLOG < a window)
ROUTE_TIMEOUT = 15  # address changes between qdrouterd routers take well under a second; leave room
SWAPS = 15  # consumer swaps in the at-once case
QUIET = 3  # how long credit must stay away to count as "not given", after a round trip


@pytest.fixture
def mesh(topology):
    return topology("two-router-mesh")


def _serving_a_consumer_that_stops_taking(mesh, clients, address):
    """A producer on R1 whose consumer on R2 took FIRST messages and has no credit left; BACKLOG more are
    waiting: one in the network for that consumer, the rest at the producer, which keeps one message in
    flight at a time.
    Returns (producer's connection, producer, far connection, first consumer)."""
    far = clients.connect(mesh.client_url("far"))
    first = far.receiver(address, credit=FIRST, auto_credit=False)
    conn = clients.connect(mesh.client_url("producer"))
    sender = conn.sender(address, window=1)
    sender.wait_credit(1, timeout=ROUTE_TIMEOUT)  # credit says R1 has learned of the consumer on R2
    sender.send(FIRST)
    assert {o.outcome for o in sender.wait_outcomes(FIRST).values()} == {"accepted"}
    assert first.wait_received(FIRST) and first.seqs(sender.name) == list(range(FIRST))
    sender.send(BACKLOG)
    sender.wait_sent(FIRST + 1)  # the first of them waits in the network for credit the consumer does not give
    return conn, sender, far, first


def _send_until_stopped(sender):
    """The producer goes on sending, one message at a time, on whatever credit it still holds, until it has
    none left and every message it sent is settled. Returns the seqs it sent after FIRST (its backlog
    included)."""

    def stopped():
        settled = sender.settled_count() >= sender.sent
        if sender.credit == 0 and settled:
            return True
        if sender.credit > 0 and settled and not sender.queued:
            sender.send(1)  # credit it still holds: use it, as a producer would
        return False

    wait_for(stopped, ROUTE_TIMEOUT, f"producer {sender.name} to be stopped (no credit, nothing unsettled)",
             describe=lambda: (f"credit {sender.credit}, drain {sender.drain}, {sender.sent} sent, "
                               f"{sender.queued} queued, outcomes {sender.outcome_counts()}"))
    return list(range(FIRST, sender.sent))


def _credit_stays_away(sender, conn):
    """No credit reaches the producer: not by the end of a round trip through R1, nor for QUIET seconds."""
    conn.sync()
    assert sender.credit == 0, "the producer got new credit while no consumer exists"
    try:
        wait_for(lambda: sender.credit > 0, QUIET, "credit the producer must not get")
    except WaitTimeout:
        return
    raise AssertionError(f"the producer got credit {sender.credit} while no consumer exists")


def _outcomes(sender, seqs) -> dict[int, str]:
    """The outcomes the producer has for `seqs` so far (a seq not sent or not settled yet is absent)."""
    settled = sender.wait_outcomes(0)  # a consistent copy, at once
    return {seq: settled[seq].outcome for seq in seqs if seq in settled}


def _deliver_one(sender, receiver) -> list[int]:
    """Send until one message is accepted: one sent before the producer's router has caught up with the
    consumer's arrival may come back released. Returns the seqs accepted (all of them reach `receiver`)."""
    start = sender.sent + sender.queued

    def accepted():
        outcomes = _outcomes(sender, range(start, sender.sent))
        if "accepted" in outcomes.values():
            return True
        if len(outcomes) == sender.sent - start and not sender.queued:
            sender.send(1)  # nothing in flight (only releases so far): one more
        return False

    wait_for(accepted, ROUTE_TIMEOUT, f"a message from {sender.name} to be accepted by {receiver.name}",
             describe=lambda: (f"credit {sender.credit}, drain {sender.drain}, {sender.sent} sent, "
                               f"{sender.queued} queued, outcomes {sender.outcome_counts()}"))
    outcomes = _outcomes(sender, range(start, sender.sent))
    assert set(outcomes.values()) <= {"accepted", "released"}, f"every message settled plainly: {outcomes}"
    return [seq for seq, outcome in sorted(outcomes.items()) if outcome == "accepted"]


@pytest.mark.spec("MESH-CREDIT-1", "MESH-ADDR-1")
@pytest.mark.parametrize("returns", ["after-the-producer-is-stopped", "at-once"])
def test_producer_gets_credit_again_when_a_consumer_returns_on_another_router(mesh, clients, details, returns):
    address = clients.unique("balanced.credit.")
    if returns == "at-once":
        _consumer_replaced_at_once(mesh, clients, details, address)
    else:
        _consumer_returns_after_the_producer_is_stopped(mesh, clients, details, address)


def _consumer_returns_after_the_producer_is_stopped(mesh, clients, details, address):
    conn, sender, far, first = _serving_a_consumer_that_stops_taking(mesh, clients, address)

    # The consumer leaves. The producer sends its backlog and goes on sending on the credit it still holds
    # until it is stopped: every one of those messages comes back released.
    first.detach()
    gap = _send_until_stopped(sender)
    conn.sync()
    assert set(_outcomes(sender, gap).values()) == {"released"}, "with no consumer, messages come back released"
    assert sender.credit == 0, "a stopped producer gets no new credit while no consumer exists"

    second = far.receiver(address)  # a consumer returns on R2
    sender.wait_credit(1, timeout=ROUTE_TIMEOUT)
    new = sender.send(10)
    sender.wait_outcomes(new[-1] + 1, timeout=ROUTE_TIMEOUT)
    outcomes = _outcomes(sender, range(FIRST, new[-1] + 1))
    accepted = [seq for seq, outcome in sorted(outcomes.items()) if outcome == "accepted"]
    second.wait_received(len(accepted), timeout=ROUTE_TIMEOUT)
    far.sync()
    details.update(released=len(gap), accepted_after_return=len(accepted), received_by_second=second.count)
    assert set(outcomes.values()) <= {"accepted", "released"}, f"every message settled plainly: {outcomes}"
    assert all(outcomes[seq] == "accepted" for seq in new), "after the consumer returns, messages are accepted"
    assert second.seqs(sender.name) == accepted, "the new consumer gets exactly the accepted messages, in order"
    assert first.seqs(sender.name) == list(range(FIRST)), "the consumer that left got nothing more"


def _consumer_replaced_at_once(mesh, clients, details, address):
    # The consumer leaves and another attaches on R2 straight after, so R1 may learn of both changes
    # together while its producer is still answering a request to give its credit back (a drain). Each
    # round must leave the producer able to send to the new consumer. The moment R1 learns of each change
    # is not under the case's control, so it repeats the swap to meet the tight orderings too.
    far = clients.connect(mesh.client_url("far"))
    consumer = far.receiver(address)
    conn = clients.connect(mesh.client_url("producer"))
    sender = conn.sender(address)
    sender.wait_credit(1, timeout=ROUTE_TIMEOUT)
    got = {consumer.name: _deliver_one(sender, consumer)}
    consumers = [consumer]
    for _ in range(SWAPS):
        consumer.detach(wait=False)
        consumer = far.receiver(address)
        consumers.append(consumer)
        got[consumer.name] = _deliver_one(sender, consumer)
    conn.sync()
    far.sync()
    details.update(swaps=SWAPS, outcomes=sender.outcome_counts())
    for c in consumers:
        assert c.seqs(sender.name) == got[c.name], f"{c.name} gets exactly the messages it accepted, in order"


@pytest.mark.spec("MESH-CREDIT-2")
def test_address_is_withdrawn_when_the_last_remote_consumer_leaves(mesh, clients, details):
    address = clients.unique("balanced.credit.")
    conn, sender, far, first = _serving_a_consumer_that_stops_taking(mesh, clients, address)

    first.detach()
    gap = _send_until_stopped(sender)  # the backlog, then whatever the held credit still lets through
    conn.sync()
    outcomes = _outcomes(sender, gap)
    details.update(sent_after_leaving=len(gap), outcomes=sender.outcome_counts())
    assert len(outcomes) == len(gap), "every message sent was settled: none is lost"
    assert set(outcomes.values()) == {"released"}, f"with no consumer anywhere, messages come back released: {outcomes}"
    _credit_stays_away(sender, conn)

    held = sender.send(3)  # no credit: they stay at the producer
    conn.sync()
    far.sync()
    assert sender.sent == gap[-1] + 1 and sender.queued == len(held), "without credit nothing leaves the producer"
    assert first.seqs(sender.name) == list(range(FIRST)), "the consumer that left got nothing more"


def _send_until_asked_to_drain(sender):
    """The producer sends one message at a time on the credit it holds until the router asks for the credit
    back (a drain), which the sender made with `hold_drain` does not answer yet. The reference router drains as
    soon as the last consumer is gone; qdrouterd keeps the idle credit and drains after the first message it has
    to release."""

    def asked():
        if sender.drain:
            return True
        if sender.credit > 0 and sender.settled_count() >= sender.sent and not sender.queued:
            sender.send(1)
        return False

    wait_for(asked, ROUTE_TIMEOUT, f"the router to ask producer {sender.name} for its credit back (drain)",
             describe=lambda: (f"credit {sender.credit}, drain {sender.drain}, {sender.sent} sent, "
                               f"outcomes {sender.outcome_counts()}"))


@pytest.mark.spec("MESH-CREDIT-1", "MESH-ADDR-1")
@pytest.mark.parametrize("answer", ["at-once", "after-the-consumer-returns"])
def test_a_producer_that_handed_its_credit_back_gets_credit_when_a_consumer_returns(mesh, clients, details, answer):
    """Issue 34's path: the producer answers R1's drain with nothing queued (it hands its credit back, credit 0,
    and sends nothing more) instead of spending its credit on a backlog as the cases above do. A consumer that
    then returns on R2 must get it credit again (§12.1.1.1).

    `after-the-consumer-returns`: the producer holds its answer until R1 has learned of the new consumer (another
    producer on R1 got credit for the address), so R1 sees the new consumer while the old credit still looks
    unused, and the answer then takes it to 0. The reference router before 2026-11-24 (70f2e92) never gave such a
    producer credit again; `at-once` answers before the consumer returns."""
    address = clients.unique("gone.q.")
    far = clients.connect(mesh.client_url("far"))
    first = far.receiver(address, credit=20, auto_credit=False)
    conn = clients.connect(mesh.client_url("producer"))
    sender = conn.sender(address, hold_drain=True)
    sender.wait_credit(1, timeout=ROUTE_TIMEOUT)
    sender.send(10)
    assert {o.outcome for o in sender.wait_outcomes(10, timeout=ROUTE_TIMEOUT).values()} == {"accepted"}
    first.wait_received(10, timeout=ROUTE_TIMEOUT)

    first.detach()
    _send_until_asked_to_drain(sender)
    sender.wait_outcomes(sender.sent, timeout=ROUTE_TIMEOUT)
    gap = list(range(10, sender.sent))
    assert set(_outcomes(sender, gap).values()) <= {"released"}, "with no consumer, messages come back released"
    details.update(released=len(gap))
    if answer == "at-once":
        sender.answer_drain()
        sender.wait_credit_at_most(0, ROUTE_TIMEOUT)

    second = far.receiver(address)  # a consumer returns on R2
    if answer == "after-the-consumer-returns":
        conn.sender(address).wait_credit(1, timeout=ROUTE_TIMEOUT)  # R1 knows of the consumer again
        sender.answer_drain()
    sender.wait_credit(1, timeout=ROUTE_TIMEOUT)
    (seq,) = sender.send(1)
    assert sender.wait_outcomes(seq + 1, timeout=ROUTE_TIMEOUT)[seq].outcome == "accepted"
    assert second.wait_received(1, timeout=ROUTE_TIMEOUT) and second.seqs(sender.name) == [seq]



@pytest.mark.spec("MESH-CREDIT-3")
@pytest.mark.parametrize("delay", LATE_DRAIN_DELAYS, ids=LATE_DRAIN_IDS)
def test_a_producer_that_answers_a_drain_late_gets_credit_when_a_consumer_returns(mesh, details, delay):
    """Issue 53 (../shared/repro/credit_after_drain.py): the producer on R1, its consumer on R2 leaves and another
    comes; suites/mesh/late_drain.py says what the producer does with the drain and what must follow."""
    details.update(answers_drain_late(mesh, "producer", "far", f"gone.q.late-drain-{delay}", delay))
