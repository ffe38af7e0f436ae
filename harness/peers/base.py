"""The Peer interface: one running router or broker, whoever provides it.

Providers (reference subprocess, native process, container, external) all hand the harness a `Peer`.
Suites only ever see this interface and the wire; they never know how a peer was started.
"""

from __future__ import annotations

import abc
import functools
import threading
from dataclasses import dataclass, field

from .. import fault_log
from ..faults.disk import StraceMissing, find_strace
from .liveness import amqp_silence


# The least time a real product's start is given, whatever its caller asked (60 s by default). A JVM's or an Erlang
# VM's start is CPU-bound (class loading, the JIT, boot steps): 3-7 s each on a quiet machine, but well over 60 s
# when two cores start a dozen of them at once (three cells' networks of brokers, load 37: a Classic spoke and a
# RabbitMQ federation import each ran out of 60 s and 30 s on 2026-11-27). Starting is not what a case judges.
START_FLOOR_S = 180.0


ROLES = ("router", "broker")  # the roles a peer plays in a topology


class PeerUnavailable(Exception):
    """The provider cannot run this peer on this machine (no binary, no Docker engine, ...).

    Suites report this as `skipped` with the message as the reason; it is never a failure.
    """


class PeerStartError(Exception):
    """The peer was available but failed to start (bad config, crashed, never became ready)."""


def describe_exit(returncode: int | None) -> str | None:
    """A process's exit status as a reason a peer is down (None while the process runs)."""
    if returncode is None:
        return None
    if returncode < 0:
        return f"its process was killed by signal {-returncode}"
    return f"its process exited with status {returncode}"


@dataclass(frozen=True)
class PeerInfo:
    """What a result record says about a peer."""

    vendor: str
    version: str
    provider: str

    def as_record(self) -> dict:
        return {"vendor": self.vendor, "version": self.version, "provider": self.provider}


@dataclass
class Endpoint:
    """A listener clients (or other nodes) can reach."""

    name: str
    host: str
    port: int
    role: str = "normal"

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"


_in_fault = threading.local()  # how deep in noted fault methods this thread is (a restart calls kill)


def _noted(method: str, function):
    """`function` (a provider's kill, pause or restart) noting the fault it injected for the case's record
    (harness/fault_log.py): once, by the outermost call, and not when the provider cannot do it."""
    @functools.wraps(function)
    def noting(self, *args, **kwargs):
        outer = not getattr(_in_fault, "depth", 0)
        _in_fault.depth = getattr(_in_fault, "depth", 0) + 1
        try:
            return function(self, *args, **kwargs)
        except NotImplementedError:
            outer = False
            raise
        finally:
            _in_fault.depth -= 1
            name = {"kill": "kill -9", "pause": "pause"}.get(method)
            if method == "restart" and kwargs.get("kill"):
                name = "kill -9 and restart"
            if outer and name:  # a plain restart puts a peer back; it is not a fault
                fault_log.note(name, f"{self.role} {self.name}")
    return noting


