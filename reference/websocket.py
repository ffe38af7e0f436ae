"""AMQP over WebSocket, server side (RFC 6455; the OASIS AMQP WebSocket Binding's subprotocol `amqp`).

A listener with `http: yes` speaks HTTP/1.1 first: the client's opening handshake is a GET with
`Upgrade: websocket`, `Connection: Upgrade`, `Sec-WebSocket-Version: 13`, a `Sec-WebSocket-Key` of 16 base64
bytes and `Sec-WebSocket-Protocol` offering `amqp` (or `binary`, the alias qdrouterd also accepts). The answer
is `101 Switching Protocols` with `Sec-WebSocket-Accept` = base64(SHA-1(key + GUID)) and the chosen subprotocol.
From then on the AMQP byte stream travels in binary frames both ways: the client's masked, ours unmasked, a
message possibly fragmented, and ping/pong and the close handshake between them (RFC 6455 §5).

`WsServer` is the layer for one connection, with no socket of its own (reference/loop.py feeds it what the
socket read and sends what it has to send): `feed(bytes) -> AMQP bytes`, `send(AMQP bytes)`, `take_output()`.

Where qdrouterd (libwebsockets 4.1) is lenient the reference follows RFC 6455: a request that is not a
WebSocket upgrade, a bad key, version or subprotocol gets an HTTP error answer and the connection closes; a frame
that breaks §5 (unmasked, reserved bits, an unknown opcode, a fragmented or long control frame, a text message:
the binding carries AMQP in binary messages) gets a close frame with status 1002/1003/1007 and the connection
closes. A plain AMQP client on such a listener gets an HTTP error too, as on qdrouterd.

Besides the upgrade an `http: yes` listener answers the liveness check qdrouterd documents for it (listener
attribute `healthz`, default yes): `GET /healthz` gets 200 and `OK`, then the connection closes. With
`websockets: no` (`HttpOptions.websockets`) an upgrade is refused with 403 (RFC 6455 §4.2.2: a server that does
not accept the connection answers with an HTTP error such as 403), and /healthz is still answered. Other plain
requests get 404: the reference serves no console files and no /metrics.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3
SUBPROTOCOLS = ("amqp", "binary")  # the binding's name first; "binary": qdrouterd's alias for WebSocket proxies
MAX_REQUEST = 16384  # bytes of request line and headers

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_UNSUPPORTED = 1003
CLOSE_INVALID_DATA = 1007
CLOSE_POLICY = 1008
_CLOSE_CODES_OK = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014}

_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            426: "Upgrade Required", 431: "Request Header Fields Too Large"}


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 §4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


def frame(opcode: int, payload: bytes = b"", *, fin: bool = True, mask: bytes | None = None) -> bytes:
    """One frame. Servers send unmasked frames; `mask` (4 bytes) makes a client's frame."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    bit = 0x80 if mask is not None else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([bit | 127]) + struct.pack(">Q", n)
    if mask is None:
        return head + payload
    return head + mask + unmask(payload, mask, 0)


def unmask(data: bytes, key: bytes, offset: int) -> bytes:
    """XOR `data` with the 4-byte masking key, starting at byte `offset` of the payload (§5.3)."""
    if not data:
        return data
    rot = offset % 4
    key = key[rot:] + key[:rot]
    n = len(data)
    pad = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(pad, "big")).to_bytes(n, "big")


@dataclass(frozen=True)
class HttpOptions:
    """What an `http: yes` listener serves besides AMQP over WebSocket (qdrouterd's listener attributes)."""

    websockets: bool = True  # `websockets`: the upgrade to AMQP over WebSocket is allowed
    healthz: bool = True  # `healthz`: GET /healthz answers 200 OK


def http_answer(status: int, body: bytes, extra: dict[str, str] | None = None, *, head_only: bool = False) -> bytes:
    """A whole HTTP/1.1 response that ends the connection (Connection: close)."""
    headers = {"Server": "amqp-interop-reference", "Content-Type": "text/plain; charset=utf-8",
               "Content-Length": str(len(body)), "Connection": "close", **(extra or {})}
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", *(f"{k}: {v}" for k, v in headers.items())]
    head = "\r\n".join(lines) + "\r\n"
    return head.encode("latin-1") + b"\r\n" + (b"" if head_only else body)


def http_error(status: int, why: str, extra: dict[str, str] | None = None) -> bytes:
    return http_answer(status, f"{status} {_REASONS.get(status, 'Error')}: {why}\n".encode(), extra)


def parse_request(raw: bytes) -> tuple[str, str, str, dict[str, str]]:
    """(method, target, version, headers with lower-case names) of an HTTP/1.1 request head (without the blank
    line); ValueError when it is not one. Repeated headers are joined with ', ' (RFC 7230 §3.2.2)."""
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise ValueError("not an HTTP request") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/") or not parts[0].isalpha():
        raise ValueError("not an HTTP request")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError(f"malformed header line {line[:40]!r}")
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return parts[0], parts[1], parts[2], headers


def _tokens(value: str) -> list[str]:
    return [t.strip().lower() for t in value.split(",") if t.strip()]


