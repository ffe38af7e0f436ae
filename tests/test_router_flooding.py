"""What an interior reference router tells its neighbours, and what it takes from them (interrouter.py).

The mesh suites see the results of flooding from outside (a consumer two hops away is reached), but whether a
router learns a record first hand or through a neighbour's flood depends on the order in which connections come up,
so they cannot pin down each rule. These tests drive one router's Mesh with control messages and read what it sends:

- a record that is news (a newer sequence number from its origin) goes on to every neighbour but the one it came
  from, and changes the network as this router sees it; a record seen before goes nowhere;
- a router says so when the link routes it can serve shrink, not only when they grow (a neighbour would otherwise
  keep routing attaches for a prefix to a router whose broker is gone);
- edge addresses are taken from edge routers only.

The router below the Mesh is a stand-in that records the calls the Mesh makes: this is a unit test of the protocol
logic; the protocol between real router processes is what suites/mesh and tests/test_router_mesh_path.py check.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from proton import Message

from reference.router.interrouter import Mesh, Neighbour
from reference.router.state import state_of


class RecordingRouter:
    """The calls a Mesh makes on its router."""

    router_id = "R2"

    def __init__(self):
        self.network_changes = 0
        self.edge_calls: list[tuple[str, set]] = []

    def network_changed(self) -> None:
        self.network_changes += 1

    def edge_addresses(self, neighbour, keys: set) -> None:
        self.edge_calls.append((neighbour.router_id, keys))

    def reach_for_edge(self, neighbour) -> set:
        return set()


@pytest.fixture
def mesh(monkeypatch):
    """R2, an interior router with interior neighbours R1 and R3 and an edge E1; what it sends is recorded."""
    router = RecordingRouter()
    mesh = Mesh(router, "interior")
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(mesh, "_send", lambda neighbour, body: sent.append((neighbour.router_id, body)))
    for rid in ("R1", "R3"):
        mesh.neighbours[rid] = Neighbour(connection=SimpleNamespace(), router_id=rid)
    mesh.edges["E1"] = Neighbour(connection=SimpleNamespace(), router_id="E1", edge=True)
    return SimpleNamespace(mesh=mesh, router=router, sent=sent)


def _from(mesh: Mesh, rid: str, body: dict) -> None:
    """A control message from neighbour `rid` (interior or edge)."""
    neighbour = mesh.neighbours.get(rid) or mesh.edges[rid]
    state_of(neighbour.connection, create=True).neighbour = neighbour
    mesh.control_message(SimpleNamespace(connection=neighbour.connection), Message(body=body))


@pytest.mark.parametrize("op,field,value", [("LSU", "neighbours", {"R2": 1, "R4": 1}),
                                            ("MAU", "addresses", ["far.q"]),
                                            ("LRU", "patterns", ["in:b2", "out:b2"])])
def test_a_record_that_is_news_goes_to_every_other_neighbour_once(mesh, op, field, value):
    record = {"op": op, "origin": "R3", "seq": 7, field: value}
    _from(mesh.mesh, "R3", record)
    assert mesh.sent == [("R1", record)], "news goes on to every neighbour but the one it came from, edges excluded"
    assert mesh.router.network_changes == 1, "news changes the network as this router sees it"

    mesh.sent.clear()
    _from(mesh.mesh, "R1", dict(record))  # the same record, back through the other neighbour
    _from(mesh.mesh, "R3", dict(record, seq=6))  # an older one from its origin
    assert mesh.sent == [] and mesh.router.network_changes == 1, "a record seen before (or older) goes nowhere"


def test_a_newer_link_state_record_replaces_the_paths_it_changes(mesh):
    _from(mesh.mesh, "R3", {"op": "LSU", "origin": "R3", "seq": 3, "neighbours": {"R2": 1}})
    _from(mesh.mesh, "R1", {"op": "LSU", "origin": "R1", "seq": 3, "neighbours": {"R2": 1}})
    mesh.mesh._publish_link_state()  # R2's own record: R1 and R3
    assert set(mesh.mesh.routes()) == {"R1", "R3"}
    mesh.sent.clear()
    _from(mesh.mesh, "R3", {"op": "LSU", "origin": "R3", "seq": 4, "neighbours": {}})  # R3 lost R2
    assert [rid for rid, _ in mesh.sent] == ["R1"], "the newer record is flooded"
    assert set(mesh.mesh.routes()) == {"R1"}, "a link only one end still lists is no path"


def test_a_router_says_so_when_its_link_routes_shrink_and_only_when_they_change(mesh):
    mesh.mesh.publish_link_routes({"in:b2", "out:b2", "in:b3"})
    mesh.mesh.publish_link_routes({"in:b2", "out:b2"})  # B3's connection lost
    mesh.mesh.publish_link_routes({"in:b2", "out:b2"})  # nothing new
    mesh.mesh.publish_link_routes(set())  # B2's lost too
    published = [body["patterns"] for rid, body in mesh.sent if rid == "R1"]
    assert published == [["in:b2", "in:b3", "out:b2"], ["in:b2", "out:b2"], []]
    seqs = [body["seq"] for rid, body in mesh.sent if rid == "R1"]
    assert seqs == sorted(set(seqs)), "each record is newer than the last, so that every neighbour takes it"
    assert mesh.mesh.state.link_routes["R2"][1] == frozenset(), "its own view follows too"


def test_edge_addresses_are_taken_from_edge_routers_only(mesh):
    _from(mesh.mesh, "R1", {"op": "EDGE_ADDR", "addresses": ["stolen.q"]})  # an interior neighbour: ignored
    assert mesh.router.edge_calls == []
    _from(mesh.mesh, "E1", {"op": "EDGE_ADDR", "addresses": ["edge.q"]})
    assert mesh.router.edge_calls == [("E1", {"edge.q"})]


def test_a_restarted_router_s_records_are_newer_than_those_of_the_router_it_replaces():
    """Neighbours keep the records of a router that was lost; the same router started again must be heard."""
    before = Mesh(RecordingRouter(), "interior")
    for n in range(50):
        before.publish_addresses({f"q{n}"})
    after = Mesh(RecordingRouter(), "interior")  # R2 again, its state gone with the old process
    old_seq, _ = before.state.addresses["R2"]
    new_seq, _ = after.state.addresses["R2"]
    assert new_seq > old_seq
