"""The CPU verdict (harness/fuzz/cpuverdict.py) against real TCP server processes: one that busy-loops once its
client has closed is flagged, one that goes idle is not, and the frames session's triage names the one input that
sets a server spinning among a batch of harmless ones."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from harness.fuzz import procstat
from harness.fuzz.cpuverdict import (CONFIRM_WINDOWS, QUIET_WINDOW_S, SPIN_CPU_S, WATCH_LIMIT_S, CpuVerdict,
                                     measure_after_close)
from harness.fuzz.procstat import CpuWindow
from harness.fuzz.hostile import Case
from harness.fuzz.session import FuzzTarget
from harness.wait import wait_for

# A server on loopback: prints its port, then serves connections one after another, reading each to its end and
# answering an AMQP protocol header with its own (so the fuzzer's liveness probe sees it alive). A connection whose
# bytes held b"SPIN" (or every one, with `always`) sets a thread busy-looping once the client has closed, until the
# process is ended: the fault a server that "keeps spending CPU after close" has. With three such threads it answers
# no header any more, as Artemis 2.40.0 answers none once every I/O thread spins.
SERVER = r"""
import os, socket, sys, threading, time
port, mode = int(sys.argv[1]), sys.argv[2]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(16)
print(srv.getsockname()[1], flush=True)
spinners = []

def spin(seconds=None):
    end = None if seconds is None else time.monotonic() + seconds
    while end is None or time.monotonic() < end:
        pass

def starved_work(cpu):
    # nice 10 on the CPU a nice-0 busy loop holds: about a tenth of it, so half a CPU-s of work takes some 5 s
    os.sched_setaffinity(0, {cpu})
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    end = time.thread_time() + 0.5
    while time.thread_time() < end:
        pass

while True:
    conn, _ = srv.accept()
    data, answered = b"", False
    try:
        while chunk := conn.recv(4096):
            data += chunk
            if not answered and data.startswith(b"AMQP") and len(data) >= 8 and len(spinners) < 3:
                conn.sendall(b"AMQP\x00\x01\x00\x00")
                answered = True
    except OSError:  # a client that closes with our header unread resets the connection
        pass
    conn.close()
    if mode == "always" or (mode == "on-input" and b"SPIN" in data):
        spinners.append(threading.Thread(target=spin, daemon=True))
        spinners[-1].start()
    elif mode == "burst":  # work that ends: a crash report written, a GC pass
        threading.Thread(target=spin, args=(1.5,), daemon=True).start()
    elif mode.startswith("starved-burst:"):  # the same work on a loaded machine: runnable all along, given little
        threading.Thread(target=starved_work, args=(int(mode.split(":")[1]),), daemon=True).start()

