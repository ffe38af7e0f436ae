"""The frame fuzzer's runner on a real reference broker, and its /proc readers on sockets of this process."""

from __future__ import annotations

import os
import socket

import pytest

from harness.fuzz import procstat
from harness.fuzz.frames import FAMILIES, peer_pids, run_session
from harness.fuzz.session import FuzzTarget
from harness.peers.launch import start_topology
from harness.topology import load_topology, topology_path
from harness.wait import wait_for


@pytest.fixture(scope="module")
def broker_target():
    running = start_topology(load_topology(topology_path("single-broker")), {"broker": "reference"})
    try:
        peer = running["B1"]
        ep = peer.client_endpoint
        yield FuzzTarget(role="broker", vendor="reference", host=ep.host, port=ep.port, peer=peer,
                         topology="single-broker", running=running)
    finally:
        running.stop()


# serial: 400 cases must fit the 25 s budget, which a second pytest-xdist worker's load on 2 cores can take away
@pytest.mark.serial
def test_a_short_session_runs_every_family_and_reports_its_figures(broker_target):
    report = run_session(broker_target, seed=11, budget_s=25, max_cases=400)
    assert report.mode == "frames" and report.seed == 11
    assert report.executed == 400, f"ran {report.executed} of 400 cases in the budget"
    figures = report.figures
    assert set(figures["cases_per_family"]) == set(FAMILIES), "every family took its turn"
    assert figures["sentinel_received"] > 0 and figures["sentinel_lost"] == 0, figures
    assert 0 < figures["max_rss_mb"] < 200, "RSS read from the broker's own process"
    for key in ("cases_per_s", "max_sentinel_gap_ms", "sentinel_sent", "close_wait"):
        assert key in figures
    # the reference broker survives all of it (issue 15, scope 3): nothing to report
    assert report.findings == [], [f.message for f in report.findings]
    assert broker_target.peer.down_reason() is None


def test_an_unknown_family_is_refused_before_anything_runs(broker_target):
    with pytest.raises(ValueError, match="unknown fuzz family"):
        run_session(broker_target, seed=1, budget_s=5, families=["utf8", "bogus"])


def test_rss_and_socket_readers_see_this_process():
    me = [os.getpid()]
    assert procstat.rss_bytes(me) > 1 << 20
    assert procstat.rss_bytes([2**22 + 12345]) == 0, "a pid that is gone counts 0"
    assert peer_pids(type("P", (), {"pids": [1, 0, 2]})()) == [1, 2], "a pid of 0 (a process not started) is left out"


def test_close_wait_counts_a_socket_whose_peer_closed_until_it_is_closed_here():
    me = [os.getpid()]
    before = procstat.close_wait_count(me)
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        assert procstat.socket_inodes(me) >= {os.fstat(accepted.fileno()).st_ino}
        client.close()  # the far side closes: ours is in CLOSE_WAIT until we close it
        wait_for(lambda: procstat.close_wait_count(me) == before + 1, 5, "our socket to be in CLOSE_WAIT",
                 describe=lambda: str(procstat.close_wait_count(me)))
        accepted.close()
        wait_for(lambda: procstat.close_wait_count(me) == before, 5, "CLOSE_WAIT to clear")


# A server that never closes a connection whose bytes held b"KEEP" (its side stays in CLOSE_WAIT once the client
# closes) and closes every other one: a CLOSE_WAIT leak for one input among many.
KEEPER = r"""
import socket, sys, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
print(srv.getsockname()[1], flush=True)
kept = []

def serve(conn):
    data = b""
    try:
        while chunk := conn.recv(4096):
            data += chunk
    except OSError:
        pass
    if b"KEEP" in data:
        kept.append(conn)
    else:
        conn.close()

while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def test_a_socket_kept_in_close_wait_is_named_by_its_clients_port(tmp_path, monkeypatch):
    """The leak is named from the batch's own replies (the kept socket's peer port is the case's client port),
    with no replay; a socket the server closes late is not a finding."""
    import subprocess
    import sys

    from harness.fuzz import frames
    from harness.fuzz.hostile import Case
    from harness.fuzz.wire import play

    monkeypatch.setattr(frames, "CLOSE_WAIT_KEPT_S", 1.0)  # the test's server never closes a kept one
    proc = subprocess.Popen([sys.executable, "-c", KEEPER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        peer = type("Peer", (), {"pids": [proc.pid]})()
        target = FuzzTarget(role="broker", vendor="keeper", host="127.0.0.1", port=port, peer=peer, topology="t")
        session = frames._Session(target, seed=1, budget_s=60, max_cases=None, progress=None, out_dir=tmp_path,
                                  families=None)
        cases = [Case("plain", f"plain.{i}", [("send", b"hello")], index=i) for i in range(6)]
        cases.insert(4, Case("keep", "keep.me", [("send", b"KEEP")], index=9))
        replies = [play("127.0.0.1", port, case, idle_s=0.05) for case in cases]
        session.close_wait_tries = frames.CLOSE_WAIT_ATTRIBUTIONS  # no replays left: the port alone must name it
        session._check_close_wait(cases, replies)
        assert [f.signature for f in session.report.findings] == ["close-wait:keep.me"]
        assert session.close_wait_kept == 1
        session._check_close_wait(cases[:4], replies[:4])  # the kept socket is not a new leak of a later batch
        assert len(session.report.findings) == 1
        session.fresh.close(timeout=3.0)
    finally:
        proc.kill()
        proc.wait(10)
