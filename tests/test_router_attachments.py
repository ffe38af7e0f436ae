"""The reference router's attach rules and address registry (reference/router/attachments.py): what an attaching
link becomes, which consumers and producers each address has, and what a consumer's leaving does to the copies it
had (003_9cdc7c48796dae4f.txt §12.1.1.2, §12.1.1.4, §12.1.4.2). On proton engine links, without a network."""

from __future__ import annotations

from types import SimpleNamespace

from proton import Endpoint

from reference.router.keys import PHASE1
from reference.router.settlement import MODIFIED, RELEASED
from reference.router.state import Inbound, Outbound
from tests.router_engine import forget_router_state, make_router, router_end  # noqa: F401 (a fixture)


WAYPOINT = "address {\n    prefix: queue\n    waypoint: yes\n}\n"


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
