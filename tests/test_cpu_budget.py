"""bench/cpu_budget.py on the machine's own cgroups: a process put under a budget is in a group with the quota
asked for, and closing removes the group. Skipped, with the reason, where no cgroup CPU controller is writable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.cpu_budget import PERIOD_US, BudgetUnavailable, CpuBudget


def test_a_limited_process_is_in_a_group_with_its_quota_and_close_removes_it():
    try:
        budget = CpuBudget.create(0.25)
    except BudgetUnavailable as exc:
        pytest.skip(str(exc))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        budget.limit(child.pid, "test")
        [group] = budget.groups
        assert str(child.pid) in (group / "cgroup.procs").read_text().split()
        if budget.version == 1:
            quota = (group / "cpu.cfs_quota_us").read_text().strip()
            period = (group / "cpu.cfs_period_us").read_text().strip()
        else:
            quota, period = (group / "cpu.max").read_text().split()
        assert (int(quota), int(period)) == (PERIOD_US // 4, PERIOD_US)
        budget.close()
        assert not group.exists() and child.poll() is None  # the process goes on, back in the root group
    finally:
        child.kill()
        child.wait()
        budget.close()


def test_a_budget_out_of_range_is_refused():
    for fraction in (0, -1):
        with pytest.raises(BudgetUnavailable, match="above 0"):
            CpuBudget.create(fraction)
