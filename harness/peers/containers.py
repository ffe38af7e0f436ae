"""Peers in containers (testcontainers over a Docker engine): the generic part. Each vendor's container.py says
which image to run with which files (a `ContainerProvider` subclass and its `spec`); INTEROP_IMAGE_<VENDOR> picks
another image.

Every AMQP port of a container is published on 127.0.0.1 only, on a free host port. Ready means the product
logged its ready line and the published port accepts (Docker's proxy accepts before the product listens, so
the port alone proves nothing).

A missing engine is found up front and in milliseconds: without DOCKER_HOST and without /var/run/docker.sock
there is nothing to ask; otherwise `docker.from_env().ping()` with a short timeout. The answer is cached for
the process, so a matrix of container cells on a machine without Docker skips them all at once with
"no Docker engine: ...".
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..topology import Topology
from ..ports import free_port
from ..wait import WaitTimeout, accepts, wait_for
from .base import Endpoint, Peer, PeerInfo, PeerStartError, PeerUnavailable
from .provider import NodeSetup, Provider

DOCKER_TIMEOUT = 2.0  # seconds for the engine to answer a ping
DEFAULT_SOCKET = "/var/run/docker.sock"
AMQP_PORT = 5672  # inside every container


# ---- the engine ---------------------------------------------------------------------------------------------

_engine_lock = threading.Lock()
_engine: object | None = None  # a docker.DockerClient, or the PeerUnavailable saying why there is none


def reset_docker_engine_cache() -> None:
    """Forget the cached answer (tests; a long-lived process whose engine came up)."""
    global _engine
    with _engine_lock:
        _engine = None


def docker_engine():
    """A docker client that answered a ping; PeerUnavailable("no Docker engine: ...") otherwise. Cached."""
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = _connect()
        engine = _engine
    if isinstance(engine, PeerUnavailable):
        raise engine
    return engine


def _connect():
    why = _no_socket()
    if why:
        return PeerUnavailable(f"no Docker engine: {why}")
    try:
        import docker
    except ImportError:
        return PeerUnavailable("no Docker engine: the `docker` Python package is not installed")
    try:
        client = docker.from_env(timeout=DOCKER_TIMEOUT)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine means the same thing here
        return PeerUnavailable(f"no Docker engine: {' '.join(str(exc).split())[:300]}")
    return client


def _no_socket() -> str | None:
    """Why there is certainly no engine to ask (without importing docker), or None if one may answer."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        return None if os.path.exists(DEFAULT_SOCKET) else f"{DEFAULT_SOCKET} does not exist and DOCKER_HOST is unset"
    if host.startswith("unix://"):
        path = host[len("unix://"):]
        return None if os.path.exists(path) else f"DOCKER_HOST={host}: {path} does not exist"
    return None  # tcp:// or ssh://: only a ping can tell


# ---- what to run --------------------------------------------------------------------------------------------


@dataclass
class ContainerSpec:
    """Everything needed to run one node in a container; built without Docker, so it is testable here."""

    vendor: str
    role: str
    image: str
    ports: dict[str, int]  # listener name -> port inside the container
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path inside the container -> content (read-only)
    ready: re.Pattern = re.compile(".")
    wire: Callable[[str], str] = field(default=lambda name: name)  # logical name -> address on the wire
    stats_command: list[str] | None = None  # a command run in the container that prints its queues
    stats_from: Callable[[str, str], dict] | None = None  # (that command's output, queue name) -> queue_stats


def image_for(env: str, default: str) -> str:
    """The image to run: the environment variable's, else the vendor's default."""
    return os.environ.get(env) or default


def listener_ports(topology: Topology, node_name: str) -> dict[str, int]:
    return {ls.name: AMQP_PORT + i for i, ls in enumerate(topology.listeners_for(node_name))}


def node_settings(topology: Topology, node_name: str, settings: dict | None) -> dict | None:
    if settings is not None:
        return settings
    node_settings = getattr(topology.node(node_name), "settings", None)
    if node_settings is None:
        return None
    return {"dead_letter_address": None, "expiry_address": None, **node_settings.as_dict()}


# ---- the peer -----------------------------------------------------------------------------------------------


