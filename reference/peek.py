"""Read the few fields routing needs from an encoded AMQP message without decoding all of it.

Routers and brokers look at a handful of fields per message (header durable/priority/ttl, properties to and
absolute-expiry-time) and pass the rest on as bytes; a broker redelivering a message rewrites its header
(`redelivered`) and leaves every other section's bytes as they came. Building a full proton Message for that
is most of the per-message cost, so this walks the encoded sections (AMQP 1.0 §3.2) and skips what it does not need by
its encoded size. Anything it does not recognise makes it return None, and callers fall back to a full
decode: never guess.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property

_HEADER, _DELIVERY_ANN, _MESSAGE_ANN, _PROPERTIES = 0x70, 0x71, 0x72, 0x73
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")


@dataclass(frozen=True)
class Peek:
    durable: bool = False
    priority: int | None = None
    ttl_ms: int | None = None
    to: str | None = None
    absolute_expiry_ms: int | None = None
    has_message_annotations: bool = False


class _Unknown(Exception):
    pass


def peek(data: bytes) -> Peek | None:
    try:
        return _peek(data)
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        return None


def _peek(data: bytes) -> Peek:
    fields: dict = {}
    pos, end = 0, len(data)
    while pos < end:
        if data[pos] != 0x00 or data[pos + 1] != 0x53:
            raise _Unknown
        code = data[pos + 2]
        pos += 3
        if code == _HEADER:
            values, pos = _list(data, pos, 5)
            fields["durable"] = values[0] is True
            fields["priority"] = values[1]
            fields["ttl_ms"] = values[2]
        elif code == _PROPERTIES:
            values, pos = _list(data, pos, 9)
            fields["to"] = values[2]
            fields["absolute_expiry_ms"] = values[8]
        elif code in (_DELIVERY_ANN, _MESSAGE_ANN):
            fields["has_message_annotations"] = fields.get("has_message_annotations") or code == _MESSAGE_ANN
            pos = _skip(data, pos)
        else:
            break  # application-properties, body, footer: nothing routing needs
    return Peek(**{k: v for k, v in fields.items() if v is not None})


def _list(data: bytes, pos: int, wanted: int) -> tuple[list, int]:
    """The first `wanted` fields of a described list (scalars only; others -> _Unknown), and the end."""
    ctor = data[pos]
    if ctor == 0x45:  # list0
        return [None] * wanted, pos + 1
    if ctor == 0xC0:
        size, count, body = data[pos + 1], data[pos + 2], pos + 3
        after = pos + 2 + size
    elif ctor == 0xD0:
        size, count, body = _U32.unpack_from(data, pos + 1)[0], _U32.unpack_from(data, pos + 5)[0], pos + 9
        after = pos + 5 + size
    else:
        raise _Unknown
    values = []
    for _ in range(min(count, wanted)):
        value, body = _scalar(data, body)
        values.append(value)
    values += [None] * (wanted - len(values))
    return values, after


def _scalar(data: bytes, pos: int):
    """One value (returned when it is a simple scalar, else skipped and returned as a marker)."""
    c = data[pos]
    if c == 0x40:
        return None, pos + 1
    if c == 0x41:
        return True, pos + 1
    if c == 0x42:
        return False, pos + 1
    if c == 0x56:
        return data[pos + 1] != 0, pos + 2
    if c in (0x50, 0x52, 0x53):  # ubyte, smalluint, smallulong
        return data[pos + 1], pos + 2
    if c in (0x43, 0x44):  # uint0, ulong0
        return 0, pos + 1
    if c == 0x70:
        return _U32.unpack_from(data, pos + 1)[0], pos + 5
    if c == 0x80:
        return _U64.unpack_from(data, pos + 1)[0], pos + 9
    if c == 0x83:  # timestamp (ms since epoch)
        return _I64.unpack_from(data, pos + 1)[0], pos + 9
    if c in (0xA1, 0xA3):  # str8, sym8
        n = data[pos + 1]
        return data[pos + 2:pos + 2 + n].decode(), pos + 2 + n
    if c in (0xB1, 0xB3):  # str32, sym32
        n = _U32.unpack_from(data, pos + 1)[0]
        return data[pos + 5:pos + 5 + n].decode(), pos + 5 + n
    return object(), _skip(data, pos)  # present but not a field we read (ids, binary...)


_FIXED_WIDTH = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}  # constructor's high nibble -> value bytes


def _skip(data: bytes, pos: int) -> int:
    """Position after the value at `pos`, from its constructor's width class (AMQP 1.0 §1.2)."""
    c = data[pos]
    if c == 0x00:  # described: descriptor, then value
        return _skip(data, _skip(data, pos + 1))
    width = c >> 4
    if width in _FIXED_WIDTH:
        return pos + 1 + _FIXED_WIDTH[width]
    if width in (0xA, 0xC, 0xE):  # one-byte size
        return pos + 2 + data[pos + 1]
    if width in (0xB, 0xD, 0xF):  # four-byte size
        return pos + 5 + _U32.unpack_from(data, pos + 1)[0]
    raise _Unknown


