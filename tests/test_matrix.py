"""The run matrix: matrix files, probes, deliberate breaks, and `interop run` over several cells end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli, matrix
from harness.peers.containers import reset_docker_engine_cache
from harness.breaks import Break, BreakError, break_topology, parse_break
from harness.matrix import MatrixError, load_matrix
from harness.results import read_results
from harness.topology import load_topology, topology_path
from harness.wait import wait_for

ROOT = Path(__file__).resolve().parent.parent
INTEROP = Path(sys.executable).with_name("interop")
COMMAND = [str(INTEROP)] if INTEROP.exists() else [sys.executable, "-m", "harness.cli"]
SUITES = ["routing", "broker"]
PRIORITY = "test_address_priority_takes_precedence_over_message_priority"
FAST = "test_anonymous_sender_gets_credit_and_unroutable_messages_come_back_released"


def known_vendor(role: str, name: str) -> None:
    if (role, name) not in {("router", "reference"), ("router", "qdrouterd")}:
        raise ValueError(f"--peer {role}={name}: unknown vendor (expected one of: qdrouterd, reference)")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


# ---- breaks -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("no-priority", Break("router", None, "no-priority")),
    ("router:no-priority", Break("router", None, "no-priority")),
    ("router=reference:multicast-as-balanced", Break("router", "reference", "multicast-as-balanced")),
])
def test_break_syntax(text, expected):
    assert parse_break(text) == expected
    assert parse_break(str(expected)) == expected


@pytest.mark.parametrize("text, message", [
    ("router:nosuch", "unknown fault 'nosuch' (expected one of: no-priority"),
    ("broker:no-priority", "fault no-priority breaks a router, not a broker"),
    (":no-priority", "expected [ROLE[=VENDOR]:]FAULT"),
])
def test_bad_breaks_are_one_line(text, message):
    with pytest.raises(BreakError, match=None) as info:
        parse_break(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_break_changes_only_the_named_node_of_a_copy():
    topology = load_topology(topology_path("single-router"))
    broken = break_topology(topology, "R1", ["no-priority", "multicast-as-balanced"])
    assert any(a.priority is not None for a in topology.nodes["R1"].addresses), "the original is untouched"
    assert all(a.priority is None for a in broken.nodes["R1"].addresses)
    assert not any(a.distribution == "multicast" for a in broken.nodes["R1"].addresses)
    assert broken.clients == topology.clients


# ---- matrix files ---------------------------------------------------------------------------------------------------


def test_matrix_file_cells_and_unavailable_products(tmp_path):
    path = write(tmp_path, """
suites: [routing]
timeout: 30
cells:
  - peers: {router: reference}
  - peers: {router: qdrouterd}
  - name: broken
    peers: {router: reference}
    breaks: ["router:no-priority"]
    suites: all
