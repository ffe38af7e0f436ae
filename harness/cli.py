"""`interop`: the project's command line.

  interop router -c FILE [--id ID]     run the reference router in the foreground (like qdrouterd)
  interop broker -c FILE [--management-port PORT]
                                       run the reference broker in the foreground (Artemis broker.xml);
                                       the same as `python -m reference.broker`
  interop proxy [--host H] [--port P] [--config FILE] [--log-level LEVEL]
                                       run the fault proxy in the foreground (Toxiproxy's API, default
                                       127.0.0.1:8474); the same as `python -m harness.faults`
  interop run [--matrix [FILE] | --peer ROLE=VENDOR ...] [--break [ROLE[=VENDOR]:]FAULT ...] [--results DIR]
              [--suite NAME ...] [-k EXPR] [-x] [-q] [--timeout S] [--peer-probe-timeout S] [-j N]
              [--list] [--report]
                                       run the matrix (suites x peers) under one run id, then print a summary
                                       read back from the run's results.jsonl (and build the report)
  interop report [INPUTS ...] [--out DIR] [--master URL | --remote sc://HOST:PORT] [--rebuild] [--no-allure]
                                       Spark aggregation of any number of runs into an incremental store (only
                                       new and changed runs are read), HTML vendor comparison report
  interop catalog [--catalog PATH] [--strict] [-v]
                                       spec catalog coverage by the suite cases (collected, not run)
  interop fuzz [--frames | --configs] [--peer ROLE=VENDOR ...] [--role ROLE] [--budget 5m] [--seed N]
               [--cases N] [--family NAME ...] [--no-differential] [--break FAULT ...] [--results DIR]
                                       a seeded, time-boxed fuzzing session against one peer: stateful
                                       client programs (Hypothesis, differential against the reference),
                                       hostile frames on raw TCP, or generated config files read by the
                                       reference and by qdrouterd / Artemis (--configs); results like a run's

Exit codes: 0 all good (a server stopped by SIGTERM/SIGINT too); 1 a case failed or errored (run), a fuzzing
session found something (fuzz), the catalog has gaps (catalog --strict), or a server could not start or
stopped on an error (router, broker, proxy: a bad or missing config file, a port in use; one line on stderr
naming the file and line, before anything listens);
2 a user mistake (unknown vendor or suite, missing file, bad option), reported as one line on stderr without a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import matrix as matrix_plugin
from .catalog import CatalogError, coverage, format_coverage, load_catalog
from .drivers import STACKS
from .faults.server import DEFAULT_HOST as PROXY_HOST
from .fuzz import command as fuzz_command
from .faults.server import DEFAULT_PORT as PROXY_PORT
from .breaks import CONFIG_FAULTS, BreakError, parse_break
from .cell import CELLS_DIR, Cell, cell_name
from .matrix import ALLURE_DIR, DEFAULT_MATRIX, CellRun, Matrix, MatrixError, exit_text
from .pytest_plugin import PROBE_TIMEOUT, positive_seconds
from .results import (OUTCOMES, RESULTS_FILE, RUN_ID_ENV, RUN_META_FILE, default_results_dir, new_run_id, read_results,
                      utc_now_iso)

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "suites"
CATALOG = SUITES / "spec" / "catalog.yaml"
PYPROJECT = ROOT / "pyproject.toml"

# The order outcomes are shown in; failures matter most after passes.
SHOWN_OUTCOMES = ("passed", "failed", "error", "xfail", "not-applicable", "skipped")
BAD_OUTCOMES = ("failed", "error")
USAGE = 2


class UsageError(Exception):
    """A user mistake: main() prints it as one line on stderr and exits 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as one line (no usage block) and never calls sys.exit itself."""

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            print(message.rstrip("\n"), file=sys.stderr)
        raise _Exit(status)


class _Exit(Exception):
    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="interop", description="AMQP 1.0 router and broker conformance and interop harness.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    router = commands.add_parser("router", help="run the reference router in the foreground",
                                 description="Run the reference router in the foreground, like qdrouterd.")
    router.add_argument("-c", "--config", required=True, metavar="FILE",
                        help="qdrouterd.conf-syntax configuration file")
    router.add_argument("--id", help="override the router id from the file")
    router.set_defaults(handler=cmd_router)

    # The servers' own options, checked here so that a mistake is one line (their module forms use plain
    # argparse); the handlers hand them on to the module entry points.
    broker = commands.add_parser("broker", help="run the reference broker in the foreground",
                                 description="Run the reference broker in the foreground, like an Artemis "
                                             "broker (the same as `python -m reference.broker`).")
    broker.add_argument("-c", "--config", required=True, metavar="FILE",
                        help="Artemis broker.xml (the subset the reference broker documents)")
    broker.add_argument("--management-port", type=_port, metavar="PORT",
                        help="serve queue statistics as JSON over HTTP on 127.0.0.1:PORT (0 = a free port)")
    broker.set_defaults(handler=cmd_broker)

    proxy = commands.add_parser("proxy", help="run the fault proxy (Toxiproxy's HTTP API) in the foreground",
                                description="Run the fault proxy in the foreground, like toxiproxy-server "
                                            "(the same as `python -m harness.faults`).")
    proxy.add_argument("--host", default=PROXY_HOST, help=f"API address (default {PROXY_HOST})")
    proxy.add_argument("--port", type=_port, default=PROXY_PORT,
                       help=f"API port (default {PROXY_PORT}, Toxiproxy's; 0 = a free one, logged when ready)")
    proxy.add_argument("--config", metavar="FILE", help="JSON list of proxies to create at start (as /populate)")
    proxy.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                       help="log level (default info)")
    proxy.set_defaults(handler=cmd_proxy)

    run = commands.add_parser("run", help="run the conformance suites against the chosen peers",
                              description="Run the conformance suites against the chosen peers and summarise "
                                          "the results.")
    run.add_argument("--matrix", nargs="?", const=str(DEFAULT_MATRIX), metavar="FILE",
                     help="run the matrix (suites x peers cells, one pytest session each, all under one run id) "
                          "from FILE, or from matrix.yaml at the repository root when FILE is left out; "
                          "without --matrix (and without --peer) one cell runs: every suite, the default peers")
    run.add_argument("--peer", action="append", default=[], metavar="ROLE=VENDOR[@VERSION][@PROVIDER]",
                     help="run one cell with this vendor per role instead of the matrix (repeatable or "
                          "comma-separated), e.g. router=qdrouterd; @VERSION picks a version other than the pinned "
                          "one (broker=artemis@2.39.0, router=qdrouterd@1.18.0), fetched or built into the cache "
                          "before the cell starts; @PROVIDER one way of running it (native, container)")
    run.add_argument("--break", dest="breaks", action="append", default=[], metavar="[ROLE[=VENDOR]:]FAULT",
                     help="deliberately start matching peers with a faulty setting, to see the suites catch it "
                          f"(faults: {', '.join(CONFIG_FAULTS)}); repeatable")
    run.add_argument("--client", choices=STACKS, default=None,
                     help="client stack of the cases that run through a stack driver (harness/drivers.py), in every "
                          "cell: python (default), cpp or rhea; records of cpp and rhea cells name it "
                          "(their `target` ends in ,client=STACK)")
    run.add_argument("--results", default=default_results_dir(), metavar="DIR",
                     help="folder for run results; this run writes DIR/<run_id>/results.jsonl "
                          "(default: $INTEROP_RESULTS, else results)")
    run.add_argument("--suite", action="extend", nargs="+", default=[], metavar="NAME",
                     help="suite folder(s) under suites/ to run (default: all that contain tests)")
    run.add_argument("-k", dest="keyword", metavar="EXPR", help="only cases matching this pytest -k expression")
    run.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failed case")
    run.add_argument("-q", "--quiet", action="store_true", help="less pytest output (the summary stays)")
    run.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                     help="per-case time limit (pytest-timeout); default: the matrix file's, else 120")
    run.add_argument("--peer-probe-timeout", type=positive_seconds, metavar="SECONDS",
                     help="after a failed case, a peer that does not answer an AMQP protocol header within this "
                          f"long is taken as hung and replaced (default {PROBE_TIMEOUT:g})")
    run.add_argument("--fault-proxy", choices=["harness", "toxiproxy"], default=None,
                     help="the server behind links that go `via: proxy`, in every cell: harness (this project's) or "
                          "toxiproxy (the real toxiproxy-server, `make toxiproxy`); default: $INTEROP_FAULT_PROXY, "
                          "else harness")
    run.add_argument("-j", "--jobs", type=_positive_int, default=2, metavar="N",
                     help="cells run at once (default 2); cells using the same real product never overlap")
    run.add_argument("--list", action="store_true", help="print the cells and what was left out, then exit")
    run.add_argument("--report", action="store_true",
                     help="then build the report over every run in the results folder (DIR/report/index.html)")
    run.set_defaults(handler=cmd_run)

    report = commands.add_parser("report", help="aggregate runs with Spark into a vendor comparison report",
                                 description="Read any number of runs (run folders, results folders, globs, or "
                                             "URIs Spark reads) into Parquet tables and a static HTML report.")
    from reports import cli as report_cli  # reports never import harness; the other way round is fine

    report_cli.add_arguments(report)
    report.set_defaults(handler=cmd_report)

    catalog = commands.add_parser("catalog", help="spec catalog coverage by the suite cases",
                                  description="Collect the suite cases (without running them) and report "
                                              "which catalog clauses they cover.")
    catalog.add_argument("--catalog", default=str(CATALOG), metavar="PATH",
                         help="spec catalog YAML (default: suites/spec/catalog.yaml)")
    catalog.add_argument("--strict", action="store_true",
                         help="exit 1 when a clause has no case or a case has no (known) clause")
    catalog.add_argument("-v", "--verbose", action="store_true", help="also list every clause and its cases")
    catalog.set_defaults(handler=cmd_catalog)

    fuzz = commands.add_parser("fuzz", help="a fuzzing session: stateful client programs, hostile frames or "
                                                "config files (--configs)",
                               description="Run a seeded, time-boxed fuzzing session against the peer of one "
                                           "role and write its results like a run's.")
    fuzz_command.add_arguments(fuzz, list(CONFIG_FAULTS))
    fuzz.set_defaults(handler=cmd_fuzz)

    from . import nightly

    nightly_parser = commands.add_parser("nightly", help="the main job: every product fuzzed and benchmarked, the "
                                                         "matrix, the report (make run)",
                                         description=nightly.__doc__.splitlines()[0])
    nightly.add_arguments(nightly_parser)
    nightly_parser.set_defaults(handler=nightly.run)
    return parser


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return int(text)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.handler(args)
    except _Exit as exc:  # --help, --version
        return exc.status
    except UsageError as exc:
        print(f"interop: {exc}", file=sys.stderr)
        return USAGE


# ---- interop router -------------------------------------------------------------------------------------------


def cmd_router(args: argparse.Namespace) -> int:
    from reference.router import server  # only this command needs the reference router

    argv = ["-c", args.config] + (["--id", args.id] if args.id else [])
    return _serve(server.main, argv)


# ---- interop broker / interop proxy ---------------------------------------------------------------------------
# Like `interop router`: the module entry points do the work (`python -m reference.broker`,
# `python -m harness.faults` stay the same servers); these only hand on the options checked above.


def cmd_broker(args: argparse.Namespace) -> int:
    from reference.broker import server  # only this command needs the reference broker

    argv = ["-c", args.config]
    if args.management_port is not None:
        argv += ["--management-port", str(args.management_port)]
    return _serve(server.main, argv)


def cmd_proxy(args: argparse.Namespace) -> int:
    from .faults import server

    argv = ["--host", args.host, "--port", str(args.port)]
    if args.config is not None:
        argv += ["--config", args.config]
    if args.log_level is not None:
        argv += ["--log-level", args.log_level]
    return _serve(server.main, argv)


def _serve(server_main, argv: list[str]) -> int:
    """Run a server's module entry point `main(argv)` in this process; its exit status is ours."""
    try:
        return int(server_main(argv) or 0)
    except SystemExit as exc:  # its own argparse; cannot happen with the arguments checked above
        return exc.code if isinstance(exc.code, int) else USAGE


