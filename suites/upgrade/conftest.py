"""Helpers of the rolling-upgrade suite: which releases a step moves between, steady durable traffic on the
upgrade topologies' three queues (upgrade-broker, upgrade-mirror, upgrade-network), the checkers over generations,
and the data directory's checksums.

Traffic runs in generations. A generation is one producer and (on a live queue) one consumer per queue, each on a
connection of its own; the step (a stop or a kill -9, the other release put in place, a start) ends every
connection, so the next generation attaches anew, as an application reconnecting would. Each producer is a stream
of its own for the checkers (its link name), so lost, duplicated and order are judged across the step.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from functools import partial

import pytest

from harness import checkers
from harness.peers.base import PeerUnavailable
from harness.peers.vendors import parse_choice
from harness.peers.versions import previous_choice
from harness.pytest_plugin import NOT_APPLICABLE
from harness.wait import WaitTimeout, wait_for

TOPOLOGY = "upgrade-broker"
NODE = "B1"
LIVE = ("upgrade.a", "upgrade.b")  # consumers attached throughout: acknowledgements in flight at the step
STORED = "upgrade.c"  # no consumer before the step: what it holds crosses the step in the journal only
QUEUES = (*LIVE, STORED)
WINDOW = 10  # unsettled durable messages per producer at most, as a producer's send window
QUEUED = 2000  # messages handed to each producer before the step: far more than it sends before the step comes
BEFORE = 100  # accepted messages per producer before the step is taken
AFTER = 100  # messages per producer after the step
WAIT = 60.0  # deadline for what the broker does once it runs: accept, deliver, settle
STOPS = {"graceful": False, "kill-9": True}  # a step's stop kind -> Peer.replace_binary's kill


def releases(interop, role: str = "broker") -> tuple[str, str | None]:
    """(previous, current) versions of the session's `role` vendor (current None: its pinned default), or
    not-applicable with the reason where it has no previous release here (the reference, RabbitMQ, an external peer)
    or the session runs that release itself."""
    name = interop.choices.get(role, "reference")
    previous, why = previous_choice(name)
    if previous is None:
        pytest.skip(f"{NOT_APPLICABLE}an upgrade in place needs two releases of the {role}: {why}")
    return parse_choice(previous).version, parse_choice(name).version


@pytest.fixture
def upgrade_topology(topology, request):
    """`upgrade_topology(vendors=None, name="upgrade-broker")` -> that topology, started anew for the next case that
    asks: the case leaves its nodes on other releases than the ones they were started with (after the case, every
    node is put in the topology's `silent`, which makes the plugin replace the topology before its next use)."""
    started = []

    def get(vendors=None, name: str = TOPOLOGY):
        started.append(topology(name, vendors=vendors))
        return started[-1]
    yield get
    for running in started:
        running.silent.update(dict.fromkeys(running.topology.nodes,
                                            f"its release was replaced in place by {request.node.name}"))


def replace_or_skip(peer, version: str | None, stop: str, before_start=None) -> None:
    """Peer.replace_binary with the stop kind of STOPS; skipped where the provider cannot replace a binary."""
    try:
        peer.replace_binary(version, kill=STOPS[stop], before_start=before_start)
    except PeerUnavailable as exc:
        pytest.skip(f"cannot upgrade {peer.name} in place: {exc}")


def depths(peer, queues=QUEUES) -> dict[str, int]:
    """queue -> its depth on `peer` (a provider with a queue view)."""
    return {q: peer.queue_stats(q)["depth"] for q in queues}


def checksums(folder) -> dict[str, str]:
    """relative path -> SHA-256 of every file under `folder` (a broker's data, while it is stopped)."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@dataclass
class Generation:
    """One producer per queue and a consumer on each live queue (on every queue with `stored_too`)."""

    producers: dict = field(default_factory=dict)  # queue -> RecordingSender
    consumers: dict = field(default_factory=dict)  # queue -> RecordingReceiver

    def accepted(self) -> dict[str, set[int]]:
        """queue -> the seqs its producer had accepted."""
        return {q: {seq for seq, o in dict(p.outcomes).items() if o.outcome == "accepted"}
                for q, p in self.producers.items()}


def start_generation(clients, broker, tag: str, *, consumers_on=LIVE, send: int = QUEUED, producers_on=QUEUES,
                     consumers_at=None) -> Generation:
    """Consumers on `consumers_on` first (at `consumers_at`, else at `broker`), then a durable producer at `broker` on
    each of `producers_on`, handed `send` messages."""
    gen = Generation()
    at = consumers_at or broker
    for queue in consumers_on:
        conn = clients.connect(at.url)
        gen.consumers[queue] = conn.receiver(at.wire_address(queue), f"rcv-{tag}-{queue}-{_unique()}",
                                             credit=50, durable=True)
    for queue in producers_on:
        conn = clients.connect(broker.url)
        snd = conn.sender(broker.wire_address(queue), f"snd-{tag}-{queue}-{_unique()}", durable=True,
                          window=WINDOW)
        if send:
            snd.send(send, durable=True)
        gen.producers[queue] = snd
    return gen


def _unique() -> str:
    return uuid.uuid4().hex[:8]


def wait_running(gen: Generation, minimum: int = BEFORE) -> None:
    """Until every producer has `minimum` outcomes and every consumer has had messages: traffic is under way."""
    wait_for(lambda: all(p.settled_count() >= minimum for p in gen.producers.values())
             and all(c.count for c in gen.consumers.values()), WAIT,
             f"{minimum} outcomes at each producer and deliveries at each live consumer",
             describe=lambda: f"outcomes {[p.settled_count() for p in gen.producers.values()]}, "
                              f"received {[c.count for c in gen.consumers.values()]}")


def delivered(receivers, producer) -> set[int]:
    return set().union(*(r.seqs(producer.name) for r in receivers))


def wait_delivered(gens: list[Generation], timeout: float = WAIT, queues=QUEUES) -> str | None:
    """Until every message each generation's producers had accepted on `queues` has reached one of its queue's
    consumers (of any generation); None, or the timeout's message (the case still fills its details before
    failing)."""
    def missing() -> dict[str, int]:
        out = {}
        for queue in queues:
            receivers = [g.consumers[queue] for g in gens if queue in g.consumers]
            for g in gens:
                if queue not in g.producers:
                    continue
                gone = g.accepted()[queue] - delivered(receivers, g.producers[queue])
                if gone:
                    out[g.producers[queue].name] = len(gone)
        return out
    try:
        wait_for(lambda: not missing(), timeout, "every accepted message at a consumer of its queue",
                 describe=lambda: f"still missing per producer {missing()}")
    except WaitTimeout as exc:
        return str(exc)
    return None


@dataclass
class Redeliveries:
    """A duplicate across a step is a redelivery: one copy reached a consumer before the step (its acknowledgement
    went with the connection) and one after. Any other duplicate (twice before, or twice after) is not explained
    by the step: the broker's at-least-once promise does not cover it."""

    ok: bool
    explained: int
    unexplained: int
    unexplained_ids: list

    def as_details(self) -> dict:
        return {"ok": self.ok, "explained": self.explained, "unexplained": self.unexplained,
                "unexplained_ids": self.unexplained_ids}


