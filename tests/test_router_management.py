"""The reference router's management agent (reference/router/management.py), without a network: requests go
straight to `Agent.handle` / `Agent.respond` of a router built from a config text, and the router's state is
looked at directly. The wire side (qdstat, qdmanage, a mesh, traffic and counters) is suites/management/."""

from __future__ import annotations

import pytest
from proton import Message

from reference.router.config import parse_config
from reference.router.management import PREFIX, SCHEMA, Status, short_type
from reference.router.router import Router

CONFIG = """
router {
    mode: interior
    id: RX
}
listener {
    name: clients
    host: 127.0.0.1
    port: 0
}
address {
    prefix: multi
    distribution: multicast
}
linkRoute {
    name: lr1
    prefix: broker.q
    direction: in
    connection: B1
}
connector {
    name: B1
    host: 127.0.0.1
    port: 1
    role: route-container
}
"""


@pytest.fixture
def router():
    return Router(parse_config(CONFIG, "test.conf"))


def ask(router, operation, body=None, **props):
    """(status, description, body) of one request; a refusal is returned, not raised."""
    try:
        return router.agent.handle({"operation": operation, **props}, body if body is not None else {})
    except Status as exc:
        return exc.code, exc.description, {}


def node(router, operation, entity_type=None, body=None):
    props = {"type": "org.amqp.management", "name": "self"}
    if entity_type:
        props["entityType"] = entity_type
    return ask(router, operation, body, **props)


# ---- types and the node's own operations --------------------------------------------------------------------


def test_types_are_taken_with_or_without_the_prefix_and_short_names_are_refused():
    assert short_type(PREFIX + "router.link") == "router.link" == short_type("router.link")
    assert short_type(None) is None
    for name in ("linkRoute", PREFIX + "address", "nosuch"):
        with pytest.raises(Status) as refused:
            short_type(name)
        assert (refused.value.code, refused.value.description) == (400, f"No such entity type '{name}'")


def test_the_schema_has_every_type_the_issue_names():
    for t in ("router", "connection", "router.link", "router.address", "router.node", "router.config.linkRoute",
              "router.config.autoLink", "router.config.address", "listener", "connector", "sslProfile", "log"):
        assert t in SCHEMA
        assert {"name", "identity", "type"} <= set(SCHEMA[t][2])


def test_get_types_operations_and_attributes(router):
    code, _, types = node(router, "GET-TYPES")
    assert code == 200 and types[PREFIX + "listener"] == [PREFIX + "configurationEntity", PREFIX + "entity"]
    assert node(router, "GET-OPERATIONS", PREFIX + "listener")[2] == {PREFIX + "listener": ["CREATE", "DELETE",
                                                                                            "READ"]}
    attributes = node(router, "GET-ATTRIBUTES", "router.config.linkRoute")[2][PREFIX + "router.config.linkRoute"]
    assert attributes[:2] == ["prefix", "pattern"] and attributes[-3:] == ["name", "identity", "type"]
    assert node(router, "GET-MGMT-NODES") == (200, "OK", ["amqp:/_topo/0/RX/$management"])


def test_query_returns_the_names_asked_for_in_order(router):
    code, _, body = node(router, "QUERY", PREFIX + "router", {"attributeNames": ["mode", "id"]})
    assert code == 200 and body == {"attributeNames": ["mode", "id"], "results": [["interior", "RX"]]}
    code, _, body = node(router, "QUERY", "router.config.linkRoute", {"attributeNames": []})
    row = dict(zip(body["attributeNames"], body["results"][0], strict=True))
    assert (row["name"], row["prefix"], row["direction"], row["operStatus"]) == ("lr1", "broker.q", "in", "inactive")


def test_query_of_unknown_attributes(router):
    # qdrouterd's python agent refuses them; its core leaves them out of the answer
    assert node(router, "QUERY", "listener", {"attributeNames": ["bogus"]})[:2] == (
        404, f"Unknown attributes ['bogus'] for type {PREFIX}listener.")
    code, _, body = node(router, "QUERY", "router.link", {"attributeNames": ["linkName", "bogus", "connectionId"]})
    assert code == 200 and body["attributeNames"] == ["linkName", "connectionId"]


