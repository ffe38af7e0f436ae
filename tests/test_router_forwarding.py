"""Where the reference router sends a message (reference/router/forwarding.py; 003_9cdc7c48796dae4f.txt
§12.1.1.3 routing patterns, §12.1.3 priority, §12.1.4.3 fallback), on one standalone router with proton engine
links and no network. Sending the copies is the pump's (tests/test_router_sending.py); here they are looked at
where they wait."""

from __future__ import annotations

import pytest
from proton import Message

from reference.router import raw
from reference.router.config import parse_config
from reference.router.forwarding import DEFAULT_MESSAGE_PRIORITY, _effective_priority
from reference.router.keys import FALLBACK
from reference.router.router import Router
from reference.router.settlement import RELEASED
from reference.router.state import state_of
from tests.router_engine import forget_router_state, make_router, new_connection, router_end  # noqa: F401


@pytest.fixture
def engine(monkeypatch):
    """Messages come pre-settled, and what the router settles is recorded (there is no engine delivery)."""
    settled = []
    monkeypatch.setattr(raw, "settled_by_peer", lambda dlv: True)
    monkeypatch.setattr(raw, "settle", settled.append)
    return settled


def route(router: Router, producer, message: Message, dlv="dlv") -> None:
    router.forwarding._route(producer, dlv, message.encode())


def test_balanced_picks_the_consumer_with_the_fewest_unsettled_copies():
    router = make_router()
    busy, idle = (router.add_consumer(router_end("sender", name), "orders") for name in ("busy", "idle"))
    busy.in_flight.add("an unsettled copy")
    local, remote, unroutable = router.forwarding._plan("orders", "balanced", None)
    assert local == [idle] and remote == {} and unroutable == 0


def test_multicast_takes_every_consumer_and_a_plan_without_choice_is_kept_until_consumers_change():
    router = make_router()
    a = router.add_consumer(router_end("sender", "a"), "news")
    first = router.forwarding._plan("news", "multicast", None)
    assert first[0] == [a] and router.forwarding._plan("news", "multicast", None) is first
    b = router.add_consumer(router_end("sender", "b"), "news")
    assert sorted(map(id, router.forwarding._plan("news", "multicast", None)[0])) == sorted(map(id, [a, b]))


def test_a_message_from_an_edge_is_not_routed_back_to_it():
    router = make_router()
    edge_conn, other_conn = new_connection(), new_connection()
    router.add_consumer(router_end("sender", "e", edge_conn), "orders")
    here = router.add_consumer(router_end("sender", "h", other_conn), "orders")
    local, _, _ = router.forwarding._plan("orders", "multicast", None, exclude=state_of(edge_conn))
    assert local == [here]


def test_the_address_priority_replaces_the_messages_own_and_the_default_is_four():
    section = parse_config("router {\n    id: RT\n}\naddress {\n    prefix: p\n    priority: 8\n}\n", "t").addresses[0]
    assert _effective_priority(section, 2) == 8
    assert _effective_priority(None, 2) == 2 and _effective_priority(None, None) == DEFAULT_MESSAGE_PRIORITY == 4


def test_a_message_is_queued_for_its_consumer_with_its_priority(engine):
    router = make_router()
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    consumer = router.add_consumer(router_end("sender", "c"), "orders")
    route(router, producer, Message(address="orders", body=1, priority=6))
    assert [out.priority for out in consumer.pending] == [6] and consumer.conn in router._dirty
    assert engine == ["dlv"], "the router settles a pre-settled delivery itself (§12.1.1.4)"
    assert router.forwarding.stats["routed"] == 1 and router.counters.address_stats["orders"]["egress"] == 1


def test_an_anonymous_senders_message_goes_by_its_to(engine):
    router = make_router()
    producer = router.add_producer(router_end("receiver", "anon"), None)
    consumer = router.add_consumer(router_end("sender", "c"), "orders")
    route(router, producer, Message(address="orders", body=1))
    assert len(consumer.pending) == 1


def test_with_no_consumer_a_message_goes_to_the_fallback_destination(engine):
    router = make_router("address {\n    prefix: orders\n    enableFallback: yes\n}\n")
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    fallback = router.add_consumer(router_end("sender", "f"), FALLBACK + "orders")
    route(router, producer, Message(address="orders", body=1))
    assert len(fallback.pending) == 1 and router.counters.totals["fallback"] == 1
    consumer = router.add_consumer(router_end("sender", "c"), "orders")
    route(router, producer, Message(address="orders", body=2))
    assert len(consumer.pending) == 1 and len(fallback.pending) == 1, "a consumer is back: no more fallback"


def test_with_no_route_a_presettled_message_is_dropped_and_an_unsettled_one_released(engine, monkeypatch):
    router = make_router()
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    route(router, producer, Message(address="orders", body=1))
    assert engine == ["dlv"] and router.forwarding.stats["no_route"] == 1
    finished = []
    monkeypatch.setattr(raw, "settled_by_peer", lambda dlv: False)
    monkeypatch.setattr("reference.router.forwarding.finish",
                        lambda dlv, outcome, **kwargs: finished.append((dlv, outcome)))
    route(router, producer, Message(address="orders", body=2), dlv="dlv2")
    assert finished == [("dlv2", RELEASED)] and producer.counts[RELEASED] == 1, "a router stores nothing"


def test_the_routers_own_message_goes_presettled_at_the_default_priority_or_nowhere():
    router = make_router()
    assert not router.forwarding.inject("replies", b"\x00Sw\xa1\x02hi"), "no consumer: dropped"
    consumer = router.add_consumer(router_end("sender", "c"), "replies")
    assert router.forwarding.inject("replies", Message(body="hi").encode())
    (out,) = consumer.pending
    assert out.inbound.presettled and out.priority == DEFAULT_MESSAGE_PRIORITY
