import textwrap
from pathlib import Path

import pytest

from harness.topology import (
    TOPOLOGIES_DIR,
    AddressSpec,
    BrokerConnection,
    BrokerConnectionElement,
    Listener,
    NetworkConnector,
    Topology,
    TopologyError,
    load_topology,
    parse_topology,
    topology_path,
)

BROKERED = """\
name: router-broker-waypoint
description: One router in front of a broker.
nodes:
  R1:
    role: router
    mode: interior
    addresses: [{prefix: queue, waypoint: true}]
    autolinks:
      - {address: queue.orders, direction: in, connection: B1}
      - {address: queue.orders, direction: out, connection: B1, phase: 1, fallback: true}
    link_routes: [{prefix: lr, direction: in, connection: B1}]
  B1: {role: broker, queues: [{address: queue.orders, routing: anycast}]}
links:
  - {from: R1, to: B1, role: route-container, via: proxy}
clients: {producer: R1, consumer: R1}
"""


def write(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(TopologyError) as info:
        load_topology(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    return message


def minimal(**node_fields) -> dict:
    return {"name": "t", "nodes": {"R1": {"role": "router", **node_fields}}}


def test_single_router_file_in_the_repository():
    topo = load_topology(TOPOLOGIES_DIR / "single-router.yaml")
    assert topo.name == "single-router"
    r1 = topo.node("R1")
    assert (r1.role, r1.mode) == ("router", "standalone")
    assert [(a.match, a.distribution, a.priority) for a in r1.addresses] == [
        ("multicast", "multicast", None),
        ("closest", "closest", None),
        ("balanced", "balanced", None),
        ("prio.high", "balanced", 9),
        ("prio.low", "balanced", 2),
        ("match/*/one", "multicast", None),
        ("match/#/any", "multicast", None),
        ("wild.#", "multicast", None),
        ("wild.solo", "closest", None),
        ("my_address", "multicast", None),
    ]
    assert [a.pattern is not None for a in r1.addresses] == [False] * 5 + [True] * 3 + [False] * 2
    assert topo.clients == {"producer": "R1", "consumer": "R1"}
    assert topo.links == []
    assert topo.description


def test_full_model(tmp_path):
    topo = load_topology(write(tmp_path, BROKERED))
    assert isinstance(topo, Topology)
    assert topo.path == tmp_path / "t.yaml"
    r1, b1 = topo.node("R1"), topo.node("B1")
    assert r1.addresses == [AddressSpec(prefix="queue", waypoint=True)]
    assert [(a.direction, a.phase, a.fallback) for a in r1.autolinks] == [
        ("in", None, False),
        ("out", 1, True),
    ]
    assert r1.link_routes[0].match == "lr" and r1.link_routes[0].connection == "B1"
    assert b1.queues[0].address == "queue.orders" and b1.mode == "standalone"
    (link,) = topo.links
    assert (link.from_, link.to, link.role, link.via, link.cost) == (
        "R1",
        "B1",
        "route-container",
        "proxy",
        1,
    )
    assert link.name == "R1->B1"
    assert topo.links_from("R1") == [link] and topo.links_to("B1") == [link]
    assert [n.name for n in topo.nodes_with_role("broker")] == ["B1"]


def test_listeners_follow_inbound_links():
    topo = parse_topology(
        {
            "name": "mesh",
            "nodes": {
                "A": {
                    "role": "router",
                    "mode": "interior",
                    "listeners": [{"name": "extra", "role": "normal"}],
                },
                "B": {"role": "router", "mode": "interior"},
                "E": {"role": "router", "mode": "edge"},
                "Q": {"role": "broker"},
            },
            "links": [
                {"from": "B", "to": "A", "role": "inter-router", "cost": 5},
                {"from": "E", "to": "A", "role": "edge"},
                {"from": "Q", "to": "A", "role": "route-container"},
                {"from": "E", "to": "Q", "role": "normal"},
            ],
        }
    )
    assert topo.listeners_for("A") == [
        Listener("clients", "normal"),
        Listener("extra", "normal"),
        Listener("inter-router", "inter-router"),
        Listener("edge", "edge"),
        Listener("Q", "route-container"),
    ]
    assert topo.listeners_for("B") == [Listener("clients", "normal")]
    assert topo.listeners_for("Q") == [Listener("clients", "normal")]
    assert [topo.listener_for_link(link) for link in topo.links] == ["inter-router", "edge", "Q", "clients"]
    assert topo.links[0].cost == 5


def test_defaults():
    topo = parse_topology(minimal(addresses=[{"prefix": "a"}]))
    (addr,) = topo.node("R1").addresses
    assert addr == AddressSpec(prefix="a", distribution="balanced")
    assert topo.node("R1").mode == "standalone"
    assert topo.description == "" and topo.clients == {} and topo.path is None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            minimal(mode="core"),
            "<topology>: node R1: field 'mode': expected one of standalone, interior, edge, got 'core'",
        ),
        (
            minimal(addresses=[{"prefix": "a", "distribution": "anycast"}]),
            (
                "<topology>: node R1: field 'addresses[0].distribution': expected one of balanced, closest, "
                "multicast, got 'anycast'"
            ),
        ),
        (
            minimal(addresses=[{"prefix": "a", "priority": 10}]),
            "<topology>: node R1: field 'addresses[0].priority': expected an integer 0..9, got 10",
        ),
        (
            minimal(addresses=[{"prefix": "a", "priority": True}]),
            "<topology>: node R1: field 'addresses[0].priority': expected an integer 0..9, got True",
        ),
        (
            minimal(addresses=[{"prefix": "a", "waypoint": "yes"}]),
            "<topology>: node R1: field 'addresses[0].waypoint': expected true or false, got 'yes'",
        ),
        (
            minimal(addresses=[{"prefix": "a", "pattern": "a.*"}]),
            "<topology>: node R1: field 'addresses[0]': expected exactly one of 'prefix' or 'pattern'",
        ),
        (
            minimal(addresses=[{"distribution": "closest"}]),
            "<topology>: node R1: field 'addresses[0]': expected exactly one of 'prefix' or 'pattern'",
        ),
        (
            minimal(addresses=[{"prefix": "a.#"}]),
            (
                "<topology>: node R1: field 'addresses[0].prefix': expected no '*' or '#' (use 'pattern' for "
                "wildcards), got 'a.#'"
            ),
        ),
        (
            minimal(addresses=[{"prefix": "a", "enableFallback": True}]),
            (
                "<topology>: node R1: field 'addresses[0].enableFallback': unknown field; expected one of prefix, "
                "pattern, distribution, priority, waypoint, enable_fallback (did you mean "
                "'addresses[0].enable_fallback'?)"
            ),
        ),
        (
            minimal(modee="edge"),
            (
                "<topology>: node R1: field 'modee': unknown field; expected one of role, mode, addresses, "
                "autolinks, link_routes, listeners, users, access, vendor (did you mean 'mode'?)"
            ),
        ),
        (minimal(queues=[]), "<topology>: node R1: field 'queues': not a field of a router node"),
        (
            {"name": "t", "nodes": {"B1": {"role": "broker", "mode": "interior"}}},
            "<topology>: node B1: field 'mode': not a field of a broker node",
        ),
        (
            {"name": "t", "nodes": {"X": {"role": "switch"}}},
            "<topology>: node X: field 'role': expected one of router, broker, got 'switch'",
        ),
        (
            {"name": "t", "nodes": {"X": {}}},
            "<topology>: node X: field 'role': missing (required); expected one of router, broker",
        ),
        ({"name": "t", "nodes": {}}, "<topology>: field 'nodes': expected a non-empty mapping"),
        ({"nodes": {"R1": {"role": "router"}}}, "<topology>: field 'name': missing (required)"),
        ({**minimal(), "extra": 1}, "<topology>: field 'extra': unknown field"),
        ({**minimal(), "name": "Bad Name"}, "<topology>: field 'name': expected lower-case letters"),
        (
            {"name": "t", "nodes": {"R 1": {"role": "router"}}},
            "<topology>: field 'nodes': expected node names",
        ),
        ({"name": "t", "nodes": {"clients": {"role": "router"}}}, "a node name other than clients"),
        ({**minimal(), "clients": {"producer": "R2"}}, "field 'clients.producer': expected a node name (R1)"),
        ({**minimal(), "clients": ["R1"]}, "<topology>: field 'clients': expected a mapping"),
        (
            minimal(addresses={"prefix": "a"}),
            "node R1: field 'addresses': expected a list, got {'prefix': 'a'}",
        ),
        (
            minimal(listeners=[{"name": "clients"}]),
            "node R1: field 'listeners[0].name': expected a name of letters",
        ),
        (
            minimal(listeners=[{"name": "x"}, {"name": "x"}]),
            "node R1: field 'listeners[1].name': duplicate listener name 'x'",
        ),
    ],
)
def test_field_errors(data, expected):
    with pytest.raises(TopologyError) as info:
        parse_topology(data)
    message = str(info.value)
    assert message.startswith("<topology>: ")
    assert expected in message
    assert "\n" not in message