class HandshakeRefused(Exception):
    def __init__(self, status: int, why: str, extra: dict[str, str] | None = None):
        super().__init__(why)
        self.status, self.why, self.extra = status, why, extra


def check_upgrade(method: str, target: str, version: str, headers: dict[str, str]) -> tuple[str, str]:
    """(Sec-WebSocket-Accept, subprotocol) for a valid opening handshake (RFC 6455 §4.2.1), else
    HandshakeRefused with the HTTP status to answer."""
    upgrade = "websocket" in _tokens(headers.get("upgrade", ""))
    if not upgrade:
        # a plain HTTP request: qdrouterd would serve its console's files here; the reference serves none
        raise HandshakeRefused(404 if method in ("GET", "HEAD") else 405,
                               "this listener serves AMQP over WebSocket only (no Upgrade: websocket)")
    if method != "GET":
        raise HandshakeRefused(400, f"a WebSocket opening handshake is a GET, not {method}")
    if version == "HTTP/1.0" or not version.startswith("HTTP/1."):
        raise HandshakeRefused(400, f"a WebSocket opening handshake needs HTTP/1.1 or later, not {version}")
    if "host" not in headers:
        raise HandshakeRefused(400, "no Host header")
    if "upgrade" not in _tokens(headers.get("connection", "")):
        raise HandshakeRefused(400, "the Connection header does not include Upgrade")
    if headers.get("sec-websocket-version", "").strip() != "13":
        raise HandshakeRefused(426, "Sec-WebSocket-Version must be 13", {"Sec-WebSocket-Version": "13"})
    key = headers.get("sec-websocket-key", "").strip()
    try:
        raw_key = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raw_key = b""
    if len(raw_key) != 16:
        raise HandshakeRefused(400, "Sec-WebSocket-Key is not 16 bytes in base64")
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    chosen = next((p for p in offered if p in SUBPROTOCOLS), None)
    if chosen is None:
        named = ", ".join(offered) if offered else "none"
        raise HandshakeRefused(400, f"Sec-WebSocket-Protocol must offer amqp (offered: {named})")
    return accept_key(key), chosen


