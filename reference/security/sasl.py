"""The SASL exchange the event loop performs itself (AMQP 1.0 part 5 §5.3).

proton here is built without Cyrus (`proton.SASL.extended()` is False): its server side offers ANONYMOUS and
EXTERNAL but cannot check a PLAIN password against a user store, and its client side offers EXTERNAL only
when its own TLS layer supplied the identity. The loop owns its sockets (reference/loop.py) and its TLS
(tls.py), so it runs the few single-step mechanisms the reference needs here, on the bytes between TLS and
proton's transport, and hands the transport the AMQP byte stream once the outcome is `ok`:

* `SaslServer`: sends sasl-mechanisms, checks sasl-init (PLAIN against the users; ANONYMOUS only when
  authentication is off; EXTERNAL from the TLS client certificate's subject CN), sends sasl-outcome `ok` or
  `auth` (§5.3.3.6). On `auth` the loop closes the socket once the outcome is out.
* `SaslClient`: the dialler's side, for EXTERNAL (proton's own client handles ANONYMOUS and PLAIN).

Only single-step mechanisms exist here, so neither side ever sends sasl-challenge.
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass, field

from ..sasl_guard import FRAME_HEADER, MAX_SASL_FRAME, SASL_HEADER, SaslFrameError, SaslGuard, decode_frame

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
MECHANISMS = ("ANONYMOUS", "PLAIN", "EXTERNAL")
OK, AUTH = 0, 1  # sasl-code values (§5.3.3.6)
_INIT, _MECHANISMS, _OUTCOME = 0x41, 0x40, 0x44


@dataclass(frozen=True)
class SaslPolicy:
    """What a listener accepts. `mechanisms`: offered, in order; `authenticate`: ANONYMOUS is refused and a
    client that skips SASL is refused; `users`: name -> password for PLAIN."""

    mechanisms: tuple[str, ...] = ("ANONYMOUS",)
    authenticate: bool = False
    users: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        unknown = [m for m in self.mechanisms if m not in MECHANISMS]
        if unknown:
            raise ValueError(f"unknown SASL mechanism(s) {unknown}: expected some of {list(MECHANISMS)}")
        if not self.mechanisms:
            raise ValueError("a SASL policy needs at least one mechanism")


def frame(body: bytes) -> bytes:
    """One SASL frame (type 1, channel 0) around an encoded performative."""
    return struct.pack(">IBBH", FRAME_HEADER + len(body), 2, 1, 0) + body


def _list(descriptor: int, fields: bytes, count: int) -> bytes:
    if len(fields) + 1 > 255:
        return b"\x00\x53" + bytes([descriptor]) + b"\xd0" + struct.pack(">II", len(fields) + 4, count) + fields
    return b"\x00\x53" + bytes([descriptor, 0xC0, len(fields) + 1, count]) + fields


def _symbol(text: str) -> bytes:
    raw = text.encode("ascii")
    return b"\xa3" + bytes([len(raw)]) + raw


def mechanisms_frame(mechanisms: tuple[str, ...]) -> bytes:
    names = b"".join(bytes([len(m)]) + m.encode("ascii") for m in mechanisms)
    array = b"\xe0" + bytes([len(names) + 2, len(mechanisms), 0xA3]) + names  # an array of symbols
    return frame(_list(_MECHANISMS, array, 1))


def outcome_frame(code: int) -> bytes:
    return frame(_list(_OUTCOME, b"\x50" + bytes([code]), 1))


def init_frame(mechanism: str, response: bytes | None) -> bytes:
    fields = _symbol(mechanism)
    if response is not None:
        fields += (b"\xa0" + bytes([len(response)]) if len(response) < 256
                   else b"\xb0" + struct.pack(">I", len(response))) + response
    return frame(_list(_INIT, fields, 2 if response is not None else 1))


class _Frames:
    """Splits a byte stream into the SASL header and whole SASL frames."""

    def __init__(self):
        self.buffer = b""

    def take(self, size: int) -> bytes | None:
        if len(self.buffer) < size:
            return None
        chunk, self.buffer = self.buffer[:size], self.buffer[size:]
        return chunk

    def next_frame(self) -> bytes | None:
        if len(self.buffer) < 4:
            return None
        size = struct.unpack(">I", self.buffer[:4])[0]
        if size < FRAME_HEADER or size > MAX_SASL_FRAME:
            raise SaslFrameError(f"SASL frame size {size} is out of bounds (AMQP 1.0 §2.3.1)")
        return self.take(size)


class _SaslSide:
    """What both sides of a connection's SASL layer share.

    `feed(data)` takes what the peer sent (plaintext) and returns the bytes that belong to the AMQP layer
    (empty until the outcome is `ok`). `take_output()` returns the frames to send. After a failure `failed`
    says why (for the log) and `feed` swallows everything. `user` is the authenticated identity."""

    def __init__(self, output: bytes = b""):
        self.frames = _Frames()
        self.state = "header"
        self.output = output
        self.user: str | None = None
        self.failed: str | None = None

    @property
    def done(self) -> bool:
        return self.state == "done"

    def take_output(self) -> bytes:
        out, self.output = self.output, b""
        return out

    def feed(self, data: bytes) -> bytes:
        if self.state == "done":
            return data
        if self.state == "failed":
            return b""
        self.frames.buffer += data
        try:
            return self._advance()
        except SaslFrameError as bad:
            self._bad_frames(bad)
            return b""

    def _rest(self) -> bytes:
        rest, self.frames.buffer = self.frames.buffer, b""
        return rest

    def _advance(self) -> bytes:
        raise NotImplementedError

    def _bad_frames(self, bad: SaslFrameError) -> None:
        raise NotImplementedError


class SaslServer(_SaslSide):
    """The server side of one connection's SASL layer (states: header -> init -> done | failed)."""

    def __init__(self, policy: SaslPolicy, peer_cn=lambda: None):
        super().__init__()
        self.policy = policy
        self.peer_cn = peer_cn  # called at sasl-init: the TLS client certificate's subject CN, or None
        self.mechanism: str | None = None

    def _bad_frames(self, bad: SaslFrameError) -> None:
        self._refuse(str(bad), send_outcome=self.state == "init")

    def _advance(self) -> bytes:
        if self.state == "header":
            header = self.frames.take(len(SASL_HEADER))
            if header is None:
                return b""
            if header == AMQP_HEADER and not self.policy.authenticate:
                self.state = "done"  # no SASL layer at all: allowed when nobody has to authenticate (§5.3.1)
                self.user = "anonymous"
                return header + self._rest()
            if header != SASL_HEADER:
                why = ("the client skipped SASL, but this listener authenticates its peers" if header == AMQP_HEADER
                       else f"expected the SASL protocol header, got {header!r}")
                # AMQP 1.0 §2.2: answer a header it will not serve with the one it would, then close
                self.output += SASL_HEADER
                self._refuse(why, send_outcome=False)
                return b""
            self.output += SASL_HEADER + mechanisms_frame(self.policy.mechanisms)
            self.state = "init"
        while self.state == "init":
            raw = self.frames.next_frame()
            if raw is None:
                return b""
            code, values = decode_frame(raw, from_client=True)
            if code != _INIT:
                raise SaslFrameError("expected sasl-init (AMQP 1.0 §5.3.2)")
            self._init(values)
        return self._rest() if self.state == "done" else b""

    def _init(self, values) -> None:
        mechanism = values[0][1].decode("ascii")
        response = values[1][1] if len(values) > 1 and values[1][0] == "binary" else None
        self.mechanism = mechanism
        if mechanism not in self.policy.mechanisms:
            self._refuse(f"mechanism {mechanism} is not offered (offered: {' '.join(self.policy.mechanisms)})")
            return
        user, why = getattr(self, "_" + mechanism.lower())(response)
        if user is None:
            self._refuse(why)
            return
        self.user, self.state = user, "done"
        self.output += outcome_frame(OK)

    def _anonymous(self, _response):
        if self.policy.authenticate:
            return None, "ANONYMOUS refused: this listener authenticates its peers"
        return "anonymous", None

    def _plain(self, response):
        # RFC 4616: [authzid] NUL authcid NUL passwd
        parts = (response or b"").split(b"\x00")
        if len(parts) != 3:
            return None, "PLAIN response is not authzid NUL authcid NUL password (RFC 4616)"
        authzid, authcid, password = (p.decode("utf-8", "replace") for p in parts)
        expected = self.policy.users.get(authcid)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return None, f"PLAIN: wrong user name or password for user {authcid!r}"
        if authzid and authzid != authcid:
            return None, f"PLAIN: user {authcid!r} may not act as {authzid!r}"
        return authcid, None

    def _external(self, response):
        cn = self.peer_cn()
        if not cn:
            return None, "EXTERNAL: the client presented no verified TLS certificate"
        wanted = (response or b"").decode("utf-8", "replace")
        if wanted and wanted != cn:
            return None, f"EXTERNAL: certificate subject {cn!r} may not act as {wanted!r}"
        return cn, None

    def _refuse(self, why: str, send_outcome: bool = True) -> None:
        self.failed, self.state = why, "failed"
        if send_outcome:
            self.output += outcome_frame(AUTH)


