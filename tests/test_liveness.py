"""Asking a running peer on the wire whether it still serves (harness/peers/liveness.py, RunningTopology)."""

from __future__ import annotations

import socket
import threading

import pytest

from harness.peers.base import Endpoint, Peer, PeerInfo
from harness.peers.launch import RunningTopology, start_topology
from harness.peers.liveness import amqp_silence
from harness.topology import load_topology, topology_path


@pytest.fixture
def listener():
    """A socket that listens and never accepts: the kernel completes the handshake, nobody answers (what a
    hung process looks like from outside)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


def serve_once(reply: bytes) -> tuple[int, threading.Thread]:
    """A server that accepts one connection, sends `reply` and closes it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)

    def answer():
        with sock:
            conn, _ = sock.accept()
            with conn:
                conn.recv(8)
                conn.sendall(reply)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return sock.getsockname()[1], thread


def test_a_reference_router_answers_and_so_does_not_count_as_silent(tmp_path):
    running = start_topology(load_topology(topology_path("single-router")), {"router": "reference"})
    try:
        endpoint = next(e for e in running["R1"].endpoints.values() if e.role == "normal")
        assert amqp_silence(endpoint.host, endpoint.port, 5.0) is None
        assert running.probe_peers(5.0) == {}
        assert running.down_peers() == {}
    finally:
        running.stop()


def test_a_listener_that_never_answers_is_hung(listener):
    port = listener.getsockname()[1]
    assert amqp_silence("127.0.0.1", port, 0.3) == (
        f"it accepts connections on 127.0.0.1:{port} but sent no AMQP protocol header within 0.3s (hung)")


def test_a_closed_port_refuses():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert amqp_silence("127.0.0.1", port, 1.0) == f"it refuses connections on 127.0.0.1:{port}"


@pytest.mark.parametrize("reply, expected", [
    (b"AMQP\x03\x01\x00\x00", None),  # a SASL header: a live peer that wants authentication first
    (b"AMQP\x00\x00\x09\x01", None),  # an AMQP 0-9-1 broker's preferred version: alive all the same
    (b"HTTP/1.1 400 Bad Request\r\n", "it answered on 127.0.0.1:{port} with b'HTTP/1.1', not an AMQP protocol "
                                      "header (another program on its port?)"),
    (b"AMQ", "it closed a connection on 127.0.0.1:{port} without an AMQP protocol header (after b'AMQ')"),
])
def test_any_amqp_protocol_header_counts_as_an_answer(reply, expected):
    port, thread = serve_once(reply)
    assert amqp_silence("127.0.0.1", port, 5.0) == (expected and expected.format(port=port))
    thread.join(5)


class SilentPeer(Peer):
    """Only what RunningTopology asks of a peer: a client listener, a process state, stop and kill."""

    def __init__(self, name: str, port: int):
        self.name, self.role, self.capabilities = name, "router", frozenset()
        self.info = PeerInfo(vendor="test", version="0", provider="test")
        self.endpoints = {"amqp": Endpoint("amqp", "127.0.0.1", port)}
        self.calls: list[str] = []

    def start(self, timeout: float = 30.0) -> None: ...

    def stop(self, timeout: float = 10.0) -> None:
        self.calls.append("stop")

    def kill(self) -> None:
        self.calls.append("kill")

    def is_running(self) -> bool:
        return True

    def logs(self) -> str:
        return ""


def test_a_topology_remembers_a_hung_peer_as_down_and_kills_it_rather_than_wait_for_sigterm(listener):
    port = listener.getsockname()[1]
    hung = SilentPeer("R1", port)
    running = RunningTopology(topology=None, peers={"R1": hung})
    assert running.down_peers() == {}  # not asked on the wire until probe_peers()
    found = running.probe_peers(0.2)
    assert found == {"R1": f"it accepts connections on 127.0.0.1:{port} but sent no AMQP protocol header "
                           "within 0.2s (hung)"}
    assert running.down_peers() == found
    running.stop()
    assert hung.calls == ["kill", "stop"]


def test_a_peer_whose_client_listener_speaks_tls_is_asked_inside_tls():
    """A healthy broker whose only client listener is amqps: a plain header there is not AMQP to it, so the probe
    must speak TLS first or take a live peer for a dead one (it now runs after expected differences too)."""
    running = start_topology(load_topology(topology_path("security-broker-tls")), {"broker": "reference"})
    try:
        endpoint = running["B1"].client_endpoint
        assert running._client_tls("B1")
        assert amqp_silence(endpoint.host, endpoint.port, 5.0) is not None  # plain: no AMQP answer
        assert running.probe_peers(5.0) == {}
        assert running.down_peers() == {}
    finally:
        running.stop()
