"""The reference router's records of links and connections (reference/router/state.py)."""

from __future__ import annotations

from proton import Link

from reference.router.state import ConnectionState, Consumer, Producer, state_of
from tests.router_engine import forget_router_state, new_connection  # noqa: F401 (a fixture)


def test_a_connections_state_is_made_once_and_only_when_asked_to():
    conn = new_connection()
    assert state_of(conn) is None
    state = state_of(conn, create=True)
    assert isinstance(state, ConnectionState) and state.role == "normal"
    assert state_of(conn, create=True) is state and state_of(conn) is state


def test_a_consumers_outstanding_copies_are_those_waiting_and_those_in_flight():
    link = new_connection().session().sender("c")
    consumer = Consumer(link=link, address="orders", conn=ConnectionState())
    consumer.pending.extend(["waiting", "waiting too"])
    consumer.in_flight.add("sent, unsettled")
    assert consumer.outstanding == 3, "what balanced distribution compares"
    assert consumer.impl == link._impl and not consumer.at_most_once


def test_an_at_most_once_consumer_is_known_from_its_links_settle_mode():
    link = new_connection().session().sender("c")
    link.snd_settle_mode = Link.SND_SETTLED
    assert Consumer(link=link, address="orders", conn=ConnectionState()).at_most_once


def test_records_are_compared_by_identity():
    link = new_connection().session().receiver("p")
    one, two = Producer(link=link, address="q", capacity=1), Producer(link=link, address="q", capacity=1)
    assert one != two and len({one, two}) == 2, "two producers on one address are two"
