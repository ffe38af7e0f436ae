"""A small AMQP 1.0 encoder that can also write what AMQP forbids.

The hostile-frame fuzzer needs bytes no well-behaved library will produce: strings that are not UTF-8, counts
that do not match their contents, mandatory fields left null, the wrong type in a field. So this encoder is
not built on proton; every function returns plain `bytes`, and a caller may put any bytes anywhere.

Types, codes and field orders follow the AMQP 1.0 specification (OASIS, 2012): part 1 (types, encodings),
part 2 (frames, performatives), part 3 (messaging sections, delivery states), part 5 (SASL).
Performative builders take their fields by name; a value is encoded by the field's type unless it is a
`Raw`, whose bytes go in as they are (how a field gets the wrong type, or an invalid string).
Trailing absent fields are left out of the list, as the spec lets an encoder do (part 1 §1.4).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# ---- protocol headers (part 2 §2.2, part 5 §5.3.1) ------------------------------------------------------
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
TLS_HEADER = b"AMQP\x02\x01\x00\x00"

FRAME_AMQP, FRAME_SASL = 0x00, 0x01


@dataclass(frozen=True)
class Raw:
    """Bytes put into a field as they are: an already-encoded value of any (possibly wrong) type."""

    data: bytes


# ---- primitive types (part 1 §1.6) ----------------------------------------------------------------------
def null() -> bytes:
    return b"\x40"


def boolean(v: bool) -> bytes:
    return b"\x41" if v else b"\x42"


def ubyte(v: int) -> bytes:
    return b"\x50" + struct.pack(">B", v)


def ushort(v: int) -> bytes:
    return b"\x60" + struct.pack(">H", v)


def uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v < 256:
        return b"\x52" + struct.pack(">B", v)
    return b"\x70" + struct.pack(">I", v)


def ulong(v: int) -> bytes:
    if v == 0:
        return b"\x44"
    if v < 256:
        return b"\x53" + struct.pack(">B", v)
    return b"\x80" + struct.pack(">Q", v)


def int_(v: int) -> bytes:
    if -128 <= v <= 127:
        return b"\x54" + struct.pack(">b", v)
    return b"\x71" + struct.pack(">i", v)


def long(v: int) -> bytes:
    if -128 <= v <= 127:
        return b"\x55" + struct.pack(">b", v)
    return b"\x81" + struct.pack(">q", v)


def _variable(small: int, large: int, data: bytes, wide: bool) -> bytes:
    if not wide and len(data) < 256:
        return bytes([small, len(data)]) + data
    return bytes([large]) + struct.pack(">I", len(data)) + data


def string(v: str | bytes, wide: bool = False) -> bytes:
    """str8-utf8 / str32-utf8. Bytes are written as they are, so invalid UTF-8 can be sent."""
    return _variable(0xA1, 0xB1, v.encode("utf-8") if isinstance(v, str) else v, wide)


def symbol(v: str | bytes, wide: bool = False) -> bytes:
    return _variable(0xA3, 0xB3, v.encode("ascii") if isinstance(v, str) else v, wide)


def binary(v: bytes, wide: bool = False) -> bytes:
    return _variable(0xA0, 0xB0, v, wide)


def list_(items: list[bytes], *, wide: bool = False, count: int | None = None) -> bytes:
    """list0 when empty, else list8/list32 of already-encoded items. `count` overrides the element count
    (a lie about the contents: how a huge or short count is sent)."""
    body = b"".join(items)
    n = len(items) if count is None else count
    if not items and count is None and not wide:
        return b"\x45"
    if not wide and len(body) + 1 < 256 and n < 256:
        return b"\xc0" + struct.pack(">BB", len(body) + 1, n) + body
    return b"\xd0" + struct.pack(">II", len(body) + 4, n) + body


def map_(pairs: list[tuple[bytes, bytes]], *, wide: bool = False, count: int | None = None) -> bytes:
    body = b"".join(k + v for k, v in pairs)
    n = 2 * len(pairs) if count is None else count
    if not wide and len(body) + 1 < 256 and n < 256:
        return b"\xc1" + struct.pack(">BB", len(body) + 1, n) + body
    return b"\xd1" + struct.pack(">II", len(body) + 4, n) + body


def array(constructor: int, elements: list[bytes], *, wide: bool = False) -> bytes:
    """An array of one constructor; `elements` are encoded *without* their constructor byte."""
    body = bytes([constructor]) + b"".join(elements)
    n = len(elements)
    if not wide and len(body) + 1 < 256 and n < 256:
        return b"\xe0" + struct.pack(">BB", len(body) + 1, n) + body
    return b"\xf0" + struct.pack(">II", len(body) + 4, n) + body


def symbols(names: list[str]) -> bytes:
    """A symbol array (multiple="true" fields); sym8 elements."""
    return array(0xA3, [bytes([len(s)]) + s.encode("ascii") for s in names])


def described(code: int, value: bytes) -> bytes:
    return b"\x00" + ulong(code) + value


# ---- composite types: descriptor code and fields in order -------------------------------------------------
# Each field is (name, encoder of a Python value). `_any` fields take encoded bytes (a nested composite).
def _any(v: bytes) -> bytes:
    return v


def _fields_map(v: dict) -> bytes:
    return map_([(symbol(k), string(x) if isinstance(x, str) else x) for k, x in v.items()])


def _error(v: dict | bytes) -> bytes:
    return v if isinstance(v, bytes) else error(**v)


_SYMS = symbols
COMPOSITES: dict[str, tuple[int, list[tuple[str, object]]]] = {
    # part 2 §2.7 performatives
    "open": (0x10, [("container_id", string), ("hostname", string), ("max_frame_size", uint),
                    ("channel_max", ushort), ("idle_time_out", uint), ("outgoing_locales", _SYMS),
                    ("incoming_locales", _SYMS), ("offered_capabilities", _SYMS),
                    ("desired_capabilities", _SYMS), ("properties", _fields_map)]),
    "begin": (0x11, [("remote_channel", ushort), ("next_outgoing_id", uint), ("incoming_window", uint),
                     ("outgoing_window", uint), ("handle_max", uint), ("offered_capabilities", _SYMS),
                     ("desired_capabilities", _SYMS), ("properties", _fields_map)]),
    "attach": (0x12, [("name", string), ("handle", uint), ("role", boolean), ("snd_settle_mode", ubyte),
                      ("rcv_settle_mode", ubyte), ("source", _any), ("target", _any), ("unsettled", _any),
                      ("incomplete_unsettled", boolean), ("initial_delivery_count", uint),
                      ("max_message_size", ulong), ("offered_capabilities", _SYMS),
                      ("desired_capabilities", _SYMS), ("properties", _fields_map)]),
    "flow": (0x13, [("next_incoming_id", uint), ("incoming_window", uint), ("next_outgoing_id", uint),
                    ("outgoing_window", uint), ("handle", uint), ("delivery_count", uint),
                    ("link_credit", uint), ("available", uint), ("drain", boolean), ("echo", boolean),
                    ("properties", _fields_map)]),
    "transfer": (0x14, [("handle", uint), ("delivery_id", uint), ("delivery_tag", binary),
                        ("message_format", uint), ("settled", boolean), ("more", boolean),
                        ("rcv_settle_mode", ubyte), ("state", _any), ("resume", boolean),
                        ("aborted", boolean), ("batchable", boolean)]),
    "disposition": (0x15, [("role", boolean), ("first", uint), ("last", uint), ("settled", boolean),
                           ("state", _any), ("batchable", boolean)]),
    "detach": (0x16, [("handle", uint), ("closed", boolean), ("error", _error)]),
    "end": (0x17, [("error", _error)]),
    "close": (0x18, [("error", _error)]),
    "error": (0x1D, [("condition", symbol), ("description", string), ("info", _fields_map)]),
    # part 3 §3.4 delivery states, §3.5 source and target
    "received": (0x23, [("section_number", uint), ("section_offset", ulong)]),
    "accepted": (0x24, []),
    "rejected": (0x25, [("error", _error)]),
    "released": (0x26, []),
    "modified": (0x27, [("delivery_failed", boolean), ("undeliverable_here", boolean),
                        ("message_annotations", _any)]),
    "source": (0x28, [("address", string), ("durable", uint), ("expiry_policy", symbol), ("timeout", uint),
                      ("dynamic", boolean), ("dynamic_node_properties", _fields_map),
                      ("distribution_mode", symbol), ("filter", _any), ("default_outcome", _any),
                      ("outcomes", _SYMS), ("capabilities", _SYMS)]),
    "target": (0x29, [("address", string), ("durable", uint), ("expiry_policy", symbol), ("timeout", uint),
                      ("dynamic", boolean), ("dynamic_node_properties", _fields_map),
                      ("capabilities", _SYMS)]),
    # part 5 §5.3.3 SASL frames
    "sasl_mechanisms": (0x40, [("sasl_server_mechanisms", _SYMS)]),
    "sasl_init": (0x41, [("mechanism", symbol), ("initial_response", binary), ("hostname", string)]),
    "sasl_challenge": (0x42, [("challenge", binary)]),
    "sasl_response": (0x43, [("response", binary)]),
    "sasl_outcome": (0x44, [("code", ubyte), ("additional_data", binary)]),
}
PERFORMATIVES = ("open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close")
SASL_FRAMES = ("sasl_mechanisms", "sasl_init", "sasl_challenge", "sasl_response", "sasl_outcome")
# Fields the spec marks mandatory="true"; what the fuzzer leaves null or gives the wrong type.
MANDATORY = {
    "open": ("container_id",), "begin": ("next_outgoing_id", "incoming_window", "outgoing_window"),
    "attach": ("name", "handle", "role"), "flow": ("incoming_window", "next_outgoing_id", "outgoing_window"),
    "transfer": ("handle",), "disposition": ("role", "first"), "detach": ("handle",),
    "error": ("condition",), "sasl_mechanisms": ("sasl_server_mechanisms",), "sasl_init": ("mechanism",),
    "sasl_challenge": ("challenge",), "sasl_response": ("response",), "sasl_outcome": ("code",),
}


def field_names(kind: str) -> list[str]:
    return [name for name, _ in COMPOSITES[kind][1]]


def composite(kind: str, *, wide: bool = False, **values) -> bytes:
    """The described list of `kind` with the given fields (None or missing: null; `Raw`: as is)."""
    code, fields = COMPOSITES[kind]
    unknown = set(values) - {name for name, _ in fields}
    if unknown:
        raise TypeError(f"{kind} has no field(s) {', '.join(sorted(unknown))}")
    items = []
    for name, encode in fields:
        value = values.get(name)
        if isinstance(value, Raw):
            items.append(value.data)
        elif value is None:
            items.append(null())
        else:
            items.append(encode(value))
    while items and items[-1] == null() and not isinstance(values.get(fields[len(items) - 1][0]), Raw):
        items.pop()
    return described(code, list_(items, wide=wide))


def error(condition: str, description: str | None = None, info: dict | None = None) -> bytes:
    return composite("error", condition=condition, description=description, info=info)


# ---- frames (part 2 §2.3) --------------------------------------------------------------------------------
def frame(body: bytes, *, channel: int = 0, type_: int = FRAME_AMQP, doff: int = 2,
          extended: bytes = b"", size: int | None = None) -> bytes:
    """A frame: 4-byte size, doff (in 4-byte words), type, 2-byte type-specific field, extended header,
    body. `size` overrides the size field (a lie), `doff` the data offset."""
    real = 8 + len(extended) + len(body)
    return struct.pack(">IBBH", real if size is None else size, doff, type_, channel) + extended + body


def amqp_frame(kind: str, channel: int = 0, payload: bytes = b"", **fields) -> bytes:
    return frame(composite(kind, **fields) + payload, channel=channel)


def sasl_frame(kind: str, **fields) -> bytes:
    return frame(composite(kind, **fields), type_=FRAME_SASL)


EMPTY_FRAME = frame(b"")  # a heartbeat (part 2 §2.4.5)


# ---- message sections (part 3 §3.2) ----------------------------------------------------------------------
def message(body: bytes | str = "fuzz", properties: dict | None = None) -> bytes:
    """A bare message: an optional application-properties section and an amqp-value body."""
    out = b""
    if properties:
        out += described(0x74, map_([(string(k), string(v) if isinstance(v, str) else v)
                                     for k, v in properties.items()]))
    value = string(body) if isinstance(body, str) else binary(body)
    return out + described(0x77, value)


# ---- reading what a server answers ------------------------------------------------------------------------
def split_frames(data: bytes) -> tuple[list[tuple[int, int, bytes]], bytes]:
    """Protocol headers and whole frames in `data` -> ([(type, channel, body)], leftover bytes). A protocol
    header comes back as type -1 with the 8 header bytes as body."""
    out, i = [], 0
    while i < len(data):
        if data[i:i + 4] == b"AMQP":
            if len(data) - i < 8:
                break
            out.append((-1, 0, data[i:i + 8]))
            i += 8
            continue
        if len(data) - i < 8:
            break
        size, doff, type_, channel = struct.unpack(">IBBH", data[i:i + 8])
        if size < 8 or len(data) - i < size:
            break
        out.append((type_, channel, data[i + max(8, 4 * doff):i + size]))
        i += size
    return out, data[i:]


def descriptor(body: bytes) -> int | None:
    """The numeric descriptor of a frame body (None for an empty body or anything else)."""
    if len(body) < 3 or body[0] != 0x00:
        return None
    if body[1] == 0x53:
        return body[2]
    if body[1] == 0x80 and len(body) >= 10:
        return struct.unpack(">Q", body[2:10])[0]
    if body[1] == 0x44:
        return 0
    return None


def error_condition(body: bytes) -> str | None:
    """The condition symbol of the error in a close/end/detach body, if it carries one: found as the first
    described 0x1d in the body (enough for reading a server's answer; not a general decoder)."""
    mark = body.find(b"\x00\x53\x1d")
    if mark < 0:
        return None
    rest = body[mark + 3:]
    # list8/list32 header, then the first field: the condition symbol (sym8 or sym32)
    start = {0xC0: 3, 0xD0: 9}.get(rest[0] if rest else -1)
    if start is None or len(rest) <= start:
        return None
    ctor = rest[start]
    if ctor == 0xA3 and len(rest) > start + 1:
        n = rest[start + 1]
        return rest[start + 2:start + 2 + n].decode("ascii", "replace")
    if ctor == 0xB3 and len(rest) >= start + 5:
        n = struct.unpack(">I", rest[start + 1:start + 5])[0]
        return rest[start + 5:start + 5 + n].decode("ascii", "replace")
    return None
