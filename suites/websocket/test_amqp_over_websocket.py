"""AMQP over WebSocket (seed 001's console path): a router listener with `http: yes` serves AMQP in the
WebSocket subprotocol `amqp` (RFC 6455; the OASIS AMQP WebSocket Binding).

The session's router (`--peer router=reference|qdrouterd`) runs with five listeners from one qdrouterd.conf: the
plain AMQP one (`clients`), an HTTP one (`console`, `http: yes`), one with WebSocket upgrades switched off
(`console-nows`, `websockets: no`) and two with TLS (wss): `console-tls` with an sslProfile, `console-tls-only`
with requireSsl as well. The topology files have no HTTP listener, so the suite writes this small config itself
(its certificates from a test PKI made for the module, harness/tlsca.py) and starts the router through the
harness's peer classes.
qdrouterd serves `http: yes` only when built with libwebsockets (the default build is not: it exits with "No HTTP
support"): the suite takes a WebSocket build (harness/vendors/qdrouterd/build.py `websocket_binary`:
$QDROUTERD_WEBSOCKET, the chosen qdrouterd, or /opt/qpid-dispatch-1.19.0-ws) and is skipped with the reason
without one.

Messages move through real clients: rhea's WebSocket transport (over the npm package `ws`) on the console
listener and python-qpid-proton (the python shim) on the plain one. Handshakes and frames that a real client
does not send are written by hand (suites/websocket/wire.py), whose client also carries AMQP itself over wss. For
wss, rhea runs in a shim process of the module's own that trusts the test CA (NODE_EXTRA_CA_CERTS); the
session's rhea shim, which does not, is the client that must be refused.
"""

from __future__ import annotations

import ssl
import struct
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.diagnostics import thread_stacks
from harness.drivers import ClientStackError, ClientStackUnavailable, Shim, StackClient
from harness.peers.liveness import amqp_silence
from harness.peers.base import PeerUnavailable
from harness.peers.vendors import parse_choice
from harness.ports import free_port, release_ports
from harness.tlsca import TestPki
from harness.wait import accepts, wait_for

from .wire import AMQP_HEADER, OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, WsAmqp, WsProbe, client_frame, \
    expected_accept, new_key, upgrade_request

HOST = "127.0.0.1"
N = 20

CONFIG = """router {{
    mode: standalone
    id: WS
}}
sslProfile {{
    name: ws-tls
    certFile: {cert}
    privateKeyFile: {key}
    caCertFile: {ca}
}}
listener {{
    name: clients
    host: {host}
    port: {clients}
    role: normal
}}
listener {{
    name: console
    host: {host}
    port: {console}
    role: normal
    http: yes
}}
listener {{
    name: console-nows
    host: {host}
    port: {nows}
    role: normal
    http: yes
    websockets: no
}}
listener {{
    name: console-tls
    host: {host}
    port: {tls}
    role: normal
    http: yes
    sslProfile: ws-tls
}}
listener {{
    name: console-tls-only
    host: {host}
    port: {tls_only}
    role: normal
    http: yes
    sslProfile: ws-tls
    requireSsl: yes
}}
"""
HTTP_LISTENERS = ("console", "console-nows", "console-tls", "console-tls-only")


class WsRouter:
    def __init__(self, peer, clients_port: int, ports: dict[str, int], pki: TestPki):
        self.peer = peer
        self.plain_url = f"amqp://{HOST}:{clients_port}"
        self.ws_url = f"ws://{HOST}:{ports['console']}/"
        self.console_port = ports["console"]
        self.nows_port = ports["console-nows"]  # websockets: no
        self.nows_url = f"ws://{HOST}:{self.nows_port}/"
        self.tls_port = ports["console-tls"]  # an sslProfile: wss
        self.wss_url = f"wss://{HOST}:{self.tls_port}/"
        self.tls_only_port = ports["console-tls-only"]  # an sslProfile and requireSsl: wss only
        self.ca = pki.ca_file("ws-ca")  # issued the router's certificate
        self.rogue_ca = pki.ca_file("rogue-ca")  # issued nothing the router presents

    def tls(self, ca=None) -> ssl.SSLContext:
        """A client context that trusts `ca` (the router's CA unless told) and checks the host name."""
        return ssl.create_default_context(cafile=str(ca or self.ca))