# ---- suites ---------------------------------------------------------------------------------------------------


def available_suites() -> dict[str, Path]:
    """Suite name -> folder, for every folder under suites/ holding at least one test file."""
    found = {}
    if SUITES.is_dir():
        for folder in sorted(SUITES.iterdir()):
            if not folder.is_dir() or folder.name.startswith(("_", ".")):
                continue
            if any(_test_files(folder)):
                found[folder.name] = folder
    return found


def _test_files(folder: Path) -> Iterator[Path]:
    for pattern in ("test_*.py", "*_test.py"):
        yield from (p for p in folder.rglob(pattern) if "__pycache__" not in p.parts)


def chosen_suites(names: list[str]) -> dict[str, Path]:
    suites = available_suites()
    if not suites:
        raise UsageError(f"no suites found: no folder under {SUITES} holds test files")
    if not names:
        return suites
    chosen = {}
    for value in names:
        for name in filter(None, (part.strip() for part in value.split(","))):
            if name not in suites:
                raise UsageError(f"--suite {name}: unknown suite (expected one of: {', '.join(suites)})")
            chosen[name] = suites[name]
    if not chosen:
        raise UsageError(f"--suite: expected a suite name (one of: {', '.join(suites)})")
    return chosen


def _pytest_base_args() -> list[str]:
    # The repo root is pytest's rootdir whatever the working directory, so case ids read
    # `suites/<suite>/<file>::<case>` and the root conftest (which loads the harness plugin) applies.
    return ["--rootdir", str(ROOT), "-c", str(PYPROJECT), "-p", "no:cacheprovider"]


