"""Evidence from a process that stopped answering: the stacks of all its threads, by gdb, into a file."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path


def thread_stacks(pids, folder: Path, timeout: float = 60.0) -> Path | None:
    """`gdb -p PID -batch -ex 'thread apply all bt'` for each pid, written to folder/stacks-<pid>-<time>.txt; the
    first file, or None when gdb is missing or gave nothing. gdb stops the process while it reads it, which a hung
    process does not mind."""
    gdb = shutil.which("gdb")
    if gdb is None or not pids:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    first = None
    for pid in pids:
        out = folder / f"stacks-{pid}-{time.strftime('%H%M%S')}.txt"
        try:
            done = subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"], capture_output=True,
                                  text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out.write_text(f"gdb failed: {exc}\n")
            continue
        out.write_text(done.stdout + done.stderr)
        first = first or out
    return first
