"""Broker renderers: Artemis broker.xml (read by Artemis and the reference broker) and RabbitMQ's files."""

import base64
import hashlib
import json
import re
import xml.etree.ElementTree as ET

import pytest

from harness.vendors.artemis.render import BROKER_DEFAULTS, broker_settings, render_broker_xml
from harness.peers.provider import RenderError
from harness.vendors.rabbitmq.render import declared_names, render_rabbitmq, wire_address
from harness.topology import load_topology, parse_topology, topology_path
from reference.broker.config import parse_config

NS = {"c": "urn:activemq:core"}


def topo(nodes: dict, name: str = "t"):
    return parse_topology({"name": name, "nodes": nodes})


BROKER = topo({"B1": {"role": "broker", "queues": [
    {"address": "orders", "routing": "anycast"},
    {"address": "news", "routing": "multicast"},
]}})


def core_of(text: str) -> ET.Element:
    root = ET.fromstring(text.encode())
    assert root.tag == "{urn:activemq}configuration"
    core = root.find("c:core", NS)
    assert core is not None
    return core


# ---- Artemis broker.xml -----------------------------------------------------------------------------------


def test_broker_xml_is_well_formed_with_the_expected_elements():
    text = render_broker_xml(BROKER, "B1", {"clients": 5672})
    core = core_of(text)
    assert core.findtext("c:name", namespaces=NS) == "B1"
    assert core.findtext("c:persistence-enabled", namespaces=NS) == "true"
    assert core.findtext("c:journal-directory", namespaces=NS) == "data/journal"
    assert core.findtext("c:journal-type", namespaces=NS) == "NIO"
    assert core.findtext("c:security-enabled", namespaces=NS) == "false"
    acceptors = core.findall("c:acceptors/c:acceptor", NS)
    assert [(a.get("name"), a.text) for a in acceptors] == [("clients", "tcp://127.0.0.1:5672?protocols=AMQP")]
    addresses = {a.get("name"): a for a in core.findall("c:addresses/c:address", NS)}
    assert list(addresses) == ["DLQ", "ExpiryQueue", "orders", "news"]
    assert [q.get("name") for q in addresses["orders"].findall("c:anycast/c:queue", NS)] == ["orders"]
    assert addresses["news"].find("c:multicast", NS) is not None
    assert addresses["news"].find("c:anycast", NS) is None
    setting = core.find("c:address-settings/c:address-setting", NS)
    assert setting.get("match") == "#"
    values = {child.tag.split("}")[1]: child.text for child in setting}
    assert values == {
        "dead-letter-address": "DLQ", "expiry-address": "ExpiryQueue", "redelivery-delay": "0",
        "max-delivery-attempts": "10", "auto-create-queues": "true", "auto-create-addresses": "true",
        "default-address-routing-type": "ANYCAST", "default-queue-routing-type": "ANYCAST",
    }


def test_the_reference_broker_reads_what_is_rendered():
    text = render_broker_xml(BROKER, "B1", {"clients": 0}, {"max_delivery_attempts": 3, "redelivery_delay_ms": 50,
                                                            "journal_datasync": False})
    cfg = parse_config(text, "broker.xml")
    assert cfg.name == "B1" and cfg.persistence_enabled and not cfg.journal_datasync
    assert [(a.name, a.host, a.port) for a in cfg.acceptors] == [("clients", "127.0.0.1", 0)]
    by_name = {a.name: a for a in cfg.addresses}
    assert by_name["orders"].routings == ("anycast",) and [q.name for q in by_name["orders"].queues] == ["orders"]
    assert by_name["news"].routings == ("multicast",) and by_name["news"].queues == ()
    effective = cfg.settings_for("orders")
    assert effective["dead-letter-address"] == "DLQ" and effective["expiry-address"] == "ExpiryQueue"
    assert effective["max-delivery-attempts"] == 3 and effective["redelivery-delay"] == 50
    assert effective["default-address-routing-type"] == "anycast"


