"""The Qpid Broker-J package: the renderer (topology -> initial config JSON) and the fetch's checks without a JVM;
then one real broker started and stopped (skipped, with the provider's reason, where it is not fetched here)."""

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from harness.clients import Clients
from harness.peers.base import PeerUnavailable
from harness.peers.launch import Wiring
from harness.peers.provider import NodeSetup, RenderError
from harness.peers.vendors import vendor
from harness.topology import parse_topology
from harness.vendors.qpid_broker_j import native as bj
from harness.wait import wait_for
from harness.vendors.qpid_broker_j.render import ANY_HOSTNAME_BUT_MANAGEMENT, TlsStores, render_config, users_text

TOPOLOGY = parse_topology({"name": "brokerj-test", "nodes": {
    "B1": {"role": "broker",
           "queues": [{"address": "orders"}, {"address": "news", "routing": "multicast"},
                      {"address": "DLQ"}],
           "settings": {"dead_letter_address": "DLQ", "expiry_address": "ExpiryQueue", "max_delivery_attempts": 3}},
}})


def _node(extra: dict) -> dict:
    return parse_topology({"name": "brokerj-test", "nodes": {"B1": {"role": "broker", **extra}}})


def _vhost(config: dict) -> dict:
    return json.loads(config["virtualhostnodes"][0]["virtualHostInitialConfiguration"])


# ---- the renderer -----------------------------------------------------------------------------------------------


def test_queues_are_durable_queues_and_multicast_addresses_fanout_exchanges():
    vhost = _vhost(render_config(TOPOLOGY, "B1", {"dead_letter_address": "DLQ", "max_delivery_attempts": 3}))
    queues = {q["name"]: q for q in vhost["queues"]}
    assert queues["orders"] == {"name": "orders", "durable": True, "maximumDeliveryAttempts": 3,
                                "alternateBinding": {"destination": "DLQ"}}
    assert queues["DLQ"] == {"name": "DLQ", "durable": True}  # no alternate binding to itself
    assert vhost["exchanges"] == [{"name": "news", "type": "fanout", "durable": True}]
    assert vhost["type"] == "BDB" and vhost["storePath"].startswith("${qpid.work_dir}")


def test_auto_create_is_a_queue_policy_on_attach_with_the_queue_settings():
    vhost = _vhost(render_config(TOPOLOGY, "B1", {"dead_letter_address": "DLQ", "max_delivery_attempts": 3}))
    (policy,) = vhost["nodeAutoCreationPolicies"]
    assert policy["pattern"] == r"(?!(?:\Qnews\E)$).*" and policy["nodeType"] == "Queue"  # not the exchange's name
    assert policy["createdOnPublish"] and policy["createdOnConsume"]
    assert policy["attributes"]["alternateBinding"] == {"destination": "DLQ"}
    no_auto = _vhost(render_config(TOPOLOGY, "B1", {"auto_create": False}))
    assert "nodeAutoCreationPolicies" not in no_auto


def test_the_expiry_address_is_used_only_when_it_is_the_dead_letter_address():
    separate = _vhost(render_config(TOPOLOGY, "B1", {"dead_letter_address": "DLQ", "expiry_address": "ExpiryQueue"}))
    assert all("expiryPolicy" not in q for q in separate["queues"])
    assert {"name": "ExpiryQueue", "durable": True} in separate["queues"]  # declared although the node lists none
    same = _vhost(render_config(TOPOLOGY, "B1", {"dead_letter_address": "DLQ", "expiry_address": "DLQ"}))
    orders = next(q for q in same["queues"] if q["name"] == "orders")
    assert orders["expiryPolicy"] == "ROUTE_TO_ALTERNATE"


def test_unlimited_delivery_attempts_are_zero_and_the_default_leaves_broker_j_s_own():
    unlimited = _vhost(render_config(TOPOLOGY, "B1", {"max_delivery_attempts": -1}))
    assert next(q for q in unlimited["queues"] if q["name"] == "orders")["maximumDeliveryAttempts"] == 0
    default = _vhost(render_config(TOPOLOGY, "B1", {}))
    assert "maximumDeliveryAttempts" not in next(q for q in default["queues"] if q["name"] == "orders")


def test_one_anonymous_amqp_1_0_port_and_a_loopback_management_port():
    config = render_config(TOPOLOGY, "B1", {})
    clients, management = config["ports"]
    assert clients["port"] == "${qpid.amqp_port}" and clients["protocols"] == ["AMQP_1_0"]
    assert clients["authenticationProvider"] == "anonymous" and clients["transports"] == ["TCP"]
    aliases = {a["type"]: a for a in clients["virtualhostaliases"]}
    assert aliases["patternMatchingAlias"]["pattern"] == ANY_HOSTNAME_BUT_MANAGEMENT
    assert management["port"] == "${qpid.management_port}" and management["bindingAddress"] == "127.0.0.1"
    assert len(render_config(TOPOLOGY, "B1", {}, management=False)["ports"]) == 1


