"""`interop`: the project's command line.

  interop router -c FILE [--id ID]     run the reference router in the foreground (like qdrouterd)
  interop run [--peer ROLE=VENDOR ...] [--results DIR] [--suite NAME ...] [-k EXPR] [-x] [-q]
                                       run the conformance suites against the chosen peers, then print a
                                       summary read back from the run's results.jsonl
  interop catalog [--catalog PATH] [--strict] [-v]
                                       spec catalog coverage by the suite cases (collected, not run)

Exit codes: 0 all good; 1 a case failed or errored (run), the catalog has gaps (catalog --strict), or a
server stopped on an error (router); 2 a user mistake (unknown vendor or suite, missing file, bad option),
reported as one line on stderr without a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from .catalog import CatalogError, coverage, format_coverage, load_catalog
from .results import OUTCOMES, RESULTS_FILE, RUN_ID_ENV, new_run_id, read_results

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

    run = commands.add_parser("run", help="run the conformance suites against the chosen peers",
                              description="Run the conformance suites against the chosen peers and summarise "
                                          "the results.")
    run.add_argument("--peer", action="append", default=[], metavar="ROLE=VENDOR",
                     help="vendor per role (repeatable or comma-separated); default router=reference")
    run.add_argument("--results", default="results", metavar="DIR",
                     help="folder for run results; this run writes DIR/<run_id>/results.jsonl (default: results)")
    run.add_argument("--suite", action="extend", nargs="+", default=[], metavar="NAME",
                     help="suite folder(s) under suites/ to run (default: all that contain tests)")
    run.add_argument("-k", dest="keyword", metavar="EXPR", help="only cases matching this pytest -k expression")
    run.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failed case")
    run.add_argument("-q", "--quiet", action="store_true", help="less pytest output (the summary stays)")
    run.set_defaults(handler=cmd_run)

    catalog = commands.add_parser("catalog", help="spec catalog coverage by the suite cases",
                                  description="Collect the suite cases (without running them) and report "
                                              "which catalog clauses they cover.")
    catalog.add_argument("--catalog", default=str(CATALOG), metavar="PATH",
                         help="spec catalog YAML (default: suites/spec/catalog.yaml)")
    catalog.add_argument("--strict", action="store_true",
                         help="exit 1 when a clause has no case or a case has no (known) clause")
    catalog.add_argument("-v", "--verbose", action="store_true", help="also list every clause and its cases")
    catalog.set_defaults(handler=cmd_catalog)
    return parser


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
    try:
        return int(server.main(argv) or 0)
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
    choices = _peer_choices(args.peer)
    results_dir = _results_dir(args.results)

    run_id = new_run_id()
    pytest_args = [str(path) for path in suites.values()]
    pytest_args += _pytest_base_args()
    pytest_args += ["--results", str(results_dir), "--peer", ",".join(f"{r}={v}" for r, v in choices.items())]
    pytest_args += ["-qq"] if args.quiet else ["-q"]
    if args.keyword is not None:
        pytest_args += ["-k", args.keyword]
    if args.exitfirst:
        pytest_args += ["-x"]

    before = _run_folders(results_dir)
    with _env(RUN_ID_ENV, run_id):
        exit_code = int(pytest.main(pytest_args))
    sys.stdout.flush()

    if exit_code == pytest.ExitCode.USAGE_ERROR:  # pytest printed the reason (a bad -k expression, ...)
        return USAGE
    folder = _find_run_folder(results_dir, run_id, before)
    if exit_code == pytest.ExitCode.NO_TESTS_COLLECTED and folder is None:
        if args.keyword is not None:
            raise UsageError(f"-k {args.keyword}: matched no case in suite(s) {', '.join(suites)}")
        print(f"interop run: no case collected in suite(s) {', '.join(suites)}", file=sys.stderr)
        return 1
    if folder is None:
        print(f"interop run: no results were written under {results_dir} "
              f"(pytest exit code {exit_code}; see its output above)", file=sys.stderr)
        return 1

    records, bad_lines = read_results(folder)
    print(format_summary(records, bad_lines, folder / RESULTS_FILE, choices))
    outcomes = Counter(record["outcome"] for record in records)
    if any(outcomes[o] for o in BAD_OUTCOMES) or bad_lines:
        return 1
    if exit_code != pytest.ExitCode.OK:
        # No case failed in the records, yet pytest did not finish cleanly (a collection error, an
        # interrupted session, an internal error): the run is not a pass.
        print(f"interop run: pytest exit code {exit_code} ({_exit_name(exit_code)}); see its output above",
              file=sys.stderr)
        return 1
    return 0


def _peer_choices(values: list[str]) -> dict[str, str]:
    """Role -> vendor, in the syntax of the plugin's --peer option, checked before pytest starts.

    (Not imported from harness.pytest_plugin: importing the plugin here, before pytest loads it, would stop
    pytest from rewriting its asserts.)
    """
    from .peers.vendors import DEFAULT_PEERS, vendor

    choices = dict(DEFAULT_PEERS)
    for value in values:
        for item in filter(None, (part.strip() for part in value.split(","))):
            role, sep, name = (part.strip() for part in item.partition("="))
            if not sep or not role or not name:
                raise UsageError(f"--peer {item}: expected ROLE=VENDOR, e.g. router=reference")
            try:
                vendor(name, role)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            choices[role] = name
    return choices


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


def _exit_name(code: int) -> str:
    try:
        return pytest.ExitCode(code).name.lower().replace("_", " ")
    except ValueError:
        return "unknown"


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
            lines.append(f"  {record['outcome'].upper()} {record['case']}: {message}")
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
                           f"{_exit_name(exit_code)}); see the output above")
    return collector.spec_ids


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
