"""reference/peek.py reads the header and properties fields the peers route by straight from the encoded bytes;
the broker falls back to a full decode (`fields_of`) for encodings the fast path does not know. Both must read
the same fields, or a message's priority or expiry would depend on how its sender encoded it."""

from __future__ import annotations

import pytest
from proton import Message

from reference.broker.messages import expiry_of, fields_of
from reference.peek import Peek, peek, redelivered

MESSAGES = {
    "plain": Message(body="x"),
    "durable-priority": Message(body="x", durable=True, priority=7, address="orders"),
    "ttl": Message(body="x", ttl=2.5),
    "absolute-expiry": Message(body="x", expiry_time=1_900_000_000.25),
}


@pytest.mark.parametrize("name", MESSAGES)
def test_the_fast_path_and_the_full_decode_agree(name):
    message = MESSAGES[name]
    fast = peek(message.encode())
    assert fast is not None, "proton's own encoding is one the fast path knows"
    # A header without priority means 4 (AMQP 1.0 §3.2.1): proton's Message says 4, the fast path None.
    expected = Peek(fast.durable, 4 if fast.priority is None else fast.priority, fast.ttl_ms, fast.to,
                    fast.absolute_expiry_ms)
    assert fields_of(message) == expected


def test_absolute_expiry_is_read_in_milliseconds():
    fields = fields_of(Message(body="x", expiry_time=1_900_000_000.25))
    assert fields.absolute_expiry_ms == 1_900_000_000_250
    assert expiry_of(fields) == pytest.approx(1_900_000_000.25)


def test_a_header_ttl_wins_over_an_absolute_expiry():
    fields = Peek(ttl_ms=2000, absolute_expiry_ms=1_900_000_000_000)
    assert expiry_of(fields) < 1_900_000_000


@pytest.mark.parametrize("name", MESSAGES)
def test_a_redelivery_header_keeps_every_other_field(name):
    message = MESSAGES[name]
    again = Message()
    again.decode(redelivered(message.encode(), 3))
    assert (again.delivery_count, again.first_acquirer) == (3, False)
    assert (again.durable, again.priority, again.ttl, again.expiry_time, again.address, again.body) == (
        message.durable, message.priority, message.ttl, message.expiry_time, message.address, message.body)


def test_a_redelivery_never_decodes_the_body():
    """A body nested deeper than proton's recursive reader can go: the header is rewritten all the same and the
    body's bytes go out as they came (the broker once died of RecursionError redelivering such a message)."""
    inner = b"\x40"
    for _ in range(5000):  # {"": {"": ... null}} as map32s
        payload = b"\xa1\x00" + inner
        inner = b"\xd1" + (len(payload) + 4).to_bytes(4, "big") + (2).to_bytes(4, "big") + payload
    data = b"\x00\x53\x77" + inner  # a message of one amqp-value section, no header
    with pytest.raises(RecursionError):
        Message().decode(data)
    out = redelivered(data, 2)
    assert out.endswith(b"\x00\x53\x77" + inner)
    header = peek(out)
    assert header is not None and header.durable is False
