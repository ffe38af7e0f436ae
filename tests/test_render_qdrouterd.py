import re

import pytest

from harness.peers.provider import RenderError
from harness.vendors.qdrouterd.render import render_router
from harness.topology import TOPOLOGIES_DIR, load_topology, parse_topology


def read_conf(text: str) -> list[tuple[str, dict[str, str]]]:
    """Read qdrouterd.conf by qdrouterd's own line rules: a line is a comment, `name {`, `}` or
    `key: value`; '#' starts a comment except in a `pattern` value, which ends at the first blank."""
    sections: list[tuple[str, dict[str, str]]] = []
    current: tuple[str, dict[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        hashed = re.fullmatch(r"pattern[ \t]*:[ \t]*(\S+).*", line)
        if hashed:
            assert current is not None
            current[1]["pattern"] = hashed.group(1)
            continue
        line = line.split("#")[0].strip()
        if m := re.fullmatch(r"([\w-]+)[ \t]*\{", line):
            assert current is None, f"nested section: {raw}"
            current = (m.group(1), {})
        elif line == "}":
            assert current is not None
            sections.append(current)
            current = None
        elif m := re.fullmatch(r"([\w-]+)[ \t]*:[ \t]*([^ \t{]+.*)", line):
            assert current is not None and '"' not in m.group(2)
            assert m.group(1) not in current[1], f"attribute twice: {raw}"
            current[1][m.group(1)] = m.group(2)
        else:
            raise AssertionError(f"qdrouterd could not read: {raw!r}")
    assert current is None, "unclosed section"
    return sections


def of_kind(sections, kind):
    return [attrs for name, attrs in sections if name == kind]


def test_single_router():
    topo = load_topology(TOPOLOGIES_DIR / "single-router.yaml")
    text = render_router(topo, "R1", {"clients": 40001})
    assert text.startswith("# qdrouterd.conf for router R1 of topology 'single-router'.\n# Generated from ")
    assert "single-router.yaml" in text.splitlines()[1]
    assert text.endswith("}\n")
    sections = read_conf(text)
    assert sections[0] == ("router", {"mode": "standalone", "id": "R1"})
    assert of_kind(sections, "listener") == [
        {
            "name": "clients",
            "host": "127.0.0.1",
            "port": "40001",
            "role": "normal",
            "saslMechanisms": "ANONYMOUS",
            "authenticatePeer": "no",
        }
    ]
    assert of_kind(sections, "address") == [
        {"prefix": "multicast", "distribution": "multicast"},
        {"prefix": "closest", "distribution": "closest"},
        {"prefix": "balanced", "distribution": "balanced"},
        {"prefix": "prio.high", "distribution": "balanced", "priority": "9"},
        {"prefix": "prio.low", "distribution": "balanced", "priority": "2"},
        {"pattern": "match/*/one", "distribution": "multicast"},
        {"pattern": "match/#/any", "distribution": "multicast"},
        {"pattern": "wild.#", "distribution": "multicast"},
        {"prefix": "wild.solo", "distribution": "closest"},
        {"prefix": "my_address", "distribution": "multicast"},
    ]
    assert {name for name, _ in sections} == {"router", "listener", "address"}


BROKERED = {
    "name": "brokered",
    "nodes": {
        "R1": {
            "role": "router",
            "mode": "interior",
            "addresses": [{"prefix": "queue", "waypoint": True, "enable_fallback": True}],
            "autolinks": [
                {"address": "queue.orders", "direction": "in", "connection": "B1"},
                {
                    "address": "queue.orders",
                    "direction": "out",
                    "connection": "B1",
                    "phase": 1,
                    "fallback": True,
                },
            ],
            "link_routes": [
                {"prefix": "lr", "direction": "in", "connection": "B1"},
                {"pattern": "lr2/#", "direction": "out", "connection": "B2"},
            ],
        },
        "B1": {"role": "broker"},
        "B2": {"role": "broker"},
    },
    "links": [
        {"from": "R1", "to": "B1", "role": "route-container", "via": "proxy"},
        {"from": "B2", "to": "R1", "role": "route-container"},
    ],
}


def test_router_in_front_of_brokers():
    topo = parse_topology(BROKERED, "topologies/brokered.yaml")
    text = render_router(topo, "R1", {"clients": 1001, "B2": 1002}, {"B1": 2001})
    sections = read_conf(text)
    assert sections[0] == ("router", {"mode": "interior", "id": "R1"})
    listeners = of_kind(sections, "listener")
    assert [(ls["name"], ls["port"], ls["role"]) for ls in listeners] == [
        ("clients", "1001", "normal"),
        ("B2", "1002", "route-container"),  # the broker dials in; autolinks name it B2
    ]
    assert of_kind(sections, "connector") == [
        {
            "name": "B1",
            "host": "127.0.0.1",
            "port": "2001",
            "role": "route-container",
            "saslMechanisms": "ANONYMOUS",
        }
    ]
    assert of_kind(sections, "address") == [
        {"prefix": "queue", "distribution": "balanced", "waypoint": "yes", "enableFallback": "yes"}
    ]
    assert of_kind(sections, "autoLink") == [
        {"address": "queue.orders", "direction": "in", "connection": "B1"},
        {"address": "queue.orders", "direction": "out", "connection": "B1", "phase": "1", "fallback": "yes"},
    ]
    assert of_kind(sections, "linkRoute") == [
        {"prefix": "lr", "direction": "in", "connection": "B1"},
        {"pattern": "lr2/#", "direction": "out", "connection": "B2"},
    ]
    assert "Generated from topologies/brokered.yaml" in text


def test_a_coordinator_link_route_gets_no_external_prefix():
    """A broker's queue prefix (RabbitMQ's /amq/queue/) is for queue names; a coordinator link has no address."""
    topo = parse_topology({
        "name": "txn",
        "nodes": {"R1": {"role": "router", "mode": "interior", "link_routes": [
            {"prefix": "$coordinator", "direction": "in", "connection": "B1"},
            {"prefix": "q", "direction": "in", "connection": "B1"}]},
                  "B1": {"role": "broker"}},
        "links": [{"from": "R1", "to": "B1", "role": "route-container"}],
    }, "topologies/txn.yaml")
    text = render_router(topo, "R1", {"clients": 1001}, {"B1": 2001},
                         external_address=lambda node, address: f"/amq/queue/{address}")
    assert of_kind(read_conf(text), "linkRoute") == [
        {"prefix": "$coordinator", "direction": "in", "connection": "B1"},
        {"prefix": "q", "direction": "in", "connection": "B1", "addExternalPrefix": "/amq/queue/"},
    ]


def test_router_network_connectors_and_listeners():
    topo = parse_topology(
        {
            "name": "mesh",
            "nodes": {
                "A": {"role": "router", "mode": "interior"},
                "B": {"role": "router", "mode": "interior"},
                "E": {"role": "router", "mode": "edge"},
            },
            "links": [
                {"from": "B", "to": "A", "role": "inter-router", "cost": 4},
                {"from": "E", "to": "A", "role": "edge"},
            ],
        }
    )
    a = read_conf(render_router(topo, "A", {"clients": 1, "inter-router": 2, "edge": 3}))
    assert [(ls["name"], ls["role"], ls["port"]) for ls in of_kind(a, "listener")] == [
        ("clients", "normal", "1"),
        ("inter-router", "inter-router", "2"),
        ("edge", "edge", "3"),
    ]
    assert of_kind(a, "connector") == []
    b = read_conf(render_router(topo, "B", {"clients": 4}, {"A": 2}))
    assert of_kind(b, "connector") == [
        {
            "name": "A",
            "host": "127.0.0.1",
            "port": "2",
            "role": "inter-router",
            "cost": "4",
            "saslMechanisms": "ANONYMOUS",
        }
    ]
    e = read_conf(render_router(topo, "E", {"clients": 5}, {"A": 3}))
    assert e[0] == ("router", {"mode": "edge", "id": "E"})
    assert of_kind(e, "connector")[0]["role"] == "edge"
    assert "cost" not in of_kind(e, "connector")[0]


def test_port_zero_lets_the_peer_choose():
    topo = load_topology(TOPOLOGIES_DIR / "single-router.yaml")
    assert of_kind(read_conf(render_router(topo, "R1", {"clients": 0})), "listener")[0]["port"] == "0"


def test_hosts_can_be_chosen():
    topo = parse_topology(BROKERED)
    sections = read_conf(
        render_router(
            topo,
            "R1",
            {"clients": 1, "B2": 2},
            {"B1": 3},
            listen_host="0.0.0.0",
            connect_host="host.internal",
        )
    )
    assert {ls["host"] for ls in of_kind(sections, "listener")} == {"0.0.0.0"}
    assert of_kind(sections, "connector")[0]["host"] == "host.internal"


def test_missing_ports_are_one_line_errors():
    topo = parse_topology(BROKERED)
    with pytest.raises(RenderError) as info:
        render_router(topo, "R1", {"clients": 1}, {"B1": 3})
    assert str(info.value) == "R1: no port for listener 'B2' in listen_ports (it has clients)"
    with pytest.raises(
        RenderError, match=r"^R1: no port for link to 'B1' in connect_ports \(it has nothing\)$"
    ):
        render_router(topo, "R1", {"clients": 1, "B2": 2})
    with pytest.raises(
        RenderError, match=r"listen_ports\['clients'\]: expected a TCP port 0..65535, got 70000"
    ):
        render_router(topo, "R1", {"clients": 70000, "B2": 2}, {"B1": 3})
    with pytest.raises(RenderError, match=r"connect_ports\['B1'\]: expected a TCP port 0..65535, got '5672'"):
        render_router(topo, "R1", {"clients": 1, "B2": 2}, {"B1": "5672"})


def test_brokers_are_not_rendered():
    with pytest.raises(RenderError, match=r"^B1: is a broker; qdrouterd.conf is rendered for routers only$"):
        render_router(parse_topology(BROKERED), "B1", {"clients": 1})


def test_unknown_node():
    with pytest.raises(KeyError, match="no node 'R9'"):
        render_router(parse_topology(BROKERED), "R9", {"clients": 1})


@pytest.mark.parametrize(
    ("address", "field"),
    [
        ({"prefix": "two words"}, "prefix"),
        ({"prefix": 'quo"te'}, "prefix"),
        ({"pattern": "a/{b}"}, "pattern"),
    ],
)
def test_values_qdrouterd_cannot_read_are_refused(address, field):
    topo = parse_topology({"name": "t", "nodes": {"R1": {"role": "router", "addresses": [address]}}})
    with pytest.raises(RenderError) as info:
        render_router(topo, "R1", {"clients": 1})
    message = str(info.value)
    assert message.startswith(f"R1: addresses[0]: address {field}: ")
    assert "cannot be written to qdrouterd.conf" in message and "\n" not in message


def test_hash_is_refused_outside_patterns():
    data = {
        "name": "t",
        "nodes": {
            "R1": {
                "role": "router",
                "autolinks": [{"address": "q#1", "direction": "in", "connection": "B1"}],
            },
            "B1": {"role": "broker"},
        },
        "links": [{"from": "R1", "to": "B1", "role": "route-container"}],
    }
    with pytest.raises(RenderError, match=r"^R1: autolinks\[0\]: autoLink address: 'q#1' cannot be written"):
        render_router(parse_topology(data), "R1", {"clients": 1}, {"B1": 2})
