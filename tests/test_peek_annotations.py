"""reference/peek.py splices the router's annotations into a message without re-encoding it, and reads them
back on the next hop. What comes out must decode (with proton) to the same message with those annotations
set, whatever annotations and sections the message had; what the splice cannot walk it must refuse (None) so
that the router falls back to a full decode."""

from __future__ import annotations

import pytest
from proton import Message, symbol

from reference.peek import annotations, encode_annotations, with_annotations

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
