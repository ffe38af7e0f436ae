"""scripts/timed-step.sh, the step timer of `make test`: each step's wall time and the machine's CPU time meanwhile,
and a summary that names what failed."""

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


def test_a_step_counts_the_cpu_time_the_machine_used_meanwhile(tmp_path):
    """Every process counts, the one in the background too. (Only a lower bound can be checked: the machine runs
    other tests at the same time.)"""
    log = tmp_path / "steps"
    burn = " ".join(f"'{a}'" for a in BURN)
    assert step(log, "two at once", "bash", "-c", f"{burn} & {burn}; wait").returncode == 0
    assert step(log, "then another", *BURN).returncode == 0
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    assert [(r[0], r[2]) for r in rows] == [("two at once", "0"), ("then another", "0")]
    assert float(rows[0][6]) - float(rows[0][5]) >= 1.2 - 0.1  # (/proc/stat counts in ticks of 10 ms)
    assert float(rows[1][6]) - float(rows[1][5]) >= 0.6 - 0.1
    summary = subprocess.run(["bash", str(SCRIPT), "--summary", str(log)], capture_output=True, text=True)
    assert summary.returncode == 0
    (total,) = [line for line in summary.stdout.splitlines() if line.startswith("machine CPU time")]
    assert float(total.split()[3]) >= 1.8 - 0.2 and "cores had in that time" in total


def test_the_summary_of_a_failed_step_names_its_failed_cases_and_exits_1(tmp_path):
    log = tmp_path / "steps"
    failed = step(log, "suite", "bash", "-c", "echo 'FAILED tests/x.py::test_y - assert 1 == 2'; exit 3")
    assert failed.returncode == 3 and "FAILED tests/x.py::test_y" in failed.stdout
    summary = subprocess.run(["bash", str(SCRIPT), "--summary", str(log)], capture_output=True, text=True)
    assert summary.returncode == 1
    assert "make test: failed in 'suite':" in summary.stdout and "FAILED tests/x.py::test_y" in summary.stdout
    assert summary.stdout.rstrip().endswith("make test: FAILED: suite (their output is above)")