""")
    probed = []

    def probe(name):
        probed.append(name)
        return "qdrouterd is not on PATH"

    m = load_matrix(path, SUITES, known_vendor, probe=probe)
    assert [c.name for c in m.cells] == ["router-reference", "broken"]
    assert m.cells[0].suites == ["routing"] and m.cells[1].suites == SUITES
    assert m.cells[1].breaks == [Break("router", None, "no-priority")]
    assert m.timeout == 30
    assert ("cell router-qdrouterd (router=qdrouterd)", "qdrouterd is not on PATH") in m.not_used
    assert probed == ["qdrouterd"], "the reference is never probed"


@pytest.mark.parametrize("text, message", [
    ("cells: []", "cells: expected a non-empty list of cells"),
    ("cells:\n  - peers: {router: nosuch}", "cells[0].peers.router: router=nosuch: unknown vendor"),
    ("cells:\n  - peers: {router: reference}\n    sutes: [routing]", "cells[0]: unknown field 'sutes'"),
    ("suites: [nosuch]\ncells:\n  - peers: {router: reference}", "suites: unknown suite 'nosuch'"),
    ("cells:\n  - peers: {router: reference}\n    breaks: [router:nosuch]", "cells[0].breaks[0]: router:nosuch"),
    ("timeout: -1\ncells:\n  - peers: {router: reference}", "timeout: expected seconds per case > 0"),
    ("cells:\n  - peers: {router: reference}\n  - peers: {router: reference}", "cells[1].name: 'router-refer"),
    ("cells: [", "YAML syntax error"),
])
def test_bad_matrix_files_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(MatrixError) as info:
        load_matrix(write(tmp_path, text), SUITES, known_vendor, probe=lambda _: None)
    assert message in str(info.value), str(info.value)
    assert "matrix.yaml" in str(info.value) and "\n" not in str(info.value)


def test_default_matrix_is_the_reference_plus_what_runs_here():
    roles = [("reference", "router"), ("qdrouterd", "router"), ("reference", "broker"), ("rabbitmq", "broker")]
    m = matrix.default_matrix(SUITES, roles, probe=lambda name: None if name == "rabbitmq" else "not here")
    assert [c.peer_option() for c in m.cells] == ["router=reference,broker=reference",
                                                  "router=reference,broker=rabbitmq"]
    assert ("cell router-qdrouterd-broker-reference (router=qdrouterd,broker=reference)", "not here") in m.not_used


def test_probes_say_why_and_are_fast(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    reset_docker_engine_cache()
    assert matrix.probe_vendor("reference") is None
    assert matrix.probe_vendor("qdrouterd") == ("qdrouterd is not on PATH; no Docker engine: DOCKER_HOST="
                                                "unix:///nonexistent/docker.sock: /nonexistent/docker.sock does "
                                                "not exist")
    assert matrix.probe_vendor("qdrouterd@native") == "qdrouterd is not on PATH"
    assert "no Docker engine" in matrix.probe_vendor("artemis@container")


def test_the_repository_matrix_file_loads():
    m = load_matrix(ROOT / "matrix.yaml", list(cli.available_suites()),
                    lambda role, name: __import__("harness.peers.vendors", fromlist=["vendor"]).vendor(name, role))
    assert m.cells and m.cells[0].peers == {"router": "reference", "broker": "reference"}


def test_cli_list_and_break_mistakes(capsys, monkeypatch):
    monkeypatch.setattr(cli.pytest, "main", lambda *a, **k: pytest.fail("must not run"))
    assert cli.main(["run", "--list", "--break", "router:no-priority"]) == 0
    out = capsys.readouterr().out
    assert "cell router-reference-broker-reference+no-priority: router=reference" in out
    assert "BROKEN: router:no-priority" in out
    assert cli.main(["run", "--break", "router=qdrouterd:no-priority", "--peer", "router=reference"]) == 2
    assert "matches no peer of any cell" in capsys.readouterr().err
    assert cli.main(["run", "--peer", "router=reference", "--matrix", "matrix.yaml"]) == 2
    assert cli.main(["run", "--jobs", "0"]) == 2


# ---- interop run over a matrix, end to end ------------------------------------------------------------------


def interop(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_two_cells_share_one_run_with_junit_allure_and_progress(tmp_path):
    path = write(tmp_path, """
suites: [routing]
timeout: 60
cells:
  - peers: {router: reference}
  - name: broken
    peers: {router: reference}
    breaks: ["router:no-priority"]
