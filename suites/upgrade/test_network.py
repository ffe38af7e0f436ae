"""A network of two brokers upgraded broker by broker under traffic (UPGRADE-ROLLING-1).

upgrade-network: B1's network connector forwards the upgrade.* queues to B2 (004_05e35cdd7bc39ede.txt, "Configure
Network Connectors for Your Broker": a producer on MyBroker1, a consumer on MyBroker2). Forwarding follows demand:
a message waits on B1 until B2 has a consumer for its queue, as in suites/network. The network is ActiveMQ Classic's
`<networkConnector>` over OpenWire, and Artemis's AMQP federation. Both brokers start on the previous release of the
session's broker vendor. Durable producers run on B1 and consumers on B2. The stored queue has no consumer until both
steps are done, so what it holds waits on B1 through both.

Step 1 replaces B2, stopped gracefully or with kill -9, by the session's release. Its consumers go with it. B1's
producers go on: while B2 is down, each sends DURING more messages, and all must be accepted (B1 holds them). A second
generation of consumers attaches to B2's new release.
Step 2 replaces B1 the same way while a second generation of producers sends. Its producers go with it, and a third
generation sends to B1's new release, with the stored queue's first consumer, on B2.

Judged over every generation: nothing accepted is lost. Duplicates are counted and not judged: what each network
promises is at least once. Neither the seed nor the products promise once-only delivery across a lost connection. A
message B1 forwarded, whose acknowledgement from B2 was cut off by the step, is forwarded again: ActiveMQ Classic's
bridge acknowledges on B1 what B2 has answered, and Artemis's federation settles on B1 what B2 has taken. A message
B2 had delivered to a consumer whose acknowledgement went with B2's stop is delivered again too. `redeliveries`
records which duplicates that consumer-side redelivery explains (one copy before B2's step, one after): the others
are the link's. The case ends once B1 is empty and B2 has settled, as suites/network does. Whatever B2 still holds
then is no accepted message (each reached a consumer). It is offered to a new consumer and recorded (`left_on_b2`).

Order: suites/network asserts a producer's order only on a network without faults (NETWORK-QUEUE-1, 004 "Next
Steps"), never across a lost link or broker (test_faults.py counts, and does not order). So here order is asserted
for the producers that send after the last step only, on the upgraded network. For the others it is recorded
(`order_across_steps`, redeliveries aside).

`resume_s` per step, the network's downtime: from the stop until a message that B1 accepted after the stop reaches a
consumer on B2. For B2's step, that is one of the messages B1 held while B2 was down. For B1's step, it is one the new
release accepted. `details.steps`, one row per step: node, to_version, resume_s, lost, duplicated (over the messages
of the generations that sent during the step or after it), and `held_on_b1` when the step ended (what B1 kept for
B2).
"""

import time
from functools import partial

import pytest

from harness import checkers
from harness.wait import wait_for

from ..conftest import PREVIOUS, mixed_releases
from ..network.conftest import wait_or_say, wait_settled
from .conftest import (AFTER, BEFORE, QUEUES, STOPS, STORED, WAIT, depths, redeliveries_across, releases,
                       replace_or_skip, start_generation, step_row, wait_delivered, wait_drained, wait_running)

TOPOLOGY = "upgrade-network"
DURING = 100  # messages each producer on B1 sends, all accepted, while B2 is down
LATE_WAIT = 10.0  # how long a new consumer on B2 is given for what B2 kept from the attached ones


