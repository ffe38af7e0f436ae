"""reference/router/connectors.py on a real EngineLoop and real sockets: a connector redials when its
connection drops, backing off between tries, and gives up on a dial the peer accepted but never answered (its
open deadline)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from proton.reactor import ApplicationEvent, EventInjector

from harness.wait import wait_for
from reference.loop import EngineLoop
from reference.router import connectors as connectors_module
from reference.router.config import Connector
from reference.router.connectors import Connectors

TIMEOUT = 10.0


class ConnectorHost:
    """The part of the router a connector needs: dial at start, report opens and closes to `Connectors`."""

    def __init__(self, port: int):
        self.connectors = Connectors(router=None, configs=[Connector(name="B1", port=port, role="route-container")])
        self.opened, self.closed = [], []

    def on_reactor_init(self, event):
        self.connectors.start(event.container)

    def on_connection_remote_open(self, event):
        self.connectors.opened(event.connection)
        self.opened.append(event.connection.remote_container)

    def on_transport_closed(self, event):
        self.closed.append(str(event.transport.condition))
        self.connectors.closed(event.connection)


class Silent:
    """A TCP listener that accepts connections and never says a word (the stalled peer); `hang_up`: it closes
    each connection as soon as it has accepted it instead (a peer that is going down)."""

    def __init__(self, hang_up: bool = False):
        self.hang_up = hang_up
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.accepted_at: list[float] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted_at.append(time.monotonic())
            if self.hang_up:
                conn.close()
            else:
                self.accepted.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.accepted:
            conn.close()


class Answering:
    """A server on its own EngineLoop that answers every open."""

    def on_connection_remote_open(self, event):
        event.connection.open()


def run_loop(handler):
    loop = EngineLoop(handler)
    injector = EventInjector()
    loop.selectable(injector)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return loop, injector, thread


def stop_loop(loop, injector, thread):
    loop.stop()
    injector.trigger(ApplicationEvent("stop_now"))
    thread.join(TIMEOUT)


@pytest.fixture
def short_deadline(monkeypatch):
    monkeypatch.setattr(connectors_module, "OPEN_DEADLINE_S", 0.5)
    return 0.5


def test_a_dial_the_peer_never_answers_is_dropped_and_dialled_again(short_deadline):
    silent = Silent()
    host = ConnectorHost(silent.port)
    running = run_loop(host)
    try:
        wait_for(lambda: len(silent.accepted) >= 2, TIMEOUT, "a second dial after the open deadline",
                 describe=lambda: f"{len(silent.accepted)} accepted, closes seen {host.closed}")
        assert host.closed and "no open from the peer" in host.closed[0], host.closed
        assert host.opened == []
    finally:
        stop_loop(*running)
        silent.close()


def test_an_answered_dial_outlives_the_open_deadline(short_deadline):
    server_loop, server_injector, server_thread = run_loop(Answering())
    listener = server_loop.listen("127.0.0.1:0")
    host = ConnectorHost(listener.port)
    running = run_loop(host)
    try:
        wait_for(lambda: host.opened, TIMEOUT, "the connector to connect")
        loop = running[0]
        wait_for(lambda: not any(isinstance(t.handler, connectors_module._OpenDeadline) for t in loop._timers),
                 TIMEOUT, "the dial's open deadline to fire")
        assert len(server_loop._peers) == 1
        assert host.closed == [] and len(host.opened) == 1, (host.closed, host.opened)
    finally:
        stop_loop(*running)
        stop_loop(server_loop, server_injector, server_thread)


def test_a_connector_that_keeps_losing_its_peer_waits_longer_before_each_redial():
    """The delay doubles from FIRST_RETRY_S up to MAX_RETRY_S (a router must not hammer a broker that is down).
    Only lower bounds are checked: a loaded machine can make each wait longer, never shorter."""
    peer = Silent(hang_up=True)
    host = ConnectorHost(peer.port)
    running = run_loop(host)
    dials = 6
    try:
        wait_for(lambda: len(peer.accepted_at) >= dials, TIMEOUT, f"{dials} dials of a peer that closes each one",
                 describe=lambda: f"{len(peer.accepted_at)} dials, closes seen {len(host.closed)}")
    finally:
        stop_loop(*running)
        peer.close()
    first, cap = connectors_module.FIRST_RETRY_S, connectors_module.MAX_RETRY_S
    waited = [(peer.accepted_at[k + 1] - peer.accepted_at[k], min(first * 2 ** k, cap)) for k in range(dials - 1)]
    assert waited[-1][1] > 4 * first, "the case must reach the doubled delays"
    assert all(gap >= 0.9 * delay for gap, delay in waited), f"(seconds waited, delay due) per redial: {waited}"