@pytest.fixture(scope="module")
def ws_router(interop, tmp_path_factory):
    choice = parse_choice(interop.choices.get("router", "reference"))
    pki = TestPki(tmp_path_factory.mktemp("ws-pki"))
    issued = pki.issue("ws-ca", "WS", purpose="server")  # valid for localhost and 127.0.0.1
    files = {"cert": issued.cert, "key": issued.key, "ca": issued.ca}
    held: list[int] = []
    if choice.vendor == "reference":
        from harness.vendors.reference.router import ReferenceRouterPeer

        config = CONFIG.format(host=HOST, clients=0, console=0, nows=0, tls=0, tls_only=0, **files)
        peer = ReferenceRouterPeer("WS", config, frozenset())
    elif choice.vendor == "qdrouterd":
        from harness.vendors.qdrouterd.native import NativeQdrouterdPeer
        from harness.vendors.qdrouterd.build import websocket_binary

        binary, where = websocket_binary(choice.version)
        if binary is None:
            pytest.skip(f"peer unavailable: {where}")
        held += [free_port(held=True) for _ in HTTP_LISTENERS]  # qdrouterd cannot report an HTTP port 0
        console, nows, tls, tls_only = held
        try:
            peer = NativeQdrouterdPeer("WS", lambda ports: CONFIG.format(host=HOST, clients=ports["clients"],
                                                                         console=console, nows=nows, tls=tls,
                                                                         tls_only=tls_only, **files),
                                       frozenset(), version=choice.version, binary=binary)
        except PeerUnavailable as exc:
            release_ports(*held)
            pytest.skip(f"peer unavailable: {exc}")
    else:
        pytest.skip(f"the WebSocket suite configures its own router; it cannot configure {choice}")
    try:
        peer.start()
        clients_port = peer.endpoints["clients"].port
        ports = {name: peer.endpoints[name].port if name in peer.endpoints else held[i]
                 for i, name in enumerate(HTTP_LISTENERS)}
        for name, port in ports.items():
            wait_for(lambda port=port: accepts(HOST, port), 10.0, f"the router's HTTP listener {name} on port {port}")
        yield WsRouter(peer, clients_port, ports, pki)
    finally:
        peer.stop()
        peer.cleanup()
        release_ports(*held)


HUNG_S = 10.0  # a router that answers no AMQP header on its plain listener within this after a case is hung


@pytest.fixture
def router(ws_router, interop, details):
    details["router"] = f"{ws_router.peer.info.vendor} {ws_router.peer.info.version}"
    if ws_router.peer.info.vendor == "qdrouterd":
        details["binary"] = ws_router.peer.binary
    yield ws_router
    assert ws_router.peer.is_running(), f"the router stopped: {ws_router.peer.down_reason()}"
    # One router serves the module's cases; one that hung in a case (qdrouterd 1.19's WebSocket build did once, at
    # load 14 in make test on 2026-12-07: a send through it got no answer, and no later connection on either
    # listener did) would fail every case after it. Its threads' stacks are kept as the evidence, it is restarted
    # for the next case, and this case fails naming the hang. The stacks of a second hang (18:09 that day, in
    # test_websocket_clients_reach_each_other, load 9) show a deadlock: the core thread holds the connection
    # activation lock (CORE_connection_activate) while work_push waits for room in the full HTTP work queue, and
    # the HTTP thread that would empty it waits for that lock (qd_connection_invoke_deferred_impl).
    plain = ws_router.plain_url.removeprefix("amqp://")
    host, port = plain.rsplit(":", 1)
    silent = amqp_silence(host, int(port), HUNG_S)
    if silent is not None:
        stacks = thread_stacks(ws_router.peer.pids, interop.results_dir / "peer-logs" / "websocket-hang")
        details.update(hung=silent, stacks=str(stacks) if stacks else None)
        ws_router.peer.restart(kill=True)
        pytest.fail(f"the router hung during this case: {silent}; its threads' stacks: {stacks or 'gdb not found'}; "
                    "restarted for the next case")