def wait_drained(broker, gens: list[Generation], timeout: float = WAIT, queues=QUEUES) -> None:
    """Until the broker holds nothing on `queues` (every message delivered and acknowledged: no further copy can
    come), or, where the provider has no queue view, a round trip on each consumer's connection."""
    try:
        broker.queue_stats(queues[0])
    except NotImplementedError:
        for g in gens:
            for consumer in g.consumers.values():
                if not consumer.detached.is_set():
                    consumer.conn.sync()
        return
    wait_for(lambda: all(broker.queue_stats(q)["depth"] == 0 for q in queues), timeout,
             f"{', '.join(queues)} to be empty on {broker.name}",
             describe=lambda: str({q: broker.queue_stats(q)["depth"] for q in queues}))


def redeliveries_across(before: list, after: list) -> Redeliveries:
    """Judge the duplicates among the receipts of consumers `before` the step and `after` it."""
    counts: dict[tuple, list[int]] = {}
    for index, side in enumerate((before, after)):
        for receiver in side:
            for message in receiver.messages():
                counts.setdefault((message.producer, message.seq), [0, 0])[index] += 1
    duplicated = {k: c for k, c in counts.items() if sum(c) > 1}
    unexplained = sorted(k for k, c in duplicated.items() if c != [1, 1])
    return Redeliveries(not unexplained, len(duplicated) - len(unexplained), len(unexplained),
                        [list(k) for k in unexplained[:10]])


def judge(clients, gens: list[Generation], details, *, before, after, allow_duplicates: bool) -> checkers.Verdict:
    """Lost, duplicated (and whether each duplicate is a redelivery across the step: a copy at a receiver of
    `before` and one at a receiver of `after`) and each producer's order, over every generation's producers and
    consumers; the counts go into `details`."""
    producers = [p.name for g in gens for p in g.producers.values()]
    receivers = [r.name for g in gens for r in g.consumers.values()]
    return checkers.compose(
        clients.history,
        total_queue=partial(checkers.total_queue, producer=producers, receivers=receivers,
                            allow_duplicates=allow_duplicates),
        ordering=partial(checkers.ordering, producer=producers, receivers=receivers,
                         allow_redeliveries=allow_duplicates),
        redeliveries=redeliveries_across(list(before), list(after)),
    ).fill(details, "lost", "duplicated")


def step_row(clients, node: str, peer, producers: list[Generation], gens: list[Generation], **figures) -> dict:
    """A step's row in details.steps: the node, the release it runs now, the figures, and lost and duplicated over
    the messages of the step's `producers` (the generations that sent while it was taken or after it) at every
    consumer of `gens`."""
    verdict = checkers.total_queue(clients.history, producer=[p.name for g in producers for p in g.producers.values()],
                                   receivers=[r.name for g in gens for r in g.consumers.values()],
                                   allow_duplicates=True)
    return {"node": node, "to_version": peer.info.version, **figures, "lost": verdict.lost,
            "duplicated": verdict.duplicated}
