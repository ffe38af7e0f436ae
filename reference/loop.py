"""A lean event loop for a server on Qpid Proton's engine: sockets, transports and one collector.

proton's own Container (the pure-Python reactor) dispatches every engine event twice (to the application
handler and to its I/O handler), wraps each one in several Python objects, and turns each select wake-up into
a chain of reactor events. For a server that only accepts connections, this loop does the same job with a
`selectors` poll, one collector and a direct call per event, which is most of the broker's CPU per message.

It offers the part of the Container interface the reference servers use: `listen`, `connect` (outgoing
connections), `selectable` (an EventInjector: thread-safe application events), `schedule`,
`stop`, `run`, and `container_id`. The handler sees the same events with the same method names
(`on_connection_init`, `on_link_remote_open`, `on_delivery`, `on_transport_closed`, ...), plus
`on_reactor_init` once and `on_reactor_quiesced` after each batch of I/O, before any output of that batch is
written. An accepted connection carries the listener that accepted it as `connection._acceptor`, as under the
Container.

Socket handling follows the Container's: TCP_NODELAY, a peer's EOF or a socket error closes both ends of the
transport at once, heartbeats come from `Transport.tick`.

One connection's trouble never stops the process (a reference must survive what it is sent):
* a handler that raises while handling a connection's event gets that connection closed with an error
  condition (`amqp:decode-error` when what it read was not valid UTF-8, else `amqp:internal-error`), logged
  with its traceback; every other connection goes on;
* a client's SASL frames are checked (reference/sasl_guard.py) before the transport sees them, because
  proton-C crashes on some malformed ones;
* a socket whose peer has closed is closed too, also when the transport has stopped reading.

Transport security (reference/security/): a listener may have TLS (`ServerTls`) and a SASL policy
(`SaslPolicy`), an outgoing connection TLS (`ClientTls`). Such a connection takes the secured path: bytes go
socket -> TLS -> the loop's own SASL server (or client, for EXTERNAL) -> proton's transport, and back. A TLS or
SASL refusal is logged with the peer's address and closes the socket before any AMQP reaches the transport.
A connection without TLS leaves the secured path as soon as its SASL exchange is over, so plain connections
cost per message what they cost before.

AMQP over WebSocket (reference/websocket.py): a listener made with `websocket=True` (qdrouterd's `http: yes`)
puts a WebSocket layer on the secured path, between TLS and SASL: socket -> TLS -> WebSocket (HTTP upgrade, then
frames) -> SASL -> transport, and back; with TLS that is wss. Such a connection stays on the secured path. A
refused handshake gets an HTTP error answer, a protocol error a close frame, a served plain request (/healthz) its
answer, and the socket closes once that is out.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import logging
import os
import selectors
import socket
import time
from dataclasses import dataclass, field

from cproton import (
    pn_event_connection as _event_connection,
    pn_collector_peek,
    pn_collector_pop,
    pn_event_connection,
    pn_event_delivery,
    pn_event_link,
    pn_event_session,
    pn_event_transport,
    pn_event_type,
)
from cproton_ffi import ffi
from proton import Collector, Condition, Connection, Delivery, Endpoint, Event, EventType, Link, Session, Transport

from .attach_caps import AttachTap
from .sasl_guard import SaslGuard
from .security.sasl import SaslClient, SaslPolicy, SaslServer
from .security.tls import TLS_RECORD_HANDSHAKE, ClientTls, ServerTls, TlsFailure, TlsLayer
from .websocket import CLOSE_NORMAL, HttpOptions, WsServer

log = logging.getLogger("SERVER")

_BACKLOG = 128
_READ_CHUNK = 65536
_TRANSPORT_CLOSED = Event.TRANSPORT_CLOSED.number
_NULL = ffi.NULL
_SECURE_OUT_HIGH = 65536  # the secured path takes more of the transport's output only below this backlog


@dataclass
class LoopEvent:
    """What handlers get for loop-level events (init, quiesced, timer): only the container."""

    container: EngineLoop


class EngineEvent:
    """An engine event for the handler. proton's own Event wraps the delivery, link, session, connection and
    transport of every event up front (five Python objects, each with a record lookup); this one wraps only
    what the handler asks for. Valid during the handler call."""

    __slots__ = ("raw", "type")

    def __init__(self, impl, etype: EventType):
        # `raw`: the engine's event (pn_event_t), for a handler that calls proton-C on the message path without
        # wrapping the delivery and link in Python objects (reference/router/raw.py). A plain slot, not a
        # property: the router reads it twice per delivery.
        self.raw, self.type = impl, etype

    @property
    def delivery(self) -> Delivery | None:
        return Delivery.wrap(pn_event_delivery(self.raw))

    @property
    def link(self) -> Link | None:
        return Link.wrap(pn_event_link(self.raw))

    @property
    def session(self) -> Session | None:
        return Session.wrap(pn_event_session(self.raw))

    @property
    def connection(self) -> Connection | None:
        return Connection.wrap(pn_event_connection(self.raw))

    @property
    def transport(self) -> Transport | None:
        return Transport.wrap(pn_event_transport(self.raw))


@dataclass(eq=False)
class Listener:
    sock: socket.socket
    port: int
    loop: EngineLoop
    tls: ServerTls | None = None
    sasl: SaslPolicy | None = None
    websocket: HttpOptions | None = None  # AMQP over WebSocket (qdrouterd's `http: yes`) and what else it serves

    def close(self) -> None:
        self.loop._forget(self.sock)
        self.sock.close()


@dataclass(eq=False)
class _Peer:
    """One accepted connection: its socket and transport."""

    sock: socket.socket
    transport: Transport
    connection: Connection
    writing: bool = False
    guard: SaslGuard | None = None  # accepted connections: checks the client's SASL frames
    connecting: bool = False  # an outgoing connection whose TCP connect has not completed yet
    failed: bool = False  # a handler failed on it: its input is ignored, the socket closes once output is out
    tap: AttachTap | None = None  # link capabilities in attach frames (EngineLoop(link_capabilities=True))
    outbuf: bytes = b""  # with a tap: output taken from the transport (and rewritten) not yet sent
    sec: _Secure | None = None  # TLS and/or the loop's own SASL exchange (the secured path)


@dataclass(eq=False)
class _Secure:
    """A connection on the secured path: its TLS layer (made on the first byte for a listener, which is how
    a plain client on a TLS-required listener is told apart), its SASL exchange, plaintext waiting for room in
    the transport (`inbuf`), ciphertext waiting for room in the socket (`outbuf`)."""

    server: bool
    listener_tls: ServerTls | None = None  # a listener's TLS, until the first byte decides
    tls: TlsLayer | None = None
    sasl: SaslServer | SaslClient | None = None
    ws: WsServer | None = None  # AMQP over WebSocket: the upgrade, then frames
    inbuf: bytes = b""
    outbuf: bytes = b""
    plain_out: bytes = b""  # plaintext waiting for the TLS handshake to finish
    decided: bool = False  # the first byte has been seen (listeners)
    closing: str | None = None  # refused: why; the socket closes once outbuf is out
    recorded: bool = False  # the identity is on the connection

    def peer_cn(self) -> str | None:
        return self.tls.peer_cn() if self.tls is not None else None

    def amqp_ready(self) -> bool:
        return (self.tls is None or self.tls.ready) and (self.sasl is None or self.sasl.done) and (
            self.decided or not self.server) and (self.ws is None or self.ws.open)
@dataclass(order=True)
class _Timer:
    deadline: float
    seq: int
    handler: object = field(compare=False)


def abort_transport(transport, why: str) -> None:
    """End `transport` at once with a proton:io condition, as a broken socket would: its close comes back to the
    handlers as TRANSPORT_CLOSED (a connector then dials again)."""
    transport.condition = Condition("proton:io", why)
    transport.close_tail()
    transport.close_head()


class EngineLoop:
    def __init__(self, handler, link_capabilities: bool = False, attach_termini=False):
        """`link_capabilities`: tap each connection's attach frames so handlers can read and write the link
        capabilities proton-C does not handle (reference/attach_caps.py). `attach_termini`: only read them, for
        the termini proton-C reads as none (a tap that leaves the output alone: no copy of what is sent); a
        callable is asked for each new connection, so that only a router that may pass attaches on pays for it
        (walking every frame cost the routing benchmark about 6% of its throughput)."""
        self.handler = handler
        self.link_capabilities = link_capabilities
        self.attach_termini = attach_termini
        self.container_id = ""
        self.collector = Collector()
        self.selector = selectors.DefaultSelector()
        self._peers: dict[socket.socket, _Peer] = {}
        self._timers: list[_Timer] = []
        self._timer_seq = itertools.count()
        self._methods: dict[int, tuple] = {}  # event type number -> (bound handler method or None, EventType)
        self._stopped = False
        self._backlog: set[_Peer] = set()  # secured peers with plaintext the transport had no room for
        self._loop_errors = 0  # exceptions from loop-wide handlers (not tied to one connection), for the log

    # ---- the Container interface the servers use ----------------------------------------------------------------

    def listen(self, url: str, *, tls: ServerTls | None = None, sasl: SaslPolicy | None = None,
               websocket: bool | HttpOptions = False) -> Listener:
        """Bind and listen on `host:port` now (OSError when it cannot); port 0 gets a free port.

        `tls`: the listener's TLS (its context is built here, so a missing or unreadable certificate raises
        OSError, ssl.SSLError or ValueError before anything listens). `sasl`: the loop runs the SASL exchange
        itself against this policy; None keeps proton's own (ANONYMOUS, nobody checked). `websocket`: clients
        speak AMQP over WebSocket (RFC 6455) on this listener, and only that (after TLS when it has `tls`); an
        HttpOptions says what else (True: its defaults, qdrouterd's)."""
        if tls is not None:
            tls.context()
        host, _, port = url.rpartition(":")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host or "0.0.0.0", int(port)))
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        http = (websocket if isinstance(websocket, HttpOptions) else HttpOptions()) if websocket else None
        listener = Listener(sock, sock.getsockname()[1], self, tls, sasl, http)
        self.selector.register(sock, selectors.EVENT_READ, listener)
        return listener

    def _tap(self, peer: _Peer) -> None:
        termini = self.attach_termini() if callable(self.attach_termini) else self.attach_termini
        if self.link_capabilities or termini:
            peer.tap = AttachTap(writes=self.link_capabilities)
            peer.connection.loop_tap = peer.tap

    def connect(self, url: str, allowed_mechs: str = "ANONYMOUS", user: str | None = None,
                password: str | None = None, tls: ClientTls | None = None) -> Connection:
        """Open an outgoing connection to `amqp://host:port` and return it at once; the handler sees it come
        up (`on_connection_remote_open`) or fail (`on_transport_closed`, with a condition) like any other.

        proton's client SASL does ANONYMOUS and PLAIN. EXTERNAL (with `tls` and a client certificate) is done
        by the loop, because proton offers it only when its own TLS layer supplied the identity. `tls`: the
        server's certificate is checked against `tls.ca` (and the host name when `tls.verify_hostname`)."""
        if tls is not None:
            tls.context()
        host, _, port = url.split("://", 1)[-1].rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        connection = Connection()
        connection.collect(self.collector)
        connection.container = self.container_id
        connection.hostname = host
        connection.url = url
        if user is not None:
            connection.user = user
            connection.password = password or ""
        transport = Transport(Transport.CLIENT)
        external = tls is not None and allowed_mechs.split() == ["EXTERNAL"]
        if not external:
            sasl = transport.sasl()
            sasl.allowed_mechs(allowed_mechs)
            if user is not None or tls is not None:
                # proton calls PLAIN insecure because it cannot see the loop's TLS; without TLS, PLAIN over
                # plain TCP is what the config asked for (loopback in the harness)
                sasl.allow_insecure_mechs = True
        transport.bind(connection)
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = _Peer(sock, transport, connection, writing=True, connecting=True)
        if tls is not None:
            try:
                layer = TlsLayer(tls.context(), server=False, hostname=host)
            except TlsFailure as failure:  # cannot even start (e.g. no usable protocol version)
                layer, peer.failed = None, True
                log.warning("Connection to %s failed: %s", url, failure)
            peer.sec = _Secure(server=False, tls=layer, sasl=SaslClient("EXTERNAL") if external else None)
        self._tap(peer)
        self._peers[sock] = peer
        try:
            error = sock.connect_ex((host, int(port)))
        except (OSError, ValueError) as exc:  # a name that does not resolve, a port that is not a number
            error = getattr(exc, "errno", None) or -1
        self.selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, peer)
        if error not in (0, errno.EINPROGRESS):
            self._connect_failed(peer, os.strerror(error) if error > 0 else f"cannot connect to {url}")
        connection.open()
        return connection

    def selectable(self, injector) -> None:
        """Watch a proton EventInjector: its events are dispatched on this loop's thread."""
        self.selector.register(injector.fileno(), selectors.EVENT_READ, lambda: self._injected(injector))

    def schedule(self, delay: float, handler) -> None:
        """Call `handler.on_timer_task(event)` once, `delay` seconds from now."""
        heapq.heappush(self._timers, _Timer(time.monotonic() + delay, next(self._timer_seq), handler))

    def stop(self) -> None:
        self._stopped = True

    def run(self) -> None:
        init = getattr(self.handler, "on_reactor_init", None)
        if init is not None:
            init(LoopEvent(self))  # unguarded: a server that cannot initialise must stop, not limp on
        while not self._stopped:
            self._dispatch_events()
            self._call("on_reactor_quiesced", LoopEvent(self))
            self._dispatch_events()  # what the quiesced handler's work produced (frames to write, closes)
            timeout = self._tick_all()  # before writing: a heartbeat due now must go out in this turn
            self._write_all()
            if self._backlog:  # plaintext the transports had no room for: push it, and do not sleep on it
                self._drain_backlog()
                timeout = 0.0  # what it pushed made events: they are handled in the next turn, not after a wait
            self._wait_and_read(timeout)
            self._run_timers()
        for peer in list(self._peers.values()):
            self._drop(peer)

    # ---- events ------------------------------------------------------------------------------------------------

    def _call(self, method: str, event) -> None:
        fn = getattr(self.handler, method, None)
        if fn is None:
            return
        try:
            fn(event)
        except Exception:  # noqa: BLE001 - loop-wide work (dispatch after I/O, injected events) must not stop it
            self._loop_errors += 1
            if self._loop_errors <= 10 or self._loop_errors % 1000 == 0:  # a bug hit every turn must not flood
                log.exception("Error in %s (%d so far); the loop goes on", method, self._loop_errors)

    def _dispatch_events(self) -> None:
        # Runs for every engine event (several per message): the handler method and the event type are looked
        # up once per type number, and the end of the queue is a pointer comparison, not a call.
        collector, methods, closed, null = self.collector._impl, self._methods, _TRANSPORT_CLOSED, _NULL
        while True:
            impl = pn_collector_peek(collector)
            if impl == null:
                return
            number = pn_event_type(impl)
            fn, etype = methods.get(number) or self._method_for(number)
            if fn is not None:
                try:
                    fn(EngineEvent(impl, etype))
                except Exception as exc:  # noqa: BLE001 - one connection's failure must not stop the process
                    self._handler_failed(impl, etype, exc)
            gone = pn_event_transport(impl) if number == closed else None
            pn_collector_pop(collector)
            if gone is not None:
                self._drop_transport(gone)

    def _method_for(self, number: int) -> tuple:
        etype = EventType.TYPES.get(number)
        found = self._methods[number] = (getattr(self.handler, etype.method, None) if etype else None, etype)
        return found

    def _injected(self, injector) -> None:
        os.read(injector.fileno(), 512)
        while not injector.queue.empty():
            self._call(injector.queue.get().type.method, None)

    def _handler_failed(self, impl, etype: EventType, exc: Exception) -> None:
        """A handler raised on an engine event: close the event's connection with an error (AMQP 1.0 §2.8.15:
        `amqp:decode-error` for a value it could not decode, else `amqp:internal-error`), log why with the
        traceback, and go on serving the others. An event of no connection is logged only."""
        connection = Connection.wrap(_event_connection(impl))
        where = f"connection from {_name_of(connection, self._peers)}" if connection is not None else "the loop"
        log.error("Error handling %s on %s; closing it: %s: %s", etype, where, type(exc).__name__, exc,
                  exc_info=True)
        if connection is None:
            return
        decode = isinstance(exc, UnicodeError)
        name = "amqp:decode-error" if decode else "amqp:internal-error"
        text = f"{type(exc).__name__}: {exc}"
        description = ("a value is not valid UTF-8: " if decode else "error handling the peer's input: ") + text
        peers = [p for p in self._peers.values() if p.connection == connection]
        for peer in peers:
            peer.failed = True  # no more of its input is handled; the socket closes once the close frame is out
        try:
            if connection.state & Endpoint.LOCAL_CLOSED == 0:
                connection.condition = Condition(name, description[:200])
                connection.close()
        except Exception:  # noqa: BLE001 - the connection is beyond repair: drop its socket
            log.exception("Cannot close the connection after that error; dropping its socket")
            for peer in peers:
                self._drop(peer)

    # ---- sockets -----------------------------------------------------------------------------------------------

    def _accept(self, listener: Listener) -> None:
        while True:
            try:
                sock, _ = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: keep serving the others
                log.error("Cannot accept a connection: %s", exc)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection()
            connection.collect(self.collector)
            connection._acceptor = listener
            connection.url = f"amqp://{_name(sock)}"  # what log lines call the peer
            transport = Transport(Transport.SERVER)
            transport.bind(connection)
            peer = _Peer(sock, transport, connection, guard=SaslGuard())
            http = listener.websocket
            if listener.tls is not None or listener.sasl is not None or http is not None:
                ws = WsServer(allow_upgrade=http.websockets, healthz=http.healthz) if http is not None else None
                peer.sec = _Secure(server=True, listener_tls=listener.tls, ws=ws)
                if listener.sasl is not None:
                    peer.sec.sasl = SaslServer(listener.sasl, peer.sec.peer_cn)
                    peer.guard = None  # SaslServer reads the frames with the guard's checks
            self._tap(peer)
            self._peers[sock] = peer
            self.selector.register(sock, selectors.EVENT_READ, peer)

    def _read(self, peer: _Peer) -> None:
        if peer.sec is not None:
            self._read_secure(peer)
            return
        transport = peer.transport
        capacity = transport.capacity()
        if capacity == 0:
            return  # the transport's input buffer is full: read once it has room
        try:
            # A transport that stopped reading (capacity < 0: it found an error, or the connection is closing)
            # still needs to learn about EOF, or a peer that closed would leave the socket in CLOSE_WAIT.
            data = peer.sock.recv(_READ_CHUNK if capacity < 0 else min(capacity, _READ_CHUNK))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("recv from %s failed: %s", _name(peer.sock), exc)
            data = b""
        if not data:  # EOF or a dead socket: nothing more will come, and nothing more can go
            transport.close_tail()
            transport.close_head()
            return
        if capacity < 0 or peer.failed:
            return  # input after the transport stopped reading, or after a handler failed on it: ignored
        if peer.guard is not None:
            problem = peer.guard.check(data)
            if peer.guard.done:
                peer.guard = None
            if problem is not None:
                log.warning("Connection from %s: %s; closing it", _name(peer.sock), problem)
                transport.close_tail()
                transport.close_head()
                return
        if peer.tap is not None:
            peer.tap.feed_in(data)
        transport.push(data)

    def _write_all(self) -> None:
        for peer in list(self._peers.values()):
            if peer.connecting:
                continue  # its socket wakes the loop when the connect completes
            want_write = self._write_plain(peer) if peer.sec is None else self._write_secure(peer)
            if want_write != peer.writing:
                peer.writing = want_write
                mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if want_write else 0)
                self.selector.modify(peer.sock, mask, peer)
        self._dispatch_events()  # a failed send closes a transport: TRANSPORT_CLOSED, which drops the peer

    @staticmethod
    def _write_plain(peer: _Peer) -> bool:
        """Write what the transport has until it has nothing more or the socket is full; returns whether it
        still has output (so the loop must wake when the socket is writable).

        `pending()` encodes only as much as fits the transport's output buffer (tens of KiB), not all that is
        ready: a large message is many buffers. Writing once per turn and then sleeping until the next I/O or
        timer left the rest of a 256 KiB message waiting on the broker's 100 ms timer, one buffer per tick."""
        transport, sock, tap = peer.transport, peer.sock, peer.tap
        if tap is not None and not tap.writes:
            tap = None  # a reading tap: the output goes out as the transport has it
        while True:
            if tap is None or not peer.outbuf:
                pending = transport.pending()
                if pending <= 0:
                    if peer.failed:  # its close frame is out: end the connection (a TRANSPORT_CLOSED follows)
                        transport.close_tail()
                        transport.close_head()
                    return False
                if tap is None:
                    data = transport.peek(pending)
                else:  # taken whole, so that an attach frame can be rewritten before it goes out
                    chunk = transport.peek(pending)
                    transport.pop(pending)
                    peer.outbuf = tap.feed_out(bytes(chunk))
                    if not peer.outbuf:
                        continue
            if tap is not None:
                data = peer.outbuf
            try:
                sent = sock.send(data)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                log.debug("send to %s failed: %s", _name(sock), exc)
                transport.close_head()
                transport.close_tail()
                return False
            if tap is None:
                transport.pop(sent)
            else:
                peer.outbuf = peer.outbuf[sent:]
            if sent < len(data):  # the socket's buffer is full: wait until it drains
                return True

    # ---- the secured path (TLS, the loop's SASL) ----------------------------------------------------------------

    def _read_secure(self, peer: _Peer) -> None:
        sec, transport = peer.sec, peer.transport
        try:
            data = peer.sock.recv(_READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("recv from %s failed: %s", _name(peer.sock), exc)
            data = b""
        if not data:
            if sec.server and not sec.amqp_ready() and not sec.closing:
                log.warning("Connection from %s closed by the peer during the %s handshake", _name(peer.sock),
                            "TLS" if sec.tls is not None and not sec.tls.ready else
                            "WebSocket" if sec.ws is not None and not sec.ws.open else "SASL")
            transport.close_tail()
            transport.close_head()
            return
        if peer.failed or sec.closing:
            return
        try:
            plain = self._decrypt(peer, data)
        except TlsFailure as failure:
            self._refuse(peer, str(failure))
            return
        if plain and sec.ws is not None:
            plain = sec.ws.feed(plain)
            if sec.ws.failed:
                self._refuse(peer, sec.ws.failed)
                return
            if sec.ws.answered:  # a plain HTTP request served: its answer, then the socket closes
                log.debug("Connection from %s: answered %s", _name(peer.sock), sec.ws.answered)
                sec.closing, sec.inbuf = sec.ws.answered, b""
                self._queue_last_words(sec, sec.ws.take_output())
                return
            if sec.ws.closed:  # the client's close frame: the AMQP stream ends here, our close frame answers it
                self._ws_closed(peer, plain)
                return
        if plain and sec.sasl is not None and not sec.sasl.done:
            plain = sec.sasl.feed(plain)
            if sec.sasl.failed:
                self._refuse(peer, f"SASL: {sec.sasl.failed}", "amqp:unauthorized-access")
                return
        elif plain and peer.guard is not None:
            problem = peer.guard.check(plain)
            if peer.guard.done:
                peer.guard = None
            if problem is not None:
                self._refuse(peer, problem)
                return
        if not sec.recorded and sec.amqp_ready():
            self._record_identity(peer)
        if plain:
            if peer.tap is not None:
                peer.tap.feed_in(plain)
            sec.inbuf += plain
            self._push(peer)

    def _decrypt(self, peer: _Peer, data: bytes) -> bytes:
        sec = peer.sec
        if not sec.decided:  # a listener: the first byte says whether the client starts TLS
            sec.decided = True
            if sec.listener_tls is not None:
                if data[0] == TLS_RECORD_HANDSHAKE:
                    sec.tls = TlsLayer(sec.listener_tls.context(), server=True)
                elif sec.listener_tls.require:
                    raise TlsFailure("TLS: the client did not start TLS, and this listener requires it (requireSsl)")
        if sec.tls is None:
            return data
        plain = sec.tls.feed(data)
        if sec.tls.closed:
            peer.transport.close_tail()
        return plain

    def _record_identity(self, peer: _Peer) -> None:
        sec, connection = peer.sec, peer.connection
        sec.recorded = True
        if sec.tls is not None:
            connection.security_peer_cn = sec.tls.peer_cn()
        if sec.server and sec.sasl is not None:
            connection.security_user = sec.sasl.user
            log.debug("Connection from %s authenticated as %r (%s)", _name(peer.sock), sec.sasl.user,
                      sec.sasl.mechanism or "no SASL")

    def _refuse(self, peer: _Peer, why: str, condition: str = "proton:io") -> None:
        """Refuse a connection for a TLS or SASL reason: log it with the peer's address, send what is pending
        (a TLS alert, a sasl-outcome) and close; nothing reaches the AMQP layer."""
        sec = peer.sec
        if sec.server:
            log.warning("Connection from %s refused: %s", _name(peer.sock), why)
        else:
            log.warning("Connection to %s failed: %s", peer.connection.url, why)
        sec.closing, sec.inbuf = why, b""
        self._backlog.discard(peer)
        peer.transport.condition = Condition(condition, why[:200])
        plain = sec.sasl.take_output() if sec.sasl is not None else b""
        if sec.ws is not None:  # the SASL outcome in a frame, then a close frame; or the HTTP error answer
            sec.ws.send(plain)
            if sec.ws.open and not sec.ws.closed:
                sec.ws.close(1008, "refused")
            plain = sec.ws.take_output()
        self._queue_last_words(sec, plain)

    def _ws_closed(self, peer: _Peer, last: bytes) -> None:
        """The client sent a WebSocket close frame: no more AMQP comes from it. Answer with ours, then close the
        socket once that is out (RFC 6455 §7.1.1: the server closes the TCP connection first)."""
        sec = peer.sec
        log.debug("Connection from %s: WebSocket closed by the peer (status %s)", _name(peer.sock), sec.ws.close_code)
        transport = peer.transport
        if sec.amqp_ready() and not sec.inbuf and last and transport.capacity() > 0:
            transport.push(last[:transport.capacity()])  # what came before the close frame (e.g. AMQP close)
        sec.closing, sec.inbuf = "WebSocket closed by the peer", b""
        self._backlog.discard(peer)
        transport.close_tail()
        wire = sec.ws.take_output()
        self._queue_last_words(sec, wire)

    @staticmethod
    def _queue_last_words(sec, data: bytes) -> None:
        """Queue what is said before a close (a refusal, a close frame) for the socket: through TLS where the
        connection has it (a TLS session that already failed says nothing more), else as it is."""
        if sec.tls is not None:
            try:
                sec.tls.wrap(data)
                sec.outbuf += sec.tls.take_output()
            except TlsFailure:
                pass
        else:
            sec.outbuf += data

    def _push(self, peer: _Peer) -> None:
        """Give the transport as much of the waiting plaintext as it has room for."""
        sec, transport = peer.sec, peer.transport
        capacity = transport.capacity()
        if capacity < 0:  # the transport stopped reading: what is left can never be read
            sec.inbuf = b""
        elif capacity > 0:
            chunk, sec.inbuf = sec.inbuf[:capacity], sec.inbuf[capacity:]
            transport.push(chunk)
        if sec.inbuf:
            self._backlog.add(peer)
        else:
            self._backlog.discard(peer)

    def _write_secure(self, peer: _Peer) -> bool:
        """Like _write_plain: send until the transport has nothing more or the socket is full; returns whether
        output is still waiting (so the loop must wake when the socket is writable)."""
        sec, transport = peer.sec, peer.transport
        while True:
            took = self._take_secure_output(peer)
            if took is None:
                return False  # a failed peer's close frame is out: its transport is closed
            while sec.outbuf:
                try:
                    sent = peer.sock.send(sec.outbuf)
                except (BlockingIOError, InterruptedError):
                    return True
                except OSError as exc:
                    log.debug("send to %s failed: %s", _name(peer.sock), exc)
                    sec.outbuf = b""
                    transport.close_head()
                    transport.close_tail()
                    return False
                sec.outbuf = sec.outbuf[sent:]
                if sec.outbuf:
                    return True  # the socket's buffer is full: wait until it drains
            if not took:
                break  # all sent, and the transport had nothing more
        if sec.closing:
            transport.close_tail()
            transport.close_head()
        elif sec.tls is None and sec.ws is None and sec.amqp_ready() and not sec.inbuf:
            if not sec.recorded:
                self._record_identity(peer)
            peer.sec = None  # SASL is over on a plain connection: back to the plain path, at its cost
        return False

    def _take_secure_output(self, peer: _Peer) -> bool | None:
        """Move what the SASL layer and the transport have to send (up to a bound) through TLS into
        `sec.outbuf`; returns whether anything was taken (None: a failed peer was closed instead)."""
        sec, transport, tap = peer.sec, peer.transport, peer.tap
        if tap is not None and not tap.writes:
            tap = None
        if sec.closing:
            return False
        plain = sec.sasl.take_output() if sec.sasl is not None else b""
        if sec.amqp_ready():
            while len(sec.outbuf) + len(plain) < _SECURE_OUT_HIGH:
                pending = transport.pending()
                if pending <= 0:
                    if peer.failed and not sec.outbuf and not plain:
                        transport.close_tail()
                        transport.close_head()
                        return None
                    break
                chunk = bytes(transport.peek(pending))
                transport.pop(pending)
                plain += tap.feed_out(chunk) if tap is not None else chunk
        if sec.ws is not None:  # AMQP bytes in binary frames, after whatever the layer has to say itself
            sec.ws.send(plain)
            if sec.ws.open and not sec.ws.closed and transport.pending() < 0:  # the AMQP stream is over
                sec.ws.close(CLOSE_NORMAL)
            plain = sec.ws.take_output()
        try:
            if sec.tls is not None:
                if sec.tls.ready:
                    sec.tls.wrap(sec.plain_out + plain)
                    sec.plain_out = b""
                else:
                    sec.plain_out += plain
                    plain = b""  # held until the handshake is over: nothing more to take now
                sec.outbuf += sec.tls.take_output()
            else:
                sec.outbuf += plain
        except TlsFailure as failure:
            self._refuse(peer, str(failure))
        return bool(plain)

    def _drain_backlog(self) -> None:
        for peer in list(self._backlog):
            if peer.sec is None or peer.sock not in self._peers:
                self._backlog.discard(peer)
            else:
                self._push(peer)

    def _tick_all(self) -> float | None:
        """Let each transport send heartbeats that are due and time out silent peers; returns how long the
        loop may wait for I/O (None: until something happens)."""
        now = time.monotonic()
        deadlines = [t.deadline for t in self._timers[:1]]
        for peer in self._peers.values():
            deadline = peer.transport.tick(now)
            if deadline:
                deadlines.append(deadline)
        if self.collector.peek() is not None:
            self._dispatch_events()  # an idle peer timed out: its transport closed
        return max(0.0, min(deadlines) - now) if deadlines else None

    def _wait_and_read(self, timeout: float | None) -> None:
        for key, mask in self.selector.select(timeout):
            target = key.data
            if isinstance(target, _Peer):
                if target.connecting:
                    self._connected(target)
                elif mask & selectors.EVENT_READ:
                    self._read(target)
                # writable: _write_all sends what is pending on the next turn
            elif isinstance(target, Listener):
                self._accept(target)
            else:
                target()

    def _connected(self, peer: _Peer) -> None:
        """An outgoing connection's socket became readable or writable: the TCP connect is over."""
        error = peer.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            self._connect_failed(peer, os.strerror(error))
            return
        peer.connecting = False
        if peer.failed and peer.sec is not None:  # its TLS could not start (logged): fail like a refused connect
            self._connect_failed(peer, "TLS could not start")
            return
        peer.writing = False  # from now on _write_all asks for writability only while output is pending
        self.selector.modify(peer.sock, selectors.EVENT_READ, peer)

    def _connect_failed(self, peer: _Peer, why: str) -> None:
        peer.connecting = False
        abort_transport(peer.transport, f"{peer.connection.url}: {why}")

    def _run_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0].deadline <= now:
            timer = heapq.heappop(self._timers)
            try:
                timer.handler.on_timer_task(LoopEvent(self))
            except Exception:  # noqa: BLE001 - a failed timer must not stop the process
                log.exception("Error in timer task %r", timer.handler)

    def _drop_transport(self, transport_impl) -> None:
        """Drop the peer of the transport whose TRANSPORT_CLOSED was just handled, and only that one: another
        transport that closed in the same batch still has its own event to come, and its handler must see the
        connection still bound (unbinding it early made the router lose a failed connector for good)."""
        for peer in self._peers.values():
            if peer.transport._impl == transport_impl:
                self._drop(peer)
                return

    def _drop(self, peer: _Peer) -> None:
        self._backlog.discard(peer)
        self._forget(peer.sock)
        self._peers.pop(peer.sock, None)
        peer.sock.close()
        peer.transport.unbind()

    def _forget(self, sock: socket.socket) -> None:
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass


def _name_of(connection: Connection, peers: dict) -> str:
    for peer in peers.values():
        if peer.connection == connection:
            return _name(peer.sock)
    return "?"


def _name(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "a closed socket"
