"""The exchanges of the JMS mapping cases (test_jms_mapping.py): JMS messages sent by the Qpid JMS stack through a
peer and read by a proton receiver of the suite's own, section by section; and AMQP messages made with proton,
section by section, sent through the peer and read by the JMS stack as a JMS application sees them.

The AMQP side is plain python-qpid-proton (proton.utils' blocking client), not a shim: the mapping is about which
body section a message has (amqp-value, data, amqp-sequence), and proton's `Message.inferred` says that, where the
shims' typed JSON only carries the body's value. Each direction sends all its messages over one link, once per
peer and session; each message carries its item name in an application property (ITEM_KEY), so that a late or
missing one is pinned on its item.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from dataclasses import dataclass, field

import proton
from proton import Message, symbol
from proton.utils import BlockingConnection

from harness.drivers import ClientStackError, StackClient

ITEM_KEY = "interop_item"  # a JMS property name is a Java identifier: no "-"
RECEIVE_TIMEOUT = 20.0  # seconds for all the messages of one exchange (a healthy peer takes milliseconds)

# The proton classes of decoded values -> the AMQP type they stand for (plain int is a long, float a double).
_TYPE_NAMES = [(bool, "boolean"), (proton.byte, "byte"), (proton.short, "short"), (proton.int32, "int"),
               (proton.ubyte, "ubyte"), (proton.ushort, "ushort"), (proton.uint, "uint"), (proton.ulong, "ulong"),
               (proton.timestamp, "timestamp"), (proton.char, "char"), (proton.float32, "float"),
               (proton.symbol, "symbol"), (uuid.UUID, "uuid"), (bytes, "binary"), (memoryview, "binary"),
               (bytearray, "binary"), (str, "string"),
               (int, "long"), (float, "double"), (dict, "map"), (list, "list")]


def amqp_type(value) -> str:
    if value is None:
        return "null"
    for cls, name in _TYPE_NAMES:
        if type(value) is cls:
            return name
    for cls, name in _TYPE_NAMES:
        if isinstance(value, cls):
            return name
    return type(value).__name__


def typed(value):
    """A decoded value as (AMQP type, plain value), for details and comparisons; compounds element by element."""
    kind = amqp_type(value)
    if kind == "map":
        return [kind, [[typed(k), typed(v)] for k, v in value.items()]]
    if kind == "list":
        return [kind, [typed(v) for v in value]]
    if kind == "binary":
        return [kind, bytes(value).hex()]
    if kind in ("uuid", "symbol", "char"):
        return [kind, str(value)]
    if kind in ("float", "double"):
        return [kind, float(value)]
    return [kind, value if kind in ("null", "boolean", "string") else int(value)]


def body_section(msg: Message) -> str:
    """Which body section proton decoded: amqp-value, or (an inferred body) data or amqp-sequence."""
    if not msg.inferred:
        return "amqp-value"
    return "data" if isinstance(msg.body, (bytes, bytearray, memoryview)) else "amqp-sequence"


def amqp_view(msg: Message) -> dict:
    """What the AMQP side received, as plain JSON: sections, annotations and properties with their AMQP types."""
    return {
        "section": body_section(msg),
        "body": typed(msg.body),
        "annotations": {str(k): typed(v) for k, v in (msg.annotations or {}).items()},
        "durable": bool(msg.durable), "priority": int(msg.priority),
        "ttl_ms": int(round(msg.ttl * 1000)) if msg.ttl else None,
        "message_id": typed(msg.id), "correlation_id": typed(msg.correlation_id),
        "to": msg.address, "reply_to": msg.reply_to, "subject": msg.subject,
        "content_type": str(msg.content_type) if msg.content_type else None,
        "creation_time_ms": int(round(msg.creation_time * 1000)) if msg.creation_time else None,
        "absolute_expiry_time_ms": int(round(msg.expiry_time * 1000)) if msg.expiry_time else None,
        "app_properties": {k: typed(v) for k, v in (msg.properties or {}).items() if k != ITEM_KEY},
    }


@dataclass
class JmsToAmqp:
    """JMS sent, the AMQP side received: item -> what was sent (JMS), the send's answer, the AMQP view."""
    address: str
    sent: dict[str, dict] = field(default_factory=dict)
    sent_at_ms: int = 0
    message_ids: dict[str, str] = field(default_factory=dict)
    received: dict[str, dict] = field(default_factory=dict)
    error: str | None = None
    jms_version: str = ""


@dataclass
class AmqpToJms:
    """The AMQP side sent, JMS received: item -> the JMS view (class, headers, properties with Java types)."""
    address: str
    sent_at_ms: int = 0
    received: dict[str, dict] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    jms_version: str = ""


