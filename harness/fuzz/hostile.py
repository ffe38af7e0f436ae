"""Hostile byte streams for one raw TCP connection, in families, each deterministic from (seed, index).

A case is a name, a family and steps: bytes to send and pauses to hold the socket open (a trickle is many
small sends with pauses between them). Most cases first go *through* SASL and open with a valid prefix and
put the hostile part after it: a stream that is wrong from its first byte only tests the header check.

Against a secured router (`interop fuzz --frames --secured`) the valid prefix authenticates with SASL PLAIN, so
every family's hostile part lands behind a real password check, and two more families test the TLS layer:
`tls-handshake` (garbage inside TLS handshake records: truncated, flipped or oversized ClientHellos, records of
unknown types) and `in-tls` (a real TLS session carrying another family's hostile stream).

The `management` family sends malformed requests to the target's management node (`Context.role`: the router's
`$management`, the broker's `activemq.management`) on a valid session, with a reply address of the case's own;
its cases say what the answer must be (`Case.expect`, judged by harness/fuzz/mgmt_answer.py).

A case's `name` says what is wrong and nothing random (no counts, offsets, seeds): it is the stable part of a
finding's signature, so the same fault found by two seeds is one finding.
"""

from __future__ import annotations

import json
import random
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from . import codec as c

MAX_PAUSE_S = 2.0  # a case never holds its socket longer than this in total: the session has a budget


@dataclass
class Case:
    family: str
    name: str  # e.g. "sasl-init.mechanism-null": stable across seeds
    # ("send", bytes) | ("pause", seconds) | ("await", descriptor code of a frame the server must send first)
    steps: list[tuple[str, object]] = field(default_factory=list)
    index: int = -1
    tls: bool = False  # played inside a TLS session (harness/fuzz/wire.py)
    # what the server must answer beyond surviving, for a family that can tell (management: EXPECT_ERROR or
    # EXPECT_NO_REPLY, judged by harness/fuzz/mgmt_answer.py); None: surviving is all
    expect: str | None = None

    @property
    def data(self) -> bytes:
        return b"".join(v for k, v in self.steps if k == "send")

    @property
    def hex(self) -> str:
        return self.data.hex()

    @property
    def label(self) -> str:
        return f"{self.family}/{self.name}"


@dataclass(frozen=True)
class Context:
    """What the streams need to know of the target: an address links may attach to, and its role."""

    address: str = "fuzz.hostile"
    container_id: str = "fuzz"
    user: str | None = None  # the valid prefix authenticates with SASL PLAIN as this user (else ANONYMOUS)
    password: str = ""
    role: str = "router"  # router or broker: which management node the `management` family asks

    @property
    def management_node(self) -> str:
        """The address management requests go to: qdrouterd's `$management`, Artemis's `activemq.management`."""
        return "activemq.management" if self.role == "broker" else "$management"

    def sasl_init(self) -> bytes:
        if self.user is None:
            return c.sasl_frame("sasl_init", mechanism="ANONYMOUS")
        response = b"\x00" + self.user.encode() + b"\x00" + self.password.encode()  # RFC 4616
        return c.sasl_frame("sasl_init", mechanism="PLAIN", initial_response=response)


# ---- the valid session the mutations start from ----------------------------------------------------------
def valid_session(ctx: Context, rng: random.Random | None = None) -> list[tuple[str, bytes]]:
    """A whole, valid client session as (label, bytes) segments: SASL ANONYMOUS, open, begin, a sending link
    with one pre-settled transfer, a receiving link with credit, then detach, end, close."""
    tag = b"t%d" % (rng.randrange(1000) if rng else 0)
    return [
        ("sasl-header", c.SASL_HEADER),
        ("sasl-init", ctx.sasl_init()),
        ("amqp-header", c.AMQP_HEADER),
        ("open", c.amqp_frame("open", container_id=ctx.container_id, hostname="localhost",
                              max_frame_size=65536, channel_max=31, idle_time_out=60000)),
        ("begin", _begin()),
        ("attach-sender", _attach(ctx, handle=0, name="fuzz-snd", receiver=False)),
        ("transfer", c.amqp_frame("transfer", payload=c.message("hostile"), handle=0, delivery_id=0,
                                  delivery_tag=tag, message_format=0, settled=True)),
        ("attach-receiver", _attach(ctx, handle=1, name="fuzz-rcv", receiver=True)),
        ("flow", c.amqp_frame("flow", next_incoming_id=0, incoming_window=100, next_outgoing_id=1,
                              outgoing_window=100, handle=1, delivery_count=0, link_credit=5)),
        ("detach", c.amqp_frame("detach", handle=0, closed=True)),
        ("end", c.amqp_frame("end")),
        ("close", c.amqp_frame("close")),
    ]


def _begin(channel: int = 0, **over) -> bytes:
    fields = dict(next_outgoing_id=0, incoming_window=100, outgoing_window=100, handle_max=63)
    fields.update(over)
    return c.amqp_frame("begin", channel=channel, **fields)


def _attach(ctx: Context, *, handle: int, name: str, receiver: bool, channel: int = 0, **over) -> bytes:
    fields = dict(name=name, handle=handle, role=receiver, snd_settle_mode=2, rcv_settle_mode=0,
                  source=c.composite("source", address=ctx.address),
                  target=c.composite("target", address=ctx.address), initial_delivery_count=0)
    fields.update(over)
    return c.amqp_frame("attach", channel=channel, **fields)


STAGES = ("none", "sasl", "open", "begin", "attach")
_STAGE_END = {"none": 0, "sasl": 2, "open": 4, "begin": 5, "attach": 6}


def prefix(ctx: Context, stage: str) -> bytes:
    """The valid session up to and including `stage` (none: nothing; attach: a sending link on handle 0)."""
    return b"".join(data for _, data in valid_session(ctx)[:_STAGE_END[stage]])


def _after(ctx: Context, stage: str, hostile: bytes, name: str, family: str) -> Case:
    return Case(family, name, [("send", prefix(ctx, stage) + hostile)])


# ---- families ---------------------------------------------------------------------------------------------
def fam_mutate(rng: random.Random, ctx: Context) -> Case:
    """Byte flips, truncation, duplication, dropping and splicing of frames of the valid session."""
    segs = valid_session(ctx, rng)
    labels = [label for label, _ in segs]
    op = rng.choice(["flip", "truncate", "duplicate", "drop", "splice", "shuffle-tail"])
    i = rng.randrange(len(segs))
    label, data = segs[i]
    if op == "flip":
        buf = bytearray(data)
        for _ in range(rng.choice([1, 1, 2, 4])):
            pos = rng.randrange(len(buf))
            buf[pos] = rng.choice([buf[pos] ^ (1 << rng.randrange(8)), rng.randrange(256), 0x00, 0xFF])
        segs[i] = (label, bytes(buf))
        return Case("mutate", f"flip@{label}", [("send", b"".join(d for _, d in segs))])
    if op == "truncate":
        cut = rng.randrange(len(data))
        return Case("mutate", f"truncate@{label}", [("send", b"".join(d for _, d in segs[:i]) + data[:cut])])
    if op == "duplicate":
        segs.insert(i, segs[i])
        return Case("mutate", f"duplicate@{label}", [("send", b"".join(d for _, d in segs))])
    if op == "drop":
        del segs[i]
        return Case("mutate", f"drop@{label}", [("send", b"".join(d for _, d in segs))])
    if op == "splice":
        j = rng.randrange(len(segs))
        moved = segs.pop(i)
        segs.insert(j, moved)
        return Case("mutate", f"splice:{label}@{labels[j]}", [("send", b"".join(d for _, d in segs))])
    tail = segs[3:]
    rng.shuffle(tail)
    return Case("mutate", "shuffle-tail", [("send", b"".join(d for _, d in segs[:3] + tail))])


