"""The reference router's own annotations on copies between routers (reference/router/annotations.py): what a
neighbour's copy says of where it goes, what a copy to a neighbour or an edge carries, and that a client gets the
message without them, its other annotations and bytes as its producer sent them."""

from __future__ import annotations

from proton import Message, symbol

from reference.peek import routing_view
from reference.router import annotations as annotations_module
from reference.router.annotations import NO_ROUTING, RouterAnnotations, routing_from
from reference.router.interrouter import DESTS, TO

APP = symbol("x-opt-app")


def encoded(annotations: dict | None = None) -> bytes:
    return Message(address="orders", body="payload", annotations=annotations).encode()


def decoded(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def test_a_neighbours_copy_says_its_address_and_the_routers_it_must_still_reach():
    data = encoded({TO: "orders", DESTS: ["R1", "R2"]})
    routing = RouterAnnotations()._routing_of(data, routing_view(data))
    assert routing.to == "orders" and routing.dests == frozenset({"R1", "R2"}) and routing.only_router_keys
    mixed = encoded({TO: "orders", APP: 7})
    routing = RouterAnnotations()._routing_of(mixed, routing_view(mixed))
    assert routing.dests is None, "no dests: from our interior uplink, to be delivered here"
    assert not routing.only_router_keys, "the section holds the producer's annotations too"


def test_a_copy_leaving_the_network_loses_the_routers_annotations_and_keeps_the_producers():
    annotations = RouterAnnotations()
    for sent, kept in (({TO: "orders", DESTS: ["R1"], APP: 7}, {APP: 7}), ({TO: "orders", DESTS: ["R1"]}, None)):
        data = encoded(sent)
        view = routing_view(data)
        message = decoded(annotations._without_router_annotations(data, view, annotations._routing_of(data, view)))
        assert (dict(message.annotations) if message.annotations else None) == kept
        assert message.body == "payload" and message.address == "orders"
    data = encoded()
    assert annotations._without_router_annotations(data, routing_view(data), NO_ROUTING) is data, \
        "a message without annotations goes as it came"


def test_a_copy_to_a_neighbour_names_its_address_and_routers_and_keeps_the_producers_annotations():
    annotations = RouterAnnotations()
    data = encoded({APP: 7})
    message = decoded(annotations._annotated(data, routing_view(data), annotations._annotations_for("orders",
                                                                                                   ["R2", "R1"])))
    assert dict(message.annotations) == {APP: 7, TO: "orders", DESTS: ["R1", "R2"]}, "routers in sorted order"
    data = encoded({TO: "orders", DESTS: ["R1", "R2"]})  # a neighbour's copy going on: its section is replaced
    message = decoded(annotations._annotated(data, routing_view(data), annotations._annotations_for("orders", ["R3"])))
    assert dict(message.annotations) == {TO: "orders", DESTS: ["R3"]}


def test_a_copy_for_an_edge_names_only_its_address():
    annotations = RouterAnnotations()
    data = encoded({TO: "orders", DESTS: ["E1"], APP: 7})
    message = decoded(annotations._annotated(data, routing_view(data), annotations._annotations_for("orders", None),
                                             drop=(DESTS,)))
    assert dict(message.annotations) == {APP: 7, TO: "orders"}


def test_annotations_are_encoded_once_per_destination_within_a_bounded_cache(monkeypatch):
    annotations = RouterAnnotations()
    first = annotations._annotations_for("orders", ["R1"])
    assert annotations._annotations_for("orders", ["R1"]) is first
    assert annotations._annotations_for("orders", ["R2"]) is not first
    monkeypatch.setattr(annotations_module, "_CACHE_LIMIT", 2)
    annotations._annotations_for("other", None)
    assert len(annotations._encoded_annotations) == 1, "full: emptied before the next entry"


def test_routing_from_decoded_annotations():
    assert routing_from({TO: "q", DESTS: ["R1"]}) == annotations_module._Routing("q", frozenset({"R1"}), True)
    assert routing_from({TO: "q"}).dests is None
    assert routing_from({TO: "q", DESTS: None}).dests == frozenset(), "said, but no router: reach none"
    assert not routing_from({TO: "q"}, keys=[str(TO), "x-opt-app"]).only_router_keys
