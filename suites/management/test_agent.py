"""The management node of a router: requests and responses, its own operations, and its refusals (AMQP
Management draft; qdrouterd 1.19's schema and status codes). Topology `single-router`."""

import json

import pytest

from harness.management import NODE_TYPE, PREFIX

from .support import link_row, management, need_tools, qdmanage, qdstat, unique

# The entity types issue 55 names, as qdrouterd 1.19's schema (qdrouter.json) names them
TYPES = ("router", "connection", "router.link", "router.address", "router.node", "router.config.linkRoute",
         "router.config.autoLink", "router.config.address", "listener", "connector", "sslProfile", "log")
LINK_ROUTE_ATTRIBUTES = ["prefix", "pattern", "addExternalPrefix", "delExternalPrefix", "containerId", "connection",
                         "distribution", "direction", "operStatus", "name", "identity", "type"]


@pytest.fixture
def router(topology):
    return topology("single-router")


@pytest.mark.spec("MGMT-REQUEST-1")
def test_a_request_is_answered_to_its_reply_to_with_its_correlation_id(router, details):
    with management(router) as mgmt:
        answer = mgmt.node_call("QUERY", "router", body={"attributeNames": ["id", "mode"]})
    details.update(status=answer.code, body=repr(answer.body))
    assert answer.code == 200 and answer.description == "OK"
    assert answer.correlation_id is not None
    assert answer.body["attributeNames"] == ["id", "mode"]
    assert answer.body["results"] == [["R1", "standalone"]]


@pytest.mark.spec("MGMT-NODE-1")
def test_the_node_describes_the_schema_types_operations_and_attributes(router, details):
    with management(router) as mgmt:
        types = mgmt.expect(mgmt.node_call("GET-TYPES"), 200).body
        operations = mgmt.expect(mgmt.node_call("GET-OPERATIONS", "listener"), 200).body
        attributes = mgmt.expect(mgmt.node_call("GET-ATTRIBUTES", "router.config.linkRoute"), 200).body
    details.update(types=len(types))
    missing = [t for t in TYPES if PREFIX + t not in types]
    assert not missing, f"GET-TYPES lacks {missing}"
    assert PREFIX + "configurationEntity" in types[PREFIX + "listener"]
    assert operations == {PREFIX + "listener": ["CREATE", "DELETE", "READ"]}
    assert attributes == {PREFIX + "router.config.linkRoute": LINK_ROUTE_ATTRIBUTES}


@pytest.mark.spec("MGMT-QUERY-1")
def test_query_returns_the_attributes_asked_for_in_that_order(router, details):
    with management(router) as mgmt:
        rows = mgmt.query("listener", ["port", "name", "role"])
        everything = mgmt.node_call("QUERY", "router.config.address", body={"attributeNames": []})
    details.update(listeners=rows)
    assert rows and all(list(r) == ["port", "name", "role"] for r in rows)
    assert any(r["role"] == "normal" for r in rows)
    # No attribute names: every attribute of the type, and the configured address sections (prefixes) are there
    names = everything.body["attributeNames"]
    assert {"prefix", "pattern", "distribution", "name", "identity", "type"} <= set(names)
    prefixes = {dict(zip(names, row, strict=False))["prefix"] for row in everything.body["results"]}
    assert {"multicast", "closest", "balanced"} <= prefixes


@pytest.mark.spec("MGMT-STATUS-1")
def test_an_unknown_entity_type_is_refused_with_400(router, details):
    with management(router) as mgmt:
        query = mgmt.node_call("QUERY", "nosuch", body={"attributeNames": []})
        read = mgmt.call("READ", type="nosuch", name="x")
    details.update(query=[query.code, query.description], read=[read.code, read.description])
    for answer in (query, read):
        assert (answer.code, answer.description) == (400, f"No such entity type '{PREFIX}nosuch'")


@pytest.mark.spec("MGMT-STATUS-2")
def test_a_missing_entity_or_a_missing_name_is_refused(router, details):
    with management(router) as mgmt:
        no_route = mgmt.call("READ", type="router.config.linkRoute", name="mgmt-none")
        no_listener = mgmt.call("READ", type="listener", name="mgmt-none")
        no_delete = mgmt.call("DELETE", type="router.config.address", name="mgmt-none")
        no_name = mgmt.call("READ", type="listener")
        no_operation = mgmt.call(None, type="listener", name="x")
    seen = {k: [v.code, v.description] for k, v in (("read linkRoute", no_route), ("read listener", no_listener),
                                                   ("delete address", no_delete), ("no name", no_name),
                                                   ("no operation", no_operation))}
    details.update(seen)
    assert (no_route.code, no_route.description) == (404, "Not Found")
    assert (no_listener.code, no_listener.description) == (404, "No entity with name=mgmt-none")
    assert (no_delete.code, no_delete.description) == (404, "Not Found")
    assert (no_name.code, no_name.description) == (400, f"{PREFIX}listener: No name or identity provided")
    assert no_operation.code == 400 and no_operation.description.startswith("No 'operation' property")


