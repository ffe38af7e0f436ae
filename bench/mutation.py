"""Mutation score of the reference peers: how many small, plausible bugs the suites catch.

    .venv/bin/python bench/mutation.py [--group router ...] [--sample N] [--seed S] [--out DIR]

A nightly job, not CI: every mutant costs one run of the group's tests (seconds when a case catches it, the
whole selection when none does). It uses Cosmic Ray (`pip install -e '.[mutation]'`) to list the mutants of
the behavioural modules of `reference/` (routing, outcomes, credit, journal; not config parsing or logging)
and runs each group's unit tests and suites, in that order with `-x`, against each mutant:

1. The checkout is copied to `OUT/tree` and every mutant is made there, never in the checkout. The reference
   peers the suites start as subprocesses import the mutated tree (PYTHONPATH), so a suite sees the bug.
2. A baseline run of each group's tests on the unmutated tree must pass, else the job stops (a red suite
   would "kill" every mutant).
3. `--sample N` draws N mutants per group at random (seeded, so a rerun draws the same ones), for a quick
   estimate; without it every mutant runs. Lines that only log, and type annotations (never evaluated:
   the modules use `from __future__ import annotations`), are left out: a mutant there changes nothing a
   peer does.
4. Each killing failure is then run again on the unmutated tree: a case that fails there too is flaky, and
   the mutants it "killed" are run once more, so a flaky case cannot inflate the score.
5. A survivor listed in `bench/mutation-equivalent.yaml` (its module, operator and changed line, with why
   no behaviour can tell it from the original) is counted as equivalent, not survived.
6. Results go to `OUT/<group>.sqlite` (Cosmic Ray's session: an interrupted job resumes where it stopped)
   and `OUT/summary.json`; the printed summary gives killed / survived / timeout per group and every
   survivor with its diff, for a developer to either strengthen a case or mark it equivalent.

Score = (killed + timeout) / (killed + timeout + survived), equivalent mutants left out. Timeouts count as
killed (a mutant that hangs a peer is caught by the case's deadline) but are listed apart.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.results import ResultWriter, current_run_id, default_results_dir, make_record, utc_now_iso  # noqa: E402

try:
    from cosmic_ray.commands import init as cosmic_init
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult
except ImportError:  # a one-line error, not a traceback: the extra is not installed by `make setup`
    sys.exit("bench/mutation.py needs Cosmic Ray: .venv/bin/pip install -e '.[mutation]'")


@dataclass(frozen=True)
class Group:
    modules: tuple[str, ...]
    tests: tuple[str, ...]  # unit tests first: they fail fastest


GROUPS = {
    # Address matching, distribution, outcomes, credit and priority, on one router and across routers.
    "router": Group(
        # router.py is the proton handler; the rules it hands events to are each a module of their own (issue 56)
        modules=("reference/router/addressing.py", "reference/router/distribution.py",
                 "reference/router/settlement.py", "reference/router/router.py", "reference/router/state.py",
                 "reference/router/connections.py", "reference/router/attachments.py", "reference/router/credit.py",
                 "reference/router/forwarding.py", "reference/router/annotations.py", "reference/router/sending.py",
                 "reference/router/outcomes.py", "reference/router/counters.py"),
        tests=("tests/test_addressing.py", "tests/test_router_logic.py", "tests/test_router_credit.py",
               "tests/test_router_state.py", "tests/test_router_connections.py", "tests/test_router_attachments.py",
               "tests/test_router_credit_rules.py", "tests/test_router_forwarding.py",
               "tests/test_router_annotations.py", "tests/test_router_sending.py", "tests/test_router_outcomes.py",
               "tests/test_router_counters.py",
               "tests/test_router_standin_broker.py", "suites/routing", "suites/mesh",
               # connections.py and attachments.py glue link routes in: they are advertised when a broker's
               # connection opens, and the far end of a routed link whose client is gone is detached
               "suites/linkroutes",
               "suites/fallback"),  # forwarding diverts to the fallback only when no consumer is reachable anywhere
    ),
    # The router network itself: link state, paths, mobile addresses, edge uplinks, connectors that redial.
    "router-network": Group(
        modules=("reference/router/network.py", "reference/router/interrouter.py", "reference/router/edge.py",
                 "reference/router/connectors.py"),
        tests=("tests/test_router_flooding.py", "tests/test_router_mesh_path.py", "tests/test_router_connectors.py",
               "suites/mesh",
               "suites/linkroutes",  # link routes are advertised across the network; their broker is redialled
               "suites/security/test_router_interrouter.py"),  # connectors that dial with TLS and SASL
    ),
    # Link routes, autolinks (waypoints) and fallback: the router in front of brokers.
    "router-brokers": Group(
        modules=("reference/router/linkroutes.py", "reference/router/autolinks.py"),
        tests=("tests/test_router_logic.py", "tests/test_router_standin_broker.py", "suites/linkroutes",
               "suites/brokered", "suites/fallback", "suites/faults",
               "suites/brokerconnections/test_peers.py"),
    ),
    # Store and forward, outcomes, redelivery, dead letters, TTL, the journal, transactions.
    "broker": Group(
        modules=("reference/broker/broker.py", "reference/broker/journal.py", "reference/broker/transactions.py",
                 "reference/broker/registry.py", "reference/broker/attachments.py", "reference/broker/intake.py",
                 "reference/broker/dispatch.py", "reference/broker/outcomes.py", "reference/broker/durability.py",
                 "reference/broker/mirror_store.py", "reference/broker/link_state.py", "reference/broker/model.py",
                 "reference/broker/messages.py"),
        tests=("tests/test_broker_logic.py", "tests/test_peek.py",
               "tests/test_broker_registry.py", "tests/test_broker_attachments.py", "tests/test_broker_intake.py",
               "tests/test_broker_dispatch.py", "tests/test_broker_outcomes.py", "tests/test_broker_durability.py",
               "tests/test_broker_mirror_store.py", "tests/test_broker_link_state.py", "tests/test_broker_messages.py",
               "tests/test_journal.py", "tests/test_broker_process.py",
               "suites/broker",
               "suites/network"),  # dispatch.py's rules for federated messages (forward, hops, give back)
    ),
    # Broker connections (senders, receivers, peers, redial and failover) and Artemis-form mirroring.
    "broker-connections": Group(
        modules=("reference/broker/connections.py", "reference/broker/mirror.py"),
        tests=("tests/test_mirror_wire.py", "tests/test_broker_connection_management.py", "suites/brokerconnections",
               "suites/security/test_broker_connections.py",
               # a federation is a broker connection too: connections.py checks its control link's answer
               "suites/network/test_forwarding.py"),
    ),
    # Networks of brokers: demand-driven forwarding, on Artemis's AMQP federation wire.
    "federation": Group(
        modules=("reference/broker/federation.py", "reference/broker/federation_wire.py"),
        tests=("tests/test_federation_wire.py", "suites/network", "suites/security/test_broker_network.py"),
    ),
    # The event loop both servers run on, and what guards it: SASL frame checks, TLS, users, permissions.
    "loop-security": Group(
        modules=("reference/loop.py", "reference/sasl_guard.py", "reference/security/sasl.py",
                 "reference/security/tls.py", "reference/security/users.py", "reference/router/security.py",
                 "reference/broker/authz.py", "reference/broker/access.py"),
        tests=("tests/test_engine_loop.py", "tests/test_loop_security.py", "tests/test_sasl_guard.py",
               "tests/test_broker_authz.py", "tests/test_router_security.py", "tests/test_broker_security_process.py",
               "suites/security", "suites/robustness"),
    ),
    # The fault proxy (Toxiproxy's API and toxics) that the fault suites stand on.
    "fault-proxy": Group(
        modules=("harness/faults/proxy.py", "harness/faults/toxics.py", "harness/faults/api.py"),
        tests=("tests/test_fault_proxy.py", "tests/test_toxiproxy_real.py", "suites/faults"),  # the real server too
    ),
}

TARGET = 0.95  # of non-equivalent mutants killed, per group (issue 34)
EQUIVALENT_FILE = ROOT / "bench" / "mutation-equivalent.yaml"
LOG_NAMES = ("log", "logger", "logging")
FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def copy_tree(out: Path) -> Path:
    """The checkout's tracked files, as they are now (uncommitted edits included), in a scratch tree."""
    tree = out / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    return tree