# ---- refusals, with qdrouterd's codes and descriptions --------------------------------------------------------


def test_missing_entities_and_names(router):
    assert ask(router, "READ", type=PREFIX + "router.config.linkRoute", name="x")[:2] == (404, "Not Found")
    assert ask(router, "READ", type=PREFIX + "listener", name="x")[:2] == (404, "No entity with name=x")
    assert ask(router, "READ", type=PREFIX + "listener")[:2] == (400, f"{PREFIX}listener: No name or identity "
                                                                     "provided")
    assert ask(router, "READ", type=PREFIX + "router.config.address")[:2] == (400, "No name or identity provided")
    code, description, _ = ask(router, None, type=PREFIX + "listener", name="clients")
    assert code == 400 and description.startswith("No 'operation' property")


def test_operations_the_schema_does_not_allow(router):
    assert ask(router, "DELETE", type=PREFIX + "router", name="RX")[:2] == (403, "Forbidden")
    assert ask(router, "CREATE", type=PREFIX + "router", name="R2")[:2] == (403, "Forbidden")
    assert ask(router, "CREATE", type=PREFIX + "connection", name="c")[:2] == (403, "Forbidden")
    assert ask(router, "DELETE", type=PREFIX + "router.link", identity="1")[:2] == (403, "Forbidden")
    assert ask(router, "UPDATE", type=PREFIX + "router.config.linkRoute", name="lr1")[:2] == (403, "Forbidden")
    assert ask(router, "UPDATE", type=PREFIX + "listener", name="clients")[:2] == (
        501, f"Operation 'UPDATE' not implemented for '{PREFIX}listener' ['CREATE', 'DELETE', 'READ']")


def test_read_by_name_and_identity(router):
    code, _, by_name = ask(router, "READ", type=PREFIX + "router.config.linkRoute", name="lr1")
    assert code == 200 and by_name["prefix"] == "broker.q" and by_name["dir"] == "in"
    assert ask(router, "READ", type=PREFIX + "router.config.linkRoute", identity=by_name["identity"])[2] == by_name
    code, _, connector = ask(router, "READ", type=PREFIX + "connector", name="B1")
    assert code == 200 and (connector["port"], connector["role"], connector["connectionStatus"]) == (
        "1", "route-container", "CONNECTING")


# ---- live configuration -----------------------------------------------------------------------------------------


def test_created_and_deleted_link_routes_change_what_is_routed(router):
    code, _, made = ask(router, "CREATE", {"prefix": "live.q", "direction": "out", "connection": "B1"},
                        type=PREFIX + "router.config.linkRoute", name="lr2")
    assert code == 201 and made["name"] == "lr2" and made["distribution"] == "linkBalanced"
    table = router.link_router.tables["out"]
    assert table.lookup("live.q.one") is not None
    assert ask(router, "DELETE", type=PREFIX + "router.config.linkRoute", name="lr2")[:2] == (204, "No Content")
    assert router.link_router.tables["out"].lookup("live.q.one") is None
    assert [s.name for s in router.link_router.sections] == ["lr1"]
    assert [s.name for s in router.config.link_routes] == ["lr1"], "the configuration stays the start-up state"


def test_created_and_deleted_addresses_change_the_distribution(router):
    code, _, made = ask(router, "CREATE", {"prefix": "live.m", "distribution": "multicast"},
                        type=PREFIX + "router.config.address", name="a1")
    assert code == 201 and made["distribution"] == "multicast" and made["priority"] == -1
    assert router.address_config.lookup("live.m.x").distribution == "multicast"
    assert ask(router, "CREATE", {"prefix": "live.m"}, type=PREFIX + "router.config.address", name="a2")[:2] == (
        400, "Already exists")
    ask(router, "DELETE", type=PREFIX + "router.config.address", name="a1")
    assert router.address_config.lookup("live.m.x") is None
    assert router.address_config.lookup("multi.x").distribution == "multicast"


