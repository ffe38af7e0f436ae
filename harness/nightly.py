"""`interop nightly`: the main job (`make run`), every product fuzzed and benchmarked side by side, then the matrix
and the report, all into one results store.

    interop nightly [--budget quick|nightly] [--only configs,fuzz,bench,matrix,report]
                    [--products reference,qdrouterd,artemis,activemq-classic,rabbitmq] [--results DIR]
                    [--matrix FILE] [--jobs N] [--list]

Steps, in order (each a child process: the same commands a user runs by hand, with their records in DIR):

1. configs: the configuration differential (`interop fuzz --configs`) against qdrouterd and Artemis;
2. fuzz: per product present, a hostile-frame session (`interop fuzz --frames`) and a stateful session
   (`interop fuzz`, programs differential against the reference), fixed seeds, the budget's time each; routers
   with `--role router`, brokers with `--role broker`;
3. bench: bench/routing.py (reference router vs qdrouterd), bench/broker.py (the reference broker vs every
   broker present), bench/network.py (the network of brokers, per broker vendor present), each with `--results`;
4. matrix: `interop run --matrix matrix.yaml -j N` (its own probes leave out the cells it cannot run; N cells at
   once, 2 by default: a matrix cell is a whole pairing, every suite against one product, so six at once (as make
   test runs its smaller cells) drove two cores to a load of 300-420 on 2026-12-07 and failed JMS and waypoint
   cases by their deadlines);
5. report: `interop report DIR` over every run in the store (DIR/report/index.html).

A product is present when the matrix's probe says so (harness.matrix.probe_vendor, what `interop run --list` uses);
one that is not is listed as skipped with the probe's reason, and so are the steps that need it. Every step runs
even when an earlier one failed; each prints `[i/N] name` when it starts and its status and wall time when it
ends, and its output is kept in DIR/nightly/<stamp>/NN-<name>.log, with steps.json (every step's command, status,
exit code and wall time) beside it. Exit 0 when every step passed, 1 when one failed or found something (after
the report is written), 2 for a usage mistake.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .results import RUN_ID_ENV, default_results_dir

REPO = Path(__file__).resolve().parent.parent
GROUPS = ("configs", "fuzz", "bench", "matrix", "report")


@dataclass(frozen=True)
class Budget:
    """How long each kind of step runs: fuzz sessions and benchmarks' sizes."""

    fuzz: str  # each frames and each stateful session
    configs: str  # each configuration-differential session
    routing: tuple[str, ...]  # bench/routing.py arguments
    broker: tuple[str, ...]  # bench/broker.py arguments
    network: tuple[str, ...]  # bench/network.py arguments
    deadline_s: float  # a step still running after this is stopped (a hung product must not hold up the night)


BUDGETS = {
    # a newcomer's first run: every product seen once, in minutes rather than hours
    "quick": Budget(fuzz="20s", configs="30s",
                    routing=("--messages", "3000", "--repeats", "1", "--clients", "python",
                             "--scenario", "anycast-unsettled", "--scenario", "anycast-presettled"),
                    broker=("--messages", "1000", "--rounds", "1"),
                    network=("--messages", "1000", "--rounds", "1"), deadline_s=900),
    # the scheduled run: longer sessions, the benchmarks' own defaults
    "nightly": Budget(fuzz="5m", configs="5m", routing=("--clients", "python,c"), broker=(), network=(),
                      deadline_s=3600),
}
FRAMES_SEED = 5  # the seed that found the Artemis findings (docs/fuzzing.md, "Findings about real products")
STATEFUL_SEED = 15  # make test's seed


@dataclass(frozen=True)
class Product:
    name: str  # what --products takes
    role: str
    vendor: str
    label: str