_BAD_HEADERS = {
    "amqp-version-2": b"AMQP\x00\x02\x00\x00", "amqp-revision-9": b"AMQP\x00\x01\x00\x09",
    "amqp-0-9-1": b"AMQP\x00\x00\x09\x01", "unknown-protocol-id": b"AMQP\x07\x01\x00\x00",
    "tls-without-tls": c.TLS_HEADER, "not-amqp": b"XMQP\x00\x01\x00\x00", "http-get": b"GET / HTTP/1.1\r\n\r\n",
    "short-header": b"AMQP\x00", "zeros": b"\x00" * 8, "ones": b"\xff" * 8,
}


def fam_header(rng: random.Random, ctx: Context) -> Case:
    """Bad protocol headers: at the start, after SASL, twice, or an AMQP frame where a header belongs."""
    where = rng.choice(["start", "start", "after-sasl", "repeat", "frame-first", "random"])
    if where == "start":
        name = rng.choice(sorted(_BAD_HEADERS))
        return Case("header", f"header.{name}", [("send", _BAD_HEADERS[name])])
    if where == "after-sasl":
        name = rng.choice(sorted(_BAD_HEADERS))
        return _after(ctx, "sasl", _BAD_HEADERS[name], f"header-after-sasl.{name}", "header")
    if where == "repeat":
        which = rng.choice([c.SASL_HEADER, c.AMQP_HEADER])
        tag = "sasl" if which == c.SASL_HEADER else "amqp"
        return _after(ctx, rng.choice(["sasl", "open"]), which, f"header-repeated.{tag}", "header")
    if where == "frame-first":
        return Case("header", "frame-before-header", [("send", c.amqp_frame("open", container_id="x"))])
    return Case("header", "header.random-bytes", [("send", rng.randbytes(rng.randrange(1, 64)))])


def fam_frame_size(rng: random.Random, ctx: Context) -> Case:
    """Frame size fields below 8, beyond the bytes sent, huge, or over the negotiated max-frame-size."""
    stage = rng.choice(["sasl-header", "open", "begin"])
    before = c.SASL_HEADER if stage == "sasl-header" else prefix(ctx, stage)
    body = c.composite("close") if stage != "sasl-header" else c.composite("sasl_init", mechanism="ANONYMOUS")
    type_ = c.FRAME_SASL if stage == "sasl-header" else c.FRAME_AMQP
    kind = rng.choice(["below-8", "beyond-body", "huge", "over-max-frame"])
    if kind == "below-8":
        size = rng.randrange(8)
    elif kind == "beyond-body":
        size = 8 + len(body) + rng.choice([1, 7, 100, 4096])
    elif kind == "huge":
        size = rng.choice([2**31 - 1, 2**31, 2**32 - 1, 0x7FFFFF00])
    else:
        size = 8 + 65536 + 1 + rng.randrange(1000)  # the valid open offers 64 KiB
        body = body + b"\x00" * (size - 8 - len(body))
    data = before + c.frame(body, type_=type_, size=size)
    steps = [("send", data)]
    if kind == "beyond-body":
        steps.append(("pause", rng.choice([0.0, 0.2, 0.5])))
    return Case("frame-size", f"frame-size.{kind}@{stage}", steps)


def fam_doff(rng: random.Random, ctx: Context) -> Case:
    stage = rng.choice(["sasl-header", "open"])
    before = c.SASL_HEADER if stage == "sasl-header" else prefix(ctx, "open")
    body = c.composite("sasl_init", mechanism="ANONYMOUS") if stage == "sasl-header" else _begin()[8:]
    type_ = c.FRAME_SASL if stage == "sasl-header" else c.FRAME_AMQP
    doff = rng.choice([0, 1, 3, 4, 64, 255])
    ext = b"\x00" * max(0, (doff - 2) * 4) if rng.random() < 0.5 else b""
    return Case("doff", f"doff.{'zero-one' if doff < 2 else 'large'}@{stage}",
                [("send", before + c.frame(body, doff=doff, type_=type_, extended=ext))])


def fam_frame_type(rng: random.Random, ctx: Context) -> Case:
    """Unknown frame types; a SASL frame after open; an AMQP frame where SASL is due."""
    kind = rng.choice(["unknown-after-open", "unknown-in-sasl", "sasl-after-open", "amqp-in-sasl"])
    if kind == "unknown-after-open":
        data = prefix(ctx, "open") + c.frame(_begin()[8:], type_=rng.randrange(2, 256))
    elif kind == "unknown-in-sasl":
        data = c.SASL_HEADER + c.frame(c.composite("sasl_init", mechanism="ANONYMOUS"), type_=rng.randrange(2, 256))
    elif kind == "sasl-after-open":
        data = prefix(ctx, "open") + c.sasl_frame("sasl_init", mechanism="ANONYMOUS")
    else:
        data = c.SASL_HEADER + c.amqp_frame("open", container_id="x")
    return Case("frame-type", f"frame-type.{kind}", [("send", data)])


def _performative(ctx: Context, kind: str, **over) -> tuple[str, bytes]:
    """(stage it belongs after, its encoded body) for a plausible performative of `kind`."""
    src, tgt = c.composite("source", address=ctx.address), c.composite("target", address=ctx.address)
    plausible = {
        "open": ("sasl", dict(container_id=ctx.container_id, hostname="localhost", max_frame_size=65536)),
        "begin": ("open", dict(next_outgoing_id=0, incoming_window=100, outgoing_window=100)),
        "attach": ("begin", dict(name="fuzz-l", handle=3, role=False, source=src, target=tgt,
                                 initial_delivery_count=0)),
        "flow": ("attach", dict(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100,
                                handle=0, delivery_count=0, link_credit=1)),
        "transfer": ("attach", dict(handle=0, delivery_id=0, delivery_tag=b"x", message_format=0, settled=True)),
        "disposition": ("attach", dict(role=True, first=0, last=0, settled=True, state=c.composite("accepted"))),
        "detach": ("attach", dict(handle=0, closed=True, error=dict(condition="amqp:internal-error",
                                                                    description="fuzz"))),
        "end": ("begin", dict(error=dict(condition="amqp:internal-error", description="fuzz"))),
        "close": ("open", dict(error=dict(condition="amqp:internal-error", description="fuzz"))),
        "sasl_init": ("none", dict(mechanism="ANONYMOUS", initial_response=b"", hostname="localhost")),
        "sasl_response": ("none", dict(response=b"x")),
        "sasl_mechanisms": ("none", dict(sasl_server_mechanisms=["ANONYMOUS"])),
        "sasl_challenge": ("none", dict(challenge=b"x")),
        "sasl_outcome": ("none", dict(code=0, additional_data=b"")),
    }
    stage, fields = plausible[kind]
    fields.update(over)
    return stage, c.composite(kind, **fields)


def _frame_for(ctx: Context, kind: str, body: bytes, stage: str) -> bytes:
    if kind.startswith("sasl_"):
        return c.SASL_HEADER + c.frame(body, type_=c.FRAME_SASL)
    return prefix(ctx, stage) + c.frame(body)


