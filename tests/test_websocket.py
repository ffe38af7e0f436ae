"""reference/websocket.py (RFC 6455 server side: opening handshake, frames, close handshake) and its place on
reference/loop.py's secured path (a listener with websocket=True, qdrouterd's `http: yes`)."""

from __future__ import annotations

import base64
import os
import socket
import ssl
import struct
import threading

import pytest
from proton.reactor import ApplicationEvent, EventInjector

from harness.tlsca import TestPki
from harness.wait import wait_for
from reference.loop import EngineLoop
from reference.security.tls import ServerTls
from reference.websocket import (
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    HttpOptions,
    WsServer,
    accept_key,
    check_upgrade,
    frame,
    parse_request,
    unmask,
)

AMQP = b"AMQP\x00\x01\x00\x00"
KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 §1.3's example


def request(*, key: str = KEY, protocol: str | None = "amqp", version: str = "13", method: str = "GET",
            upgrade: bool = True, extra: str = "") -> bytes:
    lines = [f"{method} /chat HTTP/1.1", "Host: server.example.com"]
    if upgrade:
        lines += ["Upgrade: websocket", "Connection: keep-alive, Upgrade", f"Sec-WebSocket-Key: {key}",
                  f"Sec-WebSocket-Version: {version}"]
    if protocol is not None:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def masked(opcode: int, payload: bytes = b"", fin: bool = True) -> bytes:
    return frame(opcode, payload, fin=fin, mask=os.urandom(4))


def server_frames(data: bytes) -> list[tuple[int, bool, bytes]]:
    """Parse unmasked server frames."""
    out = []
    while data:
        b0, b1 = data[0], data[1]
        assert not b1 & 0x80, "server frames are not masked"
        n, pos = b1 & 0x7F, 2
        if n == 126:
            n, pos = struct.unpack(">H", data[2:4])[0], 4
        elif n == 127:
            n, pos = struct.unpack(">Q", data[2:10])[0], 10
        out.append((b0 & 0x0F, bool(b0 & 0x80), data[pos:pos + n]))
        data = data[pos + n:]
    return out


def opened() -> WsServer:
    ws = WsServer()
    assert ws.feed(request()) == b""
    assert ws.open
    ws.take_output()
    return ws


# ---- handshake ---------------------------------------------------------------------------------------------


def test_accept_key_is_rfc_6455s_example():
    assert accept_key(KEY) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_good_handshake_is_answered_with_101_and_the_subprotocol():
    ws = WsServer()
    assert ws.feed(request(protocol="mqtt, amqp")) == b""
    out = ws.take_output().decode()
    assert out.startswith("HTTP/1.1 101 Switching Protocols\r\n")
    assert "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in out
    assert "Sec-WebSocket-Protocol: amqp\r\n" in out and out.endswith("\r\n\r\n")
    assert ws.open and ws.subprotocol == "amqp" and ws.path == "/chat" and ws.failed is None


def test_handshake_in_pieces_and_frames_right_behind_it():
    ws = WsServer()
    data = request() + masked(OP_BINARY, AMQP)
    got = b"".join(ws.feed(data[i:i + 1]) for i in range(len(data)))  # byte by byte
    assert got == AMQP
    assert ws.open


def test_binary_alias_is_accepted_like_qdrouterd():
    ws = WsServer()
    ws.feed(request(protocol="binary"))
    assert ws.subprotocol == "binary"


