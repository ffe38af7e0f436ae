"""What /proc says about a local server process: its resident memory and its sockets left in CLOSE_WAIT.

A socket in CLOSE_WAIT is one whose peer has closed and which the process has not closed yet: a server that
forgets to close after a client drops keeps one per dropped client, until it runs out of descriptors. Linux
only; both readers answer 0 for a process that is gone (its death is judged elsewhere).
"""

from __future__ import annotations

import os
from pathlib import Path

TCP_CLOSE_WAIT = "08"  # the st column of /proc/net/tcp (include/net/tcp_states.h: TCP_CLOSE_WAIT = 8)


def rss_bytes(pids: list[int]) -> int:
    """The summed VmRSS of `pids` (a process that is gone counts 0)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024  # the kernel reports kB
                    break
        except (OSError, ValueError):
            continue
    return total


def socket_inodes(pids: list[int]) -> set[int]:
    """Inodes of the sockets `pids` hold open (fd links read `socket:[INODE]`)."""
    inodes: set[int] = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{fd_dir}/{name}")
            except OSError:
                continue  # closed since listdir
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def tcp_states(net_dir: str = "/proc/net") -> dict[int, tuple[str, str, str]]:
    """inode -> (state, local address, remote address) for every IPv4 and IPv6 TCP socket the kernel lists."""
    out: dict[int, tuple[str, str, str]] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(net_dir, name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) >= 10:
                out[int(cols[9])] = (cols[3], cols[1], cols[2])
    return out


def close_wait_peer_ports(pids: list[int]) -> list[int]:
    """The peer (client) ports of the sockets held by `pids` that are in CLOSE_WAIT: which connections they were."""
    mine = socket_inodes(pids)
    if not mine:
        return []
    net = next((f"/proc/{pid}/net" for pid in pids if os.path.isdir(f"/proc/{pid}/net")), "/proc/net")
    return [int(remote.rsplit(":", 1)[1], 16) for inode, (state, _, remote) in tcp_states(net).items()
            if inode in mine and state == TCP_CLOSE_WAIT]


def close_wait_count(pids: list[int]) -> int:
    """How many sockets held by `pids` are in CLOSE_WAIT."""
    mine = socket_inodes(pids)
    if not mine:
        return 0
    # /proc/net of a pid sees that process's network namespace; read it through the first live pid
    net = next((f"/proc/{pid}/net" for pid in pids if os.path.isdir(f"/proc/{pid}/net")), "/proc/net")
    return sum(1 for inode, (state, _, _) in tcp_states(net).items()
               if inode in mine and state == TCP_CLOSE_WAIT)


# ---- CPU ----------------------------------------------------------------------------------------------------
# Two readings of a process's CPU over a window, both from /proc:
# * its CPU time, utime + stime of /proc/PID/stat (every thread, in clock ticks): what the server spent;
# * per thread, the time it was on a CPU or runnable and waiting for one (/proc/PID/task/TID/schedstat: run time
#   and run-queue delay, in ns). A thread spinning in a loop is one or the other all the time, so its share of the
#   window is near 1 whatever else the machine runs, where its CPU time alone shrinks with the machine's load (at a
#   load of 13 on 2 cores a spinning thread gets about 0.15 of a core).
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of `pids`, in seconds (a process that is gone counts 0)."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5), counted from the state (3)
    return total / CLOCK_TICKS


def thread_busy_ns(pids: list[int]) -> dict[tuple[int, int], int]:
    """(pid, tid) -> nanoseconds the thread has been running or runnable (schedstat: run time + run-queue wait)."""
    out: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                run_ns, wait_ns = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[:2]
            except (OSError, ValueError):
                continue  # ended since listdir
            out[(pid, int(tid))] = int(run_ns) + int(wait_ns)
    return out


class CpuSample:
    """A reading of `pids` now; `since(earlier)` gives what happened between the two."""

    def __init__(self, pids: list[int]):
        import time

        self.pids = list(pids)
        self.at = time.monotonic()
        self.cpu_s = cpu_seconds(self.pids)
        self.busy = thread_busy_ns(self.pids)

    def since(self, earlier: CpuSample) -> CpuWindow:
        span = max(1e-6, self.at - earlier.at)
        busiest, tid, total = 0, None, 0
        for key, ns in self.busy.items():
            grown = ns - earlier.busy.get(key, 0)  # a thread born in the window counts from 0
            total += grown
            if grown > busiest:
                busiest, tid = grown, key[1]
        return CpuWindow(span_s=span, cpu_s=max(0.0, self.cpu_s - earlier.cpu_s),
                         busiest_thread_share=min(1.0, busiest / 1e9 / span), busiest_tid=tid,
                         demand=total / 1e9 / span)


class CpuWindow:
    """What a server did over `span_s`: CPU-s spent (all threads), and the share of the window its busiest thread
    was running or waiting to run (1.0: it wanted a core the whole time)."""

    def __init__(self, span_s: float, cpu_s: float, busiest_thread_share: float, busiest_tid: int | None,
                 demand: float = 0.0):
        self.span_s, self.cpu_s = span_s, cpu_s
        self.busiest_thread_share, self.busiest_tid = busiest_thread_share, busiest_tid
        self.demand = demand  # the threads running or runnable, on average over the window (cores wanted)

    @property
    def cores(self) -> float:
        """CPU-s per second of the window: the cores the process used on average."""
        return self.cpu_s / self.span_s

    def as_dict(self) -> dict:
        return {"window_s": round(self.span_s, 3), "cpu_s": round(self.cpu_s, 3), "cores": round(self.cores, 3),
                "busiest_thread_share": round(self.busiest_thread_share, 3), "busiest_tid": self.busiest_tid,
                "demand": round(self.demand, 3)}

    def __repr__(self) -> str:
        return (f"{self.cpu_s:.2f} CPU-s in {self.span_s:.2f} s ({self.cores:.2f} cores), busiest thread "
                f"{self.busiest_thread_share:.0%} of the window on or waiting for a CPU")
