"""A small RFC 6455 client on a plain socket, for what a real WebSocket client will not send: bad opening
handshakes, a fragmented AMQP header, pings, unmasked or text frames. Written from RFC 6455 for the suite (the
suites never import reference/); the cases that move messages use rhea's WebSocket transport instead.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import time
from dataclasses import dataclass, field

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"  # AMQP 1.0 §2.2, no SASL layer
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def new_key() -> str:
    return base64.b64encode(os.urandom(16)).decode()


def expected_accept(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def upgrade_request(host: str, port: int, *, key: str | None = None, protocol: str | None = "amqp",
                    version: str = "13", method: str = "GET", path: str = "/", upgrade: bool = True) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    if upgrade:
        lines += ["Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key or new_key()}",
                  f"Sec-WebSocket-Version: {version}"]
    if protocol is not None:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def client_frame(opcode: int, payload: bytes = b"", *, fin: bool = True, masked: bool = True,
                 rsv: int = 0) -> bytes:
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    bit = 0x80 if masked else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([bit | 127]) + struct.pack(">Q", n)
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


@dataclass
class Answer:
    """What the server said to an opening handshake: the status (None: it closed or said nothing), the headers
    (lower-case names), and whether it closed the connection."""

    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    closed: bool = False
    raw: bytes = b""

    def accepts_amqp(self) -> bool:
        return self.status == 101 and self.headers.get("sec-websocket-protocol", "").lower() in ("amqp", "binary")

    def summary(self) -> str:
        if self.status is None:
            return "no answer, " + ("connection closed" if self.closed else "connection left open")
        first = self.raw.split(b"\r\n", 1)[0].decode("latin-1")
        return f"{first!r}" + (", connection closed" if self.closed else "")


class WsProbe:
    """One TCP connection to a WebSocket listener, driven byte by byte."""

    def __init__(self, host: str, port: int, timeout: float = 5.0):
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.eof = False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WsProbe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> bool:
        """Read more (until `deadline`); False when nothing more came (EOF, reset or time up)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0 or self.eof:
            return False
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def handshake(self, request: bytes, timeout: float = 5.0) -> Answer:
        self.send(request)
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(deadline):
                return Answer(None, closed=self.eof, raw=self.buf)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ")[1])
        except (IndexError, ValueError):
            status = -1
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0) if status != 101 else 0
        while len(self.buf) < length and self._fill(deadline):
            pass
        self.buf = self.buf[length:]
        answer = Answer(status, headers, raw=head)
        if status != 101:  # an error answer: the server should close
            answer.closed = self.wait_closed(timeout)
        return answer

    def wait_closed(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.eof and self._fill(deadline):
            self.buf = b""
        return self.eof

    def read_frame(self, timeout: float = 5.0) -> tuple[int, bool, bytes] | None:
        """(opcode, fin, payload) of the server's next frame; None if none came before EOF or the deadline. A
        server frame must not be masked (§5.1): one that is raises AssertionError."""
        deadline = time.monotonic() + timeout
        while True:
            buf = self.buf
            if len(buf) >= 2:
                b0, b1 = buf[0], buf[1]
                assert not b1 & 0x80, f"the server sent a masked frame (§5.1): {buf[:16]!r}"
                n, pos = b1 & 0x7F, 2
                if n == 126 and len(buf) >= 4:
                    n, pos = struct.unpack(">H", buf[2:4])[0], 4
                elif n == 127 and len(buf) >= 10:
                    n, pos = struct.unpack(">Q", buf[2:10])[0], 10
                if (b1 & 0x7F) < 126 or pos > 2:
                    if len(buf) >= pos + n:
                        self.buf = buf[pos + n:]
                        return b0 & 0x0F, bool(b0 & 0x80), buf[pos:pos + n]
            if not self._fill(deadline):
                return None

    def read_data(self, count: int, timeout: float = 5.0) -> bytes:
        """`count` bytes of data-frame payload (control frames in between are skipped)."""
        got = b""
        deadline = time.monotonic() + timeout
        while len(got) < count:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f is None:
                break
            if f[0] in (OP_BINARY, OP_CONT):
                got += f[2]
        return got
