"""ActiveMQ Classic activemq.xml: the broker, its destinations, transports and network connectors (004 seed)."""

import xml.etree.ElementTree as ET

import pytest

from harness.vendors.activemq_classic.render import activemq_pattern, render_activemq_xml
from harness.peers.provider import RenderError
from harness.topology import load_topology, parse_topology, topology_path

BEANS = "{http://www.springframework.org/schema/beans}"
NS = {"a": "http://activemq.apache.org/schema/core"}


def broker_of(text: str) -> ET.Element:
    root = ET.fromstring(text.encode())
    assert root.tag == f"{BEANS}beans"
    (broker,) = root.findall("a:broker", NS)
    return broker


def connectors_of(text: str) -> list[ET.Element]:
    return broker_of(text).findall("a:networkConnectors/a:networkConnector", NS)


def destinations(el: ET.Element, where: str) -> list[tuple[str, str]]:
    return [(child.tag.split("}")[1], child.get("physicalName")) for child in el.findall(f"a:{where}/*", NS)]


NETWORKED = parse_topology({
    "name": "networked",
    "nodes": {
        "B1": {"role": "broker", "queues": [{"address": "orders"}, {"address": "prices", "routing": "multicast"}],
               "network_connectors": [
                   {"name": "connector_1_to_2", "to": ["B2", "B3"], "duplex": True, "network_ttl": 3,
                    "user": "myCommonUser", "password": 'p&"w<', "queues": ["orders.#", "jobs.*.eu"],
                    "topics": ["prices.#", "prices"], "excluded": ["orders.private.#", "*.test"],
                    "retry_interval_ms": 200},
                   {"name": "pair", "uri": "masterslave", "to": ["M", "S"]},
               ]},
        "B2": {"role": "broker", "queues": [{"address": "orders"}]},
        "B3": {"role": "broker"}, "M": {"role": "broker"}, "S": {"role": "broker"},
    },
    "links": [{"from": "B1", "to": n, "role": "normal"} for n in ("B2", "B3", "M", "S")],
})
PORTS = {"B2": 6002, "B3": 6003, "M": 6004, "S": 6005}


def test_the_broker_element_and_its_children_in_alphabetical_order():
    text = render_activemq_xml(NETWORKED, "B1", {"clients": 5672}, connect_ports=PORTS)
    broker = broker_of(text)
    assert dict(broker.attrib) == {"brokerName": "B1", "persistent": "true", "dataDirectory": "data",
                                   "useJmx": "false"}
    assert [child.tag.split("}")[1] for child in broker] == [  # the default settings name a dead-letter queue
        "destinationPolicy", "destinations", "networkConnectors", "transportConnectors"]
    assert destinations(broker, "destinations") == [("queue", "orders"), ("topic", "prices")]
    assert "Generated from &lt;topology&gt; by harness.vendors.activemq_classic.render" in text


def test_settings_give_persistence_and_the_data_directory():
    text = render_activemq_xml(NETWORKED, "B2", {"clients": 1},
                               {"persistence": False, "journal_directory": "/var/lib/amq/kahadb"})
    assert dict(broker_of(text).attrib) == {"brokerName": "B2", "persistent": "false",
                                            "dataDirectory": "/var/lib/amq", "useJmx": "false"}
    with pytest.raises(RenderError, match=r"^B2: unknown broker setting 'persistent'"):
        render_activemq_xml(NETWORKED, "B2", {"clients": 1}, {"persistent": False})


def test_a_static_connector_lists_every_node_with_its_options_and_credentials():
    static, _pair = connectors_of(render_activemq_xml(NETWORKED, "B1", {"clients": 5672}, connect_ports=PORTS))
    assert dict(static.attrib) == {
        "name": "connector_1_to_2",
        "uri": "static:(tcp://127.0.0.1:6002,tcp://127.0.0.1:6003)?initialReconnectDelay=200"
               "&useExponentialBackOff=false",
        "duplex": "true", "networkTTL": "3", "conduitSubscriptions": "true",
        "userName": "myCommonUser", "password": 'p&"w<'}
    # Artemis-style wildcards in ActiveMQ's syntax: '#' becomes '>', '*' stays.
    assert destinations(static, "dynamicallyIncludedDestinations") == [
        ("queue", "orders.>"), ("queue", "jobs.*.eu"), ("topic", "prices.>"), ("topic", "prices")]
    assert destinations(static, "excludedDestinations") == [
        ("queue", "orders.private.>"), ("topic", "orders.private.>"), ("queue", "*.test"), ("topic", "*.test")]