def jms_to_amqp(shim, url: str, address: str, items: dict[str, dict]) -> JmsToAmqp:
    """The proton receiver attaches first (a router gives the JMS producer credit only once a consumer is there);
    the JMS producer sends every item, each waiting for its outcome; the receiver takes what comes."""
    ex = JmsToAmqp(address=address, jms_version=shim.version)
    conn = None
    client = StackClient(shim)
    try:
        conn = BlockingConnection(url, timeout=10)
        rcv = conn.create_receiver(address, credit=len(items) + 5)
        client.connect(url)
        sender = client.sender(address)
        messages = []
        for name, spec in items.items():
            jms = {**spec, "properties": [*spec.get("properties", []),
                                          [{"t": "string", "v": ITEM_KEY}, {"t": "string", "v": name}]]}
            messages.append({"jms": jms})
            ex.sent[name] = spec
        ex.sent_at_ms = int(time.time() * 1000)
        # The send runs beside the receive: through a router the JMS producer's outcome is the receiver's accept,
        # and the JMS stack's send waits for each outcome before the next message.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            sending = pool.submit(shim.request, "send", RECEIVE_TIMEOUT, link=sender.name, messages=messages)
            deadline = time.monotonic() + RECEIVE_TIMEOUT
            while len(ex.received) < len(items) and time.monotonic() < deadline:
                try:
                    msg = rcv.receive(timeout=max(0.1, deadline - time.monotonic()))
                except proton.Timeout:
                    break
                rcv.accept()
                item = (msg.properties or {}).get(ITEM_KEY)
                ex.received[str(item)] = amqp_view(msg)
            # The last accept goes out while the connection is serviced: keep serving it until the send has its
            # outcomes (or its own deadline has passed).
            # Short turns: proton's process() sleeps a whole turn when no frame comes, and the send's end is no frame.
            deadline = time.monotonic() + RECEIVE_TIMEOUT + 5
            while not sending.done() and time.monotonic() < deadline:
                try:
                    conn.wait(sending.done, timeout=0.1, msg="the JMS send's outcomes")
                except proton.Timeout:
                    pass  # not yet: another turn, until the deadline; the send's own answer says what went wrong
            answer = sending.result()
        ex.message_ids = dict(zip(items, answer.get("message_ids", []), strict=False))
    except (ClientStackError, proton.ProtonException, ConnectionError, OSError) as exc:
        ex.error = f"{type(exc).__name__}: {exc} ({len(ex.received)} of {len(items)} received)"
    finally:
        _close(client, conn)
    return ex


def amqp_to_jms(shim, url: str, address: str, items: dict[str, Message]) -> AmqpToJms:
    """The JMS consumer attaches first (auto-acknowledge: it takes each message as it comes); proton sends every
    item and waits for its outcome; the JMS side's view of each is then collected."""
    ex = AmqpToJms(address=address, jms_version=shim.version)
    conn = None
    client = StackClient(shim)
    try:
        client.connect(url)
        receiver = client.receiver(address, settle="auto")
        ex.sent_at_ms = int(time.time() * 1000)
        snd = None
        for name, msg in items.items():
            msg.properties = {**(msg.properties or {}), ITEM_KEY: name}
            # A peer that ends the connection on one message (RabbitMQ's AMQP 1.0 plugin does on some) fails that
            # item alone: the next goes over a new connection.
            try:
                if snd is None:
                    conn = BlockingConnection(url, timeout=10)
                    snd = conn.create_sender(address)
                delivery = snd.send(msg, timeout=10)
                ex.outcomes[name] = _OUTCOMES.get(delivery.remote_state, str(delivery.remote_state))
            except (proton.ProtonException, ConnectionError, OSError) as exc:
                ex.outcomes[name] = f"error ({type(exc).__name__}: {exc})"
                _close(None, conn)
                conn, snd = None, None
        accepted = sum(1 for o in ex.outcomes.values() if o == "accepted")
        deadline = time.monotonic() + RECEIVE_TIMEOUT
        while len(ex.received) < accepted and time.monotonic() < deadline:
            try:
                got = receiver.receive(1, timeout=max(0.1, deadline - time.monotonic()))
            except ClientStackError:
                break
            for m in got:
                props = {k["v"]: v for k, v in m["jms"]["properties"]}
                ex.received[str(props.get(ITEM_KEY, {}).get("v"))] = m["jms"]
    except (ClientStackError, proton.ProtonException, ConnectionError, OSError) as exc:
        ex.error = f"{type(exc).__name__}: {exc}"
    finally:
        _close(client, conn)
    return ex


_OUTCOMES = {proton.Delivery.ACCEPTED: "accepted", proton.Delivery.REJECTED: "rejected",
             proton.Delivery.RELEASED: "released", proton.Delivery.MODIFIED: "modified"}


def _close(client: StackClient | None, conn) -> None:
    try:
        if client is not None:
            client.close(timeout=5.0)
    except ClientStackError:
        pass  # the peer closed it first
    if conn is not None:
        try:
            conn.close()
        except (proton.ProtonException, OSError):
            pass


class NullBodyMessage(Message):
    """A message whose body is an amqp-value section holding null. proton leaves the body section out when the body
    is None; the mapping tells "amqp-value null" and "no body" apart, so this one appends the section itself."""

    AMQP_VALUE_NULL = bytes([0x00, 0x53, 0x77, 0x40])  # described (smallulong 0x77: amqp-value), null

    def encode(self):
        return super().encode() + self.AMQP_VALUE_NULL


def annotated(body, section: str = "amqp-value", msg_type: int | None = None, **fields) -> Message:
    """An AMQP message with the body in the given section (data and amqp-sequence are proton's inferred bodies)."""
    msg = Message(body=body, **fields)
    msg.inferred = section != "amqp-value"
    if msg_type is not None:
        msg.annotations = {symbol("x-opt-jms-msg-type"): proton.byte(msg_type)}
    return msg