def _dash(name: str) -> str:
    return name.replace("_", "-")


def fam_truncated(rng: random.Random, ctx: Context) -> Case:
    """A frame whose size matches its bytes but whose performative is cut short."""
    kind = rng.choice(c.PERFORMATIVES + c.SASL_FRAMES)
    stage, body = _performative(ctx, kind)
    cut = rng.randrange(1, len(body))
    return Case("truncated", f"{_dash(kind)}.truncated", [("send", _frame_for(ctx, kind, body[:cut], stage))])


def fam_open_fields(rng: random.Random, ctx: Context) -> Case:
    """Absurd open fields: max-frame-size 0 or below 512, channel-max 0, idle-time-out of a few ms, ..."""
    choice = rng.choice(["max-frame-size-tiny", "max-frame-size-huge", "channel-max-zero", "idle-time-out-tiny",
                         "hostname-long", "properties-large", "locales-odd", "no-container-id"])
    fields = dict(container_id=ctx.container_id)
    if choice == "max-frame-size-tiny":
        fields["max_frame_size"] = rng.choice([0, 1, 8, 100, 511])
    elif choice == "max-frame-size-huge":
        fields["max_frame_size"] = 2**32 - 1
    elif choice == "channel-max-zero":
        fields["channel_max"] = 0
    elif choice == "idle-time-out-tiny":
        fields["idle_time_out"] = rng.choice([1, 2, 5, 10])
    elif choice == "hostname-long":
        fields["hostname"] = "h" * rng.choice([255, 256, 70000])
    elif choice == "properties-large":
        fields["properties"] = {f"k{i}": "v" * 10 for i in range(rng.choice([100, 2000]))}
    elif choice == "locales-odd":
        fields["outgoing_locales"] = ["x" * 200] * 20
    else:
        fields["container_id"] = None
    data = prefix(ctx, "sasl") + c.AMQP_HEADER + c.frame(c.composite("open", **fields))
    # after the open, a plain session and link: what the absurd setting must then hold for
    tail = b"".join(d for _, d in valid_session(ctx)[4:7])
    steps = [("send", data + tail)]
    if choice == "idle-time-out-tiny":
        steps.append(("pause", 0.3))  # long enough for the server's heartbeats to matter
    return Case("open-fields", f"open.{choice}", steps)


def fam_channels(rng: random.Random, ctx: Context) -> Case:
    """Frames on channels no begin opened, beyond channel-max, or a begin answering a session never offered."""
    kind = rng.choice(["attach-unopened", "transfer-unopened", "end-unopened", "flow-unopened",
                       "begin-beyond-channel-max", "begin-remote-channel-unknown", "begin-twice"])
    ch = rng.choice([1, 7, 31, 65535])
    if kind == "attach-unopened":
        hostile = _attach(ctx, handle=0, name="l", receiver=False, channel=ch)
    elif kind == "transfer-unopened":
        hostile = c.amqp_frame("transfer", channel=ch, payload=c.message(), handle=0, delivery_id=0,
                               delivery_tag=b"t", settled=True)
    elif kind == "end-unopened":
        hostile = c.amqp_frame("end", channel=ch)
    elif kind == "flow-unopened":
        hostile = c.amqp_frame("flow", channel=ch, incoming_window=1, next_outgoing_id=0, outgoing_window=1)
    elif kind == "begin-beyond-channel-max":
        hostile = _begin(channel=rng.choice([32, 1000, 65535]))  # the valid open says channel-max 31
    elif kind == "begin-remote-channel-unknown":
        hostile = _begin(channel=1, remote_channel=rng.choice([0, 5, 65535]))
    else:
        hostile = _begin(channel=0)
    return _after(ctx, "begin" if kind == "begin-twice" else "open", hostile, f"channel.{kind}", "channels")


def fam_links(rng: random.Random, ctx: Context) -> Case:
    """Link-level nonsense: transfers before attach, unknown handles, a handle or a name attached twice."""
    kind = rng.choice(["transfer-before-attach", "transfer-unknown-handle", "handle-beyond-handle-max",
                       "attach-handle-twice", "attach-name-twice", "detach-unknown-handle",
                       "flow-unknown-handle", "transfer-on-receiving-link", "transfer-no-delivery-id",
                       "attach-no-terminus"])
    stage = "attach"
    transfer = dict(payload=c.message(), delivery_id=0, delivery_tag=b"t", message_format=0, settled=True)
    if kind == "transfer-before-attach":
        stage, hostile = "begin", c.amqp_frame("transfer", handle=0, **transfer)
    elif kind == "transfer-unknown-handle":
        hostile = c.amqp_frame("transfer", handle=rng.choice([1, 9, 2**32 - 1]), **transfer)
    elif kind == "handle-beyond-handle-max":
        stage, hostile = "begin", _attach(ctx, handle=rng.choice([64, 2**32 - 1]), name="hi", receiver=False)
    elif kind == "attach-handle-twice":
        hostile = _attach(ctx, handle=0, name="other", receiver=False)
    elif kind == "attach-name-twice":
        hostile = _attach(ctx, handle=1, name="fuzz-snd", receiver=False)
    elif kind == "detach-unknown-handle":
        hostile = c.amqp_frame("detach", handle=rng.choice([5, 2**32 - 1]), closed=True)
    elif kind == "flow-unknown-handle":
        hostile = c.amqp_frame("flow", incoming_window=1, next_outgoing_id=0, outgoing_window=1,
                               handle=rng.choice([5, 2**32 - 1]), delivery_count=0, link_credit=10)
    elif kind == "transfer-on-receiving-link":
        hostile = (_attach(ctx, handle=1, name="r", receiver=True)
                   + c.amqp_frame("transfer", handle=1, **transfer))
    elif kind == "transfer-no-delivery-id":
        hostile = c.amqp_frame("transfer", handle=0, payload=c.message(), delivery_tag=b"t", settled=False)
    else:
        hostile = c.amqp_frame("attach", name="bare", handle=1, role=False)
    return _after(ctx, stage, hostile, f"link.{kind}", "links")


def fam_disposition_flow(rng: random.Random, ctx: Context) -> Case:
    """Dispositions and flows naming deliveries and windows that do not exist, or absurd ranges."""
    kind = rng.choice(["disposition-unknown-id", "disposition-huge-range", "disposition-first-after-last",
                       "disposition-bad-state", "disposition-sender-role", "flow-huge-credit",
                       "flow-window-wrap", "flow-drain-echo-no-link", "flow-delivery-count-wrap"])
    state = c.composite("accepted")
    if kind == "disposition-unknown-id":
        hostile = c.amqp_frame("disposition", role=True, first=rng.choice([7, 2**31, 2**32 - 1]), settled=True,
                               state=state)
    elif kind == "disposition-huge-range":
        hostile = c.amqp_frame("disposition", role=True, first=0, last=2**32 - 1, settled=True, state=state)
    elif kind == "disposition-first-after-last":
        hostile = c.amqp_frame("disposition", role=True, first=100, last=1, settled=True, state=state)
    elif kind == "disposition-bad-state":
        bad = rng.choice([c.uint(3), c.composite("source"), c.described(0x99, c.list_([])), c.string("ok")])
        hostile = c.amqp_frame("disposition", role=True, first=0, settled=True, state=c.Raw(bad))
    elif kind == "disposition-sender-role":
        hostile = c.amqp_frame("disposition", role=False, first=0, last=10, settled=False, state=state)
    elif kind == "flow-huge-credit":
        hostile = c.amqp_frame("flow", next_incoming_id=0, incoming_window=2**32 - 1, next_outgoing_id=1,
                               outgoing_window=2**32 - 1, handle=0, delivery_count=0, link_credit=2**32 - 1)
    elif kind == "flow-window-wrap":
        hostile = c.amqp_frame("flow", next_incoming_id=2**32 - 1, incoming_window=0, next_outgoing_id=2**32 - 1,
                               outgoing_window=0)
    elif kind == "flow-drain-echo-no-link":
        hostile = c.amqp_frame("flow", incoming_window=1, next_outgoing_id=0, outgoing_window=1, drain=True,
                               echo=True)
    else:
        hostile = c.amqp_frame("flow", next_incoming_id=0, incoming_window=10, next_outgoing_id=1,
                               outgoing_window=10, handle=0, delivery_count=2**32 - 1, link_credit=5,
                               available=2**32 - 1)
    return _after(ctx, "attach", hostile, f"{kind.split('-')[0]}.{kind.split('-', 1)[1]}", "disposition-flow")