@pytest.mark.spec("MGMT-STATUS-3")
def test_an_operation_the_schema_does_not_allow_is_refused(router, details):
    """Every request gets an answer (the draft); an operation the type does not allow is refused: qdrouterd's core
    types with 403, its other types with 501 naming the allowed operations."""
    with management(router) as mgmt:
        delete_router = mgmt.call("DELETE", type="router", name="R1")
        create_router = mgmt.call("CREATE", type="router", name="R9")
        update_listener = mgmt.call("UPDATE", type="listener", name=mgmt.query("listener", ["name"])[0]["name"],
                                    body={"port": "1"})
    details.update(delete_router=[delete_router.code, delete_router.description],
                   create_router=[create_router.code, create_router.description],
                   update_listener=[update_listener.code, update_listener.description])
    assert (delete_router.code, delete_router.description) == (403, "Forbidden")
    assert (create_router.code, create_router.description) == (403, "Forbidden")
    assert update_listener.code == 501
    assert update_listener.description == (f"Operation 'UPDATE' not implemented for '{PREFIX}listener' "
                                           "['CREATE', 'DELETE', 'READ']")


@pytest.mark.spec("MGMT-STATUS-3")
def test_a_forbidden_operation_on_an_operational_entity_is_answered(router, clients, details):
    """DELETE of a router.link and CREATE of a connection are not in the schema's operations for those types: the
    request must still be answered (the draft: every request has a response), with a refusal."""
    conn = clients.connect(router.client_url("consumer"))
    receiver = conn.receiver("mgmt.forbidden")
    with management(router, timeout=3) as mgmt:  # qdrouterd was seen not to answer these: do not wait 10 s
        link = next(r for r in mgmt.query("router.link", ["linkName", "identity"]) if r["linkName"] == receiver.name)
        delete_link = mgmt.call("DELETE", type="router.link", identity=link["identity"])
        create_connection = mgmt.call("CREATE", type="connection", name="mgmt-conn")
    details.update(delete_link=[delete_link.code, delete_link.description],
                   create_connection=[create_connection.code, create_connection.description])
    # Answered, and refused: the exact code is the agent's choice (the reference's is 403, qdrouterd's python agent
    # says 403 for the operations its schema forbids; its core agent gives these none, see suites/expected)
    for what, answer in (("DELETE router.link", delete_link), ("CREATE connection", create_connection)):
        assert answer.code is not None and 400 <= answer.code < 600, f"{what}: {answer}"


@pytest.mark.spec("MGMT-READ-1")
def test_read_by_name_and_by_identity_give_the_same_entity(router, details):
    with management(router) as mgmt:
        listener = mgmt.query("listener", ["name", "identity"])[0]
        by_name = mgmt.read("listener", name=listener["name"])
        by_identity = mgmt.read("listener", identity=listener["identity"])
    details.update(listener=listener)
    assert by_name == by_identity
    assert by_name["type"] == PREFIX + "listener" and by_name["name"] == listener["name"]
    assert by_name["port"] == by_identity["port"]


@pytest.mark.spec("MGMT-TOOLS-1")
def test_qdstat_and_qdmanage_read_the_router(router, details):
    need_tools()
    general = {row["attr"]: row["value"] for row in qdstat(router, "R1", "-g")}
    listeners = qdmanage(router, "R1", "query", "--type=listener")
    addresses = qdstat(router, "R1", "--linkroutes")  # a standalone router with no link route: no table
    details.update(general=general)
    assert general["Router Id"] == "R1" and general["Mode"] == "standalone"
    assert any(li["role"] == "normal" for li in listeners)
    assert addresses == []
    refused = qdmanage(router, "R1", "query", "--type=nosuch", expect_ok=False)
    assert refused.returncode != 0 and f"No such entity type '{PREFIX}nosuch'" in refused.stdout + refused.stderr


@pytest.mark.spec("MGMT-NODE-1")
def test_the_node_is_also_reached_by_its_own_type(router, details):
    """A request that names the management node (type org.amqp.management, name self) is the node's."""
    with management(router) as mgmt:
        answer = mgmt.call("GET-OPERATIONS", type=NODE_TYPE, name="self", entityType=PREFIX + "router.link")
    details.update(answer=repr(answer.body))
    assert answer.code == 200
    assert "READ" in answer.body[PREFIX + "router.link"]


