"""Start a fault proxy server for the harness, in the background, and hand back a handle to it.

Two servers speak the same API, chosen per session (`--fault-proxy`, `interop run --fault-proxy`, or the
environment variable INTEROP_FAULT_PROXY; default `harness`):
- `harness`: this project's own (`python -m harness.faults`), on a port it binds itself;
- `toxiproxy`: the real `toxiproxy-server` 2.12.0 from the download cache (harness/faults/toxiproxy_server.py),
  on a free loopback port, ready when GET /version answers. Not installed: `FaultProxyUnavailable`, a
  PeerUnavailable, so the cases that need a proxy are skipped with the reason.
Either way the handle offers the same things: the API URL, a `toxiproxy-python` client pointed at it, which
server it is and the version it answered (`record()`, for result records), logs, and stop().

Note: the `toxiproxy-python` client keeps the server address in a class attribute (`APIConsumer.host/port`),
so it talks to one server per process at a time; `handle.client()` points it at this handle's server.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field

from ..peers.base import PeerUnavailable
from ..ports import free_port
from ..wait import WaitTimeout, wait_for
from . import toxiproxy_server

HARNESS, TOXIPROXY = "harness", "toxiproxy"
KINDS = (HARNESS, TOXIPROXY)
KIND_ENV = "INTEROP_FAULT_PROXY"
LOG_DIR_ENV = "INTEROP_FAULT_PROXY_LOGS"  # a folder: each server's whole log is written there when it stops
_READY = re.compile(r"API listening on http://(\S+):(\d+); ready")
_MAX_LOG_LINES = 5000
_session_kind: str | None = None  # set by choose_fault_proxy (the pytest option); else the environment decides


class FaultProxyError(Exception):
    """The fault proxy server could not be started."""


class FaultProxyUnavailable(PeerUnavailable):
    """The chosen fault proxy cannot run here (the real toxiproxy-server is not installed); a one-line reason."""


def choose_fault_proxy(kind: str | None) -> None:
    """Which server start_fault_proxy() runs from now on in this process (None: back to the environment's)."""
    global _session_kind
    if kind is not None and kind not in KINDS:
        raise ValueError(f"fault proxy must be one of {', '.join(KINDS)}, got {kind!r}")
    _session_kind = kind


def chosen_fault_proxy() -> str:
    """The session's choice, else $INTEROP_FAULT_PROXY, else `harness`; a bad value is a one-line ValueError."""
    if _session_kind is not None:
        return _session_kind
    kind = os.environ.get(KIND_ENV, "").strip() or HARNESS
    if kind not in KINDS:
        raise ValueError(f"{KIND_ENV} must be one of {', '.join(KINDS)}, got {kind!r}")
    return kind


@dataclass
class FaultProxyHandle:
    host: str
    port: int
    kind: str  # HARNESS (this project's server) or TOXIPROXY (the real toxiproxy-server)
    process: subprocess.Popen | None = None
    version: str | None = None  # what GET /version answered once the server was ready
    _log: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def record(self) -> dict:
        """Which proxy ran, for result records: both answer /version with 2.12.0 (ours answers as the Toxiproxy
        release whose API it follows), so the kind is what tells them apart."""
        return {"proxy": self.kind, "version": self.version}

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
            self._keep_log()
        return proc.returncode

    def _keep_log(self) -> None:
        """The server's log into $INTEROP_FAULT_PROXY_LOGS, if set: what a proxy did to a connection (accepted,
        dialled, closed) is often the only account of why a peer behind it waited."""
        folder = os.environ.get(LOG_DIR_ENV)
        if not folder:
            return
        try:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{self.kind}-{self.port}-{self.process.pid}.log"), "w") as f:
                f.write(self.logs() + "\n")
        except OSError:
            pass  # a log that cannot be kept must not fail the stop

    def __enter__(self) -> FaultProxyHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_fault_proxy(host: str = "127.0.0.1", *, kind: str | None = None, timeout: float = 20.0) -> FaultProxyHandle:
    """Start a fault proxy server (`kind`, default the session's choice) on a free port of `host` and wait until
    its API answers."""
    kind = kind or chosen_fault_proxy()
    if kind not in KINDS:
        raise ValueError(f"fault proxy must be one of {', '.join(KINDS)}, got {kind!r}")
    env = dict(os.environ)
    if kind == TOXIPROXY:
        try:
            binary = toxiproxy_server.require()
        except toxiproxy_server.ToxiproxyUnavailable as exc:
            raise FaultProxyUnavailable(str(exc)) from None
        port = free_port(host)
        command = [str(binary), "-host", host, "-port", str(port)]
        handle = FaultProxyHandle(host, port, kind)
    else:
        command = [sys.executable, "-m", "harness.faults", "--host", host, "--port", "0"]
        handle = FaultProxyHandle(host, 0, kind)
        env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        handle.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    except OSError as exc:
        raise FaultProxyError(f"cannot run {command[0]}: {exc}") from None
    threading.Thread(target=_pump, args=(handle,), name="fault-proxy-log", daemon=True).start()
    # A server whose topology never got to stop it (a peer that could not be made, a crash) would outlive this
    # process: both kinds kept running after the interpreter exited (measured). stop() twice is harmless.
    atexit.register(handle.stop)

    def ready():
        if handle.process.poll() is not None:
            raise FaultProxyError(f"fault proxy exited with status {handle.process.returncode}: "
                                  f"{' | '.join(handle._log[-3:])}")
        if handle.kind == HARNESS and not handle.port:
            for line in list(handle._log):
                m = _READY.search(line)
                if m:
                    handle.port = int(m.group(2))
                    break
            else:
                return False
        handle.version = _version(handle.url)
        return handle.version is not None
    try:
        wait_for(ready, timeout, f"fault proxy ({command[0]}) to answer GET /version",
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


def _version(url: str) -> str | None:
    """The server's version from GET /version, None while it does not answer."""
    try:
        with urllib.request.urlopen(url + "/version", timeout=1) as response:
            if response.status != 200:
                return None
            return str(json.loads(response.read()).get("version"))
    except (OSError, ValueError):
        return None