def two_nodes(link: dict, a: dict | None = None, b: dict | None = None) -> dict:
    return {
        "name": "t",
        "nodes": {
            "A": a or {"role": "router", "mode": "interior"},
            "B": b or {"role": "router", "mode": "interior"},
        },
        "links": [link],
    }


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            two_nodes({"from": "A", "to": "C", "role": "normal"}),
            "links[0]: field 'to': expected a node name (A, B), got 'C'",
        ),
        (
            two_nodes({"from": "A", "to": "A", "role": "normal"}),
            "links[0]: field 'to': expected a node other than 'from'",
        ),
        (two_nodes({"from": "A", "to": "B"}), "links[0]: field 'role': missing (required)"),
        (
            two_nodes({"from": "A", "to": "B", "role": "mesh"}),
            "links[0]: field 'role': expected one of normal, inter-router, route-container, edge, got 'mesh'",
        ),
        (
            two_nodes({"from": "A", "to": "B", "role": "normal", "via": "toxiproxy"}),
            "field 'via': expected null or one of proxy",
        ),
        (
            two_nodes({"from": "A", "to": "B", "role": "inter-router", "cost": 0}),
            "field 'cost': expected an integer >= 1, got 0",
        ),
        (
            two_nodes({"from": "A", "to": "B", "role": "normal", "cost": 3}),
            "field 'cost': only inter-router links have a cost",
        ),
        (
            two_nodes({"from": "A", "to": "B", "role": "inter-router"}, a={"role": "router"}),
            "links[0]: field 'role': inter-router links join interior routers; A is standalone, B is interior",
        ),
        (
            two_nodes({"from": "A", "to": "B", "role": "edge"}),
            "links[0]: field 'role': edge links go from an edge router to an interior router; A is interior",
        ),
        (
            two_nodes(
                {"from": "A", "to": "B", "role": "route-container"},
                a={"role": "broker"},
                b={"role": "broker"},
            ),
            "links[0]: field 'role': route-container links need a router at one end",
        ),
        (
            two_nodes({"from": "A", "to": "B", "role": "normal", "colour": "red"}),
            "links[0]: field 'colour': unknown field",
        ),
    ],
)
def test_link_errors(data, expected):
    with pytest.raises(TopologyError) as info:
        parse_topology(data, "topologies/x.yaml")
    assert str(info.value).startswith("topologies/x.yaml: ")
    assert expected in str(info.value)