HUGE_NAME = 65536  # characters: the name-huge input of the frame fuzzer's management family (harness/fuzz/hostile.py)


@pytest.mark.spec("MGMT-STATUS-2", "MGMT-HOSTILE-1")
@pytest.mark.parametrize("entity_type, key", [("router.config.address", "identity"), ("listener", "name")],
                         ids=["core-type-identity", "agent-type-name"])
def test_a_read_naming_a_huge_name_is_refused_and_the_node_goes_on_answering(router, details, entity_type, key):
    """A READ whose name or identity is 65,536 characters names no entity: it is refused (404, or another error
    status), and requests after it are answered as before. qdrouterd's core agent serves router.config.*, its python
    agent listener: one of each. (Found by `interop fuzz --frames` on qdrouterd 1.19.0, docs/fuzzing.md.)"""
    with management(router, timeout=5) as mgmt:  # an answer takes milliseconds: 5 s is the no-answer verdict
        huge = mgmt.call("READ", type=entity_type, **{key: "x" * HUGE_NAME})
        details.update(huge=[huge.code, (huge.description or "")[:200]])
        # (judged before asking again: a node that gave no answer fails here, not after three more 5 s waits)
        assert huge.code is not None, f"no answer to a READ with a {HUGE_NAME}-character {key}: {huge.description}"
        assert 400 <= huge.code < 600, f"a READ with a {HUGE_NAME}-character {key} was answered {huge.code}"
        after = [mgmt.call("READ", type=entity_type, name="mgmt-none") for _ in range(3)]
    details.update(after=[[a.code, a.description] for a in after])
    assert [a.code for a in after] == [404] * 3, f"the requests after it: {details['after']}"


# ---- UPDATE of a router.link (qdrouter.json: router.link allows UPDATE; adminStatus, enabled or disabled, is the
# attribute it marks writable) -----------------------------------------------------------------------------------

LINK_VIEW = ["linkName", "linkDir", "identity", "adminStatus", "operStatus"]


@pytest.mark.spec("MGMT-UPDATE-1", "MGMT-TOOLS-1")
def test_an_update_of_a_link_is_answered_with_the_link_as_it_then_is(router, clients, details):
    """UPDATE adminStatus=disabled of a consumer's link, by identity (the client) and by identity through qdmanage,
    and by name: each is answered 200 with the link's actual attributes (the draft: they MAY differ from those
    asked for), and what the answer says is what the link is: management shows the same adminStatus, and a link
    the answer calls enabled still carries messages."""
    need_tools()
    address = unique("mgmt.update")
    receiver = clients.connect(router.client_url("consumer")).receiver(address)
    with management(router) as mgmt:
        link = link_row(mgmt, receiver.name, "out")
        by_identity = mgmt.call("UPDATE", type="router.link", identity=link["identity"],
                                body={"adminStatus": "disabled"})
        through_tool = qdmanage(router, "R1", "update", "--type=link", f"--identity={link['identity']}",
                                "adminStatus=disabled")
        by_name = mgmt.call("UPDATE", type="router.link", name=receiver.name, body={"adminStatus": "disabled"})
        after = [r for r in mgmt.query("router.link", LINK_VIEW) if r["identity"] == link["identity"]]
    details.update(by_identity=[by_identity.code, by_identity.description], by_name=[by_name.code, by_name.description],
                   admin_status=(by_identity.body or {}).get("adminStatus"), after=after)
    assert (by_identity.code, by_identity.description) == (200, "OK")
    assert by_name.code == 200
    answered = by_identity.body
    for shown in (answered, through_tool, by_name.body):
        assert shown["identity"] == link["identity"] and shown["linkName"] == receiver.name
        assert shown["adminStatus"] in ("enabled", "disabled")
    assert through_tool["adminStatus"] == by_name.body["adminStatus"] == answered["adminStatus"]
    if answered["adminStatus"] == "enabled":  # as it was: still attached, still a destination
        assert [r["adminStatus"] for r in after] == ["enabled"], f"management then shows {after}"
        sender = clients.connect(router.client_url("producer")).sender(address)
        sender.send(3)
        assert {o.outcome for o in sender.wait_outcomes(3).values()} == {"accepted"}
        assert len(receiver.wait_received(3)) == 3
    else:  # disabled: management shows it so, or the link is gone
        assert all(r["adminStatus"] == "disabled" for r in after), f"management then shows {after}"


