"""The native RabbitMQ provider against the real Debian rabbitmq-server (skipped, with the reason, without it).

One node serves the module; a second one, started alongside, is crashed with kill -9, restarted and stopped.
The cases on `modified`, drain and the transaction coordinator pin the capabilities RabbitMQ is declared
without (vendors.py): if a newer RabbitMQ starts handling them, these fail and the capability list must change.
"""

import os
from pathlib import Path

import pytest
from proton import Endpoint

from harness.clients import Clients
from harness.vendors.rabbitmq import native as rmq
from harness.peers.base import PeerStartError, PeerUnavailable
from harness.peers.launch import make_peer
from harness.peers.vendors import vendor
from harness.topology import parse_topology
from harness.wait import WaitTimeout, wait_for
from tests.rabbitmq_support import needs_rabbitmq, rabbitmq_unavailable

TOPOLOGY = parse_topology({"name": "rabbit-test", "nodes": {
    "B1": {"role": "broker", "queues": [{"address": "orders"}, {"address": "news", "routing": "multicast"}],
           "settings": {"dead_letter_address": "DLQ"}},
    "B2": {"role": "broker", "queues": [{"address": "orders"}]},
}})


@pytest.fixture(scope="module")
def rabbit():
    if rabbitmq_unavailable():
        pytest.skip(f"peer unavailable: {rabbitmq_unavailable()}")
    peer = make_peer(TOPOLOGY, "B1", "rabbitmq@native")
    try:
        peer.start(timeout=90)
        yield peer
    finally:
        peer.stop()


@pytest.fixture
def clients():
    with Clients() as c:
        yield c


def session_end(clients, link) -> str | None:
    """The error the broker ended the link's session with, or None while the session is open."""
    def look():
        session = link._link.session
        if not session.state & Endpoint.REMOTE_CLOSED:
            return None
        cond = session.remote_condition
        return cond.name if cond is not None else "ended without error"
    return clients.call(look)


@needs_rabbitmq
def test_the_node_is_private_and_on_loopback(rabbit):
    assert rabbit.info.vendor == "rabbitmq" and rabbit.info.provider == "native"
    assert rabbit.info.version[0].isdigit()
    assert rabbit.url == f"amqp://127.0.0.1:{rabbit.amqp_port}"
    assert all(p < 32768 for p in (rabbit.amqp_port, rabbit.dist_port, rabbit.epmd_port))
    assert rabbit.node_name.startswith(f"interop-{os.getpid()}-") and rabbit.node_name.endswith("@localhost")
    assert rabbit.start_seconds < 60
    assert rabbit.capabilities == vendor("rabbitmq", "broker").capabilities
    assert str(rabbit.workdir) in rabbit.environment()["RABBITMQ_MNESIA_BASE"]
    assert "Server startup complete" in rabbit.logs()


@needs_rabbitmq
def test_send_and_receive_through_the_wire_address_of_a_declared_queue(rabbit, clients):
    address = rabbit.wire_address("orders")
    assert address == "/amq/queue/orders"
    conn = clients.connect(rabbit.url)
    sender = conn.sender(address)
    sender.send(10)
    assert sender.wait_outcomes(10) and sender.outcome_counts() == {"accepted": 10}
    receiver = conn.receiver(address)
    receiver.wait_received(10)
    assert receiver.seqs(sender.name) == list(range(10))


@needs_rabbitmq
def test_queue_stats_report_depth_and_consumers(rabbit, clients):
    name = f"stats.{os.getpid()}"
    assert rabbit.queue_stats(name) == {"depth": 0, "available": 0, "in_flight": 0, "consumers": 0,
                                        "exists": False}
    conn = clients.connect(rabbit.url)
    sender = conn.sender(rabbit.wire_address(name))  # /queue/NAME: declared on attach
    sender.send(3)
    sender.wait_outcomes(3)
    assert rabbit.queue_stats(name)["depth"] == 3
    held = conn.receiver(rabbit.wire_address(name), credit=1, auto_credit=False, outcome="hold")
    held.wait_received(1)
    stats = rabbit.queue_stats(name)
    assert (stats["depth"], stats["available"], stats["in_flight"], stats["consumers"]) == (3, 2, 1, 1)
    assert stats["exists"] is True
    assert rabbit.queue_stats(f"/queue/{name}") == stats  # a wire address names the same queue