def test_second_link_between_the_same_nodes_is_an_error():
    data = two_nodes({"from": "A", "to": "B", "role": "inter-router"})
    data["links"].append({"from": "B", "to": "A", "role": "inter-router"})
    with pytest.raises(
        TopologyError, match=r"links\[1\]: second link between B and A \(first is links\[0\]\)"
    ):
        parse_topology(data)


def test_autolinks_need_a_route_container_link_to_their_connection():
    data = {
        "name": "t",
        "nodes": {
            "R1": {"role": "router", "autolinks": [{"address": "q", "direction": "in", "connection": "B1"}]},
            "B1": {"role": "broker"},
        },
        "links": [{"from": "R1", "to": "B1", "role": "normal"}],
    }
    with pytest.raises(TopologyError) as info:
        parse_topology(data)
    assert str(info.value) == (
        "<topology>: node R1: field 'autolinks[0].connection': expected a node reached by a "
        "route-container link (none in this topology), got 'B1'"
    )
    data["links"][0] = {"from": "B1", "to": "R1", "role": "route-container"}  # the broker may dial instead
    assert parse_topology(data).node("R1").autolinks[0].connection == "B1"


def test_link_routes_may_name_a_broker_another_router_reaches():
    """003 §12.2.3: every router may carry the link routes; only the one with the connection holds them."""
    data = {
        "name": "t",
        "nodes": {
            "R1": {"role": "router", "mode": "interior",
                   "link_routes": [{"prefix": "b", "direction": "in", "connection": "B1"}]},
            "R2": {"role": "router", "mode": "interior"},
            "B1": {"role": "broker"},
        },
        "links": [{"from": "R1", "to": "R2", "role": "inter-router"},
                  {"from": "R2", "to": "B1", "role": "route-container"}],
    }
    assert parse_topology(data).node("R1").link_routes[0].connection == "B1"
    data["nodes"]["R1"]["autolinks"] = [{"address": "q", "direction": "in", "connection": "B1"}]
    with pytest.raises(TopologyError, match="autolinks"):
        parse_topology(data)


def test_link_route_connection_must_be_a_node():
    data = minimal(link_routes=[{"prefix": "x", "direction": "out", "connection": "B9"}])
    with pytest.raises(
        TopologyError, match=r"field 'link_routes\[0\].connection': expected a node name \(R1\)"
    ):
        parse_topology(data)


def test_error_in_file_names_the_file(tmp_path):
    message = error_of(tmp_path, "name: t\nnodes:\n  R1: {role: router, mode: core}\n")
    assert (
        message
        == f"{tmp_path / 't.yaml'}: node R1: field 'mode': expected one of standalone, interior, edge, got 'core'"
    )


def test_relative_paths_are_shown_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "topologies").mkdir()
    write(tmp_path, "name: t\nnodes: {R1: {role: router, mode: core}}\n", "topologies/x.yaml")
    for given in ("topologies/x.yaml", tmp_path / "topologies" / "x.yaml"):
        with pytest.raises(TopologyError) as info:
            load_topology(given)
        assert str(info.value).startswith("topologies/x.yaml: node R1: field 'mode'")


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    message = error_of(tmp_path, "name: t\nnodes:\n  R1: {role: router\n  B1: x\n")
    assert message.startswith(f"{tmp_path / 't.yaml'}:4: YAML syntax error:")


def test_duplicate_yaml_keys_are_errors(tmp_path):
    message = error_of(tmp_path, "name: t\nnodes:\n  R1: {role: router}\n  R1: {role: broker}\n")
    assert message == f"{tmp_path / 't.yaml'}:4: YAML syntax error: duplicate key 'R1'"


def test_empty_and_missing_files(tmp_path):
    assert error_of(tmp_path, "").endswith("expected a mapping, got None")
    with pytest.raises(TopologyError, match=r"nope.yaml: cannot read: No such file or directory"):
        load_topology(tmp_path / "nope.yaml")


def test_topology_path_resolves_bare_names():
    assert topology_path("single-router") == TOPOLOGIES_DIR / "single-router.yaml"
    assert topology_path("topologies/x.yaml") == Path("topologies/x.yaml")
    assert topology_path("x.yaml") == Path("x.yaml")


# ---- broker connections (002_f23507c2891d6d06.txt) -------------------------------------------------------------

DIALLING = """\
name: dialling
nodes:
  DC1:
    role: broker
    queues: [{address: orders}]
    broker_connections:
      - name: DC2.mirror
        to: [DC2, DC3]
        auto_start: false
        reconnect_attempts: 3
        retry_interval_ms: 200
        user: admin
        password: secret
        elements:
          - {type: mirror, queue_removal: false}
          - {type: sender, address_match: "queue.#"}
          - {type: receiver, queue_name: inbound.jobs}
      - name: router
        to: R1
        elements: [{type: peer, address_match: "queue.#"}]
  DC2: {role: broker}
  DC3: {role: broker}
  R1: {role: router, mode: interior}
links:
  - {from: DC1, to: DC2, role: normal, via: proxy}
  - {from: DC1, to: DC3, role: normal}
  - {from: DC1, to: R1, role: normal}
"""


def test_broker_connections_parse(tmp_path):
    topo = load_topology(write(tmp_path, DIALLING))
    mirror, peer = topo.node("DC1").broker_connections
    assert mirror == BrokerConnection(
        name="DC2.mirror", to=("DC2", "DC3"), auto_start=False, reconnect_attempts=3, retry_interval_ms=200,
        user="admin", password="secret", elements=(
            BrokerConnectionElement("mirror", queue_creation=True, queue_removal=False,
                                    message_acknowledgements=True),
            BrokerConnectionElement("sender", address_match="queue.#"),
            BrokerConnectionElement("receiver", queue_name="inbound.jobs"),
        ))
    assert (mirror.primary, mirror.alternates) == ("DC2", ("DC3",))
    assert mirror.mirror is mirror.elements[0] and peer.mirror is None
    # The defaults: Artemis's (auto-start true, reconnect forever, 5000 ms between attempts), no credentials.
    assert peer == BrokerConnection(name="router", to=("R1",), elements=(
        BrokerConnectionElement("peer", address_match="queue.#"),))
    assert (peer.auto_start, peer.reconnect_attempts, peer.retry_interval_ms, peer.user, peer.password) == (
        True, -1, 5000, None, None)
    assert topo.node("DC2").broker_connections == [] and topo.node("R1").broker_connections == []
    # The router is dialled on its clients listener and dials nothing back.
    assert topo.listeners_for("R1") == [Listener("clients", "normal")]
    assert [topo.listener_for_link(link) for link in topo.links] == ["clients"] * 3
    assert topo.links_from("R1") == []