# ---- interop run ----------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    suites = chosen_suites(args.suite)
    matrix = _matrix_for(args, suites)
    results_dir = _results_dir(args.results)
    timeout = args.timeout or matrix.timeout

    if args.list:
        print(format_matrix(matrix))
        return 0
    got = _get_versions(matrix, explicit=bool(args.peer))
    if not matrix.cells:
        print(format_matrix(matrix), file=sys.stderr)
        print("interop run: no cell of the matrix can run on this machine (see 'not used' above)", file=sys.stderr)
        return 1

    run_id = new_run_id()
    started_at = utc_now_iso()
    folder = results_dir / run_id
    single = len(matrix.cells) == 1
    if not single:
        print(f"== interop run {run_id}: {len(matrix.cells)} cells, {args.jobs} at a time ==")
        print(format_matrix(matrix))
    elif (matrix.not_used and args.matrix is not None) or matrix.cells[0].breaks:
        print(format_matrix(matrix))
    runs = [CellRun(cell, _cell_pytest_args(cell, suites, args, results_dir, folder, timeout, single),
                    folder / CELLS_DIR / f"{cell.name}.log") for cell in matrix.cells]

    if single:
        before = _run_folders(results_dir)
        with _env(RUN_ID_ENV, run_id):
            exit_code = int(pytest.main(runs[0].args))
        sys.stdout.flush()
        runs[0].exit_code = exit_code
        interrupted = False  # pytest reported it itself; its exit code says so below
        if exit_code == pytest.ExitCode.USAGE_ERROR:  # pytest printed the reason (a bad -k expression, ...)
            return USAGE
        found = _find_run_folder(results_dir, run_id, before)
        if exit_code == pytest.ExitCode.NO_TESTS_COLLECTED and found is None:
            if args.keyword is not None:
                raise UsageError(f"-k {args.keyword}: matched no case in suite(s) {', '.join(suites)}")
            print(f"interop run: no case collected in suite(s) {', '.join(suites)}", file=sys.stderr)
            return 1
        folder = found or folder
    else:
        env = {**os.environ, RUN_ID_ENV: run_id, **got}
        finished = matrix_plugin.run_cells(runs, args.jobs, folder / RESULTS_FILE, env, sys.stdout)
        interrupted = not finished
        codes = {r.exit_code for r in runs}
        if codes <= {pytest.ExitCode.USAGE_ERROR}:
            _print_cell_log_tail(runs[0])
            return USAGE
        if codes <= {pytest.ExitCode.NO_TESTS_COLLECTED} and not (folder / RESULTS_FILE).is_file():
            if args.keyword is not None:
                raise UsageError(f"-k {args.keyword}: matched no case in any cell")
            print("interop run: no case collected in any cell", file=sys.stderr)
            return 1

    if not (folder / RESULTS_FILE).is_file():
        print(f"interop run: no results were written under {results_dir} "
              f"(pytest exit code {runs[0].exit_code}; see its output above)", file=sys.stderr)
        return 1
    _write_run_meta(folder, matrix, runs, started_at, interrupted, args)

    records, bad_lines = read_results(folder)
    if not single:
        print(format_cells(runs, records))
    print(f"junit: {folder}/junit-*.xml" + (f"; allure results: {folder / ALLURE_DIR}"
                                             if (folder / ALLURE_DIR).is_dir() else ""))
    print(format_summary(records, bad_lines, folder / RESULTS_FILE, matrix.cells[0].peers if single else None))
    status = _run_status(records, bad_lines, runs, interrupted)
    if args.report:
        report_status = _build_report(results_dir)
        status = status or report_status
    return status


