"""reference/peek.py splices the router's annotations into a message without re-encoding it, and reads them
back on the next hop. What comes out must decode (with proton) to the same message with those annotations
set, whatever annotations and sections the message had; what the splice cannot walk it must refuse (None) so
that the router falls back to a full decode."""

from __future__ import annotations

import pytest
from proton import Message, symbol

from reference.peek import (annotation_keys, annotations, encode_annotations, replace_section, routing_view,
                            with_annotations)

TO, DESTS = "x-opt-interop.to", "x-opt-interop.dests"

MESSAGES = {
    "body only": Message(body=b"x" * 100),
    "header, properties, app properties": Message(body="hi", address="a.b", priority=7, durable=True,
                                                  properties={"k": 1}),
    "own annotations": Message(body="x", annotations={symbol("x-opt-foo"): 5, symbol(TO): "stale"}),
    "large annotations (map32)": Message(body="z" * 300,
                                         annotations={symbol(f"k{i}"): "v" * 30 for i in range(20)}),
}


@pytest.mark.parametrize("name", MESSAGES)
def test_spliced_annotations_decode_as_if_set_on_the_message(name):
    message = MESSAGES[name]
    out = with_annotations(message.encode(), {TO: "balanced.x", DESTS: ["R2", "R3"]})
    decoded = Message()
    decoded.decode(out)
    expected = {**(message.annotations or {}), symbol(TO): "balanced.x", symbol(DESTS): ["R2", "R3"]}
    assert dict(decoded.annotations) == expected
    assert (decoded.body, decoded.address, decoded.priority, decoded.durable, decoded.properties) == (
        message.body, message.address, message.priority, message.durable, message.properties)
    assert annotations(out, (TO, DESTS)) == {TO: "balanced.x", DESTS: ["R2", "R3"]}


def test_dropped_keys_go_and_the_others_keep_their_bytes():
    data = with_annotations(Message(body="x", annotations={symbol("keep"): 1}).encode(),
                            encode_annotations({TO: "a", DESTS: ["R1"]}))
    out = with_annotations(data, {TO: "b"}, drop=(DESTS,))
    decoded = Message()
    decoded.decode(out)
    assert dict(decoded.annotations) == {symbol("keep"): 1, symbol(TO): "b"}
    assert out.endswith(Message(body="x").encode()[-5:])  # the body section, byte for byte


def test_a_message_without_annotations_reads_as_none_set():
    assert annotations(Message(body="x").encode(), (TO,)) == {}


def test_what_cannot_be_walked_is_refused_not_guessed():
    not_a_section = b"\x01\x02\x03"
    assert with_annotations(not_a_section, {TO: "a"}) is None
    assert annotations(not_a_section, (TO,)) is None
    with_a_number = with_annotations(Message(body="x", annotations={symbol(TO): 7}).encode(), {DESTS: []})
    assert annotations(with_a_number, (TO,)) is None  # a wanted value of another type: the caller decodes


# ---- routing_view and replace_section: the router's one walk per message ------------------------------------------

VIEWED = {
    **MESSAGES,
    "delivery annotations first": Message(body="d", address="q.1", priority=2,
                                          instructions={symbol("x-opt-hop"): "1"}),
    "empty": Message(),
}


@pytest.mark.parametrize("name", VIEWED)
def test_routing_view_reads_what_proton_decodes(name):
    message = VIEWED[name]
    data = message.encode()
    view = routing_view(data)
    assert view is not None
    assert view.to == message.address
    assert (4 if view.priority is None else view.priority) == message.priority  # absent: the default, 4 (§3.2.1)
    assert view.has_annotations == bool(message.annotations)
    if view.has_annotations:
        assert annotation_keys(data[view.annotations_at:view.annotations_end]) == [str(k) for k in message.annotations]


@pytest.mark.parametrize("name", VIEWED)
def test_replacing_the_section_decodes_as_if_the_annotations_were_set_instead(name):
    message = VIEWED[name]
    data = message.encode()
    added = encode_annotations({TO: "balanced.x", DESTS: ["R2"]})
    out = replace_section(data, routing_view(data), added.section)
    decoded = Message()
    decoded.decode(out)
    assert decoded.annotations == {symbol(TO): "balanced.x", symbol(DESTS): ["R2"]}
    assert (decoded.body, decoded.address, decoded.priority, decoded.properties, decoded.instructions) == (
        message.body, message.address, message.priority, message.properties, message.instructions)
    gone = Message()
    gone.decode(replace_section(out, routing_view(out), b""))
    assert not gone.annotations and gone.body == message.body


def test_routing_view_refuses_what_it_cannot_read():
    assert routing_view(b"\x00\x53\x70\xc0\x03\x02\x40\xa1") is None  # header list cut short: priority unreadable
    assert routing_view(b"\x00\x53\x73\xc0\x04\x03\x40\x40\x71") is None  # `to` is an int, not an address
    assert routing_view(b"\x01\x02") is None  # not a section at all