def test_created_autolinks_wait_for_their_connection(router):
    code, _, made = ask(router, "CREATE", {"address": "q1", "direction": "in", "connection": "B1"},
                        type=PREFIX + "router.config.autoLink", name="al1")
    assert code == 201 and (made["phase"], made["operStatus"], made["linkRef"]) == (1, "inactive", None)
    assert [c.name for c in router.autolinks.configs] == ["al1"]
    ask(router, "DELETE", type=PREFIX + "router.config.autoLink", name="al1")
    assert router.autolinks.configs == []


@pytest.mark.parametrize("entity_type, body, expected", [
    ("router.config.linkRoute", {"direction": "in"}, "Either a 'prefix' or 'pattern' attribute must be provided"),
    ("router.config.linkRoute", {"prefix": "x", "direction": "up"}, "Invalid value for 'direction'"),
    ("router.config.autoLink", {"address": "x"}, "address and direction fields are mandatory"),
    ("router.config.address", {"prefix": "x", "distribution": "bogus"}, "Invalid value for 'distribution'"),
    ("router.config.address", {"prefix": "x", "priority": "12"}, None),  # the config file's own checks
    ("router.config.linkRoute", {"prefix": "x", "direction": "in", "identity": "7"}, None),
])
def test_bad_creates_are_refused_and_change_nothing(router, entity_type, body, expected):
    before = (len(router.link_router.sections), len(router.autolinks.configs), len(router.address_sections()))
    code, description, _ = ask(router, "CREATE", body, type=PREFIX + entity_type, name="bad")
    assert code == 400
    if expected is not None:
        assert description == expected
    assert (len(router.link_router.sections), len(router.autolinks.configs), len(router.address_sections())) == before


def test_a_name_in_use_is_refused(router):
    assert ask(router, "CREATE", {"prefix": "x", "direction": "in"}, type=PREFIX + "router.config.linkRoute",
               name="lr1")[:2] == (400, "Name conflicts with an existing entity")


def test_update_of_a_log_module(router):
    code, _, log = ask(router, "UPDATE", {"enable": "debug+"}, type=PREFIX + "log", name="log/ROUTER")
    assert code == 200 and log["enable"] == "debug+" and log["module"] == "ROUTER"


# ---- the response message -------------------------------------------------------------------------------------


def test_the_response_goes_to_the_reply_to_with_the_correlation_id(router):
    request = Message(reply_to="amqp:/_topo/0/RX/temp.1", correlation_id="c-7",
                      properties={"operation": "READ", "type": PREFIX + "listener", "name": "nosuch"})
    response = router.agent.respond(request)
    assert response.address == "amqp:/_topo/0/RX/temp.1" and response.correlation_id == "c-7"
    assert response.properties == {"statusCode": 404, "statusDescription": "No entity with name=nosuch"}
    assert router.agent.respond(Message(properties={"operation": "QUERY"})) is None, "no reply-to: no answer"


def test_the_agent_answers_its_addresses_only(router):
    agent = router.agent
    assert agent.is_mine("$management") and agent.is_mine("_topo/0/RX/$management")
    assert agent.is_mine("amqp:/_topo/0/RX/$management")
    assert not agent.is_mine("_topo/0/RY/$management") and not agent.is_mine("management")
    assert router.credit._reachable("$management"), "a producer to the agent is given credit"


