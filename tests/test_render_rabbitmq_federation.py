"""A topology's network connectors as RabbitMQ federation (harness/vendors/rabbitmq/render.py), without a broker.

tests/test_rabbitmq_network.py applies the same plans to real nodes; here each shape is pinned: which node
gets which upstream (federation pulls, so the upstream sits on the node messages flow *to*), which policy a
queue or an exchange ends up with (RabbitMQ applies one, so the settings policy is merged in), and what the
wildcards match.
"""

import base64
import hashlib
import json
import re

import pytest

from harness.peers.provider import RenderError
from harness.vendors.rabbitmq.render import (FEDERATION_PLUGIN, MAX_SELECTIONS, federation_commands, federation_plan,
                                     render_rabbitmq_node, selection_regex, wildcard_regex)
from harness.topology import load_topology, parse_topology, topology_path
from reference.broker.config import match_address

NO_DLQ = {"dead_letter_address": None, "expiry_address": None}
PORTS = {"B1": 10001, "B2": 10002, "B3": 10003, "M": 10004, "S": 10005, "H": 10006, "S1": 10007, "S2": 10008,
         "S3": 10009}


def topology(connectors: dict, extra_links: tuple = (), **settings):
    """Brokers B1, B2 and B3 (orders, prices), with `connectors` per node and a link for each target."""
    nodes = {name: {"role": "broker", "queues": [{"address": "orders"}, {"address": "prices",
                                                                          "routing": "multicast"}]}
             for name in ("B1", "B2", "B3")}
    links = []
    for name, items in connectors.items():
        nodes[name]["network_connectors"] = items
        for item in items:
            for target in [item["to"]] if isinstance(item["to"], str) else item["to"]:
                link = {"from": name, "to": target, "role": "normal"}
                if link not in links:
                    links.append(link)
    for name in nodes:
        if settings:
            nodes[name]["settings"] = settings
    return parse_topology({"name": "fed", "nodes": nodes, "links": links + list(extra_links)})


def upstreams(commands) -> dict[str, dict]:
    return {c[2]: json.loads(c[3]) for c in commands if c[:2] == ["set_parameter", "federation-upstream"]}


def policies(commands) -> dict[str, tuple[str, str, dict]]:
    return {c[5]: (c[2], c[6], json.loads(c[7])) for c in commands if c[0] == "set_policy"}


# ---- wildcards --------------------------------------------------------------------------------------------

NAMES = ["orders", "orders.eu", "orders.eu.paris", "ordersx", "prices", "prices.eu", "a", "a.b", "a.b.c", "b.a",
         "x.y.z", "amq.gen-1"]


@pytest.mark.parametrize("pattern", ["orders", "orders.#", "orders.*", "*.eu", "#", "*", "a.*.c", "prices.eu",
                                     "a.#", "*.*"])
def test_wildcards_match_as_the_reference_broker_matches_artemis_patterns(pattern):
    regex = re.compile(wildcard_regex(pattern) + r"\Z")
    for name in NAMES:
        assert bool(regex.match(name)) == match_address(pattern, name), (pattern, name)


def test_hash_is_zero_or_more_words_and_literals_are_escaped():
    assert re.fullmatch(wildcard_regex("prices.#"), "prices")  # Artemis: '#' is zero or more words
    assert not re.fullmatch(wildcard_regex("a.b"), "aXb")  # '.' is a word separator, not 'any character'
    assert wildcard_regex("a-b.c+d") == r"a\-b\.c\+d"  # every ASCII non-alphanumeric escaped (PCRE and re alike)


def test_a_selection_excludes_with_a_negative_lookahead():
    regex = re.compile(selection_regex(["#"], ["secret", "secret.#"]))
    assert regex.match("orders") and regex.match("secretary")
    assert not regex.match("secret") and not regex.match("secret.plans")
    both = re.compile(selection_regex(["orders.#", "prices"], ["orders.test"]))
    assert [n for n in ["orders", "orders.eu", "orders.test", "prices", "prices.eu"] if both.match(n)] == \
        ["orders", "orders.eu", "prices"]


# ---- shapes -----------------------------------------------------------------------------------------------

