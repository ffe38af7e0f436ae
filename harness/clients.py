"""Recording AMQP 1.0 clients over Qpid Proton, driven from test code.

One `Clients` object runs a proton event loop on a background thread; every proton call happens on that
thread (test code hands work over through an event injector). Senders and receivers record everything they
do and see into a shared `History`, and expose small, lock-protected summaries for test assertions.

Senders behave like a well-mannered AMQP client: a message is put on the wire only when the link has credit
(so a producer without credit blocks, as 003_9cdc7c48796dae4f.txt §12.1.1.1 describes), and a drain request
with nothing queued is answered by giving the credit back.

Local transactions (AMQP 1.0 part 4): `conn.coordinator()` attaches a transaction controller, whose
`declare()`, `commit(txn)` and `rollback(txn)` record their answers; `ctl.sender()` / `ctl.receiver()` open
links on the controller's session (where the spec lets work name a transaction by default, §4.1), whose
`send(..., txn=)` and `settle(..., txn=)` make the work transactional.

Large messages (AMQP 1.0 §2.6.14, §2.7.1, §2.7.5): `clients.connect(url, max_frame_size=512)` offers the peer a
small max-frame-size, so what it sends this connection is split over many transfer frames; `conn.frames()`
says how many frames went each way. `sender.send_aborted(...)` puts the first part of a message on the wire
and then aborts it, as a sender that cannot finish a delivery does; senders and receivers record aborted
deliveries (`aborted` events; `receiver.aborted` counts the ones a receiver saw).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import socket
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from proton import Data, Delivery, Described, Endpoint, Link, Message, Terminus, symbol, ulong
from proton.reactor import ApplicationEvent, Container, EventInjector

from . import fault_log
from . import history as h
from .wait import wait_for

OUTCOMES = ("accept", "reject", "release", "modify", "modify-undeliverable", "hold")
# A JMS selector as a source filter (the AMQP JMS mapping; Qpid JMS names it so): key and descriptor
SELECTOR_KEY, SELECTOR_FILTER = "jms-selector", "apache.org:selector-filter:string"
_STATE = {
    Delivery.ACCEPTED: "accepted", Delivery.REJECTED: "rejected",
    Delivery.RELEASED: "released", Delivery.MODIFIED: "modified",
}
DEFAULT_TIMEOUT = 10.0
# AMQP 1.0 §4.5: the transactional delivery states, and the outcome descriptors a transactional-state carries.
DECLARED, TRANSACTIONAL_STATE = 0x33, 0x34
_OUTCOME_CODES = {"accept": 0x24, "reject": 0x25, "release": 0x26}
_OUTCOME_NAMES = {0x24: "accepted", 0x25: "rejected", 0x26: "released", 0x27: "modified",
                  "amqp:accepted:list": "accepted", "amqp:rejected:list": "rejected",
                  "amqp:released:list": "released", "amqp:modified:list": "modified"}


@dataclass(frozen=True)
class Received:
    seq: int | None
    producer: str | None
    body: object
    priority: int | None
    address: str | None
    properties: dict
    settled: bool  # it arrived pre-settled
    delivery_count: int = 0  # header delivery-count: prior failed attempts the sender knows of


@dataclass
class Outcome:
    outcome: str
    failed: bool = False
    undeliverable: bool = False
    condition: str | None = None
    txn: str | None = None  # hex txn-id when the outcome came in a transactional-state


class Clients:
    """The client side of a test: a proton container on its own thread, and the history it records."""

    def __init__(self, history: h.History | None = None, container_id: str = "interop-clients"):
        self.history = history or h.History()
        self._handler = _LoopHandler()
        self._container = Container(self._handler)
        self._container.container_id = container_id
        self._injector = EventInjector()
        self._container.selectable(self._injector)
        self._connections: list[ClientConnection] = []
        self._thread = threading.Thread(target=self._container.run, name="interop-clients", daemon=True)
        self._thread.start()
        self._names = itertools.count(1)

    def __enter__(self) -> Clients:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, fn: Callable, timeout: float = DEFAULT_TIMEOUT):
        """Run `fn` on the event loop thread and return its result."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed back to the caller's thread
                future.set_exception(exc)

        self._injector.trigger(ApplicationEvent("client_call", subject=run))
        return future.result(timeout)

    def connect(self, url: str, name: str | None = None, wait: bool = True, *,
                max_frame_size: int | None = None, security: ClientSecurity | None = None,
                container_id: str | None = None) -> ClientConnection:
        """A new connection. `max_frame_size` (at least 512, AMQP 1.0 §2.7.1) is the largest frame this side
        accepts, sent in its open: the peer must split what it sends into frames no larger. `security`: SASL
        PLAIN/EXTERNAL and TLS (AMQP 1.0 part 5), else SASL ANONYMOUS over plain TCP.

        `container_id`: the container-id of its open; by default one of its own, `<Clients' id>-<8 hex>`. Each
        connection has its own because brokers that take the container-id as the JMS client id (ActiveMQ
        Classic) refuse a second connection with one already connected (amqp:invalid-field, container-id); a
        case that resumes a durable subscription on a new connection names the same container-id for both."""
        container_id = container_id or f"{self._container.container_id}-{uuid.uuid4().hex[:8]}"
        conn = ClientConnection(self, url, name or f"conn{next(self._names)}", max_frame_size, security,
                                container_id)
        self._connections.append(conn)
        if wait:
            conn.wait_open()
        return conn

    def unique(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    def close(self, timeout: float = 5.0) -> None:
        if not self._thread.is_alive():
            self._release_injector()
            return
        for conn in self._connections:
            conn.close(wait=False)
        try:
            wait_for(lambda: all(c.ended for c in self._connections), timeout, "client connections to close")
        except AssertionError:
            pass  # a peer that does not answer close must not hang the test run; we stop anyway
        self.call(self._container.stop)
        self._injector.close()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._release_injector()

    def _release_injector(self) -> None:
        """Close the injector's pipe. Proton's EventInjector never closes the two descriptors of its pipe, so
        every Clients left two open: a fuzz session makes two per program, and after some 250 programs its
        descriptors passed select()'s limit of 1024 ("filedescriptor out of range in select()")."""
        for fd in self._injector.pipe:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._injector.pipe = (-1, -1)


class _LoopHandler:
    """Container-level handler: runs injected calls; connection events go to each connection's handler."""

    def on_client_call(self, event):
        event.subject()


@dataclass(frozen=True)
class ClientSecurity:
    """How a client authenticates and protects its connection (AMQP 1.0 part 5).

    `mechanism`: ANONYMOUS, PLAIN (with `user` and `password`) or EXTERNAL (the TLS client certificate is the
    identity). `ca`: the CA file the server's certificate must chain to; giving it (or `cert`) turns TLS on and
    the URL's scheme to amqps. `verify_hostname`: the certificate must name the host dialled. `cert`/`key`: the
    client's own certificate, for a server that asks for one."""

    mechanism: str = "ANONYMOUS"
    user: str | None = None
    password: str | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    key_password: str | None = None
    verify_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.ca is not None or self.cert is not None

    def ssl_domain(self):
        from proton import SSLDomain

        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        if self.ca is not None:
            domain.set_trusted_ca_db(str(self.ca))
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME if self.verify_hostname
                                           else SSLDomain.VERIFY_PEER)
        else:
            domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
        if self.cert is not None:
            domain.set_credentials(str(self.cert), str(self.key or self.cert), self.key_password)
        return domain

    def options(self, url: str) -> tuple[str, dict]:
        """(URL with the right scheme, keyword arguments for proton's Container.connect)."""
        options: dict = {"allowed_mechs": self.mechanism}
        if self.mechanism == "PLAIN":
            options.update(user=self.user, password=self.password or "", allow_insecure_mechs=True)
        if self.tls:
            options["ssl_domain"] = self.ssl_domain()
            url = "amqps://" + url.split("://", 1)[-1]
        return url, options


