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



ROLE_CAPABILITY_CASES = """
import pytest


@pytest.mark.requires("sasl.plain")
def test_any_role():
    pass


@pytest.mark.requires("router:sasl.plain")
def test_from_the_router():
    pass


@pytest.mark.requires("broker:sasl.plain")
def test_from_the_broker():
    pass
"""


def test_a_role_qualified_capability_is_asked_of_that_roles_vendor(pytester):
    """qdrouterd here cannot check PLAIN (its proton has no Cyrus) while the reference broker can: a bare
    `sasl.plain` is met by the broker, `router:sasl.plain` must make the case not-applicable."""
    pytester.makepyfile(test_roles=ROLE_CAPABILITY_CASES)
    run = pytester.runpytest_subprocess("-p", "harness.pytest_plugin", "--results", str(pytester.path / "results"),
                                        "--peer", "router=qdrouterd", "--peer", "broker=reference", "-rs")
    run.assert_outcomes(passed=2, skipped=1)
    run.stdout.fnmatch_lines(["*not-applicable: missing capability router:sasl.plain"])


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


# Imported by every Python process of the session below, the reference router among them: on SIGUSR1 the
# process's main thread (the router's event loop) sleeps for an hour. The router runs on, hung, as a deadlock
# would leave it: its port accepts connections and nothing answers them.
HANG_ON_SIGUSR1 = '''
import signal
import time

signal.signal(signal.SIGUSR1, lambda *_: time.sleep(3600))
'''

HANGING_CASES = '''
import os
import signal


def test_1_a_plain_failure_leaves_the_topology_alone(topology):
    topology("single-router")
    assert False, "failed while every peer was well"


def test_2_the_router_hangs(topology, clients):
    running = topology("single-router")
    assert running.down_peers() == {}, "replaced after a failure that was not the router's"
    os.kill(running["R1"].pids[0], signal.SIGUSR1)
    clients.connect(running.client_url("producer"), wait=False).wait_open(timeout=2)


def test_3_the_next_case_gets_a_router_that_answers(topology, clients):
    running = topology("single-router")
    clients.connect(running.client_url("producer")).close()
'''


def test_a_hung_peer_is_found_after_the_case_it_failed_and_replaced(pytester, monkeypatch):
    """A peer whose process runs but which answers nothing: the case it fails says so (the peer was asked on
    the wire after the failure), and the next case gets a fresh topology instead of timing out in turn. A case
    that fails while its peers answer keeps the topology."""
    hooks = pytester.mkdir("hooks")
    (hooks / "sitecustomize.py").write_text(HANG_ON_SIGUSR1)
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{hooks}")
    pytester.makepyfile(test_hang=HANGING_CASES)
    run = pytester.runpytest_subprocess("-p", "harness.pytest_plugin", "--results", str(pytester.path / "results"),
                                        "-p", "no:cacheprovider", "--peer-probe-timeout", "1")
    run.assert_outcomes(passed=1, failed=2)
    out = run.stdout.str()
    hung = "it accepts connections on 127.0.0.1:"
    assert "but sent no AMQP protocol header within 1s (hung); its last log lines" in out
    assert out.count("lost a peer") == 1, "only the hung router is replaced"
    assert f"topology single-router lost a peer (R1: {hung}" in out


def test_a_case_whose_details_break_the_record_schema_is_kept_as_an_error(tmp_path, capsys):
    """A case that fills a declared details key with something else (harness/record_schema.py) must not stop the
    session (an INTERNALERROR took down a whole xdist worker once): its record is written as an error saying why."""
    import json

    from harness.pytest_plugin import InteropSession
    from harness.results import ResultWriter, make_record

    session = object.__new__(InteropSession)  # only write() is exercised: the writer and the counts it keeps
    session.writer, session.outcomes = ResultWriter(tmp_path), {}
    good = make_record(case="suites/x.py::test_ok", suite="x", outcome="passed", duration_s=0.1)
    bad = make_record(case="suites/x.py::test_bad", suite="x", outcome="passed", duration_s=0.1,
                      details={"nodes": ["amqp:/_topo/0/R1/$management"]})  # `nodes` is node -> peer there
    session.write(good)
    session.write(bad)
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in rows] == ["passed", "error"] and session.outcomes == {"passed": 1, "error": 1}
    assert "details.nodes" in rows[1]["message"] and "R1" in rows[1]["details"]["rejected_details"]
    assert "test_bad: its record breaks the record schema" in capsys.readouterr().err


ROUTER_STATE_CASES = '''
def test_a_consumer_waits_for_a_message_that_never_comes(topology, clients):
    running = topology("single-router")
    receiver = clients.connect(running.client_url("consumer")).receiver("orders.state", credit=7)
    assert False, "no message came"
'''


def test_a_failed_case_shows_each_routers_links_and_addresses(pytester, monkeypatch):
    """A failed case's report carries the router's links and addresses as its management shows them when the case
    failed (router.link, router.address): the consumer's link with its address and credit, and the address with
    its one subscriber."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_state=ROUTER_STATE_CASES)
    run = pytester.runpytest_subprocess("-p", "harness.pytest_plugin", "--results", str(pytester.path / "results"),
                                        "-p", "no:cacheprovider")
    run.assert_outcomes(failed=1)
    out = run.stdout.str()
    section = out.split("router R1: links and addresses (its management, when the case failed)", 1)[1]
    links, addresses = section.split("router.address, mobile and link-route", 1)
    consumer = next(line.split() for line in links.splitlines() if "M0orders.state" in line)
    assert consumer[:2] == ["endpoint", "out"] and consumer[3] == "M0orders.state", consumer
    address = next(line.split() for line in addresses.splitlines() if line.strip().startswith("M0orders.state"))
    assert address[1:3] == ["balanced", "1"], address  # distribution, subscriberCount


def test_an_expected_failure_keeps_what_its_assertion_said(pytester):
    """An xfail's record carries its recorded reason as its message; what the assertion said that time (an
    intermittent difference's credit and queue) goes into details.xfail_message."""
    from harness.pytest_plugin import _expected_failure

    pytester.makepyfile(test_known="""
import pytest

@pytest.mark.xfail(reason="a recorded difference", strict=False)
def test_known():
    assert False, "no outcome in 60 s: credit 6, 3 queued"

@pytest.mark.xfail(reason="a recorded difference", strict=False)
def test_known_that_passed():
    pass

def test_xfailed_by_itself():
    pytest.xfail("the case's own call")
""")
    reports = pytester.inline_run("-p", "no:cacheprovider").getreports("pytest_runtest_logreport")
    calls = {r.nodeid.split("::")[1]: r for r in reports if r.when == "call"}
    said = _expected_failure({"call": calls["test_known"]})
    assert said is not None and "no outcome in 60 s: credit 6, 3 queued" in said, said
    assert _expected_failure({"call": calls["test_known_that_passed"]}) is None
    assert "the case's own call" in _expected_failure({"call": calls["test_xfailed_by_itself"]})
