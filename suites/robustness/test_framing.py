"""Frames that break the frame layout after a valid open (AMQP 1.0 §2.3.1, §2.8.16): a framing error.

The connection is open (SASL ANONYMOUS, then open), so a close frame is due: the server closes the connection
with amqp:connection:framing-error, then closes its socket, and goes on serving others.
"""

from __future__ import annotations

import pytest

from harness.fuzz import codec as c
from harness.fuzz.hostile import Case, Context, prefix
from harness.fuzz.wire import performative_fields, play
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


OVERSIZE_BODY_CAP = 4 * 1024 * 1024  # bytes of the oversized frame's body sent at most (its header claims more)


def _advertised_max_frame_size(reply) -> int | None:
    """The max-frame-size field of the server's open (AMQP 1.0 §2.7.1: absent means no limit), or None when no open
    came back."""
    for type_, _, body in reply.frames:
        if type_ == c.FRAME_AMQP and c.descriptor(body) == OPEN:
            fields = performative_fields(body)
            return int(fields[2]) if len(fields) > 2 and fields[2] is not None else 2**32 - 1
    return None


@pytest.mark.spec("ROBUST-FRAME-1", "ROBUST-ISOLATION-1")
@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_frame_over_the_servers_max_frame_size_is_a_framing_error(server, role, details):
    """AMQP 1.0 §2.7.1 (open, max-frame-size): a peer that receives an oversized frame MUST close the connection
    with framing-error. The server's own open says its limit; the frame's header claims one byte more. At most
    OVERSIZE_BODY_CAP bytes of its body follow: the header alone tells the frame is too big, and a server that
    would wait for all of a limit of many MiB before looking is a difference in itself."""
    ep = server.client_endpoint
    hello = play(ep.host, ep.port, Case("frame", "open", [("send", prefix(Context(), "open")), ("await", OPEN)]),
                 idle_s=0.2, max_read_s=ANSWER_S)
    limit = _advertised_max_frame_size(hello)
    assert limit is not None, f"{server.name} sent no open: {hello.reply[:100].hex()}"
    details.update(server_max_frame_size=limit)
    if limit >= 2**32 - 1:
        pytest.skip(f"{server.name} advertises no max-frame-size (no limit): no frame can exceed it")
    size = limit + 1
    body = BODY + b"\x00" * (min(size, OVERSIZE_BODY_CAP) - 8 - len(BODY))
    steps = [("send", prefix(Context(), "open")), ("await", OPEN), ("send", c.frame(body, size=size))]
    reply = play(ep.host, ep.port, Case("frame", "over-max-frame-size", steps), idle_s=ANSWER_S,
                 max_read_s=ANSWER_S)
    details.update(claimed_size=size, sent_bytes=len(body) + 8, close_condition=reply.close_condition,
                   closed_by_server=reply.closed_by_server)
    assert reply.close_condition == FRAMING_ERROR, (
        f"{server.name} answered a {size}-byte frame (its max-frame-size {limit}) with close condition "
        f"{reply.close_condition!r} (close frame sent: {reply.sent_close}, closed: {reply.closed_by_server}), "
        f"expected {FRAMING_ERROR}")
    assert amqp_silence(ep.host, ep.port, 5.0) is None, f"{server.name} stopped serving after an oversized frame"
