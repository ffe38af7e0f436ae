"""reference/loop.py's EngineLoop against real sockets and real proton clients.

The broker's behaviour on it is covered by the broker suites; these cases pin the loop's own duties: events
reach the handler with the Container's method names, heartbeats keep an idle client's connection alive,
peers that vanish (EOF, reset, garbage) are dropped without disturbing the others, timers and injected
events run on the loop's thread, and `stop` ends `run`.
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
        self.loop_thread: str | None = None

    def on_reactor_init(self, event):
        self.loop_thread = threading.current_thread().name
        self.seen.append("init")

    def on_connection_remote_open(self, event):
        self.seen.append("connection open")
        event.connection.open()

    def on_session_remote_open(self, event):
        event.session.open()

    def on_link_remote_open(self, event):
        link = event.link
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
