"""`interop report --remote` through a real Spark Connect server, started from the pyspark installation on a free
loopback port (reports/connect_server.py): it makes the same tables as the local report, table by table, and the
store's increments work through it.

The remote reports run as `python -m reports` processes: a Python process that has opened a Spark Connect session
switches pyspark's functions to Connect for good, and this module's own local session must stay a local one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from reports import connect_server  # noqa: E402
from reports.job import run_job  # noqa: E402

from tests.test_report import CATALOG, write_known_runs  # noqa: E402
from tests.test_report_store import AGGREGATES, PER_RUN, current_lines, table  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = connect_server.start(log_path=tmp_path_factory.mktemp("connect") / "server.log")
    yield started
    started.stop()



def report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", *args, "--no-allure",
                           "--catalog", str(REPO / "suites" / "spec" / "catalog.yaml")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_the_report_through_spark_connect_is_the_local_report(server, spark, tmp_path):
    runs = write_known_runs(tmp_path / "runs")
    local = tmp_path / "local"
    from reports.cli import load_catalog

    run_job(spark, [str(runs)], str(local), load_catalog(None)[0])
    done = report(str(runs), "--out", str(tmp_path / "remote"), "--remote", server.url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Spark Connect server {server.url}" in done.stdout
    assert (tmp_path / "remote" / "index.html").is_file()
    for name in AGGREGATES + PER_RUN:
        if name == "lines":
            assert current_lines(spark, tmp_path / "remote") == current_lines(spark, local), name
        else:
            assert table(spark, tmp_path / "remote", name) == table(spark, local, name), name


def test_a_new_run_through_spark_connect_is_the_only_one_read(server, spark, tmp_path):
    runs = write_known_runs(tmp_path / "all")
    given = tmp_path / "results"
    given.mkdir()
    for name in ("run-1", "run-2"):
        shutil.copytree(runs / name, given / name)
    first = report(str(given), "--out", str(tmp_path / "out"), "--remote", server.url)
    assert first.returncode == 0, first.stderr[-2000:]
    shutil.copytree(runs / "run-3", given / "run-3")
    second = report(str(given), "--out", str(tmp_path / "out"), "--remote", server.url)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "3 run(s) among the inputs: 1 new, 0 changed since the last report, 2 unchanged" in second.stdout
    assert "1 run(s) read this time" in second.stdout
    local = tmp_path / "local"
    run_job(spark, [str(given)], str(local), CATALOG)
    assert table(spark, tmp_path / "out", "run_counts") == table(spark, local, "run_counts")


def test_no_server_there_is_a_one_line_error_and_exit_2(tmp_path):
    write_known_runs(tmp_path / "runs")
    port = connect_server.free_port()
    done = report(str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--remote", f"sc://127.0.0.1:{port}")
    assert done.returncode == 2
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("interop report:")]
    assert f"--remote sc://127.0.0.1:{port}: cannot reach a Spark Connect server there" in line
    assert "Traceback" not in done.stderr
