"""The `interop` command: catalog coverage and a real suite run end to end (as a subprocess, the way users
and CI call it), plus user mistakes and the run's exit-code logic in-process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from harness import cli
from harness.catalog import load_catalog
from harness.results import RUN_ID_ENV, make_record, read_results
from harness.wait import wait_for

ROOT = Path(__file__).resolve().parent.parent
INTEROP = Path(sys.executable).with_name("interop")
COMMAND = [str(INTEROP)] if INTEROP.exists() else [sys.executable, "-m", "harness.cli"]
RUN_TIMEOUT = 180  # a subprocess running pytest; the fast case itself takes well under a second

FAST_CASE = "test_anonymous_sender_gets_credit_and_unroutable_messages_come_back_released"
FAST_NODEID = f"suites/routing/test_flow_control.py::{FAST_CASE}"


def interop(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # subprocess.run with a timeout is a deadline-bound wait for the process to finish, not a sleep.
    return subprocess.run([*COMMAND, *args], cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT)


# ---- interop catalog ------------------------------------------------------------------------------------------


def test_catalog_reports_coverage_of_the_real_catalog(tmp_path):
    done = interop("catalog", cwd=tmp_path)  # from another directory: the repo root is found by itself
    assert done.returncode == 0, done.stderr
    total = len(load_catalog(ROOT / "suites" / "spec" / "catalog.yaml"))
    first = done.stdout.splitlines()[0]
    assert first.startswith("spec coverage: ") and f"/{total} clauses covered by " in first, done.stdout
    assert "Traceback" not in done.stderr


def test_catalog_verbose_lists_each_clause_with_its_cases(tmp_path):
    done = interop("catalog", "-v", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    flow1 = next(i for i, line in enumerate(lines) if line.startswith("ROUTING-FLOW-1 "))
    cases = []
    for line in lines[flow1 + 1:]:
        if not line.startswith(" "):
            break
        cases.append(line.strip())
    assert FAST_NODEID in cases


def test_catalog_strict_fails_on_gaps_and_names_them(tmp_path):
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "clauses:\n"
        "  - id: ROUTING-FLOW-1\n"
        "    source: \"003_9cdc7c48796dae4f.txt §12.1.1.1\"\n"
        "    text: A producer with no consumer gets no credit.\n"
        "    area: routing\n"
        "  - id: TEST-NOBODY-1\n"
        "    source: \"AMQP 1.0 §2.6.7\"\n"
        "    text: A clause no case cites.\n"
        "    area: test\n"
    )
    lenient = interop("catalog", "--catalog", str(catalog), cwd=tmp_path)
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stdout.startswith("spec coverage: 1/2 clauses covered by ")
    assert "clauses with no case (1): TEST-NOBODY-1" in lenient.stdout
    # The real suites cite clauses this small catalog lacks.
    assert "cases citing clauses not in the catalog" in lenient.stdout

    strict = interop("catalog", "--catalog", str(catalog), "--strict", cwd=tmp_path)
    assert strict.returncode == 1
    assert strict.stdout == lenient.stdout


def test_catalog_with_a_missing_file_is_one_line(tmp_path, capsys):
    assert cli.main(["catalog", "--catalog", str(tmp_path / "nope.yaml")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "nope.yaml: cannot read" in err


def test_catalog_with_a_broken_entry_is_one_line(tmp_path, capsys):
    catalog = tmp_path / "bad.yaml"
    catalog.write_text("clauses:\n  - id: lower-case\n    source: x\n    text: y\n    area: z\n")
    assert cli.main(["catalog", "--catalog", str(catalog)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "clauses[0]" in err and "'id'" in err


# ---- interop run, end to end ------------------------------------------------------------------------------------


def test_run_one_fast_case_end_to_end(tmp_path):
    results = tmp_path / "res"
    done = interop("run", "--suite", "routing", "-k", FAST_CASE, "--results", str(results), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    out = done.stdout

    # One run folder, holding run.json and one record for the one case.
    folders = [p for p in results.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    folder = folders[0]
    assert (folder / "run.json").is_file()
    records, bad = read_results(folder / "results.jsonl")
    assert bad == []
    assert len(records) == 1
    record = records[0]
    assert record["case"] == FAST_NODEID
    assert record["suite"] == "routing"
    assert record["outcome"] == "passed"
    assert record["run_id"] == folder.name
    assert {"ROUTING-FLOW-1", "ROUTING-ADDR-3"} <= set(record["spec"])
    assert record["peers"]["router"]["vendor"] == "reference"
    meta = json.loads((folder / "run.json").read_text())
    assert meta["run_id"] == folder.name and meta["ended_at"]

    # The summary, read back from that file, comes last.
    summary = out[out.index("== interop run "):]
    assert f"== interop run {folder.name} ==" in summary
    assert "peers: router=reference" in summary
    assert "cases: 1 (1 passed, 0 failed, 0 error, 0 xfail, 0 not-applicable, 0 skipped)" in summary
    assert "by suite:\n  routing  1 (1 passed, 0 failed" in summary
    assert "failed cases" not in summary
    assert summary.rstrip().endswith(f"results: {folder / 'results.jsonl'}")
    assert "Traceback" not in done.stderr


def test_run_against_an_unavailable_peer_skips_and_exits_0(tmp_path):
    # No qdrouterd binary and no container engine here: the case is skipped (not failed), and skips are fine.
    results = tmp_path / "res"
    done = interop("run", "--peer", "router=qdrouterd", "--suite", "routing", "-k", FAST_CASE,
                   "--results", str(results), "-q", cwd=tmp_path)
    records, _ = read_results(next(results.iterdir()))
    if records[0]["outcome"] != "skipped":
        pytest.skip(f"a qdrouterd is available on this machine (outcome {records[0]['outcome']})")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert records[0]["peers"]["router"]["vendor"] == "qdrouterd"
    assert "peers: router=qdrouterd" in done.stdout
    assert "cases: 1 (0 passed, 0 failed, 0 error, 0 xfail, 0 not-applicable, 1 skipped)" in done.stdout


def test_run_with_a_k_expression_matching_nothing_is_a_user_mistake(tmp_path):
    done = interop("run", "--suite", "routing", "-k", "no_case_is_called_this", "--results",
                   str(tmp_path / "res"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "interop: -k no_case_is_called_this: matched no case in suite(s) routing")


# ---- user mistakes (in-process: they are refused before any pytest starts) ---------------------------------------


@pytest.mark.parametrize("argv, expected", [
    (["run", "--peer", "router=nosuch"], "--peer router=nosuch: unknown vendor (expected one of: "),
    (["run", "--peer", "router"], "--peer router: expected ROLE=VENDOR"),
    (["run", "--peer", "broker=qdrouterd"], "--peer broker=qdrouterd: qdrouterd plays the router role, not broker"),
    (["run", "--suite", "nosuch"], "--suite nosuch: unknown suite (expected one of: "),
    (["run", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "-k"], "argument -k: expected one argument"),
    (["run", "--peer-probe-timeout", "0"], "argument --peer-probe-timeout: expected seconds > 0, got '0'"),
    (["nosuch"], "invalid choice: 'nosuch'"),
    ([], "the following arguments are required: COMMAND"),
    (["router"], "the following arguments are required: -c/--config"),
    (["broker"], "the following arguments are required: -c/--config"),
    (["broker", "-c", "broker.xml", "--management-port", "x"],
     "argument --management-port: expected a port number from 0 to 65535, got 'x'"),
    (["proxy", "--port", "notanumber"], "argument --port: expected a port number from 0 to 65535, got 'notanumber'"),
    (["proxy", "--port", "65536"], "argument --port: expected a port number from 0 to 65535, got '65536'"),
    (["proxy", "--log-level", "loud"], "argument --log-level: invalid choice: 'loud'"),
])
def test_user_mistakes_are_one_line_and_exit_2(argv, expected, capsys, monkeypatch):
    monkeypatch.setattr(cli.pytest, "main", _must_not_run)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("interop") and expected in err, err


def test_results_path_that_is_a_file_is_a_user_mistake(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli.pytest, "main", _must_not_run)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli.main(["run", "--results", str(blocker)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_help_exits_0(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(command in out for command in ("router", "broker", "proxy")), out
    assert cli.main(["run", "--help"]) == 0
    assert "--peer ROLE=VENDOR" in capsys.readouterr().out


def test_router_command_delegates_to_the_reference_router(tmp_path, capsys):
    assert cli.main(["router", "-c", str(tmp_path / "missing.conf")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'missing.conf'}:0: cannot read" in err


# ---- interop broker / interop proxy: the servers as real processes, through the `interop` command --------------

START_TIMEOUT = 30.0  # interpreter, pytest and proton imports on a loaded CI machine
STOP_TIMEOUT = 10.0  # the servers' own grace periods are a few seconds
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"

BROKER_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>B-cli</name>
    <persistence-enabled>false</persistence-enabled>
    <security-enabled>false</security-enabled>
    <acceptors>
      <acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP</acceptor>
    </acceptors>
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""


class Server:
    """`interop <command> ...` as a subprocess; stdout and stderr go to files the test reads while it runs."""

    def __init__(self, cwd: Path, *args: str):
        self.args = args
        self.stdout_path, self.stderr_path = cwd / f"{args[0]}.stdout", cwd / f"{args[0]}.stderr"
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([*COMMAND, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_for_line(self, pattern: str) -> re.Match:
        def seen():
            match = re.search(pattern, self.stderr(), re.MULTILINE)
            if match is None and self.proc.poll() is not None:
                raise AssertionError(f"interop {self.args[0]} exited {self.proc.returncode} before logging "
                                     f"{pattern!r}: {self.stderr()}")
            return match
        return wait_for(seen, START_TIMEOUT, f"interop {self.args[0]} to log {pattern!r}", describe=self.stderr)

    def wait_exit(self, timeout: float = START_TIMEOUT) -> int:
        wait_for(lambda: self.proc.poll() is not None, timeout, f"interop {self.args[0]} to exit",
                 describe=lambda: f"still running; stderr: {self.stderr()[-400:]}")
        return self.proc.returncode

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.wait_exit(STOP_TIMEOUT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)


@pytest.fixture
def start_server(tmp_path):
    started: list[Server] = []

    def start(*args: str) -> Server:
        started.append(Server(tmp_path, *args))
        return started[-1]

    yield start
    for server in started:
        server.kill()


def test_broker_command_serves_amqp_and_exits_0_on_sigterm(tmp_path, start_server):
    (tmp_path / "broker.xml").write_text(BROKER_XML)
    broker = start_server("broker", "-c", "broker.xml", "--management-port", "0")
    broker.wait_for_line(r"Broker B-cli started; ready$")
    port = int(broker.wait_for_line(r"Listening on 127\.0\.0\.1:(\d+) \(acceptor 'clients'").group(1))
    management = int(broker.wait_for_line(r"Management on 127\.0\.0\.1:(\d+)").group(1))

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(AMQP_HEADER)
        reply = b""
        while len(reply) < len(AMQP_HEADER):
            chunk = sock.recv(len(AMQP_HEADER) - len(reply))
            assert chunk, f"the broker closed the connection after {reply!r}"
            reply += chunk
    assert reply == AMQP_HEADER
    with urllib.request.urlopen(f"http://127.0.0.1:{management}/queues/orders", timeout=10) as answer:
        assert json.load(answer)["name"] == "orders"  # --management-port reached the broker

    assert broker.stop(signal.SIGTERM) == 0, broker.stderr()
    assert "Traceback" not in broker.stderr()
    assert broker.stdout_path.read_text() == "", "servers log to stderr only"


def test_broker_command_with_a_bad_config_is_one_line_and_non_zero(tmp_path, start_server):
    (tmp_path / "bad.xml").write_text(BROKER_XML.replace("<name>B-cli</name>", "<name>B-cli</nam>"))
    broker = start_server("broker", "-c", "bad.xml")
    assert broker.wait_exit() == 1
    lines = broker.stderr().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("bad.xml:4: not well-formed XML: mismatched tag"), lines


def test_broker_command_with_a_missing_config_is_one_line(tmp_path, capsys):
    assert cli.main(["broker", "-c", str(tmp_path / "missing.xml")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'missing.xml'}:0: cannot read" in err, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_proxy_command_answers_version_and_exits_0_on_a_signal(tmp_path, start_server, sig):
    proxy = start_server("proxy", "--port", "0")
    port = int(proxy.wait_for_line(r"API listening on http://127\.0\.0\.1:(\d+); ready$").group(1))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=10) as answer:
        assert answer.status == 200
        assert "version" in json.load(answer)
    assert proxy.stop(sig) == 0, proxy.stderr()
    assert "Traceback" not in proxy.stderr()
    assert proxy.stdout_path.read_text() == "", "servers log to stderr only"


def test_proxy_command_with_a_bad_config_is_one_line_and_non_zero(tmp_path, start_server):
    # A real process: in-process, the proxy's main() would install its log handler on this pytest process.
    (tmp_path / "proxies.json").write_text("{")
    proxy = start_server("proxy", "--port", "0", "--config", "proxies.json")
    assert proxy.wait_exit() == 1
    lines = proxy.stderr().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interop proxy: proxies.json: not valid JSON"), lines


def _must_not_run(args, plugins=None):
    raise AssertionError(f"pytest.main must not be called for a user mistake: {args}")


# ---- interop run: what it makes of pytest's results (pytest.main replaced by a fake) -----------------------------


class FakePytest:
    """Stands in for pytest.main: writes the given records into the run folder the plugin would use."""

    def __init__(self, records: list[dict], exit_code: int = 0, use_env_run_id: bool = True):
        self.records, self.exit_code, self.use_env_run_id = records, exit_code, use_env_run_id
        self.args: list[str] = []
        self.run_id: str | None = None

    def __call__(self, args, plugins=None):
        self.args = list(args)
        results = Path(args[args.index("--results") + 1])
        self.run_id = os.environ[RUN_ID_ENV] if self.use_env_run_id else "2026-01-01T00-00-00Z-fake"
        if self.records:
            folder = results / self.run_id
            folder.mkdir(parents=True, exist_ok=True)  # the cell file is written there first
            lines = [json.dumps(make_record(run_id=self.run_id, **r)) for r in self.records]
            (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        return self.exit_code


def _case(name: str, outcome: str, suite: str = "routing", message: str | None = None) -> dict:
    return {"case": f"suites/{suite}/test_x.py::{name}", "suite": suite, "outcome": outcome,
            "duration_s": 0.1, "message": message}


def test_run_passes_the_options_on_to_pytest(tmp_path, monkeypatch, capsys):
    fake = FakePytest([_case("test_a", "passed")])
    monkeypatch.setattr(cli.pytest, "main", fake)
    monkeypatch.delenv(RUN_ID_ENV, raising=False)
    results = tmp_path / "res"
    assert cli.main(["run", "--suite", "routing", "-k", "test_a", "-x", "-q", "--results", str(results),
                     "--peer", "router=reference", "--peer-probe-timeout", "2.5"]) == 0
    args = fake.args
    assert args[args.index("--peer-probe-timeout") + 1] == "2.5"
    assert args[0] == str(ROOT / "suites" / "routing")
    assert args[args.index("--rootdir") + 1] == str(ROOT)
    assert args[args.index("-k") + 1] == "test_a"
    cell = json.loads(Path(args[args.index("--interop-cell") + 1]).read_text())  # the cell travels as one file
    assert cell["peers"] == {"router": "reference", "broker": "reference"} and cell["breaks"] == []
    assert "--peer" not in args and "--client" not in args
    assert args[args.index("--results") + 1] == str(results.resolve())
    assert "-x" in args and "-qq" in args
    assert args[args.index("-p") + 1] == "no:cacheprovider"
    assert RUN_ID_ENV not in os.environ, "the run id must not leak out of the call"
    assert f"results: {results.resolve() / fake.run_id / 'results.jsonl'}" in capsys.readouterr().out


def test_run_default_is_every_suite_folder_with_tests(tmp_path, monkeypatch):
    suites = cli.available_suites()
    assert "routing" in suites
    assert not {"spec", "expected", "__pycache__"} & set(suites), "folders without test files are not suites"
    fake = FakePytest([_case("test_a", "passed")])
    monkeypatch.setattr(cli.pytest, "main", fake)
    assert cli.main(["run", "--results", str(tmp_path)]) == 0
    assert fake.args[:len(suites)] == [str(path) for path in suites.values()]
    assert fake.args[len(suites)] == "--rootdir"


def test_run_summary_counts_and_failures_exit_1(tmp_path, monkeypatch, capsys):
    records = [
        _case("test_ok", "passed"),
        _case("test_ok2", "passed"),
        _case("test_broken", "failed", message="AssertionError: expected\n  rejected, got accepted"),
        _case("test_setup", "error", suite="other", message="ConnectionError: refused"),
        _case("test_na", "not-applicable", message="missing capability link-route"),
        _case("test_known", "xfail", suite="other"),
        _case("test_away", "skipped", suite="other"),
    ]
    monkeypatch.setattr(cli.pytest, "main", FakePytest(records, exit_code=1))
    assert cli.main(["run", "--results", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "cases: 7 (2 passed, 1 failed, 1 error, 1 xfail, 1 not-applicable, 1 skipped)" in out
    assert "  other    3 (0 passed, 0 failed, 1 error, 1 xfail, 0 not-applicable, 1 skipped)" in out
    assert "  routing  4 (2 passed, 1 failed, 0 error, 0 xfail, 1 not-applicable, 0 skipped)" in out
    assert "failed cases (2):" in out
    assert "  FAILED suites/routing/test_x.py::test_broken: AssertionError: expected rejected, got accepted" in out
    assert "  ERROR suites/other/test_x.py::test_setup: ConnectionError: refused" in out
    assert "test_na" not in out.split("failed cases")[1]


def test_a_failed_case_of_a_matrix_cell_names_its_cell(tmp_path, monkeypatch, capsys):
    records = [{**_case("test_broken", "failed", message="boom"), "cell": "qdrouterd-artemis"}]
    monkeypatch.setattr(cli.pytest, "main", FakePytest(records, exit_code=1))
    assert cli.main(["run", "--results", str(tmp_path)]) == 1
    assert "  FAILED [qdrouterd-artemis] suites/routing/test_x.py::test_broken: boom" in capsys.readouterr().out


@pytest.mark.parametrize("outcome", ["passed", "skipped", "not-applicable", "xfail"])
def test_run_outcomes_that_are_fine_exit_0(tmp_path, monkeypatch, outcome):
    monkeypatch.setattr(cli.pytest, "main", FakePytest([_case("test_a", outcome)]))
    assert cli.main(["run", "--results", str(tmp_path)]) == 0


def test_run_finds_the_run_folder_even_when_the_plugin_picks_its_own_id(tmp_path, monkeypatch, capsys):
    (tmp_path / "older-run").mkdir()
    fake = FakePytest([_case("test_a", "passed")], use_env_run_id=False)
    monkeypatch.setattr(cli.pytest, "main", fake)
    assert cli.main(["run", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"results: {tmp_path.resolve() / '2026-01-01T00-00-00Z-fake' / 'results.jsonl'}" in out


def test_run_with_a_clean_record_file_but_a_pytest_error_exits_1(tmp_path, monkeypatch, capsys):
    # e.g. a collection error in another suite file: the cases that ran passed, the run did not.
    monkeypatch.setattr(cli.pytest, "main", FakePytest([_case("test_a", "passed")], exit_code=2))
    assert cli.main(["run", "--results", str(tmp_path)]) == 1
    assert "pytest exit code 2 (interrupted)" in capsys.readouterr().err


def test_run_with_no_results_at_all_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli.pytest, "main", FakePytest([], exit_code=3))
    assert cli.main(["run", "--results", str(tmp_path)]) == 1
    assert "no results were written" in capsys.readouterr().err


def test_run_reports_damaged_result_lines_and_exits_1(tmp_path, monkeypatch, capsys):
    fake = FakePytest([_case("test_a", "passed")])

    def damaged(args, plugins=None):
        code = fake(args, plugins)
        with open(Path(args[args.index("--results") + 1]) / fake.run_id / "results.jsonl", "a") as f:
            f.write('{"schema": 1, "torn')
        return code

    monkeypatch.setattr(cli.pytest, "main", damaged)
    assert cli.main(["run", "--results", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "unreadable result lines (1):" in out and "line 2: not JSON" in out


def test_run_with_a_pytest_usage_error_exits_2(tmp_path, monkeypatch):
    monkeypatch.setattr(cli.pytest, "main", FakePytest([], exit_code=4))
    assert cli.main(["run", "-k", "and and", "--results", str(tmp_path)]) == 2


def test_catalog_reports_a_suite_that_cannot_be_collected(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "suites" / "broken"
    broken.mkdir(parents=True)
    (broken / "test_broken.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.setattr(cli, "SUITES", tmp_path / "suites")
    assert cli.main(["catalog"]) == 1
    err = capsys.readouterr().err
    assert "no_such_module_anywhere" in err
    assert err.rstrip().splitlines()[-1].startswith("interop catalog: collecting the suite cases failed")


def test_interop_run_takes_the_readme_external_example(capsys):
    """The README's external example is one --peer choice for `interop run` as for pytest (one parser)."""
    code = cli.main(["run", "--list", "--peer",
                     "broker=external:amqp://127.0.0.1:5999?caps=store-and-forward,drain&vendor=artemis"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "broker=external:amqp://127.0.0.1:5999?caps=store-and-forward,drain&vendor=artemis" in out