def test_command(group: Group, results: Path, tests: tuple[str, ...] | None = None) -> str:
    return " ".join([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "--timeout", "90",
                     "--results", str(results), *(tests or group.tests)])


def run_tests(command: str, tree: Path) -> tuple[bool, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(command.split(), cwd=tree, capture_output=True, text=True, env=os.environ)
    return proc.returncode == 0, proc.stdout + proc.stderr, time.monotonic() - t0


def log_call_lines(source: str) -> set[int]:
    """Every line of every logging call (`log.info(...)`, `logger.warning(...)`, `logging.debug(...)`), its
    continuation lines included: a mutant there changes only what is logged."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in LOG_NAMES):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def logging_only(tree: Path, module: str, line: int, cache: dict[str, set[int]]) -> bool:
    if module not in cache:
        cache[module] = log_call_lines((tree / module).read_text())
    return line in cache[module]


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) of every type annotation: arguments, return types, annotated assignments."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        found = []
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            found.append(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
        spans += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in found]
    return spans


def in_annotation(tree: Path, item, cache: dict[str, list]) -> bool:
    mutation = item.mutations[0]
    module = str(mutation.module_path)
    if module not in cache:
        cache[module] = annotation_spans((tree / module).read_text())
    start = tuple(mutation.start_pos)
    return any(begin <= start < end for begin, end in cache[module])


def prepare(db: WorkDB, tree: Path, group: Group, sample: int | None, seed: int) -> None:
    """List the mutants of the group's modules, then mark the ones this run leaves out as skipped."""
    cosmic_init([Path(m) for m in group.modules], db, {})
    cache: dict[str, set[int]] = {}
    spans: dict[str, list] = {}
    kept = []
    for item in db.work_items:
        mutation = item.mutations[0]
        if logging_only(tree, str(mutation.module_path), mutation.start_pos[0], cache):
            db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="logging only"))
        elif in_annotation(tree, item, spans):
            db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="annotation"))
        else:
            kept.append(item.job_id)
    if sample is not None and sample < len(kept):
        # Drawn from a stable order (job ids are new random ids each time), so a seed names the same mutants.
        order = {item.job_id: spec_key(item) for item in db.work_items}
        chosen = set(random.Random(seed).sample(sorted(kept, key=order.__getitem__), sample))
        for job_id in kept:
            if job_id not in chosen:
                db.set_result(job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not sampled"))


def spec_key(item) -> tuple:
    m = item.mutations[0]
    return str(m.module_path), tuple(m.start_pos), m.operator_name, m.occurrence


def forget_survivors(db: WorkDB, equivalents: list[dict], tree: Path) -> int:
    """Make every survived mutant pending again (after cases were added), except the equivalent ones and those
    in annotations; returns how many."""
    from cosmic_ray.work_db import WorkResultStorage  # Cosmic Ray's table: it has no call to drop one result

    spans: dict[str, list] = {}
    again = [item.job_id for item, result in db.completed_work_items
             if classify(result) == "survived" and not in_annotation(tree, item, spans)
             and not is_equivalent(item, result, equivalents)]
    with db._session_maker.begin() as session:
        session.query(WorkResultStorage).filter(WorkResultStorage.job_id.in_(again)).delete()
    return len(again)


def first_failure(output: str) -> str | None:
    match = FAILED_LINE.search(output)
    return match.group(1) if match else None


def classify(result: WorkResult) -> str:
    if result.worker_outcome == WorkerOutcome.SKIPPED:
        return "skipped"
    if result.worker_outcome == WorkerOutcome.NO_TEST:
        return "no-test"
    if result.test_outcome == TestOutcome.SURVIVED:
        return "survived"
    if result.test_outcome == TestOutcome.INCOMPETENT:
        return "incompetent"
    return "timeout" if result.output == "timeout" else "killed"


def describe(item, result: WorkResult | None = None) -> str:
    m = item.mutations[0]
    where = f"{m.module_path}:{m.start_pos[0]}"
    name = f" in {m.definition_name}" if m.definition_name else ""
    return f"{where}{name} {m.operator_name.split('/')[-1]}"


def execute(db: WorkDB, name: str, command: str, timeout: float, results: Path, times: Path) -> None:
    pending = db.pending_work_items
    for n, item in enumerate(pending, start=1):
        t0 = time.monotonic()
        result = mutate_and_test(item.mutations, command, timeout)
        db.set_result(item.job_id, result)
        with times.open("a") as f:  # the group's run time survives an interrupted session (--resume)
            f.write(json.dumps({"job": item.job_id, "s": round(time.monotonic() - t0, 1)}) + "\n")
        shutil.rmtree(results, ignore_errors=True)
        verdict = classify(result)
        killer = first_failure(result.output or "") if verdict == "killed" else None
        print(f"[{name} {n}/{len(pending)}] {verdict:<9} {describe(item)} ({time.monotonic() - t0:.0f} s)"
              + (f" by {killer}" if killer else ""), flush=True)


def recheck_kills(db: WorkDB, name: str, group: Group, tree: Path, timeout: float, results: Path) -> None:
    """Run each killing case on the unmutated tree; the mutants a flaky case killed are run again."""
    killers: dict[str, list] = {}
    for item, result in db.completed_work_items:
        if result is not None and classify(result) == "killed":
            killer = first_failure(result.output or "")
            if killer:
                killers.setdefault(killer, []).append(item)
    if not killers:
        return
    ok, output, _ = run_tests(test_command(group, results, tuple(killers)).replace(" -x", ""), tree)
    shutil.rmtree(results, ignore_errors=True)
    flaky = {k for k in killers if k in set(FAILED_LINE.findall(output))} if not ok else set()
    for killer in sorted(flaky):
        print(f"[{name}] {killer} fails on the unmutated tree too: its {len(killers[killer])} kill(s) run again")
        for item in killers[killer]:
            db.set_result(item.job_id, mutate_and_test(item.mutations, test_command(group, results), timeout))
            shutil.rmtree(results, ignore_errors=True)


def load_equivalents(path: Path = EQUIVALENT_FILE) -> list[dict]:
    """Known equivalent mutants: {module, operator, before, after, why}; lines compared without indentation."""
    if not path.exists():
        return []
    entries = yaml.safe_load(path.read_text()) or []
    for n, entry in enumerate(entries):
        missing = {"module", "operator", "before", "after", "why"} - set(entry)
        if missing:
            sys.exit(f"{path}: entry {n + 1}: expected the fields {', '.join(sorted(missing))}")
    return entries


def changed_lines(diff: str | None) -> tuple[str, str]:
    lines = (diff or "").splitlines()
    before = " ".join(x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---"))
    after = " ".join(x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++"))
    return before, after


def is_equivalent(item, result: WorkResult, equivalents: list[dict]) -> bool:
    mutation = item.mutations[0]
    operator = mutation.operator_name.split("/")[-1]
    before, after = changed_lines(result.diff)
    return any(e["module"] == str(mutation.module_path) and e["operator"] == operator
               and e["before"].strip() == before and e["after"].strip() == after for e in equivalents)


def module_digests(tree: Path, group: Group) -> dict[str, str]:
    return {m: hashlib.sha256((tree / m).read_bytes()).hexdigest() for m in group.modules}


def changed_modules(digests_file: Path, tree: Path, group: Group) -> list[str]:
    """The group's modules whose content differs from when its session was made (none known: none)."""
    if not digests_file.exists():
        return []
    then = json.loads(digests_file.read_text())
    now = module_digests(tree, group)
    return [m for m in group.modules if then.get(m) != now[m]]


def run_seconds(times: Path) -> float:
    """Seconds spent on the group's mutants so far, over every session (the last time of a mutant run again)."""
    if not times.exists():
        return 0.0
    last = {}
    for line in times.read_text().splitlines():
        with contextlib.suppress(ValueError, KeyError):
            entry = json.loads(line)
            last[entry["job"]] = float(entry["s"])
    return round(sum(last.values()), 1)


def write_records(results_dir: Path, summary: dict, groups: list[str], started_at: str) -> Path:
    """One result record per group run this time (suite `mutation`), for the report's mutation section and its
    trend: the score, the counts, the sample and the run time in `details`. A measurement, not a case: outcome
    `passed` when the group was judged, `error` when no mutant could be."""
    run_id = current_run_id()
    with ResultWriter(results_dir / run_id) as writer:
        for name in groups:
            s = summary[name]
            counts = s["counts"]
            details = {"mutation_group": name, "score": s["score"], "target": TARGET,
                       "sample": s.get("sample"), "seed": s.get("seed"), "modules": list(GROUPS[name].modules),
                       "killed": counts.get("killed", 0), "timeout": counts.get("timeout", 0),
                       "survived": counts.get("survived", 0), "equivalent": counts.get("equivalent", 0),
                       "incompetent": counts.get("incompetent", 0), "pending": s.get("pending", 0),
                       "baseline_s": s.get("baseline_s"), "run_s": s.get("run_s"),
                       "survivors": [v["mutant"] for v in s["survivors"]]}
            writer.write(make_record(
                run_id=run_id, case=f"MUTATION/{name}", suite="mutation", spec=[], topology=None,
                peers={"mutated": {"vendor": "reference", "version": None, "provider": "subprocess"}},
                outcome="passed" if s["score"] is not None else "error", duration_s=s.get("run_s") or 0.0,
                details=details,
                message=None if s["score"] is not None else "no mutant of the group was judged"))
        writer.write_run_meta({"run_id": run_id, "started_at": started_at, "ended_at": utc_now_iso(),
                               "bench": {"name": "mutation", "groups": groups}})
    return results_dir / run_id / "results.jsonl"


def summarize(db: WorkDB, equivalents: list[dict], tree: Path) -> dict:
    counts: dict[str, int] = {}
    survivors = []
    spans: dict[str, list] = {}
    logs: dict[str, set[int]] = {}
    for item, result in db.completed_work_items:
        verdict = classify(result)
        mutation = item.mutations[0]
        if verdict != "skipped" and (in_annotation(tree, item, spans) or logging_only(
                tree, str(mutation.module_path), mutation.start_pos[0], logs)):
            verdict = "skipped"  # a session listed before annotations and whole log calls were left out
        elif verdict == "survived" and is_equivalent(item, result, equivalents):
            verdict = "equivalent"
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict == "survived":
            survivors.append({"mutant": describe(item), "diff": result.diff})
    caught = counts.get("killed", 0) + counts.get("timeout", 0)
    judged = caught + counts.get("survived", 0)
    return {"counts": counts, "score": caught / judged if judged else None, "survivors": survivors,
            "pending": db.num_work_items - db.num_results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", action="append", choices=sorted(GROUPS),
                        help="a group of modules and the tests that judge them (default: all)")
    parser.add_argument("--sample", type=int, default=None, metavar="N", help="N mutants per group, drawn at random")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "mutation")
    parser.add_argument("--results", type=Path, default=Path(default_results_dir()),
                        help="where the run's result records go, one per group (default: $INTEROP_RESULTS or results)")
    parser.add_argument("--resume", action="store_true", help="continue the sessions in OUT instead of starting anew")
    parser.add_argument("--rerun-survivors", action="store_true",
                        help="with the sessions in OUT, run their survivors again against the checkout as it is now "
                             "(after adding cases)")
    args = parser.parse_args()
    if args.sample is not None and args.sample < 1:
        parser.error(f"--sample: expected a positive number of mutants, got {args.sample}")
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    args.results = args.results.resolve()  # before the chdir into the scratch tree
    started_at = utc_now_iso()
    if args.rerun_survivors:
        args.resume = True  # the same sessions, on a fresh copy of the checkout
    keep_tree = args.resume and not args.rerun_survivors and (args.out / "tree").is_dir()
    tree = args.out / "tree" if keep_tree else copy_tree(args.out)
    os.chdir(tree)  # Cosmic Ray mutates module paths relative to the working directory
    os.environ["PYTHONPATH"] = str(tree)  # the suites' peer subprocesses import the mutated tree
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant and the original can share an mtime second
    results = args.out / "suite-results"
    equivalents = load_equivalents()
    summary_file = args.out / "summary.json"
    # Groups not run this time keep their last figures (a rerun of one group must not drop the others').
    summary = json.loads(summary_file.read_text()) if args.resume and summary_file.exists() else {}
    not_judged = []

    def not_judging(name: str, why: str, baseline_s: float = 0.0) -> None:
        print(f"[{name}] {why}", flush=True)
        not_judged.append(name)
        summary[name] = {"counts": {}, "score": None, "survivors": [], "sample": args.sample, "seed": args.seed,
                         "baseline_s": round(baseline_s, 1), "run_s": 0.0}

    for name in args.group or list(GROUPS):
        group = GROUPS[name]
        db_path = args.out / f"{name}.sqlite"
        changed = changed_modules(args.out / f"{name}.modules.json", tree, group) if args.resume else []
        if changed and db_path.exists():
            not_judging(name, f"not resumed: {', '.join(changed)} changed since its session was made, and its "
                              "mutants are kept as line positions; run the group afresh (without --resume, or with "
                              "another --out)")
            continue
        command = test_command(group, results)
        ok, output, baseline_s = run_tests(command, tree)
        shutil.rmtree(results, ignore_errors=True)
        if not ok:  # a red suite would "kill" every mutant: this group is not judged, the others still are
            log = args.out / f"baseline-{name}.log"
            log.write_text(output)
            not_judging(name, f"the unmutated tree fails its tests ({first_failure(output)}), so no mutant can be "
                              f"judged: see {log}", baseline_s)
            continue
        timeout = 2 * baseline_s + 60
        print(f"[{name}] baseline passed in {baseline_s:.0f} s; a mutant may take {timeout:.0f} s", flush=True)
        with use_db(str(db_path), WorkDB.Mode.open if args.resume and db_path.exists() else WorkDB.Mode.create) as db:
            if not (args.resume and db.num_work_items):
                prepare(db, tree, group, args.sample, args.seed)
                (args.out / f"{name}.modules.json").write_text(json.dumps(module_digests(tree, group), indent=2))
            elif args.rerun_survivors:
                print(f"[{name}] {forget_survivors(db, equivalents, tree)} survivors to run again", flush=True)
            times = args.out / f"{name}.times.jsonl"
            execute(db, name, command, timeout, results, times)
            recheck_kills(db, name, group, tree, timeout, results)
            summary[name] = summarize(db, equivalents, tree) | {"baseline_s": round(baseline_s, 1),
                                                                "sample": args.sample, "seed": args.seed,
                                                                "run_s": run_seconds(times)}
        summary_file.write_text(json.dumps(summary, indent=2))  # after each group: a long job shows progress
    ran = args.group or list(GROUPS)
    records = write_records(args.results, summary, ran, started_at)
    print()
    print(f"{'group':<20}{'killed':>8}{'timeout':>9}{'survived':>10}{'equivalent':>12}{'other':>7}{'score':>8}"
          f"{'run s':>8}")
    for name, s in summary.items():
        c = s["counts"]
        other = sum(v for k, v in c.items() if k not in ("killed", "timeout", "survived", "equivalent", "skipped"))
        score = f"{s['score']:.0%}" if s["score"] is not None else "-"
        print(f"{name:<20}{c.get('killed', 0):>8}{c.get('timeout', 0):>9}{c.get('survived', 0):>10}"
              f"{c.get('equivalent', 0):>12}{other:>7}{score:>8}{s.get('run_s') or 0:>8.0f}")
    for name, s in summary.items():
        for survivor in s["survivors"]:
            print(f"\nsurvived ({name}): {survivor['mutant']}")
            print("\n".join(line for line in (survivor["diff"] or "").splitlines()
                            if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))))
    print(f"\nsessions and summary.json in {args.out}; result records: {records}")
    if not_judged:
        print("not judged (their tests fail on the unmutated tree, or their session is stale):", ", ".join(not_judged))
    return 1 if not_judged else 0


if __name__ == "__main__":
    sys.exit(main())
