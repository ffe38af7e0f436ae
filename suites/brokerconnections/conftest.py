"""Helpers shared by the broker-connection suites (002_f23507c2891d6d06.txt: AMQP broker connections).

A broker connection is judged from both ends: through the wire (clients on each broker) and through the
brokers' management view (Peer.broker_connections, Peer.queue_stats, ...). A provider without that view
makes a case `skipped` with its one-line reason, never failed.
"""

from __future__ import annotations

import uuid

import pytest

from harness.peers.vendors import parse_choice
from harness.pytest_plugin import NOT_APPLICABLE
from harness.wait import wait_for

from ..conftest import PREVIOUS, mixed_releases, restart_or_skip

MIRROR_QUEUE_PREFIX = "$ACTIVEMQ_ARTEMIS_MIRROR_"  # 002, "Mirroring": where a broker keeps its mirror events
WAIT = 30.0  # deadline for what the brokers do between themselves (connect, forward, mirror)


# The pairings of a running-mirror case: both ends the session's broker vendor, one of them a reference broker
# (the node named runs as the reference instead of the session's vendor), or one of them the previous release of
# the session's vendor (an upgrade half done: the new release mirroring into the old one, and the old into the new)
PAIRS = {"same": None, "into-reference": {"DC2": "reference"}, "from-reference": {"DC1": "reference"},
         "into-previous": {"DC2": PREVIOUS}, "from-previous": {"DC1": PREVIOUS}}


def paired_with_reference(interop, pair: dict[str, str] | None) -> dict[str, str] | None:
    """The node vendors of a case that pairs the session's broker vendor with reference brokers or with its own
    previous release (`pair`: node -> vendor or PREVIOUS), or None for both ends of the session's vendor.
    Not-applicable where the session's broker vendor is the reference itself (both ends would be the reference),
    one the harness does not start (external), or, for PREVIOUS, one without a previous release here."""
    if pair and PREVIOUS in pair.values():
        return mixed_releases(interop, "broker", pair)
    vendor = parse_choice(interop.choices.get("broker", "reference")).vendor
    if pair and (vendor == "reference" or vendor.startswith("external")):
        pytest.skip(f"{NOT_APPLICABLE}a mirror between two vendors needs a broker vendor other than the reference "
                    f"that the harness starts (this session's: {vendor})")
    return pair


def mirror_queue(connection: str) -> str:
    """The local queue a mirror broker connection named `connection` stores its events on."""
    return f"{MIRROR_QUEUE_PREFIX}{connection}"


def unique(prefix: str) -> str:
    """A name no earlier case or run used: link names are how histories tell producers apart, and a broker
    keeps what earlier cases left on a queue."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sender(conn, address: str, **kwargs):
    """A producer whose link name is unique to this case (its messages carry it as `producer`)."""
    return conn.sender(address, unique(f"snd-{address}"), **kwargs)


def send_accepted(snd, count: int, timeout: float = WAIT) -> list[int]:
    """Send `count` messages and wait until the broker has answered each; all must be accepted."""
    seqs = snd.send(count)
    total = seqs[-1] + 1
    outcomes = snd.wait_outcomes(total, timeout=timeout)
    refused = {seq: o.outcome for seq, o in outcomes.items() if o.outcome != "accepted"}
    assert not refused, f"producer {snd.name} on {snd.address}: not accepted: {refused}"
    return seqs


# ---- management view ------------------------------------------------------------------------------------------


def connections(peer) -> dict[str, dict]:
    """name -> the broker's view of each of its broker connections; `skipped` where the provider has none."""
    try:
        rows = peer.broker_connections()
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    return {row["name"]: row for row in rows}


def connection(peer, name: str) -> dict:
    rows = connections(peer)
    assert name in rows, f"{peer.name} has no broker connection {name!r}; it has {sorted(rows)}"
    return rows[name]


