"""A lean event loop for a server on Qpid Proton's engine: sockets, transports and one collector.

proton's own Container (the pure-Python reactor) dispatches every engine event twice (to the application
handler and to its I/O handler), wraps each one in several Python objects, and turns each select wake-up into
a chain of reactor events. For a server that only accepts connections, this loop does the same job with a
`selectors` poll, one collector and a direct call per event, which is most of the broker's CPU per message.

It offers the part of the Container interface the reference servers use: `listen`, `selectable` (an
EventInjector: thread-safe application events), `schedule`, `stop`, `run`, and `container_id`. The handler
sees the same events with the same method names (`on_connection_init`, `on_link_remote_open`, `on_delivery`,
`on_transport_closed`, ...), plus `on_reactor_init` once and `on_reactor_quiesced` after each batch of I/O,
before any output of that batch is written. It does not dial out (the router, which has connectors, stays on
the Container).

Socket handling follows the Container's: TCP_NODELAY, a peer's EOF or a socket error closes both ends of the
transport at once, heartbeats come from `Transport.tick`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import selectors
import socket
import time
from dataclasses import dataclass, field

from cproton import (
    isnull,
    pn_collector_peek,
    pn_collector_pop,
    pn_event_connection,
    pn_event_delivery,
    pn_event_link,
    pn_event_session,
    pn_event_transport,
    pn_event_type,
)
from proton import Collector, Connection, Delivery, Event, EventType, Link, Session, Transport

log = logging.getLogger("SERVER")

_BACKLOG = 128
_READ_CHUNK = 65536
_ACCEPT = "accept"  # selector data of a listening socket
_TRANSPORT_CLOSED = Event.TRANSPORT_CLOSED.number


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


@dataclass
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


@dataclass(order=True)
class _Timer:
    deadline: float
    seq: int
    handler: object = field(compare=False)


class EngineLoop:
    def __init__(self, handler):
        self.handler = handler
        self.container_id = ""
        self.collector = Collector()
        self.selector = selectors.DefaultSelector()
        self._peers: dict[socket.socket, _Peer] = {}
        self._timers: list[_Timer] = []
        self._timer_seq = itertools.count()
        self._methods: dict[int, object] = {}  # event type number -> bound handler method (or None)
        self._stopped = False

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
        self.selector.register(sock, selectors.EVENT_READ, _ACCEPT)
        return Listener(sock, sock.getsockname()[1], self)

    def selectable(self, injector) -> None:
        """Watch a proton EventInjector: its events are dispatched on this loop's thread."""
        self.selector.register(injector.fileno(), selectors.EVENT_READ, lambda: self._injected(injector))

    def schedule(self, delay: float, handler) -> None:
        """Call `handler.on_timer_task(event)` once, `delay` seconds from now."""
        heapq.heappush(self._timers, _Timer(time.monotonic() + delay, next(self._timer_seq), handler))

    def stop(self) -> None:
        self._stopped = True

    def run(self) -> None:
        self._call("on_reactor_init", LoopEvent(self))
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
        if fn is not None:
            fn(event)

    def _dispatch_events(self) -> None:
        collector, methods, closed = self.collector._impl, self._methods, _TRANSPORT_CLOSED
        while True:
            impl = pn_collector_peek(collector)
            if isnull(impl):
                return
            number = pn_event_type(impl)
            fn = methods.get(number, False)
            if fn is False:
                etype = EventType.TYPES.get(number)
                fn = methods[number] = getattr(self.handler, etype.method, None) if etype else None
            if fn is not None:
                fn(EngineEvent(impl, EventType.TYPES[number]))
            pn_collector_pop(collector)
            if number == closed:
                self._drop_closed()

    def _injected(self, injector) -> None:
        os.read(injector.fileno(), 512)
        while not injector.queue.empty():
            self._call(injector.queue.get().type.method, None)

    # ---- sockets -----------------------------------------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: keep serving the others
                log.error("Cannot accept a connection: %s", exc)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection()
            connection.collect(self.collector)
            transport = Transport(Transport.SERVER)
            transport.bind(connection)
            peer = _Peer(sock, transport, connection)
            self._peers[sock] = peer
            self.selector.register(sock, selectors.EVENT_READ, peer)

    def _read(self, peer: _Peer) -> None:
        transport = peer.transport
        capacity = transport.capacity()
        if capacity <= 0:
            return
        try:
            data = peer.sock.recv(min(capacity, _READ_CHUNK))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("recv from %s failed: %s", _name(peer.sock), exc)
            data = b""
        if data:
            transport.push(data)
        else:  # EOF or a dead socket: nothing more will come, and nothing more can go
            transport.close_tail()
            transport.close_head()

    def _write_all(self) -> None:
        for peer in list(self._peers.values()):
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
        transport, sock = peer.transport, peer.sock
        while True:
            pending = transport.pending()
            if pending <= 0:
                return False
            try:
                sent = sock.send(transport.peek(pending))
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                log.debug("send to %s failed: %s", _name(sock), exc)
                transport.close_head()
                transport.close_tail()
                return False
            transport.pop(sent)
            if sent < pending:  # the socket's buffer is full: wait until it drains
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
                if mask & selectors.EVENT_READ:
                    self._read(target)
                # writable: _write_all sends what is pending on the next turn
            elif target is _ACCEPT:
                self._accept(key.fileobj)
            else:
                target()

    def _run_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0].deadline <= now:
            timer = heapq.heappop(self._timers)
            timer.handler.on_timer_task(LoopEvent(self))

    def _drop_closed(self) -> None:
        for peer in [p for p in self._peers.values() if p.transport.closed]:
            self._drop(peer)

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


def _name(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "a closed socket"
