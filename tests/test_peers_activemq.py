"""The native ActiveMQ Classic provider: the pom, the cache check, the command line and log parsing without a
broker; then one real broker (skipped, with probe()'s reason, where the jars are not fetched here)."""

import hashlib
import re
from pathlib import Path

import pytest

from harness.clients import Clients
from harness.vendors.activemq_classic import native as amq
from harness.peers.base import PeerUnavailable
from harness.peers.launch import Wiring
from harness.peers.provider import NodeSetup
from harness.peers.vendors import vendor
from harness.topology import parse_topology
from harness.wait import wait_for

TOPOLOGY = parse_topology({"name": "activemq-test", "nodes": {
    "B1": {"role": "broker", "queues": [{"address": "orders"}, {"address": "news", "routing": "multicast"}]},
}})
CAPABILITIES = vendor("activemq-classic", "broker").capabilities


def setup_for(node: str = "B1") -> NodeSetup:
    return NodeSetup(TOPOLOGY, node, CAPABILITIES, Wiring())


def fake_install(tmp_path: Path) -> amq.ActiveMQInstall:
    """An install whose launcher folder already holds the launcher's jar, so that no javac runs."""
    parent = tmp_path / "launcher"
    compiled = parent / f"{hashlib.sha256(amq.LAUNCHER_SOURCE.read_bytes()).hexdigest()[:12]}-jar"
    compiled.mkdir(parents=True)
    (compiled / amq.LAUNCHER_JAR).write_bytes(b"")
    return amq.ActiveMQInstall("6.3.1", (str(tmp_path / "lib" / "*"),), parent, str(tmp_path))


# ---- getting it -----------------------------------------------------------------------------------------------


def test_the_pom_pins_every_artifact_at_its_version():
    pom = amq.render_pom()
    for group, artifact, version in amq.ARTIFACTS:
        assert (f"<groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>"
                in pom)
    assert "<packaging>pom</packaging>" in pom


def test_the_cache_folder_follows_interop_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path))
    assert amq.install_dir() == tmp_path / f"activemq-classic-{amq.VERSION}"


def _fill_cache(folder: Path) -> None:
    (folder / "lib").mkdir(parents=True)
    lines = []
    for _, artifact, version in amq.ARTIFACTS:
        jar = folder / "lib" / f"{artifact}-{version}.jar"
        jar.write_bytes(artifact.encode())
        lines.append(f"{hashlib.sha256(artifact.encode()).hexdigest()}  {jar.name}\n")
    (folder / amq.MANIFEST).write_text("".join(lines))


def test_a_complete_cache_passes_its_check(tmp_path):
    _fill_cache(tmp_path)
    assert amq.check_cache(tmp_path) is None


def test_an_empty_cache_says_how_to_fetch(tmp_path):
    reason = amq.check_cache(tmp_path)
    assert "--fetch" in reason and "ACTIVEMQ_HOME" in reason and "\n" not in reason


def test_a_changed_jar_fails_the_check(tmp_path):
    _fill_cache(tmp_path)
    (tmp_path / "lib" / f"activemq-amqp-{amq.VERSION}.jar").write_bytes(b"tampered")
    assert "differs from its SHA-256" in amq.check_cache(tmp_path)


def test_a_missing_jar_fails_the_check(tmp_path):
    _fill_cache(tmp_path)
    (tmp_path / "lib" / f"activemq-broker-{amq.VERSION}.jar").unlink()
    assert "is missing" in amq.check_cache(tmp_path)


def test_activemq_home_without_the_amqp_jar_is_refused_in_one_line(monkeypatch, tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "activemq-broker-5.17.2.jar").write_bytes(b"")
    monkeypatch.setenv("ACTIVEMQ_HOME", str(tmp_path))
    with pytest.raises(PeerUnavailable, match="no activemq-amqp jar"):
        amq.find_install()


def test_activemq_home_gives_its_version_and_both_lib_folders(monkeypatch, tmp_path):
    (tmp_path / "lib" / "optional").mkdir(parents=True)
    (tmp_path / "lib" / "activemq-broker-6.1.8.jar").write_bytes(b"")
    (tmp_path / "lib" / "optional" / "activemq-amqp-6.1.8.jar").write_bytes(b"")
    monkeypatch.setenv("ACTIVEMQ_HOME", str(tmp_path))
    install = amq.find_install()
    assert install.version == "6.1.8"
    assert install.classpath == (str(tmp_path / "lib" / "*"), str(tmp_path / "lib" / "optional" / "*"))


