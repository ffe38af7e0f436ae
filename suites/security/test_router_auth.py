"""Router SASL (issue 20; AMQP 1.0 §5.3) on topology `security-router-plain`: the client listener has
authenticatePeer and offers PLAIN over TLS; alice and bob are its users.

A refused client must see the SASL outcome `auth` (§5.3.3.6) and never an open connection, so it can attach
nothing; a client that authenticates can send and receive as on any router.
"""

from __future__ import annotations

import pytest

from suites.security.conftest import routes_between, tls_security, tls_url, try_connect

pytestmark = pytest.mark.requires("router:tls", "router:sasl.plain")

UNAUTHORIZED = "amqp:unauthorized-access"


@pytest.fixture
def router(topology):
    return topology("security-router-plain")


def _plain(running, user, password):
    return tls_security(running, trust="clients-ca", mechanism="PLAIN", user=user, password=password)


@pytest.mark.spec("SEC-ROUTER-AUTH-1")
def test_a_good_password_opens_and_routes(router, clients, details):
    url = tls_url(router["R1"])
    routes_between(clients, url, _plain(router, "bob", "bob-secret"), _plain(router, "alice", "alice-secret"),
                   "secured.", details)


@pytest.mark.spec("SEC-ROUTER-AUTH-2")
@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "alice-secret"), ("bob", "")],
                         ids=["wrong-password", "unknown-user", "empty-password"])
def test_a_bad_password_gets_sasl_outcome_auth(router, clients, details, user, password):
    url = tls_url(router["R1"])
    conn, why = try_connect(clients, url, _plain(router, user, password))
    details.update(condition=why)
    assert conn is None, f"{user} with a wrong password opened a connection"
    # proton's report of sasl-outcome auth; without an open, the client could attach nothing
    assert UNAUTHORIZED in why and "Authentication failed" in why, why


@pytest.mark.spec("SEC-ROUTER-AUTH-3")
def test_anonymous_is_refused_when_the_listener_authenticates(router, clients, details):
    conn, why = try_connect(clients, tls_url(router["R1"]), tls_security(router, trust="clients-ca"))
    details.update(condition=why)
    assert conn is None, "an ANONYMOUS client opened a connection on a listener with authenticatePeer"
    assert UNAUTHORIZED in why, why


@pytest.mark.spec("SEC-ROUTER-TLS-4")
def test_a_plain_tcp_client_is_refused_on_a_tls_only_listener(router, clients, details):
    endpoint = router["R1"].endpoints["clients"]
    from harness.clients import ClientSecurity

    conn, why = try_connect(clients, f"amqp://127.0.0.1:{endpoint.port}",
                            ClientSecurity(mechanism="PLAIN", user="alice", password="alice-secret"))
    details.update(condition=why)
    assert conn is None, "a client without TLS opened a connection on a requireSsl listener"
