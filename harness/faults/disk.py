"""Slow disk: every fsync/fdatasync of a peer's process takes DELAY longer, with no change to the peer.

The peer's command runs under strace's syscall delay injection:

    strace -f --seccomp-bpf -qq -o /dev/null -e trace=fsync,fdatasync \\
           -e inject=fsync,fdatasync:delay_enter=50ms -- COMMAND...

* `delay_enter` holds the calling thread at the syscall's entry, before the kernel does anything, so the data
  reaches the disk DELAY later than the peer asked; every other thread runs on. That is what a busy or slow
  disk looks like to a broker, and it widens the window between "the journal record is written" and "it is
  synced" from microseconds to DELAY: a broker that acknowledges a durable message before its journal write
  keeps acknowledging during that window, and a kill -9 inside it loses messages it said it had.
* `--seccomp-bpf` stops the tracee only at the traced syscalls (without it strace stops every thread at every
  syscall, and the peer would be slow at everything, not only at its disk). Both fsync and fdatasync are
  traced: the reference broker's journal uses fdatasync, RabbitMQ 3.10 uses fsync (measured with `strace -f -c`
  on a node taking 600 durable 64 KiB messages: 99 fsync, no fdatasync, sync_file_range or msync).
* `-f` follows every process and thread the peer starts (RabbitMQ's start script, its Erlang VM and helpers).

Killing a traced peer: strace 6.1 has no `--kill-on-exit`. When strace alone dies, the kernel detaches its
tracees: they run on, a delayed fsync completes at once, and (the seccomp filter stays installed with no tracer
to answer it) every later fsync fails with ENOSYS. So kill -9 must SIGKILL the traced processes themselves:
process providers start a traced peer in a process group of its own (strace and the tracees) and kill the
whole group in one kill(2). A tracee held in a delayed syscall dies there without running it.

Providers that run peers elsewhere (containers, external peers) cannot do this; they raise PeerUnavailable,
which cases report as `skipped` with the reason, as they do when strace is not installed.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

SYNC_SYSCALLS = ("fsync", "fdatasync")
MAX_DELAY_MS = 10_000


class DiskFaultError(ValueError):
    """A bad slow-disk setting; str() is one line naming the field and what was expected."""


class StraceMissing(Exception):
    """strace is not installed; str() is one line (providers turn it into PeerUnavailable)."""


@dataclass(frozen=True)
class SlowDisk:
    """Delay every sync call (SYNC_SYSCALLS) of a peer's processes by `delay_ms` milliseconds."""

    delay_ms: int

    def __post_init__(self) -> None:
        value = self.delay_ms
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DELAY_MS:
            raise DiskFaultError(f"disk_delay_ms: expected a whole number of milliseconds from 1 to {MAX_DELAY_MS}, "
                                 f"got {value!r}")

    def wrap(self, command: list[str]) -> list[str]:
        """`command` run under strace with the delay injected; StraceMissing if there is no strace."""
        calls = ",".join(SYNC_SYSCALLS)
        return [find_strace(), "-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "-e", f"trace={calls}",
                "-e", f"inject={calls}:delay_enter={self.delay_ms}ms", "--", *command]

    def __str__(self) -> str:
        return f"slow disk ({'/'.join(SYNC_SYSCALLS)} +{self.delay_ms} ms)"


def slow_disk(delay_ms) -> SlowDisk | None:
    """A SlowDisk for `delay_ms` (None or 0: an idle disk, no fault); DiskFaultError for a bad value."""
    if delay_ms is None or (delay_ms == 0 and not isinstance(delay_ms, bool)):
        return None
    return SlowDisk(delay_ms)


def find_strace() -> str:
    binary = shutil.which("strace")
    if binary is None:
        raise StraceMissing("strace is not on PATH (Debian package strace, listed in system-packages.txt): "
                            "a slow-disk peer runs under it")
    return binary


def children(pid: int) -> list[int]:
    """The direct children of process `pid` (every thread's), [] once it is gone."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return found


def traced_command(strace_pid: int) -> int | None:
    """The process strace started for the peer (its child that has exec'd the peer's command), None until
    there is one. strace's other children are forks of its own that probe what ptrace can do; they still
    run strace's executable."""
    try:
        own = os.readlink(f"/proc/{strace_pid}/exe")
    except OSError:
        return None
    for pid in children(strace_pid):
        try:
            if os.readlink(f"/proc/{pid}/exe") != own:
                return pid
        except OSError:
            continue
    return None