def section_end(data: bytes, pos: int) -> int | None:
    """Where the section starting at `pos` ends, or None when it cannot be walked."""
    try:
        end = _skip(data, pos)
    except (_Unknown, IndexError, struct.error):
        return None
    return end if end <= len(data) else None


def sections(data: bytes) -> list[tuple[int, int, int]] | None:
    """The message's sections as (descriptor code, start, end) in order, or None when one is not in a form
    this module walks (callers decode)."""
    try:
        out, pos, end = [], 0, len(data)
        while pos < end:
            if data[pos] != 0x00 or data[pos + 1] != 0x53:
                return None
            after = _skip(data, pos)
            if after > end:
                return None
            out.append((data[pos + 2], pos, after))
            pos = after
        return out
    except (_Unknown, IndexError, struct.error):
        return None


@dataclass(frozen=True)
class RoutingView:
    """What a router reads of a message in one walk: `to` and the priority, and where the message-annotations
    section is (`annotations_at`, `annotations_end`), or, when there is none, where one would go
    (`annotations_at` == `annotations_end`: after the header and delivery-annotations, AMQP 1.0 §3.2)."""

    to: str | None
    priority: int | None
    annotations_at: int
    annotations_end: int
    has_annotations: bool  # annotations_end > annotations_at: a field, not a property (asked several times a hop)


def routing_view(data: bytes) -> RoutingView | None:
    """The RoutingView of `data`; None when a section it walks is not in a form this module reads, or `to`
    or the priority is not a string or an integer (callers decode)."""
    try:
        return _routing_view(data)
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        return None


def _routing_view(data: bytes) -> RoutingView:
    # One pass for every routed message, so it stops at the properties: nothing after them is read.
    to = priority = None
    at = stop = None
    pos, end = 0, len(data)
    while pos < end:
        if data[pos] != 0x00 or data[pos + 1] != 0x53:
            raise _Unknown
        code = data[pos + 2]
        if code == _HEADER:
            values, pos = _list(data, pos + 3, 2)
            priority = values[1]
        elif code == _DELIVERY_ANN:
            pos = _skip(data, pos)
        elif code == _MESSAGE_ANN:  # its end from the map's size, without a call (a neighbour's copies have one)
            ctor = data[pos + 3]
            if ctor == _MAP32:
                at, pos = pos, pos + 8 + _U32.unpack_from(data, pos + 4)[0]
            elif ctor == _MAP8:
                at, pos = pos, pos + 5 + data[pos + 4]
            else:
                at, pos = pos, _skip(data, pos)
            stop = pos
        else:
            if at is None:
                at = stop = pos
            if code == _PROPERTIES:
                to = _list(data, pos + 3, 3)[0][2]
            break
    if at is None:  # header and delivery-annotations only (or nothing): a section would go at the end
        at = stop = pos
    if stop > end or not (to is None or to.__class__ is str) or not (priority is None or priority.__class__ is int):
        raise _Unknown
    return RoutingView(to, priority, at, stop, stop > at)


