"""The type table of the type interop suite: every AMQP 1.0 primitive type and its edge values, compound and
described values, in the typed JSON the client shims speak ({"t": TYPE, "v": VALUE}, clients/README.md).

Integers travel as decimal text, floats as the hex of their IEEE 754 bits (so -0.0 and the infinities are exact),
decimals, uuids and binaries as hex, char as its code point, timestamps as milliseconds (text).
"""

from __future__ import annotations

import math
import struct

KIB = 1024


def tv(t: str, v=None) -> dict:
    return {"t": t} if v is None and t == "null" else {"t": t, "v": v}


def n(t: str, value: int) -> dict:
    return {"t": t, "v": str(value)}


def f32(value: float) -> dict:
    return {"t": "float", "v": struct.pack(">f", value).hex()}


def f64(value: float) -> dict:
    return {"t": "double", "v": struct.pack(">d", value).hex()}


def s(text: str) -> dict:
    return {"t": "string", "v": text}


def sym(text: str) -> dict:
    return {"t": "symbol", "v": text}


def lst(*items: dict) -> dict:
    return {"t": "list", "v": list(items)}


def mp(*pairs: tuple[dict, dict]) -> dict:
    return {"t": "map", "v": [list(p) for p in pairs]}


def arr(element: str, *items: dict) -> dict:
    return {"t": "array", "e": element, "v": list(items)}


def described(descriptor: dict, value: dict) -> dict:
    return {"t": "described", "d": descriptor, "v": value}


def binary(size: int) -> dict:
    return {"t": "binary", "v": bytes(i % 251 for i in range(size)).hex()}