def test_a_masterslave_connector_lists_primary_then_standby_with_defaults():
    _static, pair = connectors_of(render_activemq_xml(NETWORKED, "B1", {"clients": 5672}, connect_ports=PORTS,
                                                      dial_host="10.0.0.9"))
    assert dict(pair.attrib) == {
        "name": "pair",
        "uri": "masterslave:(tcp://10.0.0.9:6004,tcp://10.0.0.9:6005)?initialReconnectDelay=1000"
               "&useExponentialBackOff=false",
        "duplex": "false", "networkTTL": "1", "conduitSubscriptions": "true"}
    assert destinations(pair, "dynamicallyIncludedDestinations") == [("queue", ">")]
    assert pair.find("a:excludedDestinations", NS) is None


def test_transports_speak_openwire_too_where_a_network_connector_dials():
    # B2 is dialled by B1's connector: Classic's bridges are OpenWire, on the one port the link names.
    b2 = broker_of(render_activemq_xml(NETWORKED, "B2", {"clients": 5672}))
    assert [dict(t.attrib) for t in b2.findall("a:transportConnectors/a:transportConnector", NS)] == [
        {"name": "amqp", "uri": "auto://0.0.0.0:5672?auto.protocols=amqp,default"}]
    assert b2.find("a:networkConnectors", NS) is None
    b1 = broker_of(render_activemq_xml(NETWORKED, "B1", {"clients": 5672}, host="127.0.0.1", connect_ports=PORTS))
    assert [dict(t.attrib) for t in b1.findall("a:transportConnectors/a:transportConnector", NS)] == [
        {"name": "amqp", "uri": "amqp://127.0.0.1:5672"}]


def test_extra_listeners_are_amqp_transports_of_their_own():
    topology = parse_topology({"name": "l", "nodes": {"B1": {"role": "broker", "listeners": [{"name": "extra"}]}}})
    broker = broker_of(render_activemq_xml(topology, "B1", {"clients": 1, "extra": 2}))
    assert [dict(t.attrib) for t in broker.findall("a:transportConnectors/a:transportConnector", NS)] == [
        {"name": "amqp", "uri": "amqp://0.0.0.0:1"}, {"name": "extra", "uri": "amqp://0.0.0.0:2"}]
    assert broker.find("a:destinations", NS) is None
    with pytest.raises(RenderError, match=r"^B1: no port given for transport 'extra' \(ports\)$"):
        render_activemq_xml(topology, "B1", {"clients": 1})
    with pytest.raises(RenderError, match=r"^B1: transport 'clients': expected a port 0-65535, got -1$"):
        render_activemq_xml(topology, "B1", {"clients": -1, "extra": 2})


@pytest.mark.parametrize("connect_ports, message", [
    (None, r"^B1: network connector 'connector_1_to_2': no port for node 'B2' in connect_ports \(it has nothing\)$"),
    ({"B2": 1, "B3": 2, "M": 3}, r"^B1: network connector 'pair': no port for node 'S' in connect_ports "
                                 r"\(it has B2, B3, M\)$"),
    ({**PORTS, "B3": True}, r"^B1: network connector 'connector_1_to_2': connect_ports\['B3'\]: expected a TCP "
                            r"port 1..65535, got True$"),
])
def test_a_dialled_broker_without_a_port_is_a_render_error(connect_ports, message):
    with pytest.raises(RenderError, match=message):
        render_activemq_xml(NETWORKED, "B1", {"clients": 1}, connect_ports=connect_ports)


