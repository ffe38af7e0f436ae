"""Broker renderers: Artemis broker.xml (read by Artemis and the reference broker) and RabbitMQ's files."""

import base64
import hashlib
import json
import re
import xml.etree.ElementTree as ET

import pytest

from harness.render.artemis import BROKER_DEFAULTS, broker_settings, render_broker_xml
from harness.render.qdrouterd import RenderError
from harness.render.rabbitmq import declared_names, render_rabbitmq, wire_address
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
