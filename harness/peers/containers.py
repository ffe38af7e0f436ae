"""Peers in containers (testcontainers over a Docker engine): Artemis, ActiveMQ Classic, RabbitMQ, qdrouterd.

* artemis: `apache/activemq-artemis` (INTEROP_IMAGE_ARTEMIS), broker.xml mounted at etc-override/, anonymous
  login on;
* activemq-classic: `apache/activemq-classic` (INTEROP_IMAGE_ACTIVEMQ_CLASSIC), the image's own config (AMQP
  on 5672);
* rabbitmq: `rabbitmq:3.10` (INTEROP_IMAGE_RABBITMQ), rabbitmq.conf, enabled_plugins (AMQP 1.0 plugin) and
  definitions mounted in /etc/rabbitmq;
* qdrouterd: `quay.io/interconnectedcloud/qdrouterd` (INTEROP_IMAGE_QDROUTERD), qdrouterd.conf in QDROUTERD_CONF.

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

from ..render.artemis import broker_settings, render_broker_xml
from ..render.qdrouterd import render_router
from ..render.rabbitmq import render_rabbitmq
from ..render.rabbitmq import wire_address as rabbitmq_wire_address
from ..topology import Topology
from ..ports import free_port
from ..wait import WaitTimeout, accepts, wait_for
from .base import Endpoint, Peer, PeerInfo, PeerStartError, PeerUnavailable
from .provider import NodeSetup, Provider

DOCKER_TIMEOUT = 2.0  # seconds for the engine to answer a ping
DEFAULT_SOCKET = "/var/run/docker.sock"
AMQP_PORT = 5672  # inside every container

IMAGES = {
    "artemis": ("INTEROP_IMAGE_ARTEMIS", "apache/activemq-artemis:latest"),
    "activemq-classic": ("INTEROP_IMAGE_ACTIVEMQ_CLASSIC", "apache/activemq-classic:latest"),
    "rabbitmq": ("INTEROP_IMAGE_RABBITMQ", "rabbitmq:3.10"),
    "qdrouterd": ("INTEROP_IMAGE_QDROUTERD", "quay.io/interconnectedcloud/qdrouterd:latest"),
}
ARTEMIS_INSTANCE = "/var/lib/artemis-instance"

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
    stats_command: list[str] | None = None  # a rabbitmqctl-style command printing queue rows as JSON


def image_for(vendor: str) -> str:
    env, default = IMAGES[vendor]
    return os.environ.get(env) or default


def _listener_ports(topology: Topology, node_name: str) -> dict[str, int]:
    return {ls.name: AMQP_PORT + i for i, ls in enumerate(topology.listeners_for(node_name))}


def _settings(topology: Topology, node_name: str, settings: dict | None) -> dict | None:
    if settings is not None:
        return settings
    node_settings = getattr(topology.node(node_name), "settings", None)
    if node_settings is None:
        return None
    return {"dead_letter_address": None, "expiry_address": None, **node_settings.as_dict()}


def artemis_spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    if getattr(topology.node(node_name), "broker_connections", None):
        raise PeerUnavailable(f"{node_name}: an Artemis container with broker connections dials other nodes, which "
                              "needs a shared container network that this provider does not set up yet")
    ports = _listener_ports(topology, node_name)
    xml = render_broker_xml(topology, node_name, ports, _settings(topology, node_name, settings), host="0.0.0.0")
    return ContainerSpec(
        "artemis", "broker", image_for("artemis"), ports,
        env={"ANONYMOUS_LOGIN": "true", "ARTEMIS_USER": "artemis", "ARTEMIS_PASSWORD": "artemis"},
        files={f"{ARTEMIS_INSTANCE}/etc-override/broker.xml": xml},
        ready=re.compile(r"AMQ221007"))  # "Server is now live" (older) / "Server is now active" (newer)


def activemq_classic_spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    node = topology.node(node_name)
    if len(topology.listeners_for(node_name)) > 1:
        raise PeerUnavailable(f"{node_name}: the activemq-classic image has one AMQP transport; "
                              "extra listeners are not supported")
    topics = {q.address for q in node.queues if q.routing == "multicast"}

    def wire(name: str) -> str:
        # Classic's AMQP transport: a bare name is a queue, `topic://NAME` a topic.
        if "://" in name:
            return name
        return f"topic://{name}" if name in topics else name
    return ContainerSpec("activemq-classic", "broker", image_for("activemq-classic"), {"clients": AMQP_PORT},
                         ready=re.compile(r"Apache ActiveMQ \S+ .*started"), wire=wire)


def rabbitmq_spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    if len(topology.listeners_for(node_name)) > 1:
        raise PeerUnavailable(f"{node_name}: the RabbitMQ renderer writes one AMQP listener; "
                              "extra listeners are not supported")
    merged = _settings(topology, node_name, settings)
    files = render_rabbitmq(topology, node_name, AMQP_PORT, merged, listen_host="0.0.0.0",
                            definitions_path="/etc/rabbitmq/definitions.json")
    node = topology.node(node_name)
    s = broker_settings(merged, node_name)
    return ContainerSpec(
        "rabbitmq", "broker", image_for("rabbitmq"), {"clients": AMQP_PORT},
        files={"/etc/rabbitmq/rabbitmq.conf": files.conf, "/etc/rabbitmq/enabled_plugins": files.enabled_plugins,
               "/etc/rabbitmq/definitions.json": files.definitions_json},
        ready=re.compile(r"Server startup complete"),
        wire=lambda name: rabbitmq_wire_address(node, name, s),
        stats_command=["rabbitmqctl", "list_queues", "-q", "--formatter", "json", "name", "messages",
                       "messages_ready", "messages_unacknowledged", "consumers"])


def qdrouterd_spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    if topology.links_from(node_name):
        raise PeerUnavailable(f"{node_name}: a qdrouterd container that dials other nodes needs a shared "
                              "container network, which this provider does not set up yet")
    ports = _listener_ports(topology, node_name)
    conf = render_router(topology, node_name, listen_ports=ports, listen_host="0.0.0.0")
    return ContainerSpec("qdrouterd", "router", image_for("qdrouterd"), ports, env={"QDROUTERD_CONF": conf},
                         ready=re.compile(r"Listening on|Router started|Router Engine Instantiated"))


SPECS: dict[str, Callable[..., ContainerSpec]] = {
    "artemis": artemis_spec, "activemq-classic": activemq_classic_spec, "rabbitmq": rabbitmq_spec,
    "qdrouterd": qdrouterd_spec,
}


def container_spec(vendor: str, topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    if vendor not in SPECS:
        raise PeerUnavailable(f"no container image for vendor {vendor}")
    return SPECS[vendor](topology, node_name, settings)


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
        if self.spec.stats_command is None:
            raise NotImplementedError(f"queue_stats is not implemented for the {self.spec.vendor} container yet")
        from .rabbitmq import _json_rows, _logical, _stats

        code, output = self._container.exec(self.spec.stats_command)
        if code != 0:
            raise RuntimeError(f"{self.name}: {' '.join(self.spec.stats_command[:2])} failed ({code}): "
                               f"{' '.join(output.decode(errors='replace').split())[:300]}")
        rows = {row["name"]: row for row in _json_rows(output.decode(errors="replace"))}
        logical = _logical(name)
        return _stats([rows[logical]], True) if logical in rows else _stats([], False)


# ---- providers (harness/peers/registry.py lists them) ------------------------------------------------------------


class _ContainerProvider(Provider):
    """A vendor's image over a Docker engine; probe() asks the engine once per process (cached)."""

    name = "container"

    @classmethod
    def require(cls, version: str | None = None) -> None:
        docker_engine()

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        spec = SPECS[cls.vendor](setup.topology, setup.node_name)
        return ContainerPeer(setup.node_name, spec, setup.capabilities)


class ArtemisContainer(_ContainerProvider):
    vendor, role = "artemis", "broker"


class ActiveMQClassicContainer(_ContainerProvider):
    vendor, role = "activemq-classic", "broker"


class RabbitMQContainer(_ContainerProvider):
    vendor, role = "rabbitmq", "broker"


class QdrouterdContainer(_ContainerProvider):
    vendor, role = "qdrouterd", "router"
