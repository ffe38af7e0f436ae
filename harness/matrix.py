"""The run matrix: which suites run against which peers, one pytest session per cell, all under one run id.

A matrix file (`matrix.yaml` at the repository root by default):

    suites: [routing]                 # suites every cell runs (default: every suite folder)
    timeout: 120                      # seconds per case (pytest-timeout); a hung peer cannot stall the run
    cells:
      - peers: {router: reference}    # the embedded reference peers: always used
      - peers: {router: qdrouterd}    # a real product: probed; left out, with the reason, when it cannot run here
      - name: reference-broken        # optional; default made from peers and breaks
        peers: {router: reference}
        client: rhea                      # optional: the client stack of driver-based cases (default python)
        breaks: ["router:no-priority"]    # deliberately broken settings (see CONFIG_FAULTS)
        suites: [routing]                 # overrides the file's suites for this cell

Every cell is one pytest session over its suites with `--peer` set from its peers. All cells share the run id
($INTEROP_RUN_ID), so their records land in one `results/<run_id>/results.jsonl`; each cell also writes
`junit-<cell>.xml`, and Allure results go to `allure-results/`. Cells run in subprocesses, at most `jobs` at a
time, two cells of one real product among them too: the harness starts every peer with its own ports, node name,
data folder and process group (harness/peers/), so one cell's peers never see another's (run_cells).

A cell travels to its session as one file (harness/cell.py: peers, breaks, client stack), `--interop-cell FILE`;
deliberately broken settings are harness/breaks.py's, applied by start_topology. Every record of a cell carries
`cell` and `target` (harness.results.OPTIONAL_FIELDS), and `config_fault` when the cell is broken, so that nobody
mistakes it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pytest

from .breaks import BreakError, parse_break
from .cell import REFERENCE, Cell, cell_name
from .drivers import STACKS as CLIENT_STACKS

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MATRIX = ROOT / "matrix.yaml"
DEFAULT_TIMEOUT = 120.0
ALLURE_DIR = "allure-results"
_CELL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]*$")


class MatrixError(ValueError):
    """A bad matrix file or option; str() is one line naming the file (or option) and the field."""


# ---- the matrix -----------------------------------------------------------------------------------------------


@dataclass
class Matrix:
    cells: list[Cell]
    not_used: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    source: str = "built-in default"
    timeout: float = DEFAULT_TIMEOUT

    def as_dict(self) -> dict:
        return {"source": self.source, "timeout": self.timeout, "cells": [c.as_dict() for c in self.cells],
                "not_used": [{"what": w, "why": y} for w, y in self.not_used]}


def load_matrix(path: str | Path, suites: list[str], check_vendor: Callable[[str, str], None],
                probe: Callable[[str], str | None] | None = None) -> Matrix:
    """Read and check a matrix file. `suites` are the suite names that exist; `check_vendor(role, vendor)`
    raises ValueError for a vendor the harness does not know. Cells with a real product that `probe` says
    cannot run here are moved to `not_used` with the reason."""
    from .topology import display_path, read_yaml

    shown = display_path(path)
    data = read_yaml(path, MatrixError)
    if not isinstance(data, dict):
        raise MatrixError(f"{shown}: expected a mapping with 'cells'")
    unknown = sorted(set(data) - {"suites", "timeout", "cells", "description"})
    if unknown:
        raise MatrixError(f"{shown}: unknown field {unknown[0]!r} (expected suites, timeout, cells, description)")
    default_suites = _suite_list(data.get("suites"), suites, f"{shown}: suites")
    timeout = data.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise MatrixError(f"{shown}: timeout: expected seconds per case > 0, got {timeout!r}")
    raw_cells = data.get("cells")
    if not isinstance(raw_cells, list) or not raw_cells:
        raise MatrixError(f"{shown}: cells: expected a non-empty list of cells")
    cells: list[Cell] = []
    for i, raw in enumerate(raw_cells):
        where = f"{shown}: cells[{i}]"
        if not isinstance(raw, dict):
            raise MatrixError(f"{where}: expected a mapping with 'peers'")
        extra = sorted(set(raw) - {"name", "peers", "suites", "breaks", "client", "keyword"})
        if extra:
            raise MatrixError(f"{where}: unknown field {extra[0]!r} "
                              "(expected name, peers, suites, breaks, client, keyword)")
        keyword = raw.get("keyword")
        if keyword is not None and (not isinstance(keyword, str) or not keyword.strip()):
            raise MatrixError(f"{where}.keyword: expected a pytest -k expression, e.g. 'broker', got {keyword!r}")
        client = raw.get("client", "python")
        if client not in CLIENT_STACKS:
            raise MatrixError(f"{where}.client: expected one of {', '.join(CLIENT_STACKS)}, got {client!r}")
        peers = raw.get("peers")
        if not isinstance(peers, dict) or not peers:
            raise MatrixError(f"{where}.peers: expected a mapping of role to vendor, e.g. {{router: reference}}")
        for role, name in peers.items():
            try:
                check_vendor(str(role), str(name))
            except ValueError as exc:
                raise MatrixError(f"{where}.peers.{role}: {str(exc).removeprefix('--peer ')}") from None
        peers = {str(r): str(v) for r, v in peers.items()}
        raw_breaks = raw.get("breaks") or []
        if not isinstance(raw_breaks, list):
            raise MatrixError(f"{where}.breaks: expected a list like [\"router:no-priority\"]")
        try:
            breaks = [parse_break(b, f"{where}.breaks[{j}]:") for j, b in enumerate(raw_breaks)]
        except BreakError as exc:
            raise MatrixError(str(exc)) from None
        cell_suites = (_suite_list(raw["suites"], suites, f"{where}.suites") if "suites" in raw
                       else default_suites)
        name = raw.get("name") or cell_name(peers, breaks, client)
        if not isinstance(name, str) or not _CELL_NAME.match(name):
            raise MatrixError(f"{where}.name: expected letters, digits and . _ + = - , got {name!r}")
        if any(c.name == name for c in cells):
            raise MatrixError(f"{where}.name: {name!r} is used by an earlier cell (names must be unique)")
        cells.append(Cell(name, peers, cell_suites, breaks, client, keyword))
    return _probed(Matrix(cells, source=shown, timeout=float(timeout)), probe)


def default_matrix(suites: list[str], vendor_roles: list[tuple[str, str]],
                   probe: Callable[[str], str | None] | None = None) -> Matrix:
    """No matrix file: every suite against the reference peers, then, for each real vendor the harness knows
    (`vendor_roles`: (vendor, role) pairs), the same with that vendor in its role, where it can run here."""
    base = {role: REFERENCE for name, role in vendor_roles if name == REFERENCE}
    cells = [Cell(cell_name(base, []), dict(base), list(suites))]
    for name, role in vendor_roles:
        if name != REFERENCE:
            peers = {**base, role: name}
            cells.append(Cell(cell_name(peers, []), peers, list(suites)))
    return _probed(Matrix(cells), probe)


def _probed(matrix: Matrix, probe: Callable[[str], str | None] | None) -> Matrix:
    probe = probe or probe_vendor
    reasons: dict[str, str | None] = {}
    kept = []
    for cell in matrix.cells:
        why = [reasons.setdefault(p, probe(p)) for p in sorted(cell.products)]
        why = [w for w in why if w]
        if why:
            matrix.not_used.append((f"cell {cell.name} ({cell.peer_option()})", "; ".join(why)))
        else:
            kept.append(cell)
    matrix.cells = kept
    matrix.not_used += [(what, why) for what, why in machine_notes() if not any(what == w for w, _ in
                                                                               matrix.not_used)]
    return matrix


def _suite_list(value: Any, suites: list[str], where: str) -> list[str]:
    if value is None or value == "all":
        return list(suites)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise MatrixError(f"{where}: expected a list of suite names or 'all'")
    for name in value:
        # `SUITE` or `SUITE/FILE-PATTERN` (some files of one suite, e.g. security/test_broker_*.py)
        suite, _, pattern = str(name).partition("/")
        if suite not in suites:
            raise MatrixError(f"{where}: unknown suite {suite!r} (expected one of: {', '.join(suites)})")
        if "/" in name and (not pattern or "/" in pattern or ".." in pattern):
            raise MatrixError(f"{where}: {name!r}: expected SUITE or SUITE/FILE-PATTERN, e.g. "
                              "security/test_broker_*.py")
    return [str(v) for v in value]


# ---- what can run on this machine -----------------------------------------------------------------------------


def probe_vendor(name: str) -> str | None:
    """None if the harness can start vendor `name` (`vendor`, `vendor@provider`, `vendor@version`) here, else one
    line saying why not: each provider the registry lists for it is asked in turn. Fast: no peer is started, nothing
    is fetched. A chosen version that is not here yet but could be got counts as here: `interop run` gets it before
    its cells start (harness/peers/versions.py)."""
    from .peers import versions
    from .peers.registry import entries_of, provider_class
    from .peers.vendors import parse_choice

    if name.startswith("external:"):
        return None
    choice = parse_choice(name)
    base, wanted = choice.vendor, choice.provider
    providers = {path: provider_class(path) for e in entries_of(base) for path in e.providers}
    if not providers:
        return f"unknown vendor {base}"
    if choice.version is not None:
        if (why := versions.probe(choice)) is not None:
            return why
        if versions.state(choice) is not None:  # not here yet, but it can be got: nothing more to ask
            return None
    reasons = []
    for provider in providers.values():
        if wanted and provider.name != wanted:
            continue
        if (why := provider.probe(choice.version)) is None:
            return None
        reasons.append(why)
    return "; ".join(reasons) or f"{base} has no provider {wanted!r}"


def machine_notes() -> list[tuple[str, str]]:
    """What the probes found that no cell shows: the container engine, for every vendor that has an image."""
    from .peers.containers import ContainerProvider
    from .peers.registry import REGISTRY, declared, provider_class

    imaged = [e.spec.vendor for e in REGISTRY if any(issubclass(provider_class(p), ContainerProvider)
                                                       for p in e.providers)]
    if not imaged or (why := ContainerProvider.probe()) is None:
        return []
    titles = ", ".join(declared(v).title for v in dict.fromkeys(imaged))
    return [(f"containers ({titles} images)", why)]


# ---- running cells ----------------------------------------------------------------------------------------------


@dataclass
class CellRun:
    cell: Cell
    args: list[str]
    log: Path
    proc: subprocess.Popen | None = None
    started: float = 0.0
    ended: float = 0.0
    exit_code: int | None = None
    collected: int | None = None
    outcomes: Counter = field(default_factory=Counter)
    cpu_s: float | None = None  # user + system time of its pytest and every process that one waited for

    def reap(self) -> bool:
        """Whether the cell's pytest has ended (its exit code and CPU time noted, the process reaped)."""
        try:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else (Popen.poll): no CPU time to tell
            return self.proc.poll() is not None
        if pid == 0:
            return False
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime
        return True

    def cpu_text(self) -> str:
        return "" if self.cpu_s is None else f", {self.cpu_s:.0f} CPU-s"


