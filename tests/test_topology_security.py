"""The security fields of a topology (harness/topology_security.py): what they give, and a one-line error naming
the node or link and the field for each way they can be wrong."""

import pytest

from harness.topology import LinkTls, ListenerTls, NodeAccess, Permission, TopologyError, parse_topology

MESH = {
    "name": "t",
    "cas": ["clients-ca", "routers-ca", "rogue-ca"],
    "nodes": {
        "R1": {"role": "router", "mode": "interior", "users": {"alice": "alice-pw"},
               "access": {"authenticate": True, "mechanisms": ["PLAIN", "EXTERNAL"],
                          "tls": {"ca": "clients-ca", "client_certs": "optional"}}},
        "R2": {"role": "router", "mode": "interior"},
        "R3": {"role": "router", "mode": "interior"},
    },
    "links": [
        {"from": "R2", "to": "R1", "role": "inter-router", "mechanisms": ["EXTERNAL"],
         "tls": {"ca": "routers-ca", "trusts": "rogue-ca"}},
        {"from": "R3", "to": "R1", "role": "inter-router", "mechanisms": ["EXTERNAL"],
         "tls": {"ca": "routers-ca", "dialler_ca": "rogue-ca", "verify_hostname": False}},
    ],
}

BROKER = {
    "name": "t",
    "nodes": {"B1": {
        "role": "broker",
        "users": {"alice": "a-pw", "bob": "b-pw"},
        "access": {"authenticate": True},
        "roles": {"senders": ["alice"], "receivers": ["bob", "alice"]},
        "permissions": [{"match": "orders.#", "send": ["senders"], "consume": ["receivers"]}],
    }},
}


def test_router_mesh_security():
    topo = parse_topology(MESH)
    assert topo.cas == ("clients-ca", "routers-ca", "rogue-ca")
    r1 = topo.node("R1")
    assert r1.users == {"alice": "alice-pw"}
    tls = ListenerTls("clients-ca", "optional", True, "localhost")
    assert r1.access == NodeAccess(True, ("PLAIN", "EXTERNAL"), tls)
    assert topo.listener_tls("R1", "clients") == r1.access.tls
    assert topo.listener_mechanisms("R1", "clients") == (True, ("PLAIN", "EXTERNAL"))
    # Both links land on R1's one inter-router listener: mutual TLS from routers-ca, EXTERNAL only.
    assert topo.listener_tls("R1", "inter-router") == ListenerTls("routers-ca", "required", True, "localhost")
    assert topo.listener_mechanisms("R1", "inter-router") == (True, ("EXTERNAL",))
    first, second = topo.links
    assert first.tls == LinkTls("routers-ca", None, "rogue-ca", True, "localhost")
    assert (first.tls.dialler_issuer, first.tls.dialler_trust) == ("routers-ca", "rogue-ca")
    assert (second.tls.dialler_issuer, second.tls.dialler_trust) == ("rogue-ca", "routers-ca")
    assert topo.listener_tls("R2", "clients") is None
    assert topo.listener_mechanisms("R2", "clients") == (False, ("ANONYMOUS",))


def test_broker_permissions():
    b1 = parse_topology(BROKER).node("B1")
    assert b1.access.mechanisms == ("PLAIN",)  # the default once authentication is on
    assert b1.roles == {"senders": ("alice",), "receivers": ("bob", "alice")}
    (perm,) = b1.permissions
    assert perm == Permission("orders.#", send=("senders",), consume=("receivers",))
    assert perm.roles_for("create_address") == ()
    with pytest.raises(KeyError):
        perm.roles_for("browse")


def test_no_security_is_the_old_default():
    topo = parse_topology({"name": "t", "nodes": {"R1": {"role": "router"}}})
    assert topo.cas == () and topo.node("R1").access == NodeAccess() and topo.node("R1").users == {}