def _run_status(records: list[dict], bad_lines: list, runs: list[CellRun], interrupted: bool) -> int:
    outcomes = Counter(record["outcome"] for record in records)
    if interrupted:
        print("interop run: interrupted; the results above are those of the cases that finished", file=sys.stderr)
        return 130
    if any(outcomes[o] for o in BAD_OUTCOMES) or bad_lines:
        return 1
    fine = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
    broken = [r for r in runs if r.exit_code not in fine or (len(runs) == 1 and r.exit_code != pytest.ExitCode.OK)]
    for run in broken:
        # No case failed in the records, yet pytest did not finish cleanly (a collection error, an
        # interrupted session, an internal error): the run is not a pass.
        where = "see its output above" if len(runs) == 1 else f"see {run.log}"
        print(f"interop run: {'' if len(runs) == 1 else 'cell ' + run.cell.name + ': '}pytest exit code "
              f"{run.exit_code} ({exit_text(run.exit_code)}); {where}", file=sys.stderr)
    return 1 if broken else 0


def _matrix_for(args: argparse.Namespace, suites: dict[str, Path]) -> Matrix:
    """The cells to run: `--peer` (one cell, not probed: an unavailable peer makes its cases `skipped`), else
    the matrix file, else the built-in default; `--suite` narrows every cell, `--break` applies to every cell
    whose peers it names."""
    from .peers.vendors import vendor, vendor_roles

    try:
        breaks = [parse_break(b) for b in args.breaks]
    except BreakError as exc:
        raise UsageError(str(exc)) from None
    if args.peer and args.matrix:
        raise UsageError("--peer and --matrix: give one (--peer runs a single cell instead of the matrix)")
    if args.peer:
        choices = _peer_choices(args.peer)
        matrix = Matrix([Cell(cell_name(choices, []), choices, list(suites))], source="--peer")
    elif args.matrix is None:
        # One cell, the default peers, in this process: what `interop run` always did (and what tests/test_cli.py
        # pins down). The matrix is opt-in: `--matrix`.
        choices = _peer_choices([])
        matrix = Matrix([Cell(cell_name(choices, []), choices, list(suites))], source="default peers")
    else:
        path = Path(args.matrix).expanduser()
        all_suites = list(available_suites())
        try:
            if path.is_file() or args.matrix != str(DEFAULT_MATRIX):
                matrix = matrix_plugin.load_matrix(path, all_suites, lambda role, name: vendor(name, role))
            else:  # no matrix.yaml in this checkout: the reference plus every real vendor that runs here
                matrix = matrix_plugin.default_matrix(all_suites, vendor_roles())
        except MatrixError as exc:
            raise UsageError(str(exc)) from None
        if args.suite:
            for cell in matrix.cells:
                cell.suites = [s for s in cell.suites if s.partition("/")[0] in suites]
            matrix.cells = [c for c in matrix.cells if c.suites]
            if not matrix.cells:
                raise UsageError(f"--suite {', '.join(suites)}: no cell of {matrix.source} runs that suite")
    for cell in matrix.cells:
        if args.client and args.client != cell.client:
            cell.client = args.client
            if cell.name == cell_name(cell.peers, cell.breaks):
                cell.name = cell_name(cell.peers, cell.breaks, args.client)
        extra = [b for b in breaks if any(b.applies_to(r, v) for r, v in cell.peers.items())]
        if extra:
            cell.breaks = cell.breaks + extra
            cell.name += "".join(f"+{b.fault}" for b in extra)
    if breaks and not any(b in c.breaks for b in breaks for c in matrix.cells):
        raise UsageError(f"--break {' '.join(map(str, breaks))}: matches no peer of any cell")
    return matrix


