"""The AMQP JMS mapping through routers and brokers (issue 37): what a JMS application's messages become on the wire,
and what AMQP messages become for a JMS application, with Qpid JMS as the JMS side (clients/jms).

JMS -> AMQP: each JMS message type, header and property type is sent by the JMS stack through the peer; a proton
receiver checks the body section, the x-opt-jms-msg-type / x-opt-jms-dest / x-opt-jms-reply-to annotations, the
header and properties fields and the application-properties types the mapping gives it. AMQP -> JMS: messages made
section by section with proton go through the peer to a JMS consumer, which reports the JMS class, headers and
property Java types it sees. The sources are the OASIS "AMQP JMS Mapping" working draft and Qpid JMS's
interoperability notes (catalog: JMS-MAP-*). One case per (peer, direction, item); each direction's messages go
over one link, once per peer and session (jms_exchange.py).
"""

from __future__ import annotations

import uuid

import proton
import pytest

from harness.drivers import ClientStackUnavailable

from .conftest import VIAS
from .jms_exchange import AmqpToJms, JmsToAmqp, NullBodyMessage, amqp_to_jms, annotated, jms_to_amqp
from .values import f32, f64, n, s

MSG_TYPE, DEST, REPLY_TYPE = "x-opt-jms-msg-type", "x-opt-jms-dest", "x-opt-jms-reply-to"
TTL_MS = 60_000
CLOCK_SLACK_MS = 5_000  # the JVM's clock and this process's clock are one machine's; allow for scheduling only
SERIALIZED_MAGIC = "aced0005"  # java.io.ObjectOutputStream's stream header


def text(body: str = "jms", **fields) -> dict:
    return {"type": "text", "body": s(body), **fields}


# ---- JMS -> AMQP: item -> (the JMS message, what the AMQP side must see, clauses) -----------------------------------
# An expectation maps a field of jms_exchange.amqp_view to its value; "annotations" to a subset of them; a callable
# judges the field with the exchange at hand (times, ids).

def _within_ttl(view, ex) -> str | None:
    ttl, created, expiry = view["ttl_ms"], view["creation_time_ms"], view["absolute_expiry_time_ms"]
    if ttl is None or not TTL_MS - CLOCK_SLACK_MS <= ttl <= TTL_MS:
        return f"header ttl {ttl} ms, expected {TTL_MS} (less only what the peer held it)"
    if created is None or expiry is None or expiry - created != TTL_MS:
        return f"absolute-expiry-time {expiry} - creation-time {created} should be the JMS time to live {TTL_MS} ms"
    return None


def _message_id(view, ex) -> str | None:
    jms_id = ex.message_ids.get("message-id", "")
    kind, wire = view["message_id"]
    # JMSMessageID is "ID:" and the message-id's string form; a string that already begins "ID:" is not prefixed again
    if kind != "string" or not jms_id.startswith("ID:") or jms_id.removeprefix("ID:") != wire.removeprefix("ID:"):
        return (f"message-id {[kind, wire]} for JMSMessageID {jms_id!r}: expected the string "
                f"{jms_id.removeprefix('ID:')!r}")
    return None


def _serialized(view, ex) -> str | None:
    kind, value = view["body"]
    if kind != "binary" or not value.startswith(SERIALIZED_MAGIC):
        return f"body {view['body']}: expected Java serialization bytes ({SERIALIZED_MAGIC}...)"
    return None


def _creation_time(view, ex) -> str | None:
    created = view["creation_time_ms"]
    if created is None or not ex.sent_at_ms - CLOCK_SLACK_MS <= created <= ex.sent_at_ms + 20_000 + CLOCK_SLACK_MS:
        return f"creation-time {created} ms, expected the JMSTimestamp of a send at about {ex.sent_at_ms} ms"
    return None