@pytest.mark.spec("MGMT-UPDATE-2")
def test_an_update_of_a_link_without_admin_status_or_a_link_is_refused(router, clients, details):
    """qdrouterd's core agent: an UPDATE of a router.link whose body has no adminStatus (empty, or only attributes
    the schema does not let an UPDATE change) or that names no link is a 400; one naming a link that does not exist
    is a 404."""
    receiver = clients.connect(router.client_url("consumer")).receiver(unique("mgmt.update"))
    with management(router) as mgmt:
        link = link_row(mgmt, receiver.name, "out")
        seen = {
            "read-only attribute": mgmt.call("UPDATE", type="router.link", identity=link["identity"],
                                             body={"capacity": 5}),
            "empty body": mgmt.call("UPDATE", type="router.link", identity=link["identity"], body={}),
            "no name or identity": mgmt.call("UPDATE", type="router.link", body={"adminStatus": "disabled"}),
            "no such link": mgmt.call("UPDATE", type="router.link", identity="987654321",
                                      body={"adminStatus": "disabled"}),
        }
        still = link_row(mgmt, receiver.name, "out")
    details.update({k: [v.code, v.description] for k, v in seen.items()})
    for what in ("read-only attribute", "empty body", "no name or identity"):
        assert (seen[what].code, seen[what].description) == (400, "Bad Request"), f"{what}: {seen[what]}"
    assert (seen["no such link"].code, seen["no such link"].description) == (404, "Not Found")
    assert still["capacity"] == link["capacity"] and still["adminStatus"] == link["adminStatus"]


@pytest.mark.spec("MGMT-UPDATE-2")
@pytest.mark.parametrize("body", [{"adminStatus": "bogus"}, {"adminStatus": "enabled", "nosuch": 1}],
                         ids=["value-outside-the-schema", "unknown-attribute"])
def test_an_update_of_a_link_outside_its_schema_is_refused(router, clients, details, body):
    """The draft: an UPDATE with an attribute the entity does not have, or a value the attribute cannot take
    (qdrouter.json: adminStatus is enabled or disabled), MUST be refused with 400."""
    receiver = clients.connect(router.client_url("consumer")).receiver(unique("mgmt.update"))
    with management(router) as mgmt:
        link = link_row(mgmt, receiver.name, "out")
        answer = mgmt.call("UPDATE", type="router.link", identity=link["identity"], body=body)
    details.update(answer=[answer.code, answer.description])
    assert answer.code == 400, f"UPDATE router.link {body}: {answer.code} {answer.description}"


# ---- GET-SCHEMA (qdrouterd's management node: `qdmanage get-schema`) ---------------------------------------------


@pytest.mark.spec("MGMT-SCHEMA-1", "MGMT-TOOLS-1")
def test_get_schema_describes_every_type_the_node_serves(router, details):
    """GET-SCHEMA (and `qdmanage get-schema`, which asks it) gives the schema as qdrouterd's agent dumps it: the
    prefix and, per entity type, its fully qualified name, operations and attributes (each with its type); they
    agree with what GET-OPERATIONS and GET-ATTRIBUTES say of every type. GET-JSON-SCHEMA is the same as JSON."""
    need_tools()
    with management(router) as mgmt:
        schema = mgmt.expect(mgmt.node_call("GET-SCHEMA"), 200).body
        as_json = mgmt.expect(mgmt.node_call("GET-JSON-SCHEMA"), 200).body
        operations = mgmt.expect(mgmt.node_call("GET-OPERATIONS"), 200).body
        attributes = mgmt.expect(mgmt.node_call("GET-ATTRIBUTES"), 200).body
    printed = qdmanage(router, "R1", "get-schema")
    types = schema["entityTypes"]
    details.update(types=len(types), operations=len(operations))
    assert printed == json.loads(json.dumps(schema)), "qdmanage get-schema printed another schema"
    assert json.loads(as_json) == printed
    assert schema["prefix"] == PREFIX.rstrip(".")
    by_name = {entry["fullyQualifiedType"]: entry for entry in types.values()}
    for type_name, allowed in operations.items():
        entry = by_name.get(type_name) or by_name.get(PREFIX + type_name)
        assert entry is not None, f"GET-SCHEMA lacks {type_name}, which GET-OPERATIONS lists"
        assert entry.get("operations", []) == list(allowed), type_name
        assert list(entry["attributes"]) == [a for a in attributes[type_name] if a != "type"], type_name
        assert all("type" in declared for declared in entry["attributes"].values()), type_name
    assert by_name[PREFIX + "router.link"]["attributes"]["adminStatus"]["type"] == ["enabled", "disabled"]
    assert by_name[PREFIX + "sslProfile"]["operations"] == ["CREATE", "DELETE", "READ"]