""")
    results = tmp_path / "res"
    done = interop("run", "--matrix", str(path), "-k", f"{PRIORITY} or {FAST}", "--results", str(results),
                   cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr   # the broken cell fails its priority case
    (folder,) = [p for p in results.iterdir() if p.is_dir()]
    records, bad = read_results(folder)
    assert bad == []
    by_cell = {(r["cell"], r["case"].split("::")[1]): r for r in records}
    assert by_cell[("router-reference", PRIORITY)]["outcome"] == "passed"
    assert by_cell[("broken", PRIORITY)]["outcome"] == "failed"
    assert by_cell[("broken", PRIORITY)]["config_fault"] == "router:no-priority"
    assert by_cell[("broken", PRIORITY)]["target"] == "router=reference,broker=reference"
    assert by_cell[("broken", FAST)]["outcome"] == "passed"
    assert {r["run_id"] for r in records} == {folder.name}

    out = done.stdout
    assert "-- cell broken: started" in out and "-- cell router-reference: started" in out
    assert "/4] FAILED" in out and "/4] PASSED" in out        # one progress line per finished case
    assert "by cell:" in out and "broken            2 (1 passed, 1 failed" in out
    # each cell's CPU time: its pytest's and its peers' (a pytest session and a router take well over a second)
    cpu = re.search(r"-- cell broken: exit 1 \(tests failed\), .* in [\d.]+s, (\d+) CPU-s; log ", out)
    assert cpu and int(cpu.group(1)) >= 1, out[-3000:]
    assert re.search(r"broken +2 \(1 passed, 1 failed.*; exit 1; \d+ s, \d+ CPU-s", out)

    for cell in ("router-reference", "broken"):
        junit = (folder / f"junit-{cell}.xml").read_text()
        assert f'name="{cell}"' in junit and "<testcase" in junit
        assert (folder / "cells" / f"{cell}.log").is_file()
        logs = list((folder / "peer-logs" / cell).glob("*/R1.log"))  # each cell's own: cells run side by side
        assert logs and all("; ready" in log.read_text() for log in logs)
    assert len(list((folder / "allure-results").glob("*-result.json"))) == 4
    meta = json.loads((folder / "run.json").read_text())
    assert [c["name"] for c in meta["matrix"]["cells"]] == ["router-reference", "broken"]
    assert meta["breaks"] == ["router:no-priority"] and meta["ended_at"] and meta["interrupted"] is False
    assert [c["exit_code"] for c in meta["matrix"]["cells"]] == [0, 1]


def test_a_killed_matrix_run_leaves_readable_results(tmp_path):
    path = write(tmp_path, "suites: [routing]\ncells:\n  - peers: {router: reference}\n"
                           "  - {name: second, peers: {router: reference}}\n")
    results = tmp_path / "res"
    proc = subprocess.Popen([*COMMAND, "run", "--matrix", str(path), "--results", str(results)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def some_records():
            files = list(results.glob("*/results.jsonl"))
            return files and len(files[0].read_text().splitlines()) >= 3
        wait_for(some_records, 120, "the first result records")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-2000:] + err
    assert "interrupted" in err
    (folder,) = [p for p in results.iterdir() if p.is_dir()]
    records, bad = read_results(folder)
    assert len(records) >= 3 and len(bad) <= 1   # at most the line in flight
    assert json.loads((folder / "run.json").read_text())["interrupted"] is True
    leftovers = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True).stdout.split()
    assert str(os.getpid()) not in leftovers and leftovers == [], "cells must not outlive the run"


def test_cells_may_name_files_of_a_suite_and_a_keyword(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("cells:\n  - peers: {broker: reference}\n    suites: [broker, security/test_broker_*.py]\n"
                    "    keyword: queue\n")
    m = load_matrix(path, list(cli.available_suites()), lambda role, name: None, probe=lambda name: None)
    cell = m.cells[0]
    assert cell.suites == ["broker", "security/test_broker_*.py"] and cell.keyword == "queue"
    assert cell.suite_names() == ["broker", "security"]
    paths = cli._cell_paths(cell)
    assert paths[0].endswith("suites/broker") and all("/security/test_broker_" in p for p in paths[1:])
    assert len(paths) > 2
    for text, message in [("suites: [nosuch/test_x.py]", "unknown suite 'nosuch'"),
                          ("suites: [security/../x.py]", "expected SUITE or SUITE/FILE-PATTERN"),
                          ("keyword: ''", "keyword: expected a pytest -k expression")]:
        path.write_text(f"cells:\n  - peers: {{broker: reference}}\n    {text}\n")
        with pytest.raises(MatrixError, match=message):
            load_matrix(path, list(cli.available_suites()), lambda role, name: None, probe=lambda name: None)


def test_the_products_matrix_of_make_test_loads():
    m = load_matrix(ROOT / "tests" / "products.yaml", list(cli.available_suites()),
                    lambda role, name: __import__("harness.peers.vendors", fromlist=["vendor"]).vendor(name, role),
                    probe=lambda name: None)
    assert {c.name for c in m.cells} >= {"rabbitmq", "rabbitmq-links", "qdrouterd", "qdrouterd-rabbitmq"}
    for cell in m.cells:
        assert cli._cell_paths(cell)
