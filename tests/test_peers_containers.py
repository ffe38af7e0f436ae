"""Container and external providers, and the vendor table: everything that runs without a Docker engine.

The missing-engine path must be fast (a matrix of container cells on a machine without Docker is skipped at
once); the container specs are checked by reading the rendered configs back; the external provider is
checked against a local listening socket.
"""

import json
import re
import socket
import time

import pytest

from harness.peers import containers
from harness.peers.base import PeerStartError, PeerUnavailable
from harness.peers.containers import ContainerPeer, container_spec, docker_engine, reset_docker_engine_cache
from harness.peers.external import ExternalPeer, parse_external
from harness.peers.launch import make_peer
from harness.peers.registry import REGISTRY
from harness.vendors.rabbitmq import BROKER as RABBITMQ_BROKER
from harness.peers.vendors import (DEFAULT_PEERS, Choice, parse_choice, vendor, vendor_names,
                                   vendor_roles)
from harness.topology import parse_topology
from reference.broker.config import parse_config
from reference.router.config import parse_config as parse_router_config

TOPOLOGY = parse_topology({"name": "containers", "nodes": {
    "R1": {"role": "router"},
    "B1": {"role": "broker", "queues": [{"address": "orders"}, {"address": "news", "routing": "multicast"}],
           "settings": {"dead_letter_address": "DLQ", "max_delivery_attempts": 3}},
}})


@pytest.fixture
def no_engine(monkeypatch):
    """A Docker host that certainly is not there, and no cached answer from earlier tests."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/interop/docker.sock")
    reset_docker_engine_cache()
    yield
    reset_docker_engine_cache()


# ---- no engine ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("node, choice", [
    ("B1", "artemis@container"), ("B1", "activemq-classic@container"), ("B1", "rabbitmq@container"),
    ("R1", "qdrouterd@container"),
])
def test_no_docker_engine_is_reported_at_once(no_engine, node, choice):
    t0 = time.monotonic()
    with pytest.raises(PeerUnavailable, match=r"^no Docker engine: DOCKER_HOST=unix:///nonexistent/") as info:
        make_peer(TOPOLOGY, node, choice)
    # At once means without sitting out the engine's ping timeout (a looser bound than a figure in ms,
    # which a loaded CI machine can stretch).
    assert time.monotonic() - t0 < containers.DOCKER_TIMEOUT
    assert "\n" not in str(info.value)


def test_the_answer_is_cached_per_process(no_engine, monkeypatch):
    with pytest.raises(PeerUnavailable):
        docker_engine()
    monkeypatch.setattr(containers, "_connect", lambda: pytest.fail("asked the engine twice"))
    for _ in range(100):
        with pytest.raises(PeerUnavailable, match="^no Docker engine"):
            ContainerPeer("B1", container_spec("artemis", TOPOLOGY, "B1"), frozenset())


def test_an_engine_that_does_not_answer_is_no_engine(monkeypatch):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    reset_docker_engine_cache()
    try:
        t0 = time.monotonic()
        with pytest.raises(PeerUnavailable, match=r"^no Docker engine: "):
            docker_engine()
        assert time.monotonic() - t0 < containers.DOCKER_TIMEOUT + 1
    finally:
        reset_docker_engine_cache()


def test_this_machine(monkeypatch):
    """Here there is no engine (DESIGN.md); elsewhere an engine that answers is fine too."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    reset_docker_engine_cache()
    try:
        t0 = time.monotonic()
        try:
            docker_engine()
        except PeerUnavailable as exc:
            assert str(exc).startswith("no Docker engine: ")
            assert time.monotonic() - t0 < containers.DOCKER_TIMEOUT
    finally:
        reset_docker_engine_cache()