def _get_versions(matrix: Matrix, explicit: bool) -> dict[str, str]:
    """Get every product version the cells chose (`artemis@2.39.0`) that is not here yet, one after another and
    before any cell starts (a fetch or build takes 20-60 s; Maven's local repository is not locked), and hand
    what was found to the cells' sessions (harness/peers/versions.py, ENV), which then neither fetch again nor
    try again. A version that cannot be had here leaves its cases `skipped` with the reason, as an absent product
    does; one that does not exist is a usage error when `--peer` asked for it, and takes its cells out of a matrix.
    Returns the environment for the cells' processes (a single cell runs in this process and shares what it found)."""
    from .peers import versions
    from .peers.vendors import parse_choice

    for cell in list(matrix.cells):
        for role, name in cell.peers.items():
            choice = parse_choice(name)
            try:
                why = versions.ensure(choice, say=lambda line: print(line, flush=True))
            except versions.NoSuchVersion as exc:
                if explicit:
                    raise UsageError(f"--peer {role}={name}: {exc}") from None
                why = str(exc)
            # (a single cell runs in this process: its session says it, once, as it starts)
            if why is not None and not explicit and cell in matrix.cells:
                matrix.cells.remove(cell)
                matrix.not_used.append((f"cell {cell.name} ({cell.peer_option()})", why))
    return {versions.ENV: json.dumps(versions.found())} if versions.found() else {}


