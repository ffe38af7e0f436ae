"""Outcomes from consumers back to producers on the reference router (reference/router/outcomes.py;
003_9cdc7c48796dae4f.txt §12.1.1.4), and when a producer's credit for a delivery comes back. The engine's calls
are recorded, not made."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from reference.router import outcomes as outcomes_module
from reference.router import raw
from reference.router.outcomes import Outcomes
from reference.router.settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED
from reference.router.state import Inbound, Outbound, RemotePath


@pytest.fixture
def setup(monkeypatch):
    finished, released, topped_up, counted = [], [], [], []
    monkeypatch.setattr(outcomes_module, "finish", lambda dlv, outcome, remote=None: finished.append((dlv, outcome)))
    monkeypatch.setattr(raw, "release", released.append)
    router = SimpleNamespace(remote_paths={"R2": RemotePath("R2", 1, outstanding=1)}, outbound_of={}, _dirty=set(),
                             credit=SimpleNamespace(_top_up=topped_up.append),
                             counters=SimpleNamespace(_count_outcome=lambda p, o: counted.append(o)))
    return SimpleNamespace(outcomes=Outcomes(router), router=router, finished=finished, released=released,
                           topped_up=topped_up, counted=counted)


def inbound(copies=1, multicast=False, presettled=False, credit_on_send=False, closed=False) -> Inbound:
    producer = SimpleNamespace(closed=closed, undelivered=1)
    return Inbound(delivery="dlv", producer=producer, presettled=presettled, multicast=multicast, copies=copies,
                   unsent=copies, credit_on_send=credit_on_send)


def copy_of(delivery: Inbound, dests=()) -> Outbound:
    return Outbound(delivery, consumer=None, data=b"", priority=4, seq=1, dests=dests)


def test_a_single_copys_outcome_is_the_producers_and_its_credit_comes_back_once_sent_and_settled(setup):
    delivery = inbound()
    out = copy_of(delivery)
    setup.outcomes._copy_sent_or_dropped(delivery)
    assert delivery.producer.undelivered == 1, "a client's unsettled message: sent is not enough"
    setup.outcomes._copy_final(out, REJECTED)
    assert setup.finished == [("dlv", REJECTED)] and setup.counted == [REJECTED]
    assert delivery.producer.undelivered == 0 and setup.topped_up == [delivery.producer]


def test_a_multicast_delivery_takes_the_outcomes_of_all_its_copies_combined(setup):
    delivery = inbound(copies=3, multicast=True)
    for outcome in (RELEASED, ACCEPTED):
        setup.outcomes._copy_final(copy_of(delivery), outcome)
    assert setup.finished == [], "one copy's outcome is still unknown"
    setup.outcomes._copy_final(copy_of(delivery), MODIFIED)
    assert setup.finished == [("dlv", ACCEPTED)], "accepted by one consumer outweighs modified and released"
    setup.outcomes._copy_final(copy_of(delivery), REJECTED)
    assert len(setup.finished) == 1, "a delivery is finished once"


def test_credit_comes_back_on_sending_for_presettled_and_neighbours_messages(setup):
    delivery = inbound(copies=2, credit_on_send=True)
    setup.outcomes._copy_sent_or_dropped(delivery)
    assert delivery.producer.undelivered == 1
    setup.outcomes._copy_sent_or_dropped(delivery)
    assert delivery.producer.undelivered == 0 and setup.topped_up == [delivery.producer], "every copy is out"


def test_a_presettled_delivery_has_no_outcome_to_carry(setup):
    delivery = inbound(presettled=True)
    setup.outcomes._copy_final(copy_of(delivery), ACCEPTED)
    assert setup.finished == [] and setup.counted == []


def test_a_closed_producer_is_told_nothing_and_its_delivery_let_go(setup):
    delivery = inbound(closed=True)
    setup.outcomes._copy_final(copy_of(delivery), ACCEPTED)
    assert setup.finished == [] and setup.released == ["dlv"] and setup.counted == []


def test_a_copy_for_remote_routers_is_no_longer_outstanding_on_their_paths(setup):
    setup.outcomes._copy_final(copy_of(inbound(), dests=("R2", "R9")), ACCEPTED)
    assert setup.router.remote_paths["R2"].outstanding == 0, "balanced distribution counts what is outstanding"


def test_a_consumers_disposition_settles_the_copy_and_finishes_the_delivery(setup, monkeypatch):
    settled = []
    monkeypatch.setattr(raw, "remote_state", lambda dlv: raw.ACCEPTED)
    monkeypatch.setattr(raw, "settle", settled.append)
    consumer = SimpleNamespace(counts={ACCEPTED: 0}, in_flight=set(), closed=False, conn="conn")
    delivery = inbound()
    out = Outbound(delivery, consumer=consumer, data=b"", priority=4, seq=1, delivery="copy")
    consumer.in_flight.add(out)
    setup.router.outbound_of["copy"] = out
    setup.outcomes._consumer_disposition(out, "copy")
    assert setup.finished == [("dlv", ACCEPTED)] and settled == ["copy"] and consumer.counts[ACCEPTED] == 1
    assert not consumer.in_flight and "copy" not in setup.router.outbound_of
    assert setup.router._dirty == {"conn"}, "the consumer's connection is served again (balanced choice, drain)"


def test_a_received_state_is_no_outcome_yet(setup, monkeypatch):
    monkeypatch.setattr(raw, "remote_state", lambda dlv: 0x23)  # received (AMQP 1.0 §3.4.1)
    monkeypatch.setattr(raw, "settled_by_peer", lambda dlv: False)
    out = copy_of(inbound())
    setup.router.outbound_of["copy"] = out
    setup.outcomes._consumer_disposition(out, "copy")
    assert setup.finished == [] and "copy" in setup.router.outbound_of
