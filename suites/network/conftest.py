"""Helpers shared by the network-of-brokers suite (004_05e35cdd7bc39ede.txt: brokers joined by network
connectors, `static:` and `masterslave:` URIs, duplex; the ActiveMQ "Networks of Brokers" semantics it links).

A network is judged through the wire: producers on one broker, consumers and subscribers on others, each
attached by the topology's client name (`producer`, `consumer`, `b1`, `s2`, `standby`, ...) with logical
addresses (`orders`, `prices`) turned into what each vendor expects (Peer.wire_address). Where a provider has
a management view, queue depths say where messages wait (Peer.queue_stats); a figure a provider cannot give is
left out with its one-line reason, and a case that cannot do without it is `skipped`, never failed.

Waiting is on conditions with deadlines:
- a broker forwards a topic only once it knows of a subscriber on the other side (ActiveMQ's demand-based
  forwarding, RabbitMQ's exchange federation binding), so a topic case first waits until probe messages, from
  a producer of their own, reach every subscriber (`wait_topic_ready`); "exactly once" is then judged on the
  messages published after that;
- "no duplicate, no loop" is judged once the network has settled: what the consumers count (and the queue
  depths) unchanged over SETTLE_CHECKS successive polls of harness.wait (`wait_settled`), never after a sleep.
"""

from __future__ import annotations

import uuid

import pytest

from harness.peers.vendors import parse_choice, vendor
from harness.pytest_plugin import NOT_APPLICABLE
from harness.wait import WaitTimeout, wait_for

from ..conftest import PREVIOUS, mixed_releases

WAIT = 30.0  # deadline for what brokers do between themselves: connect, pull, forward, reconnect
SETTLE_CHECKS = 3  # successive equal observations that count as settled
SETTLE_POLL = 0.05  # harness.wait's longest poll interval: settled means unchanged over 100 ms at least
ORDERS, PRICES = "orders", "prices"  # the anycast queue and the multicast address every network topology declares


# The pairings a network of two brokers runs in (B1 dials B2 in network-pair and network-duplex): both brokers of
# the session's vendor (`same`), a reference B1 dialling the session's vendor (`reference-dials`), and the
# session's vendor dialling a reference B2 (`reference-dialled`). A network is a wire format between brokers as
# much as a mirror is: only a mixed pair shows whether the reference speaks the vendor's.
# And the previous release of the session's vendor dialling its current one (`previous-dials`, where it has one here:
# harness/peers/versions.py): an upgrade half done, the old release's connector forwarding to the new release.
PAIRINGS = {"same": None, "reference-dials": {"B1": "reference"}, "reference-dialled": {"B2": "reference"},
            "previous-dials": {"B1": PREVIOUS}}
# network-hub-spoke: a reference hub between the vendor's spokes (they dial it), and reference spokes dialling the
# vendor's hub, which passes messages between them.
HUB_PAIRINGS = {"same": None, "reference-hub": {"H": "reference"},
                "reference-spokes": {"S1": "reference", "S2": "reference", "S3": "reference"}}
# network-mesh (B1 dials B2, B2 dials B3, B3 dials B1): a reference B2 is dialled by one of the vendor's brokers and
# dials the other, so a message from B1 to B3 can go either way round through two vendors.
MESH_PAIRINGS = {"same": None, "reference-b2": {"B2": "reference"}}
# Networks made of AMQP broker connections (Artemis's AMQP federation, which the reference speaks) are what a
# reference broker can join; ActiveMQ Classic bridges over OpenWire and RabbitMQ federates over its own links.
AMQP_FEDERATION = frozenset({"network-of-brokers", "broker-connection"})


def paired(interop, pair: dict[str, str] | None) -> dict[str, str] | None:
    """The node vendors of a network case in a pairing (node -> vendor or PREVIOUS, None: all the session's vendor);
    a pairing with PREVIOUS is not-applicable where the vendor has no previous release here, one with a reference
    node where the session's broker vendor is the reference itself (every node would be the
    reference), one the harness does not start, or one whose networks are not AMQP federation."""
    if pair is None:
        return None
    if PREVIOUS in pair.values():  # two releases of the session's own vendor: its own connectors, AMQP or not
        return mixed_releases(interop, "broker", pair)
    name = interop.choices.get("broker", "reference")
    base = parse_choice(name).vendor
    if base == "reference" or name.startswith("external"):
        pytest.skip(f"{NOT_APPLICABLE}a network of two vendors needs a broker vendor other than the reference that "
                    f"the harness starts (this session's: {base})")
    missing = AMQP_FEDERATION - vendor(name, "broker").capabilities
    if missing:
        pytest.skip(f"{NOT_APPLICABLE}{base} networks without AMQP broker connections (lacks "
                    f"{', '.join(sorted(missing))}): a reference broker cannot join its network")
    return pair


