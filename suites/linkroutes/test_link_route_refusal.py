"""A routed attach the broker refuses (003 §12.2.1: routing is done on attach frames, chained to the broker).

Topology `link-route-secured-broker`: R1 dials B1 as user `router`, which may send to and consume from lr.open.#
only. The broker's refusal of lr.closed.q must reach the client as the broker's, and the routed links it accepted
on the same router connection must keep working.
"""

import pytest

from harness.wait import WaitTimeout, wait_for

from ..conftest import attach_when_routed

pytestmark = pytest.mark.requires("link-route", "broker:sasl.plain", "broker-permissions")

UNAUTHORIZED = "amqp:unauthorized-access"
ALLOWED, REFUSED = "lr.open.q", "lr.closed.q"


def _refusal(conn, role: str) -> dict:
    """How the broker's refusal of a `role` on the refused queue reached the client: `at` (attach: the attach was
    answered with a null terminus, then detached; detach: answered with a terminus, then detached; transfer: for
    a sender whose attach a broker accepts, as it may when it checks send rights per message, SEC-BROKER-SEND-2,
    its message rejected; none: not refused within the deadline) and the `condition` it carried."""
    make = conn.sender if role == "sender" else conn.receiver
    try:
        link = make(REFUSED, timeout=10)
    except ConnectionError as refused:  # "link NAME on ADDRESS was refused: CONDITION"
        return {"at": "attach", "condition": str(refused)}
    sender = role == "sender"
    if sender:
        link.send(1)
    try:
        wait_for(lambda: link.detached.is_set() or (sender and link.outcomes), 10, f"the broker's answer to the {role}")
    except WaitTimeout:
        return {"at": "none", "condition": None, "outcomes": link.outcome_counts() if sender else None}
    if link.detached.is_set():
        return {"at": "detach", "condition": link.condition}
    outcome = next(iter(link.outcomes.values()))
    return {"at": "transfer", "condition": f"{outcome.outcome}: {outcome.condition}"}


@pytest.mark.spec("LINKROUTE-REFUSED-1")
# RabbitMQ checks a publisher's write right on the exchange, and a message to a queue by name goes through the
# default exchange: send rights per queue are what the `permissions.send-per-queue` capability says a broker has.
@pytest.mark.parametrize("role", [pytest.param("sender", marks=pytest.mark.requires("permissions.send-per-queue")),
                                  "receiver"])
def test_an_attach_the_broker_refuses_reaches_the_client_with_the_brokers_error(topology, clients, details, role):
    running = topology("link-route-secured-broker")
    conn = clients.connect(running.client_url("consumer"))
    # Links the broker accepts, first: once they are up the route to B1 is known, so a refusal that follows is B1's.
    sender = attach_when_routed(conn, lambda: conn.sender(ALLOWED, timeout=3))
    receiver = attach_when_routed(conn, lambda: conn.receiver(ALLOWED, credit=10, timeout=3))
    refusal = _refusal(conn, role)
    details.update(refusal=refusal)
    assert UNAUTHORIZED in str(refusal["condition"]), (
        f"the {role} on {REFUSED} should be refused with the broker's {UNAUTHORIZED}, got {refusal}")
    assert refusal["at"] != "detach", (
        f"the refused {role}'s attach was answered with a terminus and then detached ({refusal['condition']}): "
        "AMQP 1.0 §2.6.3 answers a refused attach with a null terminus, so that the client never counts the link "
        "as established")
    assert not conn.ended, "the client's connection stays open when one routed attach is refused"
    # The accepted links still carry messages end to end through the same router connection to B1.
    conn.sync()
    assert not (sender.detached.is_set() or receiver.detached.is_set()), (
        f"the routed links the broker accepted were detached too: sender {sender.condition!r}, receiver "
        f"{receiver.condition!r}")
    _carry_three(sender, receiver, details)


@pytest.mark.spec("LINKROUTE-REFUSED-1")
def test_links_routed_after_a_refusal_reach_the_broker(topology, clients, details):
    """003 §12.2.1: each attach is routed on its own, so a refusal leaves the route usable: once the broker has
    refused the receiver on lr.closed.q, however it did so (a detach, or, as RabbitMQ does, by ending the session
    the router used for it), a sender and a receiver attached afterwards on lr.open.q reach the broker and carry
    messages end to end."""
    running = topology("link-route-secured-broker")
    conn = clients.connect(running.client_url("consumer"))
    attach_when_routed(conn, lambda: conn.sender(ALLOWED, timeout=3))  # the route to B1 is known now
    refusal = _refusal(conn, "receiver")
    details.update(refusal=refusal)
    assert UNAUTHORIZED in str(refusal["condition"]), refusal
    sender = conn.sender(ALLOWED, timeout=10)
    receiver = conn.receiver(ALLOWED, credit=10, timeout=10)
    _carry_three(sender, receiver, details)


def _carry_three(sender, receiver, details) -> None:
    """Three messages from `sender` are accepted and reach `receiver`, in order, through the link route."""
    sender.send(3)
    outcomes = sender.wait_outcomes(3, timeout=15)
    got = receiver.wait_received(3, timeout=15)
    details.update(outcomes=sender.outcome_counts(), received=[m.seq for m in got])
    assert {o.outcome for o in outcomes.values()} == {"accepted"}, sender.outcome_counts()
    assert [m.seq for m in got if m.producer == sender.name] == [0, 1, 2]