def test_null_credentials_are_no_credentials():
    data = broker_pair({"name": "c", "to": "B2", "user": None, "password": None,
                        "elements": [{"type": "sender", "queue_name": "q"}]})
    (connection,) = parse_topology(data).node("B1").broker_connections
    assert (connection.user, connection.password) == (None, None)


def broker_pair(*connections, b2: dict | None = None, links: list | None = None) -> dict:
    return {
        "name": "t",
        "nodes": {"B1": {"role": "broker", "broker_connections": list(connections)},
                  "B2": b2 or {"role": "broker"}},
        "links": [{"from": "B1", "to": "B2", "role": "normal"}] if links is None else links,
    }


def connection(**fields) -> dict:
    return {"name": "c", "to": "B2", "elements": [{"type": "sender", "address_match": "a.#"}], **fields}


ROUTER_B2 = {"role": "router", "mode": "interior"}
PREFIX = "<topology>: node B1: field 'broker_connections[0]"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (broker_pair({"to": "B2", "elements": [{"type": "mirror"}]}), ".name': missing (required)"),
        (broker_pair({"name": "c", "elements": [{"type": "mirror"}]}), ".to': missing (required)"),
        (broker_pair({"name": "c", "to": "B2"}), ".elements': missing (required)"),
        (broker_pair(connection(name="a b")), ".name': expected a name of letters, digits, '_', '-' or '.', "
                                              "got 'a b'"),
        (broker_pair(connection(), connection()), "s[1].name': duplicate broker connection name 'c'"),
        (broker_pair(connection(to="B9")), ".to': expected a node name (B1, B2), got 'B9'"),
        (broker_pair(connection(to=["B2", "B9"])), ".to[1]': expected a node name (B1, B2), got 'B9'"),
        (broker_pair(connection(to="B1")), ".to': expected a node other than B1 itself, got 'B1'"),
        (broker_pair(connection(to=[])), ".to': expected a node name or a non-empty list of node names, got []"),
        (broker_pair(connection(to=["B2", "B2"])), ".to[1]': B2 is listed twice"),
        (broker_pair(connection(to="B2", links=[])), ".links': unknown field; expected one of name, to, "),
        (broker_pair(connection(), links=[]),
         ".to': no link from B1 to B2 in 'links' (add {from: B1, to: B2, role: normal})"),
        (broker_pair(connection(), links=[{"from": "B2", "to": "B1", "role": "normal"}]),
         ".to': no link from B1 to B2 in 'links'"),
        (broker_pair(connection(), b2=ROUTER_B2, links=[{"from": "B1", "to": "B2", "role": "route-container"}]),
         ".to': the link B1->B2 has role route-container; a broker connection dials over a link of role normal"),
        (broker_pair(connection(auto_start="yes")), ".auto_start': expected true or false, got 'yes'"),
        (broker_pair(connection(reconnect_attempts=-2)), ".reconnect_attempts': expected an integer >= -1, got -2"),
        (broker_pair(connection(retry_interval_ms=0)), ".retry_interval_ms': expected an integer >= 1, got 0"),
        (broker_pair(connection(retry_interval_ms=True)), ".retry_interval_ms': expected an integer >= 1, got True"),
        (broker_pair(connection(password="p")), ".password': given without 'user'"),
        (broker_pair(connection(user="")), ".user': expected a non-empty string, got ''"),
        (broker_pair(connection(retry_interval=200)),
         ".retry_interval': unknown field; expected one of name, to, auto_start, reconnect_attempts, "
         "retry_interval_ms, user, password, elements (did you mean 'broker_connections[0].retry_interval_ms'?)"),
        (broker_pair(connection(elements=[])), ".elements': expected a non-empty list, got []"),
        (broker_pair(connection(elements=[{"address_match": "a"}])),
         ".elements[0].type': missing (required); expected one of mirror, sender, receiver, peer"),
        (broker_pair(connection(elements=[{"type": "bridge"}])),
         ".elements[0].type': expected one of mirror, sender, receiver, peer, got 'bridge'"),
        (broker_pair(connection(elements=[{"type": "sender"}])),
         ".elements[0]': expected exactly one of 'address_match' or 'queue_name'"),
        (broker_pair(connection(elements=[{"type": "sender", "address_match": "a", "queue_name": "a"}])),
         ".elements[0]': expected exactly one of 'address_match' or 'queue_name'"),
        (broker_pair(connection(elements=[{"type": "receiver", "queue_name": "a.#"}])),
         ".elements[0].queue_name': expected a queue name without spaces, '#' or '*', got 'a.#'"),
        (broker_pair(connection(elements=[{"type": "sender", "address_match": "a b"}])),
         ".elements[0].address_match': expected an address or wildcard match without spaces, got 'a b'"),
        (broker_pair(connection(elements=[{"type": "sender", "queue_creation": False}])),
         ".elements[0].queue_creation': not a field of a sender element"),
        (broker_pair(connection(elements=[{"type": "mirror", "address_match": "a.#"}])),
         ".elements[0].address_match': not a field of a mirror element"),
        (broker_pair(connection(elements=[{"type": "mirror", "queue_removal": "no"}])),
         ".elements[0].queue_removal': expected true or false, got 'no'"),
        (broker_pair(connection(elements=[{"type": "mirror", "acks": True}])),
         ".elements[0].acks': unknown field; expected one of type, queue_creation, queue_removal, "
         "message_acknowledgements"),
        (broker_pair(connection(elements=[{"type": "mirror"}, {"type": "mirror", "queue_removal": False}])),
         ".elements[1]': a second mirror (one per connection; the first is elements[0])"),
        (broker_pair(connection(elements=[{"type": "mirror"}]), b2=ROUTER_B2),
         ".elements[0].type': a mirror connects to brokers only; B2 is a router"),
        (broker_pair(connection(elements=[{"type": "peer", "address_match": "q.#"}])),
         ".elements[0].type': a peer connects to routers only; B2 is a broker"),
    ],
)
def test_broker_connection_errors(data, expected):
    with pytest.raises(TopologyError) as info:
        parse_topology(data)
    message = str(info.value)
    assert message.startswith(PREFIX.rsplit("[0]", 1)[0]), message
    assert expected in message, message
    assert "\n" not in message


