"""Hand-made AMQP encodings for the broker's own annotations, and splicing delivery annotations in and out.

A broker that forwards a message to another broker (a mirror, a federation link) tells the next hop something
with the message: Artemis's mirror in delivery annotations (AMQP 1.0 §3.2.2, annotations for one hop only), and
so does the reference's federation. Only the header and the delivery annotations, the first two sections, are
touched; the rest of the message travels as its bytes. The values are encoded by hand: through proton's Data
this costs several times more per message.
"""

from __future__ import annotations

from proton import Data, Message, symbol

from ..peek import section_end

HEADER, DELIVERY_ANNOTATIONS = 0x70, 0x71


def encode_symbol(text: str) -> bytes:
    raw = text.encode()
    return b"\xa3" + bytes([len(raw)]) + raw if len(raw) < 256 else b"\xb3" + len(raw).to_bytes(4, "big") + raw


def encode_string(text: str) -> bytes:
    raw = text.encode()
    return b"\xa1" + bytes([len(raw)]) + raw if len(raw) < 256 else b"\xb1" + len(raw).to_bytes(4, "big") + raw


def encode_long(value: int) -> bytes:
    return b"\x81" + value.to_bytes(8, "big", signed=True)


def encode_map(entries: list[bytes]) -> bytes:
    """A map from already encoded keys and values, alternating."""
    body, count = b"".join(entries), len(entries)
    if len(body) + 1 < 256 and count < 256:
        return b"\xc1" + bytes([len(body) + 1, count]) + body
    return b"\xd1" + (len(body) + 4).to_bytes(4, "big") + count.to_bytes(4, "big") + body


def _end_of(data: bytes, pos: int, code: int) -> int | None:
    """Where the section at `pos` ends if it is one of type `code`; `pos` itself when another section (or
    nothing) is there; None when the bytes cannot be walked."""
    if pos >= len(data):
        return pos
    if data[pos:pos + 2] != b"\x00\x53":
        return None
    if data[pos + 2] != code:
        return pos
    return section_end(data, pos)


def with_delivery_annotations(data: bytes, entries: list[bytes], values: dict) -> bytes:
    """The message with these delivery annotations (`entries`: encoded keys and values) in place of any it had.
    `values` is the same map as Python values, for a message peek cannot walk (decoded and encoded whole)."""
    after_header = _end_of(data, 0, HEADER)
    if after_header is not None:
        after_old = _end_of(data, after_header, DELIVERY_ANNOTATIONS)
        if after_old is not None:
            return data[:after_header] + b"\x00\x53\x71" + encode_map(entries) + data[after_old:]
    message = Message()
    message.decode(data)
    message.instructions = {symbol(k): v for k, v in values.items()}
    return message.encode()


def split_delivery_annotations(data: bytes) -> tuple[dict, bytes]:
    """(delivery annotations as a dict with str keys, the message without them)."""
    after_header = _end_of(data, 0, HEADER)
    after_annotations = _end_of(data, after_header, DELIVERY_ANNOTATIONS) if after_header is not None else None
    if after_annotations is None:
        message = Message()
        message.decode(data)
        annotations = {str(k): v for k, v in (message.instructions or {}).items()}
        message.instructions = None
        return annotations, message.encode()
    if after_annotations == after_header:
        return {}, data
    decoded = Data()
    decoded.decode(data[after_header:after_annotations])
    decoded.rewind()
    decoded.next()
    annotations = {str(k): v for k, v in (getattr(decoded.get_object(), "value", None) or {}).items()}
    return annotations, data[:after_header] + data[after_annotations:]
