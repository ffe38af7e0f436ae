"""`interop nightly` (harness/nightly.py): its plan per product present, budgets and restrictions, and a run whose
steps are small real processes (one fails, one finds something, one is skipped): every step runs, its output is
kept, and the exit status says so at the end. Also `interop report --serve`, with a real HTTP GET."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from argparse import Namespace
from pathlib import Path

import pytest

from harness import nightly
from harness.cli import main as interop

ALL = [p.name for p in nightly.PRODUCTS]


def every_present(vendor: str) -> None:
    return None


def test_products_and_groups_are_parsed_with_aliases_and_refused_when_unknown():
    assert nightly.parse_products(None) == ALL
    assert nightly.parse_products("artemis,reference") == ["reference-router", "reference-broker", "artemis"]
    assert nightly.parse_products("classic") == ["activemq-classic"]
    with pytest.raises(nightly.NightlyUsageError, match="unknown product 'hornetq'"):
        nightly.parse_products("hornetq")
    assert nightly.parse_only("fuzz, bench") == ["fuzz", "bench"]
    with pytest.raises(nightly.NightlyUsageError, match="unknown step group 'mutation'"):
        nightly.parse_only("fuzz,mutation")


def test_the_plan_fuzzes_every_product_in_its_role_and_benchmarks_the_brokers_present(tmp_path):
    present = {name: None for name in ALL}
    present["rabbitmq"] = "rabbitmq-server is not installed"
    steps = nightly.plan(nightly.BUDGETS["quick"], list(nightly.GROUPS), ALL, present, tmp_path, "matrix.yaml")
    names = [s.name for s in steps]
    # configs (2), a frames and a stateful session per product of the registry, three benchmarks, matrix, report
    assert len(steps) == 2 + 2 * len(ALL) + 3 + 1 + 1
    assert names[-2:] == ["matrix: matrix.yaml, 2 cells at once", "report"]
    frames = {s.name: s for s in steps if s.name.startswith("fuzz frames")}
    artemis = frames["fuzz frames: ActiveMQ Artemis"].argv
    assert artemis[1:] == ["fuzz", "--frames", "--peer", "broker=artemis", "--role", "broker", "--budget", "20s",
                           "--seed", str(nightly.FRAMES_SEED), "--results", str(tmp_path)]
    qdr = next(s for s in steps if s.name == "fuzz stateful: Qpid Dispatch Router (qdrouterd)").argv
    assert "--frames" not in qdr and qdr[qdr.index("--role") + 1] == "router" and "router=qdrouterd" in qdr
    # an absent product: its steps are kept, skipped with the probe's reason
    rabbit = [s for s in steps if "RabbitMQ" in s.name]
    assert [s.status for s in rabbit] == ["skipped", "skipped"]
    assert rabbit[0].reason == "rabbitmq: rabbitmq-server is not installed"
    broker = next(s for s in steps if s.name.startswith("bench broker"))
    brokers = [p.vendor for p in nightly.PRODUCTS if p.role == "broker" and p.name != "rabbitmq"]  # the ones present
    assert broker.argv[broker.argv.index("--vendors") + 1] == ",".join(brokers)
    assert brokers[:3] == ["reference", "artemis", "activemq-classic"]
    assert "--results" in broker.argv and all(s.status == "pending" for s in steps if s.group == "bench")
    # the nightly budget runs longer sessions
    long = nightly.plan(nightly.BUDGETS["nightly"], ["fuzz"], ALL, present, tmp_path, "matrix.yaml")
    assert all(s.argv[s.argv.index("--budget") + 1] == "5m" for s in long)


def test_restricted_products_and_groups(tmp_path):
    chosen = nightly.parse_products("reference,artemis")
    present = nightly.probe_products(chosen, probe=every_present)
    assert present == {"reference-router": None, "reference-broker": None, "artemis": None}
    steps = nightly.plan(nightly.BUDGETS["quick"], ["configs", "fuzz"], chosen, present, tmp_path, "m.yaml")
    run = [s.name for s in steps if s.status != "skipped"]
    assert run == ["configs: broker.xml, reference broker vs Artemis",
                   "fuzz frames: reference router", "fuzz stateful: reference router",
                   "fuzz frames: reference broker", "fuzz stateful: reference broker",
                   "fuzz frames: ActiveMQ Artemis", "fuzz stateful: ActiveMQ Artemis"]
    qdr = next(s for s in steps if s.name.startswith("configs: qdrouterd"))
    assert (qdr.status, qdr.reason) == ("skipped", "qdrouterd not among --products")


def fake_plan(budget, groups, products, present, results, matrix, jobs=2):
    """Small real processes in place of the nightly's steps."""
    py = [sys.executable, "-c"]
    return [
        nightly.Step("fuzz", "fails", [*py, "import sys; print('broken step'); sys.exit(3)"]),
        nightly.Step("fuzz", "finds", [*py, "import sys; print('found a hang'); sys.exit(1)"], finding_exit=True),
        nightly.Step("bench", "absent", [*py, "raise SystemExit(9)"], status="skipped", reason="artemis: not here"),
        nightly.Step("bench", "slow", [*py, "import time; time.sleep(60)"], deadline_s=1.0),
        nightly.Step("report", "report", [*py, "import os; print('report over', os.environ['INTEROP_RESULTS'])"]),
    ]


