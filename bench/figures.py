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