class Progress:
    """Tails results.jsonl while cells run and prints one line per finished case."""

    def __init__(self, results_file: Path, runs: list[CellRun], out: TextIO):
        self.file, self.runs, self.out = results_file, {r.cell.name: r for r in runs}, out
        self.offset = 0
        self.done = 0
        self.partial = b""

    def total(self) -> str:
        counts = [r.collected for r in self.runs.values()]
        return str(sum(counts)) if all(c is not None for c in counts) else "?"

    def poll(self) -> None:
        for run in self.runs.values():
            if run.collected is None:
                info = run.log.with_suffix(".json")
                if info.is_file():
                    try:
                        run.collected = int(json.loads(info.read_text())["collected"])
                    except (ValueError, KeyError, TypeError):
                        pass
        if not self.file.is_file():
            return
        with open(self.file, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        for raw in lines:
            if raw.strip():
                self._line(raw)

    def _line(self, raw: bytes) -> None:
        self.done += 1
        try:
            record = json.loads(raw)
            cell = record.get("cell") or (record.get("details") or {}).get("cell", "?")  # older records: details
            outcome, case = record["outcome"], record["case"]
            duration = float(record.get("duration_s") or 0)
        except (ValueError, KeyError, TypeError, AttributeError):
            self.out.write(f"[{self.done:>4}/{self.total()}] (unreadable result line)\n")
            return
        if cell in self.runs:
            self.runs[cell].outcomes[outcome] += 1
        width = max(len(name) for name in self.runs)
        self.out.write(f"[{self.done:>4}/{self.total()}] {outcome.upper():<14} {cell:<{width}} {case} "
                       f"({duration:.2f}s)\n")
        self.out.flush()


def run_cells(runs: list[CellRun], jobs: int, results_file: Path, env: dict[str, str], out: TextIO,
              deadline_s: float = 24 * 3600) -> bool:
    """Run every cell's pytest session as a subprocess, at most `jobs` at once and in the order given, printing
    progress. Two cells of one product may run together: every peer has its own ports, node name, data folder
    and process group (harness/peers/), so nothing of one cell's peers is visible to another's. Returns False
    when interrupted (SIGINT/SIGTERM): the running cells are stopped, and what they recorded stays readable."""
    from .wait import wait_for

    progress = Progress(results_file, runs, out)
    pending = list(runs)
    running: list[CellRun] = []
    interrupted = []

    def on_signal(signum, _frame):
        interrupted.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def step() -> bool:
        progress.poll()
        for run in list(running):
            if run.reap():
                run.exit_code, run.ended = run.proc.returncode, time.monotonic()
                running.remove(run)
                progress.poll()
                out.write(f"-- cell {run.cell.name}: exit {run.exit_code} ({exit_text(run.exit_code)}), "
                          f"{_outcome_text(run.outcomes)} in {run.ended - run.started:.1f}s{run.cpu_text()}; "
                          f"log {run.log}\n")
                out.flush()
        if interrupted:
            return True
        for run in list(pending):
            if len(running) >= jobs:
                break
            pending.remove(run)
            run.log.parent.mkdir(parents=True, exist_ok=True)
            with open(run.log, "w") as log:
                run.proc = subprocess.Popen(run.args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
            run.started = time.monotonic()
            running.append(run)
            out.write(f"-- cell {run.cell.name}: started ({run.cell.peer_option()}"
                      f"{', breaks ' + ' '.join(map(str, run.cell.breaks)) if run.cell.breaks else ''}; "
                      f"suites {' '.join(run.cell.suites)})\n")
            out.flush()
        return not pending and not running

    try:
        wait_for(step, deadline_s, "the matrix cells to finish", interval=0.05,
                 describe=lambda: "running: " + ", ".join(r.cell.name for r in running))
    finally:
        if interrupted or running:
            _stop(running, out)
        for s, handler in old.items():
            signal.signal(s, handler)
        progress.poll()
    return not interrupted


def _stop(running: list[CellRun], out: TextIO) -> None:
    """SIGINT each cell's process group (pytest then stops its peers and closes its records), then wait."""
    from .wait import WaitTimeout, wait_for

    for run in running:
        out.write(f"-- cell {run.cell.name}: stopping\n")
        try:
            os.killpg(run.proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    try:
        wait_for(lambda: all(r.proc.poll() is not None for r in running), 20, "interrupted cells to stop")
    except WaitTimeout:
        for run in running:
            if run.proc.poll() is None:
                os.killpg(run.proc.pid, signal.SIGKILL)
                run.proc.wait(10)
    for run in running:
        run.exit_code, run.ended = run.proc.returncode, time.monotonic()


def exit_text(code: int | None) -> str:
    """A pytest exit code in words (`tests failed`), `killed` for a session ended by a signal."""
    try:
        return pytest.ExitCode(code).name.lower().replace("_", " ")
    except (ValueError, TypeError):
        return "killed" if code is not None and code < 0 else "unknown"


def _outcome_text(outcomes: Counter) -> str:
    return ", ".join(f"{n} {o}" for o, n in outcomes.most_common()) or "no case recorded"