def test_a_connector_on_b1_to_b2_is_an_upstream_on_b2_pointing_at_b1():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2", "topics": ["prices"], "retry_interval_ms": 200,
                             "network_ttl": 2}]})
    assert federation_commands(topo, "B1", PORTS, NO_DLQ) == []  # B1 is only pulled from
    assert federation_plan(topo, "B1", NO_DLQ).in_network
    assert not federation_plan(topo, "B3", NO_DLQ).in_network
    commands = federation_commands(topo, "B2", PORTS, NO_DLQ)
    assert upstreams(commands) == {"B1:b1-b2.B2": {
        "uri": "amqp://127.0.0.1:10001", "reconnect-delay": 0.2, "max-hops": 2, "ack-mode": "on-confirm",
        "trust-user-id": False}}
    assert policies(commands) == {
        "interop-federation-queues": ("queues", r"^(?!amq\.)(?!federation: )(?:.*)$",
                                      {"federation-upstream": "B1:b1-b2.B2"}),
        "interop-federation-exchanges": ("exchanges", r"^(?!amq\.)(?!federation: )(?:prices)$",
                                         {"federation-upstream": "B1:b1-b2.B2"})}
    assert [c[0] for c in commands] == ["set_parameter", "set_policy", "set_policy"], "upstreams before policies"
    assert all(c[3:5] == ["--priority", "1"] for c in commands if c[0] == "set_policy")


def test_whole_seconds_stay_integers_and_queues_only_makes_no_exchange_policy():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2", "retry_interval_ms": 3000}]})
    commands = federation_commands(topo, "B2", PORTS, NO_DLQ)
    assert upstreams(commands)["B1:b1-b2.B2"]["reconnect-delay"] == 3
    assert list(policies(commands)) == ["interop-federation-queues"]


def test_duplex_adds_the_mirror_image_on_the_owner():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2", "duplex": True, "topics": ["prices"]}]})
    back = federation_commands(topo, "B1", PORTS, NO_DLQ)
    assert upstreams(back) == {"B1:b1-b2.B2:back": {
        "uri": "amqp://127.0.0.1:10002", "reconnect-delay": 1, "max-hops": 1, "ack-mode": "on-confirm",
        "trust-user-id": False}}
    assert {p[2]["federation-upstream"] for p in policies(back).values()} == {"B1:b1-b2.B2:back"}
    assert list(upstreams(federation_commands(topo, "B2", PORTS, NO_DLQ))) == ["B1:b1-b2.B2"]


def test_static_to_several_nodes_makes_one_upstream_on_each():
    topo = topology({"B1": [{"name": "out", "to": ["B2", "B3"]}]})
    assert list(upstreams(federation_commands(topo, "B2", PORTS, NO_DLQ))) == ["B1:out.B2"]
    assert list(upstreams(federation_commands(topo, "B3", PORTS, NO_DLQ))) == ["B1:out.B3"]


def test_masterslave_primary_and_standby_each_pull_and_the_way_back_lists_both_uris_in_order():
    topo = load_topology(topology_path("network-masterslave"))
    for node in ("M", "S"):
        ups = upstreams(federation_commands(topo, node, PORTS, NO_DLQ))
        assert ups == {"B1:b1-pair": {"uri": "amqp://127.0.0.1:10001", "reconnect-delay": 0.2, "max-hops": 1,
                                      "ack-mode": "on-confirm", "trust-user-id": False}}
    assert federation_commands(topo, "B1", PORTS, NO_DLQ) == []
    duplex = topology({"B1": [{"name": "pair", "uri": "masterslave", "to": ["B2", "B3"], "duplex": True}]})
    assert upstreams(federation_commands(duplex, "B1", PORTS, NO_DLQ))["B1:pair:back"]["uri"] == [
        "amqp://127.0.0.1:10002", "amqp://127.0.0.1:10003"]


def test_hub_and_spoke_gives_the_hub_one_upstream_set_of_its_spokes():
    topo = load_topology(topology_path("network-hub-spoke"))
    commands = federation_commands(topo, "H", PORTS, NO_DLQ)
    assert list(upstreams(commands)) == ["S1:s1-h.H", "S2:s2-h.H", "S3:s3-h.H"]
    assert all(u["max-hops"] == 2 for u in upstreams(commands).values())
    sets = [c for c in commands if c[:2] == ["set_parameter", "federation-upstream-set"]]
    assert sets == [["set_parameter", "federation-upstream-set", "S1:s1-h.H+S2:s2-h.H+S3:s3-h.H",
                     json.dumps([{"upstream": "S1:s1-h.H"}, {"upstream": "S2:s2-h.H"}, {"upstream": "S3:s3-h.H"}])]]
    assert {p[2]["federation-upstream-set"] for p in policies(commands).values()} == {sets[0][2]}
    spoke = federation_commands(topo, "S2", PORTS, NO_DLQ)
    assert upstreams(spoke)["S2:s2-h.H:back"]["uri"] == "amqp://127.0.0.1:10006"