def _nested(rng: random.Random, depth: int, kind: str) -> bytes:
    """`depth` containers, each holding the next, around a null. Built from the inside out as a list of
    headers joined once: re-wrapping the bytes level by level costs quadratic time at 50,000 levels."""
    headers, length = [], 1  # the null inside
    for _ in range(depth):
        if kind == "list":
            head = b"\xd0" + struct.pack(">II", length + 4, 1)
        elif kind == "map":
            key = c.string("k")
            head = b"\xd1" + struct.pack(">II", length + len(key) + 4, 2) + key
        elif kind == "described":
            head = b"\x00" + c.ulong(rng.randrange(2**16))
        else:  # an array of one list, holding an array of one list, ...
            head = b"\xf0" + struct.pack(">II", length + 4 + 1, 1) + b"\xd0"
        headers.append(head)
        length += len(head)
    return b"".join(reversed(headers)) + c.null()


def fam_nesting(rng: random.Random, ctx: Context) -> Case:
    """Deep nesting of lists, maps, described types and arrays where any value may go."""
    kind = rng.choice(["list", "map", "described", "array"])
    depth = rng.choice([64, 1000, 10000, 50000])
    value = _nested(rng, depth, kind)
    where = rng.choice(["open.properties", "attach.source-filter", "transfer.body", "sasl-init.response"])
    if where == "open.properties":
        hostile = c.frame(c.composite("open", container_id=ctx.container_id,
                                      properties=c.Raw(c.map_([(c.symbol("deep"), value)], wide=True))))
        data = prefix(ctx, "sasl") + c.AMQP_HEADER + hostile
    elif where == "attach.source-filter":
        src = c.composite("source", address=ctx.address, filter=c.map_([(c.symbol("f"), value)], wide=True))
        data = prefix(ctx, "begin") + _attach(ctx, handle=0, name="deep", receiver=True, source=src)
    elif where == "transfer.body":
        data = prefix(ctx, "attach") + c.amqp_frame(
            "transfer", payload=c.described(0x77, value), handle=0, delivery_id=0, delivery_tag=b"d",
            message_format=0, settled=True)
    else:
        data = c.SASL_HEADER + c.frame(c.composite("sasl_init", mechanism=c.Raw(value)), type_=c.FRAME_SASL)
    return Case("nesting", f"nesting.{kind}@{where}", [("send", data)])


def fam_counts(rng: random.Random, ctx: Context) -> Case:
    """Element counts and lengths that lie: list count 2^32-1, odd map counts, arrays and strings far longer
    than their frame."""
    kind = rng.choice(["list-count-max", "list-size-beyond-frame", "map-odd-count", "array-count-max",
                       "string-length-beyond-frame", "performative-list-count-max"])
    if kind == "list-count-max":
        value = b"\xd0" + struct.pack(">II", 4, 2**32 - 1)
    elif kind == "list-size-beyond-frame":
        value = b"\xd0" + struct.pack(">II", 2**31, 3) + c.null() * 3
    elif kind == "map-odd-count":
        value = c.map_([(c.string("k"), c.null())], count=3)
    elif kind == "array-count-max":
        value = b"\xf0" + struct.pack(">II", 5, 2**32 - 1) + b"\x43"
    elif kind == "string-length-beyond-frame":
        value = b"\xb1" + struct.pack(">I", 2**32 - 2) + b"abc"
    else:
        body = c.described(0x10, b"\xd0" + struct.pack(">II", 4 + len(c.string("x")), 2**32 - 1) + c.string("x"))
        return Case("counts", f"counts.{kind}",
                    [("send", prefix(ctx, "sasl") + c.AMQP_HEADER + c.frame(body))])
    where = rng.choice(["open.properties", "attach.properties", "sasl-init.initial-response"])
    if where == "open.properties":
        data = prefix(ctx, "sasl") + c.AMQP_HEADER + c.frame(c.composite(
            "open", container_id=ctx.container_id, properties=c.Raw(value)))
    elif where == "attach.properties":
        data = prefix(ctx, "begin") + _attach(ctx, handle=0, name="n", receiver=False, properties=c.Raw(value))
    else:
        data = c.SASL_HEADER + c.frame(c.composite("sasl_init", mechanism="ANONYMOUS",
                                                   initial_response=c.Raw(value)), type_=c.FRAME_SASL)
    return Case("counts", f"counts.{kind}@{where}", [("send", data)])


# Encoded values of the wrong type, one per AMQP type class, for any field.
_WRONG = {
    "string": lambda: c.string("wrong"), "symbol": lambda: c.symbol("wrong"), "uint": lambda: c.uint(7),
    "ulong": lambda: c.ulong(2**40), "bool": lambda: c.boolean(True), "list": lambda: c.list_([c.null()]),
    "map": lambda: c.map_([(c.string("k"), c.string("v"))]), "binary": lambda: c.binary(b"\x00\xff"),
    "described": lambda: c.described(0x77, c.null()), "int-negative": lambda: c.int_(-1),
    "double": lambda: b"\x82" + struct.pack(">d", 1.5), "uuid": lambda: b"\x98" + bytes(16),
    "reserved-code": lambda: b"\x0f",
}


def fam_types(rng: random.Random, ctx: Context) -> Case:
    """A value of the wrong AMQP type in a field of a performative or SASL frame."""
    kind = rng.choice(c.PERFORMATIVES + c.SASL_FRAMES)
    fname = rng.choice(c.field_names(kind))
    wrong = rng.choice(sorted(_WRONG))
    stage, body = _performative(ctx, kind, **{fname: c.Raw(_WRONG[wrong]())})
    return Case("types", f"{_dash(kind)}.{_dash(fname)}.wrong-type-{wrong}",
                [("send", _frame_for(ctx, kind, body, stage))])


_BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf",
             b"caf\xe9", b"\xf4\x90\x80\x80"]
# Every string (and symbol) field a client sends, as (composite, field, what it sits in).
STRING_FIELDS = [
    ("open", "container_id"), ("open", "hostname"), ("attach", "name"), ("source", "address"),
    ("target", "address"), ("error", "description"), ("error", "condition"), ("sasl_init", "hostname"),
    ("sasl_init", "mechanism"), ("source", "expiry_policy"), ("source", "distribution_mode"),
    ("open", "properties"), ("message", "application-properties"), ("message", "amqp-value"),
]


