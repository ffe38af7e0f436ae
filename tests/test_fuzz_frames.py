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
    assert peer_pids(type("P", (), {"pids": [1, 2]})()) == [1, 2], "pids as a property (ProcessPeer)"
    assert peer_pids(type("P", (), {"pids": lambda self: [3]})()) == [3], "pids as a method (RabbitMQPeer)"


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
