"""Watch a server start on a config file and say whether it accepted the file: the one decision rule of the
config differential (`interop fuzz --configs`), shared by every product it starts.

A server that refuses its configuration exits non-zero before it serves (qdrouterd, the reference router and
broker, `artemis run`); one that accepts it logs a ready line and keeps running. So a start is watched on its
merged stdout/stderr until the first of:

* `ready(output)` holds: accepted. The server is then stopped (SIGTERM, then SIGKILL after `stop_s`);
* the process exits: refused when its status is non-zero (its output is the refusal), accepted when zero (a
  server that ends by itself at once was still not refused);
* `deadline_s` passes with the process still running: accepted, noted as `running` (a config that silences the
  ready line, e.g. a log section at warning+, ends here).

No fixed sleep: the deadline only bounds the wait for one of the events above.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

OUTPUT_LIMIT = 64 * 1024  # bytes of output kept per start (the head: refusals come first)


@dataclass
class Start:
    """How one start ended. `status`: ready | exited | running."""

    status: str
    code: int | None  # exit status when exited, else None
    output: str
    elapsed_s: float

    @property
    def accepted(self) -> bool:
        return self.status in ("ready", "running") or self.code == 0


def watch(fd: int, poll: Callable[[], int | None], signal_: Callable[[int], None], ready: Callable[[str], bool],
          deadline_s: float, stop_s: float = 5.0) -> Start:
    """Read `fd` (the process's merged output) until ready, exit or deadline (see the module docstring).
    `poll()` returns the exit status or None while running; `signal_(sig)` signals the process."""
    started = time.monotonic()
    deadline = started + deadline_s
    output = _Output()
    open_ = True
    while True:
        if ready(output.text()):
            break
        code = poll()
        if code is not None:  # exited: keep what it wrote last (its refusal), then report
            while open_ and select.select([fd], [], [], 0)[0]:
                open_ = output.read(fd)
            return Start("exited", code, output.text(), time.monotonic() - started)
        left = deadline - time.monotonic()
        if left <= 0:
            elapsed = time.monotonic() - started
            _stop(poll, signal_, stop_s)
            return Start("running", None, output.text(), elapsed)
        if not open_:  # it closed its output but lives on: wait for its exit or the deadline
            _wait_exit(poll, min(left, 0.05))
        elif select.select([fd], [], [], min(left, 0.05))[0]:
            open_ = output.read(fd)
    elapsed = time.monotonic() - started
    _stop(poll, signal_, stop_s)
    return Start("ready", None, output.text(), elapsed)


class _Output:
    """The first OUTPUT_LIMIT bytes a process wrote."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self._text: str | None = ""

    def read(self, fd: int) -> bool:
        """One read; False at end of output."""
        data = os.read(fd, 65536)
        if data and self.size < OUTPUT_LIMIT:
            self.chunks.append(data[:OUTPUT_LIMIT - self.size])
            self.size += len(self.chunks[-1])
            self._text = None
        return bool(data)

    def text(self) -> str:
        if self._text is None:
            self._text = b"".join(self.chunks).decode("utf-8", "replace")
        return self._text


def _wait_exit(poll: Callable[[], int | None], seconds: float) -> None:
    end = time.monotonic() + seconds
    while poll() is None and time.monotonic() < end:
        time.sleep(0.002)  # polling a child's exit: no fd to wait on once its output is closed


def _stop(poll: Callable[[], int | None], signal_: Callable[[int], None], stop_s: float) -> None:
    """SIGTERM, then SIGKILL if it outlives `stop_s`; returns once it has exited."""
    if poll() is not None:
        return
    signal_(signal.SIGTERM)
    end = time.monotonic() + stop_s
    while poll() is None:
        if time.monotonic() > end:
            signal_(signal.SIGKILL)
            end = float("inf")
        time.sleep(0.002)


def run_and_watch(argv: list[str], ready: Callable[[str], bool], deadline_s: float, stop_s: float = 5.0,
                  **popen) -> Start:
    """Start `argv` (its own session, stdin closed, output merged), `watch` it, and reap it whatever happened: the
    one way the config judges start a product on a file (`popen`: cwd, env)."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, **popen)
    try:
        return watch(proc.stdout.fileno(), proc.poll, proc.send_signal, ready, deadline_s, stop_s)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
