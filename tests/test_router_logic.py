"""The reference router's socket-free decisions: multicast outcome combination and consumer choice.

The expected multicast outcomes are written out by hand as a table from the rule in
reference/router/settlement.py (003_9cdc7c48796dae4f.txt §12.1.1.4), not computed the way the code does:

  rejected  - at least one consumer rejected;
  accepted  - at least one accepted and none rejected;
  modified  - none accepted or rejected, and some copy may have reached its consumer;
  released  - it reached none of them.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

import pytest

from reference.router.distribution import (
    BALANCED,
    CLOSEST,
    RoundRobin,
    pick_anycast,
    pick_balanced,
    pick_closest,
)
from reference.router.settlement import combine_multicast

ACC, REJ, REL, MOD = "accepted", "rejected", "released", "modified"

# The distinct outcomes among the copies -> what the producer must see. Every non-empty subset, by hand.
EXPECTED = {
    frozenset({ACC}): ACC,
    frozenset({REJ}): REJ,
    frozenset({REL}): REL,
    frozenset({MOD}): MOD,
    frozenset({ACC, REJ}): REJ,
    frozenset({ACC, REL}): ACC,
    frozenset({ACC, MOD}): ACC,
    frozenset({REJ, REL}): REJ,
    frozenset({REJ, MOD}): REJ,
    frozenset({REL, MOD}): MOD,
    frozenset({ACC, REJ, REL}): REJ,
    frozenset({ACC, REJ, MOD}): REJ,
    frozenset({ACC, REL, MOD}): ACC,
    frozenset({REJ, REL, MOD}): REJ,
    frozenset({ACC, REJ, REL, MOD}): REJ,
}

# Every ordered combination of 1, 2 and 3 copies: 4 + 16 + 64 cases.
COMBINATIONS = [combo for n in (1, 2, 3) for combo in itertools.product((ACC, REJ, REL, MOD), repeat=n)]


def test_the_table_covers_every_mix_of_outcomes():
    subsets = {frozenset(c) for n in range(1, 5) for c in itertools.combinations((ACC, REJ, REL, MOD), n)}
    assert set(EXPECTED) == subsets
    assert len(COMBINATIONS) == 84


@pytest.mark.parametrize("outcomes", COMBINATIONS, ids="+".join)
def test_combine_multicast_follows_the_table(outcomes):
    assert combine_multicast(outcomes) == EXPECTED[frozenset(outcomes)]


@pytest.mark.parametrize("outcomes", COMBINATIONS[4:20], ids="+".join)
def test_combine_multicast_does_not_depend_on_arrival_order(outcomes):
    assert combine_multicast(outcomes) == combine_multicast(tuple(reversed(outcomes)))


def test_combine_multicast_accepts_any_iterable():
    assert combine_multicast(o for o in (REL, ACC)) == ACC
    assert combine_multicast(iter([MOD, REL])) == MOD


def test_no_copies_at_all_is_released():
    assert combine_multicast([]) == REL
    assert combine_multicast(iter(())) == REL


@pytest.mark.parametrize("bad", ["accept", "ACCEPTED", "settled", "received", "", None])
def test_a_non_terminal_or_unknown_outcome_is_a_value_error(bad):
    with pytest.raises(ValueError):
        combine_multicast([bad])


def test_a_bad_outcome_is_reported_even_after_a_deciding_one():
    # A rejection already decides the result, yet a nonsense outcome later in the list is still an error.
    with pytest.raises(ValueError, match="bogus"):
        combine_multicast([REJ, ACC, "bogus"])


# ---- consumer choice ----------------------------------------------------------------------------------------


@dataclass(eq=False)
class P:
    name: str
    outstanding: int = 0
    cost: int = 1


def picks(pick, paths, n, *, settle_none: bool = False, ties: RoundRobin | None = None) -> Counter:
    """Choose n times; with settle_none every chosen path keeps the delivery outstanding."""
    ties = ties or RoundRobin()
    chosen: Counter = Counter()
    for _ in range(n):
        path = pick(paths, ties)
        chosen[path.name] += 1
        if settle_none:
            path.outstanding += 1
    return chosen


def test_balanced_picks_the_path_with_fewest_outstanding():
    paths = [P("a", outstanding=3), P("b", outstanding=1), P("c", outstanding=2)]
    assert pick_balanced(paths, RoundRobin()).name == "b"
    paths[1].outstanding = 5
    assert pick_balanced(paths, RoundRobin()).name == "c"


def test_balanced_ignores_cost():
    paths = [P("near", outstanding=2, cost=1), P("far", outstanding=0, cost=50)]
    assert pick_balanced(paths, RoundRobin()).name == "far"


def test_balanced_fills_the_least_loaded_paths_first():
    # Nothing settles: every pick adds one outstanding delivery to the chosen path. Starting from 4/0/2,
    # six picks bring all three to 4: four to b, two to c, none to a.
    paths = [P("a", outstanding=4), P("b"), P("c", outstanding=2)]
    chosen = picks(pick_balanced, paths, 6, settle_none=True)
    assert chosen == Counter({"b": 4, "c": 2})
    assert [p.outstanding for p in paths] == [4, 4, 4]


@pytest.mark.parametrize("count", [2, 3, 5])
def test_balanced_ties_rotate_evenly(count):
    # Everything settles at once (outstanding stays equal): every pick is a tie among all paths.
    paths = [P(f"p{i}") for i in range(count)]
    chosen = picks(pick_balanced, paths, 60 * count)
    assert chosen == Counter({p.name: 60 for p in paths})


def test_balanced_tie_rotation_visits_each_path_before_repeating():
    paths = [P("a"), P("b"), P("c")]
    ties = RoundRobin()
    order = [pick_balanced(paths, ties).name for _ in range(6)]
    assert sorted(order[:3]) == ["a", "b", "c"]
    assert sorted(order[3:]) == ["a", "b", "c"]


def test_balanced_with_load_stays_even_over_time():
    paths = [P("a"), P("b"), P("c"), P("d")]
    chosen = picks(pick_balanced, paths, 400, settle_none=True)
    assert chosen == Counter({"a": 100, "b": 100, "c": 100, "d": 100})


def test_closest_picks_the_lowest_cost_whatever_its_load():
    paths = [P("far", cost=5), P("near", cost=1, outstanding=1000), P("mid", cost=2)]
    chosen = picks(pick_closest, paths, 30, settle_none=True)
    assert chosen == Counter({"near": 30})


def test_closest_shares_evenly_among_the_lowest_cost_paths():
    paths = [P("x", cost=2), P("a", cost=1), P("y", cost=3), P("b", cost=1), P("c", cost=1)]
    chosen = picks(pick_closest, paths, 300)
    assert chosen == Counter({"a": 100, "b": 100, "c": 100})


def test_a_single_path_is_always_chosen():
    only = [P("only", outstanding=9, cost=9)]
    assert picks(pick_balanced, only, 5) == Counter({"only": 5})
    assert picks(pick_closest, only, 5) == Counter({"only": 5})


def test_pick_anycast_dispatches_on_the_distribution():
    paths = [P("cheap-busy", outstanding=5, cost=1), P("dear-idle", outstanding=0, cost=9)]
    assert pick_anycast(CLOSEST, paths, RoundRobin()).name == "cheap-busy"
    assert pick_anycast(BALANCED, paths, RoundRobin()).name == "dear-idle"


def test_round_robin_picks_the_least_recently_chosen_when_the_tie_set_changes():
    a, b, c = P("a"), P("b"), P("c")
    ties = RoundRobin()
    seen = [ties.pick([a, b, c]).name, ties.pick([b, c]).name, ties.pick([a, b, c]).name]
    # Whatever the first two picks were, one of the three paths has not been chosen yet: the third pick,
    # a tie among all three, must go to it.
    never_chosen = {"a", "b", "c"} - set(seen[:2])
    assert seen[2] in never_chosen, f"picked {seen}: the third pick repeated an earlier choice"


# ---- PriorityPending: the copies waiting on an inter-router link --------------------------------------------------


def test_priority_pending_serves_higher_priorities_first_and_fifo_within_one():
    from reference.router.sending import PriorityPending
    from reference.router.state import Outbound

    pending = PriorityPending()

    def add(priority, seq):
        pending.append(Outbound(inbound=None, consumer=None, data=b"", priority=priority, seq=seq))

    def take():
        head = pending[0]
        assert pending.popleft() is head
        return head.priority, head.seq

    add(4, 1), add(4, 2), add(2, 3)
    assert take() == (4, 1)
    add(9, 4), add(2, 5)  # a later higher priority overtakes what waits
    assert [take() for _ in range(2)] == [(9, 4), (4, 2)]
    add(4, 6)  # the priority a drained queue had comes back
    assert len(pending) == 3 and [o.seq for o in pending] == [6, 3, 5]
    assert [take() for _ in range(3)] == [(4, 6), (2, 3), (2, 5)]
    assert not pending and len(pending) == 0
    with pytest.raises(IndexError):
        pending.popleft()
    add(7, 7)
    pending.clear()
    assert not pending
    with pytest.raises(IndexError):
        pending[0]
    add(1, 8)
    assert take() == (1, 8)
    add(0, 9)  # the lowest priority AMQP has (§3.2.1), once the queue was emptied
    assert take() == (0, 9)
    add(5, 10), add(0, 11)
    assert [take() for _ in range(2)] == [(5, 10), (0, 11)]
    add(0, 12)
    assert take() == (0, 12) and not pending


# ---- link route addresses at the broker ---------------------------------------------------------------------------
# A link route may name the broker's resource differently from the address the client attached to (qdrouterd's
# linkRoute delExternalPrefix and addExternalPrefix; the harness renders a RabbitMQ queue as /amq/queue/NAME with
# it): the prefix to delete goes first, then the one to add.


@pytest.mark.parametrize(("delete", "add", "address", "external"), [
    (None, None, "b2.queue", "b2.queue"),
    (None, "/amq/queue/", "b2.queue", "/amq/queue/b2.queue"),
    ("b2.", None, "b2.queue", "queue"),
    ("b2.", "/amq/queue/", "b2.queue", "/amq/queue/queue"),
    ("other.", "/amq/queue/", "b2.queue", "/amq/queue/b2.queue"),  # a prefix the address lacks is not deleted
])
def test_the_address_at_the_broker_drops_then_adds_the_configured_prefixes(delete, add, address, external):
    from reference.router.config import LinkRoute
    from reference.router.linkroutes import _external_address

    section = LinkRoute(prefix="b2", direction="in", connection="broker", add_external_prefix=add,
                        del_external_prefix=delete)
    assert _external_address(section, address) == external


# ---- waypoint capabilities ------------------------------------------------------------------------------------------
# A broker attaches to a waypoint address with the terminus capability `qd.waypoint` (ordinal 1) or `qd.waypoint.N`,
# N one digit 1-9 (003 §12.1.4; qdrouterd's reading). Anything else is no waypoint capability: the link is an
# ordinary consumer's or producer's.


@pytest.mark.parametrize(("capabilities", "ordinal"), [
    ([], 0),
    (["qd.waypoint"], 1),
    (["qd.waypoint.1"], 1),
    (["qd.waypoint.2"], 2),
    (["queue", "qd.waypoint.9"], 9),
    (["qd.waypoint.0"], 0),
    (["qd.waypoint.10"], 0),
    (["qd.waypoint.x"], 0),
    (["qd.waypointy"], 0),
    (["queue"], 0), (["topic"], 0), (["shared", "global"], 0),
    (["abcdefghijk.5"], 0),  # thirteen characters ending in a digit, but not qd.waypoint.N
])
def test_the_waypoint_ordinal_is_read_from_qd_waypoint_capabilities_only(capabilities, ordinal):
    from proton import Data, symbol

    from reference.router.attachments import _waypoint_ordinal

    data = Data()
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for capability in capabilities:
        data.put_symbol(symbol(capability))
    data.exit()
    assert _waypoint_ordinal(data) == ordinal


# ---- link routes another router advertises ----------------------------------------------------------------------
# A router that holds a broker connection advertises its link routes per direction (in: client senders, out: client
# receivers, 003 §12.2.1); an attach follows an advertised route of its own direction only.


def test_an_advertised_link_route_matches_attaches_of_its_direction_only():
    from types import SimpleNamespace

    from reference.router.addressing import prefix_to_pattern
    from reference.router.linkroutes import LinkRouter

    b2, b3 = prefix_to_pattern("b2"), prefix_to_pattern("b3")  # as route_key writes a prefix
    state = SimpleNamespace(link_routes={"R2": (5, frozenset({f"out:{b2}"})), "R3": (7, frozenset({f"in:{b3}"}))})
    router = SimpleNamespace(mesh=SimpleNamespace(state=state))
    routes = LinkRouter(router, [])
    assert routes._advertised_match("out", "b2.orders") == f"out:{b2}"
    assert routes._advertised_match("in", "b2.orders") is None  # R2 serves receivers of b2 only
    assert routes._advertised_match("in", "b3.orders") == f"in:{b3}"
    assert routes._advertised_match("out", "b3.orders") is None