def fam_utf8(rng: random.Random, ctx: Context) -> Case:
    """Invalid UTF-8 (or non-ASCII symbols) in every string and symbol field a client sends."""
    owner, fname = rng.choice(STRING_FIELDS)
    bad = b"fuzz" + rng.choice(_BAD_UTF8) + b"id"
    name = f"{_dash(owner)}.{_dash(fname)}.invalid-utf8"
    is_symbol = fname in ("mechanism", "condition", "expiry_policy", "distribution_mode")
    value = c.Raw(c.symbol(bad) if is_symbol else c.string(bad))
    if owner == "open":
        if fname == "properties":
            value = {"p": c.string(bad)}
        data = prefix(ctx, "sasl") + c.AMQP_HEADER + c.frame(c.composite(
            "open", **{"container_id": ctx.container_id, fname: value}))
    elif owner == "attach":
        data = prefix(ctx, "begin") + _attach(ctx, handle=0, receiver=False, name=value)
    elif owner in ("source", "target"):
        term = c.composite(owner, **{"address": ctx.address, fname: value})
        data = prefix(ctx, "begin") + _attach(ctx, handle=0, name="u", receiver=owner == "source",
                                              **{owner: term})
    elif owner == "error":
        err = c.composite("error", **{"condition": "amqp:internal-error", fname: value})
        data = prefix(ctx, "attach") + c.amqp_frame("detach", handle=0, closed=True, error=err)
    elif owner == "sasl_init":
        fields = {"mechanism": "ANONYMOUS", fname: value}
        data = c.SASL_HEADER + c.frame(c.composite("sasl_init", **fields), type_=c.FRAME_SASL)
    elif fname == "application-properties":
        data = prefix(ctx, "attach") + c.amqp_frame(
            "transfer", payload=c.described(0x74, c.map_([(c.string(bad), c.string(bad))]))
            + c.described(0x77, c.null()), handle=0, delivery_id=0, delivery_tag=b"u", message_format=0,
            settled=True)
    else:
        data = prefix(ctx, "attach") + c.amqp_frame(
            "transfer", payload=c.described(0x77, c.string(bad)), handle=0, delivery_id=0, delivery_tag=b"u",
            message_format=0, settled=True)
    return Case("utf8", name, [("send", data)])


def fam_sasl(rng: random.Random, ctx: Context) -> Case:
    """Malformed SASL: each SASL frame with a mandatory field missing, null or mistyped, frames in the wrong
    order or from the wrong side, unknown mechanisms, oversized responses."""
    kind = rng.choice(["mandatory", "mandatory", "mandatory", "order", "unknown-mechanism", "big-response",
                       "not-a-list", "init-twice"])
    if kind == "mandatory":
        frame_kind = rng.choice(c.SASL_FRAMES)
        fname = c.MANDATORY[frame_kind][0]
        how = rng.choice(["null", "missing", "wrong-type"])
        if how == "missing":
            body = c.described(c.COMPOSITES[frame_kind][0], c.list_([]))
        elif how == "null":
            body = c.composite(frame_kind, **{fname: c.Raw(c.null())})
        else:
            body = c.composite(frame_kind, **{fname: c.Raw(c.uint(rng.randrange(1, 300)))})
        data = c.SASL_HEADER + c.frame(body, type_=c.FRAME_SASL)
        return Case("sasl", f"{_dash(frame_kind)}.{_dash(fname)}-{how}", [("send", data)])
    if kind == "order":
        first = rng.choice(["sasl_response", "sasl_mechanisms", "sasl_challenge", "sasl_outcome"])
        _, body = _performative(ctx, first)
        data = c.SASL_HEADER + c.frame(body, type_=c.FRAME_SASL)
        return Case("sasl", f"sasl.{_dash(first)}-first", [("send", data + c.sasl_frame(
            "sasl_init", mechanism="ANONYMOUS"))])
    if kind == "unknown-mechanism":
        mech = rng.choice(["", "X" * 300, "PLAIN", "EXTERNAL", "SCRAM-SHA-256", "NOPE"])
        data = c.SASL_HEADER + c.sasl_frame("sasl_init", mechanism=mech, initial_response=b"\x00a\x00b")
        return Case("sasl", "sasl-init.unknown-mechanism", [("send", data + c.AMQP_HEADER)])
    if kind == "big-response":
        data = c.SASL_HEADER + c.sasl_frame("sasl_init", mechanism="PLAIN",
                                            initial_response=b"\x00u\x00" + b"p" * rng.choice([1000, 70000]))
        return Case("sasl", "sasl-init.big-response", [("send", data)])
    if kind == "not-a-list":
        value = rng.choice([c.null(), c.string("init"), c.map_([]), c.uint(1)])
        data = c.SASL_HEADER + c.frame(c.described(0x41, value), type_=c.FRAME_SASL)
        return Case("sasl", "sasl-init.not-a-list", [("send", data)])
    data = c.SASL_HEADER + c.sasl_frame("sasl_init", mechanism="ANONYMOUS") * 2
    return Case("sasl", "sasl-init.twice", [("send", data + c.AMQP_HEADER)])


def fam_trickle(rng: random.Random, ctx: Context) -> Case:
    """A valid session (or a mutated one) sent a few bytes at a time with pauses between."""
    inner = fam_mutate(rng, ctx) if rng.random() < 0.5 else Case(
        "trickle", "valid", [("send", b"".join(d for _, d in valid_session(ctx)))])
    data = inner.data
    steps, i, pause_left = [], 0, MAX_PAUSE_S / 2
    while i < len(data):
        n = rng.randrange(1, 8)
        steps.append(("send", data[i:i + n]))
        i += n
        if pause_left > 0 and rng.random() < 0.2:
            p = rng.choice([0.005, 0.01, 0.03])
            steps.append(("pause", p))
            pause_left -= p
    return Case("trickle", f"trickle.{inner.name}", steps)


def fam_silence(rng: random.Random, ctx: Context) -> Case:
    """Half a frame, then nothing: the connection held open and silent, then dropped."""
    stage = rng.choice(["none", "sasl", "open", "attach"])
    segs = valid_session(ctx)
    nxt = segs[_STAGE_END[stage]][1]
    cut = rng.randrange(1, len(nxt))
    return Case("silence", f"half-frame-silence@{stage}",
                [("send", prefix(ctx, stage) + nxt[:cut]), ("pause", rng.choice([0.2, 0.5, 1.0, 1.5]))])


