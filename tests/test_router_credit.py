"""The reference router gives a producer credit again when a consumer returns while a drain is outstanding, and
keeps what a waypoint feed sends on its last credit for the next consumer, in order.

003_9cdc7c48796dae4f.txt §12.1.1.1: a producer gets credit while at least one consumer is reachable. When the
last consumer leaves, the reference router drains the producer (it asks for its unused credit back). AMQP
lets the producer answer that drain whenever it likes, so the answer may arrive after a consumer has come
back. The router must then see that the producer has no credit left and grant it a new window.

These cases reach that order of events on purpose: the producer here is driven by hand over a socket
(no event loop of its own), so it answers the drain exactly when the case says. Routers run as real
processes; consumers are the harness's recording receivers. Every wait is a deadline-bound condition.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from proton import Connection, Delivery, Endpoint, Message, Transport, symbol

from harness.clients import Clients
from harness.wait import wait_for

START_TIMEOUT = 20.0
TIMEOUT = 10.0


LISTENING = re.compile(r"Listening on 127\.0\.0\.1:(\d+) \(listener '([^']+)'")


class RouterProcess:
    """`python -m reference.router -c FILE`, its stderr in a file; `ports` maps listener names to ports."""

    def __init__(self, workdir: Path, name: str, config: str):
        self.config = workdir / f"{name}.conf"
        self.config.write_text(textwrap.dedent(config).lstrip("\n"))
        self.stderr_path = workdir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "reference.router", "-c", self.config.name],
                                     cwd=workdir, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL)
        self.ports: dict[str, int] = {}

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_ready(self) -> None:
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"router exited {self.proc.returncode} before ready: {self.stderr()}")
            return any(line.endswith("; ready") for line in self.stderr().splitlines())
        wait_for(ready, START_TIMEOUT, "the router's ready line", describe=self.stderr)
        self.ports = {name: int(port) for port, name in LISTENING.findall(self.stderr())}

    def url(self, listener: str = "clients") -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT)
        self._stderr.close()


@pytest.fixture
def start_router(tmp_path):
    started: list[RouterProcess] = []

    def start(name: str, config: str) -> RouterProcess:
        router = RouterProcess(tmp_path, name, config)
        started.append(router)
        router.wait_ready()
        return router

    yield start
    for router in started:
        router.close()


def socket_connection(url: str, container_id: str, collector=None) -> tuple[socket.socket, Transport, Connection]:
    """A proton connection over a non-blocking socket to HOST:PORT (SASL ANONYMOUS), not opened yet; with
    `collector`, its events are collected there. Nothing is sent until pump_socket."""
    host, port = url.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    sock.setblocking(False)
    transport = Transport()
    transport.sasl().allowed_mechs("ANONYMOUS")
    connection = Connection()
    connection.container = container_id
    if collector is not None:
        connection.collect(collector)
    transport.bind(connection)
    return sock, transport, connection


def pump_socket(sock: socket.socket, transport: Transport) -> None:
    """Write what proton has to send on a non-blocking socket, then push what the peer sent; never blocks."""
    while (pending := transport.pending()) > 0:
        try:
            sent = sock.send(transport.peek(pending))
        except BlockingIOError:
            break
        transport.pop(sent)
    while True:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        if not data:
            transport.close_tail()
            return
        transport.push(data)


class HandDrivenProducer:
    """One sending link over a plain socket, pumped only when the case waits: it never answers a drain by
    itself (proton leaves that to the application), so the case decides when the router gets the answer."""

    def __init__(self, url: str, address: str, capabilities: tuple[str, ...] = ()):
        self.sock, self.transport, self.connection = socket_connection(url, "hand-driven-producer")
        self.connection.open()
        session = self.connection.session()
        session.open()
        self.link = session.sender("hand-driven")
        self.link.target.address = address
        for capability in capabilities:
            self.link.target.capabilities.put_symbol(symbol(capability))
        self.link.open()
        self.deliveries = []

    def pump(self) -> None:
        pump_socket(self.sock, self.transport)

    def wait(self, predicate, what: str):
        def check():
            self.pump()
            return predicate()
        return wait_for(check, TIMEOUT, what, describe=lambda: (
            f"credit {self.link.credit}, drain {self.link.drain_mode}, link state {self.link.state}"))

    def send(self, body: str):
        dlv = self.link.delivery(f"tag-{len(self.deliveries)}")
        self.link.send(Message(body=body).encode())
        self.link.advance()
        self.deliveries.append(dlv)
        self.pump()
        return dlv

    def close(self) -> None:
        self.sock.close()


STANDALONE = """
    router {
        mode: standalone
        id: R.credit
    }
    listener {
        name: clients
        host: 127.0.0.1
        port: 0
    }
"""

R1 = """
    router {
        mode: interior
        id: R1
    }
    listener {
        name: clients
        host: 127.0.0.1
        port: 0
    }
    listener {
        name: mesh
        host: 127.0.0.1
        port: 0
        role: inter-router
    }
"""

R2 = """
    router {{
        mode: interior
        id: R2
    }}
    listener {{
        name: clients
        host: 127.0.0.1
        port: 0
    }}
    connector {{
        name: to-r1
        host: 127.0.0.1
        port: {port}
        role: inter-router
    }}
