"""A mirrored pair upgraded site by site under traffic (UPGRADE-ROLLING-1).

upgrade-mirror: broker DC1, the live site, mirrors to DC2, the disaster-recovery site (002_f23507c2891d6d06.txt,
"Mirroring": sends and acknowledgements go to the target "without blocking any operations from producers and
consumers", through the events DC1 keeps on its queue $ACTIVEMQ_ARTEMIS_MIRROR_DC2; "Reconnecting and Failover": the
broker connection dials again, here every 200 ms for ever). Both start on the previous release of the session's broker
vendor, and both declare the upgrade suite's three queues. Durable producers and consumers run on DC1 only (002, "Dual
Mirror": "It is recommended to not have active consumers on both servers").

Step 1 replaces DC2 (the mirror target), stopped gracefully or with kill -9, by the session's release. DC1's clients
are not touched. While DC2 is down, each producer on DC1 sends DURING more messages, and all must be accepted: the
mirror does not block DC1, and the events wait on DC1's mirror queue (`mirror_backlog`). Once DC2 runs its new
release, the mirror must catch up: the mirror queue empties (`mirror_caught_up_s`, from DC2's start).

Step 2 replaces DC1 (the live site) the same way while a second generation of producers sends. Its clients go with
it, and a third generation attaches to the new release, as in test_in_place.py. The mirror connection must come
back, and the mirror must catch up again.

Judged at the end, on the clients' side as in test_in_place.py: nothing accepted is lost, each duplicate is a
redelivery across DC1's step (its acknowledgement went with the connection), and each producer's order holds
(redeliveries aside). Judged on the mirror: it is idle (DC1's mirror queue is empty), and DC2 holds exactly what DC1
holds on the stored queue. That is the failover question: "would switching to DC2 now lose anything". A consumer on
DC2 must get every message DC1 accepted on the stored queue, each once; then a consumer on DC1 reads them too. DC2's
depths of the live queues are recorded (`dc2_depths`): a message left there that DC1 delivered (its acknowledgement
not mirrored) would be delivered again after a failover, a duplicate and not a loss.

`details.steps`, one row per step: node, to_version, resume_s, lost, duplicated, mirror_caught_up_s, and
dc2_stored_gap (DC1's depth of the stored queue minus DC2's once the mirror has caught up after the step: what a
failover then would lose there; it says which step lost what the final check finds missing). `resume_s` is
the step's downtime. For DC2's step, the mirror's: from the stop until DC1's mirror connection is up again (DC1's
clients see none). For DC1's step, the clients': from the stop until the new release accepts a message. lost and
duplicated count the messages of the generations that sent during the step or after it.
"""

import time

import pytest

from harness import checkers
from harness.wait import WaitTimeout, wait_for

from ..brokerconnections.conftest import mirror_queue, wait_connected, wait_mirror_idle
from ..conftest import PREVIOUS, mixed_releases
from .conftest import (AFTER, BEFORE, LIVE, QUEUES, STOPS, STORED, WAIT, depths, judge, releases, replace_or_skip,
                       start_generation, step_row, wait_delivered, wait_drained, wait_running)

TOPOLOGY = "upgrade-mirror"
MIRROR = "DC2"  # DC1's mirror connection, so its events wait on $ACTIVEMQ_ARTEMIS_MIRROR_DC2
DURING = 100  # messages each producer on DC1 sends, all accepted, while DC2 is down