def redelivered(data: bytes, delivery_count: int) -> bytes | None:
    """The message with a header saying `first-acquirer` false and `delivery-count` (AMQP 1.0 §3.2.1), every
    other section's bytes untouched; None when the header is not one this module reads (callers decode).

    A broker must not need to decode a body to redeliver it: a body nested thousands of levels deep once made
    the reference broker's full decode (proton's recursive reader) raise RecursionError on redelivery."""
    try:
        durable, priority, ttl, rest = False, None, None, data
        if data[:3] == b"\x00\x53" + bytes([_HEADER]):
            values, after = _list(data, 3, 5)
            durable, priority, ttl = values[0] is True, values[1], values[2]
            if not (priority is None or isinstance(priority, int)) or not (ttl is None or isinstance(ttl, int)):
                return None
            rest = data[after:]
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        return None
    fields = (b"\x41" if durable else b"\x42") + (b"\x40" if priority is None else bytes([0x50, priority & 0xFF]))
    fields += (b"\x40" if ttl is None else b"\x70" + _U32.pack(ttl & 0xFFFFFFFF))
    fields += b"\x42" + b"\x70" + _U32.pack(delivery_count & 0xFFFFFFFF)  # first-acquirer false, delivery-count
    return b"\x00\x53" + bytes([_HEADER, 0xC0, len(fields) + 1, 5]) + fields + rest


# ---- message annotations: read a few, and splice some in without re-encoding the message -------------------------

_MAP8, _MAP32 = 0xC1, 0xD1
_SYM8, _SYM32, _STR8, _STR32 = 0xA3, 0xB3, 0xA1, 0xB1


def annotations(data: bytes, keys: tuple[str, ...]) -> dict | None:
    """The values of `keys` in the message-annotations section ({} when there is none, a key absent when it is
    not there): strings, and lists of strings. None when a wanted value is of another type or the section is
    not in a form this module walks (callers decode)."""
    try:
        found = {}
        for key_at, value_at, _ in _annotation_entries(data):
            key = _symbol_at(data, key_at)
            if key in keys:
                found[key] = _string_or_list(data, value_at)
        return found
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        return None


def annotation_keys(data: bytes) -> list[str | None] | None:
    """The keys of the message-annotations map, in order ([] when there is none); None when it cannot be
    walked."""
    try:
        return [_symbol_at(data, key_at) for key_at, _, _ in _annotation_entries(data)]
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Annotations:
    """Message annotations encoded once, to be spliced into many messages (`with_annotations`, `replace_section`)."""

    values: dict  # symbol key -> string or list of strings, as given
    entries: bytes  # the encoded map entries
    count: int  # how many entries

    @property
    def keys(self):
        return self.values.keys()

    @cached_property
    def section(self) -> bytes:
        """The whole message-annotations section holding these entries and no others (made once)."""
        return _section(self.entries, self.count)


def encode_annotations(values: dict) -> Annotations:
    """`values`: symbol key -> string or list of strings."""
    entries = b"".join(_symbol(key) + _value(value) for key, value in values.items())
    return Annotations(dict(values), entries, len(values))


def replace_section(data: bytes, view: RoutingView, section: bytes) -> bytes:
    """The message with `section` (a whole message-annotations section) in place of its own, or inserted where
    one goes when it has none; every other byte as it came. The caller knows the old section held nothing it
    must keep."""
    return data[:view.annotations_at] + section + data[view.annotations_end:]


def _section(entries: bytes, count: int) -> bytes:
    return b"\x00\x53\x72" + bytes([_MAP32]) + _U32.pack(len(entries) + 4) + _U32.pack(2 * count) + entries


