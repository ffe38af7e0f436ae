"""Start a fault proxy server for the harness, in the background, and hand back a handle to it.

`start_fault_proxy()` runs a real `toxiproxy-server` when one is on PATH (the reference implementation of the
API), else this project's own (`python -m harness.faults`), on a free loopback port. Either way the handle
offers the same things: the API URL, a `toxiproxy-python` client pointed at it, logs, and stop().

Note: the `toxiproxy-python` client keeps the server address in a class attribute (`APIConsumer.host/port`),
so it talks to one server per process at a time; `handle.client()` points it at this handle's server.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field

from ..wait import WaitTimeout, free_port, wait_for

_READY = re.compile(r"API listening on http://(\S+):(\d+); ready")
_MAX_LOG_LINES = 5000


class FaultProxyError(Exception):
    """The fault proxy server could not be started."""


@dataclass
class FaultProxyHandle:
    host: str
    port: int
    kind: str  # "interop" (this project's server) or "toxiproxy" (a real toxiproxy-server)
    process: subprocess.Popen | None = None
    _log: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self):
        """A `toxiproxy.Toxiproxy` (package toxiproxy-python) talking to this server."""
        from toxiproxy import Toxiproxy

        client = Toxiproxy()
        client.update_api_consumer(self.host, self.port)
        return client

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def logs(self) -> str:
        return "\n".join(self._log)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then kill after `timeout`; returns the exit status."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        return proc.returncode

    def __enter__(self) -> FaultProxyHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_fault_proxy(host: str = "127.0.0.1", *, prefer_toxiproxy: bool = True,
                      timeout: float = 20.0) -> FaultProxyHandle:
    """Start a fault proxy server on a free port of `host` and wait until its API answers."""
    binary = shutil.which("toxiproxy-server") if prefer_toxiproxy else None
    if binary is not None:
        port = free_port(host)
        command = [binary, "-host", host, "-port", str(port)]
        handle = FaultProxyHandle(host, port, "toxiproxy")
    else:
        command = [sys.executable, "-m", "harness.faults", "--host", host, "--port", "0"]
        handle = FaultProxyHandle(host, 0, "interop")
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        handle.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    except OSError as exc:
        raise FaultProxyError(f"cannot run {command[0]}: {exc}") from None
    threading.Thread(target=_pump, args=(handle,), name="fault-proxy-log", daemon=True).start()

    def ready():
        if handle.process.poll() is not None:
            raise FaultProxyError(f"fault proxy exited with status {handle.process.returncode}: "
                                  f"{' | '.join(handle._log[-3:])}")
        if handle.kind == "interop":
            for line in list(handle._log):
                m = _READY.search(line)
                if m:
                    handle.port = int(m.group(2))
                    return True
            return False
        return _answers(handle.url)
    try:
        wait_for(ready, timeout, f"fault proxy ({command[0]}) to answer",
                 describe=lambda: handle._log[-1] if handle._log else "(no output yet)")
    except (WaitTimeout, FaultProxyError):
        handle.process.kill()
        handle.process.wait(10)
        raise
    return handle


def _pump(handle: FaultProxyHandle) -> None:
    proc = handle.process
    for line in proc.stdout:
        handle._log.append(line.rstrip("\n"))
        if len(handle._log) > _MAX_LOG_LINES:
            del handle._log[: len(handle._log) - _MAX_LOG_LINES]
    proc.stdout.close()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/version", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False