FORWARD = {
    # message types (body section, x-opt-jms-msg-type: 0 Message .. 5 TextMessage)
    "message": ({"type": "message"}, {"section": "amqp-value", "body": ["null", None],
                                      "annotations": {MSG_TYPE: ["byte", 0]}}, ["JMS-MAP-TYPE-1"]),
    "text": (text("héllo wörld ✓"), {"section": "amqp-value", "body": ["string", "héllo wörld ✓"],
                                     "annotations": {MSG_TYPE: ["byte", 5]}}, ["JMS-MAP-TYPE-1"]),
    "text-null": ({"type": "text"}, {"section": "amqp-value", "body": ["null", None],
                                      "annotations": {MSG_TYPE: ["byte", 5]}}, ["JMS-MAP-TYPE-1"]),
    "bytes": ({"type": "bytes", "body": {"t": "binary", "v": "00ff10"}},
              {"section": "data", "body": ["binary", "00ff10"], "content_type": "application/octet-stream",
               "annotations": {MSG_TYPE: ["byte", 3]}}, ["JMS-MAP-TYPE-1"]),
    "map": ({"type": "map", "body": {"t": "map", "v": [[s("b"), {"t": "boolean", "v": True}], [s("i"), n("int", 7)],
                                                        [s("l"), n("long", -(2**40))], [s("d"), f64(1.5)],
                                                        [s("s"), s("x")], [s("bin"), {"t": "binary", "v": "01"}]]}},
            {"section": "amqp-value", "annotations": {MSG_TYPE: ["byte", 2]},
             "body": ["map", [[["string", "b"], ["boolean", True]], [["string", "i"], ["int", 7]],
                              [["string", "l"], ["long", -(2**40)]], [["string", "d"], ["double", 1.5]],
                              [["string", "s"], ["string", "x"]], [["string", "bin"], ["binary", "01"]]]]},
            ["JMS-MAP-TYPE-1"]),
    "stream": ({"type": "stream", "body": {"t": "list", "v": [n("int", 7), s("x"), {"t": "boolean", "v": True},
                                                              {"t": "binary", "v": "01"}, n("short", -2)]}},
               {"section": "amqp-sequence", "annotations": {MSG_TYPE: ["byte", 4]},
                "body": ["list", [["int", 7], ["string", "x"], ["boolean", True], ["binary", "01"], ["short", -2]]]},
               ["JMS-MAP-TYPE-1"]),
    "object": ({"type": "object", "body": s("a serialized java.lang.String")},
               {"section": "data", "content_type": "application/x-java-serialized-object",
                "body": _serialized,
                "annotations": {MSG_TYPE: ["byte", 1]}}, ["JMS-MAP-TYPE-1"]),
    # headers
    "destination": (text(), {"to": lambda view, ex: None if view["to"] == ex.address else
                             f"to {view['to']!r}, expected the producer's queue {ex.address!r}",
                             "annotations": {DEST: ["byte", 0]}}, ["JMS-MAP-DEST-1"]),
    "reply-to-queue": (text(reply_to={"name": "jms.reply.queue", "kind": "queue"}),
                       {"reply_to": "jms.reply.queue", "annotations": {REPLY_TYPE: ["byte", 0]}},
                       ["JMS-MAP-REPLYTO-1"]),
    "reply-to-topic": (text(reply_to={"name": "jms.reply.topic", "kind": "topic"}),
                       {"reply_to": "jms.reply.topic", "annotations": {REPLY_TYPE: ["byte", 1]}},
                       ["JMS-MAP-REPLYTO-1"]),
    "correlation-id-string": (text(correlation_id="corr-αβ-1"), {"correlation_id": ["string", "corr-αβ-1"]},
                              ["JMS-MAP-CORRELATION-1"]),
    "correlation-id-bytes": (text(correlation_id_bytes="0102ff"), {"correlation_id": ["binary", "0102ff"]},
                             ["JMS-MAP-CORRELATION-1"]),
    "priority-7": (text(priority=7), {"priority": 7}, ["JMS-MAP-PRIORITY-1"]),
    "priority-default": (text(), {"priority": 4}, ["JMS-MAP-PRIORITY-1"]),
    "ttl": (text(ttl=TTL_MS), {"ttl_ms": _within_ttl}, ["JMS-MAP-TTL-1"]),
    "no-ttl": (text(), {"ttl_ms": None, "absolute_expiry_time_ms": None}, ["JMS-MAP-TTL-1"]),
    "persistent": (text(delivery_mode="persistent"), {"durable": True}, ["JMS-MAP-DURABLE-1"]),
    "non-persistent": (text(delivery_mode="non_persistent"), {"durable": False}, ["JMS-MAP-DURABLE-1"]),
    "jms-type": (text(jms_type="order.created"), {"subject": "order.created"}, ["JMS-MAP-JMSTYPE-1"]),
    "message-id": (text(), {"message_id": _message_id, "creation_time_ms": _creation_time}, ["JMS-MAP-MESSAGE-ID-1"]),
    # property types
    "properties": (text(properties=[[s("p_boolean"), {"t": "boolean", "v": True}], [s("p_byte"), n("byte", -8)],
                                    [s("p_short"), n("short", -300)], [s("p_int"), n("int", 70000)],
                                    [s("p_long"), n("long", 2**40)], [s("p_float"), f32(1.5)],
                                    [s("p_double"), f64(-2.25)], [s("p_string"), s("ünï")]]),
                   {"app_properties": {"p_boolean": ["boolean", True], "p_byte": ["byte", -8],
                                       "p_short": ["short", -300], "p_int": ["int", 70000],
                                       "p_long": ["long", 2**40], "p_float": ["float", 1.5],
                                       "p_double": ["double", -2.25], "p_string": ["string", "ünï"]}},
                   ["JMS-MAP-PROPERTIES-1"]),
}