def _products() -> tuple[tuple[Product, ...], dict[str, tuple[str, ...]]]:
    """Every (vendor, role) of the registry as a nightly product, and the names that stand for several: a vendor
    that plays two roles (`reference`: its router and its broker) and a vendor's own aliases (`classic`)."""
    from .peers.registry import VENDORS

    products, aliases = [], {}
    for vendor in VENDORS:
        mine = [Product(role.product or vendor.name, role.role, vendor.name, role.label or vendor.title)
                for role in vendor.roles]
        products += mine
        names = tuple(p.name for p in mine)
        for alias in (*vendor.aliases, *([vendor.name] if len(mine) > 1 else [])):
            aliases[alias] = names
    return tuple(products), aliases


PRODUCTS, ALIASES = _products()


@dataclass
class Step:
    group: str
    name: str
    argv: list[str]
    needs: list[str] = field(default_factory=list)  # product names that must be present
    deadline_s: float = 900.0
    finding_exit: bool = False  # exit 1 means "found something" (fuzz), not a broken step
    # filled in when it runs
    status: str = "pending"  # passed | found | failed | timeout | skipped
    exit_code: int | None = None
    wall_s: float = 0.0
    log: str = ""
    reason: str = ""


class NightlyUsageError(Exception):
    pass


def parse_products(text: str | None) -> list[str]:
    """--products: comma-separated product names (and the aliases `reference`, `classic`), in PRODUCTS' order."""
    if not text:
        return [p.name for p in PRODUCTS]
    wanted: set[str] = set()
    known = {p.name for p in PRODUCTS}
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name in ALIASES:
            wanted.update(ALIASES[name])
        elif name in known:
            wanted.add(name)
        else:
            raise NightlyUsageError(f"--products: unknown product {name!r} (expected "
                                    f"{', '.join(sorted(known | set(ALIASES)))})")
    return [p.name for p in PRODUCTS if p.name in wanted]


def parse_only(text: str | None) -> list[str]:
    if not text:
        return list(GROUPS)
    groups = [g.strip() for g in text.split(",") if g.strip()]
    if unknown := [g for g in groups if g not in GROUPS]:
        raise NightlyUsageError(f"--only: unknown step group {unknown[0]!r} (expected {', '.join(GROUPS)})")
    return groups


def probe_products(names: list[str], probe=None) -> dict[str, str | None]:
    """Product name -> None when it can run here, else the reason (the matrix's probe)."""
    if probe is None:
        from .matrix import probe_vendor as probe
    reasons: dict[str, str | None] = {}
    by_vendor: dict[str, str | None] = {}
    for product in PRODUCTS:
        if product.name not in names:
            continue
        if product.vendor not in by_vendor:
            by_vendor[product.vendor] = probe(product.vendor)
        reasons[product.name] = by_vendor[product.vendor]
    return reasons


