"""The reference router's pump (reference/router/sending.py): which waiting copy goes first on a connection
(003_9cdc7c48796dae4f.txt §12.1.3, priority), what a copy's sending does, and the hold on a backed-up
inter-router connection. The engine's calls are stood in for: credit and output are what each case says."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from reference.router import raw
from reference.router.sending import OUTPUT_HOLD_BYTES, PriorityPending, Pump
from reference.router.settlement import ACCEPTED
from reference.router.state import _ZERO_COUNTS, ConnectionState, Inbound, Outbound


class Engine:
    """Stands in for raw.py's per-message calls: credit per link, output per session, and what was sent."""

    def __init__(self):
        self.credit: dict[str, int] = {}
        self.output: dict[str, int] = {}
        self.sent: list[tuple[str, bytes]] = []
        self.settled: list[str] = []

    def send_copy(self, link, _tag, data):
        self.credit[link] -= 1
        self.sent.append((link, data))
        return f"dlv-{len(self.sent)}"


@pytest.fixture
def engine(monkeypatch):
    fake = Engine()
    monkeypatch.setattr(raw, "credit", lambda link: fake.credit.get(link, 0))
    monkeypatch.setattr(raw, "outgoing_bytes", lambda session: fake.output.get(session, 0))
    monkeypatch.setattr(raw, "send_copy", fake.send_copy)
    monkeypatch.setattr(raw, "settle", fake.settled.append)
    return fake


@pytest.fixture
def pump():
    finals = []
    router = SimpleNamespace(_dirty=set(), outbound_of={}, now=99.0, outcomes=SimpleNamespace(
        _copy_sent_or_dropped=lambda inbound: None, _copy_final=lambda out, outcome: finals.append(outcome)))
    made = Pump(router)
    made.finals = finals
    return made


class FakeConsumer(SimpleNamespace):
    """A consumer's fields the pump reads; one per link, so compared and hashed by identity as state.Consumer is."""

    __eq__ = object.__eq__
    __hash__ = object.__hash__


def consumer(conn: ConnectionState, name: str, neighbour=False, at_most_once=False):
    made = FakeConsumer(pending=PriorityPending() if neighbour else deque(), in_flight=set(), closed=False,
                        neighbour=neighbour, impl=name, session_impl=name, conn=conn, counts=dict(_ZERO_COUNTS),
                        at_most_once=at_most_once, link=SimpleNamespace(drain_mode=False, credit=0))
    conn.consumers.add(made)
    return made


def queue(to, data: bytes, priority: int, seq: int, presettled=False) -> Outbound:
    delivery = Inbound(delivery=None, producer=None, presettled=presettled, multicast=False)
    out = Outbound(delivery, to, data, priority, seq)
    to.pending.append(out)
    return out


def test_the_highest_priority_head_goes_first_across_a_connections_links_then_arrival_order(engine, pump):
    conn = ConnectionState()
    a, b = consumer(conn, "a"), consumer(conn, "b")
    engine.credit.update(a=10, b=10)
    queue(a, b"a-low", 2, 1)
    queue(b, b"b-high", 7, 2)
    queue(a, b"a-high", 7, 3)  # behind a-low on its own link: a link's copies keep their order
    queue(b, b"b-low", 2, 4)
    pump._pump(conn)
    assert [data for _, data in engine.sent] == [b"b-high", b"a-low", b"a-high", b"b-low"]


def test_a_link_without_credit_gets_nothing_and_keeps_its_copies(engine, pump):
    conn = ConnectionState()
    a, b = consumer(conn, "a"), consumer(conn, "b")
    engine.credit.update(a=0, b=1)
    queue(a, b"for-a", 9, 1)
    queue(b, b"for-b", 1, 2)
    queue(b, b"for-b-2", 1, 3)
    pump._pump(conn)
    assert engine.sent == [("b", b"for-b")] and len(a.pending) == 1 and len(b.pending) == 1


def test_an_unsettled_copy_is_in_flight_until_its_outcome_and_counted_on_the_link(engine, pump):
    conn = ConnectionState()
    c = consumer(conn, "c")
    engine.credit["c"] = 1
    out = queue(c, b"m", 4, 1)
    pump._pump(conn)
    assert c.in_flight == {out} and pump.outbound_of == {"dlv-1": out} and out.delivery == "dlv-1"
    assert c.counts["delivered"] == 1 and c.counts["presettled"] == 0 and conn.last_delivery == 99.0


def test_an_at_most_once_consumer_gets_its_copy_settled_and_counted_accepted(engine, pump):
    conn = ConnectionState()
    c = consumer(conn, "c", at_most_once=True)
    engine.credit["c"] = 1
    queue(c, b"m", 4, 1)
    pump._pump(conn)
    assert engine.settled == ["dlv-1"] and pump.finals == [ACCEPTED] and not c.in_flight
    assert c.counts["presettled"] == 1


def test_a_backed_up_inter_router_connection_is_held_and_served_again_after_the_next_batch(engine, pump):
    conn = ConnectionState(role="inter-router")
    data = consumer(conn, "data", neighbour=True)
    engine.credit["data"] = 10
    engine.output["data"] = OUTPUT_HOLD_BYTES
    queue(data, b"low", 1, 1)
    pump._dirty.add(conn)
    pump.serve()
    assert engine.sent == [] and conn in pump._held, "the copy waits in the router, where it can be overtaken"
    queue(data, b"high", 9, 2)
    engine.output["data"] = 0  # the socket took the output
    pump.serve()
    assert [d for _, d in engine.sent] == [b"high", b"low"] and conn not in pump._held


def test_a_draining_consumer_with_nothing_waiting_is_answered_drained(engine, pump):
    conn = ConnectionState()
    idle, busy = consumer(conn, "idle"), consumer(conn, "busy")
    drained = []
    idle.link = SimpleNamespace(drain_mode=True, credit=5, drained=lambda: drained.append("idle"))
    busy.link = SimpleNamespace(drain_mode=True, credit=5, drained=lambda: drained.append("busy"))
    queue(busy, b"m", 4, 1)  # no engine credit for it yet: it stays waiting
    pump._pump(conn)
    assert drained == ["idle"], "its credit goes back unused (AMQP 1.0 §2.6.7); one with copies waiting is not done"