# ---- AMQP -> JMS: item -> (a function making the AMQP message, what JMS must see, clauses) -------------------------

def _reverse_items() -> dict:
    uid = uuid.UUID("0123456789abcdef0123456789abcdef")
    props = {"p_boolean": True, "p_byte": proton.byte(-8), "p_short": proton.short(-300),
             "p_int": proton.int32(70000), "p_long": 2**40, "p_float": proton.float32(1.5), "p_double": -2.25,
             "p_string": "ünï"}
    return {
        "amqp-value-string": (lambda: annotated("héllo"), {"class": "TextMessage", "body": ["string", "héllo"]},
                              ["JMS-MAP-RECEIVE-TYPE-1"]),
        "amqp-value-null": (lambda: NullBodyMessage(), {"class": "TextMessage", "body": ["null", None]},
                            ["JMS-MAP-RECEIVE-TYPE-1"]),
        "amqp-value-binary": (lambda: annotated(b"\x00\x01"), {"class": "BytesMessage", "body": ["binary", "0001"]},
                              ["JMS-MAP-RECEIVE-TYPE-1"]),
        "data": (lambda: annotated(b"\x00\x01", "data"), {"class": "BytesMessage", "body": ["binary", "0001"]},
                 ["JMS-MAP-RECEIVE-TYPE-1"]),
        "data-octet-stream": (lambda: annotated(b"\x02", "data", content_type="application/octet-stream"),
                              {"class": "BytesMessage", "body": ["binary", "02"]}, ["JMS-MAP-RECEIVE-TYPE-1"]),
        "data-text-plain": (lambda: annotated("plain ü".encode(), "data", content_type="text/plain;charset=utf-8"),
                            {"class": "TextMessage", "body": ["string", "plain ü"]}, ["JMS-MAP-RECEIVE-TYPE-1"]),
        "amqp-value-map": (lambda: annotated({"a": proton.int32(1)}), {"class": "ObjectMessage"},
                           ["JMS-MAP-RECEIVE-TYPE-1"]),
        "amqp-value-list": (lambda: annotated([proton.int32(1), "x"]), {"class": "ObjectMessage"},
                            ["JMS-MAP-RECEIVE-TYPE-1"]),
        "annotated-message": (lambda: annotated(None, msg_type=0), {"class": "Message"}, ["JMS-MAP-RECEIVE-TYPE-1"]),
        "annotated-text": (lambda: annotated("t", msg_type=5), {"class": "TextMessage", "body": ["string", "t"]},
                           ["JMS-MAP-RECEIVE-TYPE-1"]),
        "annotated-bytes": (lambda: annotated(b"\x03", "data", msg_type=3),
                            {"class": "BytesMessage", "body": ["binary", "03"]}, ["JMS-MAP-RECEIVE-TYPE-1"]),
        "annotated-map": (lambda: annotated({"a": proton.int32(1), "b": "x"}, msg_type=2),
                          {"class": "MapMessage", "body": ["map", [[["string", "a"], ["int", "1"]],
                                                                   [["string", "b"], ["string", "x"]]]]},
                          ["JMS-MAP-RECEIVE-TYPE-1"]),
        "annotated-stream-sequence": (lambda: annotated([proton.int32(1), "x"], "amqp-sequence", msg_type=4),
                                      {"class": "StreamMessage", "body": ["list", [["int", "1"], ["string", "x"]]]},
                                      ["JMS-MAP-RECEIVE-TYPE-1"]),
        "annotated-stream-list": (lambda: annotated([proton.int32(1), "x"], msg_type=4),
                                  {"class": "StreamMessage", "body": ["list", [["int", "1"], ["string", "x"]]]},
                                  ["JMS-MAP-RECEIVE-TYPE-1"]),
        "priority-8": (lambda: annotated("p", priority=8), {"JMSPriority": 8}, ["JMS-MAP-RECEIVE-HEADER-1"]),
        "durable": (lambda: annotated("d", durable=True), {"JMSDeliveryMode": "PERSISTENT"},
                    ["JMS-MAP-RECEIVE-HEADER-1"]),
        "not-durable": (lambda: annotated("d", durable=False), {"JMSDeliveryMode": "NON_PERSISTENT"},
                        ["JMS-MAP-RECEIVE-HEADER-1"]),
        "ttl": (lambda: annotated("t", ttl=TTL_MS / 1000), {"JMSExpiration": _expiration},
                ["JMS-MAP-RECEIVE-HEADER-1"]),
        "no-ttl": (lambda: annotated("t"), {"JMSExpiration": 0}, ["JMS-MAP-RECEIVE-HEADER-1"]),
        "subject": (lambda: annotated("s", subject="order.created"), {"JMSType": "order.created"},
                    ["JMS-MAP-RECEIVE-HEADER-1"]),
        "correlation-id-string": (lambda: annotated("c", correlation_id="corr-1"), {"JMSCorrelationID": "corr-1"},
                                  ["JMS-MAP-RECEIVE-HEADER-1"]),
        "correlation-id-binary": (lambda: annotated("c", correlation_id=b"\x01\x02\xff"),
                                  {"JMSCorrelationIDAsBytes": "0102ff"}, ["JMS-MAP-RECEIVE-HEADER-1"]),
        "correlation-id-uuid": (lambda: annotated("c", correlation_id=uid),
                                {"JMSCorrelationID": f"ID:AMQP_UUID:{uid}"}, ["JMS-MAP-RECEIVE-HEADER-1"]),
        "correlation-id-ulong": (lambda: annotated("c", correlation_id=proton.ulong(42)),
                                 {"JMSCorrelationID": "ID:AMQP_ULONG:42"}, ["JMS-MAP-RECEIVE-HEADER-1"]),
        "message-id-string": (lambda: annotated("m", id="ID:abc-1"), {"JMSMessageID": "ID:abc-1"},
                              ["JMS-MAP-RECEIVE-HEADER-1"]),
        "reply-to-queue": (lambda: _with_annotation(annotated("r", reply_to="jms.reply.queue"), REPLY_TYPE, 0),
                           {"JMSReplyTo": {"kind": "queue", "name": "jms.reply.queue"}}, ["JMS-MAP-RECEIVE-HEADER-1"]),
        "reply-to-topic": (lambda: _with_annotation(annotated("r", reply_to="jms.reply.topic"), REPLY_TYPE, 1),
                           {"JMSReplyTo": {"kind": "topic", "name": "jms.reply.topic"}}, ["JMS-MAP-RECEIVE-HEADER-1"]),
        "properties": (lambda: annotated("p", properties=dict(props)),
                       {"properties": {"p_boolean": ["Boolean", True], "p_byte": ["Byte", "-8"],
                                       "p_short": ["Short", "-300"], "p_int": ["Integer", "70000"],
                                       "p_long": ["Long", str(2**40)], "p_float": ["Float", "3fc00000"],
                                       "p_double": ["Double", "c002000000000000"], "p_string": ["String", "ünï"]}},
                       ["JMS-MAP-RECEIVE-PROPERTIES-1"]),
    }


