"""Process faults on a real peer process: pause (SIGSTOP), resume (SIGCONT), restart (same port), seen by clients.

The peer is the reference router as a subprocess (`ReferenceRouterPeer`) with a listener on port 0, so a
restart must bring it back on the port it had, not on a new free one.
"""

from __future__ import annotations

import textwrap

import pytest

from harness.clients import Clients
from harness.peers.base import Endpoint, Peer, PeerInfo
from harness.peers.process import _process_state
from harness.vendors.reference.router import ReferenceRouterPeer, _pin_listener_ports
from harness.wait import WaitTimeout, wait_for

CONFIG = textwrap.dedent("""
    router {
        mode: standalone
        id: R.faults
    }
    listener {
        name: clients
        host: 127.0.0.1
        port: 0
    }
    address {
        prefix: multicast
        distribution: multicast
    }
""").lstrip()

PAUSED_PROBE = 1.0  # how long a paused router is given to answer (it must not)


@pytest.fixture
def router(tmp_path):
    peer = ReferenceRouterPeer("R1", CONFIG, frozenset(), workdir=tmp_path)
    peer.start(timeout=30)
    yield peer
    if peer.is_running():
        peer.kill()  # SIGKILL ends a stopped process too


def _stopped(peer) -> bool:
    return _process_state(peer._proc.pid) in ("T", "t")


def route_one(clients: Clients, url: str, address: str) -> None:
    conn = clients.connect(url)
    rcv = conn.receiver(address)
    snd = conn.sender(address)
    snd.send(1)
    rcv.wait_received(1)
    assert snd.wait_outcomes(1)[0].outcome == "accepted"
    conn.close()


def test_a_paused_router_answers_nothing_until_resumed(router):
    with Clients() as clients:
        conn = clients.connect(router.url)
        conn.sync()
        router.pause()
        assert router.is_running()
        with pytest.raises(WaitTimeout):
            conn.sync(timeout=PAUSED_PROBE)
        late = clients.connect(router.url, wait=False)  # the kernel accepts; the router does not answer
        with pytest.raises(WaitTimeout):
            late.wait_open(timeout=0.3)
        router.resume()
        conn.sync()  # the same connection works again: nothing was lost while paused
        late.wait_open()
        route_one(clients, router.url, "anycast.after.pause")


def test_restart_comes_back_on_the_same_port(router):
    url, port = router.url, router.endpoints["clients"].port
    pid = router._proc.pid
    with Clients() as clients:
        conn = clients.connect(url)
        conn.sync()
        router.restart(timeout=30)
        assert router._proc.pid != pid
        assert router.endpoints["clients"].port == port and router.url == url
        assert f"port: {port}" in router.config_path.read_text()
        wait_for(lambda: conn.ended, 10, "the connection to the old process to end")
        route_one(clients, url, "anycast.after.restart")
    assert any(line.endswith("; ready") for line in router.previous_logs)  # the first run's log is kept
    assert router.logs().count("; ready") == 1  # and readiness was judged on the new run's log


def test_restart_with_kill_and_from_paused(router):
    url = router.url
    router.restart(timeout=30, kill=True)
    assert router.url == url
    router.pause()
    router.restart(timeout=30)  # a paused process is continued so that it can act on SIGTERM
    assert router.url == url and not _stopped(router)
    with Clients() as clients:
        route_one(clients, url, "anycast.after.kill")


def test_pause_of_a_stopped_peer_is_an_error(router):
    router.stop()
    with pytest.raises(Exception, match="not running"):
        router.pause()


def test_providers_without_process_faults_say_so():
    class Remote(Peer):
        name, role = "X1", "broker"
        info = PeerInfo("somevendor", "1", "external")
        capabilities = frozenset()
        endpoints = {}

        def start(self, timeout=30.0): ...
        def stop(self, timeout=10.0): ...
        def kill(self): ...
        def is_running(self): return True
        def logs(self): return ""

    peer = Remote()
    for action in (peer.pause, peer.resume, peer.restart):
        with pytest.raises(NotImplementedError, match="external provider of somevendor cannot"):
            action()


def test_pin_listener_ports_rewrites_only_port_0_listeners():
    text = textwrap.dedent("""
        router {
            mode: standalone
        }
        listener {
            name: clients
            host: 127.0.0.1
            port: 0
        }
        listener { host: 127.0.0.1 port: 0 role: normal }
        listener {
            name: fixed
            port: 5999
        }
        connector {
            port: 0
        }
    """)
    endpoints = [Endpoint("clients", "127.0.0.1", 41001), Endpoint("", "127.0.0.1", 41002),
                 Endpoint("fixed", "127.0.0.1", 5999)]
    pinned = _pin_listener_ports(text, endpoints)
    assert "name: clients\n    host: 127.0.0.1\n    port: 41001" in pinned
    assert "listener { host: 127.0.0.1 port: 41002 role: normal }" in pinned
    assert "port: 5999" in pinned
    assert "connector {\n    port: 0\n}" in pinned
