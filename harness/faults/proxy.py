"""The fault proxy's data plane: TCP proxies whose connections run through chains of toxics.

Everything here runs on one asyncio event loop. A `Proxy` listens on one address and forwards every
accepted connection to its upstream; a `Connection` is one client socket and one upstream socket; a `Link`
is one direction of a connection (upstream: client to server, downstream: server to client).

Speed: a link with no toxic forwards the bytes it reads straight to the other socket's transport, from a
256 KB receive buffer that is reused while the other side keeps up (asyncio's BufferedProtocol: one
recv_into and one send per chunk, no copy). Only a link with toxics copies chunks into its chain of stages
(`toxics.Stage`). Toxics added, updated or removed through the API apply to open connections at once: the
proxy tells every link of the stream, which appends, restarts or removes the stage; a removed stage hands
its queue on, so no byte is lost or reordered.

Disabling a proxy closes its open connections and stops accepting, but keeps the listening socket bound:
`shutdown()` on a listening socket takes it out of LISTEN (new connections are refused, ECONNREFUSED) while
it stays bound, so nobody else gets the port and enabling listens on it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct
import time

from . import toxics as tx
from .toxics import DATA, EOF, Item, Stage, ToxicError, ToxicSpec

log = logging.getLogger("interop.faults")

READ_SIZE = 256 * 1024
QUEUE_HIGH = 4 * 1024 * 1024  # bytes waiting in a toxic chain before reading from the source pauses
QUEUE_LOW = 1 * 1024 * 1024
CONNECT_TIMEOUT = 10.0


class ApiError(Exception):
    """An API request refused with a Toxiproxy error answer."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class AddressError(ValueError):
    """An address Go's net package would refuse; str() is Go's wording ("address x: missing port in address")."""


_WILDCARDS = ("", "0.0.0.0", "::")


def split_address(text: str) -> tuple[str, int]:
    """'host:port' (IPv6 as '[::1]:port') -> (host, port), as Go's net.SplitHostPort and port parsing. An empty
    host means all interfaces, and so does an empty address (Go listens on ':0' for it)."""
    if text == "":
        return "", 0
    if ":" not in text:
        raise AddressError(f"address {text}: missing port in address")
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise AddressError(f"address {text}: too many colons in address")
    if port == "":
        port = "0"  # Go reads "host:" as port 0
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise AddressError(f"address {port}: invalid port")
    return host, int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resolved_address(text: str) -> str:
    """`text` as Go's net.ResolveTCPAddr(...).String() writes it: what Toxiproxy compares a proxy's listen
    address with to tell whether an update or a populate changes it ('localhost:0' -> '127.0.0.1:0')."""
    if text == "":
        return ""
    host, port = split_address(text)
    return join_address(_resolve_host(host) if host else "", port)


def _resolve_host(host: str) -> str:
    if host == "localhost":
        return "127.0.0.1"  # Go's resolver prefers the IPv4 answer
    try:
        address = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
    except (OSError, UnicodeError):
        raise AddressError(f"lookup {host}: no such host") from None
    # An IPv4-mapped IPv6 address is its IPv4 address to Go (net.IP.To4): toxiproxy-server listens on IPv4 and
    # answers '127.0.0.1:port' for a listen of '[::ffff:127.0.0.1]:0'.
    with contextlib.suppress(ValueError):
        mapped = ipaddress.ip_address(address).ipv4_mapped if ":" in address else None
        if mapped is not None:
            return str(mapped)
    return address


class _Side(asyncio.BufferedProtocol):
    """One socket of a proxied connection, as an asyncio protocol."""

    def __init__(self, conn: Connection, name: str):
        self.conn = conn
        self.name = name  # "client" or "upstream"
        self.ending = False  # closed by us when a direction ended, while the other one may still deliver
        self.transport: asyncio.Transport | None = None
        self.out: Link | None = None  # the link this side reads into
        self.into: Link | None = None  # the link that writes to this side
        self._buffer = memoryview(bytearray(READ_SIZE))
        self._pause_reasons: set[str] = set()
        self.closed = False

    # reading
    def connection_made(self, transport) -> None:
        self.transport = transport
        if not self.conn.ready:
            self.pause("starting")

    def get_buffer(self, sizehint: int):
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        link = self.out
        if link.direct:
            if link.dst.closed:
                return
            dst = link.dst.transport
            dst.write(self._buffer[:nbytes])
            if dst.get_write_buffer_size():
                # The transport kept part of the chunk (Python 3.12+ keeps a view, not a copy): never reuse it.
                self._buffer = memoryview(bytearray(READ_SIZE))
        else:
            link.feed(bytes(self._buffer[:nbytes]))

    def eof_received(self) -> bool:
        self.out.feed_eof()
        return True  # the socket is closed once the end has gone through the chain (Connection.direction_ended)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.conn.side_lost(self, exc)

    # flow control: this side's socket cannot take more -> stop reading from the side that feeds it
    def pause_writing(self) -> None:
        self.into.src.pause("dst-full")

    def resume_writing(self) -> None:
        self.into.src.resume("dst-full")

    def pause(self, reason: str) -> None:
        if not self._pause_reasons and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._pause_reasons.add(reason)

    def resume(self, reason: str) -> None:
        if reason not in self._pause_reasons:
            return
        self._pause_reasons.discard(reason)
        if not self._pause_reasons and self.transport is not None and not self.closed:
            self.transport.resume_reading()


