"""Figures the benchmark scripts compute alike: a percentile of a sample, and the CPU time of processes.

Imported by the scripts under bench/ (each puts the repository root on sys.path first), so that every table
quotes its p50/p99 and its CPU per message the same way.
"""

from __future__ import annotations

import os
import resource


def percentile(values: list[float], q: float) -> float:
    """The value at fraction `q` (0..1) of the sorted sample: nearest rank, no interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def process_cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of live processes (0 for one that is gone)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def own_cpu_s() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_bench_records(results: str, bench: str, rows: list[dict], meta: dict, started_at: str) -> None:
    """Result records of one benchmark run into `results`/<run_id>/ (suite "bench", as bench/routing.py writes
    them): one per row, case `BENCH-<bench>/<scenario>/<vendor>/<clients>`. A row: scenario, vendor, clients, peer
    (role, vendor, version, provider, or None), the figures (msgs_per_s, p50_ms, p99_ms, cpu_s_per_1000, repeats,
    anything else goes into details too), duration_s and error. The report compares each vendor's msgs/s with the
    reference's of the same benchmark, scenario and clients (reports/job/tables/bench.py `benchmarks`)."""
    from pathlib import Path

    from harness.results import ResultWriter, current_run_id, make_record, utc_now_iso

    run_id = current_run_id()
    folder = Path(results) / run_id
    with ResultWriter(folder) as writer:
        for row in rows:
            row = dict(row)
            scenario, vendor, clients = row.pop("scenario"), row.pop("vendor"), row.pop("clients", "python")
            peer, error, duration = row.pop("peer", None), row.pop("error", None), row.pop("duration_s", 0.0)
            peers = {} if peer is None else {peer["role"]: {k: peer[k] for k in ("vendor", "version", "provider")}}
            details = {"bench": bench, "scenario": scenario, "clients": clients, **row}
            writer.write(make_record(run_id=run_id, case=f"BENCH-{bench}/{scenario}/{vendor}/{clients}",
                                     suite="bench", spec=[], topology=row.get("topology"), peers=peers,
                                     outcome="error" if error else "passed", duration_s=round(duration, 3),
                                     details=details, message=error))
        writer.write_run_meta({"run_id": run_id, "started_at": started_at, "ended_at": utc_now_iso(),
                               "bench": {"name": bench, **meta}})
    print(f"result records: {folder / 'results.jsonl'}")
