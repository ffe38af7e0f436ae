"""Which broker a routed attach reaches (003 §12.2.2, §12.2.3).

Topology `link-route-two-brokers`: one router, two brokers, each prefix link-routed to the broker whose connection
its link routes name (and a receiver's attach with no target, played on a raw connection, is routed there too).
Topology `link-route-advertised`: only the router next to the broker has link routes; the router the clients use
learns them from it.
"""

import pytest

from harness.fuzz import codec as c
from harness.fuzz.hostile import Case, Context, prefix
from harness.fuzz.wire import performative_fields, play
from harness.wait import WaitTimeout, wait_for

from ..conftest import attach_when_routed, kill_or_skip, refusal_of, restart_or_skip

pytestmark = pytest.mark.requires("link-route", "store-and-forward")

B1_QUEUE, B2_QUEUE = "b1.orders", "b2.orders"
EVENTS = "b2.event-queue"
UNANSWERED = "unanswered within 3 s"
ATTACH, TRANSFER = 0x12, 0x14


def _depth(broker, queue: str) -> int:
    stats = broker.queue_stats(queue)
    return stats["depth"] if stats.get("exists", True) else 0


def _send(conn, queue: str, count: int):
    sender = attach_when_routed(conn, lambda: conn.sender(queue, timeout=3))
    sender.send(count)
    outcomes = sender.wait_outcomes(count)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}, outcomes
    return sender


def _refusal(conn, queue: str) -> str | None:
    """The error of a refused attach of a sender to `queue`, or None when the attach succeeded (then detached)."""
    return refusal_of(lambda: conn.sender(queue, timeout=3))


def _no_route(conn, queue: str, seen: list) -> str | None:
    """The refusal of an attach to `queue` when it says there is no route; what each attempt gave goes to `seen`.
    An attach left unanswered for its 3 s is noted as UNANSWERED and the next attempt asks again: the caller
    judges the unanswered ones after the case's other steps."""
    try:
        refusal = _refusal(conn, queue)
    except WaitTimeout:
        seen.append(UNANSWERED)
        return None
    seen.append(refusal or "attached")
    return refusal if refusal is not None and "qd:no-route-to-dest" in refusal else None


@pytest.mark.spec("LINKROUTE-CONNECTION-1", "LINKROUTE-NOROUTE-1", "LINKROUTE-DETACH-1")
def test_a_link_route_reaches_only_the_broker_its_connection_names(topology, clients, details):
    """003 §12.2.2: a link route's `connection` says how the router reaches the broker for its prefix; with two
    brokers, each prefix's attaches reach the broker named, never the other one. While that broker's connection is
    down the route has nowhere to go (003 §12.2.2: reachable again once the connection is back), so an attach is
    refused with no route even though the other broker is connected; after the reconnect it reaches the right
    broker again. An attach made while the connection is being lost is answered too: routed on, it is detached
    with the loss (LINKROUTE-DETACH-1, AMQP 1.0 §2.6.3: an attach is answered by an attach, then a detach if
    refused); it is judged last, so that the other steps are judged whatever it shows."""
    two = topology("link-route-two-brokers")
    b1, b2 = two["B1"], two["B2"]
    conn = clients.connect(two.client_url("producer"))
    _send(conn, B1_QUEUE, 2)
    _send(conn, B2_QUEUE, 3)
    wait_for(lambda: (_depth(b1, B1_QUEUE), _depth(b2, B2_QUEUE)) == (2, 3), 10, "each broker to store its prefix's",
             describe=lambda: f"B1 {b1.queue_stats(B1_QUEUE)}, B2 {b2.queue_stats(B2_QUEUE)}")
    details.update(b1_has_b2_queue=_depth(b1, B2_QUEUE), b2_has_b1_queue=_depth(b2, B1_QUEUE))
    assert _depth(b1, B2_QUEUE) == 0 and _depth(b2, B1_QUEUE) == 0, "a message reached the other prefix's broker"

    kill_or_skip(b2)
    try:
        # An attach made before the router noticed the loss is lost with the connection (qd:routed-link-lost);
        # once it has, there is no route.
        seen = []
        refusal = wait_for(lambda: _no_route(conn, B2_QUEUE, seen), 15,
                           f"attaches to {B2_QUEUE} to be refused with no route while B2 is down",
                           describe=lambda: f"the last attaches: {seen[-3:]}")
        details.update(refusal=refusal, before=seen[:-1])
        assert _depth(b1, B2_QUEUE) == 0, "the attach for B2's prefix went to B1"
        _send(conn, B1_QUEUE, 1)  # B1's route is untouched
    finally:
        restart_or_skip(b2)
    before = _depth(b2, B2_QUEUE)  # what B2 kept over its restart (a reference broker keeps nothing)
    sender = attach_when_routed(conn, lambda: conn.sender(B2_QUEUE, timeout=3), timeout=30)
    sender.send(1)
    sender.wait_outcomes(1)
    wait_for(lambda: _depth(b2, B2_QUEUE) == before + 1, 10, "B2 to store the message sent after its restart",
             describe=lambda: str(b2.queue_stats(B2_QUEUE)))
    assert _depth(b1, B2_QUEUE) == 0 and _depth(b1, B1_QUEUE) == 3
    assert UNANSWERED not in seen, (f"an attach to {B2_QUEUE} made while B2's connection was lost was never answered "
                                    f"(no attach, no detach within 3 s); the attaches while B2 was down: {seen}")


