"""Peers that run as local processes: the reference router (subprocess) and a native `qdrouterd`.

Both read the same rendered qdrouterd.conf. The reference router listens on port 0 and reports the port the
kernel gave it; qdrouterd gets a free port from the harness. Ready means the listener accepts connections
(and, for the reference, that it said so in its log).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .. import fault_log
from ..faults.disk import StraceMissing, traced_command
from ..ports import free_port, release_ports
from ..wait import WaitTimeout, accepts, wait_for
from .base import Endpoint, Peer, PeerInfo, PeerStartError, PeerUnavailable, describe_exit
from .provider import NodeSetup, Provider

_LISTENING = re.compile(r"Listening on (\S+):(\d+) \(listener '([^']*)', role (?P<role>\S+)\)")
_READY = re.compile(r"Router \S+ started .*; ready")


class ProcessPeer(Peer):
    """A peer that is one local process whose stderr/stdout is its log."""

    def __init__(self, name: str, role: str, info: PeerInfo, capabilities: frozenset[str], workdir: Path):
        self.name, self.role, self.info, self.capabilities = name, role, info, capabilities
        self.workdir = workdir
        self.endpoints: dict[str, Endpoint] = {}
        self._proc: subprocess.Popen | None = None
        self._tracee: int | None = None  # with a disk fault: the peer's own process, strace's child
        self.disk_fault = None
        self._log_lines: list[str] = []
        self.previous_logs: list[str] = []  # the log of the runs before the last restart
        self._log_lock = threading.Lock()

    def cleanup(self) -> None:
        """Remove the work dir when it is one the harness made (`interop-*` under the temp dir)."""
        if self.is_running():
            return
        if self.workdir.name.startswith("interop-") and Path(tempfile.gettempdir()) in self.workdir.parents:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def command(self) -> list[str]:
        raise NotImplementedError

    def _spawn(self) -> None:
        """Start the process; with a disk fault, under strace (harness/faults/disk.py) in a process group of its
        own, so that kill() can SIGKILL strace and the traced peer in one go."""
        command, traced = self.command(), self.disk_fault is not None
        if traced:
            try:
                command = self.disk_fault.wrap(command)
            except StraceMissing as exc:
                raise PeerUnavailable(f"{self.name}: {exc}") from None
        self._tracee = None
        self._proc = subprocess.Popen(
            command, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1, env=self.environment(),
            start_new_session=traced)
        threading.Thread(target=self._pump_log, name=f"log-{self.name}", daemon=True).start()
        if traced:
            proc = self._proc
            self._tracee = wait_for(lambda: traced_command(proc.pid) or self._check_alive(), 10.0,
                                    f"strace to start {self.name}'s process")

    @property
    def main_pid(self) -> int | None:
        """The peer's own process (under a disk fault, strace's child, not strace): what signals go to."""
        if self._proc is None:
            return None
        return self._tracee if self._tracee is not None else self._proc.pid

    def _signal(self, sig: int) -> None:
        try:
            os.kill(self.main_pid, sig)
        except ProcessLookupError:
            pass

    def set_disk_fault(self, fault) -> None:
        self._run_under_disk_fault(fault)

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def _pump_log(self) -> None:
        proc = self._proc
        for line in proc.stdout:
            with self._log_lock:
                self._log_lines.append(line.rstrip("\n"))
        proc.stdout.close()

    def logs(self) -> str:
        with self._log_lock:
            return "\n".join(self._log_lines)

    def all_logs(self) -> str:
        with self._log_lock:
            runs = [*self.previous_logs, *self._log_lines]
        return "\n".join(runs)

    def _log_matches(self, pattern: re.Pattern) -> list[re.Match]:
        with self._log_lock:
            return [m for m in map(pattern.search, self._log_lines) if m]

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def down_reason(self) -> str | None:
        exited = describe_exit(self.returncode)
        if exited is None and self._proc is not None and _process_state(self.main_pid) in ("T", "t"):
            return "it is paused (SIGSTOP) and was not resumed"
        return exited

    @property
    def pids(self) -> list[int]:
        """The live process (benchmarks read its CPU time)."""
        return [self.main_pid] if self.is_running() else []

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            tail = "\n".join(self.logs().splitlines()[-5:])
            raise PeerStartError(f"{self.name} ({self.info.vendor}) stopped while starting: "
                                 f"{describe_exit(self._proc.returncode)}:\n{tail}")

    def stop(self, timeout: float = 10.0) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        # To the peer itself: under strace, strace exits with the peer's status once the peer has exited.
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)  # a paused process acts on SIGTERM only once it runs again
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the peer's process, as a crash would. Under a disk fault, strace and the traced peer die in one
        kill(2) of their process group: killing strace alone would let the peer run on, detached."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if self._tracee is None:
            proc.kill()
            proc.wait(10)
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
        wait_for(lambda: _process_state(self._tracee) in (None, "Z"), 10.0,
                 f"{self.name}'s traced process (pid {self._tracee}) to die on SIGKILL",
                 describe=lambda: f"state {_process_state(self._tracee)}")

    def _start_logged(self, timeout: float, ready: re.Pattern, listening: re.Pattern, what: str) -> None:
        """Spawn, wait for the ready line, then learn the endpoints from the listening lines (groups: host,
        port, listener name, and optionally `role`) and check that each accepts connections."""
        self._spawn()

        def is_ready():
            self._check_alive()
            return bool(self._log_matches(ready))
        try:
            wait_for(is_ready, timeout, f"{what} {self.name} to be ready", describe=self._last_log_line)
        except WaitTimeout as exc:
            self.kill()
            raise PeerStartError(str(exc)) from None
        for m in self._log_matches(listening):
            host = "127.0.0.1" if m.group(1) in ("0.0.0.0", "") else m.group(1)
            name = m.group(3) or f"listener{len(self.endpoints)}"
            self.endpoints[name] = Endpoint(name, host, int(m.group(2)), m.groupdict().get("role") or "normal")
        for ep in self.endpoints.values():
            if not accepts(ep.host, ep.port):
                raise PeerStartError(f"{self.name}: said it listens on {ep.host}:{ep.port} but refuses connections")

    def _last_log_line(self) -> str:
        lines = self.logs().splitlines()
        return lines[-1] if lines else "(no output yet)"

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    # ---- process faults -----------------------------------------------------------------------------------

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets (the kernel still accepts connections into the backlog and
        buffers bytes) but reads and answers nothing until resume()."""
        self._running_process("pause")
        pid = self.main_pid  # under strace, the peer itself: strace, running on, puts it in its group-stop
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: _process_state(pid) in ("T", "t", None), 10.0,
                 f"{self.name} (pid {pid}) to stop on SIGSTOP", describe=lambda: _process_state(pid))

    def resume(self) -> None:
        """SIGCONT: a paused process runs again and catches up with what arrived meanwhile."""
        self._running_process("resume")
        pid = self.main_pid
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: _process_state(pid) not in ("T", "t"), 10.0,
                 f"{self.name} (pid {pid}) to run again on SIGCONT", describe=lambda: _process_state(pid))

    def replace_binary(self, version: str | None, *, kill: bool = False, before_start=None,
                       timeout: float = 30.0) -> None:
        """Peer.replace_binary for a process peer: its provider finds the other release (`_install_for`, which
        raises before anything is stopped) and takes it over (`_use_install`) between the stop and the start of
        a restart, so the work dir, ports and configuration stay the peer's own."""
        install = self._install_for(version)
        self._swap = (install, before_start)
        was = self.info.version
        try:
            self.restart(timeout, kill=kill)
        finally:
            self._swap = None
            # for the case's record `fault` (a kill -9 is noted by restart too); also when the release did not start
            fault_log.note("binary replaced", f"{self.role} {self.name}", was=was, now=self.info.version)

    _swap = None  # (install, before_start) while replace_binary restarts the peer

    def _install_for(self, version: str | None):
        """The install of release `version` (None: the pinned default) of this peer's product; PeerUnavailable where
        there is none."""
        raise PeerUnavailable(f"peer {self.name}: the {self.info.provider} provider of {self.info.vendor} cannot "
                              "replace its binary in place")

    def _use_install(self, install) -> None:
        """Run `install` from the next start on (the peer is stopped)."""
        raise NotImplementedError

    def restart(self, timeout: float = 30.0, *, kill: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL with `kill=True`; a paused process is continued first so that it can act
        on SIGTERM) and start again on the same ports; returns once the peer is ready again.

        The log of the earlier run moves to `previous_logs`, so readiness is judged on the new run's log.
        """
        proc = self._proc
        how = describe_exit(self.returncode) or ("killed (SIGKILL)" if kill else "stopped (SIGTERM)")
        how += f"; restarted with a {self.disk_fault}" if self.disk_fault is not None else "; restarted"
        if proc is not None and proc.poll() is None:
            if kill:
                self.kill()
            else:
                self.stop()
        if proc is not None and proc.stdout is not None:
            wait_for(lambda: proc.stdout.closed, 10.0, f"the log of {self.name}'s stopped process to be read")
        if self._swap is not None:
            install, before_start = self._swap
            self._use_install(install)
            how += f" on release {self.info.version}"
            if before_start is not None:
                before_start(self)
        self._prepare_restart()
        with self._log_lock:
            self.previous_logs = [*self.previous_logs, *self._log_lines, f"---- interop: {how}"]
            self._log_lines = []
        self.start(timeout)

    def _prepare_restart(self) -> None:
        """Pin what the next start needs to come back the same (ports); nothing by default."""

    def _running_process(self, action: str) -> subprocess.Popen:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise PeerStartError(f"cannot {action} {self.name}: it is not running")
        return proc


def _process_state(pid: int | None) -> str | None:
    """The state letter of a process from /proc (R, S, T for stopped, ...), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


