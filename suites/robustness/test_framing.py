"""Frames that break the frame layout after a valid open (AMQP 1.0 §2.3.1, §2.8.16): a framing error.

The connection is open (SASL ANONYMOUS, then open), so a close frame is due: the server closes the connection
with amqp:connection:framing-error, then closes its socket, and goes on serving others.
"""

from __future__ import annotations

import pytest

from harness.fuzz import codec as c
from harness.fuzz.hostile import Case, Context, prefix
from harness.fuzz.wire import play
from harness.peers.liveness import amqp_silence

FRAMING_ERROR = "amqp:connection:framing-error"
OPEN = 0x10
ANSWER_S = 5.0
BODY = c.composite("begin", next_outgoing_id=0, incoming_window=10, outgoing_window=10)
BAD_FRAMES = {
    "size-below-8": c.frame(BODY, size=4),
    "doff-below-2": c.frame(BODY, doff=1),
    "doff-beyond-frame": c.frame(BODY, doff=200),
}
ROLES = {"router": ("single-router", "R1"), "broker": ("single-broker", "B1")}


@pytest.fixture
def server(topology, request):
    name, node = ROLES[request.node.callspec.params["role"]]
    return topology(name)[node]


@pytest.mark.spec("ROBUST-FRAME-1", "ROBUST-ISOLATION-1")
@pytest.mark.parametrize("bad", sorted(BAD_FRAMES))
@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_malformed_frame_after_open_is_a_framing_error(server, role, bad, details):
    ep = server.client_endpoint
    # the bad frame goes once the server's open is here: sent in one go with the handshake, a server may
    # fail the transport before it has written its SASL outcome and open, leaving no way to send a close
    steps = [("send", prefix(Context(), "open")), ("await", OPEN), ("send", BAD_FRAMES[bad])]
    reply = play(ep.host, ep.port, Case("frame", bad, steps), idle_s=ANSWER_S, max_read_s=ANSWER_S)
    details.update(close_condition=reply.close_condition, closed_by_server=reply.closed_by_server,
                   reply_hex=reply.reply[:200].hex())
    assert not reply.refused, f"{server.name} refused the connection"
    assert reply.close_condition == FRAMING_ERROR, (
        f"{server.name} answered a frame with {bad} with close condition {reply.close_condition!r} "
        f"(close frame sent: {reply.sent_close}), expected {FRAMING_ERROR}")
    assert reply.closed_by_server, f"{server.name} kept the connection open after the framing error"
    assert amqp_silence(ep.host, ep.port, 5.0) is None, f"{server.name} stopped serving after a {bad} frame"
