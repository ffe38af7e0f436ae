"""Settlement and reliability: pre-settled, anycast and multicast outcomes, consumer loss (003 §12.1.1.4)."""

import itertools

import pytest

# The consumer's outcome (harness receiver policy) and what the producer must see for it.
ANYCAST = {
    "accept": ("accepted", "ROUTING-OUTCOME-ANYCAST-ACCEPTED"),
    "reject": ("rejected", "ROUTING-OUTCOME-ANYCAST-REJECTED"),
    "release": ("released", "ROUTING-OUTCOME-ANYCAST-RELEASED"),
    "modify": ("modified", "ROUTING-OUTCOME-ANYCAST-MODIFIED"),
    "modify-undeliverable": ("modified", "ROUTING-OUTCOME-ANYCAST-MODIFIED"),
}


def multicast_outcome(consumer_outcomes):
    """The §12.1.1.4 table for multicast, written out on its own (not taken from any implementation)."""
    seen = {ANYCAST[o][0] for o in consumer_outcomes}
    if "rejected" in seen:
        return "rejected"  # at least one consumer rejected it
    if "accepted" in seen:
        return "accepted"  # at least one accepted, none rejected
    if "modified" in seen:
        return "modified"  # may have reached some; none accepted or rejected
    return "released"  # reached none


ANYCAST_CASES = [pytest.param(o, marks=pytest.mark.spec(clause), id=o) for o, (_, clause) in ANYCAST.items()]
MULTICAST_CASES = [
    pytest.param(combo, id="+".join(combo),
                 marks=pytest.mark.spec(f"ROUTING-OUTCOME-MULTICAST-{multicast_outcome(combo).upper()}"))
    for n in (2, 3) for combo in itertools.combinations_with_replacement(("accept", "reject", "release", "modify"), n)]


@pytest.mark.spec("ROUTING-SETTLE-1")
@pytest.mark.parametrize("prefix", ["balanced.presettled.", "multicast.presettled."])
def test_presettled_messages_arrive_settled_and_get_no_outcome(connect, clients, details, prefix):
    address = clients.unique(prefix)
    receiver = connect().receiver(address)
    sender = connect().sender(address, presettled=True)
    sender.send(10)
    got = receiver.wait_received(10)
    sender.conn.sync()
    details.update(received=len(got), outcomes=sender.settled_count())
    assert all(m.settled for m in got), "pre-settled deliveries must reach the consumer settled"
    assert sender.settled_count() == 0, "a pre-settled producer gets no outcome back"
    assert [m.seq for m in got] == list(range(10))


@pytest.mark.spec("ROUTING-SETTLE-2")
@pytest.mark.requires("distribution.balanced")
@pytest.mark.parametrize("consumer_outcome", ANYCAST_CASES)
def test_anycast_producer_sees_the_consumers_outcome(connect, clients, details, consumer_outcome):
    expected = ANYCAST[consumer_outcome][0]
    address = clients.unique("balanced.outcome.")
    receiver = connect().receiver(address, outcome=consumer_outcome)
    sender = connect().sender(address)
    sender.send(3)
    outcomes = sender.wait_outcomes(3)
    details.update(outcomes=sender.outcome_counts(), received=receiver.count)
    assert [o.outcome for o in outcomes.values()] == [expected] * 3
    if consumer_outcome.startswith("modify"):
        assert all(o.failed for o in outcomes.values()), "delivery-failed must travel back with modified"
        undeliverable = consumer_outcome == "modify-undeliverable"
        assert all(o.undeliverable == undeliverable for o in outcomes.values())