@needs_rabbitmq
def test_multicast_address_gives_each_subscriber_a_copy(rabbit, clients):
    address = rabbit.wire_address("news")
    assert address == "/exchange/news"
    conn = clients.connect(rabbit.url)
    subscribers = [conn.receiver(address) for _ in range(2)]
    sender = conn.sender(address)
    sender.send(4)
    sender.wait_outcomes(4)
    for s in subscribers:
        assert [m.seq for m in s.wait_received(4)] == [0, 1, 2, 3]
    stats = rabbit.queue_stats("news")
    assert stats["subscriptions"] == 2 and stats["consumers"] == 2


@needs_rabbitmq
def test_rejected_messages_are_dead_lettered(rabbit, clients):
    name = f"reject.{os.getpid()}"
    conn = clients.connect(rabbit.url)
    dead = conn.receiver(rabbit.wire_address("DLQ"))
    sender = conn.sender(rabbit.wire_address(name))
    sender.send(2)
    sender.wait_outcomes(2)
    rejecting = conn.receiver(rabbit.wire_address(name), outcome="reject")
    rejecting.wait_received(2)
    wait_for(lambda: set(dead.seqs(sender.name)) == {0, 1}, 10, "both rejected messages on the DLQ",
             describe=lambda: f"{dead.seqs(sender.name)}")


@needs_rabbitmq
def test_modified_ends_the_session(rabbit, clients):
    """Measured: `modified` is refused with amqp:invalid-field and the session is ended (not outcome.modified)."""
    name = f"modify.{os.getpid()}"
    conn = clients.connect(rabbit.url)
    sender = conn.sender(rabbit.wire_address(name))
    sender.send(1)
    sender.wait_outcomes(1)
    receiver = conn.receiver(rabbit.wire_address(name), outcome="modify")
    receiver.wait_received(1)
    ended = wait_for(lambda: session_end(clients, receiver), 10, "RabbitMQ to end the session after `modified`")
    assert ended == "amqp:invalid-field"


@needs_rabbitmq
def test_drain_on_a_classic_queue_ends_the_session(rabbit, clients):
    """Measured: drain on a classic queue crashes the session with amqp:internal-error (no `drain`)."""
    conn = clients.connect(rabbit.url)
    receiver = conn.receiver(rabbit.wire_address(f"drain.{os.getpid()}"), credit=0, auto_credit=False)
    receiver.drain(5)
    ended = wait_for(lambda: session_end(clients, receiver), 10, "RabbitMQ to answer the drain")
    assert ended == "amqp:internal-error"


@needs_rabbitmq
def test_a_coordinator_attach_ends_the_session(rabbit, clients):
    """Measured: RabbitMQ 3.10 has no transaction coordinator; attaching to one ends the session with
    amqp:not-implemented (no `transactions`)."""
    conn = clients.connect(rabbit.url)
    with pytest.raises(ConnectionError, match=r"amqp:not-implemented: Transactions not supported"):
        conn.coordinator()
    assert not conn.ended, "only the session ends, not the connection"


@needs_rabbitmq
def test_pause_freezes_the_whole_node_and_resume_brings_it_back(rabbit, clients):
    rabbit.pause()
    try:
        states = rmq.group_states(rabbit._proc.pid)
        assert states and set(states.values()) <= {"T", "t"}, "every process of the node is stopped"
        conn = clients.connect(rabbit.url, wait=False)  # the kernel accepts; the frozen node answers nothing
    finally:
        rabbit.resume()
    conn.wait_open()
    sender = conn.sender(rabbit.wire_address("orders"))
    sender.send(1)
    assert sender.wait_outcomes(1)[0].outcome == "accepted"
    receiver = conn.receiver(rabbit.wire_address("orders"))
    receiver.wait_received(1)


# what a restarted RabbitMQ node logs when it finds no durable classic queue to recover (this topology has one)
RECORD_LOST = "Recovering 0 queues of type rabbit_classic_queue"


def recovery_lines(peer) -> list[str]:
    """What a node logged about its queues, definitions and recovery (both runs): the evidence a lost message
    needs (RabbitMQ logs e.g. "dropped N persistent messages ... after unclean shutdown")."""
    words = ("orders", "unclean", "dropped", "recover", "definitions", "crashed")
    return [line.strip()[:200] for line in peer.all_logs().splitlines()
            if any(w in line.lower() for w in words)][-12:]