def _with(base, path, value):
    """A deep copy of `base` with the item at `path` (keys and indexes) set to `value`."""
    import copy
    data = copy.deepcopy(base)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(("data", "expected"), [
    (_with(MESH, ["cas"], "clients-ca"), "field 'cas': expected a list of CA names"),
    (_with(MESH, ["cas"], ["a", "a"]), "field 'cas[1]': 'a' is listed twice"),
    (_with(MESH, ["nodes", "R1", "access", "tls", "ca"], "other-ca"),
     "node R1: field 'access.tls.ca': expected a CA named in 'cas' (clients-ca, routers-ca, rogue-ca)"),
    (_with(MESH, ["nodes", "R1", "access", "mechanisms"], ["PLAIN", "ANONYMOUS"]),
     "node R1: field 'access.mechanisms': ANONYMOUS with authenticate: true"),
    (_with(MESH, ["nodes", "R1", "access", "mechanisms"], ["KERBEROS"]),
     "node R1: field 'access.mechanisms[0]': expected one of ANONYMOUS, PLAIN, EXTERNAL, got 'KERBEROS'"),
    (_with(MESH, ["nodes", "R1", "access", "tls", "client_certs"], "none"),
     "node R1: field 'access.mechanisms': EXTERNAL needs access.tls with client_certs optional or required"),
    (_with(MESH, ["nodes", "R1", "access", "tls", "client_certs"], "maybe"),
     "node R1: field 'access.tls.client_certs': expected one of none, optional, required, got 'maybe'"),
    (_with(MESH, ["nodes", "R1", "access", "tls", "hostname"], "no such host"),
     "node R1: field 'access.tls.hostname': expected a DNS name"),
    (_with(MESH, ["nodes", "R1", "access", "tlss"], {}),
     "node R1: field 'access.tlss': unknown field; expected one of authenticate, mechanisms, tls"),
    (_with(MESH, ["nodes", "R1", "users"], {"alice": ""}), "node R1: field 'users.alice': expected a non-empty"),
    (_with(MESH, ["nodes", "R1", "users"], {}), "node R1: field 'access.mechanisms': PLAIN needs 'users'"),
    (_with(MESH, ["nodes", "R1", "roles"], {}), "node R1: field 'roles': not a field of a router node"),
    (_with(MESH, ["cas"], []), "node R1: field 'access.tls.ca': expected a CA named in 'cas' (none: add a top-level"),
    (_with(MESH, ["links", 0, "mechanisms"], ["PLAIN", "EXTERNAL"]),
     "links[0]: field 'mechanisms': a dialler uses one mechanism; got PLAIN, EXTERNAL"),
    (_with(MESH, ["links", 0, "mechanisms"], ["PLAIN"]), "links[0]: field 'mechanisms': PLAIN needs 'user' and"),
    (_with(MESH, ["links", 0, "tls"], None), "links[0]: field 'mechanisms': EXTERNAL needs 'tls' on the link"),
    (_with(MESH, ["links", 1, "tls", "ca"], "rogue-ca"),
     "links[1]: field 'tls': it shares the inter-router listener of R1 with links[0]"),
    (_with(MESH, ["links", 1, "mechanisms"], ["ANONYMOUS"]),
     "links[1]: field 'tls': it shares the inter-router listener of R1 with links[0]"),
    (_with(BROKER, ["nodes", "B1", "access", "authenticate"], False),
     "node B1: field 'permissions': need access.authenticate: true"),
    (_with(BROKER, ["nodes", "B1", "roles", "senders"], ["carol"]),
     "node B1: field 'roles.senders[0]': expected a user of 'users' (alice, bob), got 'carol'"),
    (_with(BROKER, ["nodes", "B1", "permissions", 0, "send"], ["admins"]),
     "node B1: field 'permissions[0].send[0]': expected a role of 'roles' (senders, receivers), got 'admins'"),
    (_with(BROKER, ["nodes", "B1", "permissions", 0, "browse"], ["senders"]),
     "node B1: field 'permissions[0].browse': unknown field"),
])
def test_security_field_errors(data, expected):
    with pytest.raises(TopologyError) as info:
        parse_topology(data)
    message = str(info.value)
    assert expected in message, message
    assert "\n" not in message


def test_link_onto_a_clients_listener_must_match_its_tls():
    data = {
        "name": "t", "cas": ["ca1", "ca2"],
        "nodes": {"B1": {"role": "broker", "access": {"tls": {"ca": "ca1"}}}, "B2": {"role": "broker"}},
        "links": [{"from": "B2", "to": "B1", "role": "normal", "tls": {"ca": "ca1", "trusts": "ca2"}}],
    }
    topo = parse_topology(data)
    assert topo.listener_tls("B1", "clients") == ListenerTls("ca1")
    bad = _with(data, ["links", 0, "tls", "ca"], "ca2")
    with pytest.raises(TopologyError, match="links\\[0\\]: field 'tls': ca/hostname must be those of B1's access.tls"):
        parse_topology(bad)
    plain = _with(data, ["nodes", "B1", "access"], {})
    with pytest.raises(TopologyError, match="lands on the clients listener of B1, which has no TLS"):
        parse_topology(plain)