def test_activemq_home_that_is_no_install_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("ACTIVEMQ_HOME", str(tmp_path))
    with pytest.raises(PeerUnavailable, match="expected an ActiveMQ Classic bin distribution"):
        amq.find_install()


# ---- the peer without a broker ----------------------------------------------------------------------------------


def test_the_command_runs_the_launcher_with_a_capped_heap_on_the_rendered_file(tmp_path):
    (tmp_path / "work").mkdir()
    peer = amq.ActiveMQPeer(setup_for(), fake_install(tmp_path), workdir=tmp_path / "work")
    command = peer.command()
    assert "-Xmx256m" in command
    classpath = command[command.index("-cp") + 1].split(":")
    assert classpath[0] == str(tmp_path / "lib" / "*") and classpath[1] == str(peer.launcher)
    assert command[-3:] == [amq.LAUNCHER_CLASS, f"xbean:file:{peer.config_path}", "0"]
    text = peer.config_path.read_text()
    assert 'uri="amqp://127.0.0.1:0"' in text and 'useJmx="false"' in text


def test_multicast_addresses_are_topics_on_the_wire(tmp_path):
    peer = amq.ActiveMQPeer(setup_for(), fake_install(tmp_path), workdir=tmp_path)
    assert peer.wire_address("news") == "topic://news"
    assert peer.wire_address("orders") == "orders"
    assert peer.wire_address("other") == "other"
    assert peer.wire_address("queue://x") == "queue://x"


def test_the_launcher_lines_are_recognised():
    assert amq._LISTENING.match("Listening on 127.0.0.1:40123 (connector 'amqp')").groups() == (
        "127.0.0.1", "40123", "amqp")
    assert amq._STATISTICS.match("Statistics on 127.0.0.1:40999").group(2) == "40999"
    assert amq._READY.match("Broker B1 started; ready (ActiveMQ 6.3.1)").group(1) == "6.3.1"
    # ActiveMQ's own log line about the same connector is not taken for the launcher's
    assert not amq._LISTENING.match("12:00:00.000 [main] INFO ... Listening for connections at: amqp://x:1")


def test_the_launcher_source_prints_the_lines_the_peer_reads():
    source = amq.LAUNCHER_SOURCE.read_text()
    for fragment in ('"Listening on "', '" (connector \'"', '"Statistics on 127.0.0.1:"',
                     '" started; ready (ActiveMQ "'):
        assert fragment in source


# ---- one real broker ---------------------------------------------------------------------------------------------

needs_activemq = pytest.mark.skipif(amq.probe_reason() is not None, reason=f"peer unavailable: {amq.probe_reason()}")


@pytest.fixture(scope="module")
def broker():
    peer = amq.NativeActiveMQ.create(setup_for())
    try:
        peer.start(timeout=90)
        yield peer
    finally:
        peer.stop()
        peer.cleanup()


@needs_activemq
def test_a_real_broker_queues_counts_and_survives_kill_9(broker):
    assert broker.info.vendor == "activemq-classic" and broker.info.version == amq.find_install().version
    assert broker.endpoints["clients"].host == "127.0.0.1"
    port = broker.endpoints["clients"].port
    with Clients() as clients:
        snd = clients.connect(broker.url).sender("orders", "snd-unit")
        snd.send(3, durable=True)
        outcomes = snd.wait_outcomes(3, timeout=20)
        assert {o.outcome for o in outcomes.values()} == {"accepted"}
        assert broker.queue_stats("orders")["depth"] == 3
    assert broker.queue_stats("no-such-queue") == {"name": "no-such-queue", "exists": False, "depth": 0,
                                                    "consumers": 0}
    broker.restart(timeout=90, kill=True)
    assert broker.endpoints["clients"].port == port  # back on the same port, with its KahaDB
    assert "---- interop: killed (SIGKILL); restarted" in broker.all_logs()
    with Clients() as clients:
        rcv = clients.connect(broker.url).receiver("orders", "rcv-unit", credit=10)
        wait_for(lambda: rcv.count >= 3, 20, "the 3 durable messages after kill -9",
                 describe=lambda: f"{rcv.count}; {broker.queue_stats('orders')}")
        wait_for(lambda: broker.queue_stats("orders")["depth"] == 0, 20, "orders to be empty",
                 describe=lambda: str(broker.queue_stats("orders")))


@needs_activemq
def test_the_log_names_the_version_and_the_connector(broker):
    assert re.search(r"Apache ActiveMQ \S+ \(B1, ID:", broker.logs())
    assert broker.start_seconds is not None
