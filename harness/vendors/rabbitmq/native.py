"""RabbitMQ 3.x as a native peer: the Debian `rabbitmq-server` package, one private node per peer.

Each peer runs its own Erlang node, isolated from any system-wide RabbitMQ and from other peers:

* its own node name (`interop-<pid>-<n>@localhost`), HOME (and so Erlang cookie), MNESIA_BASE, LOG_BASE,
  config file, enabled-plugins file and definitions, all under one temp dir removed by `stop()`;
* its own `epmd` on a private port (ERL_EPMD_PORT), started and stopped with the peer, so nothing is left on
  the shared port 4369;
* its own loopback ports below 32768 (the AMQP listener and the Erlang distribution port), outside the
  kernel's ephemeral range; `rabbitmqctl` gets distribution port 0 (any free port);
* the AMQP 1.0 plugin enabled by file (`[rabbitmq_amqp1_0].`), the listener on 127.0.0.1 only, queues and
  addresses declared from the topology by definitions loaded at boot (harness/vendors/rabbitmq/render.py);
* the federation plugin enabled too (no measurable start cost), so that once every peer of a topology runs,
  `join_network` can make the node its part of the topology's network of brokers (network connectors).

The package's /usr/sbin wrappers switch to the `rabbitmq` user and its /var/lib/rabbitmq; the scripts under
/usr/lib/rabbitmq/bin are used instead, as the current user. The node runs in its own process group so that
`kill()` (SIGKILL) takes the whole Erlang VM with it, as a crash would, and leaves its data for a restart.

Ready means: the node logged "Server startup complete" (it does so once every boot step has run, the state
`rabbitmqctl await_startup` waits for) and its AMQP port accepts. Measured here: 5.5-6 s from spawn to ready
on an idle machine (9-12 s with the two cores busy); `rabbitmqctl await_startup` on top would add 0.5-2.7 s
per start for nothing more, so it is not called. A restart after kill -9 takes about as long.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from ...faults.disk import StraceMissing, traced_command
from ...ports import bindable, free_port, release_ports
from ..artemis.render import broker_settings
from ...peers.provider import RenderError
from .render import declared_names, federation_plan, render_rabbitmq_node, wire_address
from ...tlsca import Issued, TestPki
from ...topology import Node
from ...wait import WaitTimeout, accepts, wait_for
from .agent import AgentError, ManagementAgent
from ...peers.base import START_FLOOR_S, Endpoint, Peer, PeerInfo, PeerStartError, PeerUnavailable, describe_exit
from ...peers.provider import NodeSetup, Provider

# Where the Debian package keeps the real scripts (the /usr/sbin ones are `su rabbitmq` wrappers).
SBIN_CANDIDATES = ("/usr/lib/rabbitmq/bin",)
_READY_LINE = "Server startup complete"
_LOG_PREFIX = re.compile(r"^\S+ \S+ \[\w+\] <[\d.]+> ")
_VERSION = re.compile(r"rabbitmq_server-(\d[\w.+-]*)")
# What the federation plugin (3.10) logs when a link has connected to its upstream.
_LINK_UP = re.compile(r"Federation (?P<kind>queue|exchange) '(?P<name>.*?)' in vhost '/' connected to "
                      r"(?P=kind) '.*?' in vhost '/' on amqp://(?:\S*@)?[\w.-]+:(?P<port>\d+)")
_NODE_COUNTER = itertools.count(1)


class RabbitMQError(RuntimeError):
    """A management call (rabbitmqctl) on a running node failed; str() is one line."""


@dataclass(frozen=True)
class RabbitMQInstall:
    sbin: Path  # holds rabbitmq-server, rabbitmqctl, rabbitmq-plugins
    version: str
    epmd: str


_install_cache: RabbitMQInstall | PeerUnavailable | None = None


def find_rabbitmq() -> RabbitMQInstall:
    """The RabbitMQ install on this machine; PeerUnavailable (one line) if there is none."""
    global _install_cache
    if _install_cache is None:
        try:
            _install_cache = _find_rabbitmq()
        except PeerUnavailable as exc:
            _install_cache = exc
    if isinstance(_install_cache, PeerUnavailable):
        raise _install_cache
    return _install_cache


def _find_rabbitmq() -> RabbitMQInstall:
    candidates = [os.environ["RABBITMQ_SBIN"]] if os.environ.get("RABBITMQ_SBIN") else []
    candidates += list(SBIN_CANDIDATES)
    sbin = next((Path(c) for c in candidates
                 if all(os.access(Path(c) / tool, os.X_OK) for tool in ("rabbitmq-server", "rabbitmqctl"))), None)
    if sbin is None:
        raise PeerUnavailable("rabbitmq-server is not installed (Debian package rabbitmq-server, listed in "
                              "system-packages.txt: `make setup` installs it; or set RABBITMQ_SBIN to a "
                              "directory holding rabbitmq-server and rabbitmqctl)")
    if shutil.which("erl") is None:
        raise PeerUnavailable("rabbitmq-server is installed but Erlang (`erl`) is not on PATH")
    epmd = shutil.which("epmd")
    if epmd is None:
        raise PeerUnavailable("rabbitmq-server is installed but Erlang's `epmd` is not on PATH")
    match = _VERSION.search(os.path.realpath(sbin / "rabbitmq-server"))
    return RabbitMQInstall(sbin, match.group(1) if match else "unknown", epmd)


def group_states(pgid: int) -> dict[int, str]:
    """pid -> state letter (R, S, T, ...) of the live (non-zombie) processes in process group `pgid`."""
    states = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            states[int(entry)] = fields[0]
    return states


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    return sorted(group_states(pgid))


# ---- the peer ----------------------------------------------------------------------------------------------

_live_peers: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _cleanup_at_exit() -> None:
    """A harness that exits without stopping its peers must not leave Erlang VMs and epmds behind."""
    for peer in list(_live_peers):
        try:
            peer.kill()
            peer.stop(timeout=2)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


def _tls_files(node: Node, pki: TestPki | None) -> Issued | None:
    """The PEM files of the node's TLS listener (its clients listener, whose TLS is the node's `access.tls`)
    from the test PKI, or None when the listener is plain."""
    if node.access.tls is None:
        return None
    if pki is None:
        raise PeerStartError(f"{node.name}: access.tls needs the run's test PKI (the topology declares no cas?)")
    return pki.listener_files(node.name, node.access.tls)


class NativeRabbitMQ(Provider):
    """Debian's `rabbitmq-server` (or RABBITMQ_SBIN), one private node per broker on loopback ports."""

    vendor, name, role = "rabbitmq", "native", "broker"

    @classmethod
    def require(cls, version: str | None = None) -> None:
        find_rabbitmq()

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        return RabbitMQPeer(setup.node, setup.capabilities, setup.broker_settings(), **setup.pki)