def test_a_peer_or_mirror_needs_every_alternate_of_the_right_role():
    data = broker_pair(connection(to=["R1", "B2"], elements=[{"type": "peer", "address_match": "q.#"}]),
                       links=[{"from": "B1", "to": "R1", "role": "normal"},
                              {"from": "B1", "to": "B2", "role": "normal"}])
    data["nodes"]["R1"] = ROUTER_B2
    with pytest.raises(TopologyError, match=r"elements\[0\].type': a peer connects to routers only; B2 is a broker$"):
        parse_topology(data)
    data["nodes"]["B1"]["broker_connections"][0]["elements"] = [{"type": "mirror"}]
    with pytest.raises(TopologyError, match=r"a mirror connects to brokers only; R1 is a router$"):
        parse_topology(data)
    data["nodes"]["B1"]["broker_connections"][0]["elements"] = [{"type": "sender", "queue_name": "q"}]
    assert parse_topology(data).node("B1").broker_connections[0].to == ("R1", "B2")  # senders go anywhere


def test_broker_connections_are_a_broker_field():
    data = minimal(broker_connections=[])
    with pytest.raises(TopologyError, match=r"^<topology>: node R1: field 'broker_connections': not a field of a "
                                            r"router node$"):
        parse_topology(data)


def test_two_brokers_may_link_each_way_once():
    data = broker_pair(links=[{"from": "B1", "to": "B2", "role": "normal", "via": "proxy"},
                              {"from": "B2", "to": "B1", "role": "normal", "via": "proxy"}])
    assert [link.name for link in parse_topology(data).links] == ["B1->B2", "B2->B1"]
    data["links"].append({"from": "B1", "to": "B2", "role": "normal"})
    with pytest.raises(TopologyError, match=r"^<topology>: links\[2\]: second link between B1 and B2 "
                                            r"\(first is links\[0\]\)$"):
        parse_topology(data)
    data["links"][2] = {"from": "B2", "to": "B1", "role": "normal"}
    with pytest.raises(TopologyError, match=r"links\[2\]: second link between B2 and B1 \(first is links\[1\]\)$"):
        parse_topology(data)


@pytest.mark.parametrize("b2", [{"role": "router"}, {"role": "router", "mode": "interior"}])
def test_a_broker_and_a_router_still_have_one_link(b2):
    data = broker_pair(b2=b2, links=[{"from": "B1", "to": "B2", "role": "normal"},
                                     {"from": "B2", "to": "B1", "role": "route-container"}])
    with pytest.raises(TopologyError, match=r"^<topology>: links\[1\]: second link between B2 and B1 \(first is "
                                            r"links\[0\]\); only two brokers may have a link each way$"):
        parse_topology(data)


@pytest.mark.parametrize("role", ["inter-router", "edge", "route-container"])
def test_links_between_brokers_are_normal(role):
    with pytest.raises(TopologyError, match=r"^<topology>: links\[0\]: field 'role': "):
        parse_topology(broker_pair(links=[{"from": "B1", "to": "B2", "role": role}]))


def test_the_broker_connection_topologies_in_the_repository():
    peer = load_topology(topology_path("broker-peer-router"))
    (c,) = peer.node("B1").broker_connections
    assert (c.name, c.to, c.elements) == ("router", ("R1",), (BrokerConnectionElement("peer", "queue.#"),))
    assert peer.node("R1").autolinks == [] and peer.links_from("R1") == []
    assert peer.clients == {"producer": "R1", "consumer": "R1", "broker": "B1"}

    bridge = load_topology(topology_path("broker-bridge"))
    (c,) = bridge.node("B1").broker_connections
    assert [(e.type, e.address_match, e.queue_name) for e in c.elements] == [
        ("sender", "outbound.#", None), ("receiver", None, "inbound.jobs")]
    assert bridge.links[0].via == "proxy"

    mirror = load_topology(topology_path("broker-mirror"))
    (c,) = mirror.node("DC1").broker_connections
    assert c.mirror == BrokerConnectionElement("mirror") and mirror.node("DC2").queues == []

    dual = load_topology(topology_path("broker-dual-mirror"))
    assert [(n, [c.name for c in dual.node(n).broker_connections]) for n in ("DC1", "DC2")] == [
        ("DC1", ["DC2"]), ("DC2", ["DC1"])]
    assert [(link.name, link.via) for link in dual.links] == [("DC1->DC2", "proxy"), ("DC2->DC1", "proxy")]

    failover = load_topology(topology_path("broker-failover"))
    (c,) = failover.node("P").broker_connections
    assert (c.primary, c.alternates, c.reconnect_attempts) == ("S1", ("S2", "S3"), -1)

    reconnect = load_topology(topology_path("broker-reconnect"))
    limited, manual = reconnect.node("B1").broker_connections
    assert (limited.reconnect_attempts, limited.retry_interval_ms, limited.auto_start) == (3, 300, True)
    assert (manual.auto_start, manual.elements) == (False, (BrokerConnectionElement("sender", queue_name="manual.q"),))
    for topo in (peer, bridge, mirror, dual, failover, reconnect):
        retries = [c.retry_interval_ms for n in topo.nodes.values() for c in n.broker_connections]
        assert retries and max(retries) <= 300, f"{topo.name}: cases must not wait Artemis's 5 s between retries"