# family -> [(value name, typed value)]. Names are what a failure message shows.
FAMILIES: dict[str, list[tuple[str, dict]]] = {
    "null-boolean": [("null", tv("null")), ("true", tv("boolean", True)), ("false", tv("boolean", False))],
    "unsigned": [
        ("ubyte 0", n("ubyte", 0)), ("ubyte max", n("ubyte", 255)),
        ("ushort 0", n("ushort", 0)), ("ushort max", n("ushort", 65535)),
        ("uint 0", n("uint", 0)), ("uint 255", n("uint", 255)), ("uint 256", n("uint", 256)),
        ("uint max", n("uint", 2**32 - 1)),
        ("ulong 0", n("ulong", 0)), ("ulong 255", n("ulong", 255)), ("ulong 2^53+1", n("ulong", 2**53 + 1)),
        ("ulong max", n("ulong", 2**64 - 1)),
    ],
    "signed": [
        ("byte min", n("byte", -128)), ("byte max", n("byte", 127)),
        ("short min", n("short", -32768)), ("short max", n("short", 32767)),
        ("int min", n("int", -2**31)), ("int -128", n("int", -128)), ("int 127", n("int", 127)),
        ("int max", n("int", 2**31 - 1)),
        ("long min", n("long", -2**63)), ("long -128", n("long", -128)), ("long 127", n("long", 127)),
        ("long -(2^53+1)", n("long", -(2**53 + 1))), ("long max", n("long", 2**63 - 1)),
    ],
    "floating": [
        ("float 0.0", f32(0.0)), ("float -0.0", f32(-0.0)), ("float 1.5", f32(1.5)),
        ("float max", f32(3.4028234663852886e38)), ("float min subnormal", {"t": "float", "v": "00000001"}),
        ("float +inf", f32(math.inf)), ("float -inf", f32(-math.inf)), ("float NaN", {"t": "float", "v": "7fc00000"}),
        ("double 0.0", f64(0.0)), ("double -0.0", f64(-0.0)), ("double pi", f64(math.pi)),
        ("double max", f64(1.7976931348623157e308)), ("double min subnormal", {"t": "double", "v": "0000000000000001"}),
        ("double +inf", f64(math.inf)), ("double -inf", f64(-math.inf)),
        ("double NaN", {"t": "double", "v": "7ff8000000000000"}),
    ],
    "decimal": [
        ("decimal32", {"t": "decimal32", "v": "2210000f"}),
        ("decimal64", {"t": "decimal64", "v": "2238000000000123"}),
        ("decimal128", {"t": "decimal128", "v": "22080000000000000000000000000456"}),
    ],
    "char-timestamp-uuid": [
        ("char A", {"t": "char", "v": 0x41}), ("char e-acute", {"t": "char", "v": 0xE9}),
        ("char non-BMP", {"t": "char", "v": 0x1F600}), ("char max", {"t": "char", "v": 0x10FFFF}),
        ("timestamp 0", n("timestamp", 0)), ("timestamp 2023", n("timestamp", 1700000000123)),
        ("timestamp before 1970", n("timestamp", -86400000)),
        ("timestamp max", n("timestamp", 2**63 - 1)),
        ("uuid", {"t": "uuid", "v": "f81d4fae7dec11d0a76500a0c91e6bf6"}),
        ("uuid zero", {"t": "uuid", "v": "0" * 32}),
    ],
    "binary": [("binary 0 B", binary(0)), ("binary 1 B", binary(1)), ("binary 256 B", binary(256)),
               ("binary 64 KiB", binary(64 * KIB)), ("binary 100 KiB", binary(100 * KIB))],
    "string-symbol": [
        ("string empty", s("")), ("string ascii", s("hello")),
        ("string non-BMP", s("caf\u00e9 \u20ac \U0001F600 \U0001D11E \u4e2d\u6587")),
        ("string 300 chars", s("x" * 299 + "\u00e9")), ("string NUL", s("a\u0000b")),
        ("symbol empty", sym("")), ("symbol", sym("amqp:type-interop")), ("symbol 300 chars", sym("s" * 300)),
    ],
    "compound": [
        ("list empty", lst()),
        ("list mixed", lst(n("ubyte", 1), s("two"), f64(3.0), tv("null"), tv("boolean", True), sym("six"))),
        ("list nested", lst(lst(lst(n("int", 1))), lst(), mp((s("k"), lst(n("long", -1)))))),
        ("map empty", mp()),
        ("map mixed keys", mp((s("s"), n("int", 1)), (sym("y"), s("v")), (n("ulong", 7), tv("null")),
                              (n("int", -7), binary(3)))),
        ("map nested", mp((s("inner"), mp((s("deeper"), mp((s("x"), lst(n("short", 2))))))))),
        ("array int", arr("int", n("int", 1), n("int", -2), n("int", 2**31 - 1))),
        ("array empty", arr("int")),
        ("array string", arr("string", s("a"), s("\U0001F600"), s(""))),
        ("array symbol", arr("symbol", sym("a"), sym("b"))),
        ("array ulong", arr("ulong", n("ulong", 0), n("ulong", 2**64 - 1))),
        ("array double", arr("double", f64(1.0), f64(-0.0))),
        ("array boolean", arr("boolean", tv("boolean", True), tv("boolean", False))),
    ],
    "described": [
        ("described symbol:string", described(sym("org.example:greeting"), s("hi"))),
        ("described ulong:list", described(n("ulong", 0x0000468C00000001), lst(n("int", 1), s("x")))),
        ("described in a list", lst(described(sym("x:y"), n("uint", 5)), s("after"))),
        ("described in a map", mp((s("k"), described(n("ulong", 77), mp((s("a"), n("byte", 1))))))),
        ("described null", described(sym("x:null"), tv("null"))),
    ],
}

# AMQP 1.0 §3.2.5: application-properties values are of simple types only: no map, list or array (and a
# described value is not simple either). Message annotations take any value (§3.2.3).
NOT_SIMPLE = {"list", "map", "array", "described"}
SECTIONS = ("body", "application-properties", "message-annotations")


def values_for(family: str, section: str) -> list[tuple[str, dict]]:
    values = FAMILIES[family]
    if section == "application-properties":
        return [(name, v) for name, v in values if v["t"] not in NOT_SIMPLE]
    return values