@pytest.fixture(scope="module")
def rhea_trusting(ws_router):
    """A rhea shim of the module's own whose process trusts the router's test CA (node reads NODE_EXTRA_CA_CERTS
    once, when it starts), for wss; the session's rhea shim trusts only the system's CAs."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NODE_EXTRA_CA_CERTS", str(ws_router.ca))
        try:
            shim = Shim("rhea")
        except (ClientStackError, ClientStackUnavailable) as exc:
            pytest.skip(f"client stack unavailable: {exc}")
    try:
        if "transport.websocket" not in shim.capabilities:
            pytest.skip("client stack unavailable: rhea: the npm package ws is missing (`make setup` runs npm ci in "
                        "clients/rhea)")
        yield shim
    finally:
        shim.close()


@pytest.fixture
def shims(stacks, details):
    """(rhea's shim, python's shim); rhea speaks WebSocket, python plain AMQP."""
    try:
        pair = stacks.get("rhea"), stacks.get("python")
    except ClientStackUnavailable as exc:
        pytest.skip(f"client stack unavailable: {exc}")
    if "transport.websocket" not in pair[0].capabilities:
        pytest.skip("client stack unavailable: rhea: the npm package ws is missing (`make setup` runs npm ci in "
                    "clients/rhea)")
    details["stacks"] = {s.stack: s.version for s in pair}
    return pair


def message(i: int, body: dict | None = None) -> dict:
    return {"body": body or {"t": "string", "v": f"m{i}"},
            "app_properties": [[{"t": "string", "v": "seq"}, {"t": "int", "v": str(i)}]]}


def seq_of(m: dict) -> int:
    return next(int(v["v"]) for k, v in m.get("app_properties") or [] if k.get("v") == "seq")


LARGE = {"t": "binary", "v": (bytes(range(256)) * 1024).hex()}  # 256 KiB: many AMQP transfer frames


def carry(sending: StackClient, receiving: StackClient, details) -> None:
    address = f"ws.{uuid.uuid4().hex[:8]}"
    receiver = receiving.receiver(address, credit=N + 1, settle="auto")
    messages = [message(i) for i in range(N)] + [message(N, LARGE)]
    outcomes = sending.sender(address).send(messages, timeout=30)
    assert outcomes == ["accepted"] * (N + 1), f"every message was accepted by the consumer: {outcomes}"
    got = receiver.receive(N + 1, timeout=30)
    assert [seq_of(m) for m in got] == list(range(N + 1)), "all arrived once, in order"
    assert got[N]["body"] == LARGE, "the 256 KiB body arrived unchanged"
    details["messages"] = N + 1


@pytest.mark.spec("WEBSOCKET-AMQP-1")
def test_websocket_producer_reaches_plain_consumer(router, shims, details):
    rhea, python = shims
    with StackClient(rhea).connect(router.ws_url) as ws, StackClient(python).connect(router.plain_url) as plain:
        carry(ws, plain, details)


@pytest.mark.spec("WEBSOCKET-AMQP-1")
def test_plain_producer_reaches_websocket_consumer(router, shims, details):
    rhea, python = shims
    with StackClient(rhea).connect(router.ws_url) as ws, StackClient(python).connect(router.plain_url) as plain:
        carry(plain, ws, details)


@pytest.mark.spec("WEBSOCKET-AMQP-1")
def test_websocket_clients_reach_each_other(router, shims, details):
    rhea, _ = shims
    with StackClient(rhea).connect(router.ws_url) as a, StackClient(rhea).connect(router.ws_url) as b:
        carry(a, b, details)


def still_serves(router, shims) -> None:
    """A good opening handshake gets the AMQP header back, and a rhea WebSocket client moves a message."""
    with WsProbe(HOST, router.console_port) as probe:
        key = new_key()
        answer = probe.handshake(upgrade_request(HOST, router.console_port, key=key))
        assert answer.accepts_amqp(), f"after the refusal a good handshake is accepted: {answer.summary()}"
        assert answer.headers.get("sec-websocket-accept") == expected_accept(key)
        probe.send(client_frame(OP_BINARY, AMQP_HEADER))
        assert probe.read_data(8) == AMQP_HEADER, "the router answers the AMQP header in a binary frame"
    rhea, _ = shims
    with StackClient(rhea).connect(router.ws_url) as a, StackClient(rhea).connect(router.ws_url) as b:
        address = f"ws.after.{uuid.uuid4().hex[:8]}"
        r = b.receiver(address, credit=1, settle="auto")
        assert a.sender(address).send([message(0)]) == ["accepted"]
        assert [seq_of(m) for m in r.receive(1)] == [0]


# name -> (request arguments, or raw bytes, what it breaks)
BAD_HANDSHAKES = {
    "not-an-upgrade": ({"upgrade": False, "protocol": None}, "a plain HTTP GET, no Upgrade (§4.2.1)"),
    "wrong-subprotocol": ({"protocol": "mqtt"}, "offers only subprotocol mqtt, not amqp (§4.2.2, §1.9)"),
    "no-subprotocol": ({"protocol": None}, "offers no subprotocol, so not amqp (§4.2.2, §1.9)"),
    "bad-key": ({"key": "c2hvcnQ="}, "Sec-WebSocket-Key decodes to 5 bytes, not 16 (§4.2.1 item 5)"),
    "bad-version": ({"version": "99"}, "Sec-WebSocket-Version 99, a version no RFC defines (§4.2.1 item 6, §4.4)"),
    "not-a-get": ({"method": "POST"}, "the upgrade is a POST (§4.2.1 item 1)"),
    "plain-amqp": (AMQP_HEADER, "an AMQP protocol header on the HTTP listener"),
}


@pytest.mark.spec("WEBSOCKET-HANDSHAKE-1")
@pytest.mark.parametrize("kind", list(BAD_HANDSHAKES))
def test_bad_handshake_is_refused_and_router_keeps_serving(router, shims, details, kind):
    what, why = BAD_HANDSHAKES[kind]
    request = what if isinstance(what, bytes) else upgrade_request(HOST, router.console_port, **what)
    with WsProbe(HOST, router.console_port) as probe:
        answer = probe.handshake(request)
        details["answer"] = answer.summary()
        assert not answer.accepts_amqp(), f"{why}: refused, but the router switched to amqp: {answer.summary()}"
        if answer.status != 101:
            assert answer.status is None or 400 <= answer.status < 500, (
                f"{why}: refused with an HTTP client error, got {answer.summary()}")
            assert answer.closed, f"{why}: the router closes the connection after refusing: {answer.summary()}"
    still_serves(router, shims)


@pytest.mark.spec("WEBSOCKET-FRAMING-1")
def test_ping_fragments_and_close_handshake(router, details):
    with WsProbe(HOST, router.console_port) as probe:
        answer = probe.handshake(upgrade_request(HOST, router.console_port))
        assert answer.accepts_amqp(), answer.summary()
        probe.send(client_frame(OP_PING, b"are-you-there"))
        frame = probe.read_frame()
        assert frame == (OP_PONG, True, b"are-you-there"), f"a ping is answered by a pong of its payload: {frame}"
        # the AMQP header as one binary message in two fragments, a ping between them (§5.4: control frames may
        # come in the middle of a fragmented message)
        probe.send(client_frame(OP_BINARY, AMQP_HEADER[:3], fin=False) + client_frame(OP_PING, b"mid")
                   + client_frame(OP_CONT, AMQP_HEADER[3:]))
        frames = [probe.read_frame(), probe.read_frame()]
        assert (OP_PONG, True, b"mid") in frames, f"the ping between the fragments is answered: {frames}"
        data = b"".join(f[2] for f in frames if f and f[0] in (OP_BINARY, OP_CONT))
        data += probe.read_data(8 - len(data)) if len(data) < 8 else b""
        assert data == AMQP_HEADER, f"the reassembled AMQP header is answered with the router's: {data!r}"
        probe.send(client_frame(OP_CLOSE, struct.pack(">H", 1000)))
        frame = probe.read_frame()
        while frame is not None and frame[0] != OP_CLOSE:
            frame = probe.read_frame()
        assert frame is not None and frame[2][:2] == struct.pack(">H", 1000), (
            f"a close frame is answered with a close frame (§5.5.1): {frame}")
        assert probe.wait_closed(), "the router closes the TCP connection after the close handshake (§7.1.1)"


# name -> (the frame, what it breaks, the close status RFC 6455 §7.4.1 gives it)
BAD_FRAMES = {
    "unmasked": (client_frame(OP_BINARY, AMQP_HEADER, masked=False), "a client frame not masked (§5.1)", 1002),
    "reserved-bits": (client_frame(OP_BINARY, AMQP_HEADER, rsv=4), "RSV1 set with no extension (§5.2)", 1002),
    "reserved-opcode": (client_frame(0x3, AMQP_HEADER), "reserved opcode 0x3 (§5.2)", 1002),
    "long-ping": (client_frame(OP_PING, b"x" * 126), "a control frame over 125 bytes (§5.5)", 1002),
}


@pytest.mark.spec("WEBSOCKET-FRAMING-2")
@pytest.mark.parametrize("kind", list(BAD_FRAMES))
def test_bad_frame_fails_the_connection(router, shims, details, kind):
    data, why, status = BAD_FRAMES[kind]
    with WsProbe(HOST, router.console_port) as probe:
        answer = probe.handshake(upgrade_request(HOST, router.console_port))
        assert answer.accepts_amqp(), answer.summary()
        probe.send(data)
        frames = []
        while (frame := probe.read_frame(3.0)) is not None:
            frames.append(frame)
            if frame[0] != OP_PING and frame[0] != OP_PONG:  # a close, or data: the router read the frame
                break
        details["frames"] = [(op, len(p)) for op, _, p in frames]
        data_frames = [f for f in frames if f[0] in (OP_BINARY, OP_CONT)]
        assert not data_frames, f"{why}: the router fails the connection (§7.1.7) instead of reading it: {frames}"
        # §7.1.7: it SHOULD send a close frame first; when it does, the status must say why (§7.4.1)
        close = next((f for f in frames if f[0] == OP_CLOSE), None)
        if close is not None:
            assert struct.unpack(">H", close[2][:2])[0] == status, f"{why}: close status {status}: {close}"
            try:  # a client answers a close frame with its own (§5.5.1); the server then closes TCP first (§7.1.1)
                probe.send(client_frame(OP_CLOSE, close[2][:2]))
            except OSError:
                pass  # it closed already
        # RFC 6455 gives no time for it: qdrouterd (libwebsockets) closes 5 s after an RSV error, the reference at once
        assert probe.wait_closed(20.0), f"{why}: the router fails the connection: it closes the TCP connection"
    try:
        still_serves(router, shims)
    except ClientStackError as exc:
        pytest.fail(f"after {why} the router no longer serves WebSocket clients: {exc}")


def moves_one(sending: StackClient, receiving: StackClient, what: str) -> None:
    address = f"ws.one.{uuid.uuid4().hex[:8]}"
    receiver = receiving.receiver(address, credit=1, settle="auto")
    assert sending.sender(address).send([message(0)]) == ["accepted"], f"{what}: the message is accepted"
    assert [seq_of(m) for m in receiver.receive(1)] == [0], f"{what}: the message arrives"


def refused_by_client_stack(shim, url: str, what: str) -> str:
    """The ClientStackError a connect to `url` ends with (the case fails if it connects)."""
    with StackClient(shim) as client:
        try:
            client.connect(url, timeout=20)
        except ClientStackError as exc:
            return str(exc)[:300]
    pytest.fail(f"{what}: the {shim.stack} client connected")


# ---- websockets: no -------------------------------------------------------------------------------------------


@pytest.mark.spec("WEBSOCKET-LISTENER-1")
def test_websockets_no_carries_no_amqp_and_the_router_keeps_serving(router, shims, details):
    rhea, python = shims
    with WsProbe(HOST, router.nows_port) as probe:
        answer = probe.handshake(upgrade_request(HOST, router.nows_port))
        details["answer"] = answer.summary()
        if answer.status == 101:  # switched, then refused: whatever comes after, no AMQP may come back
            try:
                probe.send(client_frame(OP_BINARY, AMQP_HEADER))
            except OSError:
                pass  # it closed already
            frames = []
            while (frame := probe.read_frame(3.0)) is not None:
                frames.append(frame)
                if frame[0] == OP_CLOSE:
                    break
            details["frames"] = [(op, payload[:40].hex()) for op, _, payload in frames]
            data = b"".join(p for op, _, p in frames if op in (OP_BINARY, OP_CONT))
            assert not data, f"websockets: no: no AMQP over WebSocket, yet the router answered {data[:16]!r}"
            assert probe.wait_closed(10.0), "websockets: no: the router closes the connection it switched"
        else:
            assert answer.status is not None and 400 <= answer.status < 500, (
                f"websockets: no: the upgrade is refused with an HTTP client error, got {answer.summary()}")
            assert answer.closed, f"websockets: no: the connection closes after the refusal: {answer.summary()}"
    details["rhea"] = refused_by_client_stack(rhea, router.nows_url, "websockets: no")
    with WsProbe(HOST, router.nows_port) as probe:  # still an HTTP listener: its liveness check (healthz: yes)
        answer = probe.handshake(upgrade_request(HOST, router.nows_port, upgrade=False, protocol=None,
                                                 path="/healthz"))
        details["healthz"] = answer.summary()
        assert answer.status == 200, f"websockets: no: GET /healthz is still answered 200: {answer.summary()}"
    with StackClient(python).connect(router.plain_url) as a, StackClient(python).connect(router.plain_url) as b:
        moves_one(a, b, "plain AMQP clients after the refusal")
    with StackClient(rhea).connect(router.ws_url) as ws, StackClient(python).connect(router.plain_url) as plain:
        moves_one(ws, plain, "a WebSocket client on the listener with websockets on")


@pytest.mark.spec("WEBSOCKET-LISTENER-2")
def test_websockets_no_refuses_the_upgrade_with_an_http_client_error(router, details):
    with WsProbe(HOST, router.nows_port) as probe:
        answer = probe.handshake(upgrade_request(HOST, router.nows_port))
        details["answer"] = answer.summary()
        assert answer.status is not None and 400 <= answer.status < 500, (
            f"RFC 6455 §4.2.2: a server that does not accept the connection answers the handshake with an HTTP "
            f"error (e.g. 403), not 101: {answer.summary()}")
        assert answer.closed, f"the connection closes after the refusal: {answer.summary()}"


# ---- wss: AMQP over WebSocket over TLS --------------------------------------------------------------------------


@pytest.mark.spec("WEBSOCKET-TLS-1")
@pytest.mark.parametrize("producer", ["wss", "plain"])
def test_wss_and_plain_clients_reach_each_other(router, rhea_trusting, shims, details, producer):
    _, python = shims
    with StackClient(rhea_trusting).connect(router.wss_url) as wss, \
            StackClient(python).connect(router.plain_url) as plain:
        carry(*((wss, plain) if producer == "wss" else (plain, wss)), details)


@pytest.mark.spec("WEBSOCKET-TLS-1")
@pytest.mark.parametrize("listener", ["console-tls", "console-tls-only"])
def test_wss_wire_client_sends_and_receives(router, shims, details, listener):
    """The suite's own client over TLS: the handshake, then AMQP (a proton engine) in binary frames; on a listener
    with an sslProfile, and on one that also has requireSsl (TLS is what the wss client starts with)."""
    _, python = shims
    port = router.tls_port if listener == "console-tls" else router.tls_only_port
    with WsProbe(HOST, port, tls=router.tls()) as probe:
        details["tls"] = f"{probe.sock.version()} {probe.sock.cipher()[0]}"
        key = new_key()
        answer = probe.handshake(upgrade_request(HOST, port, key=key))
        assert answer.accepts_amqp(), f"over TLS the handshake switches to amqp: {answer.summary()}"
        assert answer.headers.get("sec-websocket-accept") == expected_accept(key)
        wire = WsAmqp(probe)
        with StackClient(python).connect(router.plain_url) as plain:
            to_plain, to_wire = f"wss.out.{uuid.uuid4().hex[:8]}", f"wss.in.{uuid.uuid4().hex[:8]}"
            receiver = plain.receiver(to_plain, credit=N, settle="auto")
            bodies = [f"m{i}" for i in range(N)]
            assert wire.send(to_plain, bodies) == ["accepted"] * N, "the plain consumer accepts each message"
            got = receiver.receive(N, timeout=30)
            assert [m["body"]["v"] for m in got] == bodies, "the wss producer's messages arrive once, in order"
            wire_receiver = wire.receiver(to_wire, credit=N)
            # the wire client moves only inside its calls: it receives on a thread of its own while the plain
            # producer waits for the outcomes it gives (nothing else touches it meanwhile)
            with ThreadPoolExecutor(1) as pool:
                receiving = pool.submit(wire.receive, wire_receiver, N, 30.0)
                try:
                    outcomes = plain.sender(to_wire).send([message(i) for i in range(N)], timeout=30)
                except ClientStackError as exc:
                    failed = receiving.exception(40)
                    raise AssertionError(f"the plain producer got no outcomes ({exc}); the wss consumer: "
                                         f"{failed!r}") from None
                assert receiving.result(40) == [f"m{i}" for i in range(N)], (
                    "the plain producer's messages reach the wss consumer once, in order")
            assert outcomes == ["accepted"] * N, f"the wss consumer accepts each message: {outcomes}"
        wire.close()
    details["messages"] = 2 * N


# name -> what the client does wrong
TLS_REFUSALS = {
    "untrusted-ca": "the suite's wire client trusts another CA than the one that issued the router's certificate",
    "rhea-untrusted-ca": "rhea trusts only the system's CAs, not the test CA",
    "no-tls": "a WebSocket handshake in the clear on the listener with requireSsl (console-tls-only)",
}


@pytest.mark.spec("WEBSOCKET-TLS-2")
@pytest.mark.parametrize("kind", list(TLS_REFUSALS))
def test_wss_client_that_fails_tls_is_refused_and_router_keeps_serving(router, shims, details, kind):
    why = TLS_REFUSALS[kind]
    rhea, python = shims
    if kind == "untrusted-ca":
        with pytest.raises(ssl.SSLCertVerificationError) as refused:
            WsProbe(HOST, router.tls_port, tls=router.tls(router.rogue_ca)).close()
        details["refused"] = str(refused.value)[:200]
    elif kind == "rhea-untrusted-ca":
        details["refused"] = refused_by_client_stack(rhea, router.wss_url, why)
    else:
        with WsProbe(HOST, router.tls_only_port) as probe:
            answer = probe.handshake(upgrade_request(HOST, router.tls_only_port))
            details["answer"] = answer.summary()
            assert not answer.accepts_amqp(), f"{why}: refused, but the router switched to amqp: {answer.summary()}"
            assert probe.wait_closed(10.0), f"{why}: the router closes the connection: {answer.summary()}"
    with WsProbe(HOST, router.tls_port, tls=router.tls()) as probe:
        answer = probe.handshake(upgrade_request(HOST, router.tls_port))
        assert answer.accepts_amqp(), f"after the refusal a wss client is served: {answer.summary()}"
        probe.send(client_frame(OP_BINARY, AMQP_HEADER))
        assert probe.read_data(8) == AMQP_HEADER, "the router answers the AMQP header over wss"
    with StackClient(rhea).connect(router.ws_url) as ws, StackClient(python).connect(router.plain_url) as plain:
        moves_one(ws, plain, "a WebSocket client and a plain one after the refusal")
