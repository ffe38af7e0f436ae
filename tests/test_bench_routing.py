"""bench/routing.py writes the result records the report reads (suite "bench", one per scenario, router and
client stack) and refuses bad input with one line. Figures are not judged: only their presence and shape."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "routing.py"


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler here")
@pytest.mark.serial  # a benchmark: its figures (recorded, not judged) mean nothing with another worker on the cores
def test_one_record_per_scenario_router_and_client_stack(tmp_path):
    done = _run("--messages", "200", "--repeats", "1", "--clients", "c", "--scenario", "anycast-unsettled",
                "--results", str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [results] = list(tmp_path.glob("*/results.jsonl"))
    records = {r["case"]: r for r in map(json.loads, results.read_text().splitlines())}
    reference = records["BENCH-routing/anycast-unsettled/reference/c"]
    assert reference["suite"] == "bench" and reference["spec"] == [] and reference["outcome"] == "passed"
    assert reference["peers"]["router"]["vendor"] == "reference"
    details = reference["details"]
    assert (details["bench"], details["scenario"], details["clients"], details["repeats"]) == (
        "routing", "anycast-unsettled", "c", 1)
    assert details["msgs_per_s"] > 0 and details["p99_ms"] >= details["p50_ms"] >= 0
    assert details["cpu_s_per_1000"] >= 0 and details["ratio_to"] == "qdrouterd"
    assert "BENCH-routing/anycast-unsettled/direct/c" in records
    qdrouterd = records["BENCH-routing/anycast-unsettled/qdrouterd/c"]
    if qdrouterd["outcome"] == "passed":  # a qdrouterd on PATH: the reference's record carries the ratio
        assert details["ratio"] == pytest.approx(details["msgs_per_s"] / qdrouterd["details"]["msgs_per_s"])
    else:
        assert qdrouterd["outcome"] == "error" and qdrouterd["message"] and details["ratio"] is None
    assert (results.parent / "run.json").is_file()


def test_bad_input_is_one_line():
    bad = _run("--scenario", "nope", timeout=60)
    assert bad.returncode == 2 and "unknown scenario 'nope'" in bad.stderr.strip().splitlines()[-1]
    bad = _run("--clients", "java", timeout=60)
    assert bad.returncode == 2 and "--clients" in bad.stderr.strip().splitlines()[-1]


def test_router_cpu_budget_is_recorded_or_refused_in_one_line(tmp_path):
    """--router-cpu puts every router under a CPU quota of its own where a cgroup can be made (root), and says in
    one line why not elsewhere."""
    from bench.cpu_budget import BudgetUnavailable, CpuBudget

    try:
        CpuBudget.create(0.5)
    except BudgetUnavailable as exc:
        done = _run("--router-cpu", "0.5", "--messages", "10", timeout=60)
        assert done.returncode == 2 and str(exc) in done.stderr.strip().splitlines()[-1]
        return
    done = _run("--messages", "200", "--repeats", "1", "--clients", "c", "--scenario", "anycast-unsettled",
                "--router-cpu", "0.5", "--results", str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "every router process limited to 0.5 CPU" in done.stdout
    [results] = list(tmp_path.glob("*/results.jsonl"))
    records = {r["case"]: r for r in map(json.loads, results.read_text().splitlines())}
    details = records["BENCH-routing/anycast-unsettled+isolated+cpu0.5/reference/c"]["details"]
    assert details["router_cpu"] == 0.5 and details["isolated"] is True and details["msgs_per_s"] > 0


def test_router_cpu_out_of_range_is_one_line():
    bad = _run("--router-cpu", "0", timeout=60)
    assert bad.returncode == 2 and "a CPU budget must be above 0" in bad.stderr.strip().splitlines()[-1]