@pytest.mark.spec("ROUTING-SETTLE-3")
@pytest.mark.requires("distribution.multicast", "multicast-outcome")
def test_multicast_outcome_waits_for_every_consumer(connect, clients, details):
    address = clients.unique("multicast.wait.")
    prompt = connect().receiver(address, outcome="accept")
    slow = connect().receiver(address, outcome="hold")
    sender = connect().sender(address)
    sender.send(1)
    prompt.wait_received(1)
    slow.wait_received(1)
    sender.conn.sync()
    assert sender.settled_count() == 0, "one consumer has not settled yet: the producer must still wait"
    slow.settle("accept")
    outcomes = sender.wait_outcomes(1)
    assert outcomes[0].outcome == "accepted"


@pytest.mark.spec("ROUTING-SETTLE-3")
@pytest.mark.requires("distribution.multicast", "multicast-outcome")
@pytest.mark.parametrize("consumer_outcomes", MULTICAST_CASES)
def test_multicast_outcome_combines_consumer_outcomes(connect, clients, details, consumer_outcomes):
    expected = multicast_outcome(consumer_outcomes)
    address = clients.unique("multicast.outcome.")
    receivers = [connect().receiver(address, outcome=o) for o in consumer_outcomes]
    sender = connect().sender(address)
    sender.send(1)
    outcomes = sender.wait_outcomes(1)
    details.update(consumer_outcomes=list(consumer_outcomes), producer_outcome=outcomes[0].outcome)
    assert all(r.count == 1 for r in receivers)
    assert outcomes[0].outcome == expected, f"consumers {consumer_outcomes} must combine to {expected}"


@pytest.mark.spec("ROUTING-LOSS-1")
@pytest.mark.parametrize("how", ["link-detach", "session-end", "connection-close", "connection-drop"])
def test_deliveries_to_a_lost_consumer_come_back_released_or_modified(connect, clients, details, how):
    """Per delivery: what the lost consumer had received is in doubt, what it never got is released.

    003 §12.1.1.4 (anycast): `released` means the message did not reach its destination, `modified` that it
    may or may not have (in doubt, to be sent again for at least once). The consumer grants credit 2 and
    settles nothing, so the router can have put exactly two copies on the wire: those reached it, so
    `released` would be untrue for them and they must come back `modified`; and since the consumer took
    them and never settled them, that was a failed delivery attempt (AMQP 1.0 §3.4.5, delivery-failed).
    The other four never had credit to leave the router: they did not reach it, so `released`.
    """
    address = clients.unique("balanced.loss.")
    consumer_conn = connect()
    # Credit 2 and no settling: two copies are in flight (in doubt), the rest wait inside the router.
    receiver = consumer_conn.receiver(address, credit=2, auto_credit=False, outcome="hold")
    sender = connect().sender(address)
    sender.send(6)
    receiver.wait_received(2)
    sender.wait_sent(6)
    sender.conn.sync()
    consumer_conn.sync()
    assert sender.settled_count() == 0
    reached = set(receiver.seqs())
    assert len(reached) == 2, f"credit 2 lets exactly two copies reach the consumer, it got {sorted(reached)}"
    if how == "link-detach":
        receiver.detach()
    elif how == "session-end":  # the consumer's session ends with its link still attached: the link goes with it
        receiver.end_session()
    elif how == "connection-close":
        consumer_conn.close()
    else:
        consumer_conn.kill()
    outcomes = sender.wait_outcomes(6)
    # undeliverable-here is the router's choice (neither document says), so it is recorded, not judged.
    observed = {seq: o.outcome + ("+failed" if o.failed else "") for seq, o in sorted(outcomes.items())}
    expected = {seq: "modified+failed" if seq in reached else "released" for seq in range(6)}
    details.update(outcomes=sender.outcome_counts(), per_seq=observed,
                   undeliverable=sorted(seq for seq, o in outcomes.items() if o.undeliverable),
                   reached=sorted(reached), how=how)
    assert len(outcomes) == 6, "every unsettled delivery gets an outcome back"
    assert observed == expected, (
        f"consumer lost by {how} holding seqs {sorted(reached)} unsettled: those reached it (modified, "
        f"delivery-failed), the rest never left the router (released); expected {expected}, got {observed}")