def test_the_projects_broker_topology_renders_for_both_readers():
    topology = load_topology(topology_path("single-broker"))
    settings = {"dead_letter_address": None, "expiry_address": None, **topology.nodes["B1"].settings.as_dict()}
    text = render_broker_xml(topology, "B1", {"clients": 0}, settings)
    cfg = parse_config(text, "broker.xml")
    names = [a.name for a in cfg.addresses]
    assert len(names) == len(set(names)), "the dead-letter queue declared by the topology is rendered once"
    assert {"orders", "news", "DLQ", "ExpiryQueue"} <= set(names)
    assert cfg.settings_for("x")["max-delivery-attempts"] == topology.nodes["B1"].settings.max_delivery_attempts


def test_no_dead_letter_or_expiry_address_when_the_settings_say_none():
    text = render_broker_xml(BROKER, "B1", {"clients": 1}, {"dead_letter_address": None, "expiry_address": None,
                                                            "auto_create": False, "persistence": False})
    core = core_of(text)
    assert [a.get("name") for a in core.findall("c:addresses/c:address", NS)] == ["orders", "news"]
    setting = core.find("c:address-settings/c:address-setting", NS)
    assert setting.find("c:dead-letter-address", NS) is None and setting.find("c:expiry-address", NS) is None
    assert setting.findtext("c:auto-create-queues", namespaces=NS) == "false"
    assert core.findtext("c:persistence-enabled", namespaces=NS) == "false"


def test_container_acceptors_bind_every_interface_and_extra_listeners_get_acceptors():
    t = topo({"B1": {"role": "broker", "listeners": [{"name": "admin"}]}})
    text = render_broker_xml(t, "B1", {"clients": 5672, "admin": 5673}, host="0.0.0.0")
    urls = [a.text for a in core_of(text).findall("c:acceptors/c:acceptor", NS)]
    assert urls == ["tcp://0.0.0.0:5672?protocols=AMQP", "tcp://0.0.0.0:5673?protocols=AMQP"]


def test_names_are_escaped():
    t = topo({"B1": {"role": "broker", "queues": [{"address": "a&b<c>\"q\""}]}})
    core = core_of(render_broker_xml(t, "B1", {"clients": 1}))
    assert 'a&b<c>"q"' in [a.get("name") for a in core.findall("c:addresses/c:address", NS)]


@pytest.mark.parametrize("settings, message", [
    ({"dead_letter": "DLQ"}, r"^B1: unknown broker setting 'dead_letter' \(expected one of: "),
    ({"max_delivery_attempts": "3"}, r"^B1: broker setting max_delivery_attempts: expected a value like 10, "),
    ({"max_delivery_attempts": 0}, r"^B1: broker setting max_delivery_attempts: expected -1 \(unlimited\) or >= 1"),
    ({"auto_create": 1}, r"^B1: broker setting auto_create: expected a value like True, got 1$"),
    ({"queue_type": "stream"}, r"^B1: broker setting queue_type: expected one of classic, quorum"),
    ({"dead_letter_address": ""}, r"^B1: broker setting dead_letter_address: expected a value like 'DLQ'"),
])
def test_bad_settings_are_one_line_errors(settings, message):
    with pytest.raises(RenderError, match=message) as info:
        render_broker_xml(BROKER, "B1", {"clients": 1}, settings)
    assert "\n" not in str(info.value)


def test_other_render_errors():
    with pytest.raises(RenderError, match=r"^R1: is a router; broker.xml is rendered for brokers only$"):
        render_broker_xml(topo({"R1": {"role": "router"}}), "R1", {"clients": 1})
    with pytest.raises(RenderError, match=r"^B1: no port given for acceptor 'clients'"):
        render_broker_xml(BROKER, "B1", {})
    with pytest.raises(RenderError, match=r"^B1: queues\[0\].address 'a.#': expected a name without"):
        render_broker_xml(topo({"B1": {"role": "broker", "queues": [{"address": "a.#"}]}}), "B1", {"clients": 1})


def test_settings_defaults_are_artemis_stock_values():
    assert broker_settings(None) == BROKER_DEFAULTS
    assert broker_settings({"queue_type": "quorum"})["queue_type"] == "quorum"