def with_annotations(data: bytes, values: dict | Annotations, drop: tuple[str, ...] = ()) -> bytes | None:
    """The message with `values` (an Annotations, or symbol key -> string or list of strings) set in its
    message-annotations section and the `drop` keys removed: the other annotations and every other section keep
    their bytes, so a router that adds its annotations does not re-encode the message (AMQP 1.0 §3.2: the
    section goes after the header and delivery-annotations). None when the message is not in a form this
    module walks."""
    added = values if isinstance(values, Annotations) else encode_annotations(values)
    try:
        parts = sections(data)
        if parts is None:
            return None
        replaced = [(start, end) for code, start, end in parts if code == _MESSAGE_ANN]
        kept = []
        if replaced:
            start, end = replaced[0]
            for key_at, _value_at, entry_end in _annotation_entries(data):
                key = _symbol_at(data, key_at)
                if key not in added.keys and key not in drop:
                    kept.append(data[key_at:entry_end])
        else:
            start = end = next((s for code, s, _ in parts if code > _DELIVERY_ANN), len(data))
        section = _section(b"".join(kept) + added.entries, len(kept) + added.count)
        return bytes(data[:start]) + section + bytes(data[end:])
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        return None


def _annotation_entries(data: bytes):
    """(key start, value start, entry end) of each entry of the message-annotations map, if there is one.
    Walks only the sections that may come before it (header, delivery-annotations)."""
    start, end = 0, len(data)
    while start < end:
        if data[start] != 0x00 or data[start + 1] != 0x53:
            raise _Unknown
        code = data[start + 2]
        if code > _MESSAGE_ANN:
            return
        if code != _MESSAGE_ANN:
            start = _skip(data, start)
            continue
        pos = start + 3
        ctor = data[pos]
        if ctor == _MAP8:
            count, pos = data[pos + 2], pos + 3
        elif ctor == _MAP32:
            count, pos = _U32.unpack_from(data, pos + 5)[0], pos + 9
        else:
            raise _Unknown
        for _ in range(count // 2):
            value_at = _skip(data, pos)
            entry_end = _skip(data, value_at)
            yield pos, value_at, entry_end
            pos = entry_end
        return


def _symbol_at(data: bytes, pos: int) -> str | None:
    """A symbol or string key; None for a key of another type (ulong keys are allowed too, §3.2.3)."""
    c = data[pos]
    if c in (_SYM8, _STR8):
        return data[pos + 2:pos + 2 + data[pos + 1]].decode()
    if c in (_SYM32, _STR32):
        n = _U32.unpack_from(data, pos + 1)[0]
        return data[pos + 5:pos + 5 + n].decode()
    return None


def _string_or_list(data: bytes, pos: int):
    c = data[pos]
    if c in (_SYM8, _STR8, _SYM32, _STR32):
        return _symbol_at(data, pos)
    if c == 0x45:
        return []
    if c == 0xC0:
        count, pos = data[pos + 2], pos + 3
    elif c == 0xD0:
        count, pos = _U32.unpack_from(data, pos + 5)[0], pos + 9
    else:
        raise _Unknown
    items = []
    for _ in range(count):
        item = _symbol_at(data, pos)
        if item is None:
            raise _Unknown
        items.append(item)
        pos = _skip(data, pos)
    return items


def _sized(small: int, large: int, raw: bytes) -> bytes:
    if len(raw) < 256:
        return bytes([small, len(raw)]) + raw
    return bytes([large]) + _U32.pack(len(raw)) + raw


def _symbol(name: str) -> bytes:
    return _sized(_SYM8, _SYM32, name.encode())


def _value(value) -> bytes:
    if isinstance(value, str):
        return _sized(_STR8, _STR32, value.encode())
    if isinstance(value, (list, tuple)):
        if not value:
            return b"\x45"
        items = b"".join(_value(str(v)) for v in value)
        if len(items) + 1 < 256 and len(value) < 256:
            return bytes([0xC0, len(items) + 1, len(value)]) + items
        return b"\xd0" + _U32.pack(len(items) + 4) + _U32.pack(len(value)) + items
    raise TypeError(f"annotation values are strings or lists of strings, not {type(value).__name__}")