@pytest.mark.spec("UPGRADE-ROLLING-1")
@pytest.mark.requires("mirror", "store-and-forward", "durable")
@pytest.mark.parametrize("stop", list(STOPS))
def test_a_mirrored_pair_upgraded_site_by_site_under_traffic_loses_nothing(stop, upgrade_topology, clients, interop,
                                                                           details):
    _previous, current = releases(interop)
    running = upgrade_topology(mixed_releases(interop, "broker", {"DC1": PREVIOUS, "DC2": PREVIOUS}), TOPOLOGY)
    dc1, dc2 = running["DC1"], running["DC2"]
    details.update(topology=TOPOLOGY, step="upgrade", stop=stop, from_version=dc1.info.version)
    steps: list[dict] = []
    details["steps"] = steps
    wait_connected(dc1, MIRROR, WAIT)

    # Step 1: DC2, the mirror target, while DC1 goes on accepting.
    first = start_generation(clients, dc1, "before", send=2 * BEFORE)
    wait_running(first)
    backlog: dict = {}

    def traffic_while_down(_peer):
        for snd in first.producers.values():
            snd.send(DURING, durable=True)
        for snd in first.producers.values():
            snd.wait_outcomes(2 * BEFORE + DURING, timeout=WAIT)
        backlog["depth"] = dc1.queue_stats(mirror_queue(MIRROR))["depth"]
    began = time.monotonic()
    replace_or_skip(dc2, current, stop, traffic_while_down)
    back = time.monotonic()
    wait_connected(dc1, MIRROR, WAIT)
    resume_s = round(time.monotonic() - began, 3)
    late = [_mirror_idle(dc1)]  # per step: None once the mirror caught up, else the timeout's message
    row = {"resume_s": resume_s, "mirror_caught_up_s": None if late[0] else round(time.monotonic() - back, 3),
           "mirror_backlog": backlog.get("depth"), "dc2_stored_gap": _gap(dc1, dc2)}

    # Step 2: DC1, the live site, under a second generation's traffic; a third attaches to its new release.
    second = start_generation(clients, dc1, "between", consumers_on=())
    wait_running(second)
    began = time.monotonic()
    replace_or_skip(dc1, current, stop)
    back = time.monotonic()
    third = start_generation(clients, dc1, "after", send=AFTER)
    wait_for(lambda: any(o.outcome == "accepted" for p in third.producers.values()
                         for o in dict(p.outcomes).values()), WAIT,
             f"a message accepted by DC1 on release {dc1.info.version}")
    resume_s2 = round(time.monotonic() - began, 3)
    for snd in third.producers.values():
        snd.wait_outcomes(AFTER, timeout=WAIT)
    gens = [first, second, third]
    missing = wait_delivered(gens, queues=LIVE)
    if missing is None:
        wait_drained(dc1, gens, queues=LIVE)
    wait_connected(dc1, MIRROR, WAIT)
    late.append(_mirror_idle(dc1))
    row2 = {"resume_s": resume_s2, "mirror_caught_up_s": None if late[1] else round(time.monotonic() - back, 3),
            "dc2_stored_gap": _gap(dc1, dc2)}
    details.update(to_version=dc1.info.version, resume_s=max(row["resume_s"], resume_s2),
                   accepted={q: sum(len(g.accepted()[q]) for g in gens) for q in QUEUES},
                   in_doubt_at_step={q: p.sent - p.settled_count() for q, p in second.producers.items()})

    # The failover question: what DC2 holds of the stored queue, read on DC2 (no consumer there before now).
    held = {"dc1_depths": depths(dc1), "dc2_depths": depths(dc2)}
    failover = start_generation(clients, dc1, "failover", consumers_on=(STORED,), producers_on=(), consumers_at=dc2)
    # The mirror is idle: DC2 holds all it will get. Its consumer takes that; what DC1 accepted and it lacks is lost.
    wait_drained(dc2, [failover], queues=(STORED,))
    failover.consumers[STORED].conn.sync()
    stored = [g.producers[STORED].name for g in gens]
    mirror = checkers.total_queue(clients.history, producer=stored, receivers=failover.consumers[STORED].name,
                                  allow_duplicates=False)
    order = checkers.ordering(clients.history, producer=stored, receivers=failover.consumers[STORED].name)
    details["mirror"] = {**held, "on_dc2": mirror.delivered, "lost_on_dc2": mirror.lost,
                         "lost_on_dc2_ids": mirror.lost_ids, "duplicated_on_dc2": mirror.duplicated,
                         "reordered_on_dc2": order.reordered, "not_caught_up": [m for m in late if m],
                         # where DC1's step cut each producer of the stored queue: its last accepted message
                         "last_accepted": {p.name: max(g.accepted()[STORED], default=None)
                                           for g in gens for p in [g.producers[STORED]]}}

    # Then DC1's own consumer of the stored queue, and the clients' verdict over every generation on DC1.
    last = start_generation(clients, dc1, "stored", consumers_on=(STORED,), producers_on=())
    mine = [*gens, last]
    missing = missing or wait_delivered(mine)
    if missing is None:
        wait_drained(dc1, mine)
    verdict = judge(clients, mine, details, before=[*first.consumers.values()],
                    after=[r for g in (third, last) for r in g.consumers.values()], allow_duplicates=True)
    steps.append(step_row(clients, "DC2", dc2, [first], mine, **row))
    steps.append(step_row(clients, "DC1", dc1, [second, third], mine, **row2))
    assert missing is None and verdict.ok, (
        f"mirrored pair upgraded {details['from_version']} -> {details['to_version']} after {stop} stops: "
        f"{missing or ''}\n{verdict.failures()}")
    assert not any(late), f"the mirror did not catch up: {[m for m in late if m]}"
    assert mirror.ok, f"a failover to DC2 would not serve what DC1 accepted on {STORED}: {mirror.as_details()}"
    assert held["dc2_depths"][STORED] == held["dc1_depths"][STORED], (
        f"once the mirror was idle, DC2 held {held['dc2_depths'][STORED]} message(s) on {STORED} and DC1 "
        f"{held['dc1_depths'][STORED]}")


def _gap(dc1, dc2) -> int:
    """How many messages fewer DC2 holds than DC1 on the stored queue (no producer sends to it now, and the mirror
    has caught up or given up): what a failover after this step would lose there."""
    return dc1.queue_stats(STORED)["depth"] - dc2.queue_stats(STORED)["depth"]


def _mirror_idle(dc1) -> str | None:
    """None once DC1's mirror queue is empty (every event confirmed by DC2), or the timeout's message."""
    try:
        wait_mirror_idle(dc1, MIRROR, WAIT)
    except WaitTimeout as exc:
        return str(exc)
    return None