def test_what_classic_cannot_express_is_refused():
    bridge = load_topology(topology_path("broker-bridge"))
    with pytest.raises(RenderError, match=r"^B1: broker connections \(Artemis's <amqp-connection>\) have no "
                                          r"ActiveMQ Classic form; Classic joins brokers with network connectors$"):
        render_activemq_xml(bridge, "B1", {"clients": 1}, connect_ports={"B2": 2})
    router = load_topology(topology_path("single-router"))
    with pytest.raises(RenderError, match=r"^R1: is a router; activemq.xml is rendered for brokers only$"):
        render_activemq_xml(router, "R1", {"clients": 1})
    wild = parse_topology({"name": "w", "nodes": {"B1": {"role": "broker", "queues": [{"address": "a.>"}]}}})
    with pytest.raises(RenderError, match=r"^B1: queues\[0\].address 'a.>': expected a name without spaces"):
        render_activemq_xml(wild, "B1", {"clients": 1})


@pytest.mark.parametrize("pattern, expected", [
    ("#", ">"), ("a.#", "a.>"), ("*", "*"), ("a.*.b", "a.*.b"), ("*.#", "*.>"), ("orders", "orders"),
])
def test_wildcards_translate_word_by_word(pattern, expected):
    assert activemq_pattern(pattern) == expected


NETWORK_TOPOLOGIES = ["network-duplex", "network-hub-spoke", "network-masterslave", "network-mesh", "network-pair"]


@pytest.mark.parametrize("name", NETWORK_TOPOLOGIES)
def test_every_network_topology_renders_for_every_broker(name):
    topology = load_topology(topology_path(name))
    for node in topology.nodes_with_role("broker"):
        ports = {link.to: 7000 + i for i, link in enumerate(topology.links_from(node.name))}
        text = render_activemq_xml(topology, node.name, {ls.name: 0 for ls in topology.listeners_for(node.name)},
                                   connect_ports=ports)
        broker = broker_of(text)
        assert broker.get("brokerName") == node.name
        rendered = connectors_of(text)
        assert [c.get("name") for c in rendered] == [c.name for c in node.network_connectors]
        for el, connector in zip(rendered, node.network_connectors, strict=True):
            hosts = ",".join(f"tcp://127.0.0.1:{ports[t]}" for t in connector.to)
            assert el.get("uri") == f"{connector.uri}:({hosts})?initialReconnectDelay=200&useExponentialBackOff=false"
            assert (el.get("duplex"), el.get("networkTTL")) == (
                str(connector.duplex).lower(), str(connector.network_ttl))
            included = destinations(el, "dynamicallyIncludedDestinations")
            assert included and included[0] == ("queue", ">")
            assert [p for kind, p in included if kind == "topic"] == [activemq_pattern(t) for t in connector.topics]
        dialled = any(node.name in c.to for n in topology.nodes.values() for c in n.network_connectors)
        (transport,) = broker.findall("a:transportConnectors/a:transportConnector", NS)
        assert transport.get("uri").startswith("auto://" if dialled else "amqp://")
        kinds = {"anycast": "queue", "multicast": "topic"}
        assert destinations(broker, "destinations") == [(kinds[q.routing], q.address) for q in node.queues]


# ---- security: the plugins of a node that authenticates ---------------------------------------------------------


def plugins_of(text: str) -> ET.Element | None:
    return broker_of(text).find("a:plugins", NS)


def test_a_node_that_does_not_authenticate_has_no_plugins():
    assert plugins_of(render_activemq_xml(NETWORKED, "B2", {"clients": 1})) is None