@pytest.mark.spec("UPGRADE-ROLLING-1")
@pytest.mark.requires("network-of-brokers", "store-and-forward", "durable")
@pytest.mark.parametrize("stop", list(STOPS))
def test_a_network_of_brokers_upgraded_broker_by_broker_under_traffic_loses_nothing(stop, upgrade_topology, clients,
                                                                                   interop, details):
    _previous, current = releases(interop)
    running = upgrade_topology(mixed_releases(interop, "broker", {"B1": PREVIOUS, "B2": PREVIOUS}), TOPOLOGY)
    b1, b2 = running["B1"], running["B2"]
    details.update(topology=TOPOLOGY, step="upgrade", stop=stop, from_version=b1.info.version)
    rows: list[tuple] = []  # per step: (the replaced peer, the generations that sent during or after it, figures)

    # Step 1: B2, where the consumers are, while B1's producers go on.
    first = start_generation(clients, b1, "before", send=2 * BEFORE, consumers_at=b2)
    wait_running(first)
    mark: dict = {}  # producer -> the first seq it sent while B2 was down

    def traffic_while_down(_peer):
        for snd in first.producers.values():
            mark[snd.name] = snd.sent
            snd.send(DURING, durable=True)
        for snd in first.producers.values():
            snd.wait_outcomes(2 * BEFORE + DURING, timeout=WAIT)
    began = time.monotonic()
    replace_or_skip(b2, current, stop, traffic_while_down)
    second = start_generation(clients, b1, "between", consumers_at=b2)  # consumers on B2, producers on B1
    _wait_forwarded(b2, [first], second, mark, "B1 held while B2 was down")
    rows.append((b2, [first], {"resume_s": round(time.monotonic() - began, 3), "held_on_b1": _held(b1)}))

    # Step 2: B1, where the producers are, while the second generation sends; a third sends to its new release.
    wait_running(second)
    began = time.monotonic()
    replace_or_skip(b1, current, stop)
    third = start_generation(clients, b1, "after", consumers_on=(STORED,), send=AFTER, consumers_at=b2)
    _wait_forwarded(b2, [third], second, dict.fromkeys((p.name for p in third.producers.values()), 0),
                    f"B1 accepted on release {b1.info.version}")
    rows.append((b1, [second, third], {"resume_s": round(time.monotonic() - began, 3), "held_on_b1": _held(b1)}))
    for snd in third.producers.values():
        snd.wait_outcomes(AFTER, timeout=WAIT)

    gens = [first, second, third]
    missing = wait_delivered(gens)
    if missing is None:
        wait_drained(b1, gens)  # B1 forwarded everything: B2 has a consumer on every queue
        # Then B2 quiet, as suites/network judges a network once it has settled. Whatever B2 still holds then is no
        # accepted message (all reached a consumer): copies it did not dispatch to its consumers (seen once with
        # ActiveMQ Classic), which a new consumer is offered (`left_on_b2`).
        receivers = [r for g in gens for r in g.consumers.values()]
        left = wait_settled(lambda: (*(r.count for r in receivers), *depths(b2).values()),
                            "B2's consumers and queue depths", WAIT)[len(receivers):]
        left_on_b2 = {q: n for q, n in zip(QUEUES, left, strict=True) if n}
        if left_on_b2:
            gens.append(_late_consumers(clients, b2, left_on_b2, gens, details))
    after_steps = [p.name for p in third.producers.values()]
    producers = [p.name for g in gens for p in g.producers.values()]
    receivers = [r.name for g in gens for r in g.consumers.values()]
    verdict = checkers.compose(
        clients.history,
        total_queue=partial(checkers.total_queue, producer=producers, receivers=receivers, allow_duplicates=True),
        ordering=partial(checkers.ordering, producer=after_steps, receivers=receivers),
    ).fill(details, "lost", "duplicated")
    across = checkers.ordering(clients.history, producer=producers, receivers=receivers)
    # Which duplicates a consumer's step explains (a copy before B2's step, one after): the rest are the network's.
    redelivered = redeliveries_across(list(first.consumers.values()),
                                      [r for g in gens[1:] for r in g.consumers.values()])
    details.update(to_version=b1.info.version, resume_s=max(figures["resume_s"] for _, _, figures in rows),
                   order_across_steps=across.as_details(),
                   redeliveries={k: v for k, v in redelivered.as_details().items() if k != "ok"},  # a figure only
                   accepted={q: sum(len(g.accepted().get(q, ())) for g in gens) for q in QUEUES},
                   in_doubt_at_step={q: p.sent - p.settled_count() for q, p in second.producers.items()},
                   steps=[step_row(clients, peer.name, peer, sent, gens, **figures) for peer, sent, figures in rows])
    assert missing is None and verdict.ok, (
        f"network upgraded {details['from_version']} -> {details['to_version']} after {stop} stops: "
        f"{missing or ''}\n{verdict.failures()}")


def _wait_forwarded(b2, senders, at, since: dict[str, int], what: str) -> None:
    """Until a message of `senders`' producers numbered from `since[producer]` on reaches a consumer of
    generation `at` on B2: the network forwards again."""
    def arrived() -> bool:
        return any(any(seq >= since[p.name] for seq in at.consumers[q].seqs(p.name))
                   for g in senders for q, p in g.producers.items() if q in at.consumers)
    wait_for(arrived, WAIT, f"a message {what} at a consumer on {b2.name}",
             describe=lambda: f"received on B2 {({q: r.count for q, r in at.consumers.items()})}")


def _late_consumers(clients, b2, left: dict[str, int], gens, details):
    """What B2 keeps and does not give its consumers once all is delivered: a new consumer on each such queue, until
    that queue is empty or LATE_WAIT has passed. Recorded in details (`left_on_b2`: queue -> depth, what the new
    consumer got, how many of those were copies of messages delivered before, and the timeout's message where the
    queue stayed as it was); a generation of those consumers, which the verdict judges with the others (their
    copies are duplicates)."""
    delivered = {(m.producer, m.seq) for g in gens for r in g.consumers.values() for m in r.messages()}
    late = start_generation(clients, b2, "late", consumers_on=tuple(left), producers_on=())
    stuck = wait_or_say(lambda: not any(depths(b2)[q] for q in left), LATE_WAIT,
                        f"{', '.join(left)} on B2 emptied by a new consumer", describe=lambda: str(depths(b2)))
    details["left_on_b2"] = {
        q: {"depth": n, "then_delivered": late.consumers[q].count, "depth_after": b2.queue_stats(q)["depth"],
            "copies": sum((m.producer, m.seq) in delivered for m in late.consumers[q].messages()),
            "stuck": stuck}
        for q, n in left.items()}
    return late


def _held(b1) -> int | None:
    try:
        return sum(b1.queue_stats(q)["depth"] for q in QUEUES)
    except NotImplementedError:
        return None