def _cell_pytest_args(cell: Cell, suites: dict[str, Path], args: argparse.Namespace, results_dir: Path,
                      folder: Path, timeout: float, single: bool) -> list[str]:
    paths = _cell_paths(cell)
    pytest_args = paths + _pytest_base_args()
    # The cell travels as one file: its peers, breaks and client stack (harness/cell.py).
    cell_file = cell.write(folder / CELLS_DIR / f"{cell.name}.cell.json")
    pytest_args += ["--results", str(results_dir), "--interop-cell", str(cell_file)]
    pytest_args += (["-qq"] if args.quiet else ["-q"]) if single else ["-q", "-rfE"]
    keywords = [k for k in (cell.keyword, args.keyword) if k is not None]
    if keywords:
        pytest_args += ["-k", " and ".join(f"({k})" for k in keywords) if len(keywords) > 1 else keywords[0]]
    if args.exitfirst:
        pytest_args += ["-x"]
    if not single:
        pytest_args = [sys.executable, "-m", "pytest", *pytest_args]
    pytest_args += ["--timeout", f"{timeout:g}"]
    if args.peer_probe_timeout is not None:
        pytest_args += ["--peer-probe-timeout", f"{args.peer_probe_timeout:g}"]
    if getattr(args, "fault_proxy", None) is not None:
        pytest_args += ["--fault-proxy", args.fault_proxy]
    pytest_args += ["--junitxml", str(folder / f"junit-{cell.name}.xml"), "-o", f"junit_suite_name={cell.name}"]
    if _allure_available():
        pytest_args += ["--alluredir", str(folder / ALLURE_DIR)]
    return pytest_args


def _cell_paths(cell: Cell) -> list[str]:
    """The folders and files a cell's pytest session runs: a suite's folder, or the files of a
    `SUITE/FILE-PATTERN` entry (a pattern that matches nothing is a usage error, not an empty cell)."""
    known = available_suites()
    paths: list[str] = []
    for entry in cell.suites:
        suite, _, pattern = entry.partition("/")
        if not pattern:
            paths.append(str(known[suite]))
            continue
        files = sorted(str(p) for p in known[suite].glob(pattern) if p.is_file())
        if not files:
            raise UsageError(f"cell {cell.name}: suites entry {entry!r} matches no file in {known[suite]}")
        paths += files
    return paths


def _allure_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("allure_pytest") is not None


def _print_cell_log_tail(run: CellRun) -> None:
    try:
        tail = run.log.read_text(errors="replace").strip().splitlines()[-5:]
    except OSError:
        tail = []
    print("\n".join(tail), file=sys.stderr)


