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

from harness.ports import free_port  # noqa: E402
from reports import connect_server  # noqa: E402
from reports.job import run_job  # noqa: E402

from tests.conftest import TEST_EXECUTION  # noqa: E402
from tests.test_report import write_known_runs  # noqa: E402
from tests.test_report_store import AGGREGATES, PER_RUN, current_lines, table  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # port 0: the server binds a free port itself and names it in its log (no port picked here that an outgoing
    # connection of the suites running beside this module could take while the JVM starts). Its queries run as the
    # local session's do (TEST_EXECUTION; a report's session turns adaptive execution back on, SESSION_SQL being a
    # session's settings).
    started = connect_server.start(port=0, log_path=tmp_path_factory.mktemp("connect") / "server.log",
                                   conf=TEST_EXECUTION)
    assert started.port > 0 and started.url == f"sc://127.0.0.1:{started.port}"
    yield started
    started.stop()



def report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", *args, "--no-allure",
                           "--catalog", str(REPO / "suites" / "spec" / "catalog.yaml")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_the_report_through_spark_connect_reads_only_new_runs_and_makes_the_local_reports_tables(server, spark,
                                                                                                    tmp_path):
    """Two remote reports into one store, the second with one run more, then a local report of the same runs: the
    second read that run alone, and the remote store holds the local report's tables, table by table. (One case
    for both: each remote report is a Spark job on the server, and the two claims were 250 s as two cases.)"""
    runs = write_known_runs(tmp_path / "all")
    given = tmp_path / "results"
    given.mkdir()
    later = "run-3"
    for folder in runs.iterdir():
        if folder.name != later:
            shutil.copytree(folder, given / folder.name)
    first = report(str(given), "--out", str(tmp_path / "remote"), "--remote", server.url)
    assert first.returncode == 0, first.stderr[-2000:]
    assert f"Spark Connect server {server.url}" in first.stdout
    shutil.copytree(runs / later, given / later)
    second = report(str(given), "--out", str(tmp_path / "remote"), "--remote", server.url)
    assert second.returncode == 0, second.stderr[-2000:]
    total = len(list(given.iterdir()))
    assert (f"{total} run(s) among the inputs: 1 new, 0 changed since the last report, {total - 1} unchanged"
            in second.stdout), second.stdout
    assert "1 run(s) read this time" in second.stdout
    assert (tmp_path / "remote" / "index.html").is_file()
    # the server's log after two reports: its ready line and warnings, not Spark's line per task (LOG_CONFIG)
    logged = server.log_path.read_text().splitlines()
    assert sum(line.startswith(connect_server.READY_LINE.decode()) for line in logged) == 1, logged[:5]
    info = [line for line in logged if " INFO " in line]
    assert not info, info[:5]

    from reports.cli import load_catalog

    local = tmp_path / "local"
    run_job(spark, [str(given)], str(local), load_catalog(None)[0])
    for name in AGGREGATES + PER_RUN:
        if name == "lines":
            assert current_lines(tmp_path / "remote") == current_lines(local), name
        else:
            assert table(tmp_path / "remote", name) == table(local, name), name


def test_no_server_there_is_a_one_line_error_and_exit_2(tmp_path):
    write_known_runs(tmp_path / "runs")
    port = free_port()
    done = report(str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--remote", f"sc://127.0.0.1:{port}")
    assert done.returncode == 2
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("interop report:")]
    assert f"--remote sc://127.0.0.1:{port}: cannot reach a Spark Connect server there" in line
    assert "Traceback" not in done.stderr


def test_the_servers_sessions_share_compiled_query_code(server):
    """Each report is a Connect session of its own. Spark keys the code it compiles for a query by class loader, so
    the server's sessions must run on the application's (no per-session artifact isolation) and its cache must hold
    a whole report's classes (job.CODEGEN_CACHE_ENTRIES): otherwise every report compiles all of its code again
    (reports/connect_server.py, serve). Read from a session of the server, as a report's would see them."""
    from reports.job import CODEGEN_CACHE_ENTRIES

    keys = ("spark.sql.artifact.isolation.enabled", "spark.sql.artifact.isolation.alwaysApplyClassloader",
            "spark.sql.codegen.cache.maxEntries")
    code = ("import sys\nfrom pyspark.sql import SparkSession\n"
            "session = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
            "print(' '.join(session.conf.get(key) for key in sys.argv[2:]))\nsession.stop()\n")
    done = subprocess.run([sys.executable, "-c", code, server.url, *keys], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["false", "false", str(CODEGEN_CACHE_ENTRIES)], done.stdout


def test_a_server_that_cannot_bind_its_port_says_so_in_one_line():
    """The server process itself (what connect_server.start runs) finding its port taken after start()'s check (a
    program that took it meanwhile): its last line says what Spark failed on, exit 1, no Python traceback."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "reports.connect_server", "--serve", "--port", str(port)],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("connect_server: Spark did not start: java.net.BindException"), last
    assert f":{port}" in last
    assert "Traceback" not in done.stderr