def _with_annotation(msg, key: str, value: int):
    msg.annotations = {**(msg.annotations or {}), proton.symbol(key): proton.byte(value)}
    return msg


def _expiration(jms, ex) -> str | None:
    expiration = jms["JMSExpiration"]
    low, high = ex.sent_at_ms + TTL_MS - CLOCK_SLACK_MS, ex.sent_at_ms + TTL_MS + 20_000 + CLOCK_SLACK_MS
    if not low <= expiration <= high:
        return f"JMSExpiration {expiration}, expected about {ex.sent_at_ms} + {TTL_MS} ms (the header ttl)"
    return None


REVERSE = _reverse_items()


def _cases():
    for via in VIAS:
        for item, (_, _, clauses) in FORWARD.items():
            yield pytest.param(via, "jms-to-amqp", item, marks=pytest.mark.spec(*clauses),
                               id=f"{via}-jms-to-amqp-{item}")
        for item, (_, _, clauses) in REVERSE.items():
            yield pytest.param(via, "amqp-to-jms", item, marks=pytest.mark.spec(*clauses),
                               id=f"{via}-amqp-to-jms-{item}")


@pytest.fixture(scope="session")
def jms_exchanges():
    return {}


@pytest.fixture
def jms_exchange(topology, stacks, jms_exchanges, interop):
    """`jms_exchange(via, direction)` -> that direction's exchange through the session's router or broker, made
    on first use."""
    def get(via: str, direction: str) -> JmsToAmqp | AmqpToJms:
        key = (via, tuple(sorted(interop.choices.items())), direction)
        if key not in jms_exchanges:
            name, node = VIAS[via]
            peer = topology(name)[node]
            try:
                shim = stacks.get("jms")
            except ClientStackUnavailable as exc:
                pytest.skip(f"client stack unavailable: {exc}")
            logical = f"jms.{direction}.{uuid.uuid4().hex[:10]}"
            address = peer.wire_address(f"interop.{logical}") if via == "broker" else logical
            if direction == "jms-to-amqp":
                jms_exchanges[key] = jms_to_amqp(shim, peer.url, address,
                                                 {item: spec for item, (spec, _, _) in FORWARD.items()})
            else:
                jms_exchanges[key] = amqp_to_jms(shim, peer.url, address,
                                                 {item: make() for item, (make, _, _) in REVERSE.items()})
        return jms_exchanges[key]
    return get