class Link:
    """One direction of a connection: bytes read from `src`, through the toxic stages, written to `dst`."""

    def __init__(self, conn: Connection, stream: str, src: _Side, dst: _Side):
        self.conn, self.stream, self.src, self.dst = conn, stream, src, dst
        src.out, dst.into = self, self
        self.stages: list[Stage] = []
        self.direct = True
        self.queued = 0
        self.ended = False  # the end of this direction went into its chain
        self.finished = False  # the end of this direction was passed on

    # toxics
    def add_toxic(self, spec: ToxicSpec) -> None:
        stage = Stage(self, spec)
        self.stages.append(stage)
        self.direct = False
        stage.start()

    def update_toxic(self, spec: ToxicSpec) -> None:
        for stage in self.stages:
            if stage.spec.name == spec.name:
                stage.cancel()
                stage.spec = spec
                stage.start()

    def remove_toxic(self, name: str) -> None:
        for i, stage in enumerate(self.stages):
            if stage.spec.name != name:
                continue
            stage.cancel()
            del self.stages[i]
            # Everything the stage still holds comes after what it already passed on: hand it on in order.
            pending = list(stage.queue)
            stage.queue.clear()
            # Through queued_add: a source paused because the chain was full must be resumed once it has drained.
            self.queued_add(-sum(item.size for item in pending))
            for item in pending:
                self._deliver(i, item)
            if not self.stages:
                self.direct = True
            if stage.spec.type == "timeout" and stage.active:
                self.conn.close()  # it swallowed bytes: the stream is broken (Toxiproxy closes it too)
            return

    def stop(self) -> None:
        for stage in self.stages:
            stage.cancel()

    # data
    def feed(self, data: bytes) -> None:
        self.stages[0].put(Item(time.monotonic(), data))

    def feed_eof(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self.direct:
            self._output(Item(time.monotonic(), None, EOF))
        else:
            self.stages[0].put(Item(time.monotonic(), None, EOF))

    def emit_after(self, stage: Stage, item: Item) -> None:
        index = self.stages.index(stage) + 1 if stage in self.stages else len(self.stages)
        self._deliver(index, item)

    def _deliver(self, index: int, item: Item) -> None:
        if index < len(self.stages):
            self.stages[index].put(item)
        else:
            self._output(item)

    def _output(self, item: Item) -> None:
        dst = self.dst
        if dst.closed or self.finished:
            return
        if item.kind == DATA:
            dst.transport.write(item.data)
        else:
            self.finished = True
            self.conn.direction_ended(self)

    def queued_add(self, n: int) -> None:
        self.queued += n
        if self.queued > QUEUE_HIGH:
            self.src.pause("chain-full")
        elif self.queued < QUEUE_LOW:
            self.src.resume("chain-full")


class Connection:
    """A client socket accepted by a proxy and its socket to the upstream."""

    def __init__(self, proxy: Proxy, peer: str):
        self.proxy = proxy
        self.peer = peer
        self.ready = False
        self.client = _Side(self, "client")
        self.upstream = _Side(self, "upstream")
        self.links = {
            tx.UPSTREAM: Link(self, tx.UPSTREAM, self.client, self.upstream),
            tx.DOWNSTREAM: Link(self, tx.DOWNSTREAM, self.upstream, self.client),
        }
        self.closed = False

    def start(self, toxics: list[ToxicSpec]) -> None:
        if any(spec.type == "reset_peer" for spec in toxics):
            self._linger_zero()  # as Toxiproxy: only a connection that opens with reset_peer is closed with RST
        for spec in toxics:
            self.links[spec.direction].add_toxic(spec)
        self.ready = True
        self.client.resume("starting")
        self.upstream.resume("starting")

    def direction_ended(self, link: Link) -> None:
        """`link` passed on the end of its stream. As toxiproxy-server (link.go, write: dest.Close(), not CloseWrite),
        its destination socket is closed both ways, so a half-close is not passed on (a reply to it is lost, measured
        against 2.12.0); the other direction then ends as if its source had closed: what its chain holds still goes
        out, then its own destination socket closes too."""
        if all(other.finished for other in self.links.values()):
            self.close()
            return
        side = link.dst
        if side.transport is not None and not side.closed:
            side.ending = True
            side.transport.close()  # what was written to it is sent first
        side.out.feed_eof()

    def side_lost(self, side: _Side, exc) -> None:
        # One socket is gone (closed by its peer with an error, or by us): the connection is over. Data the
        # other socket still has to send is flushed by a graceful close. A socket we closed because a direction
        # ended is not a loss: the other direction still delivers what its chain holds (direction_ended).
        if side.ending:
            return
        self.close()

    def close(self) -> None:
        """Close both sockets after flushing what they have to send (FIN)."""
        if self.closed:
            return
        self.closed = True
        for link in self.links.values():
            link.stop()
        for side in (self.client, self.upstream):
            if side.transport is not None and not side.closed:
                side.transport.close()
        self.proxy.connections.discard(self)

    def abort(self) -> None:
        """Drop both sockets now, discarding what was not sent yet."""
        self.closed = True
        for link in self.links.values():
            link.stop()
        for side in (self.client, self.upstream):
            if side.transport is not None and not side.closed:
                side.transport.abort()
        self.proxy.connections.discard(self)

    def _linger_zero(self) -> None:
        """From now on closing either socket sends a TCP RST (SO_LINGER 0): each peer sees ECONNRESET."""
        for side in (self.client, self.upstream):
            sock = side.transport.get_extra_info("socket") if side.transport is not None else None
            if sock is not None and not side.closed:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass


class Proxy:
    """One named proxy: a listening socket, an upstream address, toxics, open connections."""

    def __init__(self, name: str, listen: str, upstream: str):
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics: dict[str, ToxicSpec] = {}
        self.connections: set[Connection] = set()
        self._sock: socket.socket | None = None
        self._accept_task: asyncio.Task | None = None

    def as_json(self) -> dict:
        # "Logger": {} is in every proxy Toxiproxy 2.12 answers with: its Proxy struct's exported zerolog field
        # has no json tag, so Go writes it out (as an empty object). Answered the same, so that a client or a
        # comparison that reads whole objects sees one API.
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream, "enabled": self.enabled,
                "Logger": {}, "toxics": [t.as_json() for t in self.toxic_list()]}

    def toxic_list(self) -> list[ToxicSpec]:
        return [t for stream in tx.STREAMS for t in self.toxics.values() if t.direction == stream]

    # listening
    def bind(self) -> None:
        """Bind the listen address (it stays bound until the proxy is deleted or moved) and note the address
        the kernel gave, written as Go writes a listener's address ('[::]:41559' for all interfaces).
        ApiError (500, Toxiproxy's wording) when the address is bad or cannot be had."""
        if self._sock is not None:
            return
        try:
            host, port = split_address(self.listen)
            host = "" if host in _WILDCARDS else _resolve_host(host)
        except AddressError as exc:
            raise ApiError(f"listen tcp: {exc}", 500) from None
        try:
            self._sock = _bind_reserved(host, port)
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            raise ApiError(f"listen tcp {join_address(host, port)}: bind: {reason}", 500) from None
        bound = self._sock.getsockname()
        self.listen = join_address(bound[0], bound[1])

    def start(self) -> None:
        """Enable: listen and accept. ApiError (500) when the address cannot be had."""
        if self.enabled:
            return
        self.bind()
        self._sock.listen(128)
        self._accept_task = asyncio.get_running_loop().create_task(self._accept_loop())
        self.enabled = True
        log.info("proxy %s: listening on %s, upstream %s", self.name, self.listen, self.upstream)

    def stop(self) -> None:
        """Disable: refuse new connections (the port stays bound) and drop the open ones."""
        if not self.enabled:
            return
        self.enabled = False
        if self._accept_task is not None:
            self._accept_task.cancel()
            self._accept_task = None
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # out of LISTEN, still bound
        except OSError:
            pass
        self.drop_connections()
        log.info("proxy %s: disabled", self.name)

    def close(self) -> None:
        """Delete: stop and release the port."""
        self.stop()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def drop_connections(self) -> None:
        for conn in list(self.connections):
            conn.abort()

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        sock = self._sock
        while True:
            try:
                client, addr = await loop.sock_accept(sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                log.warning("proxy %s: accept failed: %s", self.name, exc)
                if not self.enabled:
                    return
                await asyncio.sleep(0.05)
                continue
            loop.create_task(self._serve(client, addr))

    async def _serve(self, client: socket.socket, addr) -> None:
        loop = asyncio.get_running_loop()
        peer = join_address(str(addr[0]), addr[1]) if isinstance(addr, tuple) else str(addr)
        conn = Connection(self, peer)
        try:
            # Toxiproxy takes any upstream text and only finds out here, when it dials (net.Dial).
            host, port = split_address(self.upstream)
            await asyncio.wait_for(loop.create_connection(lambda: conn.upstream, host, port), CONNECT_TIMEOUT)
        except (OSError, AddressError, TimeoutError) as exc:
            log.warning("proxy %s: client %s: cannot reach upstream %s: %s", self.name, peer, self.upstream, exc)
            # A known difference, not settled yet: Toxiproxy closes here within microseconds of the accept, mostly
            # before the client's first bytes are in (the client reads EOF); ours closes later, over those bytes,
            # so the kernel sends a RST. Artemis 2.40 notices that EOF only at its connection-ttl (60 s): its
            # mirror to a killed DC2 redialled 0-4 times in 15 s through toxiproxy-server (4 runs), 2-19 through
            # ours (mostly 17-19); and a topology dials through a proxy before the node behind it listens, so a
            # mirror then took 40 s to connect through either when it got EOF. Closing with a FIN here too waits
            # for the harness to keep `via: proxy` links refusing until their nodes listen (README).
            client.close()
            return
        if not self.enabled or conn.upstream.closed:
            conn.upstream.transport.abort()
            client.close()
            return
        client.setblocking(False)
        try:
            await loop.connect_accepted_socket(lambda: conn.client, client)
        except OSError:
            conn.upstream.transport.abort()
            client.close()
            return
        self.connections.add(conn)
        conn.start(self.toxic_list())
        log.debug("proxy %s: client %s connected to %s", self.name, peer, self.upstream)

    # toxics
    def add_toxic(self, spec: ToxicSpec) -> None:
        if spec.name in self.toxics:
            raise ToxicError("toxic already exists", 409)
        self.toxics[spec.name] = spec
        for conn in list(self.connections):
            conn.links[spec.direction].add_toxic(spec)

    def update_toxic(self, name: str, body) -> ToxicSpec:
        current = self.toxics.get(name)
        if current is None:
            raise ToxicError("toxic not found", 404)
        spec = current.updated(body)
        self.toxics[name] = spec
        for conn in list(self.connections):
            conn.links[spec.direction].update_toxic(spec)
        return spec

    def remove_toxic(self, name: str) -> None:
        spec = self.toxics.pop(name, None)
        if spec is None:
            raise ToxicError("toxic not found", 404)
        for conn in list(self.connections):
            conn.links[spec.direction].remove_toxic(name)

    def reset_toxics(self) -> None:
        for name in list(self.toxics):
            self.remove_toxic(name)


def _bind_reserved(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) such that shutting it down later keeps the port.

    Linux keeps a shut-down listening socket's port only if it was bound to an explicit port; for port 0 we
    let the kernel pick one with a helper socket and bind ours to that same port (both with SO_REUSEADDR,
    neither listening, which Linux allows), then close the helper.
    """
    if host == "":  # all interfaces: one dual-stack socket, as Go listens ('[::]:port'), else IPv4 only
        family, host = (socket.AF_INET6, "::") if socket.has_ipv6 else (socket.AF_INET, "0.0.0.0")
    else:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
    def new_socket() -> socket.socket:
        made = socket.socket(family, socket.SOCK_STREAM)
        made.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host == "::":
            made.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        return made

    sock = new_socket()
    sock.setblocking(False)
    try:
        if port:
            sock.bind((host, port))
            return sock
        # the helper is dual-stack too, so that the port the kernel picks is free for IPv4 as well (an IPv6-only
        # helper on a bindv6only=1 host got ports whose IPv4 side another socket held: EADDRINUSE below)
        helper = new_socket()
        try:
            helper.bind((host, 0))
            sock.bind((host, helper.getsockname()[1]))
        finally:
            helper.close()
        return sock
    except OSError:
        sock.close()
        raise


class ProxyCollection:
    """All proxies of one server, by name, with the operations the HTTP API offers (Toxiproxy's
    proxy_collection.go and proxy.go: the same checks in the same order, the same answers)."""

    def __init__(self) -> None:
        self.proxies: dict[str, Proxy] = {}

    def get(self, name: str) -> Proxy:
        proxy = self.proxies.get(name)
        if proxy is None:
            raise ApiError("proxy not found", 404)
        return proxy

    def create(self, body) -> Proxy:
        fields = _proxy_fields(body)
        if not fields.get("name"):
            raise ApiError("missing required field: name", 400)
        if not fields.get("upstream"):
            raise ApiError("missing required field: upstream", 400)
        if fields["name"] in self.proxies:
            raise ApiError("proxy already exists", 409)
        proxy = self._start_new(fields)
        self.proxies[proxy.name] = proxy
        return proxy

    @staticmethod
    def _start_new(fields: dict) -> Proxy:
        """A new proxy, listening if enabled (the default). One created disabled binds nothing and keeps its
        listen text as given ('' when none), as Toxiproxy's does."""
        proxy = Proxy(fields["name"], fields.get("listen") or "", fields["upstream"])
        if fields.get("enabled", True):
            try:
                proxy.start()
            except ApiError:
                proxy.close()
                raise
        return proxy

    def update(self, name: str, body) -> Proxy:
        """Toxiproxy's Proxy.Update: absent fields keep their value; a listen or upstream that differs stops the
        proxy (dropping its connections) and takes the new address; then enabled is applied."""
        proxy = self.get(name)
        fields = _proxy_fields(body)
        listen = fields.get("listen", proxy.listen)
        upstream = fields.get("upstream", proxy.upstream)
        enabled = fields.get("enabled", proxy.enabled)
        if _differs(proxy, listen, upstream):
            proxy.close()
            proxy.listen, proxy.upstream = listen, upstream
            log.info("proxy %s: listen %s, upstream %s", name, listen or "(any)", upstream)
        if enabled and not proxy.enabled:
            proxy.start()
        elif not enabled and proxy.enabled:
            proxy.stop()
        return proxy

    def delete(self, name: str) -> None:
        proxy = self.get(name)
        proxy.close()
        proxy.reset_toxics()
        del self.proxies[name]

    def reset(self) -> None:
        for proxy in self.proxies.values():
            proxy.start()
            proxy.reset_toxics()

    def populate(self, body) -> tuple[list[Proxy], ApiError | None]:
        """Create or replace proxies from a list, in order, as Toxiproxy's PopulateJson: names and upstreams are
        checked for the whole list first (nothing changes if one is missing); then each proxy is kept if its
        listen and upstream are the same, else replaced. The first error stops it: the proxies done so far
        stay, and are answered with the error."""
        if not isinstance(body, list):
            raise ApiError("bad request body: expected a JSON array of proxies", 400)
        items = [_proxy_fields(entry) for entry in body]
        for i, fields in enumerate(items, 1):
            if not fields.get("name"):
                raise ApiError(f"missing required field: name at proxy {i}", 400)
            if not fields.get("upstream"):
                raise ApiError(f"missing required field: upstream at proxy {i}", 400)
        done: list[Proxy] = []
        for fields in items:
            try:
                done.append(self._add_or_replace(fields))
            except ApiError as exc:
                return done, exc
        return done, None

    def _add_or_replace(self, fields: dict) -> Proxy:
        existing = self.proxies.get(fields["name"])
        if existing is not None:
            if not _differs(existing, fields.get("listen") or "", fields["upstream"]):
                return existing
            existing.close()  # Toxiproxy stops it (its port is free), and keeps it listed until the new one starts
        proxy = self._start_new(fields)
        self.proxies[proxy.name] = proxy
        return proxy

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.close()


def _proxy_fields(body) -> dict:
    """name, listen, upstream (strings) and enabled (bool) from a JSON object; a JSON null counts as absent,
    as Go's decoder leaves the field's default."""
    if not isinstance(body, dict):
        raise ApiError("bad request body: expected a JSON object", 400)
    fields = {}
    for key in ("name", "listen", "upstream"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise ApiError(f"bad request body: {key} must be a string, got {value!r}", 400)
        if value is not None:
            fields[key] = value
    if body.get("enabled") is not None:
        if not isinstance(body["enabled"], bool):
            raise ApiError(f"bad request body: enabled must be true or false, got {body['enabled']!r}", 400)
        fields["enabled"] = body["enabled"]
    return fields


def _differs(proxy: Proxy, listen: str, upstream: str) -> bool:
    """Toxiproxy's Proxy.Differs: the listen text, resolved, against the proxy's (bound) address, and the
    upstream text as is. A listen Go cannot resolve is a 500 with Go's wording."""
    try:
        resolved = resolved_address(listen)
    except AddressError as exc:
        raise ApiError(str(exc), 500) from None
    return proxy.listen != resolved or proxy.upstream != upstream
