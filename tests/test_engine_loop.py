"""reference/loop.py's EngineLoop against real sockets and real proton clients.

The broker's behaviour on it is covered by the broker suites; these cases pin the loop's own duties: events
reach the handler with the Container's method names, heartbeats keep an idle client's connection alive,
peers that vanish (EOF, reset, garbage) are dropped without disturbing the others, timers and injected
events run on the loop's thread, and `stop` ends `run`. And what makes it a server that survives its
clients: a handler's error closes only that connection (with the AMQP error a peer can read), malformed SASL
frames never reach proton-C, a socket whose peer closed is closed whatever state its transport is in, and
outgoing connections come up or fail like accepted ones.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest
from proton import Endpoint, Message
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector
from proton.utils import BlockingConnection

from harness.wait import wait_for
from reference.loop import EngineLoop

TIMEOUT = 10.0


class EchoServer:
    """Opens what the peer opens, gives credit, and records what it sees (accessed from the test thread
    only through `seen`, a list appended to on the loop's thread)."""

    def __init__(self):
        self.seen: list[str] = []
        self.messages: list[str] = []
        self.containers: list[str] = []
        self.loop_thread: str | None = None

    def on_reactor_init(self, event):
        self.loop_thread = threading.current_thread().name
        self.seen.append("init")

    def on_connection_remote_open(self, event):
        self.seen.append("connection open")
        self.containers.append(event.connection.remote_container)  # raises on a container-id that is not UTF-8
        event.connection.open()

    def on_session_remote_open(self, event):
        event.session.open()

    def on_link_remote_open(self, event):
        link = event.link
        if (link.remote_target.address or "") == "boom":
            raise RuntimeError("a bug in the handler")  # what the loop must contain to this connection
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        if link.is_receiver:
            link.flow(10)

    def on_link_flow(self, event):
        # A receiver attached to "big:N" gets one message with an N-byte body.
        link = event.link
        address = link.remote_source.address or ""
        if link.is_sender and address.startswith("big:") and link.credit > 0 and not getattr(link, "done", 0):
            link.done = 1
            link.send(Message(body=b"x" * int(address[4:])))

    def on_delivery(self, event):
        dlv = event.delivery
        if dlv.link.is_receiver and not dlv.partial:
            message = Message()
            message.decode(dlv.link.recv(dlv.pending))
            dlv.link.advance()
            self.messages.append(message.body)
            dlv.update(dlv.ACCEPTED)
            dlv.settle()
            dlv.link.flow(1)

    def on_connection_remote_close(self, event):
        self.seen.append("connection close")
        if event.connection.state & Endpoint.LOCAL_ACTIVE:
            event.connection.close()

    def on_transport_closed(self, event):
        self.seen.append("transport closed")

    def on_tick_please(self, _event):
        self.seen.append(f"injected on {threading.current_thread().name}")

    def on_timer_task(self, event):
        self.seen.append(f"timer on {threading.current_thread().name}")


@pytest.fixture
def served():
    server = EchoServer()
    loop = EngineLoop(server)
    listener = loop.listen("127.0.0.1:0")
    injector = EventInjector()
    loop.selectable(injector)
    thread = threading.Thread(target=loop.run, name="engine-loop", daemon=True)
    thread.start()
    yield server, loop, listener, injector
    loop.stop()
    injector.trigger(ApplicationEvent("stop_now"))  # wakes the loop so that it sees the stop flag
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "stop() ends run()"


def test_a_client_sends_and_the_handler_sees_container_style_events(served):
    server, loop, listener, _ = served
    conn = BlockingConnection(f"amqp://127.0.0.1:{listener.port}", timeout=TIMEOUT)
    sender = conn.create_sender("anything")
    sender.send(Message(body="hello"))  # blocks until the server settles it
    conn.close()
    assert server.messages == ["hello"]
    wait_for(lambda: "transport closed" in server.seen, TIMEOUT, "the server to see the transport close")
    assert server.seen[:2] == ["init", "connection open"]
    wait_for(lambda: not loop._peers, TIMEOUT, "the loop to drop the closed peer")


class IdleClient(MessagingHandler):
    """Connects asking for heartbeats within 1 s, stays silent for 3 s, then sends one message. Its container
    runs all the time (unlike a BlockingConnection's), so it reads the server's heartbeats as they come."""

    def __init__(self, url: str):
        super().__init__()
        self.url, self.result, self.sent = url, None, False

    def on_start(self, event):
        self.conn = event.container.connect(self.url, heartbeat=1, reconnect=False)
        event.container.schedule(3.0, self)  # the idle spell is the condition under test

    def on_timer_task(self, event):
        event.container.create_sender(self.conn, "anything")

    def on_sendable(self, event):
        if not self.sent:
            self.sent = True
            event.sender.send(Message(body="after a quiet spell"))

    def on_accepted(self, event):
        self.result = "accepted"
        event.connection.close()

    def on_transport_error(self, event):
        self.result = f"transport error: {event.transport.condition}"


def test_heartbeats_keep_an_idle_connection_open(served):
    _, _, listener, _ = served
    client = IdleClient(f"amqp://127.0.0.1:{listener.port}")
    thread = threading.Thread(target=Container(client).run, daemon=True)
    thread.start()
    thread.join(TIMEOUT)
    assert client.result == "accepted", "the server must send heartbeats at least every 0.5 s"


@pytest.mark.parametrize("how", ["eof", "reset", "garbage"])
def test_a_vanishing_peer_is_dropped_and_others_are_served(served, how):
    server, loop, listener, _ = served
    raw = socket.create_connection(("127.0.0.1", listener.port), timeout=TIMEOUT)
    if how == "garbage":
        raw.sendall(b"GET / HTTP/1.1\r\n\r\n")
    if how == "reset":
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()
    wait_for(lambda: not loop._peers, TIMEOUT, f"the loop to drop a peer that went away ({how})",
             describe=lambda: f"{len(loop._peers)} peer(s)")
    conn = BlockingConnection(f"amqp://127.0.0.1:{listener.port}", timeout=TIMEOUT)
    conn.create_sender("anything").send(Message(body="still serving"))
    conn.close()
    assert server.messages == ["still serving"]


def test_timers_and_injected_events_run_on_the_loop_thread(served):
    server, loop, _, injector = served
    injector.trigger(ApplicationEvent("tick_please"))
    wait_for(lambda: any(s.startswith("injected") for s in server.seen), TIMEOUT, "the injected event")
    injector.trigger(ApplicationEvent("schedule_please"))  # no handler method: ignored
    loop_thread = server.loop_thread
    assert f"injected on {loop_thread}" in server.seen
    # schedule() from the loop thread (as handlers do): run it through an injected event's handler
    server.on_schedule_please = lambda _e: loop.schedule(0.05, server)
    injector.trigger(ApplicationEvent("schedule_please"))
    wait_for(lambda: f"timer on {loop_thread}" in server.seen, TIMEOUT, "the scheduled timer to fire")


def test_a_message_larger_than_the_transport_buffer_goes_out_without_waiting_for_other_io(served):
    # The EchoServer schedules no timers and the client asks for no heartbeats, so nothing but the loop's own
    # writing can move the rest of a 4 MiB message after its first buffer. The loop once wrote one buffer a
    # turn and then slept in select: this client would wait forever.
    _, _, listener, _ = served
    conn = BlockingConnection(f"amqp://127.0.0.1:{listener.port}", timeout=TIMEOUT)
    message = conn.create_receiver("big:4194304", credit=1).receive(timeout=TIMEOUT)
    conn.close()
    assert len(message.body) == 4194304


def test_listen_on_a_port_in_use_raises_oserror():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        with pytest.raises(OSError):
            EngineLoop(EchoServer()).listen(f"127.0.0.1:{holder.getsockname()[1]}")
    finally:
        holder.close()


AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"


def frame(body: bytes, frame_type: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, 0) + body


def open_frame(container_id: bytes) -> bytes:
    fields = b"\xa1" + bytes([len(container_id)]) + container_id
    return frame(b"\x00\x53\x10\xc0" + bytes([len(fields) + 1, 1]) + fields)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server writes until it closes the socket (the test fails if it never does)."""
    sock.settimeout(TIMEOUT)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def still_serving(server: EchoServer, port: int, body: str) -> None:
    conn = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    conn.create_sender("anything").send(Message(body=body))
    conn.close()
    assert body in server.messages


def test_a_handler_error_closes_that_connection_with_internal_error_and_others_go_on(served):
    server, loop, listener, _ = served
    bystander = BlockingConnection(f"amqp://127.0.0.1:{listener.port}", timeout=TIMEOUT)
    victim = BlockingConnection(f"amqp://127.0.0.1:{listener.port}", timeout=TIMEOUT)
    with pytest.raises(Exception) as failure:
        victim.create_sender("boom")
    assert "amqp:internal-error" in str(failure.value) and "a bug in the handler" in str(failure.value)
    bystander.create_sender("anything").send(Message(body="bystander"))
    bystander.close()
    assert server.messages == ["bystander"]
    wait_for(lambda: len(loop._peers) == 0, TIMEOUT, "the failed connection's socket to be closed",
             describe=lambda: f"{len(loop._peers)} peer(s)")


def test_a_container_id_that_is_not_utf8_is_answered_with_decode_error(served):
    server, _, listener, _ = served
    raw = socket.create_connection(("127.0.0.1", listener.port), timeout=TIMEOUT)
    raw.sendall(AMQP_HEADER + open_frame(b"\xff\xfe not utf-8"))
    answer = read_until_closed(raw)
    raw.close()
    assert b"amqp:decode-error" in answer, answer
    still_serving(server, listener.port, "after a bad container-id")


def test_a_sasl_init_without_mechanism_never_reaches_proton(served):
    """proton-C 0.40 dereferences the null mechanism: the whole process would die with SIGSEGV."""
    server, _, listener, _ = served
    raw = socket.create_connection(("127.0.0.1", listener.port), timeout=TIMEOUT)
    raw.sendall(SASL_HEADER + frame(b"\x00\x53\x41\xc0\x02\x01\x40", frame_type=1))
    read_until_closed(raw)
    raw.close()
    still_serving(server, listener.port, "after a null mechanism")


def test_a_socket_is_closed_when_its_peer_closes_after_a_framing_error(served):
    """The transport stops reading after a framing error; the loop must still see the peer's EOF, or the
    socket stays in CLOSE_WAIT for the life of the server."""
    server, loop, listener, _ = served
    raw = socket.create_connection(("127.0.0.1", listener.port), timeout=TIMEOUT)
    raw.sendall(AMQP_HEADER + open_frame(b"c") + struct.pack(">IBBH", 4, 2, 0, 0))  # frame size below 8
    raw.settimeout(TIMEOUT)
    assert b"framing-error" in raw.recv(65536) + raw.recv(65536)
    raw.shutdown(socket.SHUT_WR)
    wait_for(lambda: not loop._peers, TIMEOUT, "the server to close the socket its peer closed",
             describe=lambda: f"{len(loop._peers)} peer(s)")
    raw.close()


class Dialler:
    """A handler that dials out from its own loop and records how each connection ends up."""

    def __init__(self, url: str):
        self.url, self.events = url, []

    def on_reactor_init(self, event):
        self.conn = event.container.connect(self.url)

    def on_connection_remote_open(self, event):
        self.events.append(("open", event.connection.remote_container))

    def on_transport_closed(self, event):
        self.events.append(("closed", str(event.transport.condition)))


@pytest.mark.parametrize("reachable", [True, False, "no-port-number"])
def test_outgoing_connections_come_up_or_report_why_not(served, reachable):
    """A dial that connects opens; one refused, or to an address the socket layer cannot even take (a port that
    is no number), fails on that connection alone, with the reason: the loop goes on."""
    _, _, listener, _ = served
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = listener.port if reachable is True else unused.getsockname()[1]
    dialler = Dialler(f"amqp://127.0.0.1:{port}" if reachable != "no-port-number" else "amqp://127.0.0.1:amqp-port")
    loop = EngineLoop(dialler)
    loop.container_id = "dialler"
    injector = EventInjector()
    loop.selectable(injector)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: dialler.events, TIMEOUT, "the outgoing connection to open or fail")
        if reachable is True:
            assert dialler.events[0][0] == "open"
        elif reachable is False:
            assert dialler.events[0][0] == "closed" and "refused" in dialler.events[0][1].lower()
        else:
            assert dialler.events[0][0] == "closed" and "cannot connect to amqp://127.0.0.1:amqp-port" in \
                dialler.events[0][1], dialler.events
    finally:
        loop.stop()
        injector.trigger(ApplicationEvent("stop_now"))
        thread.join(TIMEOUT)


class TwoFailingDials:
    """Dials two closed ports at once: both connections fail in the same batch of events."""

    def __init__(self, ports):
        self.ports, self.closed = ports, []

    def on_reactor_init(self, event):
        for port in self.ports:
            event.container.connect(f"amqp://127.0.0.1:{port}")

    def on_transport_closed(self, event):
        self.closed.append(event.connection.url if event.connection is not None else "no connection")


def test_each_failed_connection_reaches_the_handler_still_bound_to_its_transport():
    """The router redials a connector from its connection's TRANSPORT_CLOSED; when two transports closed in
    one batch, the loop once unbound the second before its event ran, and that connector was never redialled."""
    sockets = [socket.socket() for _ in range(2)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    handler = TwoFailingDials(ports)
    loop = EngineLoop(handler)
    injector = EventInjector()
    loop.selectable(injector)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(handler.closed) == 2, TIMEOUT, "both connections to fail",
                 describe=lambda: str(handler.closed))
        assert "no connection" not in handler.closed, "a handler saw its transport already unbound"
        assert sorted(handler.closed) == sorted(f"amqp://127.0.0.1:{p}" for p in ports)
    finally:
        loop.stop()
        injector.trigger(ApplicationEvent("stop_now"))
        thread.join(TIMEOUT)