class ReferenceRouterPeer(ProcessPeer):
    """The reference router as a subprocess: `python -m reference.router -c FILE`."""

    def __init__(self, name: str, config_text: str, capabilities: frozenset[str], workdir: Path | None = None):
        from reference import __version__

        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "router", PeerInfo("reference", __version__, "subprocess"), capabilities, workdir)
        self.config_path = workdir / "qdrouterd.conf"
        self.config_path.write_text(config_text)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "reference.router", "-c", str(self.config_path)]

    def start(self, timeout: float = 30.0) -> None:
        self._start_logged(timeout, _READY, _LISTENING, "reference router")

    def _prepare_restart(self) -> None:
        """Write the ports the listeners got into the config, so a listener that asked for port 0 comes back
        on the same port after a restart."""
        if self.endpoints:
            pinned = _pin_listener_ports(self.config_path.read_text(), list(self.endpoints.values()))
            self.config_path.write_text(pinned)


_LISTENER_BLOCK = re.compile(r"(?<![\w.])listener\s*\{[^{}]*\}")
_PORT_ATTR = re.compile(r"(?<![\w.])(port\s*:\s*)([\"']?)([^\s}#\"']+)\2")
_NAME_ATTR = re.compile(r"(?<![\w.])name\s*:\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s}#]+))")