# ---- network connectors (004_05e35cdd7bc39ede.txt) -------------------------------------------------------------

NETWORK = """\
name: network
nodes:
  B1:
    role: broker
    queues: [{address: orders}]
    broker_connections:
      - {name: b1-b2, to: B2, elements: [{type: sender, queue_name: orders}]}
    network_connectors:
      - name: b1-b2
        uri: static
        to: [B2, B3]
        duplex: true
        network_ttl: 3
        user: myCommonUser
        password: secret
        queues: ["orders.#", "jobs.*"]
        topics: ["prices.#", "prices"]
        excluded: ["orders.private.#"]
        conduit_subscriptions: true
        retry_interval_ms: 200
      - name: b1-pair
        uri: masterslave
        to: [M, S]
  B2: {role: broker}
  B3: {role: broker}
  M: {role: broker}
  S: {role: broker}
links:
  - {from: B1, to: B2, role: normal, via: proxy}
  - {from: B1, to: B3, role: normal}
  - {from: B1, to: M, role: normal}
  - {from: B1, to: S, role: normal}
"""


def test_network_connectors_parse(tmp_path):
    topo = load_topology(write(tmp_path, NETWORK))
    static, pair = topo.node("B1").network_connectors
    assert static == NetworkConnector(
        name="b1-b2", to=("B2", "B3"), uri="static", duplex=True, network_ttl=3, user="myCommonUser",
        password="secret", queues=("orders.#", "jobs.*"), topics=("prices.#", "prices"),
        excluded=("orders.private.#",), conduit_subscriptions=True, retry_interval_ms=200)
    # static: a connection to each node listed (ActiveMQ's static:(a,b)), named after the connector and the node;
    # masterslave: one connection, [primary, standby].
    assert static.connections == (("b1-b2.B2", ("B2",)), ("b1-b2.B3", ("B3",)))
    assert pair.connections == (("b1-pair", ("M", "S")),)
    # The defaults: ActiveMQ's (not duplex, network TTL 1, conduit subscriptions), every queue and no topic,
    # a reconnect delay of 1000 ms, no credentials.
    assert pair == NetworkConnector(name="b1-pair", to=("M", "S"), uri="masterslave")
    assert (pair.duplex, pair.network_ttl, pair.user, pair.password, pair.queues, pair.topics, pair.excluded,
            pair.conduit_subscriptions, pair.retry_interval_ms) == (
        False, 1, None, None, ("#",), (), (), True, 1000)
    # A node may have broker connections and network connectors side by side.
    assert [c.name for c in topo.node("B1").broker_connections] == ["b1-b2"]
    assert all(topo.node(n).network_connectors == [] for n in ("B2", "B3", "M", "S"))


def test_a_single_to_node_and_the_default_uri():
    data = network_pair(network(to="B2"))
    (connector,) = parse_topology(data).node("B1").network_connectors
    assert (connector.uri, connector.to, connector.connections) == ("static", ("B2",), (("n.B2", ("B2",)),))


def network_pair(*connectors, b2: dict | None = None, links: list | None = None, **b1) -> dict:
    return {
        "name": "t",
        "nodes": {"B1": {"role": "broker", "network_connectors": list(connectors), **b1},
                  "B2": b2 or {"role": "broker"}, "B3": {"role": "broker"}},
        "links": ([{"from": "B1", "to": "B2", "role": "normal"}, {"from": "B1", "to": "B3", "role": "normal"}]
                  if links is None else links),
    }


def network(**fields) -> dict:
    return {"name": "n", "to": "B2", **fields}


