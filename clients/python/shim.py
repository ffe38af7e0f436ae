#!/usr/bin/env python3
"""The python-qpid-proton client stack of the interop harness, as a line-protocol shim (harness/drivers.py).

One JSON request per line on stdin, one JSON answer per line on stdout ({"id": N, "ok": ...} or {"id": N,
"error": "..."}). It uses proton's blocking API (proton.utils.BlockingConnection), as an application would, and
carries AMQP values as typed JSON ({"t": "ubyte", "v": "255"}, see clients/README.md) so that a value's AMQP
type survives the trip to the harness. It imports nothing from the harness: it is a client like any other.
"""

from __future__ import annotations

import json
import struct
import sys
import traceback
import uuid

import proton
from proton import (Array, Data, Delivery, Described, Message, byte, char, decimal32, decimal64, decimal128,
                    float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort)
from proton.reactor import AtMostOnce, AtLeastOnce
from proton.utils import BlockingConnection

STACK = "python"
CAPABILITIES = ["types.decimal", "types.described", "types.array", "settle.presettled", "outcome.reject",
                "outcome.release", "outcome.modify"]

_INTS = {"ubyte": ubyte, "ushort": ushort, "uint": uint, "ulong": ulong, "byte": byte, "short": short,
         "int": int32, "long": int}
_ARRAY_CODES = {"null": Data.NULL, "boolean": Data.BOOL, "ubyte": Data.UBYTE, "ushort": Data.USHORT,
                "uint": Data.UINT, "ulong": Data.ULONG, "byte": Data.BYTE, "short": Data.SHORT, "int": Data.INT,
                "long": Data.LONG, "float": Data.FLOAT, "double": Data.DOUBLE, "char": Data.CHAR,
                "timestamp": Data.TIMESTAMP, "uuid": Data.UUID, "binary": Data.BINARY, "string": Data.STRING,
                "symbol": Data.SYMBOL, "list": Data.LIST, "map": Data.MAP}
_CODE_NAMES = {code: name for name, code in _ARRAY_CODES.items()}


def to_amqp(tv: dict):
    """Typed JSON -> the python-qpid-proton value of that AMQP type."""
    t, v = tv["t"], tv.get("v")
    if t == "null":
        return None
    if t == "boolean":
        return bool(v)
    if t in _INTS:
        return _INTS[t](int(v))
    if t == "float":
        return float32(struct.unpack(">f", bytes.fromhex(v))[0])
    if t == "double":
        return struct.unpack(">d", bytes.fromhex(v))[0]
    if t == "decimal32":
        return decimal32(int(v, 16))
    if t == "decimal64":
        return decimal64(int(v, 16))
    if t == "decimal128":
        return decimal128(bytes.fromhex(v))
    if t == "char":
        return char(chr(v))
    if t == "timestamp":
        return timestamp(int(v))
    if t == "uuid":
        return uuid.UUID(hex=v)
    if t == "binary":
        return bytes.fromhex(v)
    if t == "string":
        return str(v)
    if t == "symbol":
        return symbol(v)
    if t == "list":
        return [to_amqp(x) for x in v]
    if t == "map":
        return {to_amqp(k): to_amqp(x) for k, x in v}
    if t == "array":
        return Array(proton.UNDESCRIBED, _ARRAY_CODES[tv["e"]], *(to_amqp(x) for x in v))
    if t == "described":
        return Described(to_amqp(tv["d"]), to_amqp(v))
    raise ValueError(f"unknown type {t!r}")


def from_amqp(obj) -> dict:
    """A decoded python-qpid-proton value -> typed JSON, naming the AMQP type the stack gave it."""
    if obj is None:
        return {"t": "null"}
    if isinstance(obj, bool):
        return {"t": "boolean", "v": obj}
    for name, cls in (("ubyte", ubyte), ("ushort", ushort), ("uint", uint), ("ulong", ulong), ("byte", byte),
                      ("short", short), ("int", int32), ("timestamp", timestamp)):
        if type(obj) is cls:
            return {"t": name, "v": str(int(obj))}
    if type(obj) is decimal32:
        return {"t": "decimal32", "v": f"{int(obj):08x}"}
    if type(obj) is decimal64:
        return {"t": "decimal64", "v": f"{int(obj):016x}"}
    if type(obj) is decimal128:
        return {"t": "decimal128", "v": bytes(obj).hex()}
    if isinstance(obj, int):
        return {"t": "long", "v": str(obj)}
    if type(obj) is float32:
        return {"t": "float", "v": struct.pack(">f", obj).hex()}
    if isinstance(obj, float):
        return {"t": "double", "v": struct.pack(">d", obj).hex()}
    if type(obj) is char:
        return {"t": "char", "v": ord(obj)}
    if isinstance(obj, uuid.UUID):
        return {"t": "uuid", "v": obj.hex}
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"t": "binary", "v": bytes(obj).hex()}
    if isinstance(obj, symbol):
        return {"t": "symbol", "v": str(obj)}
    if isinstance(obj, str):
        return {"t": "string", "v": obj}
    if isinstance(obj, Described):
        return {"t": "described", "d": from_amqp(obj.descriptor), "v": from_amqp(obj.value)}
    if isinstance(obj, Array):
        return {"t": "array", "e": _CODE_NAMES.get(obj.type, str(obj.type)), "v": [from_amqp(x) for x in obj.elements]}
    if isinstance(obj, list):
        return {"t": "list", "v": [from_amqp(x) for x in obj]}
    if isinstance(obj, dict):
        return {"t": "map", "v": [[from_amqp(k), from_amqp(x)] for k, x in obj.items()]}
    raise ValueError(f"cannot name the AMQP type of {type(obj).__name__}")


