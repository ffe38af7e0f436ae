"""Checks a client's SASL frames before proton's engine sees them.

proton-C 0.40 (the core bundled with python-qpid-proton) dereferences a SASL `init` frame's `mechanism`
without checking that it is there: a 23-byte frame whose mandatory field is null kills the whole process with
SIGSEGV, every other connection with it. A reference peer must answer bad input on one connection and go on
serving the others, so the event loop owns its sockets and hands each client's bytes to the transport only
after this guard has seen them.

The guard follows the start of the byte stream (AMQP 1.0 part 5 §5.3: a SASL protocol header, SASL frames,
then the AMQP protocol header) and checks each SASL frame a client may send (§5.3.3: `sasl-init`,
`sasl-response`): a frame header that can be right, a described list with the fields' AMQP types, mandatory
fields present. Once the client has moved on to the AMQP header (or started without SASL) the guard steps
aside; it costs nothing per message after the handshake.

A violation is a string saying what was wrong; the loop logs it and closes the socket (a SASL layer has no
performative to carry an error, §5.3.3.6's codes are for authentication outcomes).
"""

from __future__ import annotations

import struct

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
PROTOCOL_PREFIX = b"AMQP"
FRAME_HEADER = 8
SASL_FRAME_TYPE = 1
# A bound on how much the guard buffers for one SASL frame. SASL frames carry a mechanism name, a hostname and
# a credentials blob; 64 KiB covers real tokens and keeps a hostile length from reserving memory.
MAX_SASL_FRAME = 65536

# §5.3.3: descriptor codes of the SASL frames a client sends, and their fields (name, AMQP types, mandatory).
_SASL_INIT, _SASL_RESPONSE = 0x41, 0x43
_SASL_NAMES = {0x40: "sasl-mechanisms", 0x41: "sasl-init", 0x42: "sasl-challenge", 0x43: "sasl-response",
               0x44: "sasl-outcome"}
_SYMBOL_DESCRIPTORS = {f"amqp:{name}:list".encode(): code for code, name in _SASL_NAMES.items()}
_FIELDS = {
    _SASL_INIT: (("mechanism", ("symbol",), True), ("initial-response", ("binary",), False),
                 ("hostname", ("string",), False)),
    _SASL_RESPONSE: (("response", ("binary",), True),),
}

# Type codes of the encodings the guard reads (AMQP 1.0 part 1 §1.6): code -> (type, width of the length).
_VARIABLE = {0xA0: ("binary", 1), 0xB0: ("binary", 4), 0xA1: ("string", 1), 0xB1: ("string", 4),
             0xA3: ("symbol", 1), 0xB3: ("symbol", 4)}
_FIXED = {0x40: ("null", 0), 0x41: ("boolean", 0), 0x42: ("boolean", 0), 0x56: ("boolean", 1),
          0x50: ("ubyte", 1), 0x60: ("ushort", 2), 0x70: ("uint", 4), 0x52: ("uint", 1), 0x43: ("uint", 0),
          0x80: ("ulong", 8), 0x53: ("ulong", 1), 0x44: ("ulong", 0), 0x51: ("byte", 1), 0x61: ("short", 2),
          0x71: ("int", 4), 0x54: ("int", 1), 0x81: ("long", 8), 0x55: ("long", 1), 0x72: ("float", 4),
          0x82: ("double", 8), 0x83: ("timestamp", 8), 0x98: ("uuid", 16), 0x73: ("char", 4)}
_COMPOUND = {0xC0: 1, 0xD0: 4, 0xC1: 1, 0xD1: 4, 0xE0: 1, 0xF0: 4}  # lists, maps, arrays: width of size


class _Bad(Exception):
    pass


class SaslGuard:
    """Feed it each chunk a client sent, in order; `check` returns None while the stream is fine, else what
    is wrong. `done` turns true once the stream has left the SASL layer."""

    def __init__(self) -> None:
        self._buffer = b""
        self._state = "header"  # header -> frames -> done
        self.done = False

    def check(self, data: bytes) -> str | None:
        if self.done:
            return None
        self._buffer += data
        try:
            self._consume()
        except _Bad as bad:
            self.done = True  # the connection is dropped: nothing more to follow
            self._buffer = b""
            return str(bad)
        return None

    def _consume(self) -> None:
        while not self.done:
            buffer = self._buffer
            if self._state == "header":
                if len(buffer) < len(SASL_HEADER):
                    if not SASL_HEADER.startswith(buffer):
                        self._step_aside()  # not SASL (AMQP or TLS, or garbage): proton judges it
                    return
                if buffer[:8] != SASL_HEADER:
                    self._step_aside()
                    return
                self._buffer, self._state = buffer[8:], "frames"
                continue
            if len(buffer) < 4:
                return
            if buffer[:4] == PROTOCOL_PREFIX:  # the next protocol header (AMQP after SASL): handshake over
                self._step_aside()
                return
            size = struct.unpack(">I", buffer[:4])[0]
            if size < FRAME_HEADER:
                raise _Bad(f"SASL frame size {size} is below the frame header's 8 bytes (AMQP 1.0 §2.3.1)")
            if size > MAX_SASL_FRAME:
                raise _Bad(f"SASL frame size {size} is over {MAX_SASL_FRAME} bytes")
            if len(buffer) < size:
                return
            self._check_frame(buffer[:size])
            self._buffer = buffer[size:]

    def _step_aside(self) -> None:
        self.done = True
        self._buffer = b""

    def _check_frame(self, frame: bytes) -> None:
        doff, frame_type = frame[4], frame[5]
        if frame_type != SASL_FRAME_TYPE:
            raise _Bad(f"frame type {frame_type} during SASL negotiation (expected 1, AMQP 1.0 §5.3.1)")
        if doff < 2 or doff * 4 > len(frame):
            raise _Bad(f"SASL frame data offset {doff} does not fit its {len(frame)} bytes (AMQP 1.0 §2.3.1)")
        body = frame[doff * 4:]
        if not body:
            return  # an empty frame: nothing to hand to the SASL layer, harmless
        _Reader(body).performative()


