"""The same CPU capacity for every router process, whatever else shares its cores: a CFS bandwidth quota per
process (Linux cgroups, the `cpu` controller of v1 or `cpu.max` of v2; needs root).

Why: a router network is deployed one router per host. On a small machine the routers of a mesh share the
cores a single router had to itself, so "the mesh against one router" measured there compares two routers on
one CPU with one router on one CPU: any router, qdrouterd too, lands near 0.5 whatever its mesh path costs.
Giving each router process the same budget (say half a CPU) in every scenario measures what the comparison
asks: a router of the same size, once alone and once with a second hop.

    budget = CpuBudget.create(0.5)        # raises BudgetUnavailable (one line) where no cgroup can be made
    budget.limit(pid, "R1-reference")     # the process and all its threads, now and later
    ...
    budget.close()                        # every group it made is removed

A quota is enforced per period: a router that spends its share early in a period waits for the next one.
The period is kept short (10 ms) so that such waits stay in the range of the latencies being measured.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PERIOD_US = 10_000
V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
V2_HYBRID_ROOT = Path("/sys/fs/cgroup/unified")


class BudgetUnavailable(RuntimeError):
    """No cgroup CPU controller this process may use (one line, says what was looked for)."""


class CpuBudget:
    def __init__(self, fraction: float, root: Path, version: int):
        self.fraction = fraction
        self.root = root
        self.version = version
        self.groups: list[Path] = []

    @classmethod
    def create(cls, fraction: float) -> CpuBudget:
        if not 0 < fraction <= os.cpu_count():
            raise BudgetUnavailable(f"a CPU budget must be above 0 and at most {os.cpu_count()} CPUs, got {fraction}")
        for root, version in ((V1_ROOT, 1), (V2_ROOT, 2), (V2_HYBRID_ROOT, 2)):
            if cls._usable(root, version):
                return cls(fraction, root, version)
        raise BudgetUnavailable(
            f"no writable cgroup CPU controller: looked for {V1_ROOT}/cpu.cfs_quota_us (v1) and cpu.max under "
            f"{V2_ROOT} (v2, with 'cpu' in cgroup.subtree_control); a CPU budget needs root and one of them")

    @staticmethod
    def _usable(root: Path, version: int) -> bool:
        if version == 1:
            return (root / "cpu.cfs_quota_us").exists() and os.access(root, os.W_OK)
        controllers = root / "cgroup.subtree_control"
        try:
            return "cpu" in controllers.read_text().split() and os.access(root, os.W_OK)
        except OSError:
            return False

    def limit(self, pid: int, label: str) -> None:
        """Put process `pid` (every thread: qdrouterd's workers exist already) under a quota of its own."""
        group = self.root / f"interop-bench-{os.getpid()}-{label}"
        group.mkdir(exist_ok=True)
        self.groups.append(group)
        quota = max(1000, int(self.fraction * PERIOD_US))
        if self.version == 1:
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        # cgroup.procs moves the whole thread group, in v1 and v2 alike.
        (group / "cgroup.procs").write_text(str(pid))

    def close(self) -> None:
        """Remove the groups (their processes have ended or go back to the root group first)."""
        for group in self.groups:
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.root / "cgroup.procs").write_text(pid)
                group.rmdir()
        self.groups.clear()
