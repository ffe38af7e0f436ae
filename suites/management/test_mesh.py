"""Management across a router network: every router's agent is reachable from any router at
`_topo/0/<router-id>/$management`, GET-MGMT-NODES lists them, and qdstat reads a remote router with `-r` and the
network with `-n`. Topology `two-router-mesh` (R2 dials R1)."""

import pytest

from harness.management import ManagementClient
from harness.wait import wait_for

from .support import address_row, management, need_tools, qdstat, unique

N = 10


@pytest.fixture
def mesh(topology):
    return topology("two-router-mesh")


def _nodes(mgmt):
    """GET-MGMT-NODES once both routers are in it, and once R2's agent answers through R1: qdrouterd was seen to
    list R2 a moment before a request to R2's agent was delivered (the request went unanswered)."""
    found = []

    def both():
        found[:] = mgmt.mgmt_nodes()
        return len(found) == 2
    wait_for(both, 15, "both routers in GET-MGMT-NODES", describe=lambda: str(found))
    answers = []
    with ManagementClient(mgmt.url, timeout=2) as probe:
        def answered():
            answers.append(probe.node_call("QUERY", "router", body={"attributeNames": ["id"]},
                                           address="_topo/0/R2/$management").code)
            return answers[-1] == 200
        wait_for(answered, 20, "R2's agent to answer through R1", describe=lambda: str(answers))
    return found


@pytest.mark.spec("MGMT-MESH-1")
def test_every_router_agent_is_reached_through_the_network(mesh, details):
    with management(mesh, "R1") as mgmt:
        nodes = _nodes(mgmt)
        remote = mgmt.query("router", ["id", "mode"], address="_topo/0/R2/$management")
        local = mgmt.query("router", ["id"], address="_topo/0/R1/$management")
        roles = {row["role"] for row in mgmt.query("connection", ["role"], address="_topo/0/R2/$management")}
    details.update(network_nodes=nodes, remote=remote)
    assert sorted(nodes) == ["amqp:/_topo/0/R1/$management", "amqp:/_topo/0/R2/$management"]
    assert remote == [{"id": "R2", "mode": "interior"}] and local == [{"id": "R1"}]
    assert "inter-router" in roles


@pytest.mark.spec("MGMT-MESH-1", "MGMT-TOOLS-1")
def test_qdstat_shows_the_network_and_a_remote_router(mesh, details):
    need_tools()
    with management(mesh, "R1") as mgmt:
        _nodes(mgmt)
    nodes = {row["router-id"]: row for row in qdstat(mesh, "R1", "-n")}
    remote_general = {row["attr"]: row["value"] for row in qdstat(mesh, "R1", "-r", "R2", "-g")}
    remote_conns = qdstat(mesh, "R1", "-r", "R2", "-c")
    details.update(network_nodes=nodes, remote_conns=remote_conns)
    assert set(nodes) == {"R1", "R2"}
    assert nodes["R1"]["next-hop"] == "(self)"
    assert nodes["R2"]["next-hop"] == "-" and nodes["R2"]["link"].isdigit()  # a neighbour: reached by its link
    assert remote_general["Router Id"] == "R2" and remote_general["Mode"] == "interior"
    assert remote_general["Nodes"] == "1"
    assert any(row["role"] == "inter-router" and row["dir"] == "out" for row in remote_conns)


@pytest.mark.spec("MGMT-COUNTERS-2", "MGMT-MESH-1")
def test_address_counters_on_both_routers_agree_with_traffic_across_the_network(mesh, clients, details):
    address = unique("mgmt.mesh")
    far = clients.connect(mesh.client_url("far"))
    receiver = far.receiver(address)
    near = clients.connect(mesh.client_url("producer"))
    sender = near.sender(address)
    sender.send(N)
    assert {o.outcome for o in sender.wait_outcomes(N).values()} == {"accepted"}
    receiver.wait_received(N)
    rows = {}
    with management(mesh, "R1") as mgmt:
        def counted():
            rows["R1"] = address_row(mgmt, address)
            remote = [r for r in mgmt.query("router.address", address="_topo/0/R2/$management")
                      if r["name"] == "M0" + address]
            rows["R2"] = remote[0] if remote else None
            return rows["R1"] and rows["R2"] and rows["R1"]["deliveriesIngress"] == N \
                and rows["R2"]["deliveriesEgress"] == N
        wait_for(counted, 10, "both routers to count the traffic", describe=lambda: str(rows))
    details.update(R1={k: rows["R1"][k] for k in ("deliveriesIngress", "deliveriesEgress", "remoteCount")},
                   R2={k: rows["R2"][k] for k in ("deliveriesIngress", "deliveriesEgress", "subscriberCount")})
    assert (rows["R1"]["deliveriesEgress"], rows["R1"]["subscriberCount"], rows["R1"]["remoteCount"]) == (0, 0, 1)
    assert (rows["R2"]["deliveriesIngress"], rows["R2"]["subscriberCount"]) == (0, 1)
    # Transit: what a router sent on to another router (qdrouter.json: "transited this router to another router")
    assert (rows["R1"]["deliveriesTransit"], rows["R2"]["deliveriesTransit"]) == (N, 0)


@pytest.mark.spec("MGMT-MESH-1", "MGMT-TOOLS-1")
@pytest.mark.requires("edge")
def test_an_edge_router_agent_is_reached_through_its_interior_router(topology, details):
    """qdstat -e lists an interior router's edge connections; `--edge-router E1` reads an edge router through the
    interior one (its agent at `_edge/E1/$management`). Topology `edge-interior`: E1 and E2 attached to R1."""
    need_tools()
    edges = topology("edge-interior")
    with management(edges, "R1") as mgmt, ManagementClient(mgmt.url, timeout=2) as probe:
        answers = []

        def answered():
            answer = probe.node_call("QUERY", "router", body={"attributeNames": ["id", "mode"]},
                                     address="_edge/E1/$management")
            answers.append(answer.code)
            return answer.body if answer.code == 200 else None
        found = wait_for(answered, 20, "E1's agent to answer through R1", describe=lambda: str(answers))
    # E1 answering says nothing of E2, which may still be connecting on a loaded machine: wait for both to be listed
    listed: list = []

    def both_edges():
        listed[:] = qdstat(edges, "R1", "-e")
        return listed if sorted(row["container"] for row in listed) == ["E1", "E2"] else None
    connections = wait_for(both_edges, 20, "qdstat -e on R1 to list E1 and E2",
                           describe=lambda: str(sorted(row["container"] for row in listed)))
    general = {row["attr"]: row["value"] for row in qdstat(edges, "R1", "--edge-router", "E1", "-g")}
    details.update(edge_connections=connections, edge_general={k: general.get(k) for k in ("Router Id", "Mode")})
    assert found["results"] == [["E1", "edge"]]
    assert sorted(row["container"] for row in connections) == ["E1", "E2"]
    assert all(row["role"] == "edge" and row["dir"] == "in" for row in connections)
    assert (general["Router Id"], general["Mode"]) == ("E1", "edge")
