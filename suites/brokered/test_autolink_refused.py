"""An autolink the broker refuses is no destination (003 §12.1.4, §12.1.1.1; AMQP 1.0 §2.6.3).

Topology `autolink-refused`: B1 lets the router's user send to queue.orders only, so it refuses the router's
out-autolink for queue.closed and accepts those for queue.orders, all on the one R1->B1 connection (via the proxy).
"""

import pytest

from harness import history as h
from harness.wait import wait_for

LINK = "R1->B1"
ALLOWED, REFUSED = "queue.orders", "queue.closed"

pytestmark = pytest.mark.requires("waypoint", "store-and-forward", "broker:sasl.plain", "broker-permissions",
                                  "permissions.send-per-queue")


def _stored(sender, deadline_s: float = 30.0) -> None:
    """Send one message at a time until the broker accepts one: the out-autolink is attached again and its answers
    (which come after the refused autolink's, on the same connection) have reached the router."""
    def accepted():
        before = sender.settled_count()
        sender.send(1)
        sender.wait_outcomes(before + 1, timeout=deadline_s)
        return any(o.outcome == "accepted" for o in sender.outcomes.values())
    wait_for(accepted, deadline_s, f"a message to {sender.address} to be accepted by the broker",
             describe=lambda: str(sender.outcome_counts()))


@pytest.mark.spec("BROKERED-REFUSED-1")
def test_a_refused_autolink_gives_its_address_no_credit_even_when_its_answer_comes_slowly(topology, clients,
                                                                                       details):
    """The broker refuses the out-autolink for queue.closed: it answers the attach with no terminus, then detaches
    it with its error (AMQP 1.0 §2.6.3), so that link never carries a message. With no other way to the address, a
    producer there is given no credit (003 §12.1.1.1). That must hold however the two frames arrive: here the
    router reconnects (every autolink is attached again) while what B1 sends comes in 8-byte slices 10 ms apart,
    so the router reads the null-terminus attach well before the detach that carries the error."""
    running = topology("autolink-refused")
    conn = clients.connect(running.client_url("producer"))
    orders = conn.sender(ALLOWED)
    orders.wait_credit(1, timeout=15)
    refused = conn.sender(REFUSED)
    refused.send(1)  # waits at the client: nothing may take it
    faults = running.faults
    try:
        faults.set_enabled(LINK, False)
        faults.toxic(LINK, "slicer", stream="downstream", average_size=8, size_variation=0, delay=10_000)
        faults.set_enabled(LINK, True)
        _stored(orders)
    finally:
        faults.reset()
    granted = [e.data for e in clients.history.events(h.CREDIT, refused.name) if e.data.get("credit", 0) > 0]
    details.update(refused_sent=refused.sent, refused_credit=granted, orders=orders.outcome_counts())
    assert not granted and refused.sent == 0, (
        f"a producer on {REFUSED}, whose only autolink the broker refused, was given credit {granted} and sent "
        f"{refused.sent}")
    assert not refused.outcomes