def test_listeners_and_connectors_created_and_deleted(router):
    opened = []
    router.listen_hook = opened.append  # the server's: listens (here: records what it was asked)
    code, _, made = ask(router, "CREATE", {"host": "127.0.0.1", "port": "5999"}, type=PREFIX + "listener", name="l2")
    assert code == 201 and [li.port for li in opened] == [5999] and made["identity"] == "listener/127.0.0.1:5999:l2"
    assert ask(router, "DELETE", type=PREFIX + "listener", name="l2")[:2] == (204, "No Content")
    router.listen_hook = None
    code, description, _ = ask(router, "CREATE", {"port": "5998"}, type=PREFIX + "listener", name="l3")
    assert code == 400 and "cannot listen" in description
    code, _, made = ask(router, "CREATE", {"host": "127.0.0.1", "port": "5997", "role": "route-container"},
                        type=PREFIX + "connector", name="c2")
    assert code == 201 and [d.name for d in router.connectors.dialers] == ["B1", "c2"]
    dialer = router.connectors.dialers[-1]
    ask(router, "DELETE", type=PREFIX + "connector", name="c2")
    assert dialer.removed and [d.name for d in router.connectors.dialers] == ["B1"]


# ---- GET-SCHEMA, UPDATE of a router.link, sslProfile CREATE and DELETE -----------------------------------------


def test_get_schema_is_the_schema_as_qdrouterds_agent_dumps_it(router):
    import json

    code, _, schema = node(router, "GET-SCHEMA")
    assert code == 200 and schema["prefix"] == "org.apache.qpid.dispatch"
    types = schema["entityTypes"]
    assert set(types) == {t.replace("router.config.", "") for t in SCHEMA}  # qdrouterd's short names
    for t, (_bases, operations, names) in SCHEMA.items():
        entry = types[t.replace("router.config.", "")]
        assert entry["fullyQualifiedType"] == PREFIX + t
        assert entry.get("operations", []) == list(operations)
        assert list(entry["attributes"]) == [n for n in names if n != "type"]
    assert types["router.link"]["attributes"]["adminStatus"] == {"type": ["enabled", "disabled"], "default": "enabled"}
    assert types["management"]["singleton"] is True and "singleton" not in types["listener"]
    # qdmanage sends it with no type or name, in lower case
    assert ask(router, "get-schema")[2] == schema
    code, _, text = node(router, "GET-JSON-SCHEMA")
    assert code == 200 and json.loads(text) == schema


def _one_link(router, monkeypatch):
    from reference.router.management import Entity

    link = Entity("router.link", {"name": "rcv1", "identity": "7", "linkName": "rcv1", "linkDir": "out",
                                  "adminStatus": "enabled", "operStatus": "up", "capacity": 250})
    monkeypatch.setattr(router.agent, "links", lambda: [link])
    return link


def test_update_of_a_link_is_answered_as_qdrouterd_does_and_changes_nothing(router, monkeypatch):
    _one_link(router, monkeypatch)
    link = PREFIX + "router.link"
    for ids in ({"identity": "7"}, {"name": "rcv1"}, {"identity": "7", "name": "other"}):  # identity first
        code, description, body = ask(router, "UPDATE", {"adminStatus": "disabled"}, type=link, **ids)
        assert (code, description) == (200, "OK") and body["identity"] == "7"
        assert body["adminStatus"] == "enabled"  # qdrouterd 1.19 does not act on it: neither does the reference
    assert ask(router, "UPDATE", {"adminStatus": None}, type=link, identity="7")[0] == 200
    assert ask(router, "UPDATE", {"adminStatus": "enabled", "capacity": 5}, type=link, identity="7")[0] == 200


@pytest.mark.parametrize("body, ids, expected", [
    ({"capacity": 5}, {"identity": "7"}, (400, "Bad Request")),
    ({}, {"identity": "7"}, (400, "Bad Request")),
    (["adminStatus"], {"identity": "7"}, (400, "Bad Request")),
    ({"adminStatus": "disabled"}, {}, (400, "Bad Request")),
    ({}, {"identity": "999"}, (400, "Bad Request")),  # the body is looked at before the link
    ({"adminStatus": "disabled"}, {"identity": "999"}, (404, "Not Found")),
    ({"adminStatus": "disabled"}, {"name": "nosuch"}, (404, "Not Found")),
    ({"adminStatus": "bogus"}, {"identity": "7"},
     (400, "Invalid value for 'adminStatus': 'bogus' (one of ['enabled', 'disabled'])")),
    ({"adminStatus": 3}, {"identity": "7"},
     (400, "Invalid value for 'adminStatus': 3 (one of ['enabled', 'disabled'])")),
    ({"adminStatus": "enabled", "nosuch": 1}, {"identity": "7"},
     (400, f"Unknown attributes ['nosuch'] for type {PREFIX}router.link")),
], ids=["read-only", "empty", "not-a-map", "no-ids", "empty-missing", "missing", "missing-name", "bogus", "int",
        "unknown"])