@pytest.mark.parametrize(("data", "status", "why"), [
    (request(upgrade=False, protocol=None), 404, "no Upgrade: websocket"),
    (request(upgrade=False, protocol=None, method="PUT"), 405, "no Upgrade"),
    (request(protocol="mqtt"), 400, "must offer amqp (offered: mqtt)"),
    (request(protocol=None), 400, "offered: none"),
    (request(key="c2hvcnQ="), 400, "16 bytes"),
    (request(key="not base64!"), 400, "16 bytes"),
    (request(version="8"), 426, "must be 13"),
    (request(method="POST"), 400, "is a GET, not POST"),
    (b"GET / HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 400, "HTTP/1.1"),
    (request().replace(b"Host: server.example.com\r\n", b""), 400, "no Host"),
    (request().replace(b"keep-alive, Upgrade", b"keep-alive"), 400, "Connection header"),
    (AMQP, 400, "an AMQP protocol header"),
    (b"\x16\x03\x01\x02\x00", 400, "not an HTTP request"),
    (b"GET /\r\n\r\n", 400, "not an HTTP request"),
    (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "malformed header"),
])
def test_bad_handshake_gets_an_http_error(data, status, why):
    ws = WsServer()
    assert ws.feed(data) == b""
    out = ws.take_output().decode("latin-1")
    assert out.startswith(f"HTTP/1.1 {status} "), out
    assert why in out and why in ws.failed
    assert not ws.open and ws.ended
    assert ws.feed(masked(OP_BINARY, AMQP)) == b"", "nothing is read after a refusal"
    if status == 426:
        assert "Sec-WebSocket-Version: 13\r\n" in out


def test_huge_request_head_is_refused():
    ws = WsServer()
    ws.feed(b"GET / HTTP/1.1\r\nX: " + b"a" * 20000)
    assert ws.take_output().startswith(b"HTTP/1.1 431 ")


def test_upgrades_can_be_disabled():
    ws = WsServer(allow_upgrade=False)
    ws.feed(request())
    assert ws.take_output().startswith(b"HTTP/1.1 403 ")


def healthz(method: str = "GET", path: str = "/healthz") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode()


@pytest.mark.parametrize("allow_upgrade", [True, False])
def test_healthz_is_answered_then_the_connection_ends(allow_upgrade):
    ws = WsServer(allow_upgrade=allow_upgrade)
    assert ws.feed(healthz(path="/healthz?x=1")) == b""
    out = ws.take_output()
    assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b"\r\n\r\nOK\n")
    assert b"Connection: close\r\n" in out
    assert ws.answered == "GET /healthz" and ws.ended and ws.failed is None and not ws.open
    assert ws.feed(masked(OP_BINARY, AMQP)) == b"", "nothing is read after the answer"


def test_healthz_head_has_no_body_and_can_be_switched_off():
    ws = WsServer()
    ws.feed(healthz("HEAD"))
    out = ws.take_output()
    assert out.startswith(b"HTTP/1.1 200 ") and out.endswith(b"\r\n\r\n") and b"Content-Length: 3" in out
    off = WsServer(healthz=False)
    off.feed(healthz())
    assert off.take_output().startswith(b"HTTP/1.1 404 ") and off.failed and off.answered is None


def test_parse_request_joins_repeated_headers():
    method, target, version, headers = parse_request(b"GET /x HTTP/1.1\r\nA: 1\r\na: 2")
    assert (method, target, version, headers) == ("GET", "/x", "HTTP/1.1", {"a": "1, 2"})


def test_check_upgrade_takes_tokens_case_insensitively():
    headers = {"host": "h", "upgrade": "WebSocket", "connection": "upgrade", "sec-websocket-version": "13",
               "sec-websocket-key": base64.b64encode(b"k" * 16).decode(), "sec-websocket-protocol": "amqp"}
    assert check_upgrade("GET", "/", "HTTP/1.1", headers)[1] == "amqp"


# ---- frames --------------------------------------------------------------------------------------------------


def test_unmask_at_any_offset():
    key, data = b"\x01\x02\x03\x04", bytes(range(11))
    whole = unmask(data, key, 0)
    assert unmask(unmask(data, key, 0), key, 0) == data
    assert unmask(data[:5], key, 0) + unmask(data[5:], key, 5) == whole


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 300000])
def test_payload_lengths_both_ways(size):
    ws = opened()
    payload = os.urandom(size)
    assert ws.feed(masked(OP_BINARY, payload)) == payload
    ws.send(payload)
    out = ws.take_output()
    assert server_frames(out) == ([(OP_BINARY, True, payload)] if size else [])


def test_fragmented_message_with_a_ping_in_the_middle():
    ws = opened()
    data = masked(OP_BINARY, AMQP[:3], fin=False) + masked(OP_PING, b"hi") + masked(OP_CONT, AMQP[3:6], fin=False) \
        + masked(OP_CONT, AMQP[6:])
    assert ws.feed(data) == AMQP
    assert server_frames(ws.take_output()) == [(OP_PONG, True, b"hi")]
    assert ws.failed is None


def test_payload_is_streamed_before_the_frame_is_complete():
    ws = opened()
    data = masked(OP_BINARY, b"x" * 1000)
    assert ws.feed(data[:500]) == b"x" * (500 - 4 - 4)  # 2-byte head, 2-byte length, 4-byte mask
    assert ws.feed(data[500:]) == b"x" * 508


def test_pong_needs_no_answer():
    ws = opened()
    assert ws.feed(masked(OP_PONG, b"unsolicited")) == b""
    assert ws.take_output() == b""


