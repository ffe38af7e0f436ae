"""Message routing, side by side in one run: the reference router, a qdrouterd found on PATH, and the direct
client-to-client ceiling, with Python clients and with C clients.

    .venv/bin/python bench/routing.py [--messages N] [--repeats R] [--clients python,c]
                                      [--scenario NAME ...] [--isolate] [--router-cpu F] [--results DIR]

Scenarios (100-byte messages, 1 sender, window 1000): anycast unsettled, anycast pre-settled, multicast to 2
receivers, and anycast across a 2-router mesh (producer on R1, consumer on R2). Each client is a process of
its own (bench/clients/): throughput is messages over the time from the sender's first message to the last
receiver's last one (and, unsettled, the sender's last outcome); latency is send-to-receive on one clock.

The 2 cores are shared with the clients and whatever else runs, so only ratios taken in one run mean
anything: every repeat runs every vendor in turn, the order alternating between repeats, and the table gives
medians and the ratio reference/qdrouterd per scenario and client stack. With --results DIR it writes one
result record per scenario, vendor and client stack (suite "bench") into DIR/<run_id>/.

`--isolate` keeps the load generator off the routers' cores, as a benchmark of a system under test usually
does: every client runs on the first CPU this process may use, every router process (all its threads) on the
others. Without it, a router that spends more CPU per message takes that CPU from the clients it is measured
with, so on a small machine the Python clients' ceiling, not the router, decides most of the ratio. The two
routers of the mesh share the router CPUs. The direct ceiling then has one CPU for both clients.

`--router-cpu F` (implies --isolate, needs root) gives every router process a CPU budget of its own, F CPUs
(bench/cpu_budget.py), so that a router has the same capacity alone and in the mesh, as on hosts of one
size. Without it, on 2 cores the two mesh routers share the one router CPU that a single router has to itself,
and the mesh/single ratio is about 0.5 for any router whose hop costs what a single router does (qdrouterd
included): that compares CPUs, not mesh paths. F at most (router CPUs) / 2 keeps the mesh's routers from
competing; records of such a run carry `+cpuF` in their scenario name and `details.router_cpu`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.clients import stacks
from bench.cpu_budget import BudgetUnavailable, CpuBudget
from bench.figures import process_cpu_s
from harness.peers.base import PeerStartError, PeerUnavailable
from harness.peers.launch import start_topology
from harness.results import ResultWriter, current_run_id, make_record, utc_now_iso
from harness.topology import load_topology, topology_path
from harness.ports import free_port

VENDORS = ("reference", "qdrouterd", "direct")
SIZE = 100
WINDOW = 1000


@dataclass(frozen=True)
class Scenario:
    name: str
    topology: str
    consumer_client: str  # the topology's client name the receivers attach to
    prefix: str
    receivers: int = 1
    presettled: bool = False
    direct: bool = True  # has a client-to-client ceiling (one receiver only)


SCENARIOS = (
    Scenario("anycast-unsettled", "single-router", "consumer", "balanced.bench"),
    Scenario("anycast-presettled", "single-router", "consumer", "balanced.bench", presettled=True),
    Scenario("multicast-x2", "single-router", "consumer", "multicast.bench", receivers=2, direct=False),
    Scenario("mesh-anycast", "two-router-mesh", "far", "balanced.bench", direct=False),
)


@dataclass
class Sample:
    msgs_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_s_per_1000: float | None
    delivered: float = 1.0  # the fraction that arrived (below 1 only pre-settled)


@dataclass
class Cell:
    """Every repeat of one (scenario, vendor, client stack)."""

    samples: list[Sample] = field(default_factory=list)
    error: str | None = None
    duration_s: float = 0.0  # wall time of its passes, for the records

    def median(self, name: str) -> float | None:
        values = [getattr(s, name) for s in self.samples if getattr(s, name) is not None]
        return statistics.median(values) if values else None


_addresses = itertools.count()


def run_once(scenario: Scenario, stack: str, n: int, producer_url: str | None, consumer_url: str | None,
             router_pids: list[int]) -> Sample:
    """One pass: receivers first (attached), then the sender; returns the figures."""
    address = f"{scenario.prefix}.{next(_addresses)}"
    option = "presettled" if scenario.presettled else "unsettled"
    clients = []
    try:
        if producer_url is None:  # direct: the receiver listens, the sender dials it
            port = free_port()
            receivers = [stacks.start(stack, "recv", f"127.0.0.1:{port}", address, n, SIZE, str(WINDOW),
                                      listen=True)]
            clients += receivers
            receivers[0].first_line("listening", 30)
            sender_at = f"127.0.0.1:{port}"
        else:
            receivers = [stacks.start(stack, "recv", _hostport(consumer_url), address, n, SIZE, str(WINDOW))
                         for _ in range(scenario.receivers)]
            clients += receivers
            for receiver in receivers:
                receiver.first_line("ready", 30)
            sender_at = _hostport(producer_url)
        cpu0 = process_cpu_s(router_pids)
        sender = stacks.start(stack, "send", sender_at, address, n, SIZE, option)
        clients.append(sender)
        sent = sender.report(300)
        got = [r.report(300) for r in receivers]
        cpu = process_cpu_s(router_pids) - cpu0
    finally:
        for client in clients:
            client.kill()
    received = min(g["received"] for g in got)
    # Pre-settled is at-most-once: a router may drop some (qdrouterd does under load); the rate counts those
    # that arrived. Unsettled, every message must arrive and be settled.
    if not scenario.presettled and (received != n or sent["settled"] != n):
        raise stacks.ClientError(f"receivers got {[g['received'] for g in got]} of {n} each, the sender saw "
                                 f"{sent['settled']} outcomes")
    if received == 0:
        raise stacks.ClientError(f"no message of {n} arrived")
    end = max([g["last_ns"] for g in got] + ([sent["end_ns"]] if not scenario.presettled else []))
    elapsed = (end - sent["start_ns"]) / 1e9
    return Sample(msgs_per_s=received / elapsed, p50_ms=max(g["p50_ms"] for g in got),
                  p99_ms=max(g["p99_ms"] for g in got), cpu_s_per_1000=cpu / n * 1000 if router_pids else None,
                  delivered=received / n)


def _hostport(url: str) -> str:
    return url.split("://", 1)[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000, help="messages per pass (default 20000)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats (default 3)")
    parser.add_argument("--clients", default="python,c", help="client stacks, comma-separated (python, c)")
    parser.add_argument("--scenario", action="append", help="run only these scenarios (repeatable)")
    parser.add_argument("--isolate", action="store_true",
                        help="clients on the first CPU, routers on the others (see the module's doc)")
    parser.add_argument("--router-cpu", type=float, metavar="F",
                        help="a CPU budget of F CPUs for every router process (implies --isolate; see the doc)")
    parser.add_argument("--results", help="write result records into DIR/<run_id>/")
    args = parser.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    if args.router_cpu is not None:
        args.isolate = True
    if args.isolate and len(cpus) < 2:
        parser.error(f"--isolate needs 2 CPUs or more; this process may use {len(cpus)}")
    names = {s.name for s in SCENARIOS}
    wanted = args.scenario or [s.name for s in SCENARIOS]
    bad = [w for w in wanted if w not in names]
    if bad:
        parser.error(f"unknown scenario {bad[0]!r}: expected one of {', '.join(sorted(names))}")
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if not clients or any(c not in stacks.STACKS for c in clients):
        parser.error(f"--clients: expected a comma list of {', '.join(stacks.STACKS)}, got {args.clients!r}")
    if args.messages <= 0 or args.repeats <= 0:
        parser.error("--messages and --repeats must be > 0")
    scenarios = [s for s in SCENARIOS if s.name in wanted]
    budget = None
    if args.router_cpu is not None:
        try:
            budget = CpuBudget.create(args.router_cpu)
        except BudgetUnavailable as exc:
            parser.error(f"--router-cpu: {exc}")
        if args.router_cpu > (len(cpus) - 1) / 2:
            print(f"note: --router-cpu {args.router_cpu:g} is more than half the {len(cpus) - 1} router CPU(s): "
                  "the mesh's two routers will compete for it", file=sys.stderr)
    # SIGTERM ends the run through the `finally` below, which stops the routers it started: Python's default for
    # the signal ends the process at once and left them (and the clients) running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench/routing.py: terminated"))
    started_at = utc_now_iso()
    running: dict = {}
    cells: dict[tuple, Cell] = {}
    versions: dict[str, str] = {}
    try:
        for topo in sorted({s.topology for s in scenarios}):
            for vendor in ("reference", "qdrouterd"):
                try:
                    rt = start_topology(load_topology(topology_path(topo)), {"router": vendor})
                    running[(topo, vendor)] = rt
                    versions[vendor] = next(iter(rt.peers.values())).info.version
                except (PeerUnavailable, PeerStartError) as exc:
                    running[(topo, vendor)] = str(exc).splitlines()[0]
        if args.isolate:  # the routers run already: place them, then this process, whose children the clients are
            _place_routers(running, set(cpus[1:]), budget)
            os.sched_setaffinity(0, {cpus[0]})
        print(f"{args.messages} x {SIZE}-byte messages per pass, window {WINDOW}, {args.repeats} alternating "
              f"repeats; clients {', '.join(clients)}"
              + (f"; clients on CPU {cpus[0]}, routers on CPU {','.join(map(str, cpus[1:]))}" if args.isolate
                 else "")
              + (f"; every router process limited to {args.router_cpu:g} CPU" if budget else ""), flush=True)
        for repeat in range(args.repeats):
            order = VENDORS if repeat % 2 == 0 else tuple(reversed(VENDORS))
            for scenario in scenarios:
                for stack in clients:
                    for vendor in order:
                        if vendor == "direct" and not scenario.direct:
                            continue
                        cell = cells.setdefault((scenario.name, vendor, stack), Cell())
                        _run_cell(cell, scenario, vendor, stack, args.messages, running)
            print(f"repeat {repeat + 1} of {args.repeats} done", flush=True)
    finally:
        for rt in running.values():
            if not isinstance(rt, str):
                rt.stop()
        if budget is not None:
            budget.close()
    _print_table(scenarios, clients, cells)
    if args.results:
        _write_records(Path(args.results), scenarios, clients, cells, versions, args, started_at)
    return 0


def _place_routers(running: dict, cpus: set[int], budget: CpuBudget | None) -> None:
    """Every router process onto the router CPUs, and under its own CPU budget when there is one."""
    for (topo, vendor), rt in running.items():
        if isinstance(rt, str):  # a vendor that did not start
            continue
        for name, peer in rt.peers.items():
            for pid in peer.pids:
                pin_process(pid, cpus)
                if budget is None:
                    continue
                try:
                    budget.limit(pid, f"{topo}-{vendor}-{name}-{pid}")
                except OSError as exc:  # the caller's `finally` stops the routers
                    sys.exit(f"bench/routing.py: --router-cpu: cannot limit {vendor} router {name} (pid {pid}): {exc}")


def pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` onto `cpus` (qdrouterd's worker threads exist before it is pinned, and a
    thread's affinity is its own)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
            os.sched_setaffinity(int(task.name), cpus)


def _run_cell(cell: Cell, scenario: Scenario, vendor: str, stack: str, n: int, running: dict) -> None:
    if cell.error:
        return
    t0 = time.monotonic()
    try:
        if vendor == "direct":
            cell.samples.append(run_once(scenario, stack, n, None, None, []))
            return
        rt = running[(scenario.topology, vendor)]
        if isinstance(rt, str):
            raise stacks.ClientError(rt)
        pids = [pid for peer in rt.peers.values() for pid in peer.pids]
        cell.samples.append(run_once(scenario, stack, n, rt.client_url("producer"),
                                     rt.client_url(scenario.consumer_client), pids))
    except (stacks.ClientError, OSError, KeyError) as exc:
        cell.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        cell.duration_s += time.monotonic() - t0


def _ratio(cells: dict, scenario: str, stack: str) -> float | None:
    ref, qdr = cells.get((scenario, "reference", stack)), cells.get((scenario, "qdrouterd", stack))
    if not ref or not qdr or not ref.samples or not qdr.samples:
        return None
    return ref.median("msgs_per_s") / qdr.median("msgs_per_s")


def _print_table(scenarios, clients, cells) -> None:
    print(f"\n{'scenario':<20}{'clients':<8}{'vendor':<11}{'msgs/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'cpu s/1k':>10}{'ref/qdr':>9}")
    for scenario in scenarios:
        for stack in clients:
            for vendor in VENDORS:
                cell = cells.get((scenario.name, vendor, stack))
                if cell is None:
                    continue
                if cell.error:
                    print(f"{scenario.name:<20}{stack:<8}{vendor:<11}  error: {cell.error}")
                    continue
                cpu = cell.median("cpu_s_per_1000")
                ratio = _ratio(cells, scenario.name, stack) if vendor == "reference" else None
                print(f"{scenario.name:<20}{stack:<8}{vendor:<11}{cell.median('msgs_per_s'):>10.0f}"
                      f"{cell.median('p50_ms'):>9.2f}{cell.median('p99_ms'):>9.2f}"
                      f"{'' if cpu is None else f'{cpu:.3f}':>10}{'' if ratio is None else f'{ratio:.2f}':>9}")


def _write_records(results: Path, scenarios, clients, cells, versions, args, started_at) -> None:
    run_id = current_run_id()
    with ResultWriter(results / run_id) as writer:
        for scenario in scenarios:
            for stack in clients:
                for vendor in VENDORS:
                    cell = cells.get((scenario.name, vendor, stack))
                    if cell is None:
                        continue
                    # an isolated run's figures are another measurement: its own scenario name keeps them apart
                    name = scenario.name + ("+isolated" if args.isolate else "") \
                        + (f"+cpu{args.router_cpu:g}" if args.router_cpu is not None else "")
                    details = {"bench": "routing", "scenario": name, "clients": stack,
                               "isolated": bool(args.isolate), "router_cpu": args.router_cpu,
                               "repeats": len(cell.samples), "ratio_to": "qdrouterd",
                               "ratio": _ratio(cells, scenario.name, stack) if vendor == "reference" else None}
                    if cell.samples:
                        details.update(msgs_per_s=cell.median("msgs_per_s"), p50_ms=cell.median("p50_ms"),
                                       p99_ms=cell.median("p99_ms"))
                        details["delivered"] = min(s.delivered for s in cell.samples)
                        if cell.median("cpu_s_per_1000") is not None:
                            details["cpu_s_per_1000"] = cell.median("cpu_s_per_1000")
                    peers = {"router": {"vendor": vendor, "version": versions.get(vendor, ""),
                                        "provider": "native" if vendor == "qdrouterd" else "subprocess"}} \
                        if vendor != "direct" else {}
                    writer.write(make_record(
                        run_id=run_id, case=f"BENCH-routing/{name}/{vendor}/{stack}", suite="bench",
                        spec=[], topology=None if vendor == "direct" else scenario.topology, peers=peers,
                        outcome="error" if cell.error else "passed", duration_s=round(cell.duration_s, 3),
                        details=details, message=cell.error))
        writer.write_run_meta({"run_id": run_id, "started_at": started_at, "ended_at": utc_now_iso(),
                               "peers": {"router": list(VENDORS)},
                               "bench": {"name": "routing", "messages": args.messages, "repeats": args.repeats,
                                         "clients": clients, "size": SIZE, "window": WINDOW,
                                         "isolated": bool(args.isolate), "router_cpu": args.router_cpu}})
    print(f"result records: {results / run_id / 'results.jsonl'}")


if __name__ == "__main__":
    sys.exit(main())
