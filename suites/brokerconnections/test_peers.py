"""A broker as a router's peer (002_f23507c2891d6d06.txt, "Peers"): the broker dials the router and becomes
the store of the router's waypoint addresses, with no connector and no autolinks on the router."""

import pytest

from harness import checkers
from harness.wait import wait_for

from .conftest import WAIT, depth, send_accepted, sender, stats, wait_connected

pytestmark = pytest.mark.requires("broker-connection", "waypoint", "store-and-forward")

N = 20


@pytest.mark.spec("BROKERCONN-PEER-1")
def test_a_peer_broker_stores_the_waypoint_and_delivers_in_order_later(topology, clients, details):
    running = topology("broker-peer-router")
    assert not running.topology.nodes["R1"].autolinks, "the topology must leave the router without autolinks"
    b1 = running["B1"]
    wait_connected(b1, "router")
    before = depth(b1, "queue.orders")
    snd = sender(clients.connect(running.client_url("producer")), "queue.orders")
    snd.wait_credit(1, timeout=WAIT)  # credit comes from the broker's own link: the waypoint's consumer
    send_accepted(snd, N)
    # Nobody consumes on the router, so the router gives the broker's outgoing link no credit: all stay stored.
    wait_for(lambda: depth(b1, "queue.orders") >= before + N, WAIT, f"{N} messages stored on B1's queue.orders",
             describe=lambda: str(stats(b1, "queue.orders")))
    stored = depth(b1, "queue.orders") - before
    receiver = clients.connect(running.client_url("consumer")).receiver("queue.orders")
    wait_for(lambda: len(receiver.seqs(snd.name)) >= N, WAIT, f"the {N} stored messages at a consumer on R1",
             describe=lambda: f"{len(receiver.seqs(snd.name))} received")
    receiver.conn.sync()
    verdict = checkers.compose(clients.history, **checkers.every_message_once(snd.name, receiver.name))
    details.update(stored=stored, received=len(receiver.seqs(snd.name)))
    verdict.fill(details)
    assert stored == N, f"B1 stored {stored} of the {N} messages while no consumer was attached"
    assert verdict.ok, f"the stored messages delivered once each, in the order they were sent:\n{verdict.failures()}"