def test_a_mesh_ring_gives_each_node_its_two_neighbours():
    topo = load_topology(topology_path("network-mesh"))
    for node, expected in {"B1": ["B1:b1-b2.B2:back", "B3:b3-b1.B1"], "B2": ["B1:b1-b2.B2", "B2:b2-b3.B3:back"],
                           "B3": ["B2:b2-b3.B3", "B3:b3-b1.B1:back"]}.items():
        plan = federation_plan(topo, node, NO_DLQ)
        assert [u.name for u in plan.upstreams] == expected
        assert plan.policy_for("orders", "queue").upstreams == tuple(expected)
        assert plan.policy_for("prices", "exchange").upstreams == tuple(expected)


# ---- one policy per queue -----------------------------------------------------------------------------------

def test_the_settings_policy_is_merged_into_federation_policies_and_the_dlq_keeps_federation_alone():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2"}]}, dead_letter_address="DLQ")
    plan = federation_plan(topo, "B2", {"dead_letter_address": "DLQ", "expiry_address": None})
    orders = plan.policy_for("orders", "queue")
    assert orders.definition == {"dead-letter-exchange": "", "dead-letter-routing-key": "DLQ",
                                 "federation-upstream": "B1:b1-b2.B2"}
    dlq = plan.policy_for("DLQ", "queue")
    assert dlq.name == "interop-federation-queues-dead-letter-queue" and dlq.pattern == "^DLQ$"
    assert dlq.definition == {"federation-upstream": "B1:b1-b2.B2"}, "the DLQ does not dead-letter to itself"
    assert plan.policy_for("DLQX", "queue") is orders
    for internal in ("amq.gen-Xyz", "federation: prices -> rabbit@host"):
        assert plan.policy_for(internal, "queue") is None  # left to interop-broker-settings
    assert plan.policy_for("orders", "exchange") is None


def test_quorum_delivery_limit_is_merged_too():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2"}]})
    plan = federation_plan(topo, "B2", {**NO_DLQ, "queue_type": "quorum", "max_delivery_attempts": 3})
    assert [p.name for p in plan.policies] == ["interop-federation-queues"]
    assert plan.policy_for("orders", "queue").definition == {"delivery-limit": 3, "federation-upstream": "B1:b1-b2.B2"}


def test_different_selections_partition_the_names_so_each_gets_every_upstream_that_selects_it():
    topo = topology({"B1": [{"name": "eu", "to": "B2", "queues": ["orders.#"], "excluded": ["orders.test"]}],
                     "B3": [{"name": "all", "to": "B2", "queues": ["#"], "excluded": ["orders.eu"]}]})
    plan = federation_plan(topo, "B2", NO_DLQ)
    assert [p.name for p in plan.policies] == ["interop-federation-queues-1", "interop-federation-queues-2",
                                               "interop-federation-queues-1+2"]
    seen = {name: plan.policy_for(name, "queue").upstreams
            for name in ("orders", "orders.eu", "orders.test", "invoices")}
    assert seen == {"orders": ("B1:eu.B2", "B3:all.B2"), "orders.eu": ("B1:eu.B2",),
                    "orders.test": ("B3:all.B2",), "invoices": ("B3:all.B2",)}
    for name in ("orders", "orders.eu", "orders.test", "invoices", "amq.gen-1"):
        assert sum(p.matches(name) for p in plan.policies) <= 1, f"{name}: policies overlap"
    assert plan.upstream_sets == {"B1:eu.B2+B3:all.B2": ("B1:eu.B2", "B3:all.B2")}


def test_too_many_selections_is_a_render_error():
    connectors = {"B1": [{"name": f"c{i}", "to": "B2", "queues": [f"q{i}"]} for i in range(MAX_SELECTIONS + 1)]}
    with pytest.raises(RenderError, match=r"^B2: 6 different queues selections .* at most 5"):
        federation_plan(topology(connectors), "B2", NO_DLQ)


def test_expected_links_follow_the_declared_names():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2", "topics": ["prices"]}]})
    plan = federation_plan(topo, "B2", NO_DLQ)
    assert plan.expected_links({"orders": "queue", "prices": "exchange", "news": "exchange"}) == {
        ("queue", "orders", "B1:b1-b2.B2"), ("exchange", "prices", "B1:b1-b2.B2")}