def test_bad_updates_of_a_link_are_refused(router, monkeypatch, body, ids, expected):
    _one_link(router, monkeypatch)
    assert ask(router, "UPDATE", body, type=PREFIX + "router.link", **ids)[:2] == expected


def test_ssl_profiles_created_and_deleted_and_what_names_them(router):
    profile = {"certFile": "/nonexistent/c.pem", "privateKeyFile": "/nonexistent/k.pem"}
    code, _, made = ask(router, "CREATE", profile, type=PREFIX + "sslProfile", name="p1")
    assert code == 201 and made["identity"] == "sslProfile/p1" and made["certFile"] == "/nonexistent/c.pem"
    assert "p1" in router.ssl_profiles and "p1" not in {p.name for p in router.config.ssl_profiles}
    assert ask(router, "READ", type=PREFIX + "sslProfile", identity="sslProfile/p1")[2]["name"] == "p1"
    code, description, _ = ask(router, "CREATE", profile, type=PREFIX + "sslProfile", name="p1")
    assert code == 400 and "duplicates unique attribute 'name'" in description
    code, description, _ = ask(router, "CREATE", profile, type=PREFIX + "sslProfile")
    assert (code, description) == (400, "sslProfile: 'name' is required")
    assert ask(router, "UPDATE", {"ciphers": "HIGH"}, type=PREFIX + "sslProfile", name="p1")[0] == 501
    opened = []
    router.listen_hook = opened.append  # the server's: it builds the TLS door (here: records the listener)
    code, _, _ = ask(router, "CREATE", {"host": "127.0.0.1", "port": "5996", "sslProfile": "p1"},
                     type=PREFIX + "listener", name="tls1")
    assert code == 201 and [li.ssl_profile for li in opened] == ["p1"]
    # a connector's TLS is built when it is made: the profile's files must be there
    code, description, _ = ask(router, "CREATE", {"host": "127.0.0.1", "port": "5995", "sslProfile": "p1",
                                                  "role": "route-container"}, type=PREFIX + "connector", name="c9")
    assert code == 400 and "certFile /nonexistent/c.pem: expected a readable PEM file" in description
    assert ask(router, "DELETE", type=PREFIX + "sslProfile", name="p1")[:2] == (204, "No Content")  # in use: allowed
    assert "p1" not in router.ssl_profiles
    assert ask(router, "READ", type=PREFIX + "sslProfile", name="p1")[:2] == (404, "No entity with name=p1")
    code, description, _ = ask(router, "CREATE", {"host": "127.0.0.1", "port": "5994", "sslProfile": "p1"},
                               type=PREFIX + "listener", name="tls2")
    assert code == 400 and "sslProfile 'p1' does not name an sslProfile" in description and len(opened) == 1


def test_profiles_of_the_configuration_file_are_entities():
    r = Router(parse_config(CONFIG + "sslProfile {\n    name: fromfile\n    certFile: /x/c.pem\n}\n", "test.conf"))
    code, _, found = ask(r, "READ", type=PREFIX + "sslProfile", name="fromfile")
    assert code == 200 and found["identity"] == "sslProfile/fromfile" and found["certFile"] == "/x/c.pem"
    assert ask(r, "DELETE", type=PREFIX + "sslProfile", name="fromfile")[0] == 204 and not r.ssl_profiles
    assert [p.name for p in r.config.ssl_profiles] == ["fromfile"]  # the configuration stays the start-up state
