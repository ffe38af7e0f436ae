"""The frames fuzzer against a secured router (interop fuzz --frames --secured; issue 20): the valid prefix really
authenticates with SASL PLAIN, inside TLS too, a wrong password really gets outcome auth, and TLS handshake
garbage is refused without disturbing the router. Real reference router, real sockets."""

from __future__ import annotations

import random

import pytest

from harness.fuzz import codec as c
from harness.fuzz.hostile import Case, Context, fam_tls_handshake, prefix
from harness.fuzz.wire import play
from harness.peers.launch import start_topology
from harness.topology import load_topology, topology_path


@pytest.fixture(scope="module")
def secured():
    running = start_topology(load_topology(topology_path("security-router-fuzz")), {"router": "reference"})
    yield running["R1"].client_endpoint
    running.stop()


def _opened(reply) -> bool:
    return any(t == c.FRAME_AMQP and c.descriptor(b) == 0x10 for t, _, b in reply.frames)


@pytest.mark.parametrize("tls", [False, True], ids=["plain-tcp", "inside-tls"])
def test_the_valid_prefix_authenticates_with_plain(secured, tls):
    ctx = Context(user="fuzz", password="fuzz-secret")
    reply = play(secured.host, secured.port, Case("test", "valid", [("send", prefix(ctx, "open"))], tls=tls))
    assert reply.sasl_outcome_code == 0 and _opened(reply), reply.reply[:200]


def test_a_wrong_password_gets_outcome_auth(secured):
    ctx = Context(user="fuzz", password="wrong")
    reply = play(secured.host, secured.port, Case("test", "bad", [("send", prefix(ctx, "open"))]))
    assert reply.sasl_outcome_code == 1 and not _opened(reply) and reply.closed_by_server


def test_handshake_garbage_is_refused_and_the_router_serves_on(secured):
    for index in range(12):
        case = fam_tls_handshake(random.Random(index), Context())
        reply = play(secured.host, secured.port, case)
        assert not _opened(reply), case.name
    ctx = Context(user="fuzz", password="fuzz-secret")
    assert _opened(play(secured.host, secured.port, Case("test", "valid", [("send", prefix(ctx, "open"))])))