# ---- users and ports ----------------------------------------------------------------------------------------

def test_a_connector_user_is_in_the_uri_and_created_on_both_ends():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2", "user": "net user", "password": "p@ss:w/rd"}]})
    commands = federation_commands(topo, "B2", PORTS, NO_DLQ)
    assert upstreams(commands)["B1:b1-b2.B2"]["uri"] == "amqp://net%20user:p%40ss%3Aw%2Frd@127.0.0.1:10001"
    users = [["add_user", "net user", "p@ss:w/rd"], ["set_permissions", "-p", "/", "net user", ".*", ".*", ".*"]]
    assert commands[:2] == users
    assert federation_commands(topo, "B1", PORTS, NO_DLQ) == users  # B1 is dialled: it needs the user too
    assert federation_commands(topo, "B3", PORTS, NO_DLQ) == []


def test_one_user_with_two_passwords_is_a_render_error():
    topo = topology({"B1": [{"name": "a", "to": "B2", "user": "u", "password": "one"}],
                     "B3": [{"name": "b", "to": "B2", "user": "u", "password": "two"}]})
    with pytest.raises(RenderError, match=r"^B2: network connectors give user 'u' two passwords"):
        federation_plan(topo, "B2", NO_DLQ)


def test_a_missing_port_is_a_render_error_naming_the_upstream():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2"}]})
    with pytest.raises(RenderError, match=r"^upstream B1:b1-b2.B2: no port to dial for B1$"):
        federation_commands(topo, "B2", {"B2": 1}, NO_DLQ)


def test_federation_only_for_brokers():
    topo = parse_topology({"name": "r", "nodes": {"R1": {"role": "router"}}})
    with pytest.raises(RenderError, match="^R1: is a router"):
        federation_plan(topo, "R1")


def test_the_plugin_is_enabled_on_request_only():
    node = topology({}).nodes["B1"]
    assert render_rabbitmq_node(node, 5672, NO_DLQ).enabled_plugins == "[rabbitmq_amqp1_0].\n"
    assert render_rabbitmq_node(node, 5672, NO_DLQ, federation=True).enabled_plugins == \
        f"[rabbitmq_amqp1_0,{FEDERATION_PLUGIN}].\n"


def test_the_definitions_document_says_what_the_commands_say():
    """join_network imports definitions() in one call; commands() is the same plan, one rabbitmqctl call each."""
    topo = load_topology(topology_path("network-hub-spoke"))
    plan = federation_plan(topo, "H", {"dead_letter_address": "DLQ", "expiry_address": None})
    commands, doc = plan.commands(PORTS), plan.definitions(PORTS)
    assert {p["name"]: p["value"] for p in doc["parameters"] if p["component"] == "federation-upstream"} == \
        upstreams(commands)
    assert [[p["name"], json.dumps(p["value"])] for p in doc["parameters"]
            if p["component"] == "federation-upstream-set"] == \
        [c[2:] for c in commands if c[:2] == ["set_parameter", "federation-upstream-set"]]
    assert {p["name"]: (p["apply-to"], p["pattern"], p["definition"]) for p in doc["policies"]} == policies(commands)
    assert all(p["priority"] == 1 and p["vhost"] == "/" for p in doc["policies"])
    assert doc["users"] == doc["permissions"] == []

    with_user = topology({"B1": [{"name": "b1-b2", "to": "B2", "user": "net", "password": "pw"}]})
    doc = federation_plan(with_user, "B1", NO_DLQ).definitions(PORTS)
    (user,) = doc["users"]
    raw = base64.b64decode(user["password_hash"])
    assert user["name"] == "net" and raw[4:] == hashlib.sha256(raw[:4] + b"pw").digest()
    assert doc["permissions"] == [{"user": "net", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]


def test_a_user_without_a_password_is_a_render_error_because_rabbitmq_refuses_blank_passwords():
    topo = topology({"B1": [{"name": "b1-b2", "to": "B2", "user": "net"}]})
    for node in ("B1", "B2"):
        with pytest.raises(RenderError, match=rf"^{node}: network connector 'b1-b2' of B1: user 'net' has no "
                                              "password, and RabbitMQ refuses blank passwords$"):
            federation_plan(topo, node, NO_DLQ)
