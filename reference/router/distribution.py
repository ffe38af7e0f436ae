"""Choosing consumers for a message: balanced, closest, multicast (003_9cdc7c48796dae4f.txt §12.1.1.3).

These functions see only small `Path`-like objects (anything with `outstanding` and `cost`), so the choice
logic is testable without sockets. `outstanding` is the number of deliveries routed to that path and not yet
settled by it (queued in the router plus sent and unsettled), which is the measure the document names for
balanced distribution; the router never looks at settlement *time*.
"""

from __future__ import annotations

import weakref

from collections.abc import Sequence
from typing import Protocol, TypeVar

BALANCED = "balanced"
CLOSEST = "closest"
MULTICAST = "multicast"
DISTRIBUTIONS = (BALANCED, CLOSEST, MULTICAST)


class Path(Protocol):
    outstanding: int
    cost: int


P = TypeVar("P", bound=Path)


class RoundRobin:
    """Breaks ties evenly: among equally good candidates, the one chosen least recently wins.

    Candidates never chosen count as chosen longest ago, in list order. Memory is weak: a consumer that
    goes away drops out of the table with it.
    """

    def __init__(self) -> None:
        self._turn = 0
        self._last: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def pick(self, tied: Sequence[P]) -> P:
        choice = min(tied, key=lambda p: self._last.get(p, -1))
        self._turn += 1
        self._last[choice] = self._turn
        return choice


def pick_balanced(paths: Sequence[P], ties: RoundRobin) -> P:
    """The path with the fewest outstanding deliveries; ties spread round-robin."""
    fewest = min(p.outstanding for p in paths)
    return ties.pick([p for p in paths if p.outstanding == fewest])


def pick_closest(paths: Sequence[P], ties: RoundRobin) -> P:
    """The path with the lowest cost; consumers at the same lowest cost share the traffic evenly."""
    cheapest = min(p.cost for p in paths)
    return ties.pick([p for p in paths if p.cost == cheapest])


def pick_anycast(distribution: str, paths: Sequence[P], ties: RoundRobin) -> P:
    if distribution == CLOSEST:
        return pick_closest(paths, ties)
    return pick_balanced(paths, ties)