@needs_rabbitmq
def test_a_second_node_alongside_survives_kill_9_with_its_durable_messages_and_leaves_nothing(rabbit, clients):
    second = make_peer(TOPOLOGY, "B2", "rabbitmq@native")
    try:
        second.start(timeout=90)
        assert {second.amqp_port, second.dist_port, second.epmd_port}.isdisjoint(
            {rabbit.amqp_port, rabbit.dist_port, rabbit.epmd_port})
        assert second.node_name != rabbit.node_name and second.workdir != rabbit.workdir

        conn = clients.connect(second.url)
        sender = conn.sender(second.wire_address("orders"))
        sender.send(50, durable=True)
        sender.wait_outcomes(50)
        assert sender.outcome_counts() == {"accepted": 50}, "the node took every durable message before the crash"
        conn.close()
        # in the queue before the crash too, so that a depth below 50 after it says the restart lost them
        wait_for(lambda: second.queue_stats("orders")["depth"] == 50, 30, "the 50 accepted messages in the queue",
                 describe=lambda: f"before the crash: {second.queue_stats('orders')}")

        node_pids = [p for p in second.pids if p != second._epmd.pid]
        assert node_pids
        second.kill()
        assert not second.is_running()
        assert all(not Path(f"/proc/{p}").exists() or _zombie(p) for p in node_pids), "kill -9 took the whole VM"
        assert second.pids == [second._epmd.pid], "only the peer's own epmd is left, for the restart"

        second.start(timeout=90)
        # Polled, not read once: a queue the restarted node is still bringing back is listed as down, with no
        # counts (rabbit_amqqueue:info_down), which reads as depth 0; a lost message keeps the depth below 50.
        try:
            wait_for(lambda: second.queue_stats("orders")["depth"] == 50, 30, "durable messages survive kill -9",
                     describe=lambda: f"after the restart: {second.queue_stats('orders')}; the node's lines on its "
                                      f"queues and recovery: {recovery_lines(second)}")
        except WaitTimeout:
            # RabbitMQ's difference, seen under load (2026-12-05: a fresh-clone run, and 1 of 36 runs of this
            # case beside four busy loops and a disk writer): the node killed a few seconds after its boot
            # comes back without the queue's own record ("Recovering 0 queues of type rabbit_classic_queue",
            # where a kept queue reads 1); the definitions file declares the queue again, empty, and the 50
            # confirmed messages are gone with the record. Any other loss stays a failure.
            restart_log = second.logs().rsplit("---- interop: starting node", 1)[-1]  # (its first boot logs it too)
            if RECORD_LOST in restart_log:
                pytest.xfail(f"RabbitMQ lost the durable queue's record in the kill -9 (its log after the restart: "
                             f"{RECORD_LOST!r}), and the queue's 50 confirmed messages with it")
            raise
        assert rabbit.is_running(), "the first node did not notice"
    finally:
        epmd = second._epmd.pid if second._epmd is not None else None
        second.stop()
    assert not second.workdir.exists()
    assert second.pids == []
    assert epmd is None or not Path(f"/proc/{epmd}").exists() or _zombie(epmd)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def test_unavailable_without_an_install(monkeypatch, tmp_path):
    monkeypatch.setenv("RABBITMQ_SBIN", str(tmp_path))
    monkeypatch.setattr(rmq, "SBIN_CANDIDATES", ())
    monkeypatch.setattr(rmq, "_install_cache", None)
    with pytest.raises(PeerUnavailable, match=r"^rabbitmq-server is not installed \(Debian package") as info:
        make_peer(TOPOLOGY, "B1", "rabbitmq@native")
    assert "\n" not in str(info.value)


@needs_rabbitmq
def test_a_peer_never_started_leaves_nothing():
    peer = make_peer(TOPOLOGY, "B2", "rabbitmq@native")
    assert peer.workdir is None and peer.pids == []
    peer.stop()
    assert peer.workdir is None


@needs_rabbitmq
def test_a_node_that_refuses_its_config_is_a_one_line_start_error(monkeypatch):
    real = rmq.render_rabbitmq_node

    def broken(*args, **kwargs):
        files = real(*args, **kwargs)
        return type(files)(files.conf + "log.console.use_colors = maybe\n", files.enabled_plugins,
                           files.definitions)
    monkeypatch.setattr(rmq, "render_rabbitmq_node", broken)
    peer = make_peer(TOPOLOGY, "B2", "rabbitmq@native")
    try:
        with pytest.raises(PeerStartError, match=r"^B2 \(rabbitmq node interop-\d+-\d+@localhost\) exited with "
                                                 r"status \d+ while starting: .*log.console.use_colors") as info:
            peer.start(timeout=60)
        assert "\n" not in str(info.value)
        assert not peer.is_running()
    finally:
        peer.stop()
    assert peer.pids == [] and not peer.workdir.exists()