class WsServer:
    """RFC 6455 server side of one connection, between the socket (or TLS) and the AMQP transport.

    `feed(data)` takes what was read and returns the AMQP bytes it carried. `send(data)` frames AMQP bytes (once
    the handshake is over). `take_output()` returns what must be written: the handshake answer, frames, pongs,
    close frames, an HTTP error. After a refusal or a protocol error `failed` says why; after a plain HTTP request
    was answered (/healthz) `answered` says which; after the close handshake (either side) `closed` is true: in
    each case the caller sends what is left and closes the socket.
    """

    def __init__(self, *, allow_upgrade: bool = True, healthz: bool = True):
        self.allow_upgrade = allow_upgrade
        self.healthz = healthz
        self.open = False  # the handshake is over: frames flow
        self.closed = False  # a close frame went out (and the caller should close once it is sent)
        self.peer_closed = False  # the client's close frame arrived
        self.failed: str | None = None
        self.answered: str | None = None  # a plain HTTP request that was served, e.g. "GET /healthz"
        self.close_code: int | None = None  # what the client's close frame said
        self.subprotocol: str | None = None
        self.path: str | None = None
        self._request = b""
        self._out = bytearray()
        self._buf = b""  # frame bytes not yet parsed
        self._head: tuple[bool, int, bytes, int] | None = None  # (fin, opcode, mask, length) of the frame in hand
        self._done = 0  # payload bytes of that frame already read
        self._control = b""  # payload of a control frame in hand (read whole)
        self._in_message = False  # a fragmented data message is under way

    @property
    def ended(self) -> bool:
        return self.closed or self.failed is not None or self.answered is not None

    # ---- input -------------------------------------------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:
        if self.ended:
            return b""
        if not self.open:
            data = self._feed_handshake(data)
            if not data:
                return b""
        buf = self._buf + data if self._buf else data
        at, end, out = 0, len(buf), []
        # one pass with an index over what was read (reslicing it per frame copied it once per small frame)
        while at < end and not self.ended:
            if self._head is None:
                used = self._read_head(buf, at)
                if not used:
                    break
                at += used
            fin, opcode, mask, length = self._head
            take = buf[at:at + min(length - self._done, end - at)]
            at += len(take)
            payload = unmask(take, mask, self._done)
            self._done += len(take)
            if opcode >= OP_CLOSE:
                self._control += payload
            elif payload:
                out.append(payload)
            if self._done == length:
                self._head = None
                if opcode >= OP_CLOSE:
                    control, self._control = self._control, b""
                    self._on_control(opcode, control)
        self._buf = buf[at:] if at < end and not self.ended else b""
        return b"".join(out)

    def _feed_handshake(self, data: bytes) -> bytes:
        self._request += data
        end = self._request.find(b"\r\n\r\n")
        if end < 0:
            if len(self._request) > MAX_REQUEST:
                self._refuse(431, f"the request head is over {MAX_REQUEST} bytes")
            elif self._request.startswith(b"AMQP") or (self._request[:1] and not self._request[:1].isalpha()):
                what = "an AMQP protocol header" if self._request.startswith(b"AMQP") else "not an HTTP request"
                self._refuse(400, f"{what}: this listener (http: yes) serves AMQP over WebSocket only")
            return b""
        head, rest = self._request[:end], self._request[end + 4:]
        self._request = b""
        try:
            method, target, version, headers = parse_request(head)
            upgrade = "websocket" in _tokens(headers.get("upgrade", ""))
            if not upgrade and self.healthz and method in ("GET", "HEAD") and target.split("?")[0] == "/healthz":
                self.answered = f"{method} /healthz"
                self._out += http_answer(200, b"OK\n", head_only=method == "HEAD")
                return b""
            if not self.allow_upgrade and upgrade:
                raise HandshakeRefused(403, "WebSocket upgrades are disabled on this listener (websockets: no)")
            accept, chosen = check_upgrade(method, target, version, headers)
        except ValueError as exc:
            self._refuse(400, str(exc))
            return b""
        except HandshakeRefused as exc:
            self._refuse(exc.status, exc.why, exc.extra)
            return b""
        self.open, self.subprotocol, self.path = True, chosen, target
        self._out += (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {chosen}\r\n\r\n").encode("ascii")
        return rest

    def _refuse(self, status: int, why: str, extra: dict[str, str] | None = None) -> None:
        self.failed = f"WebSocket handshake refused ({status}): {why}"
        self._out += http_error(status, why, extra)

    def _read_head(self, buf: bytes, at: int) -> int:
        """Read the frame head at buf[at:]: the number of bytes it took, 0 when it is incomplete or broken (then
        `failed` says why)."""
        have = len(buf) - at
        if have < 2:
            return 0
        b0, b1 = buf[at], buf[at + 1]
        fin, rsv, opcode, masked, n = bool(b0 & 0x80), b0 & 0x70, b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
        pos = 2
        if n == 126:
            if have < 4:
                return 0
            n, pos = struct.unpack_from(">H", buf, at + 2)[0], 4
        elif n == 127:
            if have < 10:
                return 0
            n, pos = struct.unpack_from(">Q", buf, at + 2)[0], 10
            if n >> 63:
                return self._fail(CLOSE_PROTOCOL_ERROR, "a 64-bit payload length with its top bit set")
        if have < pos + 4:
            return 0
        if rsv:
            return self._fail(CLOSE_PROTOCOL_ERROR, "reserved bits set, and no extension was negotiated")
        if not masked:
            return self._fail(CLOSE_PROTOCOL_ERROR, "a client frame that is not masked")
        if opcode >= OP_CLOSE:
            if opcode not in (OP_CLOSE, OP_PING, OP_PONG):
                return self._fail(CLOSE_PROTOCOL_ERROR, f"reserved opcode {opcode:#x}")
            if not fin:
                return self._fail(CLOSE_PROTOCOL_ERROR, "a fragmented control frame")
            if n > 125:
                return self._fail(CLOSE_PROTOCOL_ERROR, "a control frame over 125 bytes")
        elif opcode == OP_CONT:
            if not self._in_message:
                return self._fail(CLOSE_PROTOCOL_ERROR, "a continuation frame outside a fragmented message")
        elif opcode == OP_BINARY:
            if self._in_message:
                return self._fail(CLOSE_PROTOCOL_ERROR, "a new message inside a fragmented one")
        elif opcode == OP_TEXT:
            return self._fail(CLOSE_UNSUPPORTED, "a text message: AMQP travels in binary messages")
        else:
            return self._fail(CLOSE_PROTOCOL_ERROR, f"reserved opcode {opcode:#x}")
        if opcode < OP_CLOSE:
            self._in_message = not fin
        self._head, self._done = (fin, opcode, buf[at + pos:at + pos + 4], n), 0
        return pos + 4

    def _on_control(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_PING:
            self._out += frame(OP_PONG, payload)
        elif opcode == OP_CLOSE:
            self.peer_closed = True
            if len(payload) == 1:
                self._fail(CLOSE_PROTOCOL_ERROR, "a close frame with a one-byte body")
                return
            code = struct.unpack(">H", payload[:2])[0] if payload else None
            if code is not None and not (code in _CLOSE_CODES_OK or 3000 <= code <= 4999):
                self._fail(CLOSE_PROTOCOL_ERROR, f"close status {code} is not one a peer may send")
                return
            try:
                payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                self._fail(CLOSE_INVALID_DATA, "a close reason that is not UTF-8")
                return
            self.close_code = code
            self.close(code if code is not None else CLOSE_NORMAL)
        # a pong (unsolicited or not) needs no answer

    def _fail(self, code: int, why: str) -> int:
        self.failed = f"WebSocket protocol error: {why}"
        self.close(code, why)
        return 0

    # ---- output ------------------------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if data and self.open and not self.closed:
            self._out += frame(OP_BINARY, data)

    def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        """Send our close frame (once); the caller closes the socket once it is out (§7.1.1: the server closes
        the TCP connection first)."""
        if self.open and not self.closed:
            self._out += frame(OP_CLOSE, struct.pack(">H", code) + reason.encode()[:123])
        self.closed = True

    def take_output(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out