class ContainerPeer(Peer):
    """One node in a container. The engine is checked here, before anything else happens."""

    def __init__(self, name: str, spec: ContainerSpec, capabilities: frozenset[str]):
        self.client = docker_engine()  # PeerUnavailable, fast, when there is no engine
        self.name, self.role, self.spec, self.capabilities = name, spec.role, spec, capabilities
        tag = spec.image.rsplit(":", 1)[1] if ":" in spec.image.rsplit("/", 1)[-1] else "latest"
        self.info = PeerInfo(spec.vendor, tag, "container")
        self.endpoints: dict[str, Endpoint] = {}
        self.workdir: Path | None = None  # the mounted files, made by start()
        self._container = None
        self._log_mark = 0

    def start(self, timeout: float = 120.0) -> None:
        from testcontainers.core.container import DockerContainer

        container = DockerContainer(self.spec.image)
        self.workdir = self.workdir or Path(tempfile.mkdtemp(prefix=f"interop-{self.spec.vendor}-{self.name}-"))
        for key, value in self.spec.env.items():
            container.with_env(key, value)
        for i, (path, text) in enumerate(self.spec.files.items()):
            host = self.workdir / f"{i}-{Path(path).name}"
            host.write_text(text)
            host.chmod(0o644)  # images run as their own user
            container.with_volume_mapping(str(host), path, "ro")
        host_ports = {listener: free_port() for listener in self.spec.ports}
        for listener, port in self.spec.ports.items():
            container.ports[f"{port}/tcp"] = ("127.0.0.1", host_ports[listener])  # loopback only
        try:
            container.start()
        except Exception as exc:  # noqa: BLE001 - pull or create failures
            reason = " ".join(str(exc).split())[:300]
            raise PeerStartError(f"{self.name}: cannot start {self.spec.image}: {reason}") from None
        self._container = container
        self.endpoints = {name: Endpoint(name, "127.0.0.1", port, "normal") for name, port in host_ports.items()}
        self._log_mark = 0
        self._wait_ready(timeout)
        labels = getattr(container.get_wrapped_container().image, "labels", None) or {}
        version = labels.get("org.opencontainers.image.version")
        if version:
            self.info = PeerInfo(self.spec.vendor, version, "container")

    def _wait_ready(self, timeout: float) -> None:
        def ready():
            if not self.is_running():
                raise PeerStartError(f"{self.name}: container {self.spec.image} exited: {self._tail()}")
            return bool(self.spec.ready.search(self.logs()[self._log_mark:])) and all(
                accepts(ep.host, ep.port) for ep in self.endpoints.values())
        try:
            wait_for(ready, timeout, f"{self.spec.vendor} container {self.name} to be ready", describe=self._tail)
        except WaitTimeout as exc:
            self.kill()
            raise PeerStartError(str(exc)) from None

    def _tail(self) -> str:
        lines = [line for line in self.logs().splitlines() if line.strip()]
        return lines[-1] if lines else "(no output yet)"

    def _wrapped(self):
        return None if self._container is None else self._container.get_wrapped_container()

    def is_running(self) -> bool:
        wrapped = self._wrapped()
        if wrapped is None:
            return False
        try:
            wrapped.reload()
        except Exception:  # noqa: BLE001 - removed
            return False
        return wrapped.status == "running"

    def down_reason(self) -> str | None:
        if self._container is None or self.is_running():
            return None
        return "its container is no longer running"

    def logs(self) -> str:
        wrapped = self._wrapped()
        if wrapped is None:
            return ""
        try:
            return wrapped.logs().decode(errors="replace")
        except Exception:  # noqa: BLE001
            return ""

    def kill(self) -> None:
        """SIGKILL the container's processes; the container (and its data) stays for a restart."""
        wrapped = self._wrapped()
        if wrapped is not None and self.is_running():
            wrapped.kill()

    def pause(self) -> None:
        wrapped = self._wrapped()
        if wrapped is not None:
            wrapped.pause()

    def resume(self) -> None:
        wrapped = self._wrapped()
        if wrapped is not None:
            wrapped.unpause()

    def restart(self, timeout: float = 120.0, kill: bool = False) -> None:
        """Stop (or kill) and start the same container: same ports, same data."""
        wrapped = self._wrapped()
        if wrapped is None:
            raise PeerStartError(f"{self.name}: not started")
        self._log_mark = len(self.logs())
        wrapped.kill() if kill else wrapped.stop(timeout=int(timeout))
        wrapped.start()
        self._wait_ready(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self._container is not None:
            try:
                self._wrapped().stop(timeout=int(timeout))
            except Exception:  # noqa: BLE001 - already gone
                pass
            self._container.stop()  # removes the container and its anonymous volumes
            self._container = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def wire_address(self, name: str) -> str:
        return self.spec.wire(name)

    def queue_stats(self, name: str) -> dict:
        if self.spec.stats_command is None or self.spec.stats_from is None:
            raise NotImplementedError(f"queue_stats is not implemented for the {self.spec.vendor} container yet")
        code, output = self._container.exec(self.spec.stats_command)
        if code != 0:
            raise RuntimeError(f"{self.name}: {' '.join(self.spec.stats_command[:2])} failed ({code}): "
                               f"{' '.join(output.decode(errors='replace').split())[:300]}")
        return self.spec.stats_from(output.decode(errors="replace"), name)


# ---- providers (each vendor's container.py subclasses this one) -------------------------------------------------


class ContainerProvider(Provider):
    """A vendor's image over a Docker engine; probe() asks the engine once per process (cached). A vendor's
    subclass sets vendor and role and says what to run (`spec`)."""

    name = "container"

    @classmethod
    def require(cls, version: str | None = None) -> None:
        docker_engine()

    @classmethod
    def spec(cls, topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
        """What to run for one node; PeerUnavailable (one line) for a node this image cannot be."""
        raise NotImplementedError

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        return ContainerPeer(setup.node_name, cls.spec(setup.topology, setup.node_name), setup.capabilities)


def container_spec(vendor: str, topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    """The container spec of a vendor's node, from its package's container provider."""
    from .registry import entries_of, provider_class

    for entry in entries_of(vendor):
        for path in entry.providers:
            provider = provider_class(path)
            if issubclass(provider, ContainerProvider):
                return provider.spec(topology, node_name, settings)
    raise PeerUnavailable(f"no container image for vendor {vendor}")