def test_close_is_echoed_and_ends_the_stream():
    ws = opened()
    assert ws.feed(masked(OP_BINARY, AMQP) + masked(OP_CLOSE, struct.pack(">H", 1001) + b"bye")) == AMQP
    assert ws.closed and ws.peer_closed and ws.close_code == 1001 and ws.failed is None
    assert server_frames(ws.take_output()) == [(OP_CLOSE, True, struct.pack(">H", 1001))]
    assert ws.feed(masked(OP_BINARY, AMQP)) == b"", "nothing after the close"
    ws.send(b"late")
    assert ws.take_output() == b"", "no data frame after our close frame"


def test_empty_close_is_answered_with_1000():
    ws = opened()
    ws.feed(masked(OP_CLOSE))
    assert server_frames(ws.take_output()) == [(OP_CLOSE, True, struct.pack(">H", 1000))]


PROTOCOL_ERRORS = [
    (frame(OP_BINARY, AMQP), 1002, "not masked"),
    (bytes([0x80 | 0x40 | OP_BINARY]) + masked(OP_BINARY, AMQP)[1:], 1002, "reserved bits"),
    (masked(0x3, AMQP), 1002, "reserved opcode"),
    (masked(0xB), 1002, "reserved opcode"),
    (masked(OP_TEXT, AMQP), 1003, "text message"),
    (masked(OP_PING, b"x" * 126), 1002, "over 125 bytes"),
    (masked(OP_PING, b"x", fin=False), 1002, "fragmented control frame"),
    (masked(OP_CONT, AMQP), 1002, "continuation frame outside"),
    (masked(OP_BINARY, b"a", fin=False) + masked(OP_BINARY, b"b"), 1002, "new message inside"),
    (masked(OP_CLOSE, b"\x03"), 1002, "one-byte body"),
    (masked(OP_CLOSE, struct.pack(">H", 1005)), 1002, "close status 1005"),
    (masked(OP_CLOSE, struct.pack(">H", 1000) + b"\xff\xfe"), 1007, "not UTF-8"),
    (bytes([0x82, 0xFF]) + b"\x80" + b"\x00" * 7 + b"mask", 1002, "top bit"),
]


# ids from the descriptions: the frames carry random masking keys, and pytest-xdist's workers must collect the same ids
@pytest.mark.parametrize(("data", "code", "why"), PROTOCOL_ERRORS, ids=[why for _, _, why in PROTOCOL_ERRORS])
def test_protocol_errors_fail_the_connection_with_a_close_status(data, code, why):
    ws = opened()
    ws.feed(data)
    assert ws.failed is not None and why in ws.failed
    frames = server_frames(ws.take_output())
    assert frames[-1][0] == OP_CLOSE and struct.unpack(">H", frames[-1][2][:2])[0] == code
    assert ws.closed


def test_close_is_sent_once_and_reason_is_bounded():
    ws = opened()
    ws.close(1000, "x" * 500)
    ws.close(1001)
    frames = server_frames(ws.take_output())
    assert len(frames) == 1 and len(frames[0][2]) == 125


def test_nothing_is_framed_before_the_handshake():
    ws = WsServer()
    ws.send(b"early")
    assert ws.take_output() == b""


# ---- on the loop ----------------------------------------------------------------------------------------------


class Opener:
    """Opens what the peer opens."""

    def on_connection_remote_open(self, event):
        event.connection.open()


@pytest.fixture
def ws_loop():
    loop = EngineLoop(Opener())
    listener = loop.listen("127.0.0.1:0", websocket=True)
    injector = EventInjector()
    loop.selectable(injector)
    thread = threading.Thread(target=loop.run, name="engine-loop", daemon=True)
    thread.start()
    yield loop, listener.port
    loop.stop()
    injector.trigger(ApplicationEvent("stop_now"))
    thread.join(10)
    assert not thread.is_alive()


@pytest.fixture
def loop_of():
    """Runs an EngineLoop on a thread; `loop_of(**listen)` -> (loop, port)."""
    running = []

    def start(**listen):
        loop = EngineLoop(Opener())
        listener = loop.listen("127.0.0.1:0", **listen)
        injector = EventInjector()
        loop.selectable(injector)
        thread = threading.Thread(target=loop.run, name="engine-loop", daemon=True)
        thread.start()
        running.append((loop, injector, thread))
        return loop, listener.port
    yield start
    for loop, injector, thread in running:
        loop.stop()
        injector.trigger(ApplicationEvent("stop_now"))
        thread.join(10)
        assert not thread.is_alive()


