"""`interop fuzz`: start the peers of one role, run a seeded, time-boxed fuzzing session, write its records.

    interop fuzz [--peer ROLE=VENDOR ...] [--role ROLE] [--budget 5m] [--seed N] [--break FAULT ...]
    interop fuzz --frames [--peer ROLE=VENDOR ...] [--budget 5m] [--cases N] [--family NAME ...] [--seed N]
                 [--secured]
    interop fuzz --configs [--peer router=qdrouterd | --peer broker=artemis] [--budget 5m] [--seed N]
                 [--break [ROLE[=VENDOR]:]FAULT ...]

The stateful mode (default) runs Hypothesis programs of client operations through a topology with the chosen
vendor in the role under fuzz; when that vendor is not the reference, the same topology also starts with
reference peers and every program runs against both (differential; `--no-differential` turns it off). The
frames mode sends hostile byte streams to the peer's client listener while a sentinel client keeps traffic
flowing. Either way the peers start through harness.peers.launch, as for `interop run`, and the session's
records go to `<results>/<run_id>/results.jsonl`, where `interop report` finds them. The configs mode
(harness/fuzz/configs.py) starts no topology: it gives generated qdrouterd.conf or broker.xml files to the
reference and to the real product (qdrouterd, Artemis) and reports the files they judge differently.

Exit status: 0 nothing found, 1 something found (or a peer could not start, or the product of --configs is
not here: then a `skipped` session record says why), 2 a usage mistake.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
from pathlib import Path

from ..results import ResultWriter, current_run_id, default_results_dir, make_record, utc_now_iso
from .recorded import RecordedFindingsError, recorded_findings
from .session import FuzzTarget, Progress, SessionReport, parse_budget, target_for

# Topology names (harness.topology.topology_path), as stateful.TOPOLOGIES
FRAMES_TOPOLOGIES = {"router": "single-router", "broker": "single-broker"}
# --secured: a router behind SASL PLAIN whose listener also takes TLS (issue 20)
SECURED_TOPOLOGIES = {"router": "security-router-fuzz"}
DEFAULT_BUDGET = "5m"


def add_arguments(parser: argparse.ArgumentParser, break_faults: list[str]) -> None:
    from .config_breaks import FILE_FAULTS

    parser.add_argument("--frames", action="store_true",
                        help="hostile frames on raw TCP instead of stateful client programs")
    parser.add_argument("--configs", action="store_true",
                        help="configuration differential: generated qdrouterd.conf / broker.xml files, each read by "
                             "the reference and by the real product (qdrouterd, artemis); a different verdict is a "
                             "finding")
    parser.add_argument("--peer", action="append", default=[], metavar="ROLE=VENDOR",
                        help="vendor per role, as for 'interop run' (repeatable or comma-separated)")
    parser.add_argument("--role", choices=["router", "broker"],
                        help="the role under fuzz (default: the role of the first --peer, else router)")
    parser.add_argument("--budget", default=DEFAULT_BUDGET, metavar="DURATION",
                        help=f"how long the session runs, e.g. 90s, 10m (default {DEFAULT_BUDGET})")
    parser.add_argument("--seed", type=int, metavar="N",
                        help="seed of the session (default: a random one, printed so the session can be rerun)")
    parser.add_argument("--cases", type=int, metavar="N",
                        help="frames mode: stop after N hostile cases even if budget is left")
    parser.add_argument("--family", action="append", default=[], metavar="NAME",
                        help="frames mode: only these case families (repeatable; default all)")
    parser.add_argument("--secured", action="store_true",
                        help="frames mode: a router behind SASL PLAIN that also takes TLS; adds the TLS families")
    parser.add_argument("--no-differential", dest="differential", action="store_false",
                        help="stateful mode: do not also run each program against reference peers")
    parser.add_argument("--break", dest="breaks", action="append", default=[], metavar="[ROLE[=VENDOR]:]FAULT",
                        help="start matching peers with a faulty setting, to see the session catch it "
                             f"(faults: {', '.join(break_faults)}; with --configs: {', '.join(FILE_FAULTS)}); "
                             "repeatable")
    parser.add_argument("--results", default=default_results_dir(), metavar="DIR",
                        help="results folder; the session writes DIR/<run_id>/results.jsonl "
                             "(default: $INTEROP_RESULTS, else results)")


class FuzzUsageError(Exception):
    """A user mistake, reported by the caller as one line with exit status 2."""


def run(args: argparse.Namespace, choices: dict[str, str], explicit_roles: list[str], results_dir: Path) -> int:
    from ..breaks import BreakError, describe, parse_break
    from ..peers.base import PeerStartError, PeerUnavailable
    from ..peers.launch import start_topology
    from ..topology import TopologyError, load_topology, topology_path

    try:
        budget_s = parse_budget(args.budget)
    except ValueError as exc:
        raise FuzzUsageError(f"--{exc}") from None
    if args.cases is not None and args.cases < 1:
        raise FuzzUsageError(f"--cases {args.cases}: expected a whole number >= 1")
    role = args.role or (explicit_roles[0] if explicit_roles else "router")
    if args.configs:
        return run_configs(args, role, choices, budget_s, results_dir)
    mode = "frames" if args.frames else "stateful"
    module = _mode_module(mode)
    if args.secured and (mode != "frames" or role != "router"):
        raise FuzzUsageError("--secured: only with --frames against a router")
    if args.secured:
        from ..peers.vendors import vendor

        chosen = choices.get("router", "reference")
        if "sasl.plain" not in vendor(chosen, "router").capabilities:
            raise FuzzUsageError(f"--secured: router {chosen} cannot check SASL PLAIN (no capability sasl.plain), "
                                 "which the secured target requires")
    if args.family:
        known_families = (module.FAMILIES + module.OPT_IN_FAMILIES + (module.TLS_FAMILIES if args.secured else [])
                          if mode == "frames" else [])
        unknown = [f for f in args.family if f not in known_families] if mode == "frames" else args.family
        if unknown:
            known = ", ".join(known_families) if mode == "frames" else "none (families are for --frames)"
            raise FuzzUsageError(f"--family {unknown[0]}: unknown (expected one of: {known})")
    try:
        breaks = [parse_break(b) for b in args.breaks]
    except BreakError as exc:
        raise FuzzUsageError(str(exc)) from None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    topology_file = (SECURED_TOPOLOGIES if args.secured else FRAMES_TOPOLOGIES if mode == "frames"
                     else module.TOPOLOGIES)[role]
    try:
        topology = load_topology(topology_path(topology_file))
    except TopologyError as exc:
        print(f"interop fuzz: {exc}", file=sys.stderr)
        return 1
    node = next((n for n, spec in topology.nodes.items() if spec.role == role), None)
    if node is None:
        raise FuzzUsageError(f"--role {role}: topology {topology_file} has no {role}")

    run_id = current_run_id()
    folder = results_dir / run_id
    label = f"{mode} {role}={choices.get(role, 'reference')} seed {seed}"
    print(f"interop fuzz: {label}, budget {args.budget}; rerun with --seed {seed}", file=sys.stderr)
    started_at = utc_now_iso()
    bad_expected = None
    with contextlib.ExitStack() as stack:
        try:
            running = start_topology(topology, choices, breaks=breaks)
            stack.callback(running.stop)
            reference = None
            if mode == "stateful" and args.differential and choices.get(role, "reference") != "reference":
                reference_running = start_topology(topology, {r: "reference" for r in choices})
                stack.callback(reference_running.stop)
                reference = target_for(reference_running, role)
        except (PeerStartError, PeerUnavailable) as exc:
            print(f"interop fuzz: {exc}", file=sys.stderr)
            return 1
        target = target_for(running, role)
        if args.secured:
            _secure(target, topology.node(node))
        progress = Progress(label, budget_s, "cases" if mode == "frames" else "programs")
        # Reproducers and crasher entries go under <run folder>/fuzz/ (the stateful mode adds the fuzz/ itself).
        if mode == "frames":
            report = module.run_session(target, seed=seed, budget_s=budget_s, max_cases=args.cases,
                                        progress=progress, out_dir=folder / "fuzz", families=args.family or None)
        else:
            report = module.run_session(target, seed=seed, budget_s=budget_s, progress=progress,
                                        out_dir=folder, reference=reference)
        if not breaks:  # a deliberately broken peer is not the product its differences were recorded for
            version = (target.peer_records.get(role) or {}).get("version")
            try:
                report.recorded = recorded_findings(target.vendor, version, mode)
            except RecordedFindingsError as exc:  # the session's records are still written below, then exit 2
                bad_expected = str(exc)
        with ResultWriter(folder) as writer:
            for record in report.records(target):
                if breaks:  # the field the pytest plugin writes for a cell's breaks: the report reads both alike
                    record["config_fault"] = " ".join(str(b) for b in breaks)
                writer.write(record)
            writer.write_run_meta({"run_id": run_id, "started_at": started_at, "ended_at": utc_now_iso(),
                                   "peers": {r: [v] for r, v in choices.items()},
                                   "breaks": [str(b) for b in breaks], "broken_nodes": describe(running.breaks),
                                   "fuzz": {"mode": mode, "role": role, "seed": seed, "budget_s": budget_s,
                                            "topology": topology.name}})
        running.save_logs(folder / "peer-logs" / f"fuzz-{mode}")
    print(format_report(report, folder), file=sys.stderr)
    if bad_expected:
        print(f"interop fuzz: {bad_expected} (every finding above counted as new)", file=sys.stderr)
        return 2
    return 1 if report.new_findings else 0


def run_configs(args: argparse.Namespace, role: str, choices: dict[str, str], budget_s: float,
                results_dir: Path) -> int:
    """`interop fuzz --configs`: the configuration differential of the reference against qdrouterd or Artemis."""
    from ..breaks import BreakError
    from .config_breaks import parse_file_break
    from .config_judges import QdrouterdJudge, ReferenceJudge
    from .configs import PRODUCTS
    from .configs import run_session as run_configs_session

    if args.frames or args.secured or args.cases or args.family:
        raise FuzzUsageError("--configs: not with --frames, --secured, --cases or --family")
    product = choices.get(role) if role in choices and choices[role] != "reference" else PRODUCTS[role]
    if product != PRODUCTS[role]:
        raise FuzzUsageError(f"--configs: the {role} differential compares the reference with {PRODUCTS[role]}, "
                             f"not {product}")
    try:
        breaks = [parse_file_break(b) for b in args.breaks]
    except BreakError as exc:
        raise FuzzUsageError(str(exc)) from None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    run_id = current_run_id()
    folder = results_dir / run_id
    label = f"configs {role}: reference vs {product} seed {seed}"
    print(f"interop fuzz: {label}, budget {args.budget}; rerun with --seed {seed}", file=sys.stderr)
    started_at = utc_now_iso()
    if role == "router":
        judge = QdrouterdJudge()
    else:
        from .artemis_check import ArtemisJudge

        folder.mkdir(parents=True, exist_ok=True)
        judge = ArtemisJudge(folder / "artemis-config-check.log")
    reference = ReferenceJudge(role)
    target = FuzzTarget(role=role, vendor=product, host="", port=0, peer=None, topology="config-files",
                        peer_records={role: {"vendor": product, "version": judge.version or "unknown",
                                             "provider": "native"}})
    meta = {"run_id": run_id, "started_at": started_at, "peers": {role: [product]},
            "breaks": [str(b) for b in breaks], "fuzz": {"mode": "configs", "role": role, "seed": seed,
                                                          "budget_s": budget_s}}
    why = judge.unavailable()
    if why is not None:
        print(f"interop fuzz: {product} is not available here, session skipped: {why}", file=sys.stderr)
        with ResultWriter(folder) as writer:
            writer.write(make_record(case="FUZZ-CONFIGS", outcome="skipped", duration_s=0.0, suite="fuzz",
                                     spec=[], topology=target.topology, peers=target.peer_records,
                                     details={"mode": "configs", "seed": seed}, message=why))
            writer.write_run_meta({**meta, "ended_at": utc_now_iso()})
        return 1
    progress = Progress(label, budget_s, "cases")
    try:
        report = run_configs_session(role, reference, judge, seed=seed, budget_s=budget_s, progress=progress,
                                     out_dir=folder / "fuzz", breaks=breaks)
    finally:
        reference.close()
        judge.close()
    with ResultWriter(folder) as writer:
        for record in report.records(target):
            if breaks:
                record["config_fault"] = " ".join(str(b) for b in breaks)
            writer.write(record)
        writer.write_run_meta({**meta, "ended_at": utc_now_iso()})
    print(format_report(report, folder), file=sys.stderr)
    return 1 if report.findings else 0


def _mode_module(mode: str):
    if mode == "frames":
        from . import frames
        return frames
    from . import stateful
    return stateful


def _secure(target: FuzzTarget, node) -> None:
    """The secured target's clients authenticate as the topology's first user, with PLAIN over plain TCP."""
    from ..clients import ClientSecurity

    user, password = next(iter(node.users.items()))
    target.security = ClientSecurity(mechanism="PLAIN", user=user, password=password)
    target.tls = node.access.tls is not None


def format_report(report: SessionReport, folder: Path) -> str:
    unit = "programs" if report.mode == "stateful" else "cases"
    lines = [f"fuzz {report.mode}: {report.executed} {unit} in {report.duration_s:.0f}s, seed {report.seed}: "
             + (f"{len(report.findings)} distinct failure(s)" if report.findings else "nothing found")]
    if recorded := [f for f in report.findings if f.signature in report.recorded]:
        lines[0] += (f", {len(recorded)} of them recorded differences of the product (its "
                     "harness/vendors/<vendor>/expected.yaml, `fuzz:`): exit 1 only for the others")
    for finding in report.findings:
        known = " [recorded]" if finding.signature in report.recorded else ""
        lines.append(f"  {finding.signature} ({finding.kind}){known}: {finding.message}")
        if finding.reproducer:
            lines.append(f"    reproducer: {finding.reproducer}")
        if "file_text" in finding.evidence:  # a config file: the reproducer is the file, printed whole
            lines.append("    file:")
            lines.extend(f"      | {line}" for line in finding.evidence["file_text"].splitlines())
    if report.figures:
        shown = ", ".join(f"{k} {v}" for k, v in report.figures.items() if not isinstance(v, (dict, list)))
        if shown:
            lines.append(f"  figures: {shown}")
        if report.figures.get("known"):  # configs: recorded differences met, by id (harness/fuzz/config_known.py)
            lines.append("  recorded differences: " + ", ".join(f"{k} {v}" for k, v in report.figures["known"].items()))
    lines.append(f"results: {folder / 'results.jsonl'}")
    return "\n".join(lines)
