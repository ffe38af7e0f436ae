"""Play one hostile case on a raw TCP connection and collect what the server answers.

The server may close at any moment (that is often the right answer), so every send stops quietly at a reset
or a broken pipe. An `await` step reads until the server has sent a given frame (its open, say). A `pause`
step keeps reading while it holds the socket: the server's answer to the bytes so far is part of the result,
and a pause is part of the input (a trickle, a half frame left hanging), not a wait for some state.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import time
from dataclasses import dataclass, field

from . import codec as c
from .hostile import Case

CONNECT_TIMEOUT_S = 3.0
AWAIT_S = 5.0  # an "await" step's deadline for the awaited frame
SEND_TIMEOUT_S = 2.0  # a server that neither reads nor closes: stop pushing the rest of a flood


@dataclass
class Reply:
    refused: bool = False  # the listener refused the connection (nothing listens: the server is down)
    reply: bytes = b""
    closed_by_server: bool = False  # the server closed (EOF or reset) before we did
    error: str | None = None  # a connect failure other than refusal
    started: float = 0.0
    ended: float = 0.0
    frames: list[tuple[int, int, bytes]] = field(default_factory=list)
    local_port: int = 0  # the client's port: the server's socket for this connection has it as its peer

    @property
    def close_condition(self) -> str | None:
        """The error condition of the server's close frame, if it sent one with an error."""
        for type_, _, body in self.frames:
            if type_ == c.FRAME_AMQP and c.descriptor(body) == 0x18:
                return c.error_condition(body)
        return None

    @property
    def sent_close(self) -> bool:
        return any(t == c.FRAME_AMQP and c.descriptor(b) == 0x18 for t, _, b in self.frames)

    @property
    def sasl_outcome_code(self) -> int | None:
        for type_, _, body in self.frames:
            if type_ == c.FRAME_SASL and c.descriptor(body) == 0x44:
                # described(0x44, list8/list32 [code ubyte, ...]): the ubyte sits after the list header
                rest = body[3:]
                start = {0xC0: 3, 0xD0: 9}.get(rest[0] if rest else -1)
                if start is not None and len(rest) > start + 1 and rest[start] == 0x50:
                    return rest[start + 1]
        return None


def performative_fields(body: bytes) -> list:
    """The fields of a performative the server sent (a described list, as in a Reply's frames), decoded by proton:
    for reading an answer, never for building the hostile input (codec.py does that without proton)."""
    return split_performative(body)[0]


def split_performative(body: bytes) -> tuple[list, bytes]:
    """A frame body -> (its performative's fields, the bytes after it: a transfer's payload)."""
    from proton import Data

    data = Data()
    used = data.decode(body)
    data.rewind()
    data.next()
    data.enter()  # the described performative: its descriptor, then its field list
    data.next()
    data.next()
    data.enter()
    fields = []
    while data.next():
        fields.append(data.get_object())
    return fields, body[used:]


def play(host: str, port: int, case: Case, *, idle_s: float = 0.1, max_read_s: float = 1.0) -> Reply:
    """Connect, run the case's steps, then read until the server closes, stays quiet for `idle_s`, or
    `max_read_s` has passed; close (a normal FIN, so a server that never closes its side shows CLOSE_WAIT)."""
    out = Reply(started=time.monotonic())
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except ConnectionRefusedError:
        out.refused, out.ended = True, time.monotonic()
        return out
    except OSError as exc:
        out.error, out.ended = f"connect to {host}:{port}: {exc}", time.monotonic()
        return out
    out.local_port = sock.getsockname()[1]
    if case.tls:  # a case played inside TLS: the handshake first (a failed one is the server's answer)
        try:
            sock = _tls_client().wrap_socket(sock, server_hostname="localhost")
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            out.closed_by_server, out.error, out.ended = True, None, time.monotonic()
            out.reply = f"TLS handshake failed: {exc}".encode()
            return out
    buf = bytearray()
    with sock, selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        open_ = True
        for kind, value in case.steps:
            if not open_:
                break
            if kind == "send":
                open_ = _send(sock, value)
                open_ = open_ and _read(sock, sel, buf, 0.0)
            elif kind == "await":
                open_ = _await(sock, sel, buf, int(value))
            else:
                open_ = _read(sock, sel, buf, float(value), until_idle=False)
        if open_:
            open_ = _read(sock, sel, buf, max_read_s, idle_s=idle_s)
        out.closed_by_server = not open_
    out.reply = bytes(buf)
    out.frames, _ = c.split_frames(out.reply)
    out.ended = time.monotonic()
    return out


def _tls_client() -> ssl.SSLContext:
    """A TLS client that takes any certificate: the hostile part is what it sends, not whom it trusts."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def _await(sock, sel, buf: bytearray, code: int, timeout_s: float = AWAIT_S) -> bool:
    """Read until the server has sent a frame with descriptor `code` (its open, say), so the next bytes
    reach a server in that state rather than racing its handshake; False once the server has closed."""
    deadline = time.monotonic() + timeout_s
    while not any(c.descriptor(body) == code for _, _, body in c.split_frames(bytes(buf))[0]):
        if time.monotonic() >= deadline:
            return True  # what the server sent so far is the answer; the case goes on
        if not _read(sock, sel, buf, min(0.05, deadline - time.monotonic()), until_idle=False):
            return False
    return True


def _send(sock: socket.socket, data: bytes) -> bool:
    sock.settimeout(SEND_TIMEOUT_S)
    try:
        sock.sendall(data)
        return True
    except TimeoutError:
        return True  # the server stopped reading but did not close; what it answers is still read
    except OSError:
        return False


def _read(sock, sel, buf: bytearray, span_s: float, *, until_idle: bool = True, idle_s: float = 0.1) -> bool:
    """Read for up to `span_s` (stopping after `idle_s` without data when `until_idle`); False once the
    server has closed."""
    deadline = time.monotonic() + span_s
    last = time.monotonic()
    while True:
        now = time.monotonic()
        limit = deadline - now
        if until_idle:
            limit = min(limit, last + idle_s - now)
        if limit <= 0 and span_s > 0:
            return True
        if not sel.select(max(0.0, limit)):
            if span_s <= 0 or (until_idle and time.monotonic() >= last + idle_s) or time.monotonic() >= deadline:
                return True
            continue
        try:
            if isinstance(sock, ssl.SSLSocket):  # decrypted bytes; no flags on a TLS socket
                sock.setblocking(False)
                chunk = sock.recv(65536)
            else:
                chunk = sock.recv(65536, socket.MSG_DONTWAIT)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            continue
        except OSError:
            return False
        if not chunk:
            return False
        buf += chunk
        last = time.monotonic()
        if len(buf) > (4 << 20):  # a server answering a flood: keep what tells the story, drop the rest
            del buf[1 << 20:]