@pytest.mark.spec("LINKROUTE-ADVERTISED-1")
def test_a_router_without_link_routes_follows_the_ones_another_router_advertises(topology, clients, details):
    """003 §12.2.3: the router holding the broker connection advertises itself as a destination for the link
    routes' prefix; the same configuration on the other routers is recommended, not required. A client of R1,
    which has none, sends to and receives from the broker queue behind R2 over the advertised link routes."""
    adv = topology("link-route-advertised")
    conn = clients.connect(adv.client_url("producer"))
    sender = attach_when_routed(conn, lambda: conn.sender(EVENTS, timeout=3), timeout=30)
    sender.send(3)
    outcomes = sender.wait_outcomes(3)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}, outcomes
    broker = adv["B2"]
    wait_for(lambda: _depth(broker, EVENTS) == 3, 10, "the broker to store what was sent on R1",
             describe=lambda: str(broker.queue_stats(EVENTS)))
    receiver = conn.receiver(EVENTS, credit=3)
    got = receiver.wait_received(3)
    details.update(received=[m.seq for m in got])
    assert [m.seq for m in got if m.producer == sender.name] == [0, 1, 2]
    wait_for(lambda: _depth(broker, EVENTS) == 0, 10, "the receiver's acceptances to empty the broker queue",
             describe=lambda: str(broker.queue_stats(EVENTS)))


def _source_address(attach_body: bytes) -> str | None:
    """The address of an attach frame's source, None when its source is null (AMQP 1.0 §2.7.3, field 5)."""
    fields = performative_fields(attach_body)
    source = fields[5] if len(fields) > 5 else None
    return None if source is None else source.value[0]


@pytest.mark.spec("LINKROUTE-TERMINUS-1")
def test_a_receiver_attach_without_a_target_is_routed_and_receives(topology, clients, details):
    """003 §12.2.1: routing is done on the attach frames, chained to the broker. A receiver's attach names the
    source it wants; its target is optional (AMQP 1.0 §2.7.3 makes only name, handle and role mandatory). Such an
    attach, with a source and a null target, is routed like any other: answered with the broker's source, and
    the receiver's credit brings it the message waiting on the queue. Played on a raw connection: client
    libraries always send a target."""
    two = topology("link-route-two-brokers")
    conn = clients.connect(two.client_url("consumer"))
    _send(conn, B1_QUEUE, 1)  # the route is known, and a message waits on B1
    ctx = Context(address=B1_QUEUE)
    attach = c.amqp_frame("attach", name="rcv-null-target", handle=0, role=True, snd_settle_mode=2, rcv_settle_mode=0,
                          source=c.composite("source", address=B1_QUEUE), target=None)
    flow = c.amqp_frame("flow", next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100,
                        handle=0, delivery_count=0, link_credit=1)
    steps = [("send", prefix(ctx, "begin") + attach + flow), ("await", ATTACH), ("await", TRANSFER)]
    ep = two["R1"].client_endpoint
    reply = play(ep.host, ep.port, Case("link-route", "receiver-null-target", steps), idle_s=0.2, max_read_s=1.0)
    kinds = [c.descriptor(body) for type_, _, body in reply.frames if type_ == c.FRAME_AMQP]
    answers = [body for type_, _, body in reply.frames if type_ == c.FRAME_AMQP and c.descriptor(body) == ATTACH]
    details.update(frames=[hex(k) for k in kinds if k is not None])
    assert answers, f"the router never answered the attach (frames from it: {[hex(k) for k in kinds if k]})"
    assert _source_address(answers[0]) == B1_QUEUE, "the attach was refused (answered with no source)"
    assert TRANSFER in kinds, "no message came for the receiver's credit"