def test_the_common_user_topology_gives_users_groups_and_acls():
    topology = load_topology(topology_path("security-broker-network"))
    text = render_activemq_xml(topology, "B1", {"clients": 1}, connect_ports={"B2": 2})
    plugins = plugins_of(text)
    auth = plugins.find("a:simpleAuthenticationPlugin", NS)
    assert auth.get("anonymousAccessAllowed") == "false"
    users = {u.get("username"): (u.get("password"), u.get("groups"))
             for u in auth.findall("a:users/a:authenticationUser", NS)}
    assert users["myCommonUser"] == ("common-secret", "interop-users,network")
    assert users["producer"] == ("producer-secret", "interop-users,producers")
    entries = [dict(e.attrib) for e in plugins.findall(
        "a:authorizationPlugin/a:map/a:authorizationMap/a:authorizationEntries/a:authorizationEntry", NS)]
    acl = {"read": "network,consumers", "write": "network,producers", "admin": "network"}
    # jobs.# as ActiveMQ's jobs.> and, since jobs.> does not match jobs itself, jobs too; queues and topics
    assert entries[:4] == [{"queue": "jobs.>", **acl}, {"topic": "jobs.>", **acl}, {"queue": "jobs", **acl},
                           {"topic": "jobs", **acl}]
    everyone = {"read": "interop-users", "write": "interop-users", "admin": "interop-users"}
    assert entries[-1] == {"topic": "ActiveMQ.Advisory.>", **everyone}
    # children of <broker> stay in alphabetical order
    tags = [child.tag.split("}")[1] for child in broker_of(text)]
    assert tags == sorted(tags)


def test_without_permissions_every_user_may_do_everything():
    topology = parse_topology({"name": "open-users", "nodes": {"B1": {
        "role": "broker", "users": {"u": "p"}, "access": {"authenticate": True}}}})
    entries = [dict(e.attrib) for e in plugins_of(render_activemq_xml(topology, "B1", {"clients": 1})).iter(
        "{http://activemq.apache.org/schema/core}authorizationEntry")]
    everyone = {"read": "interop-users", "write": "interop-users", "admin": "interop-users"}
    assert {"queue": ">", **everyone} in entries and {"topic": ">", **everyone} in entries



def test_a_tls_clients_listener_is_amqp_ssl_with_the_stores_and_client_auth():
    from harness.vendors.activemq_classic.render import TlsStores

    for certs, query in (("none", ""), ("optional", "?wantClientAuth=true"), ("required", "?needClientAuth=true")):
        topology = parse_topology({"name": "tls", "cas": ["ca"], "nodes": {"B1": {
            "role": "broker", "access": {"tls": {"ca": "ca", "client_certs": certs}}}}})
        text = render_activemq_xml(topology, "B1", {"clients": 5671}, host="127.0.0.1",
                                   tls_stores=TlsStores("/w/broker.p12", "/w/trust.p12", "pw"))
        (transport,) = broker_of(text).findall("a:transportConnectors/a:transportConnector", NS)
        assert transport.get("uri") == f"amqp+ssl://127.0.0.1:5671{query}"
        (ssl,) = broker_of(text).findall("a:sslContext/a:sslContext", NS)
        assert (ssl.get("keyStore"), ssl.get("trustStore"), ssl.get("keyStoreType")) == (
            "/w/broker.p12", "/w/trust.p12", "PKCS12")
    with pytest.raises(RenderError, match="tls_stores"):
        render_activemq_xml(topology, "B1", {"clients": 5671})


def test_the_dead_letter_address_is_the_shared_dead_letter_queue_of_every_queue():
    text = render_activemq_xml(NETWORKED, "B2", {"clients": 1}, {"dead_letter_address": "DLQ",
                                                                 "expiry_address": "ExpiryQueue"})
    (entry,) = broker_of(text).findall("a:destinationPolicy/a:policyMap/a:policyEntries/a:policyEntry", NS)
    assert entry.get("queue") == ">"
    (strategy,) = entry.findall("a:deadLetterStrategy/a:sharedDeadLetterStrategy", NS)
    assert (strategy.get("processNonPersistent"), strategy.get("processExpired")) == ("true", "false")
    assert strategy.find("a:deadLetterQueue/a:queue", NS).get("physicalName") == "DLQ"
    same = render_activemq_xml(NETWORKED, "B2", {"clients": 1}, {"dead_letter_address": "DLQ",
                                                                 "expiry_address": "DLQ"})
    assert 'processExpired="true"' in same
    assert broker_of(render_activemq_xml(NETWORKED, "B2", {"clients": 1}, {"dead_letter_address": None})).find(
        "a:destinationPolicy", NS) is None