class ClientConnection:
    def __init__(self, clients: Clients, url: str, name: str, max_frame_size: int | None = None,
                 security: ClientSecurity | None = None, container_id: str | None = None):
        self.clients, self.url, self.name = clients, url, name
        self.container_id = container_id or clients._container.container_id
        self.max_frame_size = max_frame_size
        self.history = clients.history
        self.opened = threading.Event()
        self.ended = False
        self.condition: str | None = None
        self._links: list = []
        target, options = (security or ClientSecurity()).options(url)
        self._conn = clients.call(lambda: clients._container.connect(
            target, handler=_ConnectionHandler(self), reconnect=False, max_frame_size=max_frame_size,
            container_id=self.container_id, **options))

    def wait_open(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(lambda: self.opened.is_set() or self.ended, timeout, f"connection {self.name} to {self.url}")
        if not self.opened.is_set():
            raise ConnectionError(f"connection {self.name} to {self.url} failed: {self.condition}")

    def sender(self, address: str | None, name: str | None = None, *, presettled: bool = False,
               window: int | None = None, durable: bool = False, hold_drain: bool = False, wait: bool = True,
               timeout: float = DEFAULT_TIMEOUT, session_of: _Link | None = None) -> RecordingSender:
        """A sender. `durable` asks for a durable target terminus, so a broker that creates the queue on
        attach makes it durable (RabbitMQ does only then). `hold_drain`: a drain with nothing queued is
        answered only on `answer_drain()` (else at once), so a case can choose what happens first.
        `session_of`: open it on that link's session."""
        snd = RecordingSender(self, address, name or self.clients.unique("snd"), presettled, window, durable)
        snd.hold_drain = hold_drain
        snd.session_of = session_of
        return self._attached(snd, wait, timeout)

    def receiver(self, address: str | None, name: str | None = None, *, credit: int = 50,
                 auto_credit: bool = True, outcome: str = "accept", dynamic: bool = False,
                 capabilities: tuple[str, ...] = (), durable: bool = False, selector: str | None = None,
                 wait: bool = True, timeout: float = DEFAULT_TIMEOUT,
                 session_of: _Link | None = None) -> RecordingReceiver:
        """A receiver. `capabilities` go on the source (e.g. "topic"); `durable` asks for a durable
        subscription (terminus durable, expiry-policy never), kept by `detach(close=False)`; `selector` asks
        for a source filter `apache.org:selector-filter:string` (what a JMS selector becomes; `answered_filter`
        then says whether the peer put it in place). `session_of`: open it on that link's session."""
        rcv = RecordingReceiver(self, address, name or self.clients.unique("rcv"), credit, auto_credit,
                                outcome, dynamic, capabilities, durable)
        rcv.selector = selector
        rcv.session_of = session_of
        return self._attached(rcv, wait, timeout)

    def coordinator(self, name: str | None = None, *, wait: bool = True,
                    timeout: float = DEFAULT_TIMEOUT) -> TransactionController:
        """A transaction controller: a link to the peer's coordinator asking for local transactions."""
        return self._attached(TransactionController(self, name or self.clients.unique("txn-ctl")), wait, timeout)

    def _attached(self, link, wait: bool, timeout: float):
        """Open `link` (a sender, receiver or controller) on the clients' thread; with `wait`, return once the
        peer has answered its attach."""
        self._links.append(link)
        self.clients.call(link._open)
        if wait:
            link.wait_attached(timeout)
        return link

    def sync(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """A round trip through the peer: attach and detach a throw-away receiver on this connection.

        Frames on a connection are processed in order, so once this returns the peer has handled everything
        sent before it (and anything it sent in reply is recorded). This is how a test checks that something
        did *not* happen, without sleeping.
        """
        probe = self.receiver(self.clients.unique("interop.sync."), credit=0, timeout=timeout)
        probe.detach(timeout=timeout)

    def frames(self) -> dict:
        """AMQP frames this connection has read and written so far, and the max-frame-size the peer offered
        in its open (what our frames may not exceed)."""
        def do():
            t = self._conn.transport
            if t is None:
                return {"in": None, "out": None, "remote_max_frame_size": None}
            return {"in": t.frames_input, "out": t.frames_output, "remote_max_frame_size": t.remote_max_frame_size}
        return self.clients.call(do)

    def flow_together(self, receivers: list[RecordingReceiver], credit: int) -> None:
        """Grant credit on several receivers in one go, so the flow frames leave in the same write."""
        def do():
            for rcv in receivers:
                rcv._link.flow(credit)
        self.clients.call(do)

    def close(self, wait: bool = True, timeout: float = DEFAULT_TIMEOUT) -> None:
        def do():
            if self._conn.state & Endpoint.LOCAL_ACTIVE:
                self._conn.close()
        self.clients.call(do)
        if wait:
            wait_for(lambda: self.ended, timeout, f"connection {self.name} to close")

    def kill(self) -> None:
        """Drop the TCP connection without an AMQP close, as a crashed client would."""
        def do():
            sel = getattr(self._conn.transport, "_selectable", None)
            sock = getattr(sel, "_delegate", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.clients.call(do)
        fault_log.note("client connection dropped", f"client {self.name}")
        wait_for(lambda: self.ended, DEFAULT_TIMEOUT, f"connection {self.name} to drop")


class _Link:
    """What senders and receivers share: attach/detach bookkeeping."""

    def __init__(self, conn: ClientConnection, address: str | None, name: str):
        self.conn, self.address, self.name = conn, address, name
        self.history = conn.history
        self.attached = threading.Event()
        self.detached = threading.Event()
        self.condition: str | None = None
        self.remote_address: str | None = None
        self._lock = threading.Lock()
        self._link: Link | None = None
        self._detach_requested = False
        self.session_of: _Link | None = None

    def _session(self):
        if self.session_of is not None:
            return self.session_of._link.session
        session = self.conn._conn.session()
        session.open()
        return session

    def wait_attached(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(lambda: self.attached.is_set() or self.detached.is_set(), timeout, f"link {self.name} to attach")
        if not self.attached.is_set():
            raise ConnectionError(f"link {self.name} on {self.address!r} was refused: {self.condition}")

    def wait_detached(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(self.detached.is_set, timeout, f"link {self.name} to detach")

    def detach(self, wait: bool = True, timeout: float = DEFAULT_TIMEOUT, close: bool = True) -> None:
        """Close the link (`close=False`: detach without closing, which keeps a durable subscription)."""
        def do():
            if self._link is not None and self._link.state & Endpoint.LOCAL_ACTIVE:
                self._detach_requested = True
                self._link.close() if close else self._link.detach()
        self.conn.clients.call(do)
        if wait:
            self.wait_detached(timeout)

    def end_session(self) -> None:
        """End the link's session (an `end` frame) without detaching the link first: a link lives on its session,
        so the peer must treat it as gone (some clients and brokers end a session rather than detach its links).
        The session must be this link's own (no `session_of`)."""
        def do():
            session = self._link.session if self._link is not None else None
            if session is not None and session.state & Endpoint.LOCAL_ACTIVE:
                self._detach_requested = True
                session.close()
        self.conn.clients.call(do)

    # called on the loop thread by the connection handler
    def _on_attached(self, link: Link) -> None:
        # A refused attach comes back with no terminus on our side's far end, then a detach with the error.
        terminus = link.remote_target if link.is_sender else link.remote_source
        if terminus is None or terminus.type == Terminus.UNSPECIFIED:
            return
        self.remote_address = terminus.address
        self.history.record(self.name, h.ATTACHED, address=self.remote_address)
        self.attached.set()

    def _on_detached(self, link: Link, by: str) -> None:
        cond = link.remote_condition
        self.condition = f"{cond.name}: {cond.description}" if cond is not None else None
        self.history.record(self.name, h.DETACHED, by=by, condition=self.condition)
        self.detached.set()


class RecordingSender(_Link):
    def __init__(self, conn, address, name, presettled: bool, window: int | None, durable: bool = False):
        super().__init__(conn, address, name)
        self.presettled = presettled
        self.durable_target = durable
        self.window = window
        self.credit = 0
        self.drain = False
        self.hold_drain = False  # Connection.sender(hold_drain=True)
        self.sent = 0
        self.outcomes: dict[int, Outcome] = {}
        self._queue: deque[Message] = deque()
        self._seqs = itertools.count()
        self._in_flight = 0
        self._partial: Delivery | None = None  # a delivery begun by send_aborted and not yet aborted

    def _open(self):
        link = self._session().sender(self.name)
        if self.address is not None:
            link.target.address = self.address
        if self.durable_target:
            link.target.durability = Terminus.DELIVERIES
        if self.presettled:
            link.snd_settle_mode = Link.SND_SETTLED
        link.recording = self
        self._link = link
        link.open()

    def send(self, count: int = 1, *, to: str | None = None, priority: int | None = None,
             body: object = None, properties: dict | None = None, durable: bool = False,
             ttl: float | None = None, txn: bytes | None = None) -> list[int]:
        """Queue `count` messages; each goes on the wire when the link has credit. Returns their seqs.
        `txn`: post them in that transaction (their transfers carry a transactional-state)."""
        messages, seqs = [], []
        for _ in range(count):
            seq = next(self._seqs)
            msg = Message(body=body if body is not None else f"{self.name}-{seq}", durable=durable)
            msg.properties = {"seq": seq, "producer": self.name, **(properties or {})}
            if to is not None:
                msg.address = to
            if priority is not None:
                msg.priority = priority
            if ttl is not None:
                msg.ttl = ttl  # seconds (header ttl is sent in milliseconds)
            msg.txn = txn
            messages.append(msg)
            seqs.append(seq)

        def enqueue():
            self._queue.extend(messages)
            self._pump()
        self.conn.clients.call(enqueue)
        return seqs

    def send_aborted(self, *, body: object = None, part: int | None = None, properties: dict | None = None,
                     timeout: float = DEFAULT_TIMEOUT) -> int:
        """Begin a message and abort it (AMQP 1.0 §2.7.5 `aborted`): the first `part` bytes of its encoding
        (half if None) go out in transfers with `more` set, and once they are on the wire a transfer with
        `aborted` set ends the delivery. The delivery is settled, with no outcome. Returns its seq; messages
        sent after it get later seqs. Waits for credit first, since nothing goes out without it; messages
        queued earlier go first, and `send()` calls made meanwhile wait behind it."""
        seq = next(self._seqs)
        msg = Message(body=body if body is not None else f"{self.name}-{seq}")
        msg.properties = {"seq": seq, "producer": self.name, **(properties or {})}
        encoded = msg.encode()
        part = len(encoded) // 2 if part is None else part
        if not 0 < part < len(encoded):
            raise ValueError(f"part must be between 1 and {len(encoded) - 1} bytes, got {part}")
        wait_for(lambda: not self.queued and self.credit > 0 or self.detached.is_set(), timeout,
                 f"sender {self.name} to have credit and nothing queued before an aborted delivery",
                 describe=lambda: f"credit {self.credit}, {self.queued} queued")
        if self.detached.is_set():
            raise ConnectionError(f"sender {self.name} is detached: {self.condition}")

        def begin():
            link = self._link
            dlv = link.delivery(link.delivery_tag())
            link.stream(encoded[:part])
            dlv.seq = seq
            self._partial = dlv
            return dlv
        dlv = self.conn.clients.call(begin)
        # Proton sends nothing at all for a delivery aborted before any of it went out: wait until the part has
        # left this side (nothing of it buffered in the link, nothing in the transport's output).
        wait_for(lambda: self.conn.clients.call(lambda: dlv.pending == 0 and self._output_pending() == 0)
                 or self.conn.ended, timeout, f"sender {self.name} to put {part} bytes of a message on the wire")

        def abort():
            dlv.abort()  # settles it; proton sends a transfer with aborted set, and advances the link
            self._partial = None
            self.sent += 1
            self.history.record(self.name, h.ABORTED, seq=seq, sent_bytes=part)
            self._pump()
        self.conn.clients.call(abort)
        return seq

    def _output_pending(self) -> int:
        transport = self.conn._conn.transport
        return max(0, transport.pending()) if transport is not None and not transport.closed else 0

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queue)

    def settled_count(self) -> int:
        with self._lock:
            return len(self.outcomes)

    def outcome_counts(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for o in self.outcomes.values():
                counts[o.outcome] = counts.get(o.outcome, 0) + 1
            return counts

    def wait_credit(self, minimum: int = 1, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(lambda: self.credit >= minimum, timeout, f"sender {self.name} to get credit >= {minimum}",
                 describe=lambda: f"credit {self.credit}")

    def answer_drain(self) -> None:
        """Answer a drain held by `hold_drain` (hand the credit back if nothing is queued), and answer any
        later drain at once."""
        def answer():
            self.hold_drain = False
            self._pump()
        self.conn.clients.call(answer)

    def wait_credit_at_most(self, maximum: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(lambda: self.credit <= maximum, timeout, f"sender {self.name} credit to fall to {maximum}",
                 describe=lambda: f"credit {self.credit}, drain {self.drain}")

    def wait_sent(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        wait_for(lambda: self.sent >= n, timeout, f"sender {self.name} to put {n} messages on the wire",
                 describe=lambda: f"{self.sent} sent, {self.queued} queued, credit {self.credit}")

    def wait_outcomes(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> dict[int, Outcome]:
        wait_for(lambda: self.settled_count() >= n, timeout, f"{n} outcomes at sender {self.name}",
                 describe=lambda: f"{self.settled_count()} outcomes {self.outcome_counts()}, {self.sent} sent")
        with self._lock:
            return dict(self.outcomes)

    # loop thread
    def _pump(self):
        link = self._link
        if link is None or not link.state & Endpoint.LOCAL_ACTIVE or not self.attached.is_set():
            return
        if self._partial is not None:  # the link's current delivery is unfinished: nothing else may start
            self._note_credit(link)
            return
        while self._queue and link.credit > 0 and (self.window is None or self._in_flight < self.window):
            with self._lock:
                msg = self._queue.popleft()
            seq = msg.properties["seq"]
            dlv = link.send(msg)
            if msg.txn is not None:  # set before the frame is written, so the transfer carries it
                dlv.local.data = [msg.txn]
                dlv.update(TRANSACTIONAL_STATE)
            dlv.seq = seq
            self.sent += 1
            settled = link.snd_settle_mode == Link.SND_SETTLED
            if not settled:
                self._in_flight += 1
            self.history.record(self.name, h.SEND, seq=seq, settled=settled, address=msg.address,
                                **({"txn": msg.txn.hex()} if msg.txn is not None else {}))
        if link.drain_mode and not self._queue and link.credit > 0 and not self.hold_drain:
            link.drained()
        self._note_credit(link)

    def _note_credit(self, link):
        credit, drain = link.credit, link.drain_mode
        if credit != self.credit or drain != self.drain:
            self.credit, self.drain = credit, drain
            self.history.record(self.name, h.CREDIT, credit=credit, drain=drain)

    def _on_flow(self, link):
        self._pump()
        self._note_credit(link)

    def _on_delivery(self, dlv):
        if dlv.aborted:  # settled when we aborted it: it has no outcome, whatever the peer says of it
            return
        state = dlv.remote_state
        txn, inner = _transactional(dlv)
        if state not in _STATE and inner is None and not dlv.settled:
            return
        seq = getattr(dlv, "seq", None)
        remote = dlv.remote
        cond = remote.condition
        outcome = Outcome(inner or _STATE.get(state, "settled"), bool(remote.failed), bool(remote.undeliverable),
                          f"{cond.name}: {cond.description}" if cond is not None else None, txn)
        # The history first: a case that has waited for the outcome (settled_count) must find it there too.
        self.history.record(self.name, h.OUTCOME, seq=seq, outcome=outcome.outcome, failed=outcome.failed,
                            undeliverable=outcome.undeliverable, condition=outcome.condition,
                            **({"txn": txn} if txn is not None else {}))
        with self._lock:
            self.outcomes[seq] = outcome
        self._in_flight -= 1
        dlv.settle()
        self._pump()


class RecordingReceiver(_Link):
    selector: str | None = None

    def __init__(self, conn, address, name, credit: int, auto_credit: bool, outcome: str, dynamic: bool,
                 capabilities: tuple[str, ...] = (), durable: bool = False):
        super().__init__(conn, address, name)
        self.capabilities, self.durable = capabilities, durable
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        self.window, self.auto_credit, self.outcome, self.dynamic = credit, auto_credit, outcome, dynamic
        self.received: list[Received] = []
        self.aborted = 0  # deliveries the sender aborted after they had begun to arrive
        self._held: dict[int, Delivery] = {}
        self._held_order: list[int] = []

    def _open(self):
        link = self._session().receiver(self.name)
        if self.dynamic:
            link.source.dynamic = True
        elif self.address is not None:
            link.source.address = self.address
        for cap in self.capabilities:
            link.source.capabilities.put_symbol(cap)
        if self.durable:
            link.source.durability = Terminus.DELIVERIES
            link.source.expiry_policy = Terminus.EXPIRE_NEVER
        if self.selector is not None:
            link.source.filter.put_dict({symbol(SELECTOR_KEY): Described(symbol(SELECTOR_FILTER), self.selector)})
        link.recording = self
        self._link = link
        link.open()
        if self.window:
            link.flow(self.window)

    @property
    def answered_filter(self) -> dict:
        """The source filter the peer answered with: the filters it says are in place (AMQP 1.0 §3.5.3)."""
        def read():
            data = self._link.remote_source.filter
            data.rewind()
            return data.get_object() if data.next() is not None else None
        return self.conn.clients.call(read) or {}

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def messages(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def seqs(self, producer: str | None = None) -> list[int]:
        return [m.seq for m in self.messages() if producer is None or m.producer == producer]

    def wait_received(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> list[Received]:
        wait_for(lambda: self.count >= n, timeout, f"receiver {self.name} to get {n} messages",
                 describe=lambda: f"{self.count} received")
        return self.messages()

    def flow(self, credit: int) -> None:
        self.conn.clients.call(lambda: self._link.flow(credit))

    def drain(self, credit: int) -> None:
        """Grant `credit` with drain set: the sender must use it up now or hand it back."""
        self.conn.clients.call(lambda: self._link.drain(credit))

    @property
    def credit(self) -> int:
        """Credit the sender has not used yet, as this receiver knows it."""
        return self.conn.clients.call(lambda: self._link.credit)

    def settle(self, outcome: str, count: int | None = None, *, txn: bytes | None = None,
               settle: bool = True) -> int:
        """Settle held (unsettled) messages, oldest first, with the given outcome; returns how many.

        `txn`: give the outcome (accept, reject or release) within that transaction instead. `settle=False`
        then sends the transactional outcome without settling: the messages stay held, and a later
        `settle()` may give them another outcome (after a rollback, say)."""
        if txn is not None and outcome not in _OUTCOME_CODES:
            raise ValueError(f"outcome within a transaction must be one of {', '.join(_OUTCOME_CODES)}, "
                             f"got {outcome!r}")
        if txn is None and not settle:
            raise ValueError("settle=False needs a txn: an outcome outside a transaction is final")

        def do():
            todo = self._held_order[:count] if count is not None else list(self._held_order)
            for key in todo:
                dlv, seq = self._held[key]
                if txn is None:
                    _apply_outcome(dlv, outcome)
                else:
                    dlv.local.data = [txn, Described(ulong(_OUTCOME_CODES[outcome]), [])]
                    dlv.update(TRANSACTIONAL_STATE)
                    if settle:
                        dlv.settle()
                if settle:
                    self._held_order.remove(key)
                    del self._held[key]
                self.history.record(self.name, h.SETTLE, seq=seq, outcome=outcome, settled=settle,
                                    **({"txn": txn.hex()} if txn is not None else {}))
            return len(todo)
        return self.conn.clients.call(do)

    @property
    def held(self) -> int:
        return self.conn.clients.call(lambda: len(self._held))

    # loop thread
    def _on_delivery(self, dlv):
        link = self._link
        if dlv.aborted:  # AMQP 1.0 §2.7.5: discard what came of it; it is settled
            discarded = dlv.pending
            dlv.settle()
            with self._lock:
                self.aborted += 1
            self.history.record(self.name, h.ABORTED, bytes=discarded)
            if self.auto_credit and self.window and link.credit < self.window // 2 + 1:
                link.flow(self.window - link.credit)  # an aborted delivery used up credit too
            return
        if dlv.partial or not dlv.readable:
            return
        data = link.recv(dlv.pending)
        link.advance()
        msg = Message()
        msg.decode(data)
        props = dict(msg.properties or {})
        body = msg.body
        if isinstance(body, memoryview):  # a binary body is a view into proton's decode buffer: keep a copy
            body = bytes(body)
        item = Received(props.get("seq"), props.get("producer"), body, msg.priority, msg.address, props,
                        dlv.settled, msg.delivery_count or 0)
        self.history.record(self.name, h.RECEIVE, seq=item.seq, producer=item.producer, priority=msg.priority,
                            address=msg.address, settled=dlv.settled, delivery_count=item.delivery_count)
        if dlv.settled:
            dlv.settle()
        elif self.outcome == "hold":
            key = id(dlv)
            self._held[key] = (dlv, item.seq)
            self._held_order.append(key)
        else:
            _apply_outcome(dlv, self.outcome)
            self.history.record(self.name, h.SETTLE, seq=item.seq, outcome=self.outcome)
        # Visible to the case only now: one that has waited for `count` must find the message, and its settle,
        # in the history too (a check made at once missed the last receive, seen once in a reference run).
        with self._lock:
            self.received.append(item)
        if self.auto_credit and self.window and link.credit < self.window // 2 + 1:
            link.flow(self.window - link.credit)


class TransactionRefused(Exception):
    """A declare the coordinator did not answer with `declared` (the message says what it answered)."""


class TransactionController(_Link):
    """A link to the peer's transaction coordinator (AMQP 1.0 §4.2): declares and discharges transactions.

    Each answer is recorded in the history (DECLARE, DISCHARGE) and kept in `answers` (control seq ->
    Outcome). A refused attach is raised by `wait_attached` like any link's."""

    def __init__(self, conn: ClientConnection, name: str):
        super().__init__(conn, None, name)
        self.capabilities: tuple[str, ...] = ()  # what the coordinator said it supports, on attach
        self.answers: dict[int, Outcome] = {}
        self._seqs = itertools.count()

    def _open(self):
        link = self._session().sender(self.name)
        link.target.type = Terminus.COORDINATOR
        caps = link.target.capabilities
        caps.put_array(False, Data.SYMBOL)
        caps.enter()
        caps.put_symbol("amqp:local-transactions")
        caps.exit()
        link.recording = self
        self._link = link
        link.open()

    def _on_attached(self, link: Link) -> None:
        # The coordinator target comes back as the peer's own: there is no address to show.
        if link.remote_target is None or link.remote_target.type != Terminus.COORDINATOR:
            return
        caps = link.remote_target.capabilities
        caps.rewind()
        value = caps.get_object() if caps.next() is not None else None
        values = getattr(value, "elements", None)  # an array of symbols, or a single one
        self.capabilities = tuple(str(v) for v in (values if values is not None else [value] if value else []))
        self.history.record(self.name, h.ATTACHED, address="coordinator", capabilities=list(self.capabilities))
        self.attached.set()

    def sender(self, address: str | None, **kwargs) -> RecordingSender:
        """A sender on this controller's session."""
        return self.conn.sender(address, session_of=self, **kwargs)

    def receiver(self, address: str | None, **kwargs) -> RecordingReceiver:
        """A receiver on this controller's session."""
        return self.conn.receiver(address, session_of=self, **kwargs)

    def declare(self, timeout: float = DEFAULT_TIMEOUT) -> bytes:
        """A new transaction's id; TransactionRefused if the coordinator answers anything but `declared`."""
        answer = self._control(Described(symbol("amqp:declare:list"), [None]), h.DECLARE, {}, timeout)
        if answer.outcome != "declared":
            raise TransactionRefused(f"declare on {self.conn.url} was {answer.outcome}: {answer.condition}")
        return bytes.fromhex(answer.txn)

    def commit(self, txn: bytes, timeout: float = DEFAULT_TIMEOUT) -> Outcome:
        """Discharge `txn` with fail=false; the coordinator's answer (accepted, or rejected with why)."""
        return self._discharge(txn, False, timeout)

    def rollback(self, txn: bytes, timeout: float = DEFAULT_TIMEOUT) -> Outcome:
        """Discharge `txn` with fail=true."""
        return self._discharge(txn, True, timeout)

    def _discharge(self, txn: bytes, fail: bool, timeout: float) -> Outcome:
        return self._control(Described(symbol("amqp:discharge:list"), [txn, fail]), h.DISCHARGE,
                             {"txn": txn.hex(), "fail": fail}, timeout)

    def _control(self, body: Described, kind: str, data: dict, timeout: float) -> Outcome:
        seq = next(self._seqs)

        def send():
            if not self.attached.is_set() or self.detached.is_set():
                raise ConnectionError(f"transaction controller {self.name} is not attached: {self.condition}")
            dlv = self._link.send(Message(body=body))
            dlv.control = (seq, kind, data)
        self.conn.clients.call(send)
        wait_for(lambda: seq in self.answers or self.detached.is_set(), timeout,
                 f"the coordinator to answer {kind} on {self.name}")
        if seq not in self.answers:
            raise ConnectionError(f"transaction controller {self.name} detached before the {kind} was answered: "
                                  f"{self.condition}")
        return self.answers[seq]

    # loop thread
    def _on_delivery(self, dlv):
        control = getattr(dlv, "control", None)
        state = dlv.remote_state
        if control is None or (state not in _STATE and state != DECLARED and not dlv.settled):
            return
        seq, kind, data = control
        cond = dlv.remote.condition
        txn = data.get("txn")
        if state == DECLARED:
            txn = bytes(dlv.remote.data[0]).hex()
        outcome = Outcome("declared" if state == DECLARED else _STATE.get(state, "settled"),
                          condition=f"{cond.name}: {cond.description}" if cond is not None else None, txn=txn)
        self.history.record(self.name, kind, **{**data, "txn": txn, "outcome": outcome.outcome,
                                                "condition": outcome.condition})
        with self._lock:
            self.answers[seq] = outcome
        dlv.settle()


def _transactional(dlv: Delivery) -> tuple[str | None, str | None]:
    """(hex txn-id, outcome name) of a delivery whose remote state is a transactional-state, else Nones."""
    if dlv.remote_state != TRANSACTIONAL_STATE:
        return None, None
    data = list(dlv.remote.data or []) + [None, None]
    txn, outcome = data[0], data[1]
    code = getattr(outcome, "descriptor", None)
    code = int(code) if isinstance(code, int) else str(code) if code is not None else None
    return (bytes(txn).hex() if txn is not None else None), _OUTCOME_NAMES.get(code, "transactional")


def _apply_outcome(dlv: Delivery, outcome: str) -> None:
    if outcome == "accept":
        dlv.update(Delivery.ACCEPTED)
    elif outcome == "reject":
        dlv.update(Delivery.REJECTED)
    elif outcome == "release":
        dlv.update(Delivery.RELEASED)
    elif outcome in ("modify", "modify-undeliverable"):
        dlv.local.failed = True
        dlv.local.undeliverable = outcome == "modify-undeliverable"
        dlv.update(Delivery.MODIFIED)
    else:
        raise ValueError(f"cannot settle with outcome {outcome!r}")
    dlv.settle()


class _ConnectionHandler:
    """Proton events of one client connection, routed to the recording link objects."""

    def __init__(self, conn: ClientConnection):
        self.conn = conn

    def on_connection_remote_open(self, event):
        self.conn.opened.set()
        self.conn.history.record(self.conn.name, "connected", container=event.connection.remote_container)

    def on_link_remote_open(self, event):
        rec = getattr(event.link, "recording", None)
        if rec is not None:
            rec._on_attached(event.link)
            if isinstance(rec, RecordingSender):
                rec._on_flow(event.link)

    def on_link_flow(self, event):
        rec = getattr(event.link, "recording", None)
        if isinstance(rec, RecordingSender):
            rec._on_flow(event.link)

    def on_delivery(self, event):
        rec = getattr(event.link, "recording", None)
        if rec is not None:
            rec._on_delivery(event.delivery)

    def on_link_remote_close(self, event):
        self._remote_detach(event.link, closed=True)

    def on_link_remote_detach(self, event):
        self._remote_detach(event.link, closed=False)

    def _remote_detach(self, link, closed: bool):
        rec = getattr(link, "recording", None)
        ours = rec is not None and rec._detach_requested
        if rec is not None and not rec.detached.is_set():
            rec._on_detached(link, by="us" if ours else "peer")
        if link.state & Endpoint.LOCAL_ACTIVE and not ours:
            link.close() if closed else link.detach()

    def on_session_remote_close(self, event):
        """Some peers (RabbitMQ) end the whole session on a link error: its links are detached with it."""
        session = event.session
        cond = session.remote_condition
        for rec in self.conn._links:
            link = rec._link
            if link is not None and link.session == session and not rec.detached.is_set():
                rec.condition = f"{cond.name}: {cond.description}" if cond is not None else "session ended"
                rec.history.record(rec.name, h.DETACHED, by="session", condition=rec.condition)
                rec.detached.set()
        if session.state & Endpoint.LOCAL_ACTIVE:
            session.close()

    def on_connection_remote_close(self, event):
        cond = event.connection.remote_condition
        if cond is not None:
            self.conn.condition = f"{cond.name}: {cond.description}"
        if event.connection.state & Endpoint.LOCAL_ACTIVE:
            event.connection.close()

    def on_transport_error(self, event):
        cond = event.transport.condition
        if cond is not None and self.conn.condition is None:
            self.conn.condition = f"{cond.name}: {cond.description}"

    def on_transport_closed(self, event):
        if self.conn.ended:
            return
        self.conn.ended = True
        self.conn.history.record(self.conn.name, h.DISCONNECTED, condition=self.conn.condition)
        for link in self.conn._links:
            if not link.detached.is_set():
                link.condition = link.condition or "connection closed"
                link.history.record(link.name, h.DETACHED, by="connection", condition=link.condition)
                link.detached.set()
