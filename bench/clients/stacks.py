"""Start the benchmark clients of a stack (`c` or `python`) as processes and read what they report.

The C client is compiled from amqp_bench.c on first use (cc and Debian's libqpid-proton11-dev, listed in
system-packages.txt) into a cache folder keyed by the source's hash, so an edited source is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
STACKS = ("python", "c")


class ClientError(RuntimeError):
    """A client could not be built, did not attach, failed, or did not finish in time (one line)."""


def c_binary() -> Path:
    source = HERE / "amqp_bench.c"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    binary = Path(tempfile.gettempdir()) / f"amqp_bench-{digest}"
    if binary.exists():
        return binary
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ClientError("the C clients need a C compiler (cc): apt-get install gcc")
    tmp = binary.with_name(f"{binary.name}.{id(source)}.tmp")
    built = subprocess.run([cc, "-O2", "-o", str(tmp), str(source), "-lqpid-proton"], capture_output=True,
                           text=True)
    if built.returncode != 0:
        first = (built.stderr.strip().splitlines() or ["no output"])[0]
        raise ClientError(f"cannot build {source.name} (is libqpid-proton11-dev installed?): {first}")
    tmp.replace(binary)
    return binary


def command(stack: str) -> list[str]:
    if stack == "c":
        return [str(c_binary())]
    if stack == "python":
        return [sys.executable, str(HERE / "amqp_bench.py")]
    raise ClientError(f"unknown client stack {stack!r}: expected one of {', '.join(STACKS)}")


@dataclass
class Client:
    """One running client process; its stdout lines are collected by a thread."""

    what: str
    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def first_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.005)
        raise ClientError(f"{self.what}: no {prefix!r} line within {timeout:.0f} s; {self._why()}")

    def report(self, timeout: float) -> dict:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise ClientError(f"{self.what}: not done within {timeout:.0f} s; {self._why()}") from None
        self._reader.join(5)
        for line in reversed(self.lines):
            if line.startswith("{"):
                return json.loads(line)
        raise ClientError(f"{self.what}: exited without a report; {self._why()}")

    def _why(self) -> str:
        err = self.proc.stderr.read() if self.proc.poll() is not None else ""
        tail = (err.strip().splitlines() or ["no error output"])[-1]
        return f"exit status {self.proc.returncode}: {tail}"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def start(stack: str, mode: str, hostport: str, address: str, count: int, size: int, option: str,
          listen: bool = False) -> Client:
    argv = command(stack) + [mode, hostport, address, str(count), str(size), option] + (["listen"] if listen else [])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return Client(f"{stack} {mode}er on {hostport}", proc)