class SaslClient(_SaslSide):
    """The dialling side for EXTERNAL: sends the SASL header, answers sasl-mechanisms with sasl-init and waits
    for sasl-outcome (states: header -> mechanisms -> outcome -> done | failed)."""

    def __init__(self, mechanism: str = "EXTERNAL", response: bytes = b""):
        super().__init__(output=SASL_HEADER)
        self.mechanism, self.response = mechanism, response

    def _fail(self, why: str) -> bytes:
        self.failed, self.state = why, "failed"
        return b""

    def _bad_frames(self, bad: SaslFrameError) -> None:
        self._fail(f"the server's SASL frames: {bad}")

    def _advance(self) -> bytes:
        if self.state == "header":
            header = self.frames.take(len(SASL_HEADER))
            if header is None:
                return b""
            if header != SASL_HEADER:
                raise SaslFrameError(f"expected the SASL protocol header, got {header!r}")
            self.state = "mechanisms"
        while self.state in ("mechanisms", "outcome"):
            raw = self.frames.next_frame()
            if raw is None:
                return b""
            code, values = decode_frame(raw, from_client=False)
            if self.state == "mechanisms" and code == _MECHANISMS:
                offered = _symbols(values[0] if values else ("null", b""))
                if self.mechanism not in offered:
                    return self._fail(f"the server does not offer {self.mechanism} (offers {offered})")
                self.output += init_frame(self.mechanism, self.response)
                self.state = "outcome"
            elif self.state == "outcome" and code == _OUTCOME:
                outcome = values[0][1][0] if values and values[0][0] == "ubyte" else AUTH
                if outcome != OK:
                    return self._fail(f"SASL outcome {outcome} (authentication failed)")
                self.state = "done"
            elif code != 0x42:  # a challenge has nothing to answer in a single-step mechanism: ignored
                raise SaslFrameError(f"unexpected SASL performative 0x{code:x} in state {self.state}")
        return self._rest()


def _symbols(value: tuple[str, bytes]) -> list[str]:
    """A `symbol multiple` field: one symbol, or an array of symbols (8- or 32-bit widths)."""
    kind, raw = value
    if kind == "symbol":
        return [raw.decode("ascii", "replace")]
    if kind not in ("array1", "array4"):
        return []
    width = 1 if kind == "array1" else 4
    count = int.from_bytes(raw[:width], "big")
    pos, names = width + 1, []  # the constructor (0xa3 or 0xb3) follows the count
    lwidth = 1 if raw[width:width + 1] == b"\xa3" else 4
    for _ in range(count):
        size = int.from_bytes(raw[pos:pos + lwidth], "big")
        names.append(raw[pos + lwidth:pos + lwidth + size].decode("ascii", "replace"))
        pos += lwidth + size
    return names


__all__ = ["SaslPolicy", "SaslServer", "SaslClient", "SaslGuard", "MECHANISMS"]
