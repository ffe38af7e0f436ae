#!/usr/bin/env python3
"""The python-qpid-proton client stack of the interop harness, as a line-protocol shim (harness/drivers.py).

One JSON request per line on stdin, one JSON answer per line on stdout ({"id": N, "ok": ...} or {"id": N,
"error": "..."}). It runs proton's Container on a thread with a MessagingHandler, as an application would, and
carries AMQP values as typed JSON ({"t": "ubyte", "v": "255"}, see clients/README.md) so that a value's AMQP
type survives the trip to the harness. It imports nothing from the harness: it is a client like any other.
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import traceback
import uuid

import proton
from proton import (Array, Data, Delivery, Described, Message, byte, char, decimal32, decimal64, decimal128,
                    float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort)
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, AtLeastOnce, AtMostOnce, Container, EventInjector

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


class Shim(MessagingHandler):
    """proton's Container on its own thread, as an application with one event loop runs it; requests reach it
    through an EventInjector and wait for their result on a condition, each with its deadline."""

    def __init__(self):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.cond = threading.Condition()
        self.conns: dict[str, dict] = {}
        self.links: dict[str, dict] = {}
        self.container = Container(self)
        self.container.container_id = "interop-python-shim"
        self.injector = EventInjector()
        self.container.selectable(self.injector)
        threading.Thread(target=self.container.run, daemon=True).start()

    # -- on the container thread --
    def on_client_call(self, event):
        event.subject()

    def _conn(self, event):
        return self.conns.get(getattr(event.connection, "shim_name", None))

    def _link(self, link):
        return self.links.get(link.name) if link is not None else None

    def on_connection_opened(self, event):
        with self.cond:
            if (c := self._conn(event)) is not None:
                c["open"] = True
            self.cond.notify_all()

    def on_connection_error(self, event):
        self._conn_closed(event, str(event.connection.remote_condition))

    def on_connection_closed(self, event):
        self._conn_closed(event, None)

    def on_transport_error(self, event):
        self._conn_closed(event, str(event.transport.condition))

    def _conn_closed(self, event, error):
        with self.cond:
            if (c := self._conn(event)) is not None:
                c["closed"], c["error"] = True, error
                self._links_lost(c, error or "the connection closed")
            self.cond.notify_all()

    def on_session_remote_close(self, event):
        # A peer that ends the session (RabbitMQ does, on an error) ends its links with it, without a detach.
        with self.cond:
            if (c := self._conn(event)) is not None:
                self._links_lost(c, f"the peer ended the session: {event.session.remote_condition}")
            self.cond.notify_all()

    def _links_lost(self, c, error):
        for st in self.links.values():
            if st.get("conn") is c and not st["closed"]:
                st["closed"], st["error"] = True, error

    def on_link_opened(self, event):
        with self.cond:
            if (st := self._link(event.link)) is not None:
                st["open"] = True
            self.cond.notify_all()

    def on_link_error(self, event):
        self._link_closed(event, str(event.link.remote_condition))

    def on_link_closed(self, event):
        self._link_closed(event, None)

    def _link_closed(self, event, error):
        with self.cond:
            if (st := self._link(event.link)) is not None:
                st["closed"], st["error"] = True, error or st.get("error")
            self.cond.notify_all()

    def on_sendable(self, event):
        if (st := self._link(event.sender)) is not None:
            self._pump(st)

    def _pump(self, st):
        snd = st["link"]
        with self.cond:
            while st["pending"] and snd.credit > 0:
                index, msg = st["pending"].pop(0)
                dlv = snd.send(msg)
                if st["presettled"]:
                    st["outcomes"][index] = "settled"
                else:
                    st["trackers"][dlv.tag] = index
            self.cond.notify_all()

    def _outcome(self, event, what):
        st = self._link(event.link)
        with self.cond:
            if st is not None and (index := st["trackers"].pop(event.delivery.tag, None)) is not None:
                if not st["outcomes"][index]:
                    st["outcomes"][index] = what
            self.cond.notify_all()

    def on_accepted(self, event):
        self._outcome(event, "accepted")

    def on_rejected(self, event):
        self._outcome(event, "rejected")

    def on_released(self, event):
        self._outcome(event, "modified" if event.delivery.remote_state == Delivery.MODIFIED else "released")

    def on_settled(self, event):
        self._outcome(event, "settled")

    def on_message(self, event):
        st = self._link(event.link)
        try:
            decoded = decode_message(event.message)
        except Exception as exc:  # reported by the receive that takes it
            decoded = {"error": f"decode: {type(exc).__name__}: {exc}"}
        if st is None:
            return
        if st["auto"]:
            event.delivery.update(Delivery.ACCEPTED)
            event.delivery.settle()
            event.link.flow(1)
        # A delivery the receiver need not settle is not kept: its proton object must not be touched, nor its
        # last reference dropped, on the request thread (a receive of presettled messages once died with
        # "double free or corruption" in a make test)
        keep = None if st["auto"] or event.delivery.settled else event.delivery
        with self.cond:
            st["incoming"].append((keep, decoded))
            self.cond.notify_all()

    # -- on the request thread --
    def call(self, fn):
        self.injector.trigger(ApplicationEvent("client_call", subject=fn))

    def wait(self, req, what, pred):
        with self.cond:
            if not self.cond.wait_for(pred, req.get("timeout", 10)):
                raise TimeoutError(f"{what}: no result within {req.get('timeout', 10)}s")

    def op_hello(self, req):
        return {"stack": STACK, "version": ".".join(map(str, proton.VERSION)), "capabilities": CAPABILITIES}

    def op_connect(self, req):
        c = {"open": False, "closed": False, "error": None, "conn": None}
        self.conns[req["conn"]] = c

        def do():
            # A container-id per connection: ActiveMQ Classic refuses a second connection with one it has.
            c["conn"] = self.container.connect(req["url"], reconnect=False,
                                               container_id=f"interop-python-shim-{uuid.uuid4().hex[:8]}")
            c["conn"].shim_name = req["conn"]  # proton's wrappers keep python attributes; identity they do not
        self.call(do)
        self.wait(req, "connect", lambda: c["open"] or c["closed"])
        if not c["open"]:
            raise ConnectionError(f"connect: {c['error'] or 'refused'}")
        return {}

    def _attach(self, req, sender):
        conn = self.conns[req["conn"]]
        st = {"open": False, "closed": False, "error": None, "presettled": req.get("settle") == "presettled",
              "pending": [], "trackers": {}, "outcomes": [], "incoming": [], "unsettled": [],
              "auto": req.get("settle") == "auto", "conn": conn}
        self.links[req["link"]] = st

        def do():
            if sender:
                options = AtMostOnce() if st["presettled"] else AtLeastOnce()
                st["link"] = self.container.create_sender(conn["conn"], req["address"], name=req["link"],
                                                          options=options)
            else:
                st["link"] = self.container.create_receiver(conn["conn"], req["address"], name=req["link"])
                st["link"].flow(req.get("credit", 10))
        self.call(do)
        self.wait(req, "attach", lambda: st["open"] or st["closed"])
        if not st["open"]:
            raise ConnectionError(f"attach refused: {st['error']}")
        return {}

    def op_sender(self, req):
        return self._attach(req, True)

    def op_receiver(self, req):
        return self._attach(req, False)

    def op_send(self, req):
        st = self.links[req["link"]]
        msgs = [encode_message(m) for m in req["messages"]]
        with self.cond:
            st["outcomes"] = [""] * len(msgs)
            st["pending"].extend(enumerate(msgs))
        self.call(lambda: self._pump(st))
        self.wait(req, "send", lambda: st["closed"] or all(st["outcomes"]))
        if not all(st["outcomes"]):
            raise ConnectionError(f"send: the link closed: {st['error']}")
        return {"outcomes": list(st["outcomes"])}

    def op_receive(self, req):
        st = self.links[req["link"]]
        n = req["count"]
        self.wait(req, "receive", lambda: len(st["incoming"]) >= n or st["closed"])
        with self.cond:
            if len(st["incoming"]) < n:
                raise ConnectionError(f"receive: the link closed: {st['error']}")
            got, st["incoming"] = st["incoming"][:n], st["incoming"][n:]
        for _, decoded in got:
            if "error" in decoded:
                raise ValueError(decoded["error"])
        if not st["auto"]:
            st["unsettled"].extend(dlv for dlv, _ in got if dlv is not None)
        return {"messages": [decoded for _, decoded in got]}

    def op_flow(self, req):
        st = self.links[req["link"]]
        self.call(lambda: st["link"].flow(req["credit"]))
        return {}

    def op_settle(self, req):
        st = self.links[req["link"]]
        n = req.get("count") or len(st["unsettled"])
        taken, st["unsettled"] = st["unsettled"][:n], st["unsettled"][n:]
        outcome = req.get("outcome", "accept")

        def do():
            for dlv in taken:
                if outcome == "modify":
                    dlv.local.failed = True
                dlv.update({"accept": Delivery.ACCEPTED, "reject": Delivery.REJECTED, "release": Delivery.RELEASED,
                            "modify": Delivery.MODIFIED}[outcome])
                dlv.settle()
        self.call(do)
        return {"settled": len(taken)}

    def op_detach(self, req):
        st = self.links[req["link"]]
        self.call(lambda: st["link"].close())
        self.wait(req, "detach", lambda: st["closed"])
        del self.links[req["link"]]
        return {}

    def op_close(self, req):
        c = self.conns[req["conn"]]
        self.call(lambda: c["conn"].close())
        self.wait(req, "close", lambda: c["closed"])
        del self.conns[req["conn"]]
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