class Peer(abc.ABC):
    """A running router or broker."""

    name: str  # node name in the topology (e.g. "R1")
    role: str  # "router" or "broker"
    info: PeerInfo
    capabilities: frozenset[str]
    endpoints: dict[str, Endpoint]

    def __init_subclass__(cls, **kwargs):
        """Whichever provider class implements kill, pause or restart, the fault it injects is noted for the
        case's record (see _noted)."""
        super().__init_subclass__(**kwargs)
        for method in ("kill", "pause", "restart"):
            if method in cls.__dict__:
                setattr(cls, method, _noted(method, cls.__dict__[method]))

    @property
    def client_endpoint(self) -> Endpoint | None:
        """The first `normal` listener: where clients attach."""
        return next((ep for ep in self.endpoints.values() if ep.role == "normal"), None)

    @property
    def url(self) -> str:
        """URL of the client listener."""
        if (endpoint := self.client_endpoint) is None:
            raise LookupError(f"peer {self.name} has no listener with role normal")
        return endpoint.url

    @abc.abstractmethod
    def start(self, timeout: float = 30.0) -> None:
        """Start and return once the peer accepts AMQP connections; raise PeerStartError otherwise."""

    @abc.abstractmethod
    def stop(self, timeout: float = 10.0) -> None:
        """Stop gracefully (SIGTERM or equivalent); escalate to kill after `timeout`."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Stop abruptly (kill -9 or equivalent), as a crash would."""

    @abc.abstractmethod
    def is_running(self) -> bool: ...

    def down_reason(self) -> str | None:
        """Why a started peer no longer serves (its process ended, its container stopped), or None while it
        runs or when the provider cannot tell without probing the wire. The harness asks before every case,
        so providers answer from what they already know (a process's exit status), never with a connection."""
        return None

    def silence(self, timeout: float, tls: bool = False) -> str | None:
        """Why a peer that is not down still does not serve (it is hung: connections are accepted and left
        unanswered), or None when its client listener answers an AMQP protocol header within `timeout` (inside
        TLS when `tls`: the listener is amqps). One connection per call: the harness asks only after a case failed
        or met an expected difference (see RunningTopology.probe_peers)."""
        if (endpoint := self.client_endpoint) is None:
            return None  # no listener for clients: nothing to ask
        return amqp_silence(endpoint.host, endpoint.port, timeout, tls=tls)

    # Process faults. Providers that can do them override these; the others say so clearly.
    def pause(self) -> None:
        """Freeze the peer (SIGSTOP or equivalent): its sockets stay open but it answers nothing until resume()."""
        raise NotImplementedError(f"peer {self.name}: the {self.info.provider} provider of {self.info.vendor} "
                                  "cannot pause a peer")

    def resume(self) -> None:
        """Let a paused peer run again (SIGCONT or equivalent)."""
        raise NotImplementedError(f"peer {self.name}: the {self.info.provider} provider of {self.info.vendor} "
                                  "cannot resume a peer")

    def restart(self, timeout: float = 30.0, *, kill: bool = False) -> None:
        """Stop the peer (gracefully, or abruptly with `kill=True`) and start it again on the same ports;
        return once it accepts connections again."""
        raise NotImplementedError(f"peer {self.name}: the {self.info.provider} provider of {self.info.vendor} "
                                  "cannot restart a peer")

    def replace_binary(self, version: str | None, *, kill: bool = False, before_start=None,
                       timeout: float = 30.0) -> None:
        """An upgrade (or downgrade) in place: stop the peer (gracefully, or kill -9 with `kill`), put release
        `version` of its product (None: the pinned default, what a choice without a version runs) where the one it
        ran was, on the same work dir (data, journal, configuration),
        and start it on the same ports. `before_start(peer)` runs while it is down, between the two releases (a
        case reads the data then). PeerUnavailable, before anything is stopped, where the provider cannot do it
        or that release cannot be had here; PeerStartError when the other release does not start on the data."""
        raise PeerUnavailable(f"peer {self.name}: the {self.info.provider} provider of {self.info.vendor} cannot "
                              "replace a peer's binary in place (it does not own the peer's install and data)")

    data_dir = None  # a broker's data (journal, KahaDB) on this machine, where the provider knows it; else None

    disk_fault = None  # a harness.faults.disk.SlowDisk while the peer runs with a slow disk, else None

    def set_disk_fault(self, fault) -> None:
        """Run the peer with `fault` (a `harness.faults.disk.SlowDisk`, or None for an idle disk) from now on. A
        running peer is restarted (gracefully, same ports, same data) to take it; later restarts, also after a
        kill -9, keep it. PeerUnavailable (a case reports `skipped`) when the provider cannot do it."""
        if fault is None:
            return
        raise PeerUnavailable(f"peer {self.name}: the {self.info.provider} provider of {self.info.vendor} cannot "
                              "slow a peer's disk (it does not start the peer's process, so it cannot run it "
                              "under strace)")

    def _run_under_disk_fault(self, fault) -> None:
        """set_disk_fault for providers that run the peer under strace (process peers, native RabbitMQ)."""
        if fault is not None:
            try:
                find_strace()
            except StraceMissing as exc:
                raise PeerUnavailable(f"{self.name}: {exc}") from None
        if fault == self.disk_fault:
            return
        self.disk_fault = fault
        if self.is_running():
            self.restart()
        if fault is not None:
            fault_log.note("slow disk", f"{self.role} {self.name}", delay_ms=fault.delay_ms)

    @abc.abstractmethod
    def logs(self) -> str:
        """Everything the peer has logged so far."""

    def all_logs(self) -> str:
        """The log of every run of the peer, earlier runs (before a restart) first."""
        return self.logs()

    @property
    def pids(self) -> list[int]:
        """The peer's live local processes (what CPU, RSS, socket and stray checks read); [] for a peer that is not a
        local process (a container, an external peer) or not running."""
        return []

    def cleanup(self) -> None:  # noqa: B027 - an optional hook: most providers leave nothing behind
        """Remove what the provider left on disk (work dirs, journals) once the peer is stopped for good."""

    def wire_address(self, name: str) -> str:
        """The address a vendor expects on the wire for a logical queue/topic name (identity by default)."""
        return name

    def queue_stats(self, name: str) -> dict:
        """{"depth", "consumers", ...} of a broker queue; providers without a management view cannot say."""
        raise NotImplementedError(f"{self.info.provider} provider of {self.info.vendor} has no queue statistics")

    # Broker connections (Artemis's <broker-connections>): the broker dials out on its own. Providers whose
    # broker has a management view of them override these; the others say so in one line, and a case that
    # needs them reports `skipped` with that line.
    def broker_connections(self) -> list[dict]:
        """Every broker connection the broker has configured, as it sees it now: {"name", "uri", "started",
        "connected", "target" ("host:port" it is on or last tried), "attempts" (failed dials since the last
        successful one), "connects", "gave_up", "attempt_times" (epoch seconds), "targets_tried"}."""
        raise NotImplementedError(f"{self.info.provider} provider of {self.info.vendor} cannot list broker "
                                  "connections")

    def start_broker_connection(self, name: str) -> None:
        """Start a broker connection configured with auto-start off (Artemis's startBrokerConnection)."""
        raise NotImplementedError(f"{self.info.provider} provider of {self.info.vendor} cannot start a broker "
                                  "connection")

    def delete_queue(self, name: str) -> None:
        """Destroy a queue and the messages on it (Artemis's destroyQueue), as an operator would."""
        raise NotImplementedError(f"{self.info.provider} provider of {self.info.vendor} cannot delete a queue")


class ManagementError(Exception):
    """A broker's management view refused or failed an operation; str() names the peer, the operation and
    what the broker answered. `status` is the HTTP status where there was one (404: no such object, 409: it is
    already in that state), else None (the management endpoint did not answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass
class VendorSpec:
    """A vendor as the matrix knows it: its name, the role it plays and what it can do."""

    vendor: str
    role: str
    capabilities: frozenset[str] = field(default_factory=frozenset)