def test_every_step_runs_its_output_is_kept_and_the_exit_says_so_at_the_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(nightly, "plan", fake_plan)
    monkeypatch.setattr(nightly, "probe_products", lambda names: {n: None for n in names})
    monkeypatch.setenv("INTEROP_RUN_ID", "inherited-run")
    args = Namespace(budget="quick", only=None, products=None, matrix="matrix.yaml", jobs=2, results=str(tmp_path),
                     list=False)
    assert nightly.run(args) == 1
    out = capsys.readouterr()
    assert "[1/5] fails: failed" in out.out and "[2/5] finds: found" in out.out
    assert "[3/5] absent: skipped (artemis: not here)" in out.out
    assert "[4/5] slow: timeout" in out.out and "[5/5] report: passed" in out.out
    assert "fails (failed); finds (found); slow (timeout)" in out.err
    folder = next((tmp_path / "nightly").iterdir())
    summary = json.loads((folder / "steps.json").read_text())
    assert [(s["name"], s["status"], s["exit_code"]) for s in summary["steps"]] == [
        ("fails", "failed", 3), ("finds", "found", 1), ("absent", "skipped", None), ("slow", "timeout", -15),
        ("report", "passed", 0)]
    assert "broken step" in (folder / "01-fails.log").read_text()
    assert f"report over {tmp_path}" in (folder / "05-report.log").read_text()
    assert summary["steps"][3]["wall_s"] < 30


def test_list_prints_the_steps_and_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(nightly, "probe_products", lambda names: {n: (None if n != "rabbitmq" else "not installed")
                                                                   for n in names})
    assert interop(["nightly", "--list", "--results", str(tmp_path), "--only", "fuzz,bench"]) == 0
    out = capsys.readouterr().out
    assert "RabbitMQ                            skipped: not installed" in out
    steps = 2 * len(ALL) + 3  # a frames and a stateful session per product, three benchmarks
    assert f"[1/{steps}] fuzz frames: reference router  $ fuzz --frames --peer router=reference --role router" in out
    assert "fuzz frames: RabbitMQ  (skipped: rabbitmq: not installed)" in out
    assert not (tmp_path / "nightly").exists()
    assert interop(["nightly", "--products", "nope", "--results", str(tmp_path)]) == 2


def test_report_serve_answers_a_real_http_get_on_the_loopback_only(tmp_path):
    from reports import cli as report_cli

    (tmp_path / "index.html").write_text("<html><body>the report</body></html>")
    server, url = report_cli.serve_folder(tmp_path, 0)
    try:
        assert url.startswith("http://127.0.0.1:") and server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200 and b"the report" in answer.read()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + "nothing.html", timeout=10)
        assert missing.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_report_serve_without_a_report_is_one_line(tmp_path, capsys):
    assert interop(["report", str(tmp_path), "--serve", "--port", "0"]) == 2
    assert f"{tmp_path}/report/index.html: no report there" in capsys.readouterr().err


