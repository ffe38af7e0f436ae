"""What the security suites share: how a client authenticates and which certificates it holds.

A client's certificates come from the running topology's own test PKI (harness/tlsca.py), so they chain to the
very CAs the peers were rendered with; a certificate from a CA the topology declares but the peer does not
trust (rogue-ca) is the one that must be refused.
"""

from __future__ import annotations

import pytest

from harness.clients import ClientSecurity

DEADLINE = 10.0  # seconds: a refusal or an open comes in well under a second on every peer here
ABSENCE = 5.0  # seconds a link that must not form is watched; the positive control forms in about one


def client_certificate(running, ca: str, subject: str = "messaging-client", *, expired: bool = False):
    """A client certificate (seed 001_987f9e02a7866228.txt's `CN=messaging-client`) issued by CA `ca`."""
    return running.pki.issue(ca, subject, hostnames=(), purpose="client", expired=expired)


def tls_security(running, *, trust: str, mechanism: str = "ANONYMOUS", cert=None, **kwargs) -> ClientSecurity:
    """TLS trusting CA `trust` (and checking the router's name), with an optional client certificate."""
    return ClientSecurity(mechanism=mechanism, ca=str(running.pki.ca_file(trust)),
                          cert=str(cert.cert) if cert else None, key=str(cert.key) if cert else None, **kwargs)


def tls_url(peer) -> str:
    """The clients listener by the name its certificate carries (localhost), so that the name check applies."""
    endpoint = peer.endpoints["clients"]
    return f"amqps://localhost:{endpoint.port}"


def try_connect(clients, url: str, security: ClientSecurity):
    """(connection or None, the condition it failed with)."""
    try:
        conn = clients.connect(url, security=security, wait=False)
        conn.wait_open(DEADLINE)
        return conn, None
    except ConnectionError as exc:
        return None, str(exc)


@pytest.fixture
def deadline() -> float:
    return DEADLINE


def routes_between(clients, url: str, receiving, sending, prefix: str, details) -> None:
    """Two clients in through the secured listener, one with each security, and 10 messages between them, all
    accepted and received in order: what a door that lets clients in must still do."""
    receiver_conn, why = try_connect(clients, url, receiving)
    assert receiver_conn is not None, why
    sender_conn, why = try_connect(clients, url, sending)
    assert sender_conn is not None, why
    address = clients.unique(prefix)
    receiver = receiver_conn.receiver(address)
    sender = sender_conn.sender(address)
    sender.wait_credit(1)
    sender.send(10)
    outcomes = sender.wait_outcomes(10)
    details.update(received=receiver.count)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    assert receiver.wait_received(10) and receiver.seqs(sender.name) == list(range(10))