NETWORK_PREFIX = "<topology>: node B1: field 'network_connectors["


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (network_pair({"to": "B2"}), "[0].name': missing (required)"),
        (network_pair({"name": "n"}), "[0].to': missing (required)"),
        (network_pair(network(name="a b")), "[0].name': expected a name of letters, digits, '_', '-' or '.', "
                                            "got 'a b'"),
        (network_pair(network(name="")), "[0].name': expected a non-empty string, got ''"),
        (network_pair(network(), network(to="B3")), "[1].name': duplicate network connector name 'n'"),
        (network_pair(network(uri="failover")), "[0].uri': expected one of static, masterslave, got 'failover'"),
        (network_pair(network(uri="statik")),
         "[0].uri': expected one of static, masterslave, got 'statik' (did you mean 'static'?)"),
        (network_pair(network(uri="static:(tcp://b2:61617)")),
         "[0].uri': expected one of static, masterslave, got 'static:(tcp://b2:61617)' (write uri: static and "
         "list the nodes in 'to')"),
        (network_pair(network(to="B9")), "[0].to': expected a node name (B1, B2, B3), got 'B9'"),
        (network_pair(network(to=["B2", "B9"])), "[0].to[1]': expected a node name (B1, B2, B3), got 'B9'"),
        (network_pair(network(to="B1")), "[0].to': expected a node other than B1 itself, got 'B1'"),
        (network_pair(network(to=[])), "[0].to': expected a node name or a non-empty list of node names, got []"),
        (network_pair(network(to=7)), "[0].to': expected a node name or a non-empty list of node names, got 7"),
        (network_pair(network(to=["B2", "B2"])), "[0].to[1]': B2 is listed twice"),
        (network_pair(network(uri="masterslave")),
         "[0].to': uri masterslave dials exactly 2 nodes, [primary, standby]; got 1"),
        (network_pair(network(to="B2"), links=[]),
         "[0].to': no link from B1 to B2 in 'links' (add {from: B1, to: B2, role: normal})"),
        (network_pair(network(to=["B2", "B3"]), links=[{"from": "B1", "to": "B2", "role": "normal"}]),
         "[0].to[1]': no link from B1 to B3 in 'links' (add {from: B1, to: B3, role: normal})"),
        (network_pair(network(), links=[{"from": "B2", "to": "B1", "role": "normal"}]),
         "[0].to': no link from B1 to B2 in 'links'"),
        (network_pair(network(), b2=ROUTER_B2, links=[{"from": "B1", "to": "B2", "role": "normal"}]),
         "[0].to': B2 is a router; a network connector joins brokers"),
        (network_pair(network(duplex="yes")), "[0].duplex': expected true or false, got 'yes'"),
        (network_pair(network(network_ttl=0)), "[0].network_ttl': expected an integer >= 1, got 0"),
        (network_pair(network(network_ttl=True)), "[0].network_ttl': expected an integer >= 1, got True"),
        (network_pair(network(network_ttl="2")), "[0].network_ttl': expected an integer >= 1, got '2'"),
        (network_pair(network(retry_interval_ms=0)), "[0].retry_interval_ms': expected an integer >= 1, got 0"),
        (network_pair(network(password="p")), "[0].password': given without 'user'"),
        (network_pair(network(user="")), "[0].user': expected a non-empty string, got ''"),
        (network_pair(network(conduit_subscriptions=False)),
         "[0].conduit_subscriptions': false is not supported yet (only true: the bridge forwards one subscription "
         "per destination)"),
        (network_pair(network(conduit_subscriptions="no")),
         "[0].conduit_subscriptions': expected true or false, got 'no'"),
        (network_pair(network(networkTTL=2)),
         "[0].networkTTL': unknown field; expected one of name, uri, to, duplex, network_ttl, user, password, "
         "queues, topics, excluded, conduit_subscriptions, retry_interval_ms (did you mean "
         "'network_connectors[0].network_ttl'?)"),
        (network_pair(network(topic=["a"])), "(did you mean 'network_connectors[0].topics'?)"),
        (network_pair(network(queues="#")), "[0].queues': expected a list of address patterns, got '#'"),
        (network_pair(network(topics=[""])), "[0].topics[0]': expected an address pattern without spaces, got ''"),
        (network_pair(network(topics=["a b"])), "[0].topics[0]': expected an address pattern without spaces, "
                                                "got 'a b'"),
        (network_pair(network(topics=[3])), "[0].topics[0]': expected an address pattern without spaces, got 3"),
        (network_pair(network(queues=["a.#.b"])), "[0].queues[0]': expected '#' only as the last word, "
                                                  "got 'a.#.b'"),
        (network_pair(network(queues=["#.a"])), "[0].queues[0]': expected '#' only as the last word, got '#.a'"),
        (network_pair(network(excluded=["a#"])),
         "[0].excluded[0]': expected '.'-separated words, with '*' and '#' as whole words, got 'a#'"),
        (network_pair(network(excluded=["a.*b"])),
         "[0].excluded[0]': expected '.'-separated words, with '*' and '#' as whole words, got 'a.*b'"),
        (network_pair(network(queues=["*#"])),
         "[0].queues[0]': expected '.'-separated words, with '*' and '#' as whole words, got '*#'"),
        (network_pair(network(queues=["a..b"])),
         "[0].queues[0]': expected '.'-separated words, with '*' and '#' as whole words (an empty word), "
         "got 'a..b'"),
        (network_pair(network(topics=["p", "p"])), "[0].topics[1]': 'p' is listed twice"),
        (network_pair(network(queues=[])), "[0]': forwards nothing: 'queues' and 'topics' are both empty"),
        (network_pair(network(name="n.B2", uri="masterslave", to=["B2", "B3"]), network(to="B2")),
         "[1].name': its connection 'n.B2' has the name of a connection of network_connectors[0]"),
        (network_pair(network(name="bc", uri="masterslave", to=["B2", "B3"]),
                      broker_connections=[connection(name="bc")]),
         "[0].name': its connection 'bc' has the name of a connection of broker_connections[0]"),
        (network_pair(network(name="bc"), broker_connections=[connection(name="bc.B2")]),
         "[0].name': its connection 'bc.B2' has the name of a connection of broker_connections[0]"),
    ],
)
def test_network_connector_errors(data, expected):
    with pytest.raises(TopologyError) as info:
        parse_topology(data)
    message = str(info.value)
    assert message.startswith(NETWORK_PREFIX), message
    assert expected in message, message
    assert "\n" not in message


@pytest.mark.parametrize("pattern", ["#", "*", "a", "a.b", "a.*", "a.#", "*.b.#", "a-b_c.d", "$sys.#"])
def test_patterns_in_artemis_wildcard_syntax(pattern):
    data = network_pair(network(queues=[pattern], topics=[pattern], excluded=[pattern]))
    (connector,) = parse_topology(data).node("B1").network_connectors
    assert connector.queues == connector.topics == connector.excluded == (pattern,)


def test_a_connector_may_forward_topics_only():
    (connector,) = parse_topology(network_pair(network(queues=[], topics=["prices"]))).node("B1").network_connectors
    assert (connector.queues, connector.topics) == ((), ("prices",))


