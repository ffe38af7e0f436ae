"""The harness pytest plugin: its pure pieces, and what it does when a peer dies under a case."""

from pathlib import Path

import pytest

from harness.pytest_plugin import required_capabilities

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent


def test_a_cases_requires_adds_to_its_modules():
    """A case marked `requires("durable")` in a module marked `requires("transactions")` needs both: a vendor
    with `durable` but without `transactions` must get not-applicable, not a failing run."""
    module, case = pytest.mark.requires("transactions").mark, pytest.mark.requires("durable").mark
    assert required_capabilities([case, module]) == {"transactions", "durable"}
    assert required_capabilities([]) == set()


CRASHING_CASES = '''
import os
import signal

from harness.wait import wait_for


def test_1_the_router_crashes(topology):
    router = topology("single-router")["R1"]
    os.kill(router.pids[0], signal.SIGKILL)  # from outside, as a crash: the harness did not ask for it
    wait_for(lambda: not router.is_running(), 10, "the router process to end")
    assert router.is_running(), "the router went away"


def test_2_the_next_case_gets_a_running_router(topology, clients):
    running = topology("single-router")
    assert running.down_peers() == {}
    clients.connect(running.client_url("producer")).close()


def test_3_a_case_that_kills_on_purpose_keeps_its_topology_until_it_ends(topology):
    running = topology("single-router")
    running["R1"].kill()
    assert topology("single-router") is running, "not replaced in the middle of the case that killed the peer"
    running["R1"].restart()


def test_4_a_case_leaves_the_router_paused(topology):
    topology("single-router")["R1"].pause()
    assert False, "failed before resuming the router"


def test_5_the_next_case_gets_a_running_router_again(topology, clients):
    running = topology("single-router")
    clients.connect(running.client_url("producer")).close()
'''


def test_a_crashed_peer_fails_one_case_shows_its_log_and_is_replaced(pytester, monkeypatch):
    """A peer that dies under a case: that case's failure carries the reason and the peer's last log lines;
    the next case gets a fresh topology instead of `Connection refused`; a peer left paused is replaced too;
    every run's logs stay in the run folder."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_crash=CRASHING_CASES)
    results = pytester.path / "results"
    run = pytester.runpytest_subprocess("-p", "harness.pytest_plugin", "--results", str(results),
                                        "-p", "no:cacheprovider")
    run.assert_outcomes(passed=3, failed=2)
    out = run.stdout.str()
    assert "peer R1 is down: its process was killed by signal 9; its last log lines" in out
    assert "started" in out.split("its last log lines", 1)[1]  # the tail of the router's own log
    assert "topology single-router lost a peer (R1: its process was killed by signal 9)" in out
    assert "topology single-router lost a peer (R1: it is paused (SIGSTOP) and was not resumed)" in out
    (run_dir,) = results.iterdir()
    logs = run_dir / "peer-logs" / "single-router"
    assert sorted(p.name for p in logs.iterdir()) == ["R1.1.log", "R1.2.log", "R1.log"]
    assert "interop: its process was killed by signal 9; restarted" in (logs / "R1.2.log").read_text()  # case 3
    assert all("; ready" in log.read_text() for log in logs.iterdir())