def _pin_listener_ports(text: str, endpoints: list[Endpoint]) -> str:
    """qdrouterd.conf text with every `port: 0` of a listener section replaced by the port that listener got.

    A named listener is matched to the endpoint of that name; unnamed ones by their order (the router logs
    its listeners in the order of the file).
    """
    by_name = {ep.name: ep for ep in endpoints if ep.name}
    blocks = list(_LISTENER_BLOCK.finditer(text))
    out, last = [], 0
    for index, block in enumerate(blocks):
        body = block.group(0)
        name_match = _NAME_ATTR.search(body)
        name = next((g for g in name_match.groups() if g is not None), None) if name_match else None
        endpoint = by_name.get(name) if name else (endpoints[index] if len(blocks) == len(endpoints) else None)
        port_match = _PORT_ATTR.search(body)
        if endpoint is not None and port_match is not None and port_match.group(3) == "0":
            body = body[:port_match.start(3)] + str(endpoint.port) + body[port_match.end(3):]
        out.append(text[last:block.start()])
        out.append(body)
        last = block.end()
    out.append(text[last:])
    return "".join(out)


class NativeQdrouterdPeer(ProcessPeer):
    """A `qdrouterd` binary on PATH, fed the same rendered qdrouterd.conf as the reference router."""

    def __init__(self, name: str, render, capabilities: frozenset[str], workdir: Path | None = None,
                 clients_port: int | None = None, version: str | None = None, binary: str | None = None):
        """`clients_port`: the port another node was told to dial (a broker's broker connection lands on the
        clients listener); else a free one. qdrouterd cannot report a port 0 listener, so it is always fixed.
        `version`: the chosen one (harness/peers/qdrouterd_build.py), else the `qdrouterd` on PATH. `binary`: this
        qdrouterd instead (e.g. one built with libwebsockets, qdrouterd_build.websocket_binary)."""
        from .qdrouterd_build import binary_for, missing, reported_version

        binary = binary or binary_for(version)
        if binary is None:
            raise PeerUnavailable(missing(version) if version else
                                  "qdrouterd is not on PATH (no native Qpid Dispatch Router on this machine)")
        version = reported_version(binary)  # what the binary says, for the record
        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "router", PeerInfo("qdrouterd", version, "native"), capabilities, workdir)
        self.binary = binary
        # its own port is held until cleanup: a restarted qdrouterd binds it again
        self._own_port = None if clients_port else free_port(held=True)
        self.port = clients_port or self._own_port
        self.config_path = workdir / "qdrouterd.conf"
        self.config_path.write_text(render({"clients": self.port}))

    def command(self) -> list[str]:
        return [self.binary, "-c", str(self.config_path)]

    def _install_for(self, version: str | None) -> str:
        """The binary of release `version` (a router keeps no data: its qdrouterd.conf and port are what stay)."""
        from .qdrouterd_build import binary_for, missing

        binary = binary_for(version)
        if binary is None:
            why = missing(version) if version else "qdrouterd is not on PATH"
            raise PeerUnavailable(f"{self.name}: cannot put qdrouterd {version or ''} in place: {why}")
        return binary

    def _use_install(self, binary: str) -> None:
        from .qdrouterd_build import reported_version

        self.binary = binary
        self.info = PeerInfo("qdrouterd", reported_version(binary), "native")

    def cleanup(self) -> None:
        super().cleanup()
        if self._own_port is not None and not self.is_running():
            release_ports(self._own_port)
            self._own_port = None

    def start(self, timeout: float = 30.0) -> None:
        self._spawn()
        self.endpoints["clients"] = Endpoint("clients", "127.0.0.1", self.port, "normal")

        def ready():
            self._check_alive()
            return accepts("127.0.0.1", self.port)
        try:
            wait_for(ready, timeout, f"qdrouterd {self.name} to accept on port {self.port}")
        except WaitTimeout as exc:
            self.kill()
            raise PeerStartError(str(exc)) from None


class ReferenceRouter(Provider):
    """The reference router, `python -m reference.router`, from this checkout: it always runs."""

    vendor, name, role = "reference", "subprocess", "router"

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        return ReferenceRouterPeer(setup.node_name, setup.render_router(), setup.capabilities)


class NativeQdrouterd(Provider):
    """A `qdrouterd` on PATH (docs/getting-products.md)."""

    vendor, name, role = "qdrouterd", "native", "router"
    versioned = True

    @classmethod
    def probe(cls, version: str | None = None) -> str | None:
        if version is not None:
            from .qdrouterd_build import missing

            return missing(version)
        return None if shutil.which("qdrouterd") else "qdrouterd is not on PATH"

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        return NativeQdrouterdPeer(setup.node_name, setup.render_router, setup.capabilities,
                                   clients_port=setup.listen_ports.get("clients") or None, version=setup.version)