def test_the_alias_pattern_leaves_management_to_the_broker():
    import re

    pattern = re.compile(ANY_HOSTNAME_BUT_MANAGEMENT)
    assert pattern.fullmatch("node-B1") and pattern.fullmatch("127.0.0.1") and pattern.fullmatch("$management.x")
    assert not pattern.fullmatch("$management")


def test_plain_users_get_a_password_file_offered_on_plain_tcp():
    topology = _node({"users": {"alice": "a-secret"}, "access": {"authenticate": True, "mechanisms": ["PLAIN"]}})
    config = render_config(topology, "B1", {})
    plain = next(p for p in config["authenticationproviders"] if p["type"] == "PlainPasswordFile")
    assert plain["path"] == "${qpid.users_file}" and plain["secureOnlyMechanisms"] == []
    assert config["ports"][0]["authenticationProvider"] == plain["name"]
    assert config["ports"][1]["authenticationProvider"] == "anonymous"  # the harness's own management port
    assert users_text({"alice": "a-secret"}) == "alice:a-secret\n"
    with pytest.raises(RenderError, match="^B1: users: 'a:b'"):
        users_text({"a:b": "x"}, "B1")


def test_a_tls_clients_port_with_required_client_certificates():
    topology = parse_topology({"name": "t", "cas": ["clients-ca"], "nodes": {"B1": {
        "role": "broker", "access": {"tls": {"ca": "clients-ca", "client_certs": "required"}}}}})
    stores = TlsStores("/w/broker.p12", "/w/trust.p12", "pw")
    config = render_config(topology, "B1", {}, tls_stores=stores)
    clients = config["ports"][0]
    assert clients["transports"] == ["SSL"] and clients["keyStore"] == "keystore"
    assert clients["needClientAuth"] is True and clients["trustStores"] == ["truststore"]
    assert config["keystores"][0]["storeUrl"] == "/w/broker.p12"
    assert config["truststores"][0]["trustStoreType"] == "PKCS12"
    with pytest.raises(RenderError, match="B1: access.tls needs"):
        render_config(topology, "B1", {})


def test_permissions_are_a_rule_based_acl_per_user_of_each_role():
    topology = _node({"users": {"alice": "a", "bob": "b", "carol": "c"},
                      "access": {"authenticate": True, "mechanisms": ["PLAIN"]},
                      "roles": {"senders": ["alice", "carol"], "receivers": ["bob"], "creators": ["carol"]},
                      "permissions": [{"match": "orders.#", "send": ["senders"], "consume": ["receivers"],
                                       "create_durable_queue": ["creators"]}]})
    (acl,) = _vhost(render_config(topology, "B1", {}))["virtualhostaccesscontrolproviders"]
    assert acl["type"] == "RuleBased" and acl["defaultResult"] == "DENIED"
    rules = {(r["identity"], r["objectType"], r["operation"], tuple(sorted(r.get("attributes", {}).items())))
             for r in acl["rules"]}
    assert ("alice", "EXCHANGE", "PUBLISH", (("NAME", ""), ("ROUTING_KEY", "orders.*"))) in rules
    assert ("alice", "EXCHANGE", "PUBLISH", (("NAME", ""), ("ROUTING_KEY", "orders"))) in rules  # a.# matches a
    assert ("bob", "QUEUE", "CONSUME", (("NAME", "orders.*"),)) in rules
    assert ("carol", "QUEUE", "CREATE", (("NAME", "orders.*"),)) in rules
    assert not any(r[0] == "bob" and r[2] == "PUBLISH" for r in rules)
    assert ("ALL", "VIRTUALHOST", "ACCESS", ()) in rules
    assert ("ANONYMOUS", "ALL", "ALL", ()) in rules  # the harness's own loopback management port
    assert render_config(topology, "B1", {})["ports"][0]["authenticationProvider"] == "plain"


@pytest.mark.parametrize("extra, settings, field", [
    ({"permissions": [{"match": "orders.*.new", "send": ["r"]}], "roles": {"r": ["alice"]},
      "users": {"alice": "x"}, "access": {"authenticate": True, "mechanisms": ["PLAIN"]}}, {}, "permissions[0].match"),
    ({}, {"redelivery_delay_ms": 100}, "redelivery_delay_ms"),
    ({}, {"journal_datasync": False}, "journal_datasync"),
    ({}, {"max_delivery_attempts": 0}, "max_delivery_attempts"),
    ({"queues": [{"address": "a.#"}]}, {}, "queues[0].address"),
    ({"queues": [{"address": "x"}, {"address": "x", "routing": "multicast"}]}, {}, "queues[1].address"),
])
def test_what_broker_j_cannot_express_is_a_render_error_naming_node_and_field(extra, settings, field):
    with pytest.raises(RenderError) as caught:
        render_config(_node(extra), "B1", settings)
    message = str(caught.value)
    assert message.startswith("B1: ") and field in message and "\n" not in message


