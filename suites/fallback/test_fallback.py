"""Fallback destinations for undeliverable messages (003 §12.1.4.3)."""

import pytest

from harness.wait import wait_for

pytestmark = pytest.mark.requires("fallback", "store-and-forward")

ADDRESS = "fb.orders"


@pytest.mark.spec("FALLBACK-1", "FALLBACK-2")
def test_fallback_stores_then_drains_in_order_interleaved_with_new_messages(topology, clients, details):
    running = topology("fallback")
    sender = clients.connect(running.client_url("producer")).sender(ADDRESS)
    sender.wait_credit(1, timeout=15)  # no consumer, but the fallback destination is reachable
    sender.send(10)
    assert {o.outcome for o in sender.wait_outcomes(10, timeout=15).values()} == {"accepted"}
    receiver = clients.connect(running.client_url("consumer")).receiver(ADDRESS)
    sender.send(10)  # produced while the stored ones drain
    wait_for(lambda: len(receiver.seqs(sender.name)) >= 20, 15, "stored and new messages to arrive",
             describe=lambda: f"{len(receiver.seqs(sender.name))} received")
    seqs = receiver.seqs(sender.name)
    stored = [s for s in seqs if s < 10]
    details.update(order=seqs)
    assert sorted(seqs) == list(range(20)), "every message exactly once"
    assert stored == list(range(10)), "messages from the fallback destination keep their original order"
    assert [s for s in seqs if s >= 10] == list(range(10, 20)), "new messages keep their order too"
