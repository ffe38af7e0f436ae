"""Link capabilities for a server on proton-C 0.40, whose engine neither sends nor reports them.

An attach (AMQP 1.0 §2.7.3) carries `offered-capabilities` (field 11) and `desired-capabilities` (field 12) of
the link itself, apart from the capabilities of its source and target. ActiveMQ Artemis announces a mirror with
them (002_f23507c2891d6d06.txt "Mirroring": its mirror sender desires `amq.mirror` and wants it offered back),
but proton-C 0.40 has no API for either field: it always writes them null and drops the peer's.

So the event loop taps the byte stream of each connection (`AttachTap`): on the way in it keeps the link
capabilities of the peer's attach frames that carry any; on the way out it writes the capabilities a handler
asked for into the attach frame proton produces for that link. Every other frame passes untouched, and only
the frame boundaries are followed (four bytes read per frame), so the cost per transfer is small.

Handlers use `remote_capabilities(link)` and `set_capabilities(link, offered, desired)` (before the link's
attach is written: call it before `link.open()`).

proton-C 0.40 also reads a source or target that is present but empty (no address, not dynamic: what a client's
sender attaches with) as no terminus at all (`Terminus.UNSPECIFIED`), and so writes it back as null. A router
that passes an attach on (a link route, 003 §12.2) would drop it: Qpid Broker-J refuses a sender attach with a
null source (amqp:invalid-field "received Attach with remote null terminus"), which the client never sent. So the
tap also notes, for the peer's attaches, which termini were present (`remote_termini(link)`); `copy_terminus`
copies one with that knowledge. A tap made with `writes=False` only reads (the router's: it rewrites nothing).
"""

from __future__ import annotations

import logging
import struct

from proton import UNDESCRIBED, Array, Data, Described, Terminus, symbol, ulong

log = logging.getLogger("SERVER")

_ATTACH = 0x12
_PROTOCOL_HEADER = b"AMQP"
_FRAME_HEADER = struct.Struct(">IBB")  # size, data offset, type
_SOURCE, _TARGET, _OFFERED, _DESIRED = 5, 6, 11, 12
_TERMINI_KEPT = 256  # termini noted per connection and not yet asked for (each is asked for in the attach's turn)


def _performative_code(buf, body: int, end: int) -> int | None:
    """The descriptor of the performative at `body` (small-ulong or ulong form) when it lies before `end`."""
    if end - body < 3 or buf[body] != 0x00:
        return None
    if buf[body + 1] == 0x53:
        return buf[body + 2]
    if buf[body + 1] == 0x80 and end - body >= 10:
        return int.from_bytes(buf[body + 2:body + 10], "big")
    return None


def _symbols(value) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, Array):
        return frozenset(str(v) for v in value.elements)
    if isinstance(value, (list, tuple)):
        return frozenset(str(v) for v in value)
    return frozenset({str(value)})


class _FrameWalker:
    """Follows AMQP frame boundaries in one direction of a byte stream (protocol headers included)."""

    def __init__(self):
        self.skip = 0  # bytes of the current (uninteresting) frame still to come
        self.held = b""  # the start of a frame that is needed whole, or a header too short to read