def read_until(sock: socket.socket, done, timeout: float = 10.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while not done(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_loop_serves_amqp_over_websocket_and_drops_refused_peers(ws_loop):
    loop, port = ws_loop
    with socket.create_connection(("127.0.0.1", port)) as bad:
        bad.sendall(AMQP)
        answer = read_until(bad, lambda d: False)
        assert answer.startswith(b"HTTP/1.1 400 "), "a plain AMQP client gets an HTTP error and EOF"
    wait_for(lambda: not loop._peers, 10, "the loop to drop the refused peer")
    with socket.create_connection(("127.0.0.1", port)) as good:
        good.sendall(request() + masked(OP_BINARY, AMQP))
        data = read_until(good, lambda d: b"\r\n\r\n" in d and len(d.partition(b"\r\n\r\n")[2]) >= 10)
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 ")
        assert server_frames(rest)[0] == (OP_BINARY, True, AMQP), "the AMQP header comes back in a binary frame"
        good.sendall(masked(OP_PING, b"p"))
        pong = read_until(good, lambda d: len(d) >= 3)
        assert server_frames(pong) == [(OP_PONG, True, b"p")]
        good.sendall(masked(OP_CLOSE, struct.pack(">H", 1000)))
        closing = read_until(good, lambda d: False)
        assert (OP_CLOSE, True, struct.pack(">H", 1000)) in server_frames(closing), "the close is echoed, then EOF"
    wait_for(lambda: not loop._peers, 10, "the loop to drop the closed peer")


def test_loop_with_websockets_off_refuses_the_upgrade_and_answers_healthz(loop_of):
    loop, port = loop_of(websocket=HttpOptions(websockets=False))
    with socket.create_connection(("127.0.0.1", port)) as refused:
        refused.sendall(request())
        assert read_until(refused, lambda d: False).startswith(b"HTTP/1.1 403 "), "403, then EOF"
    with socket.create_connection(("127.0.0.1", port)) as probe:
        probe.sendall(healthz())
        answer = read_until(probe, lambda d: False)
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"OK\n"), "200 OK, then EOF"
    wait_for(lambda: not loop._peers, 10, "the loop to drop both peers")


def test_loop_serves_amqp_over_websocket_over_tls(loop_of, tmp_path):
    pki = TestPki(tmp_path)
    issued = pki.issue("ca", "server")
    loop, port = loop_of(websocket=True, tls=ServerTls(cert=str(issued.cert), key=str(issued.key), require=True))
    ctx = ssl.create_default_context(cafile=str(issued.ca))
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1") as good:
        good.sendall(request() + masked(OP_BINARY, AMQP))
        data = read_until(good, lambda d: b"\r\n\r\n" in d and len(d.partition(b"\r\n\r\n")[2]) >= 10)
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 "), "TLS first, then the upgrade"
        assert server_frames(rest)[0] == (OP_BINARY, True, AMQP), "then AMQP in binary frames"
    with socket.create_connection(("127.0.0.1", port)) as clear:  # requireSsl: a handshake in the clear is refused
        clear.sendall(request())
        assert b"101" not in read_until(clear, lambda d: False)
    wait_for(lambda: not loop._peers, 10, "the loop to drop both peers")


# ---- which qdrouterd serves `http: yes` (harness/vendors/qdrouterd/build.py) --------------------------------------


def fake_qdrouterd(tmp_path, name: str, linked: bool):
    binary = tmp_path / f"{name}-bin"
    binary.write_bytes(b"\x7fELF...libqpid-proton.so.11\x00" + (b"libwebsockets.so.17\x00" if linked else b""))
    wrapper = tmp_path / name
    wrapper.write_text(f'#!/bin/sh\n# wrapper\nPYTHONPATH="x"; export PYTHONPATH\nexec "{binary}" "$@"\n')
    return wrapper


def test_websocket_binary_is_found_by_its_libwebsockets(tmp_path, monkeypatch):
    from harness.vendors.qdrouterd import build as qb

    plain, ws = fake_qdrouterd(tmp_path, "plain", False), fake_qdrouterd(tmp_path, "ws", True)
    assert qb.has_websockets(str(ws)) and not qb.has_websockets(str(plain))
    assert not qb.has_websockets(str(tmp_path / "missing"))
    monkeypatch.setattr(qb, "binary_for", lambda version: str(plain))
    monkeypatch.delenv(qb.WEBSOCKET_ENV, raising=False)
    monkeypatch.setattr(qb, "WEBSOCKET_DEFAULT", tmp_path / "nowhere")
    binary, why = qb.websocket_binary()
    assert binary is None and "built without libwebsockets" in why and "WEBSOCKETS=1" in why
    monkeypatch.setattr(qb, "WEBSOCKET_DEFAULT", ws)
    assert qb.websocket_binary()[0] == str(ws)
    monkeypatch.setenv(qb.WEBSOCKET_ENV, str(plain))
    assert qb.websocket_binary()[0] == str(ws), "a named binary without libwebsockets is passed over"