def _differences(view: dict, expected: dict, ex) -> list[str]:
    out = []
    for key, want in expected.items():
        if callable(want):
            if (problem := want(view, ex)) is not None:
                out.append(problem)
        elif key in ("annotations", "app_properties", "properties") and isinstance(want, dict):
            got = view.get(key) or {}
            if isinstance(got, list):  # the JMS view lists properties as [name, value] pairs
                got = {k["v"]: [v.get("java"), v.get("v")] for k, v in got}
            for name, value in want.items():
                if got.get(name) != value:
                    out.append(f"{key} {name}: {got.get(name, '(missing)')}, expected {value}")
        elif view.get(key) != want:
            out.append(f"{key}: {view.get(key)!r}, expected {want!r}")
    return out


def _jms_body(view: dict):
    """The JMS view's body as [type, value] pairs like the AMQP view's (its typed JSON, Java classes left out)."""
    def plain(tv):
        if tv is None:
            return None
        t = tv.get("t")
        if t == "map":
            return ["map", [[plain(k), plain(v)] for k, v in tv["v"]]]
        if t == "list":
            return ["list", [plain(v) for v in tv["v"]]]
        return [t, tv.get("v")]
    return plain(view.get("body"))


@pytest.mark.parametrize("via, direction, item", list(_cases()))
def test_jms_mapping(jms_exchange, via, direction, item, details):
    ex = jms_exchange(via, direction)
    details.update({"via": via, "direction": direction, "item": item, "jms_version": ex.jms_version})
    if ex.error:
        details["error"] = ex.error
        pytest.fail(f"{direction} via {via}: {ex.error}", pytrace=False)
    if direction == "jms-to-amqp":
        _, expected, _ = FORWARD[item]
        view = ex.received.get(item)
        if view is None:
            pytest.fail(f"JMS -> {via} -> AMQP, {item}: not received (the JMS send answered; "
                        f"{len(ex.received)} of {len(FORWARD)} items arrived)", pytrace=False)
    else:
        _, expected, _ = REVERSE[item]
        if ex.outcomes.get(item) != "accepted":
            pytest.fail(f"AMQP -> {via} -> JMS, {item}: the peer answered {ex.outcomes.get(item)}", pytrace=False)
        jms = ex.received.get(item)
        if jms is None:
            pytest.fail(f"AMQP -> {via} -> JMS, {item}: not received ({len(ex.received)} of {len(REVERSE)} items "
                        f"arrived)", pytrace=False)
        view = {**jms, "body": _jms_body(jms)}
    details["received"] = view
    problems = _differences(view, expected, ex)
    details["differences"] = problems
    assert not problems, f"{direction} via {via}, {item}: " + "; ".join(problems)
