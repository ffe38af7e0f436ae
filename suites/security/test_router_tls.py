"""Router TLS with client certificates (issue 20; AMQP 1.0 §5.2, §5.3.3 EXTERNAL) on topology
`security-router-tls`: the client listener is TLS only and authenticates clients by their certificate, which
clients-ca must have issued (seed 001_987f9e02a7866228.txt: a separate CA for client connections, and clients
that "authenticate to the routers using certificates").

A certificate from another CA, or an expired one, fails the TLS handshake: the connection ends before any AMQP
frame, so nothing can be attached or routed.
"""

from __future__ import annotations

import pytest

from suites.security.conftest import client_certificate, routes_between, tls_security, tls_url, try_connect

pytestmark = pytest.mark.requires("router:tls", "router:sasl.external")


@pytest.fixture
def router(topology):
    return topology("security-router-tls")


def _external(running, cert):
    return tls_security(running, trust="clients-ca", mechanism="EXTERNAL", cert=cert)


@pytest.mark.spec("SEC-ROUTER-TLS-1")
def test_a_certificate_from_the_clients_ca_is_accepted_and_routes(router, clients, details):
    url = tls_url(router["R1"])
    cert = client_certificate(router, "clients-ca")
    routes_between(clients, url, _external(router, cert), _external(router, cert), "tls.", details)


@pytest.mark.spec("SEC-ROUTER-TLS-2")
def test_a_certificate_from_another_ca_is_refused(router, clients, details):
    conn, why = try_connect(clients, tls_url(router["R1"]), _external(router, client_certificate(router, "rogue-ca")))
    details.update(condition=why)
    assert conn is None, "a client certificate from rogue-ca opened a connection"


@pytest.mark.spec("SEC-ROUTER-TLS-3")
def test_an_expired_certificate_is_refused(router, clients, details):
    cert = client_certificate(router, "clients-ca", "expired-client", expired=True)
    conn, why = try_connect(clients, tls_url(router["R1"]), _external(router, cert))
    details.update(condition=why)
    assert conn is None, "an expired client certificate opened a connection"


@pytest.mark.spec("SEC-ROUTER-TLS-2")
def test_no_certificate_is_refused(router, clients, details):
    conn, why = try_connect(clients, tls_url(router["R1"]), _external(router, None))
    details.update(condition=why)
    assert conn is None, "a client without a certificate opened a connection where EXTERNAL is the only door"


@pytest.mark.spec("SEC-ROUTER-AUTH-3")
def test_anonymous_with_a_good_certificate_is_refused(router, clients, details):
    security = tls_security(router, trust="clients-ca", cert=client_certificate(router, "clients-ca"))
    conn, why = try_connect(clients, tls_url(router["R1"]), security)
    details.update(condition=why)
    assert conn is None, "an ANONYMOUS client opened a connection on a listener with authenticatePeer"
    assert "amqp:unauthorized-access" in why, why


@pytest.mark.spec("SEC-ROUTER-TLS-4")
def test_a_plain_tcp_client_is_refused(router, clients, details):
    from harness.clients import ClientSecurity

    endpoint = router["R1"].endpoints["clients"]
    conn, why = try_connect(clients, f"amqp://127.0.0.1:{endpoint.port}", ClientSecurity())
    details.update(condition=why)
    assert conn is None, "a client without TLS opened a connection on a requireSsl listener"
