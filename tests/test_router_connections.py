"""Connection life on the reference router (reference/router/connections.py): a connection's role and cost from
the listener or connector it came by, and what its loss ends. On proton engine objects, without sockets."""

from __future__ import annotations

from types import SimpleNamespace

from proton import Endpoint

from reference.router.config import parse_config
from reference.router.router import Router
from reference.router.state import state_of
from tests.router_engine import forget_router_state, new_connection  # noqa: F401 (a fixture)


CONFIG = """
router {
    mode: standalone
    id: RT
}
listener {
    name: mesh
    host: 127.0.0.1
    port: 0
    role: route-container
    cost: 7
}
"""


def make_router() -> Router:
    return Router(parse_config(CONFIG, "test.conf"))


def test_an_accepted_connection_takes_its_listeners_role_and_cost_and_is_offered_anonymous_relay():
    router = make_router()
    acceptor = object()
    router.listener_of[acceptor] = router.config.listeners[0]
    conn = new_connection()
    conn._acceptor = acceptor
    router.on_connection_init(SimpleNamespace(connection=conn))
    state = state_of(conn)
    assert state.role == "route-container" and state.cost == 7 and state.name == "mesh"
    assert conn.container == "RT" and list(conn.offered_capabilities) == ["ANONYMOUS-RELAY"]
    assert conn in router._connections


def test_a_dialled_connection_takes_its_connectors_cost_and_name_and_an_unknown_one_is_normal():
    router = make_router()
    dialled = new_connection()
    dialled.router_dialer = SimpleNamespace(config=SimpleNamespace(name="B1", cost=3))
    router.on_connection_init(SimpleNamespace(connection=dialled))
    assert (state_of(dialled).cost, state_of(dialled).name, state_of(dialled).role) == (3, "B1", "normal")
    other = new_connection()
    router.on_connection_init(SimpleNamespace(connection=other))
    assert (state_of(other).cost, state_of(other).name, state_of(other).role) == (1, None, "normal")


def test_a_lost_connection_takes_its_consumers_and_producers_with_it_once():
    router = make_router()
    conn = new_connection()
    session = conn.session()
    sender, receiver = session.sender("c"), session.receiver("p")
    sender.open()
    receiver.open()
    consumer = router.add_consumer(sender, "orders")
    producer = router.add_producer(receiver, "orders")
    state = state_of(conn)
    router._dirty.add(state)
    router._connection_gone(conn)
    assert consumer.closed and producer.closed and router.consumers == {} and router.producers == {}
    assert state.closed and state not in router._dirty
    router._connection_gone(conn)  # the transport closing after the remote close: harmless
    assert state.closed


def test_a_link_routed_pairs_far_end_is_closed_when_the_near_ends_connection_is_lost():
    router = make_router()
    near_conn, far_conn = new_connection(), new_connection()
    near, far = near_conn.session().receiver("near"), far_conn.session().sender("far")
    near.open()
    far.open()
    pair = SimpleNamespace(near=near, far=far, closed=False)
    near.router_pair = pair
    router.connections._routed_links_lost(near_conn)
    assert pair.closed and far.state & Endpoint.LOCAL_CLOSED