def test_plain_qdrouterd_tries_native_then_container(no_engine, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(PeerUnavailable) as info:
        make_peer(TOPOLOGY, "R1", "qdrouterd")
    assert str(info.value).startswith("qdrouterd is not on PATH")
    assert "; no Docker engine: " in str(info.value)


# ---- what each image gets ---------------------------------------------------------------------------------------


def test_artemis_spec():
    spec = container_spec("artemis", TOPOLOGY, "B1")
    assert spec.image.startswith("apache/activemq-artemis:") and spec.role == "broker"
    assert spec.env["ANONYMOUS_LOGIN"] == "true"
    assert spec.ports == {"clients": 5672}
    [(path, xml)] = spec.files.items()
    assert path == "/var/lib/artemis-instance/etc-override/broker.xml"
    cfg = parse_config(xml, path)
    assert [(a.host, a.port) for a in cfg.acceptors] == [("0.0.0.0", 5672)]
    assert cfg.settings_for("orders")["dead-letter-address"] == "DLQ"
    assert cfg.settings_for("orders")["max-delivery-attempts"] == 3
    assert cfg.settings_for("orders")["expiry-address"] is None  # the topology names none
    assert spec.ready.search("AMQ221007: Server is now live") and spec.ready.search("AMQ221007: Server is now active")
    assert spec.wire("orders") == "orders"


def test_rabbitmq_spec():
    spec = container_spec("rabbitmq", TOPOLOGY, "B1")
    assert spec.image.startswith("rabbitmq:3.")
    files = spec.files
    assert set(files) == {"/etc/rabbitmq/rabbitmq.conf", "/etc/rabbitmq/enabled_plugins",
                          "/etc/rabbitmq/definitions.json"}
    conf = files["/etc/rabbitmq/rabbitmq.conf"]
    assert "listeners.tcp.default = 0.0.0.0:5672\n" in conf
    assert "load_definitions = /etc/rabbitmq/definitions.json\n" in conf
    assert files["/etc/rabbitmq/enabled_plugins"] == "[rabbitmq_amqp1_0].\n"
    defs = json.loads(files["/etc/rabbitmq/definitions.json"])
    assert {q["name"] for q in defs["queues"]} == {"DLQ", "orders"}
    assert spec.wire("orders") == "/amq/queue/orders" and spec.wire("news") == "/exchange/news"
    assert spec.wire("DLQ") == "/amq/queue/DLQ" and spec.wire("x") == "/queue/x"
    assert spec.stats_command[0] == "rabbitmqctl"
    assert spec.ready.search("Server startup complete; 1 plugins started.")


def test_activemq_classic_spec():
    spec = container_spec("activemq-classic", TOPOLOGY, "B1")
    assert spec.image.startswith("apache/activemq-classic:") and spec.ports == {"clients": 5672}
    assert spec.files == {} and spec.env == {}
    assert spec.wire("orders") == "orders" and spec.wire("news") == "topic://news"
    assert spec.wire("queue://x") == "queue://x"
    assert spec.ready.search("Apache ActiveMQ 6.1.2 (localhost, ID:abc-1) started")


def test_qdrouterd_spec():
    spec = container_spec("qdrouterd", TOPOLOGY, "R1")
    assert spec.image.startswith("quay.io/interconnectedcloud/qdrouterd:") and spec.role == "router"
    conf = spec.env["QDROUTERD_CONF"]
    assert "{" in conf and "}" in conf  # the image writes QDROUTERD_CONF to a file only if it looks inline
    cfg = parse_router_config(conf, "QDROUTERD_CONF")
    assert [(ls.host, ls.port) for ls in cfg.listeners] == [("0.0.0.0", 5672)]
    assert spec.files == {}


def test_image_override(monkeypatch):
    monkeypatch.setenv("INTEROP_IMAGE_ARTEMIS", "registry.example/artemis:2.31.2")
    assert container_spec("artemis", TOPOLOGY, "B1").image == "registry.example/artemis:2.31.2"


def test_container_routers_that_dial_out_are_not_supported_yet():
    t = parse_topology({"name": "t", "nodes": {"R1": {"role": "router"}, "B1": {"role": "broker"}},
                        "links": [{"from": "R1", "to": "B1", "role": "route-container"}]})
    with pytest.raises(PeerUnavailable, match=r"^R1: a qdrouterd container that dials other nodes"):
        container_spec("qdrouterd", t, "R1")


# ---- vendors --------------------------------------------------------------------------------------------------


def test_vendor_table():
    assert DEFAULT_PEERS == {"router": "reference", "broker": "reference"}
    assert ("reference", "router") in vendor_roles() and ("reference", "broker") in vendor_roles()
    brokers = vendor_names("broker")  # in the declarations' order; a vendor package added later may sit between
    assert [b for b in brokers if b in ("reference", "artemis", "activemq-classic", "rabbitmq")] == [
        "reference", "artemis", "activemq-classic", "rabbitmq"]
    assert vendor_names("router") == ["reference", "qdrouterd"]
    assert len(vendor_roles()) == len(REGISTRY) == len(set(vendor_roles()))
    ref = vendor("reference", "broker").capabilities
    assert ref == {"store-and-forward", "outcome.released", "outcome.modified", "outcome.rejected", "dead-letter",
                   "ttl", "durable", "drain", "competing-consumers", "multicast-subscription", "transactions",
                   "broker-connection", "mirror", "network-of-brokers", "sasl.plain", "tls", "broker-permissions",
                   "permissions.send-per-queue", "amqp-management.broker"}
    # RabbitMQ 3.10 refuses the coordinator (measured): no transactions; it has no AMQP broker connections, and
    # forms a network of brokers with its federation plugin.
    # It answers a JMS selector's filter as in place (filter.selector, so that the JMS case catches it ignoring it).
    assert vendor("rabbitmq", "broker").capabilities == RABBITMQ_BROKER == (ref - {
        "outcome.modified", "drain", "transactions", "broker-connection", "mirror", "permissions.send-per-queue",
        "amqp-management.broker"}
    ) | {"filter.selector"}
    # Every broker vendor forms a network of brokers (004 seed): Artemis by AMQP federation, ActiveMQ Classic by
    # network connectors, RabbitMQ by federation.
    assert all("network-of-brokers" in vendor(name, "broker").capabilities
               for name in ("reference", "artemis", "activemq-classic", "rabbitmq"))
    assert "network-of-brokers" not in vendor("reference", "router").capabilities
    # Routers carry transactions only through a $coordinator link route; neither coordinates itself.
    for router in ("reference", "qdrouterd"):
        caps = vendor(router, "router").capabilities
        assert "coordinator-link-route" in caps and "transactions" not in caps
    assert vendor("rabbitmq@native", "broker") is vendor("rabbitmq", "broker")
    assert parse_choice("rabbitmq@container") == Choice("rabbitmq", None, "container")


@pytest.mark.parametrize("name, role, message", [
    ("rabbitmq", "router", r"^--peer router=rabbitmq: rabbitmq plays the broker role, not router$"),
    ("qdrouterd", "broker", r"^--peer broker=qdrouterd: qdrouterd plays the router role, not broker$"),
    ("hornetq", "broker", r"^--peer broker=hornetq: unknown vendor \(expected one of: reference, artemis, "),
    ("artemis@docker", "broker", r"^--peer broker=artemis@docker: artemis has no provider 'docker' "
                                 r"\(expected one of: native, container\)$"),
])
def test_vendor_errors_are_one_line(name, role, message):
    with pytest.raises(ValueError, match=message):
        vendor(name, role)


# ---- external -------------------------------------------------------------------------------------------------


def test_external_choices_parse():
    t = parse_external("external:amqp://127.0.0.1:5999?caps=store-and-forward,drain&vendor=artemis&version=2.31",
                       "broker")
    assert (t.host, t.port, t.vendor, t.version) == ("127.0.0.1", 5999, "artemis", "2.31")
    assert t.capabilities == {"store-and-forward", "drain"} and t.prefix == ""
    plain = parse_external("external:amqp://broker.example", "broker")
    assert (plain.port, plain.vendor, plain.capabilities) == (5672, "external", frozenset())
    known = parse_external("external:amqp://h:1?vendor=rabbitmq", "broker")
    assert known.capabilities == RABBITMQ_BROKER and known.prefix == "/queue/"
    assert parse_external("external:amqp://h:1?vendor=rabbitmq&caps=", "broker").capabilities == frozenset()
    spec = vendor("external:amqp://h:1?vendor=artemis", "broker")
    assert spec.vendor == "artemis" and spec.capabilities == vendor("artemis", "broker").capabilities


@pytest.mark.parametrize("choice, message", [
    ("external:http://h:1", r"expected external:amqp://HOST:PORT"),
    ("external:amqps://h:1", r"amqps \(TLS\) is not supported yet"),
    ("external:amqp://h:99999", r"the port must be a number 1-65535"),
    ("external:amqp://h:1?cap=drain", r"unknown parameter 'cap' \(did you mean 'caps'\?\)"),
    ("external:amqp://h:1?caps=drian", r"unknown capability 'drian' \(did you mean 'drain'\?\)"),
    ("external:amqp://h:1/queue", r"no path, user or fragment"),
])
def test_external_errors_are_one_line(choice, message):
    with pytest.raises(ValueError, match=rf"^--peer broker={re.escape(choice)}: .*{message}"):
        vendor(choice, "broker")


def test_external_peer_checks_the_port_and_does_nothing_else():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        peer = make_peer(TOPOLOGY, "B1", f"external:amqp://127.0.0.1:{port}?vendor=rabbitmq")
        assert isinstance(peer, ExternalPeer)
        peer.start()
        assert peer.url == f"amqp://127.0.0.1:{port}" and peer.info.provider == "external"
        assert peer.is_running()
        assert peer.wire_address("orders") == "/queue/orders" and peer.wire_address("/amq/queue/x") == "/amq/queue/x"
        peer.stop()
        assert peer.is_running(), "stop() leaves someone else's peer alone"
        with pytest.raises(NotImplementedError):
            peer.restart(kill=True)
        with pytest.raises(NotImplementedError):
            peer.queue_stats("orders")


def test_unreachable_external_peer_is_a_one_line_error():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    peer = make_peer(TOPOLOGY, "B1", f"external:amqp://127.0.0.1:{port}")
    with pytest.raises(PeerStartError, match=rf"^external broker amqp://127.0.0.1:{port} is unreachable: ") as info:
        peer.start(timeout=0.3)
    assert "\n" not in str(info.value)


def test_one_external_peer_cannot_stand_for_two_nodes():
    t = parse_topology({"name": "two", "nodes": {"B1": {"role": "broker"}, "B2": {"role": "broker"}}})
    with pytest.raises(PeerUnavailable, match=r"stands for one broker; topology two has 2 \(B1, B2\)"):
        make_peer(t, "B1", "external:amqp://127.0.0.1:5672")


# ---- the container peer's life, on a stand-in for testcontainers ----------------------------------------------


class FakeWrapped:
    def __init__(self, fake):
        self.fake, self.status = fake, "running"
        self.image = type("Image", (), {"labels": {"org.opencontainers.image.version": "9.9.9"}})()

    def reload(self):
        pass

    def logs(self):
        return self.fake.log.encode()

    def kill(self):
        self.status = "exited"
        self.fake.close_ports()

    def stop(self, timeout=10):
        self.kill()

    def start(self):
        self.status = "running"
        self.fake.open_ports()
        self.fake.log += "restarted\nServer startup complete\n"

    def pause(self):
        self.status = "paused"

    def unpause(self):
        self.status = "running"


class FakeContainer:
    """Records what ContainerPeer asks of testcontainers; 'publishes' ports by listening on them."""

    made: list = []

    def __init__(self, image):
        self.image, self.env, self.volumes, self.ports, self.sockets = image, {}, [], {}, []
        self.log, self.removed = "", False
        self.wrapped = FakeWrapped(self)
        FakeContainer.made.append(self)

    def with_env(self, key, value):
        self.env[key] = value
        return self

    def with_volume_mapping(self, host, path, mode):
        self.volumes.append((host, path, mode, open(host).read()))
        return self

    def open_ports(self):
        for host, port in self.ports.values():
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen()
            self.sockets.append(sock)

    def close_ports(self):
        for sock in self.sockets:
            sock.close()
        self.sockets = []

    def start(self):
        self.open_ports()
        self.log = "booting\nServer startup complete; 1 plugins started.\n"
        return self

    def get_wrapped_container(self):
        return self.wrapped

    def exec(self, command):
        rows = [{"name": "orders", "messages": 4, "messages_ready": 3, "messages_unacknowledged": 1, "consumers": 2}]
        return 0, json.dumps(rows).encode()

    def stop(self):
        self.removed = True
        self.close_ports()


def test_container_peer_life_on_a_stand_in(monkeypatch):
    import testcontainers.core.container as tc

    monkeypatch.setattr(containers, "docker_engine", lambda: object())
    monkeypatch.setattr(tc, "DockerContainer", FakeContainer)
    FakeContainer.made.clear()
    peer = ContainerPeer("B1", container_spec("rabbitmq", TOPOLOGY, "B1"), frozenset({"ttl"}))
    assert peer.workdir is None
    peer.start(timeout=5)
    [fake] = FakeContainer.made
    assert fake.image.startswith("rabbitmq:")
    [(host, port)] = fake.ports.values()
    assert list(fake.ports) == ["5672/tcp"] and host == "127.0.0.1"
    assert peer.url == f"amqp://127.0.0.1:{port}"
    assert {path for _, path, mode, _ in fake.volumes} == {"/etc/rabbitmq/rabbitmq.conf",
                                                           "/etc/rabbitmq/enabled_plugins",
                                                           "/etc/rabbitmq/definitions.json"}
    assert all(mode == "ro" for _, _, mode, _ in fake.volumes)
    assert peer.info.vendor == "rabbitmq" and peer.info.version == "9.9.9" and peer.info.provider == "container"
    assert peer.is_running() and peer.wire_address("orders") == "/amq/queue/orders"
    assert peer.queue_stats("orders") == {"depth": 4, "available": 3, "in_flight": 1, "consumers": 2, "exists": True}
    assert peer.queue_stats("/queue/other")["exists"] is False
    peer.restart(timeout=5, kill=True)
    assert peer.is_running() and peer.url == f"amqp://127.0.0.1:{port}", "same port after a restart"
    peer.pause()
    assert not peer.is_running()
    peer.resume()
    workdir = peer.workdir
    assert workdir.is_dir()
    peer.stop()
    assert fake.removed and not workdir.exists()


def test_a_container_that_never_gets_ready_is_a_start_error(monkeypatch):
    import testcontainers.core.container as tc

    class Silent(FakeContainer):
        def start(self):
            self.open_ports()  # Docker's proxy accepts, but the product never says it is ready
            self.log = "booting\n"
            return self

    monkeypatch.setattr(containers, "docker_engine", lambda: object())
    monkeypatch.setattr(tc, "DockerContainer", Silent)
    peer = ContainerPeer("B1", container_spec("artemis", TOPOLOGY, "B1"), frozenset())
    with pytest.raises(PeerStartError, match=r"^timed out after 0.3s waiting for artemis container B1 to be ready; "
                                             r"last seen: booting$"):
        peer.start(timeout=0.3)
    peer.stop()


# ---- the registry and --peer ------------------------------------------------------------------------------------


def test_every_registered_provider_loads_and_names_its_vendor():
    """Each registry line's providers are real Provider classes of that vendor and role (a typo in a dotted name
    would otherwise only show as a `skipped` reason)."""
    from harness.peers.registry import provider_class

    for registered in REGISTRY:
        for path in registered.providers:
            cls = provider_class(path)
            if cls.vendor == "?":  # a module not written yet (its probe says so); never a typo in a loaded one
                assert "cannot be loaded: No module named" in cls.probe(), path
                continue
            assert (cls.vendor, cls.role) == (registered.spec.vendor, registered.spec.role), path


def test_the_readme_external_example_is_one_choice():
    from harness.peers.vendors import parse_peer_choices

    choice = "external:amqp://127.0.0.1:5999?caps=store-and-forward,drain&vendor=artemis"
    assert parse_peer_choices([f"broker={choice}"]) == {"router": "reference", "broker": choice}
    assert parse_peer_choices([f"router=qdrouterd,broker={choice}"])["broker"] == choice
    assert vendor(choice, "broker").capabilities == {"store-and-forward", "drain"}
    with pytest.raises(ValueError, match="unknown role 'brokr'"):
        parse_peer_choices(["brokr=rabbitmq"])
    with pytest.raises(ValueError, match="expected ROLE=VENDOR"):
        parse_peer_choices(["rabbitmq"])
