"""The reference mesh's message path between routers, seen from real clients of two real router processes.

- A message crosses R1 -> R2 with the router's own annotations (x-opt-interop.to/dests) spliced in; R2 takes
  them off again before its consumer gets the message, which then carries exactly the annotations its
  producer set (as qdrouterd does with its x-opt-qd.* ones, `stripAnnotations` by default).
- R2 gives R1's data link its credit back once it has passed a message on, not when the consumer settles it:
  the ingress router already holds each producer to its window until the outcome, and tying the
  inter-router window to the outcome too made a mesh one window per round trip through both routers. Seen
  from outside: unsettled messages from several producers on R1 reach a consumer on R2 beyond one
  inter-router window (250).
"""

from __future__ import annotations

import pytest
from proton import Message, symbol
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection

from harness.clients import Clients
from tests.test_router_credit import R1, R2, start_router  # noqa: F401 - start_router is a fixture

TIMEOUT = 10.0
INTER_ROUTER_WINDOW = 250  # the reference router's link capacity (reference/router/router.py)


@pytest.fixture
def mesh(start_router):  # noqa: F811 - the imported fixture
    r1 = start_router("R1", R1)
    r2 = start_router("R2", R2.format(port=r1.ports["mesh"]))
    return r1, r2


def _wait_route(clients: Clients, r1_url: str, address: str) -> None:
    """Until R1 knows the consumer on R2: a sender on R1 gets credit only then."""
    clients.connect(r1_url).sender(address).wait_credit(1, timeout=TIMEOUT)


@pytest.mark.parametrize("own", [None, {symbol("x-opt-app.trace"): "t1", symbol("x-opt-app.hops"): "2"}],
                         ids=["no-annotations", "producer-annotations"])
def test_a_consumer_behind_a_mesh_gets_the_annotations_its_producer_set_and_no_others(mesh, own):
    r1, r2 = mesh
    address = "mesh.path.annotations"
    consumer = BlockingConnection(r2.url(), timeout=TIMEOUT)
    try:
        receiver = consumer.create_receiver(address, credit=10)
        with Clients() as clients:
            _wait_route(clients, r1.url(), address)
        # Pre-settled, and closed before the consumer looks: one thread drives both blocking connections, so
        # the producer must not wait for an outcome, and its close puts the transfer on the wire first.
        producer = BlockingConnection(r1.url(), timeout=TIMEOUT)
        try:
            producer.create_sender(address, options=AtMostOnce()).send(
                Message(body="across", annotations=own, priority=7))
        finally:
            producer.close()
        got = receiver.receive(timeout=TIMEOUT)
    finally:
        consumer.close()
    assert got.body == "across" and got.priority == 7
    assert (got.annotations or None) == own, (
        f"the consumer on R2 got annotations {got.annotations!r}; its producer set {own!r}")


def test_unsettled_messages_reach_a_consumer_beyond_one_inter_router_window(mesh):
    r1, r2 = mesh
    address = "mesh.path.window"
    per_producer, producers = 200, 2  # each producer within its own window; together more than one inter-router one
    total = per_producer * producers
    with Clients() as clients:
        holder = clients.connect(r2.url()).receiver(address, credit=total, outcome="hold")
        _wait_route(clients, r1.url(), address)
        senders = [clients.connect(r1.url()).sender(address) for _ in range(producers)]
        for sender in senders:
            sender.wait_credit(1, timeout=TIMEOUT)
            sender.send(per_producer)
        # Nothing is settled: with the inter-router window tied to outcomes, R2 would stop at 250 here.
        holder.wait_received(total, timeout=TIMEOUT)
        assert total > INTER_ROUTER_WINDOW
        assert all(sender.settled_count() == 0 for sender in senders), "the consumer settled nothing yet"
        holder.settle("accept")
        for sender in senders:
            sender.wait_outcomes(per_producer, timeout=TIMEOUT)
