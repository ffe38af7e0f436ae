"""The slow-disk fault (harness/faults/disk.py) on a real reference broker, and the broker's
journal-sync-non-transactional setting, which only a slow disk makes visible.

Process-level: the broker runs under strace; what is checked is state (which process runs, which thread strace
holds at a sync's entry), never how long something took. That the broker answers a durable send only after its
journal sync, and before it with journal-sync-non-transactional=false, is shown by the broker suite's kill -9
cases on a slow disk (suites/broker/test_durability.py, `--break broker:no-journal-sync`).
"""

from __future__ import annotations

import os
import shutil
import signal

import pytest

from harness.clients import Clients
from harness.faults import disk as disk_module
from harness.faults.disk import DiskFaultError, SlowDisk, slow_disk
from harness.peers.base import PeerUnavailable
from harness.peers.external import ExternalPeer, parse_external
from harness.peers.process import _process_state
from harness.vendors.reference.broker import ReferenceBrokerPeer
from harness.vendors.artemis.render import render_broker_xml
from harness.topology import load_topology, topology_path
from harness.wait import wait_for

SLOW_MS = 500
needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")


# ---- the fault's settings -------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0.5, -1, 10_001, "50", True, None])
def test_a_bad_delay_is_one_line_naming_the_field(value):
    with pytest.raises(DiskFaultError) as info:
        SlowDisk(value)
    assert str(info.value) == (f"disk_delay_ms: expected a whole number of milliseconds from 1 to 10000, "
                               f"got {value!r}")


def test_zero_or_none_is_an_idle_disk():
    assert slow_disk(None) is None and slow_disk(0) is None
    assert slow_disk(25) == SlowDisk(25)


def test_the_command_runs_under_strace_with_the_delay_on_every_sync_call():
    wrapped = SlowDisk(40).wrap(["python", "-m", "x"])
    assert wrapped[1:] == ["-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "-e", "trace=fsync,fdatasync",
                           "-e", "inject=fsync,fdatasync:delay_enter=40ms", "--", "python", "-m", "x"]


def test_without_strace_a_process_peer_is_unavailable(monkeypatch, tmp_path):
    monkeypatch.setattr(disk_module.shutil, "which", lambda _name: None)
    peer = ReferenceBrokerPeer("B1", lambda ports: "<configuration/>", frozenset(), workdir=tmp_path)
    with pytest.raises(PeerUnavailable, match=r"^B1: strace is not on PATH \(Debian package strace"):
        peer.set_disk_fault(SlowDisk(10))
    peer.set_disk_fault(None)  # an idle disk needs nothing


def test_a_peer_the_harness_does_not_start_cannot_have_a_slow_disk():
    peer = ExternalPeer("B1", "broker", parse_external("external:amqp://127.0.0.1:5672", "broker"))
    peer.set_disk_fault(None)
    with pytest.raises(PeerUnavailable, match="external provider .* cannot slow a peer's disk"):
        peer.set_disk_fault(SlowDisk(10))


# ---- a reference broker under the fault ------------------------------------------------------------------------


def make_broker(tmp_path, **settings) -> ReferenceBrokerPeer:
    topology = load_topology(topology_path("single-broker"))
    return ReferenceBrokerPeer(
        "B1", lambda ports: render_broker_xml(topology, "B1", {"clients": 0, **ports}, settings), frozenset(),
        workdir=tmp_path)


@pytest.fixture
def clients():
    with Clients() as c:
        yield c


@pytest.fixture
def slow_broker(tmp_path):
    """A reference broker whose syncs each take SLOW_MS longer (start-up has three)."""
    peer = make_broker(tmp_path)
    peer.disk_fault = SlowDisk(SLOW_MS)
    peer.start(timeout=60)
    yield peer
    peer.kill()


def traced_by(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("TracerPid:")).split()[1])


@needs_strace
def test_kill_9_kills_the_traced_broker_itself_and_restart_keeps_the_fault(tmp_path, clients):
    peer = make_broker(tmp_path)
    peer.start(timeout=60)
    try:
        untraced = peer.main_pid
        peer.set_disk_fault(SlowDisk(5))  # a running peer is restarted to take it
        strace, broker = peer._proc.pid, peer.main_pid
        assert broker != untraced and traced_by(broker) == strace
        assert "python" in open(f"/proc/{broker}/cmdline").read()
        conn = clients.connect(peer.url)
        snd = conn.sender("orders")
        snd.send(3, durable=True)
        assert [o.outcome for o in snd.wait_outcomes(3).values()] == ["accepted"] * 3
        peer.restart(kill=True)
        assert _process_state(broker) in (None, "Z"), "the traced broker process must die, not only strace"
        assert _process_state(strace) in (None, "Z")
        assert traced_by(peer.main_pid) == peer._proc.pid, "restarted under strace again"
        assert "restarted with a slow disk (fsync/fdatasync +5 ms)" in peer.all_logs()
        rcv = clients.connect(peer.url).receiver("orders")
        assert len(rcv.wait_received(3)) == 3
        peer.set_disk_fault(None)
        assert traced_by(peer.main_pid) == 0
    finally:
        peer.kill()


def held_threads(pid: int) -> list[int]:
    """Threads of `pid` stopped by strace at the entry of fsync (74) or fdatasync (75) (x86-64 numbers)."""
    held = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                number = f.read().split()[0]
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state == "t" and number in ("74", "75"):
            held.append(int(tid))
    return held


@needs_strace
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="reads x86-64 syscall numbers")
def test_a_traced_broker_held_in_a_sync_dies_on_kill_without_finishing_it(slow_broker, clients):
    snd = clients.connect(slow_broker.url).sender("orders")
    broker = slow_broker.main_pid
    snd.send(200, durable=True)
    wait_for(lambda: held_threads(broker), 20, "the journal writer to be held at the entry of its sync")
    slow_broker.kill()
    assert _process_state(broker) in (None, "Z"), "SIGKILL reaches the tracee while strace holds it"
    assert slow_broker.down_reason() == f"its process was killed by signal {signal.SIGKILL.value}"


@needs_strace
def test_pause_and_resume_reach_the_traced_broker(slow_broker, clients):
    slow_broker.pause()
    assert _process_state(slow_broker.main_pid) in ("T", "t")
    assert slow_broker.down_reason() == "it is paused (SIGSTOP) and was not resumed"
    slow_broker.resume()
    assert slow_broker.down_reason() is None
    snd = clients.connect(slow_broker.url).sender("orders")
    snd.send(1, durable=True)
    assert snd.wait_outcomes(1, timeout=20)[0].outcome == "accepted"