"""


def _drain_answered_after_the_consumer_returned(producer_url: str, consumer_url: str, clients: Clients,
                                                address: str, router_knows=None) -> None:
    """The last consumer leaves, the router drains the producer, a consumer returns, and only then does the
    producer answer the drain (its answer crossing the router's flow that calls the drain off).
    `router_knows(phase)` waits, where needed, until the producer's router has seen the consumer go ("gone") or
    come back ("back")."""
    router_knows = router_knows or (lambda phase: None)
    producer = HandDrivenProducer(producer_url, address)
    try:
        producer.wait(lambda: producer.link.state & Endpoint.REMOTE_ACTIVE, "the producer's link to attach")
        consumers = clients.connect(consumer_url)
        first = consumers.receiver(address)
        producer.wait(lambda: producer.link.credit > 0, "credit while a consumer exists")

        first.detach()
        producer.wait(lambda: producer.link.drain_mode, "the router to ask for the credit back (drain)")
        router_knows("gone")
        held = producer.link.credit
        assert held > 0, "the drain reached the producer before it spent any credit"

        second = consumers.receiver(address)
        router_knows("back")  # the router has handled the returning consumer; the producer has read nothing since
        assert producer.link.credit == held and producer.link.drain_mode, "the case needs the drain unanswered"

        # The producer hands its credit back now, as the drain asked, before it reads what the router sent since:
        # the router called the drain off when the consumer came back (issue 53), so the two flows cross on the
        # wire. Whichever order they are read in, the producer must end up with credit.
        producer.link.drained()
        producer.pump()
        producer.wait(lambda: producer.link.credit > 0, "new credit: a consumer is reachable again")

        dlv = producer.send("after the consumer came back")
        producer.wait(lambda: dlv.settled, "the message's outcome")
        assert dlv.remote_state == Delivery.ACCEPTED
        assert [m.body for m in second.wait_received(1)] == ["after the consumer came back"]
    finally:
        producer.close()


def test_a_drain_answered_after_the_consumer_returned_gets_new_credit(start_router):
    router = start_router("standalone", STANDALONE)
    with Clients() as clients:
        # On one router a consumer's attach is handled before it is answered: once the receiver is attached,
        # the router has already reconsidered the producer's credit.
        _drain_answered_after_the_consumer_returned(router.url(), router.url(), clients, "balanced.credit.single")


def test_a_drain_answered_after_a_remote_consumer_returned_gets_new_credit(start_router):
    """The reported case: producer on R1, its consumer on R2 (which dials R1)."""
    r1 = start_router("R1", R1)
    r2 = start_router("R2", R2.format(port=r1.ports["mesh"]))
    address = "balanced.credit.mesh"
    with Clients() as clients:
        # A second producer on R1 that answers drains at once: its credit says what R1 knows about consumers
        # on R2 (R1 reconsiders every producer of the address together, the hand-driven one included).
        witness = clients.connect(r1.url()).sender(address)

        def r1_knows(phase):
            if phase == "gone":
                witness.wait_credit_at_most(0, TIMEOUT)
            else:
                witness.wait_credit(1, TIMEOUT)

        _drain_answered_after_the_consumer_returned(r1.url(), r2.url(), clients, address, r1_knows)


WAYPOINT = """
    router {
        mode: standalone
        id: R.park
    }
    listener {
        name: clients
        host: 127.0.0.1
        port: 0
    }
    address {
        prefix: wp
        waypoint: yes
    }
"""


def test_what_a_waypoint_feed_sends_after_the_last_consumer_left_waits_for_the_next_in_order(start_router):
    """003 §12.1.4.3: the order of the messages stored at a fallback (or waypoint) queue is preserved. A broker
    may send on credit the router granted while a consumer was there, after that consumer left (AMQP lets it
    answer the drain late). Released, those messages would go back into the broker's queue wherever it puts
    them (Artemis: each at the head, so two came back reversed); the router keeps them for the next consumer."""
    router = start_router("waypoint", WAYPOINT)
    address = "wp.parked"
    # a broker's sending link into the waypoint (target capability qd.waypoint: phase 1, what consumers receive)
    feed = HandDrivenProducer(router.url(), address, capabilities=("qd.waypoint",))
    try:
        feed.wait(lambda: feed.link.state & Endpoint.REMOTE_ACTIVE, "the waypoint feed's link to attach")
        with Clients() as clients:
            consumers = clients.connect(router.url())
            first = consumers.receiver(address)
            feed.wait(lambda: feed.link.credit >= 2, "credit while a consumer exists")
            first.detach()
            feed.wait(lambda: feed.link.drain_mode, "the router to ask for the credit back (drain)")
            sent = [feed.send("first after the consumer left"), feed.send("second")]
            second = consumers.receiver(address)
            got = second.wait_received(2)
            assert [m.body for m in got] == ["first after the consumer left", "second"]
            feed.wait(lambda: all(d.settled for d in sent), "the two messages' outcomes")
            assert [d.remote_state for d in sent] == [Delivery.ACCEPTED, Delivery.ACCEPTED]
    finally:
        feed.close()
