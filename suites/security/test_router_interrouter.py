"""Inter-router TLS with mutual authentication (issue 20), as seed 001_987f9e02a7866228.txt §Edge vs interior
routers deploys it: the inter-router listener has authenticatePeer and an SSL profile, routers-ca issues the
routers' certificates, apart from the clients' CA; the dialler authenticates with its certificate (EXTERNAL).

A link whose certificates do not verify (the dialler's from another CA, the dialler trusting another CA, or a
certificate naming another host while the dialler checks names) must never form, so nothing is routed across
it. Absence is shown by a deadline on the same probe that, on `security-router-mesh-ok` (and with the name
check off), finds the route within about a second: a producer on R1 gets credit only once R1 knows the
consumer on R2.
"""

from __future__ import annotations

import pytest

from harness.wait import wait_for
from suites.security.conftest import ABSENCE, DEADLINE

pytestmark = pytest.mark.requires("mesh", "router:tls", "router:sasl.external")


def _route_probe(running, clients):
    """A consumer on R2 and a producer on R1 for a fresh balanced address."""
    address = clients.unique("balanced.secured.")
    receiver = clients.connect(running.client_url("far")).receiver(address)
    sender = clients.connect(running.client_url("producer")).sender(address)
    return sender, receiver


def _credit_within(sender, seconds: float) -> bool:
    try:
        sender.wait_credit(1, timeout=seconds)
        return True
    except AssertionError:
        return False


@pytest.mark.spec("SEC-ROUTER-INTER-1", "SEC-ROUTER-HOST-2")
@pytest.mark.parametrize("name", ["security-router-mesh-ok", "security-router-mesh-hostname-unchecked"],
                         ids=["shared-ca", "name-not-checked"])
def test_a_mutually_authenticated_link_forms_and_routes(topology, clients, details, name):
    running = topology(name)
    sender, receiver = _route_probe(running, clients)
    assert _credit_within(sender, DEADLINE), f"no route from R1 to the consumer on R2 within {DEADLINE}s"
    sender.send(10)
    outcomes = sender.wait_outcomes(10)
    details.update(received=receiver.count)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    wait_for(lambda: receiver.count == 10, DEADLINE, "the consumer on R2 to get the 10 messages")


@pytest.mark.spec("SEC-ROUTER-INTER-2", "SEC-ROUTER-HOST-1")
@pytest.mark.parametrize("name", ["security-router-mesh-dialler-ca", "security-router-mesh-trusts",
                                  "security-router-mesh-hostname"],
                         ids=["dialler-cert-from-rogue-ca", "dialler-trusts-rogue-ca", "wrong-hostname"])
def test_a_link_that_does_not_verify_never_forms(topology, clients, details, name):
    running = topology(name)
    sender, receiver = _route_probe(running, clients)
    formed = _credit_within(sender, ABSENCE)
    details.update(watched_s=ABSENCE, route=formed)
    assert not formed, f"R1 routed to the consumer on R2 although the inter-router link of {name} must not verify"
    assert receiver.count == 0