def test_report_serve_command_prints_its_url_and_serves_until_stopped(tmp_path):
    """The command itself, in a process of its own: the URL it prints answers, SIGTERM ends it with 0."""
    import signal
    import subprocess

    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "index.html").write_text("served")
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "report", str(tmp_path), "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    try:
        line = proc.stdout.readline()
        assert "127.0.0.1 only" in line, line
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "index.html", timeout=10) as answer:
            assert answer.read() == b"served"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_bench_records_carry_the_case_figures_and_the_products_version(tmp_path, monkeypatch):
    """bench/broker.py and bench/network.py write through bench/figures.write_bench_records: records the report's
    benchmarks table reads (suite bench, BENCH-<bench>/<scenario>/<vendor>/<clients>, the version in peers)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.figures import write_bench_records

    monkeypatch.setenv("INTEROP_RUN_ID", "bench-run")
    peer = {"role": "broker", "vendor": "artemis", "version": "2.40.0", "provider": "native"}
    write_bench_records(str(tmp_path), "broker", [
        {"scenario": "1kb", "vendor": "artemis", "clients": "python", "peer": peer, "msgs_per_s": 1735.0,
         "p50_ms": 2.0, "p99_ms": 9.0, "cpu_s_per_1000": 0.15, "repeats": 1},
        {"scenario": "1kb", "vendor": "rabbitmq", "peer": None, "error": "did not start"}],
        {"messages": 1000}, "2026-12-07T05:00:00Z")
    lines = [json.loads(line) for line in (tmp_path / "bench-run" / "results.jsonl").read_text().splitlines()]
    assert [(r["case"], r["suite"], r["outcome"]) for r in lines] == [
        ("BENCH-broker/1kb/artemis/python", "bench", "passed"), ("BENCH-broker/1kb/rabbitmq/python", "bench", "error")]
    assert lines[0]["peers"] == {"broker": {"vendor": "artemis", "version": "2.40.0", "provider": "native"}}
    assert lines[0]["details"]["msgs_per_s"] == 1735.0 and lines[0]["details"]["bench"] == "broker"
    assert lines[1]["message"] == "did not start"
    assert json.loads((tmp_path / "bench-run" / "run.json").read_text())["bench"]["name"] == "broker"


def test_deploy_units_run_make_run_nightly_and_systemd_accepts_them(tmp_path):
    """deploy/: the service runs `make run` with the nightly budget in the checkout (its results/ kept), the timer
    starts it every night; `systemd-analyze verify` accepts every unit where it is installed."""
    import configparser
    import shutil
    import subprocess

    deploy = Path(__file__).resolve().parent.parent / "deploy"

    def unit(name: str) -> configparser.ConfigParser:
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.optionxform = str
        parser.read_string((deploy / name).read_text())
        return parser

    service, timer = unit("interop-nightly.service"), unit("interop-nightly.timer")
    assert service["Service"]["ExecStart"] == "/usr/bin/make run BUDGET=${BUDGET}"
    assert service["Service"]["Environment"] == "BUDGET=nightly" and service["Service"]["Type"] == "oneshot"
    assert timer["Timer"]["Unit"] == "interop-nightly.service" and timer["Timer"]["Persistent"] == "true"
    assert "--serve" in unit("interop-report.service")["Service"]["ExecStart"]
    if shutil.which("systemd-analyze") is None:
        return
    for path in deploy.iterdir():  # with the checkout's own folder, which exists here, as the working directory
        (tmp_path / path.name).write_text(path.read_text().replace("%h/amqp-interop", str(deploy.parent)))
    done = subprocess.run(["systemd-analyze", "verify", *sorted(str(p) for p in tmp_path.iterdir())],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