# ---- RabbitMQ ---------------------------------------------------------------------------------------------------


def conf_entries(text: str) -> dict[str, str]:
    """rabbitmq.conf is sysctl-style: `key = value` lines and `#` comments, nothing else."""
    entries = {}
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        m = re.fullmatch(r"([a-z0-9_.]+) = (\S+)", raw)
        assert m, f"not a rabbitmq.conf line: {raw!r}"
        assert m.group(1) not in entries
        entries[m.group(1)] = m.group(2)
    return entries


def test_rabbitmq_files_parse():
    files = render_rabbitmq(BROKER, "B1", 25672, definitions_path="/tmp/x/definitions.json")
    conf = conf_entries(files.conf)
    assert conf["listeners.tcp.default"] == "127.0.0.1:25672"
    assert conf["load_definitions"] == "/tmp/x/definitions.json"
    assert conf["amqp1_0.default_user"] == "guest" and conf["loopback_users"] == "none"
    assert conf["log.console.use_colors"] == "off" and conf["log.file"] == "false"
    assert files.enabled_plugins == "[rabbitmq_amqp1_0].\n"
    defs = json.loads(files.definitions_json)
    queues = {q["name"]: q for q in defs["queues"]}
    assert set(queues) == {"DLQ", "orders"}
    assert queues["orders"]["durable"] and queues["orders"]["arguments"] == {"x-queue-type": "classic"}
    assert [(x["name"], x["type"], x["durable"]) for x in defs["exchanges"]] == [("news", "fanout", True)]
    [policy] = defs["policies"]
    assert policy["definition"] == {"dead-letter-exchange": "", "dead-letter-routing-key": "DLQ"}
    assert policy["apply-to"] == "queues"
    pattern = re.compile(policy["pattern"])  # PCRE and Python agree on this lookahead
    assert pattern.search("orders") and pattern.search("interop.q.1") and pattern.search("DLQ2")
    assert not pattern.search("DLQ")
    [user] = defs["users"]
    raw = base64.b64decode(user["password_hash"])
    assert raw[4:] == hashlib.sha256(raw[:4] + b"guest").digest()
    assert defs["permissions"] == [{"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]


def test_rabbitmq_quorum_queues_carry_the_delivery_limit_and_management_is_optional():
    files = render_rabbitmq(BROKER, "B1", 5672, {"queue_type": "quorum", "max_delivery_attempts": 3},
                            listen_host="0.0.0.0", management_port=15672)
    conf = conf_entries(files.conf)
    assert conf["listeners.tcp.default"] == "0.0.0.0:5672" and conf["management.tcp.port"] == "15672"
    assert files.enabled_plugins == "[rabbitmq_amqp1_0,rabbitmq_management].\n"
    defs = files.definitions
    assert all(q["arguments"]["x-queue-type"] == "quorum" for q in defs["queues"])
    assert defs["policies"][0]["definition"]["delivery-limit"] == 3


def test_rabbitmq_without_dead_letter_address_has_no_policy():
    defs = render_rabbitmq(BROKER, "B1", 5672, {"dead_letter_address": None}).definitions
    assert defs["policies"] == [] and [q["name"] for q in defs["queues"]] == ["orders"]


def test_rabbitmq_wire_addresses():
    node = BROKER.nodes["B1"]
    assert wire_address(node, "orders") == "/amq/queue/orders"  # declared: never redeclared on attach
    assert wire_address(node, "news") == "/exchange/news"  # multicast: a fanout exchange
    assert wire_address(node, "DLQ") == "/amq/queue/DLQ"  # declared by the settings
    assert wire_address(node, "other") == "/queue/other"  # declared on attach
    assert wire_address(node, "/topic/x") == "/topic/x"
    assert wire_address(node, "DLQ", {"dead_letter_address": None}) == "/queue/DLQ"
    assert declared_names(node) == {"DLQ": "queue", "orders": "queue", "news": "exchange"}


def test_rabbitmq_render_errors():
    with pytest.raises(RenderError, match=r"^B1: queues\[0\].address 'amq.x': names starting 'amq.' are reserved"):
        render_rabbitmq(topo({"B1": {"role": "broker", "queues": [{"address": "amq.x"}]}}), "B1", 5672)
    with pytest.raises(RenderError, match=r"^B1: amqp_port: expected a port 1-65535, got 0$"):
        render_rabbitmq(BROKER, "B1", 0)
    with pytest.raises(RenderError, match=r"^R1: is a router"):
        render_rabbitmq(topo({"R1": {"role": "router"}}), "R1", 5672)


# ---- Artemis broker connections (002_f23507c2891d6d06.txt) ------------------------------------------------------

DIALLING = parse_topology({
    "name": "dialling",
    "nodes": {
        "DC1": {"role": "broker", "queues": [{"address": "orders"}], "broker_connections": [
            {"name": "DC2", "to": ["DC2", "DC3", "DC4"], "auto_start": False, "reconnect_attempts": 3,
             "retry_interval_ms": 200, "user": "admin", "password": 'p&"w<',
             "elements": [{"type": "mirror", "queue_removal": False},
                          {"type": "sender", "address_match": "queue.#"},
                          {"type": "receiver", "queue_name": "inbound.jobs"}]},
            {"name": "router", "to": "R1", "elements": [{"type": "peer", "address_match": "queue.#"}]},
        ]},
        "DC2": {"role": "broker"}, "DC3": {"role": "broker"}, "DC4": {"role": "broker"},
        "R1": {"role": "router", "mode": "interior"},
    },
    "links": [{"from": "DC1", "to": n, "role": "normal"} for n in ("DC2", "DC3", "DC4", "R1")],
})
DIALLED = {"DC2": 6002, "DC3": 6003, "DC4": 6004, "R1": 6101}


def connections_of(text: str) -> list[ET.Element]:
    return core_of(text).findall("c:broker-connections/c:amqp-connection", NS)


def elements_of(connection: ET.Element) -> list[tuple[str, dict]]:
    return [(child.tag.split("}")[1], dict(child.attrib)) for child in connection]


def test_broker_connections_render_every_attribute_and_alternates_after_the_hash():
    text = render_broker_xml(DIALLING, "DC1", {"clients": 5672}, connect_ports=DIALLED)
    mirror, peer = connections_of(text)
    assert dict(mirror.attrib) == {
        "uri": "tcp://127.0.0.1:6002#tcp://127.0.0.1:6003,tcp://127.0.0.1:6004", "name": "DC2", "retry-interval": "200",
        "reconnect-attempts": "3", "auto-start": "false", "user": "admin", "password": 'p&"w<'}
    assert elements_of(mirror) == [
        ("mirror", {"queue-creation": "true", "queue-removal": "false", "message-acknowledgements": "true"}),
        ("sender", {"address-match": "queue.#"}),
        ("receiver", {"queue-name": "inbound.jobs"}),
    ]
    # Artemis's defaults are written out too, so that the file says what it does; no credentials unless given.
    assert dict(peer.attrib) == {"uri": "tcp://127.0.0.1:6101", "name": "router", "retry-interval": "5000",
                                 "reconnect-attempts": "-1", "auto-start": "true"}
    assert elements_of(peer) == [("peer", {"address-match": "queue.#"})]
    # In the order of the brief's example, after the addresses.
    assert ('<amqp-connection uri="tcp://127.0.0.1:6101" name="router" retry-interval="5000" '
            'reconnect-attempts="-1" auto-start="true">') in text
    tags = [child.tag.split("}")[1] for child in core_of(text)]
    assert tags.index("broker-connections") == tags.index("addresses") + 1


def test_the_mirror_queue_is_left_to_the_broker_and_other_queues_are_rendered_as_before():
    text = render_broker_xml(DIALLING, "DC1", {"clients": 1}, connect_ports=DIALLED)
    names = [a.get("name") for a in core_of(text).findall("c:addresses/c:address", NS)]
    assert names == ["DLQ", "ExpiryQueue", "orders"]
    assert "$ACTIVEMQ_ARTEMIS_MIRROR_" not in text


def test_no_broker_connections_element_without_broker_connections():
    text = render_broker_xml(BROKER, "B1", {"clients": 1}, connect_ports={"X": 1})
    assert core_of(text).find("c:broker-connections", NS) is None and "broker-connections" not in text


def test_the_dial_host_is_its_own_keyword():
    text = render_broker_xml(DIALLING, "DC1", {"clients": 5672}, host="0.0.0.0", connect_ports=DIALLED,
                             dial_host="10.0.0.7")
    assert [a.text for a in core_of(text).findall("c:acceptors/c:acceptor", NS)] == [
        "tcp://0.0.0.0:5672?protocols=AMQP"]
    assert [c.get("uri") for c in connections_of(text)] == [
        "tcp://10.0.0.7:6002#tcp://10.0.0.7:6003,tcp://10.0.0.7:6004", "tcp://10.0.0.7:6101"]


@pytest.mark.parametrize("connect_ports, message", [
    (None, r"^DC1: broker connection 'DC2': no port for node 'DC2' in connect_ports \(it has nothing\)$"),
    ({"DC2": 1, "DC3": 2, "R1": 3},
     r"^DC1: broker connection 'DC2': no port for node 'DC4' in connect_ports \(it has DC2, DC3, R1\)$"),
    ({**DIALLED, "R1": 0}, r"^DC1: broker connection 'router': connect_ports\['R1'\]: expected a TCP port "
                           r"1..65535, got 0$"),
    ({**DIALLED, "DC3": "6003"}, r"connect_ports\['DC3'\]: expected a TCP port 1..65535, got '6003'$"),
])
def test_a_dialled_node_without_a_port_is_a_render_error(connect_ports, message):
    with pytest.raises(RenderError, match=message):
        render_broker_xml(DIALLING, "DC1", {"clients": 1}, connect_ports=connect_ports)


BROKER_CONNECTION_TOPOLOGIES = {
    # topology: {node: [(name, dialled nodes, attributes but uri and name, elements)]}
    "broker-peer-router": {"B1": [("router", ["R1"], ("200", "-1", "true"), [("peer", {"address-match": "queue.#"})])]},
    "broker-bridge": {"B1": [("bridge", ["B2"], ("200", "-1", "true"), [
        ("sender", {"address-match": "outbound.#"}), ("receiver", {"queue-name": "inbound.jobs"})])], "B2": []},
    "broker-mirror": {"DC1": [("DC2", ["DC2"], ("200", "-1", "true"), [("mirror", {
        "queue-creation": "true", "queue-removal": "true", "message-acknowledgements": "true"})])], "DC2": []},
    "broker-dual-mirror": {
        "DC1": [("DC2", ["DC2"], ("200", "-1", "true"), [("mirror", {
            "queue-creation": "true", "queue-removal": "true", "message-acknowledgements": "true"})])],
        "DC2": [("DC1", ["DC1"], ("200", "-1", "true"), [("mirror", {
            "queue-creation": "true", "queue-removal": "true", "message-acknowledgements": "true"})])]},
    "broker-failover": {"P": [("backups", ["S1", "S2", "S3"], ("200", "-1", "true"),
                               [("sender", {"address-match": "jobs.#"})])], "S1": [], "S2": [], "S3": []},
    "broker-reconnect": {"B1": [
        ("limited", ["B2"], ("300", "3", "true"), [("sender", {"address-match": "outbound.#"})]),
        ("manual", ["B2"], ("200", "-1", "false"), [("sender", {"queue-name": "manual.q"})])], "B2": []},
}


@pytest.mark.parametrize("name", sorted(BROKER_CONNECTION_TOPOLOGIES))
def test_broker_connection_topologies_render_their_amqp_connections(name):
    topology = load_topology(topology_path(name))
    expected = BROKER_CONNECTION_TOPOLOGIES[name]
    assert {n.name for n in topology.nodes_with_role("broker")} == set(expected)
    for node, connections in expected.items():
        ports = {link.to: 7000 + i for i, link in enumerate(topology.links_from(node))}
        text = render_broker_xml(topology, node, {ls.name: 0 for ls in topology.listeners_for(node)},
                                 connect_ports=ports)
        rendered = connections_of(text)
        assert len(rendered) == len(connections), node
        for el, (conn_name, dialled, (retry, attempts, auto), elements) in zip(rendered, connections, strict=True):
            hosts = [f"127.0.0.1:{ports[n]}" for n in dialled]
            uri = f"tcp://{hosts[0]}" + (f"#{','.join('tcp://' + h for h in hosts[1:])}" if hosts[1:] else "")
            assert dict(el.attrib) == {"uri": uri, "name": conn_name, "retry-interval": retry,
                                       "reconnect-attempts": attempts, "auto-start": auto}
            assert elements_of(el) == elements
        declared = {a.get("name") for a in core_of(text).findall("c:addresses/c:address", NS)}
        assert {q.address for q in topology.node(node).queues} <= declared
        assert not any(n.startswith("$ACTIVEMQ_ARTEMIS_MIRROR_") for n in declared)


def test_the_router_a_broker_peers_with_renders_no_connector_for_it():
    from harness.vendors.qdrouterd.render import render_router

    topology = load_topology(topology_path("broker-peer-router"))
    conf = render_router(topology, "R1", {"clients": 5672})
    assert "connector {" not in conf and "autoLink {" not in conf
    assert [ls.name for ls in topology.listeners_for("R1")] == ["clients"]
    assert topology.listener_for_link(topology.links[0]) == "clients"


# ---- network connectors as AMQP federation (004_05e35cdd7bc39ede.txt) --------------------------------------------

NETWORKED = parse_topology({
    "name": "networked",
    "nodes": {
        "B1": {"role": "broker", "queues": [{"address": "orders"}],
               "broker_connections": [{"name": "mirror", "to": "B2", "elements": [{"type": "mirror"}]}],
               "network_connectors": [
                   {"name": "fan", "to": ["B2", "B3"], "duplex": True, "network_ttl": 2, "user": "myCommonUser",
                    "password": 'p&"w<', "queues": ["orders.#", "jobs.*"], "topics": ["prices.#", "prices"],
                    "excluded": ["orders.private.#"], "retry_interval_ms": 200},
                   {"name": "pair", "uri": "masterslave", "to": ["M", "S"], "topics": ["prices"]},
                   {"name": "topics-only", "to": "B2", "queues": [], "topics": ["news.#"], "user": "u"},
               ]},
        "B2": {"role": "broker"}, "B3": {"role": "broker"}, "M": {"role": "broker"}, "S": {"role": "broker"},
    },
    "links": [{"from": "B1", "to": n, "role": "normal"} for n in ("B2", "B3", "M", "S")],
})
NETWORK_PORTS = {"B2": 6002, "B3": 6003, "M": 6004, "S": 6005}


def federation_of(connection: ET.Element) -> list[tuple[str, dict, list[tuple[str, dict]]]]:
    """(policy tag, its attributes, its includes and excludes) for each policy of the connection's federation."""
    (federation,) = connection.findall("c:federation", NS)
    assert dict(federation.attrib) == {}
    return [(policy.tag.split("}")[1], dict(policy.attrib), elements_of(policy)) for policy in federation]


def test_a_static_duplex_connector_is_one_federation_connection_per_node_with_policies_both_ways():
    text = render_broker_xml(NETWORKED, "B1", {"clients": 5672}, connect_ports=NETWORK_PORTS)
    names = [c.get("name") for c in connections_of(text)]
    assert names == ["mirror", "fan.B2", "fan.B3", "pair", "topics-only.B2"]  # broker connections first
    fan_b2, fan_b3 = connections_of(text)[1:3]
    assert dict(fan_b2.attrib) == {"uri": "tcp://127.0.0.1:6002", "name": "fan.B2", "retry-interval": "200",
                                   "reconnect-attempts": "-1", "auto-start": "true", "user": "myCommonUser",
                                   "password": 'p&"w<'}
    assert fan_b3.get("uri") == "tcp://127.0.0.1:6003"
    queues = [("include", {"address-match": "orders.#", "queue-match": "#"}),
              ("include", {"address-match": "jobs.*", "queue-match": "#"}),
              ("exclude", {"address-match": "orders.private.#", "queue-match": "#"})]
    topics = [("include", {"address-match": "prices.#"}), ("include", {"address-match": "prices"}),
              ("exclude", {"address-match": "orders.private.#"})]
    # network_ttl 2: messages that came by federation go on (include-federated), and cross at most 2 brokers.
    assert federation_of(fan_b2) == [
        ("remote-queue-policy", {"name": "fan.B2-queues", "include-federated": "true"}, queues),
        ("remote-address-policy", {"name": "fan.B2-topics", "max-hops": "2"}, topics),
        ("local-queue-policy", {"name": "fan.B2-queues-back", "include-federated": "true"}, queues),
        ("local-address-policy", {"name": "fan.B2-topics-back", "max-hops": "2"}, topics),
    ]
    assert [p[1]["name"] for p in federation_of(fan_b3)] == [
        "fan.B3-queues", "fan.B3-topics", "fan.B3-queues-back", "fan.B3-topics-back"]


def test_a_masterslave_connector_is_one_connection_with_the_standby_after_the_hash():
    text = render_broker_xml(NETWORKED, "B1", {"clients": 5672}, connect_ports=NETWORK_PORTS)
    pair = connections_of(text)[3]
    assert dict(pair.attrib) == {"uri": "tcp://127.0.0.1:6004#tcp://127.0.0.1:6005", "name": "pair",
                                 "retry-interval": "1000", "reconnect-attempts": "-1", "auto-start": "true"}
    # Not duplex: the remote policies only, so messages flow from B1 to the pair's consumers and not back;
    # network_ttl 1 (the default): federated messages stop there and cross one broker.
    assert federation_of(pair) == [
        ("remote-queue-policy", {"name": "pair-queues", "include-federated": "false"},
         [("include", {"address-match": "#", "queue-match": "#"})]),
        ("remote-address-policy", {"name": "pair-topics", "max-hops": "1"}, [("include", {"address-match": "prices"})]),
    ]


def test_empty_queues_or_topics_write_no_policy_for_them():
    text = render_broker_xml(NETWORKED, "B1", {"clients": 5672}, connect_ports=NETWORK_PORTS)
    topics_only = connections_of(text)[4]
    assert dict(topics_only.attrib)["user"] == "u" and "password" not in topics_only.attrib
    assert federation_of(topics_only) == [
        ("remote-address-policy", {"name": "topics-only.B2-topics", "max-hops": "1"},
         [("include", {"address-match": "news.#"})])]
    queues_only = render_broker_xml(parse_topology({
        "name": "q", "nodes": {"B1": {"role": "broker", "network_connectors": [{"name": "n", "to": "B2"}]},
                               "B2": {"role": "broker"}},
        "links": [{"from": "B1", "to": "B2", "role": "normal"}]}), "B1", {"clients": 1}, connect_ports={"B2": 2})
    (connection,) = connections_of(queues_only)
    assert [p[0] for p in federation_of(connection)] == ["remote-queue-policy"]


def test_network_connectors_alone_open_broker_connections_and_the_dialled_side_renders_none():
    topology = load_topology(topology_path("network-pair"))
    text = render_broker_xml(topology, "B1", {"clients": 5672}, connect_ports={"B2": 7001})
    tags = [child.tag.split("}")[1] for child in core_of(text)]
    assert tags.index("broker-connections") == tags.index("addresses") + 1
    (connection,) = connections_of(text)
    assert connection.get("name") == "b1-b2.B2"
    assert ('<amqp-connection uri="tcp://127.0.0.1:7001" name="b1-b2.B2" retry-interval="200" '
            'reconnect-attempts="-1" auto-start="true">') in text
    assert "broker-connections" not in render_broker_xml(topology, "B2", {"clients": 5672})


@pytest.mark.parametrize("connect_ports, message", [
    (None, r"^B1: network connector 'fan': no port for node 'B2' in connect_ports \(it has nothing\)$"),
    ({"B2": 1, "M": 2, "S": 3}, r"^B1: network connector 'fan': no port for node 'B3' in connect_ports "
                                r"\(it has B2, M, S\)$"),
    ({**NETWORK_PORTS, "S": 70000}, r"^B1: network connector 'pair': connect_ports\['S'\]: expected a TCP port "
                                    r"1..65535, got 70000$"),
])
def test_a_network_connector_without_a_port_is_a_render_error(connect_ports, message):
    topology = parse_topology({
        "name": "n",
        "nodes": {"B1": {"role": "broker", "network_connectors": [
                      {"name": "fan", "to": ["B2", "B3"]}, {"name": "pair", "uri": "masterslave", "to": ["M", "S"]}]},
                  **{n: {"role": "broker"} for n in ("B2", "B3", "M", "S")}},
        "links": [{"from": "B1", "to": n, "role": "normal"} for n in ("B2", "B3", "M", "S")],
    })
    with pytest.raises(RenderError, match=message):
        render_broker_xml(topology, "B1", {"clients": 1}, connect_ports=connect_ports)


NETWORK_TOPOLOGIES = {
    # topology: {node: [(amqp-connection name, dialled nodes, policy tags)]}
    "network-pair": {"B1": [("b1-b2.B2", ["B2"], ["remote-queue-policy", "remote-address-policy"])], "B2": []},
    "network-duplex": {"B1": [("b1-b2.B2", ["B2"], ["remote-queue-policy", "remote-address-policy",
                                                    "local-queue-policy", "local-address-policy"])], "B2": []},
    "network-hub-spoke": {"H": [], **{f"S{i}": [(f"s{i}-h.H", ["H"], [
        "remote-queue-policy", "remote-address-policy", "local-queue-policy", "local-address-policy"])]
        for i in (1, 2, 3)}},
    "network-mesh": {n: [(f"{n.lower()}-{t.lower()}.{t}", [t], [
        "remote-queue-policy", "remote-address-policy", "local-queue-policy", "local-address-policy"])]
        for n, t in (("B1", "B2"), ("B2", "B3"), ("B3", "B1"))},
    "network-masterslave": {"B1": [("b1-pair", ["M", "S"], ["remote-queue-policy"])], "M": [], "S": []},
}


@pytest.mark.parametrize("name", sorted(NETWORK_TOPOLOGIES))
def test_network_topologies_render_their_federation_for_every_broker(name):
    topology = load_topology(topology_path(name))
    expected = NETWORK_TOPOLOGIES[name]
    assert {n.name for n in topology.nodes_with_role("broker")} == set(expected)
    ttl = 2 if name == "network-hub-spoke" else 1
    for node, connections in expected.items():
        ports = {link.to: 7000 + i for i, link in enumerate(topology.links_from(node))}
        text = render_broker_xml(topology, node, {ls.name: 0 for ls in topology.listeners_for(node)},
                                 connect_ports=ports)
        rendered = connections_of(text)
        assert len(rendered) == len(connections), node
        for el, (conn_name, dialled, policies) in zip(rendered, connections, strict=True):
            hosts = [f"127.0.0.1:{ports[n]}" for n in dialled]
            assert dict(el.attrib) == {"uri": f"tcp://{hosts[0]}" + (f"#tcp://{hosts[1]}" if hosts[1:] else ""),
                                       "name": conn_name, "retry-interval": "200", "reconnect-attempts": "-1",
                                       "auto-start": "true"}
            got = federation_of(el)
            assert [tag for tag, _attrs, _rules in got] == policies
            for tag, attrs, _rules in got:
                if "address" in tag:
                    assert attrs["max-hops"] == str(ttl)
                else:
                    assert attrs["include-federated"] == ("true" if ttl > 1 else "false")
        # The reference broker reads the same file (the network runtime follows Artemis's federation form).
        cfg = parse_config(text, f"{node}.xml")
        assert [(bc.name, [p for _h, p in bc.endpoints]) for bc in cfg.broker_connections] == [
            (c, [ports[n] for n in dialled]) for c, dialled, _p in connections]
        assert all(bc.federation is not None for bc in cfg.broker_connections)