class _Reader:
    """A strict reader for one SASL performative: descriptor, list, then the fields' types."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise _Bad("SASL frame body ends inside a value (AMQP 1.0 §1.6)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def _int(self, width: int) -> int:
        return int.from_bytes(self._take(width), "big") if width else 0

    def performative(self) -> tuple[int, list[tuple[str, bytes]]]:
        code, values = self.any_performative()
        name = _SASL_NAMES.get(code)
        if code not in _FIELDS:
            raise _Bad(f"a client may not send {name or f'descriptor 0x{code:x}'} (AMQP 1.0 §5.3.3)")
        for index, (field, types, mandatory) in enumerate(_FIELDS[code]):
            kind = values[index][0] if index < len(values) else "null"
            if kind == "null":
                if mandatory:
                    raise _Bad(f"{name}: mandatory field {field} is null or missing (AMQP 1.0 §5.3.3)")
                continue
            if kind not in types:
                raise _Bad(f"{name}: field {field} is a {kind}, expected {' or '.join(types)} (AMQP 1.0 §5.3.3)")
            if kind == "string":
                _utf8(values[index][1], f"{name}: field {field}")
            if kind == "symbol" and not values[index][1].isascii():
                raise _Bad(f"{name}: field {field} is a symbol with non-ASCII bytes (AMQP 1.0 §1.6.20)")
        return code, values

    def any_performative(self) -> tuple[int, list[tuple[str, bytes]]]:
        """The descriptor code and the fields (type name, encoded bytes) of any SASL performative."""
        if self._take(1) != b"\x00":
            raise _Bad("SASL frame body is not a described type (AMQP 1.0 §5.3.3)")
        code = self._descriptor()
        return code, self._list(_SASL_NAMES.get(code) or f"descriptor 0x{code:x}")

    def _descriptor(self) -> int:
        code = self._take(1)[0]
        if code in (0x53, 0x80, 0x44):
            return self._int(_FIXED[code][1])
        if code in (0xA3, 0xB3):
            return _SYMBOL_DESCRIPTORS.get(self._take(self._int(_VARIABLE[code][1])), -1)
        raise _Bad(f"SASL frame descriptor has type code 0x{code:02x} (expected a ulong or a symbol)")

    def _list(self, name: str) -> list[tuple[str, bytes]]:
        code = self._take(1)[0]
        if code == 0x45:
            return []
        if code not in (0xC0, 0xD0):
            raise _Bad(f"{name}: body is type code 0x{code:02x}, expected a list (AMQP 1.0 §5.3.3)")
        width = _COMPOUND[code]
        size = self._int(width)
        end = self.pos + size
        if end > len(self.data) or size < width:
            raise _Bad(f"{name}: list size {size} does not fit the frame (AMQP 1.0 §1.6.22)")
        count = self._int(width)
        values = [self._value(name) for _ in range(count)]
        if self.pos != end:
            raise _Bad(f"{name}: list of {count} field(s) does not fill its size {size} (AMQP 1.0 §1.6.22)")
        return values

    def _value(self, name: str) -> tuple[str, bytes]:
        code = self._take(1)[0]
        if code in _VARIABLE:
            kind, width = _VARIABLE[code]
            return kind, self._take(self._int(width))
        if code in _FIXED:
            kind, width = _FIXED[code]
            return kind, self._take(width)
        if code in _COMPOUND:
            width = _COMPOUND[code]
            kind = f"array{width}" if code in (0xE0, 0xF0) else "compound"  # sasl-mechanisms has an array
            return kind, self._take(self._int(width))
        raise _Bad(f"{name}: field has type code 0x{code:02x}, which SASL frames do not use")


class SaslFrameError(ValueError):
    """A SASL frame that cannot be read (what the message says)."""


def decode_frame(frame: bytes, *, from_client: bool) -> tuple[int, list[tuple[str, bytes]]]:
    """One whole SASL frame -> (descriptor code, fields as (type name, encoded bytes)). A client's frames get the
    guard's full checks; a server's (read by the loop's own SASL client) only need to be readable."""
    if len(frame) < FRAME_HEADER or frame[5] != SASL_FRAME_TYPE or frame[4] < 2 or frame[4] * 4 > len(frame):
        raise SaslFrameError("not a SASL frame (AMQP 1.0 §5.3.1)")
    reader = _Reader(frame[frame[4] * 4:])
    try:
        return reader.performative() if from_client else reader.any_performative()
    except _Bad as bad:
        raise SaslFrameError(str(bad)) from None


def _utf8(raw: bytes, what: str) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad(f"{what} is not valid UTF-8 (AMQP 1.0 §1.6.20)") from None