def wait_connected(peer, name: str, timeout: float = WAIT, *, restart_if_gave_up_at_start: bool = False) -> dict:
    """Wait until broker connection `name` of `peer` is up; its row. One that has given up fails the wait at
    once; with `restart_if_gave_up_at_start`, one that gave up without ever connecting (the topology starts
    its brokers together, so a few limited attempts may all come before the target listens) has its broker
    restarted once, its targets being up by now, and is waited for again."""
    last: dict = {}

    def up_or_given_up():
        last.update(connection(peer, name))
        return (last["connected"] or last["gave_up"]) and dict(last)
    row = wait_for(up_or_given_up, timeout, f"broker connection {name!r} of {peer.name} to connect",
                   describe=lambda: _row(last))
    if row["gave_up"] and not row["connected"] and row["connects"] == 0 and restart_if_gave_up_at_start:
        restart_or_skip(peer)
        return wait_connected(peer, name, timeout)
    assert row["connected"], f"broker connection {name!r} of {peer.name} gave up: {_row(row)}"
    return row


def start_connection(peer, name: str) -> None:
    try:
        peer.start_broker_connection(name)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


def delete_queue(peer, name: str) -> None:
    try:
        peer.delete_queue(name)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


def stats(peer, queue: str) -> dict:
    try:
        return peer.queue_stats(queue)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


def depth(peer, queue: str) -> int:
    return stats(peer, queue)["depth"]


def exists(peer, queue: str) -> bool:
    return stats(peer, queue).get("exists", True)


def wait_depth(peer, queue: str, wanted: int, timeout: float = WAIT, what: str = "") -> None:
    wait_for(lambda: depth(peer, queue) == wanted, timeout,
             f"{queue} on {peer.name} to hold {wanted} message(s){what}",
             describe=lambda: _queue(stats(peer, queue)))


def wait_mirror_idle(peer, connection_name: str, timeout: float = WAIT) -> None:
    """Wait until every mirror event of `peer`'s mirror connection has been confirmed by its target (the
    mirror queue is empty)."""
    wait_depth(peer, mirror_queue(connection_name), 0, timeout, " (every mirror event confirmed by the target)")


def empty(clients, peer, queue: str, timeout: float = WAIT) -> int:
    """Consume and accept whatever `queue` on `peer` holds, until it is empty; how many that took. Cases that
    share a topology start from an empty queue this way, whatever an earlier case left."""
    if depth(peer, queue) == 0:
        return 0
    receiver = clients.connect(peer.url).receiver(queue, unique("drain"), credit=200)
    wait_for(lambda: depth(peer, queue) == 0, timeout, f"{queue} on {peer.name} to be emptied",
             describe=lambda: f"{_queue(stats(peer, queue))}; {receiver.count} consumed")
    receiver.detach()
    return receiver.count


def mirror_ready(clients, running, connection: str, queue: str = "orders") -> None:
    """DC1's mirror `connection` to DC2 up, and `queue` empty on both brokers: emptied on DC1, those
    acknowledgements replayed on DC2, then emptied on DC2 (what the mirror had brought and no acknowledgement
    removed). Cases on broker-mirror start from here, whatever an earlier case left."""
    dc1, dc2 = running["DC1"], running["DC2"]
    wait_connected(dc1, connection)
    empty(clients, dc1, queue)
    wait_mirror_idle(dc1, connection)
    empty(clients, dc2, queue)


def node_at(running, target: str) -> str | None:
    """Which node of the topology a broker connection's `host:port` target is (a link's proxy counts as the
    node behind it)."""
    port = int(target.rsplit(":", 1)[1])
    for name, peer in running.peers.items():
        if any(ep.port == port for ep in peer.endpoints.values()):
            return name
    proxies = running.faults.links if running.faults is not None else {}
    for link in running.topology.links:
        if proxies.get(link.name) == port:
            return link.to
    return None


def configured(running, node: str, name: str):
    """The topology's declaration of broker connection `name` on `node` (retry interval, attempts, targets)."""
    return next(c for c in running.topology.nodes[node].broker_connections if c.name == name)


def _row(row: dict) -> str:
    keys = ("started", "connected", "target", "attempts", "connects", "gave_up")
    return ", ".join(f"{k}={row.get(k)!r}" for k in keys) if row else "no answer yet"


def _queue(row: dict) -> str:
    keys = ("exists", "depth", "available", "in_flight", "consumers")
    return ", ".join(f"{k}={row[k]}" for k in keys if k in row)