"""


class ServerPeer:
    """Just what the frames session asks of a peer: pids, restart, down_reason, logs."""

    def __init__(self, mode: str):
        self.mode, self.port, self.proc = mode, 0, None
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(self.port), self.mode],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())  # the line comes once it listens

    @property
    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc.poll() is None else []

    def restart(self, kill: bool = True) -> None:
        self.stop()
        self.restarts += 1
        self._start()

    def down_reason(self) -> str | None:
        return None if self.proc.poll() is None else f"exited {self.proc.returncode}"

    def logs(self) -> str:
        return ""

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def server(request):
    peer = ServerPeer(request.param)
    yield peer
    peer.stop()


def _one_connection(peer: ServerPeer, data: bytes) -> None:
    """Connect, send, close; return once the server has closed its side too (only its listener is left)."""
    with socket.create_connection(("127.0.0.1", peer.port), timeout=10) as sock:
        sock.sendall(data)
    wait_for(lambda: len(procstat.socket_inodes(peer.pids)) == 1, 20.0, "the server to close the connection",
             describe=lambda: f"{len(procstat.socket_inodes(peer.pids))} sockets")


@pytest.mark.parametrize("server", ["always"], indirect=True)
def test_a_server_spinning_after_close_fails_the_verdict(server):
    _one_connection(server, b"AMQP\x00\x01\x00\x00")
    verdict = measure_after_close(server.pids)
    assert verdict.spinning, verdict.describe()
    assert len(verdict.windows) >= CONFIRM_WINDOWS and verdict.given_cpu_s >= SPIN_CPU_S or \
        verdict.watched_s >= WATCH_LIMIT_S, verdict.describe()
    # what the finding shows: the CPU-s the process spent, and the thread that wanted a core all along
    assert verdict.cpu_s > 0.05, verdict.describe()
    assert max(w.busiest_thread_share for w in verdict.windows) > 0.8, verdict.describe()
    assert "CPU-s" in verdict.describe() and verdict.evidence()["windows"]


@pytest.mark.parametrize("server", ["never"], indirect=True)
def test_a_server_idle_after_close_passes_the_verdict(server):
    _one_connection(server, b"AMQP\x00\x01\x00\x00")
    verdict = measure_after_close(server.pids)
    assert not verdict.spinning, verdict.describe()
    assert len(verdict.windows) == 1  # a window under the limit needs no second one
    assert verdict.windows[0].cores < 0.1, verdict.describe()


@pytest.mark.parametrize("server", ["burst"], indirect=True)
def test_a_burst_of_work_after_close_that_ends_passes_the_verdict(server):
    """1.5 s of busy work after close (what RabbitMQ's crash report for a refused input cost under load in CI) is
    over the limit in the first window and gone by the second: spent once, not kept spending."""
    _one_connection(server, b"AMQP\x00\x01\x00\x00")
    verdict = measure_after_close(server.pids)
    assert not verdict.spinning, verdict.describe()
    # the first window saw the burst (unless the machine gave it almost no CPU), the one under the limit ended it
    assert len(verdict.windows) in (1, 2) and not verdict.over(verdict.windows[-1]), verdict.describe()


@pytest.fixture
def busy_cpu():
    """A nice-0 busy loop on one CPU for the test's length: what a loaded machine is to a thread that shares it."""
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    yield cpu
    hog.kill()
    hog.wait(10)


def test_a_burst_a_loaded_machine_stretches_over_every_window_passes_the_verdict(busy_cpu):
    """Half a CPU-s of work after close by a thread that gets a tenth of a core (CI on 2026-12-07: RabbitMQ's
    after-work of a refused input, runnable through all three windows at 0.06-0.27 cores): over the limit in every
    window for some 5 s, yet given far less CPU than a spin is given in that time. The verdict watches on until it
    ends. (Windows 0.5 s apart, not 3: the same verdict in a sixth of the time, and of the busy loop's CPU.)"""
    server = ServerPeer(f"starved-burst:{busy_cpu}")
    try:
        _one_connection(server, b"AMQP\x00\x01\x00\x00")
        verdict = measure_after_close(server.pids, gap_s=0.5)
    finally:
        server.stop()
    assert not verdict.spinning, verdict.describe()
    assert not verdict.over(verdict.windows[-1]), verdict.describe()  # it ended on a window under the limit
    assert verdict.given_cpu_s < SPIN_CPU_S and verdict.watched_s < WATCH_LIMIT_S, verdict.describe()


def _window(cores: float, share: float) -> CpuWindow:
    return CpuWindow(span_s=QUIET_WINDOW_S, cpu_s=cores * QUIET_WINDOW_S, busiest_thread_share=share, busiest_tid=1)


def test_windows_over_the_limit_are_a_spin_only_once_the_cpu_given_or_the_time_watched_says_so():
    over = [_window(0.22, 0.81), _window(0.27, 1.0), _window(0.06, 0.9)]  # the three windows of CI's RabbitMQ
    assert all(CpuVerdict(windows=[w]).over(w) for w in over)
    stretched = CpuVerdict(windows=over, given_cpu_s=1.1, watched_s=9.0)
    assert stretched.kept_over and not stretched.spinning  # watched on
    assert CpuVerdict(windows=over, given_cpu_s=SPIN_CPU_S, watched_s=9.0).spinning
    assert CpuVerdict(windows=over * 4, given_cpu_s=1.9, watched_s=WATCH_LIMIT_S).spinning
    ended = CpuVerdict(windows=[*over, _window(0.01, 0.05)], given_cpu_s=1.2, watched_s=13.0)
    assert not ended.kept_over and not ended.spinning
    # two windows are a burst however much CPU they took
    assert not CpuVerdict(windows=over[:2], given_cpu_s=5.0, watched_s=5.0).spinning


def test_no_process_no_verdict():
    verdict = measure_after_close([])
    assert not verdict.spinning and verdict.windows == []


@pytest.fixture
def quick_verdict(monkeypatch):
    """The triage tests below are about which case is named, not about how long the verdict watches: their server's
    spin never ends, so a short gap and a small CPU threshold judge it the same, and save them some 25 s (of a
    spinning core: their server's threads spin until it is restarted)."""
    from harness.fuzz import cpuverdict

    monkeypatch.setattr(cpuverdict, "PERSIST_GAP_S", 0.5)
    monkeypatch.setattr(cpuverdict, "SPIN_CPU_S", 1.0)


def _session(server, tmp_path):
    from harness.fuzz import frames

    target = FuzzTarget(role="broker", vendor="spin", host="127.0.0.1", port=server.port, peer=server,
                        topology="test")
    session = frames._Session(target, seed=1, budget_s=300, max_cases=None, progress=None, out_dir=tmp_path,
                              families=None)
    session._start_sentinel = lambda: None  # the sentinel speaks AMQP beyond the header, which this server does not
    return session


def _plain(n: int) -> list[Case]:
    return [Case("plain", f"plain.{i}", [("send", f"AMQP\x00\x01\x00\x00 hello {i}".encode())], index=i)
            for i in range(n)]


@pytest.mark.parametrize("server", ["on-input"], indirect=True)
def test_a_hang_that_takes_several_spinning_connections_is_named_by_its_cpu(server, tmp_path, quick_verdict):
    """Replayed one after another on one server, the third spinning case hangs it; alone on a fresh server, that case
    hangs nothing but leaves a thread spinning: the hang is named after it, with a cpu-after-close finding."""
    from harness.fuzz.wire import Reply

    session = _session(server, tmp_path)
    cases = _plain(12)
    for i, at in enumerate((3, 7, 10)):
        cases.insert(at, Case("spin", f"spin.{'abc'[i]}", [("send", b"AMQP\x00\x01\x00\x00 SPIN")], index=90 + i))
    replies = [Reply(started=float(i), ended=float(i)) for i, _ in enumerate(cases)]  # the last ended nearest
    try:
        assert session._on_break("hang", "it sent no AMQP protocol header", cases, replies)
    finally:
        session.fresh.close(timeout=3.0)
    signatures = sorted(f.signature for f in session.report.findings)
    assert len(signatures) == 2 and signatures[0].startswith("cpu-after-close:spin."), signatures
    assert signatures[1] == "hang:" + signatures[0].split(":")[1], signatures
    hang = next(f for f in session.report.findings if f.kind == "hang")
    assert "spending CPU" in hang.message and hang.evidence["cpu_after_close"]["cpu_s"] > 0.05
    import yaml

    entries = yaml.safe_load((tmp_path / "crashers.yaml").read_text())["crashers"]
    assert [e["id"] for e in entries] == [hang.evidence["name"]]  # two findings of one input: one regression entry


def test_a_trickled_input_keeps_its_pieces_in_its_regression_entry():
    from harness.fuzz.frames import regression_entry
    from harness.fuzz.session import Finding

    target = FuzzTarget(role="broker", vendor="x", host="127.0.0.1", port=1, peer=None, topology="t")
    finding = Finding("cpu-after-close:trickle.x", "cpu-after-close", "spun", evidence={"seed": 5})
    trickle = Case("trickle", "trickle.x", [("send", b"AM"), ("pause", 0.01), ("send", b"QP"), ("pause", 0.03)])
    entry = regression_entry(finding, trickle, target)
    assert entry["steps"] == ["414d", 0.01, "5150", 0.03] and entry["input_hex"] == b"AMQP".hex()
    assert entry["hold_s"] == 0  # the last pause is in the steps
    held = Case("silence", "silence.x", [("send", b"AMQP"), ("pause", 1.5)])
    entry = regression_entry(finding, held, target)
    assert "steps" not in entry and entry["hold_s"] == 1.5  # one send and a hold: the plain form


@pytest.mark.parametrize("server", ["on-input"], indirect=True)
def test_an_innocent_case_named_by_a_hang_is_cleared_and_the_spinner_found(server, tmp_path, quick_verdict):
    session = _session(server, tmp_path)
    cases = _plain(15)
    cases.insert(9, Case("spin", "spin.after-close", [("send", b"SPIN")], index=99))
    try:
        culprit, verdict = session._hang_by_spin(cases[2], cases)
    finally:
        session.fresh.close(timeout=3.0)
    assert culprit is not None and culprit.name == "spin.after-close", culprit
    assert verdict.spinning, verdict.describe()


@pytest.mark.parametrize("server", ["on-input"], indirect=True)
def test_the_session_names_the_input_that_sets_the_server_spinning(server, tmp_path, quick_verdict):
    """The triage the frames session runs after a batch left the server spinning: restart, replay the batch a group at
    a time, then one case at a time, and record a cpu-after-close finding naming the input with the CPU-s seen."""
    from harness.fuzz import frames

    session = _session(server, tmp_path)
    try:
        cases = _plain(24)
        cases.insert(17, Case("spin", "spin.after-close", [("send", b"SPIN")], index=99))
        for case in cases:
            frames.play("127.0.0.1", server.port, case, idle_s=0.05)
        started = time.monotonic()
        assert session._check_cpu(cases)
        took = time.monotonic() - started
    finally:
        session.fresh.close(timeout=3.0)
    signatures = [f.signature for f in session.report.findings]
    assert signatures == ["cpu-after-close:spin.after-close"], signatures
    finding = session.report.findings[0]
    assert finding.kind == "cpu-after-close"
    assert finding.evidence["name"] == "spin.after-close" and finding.evidence["family"] == "spin"
    assert finding.evidence["input_hex"] == b"SPIN".hex()
    assert finding.evidence["cpu_after_close"]["cpu_s"] > 0.05
    assert "CPU-s" in finding.message
    assert session.cpu_breaks == 1
    # restarted once to replay against a quiet server, once to search the group, once to go on without the spin
    assert server.restarts == 3, server.restarts
    assert not measure_after_close(server.pids).spinning
    assert (tmp_path / "crashers.yaml").exists() and "spin.after-close" in (tmp_path / "crashers.yaml").read_text()
    assert took < 120, took
