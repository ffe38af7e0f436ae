"""A small RFC 6455 client on a plain or TLS socket, for what a real WebSocket client will not send: bad opening
handshakes, a fragmented AMQP header, pings, unmasked or text frames. Written from RFC 6455 for the suite (the
suites never import reference/); the cases that move messages use rhea's WebSocket transport, and `WsAmqp` (a
python-qpid-proton engine whose bytes this client frames) where the suite's own client must carry AMQP, e.g.
over TLS (wss, RFC 6455 §3: TLS first, then the opening handshake).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
import time
import uuid
from dataclasses import dataclass, field

from proton import Connection, Delivery, Message, Transport

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
    """One TCP connection to a WebSocket listener, driven byte by byte. With `tls` (a client SSLContext) the
    TLS handshake comes first (wss); one the client cannot verify raises ssl.SSLError here."""

    def __init__(self, host: str, port: int, timeout: float = 5.0, *, tls: ssl.SSLContext | None = None):
        self.host, self.port = host, port
        sock = socket.create_connection((host, port), timeout=timeout)
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        self.sock = sock
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
        except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
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


_OUTCOMES = {int(Delivery.ACCEPTED): "accepted", int(Delivery.REJECTED): "rejected",
             int(Delivery.RELEASED): "released", int(Delivery.MODIFIED): "modified"}


class WsAmqp:
    """An AMQP client over a WsProbe whose handshake is done: a python-qpid-proton engine (no I/O of its own)
    whose bytes travel in masked binary frames, and whose input is the payload of the server's data frames.
    Pings are answered; a close frame or EOF ends it (ConnectionError). Nothing moves between calls."""

    STEP_S = 0.05  # how long one step waits for a frame: short, so a condition is seen soon after it holds

    def __init__(self, probe: WsProbe):
        self.probe = probe
        self.connection = Connection()
        self.connection.container = f"interop-ws-wire-{uuid.uuid4().hex[:8]}"
        self.connection.hostname = probe.host
        self.transport = Transport(Transport.CLIENT)
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.transport.bind(self.connection)
        self.connection.open()
        self.session = self.connection.session()
        self.session.open()

    def flush(self) -> None:
        """Send what the engine has to send (frames the last call made: dispositions, a detach)."""
        transport = self.transport
        while (pending := transport.pending()) > 0:
            data = transport.peek(pending)
            transport.pop(len(data))
            self.probe.send(client_frame(OP_BINARY, data))

    def _step(self) -> None:
        transport = self.transport
        self.flush()
        got = self.probe.read_frame(self.STEP_S)
        if got is None:
            if self.probe.eof:
                raise ConnectionError(f"the server closed the connection (transport: {transport.condition})")
            return
        opcode, _, payload = got
        if opcode == OP_PING:
            self.probe.send(client_frame(OP_PONG, payload))
        elif opcode == OP_CLOSE:
            status = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
            raise ConnectionError(f"the server sent a close frame (status {status}, {payload[2:]!r})")
        elif opcode in (OP_BINARY, OP_CONT) and payload:
            while payload:
                room = transport.capacity()
                if room <= 0:
                    raise ConnectionError(f"the AMQP transport stopped reading ({transport.condition})")
                transport.push(payload[:room])
                payload = payload[room:]
        if self.connection.remote_condition is not None:
            raise ConnectionError(f"the server closed the AMQP connection: {self.connection.remote_condition}")

    def until(self, predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while not (result := predicate()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:g}s")
            self._step()
        self.flush()
        return result

    def send(self, address: str, bodies: list, timeout: float = 20.0) -> list[str]:
        """Send each body as one message (at least once) and wait for their outcomes."""
        sender = self.session.sender(f"ws-wire-snd-{uuid.uuid4().hex[:8]}")
        sender.target.address = address
        sender.open()
        deliveries = []
        for i, body in enumerate(bodies):
            self.until(lambda: sender.credit > 0, timeout, f"credit to send message {i} to {address}")
            delivery = sender.delivery(str(i).encode())
            sender.send(Message(body=body).encode())
            sender.advance()
            deliveries.append(delivery)
        self.until(lambda: all(d.remote_state for d in deliveries), timeout, f"the outcomes of {len(bodies)} messages")
        for d in deliveries:
            d.settle()
        sender.close()
        self.flush()
        return [_OUTCOMES.get(int(d.remote_state), str(d.remote_state)) for d in deliveries]

    def receiver(self, address: str, credit: int):
        receiver = self.session.receiver(f"ws-wire-rcv-{uuid.uuid4().hex[:8]}")
        receiver.source.address = address
        receiver.open()
        receiver.flow(credit)
        self.until(lambda: receiver.state & receiver.REMOTE_ACTIVE, 10.0, f"the router to attach {address}")
        return receiver

    def receive(self, receiver, count: int, timeout: float = 20.0) -> list:
        """The bodies of `count` messages, each accepted and settled."""
        bodies: list = []

        def take() -> bool:
            while (d := receiver.current) is not None and not d.partial and d.readable:
                data = receiver.recv(d.pending)
                receiver.advance()
                message = Message()
                message.decode(data)
                bodies.append(message.body)
                d.update(Delivery.ACCEPTED)
                d.settle()
            return len(bodies) >= count
        self.until(take, timeout, f"{count} messages on {receiver.source.address} (got {len(bodies)})")
        return bodies

    def close(self, timeout: float = 5.0) -> None:
        self.connection.close()
        try:
            self.until(lambda: self.connection.state & self.connection.REMOTE_CLOSED, timeout, "the close")
        except (ConnectionError, TimeoutError, OSError):
            pass