def encode_message(m: dict) -> Message:
    msg = Message()
    h = m.get("header") or {}
    if "durable" in h:
        msg.durable = h["durable"]
    if "priority" in h:
        msg.priority = h["priority"]
    if "ttl" in h:
        msg.ttl = h["ttl"] / 1000.0  # proton's ttl is in seconds
    p = m.get("properties") or {}
    if "message_id" in p:
        msg.id = to_amqp(p["message_id"])
    if "correlation_id" in p:
        msg.correlation_id = to_amqp(p["correlation_id"])
    for key in ("subject", "reply_to", "group_id", "to"):
        if key in p:
            setattr(msg, "address" if key == "to" else key, p[key])
    if "content_type" in p:
        msg.content_type = symbol(p["content_type"])
    if "creation_time" in p:
        msg.creation_time = p["creation_time"] / 1000.0
    if m.get("annotations"):
        msg.annotations = {symbol(k["v"]): to_amqp(v) for k, v in m["annotations"]}
    if m.get("app_properties"):
        msg.properties = {k["v"]: to_amqp(v) for k, v in m["app_properties"]}
    if "body" in m:
        msg.body = to_amqp(m["body"])
    msg.inferred = False
    return msg


def decode_message(msg: Message) -> dict:
    out: dict = {"header": {"durable": bool(msg.durable), "priority": msg.priority}, "properties": {}}
    if msg.ttl:
        out["header"]["ttl"] = int(round(msg.ttl * 1000))
    p = out["properties"]
    for key, value in (("message_id", msg.id), ("correlation_id", msg.correlation_id)):
        if value is not None:
            # proton hands a ulong id back as a plain int: ulong is the only integer type an id may have
            p[key] = {"t": "ulong", "v": str(value)} if type(value) is int else from_amqp(value)
    for key, value in (("subject", msg.subject), ("reply_to", msg.reply_to), ("group_id", msg.group_id),
                       ("to", msg.address), ("content_type", msg.content_type)):
        if value is not None:
            p[key] = str(value)
    if msg.creation_time:
        p["creation_time"] = int(round(msg.creation_time * 1000))
    if msg.annotations:
        out["annotations"] = [[from_amqp(k), from_amqp(v)] for k, v in msg.annotations.items()]
    if msg.properties:
        out["app_properties"] = [[from_amqp(k), from_amqp(v)] for k, v in msg.properties.items()]
    out["body"] = from_amqp(msg.body)
    return out


_STATES = {Delivery.ACCEPTED: "accepted", Delivery.REJECTED: "rejected", Delivery.RELEASED: "released",
           Delivery.MODIFIED: "modified"}
_SETTLE = {"accept": Delivery.ACCEPTED, "reject": Delivery.REJECTED, "release": Delivery.RELEASED,
           "modify": Delivery.MODIFIED}


class Shim:
    def __init__(self):
        self.conns: dict[str, BlockingConnection] = {}
        self.links: dict[str, object] = {}

    def op_hello(self, req):
        return {"stack": STACK, "version": proton.VERSION if hasattr(proton, "VERSION") else "",
                "capabilities": CAPABILITIES}

    def op_connect(self, req):
        self.conns[req["conn"]] = BlockingConnection(req["url"], timeout=req.get("timeout", 10))
        return {}

    def op_sender(self, req):
        conn = self.conns[req["conn"]]
        options = AtMostOnce() if req.get("settle") == "presettled" else AtLeastOnce()
        self.links[req["link"]] = conn.create_sender(req["address"], name=req["link"], options=options)
        return {}

    def op_receiver(self, req):
        conn = self.conns[req["conn"]]
        self.links[req["link"]] = conn.create_receiver(req["address"], name=req["link"], credit=req.get("credit", 10))
        return {}

    def op_send(self, req):
        snd = self.links[req["link"]]
        outcomes = []
        for m in req["messages"]:
            dlv = snd.send(encode_message(m), timeout=req.get("timeout", 10), error_states=[])
            outcomes.append(_STATES.get(dlv.remote_state, "settled" if dlv.remote_state in (None, 0) else
                                        str(dlv.remote_state)))
        return {"outcomes": outcomes}

    def op_receive(self, req):
        rcv = self.links[req["link"]]
        got = []
        for _ in range(req["count"]):
            got.append(decode_message(rcv.receive(timeout=req.get("timeout", 10))))
        return {"messages": got}

    def op_settle(self, req):
        rcv = self.links[req["link"]]
        state = _SETTLE[req.get("outcome", "accept")]
        n = req.get("count") or len(rcv.fetcher.unsettled)
        for _ in range(n):
            rcv.settle(state)
        return {"settled": n}

    def op_detach(self, req):
        self.links.pop(req["link"]).close()
        return {}

    def op_close(self, req):
        self.conns.pop(req["conn"]).close()
        return {}


def main() -> int:
    shim = Shim()
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        req = {}
        try:
            req = json.loads(line)
            if req.get("op") == "exit":
                out.write(json.dumps({"id": req.get("id"), "ok": {}}) + "\n")
                out.flush()
                return 0
            answer = {"id": req.get("id"), "ok": getattr(shim, "op_" + req["op"])(req)}
        except Exception as exc:  # every failure is an answer, never a dead shim
            answer = {"id": req.get("id"), "error": f"{type(exc).__name__}: {exc}".strip(),
                      "trace": traceback.format_exc(limit=3)}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