def unique(prefix: str) -> str:
    """A link name no earlier case or run used: histories tell producers apart by it, and a broker keeps what
    earlier cases left behind."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Network:
    """A running network topology as cases use it: links by client name, addresses by logical name. Each link
    gets a connection of its own (RabbitMQ ends a whole session on one link's error, and a case that closes or
    kills one consumer must leave the others alone)."""

    def __init__(self, running, clients):
        self.running, self.clients = running, clients

    def node(self, client: str) -> str:
        return self.running.topology.clients[client]

    def peer(self, client: str):
        return self.running[self.node(client)]

    def address(self, client: str, name: str) -> str:
        return self.peer(client).wire_address(name)

    def topic(self, name: str) -> str:
        """Multicast address `name` as the wire writes it on any broker of the network: as a broker that declares
        it names it (ActiveMQ's clients say `topic://NAME`, the others `NAME`, which a subscriber's `topic`
        capability or the address's own routing makes multicast). For a case whose topic must not exist yet on
        the broker a client attaches to, where that broker's own wire_address would make it a queue."""
        for node in self.running.topology.nodes_with_role("broker"):
            if any(q.address == name and q.routing == "multicast" for q in node.queues):
                return self.running[node.name].wire_address(name)
        raise ValueError(f"topology {self.running.topology.name}: no broker declares {name!r} multicast")

    def producer(self, client: str, name: str = ORDERS, *, address: str | None = None, **kwargs):
        """A sender on `name` at `client`'s broker; `address`: the wire address to use instead (Network.topic)."""
        conn = self.clients.connect(self.running.client_url(client))
        return conn.sender(address or self.address(client, name), unique(f"snd-{client}-{name}"), **kwargs)

    def consumer(self, client: str, name: str = ORDERS, *, credit: int = 100, **kwargs):
        conn = self.clients.connect(self.running.client_url(client))
        return conn.receiver(self.address(client, name), unique(f"rcv-{client}-{name}"), credit=credit, **kwargs)

    def subscriber(self, client: str, name: str = PRICES, *, credit: int = 100, address: str | None = None):
        conn = self.clients.connect(self.running.client_url(client))
        return conn.receiver(address or self.address(client, name), unique(f"sub-{client}-{name}"), credit=credit,
                             capabilities=("topic",))

    def brokers(self) -> dict[str, object]:
        return {name: peer for name, peer in self.running.peers.items() if peer.role == "broker"}


def drained_network(running, clients) -> Network:
    """`running` as cases use it, with `orders` emptied on every broker first (drain): each case starts from
    empty queues, whatever an earlier one left."""
    net = Network(running, clients)
    drain(net, ORDERS)
    return net


def send_accepted(snd, count: int, timeout: float = WAIT, **send_kwargs) -> list[int]:
    """Send `count` messages and wait until the broker has answered each; every one must be accepted."""
    seqs = snd.send(count, **send_kwargs)
    outcomes = snd.wait_outcomes(seqs[-1] + 1, timeout=timeout)
    refused = {seq: o.outcome for seq, o in outcomes.items() if seq in seqs and o.outcome != "accepted"}
    assert not refused, f"producer {snd.name} on {snd.address}: not accepted: {refused}"
    return seqs


def distinct(receiver, producer) -> set[int]:
    """The distinct messages of `producer` (a sender) that `receiver` has had."""
    return set(receiver.seqs(producer.name))


def wait_all(receivers, producer, count: int, what: str, timeout: float = WAIT, describe=None) -> None:
    """Wait until each receiver has had `count` distinct messages of `producer`."""
    def seen() -> str:
        got = ", ".join(f"{r.name}: {len(distinct(r, producer))} distinct, {r.count} in all" for r in receivers)
        return got + (f"; {describe()}" if describe is not None else "")
    wait_for(lambda: all(len(distinct(r, producer)) >= count for r in receivers), timeout,
             f"{count} messages of {producer.name} {what}", describe=seen)


def wait_topic_ready(net: Network, client: str, subscribers, name: str = PRICES, timeout: float = WAIT,
                     address: str | None = None):
    """Publish probe messages on `name` (on the wire: `address`, else as `client`'s broker names it) at `client`'s
    broker, one per poll, until each subscriber has had one: from then on every broker between them forwards
    the topic. Returns the probe sender (its messages are its own producer's, so the checkers of the case's
    producer ignore them)."""
    probe = net.producer(client, name, address=address)

    def reached() -> bool:
        if all(r.seqs(probe.name) for r in subscribers):
            return True
        probe.send(1)
        return False
    wait_for(reached, timeout, f"probes published on {name} at {client} to reach every subscriber",
             interval=SETTLE_POLL,
             describe=lambda: ", ".join(f"{r.name}: {len(r.seqs(probe.name))}" for r in subscribers)
             + f"; {probe.sent} probes sent")
    return probe


def wait_consumed(net: Network, consumer, producer, count: int, what: str, who: str, timeout: float = WAIT):
    """Wait until `consumer` has had `count` distinct messages of `producer` (`what`: where, for the timeout's
    message), then until its count and every broker's queue depth have settled (`who`: the consumer, for the
    message), then make a round trip on its connection (the broker has had all the consumer sent). The settled
    (count, *depths)."""
    wait_all([consumer], producer, count, what, timeout, describe=lambda: f"depths {depths(net)}")
    settled = wait_settled(lambda: (consumer.count, *depths(net).values()), f"{who} and the queue depths", timeout)
    consumer.conn.sync()
    return settled


def wait_settled(observe, what: str, timeout: float = WAIT):
    """Wait until `observe()` gives the same value SETTLE_CHECKS polls in a row (a network still forwarding,
    looping or redelivering changes it); that value."""
    seen: list = []

    def settled() -> bool:
        seen.append(observe())
        tail = seen[-SETTLE_CHECKS:]
        return len(tail) == SETTLE_CHECKS and all(v == tail[0] for v in tail)
    wait_for(settled, timeout, f"{what} to settle ({SETTLE_CHECKS} equal checks in a row)", interval=SETTLE_POLL,
             describe=lambda: f"last checks {seen[-SETTLE_CHECKS:]}")
    return seen[-1]


def wait_or_say(predicate, timeout: float, what: str, describe=None) -> str | None:
    """Like wait_for, but a timeout is returned as its message instead of raised, so that a case can still put
    its checkers' figures in the details before it fails."""
    try:
        wait_for(predicate, timeout, what, describe=describe)
    except WaitTimeout as exc:
        return str(exc)
    return None


# ---- management view ------------------------------------------------------------------------------------------


def stats_or_reason(peer, name: str) -> tuple[dict | None, str | None]:
    """(queue statistics, None), or (None, why not) where the provider has no management view."""
    try:
        return peer.queue_stats(name), None
    except NotImplementedError as exc:
        return None, str(exc)


def depth(peer, name: str) -> int:
    """Depth of `name` on `peer`; `skipped` where the provider cannot say."""
    row, why = stats_or_reason(peer, name)
    if row is None:
        pytest.skip(why)
    return row["depth"]


def depths(net: Network, name: str = ORDERS) -> dict[str, int | None]:
    """node -> depth of `name` on every broker of the network (None where the provider cannot say)."""
    out: dict[str, int | None] = {}
    for node, peer in net.brokers().items():
        row, _ = stats_or_reason(peer, name)
        out[node] = row["depth"] if row is not None else None
    return out


def drain(net: Network, name: str = ORDERS, timeout: float = WAIT) -> dict[str, int]:
    """Empty queue `name` on every broker of the network at once (node -> how many each consumer took), so a
    case starts from empty queues whatever an earlier one left: consumers on every broker make demand
    everywhere, so what waits on one broker or is stuck on another is taken where it is. Brokers without a
    management view are left as they are (the checkers count only the case's own producer anyway)."""
    known = {node: peer for node, peer in net.brokers().items() if stats_or_reason(peer, name)[0] is not None}
    if all(peer.queue_stats(name)["depth"] == 0 for peer in known.values()):
        return {}
    takers = {node: net.clients.connect(peer.url).receiver(peer.wire_address(name), unique(f"drain-{node}"),
                                                           credit=200)
              for node, peer in known.items()}
    wait_for(lambda: all(peer.queue_stats(name)["depth"] == 0 for peer in known.values()), timeout,
             f"{name} to be emptied on {', '.join(known)}",
             describe=lambda: f"depths {depths(net, name)}; taken {({n: r.count for n, r in takers.items()})}")
    for taker in takers.values():
        taker.detach()
    return {node: taker.count for node, taker in takers.items()}


def link_between(running, a: str, b: str) -> str:
    """The name of the topology's link from node `a` to node `b`."""
    return next(link.name for link in running.topology.links if link.from_ == a and link.to == b)


def connector_rows(peer) -> dict[str, dict] | None:
    """name -> the broker's view of each connection it dials (network connectors included), or None where the
    provider has no such view."""
    try:
        return {row["name"]: row for row in peer.broker_connections()}
    except NotImplementedError:
        return None