class AttachTap:
    """One connection's tap; see the module docstring."""

    def __init__(self, writes: bool = True):
        self.writes = writes  # False: the loop sends its output past the tap untouched
        self._in = _FrameWalker()
        self._out = _FrameWalker()
        self.remote: dict[tuple[str, bool], tuple[frozenset, frozenset]] = {}  # (name, remote is receiver)
        self.termini: dict[tuple[str, bool], tuple[bool, bool]] = {}  # the same key -> (source, target) present
        self.local: dict[tuple[str, bool], tuple[tuple, tuple]] = {}  # (name, we are receiver) -> to write
        self.broken = False  # the stream did not parse as frames: stop looking (proton reports the error)

    # ---- incoming ----------------------------------------------------------------------------------------

    def feed_in(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            self._walk(self._in, data, self._read_attach, wanted=lambda buf, body: True)
        except Exception:  # noqa: BLE001 - hostile bytes must never stop the server: stop looking instead
            log.exception("Attach tap: cannot follow the incoming frames; link capabilities are off for it")
            self.broken = True

    def _read_attach(self, frame: bytes, body: int) -> bytes:
        fields = _decode_list(frame[body:])
        if fields is None:
            return frame
        key = (str(fields[0]), bool(fields[2]))
        offered = _symbols(fields[_OFFERED]) if len(fields) > _OFFERED else frozenset()
        desired = _symbols(fields[_DESIRED]) if len(fields) > _DESIRED else frozenset()
        if offered or desired:
            self.remote[key] = (offered, desired)
        present = tuple(len(fields) > i and fields[i] is not None for i in (_SOURCE, _TARGET))
        if any(present):
            if len(self.termini) >= _TERMINI_KEPT:  # never asked for (a handler that does not pass attaches on)
                self.termini.pop(next(iter(self.termini)))
            self.termini[key] = present
        return frame

    # ---- outgoing ----------------------------------------------------------------------------------------

    def feed_out(self, data: bytes) -> bytes:
        """The bytes to send for `data` taken from the transport: attach frames rewritten where asked."""
        if self.broken:
            return data
        out: list[bytes] = []
        whole = self._out.held + data  # what goes out unchanged should the walk fail
        try:
            self._walk(self._out, data, self._write_attach, out=out, wanted=self._wants_rewrite)
        except Exception:  # noqa: BLE001 - our own frames: a bug here must not cost the connection its output
            log.exception("Attach tap: cannot follow the outgoing frames; sending them as they are")
            self.broken = True
            self._out.held = b""
            return whole
        return b"".join(out)

    def _wants_rewrite(self, _buf, _body) -> bool:
        return bool(self.local)

    def _write_attach(self, frame: bytes, body: int) -> bytes:
        fields = _decode_list(frame[body:])
        if fields is None:
            return frame
        key = (str(fields[0]), bool(fields[2]))
        caps = self.local.pop(key, None)
        if caps is None:
            return frame
        fields += [None] * (_DESIRED + 1 - len(fields))
        for index, values in ((_OFFERED, caps[0]), (_DESIRED, caps[1])):
            if values:
                # UNDESCRIBED, not None: a None descriptor encodes each element as described by null (`00 40 b3`),
                # which proton-j (Artemis) refuses with decode-error "Incorrect type used"
                fields[index] = Array(UNDESCRIBED, Data.SYMBOL, *[symbol(v) for v in values])
        data = Data()
        data.put_object(Described(ulong(_ATTACH), fields))
        performative = data.encode()
        header = bytearray(frame[:body])
        header[0:4] = (body + len(performative)).to_bytes(4, "big")
        return bytes(header) + performative

    # ---- frames --------------------------------------------------------------------------------------------

    def _walk(self, walker: _FrameWalker, data: bytes, on_attach, out: list | None = None, wanted=None) -> None:
        """Pass `data` on (to `out` when given), calling `on_attach(frame, body_offset) -> frame` on each whole
        attach frame when `wanted` says so; frames that end in a later chunk are held until they are whole."""
        buf = walker.held + data if walker.held else data
        walker.held = b""
        pos, end = 0, len(buf)
        if walker.skip:
            step = min(walker.skip, end)
            walker.skip -= step
            if out is not None:
                out.append(buf[:step])
            pos = step
        start = pos  # bytes from `start` to `pos` pass on unchanged
        header = _FRAME_HEADER.unpack_from
        while pos < end:
            if end - pos < 8:
                break
            if buf.startswith(_PROTOCOL_HEADER, pos):
                pos += 8
                continue
            # one unpack per frame: the tap reads every frame of every connection, transfers above all
            size, doff, ftype = header(buf, pos)
            body = doff * 4
            if size < 8 or body < 8 or body > size:
                self.broken = True  # not AMQP framing: pass everything on, proton will say what is wrong
                pos = end
                break
            if size > body and end - pos < min(size, body + 10):
                break  # the performative's descriptor is not here yet
            at = pos + body
            if ftype != 0 or size <= body:
                code = None
            elif size - body >= 3 and buf[at] == 0x00 and buf[at + 1] == 0x53:  # the small-ulong form all engines write
                code = buf[at + 2]
            else:
                code = _performative_code(buf, at, min(end, pos + size))
            if code == _ATTACH and wanted(buf, pos + body):
                if end - pos < size:
                    break  # hold it until the whole attach is here
                frame = bytes(buf[pos:pos + size])
                changed = on_attach(frame, body)
                if out is not None:
                    out.append(buf[start:pos])
                    out.append(changed)
                pos += size
                start = pos
                continue
            if end - pos >= size:
                pos += size
            else:
                walker.skip = size - (end - pos)
                pos = end
        if out is not None:
            out.append(buf[start:pos])
        if pos < end:
            walker.held = bytes(buf[pos:])


def _decode_list(performative: bytes) -> list | None:
    try:
        data = Data()
        data.decode(performative)
        data.rewind()
        data.next()
        value = data.get_object()
    except Exception as exc:  # noqa: BLE001 - a malformed attach is proton's to refuse, not ours
        log.debug("Cannot read an attach's capabilities: %s", exc)
        return None
    fields = getattr(value, "value", None)
    return list(fields) if isinstance(fields, list) and len(fields) >= 3 else None


# ---- what handlers call ----------------------------------------------------------------------------------------


def remote_capabilities(link) -> tuple[frozenset, frozenset]:
    """(offered, desired) link capabilities of the peer's attach of `link` (empty when it sent none)."""
    tap = getattr(link.connection, "loop_tap", None)
    if tap is None:
        return frozenset(), frozenset()
    # The peer's attach says its own role: receiver (true) for a link we send on.
    return tap.remote.pop((link.name, bool(link.is_sender)), (frozenset(), frozenset()))


def set_capabilities(link, offered=(), desired=()) -> None:
    """Write `offered` / `desired` link capabilities into our attach of `link` (call before it is written)."""
    tap = getattr(link.connection, "loop_tap", None)
    if tap is None:
        raise RuntimeError("link capabilities need the event loop's attach tap (EngineLoop(link_capabilities=True))")
    tap.local[(link.name, bool(link.is_receiver))] = (tuple(offered), tuple(desired))


def remote_termini(link) -> tuple[bool, bool] | None:
    """(source present, target present) in the peer's attach of `link`; None when no tap saw it."""
    tap = getattr(link.connection, "loop_tap", None)
    if tap is None:
        return None
    return tap.termini.pop((link.name, bool(link.is_sender)), None)


def copy_termini(to_link, from_link, present: tuple[bool, bool] | None) -> None:
    """Copy the source and target of the peer's attach of `from_link` into `to_link`'s own, keeping each one the
    peer sent that proton-C read as none (present but empty; see the module docstring). `present` is what
    remote_termini(from_link) said (None: not known, copied as proton read it)."""
    source, target = present or (False, False)
    for mine, theirs, kind, sent in ((to_link.source, from_link.remote_source, Terminus.SOURCE, source),
                                     (to_link.target, from_link.remote_target, Terminus.TARGET, target)):
        mine.copy(theirs)
        if sent and theirs.type == Terminus.UNSPECIFIED:
            mine.type = kind