# The header and properties fields (AMQP 1.0 §3.2.1, §3.2.4), one message each, and the message-id and
# correlation-id types §3.2.11-3.2.14 allow.
HEADER_PROPERTIES: list[tuple[str, dict]] = [
    ("durable, priority 9, ttl, string fields, ulong ids", {
        "header": {"durable": True, "priority": 9, "ttl": 3_600_000},
        "properties": {"message_id": n("ulong", 2**64 - 1), "correlation_id": n("ulong", 0),
                       "subject": "sujet \u00e9\U0001F600", "reply_to": "reply.here", "content_type": "text/plain",
                       "group_id": "group-\u00e9", "creation_time": 1700000000123}}),
    ("not durable, priority 0, uuid ids", {
        "header": {"durable": False, "priority": 0},
        "properties": {"message_id": {"t": "uuid", "v": "f81d4fae7dec11d0a76500a0c91e6bf6"},
                       "correlation_id": {"t": "uuid", "v": "0123456789abcdef0123456789abcdef"}}}),
    ("binary ids", {
        "header": {"priority": 4},
        "properties": {"message_id": {"t": "binary", "v": "00ff10"}, "correlation_id": {"t": "binary", "v": ""}}}),
    ("string ids", {
        "header": {"priority": 4},
        "properties": {"message_id": s("id-\U0001F600"), "correlation_id": s("corr-\u00e9")}}),
]


def is_nan(value: dict) -> bool:
    if value.get("t") == "float":
        return math.isnan(struct.unpack(">f", bytes.fromhex(value["v"]))[0])
    if value.get("t") == "double":
        return math.isnan(struct.unpack(">d", bytes.fromhex(value["v"]))[0])
    return False


def same(sent: dict | None, got: dict | None) -> bool:
    """Equal in AMQP type and value. A NaN equals any NaN (§1.6.11 leaves its payload open); a map equals a
    map with the same pairs in any order (a map's order carries no meaning)."""
    if sent is None or got is None:
        return sent is got
    if sent.get("t") != got.get("t"):
        return False
    t = sent["t"]
    if t in ("float", "double"):
        return (is_nan(sent) and is_nan(got)) or sent["v"].lower() == got["v"].lower()
    if t == "list":
        return len(sent["v"]) == len(got["v"]) and all(same(a, b) for a, b in zip(sent["v"], got["v"], strict=True))
    if t == "array":
        return (sent.get("e") == got.get("e") and len(sent["v"]) == len(got["v"])
                and all(same(a, b) for a, b in zip(sent["v"], got["v"], strict=True)))
    if t == "map":
        left = list(got["v"])
        for k, v in sent["v"]:
            match = next((i for i, (k2, v2) in enumerate(left) if same(k, k2) and same(v, v2)), None)
            if match is None:
                return False
            left.pop(match)
        return not left
    if t == "described":
        return same(sent["d"], got["d"]) and same(sent["v"], got["v"])
    if t in ("binary", "uuid", "decimal32", "decimal64", "decimal128"):
        return str(sent["v"]).lower() == str(got["v"]).lower()
    return sent.get("v") == got.get("v")


def show(value, limit: int = 120) -> str:
    """A short text of a typed value for a failure message and a record."""
    if value is None:
        return "(absent)"
    text = _show(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _show(value) -> str:
    if not isinstance(value, dict):
        return repr(value)
    t = value.get("t")
    if t == "null":
        return "null"
    if t in ("list",):
        return "list[" + ", ".join(_show(x) for x in value["v"]) + "]"
    if t == "array":
        return f"array<{value.get('e')}>[" + ", ".join(_show(x) for x in value["v"]) + "]"
    if t == "map":
        return "map{" + ", ".join(f"{_show(k)}: {_show(v)}" for k, v in value["v"]) + "}"
    if t == "described":
        return f"described({_show(value['d'])}, {_show(value['v'])})"
    if t == "binary":
        return f"binary({len(value['v']) // 2} B, {value['v'][:16]})"
    return f"{t}({value.get('v')!r})"
