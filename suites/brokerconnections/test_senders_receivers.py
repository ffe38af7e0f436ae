"""Senders and receivers of a broker connection (002_f23507c2891d6d06.txt, "Senders and Receivers"): B1 forwards
its queues matching `outbound.#` to B2 and pulls B2's `inbound.jobs` into its own queue of that name."""

import pytest

from harness import checkers
from harness.wait import wait_for

from .conftest import WAIT, depth, send_accepted, sender, wait_connected

pytestmark = pytest.mark.requires("broker-connection", "store-and-forward")

N = 10


def _all_received(receiver, snd, n):
    wait_for(lambda: len(set(receiver.seqs(snd.name))) >= n, WAIT,
             f"{n} messages of {snd.name} at {receiver.name} on {receiver.address}",
             describe=lambda: f"{len(receiver.seqs(snd.name))} received")


@pytest.mark.spec("BROKERCONN-SENDER-1")
def test_a_sender_forwards_the_matching_queues_and_leaves_the_others(topology, clients, details):
    running = topology("broker-bridge")
    b1, b2 = running["B1"], running["B2"]
    wait_connected(b1, "bridge")
    producer = clients.connect(running.client_url("producer"))
    orders, invoices = sender(producer, "outbound.orders"), sender(producer, "outbound.invoices")
    local = clients.connect(running.client_url("local"))
    audit = sender(local, "local.audit")
    audit_before = depth(b1, "local.audit")
    for snd in (orders, invoices, audit):
        send_accepted(snd, N)
    consumer = clients.connect(running.client_url("consumer"))
    at_b2 = {snd.name: consumer.receiver(snd.address) for snd in (orders, invoices)}
    for snd in (orders, invoices):
        _all_received(at_b2[snd.name], snd, N)
    consumer.sync()
    verdicts = {snd.address: checkers.total_queue(clients.history, producer=snd.name,
                                                  receivers=at_b2[snd.name].name, allow_duplicates=False)
                for snd in (orders, invoices)}
    # local.audit matches no element: its messages stay on B1 and B2 never sees the address.
    on_b1 = depth(b1, "local.audit") - audit_before
    on_b2 = depth(b2, "local.audit")
    stayed = local.receiver("local.audit")
    _all_received(stayed, audit, N)
    details.update(forwarded={a: v.delivered for a, v in verdicts.items()}, audit_on_b1=on_b1, audit_on_b2=on_b2,
                   **checkers.checks_details(**{a.replace(".", "_"): v for a, v in verdicts.items()}))
    for address, verdict in verdicts.items():
        assert verdict.ok, f"{address}: {verdict.as_details()}"
    assert on_b1 == N, f"local.audit on B1 holds {on_b1} of the {N} messages sent to it"
    assert on_b2 == 0, f"B2 got {on_b2} local.audit messages; no sender element matches local.audit"


@pytest.mark.spec("BROKERCONN-RECEIVER-1")
def test_a_receiver_pulls_the_remote_queue_into_the_local_one(topology, clients, details):
    running = topology("broker-bridge")
    b1, b2 = running["B1"], running["B2"]
    wait_connected(b1, "bridge")
    snd = sender(clients.connect(running.client_url("remote")), "inbound.jobs")
    send_accepted(snd, N)
    receiver = clients.connect(running.client_url("local")).receiver("inbound.jobs")
    _all_received(receiver, snd, N)
    wait_for(lambda: depth(b2, "inbound.jobs") == 0, WAIT, "B2's inbound.jobs emptied by B1's receiver",
             describe=lambda: f"depth {depth(b2, 'inbound.jobs')}")
    receiver.conn.sync()
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=receiver.name,
                                   allow_duplicates=False)
    details.update(pulled=verdict.delivered, **checkers.checks_details(total_queue=verdict))
    assert verdict.ok, verdict.as_details()
