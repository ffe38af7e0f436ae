"""scripts/timed-step.sh, the step timer of `make test`: each step's wall and CPU time, and a summary that names
what failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "timed-step.sh"
# a process that uses CPU time until it has used this much (its own clock, so a busy machine only makes it longer)
BURN = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"]


def step(log: Path, name: str, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), str(log), name, *command], capture_output=True, text=True,
                          timeout=120)


def test_a_step_counts_the_cpu_time_of_every_process_under_it(tmp_path):
    log = tmp_path / "steps"
    burn = " ".join(f"'{a}'" for a in BURN)
    assert step(log, "two at once", "bash", "-c", f"{burn} & {burn}; wait").returncode == 0
    assert step(log, "idle", "sleep", "0.2").returncode == 0
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    assert [(r[0], r[2]) for r in rows] == [("two at once", "0"), ("idle", "0")]
    assert float(rows[0][5]) >= 1.2 - 0.05  # both burners, the one in the background too
    assert float(rows[1][5]) < 0.2
    summary = subprocess.run(["bash", str(SCRIPT), "--summary", str(log)], capture_output=True, text=True)
    assert summary.returncode == 0
    assert "total CPU time" in summary.stdout and "cores had in that time" in summary.stdout


def test_the_summary_of_a_failed_step_names_its_failed_cases_and_exits_1(tmp_path):
    log = tmp_path / "steps"
    failed = step(log, "suite", "bash", "-c", "echo 'FAILED tests/x.py::test_y - assert 1 == 2'; exit 3")
    assert failed.returncode == 3 and "FAILED tests/x.py::test_y" in failed.stdout
    summary = subprocess.run(["bash", str(SCRIPT), "--summary", str(log)], capture_output=True, text=True)
    assert summary.returncode == 1
    assert "make test: failed in 'suite':" in summary.stdout and "FAILED tests/x.py::test_y" in summary.stdout
    assert summary.stdout.rstrip().endswith("make test: FAILED: suite (their output is above)")
