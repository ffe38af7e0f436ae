"""The demo the README promises: two runs of the matrix, the second with a deliberately broken peer setting, then
the report shows the break as a regression and the flipped cases as flaky. A short fuzz session runs between them:
the report lists it apart and compares the broken run with the good one still. Real peers, real Spark."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# A Spark session and job take well under a minute alone, but several minutes when other JVMs share the two
# cores (seen in CI-like runs next to other Spark work): a generous limit still catches a hung job.
pytestmark = pytest.mark.timeout(600)

pytest.importorskip("pyspark")

INTEROP = Path(sys.executable).with_name("interop")
COMMAND = [str(INTEROP)] if INTEROP.exists() else [sys.executable, "-m", "harness.cli"]
CASES = "test_address_priority_takes_precedence_over_message_priority or test_multicast_gives_each_consumer_one_copy"


def interop(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_a_broken_run_shows_as_regression_and_flaky_in_the_report(tmp_path):
    results = tmp_path / "results"
    good = interop("run", "--suite", "routing", "-k", CASES, "--results", str(results), "-q", cwd=tmp_path)
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr
    fuzz = interop("fuzz", "--frames", "--peer", "router=reference", "--cases", "40", "--seed", "7",
                   "--results", str(results), cwd=tmp_path)
    assert fuzz.returncode == 0, fuzz.stdout[-3000:] + fuzz.stderr[-3000:]
    broken = interop("run", "--suite", "routing", "-k", CASES, "--results", str(results), "-q",
                     "--break", "router:no-priority", "--report", cwd=tmp_path)
    assert broken.returncode == 1, broken.stdout[-3000:] + broken.stderr  # the priority case fails
    assert "BROKEN: router:no-priority" in broken.stdout
    index = results / "report" / "index.html"
    assert f"report: {index.resolve()}" in broken.stdout, broken.stdout[-2000:] + broken.stderr[-2000:]

    page = index.read_text()
    facts = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page).group(1))
    assert len(facts["runs"]) == 3 and facts["regressions"] == 1 and facts["flaky"] == 1
    assert (facts["fuzz_sessions"], facts["fuzz_findings"]) == (1, 0)
    fuzzing = page[page.index("<h2>Fuzzing sessions"):page.index("<h2>Rejected")]
    assert "<td>router=reference</td><td>router</td><td>frames</td><td>1</td><td>40</td><td>0</td>" in fuzzing
    regressions = page[page.index("<h2>Regressions"):page.index("<h2>Flaky")]
    assert "test_address_priority_takes_precedence_over_message_priority" in regressions
    assert "router:no-priority" in regressions
    flaky = page[page.index("<h2>Flaky"):page.index("<h2>Durations")]
    assert "test_address_priority_takes_precedence_over_message_priority" in flaky
    assert "test_multicast_gives_each_consumer_one_copy" not in flaky   # unaffected by the break
    assert "deliberately broke a peer" in page
    assert (results / "report" / "tables" / "lines").is_dir() and (results / "report" / "tables" / "manifest").is_dir()