class RabbitMQPeer(Peer):
    """One private RabbitMQ node for broker `node.name` of a topology."""

    def __init__(self, node: Node, capabilities: frozenset[str], settings: dict | None = None, *,
                 workdir: Path | None = None, pki: TestPki | None = None):
        """`pki`: the run's test PKI, for a node whose `access.tls` makes its listener TLS only."""
        install = find_rabbitmq()  # PeerUnavailable before anything is created
        self.tls_files = _tls_files(node, pki)
        self.install = install
        self.node = node
        self.name, self.role = node.name, "broker"
        self.info = PeerInfo("rabbitmq", install.version, "native")
        self.capabilities = capabilities
        self.settings = broker_settings(settings, node.name)
        self.node_name = f"interop-{os.getpid()}-{next(_NODE_COUNTER)}@localhost"
        # Made on the first start(), so that a peer built but never started leaves nothing behind.
        self.workdir: Path | None = Path(workdir) if workdir else None
        # Erlang's daemons (epmd, the distribution listener) take their ports on the command line; held until
        # cleanup, since a restarted node binds them again
        self.amqp_port, self.dist_port, self.epmd_port = (free_port(held=True) for _ in range(3))
        self.endpoints = {"clients": Endpoint("clients", "127.0.0.1", self.amqp_port, "normal")}
        self.start_seconds: float | None = None  # how long the last start() took, for reports
        self.in_network = False  # set by join_network: an end of some network connector of the topology
        self.network_seconds: float | None = None  # how long join_network took, links up included
        self._proc: subprocess.Popen | None = None
        self._tracee: int | None = None  # with a disk fault: the start script, strace's child
        self.disk_fault = None
        self._epmd: subprocess.Popen | None = None
        self._log_lines: list[str] = []
        self._log_lock = threading.Lock()
        self._cleaned = False
        self._agent: ManagementAgent | None = None  # made on the first management question
        _live_peers.add(self)

    # ---- files and environment ----

    @property
    def home(self) -> Path:
        return self.workdir / "home"

    def _prepare(self) -> None:
        if self._cleaned:
            raise PeerStartError(f"{self.name}: this RabbitMQ peer was stopped and cleaned up; make a new one")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"interop-rabbitmq-{self.name}-"))
        for sub in ("home", "mnesia", "log"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        files = render_rabbitmq_node(self.node, self.amqp_port, self.settings,
                                     definitions_path=str(self.workdir / "definitions.json"), federation=True,
                                     tls_files=self.tls_files)
        (self.workdir / "rabbitmq.conf").write_text(files.conf)
        (self.workdir / "enabled_plugins").write_text(files.enabled_plugins)
        (self.workdir / "definitions.json").write_text(files.definitions_json)
        (self.workdir / "rabbitmq-env.conf").write_text("# empty: keeps /etc/rabbitmq/rabbitmq-env.conf out\n")

    def environment(self) -> dict[str, str]:
        """The environment of the node and of every rabbitmqctl call aimed at it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        w = self.workdir
        env.update({
            "HOME": str(self.home),  # the Erlang cookie lives here, shared by the node and rabbitmqctl
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "ERL_EPMD_PORT": str(self.epmd_port), "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_CONF_ENV_FILE": str(w / "rabbitmq-env.conf"),
            "RABBITMQ_NODENAME": self.node_name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(w / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(w / "advanced.config"),  # absent on purpose
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(w / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(w / "mnesia"),
            "RABBITMQ_LOG_BASE": str(w / "log"),
            # no speculative busy waiting of the Erlang schedulers (RabbitMQ's advice where nodes share few cores):
            # a test run keeps several nodes and other peers on two cores. The network suite alone, two runs each:
            # 79.1-81.7 busy CPU-s with it, 77.4-78.4 without; same outcomes.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": ("-kernel inet_dist_use_interface {127,0,0,1} "
                                                    "+sbwt none +sbwtdcpu none +sbwtdio none"),
            "RABBITMQ_CTL_DIST_PORT_MIN": "0", "RABBITMQ_CTL_DIST_PORT_MAX": "0",
        })
        return env

    # ---- lifecycle ----

    def start(self, timeout: float = 60.0) -> None:
        """Start (or restart after kill/stop_node, keeping the node's data) and wait until ready."""
        if self.is_running():
            return
        t0 = time.monotonic()
        timeout = max(timeout, START_FLOOR_S)
        if self._proc is not None and not bindable("127.0.0.1", self.dist_port):
            # After a kill -9 the distribution port can stay held for a minute (the killed VM's accepted
            # connections in TIME_WAIT), and the node then refuses to start (dist_port_already_used; the frames
            # fuzzer's restart of 2026-12-07). The port is not the node's identity: clients find it through epmd.
            old_port, self.dist_port = self.dist_port, free_port(held=True)
            release_ports(old_port)
            with self._log_lock:
                self._log_lines.append(f"---- interop: distribution port {old_port} still held after the last run; "
                                       f"using {self.dist_port}")
        self._prepare()
        self._start_epmd(timeout)
        with self._log_lock:
            self._log_lines.append(f"---- interop: starting node {self.node_name} on 127.0.0.1:{self.amqp_port}")
            mark = len(self._log_lines)  # readiness is judged on this run's output only
        command = [str(self.install.sbin / "rabbitmq-server")]
        if self.disk_fault is not None:  # strace and the node share the process group: kill() takes both
            try:
                command = self.disk_fault.wrap(command)
            except StraceMissing as exc:
                raise PeerUnavailable(f"{self.name}: {exc}") from None
            with self._log_lock:
                self._log_lines.append(f"---- interop: under strace: {self.disk_fault}")
        self._tracee = None
        self._proc = subprocess.Popen(
            command, cwd=self.workdir, env=self.environment(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            errors="replace", start_new_session=True)
        threading.Thread(target=self._pump_log, args=(self._proc,), name=f"log-{self.name}", daemon=True).start()
        if self.disk_fault is not None:
            proc = self._proc
            self._tracee = wait_for(lambda: traced_command(proc.pid) or self._check_alive(), 10.0,
                                    f"strace to start RabbitMQ node {self.node_name}")

        def ready():
            self._check_alive()
            with self._log_lock:
                started = any(_READY_LINE in line for line in self._log_lines[mark:])
            return started and accepts("127.0.0.1", self.amqp_port)
        try:
            wait_for(ready, timeout, f"RabbitMQ node {self.node_name} ({self.name}) to start",
                     describe=self._last_log_line)
        except (WaitTimeout, PeerStartError) as exc:
            self._kill_node()
            raise PeerStartError(str(exc)) from None
        self.start_seconds = time.monotonic() - t0

    def _start_epmd(self, timeout: float) -> None:
        if self._epmd is not None and self._epmd.poll() is None:
            return
        self._epmd = subprocess.Popen(
            [self.install.epmd, "-port", str(self.epmd_port), "-address", "127.0.0.1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=self.environment())

        def up():
            if self._epmd.poll() is not None:
                raise PeerStartError(f"{self.name}: epmd exited with status {self._epmd.returncode} "
                                     f"on port {self.epmd_port}")
            return accepts("127.0.0.1", self.epmd_port)
        try:
            wait_for(up, min(timeout, 10.0), f"epmd of {self.name} on port {self.epmd_port}")
        except WaitTimeout as exc:
            raise PeerStartError(str(exc)) from None

    def _pump_log(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with self._log_lock:
                self._log_lines.append(line.rstrip("\n"))
        proc.stdout.close()

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise PeerStartError(f"{self.name} (rabbitmq node {self.node_name}) exited with status "
                                 f"{self._proc.returncode} while starting: {self._failure_summary()}")

    def _failure_summary(self) -> str:
        """The node's own first error lines (without timestamps), else the last lines of its output."""
        lines = self.logs().splitlines()
        errors = [_LOG_PREFIX.sub("", line).strip() for line in lines if "[error]" in line]
        picked = [e for e in errors if e][:3] or [line.strip() for line in lines[-4:] if line.strip()]
        return " | ".join(picked)[:600]

    def _last_log_line(self) -> str:
        lines = self.logs().splitlines()
        return lines[-1] if lines else "(no output yet)"

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def down_reason(self) -> str | None:
        return describe_exit(self._proc.poll()) if self._proc is not None else None

    def stop_node(self, timeout: float = 30.0) -> None:
        """Stop the node gracefully (SIGTERM: the start script stops the VM cleanly), keeping its data."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGCONT)  # a paused node cannot act on SIGTERM
                # To the start script (under strace, strace's child: strace exits once the script has).
                os.kill(self._tracee or proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self._kill_node()  # whatever is left of the group (normally nothing)

    def set_disk_fault(self, fault) -> None:
        """Run the node under `fault` (harness/faults/disk.py) from now on; a running node is restarted for it."""
        self._run_under_disk_fault(fault)

    def _node_states(self, pgid: int) -> dict[int, str]:
        """group_states of the node's processes, strace left out: strace must keep running while the node is
        paused (a stopped tracer would hold a tracee's SIGSTOP and SIGCONT in between)."""
        return {pid: state for pid, state in group_states(pgid).items() if self._tracee is None or pid != pgid}

    def _signal_node(self, sig: int) -> None:
        pgid = self._proc.pid
        if self._tracee is None:
            os.killpg(pgid, sig)
            return
        for pid in self._node_states(pgid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def restart(self, timeout: float = 60.0, kill: bool = False) -> None:
        """Stop gracefully (or kill -9) and start again with the same node, ports and data."""
        self.kill() if kill else self.stop_node(timeout)
        self.start(timeout)

    def kill(self) -> None:
        """SIGKILL the whole node (VM and helpers), as a crash would; data, ports and epmd stay for a restart."""
        self._kill_node()

    def _kill_node(self) -> None:
        proc = self._proc
        if proc is None:
            return
        members = group_members(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        # Gone means reaped, not only dead: a killed VM that held gigabytes (a hostile input's nested map, 2.1 GB)
        # stays a zombie with threads for seconds while the kernel frees its memory, and keeps its epmd
        # registration and distribution port until then, so a node started meanwhile refuses to run
        # (duplicate_node_name; the frames fuzzer's restart on 2026-12-07).
        def gone():
            return not any(os.path.exists(f"/proc/{pid}") for pid in members) and not group_members(proc.pid)
        try:
            wait_for(gone, 60, f"processes of RabbitMQ node {self.node_name} to exit",
                     describe=lambda: f"pids {[p for p in members if os.path.exists(f'/proc/{p}')]}")
        except WaitTimeout:
            pass  # reported by whoever checks for strays; stopping must go on

    def pause(self) -> None:
        """SIGSTOP the node's whole process group (a hung broker: sockets stay open, nothing is answered)."""
        if not self.is_running():
            raise PeerStartError(f"{self.name}: cannot pause RabbitMQ node {self.node_name}: it is not running")
        pgid = self._proc.pid
        self._signal_node(signal.SIGSTOP)
        wait_for(lambda: all(state in "Tt" for state in self._node_states(pgid).values()), 10.0,
                 f"RabbitMQ node {self.node_name} to stop on SIGSTOP", describe=lambda: str(group_states(pgid)))

    def resume(self) -> None:
        """SIGCONT the node's process group."""
        if self._proc is None or self._proc.poll() is not None:
            raise PeerStartError(f"{self.name}: cannot resume RabbitMQ node {self.node_name}: it is not running")
        pgid = self._proc.pid
        self._signal_node(signal.SIGCONT)
        wait_for(lambda: not any(state in "Tt" for state in self._node_states(pgid).values()), 10.0,
                 f"RabbitMQ node {self.node_name} to run again on SIGCONT", describe=lambda: str(group_states(pgid)))

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the node gracefully (escalating to SIGKILL), stop its epmd, remove its files."""
        if self._cleaned:
            return
        try:
            self.stop_node(timeout)
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        if self._agent is not None:
            self._agent.close()
        epmd = self._epmd
        if epmd is not None and epmd.poll() is None:
            epmd.terminate()
            try:
                epmd.wait(5)
            except subprocess.TimeoutExpired:
                epmd.kill()
                epmd.wait(5)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        release_ports(self.amqp_port, self.dist_port, self.epmd_port)
        self._cleaned = True
        _live_peers.discard(self)

    def logs(self) -> str:
        with self._log_lock:
            return "\n".join(self._log_lines)

    @property
    def pids(self) -> list[int]:
        """Every live process of the node (its process group) and its epmd: what a stray check looks for."""
        pids = group_members(self._proc.pid) if self._proc is not None else []
        if self._epmd is not None and self._epmd.poll() is None:
            pids.append(self._epmd.pid)
        return pids

    # ---- management ----

    def ctl(self, *args: str, timeout: float = 30.0) -> str:
        """Run `rabbitmqctl -n NODE ARGS...` against this node; its stdout, or RabbitMQError (one line)."""
        if self.workdir is None or self._cleaned:
            raise RabbitMQError(f"rabbitmqctl {args[0]}: RabbitMQ node {self.node_name} is not started")
        cmd = [str(self.install.sbin / "rabbitmqctl"), "-n", self.node_name, *args]
        try:
            done = subprocess.run(cmd, env=self.environment(), cwd=self.workdir, capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RabbitMQError(f"rabbitmqctl {args[0]} on {self.node_name}: no answer within {timeout:g}s") from None
        if done.returncode != 0:
            text = " ".join((done.stderr or done.stdout).split())[:300]
            raise RabbitMQError(f"rabbitmqctl {args[0]} on {self.node_name} failed ({done.returncode}): {text}")
        return done.stdout

    def _ask(self, question: str) -> list[dict]:
        """The management agent's rows for `question` (agent.py); RabbitMQError (one line) if it fails."""
        if self.workdir is None or self._cleaned:
            raise RabbitMQError(f"{question}: RabbitMQ node {self.node_name} is not started")
        if self._agent is None:
            self._agent = ManagementAgent(self.node_name, self.environment, self.workdir)
        try:
            rows = self._agent.ask(question)
        except AgentError as exc:
            raise RabbitMQError(str(exc)) from None
        return rows if isinstance(rows, list) else []

    def wire_address(self, name: str) -> str:
        """Logical address -> RabbitMQ AMQP 1.0 address: `/amq/queue/NAME` for a declared queue,
        `/exchange/NAME` for a declared multicast address, `/queue/NAME` (declared on attach) otherwise.

        On a node in a network of brokers (join_network), a multicast address is `/exchange/NAME/NAME`: the same
        fanout exchange (a fanout ignores keys), but what a sender sends carries routing key NAME. Measured on
        RabbitMQ 3.10.8: a message sent over AMQP 1.0 to `/exchange/NAME` has no routing key, and an
        exchange federation link cannot take it: the upstream's channel crashes encoding basic.deliver
        (`rabbit_framing_amqp_0_9_1:shortstr_size(undefined)`), the link restarts, finds the message at the head
        of its queue again, and crashes again, so it and everything behind it stay upstream for good."""
        address = wire_address(self.node, name, self.settings)
        if self.in_network and address == f"/exchange/{name}":
            return f"{address}/{name}"
        return address

    # ---- network of brokers ----

    def join_network(self, running, timeout: float = 60.0) -> None:
        """Take this node's part in the topology's network of brokers, once every peer has started (ports
        known): federation upstreams, upstream sets, policies and users from harness/vendors/rabbitmq/render.py
        (federation_plan), imported in one `rabbitmqctl import_definitions` (it merges, and reports a
        refused definition at once); then wait until every federation link the plan gives this node's declared
        queues and exchanges has connected (its log line, free to watch) and runs (one federation_status).

        Federation pulls, so this node dials the nodes it fetches from: where the topology's link between the
        two goes through the fault proxy, the link's proxy is turned round to forward to the node dialled (a
        duplex connector's way back, B1 pulling from B2, dials a second proxy named `<link> back`). The nodes
        it pulls from must be RabbitMQ nodes (federation speaks AMQP 0-9-1); anything else is PeerUnavailable.
        Measured here: a link connects 20-40 ms after its policy is set; the join is the rabbitmqctl calls."""
        t0 = time.monotonic()
        try:
            plan = federation_plan(running.topology, self.name, self.settings)
        except RenderError as exc:  # a network this vendor cannot form: not this run's failure
            raise PeerUnavailable(str(exc)) from None
        self.in_network = plan.in_network
        if plan.upstreams or plan.users:
            dial = {target: self._dial_port(running, upstream, target)
                    for upstream in plan.upstreams for target in upstream.nodes}
            with self._log_lock:
                mark = len(self._log_lines)
            path = self.workdir / "network.json"
            path.write_text(json.dumps(plan.definitions(dial), indent=2, sort_keys=True) + "\n")
            try:
                self.ctl("import_definitions", str(path), timeout=START_FLOOR_S)  # part of this node's start
            except RabbitMQError as exc:
                raise PeerStartError(f"{self.name}: joining the network of brokers: {exc}") from None
            expected = plan.expected_links(declared_names(self.node, self.settings))
            ports = {upstream.name: {dial[target] for target in upstream.nodes} for upstream in plan.upstreams}

            def connected():
                with self._log_lock:
                    found = [_LINK_UP.search(line) for line in self._log_lines[mark:]]
                seen = {(m["kind"], m["name"], int(m["port"])) for m in found if m}
                return all(any((kind, name, port) in seen for port in ports[upstream])
                           for kind, name, upstream in expected)

            def running_links():
                return expected <= {key for key, row in self._link_rows().items() if row["status"] == "running"}
            what = f"{len(expected)} federation link(s) of {self.name} to run"
            try:
                wait_for(connected, timeout, what, describe=self._describe_links)
                wait_for(running_links, timeout, what, describe=self._describe_links)
            except WaitTimeout as exc:
                raise PeerStartError(str(exc)) from None
        self.network_seconds = time.monotonic() - t0

    def _dial_port(self, running, upstream, target: str) -> int:
        """The port this node dials to reach `target` for `upstream`: its AMQP port, or a fault proxy's."""
        peer = running.peers.get(target)
        if not isinstance(peer, RabbitMQPeer):
            vendor = peer.info.vendor if peer is not None else "not started"
            raise PeerUnavailable(f"{self.name}: a RabbitMQ network of brokers federates from RabbitMQ nodes only "
                                  f"(AMQP 0-9-1); {target} is {vendor}")
        # The topology's link goes from the connector's owner to the node it names; federation dials back.
        dialled = self.name if not upstream.back else target
        link = next((lk for lk in running.topology.links
                     if lk.from_ == upstream.owner and lk.to == dialled), None)
        faults = running.faults
        if link is None or link.via != "proxy" or faults is None:
            return peer.amqp_port
        if not upstream.back:
            # Turned round: the owner was to dial through it to this node; this node dials the owner instead.
            return faults.retarget(link.name, peer.amqp_port)
        name = f"{link.name} back"
        return faults.links.get(name) or faults.add(name, peer.amqp_port)

    def federation_links(self) -> list[dict]:
        """Federation link rows (rabbit_federation_status:status/0, what `rabbitmqctl federation_status` shows):
        type, queue or exchange, upstream, uri, status, error, ..."""
        return self._ask("federation")

    def _link_rows(self) -> dict[tuple[str, str, str], dict]:
        return {(row["type"], row.get("queue") or row.get("exchange"), row["upstream"]): row
                for row in self.federation_links()}

    def _describe_links(self) -> str:
        rows = self._link_rows()
        return "; ".join(f"{kind} {name} from {upstream}: {row['status']} {_erlang_text(row.get('error') or '')}"
                         .strip() for (kind, name, upstream), row in sorted(rows.items()))[:600] or "no links"

    def queue_stats(self, name: str) -> dict:
        """{"depth", "available", "in_flight", "consumers", "exists"} for a logical queue name (or a wire
        address). For a multicast address (a fanout exchange), the sums over its subscription queues, plus
        "subscriptions". Counts come from the queue processes themselves (rabbit_amqqueue:info_all/2, what
        `rabbitmqctl list_queues` calls), not from sampled statistics, so they are current. Asked through the
        node's management agent: milliseconds a call, where rabbitmqctl took 1.6 s."""
        logical = _logical(name)
        by_name = {row["name"]: row for row in self._ask("queues")}
        if logical in by_name:
            return _stats([by_name[logical]], exists=True)
        if declared_names(self.node, self.settings).get(logical) == "exchange" or name.startswith("/exchange/"):
            bindings = self._ask("bindings")
            bound = [by_name[b["destination_name"]] for b in bindings
                     if b["source_name"] == logical and b["destination_kind"] == "queue"
                     and b["destination_name"] in by_name]
            stats = _stats(bound, exists=True)
            stats["subscriptions"] = len(bound)
            return stats
        return _stats([], exists=False)


def _logical(name: str) -> str:
    for prefix in ("/amq/queue/", "/queue/", "/exchange/"):
        if name.startswith(prefix):
            return name[len(prefix):].split("/", 1)[0]
    return name


def _erlang_text(value) -> str:
    """A federation_status error as text: rabbitmqctl prints Erlang strings in it as lists of character codes."""
    if isinstance(value, list):
        if value and all(isinstance(v, int) and 9 <= v < 0x110000 for v in value):
            return "".join(map(chr, value))
        return " ".join(_erlang_text(v) for v in value)
    return str(value)


def _json_rows(text: str) -> list[dict]:
    text = text.strip()
    if not text:
        return []
    try:
        rows = json.loads(text)
    except json.JSONDecodeError:
        raise RabbitMQError(f"rabbitmqctl printed something that is not JSON: {' '.join(text.split())[:200]}") from None
    return rows if isinstance(rows, list) else []


def _stats(rows: list[dict], exists: bool) -> dict:
    def total(key: str) -> int:
        return sum(int(row.get(key) or 0) for row in rows)
    return {"depth": total("messages"), "available": total("messages_ready"),
            "in_flight": total("messages_unacknowledged"), "consumers": total("consumers"), "exists": exists}
