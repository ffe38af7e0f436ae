"""A lean event loop for a server on Qpid Proton's engine: sockets, transports and one collector.

proton's own Container (the pure-Python reactor) dispatches every engine event twice (to the application
handler and to its I/O handler), wraps each one in several Python objects, and turns each select wake-up into
a chain of reactor events. For a server that only accepts connections, this loop does the same job with a
`selectors` poll, one collector and a direct call per event, which is most of the broker's CPU per message.

It offers the part of the Container interface the reference servers use: `listen`, `connect` (outgoing
connections, SASL ANONYMOUS), `selectable` (an EventInjector: thread-safe application events), `schedule`,
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

log = logging.getLogger("SERVER")

_BACKLOG = 128
_READ_CHUNK = 65536
_TRANSPORT_CLOSED = Event.TRANSPORT_CLOSED.number
_NULL = ffi.NULL


@dataclass
class LoopEvent:
    """What handlers get for loop-level events (init, quiesced, timer): only the container."""

    container: EngineLoop


class EngineEvent:
    """An engine event for the handler. proton's own Event wraps the delivery, link, session, connection and
    transport of every event up front (five Python objects, each with a record lookup); this one wraps only
    what the handler asks for. Valid during the handler call."""

    __slots__ = ("_impl", "type")

    def __init__(self, impl, etype: EventType):
        self._impl, self.type = impl, etype

    @property
    def raw(self):
        """The engine's event (pn_event_t), for a handler that calls proton-C on the message path without
        wrapping the delivery and link in Python objects (reference/router/raw.py)."""
        return self._impl

    @property
    def delivery(self) -> Delivery | None:
        return Delivery.wrap(pn_event_delivery(self._impl))

    @property
    def link(self) -> Link | None:
        return Link.wrap(pn_event_link(self._impl))

    @property
    def session(self) -> Session | None:
        return Session.wrap(pn_event_session(self._impl))

    @property
    def connection(self) -> Connection | None:
        return Connection.wrap(pn_event_connection(self._impl))

    @property
    def transport(self) -> Transport | None:
        return Transport.wrap(pn_event_transport(self._impl))


@dataclass(eq=False)
class Listener:
    sock: socket.socket
    port: int
    loop: EngineLoop

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


@dataclass(order=True)
class _Timer:
    deadline: float
    seq: int
    handler: object = field(compare=False)


class EngineLoop:
    def __init__(self, handler, link_capabilities: bool = False):
        """`link_capabilities`: tap each connection's attach frames so handlers can read and write the link
        capabilities proton-C does not handle (reference/attach_caps.py)."""
        self.handler = handler
        self.link_capabilities = link_capabilities
        self.container_id = ""
        self.collector = Collector()
        self.selector = selectors.DefaultSelector()
        self._peers: dict[socket.socket, _Peer] = {}
        self._timers: list[_Timer] = []
        self._timer_seq = itertools.count()
        self._methods: dict[int, tuple] = {}  # event type number -> (bound handler method or None, EventType)
        self._stopped = False
        self._loop_errors = 0  # exceptions from loop-wide handlers (not tied to one connection), for the log

    # ---- the Container interface the servers use ----------------------------------------------------------------

    def listen(self, url: str) -> Listener:
        """Bind and listen on `host:port` now (OSError when it cannot); port 0 gets a free port."""
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
        listener = Listener(sock, sock.getsockname()[1], self)
        self.selector.register(sock, selectors.EVENT_READ, listener)
        return listener

    def _tap(self, peer: _Peer) -> None:
        if self.link_capabilities:
            peer.tap = AttachTap()
            peer.connection.loop_tap = peer.tap

    def connect(self, url: str, allowed_mechs: str = "ANONYMOUS", user: str | None = None,
                password: str | None = None) -> Connection:
        """Open an outgoing connection to `amqp://host:port` and return it at once; the handler sees it come
        up (`on_connection_remote_open`) or fail (`on_transport_closed`, with a condition) like any other."""
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
        sasl = transport.sasl()
        sasl.allowed_mechs(allowed_mechs)
        if user is not None:
            sasl.allow_insecure_mechs = True  # PLAIN over plain TCP: only on loopback here, TLS is not supported yet
        transport.bind(connection)
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = _Peer(sock, transport, connection, writing=True, connecting=True)
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
            self._tap(peer)
            self._peers[sock] = peer
            self.selector.register(sock, selectors.EVENT_READ, peer)

    def _read(self, peer: _Peer) -> None:
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
            want_write = self._write(peer)
            if want_write != peer.writing:
                peer.writing = want_write
                mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if want_write else 0)
                self.selector.modify(peer.sock, mask, peer)
        self._dispatch_events()  # a failed send closes a transport: TRANSPORT_CLOSED, which drops the peer

    @staticmethod
    def _write(peer: _Peer) -> bool:
        """Write what the transport has until it has nothing more or the socket is full; returns whether it
        still has output (so the loop must wake when the socket is writable).

        `pending()` encodes only as much as fits the transport's output buffer (tens of KiB), not all that is
        ready: a large message is many buffers. Writing once per turn and then sleeping until the next I/O or
        timer left the rest of a 256 KiB message waiting on the broker's 100 ms timer, one buffer per tick."""
        transport, sock, tap = peer.transport, peer.sock, peer.tap
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
        peer.writing = False  # from now on _write_all asks for writability only while output is pending
        self.selector.modify(peer.sock, selectors.EVENT_READ, peer)

    def _connect_failed(self, peer: _Peer, why: str) -> None:
        peer.connecting = False
        transport = peer.transport
        transport.condition = Condition("proton:io", f"{peer.connection.url}: {why}")
        transport.close_tail()
        transport.close_head()

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