def plan(budget: Budget, groups: list[str], products: list[str], present: dict[str, str | None], results: Path,
         matrix: str, jobs: int = 2) -> list[Step]:
    """The steps of one nightly, in order; a step whose product is absent or not chosen is kept, to be listed as
    skipped with the reason."""
    script = Path(sys.executable).parent / "interop"  # the venv's console script, else the module
    interop = [str(script)] if script.is_file() else [sys.executable, "-m", "harness.cli"]
    python = [sys.executable]
    res = ["--results", str(results)]
    steps: list[Step] = []
    by_name = {p.name: p for p in PRODUCTS}
    if "configs" in groups:
        steps.append(Step("configs", "configs: qdrouterd.conf, reference router vs qdrouterd",
                          [*interop, "fuzz", "--configs", "--peer", "router=qdrouterd", "--budget", budget.configs,
                           "--seed", str(STATEFUL_SEED), *res], needs=["qdrouterd"], finding_exit=True))
        steps.append(Step("configs", "configs: broker.xml, reference broker vs Artemis",
                          [*interop, "fuzz", "--configs", "--peer", "broker=artemis", "--budget", budget.configs,
                           "--seed", str(STATEFUL_SEED), *res], needs=["artemis"], finding_exit=True))
    if "fuzz" in groups:
        for product in PRODUCTS:
            peer = f"{product.role}={product.vendor}"
            steps.append(Step("fuzz", f"fuzz frames: {product.label}",
                              [*interop, "fuzz", "--frames", "--peer", peer, "--role", product.role, "--budget",
                               budget.fuzz, "--seed", str(FRAMES_SEED), *res], needs=[product.name],
                              finding_exit=True))
            steps.append(Step("fuzz", f"fuzz stateful: {product.label}",
                              [*interop, "fuzz", "--peer", peer, "--role", product.role, "--budget", budget.fuzz,
                               "--seed", str(STATEFUL_SEED), *res], needs=[product.name], finding_exit=True))
    if "bench" in groups:
        brokers = [by_name[n].vendor for n in products if by_name[n].role == "broker" and present.get(n) is None]
        # reference router vs qdrouterd: routing.py measures the qdrouterd it finds (and says when there is none)
        steps.append(Step("bench", "bench routing: reference router vs qdrouterd",
                          [*python, str(REPO / "bench" / "routing.py"), *budget.routing, *res],
                          needs=["reference-router"]))
        steps.append(Step("bench", f"bench broker: {', '.join(brokers) or 'no broker'}",
                          [*python, str(REPO / "bench" / "broker.py"), "--vendors", ",".join(brokers), *budget.broker,
                           *res], needs=["reference-broker"]))
        steps.append(Step("bench", f"bench network of brokers: {', '.join(brokers) or 'no broker'}",
                          [*python, str(REPO / "bench" / "network.py"), "--vendors", ",".join(brokers),
                           *budget.network, *res], needs=["reference-broker"]))
    if "matrix" in groups:
        steps.append(Step("matrix", f"matrix: {matrix}, {jobs} cells at once",
                          [*interop, "run", "--matrix", matrix, "-j", str(jobs), *res],
                          deadline_s=6 * 3600.0))
    if "report" in groups:
        steps.append(Step("report", "report", [*interop, "report", str(results)], deadline_s=1800.0))
    for step in steps:
        if step.group not in ("matrix", "report"):
            step.deadline_s = budget.deadline_s
        not_chosen = [n for n in step.needs if n not in products]
        absent = [(n, present.get(n)) for n in step.needs if n in products and present.get(n) is not None]
        if not_chosen:
            step.status, step.reason = "skipped", f"{', '.join(not_chosen)} not among --products"
        elif absent:
            step.status, step.reason = "skipped", "; ".join(f"{n}: {why}" for n, why in absent)
    return steps


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def run_step(step: Step, log: Path, env: dict[str, str]) -> None:
    """Run one step, its output into `log`; a step past its deadline is stopped (SIGTERM to its process group, then
    SIGKILL), never the night."""
    step.log = str(log)
    t0 = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        out.write(f"$ {' '.join(step.argv)}\n")
        out.flush()
        try:
            proc = subprocess.Popen(step.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=REPO, env=env, start_new_session=True)
        except OSError as exc:
            step.status, step.reason, step.wall_s = "failed", f"cannot start: {exc}", time.monotonic() - t0
            return
        try:
            code = proc.wait(timeout=step.deadline_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            step.exit_code = proc.returncode
            step.status, step.reason = "timeout", f"still running after {step.deadline_s:.0f} s: stopped"
            step.wall_s = time.monotonic() - t0
            return
    step.exit_code, step.wall_s = code, time.monotonic() - t0
    if code == 0:
        step.status = "passed"
    elif code == 1 and step.finding_exit:
        step.status, step.reason = "found", "the session found something (see its log and the report)"
    else:
        step.status, step.reason = "failed", f"exit status {code}"


def _stop(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(path: str) -> str:
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line), "")[:160]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="quick",
                        help="quick (a first run: 20 s fuzz sessions, short benchmarks) or nightly (5 min sessions, "
                             "the benchmarks' defaults); default quick")
    parser.add_argument("--only", metavar="GROUPS",
                        help=f"run only these step groups, comma-separated ({', '.join(GROUPS)}; default all)")
    parser.add_argument("--products", metavar="NAMES",
                        help="only these products, comma-separated (" + ", ".join(p.name for p in PRODUCTS)
                             + "; `reference` is both reference peers; default every one present)")
    parser.add_argument("--matrix", default="matrix.yaml", metavar="FILE", help="the matrix file (default matrix.yaml)")
    parser.add_argument("-j", "--jobs", type=_positive_int, default=2, metavar="N",
                        help="the matrix step's cells at once (default 2: each is a whole pairing; more for more "
                             "cores)")
    parser.add_argument("--results", metavar="DIR",
                        help="results folder every step writes into (default: $INTEROP_RESULTS, else results)")
    parser.add_argument("--list", action="store_true", help="print the steps and what is skipped, run nothing")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    budget = BUDGETS[args.budget]
    try:
        groups = parse_only(args.only)
        products = parse_products(args.products)
    except NightlyUsageError as exc:
        print(f"interop nightly: {exc}", file=sys.stderr)
        return 2
    results = Path(args.results or default_results_dir()).expanduser().resolve()
    present = probe_products(products)
    print(f"nightly: budget {args.budget}; results in {results}")
    for product in PRODUCTS:
        if product.name not in products:
            print(f"  {product.label:<36}not chosen (--products)")
        else:
            why = present[product.name]
            print(f"  {product.label:<36}{'present' if why is None else 'skipped: ' + why}")
    steps = plan(budget, groups, products, present, results, args.matrix, jobs=args.jobs)
    if args.list:
        for i, step in enumerate(steps, 1):
            print(f"[{i}/{len(steps)}] {step.name}" + (f"  (skipped: {step.reason})" if step.status == "skipped"
                                                       else f"  $ {' '.join(step.argv[1:])}"))
        return 0
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    folder = results / "nightly" / stamp
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != RUN_ID_ENV}  # each step is a run of its own
    env["INTEROP_RESULTS"] = str(results)
    env["PYTHONUNBUFFERED"] = "1"
    started, t0 = datetime.now(UTC), time.monotonic()

    def save() -> None:
        summary = {"started_at": started.isoformat(), "budget": args.budget, "results": str(results),
                   "products": {n: present.get(n) for n in products}, "groups": groups,
                   "wall_s": round(time.monotonic() - t0, 1), "steps": [asdict(s) for s in steps]}
        (folder / "steps.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")

    for i, step in enumerate(steps, 1):
        head = f"[{i}/{len(steps)}] {step.name}"
        if step.status == "skipped":
            print(f"{head}: skipped ({step.reason})", flush=True)
            continue
        print(f"{head} ... (elapsed {_clock(time.monotonic() - t0)})", flush=True)
        run_step(step, folder / f"{i:02d}-{_slug(step.name)}.log", env)
        note = f" - {step.reason}" if step.reason else ""
        print(f"{head}: {step.status} in {_clock(step.wall_s)} (elapsed {_clock(time.monotonic() - t0)}){note}; "
              f"last line: {_last_line(step.log)}", flush=True)
        save()
    save()
    print(f"nightly: {_clock(time.monotonic() - t0)} in all; step logs and steps.json in {folder}")
    print(f"{'step':<62}{'status':<9}{'wall':>8}")
    for step in steps:
        print(f"{step.name[:61]:<62}{step.status:<9}{_clock(step.wall_s) if step.status != 'skipped' else '':>8}")
    bad = [s for s in steps if s.status in ("failed", "found", "timeout")]
    if bad:
        print(f"nightly: {len(bad)} step(s) failed or found something: " + "; ".join(
            f"{s.name} ({s.status})" for s in bad), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="interop nightly", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