def fam_flood(rng: random.Random, ctx: Context) -> Case:
    """Floods: thousands of empty frames, begins, attaches and flows on one connection."""
    kind = rng.choice(["empty-frames", "empty-frames-in-sasl", "flows", "transfers-no-credit"])
    n = rng.choice([1000, 5000, 20000])
    if kind == "empty-frames":
        data = prefix(ctx, "open") + c.EMPTY_FRAME * n
    elif kind == "empty-frames-in-sasl":
        data = c.SASL_HEADER + c.frame(b"", type_=c.FRAME_SASL) * n
    elif kind == "flows":
        data = prefix(ctx, "attach") + c.amqp_frame("flow", next_incoming_id=0, incoming_window=10,
                                                    next_outgoing_id=1, outgoing_window=10) * n
    else:
        data = prefix(ctx, "attach") + b"".join(
            c.amqp_frame("transfer", payload=c.message("x"), handle=0, delivery_id=i, delivery_tag=b"%d" % i,
                         message_format=0, settled=True) for i in range(n // 10))
    return Case("flood", f"flood.{kind}", [("send", data)])


def fam_many(rng: random.Random, ctx: Context) -> Case:
    """Many sessions and links on one connection, up to and past the limits the open and begin announced."""
    kind = rng.choice(["sessions", "links", "links-past-handle-max"])
    if kind == "sessions":
        n = rng.choice([31, 32, 200])
        data = prefix(ctx, "open") + b"".join(_begin(channel=ch) for ch in range(n))
    else:
        n = rng.choice([63, 64, 500]) if kind == "links" else 100
        data = prefix(ctx, "begin") + b"".join(
            _attach(ctx, handle=h, name=f"l{h}", receiver=bool(h % 2)) for h in range(n))
    return Case("many", f"many.{kind}", [("send", data)])


# ---- management: hostile requests to the management node ---------------------------------------------------
MGMT_PREFIX = "org.apache.qpid.dispatch."
# What every case of the family asks for, by role: the router's (qdrouterd's AMQP management at `$management`) and
# the broker's (Artemis's management address, `_AMQ_*` properties, JSON arguments). Names are the same for both
# roles where the fault is the same; `body-not-a-map` is the router's, `body-not-json` the broker's.
MGMT_VARIANTS = {
    "router": ("op-missing", "op-wrong-type", "op-unknown", "type-wrong-type", "name-wrong-type",
               "identity-wrong-type", "name-huge", "body-huge", "create-unknown-type", "create-wrong-attribute-types",
               "read-missing", "update-missing", "delete-missing", "body-not-a-map", "properties-not-a-map",
               "no-reply-to", "body-deep", "split-aborted"),
    "broker": ("op-missing", "op-wrong-type", "op-unknown", "resource-wrong-type", "attribute-wrong-type",
               "args-wrong-type", "name-huge", "body-huge", "create-wrong-arg-types", "read-missing",
               "update-missing", "delete-missing", "body-not-json", "properties-not-a-map", "no-reply-to",
               "body-deep", "split-aborted"),
}
# The answer a case expects (Case.expect): an error status on its reply address (router: statusCode 4xx/5xx;
# broker: _AMQ_OperationSucceeded false) or its delivery rejected; for a request without reply-to, no reply and a
# settled outcome. harness/fuzz/mgmt_answer.py reads a case's Reply against it.
EXPECT_ERROR, EXPECT_NO_REPLY = "management-error", "management-no-reply"
MGMT_SETUP_S = 0.2  # the pause after the links are attached: the server answers the begin and attaches, gives credit
MGMT_ANSWER_S = 0.5  # the pause after the request: the server's answer arrives while the socket is held
MGMT_CHUNK = 16000  # transfer payload per frame: under 16384 bytes, qdrouterd's default max-frame-size
HUGE_NAME = 65536


def _mgmt_wrong(rng: random.Random) -> bytes:
    """A value of the wrong type for a string property: int, list, map, binary, boolean, uuid, double."""
    return rng.choice([
        lambda: c.int_(rng.randrange(-2**31, 2**31)), lambda: c.list_([c.string("READ"), c.uint(1)]),
        lambda: c.map_([(c.string("k"), c.string("v"))]), lambda: c.binary(rng.randbytes(8)),
        lambda: c.boolean(True), lambda: b"\x98" + rng.randbytes(16), lambda: b"\x82" + struct.pack(">d", 1.5),
        lambda: c.long(2**40 + rng.randrange(1000)),
    ])()


def _amqp_map(pairs: list[tuple[str, bytes]]) -> bytes:
    return c.map_([(c.string(k), v) for k, v in pairs], wide=True)


def _mgmt_message(props: bytes | None, body: bytes | None, reply_to: str | None, msg_id: int) -> bytes:
    """A request: properties (message-id, reply-to, correlation-id), application-properties as given (encoded: a
    map, or anything else), an amqp-value body as given (encoded)."""
    fields = [c.ulong(msg_id), c.null(), c.null(), c.null(), c.string(reply_to) if reply_to else c.null(),
              c.ulong(msg_id)]
    out = c.described(0x73, c.list_(fields))
    if props is not None:
        out += c.described(0x74, props)
    if body is not None:
        out += c.described(0x77, body)
    return out


def _transfers(payload: bytes, *, delivery_id: int, tag: bytes, chunk: int = MGMT_CHUNK,
               abort: bool = False) -> bytes:
    """One unsettled delivery on handle 0 in as many transfer frames as `chunk` makes (more=true on all but the
    last); `abort`: the last frame aborts the delivery instead of completing it."""
    pieces = [payload[i:i + chunk] for i in range(0, len(payload), chunk)] or [b""]
    out = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        first = dict(delivery_id=delivery_id, delivery_tag=tag, message_format=0) if i == 0 else {}
        out.append(c.amqp_frame("transfer", payload=piece, handle=0, settled=False,
                                more=True if (abort or not last) else None, **first))
    if abort:
        out.append(c.amqp_frame("transfer", handle=0, more=False, aborted=True, settled=True))
    return b"".join(out)


def _nested_maps(depth: int) -> bytes:
    return _nested(random.Random(0), depth, "map")


def _router_request(variant: str, rng: random.Random) -> tuple[bytes | None, bytes | None]:
    """(application-properties, body) of a hostile request to qdrouterd's management, both encoded."""
    missing = f"fuzz-missing-{rng.getrandbits(32):08x}"  # no entity of any type has it: nothing is ever changed
    addr = MGMT_PREFIX + "router.config.address"
    empty = c.map_([])
    if variant == "op-missing":
        return _amqp_map([("type", c.string(addr)), ("name", c.string(missing))]), empty
    if variant == "op-wrong-type":
        op = rng.choice([c.int_(rng.randrange(1, 100)), c.list_([c.string("READ")]), c.binary(b"READ")])
        return _amqp_map([("operation", op), ("type", c.string(addr)), ("name", c.string(missing))]), empty
    if variant == "op-unknown":
        op = rng.choice(["FROBNICATE", "", "READ\x00", "read-all", "X" * 300, "GET-EVERYTHING"])
        return _amqp_map([("operation", c.string(op)), ("type", c.string(addr)), ("name", c.string(missing))]), empty
    if variant in ("type-wrong-type", "name-wrong-type", "identity-wrong-type"):
        fields = {"operation": c.string("READ"), "type": c.string(addr), "name": c.string(missing)}
        key = variant.split("-")[0]
        if key == "identity":
            del fields["name"]
        fields[key] = _mgmt_wrong(rng)
        return _amqp_map(list(fields.items())), empty
    if variant == "name-huge":
        key = rng.choice(["name", "identity"])
        name = rng.choice("abcxyz") * HUGE_NAME
        return _amqp_map([("operation", c.string(rng.choice(["READ", "DELETE"]))), ("type", c.string(addr)),
                          (key, c.string(name, wide=True))]), empty
    if variant == "body-huge":
        size = rng.choice([HUGE_NAME, 4 * HUGE_NAME])
        body = rng.choice([
            lambda: c.binary(rng.randbytes(size), wide=True),
            lambda: c.map_([(c.string(f"k{i}"), c.string("v" * 60)) for i in range(size // 70)], wide=True),
            lambda: c.string("x" * size, wide=True)])()
        return _amqp_map([("operation", c.string("READ")), ("type", c.string(addr)),
                          ("name", c.string(missing))]), body
    if variant == "create-unknown-type":
        kind = rng.choice([MGMT_PREFIX + "fuzz.noSuchType", "noSuchType", MGMT_PREFIX, "router.config."])
        body = _amqp_map([("prefix", _mgmt_wrong(rng)), ("distribution", c.uint(7)), ("waypoint", c.string("maybe")),
                          ("priority", c.string("high"))])
        return _amqp_map([("operation", c.string("CREATE")), ("type", c.string(kind)),
                          ("name", c.string(missing))]), body
    if variant == "create-wrong-attribute-types":
        # distribution is never one of qdrouterd's: the create is refused whatever the other attributes do
        body = _amqp_map([("prefix", _mgmt_wrong(rng)), ("distribution", rng.choice([c.uint(7), c.list_([])])),
                          ("waypoint", c.string("maybe")), ("priority", c.string("high"))])
        return _amqp_map([("operation", c.string("CREATE")), ("type", c.string(addr)),
                          ("name", c.string(missing))]), body
    if variant in ("read-missing", "update-missing", "delete-missing"):
        kind = rng.choice(["router.config.address", "router.config.linkRoute", "router.config.autoLink", "listener",
                           "connector", "router.link", "connection", "log", "sslProfile"])
        key = rng.choice(["name", "identity"])
        body = _amqp_map([("enable", c.string("trace+"))]) if variant == "update-missing" else empty
        op = variant.split("-")[0].upper()
        return _amqp_map([("operation", c.string(op)), ("type", c.string(MGMT_PREFIX + kind)),
                          (key, c.string(missing))]), body
    if variant == "body-not-a-map":
        body = rng.choice([c.string("prefix=fuzz"), c.list_([c.string("prefix"), c.string("fuzz")]),
                           c.binary(b"\x00\x01"), c.uint(3), c.symbols(["prefix"])])
        return _amqp_map([("operation", c.string("CREATE")), ("type", c.string(addr)),
                          ("name", c.string(missing))]), body
    if variant == "properties-not-a-map":
        props = rng.choice([c.list_([c.string("operation"), c.string("QUERY")]), c.string("operation=QUERY"),
                            c.binary(b"\xd1\x00"), c.null(), c.uint(1),
                            c.symbols(["operation", "GET-TYPES"])])
        return props, empty
    if variant == "no-reply-to":
        return _amqp_map([("operation", c.string("READ")), ("type", c.string(addr)),
                          ("name", c.string(missing))]), empty
    if variant == "body-deep":
        return _amqp_map([("operation", c.string(rng.choice(["CREATE", "QUERY", "READ"]))),
                          ("type", c.string(addr)), ("name", c.string(missing))]), _nested_maps(
            rng.choice([500, 1000, 2000]))
    raise ValueError(variant)


def _broker_request(variant: str, rng: random.Random) -> tuple[bytes | None, bytes | None]:
    """(application-properties, body) of a hostile request to Artemis's management address, both encoded."""
    missing = f"fuzz-missing-{rng.getrandbits(32):08x}"
    res, op_key, attr_key = "_AMQ_ResourceName", "_AMQ_OperationName", "_AMQ_Attribute"

    def args(*values) -> bytes:
        return c.string(json.dumps(list(values)))

    if variant == "op-missing":
        return _amqp_map([(res, c.string("broker"))]), args()
    if variant == "op-wrong-type":
        op = rng.choice([c.int_(rng.randrange(1, 100)), c.list_([c.string("listQueues")]), c.binary(b"getName")])
        return _amqp_map([(res, c.string("broker")), (op_key, op)]), args()
    if variant == "op-unknown":
        op = rng.choice(["frobnicate", "", "listQueues\x00", "X" * 300, "getNoSuchThing", "is"])
        return _amqp_map([(res, c.string("broker")), (op_key, c.string(op))]), args()
    if variant == "resource-wrong-type":
        return _amqp_map([(res, _mgmt_wrong(rng)), (op_key, c.string("listQueues"))]), args("", 1, 10)
    if variant == "attribute-wrong-type":
        return _amqp_map([(res, c.string("broker")), (attr_key, _mgmt_wrong(rng))]), None
    if variant == "args-wrong-type":
        values = rng.choice([[7], [[], {}], [None, "x", 3], [{"name": "orders"}], [1.5, True, False]])
        return _amqp_map([(res, c.string("broker")), (op_key, c.string("destroyQueue"))]), args(*values)
    if variant == "name-huge":
        name = rng.choice("abcxyz") * HUGE_NAME
        which = rng.choice(["resource", "attribute", "argument"])
        if which == "resource":
            return _amqp_map([(res, c.string("queue." + name, wide=True)),
                              (attr_key, c.string("messageCount"))]), None
        if which == "attribute":
            return _amqp_map([(res, c.string("broker")), (attr_key, c.string(name, wide=True))]), None
        return _amqp_map([(res, c.string("broker")), (op_key, c.string("destroyQueue"))]), c.string(
            json.dumps([name]), wide=True)
    if variant == "body-huge":
        size = rng.choice([HUGE_NAME, 4 * HUGE_NAME])
        body = rng.choice([lambda: c.string(json.dumps(["q" * 50] * (size // 54)), wide=True),
                           lambda: c.binary(rng.randbytes(size), wide=True)])()
        return _amqp_map([(res, c.string("broker")), (op_key, c.string("destroyQueue"))]), body
    if variant == "create-wrong-arg-types":
        op = rng.choice(["createQueue", "createAddress", "deployQueue"])
        return _amqp_map([(res, c.string("broker")), (op_key, c.string(op))]), args(
            {"name": 7}, [missing], None, -1, "ANYCAST")
    if variant == "read-missing":
        kind = rng.choice(["queue.", "address.", "brokerconnection."])
        return _amqp_map([(res, c.string(kind + missing)), (attr_key, c.string("messageCount"))]), None
    if variant == "update-missing":
        if rng.random() < 0.5:
            return _amqp_map([(res, c.string("brokerconnection." + missing)), (op_key, c.string("start"))]), args()
        return _amqp_map([(res, c.string("broker")), (op_key, c.string("startBrokerConnection"))]), args(missing)
    if variant == "delete-missing":
        return _amqp_map([(res, c.string("broker")), (op_key, c.string("destroyQueue"))]), args(
            missing, *rng.choice([[], [True], [True, True]]))
    if variant == "body-not-json":
        body = rng.choice([c.string("[1, 2"), c.string("{\"a\": 1}"), c.string("not json at all"),
                           c.binary(b"[\"\"]"), c.map_([(c.string("a"), c.uint(1))]), c.string("\"text\""),
                           c.uint(5)])
        return _amqp_map([(res, c.string("broker")), (op_key, c.string("listQueues"))]), body
    if variant == "properties-not-a-map":
        props = rng.choice([c.list_([c.string(res), c.string("broker")]), c.string("_AMQ_ResourceName=broker"),
                            c.binary(b"\xd1\x00"), c.null(), c.uint(1), c.symbols([res, "broker"])])
        return props, args()
    if variant == "no-reply-to":
        return _amqp_map([(res, c.string("queue." + missing)), (attr_key, c.string("messageCount"))]), None
    if variant == "body-deep":
        if rng.random() < 0.5:
            depth = rng.choice([500, 1000, 2000])
            return _amqp_map([(res, c.string("broker")), (op_key, c.string("destroyQueue"))]), _nested_maps(depth)
        depth = rng.choice([1000, 10000, 100000])
        return _amqp_map([(res, c.string("broker")), (op_key, c.string("destroyQueue"))]), c.string(
            "[" * depth + "]" * depth, wide=True)
    raise ValueError(variant)


def fam_management(rng: random.Random, ctx: Context) -> Case:
    """Hostile requests to the management node (the router's `$management`, the broker's `activemq.management`)
    on an otherwise valid session: a receiver on a reply address of the case's own (credit 10), a sender to the
    node, one request that is malformed (operation missing or of the wrong type or unknown, type/name/identity
    of wrong types, a 64 KiB name, a huge body, CREATE of a type the schema has not or with attributes of wrong
    types, READ/UPDATE/DELETE of an entity that does not exist, a body that is not a map (router) or not JSON
    (broker), application properties that are not a map, no reply-to, maps nested deep in the body, a request
    in many transfers that is aborted), a pause for the answer, then close. The server must answer with an
    error status (or reject the delivery) and go on serving (`Case.expect`; harness/fuzz/mgmt_answer.py)."""
    role = ctx.role if ctx.role in MGMT_VARIANTS else "router"
    variant = rng.choice(MGMT_VARIANTS[role])
    reply = f"{ctx.address}.mgmt-reply.{rng.getrandbits(48):012x}"  # the case's own: no other case's answers
    build = _router_request if role == "router" else _broker_request
    node = ctx.management_node
    setup = (prefix(ctx, "begin")
             + _attach(ctx, handle=1, name="fuzz-mgmt-reply", receiver=True,
                       source=c.composite("source", address=reply), target=c.composite("target"))
             + c.amqp_frame("flow", next_incoming_id=0, incoming_window=100, next_outgoing_id=0,
                            outgoing_window=100, handle=1, delivery_count=0, link_credit=10)
             + _attach(ctx, handle=0, name="fuzz-mgmt", receiver=False, source=c.composite("source"),
                       target=c.composite("target", address=node)))
    expect = EXPECT_ERROR
    if variant == "split-aborted":
        # a request in many small transfers, aborted; then one the node must answer (the link still serves)
        props, body = build("read-missing", rng)
        big = _mgmt_message(props, c.binary(rng.randbytes(rng.choice([2000, 20000, 60000])), wide=True), reply, 1)
        hostile = _transfers(big, delivery_id=0, tag=b"m0", chunk=rng.choice([16, 256, 4000]), abort=True)
        hostile += _transfers(_mgmt_message(props, body, reply, 2), delivery_id=1, tag=b"m1")
    else:
        props, body = build(variant, rng)
        if variant == "no-reply-to":
            reply_to, expect = None, EXPECT_NO_REPLY
        else:
            reply_to = reply
        hostile = _transfers(_mgmt_message(props, body, reply_to, 1), delivery_id=0, tag=b"m0")
    # the pause after the links: the request must not reach the server before its begin, attach and credit have
    # gone out (proton ends a session whose peer transfers before it has sent its incoming window); a pause, not
    # an "await", so that the case replays from crashers.yaml's steps as it was played
    return Case("management", f"management.{variant}",
                [("send", setup), ("pause", MGMT_SETUP_S), ("send", hostile), ("pause", MGMT_ANSWER_S),
                 ("send", c.amqp_frame("close"))], expect=expect)


FAMILY_FUNCS: dict[str, Callable[[random.Random, Context], Case]] = {
    "mutate": fam_mutate, "header": fam_header, "frame-size": fam_frame_size, "doff": fam_doff,
    "frame-type": fam_frame_type, "truncated": fam_truncated, "open-fields": fam_open_fields,
    "channels": fam_channels, "links": fam_links, "disposition-flow": fam_disposition_flow,
    "nesting": fam_nesting, "counts": fam_counts, "types": fam_types, "utf8": fam_utf8, "sasl": fam_sasl,
    "trickle": fam_trickle, "silence": fam_silence, "flood": fam_flood, "many": fam_many,
    "management": fam_management,
}
# The default rotation. `management` (issue 55) is asked for by name (`--family management`): in the rotation it would
# change every fixed-seed session's cases, and the findings recorded against them
# (harness/vendors/<vendor>/expected.yaml, `fuzz:`).
OPT_IN_FAMILIES = ["management"]
FAMILIES = [name for name in FAMILY_FUNCS if name not in OPT_IN_FAMILIES]


# ---- TLS (a secured target only) -----------------------------------------------------------------------------
def _client_hello() -> bytes:
    """A real ClientHello as Python's ssl writes it (its random differs per call; the case keeps its bytes)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def fam_tls_handshake(rng: random.Random, ctx: Context) -> Case:
    """Garbage inside TLS handshake records: a ClientHello cut short, with bytes flipped, with a record
    length far past what follows, records of unknown types, or a good ClientHello followed by junk."""
    hello = _client_hello()
    kind = rng.choice(["truncated", "flipped", "oversized-record", "unknown-record-type", "hello-then-junk",
                       "empty-records"])
    if kind == "truncated":
        data = hello[:rng.randrange(1, len(hello))]
    elif kind == "flipped":
        raw = bytearray(hello)
        for _ in range(rng.randrange(1, 8)):
            raw[rng.randrange(5, len(raw))] ^= 1 << rng.randrange(8)
        data = bytes(raw)
    elif kind == "oversized-record":
        data = hello[:3] + struct.pack(">H", rng.choice([0x4001, 0xFFFF])) + hello[5:]
    elif kind == "unknown-record-type":
        data = bytes([0x16]) + hello[1:] + bytes([rng.choice([0x00, 0x19, 0x7F, 0xFF]), 3, 3, 0, 4]) + b"junk"
    elif kind == "hello-then-junk":
        data = hello + bytes(rng.randrange(256) for _ in range(rng.choice([16, 300, 5000])))
    else:
        data = bytes([0x16, 3, 1, 0, 0]) * rng.choice([10, 1000])
    return Case("tls-handshake", f"tls-handshake.{kind}", [("send", data)])


def fam_in_tls(rng: random.Random, ctx: Context) -> Case:
    """A real TLS session carrying a hostile stream of another family: what reaches SASL and AMQP through TLS."""
    family = rng.choice(["mutate", "sasl", "header", "frame-size", "truncated", "links", "flood"])
    inner = FAMILY_FUNCS[family](rng, ctx)
    return Case("in-tls", f"in-tls.{inner.name}", inner.steps, tls=True)


TLS_FAMILY_FUNCS: dict[str, Callable[[random.Random, Context], Case]] = {
    "tls-handshake": fam_tls_handshake, "in-tls": fam_in_tls,
}
TLS_FAMILIES = list(TLS_FAMILY_FUNCS)


def generate(seed: int, index: int, ctx: Context, families: list[str] | None = None) -> Case:
    """Case number `index` of the session with `seed`: families take turns, the rest is drawn from a
    generator seeded by (seed, index) alone, so any case can be rebuilt without the ones before it."""
    names = families or FAMILIES
    funcs = {**FAMILY_FUNCS, **TLS_FAMILY_FUNCS}
    unknown = [f for f in names if f not in funcs]
    if unknown:
        raise ValueError(f"unknown fuzz family {unknown[0]!r}: expected one of {', '.join(funcs)}")
    rng = random.Random(f"frames:{seed}:{index}")
    family = names[index % len(names)]
    case = funcs[family](rng, ctx)
    case.family, case.index = family, index
    return case