def test_masterslave_dials_exactly_two_in_order():
    data = network_pair(network(uri="masterslave", to=["B3", "B2"]))
    (connector,) = parse_topology(data).node("B1").network_connectors
    assert connector.connections == (("n", ("B3", "B2")),)
    data["nodes"]["B4"] = {"role": "broker"}
    data["links"].append({"from": "B1", "to": "B4", "role": "normal"})
    for to, count in ((["B2", "B3", "B4"], 3), ("B2", 1), (["B2"], 1)):
        data["nodes"]["B1"]["network_connectors"][0]["to"] = to
        pattern = (r"^<topology>: node B1: field 'network_connectors\[0\].to': uri masterslave dials exactly 2 "
                   rf"nodes, \[primary, standby\]; got {count}$")
        with pytest.raises(TopologyError, match=pattern):
            parse_topology(data)
    data["nodes"]["B1"]["network_connectors"][0].update(uri="static", to=["B2", "B3", "B4"])  # one connection each
    assert [name for name, _ in parse_topology(data).node("B1").network_connectors[0].connections] == [
        "n.B2", "n.B3", "n.B4"]


def test_a_static_connector_fans_out_to_every_node_listed():
    data = network_pair(network(to=["B2", "B3"], duplex=True))
    (connector,) = parse_topology(data).node("B1").network_connectors
    assert connector.connections == (("n.B2", ("B2",)), ("n.B3", ("B3",)))


def test_network_connectors_are_a_broker_field():
    data = minimal(network_connectors=[])
    with pytest.raises(TopologyError, match=r"^<topology>: node R1: field 'network_connectors': not a field of a "
                                            r"router node$"):
        parse_topology(data)


def test_a_link_of_another_role_is_refused():
    data = network_pair(network(), links=[{"from": "B1", "to": "B2", "role": "normal"}])
    data["nodes"]["R1"] = ROUTER_B2
    data["nodes"]["B1"]["network_connectors"][0]["to"] = "R1"
    data["links"].append({"from": "B1", "to": "R1", "role": "route-container"})
    with pytest.raises(TopologyError, match=r"\.to': R1 is a router; a network connector joins brokers$"):
        parse_topology(data)


def test_network_brokers_may_still_link_each_way():
    # Two brokers with a connector each way (non-duplex both ways, as two ActiveMQ brokers each with its own
    # connector): the dual-mirror rule for links holds.
    data = network_pair(network(), links=[{"from": "B1", "to": "B2", "role": "normal"},
                                          {"from": "B2", "to": "B1", "role": "normal"}])
    data["nodes"]["B2"] = {"role": "broker", "network_connectors": [network(name="back", to="B1")]}
    topo = parse_topology(data)
    assert [c.connections for n in ("B1", "B2") for c in topo.node(n).network_connectors] == [
        (("n.B2", ("B2",)),), (("back.B1", ("B1",)),)]


NETWORK_TOPOLOGIES = {
    # topology: {node: [(connector, uri, to, duplex, ttl, queues, topics)]}
    "network-pair": {"B1": [("b1-b2", "static", ("B2",), False, 1, ("#",), ("prices.#", "prices"))], "B2": []},
    "network-duplex": {"B1": [("b1-b2", "static", ("B2",), True, 1, ("#",), ("prices",))], "B2": []},
    "network-hub-spoke": {"H": [], **{f"S{i}": [(f"s{i}-h", "static", ("H",), True, 2, ("#",), ("prices",))]
                                        for i in (1, 2, 3)}},
    "network-mesh": {"B1": [("b1-b2", "static", ("B2",), True, 1, ("#",), ("prices",))],
                     "B2": [("b2-b3", "static", ("B3",), True, 1, ("#",), ("prices",))],
                     "B3": [("b3-b1", "static", ("B1",), True, 1, ("#",), ("prices",))]},
    "network-masterslave": {"B1": [("b1-pair", "masterslave", ("M", "S"), False, 1, ("#",), ())], "M": [], "S": []},
}


@pytest.mark.parametrize("name", sorted(NETWORK_TOPOLOGIES))
def test_the_network_topologies_in_the_repository(name):
    topo = load_topology(topology_path(name))
    assert topo.name == name
    expected = NETWORK_TOPOLOGIES[name]
    assert {n.name for n in topo.nodes.values()} == set(expected)
    for node, connectors in expected.items():
        got = [(c.name, c.uri, c.to, c.duplex, c.network_ttl, c.queues, c.topics)
               for c in topo.node(node).network_connectors]
        assert got == connectors, node
        for c in topo.node(node).network_connectors:
            assert c.retry_interval_ms == 200, f"{name}: cases must not wait ActiveMQ's 1 s between retries"
            assert (c.excluded, c.user, c.conduit_subscriptions) == ((), None, True)
        assert {q.address: q.routing for q in topo.node(node).queues} == (
            {"orders": "anycast"} if name == "network-masterslave" else {"orders": "anycast", "prices": "multicast"})
    assert all(link.role == "normal" for link in topo.links)
    assert "004_05e35cdd7bc39ede.txt" in topo.path.read_text().split("\nname:")[0]


def test_the_network_topologies_attach_points_and_links():
    def shape(name):
        topo = load_topology(topology_path(name))
        return topo.clients, [(link.name, link.via) for link in topo.links]

    assert shape("network-pair") == ({"producer": "B1", "consumer": "B2"}, [("B1->B2", "proxy")])
    assert shape("network-duplex") == ({"b1": "B1", "b2": "B2"}, [("B1->B2", None)])
    assert shape("network-hub-spoke") == ({"hub": "H", "s1": "S1", "s2": "S2", "s3": "S3"},
                                          [("S1->H", None), ("S2->H", None), ("S3->H", None)])
    assert shape("network-mesh") == ({"b1": "B1", "b2": "B2", "b3": "B3"},
                                     [("B1->B2", None), ("B2->B3", None), ("B3->B1", None)])
    assert shape("network-masterslave") == ({"producer": "B1", "primary": "M", "standby": "S"},
                                            [("B1->M", None), ("B1->S", None)])
