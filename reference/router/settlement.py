"""Delivery outcomes and how the router combines them.

Source: 003_9cdc7c48796dae4f.txt §12.1.1.4. For an unsettled anycast delivery the producer sees exactly
the outcome its one consumer chose. For an unsettled multicast delivery the router waits until every
consumer's delivery is final and reports one combined outcome:

* rejected  - at least one consumer rejected it;
* accepted  - at least one consumer accepted it and none rejected it;
* modified  - no consumer accepted or rejected it, and it may have reached some (in doubt);
* released  - it reached none of the consumers.

The order of those checks is the precedence: a rejection anywhere wins over acceptances, an acceptance
wins over in-doubt copies, and only when every copy came back untouched is the whole delivery released.
"""

from __future__ import annotations

from collections.abc import Iterable

ACCEPTED = "accepted"
REJECTED = "rejected"
RELEASED = "released"
MODIFIED = "modified"

OUTCOMES = (ACCEPTED, REJECTED, RELEASED, MODIFIED)


def combine_multicast(outcomes: Iterable[str]) -> str:
    """The outcome a multicast producer sees, given the final outcome of every consumer's copy.

    No copies at all (nobody was subscribed) means the message reached nobody: released.
    """
    seen = set()
    for outcome in outcomes:
        if outcome not in OUTCOMES:
            raise ValueError(f"not a terminal outcome: {outcome!r}")
        seen.add(outcome)
    for winner in (REJECTED, ACCEPTED, MODIFIED):
        if winner in seen:
            return winner
    return RELEASED