def _write_run_meta(folder: Path, matrix: Matrix, runs: list[CellRun], started_at: str, interrupted: bool,
                    args: argparse.Namespace) -> None:
    """run.json for the whole matrix run, merged over what the cells' sessions wrote (host, topologies)."""
    import json

    path = folder / RUN_META_FILE
    try:
        meta = json.loads(path.read_text())
        if not isinstance(meta, dict):
            meta = {}
    except (OSError, ValueError):
        meta = {}
    meta.update({
        "schema": 1, "run_id": folder.name, "started_at": started_at, "ended_at": utc_now_iso(),
        "interrupted": interrupted or pytest.ExitCode.INTERRUPTED in {r.exit_code for r in runs},
        "argv": ["interop", *sys.argv[1:]] if sys.argv else [],
        "peers": {role: sorted({r.cell.peers[role] for r in runs if role in r.cell.peers})
                  for role in sorted({role for r in runs for role in r.cell.peers})},
        "breaks": sorted({str(b) for r in runs for b in r.cell.breaks}),
        "matrix": {**matrix.as_dict(), "keyword": args.keyword,
                   "cells": [{**r.cell.as_dict(), "exit_code": r.exit_code,
                              "junit": f"junit-{r.cell.name}.xml"} for r in runs]},
    })
    meta.pop("topologies", None) if len(runs) > 1 else None  # one cell's peers only: misleading for a matrix
    tmp = folder / f".{RUN_META_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def format_matrix(matrix: Matrix) -> str:
    lines = [f"matrix: {matrix.source}, {len(matrix.cells)} cell(s), {matrix.timeout:g}s per case"]
    for cell in matrix.cells:
        broken = f"  BROKEN: {' '.join(map(str, cell.breaks))}" if cell.breaks else ""
        only = f" -k {cell.keyword!r}" if cell.keyword else ""
        lines.append(f"  cell {cell.name}: {cell.peer_option()}; suites {' '.join(cell.suites)}{only}{broken}")
    if matrix.not_used:
        lines.append("not used:")
        lines += [f"  {what}: {why}" for what, why in matrix.not_used]
    return "\n".join(lines)


def format_cells(runs: list[CellRun], records: list[dict]) -> str:
    by_cell: dict[str, Counter] = {}
    for record in records:
        cell = record.get("cell") or (record.get("details") or {}).get("cell", "?")  # older records: details
        by_cell.setdefault(cell, Counter())[record["outcome"]] += 1
    width = max(len(r.cell.name) for r in runs)
    lines = ["by cell:"]
    for run in runs:
        counts = by_cell.get(run.cell.name, Counter())
        took = f"; {run.ended - run.started:.0f} s{run.cpu_text()}" if run.ended else ""
        lines.append(f"  {run.cell.name:<{width}}  {sum(counts.values())} ({_counts(counts)}); "
                     f"exit {run.exit_code}{took}")
    return "\n".join(lines)


def _build_report(results_dir: Path) -> int:
    from reports import cli as report_cli

    print(f"== interop report over {results_dir} ==", flush=True)
    try:
        return report_cli.main([str(results_dir), "--out", str(results_dir / "report")])
    except report_cli.ReportError as exc:
        print(f"interop report: {exc}", file=sys.stderr)
        return 1


def cmd_report(args: argparse.Namespace) -> int:
    from reports import cli as report_cli

    try:
        return report_cli.run(args)
    except report_cli.ReportError as exc:
        raise UsageError(str(exc)) from None


def _peer_choices(values: list[str]) -> dict[str, str]:
    """Role -> vendor from --peer values, checked before pytest starts (harness.peers.vendors: the one parser)."""
    from .peers.vendors import parse_peer_choices

    try:
        return parse_peer_choices(values)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _results_dir(value: str) -> Path:
    path = Path(value).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise UsageError(f"--results {value}: not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--results {value}: cannot create: {exc.strerror or exc}") from None
    return path


def _run_folders(results_dir: Path) -> set[str]:
    return {p.name for p in results_dir.iterdir() if p.is_dir()} if results_dir.is_dir() else set()