def test_broker_connections_and_network_connectors_are_render_errors():
    topology = parse_topology({"name": "t", "nodes": {
        "B1": {"role": "broker", "network_connectors": [{"name": "n", "to": ["B2"]}]},
        "B2": {"role": "broker"}},
        "links": [{"from": "B1", "to": "B2", "role": "normal"}]})
    with pytest.raises(RenderError, match="B1: network_connectors"):
        render_config(topology, "B1", {})


# ---- getting it -------------------------------------------------------------------------------------------------


def test_the_cache_folder_follows_interop_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path))
    assert bj.home_dir() == tmp_path / f"qpid-broker-j-{bj.VERSION}" / "qpid-broker" / bj.VERSION


def test_the_tarball_check_takes_the_pinned_digest_only(tmp_path):
    tarball = tmp_path / "apache-qpid-broker-j-9.2.0-bin.tar.gz"
    tarball.write_bytes(b"not the broker")
    assert bj.check_tarball(tarball, hashlib.sha512(b"not the broker").hexdigest()) is None
    why = bj.check_tarball(tarball)
    assert why is not None and "not the pinned" in why and "\n" not in why
    assert len(bj.SHA512) == 128


def test_the_install_check_reads_the_core_jar_version(tmp_path):
    home = tmp_path / "qpid-broker" / "9.2.0"
    assert "not fetched" in bj.check_install(home) and bj.FETCH_COMMAND in bj.check_install(home)
    (home / "lib").mkdir(parents=True)
    assert "qpid-broker-core" in bj.check_install(home)
    (home / "lib" / "qpid-broker-core-9.1.0.jar").write_bytes(b"")
    assert "holds Broker-J 9.1.0" in bj.check_install(home)
    (home / "lib" / "qpid-broker-core-9.1.0.jar").unlink()
    (home / "lib" / "qpid-broker-core-9.2.0.jar").write_bytes(b"")
    assert bj.check_install(home) is None


def test_unpacking_refuses_members_outside_the_folder(tmp_path):
    tarball = tmp_path / "evil.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    (tmp_path / "into").mkdir()
    with pytest.raises(PeerUnavailable, match="outside"):
        bj._unpack(tarball, tmp_path / "into")


def test_require_names_the_fetch_command_when_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path))
    why = bj.NativeBrokerJ.probe()
    assert why is not None and "\n" not in why
    assert bj.FETCH_COMMAND in why or "java" in why


def test_fetch_without_maven_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path))
    real_which = bj.shutil.which
    monkeypatch.setattr(bj.shutil, "which", lambda name: None if name == "mvn" else real_which(name) or "/bin/java")
    assert bj.main(["--fetch"]) == 1


# ---- one real broker --------------------------------------------------------------------------------------------


def test_a_real_broker_starts_serves_restarts_on_its_port_and_stops(tmp_path):
    if (why := bj.NativeBrokerJ.probe()) is not None:
        pytest.skip(why)
    topology = parse_topology({"name": "brokerj-real", "nodes": {"B1": {"role": "broker", "queues": [
        {"address": "orders"}]}}})
    setup = NodeSetup(topology, "B1", vendor("qpid-broker-j", "broker").capabilities, Wiring())
    peer = bj.NativeBrokerJ.create(setup)
    try:
        peer.start()
        port = peer.endpoints["clients"].port
        assert port and peer.pids == [peer.main_pid]
        with Clients() as clients:
            snd = clients.connect(peer.url).sender("orders", "snd-unit")
            snd.send(3, durable=True)
            outcomes = snd.wait_outcomes(3, timeout=20)
            assert {o.outcome for o in outcomes.values()} == {"accepted"}
        assert peer.queue_stats("orders")["depth"] == 3
        assert peer.queue_stats("no-such-queue")["exists"] is False
        peer.restart(timeout=90, kill=True)
        assert peer.endpoints["clients"].port == port  # back on the same port, with its BDB store
        assert peer.queue_stats("orders")["depth"] == 3  # durable messages survive kill -9
        with Clients() as clients:
            rcv = clients.connect(peer.url).receiver("orders", "rcv-unit", credit=10)
            wait_for(lambda: rcv.count >= 3, 20, "the 3 durable messages after kill -9")
    finally:
        peer.stop()
        peer.cleanup()
    assert not peer.is_running() and not Path(peer.workdir).exists()
