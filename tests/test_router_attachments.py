"""The reference router's attach rules and address registry (reference/router/attachments.py): what an attaching
link becomes, which consumers and producers each address has, and what a consumer's leaving does to the copies it
had (003_9cdc7c48796dae4f.txt §12.1.1.2, §12.1.1.4, §12.1.4.2). On proton engine links, without a network."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from proton import Connection, Endpoint

from reference.links import forget_state
from reference.router.config import parse_config
from reference.router.keys import PHASE1
from reference.router.router import Router
from reference.router.settlement import MODIFIED, RELEASED
from reference.router.state import Inbound, Outbound

WAYPOINT = "address {\n    prefix: queue\n    waypoint: yes\n}\n"

_MADE: list[Connection] = []  # the engine connections this module's cases made


def new_connection() -> Connection:
    conn = Connection()
    _MADE.append(conn)
    return conn


@pytest.fixture(autouse=True)
def _forget_router_state():
    """Drop the router's attributes from the connections a case made, and their links, as the server does when a
    transport closes (reference/links.py forget_state): held in proton's records, they would keep what a case
    made alive through C, where Python's collector cannot see it (tests/test_reference_memory.py counts them)."""
    yield
    while _MADE:
        forget_state(_MADE.pop(), Router.STATE_PREFIX)


def make_router(sections: str = "") -> Router:
    return Router(parse_config("router {\n    mode: standalone\n    id: RT\n}\n" + sections, "test.conf"))


def router_end(kind: str, name: str, conn: Connection | None = None, open_it: bool = True):
    session = (conn or new_connection()).session()
    link = session.receiver(name) if kind == "receiver" else session.sender(name)
    if open_it:
        link.open()
    return link


def test_consumers_and_producers_are_registered_by_address_and_found_by_their_links():
    router = make_router()
    consumer = router.add_consumer(router_end("sender", "c"), "orders")
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    assert router.consumers == {"orders": [consumer]} and router.producers == {"orders": {producer}}
    assert router.message_links[consumer.impl] is consumer and router.message_links[producer.impl] is producer
    assert consumer in consumer.conn.consumers and producer in producer.conn_state.producers


def test_an_anonymous_sender_is_a_producer_of_no_address():
    router = make_router()
    link = router_end("receiver", "anon", open_it=False)  # its peer's target has no address
    router.attachments.on_link_remote_open(SimpleNamespace(link=link))
    producer = router.message_links[link._impl]
    assert producer.address is None and router.producers == {}, "routed per message, by its `to`"
    assert link.state & Endpoint.LOCAL_ACTIVE


def test_a_receiver_with_neither_a_source_address_nor_a_dynamic_source_is_refused():
    router = make_router()
    link = router_end("sender", "nowhere", open_it=False)
    router.attachments.on_link_remote_open(SimpleNamespace(link=link))
    assert link.condition.name == "amqp:invalid-field" and link.state & Endpoint.LOCAL_CLOSED
    assert router.consumers == {}


def test_a_waypoint_addresss_consumers_receive_its_second_phase():
    router = make_router(WAYPOINT)
    assert router.attachments._consumer_key("queue.a") == PHASE1 + "queue.a"
    assert make_router().attachments._consumer_key("queue.a") == "queue.a"


def test_a_brokers_waypoint_link_is_refused_for_other_ordinals_and_addresses_without_a_waypoint():
    router = make_router(WAYPOINT)
    second = router_end("sender", "w2", open_it=False)
    router.attachments._attach_waypoint(second, "queue.a", 2)
    assert second.condition.name == "amqp:not-implemented", "the reference has one waypoint per address"
    plain = router_end("sender", "w", open_it=False)
    router.attachments._attach_waypoint(plain, "other", 1)
    assert plain.condition.name == "amqp:precondition-failed"


def test_a_brokers_waypoint_links_consume_phase_0_and_feed_phase_1():
    router = make_router(WAYPOINT)
    to_broker = router_end("sender", "to-broker", open_it=False)
    router.attachments._attach_waypoint(to_broker, "queue.a", 1)
    from_broker = router_end("receiver", "from-broker", open_it=False)
    router.attachments._attach_waypoint(from_broker, "queue.a", 1)
    assert [c.link for c in router.consumers["queue.a"]] == [to_broker], "what producers send goes to the broker"
    (feed,) = router.producers[PHASE1 + "queue.a"]
    assert feed.link is from_broker and not feed.allow_fallback, "what the broker sends goes to consumers"


def test_a_consumer_leaving_releases_the_copies_it_never_got_and_leaves_those_it_had_in_doubt():
    router = make_router()
    consumer = router.add_consumer(router_end("sender", "c"), "orders")
    finals, sent_or_dropped = [], []
    router.attachments._copy_final = lambda out, outcome: finals.append((out.seq, outcome))
    router.attachments._copy_sent_or_dropped = sent_or_dropped.append
    delivery = Inbound(delivery=None, producer=None, presettled=False, multicast=False)
    consumer.pending.append(Outbound(delivery, consumer, b"", 4, 1))
    in_doubt = Outbound(delivery, consumer, b"", 4, 2, delivery="copy")
    consumer.in_flight.add(in_doubt)
    router.outbound_of["copy"] = in_doubt
    router.attachments._link_gone(consumer.link)
    assert finals == [(1, RELEASED), (2, MODIFIED)] and sent_or_dropped == [delivery]
    assert router.consumers == {} and "copy" not in router.outbound_of and consumer.impl not in router.message_links
    router.attachments._drop_consumer(consumer)
    assert len(finals) == 2, "a consumer leaves once"


def test_the_last_consumer_leaving_withdraws_its_producers_credit_but_not_while_another_is_left():
    router = make_router()
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    first, second = (router.add_consumer(router_end("sender", n), "orders") for n in ("c1", "c2"))
    router.attachments._drop_consumer(first)
    assert not producer.draining
    router.attachments._drop_consumer(second)
    assert producer.draining