def _find_run_folder(results_dir: Path, run_id: str, before: set[str]) -> Path | None:
    """The folder this run wrote: DIR/<run_id> when the plugin took our run id, else the newest folder
    with a results file that appeared during this call."""
    named = results_dir / run_id
    if (named / RESULTS_FILE).is_file():
        return named
    fresh = [
        p for p in results_dir.iterdir()
        if p.is_dir() and p.name not in before and (p / RESULTS_FILE).is_file()
    ]
    return max(fresh, key=lambda p: (p / RESULTS_FILE).stat().st_mtime) if fresh else None


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def format_summary(records: list[dict], bad_lines: list[tuple[int, str]], results_file: Path,
                   choices: dict[str, str] | None = None) -> str:
    """The end-of-run summary: outcome totals, per-suite totals, failed cases, the results file."""
    run_ids = sorted({record["run_id"] for record in records})
    lines = [f"== interop run {', '.join(run_ids) or '(no cases)'} =="]
    if choices:
        lines.append("peers: " + ", ".join(f"{role}={name}" for role, name in choices.items()))
    totals = Counter(record["outcome"] for record in records)
    lines.append(f"cases: {len(records)} ({_counts(totals)})")
    by_suite: dict[str, Counter] = {}
    for record in records:
        by_suite.setdefault(record["suite"], Counter())[record["outcome"]] += 1
    if by_suite:
        lines.append("by suite:")
        width = max(len(name) for name in by_suite)
        for name in sorted(by_suite):
            lines.append(f"  {name:<{width}}  {sum(by_suite[name].values())} ({_counts(by_suite[name])})")
    bad = [record for record in records if record["outcome"] in BAD_OUTCOMES]
    if bad:
        lines.append(f"failed cases ({len(bad)}):")
        for record in bad:
            message = " ".join((record.get("message") or "(no message)").split())
            # a matrix run has several cells on one case id: say which one failed
            where = f" [{record['cell']}]" if record.get("cell") else ""
            lines.append(f"  {record['outcome'].upper()}{where} {record['case']}: {message}")
    if bad_lines:
        lines.append(f"unreadable result lines ({len(bad_lines)}):")
        lines += [f"  line {number}: {error}" for number, error in bad_lines[:10]]
        if len(bad_lines) > 10:
            lines.append(f"  ... and {len(bad_lines) - 10} more")
    lines.append(f"results: {results_file}")
    return "\n".join(lines)


def _counts(counter: Counter) -> str:
    order = list(SHOWN_OUTCOMES) + [o for o in OUTCOMES if o not in SHOWN_OUTCOMES]
    return ", ".join(f"{counter.get(outcome, 0)} {outcome}" for outcome in order)


# ---- interop catalog ------------------------------------------------------------------------------------------


class _SpecCollector:
    """A pytest plugin object: remembers each collected case's spec clause ids."""

    def __init__(self) -> None:
        self.spec_ids: dict[str, list[str]] = {}

    def pytest_collection_finish(self, session) -> None:
        for item in session.items:
            # Every spec marker counts (function, class, module, parameter), as in the result records.
            ids: list[str] = []
            for marker in item.iter_markers("spec"):
                ids.extend(str(arg) for arg in marker.args if str(arg) not in ids)
            self.spec_ids[item.nodeid] = ids


def collect_spec_ids(suites: dict[str, Path]) -> dict[str, list[str]]:
    """Case id -> clause ids, for every case in the suites, collected without running anything."""
    collector = _SpecCollector()
    args = [str(path) for path in suites.values()] + _pytest_base_args() + ["--collect-only", "-q"]
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exit_code = int(pytest.main(args, plugins=[collector]))
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        sys.stderr.write(output.getvalue())
        raise RuntimeError(f"collecting the suite cases failed (pytest exit code {exit_code}, "
                           f"{exit_text(exit_code)}); see the output above")
    return collector.spec_ids


def cmd_fuzz(args: argparse.Namespace) -> int:
    choices = _peer_choices(args.peer)
    explicit = [item.partition("=")[0].strip() for value in args.peer for item in value.split(",") if item.strip()]
    try:
        return fuzz_command.run(args, choices, explicit, _results_dir(args.results))
    except fuzz_command.FuzzUsageError as exc:
        raise UsageError(f"fuzz {exc}") from None


def cmd_catalog(args: argparse.Namespace) -> int:
    try:
        catalog = load_catalog(args.catalog)
    except CatalogError as exc:
        raise UsageError(str(exc)) from None
    suites = available_suites()
    try:
        spec_ids = collect_spec_ids(suites) if suites else {}
    except RuntimeError as exc:
        print(f"interop catalog: {exc}", file=sys.stderr)
        return 1
    cov = coverage(catalog, spec_ids)
    if args.verbose:
        width = max((len(clause_id) for clause_id in catalog), default=0)
        for clause_id, clause in catalog.items():
            cases = cov.clauses.get(clause_id, [])
            print(f"{clause_id:<{width}}  {len(cases)} case(s)  {clause.source}")
            for case in cases:
                print(f"{'':<{width}}    {case}")
    print(format_coverage(cov))
    return 1 if args.strict and not cov.complete else 0


if __name__ == "__main__":
    sys.exit(main())
