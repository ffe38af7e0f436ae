"""The reference router's credit rules (reference/router/credit.py), on proton engine links without a network.

003_9cdc7c48796dae4f.txt §12.1.1.1: a producer gets credit only while a consumer of its address is reachable, a
window at a time, and is drained when the last one goes. tests/test_router_credit.py drives the same rules over
sockets, with a producer that answers drains late; here each rule is asked of the router directly.
"""

from __future__ import annotations

from reference.router import raw
from reference.router.keys import FALLBACK, PHASE1
from reference.router.router import Router
from tests import router_engine
from tests.router_engine import forget_router_state, router_end  # noqa: F401 (a fixture)


CAPACITY = 8  # a small window, so that what is granted is easy to tell from what is not


def make_router(sections: str = "") -> Router:
    return router_engine.make_router(sections, link_capacity=CAPACITY)


def test_a_producer_gets_no_credit_until_a_consumer_is_reachable_then_a_window():
    router = make_router()
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    assert producer.link.credit == 0, "no consumer of 'orders' anywhere: no credit"
    router.add_consumer(router_end("sender", "c"), "orders")
    assert producer.link.credit == CAPACITY, "the first consumer opens a full window"
    router.add_consumer(router_end("sender", "c2"), "orders")
    assert producer.link.credit == CAPACITY, "a second consumer grants nothing more: the window is full"


def test_the_last_consumer_leaving_drains_the_producer_and_a_returning_one_calls_the_drain_off():
    router = make_router()
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    consumer = router.add_consumer(router_end("sender", "c"), "orders")
    router.attachments._drop_consumer(consumer)
    assert producer.draining and raw.drain_mode(producer.impl), "unused credit is asked back"
    router.add_consumer(router_end("sender", "c2"), "orders")
    # The drain was never answered: it is called off at once (AMQP 1.0 §2.6.7, a flow with drain false) rather
    # than waited for (MESH-CREDIT-3).
    assert not producer.draining and not raw.drain_mode(producer.impl)
    assert producer.link.credit >= 1


def test_a_producer_with_no_credit_is_not_drained():
    router = make_router()
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    router.credit._revoke_one(producer)
    assert not producer.draining and not raw.drain_mode(producer.impl), "nothing to ask back"


def test_credit_left_is_topped_up_in_batches_of_a_quarter_window():
    router = make_router()
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    router.add_consumer(router_end("sender", "c"), "orders")
    assert producer.link.credit == CAPACITY
    producer.capacity = CAPACITY + 1  # one more would fit: less than a quarter window, and credit is left
    router.credit._top_up(producer)
    assert producer.link.credit == CAPACITY, "no grant of less than a quarter window while credit is left"
    producer.capacity = 12  # four more would fit: a quarter of the window
    router.credit._top_up(producer)
    assert producer.link.credit == 12, "a quarter window is granted"


def test_undelivered_messages_count_against_the_window():
    router = make_router()
    link = router_end("receiver", "p")
    producer = router.add_producer(link, "orders")
    producer.undelivered = CAPACITY  # a window of its messages is still in flight
    router.add_consumer(router_end("sender", "c"), "orders")
    assert link.credit == 0, "at most a window of a producer's messages is in flight"


def test_an_address_with_fallback_is_reachable_through_its_fallback_destination():
    router = make_router("address {\n    prefix: orders\n    enableFallback: yes\n}\n")
    producer = router.add_producer(router_end("receiver", "p"), "orders")
    assert producer.link.credit == 0
    router.add_consumer(router_end("sender", "f"), FALLBACK + "orders")
    assert producer.link.credit == CAPACITY, "a fallback destination takes what no consumer can (§12.1.4.3)"
    assert router.credit._reachable("orders")
    assert not router.credit._reachable("orders", fallback=False), "in-autolinks do not send to the fallback"
    assert not make_router().credit._reachable("orders"), "without enableFallback the fallback does not count"


def test_the_management_agent_is_always_reachable():
    router = make_router()
    assert router.credit._reachable("$management") and not router.credit._reachable("$managementx")


def test_parked_messages_go_first_in_order_when_a_consumer_is_back(monkeypatch):
    """An in-autolink's messages with nowhere to go wait unsettled, counted against its window (§12.1.4.3: the order
    of messages stored at a fallback destination is preserved)."""
    router = make_router()
    held, released, routed = [], [], []
    monkeypatch.setattr(raw, "hold", held.append)
    monkeypatch.setattr(raw, "release", released.append)
    monkeypatch.setattr(router.forwarding, "_route",
                        lambda producer, dlv, data, unparking=False: routed.append((dlv, data, unparking)))
    producer = router.add_producer(router_end("receiver", "feed"), PHASE1 + "q", allow_fallback=False)
    router.credit._park(producer, "d1", b"one")
    router.credit._park(producer, "d2", b"two")
    assert held == ["d1", "d2"] and producer.undelivered == 2
    router.add_consumer(router_end("sender", "c"), PHASE1 + "q")
    assert routed == [("d1", b"one", True), ("d2", b"two", True)], "routed again in the order they came"
    assert released == ["d1", "d2"], "routing holds what it keeps: the park's reference is let go"
    assert not producer.parked and producer.undelivered == 0
