"""A peer that runs as a local process: spawn, log, kill, pause, restart, slow disk, replace the binary.

The vendors' process peers build on it: the reference router and broker (harness/vendors/reference/), a native
qdrouterd (harness/vendors/qdrouterd/native.py), Artemis, ActiveMQ Classic and RabbitMQ.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from .. import fault_log
from ..faults.disk import StraceMissing, traced_command
from ..wait import WaitTimeout, accepts, wait_for
from .base import Endpoint, Peer, PeerInfo, PeerStartError, PeerUnavailable, describe_exit



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
