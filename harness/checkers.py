"""Invariants over recorded histories: lost, duplicated, reordered, distribution, multicast outcome rules.

Each checker reads a `harness.history.History` (or its events, or their `as_record()` dicts, e.g. from a
stored run) and returns a dataclass with `.ok`, counts, a few samples and `.as_details()`: a flat JSON-ready
dict for a result record, to be put under `details["checks"][<checker>]` (`checks_details()` does that;
the report job sums the counts named attempted, delivered, lost, duplicated, reordered, unexpected,
recovered, and counts `ok: false` as a violation). A case that asks several checkers composes them (like
Jepsen's checker/compose): `compose(history, name=check, ...)` gives one `Verdict` that is ok when every
member is, names the members that failed with their counts, and fills the record's details.

A message is identified by (producer, seq): the sending link's name and its per-link sequence number, which
the recording clients put in the message properties and record on both sides:

- send    {seq, settled}          on the producer (event.client is the producer)
- outcome {seq, outcome}          on the producer: accepted, rejected, released, modified, or settled
- receive {seq, producer, settled} on a receiver
- settle  {seq, outcome}          on a receiver: accept, reject, release, modify, modify-undeliverable

A receiver settles oldest first (auto-settled messages right after their receipt, held ones in the order
they came), so each `settle` event is paired with that receiver's oldest unsettled receipt; the seq recorded
with `settle` is not needed (for held messages the client records a delivery handle there, not the seq).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from . import history as h

SAMPLES = 10  # how many example ids a result keeps for its details

ACCEPTED, REJECTED, RELEASED, MODIFIED = "accepted", "rejected", "released", "modified"
# what a receiver's settle verb tells the router
_SETTLE_STATE = {"accept": ACCEPTED, "reject": REJECTED, "release": RELEASED, "modify": MODIFIED,
                 "modify-undeliverable": MODIFIED}


@dataclass(frozen=True)
class _Ev:
    i: int  # position in the history (the order events were recorded in)
    t: float
    client: str
    kind: str
    data: dict


def _events(history) -> list[_Ev]:
    items = history.events() if isinstance(history, h.History) else list(history)
    out = []
    for i, e in enumerate(items):
        if isinstance(e, _Ev):
            out.append(e)
        elif isinstance(e, h.Event):
            out.append(_Ev(i, e.t, e.client, e.kind, e.data))
        elif isinstance(e, dict):
            data = {k: v for k, v in e.items() if k not in ("t", "client", "kind")}
            out.append(_Ev(i, e.get("t", 0.0), e["client"], e["kind"], data))
        else:
            raise TypeError(f"not a history event: {e!r}")
    return out


def _names(value: str | Iterable[str] | None) -> set[str] | None:
    if value is None:
        return None
    return {value} if isinstance(value, str) else set(value)


def _sample(items) -> list:
    return [list(x) if isinstance(x, tuple) else x for x in sorted(items, key=repr)[:SAMPLES]]


def checks_details(**results) -> dict:
    """{"checks": {name: result.as_details()}} for a result record's details."""
    return {"checks": {name: r.as_details() for name, r in results.items()}}


# ---- total queue -------------------------------------------------------------------------------------------


@dataclass
class TotalQueue:
    """Every message accounted for, by at-least-once rules.

    attempted     sent (put on the wire) by the producer(s)
    acknowledged  sent unsettled and answered `accepted`
    delivered     distinct messages received (by any of the receivers checked)
    lost          acknowledged but never delivered: a broken promise
    unexpected    received but never sent (unknown producer or seq): a phantom
    duplicated    distinct messages received more than once (`copies` counts the extra copies)
    require_all   the case promises every message it sent, whatever its outcome (pre-settled sends, or a path
                  with no fault where the outcomes need not be awaited): then a sent message never delivered
                  is lost too, not only an acknowledged one
    recovered     delivered although the producer saw released, modified or no outcome (in doubt, and it
                  arrived anyway); normal, worth counting
    ok            no loss and nothing unexpected (and no duplicate, if duplicates were not allowed)
    """

    ok: bool
    attempted: int
    acknowledged: int
    delivered: int
    lost: int
    unexpected: int
    duplicated: int
    copies: int
    recovered: int
    rejected: int
    pending: int  # sent unsettled with no outcome yet
    allow_duplicates: bool = True
    require_all: bool = False
    lost_ids: list = field(default_factory=list)
    unexpected_ids: list = field(default_factory=list)
    duplicated_ids: list = field(default_factory=list)

    def as_details(self) -> dict:
        return {"ok": self.ok, "attempted": self.attempted, "acknowledged": self.acknowledged,
                "delivered": self.delivered, "lost": self.lost, "unexpected": self.unexpected,
                "duplicated": self.duplicated, "copies": self.copies, "recovered": self.recovered,
                "rejected": self.rejected, "pending": self.pending, "allow_duplicates": self.allow_duplicates,
                "require_all": self.require_all, "lost_ids": self.lost_ids, "unexpected_ids": self.unexpected_ids,
                "duplicated_ids": self.duplicated_ids}


def total_queue(history, producer: str | Iterable[str] | None = None,
                receivers: str | Iterable[str] | None = None, *, allow_duplicates: bool = True,
                require_all: bool = False) -> TotalQueue:
    """Account for every message of `producer` (default: every client that sent) as seen by `receivers`
    (default: every client that received)."""
    events = _events(history)
    producers = _names(producer)
    rcv_names = _names(receivers)
    sent: dict[tuple, bool] = {}  # id -> sent pre-settled
    outcome: dict[tuple, str] = {}
    for e in events:
        if producers is not None and e.client not in producers:
            continue
        if e.kind == h.SEND:
            sent.setdefault((e.client, e.data.get("seq")), bool(e.data.get("settled")))
        elif e.kind == h.OUTCOME:
            outcome[(e.client, e.data.get("seq"))] = e.data.get("outcome")
    received: dict[tuple, int] = defaultdict(int)
    unexpected: set = set()
    for e in events:
        if e.kind != h.RECEIVE or (rcv_names is not None and e.client not in rcv_names):
            continue
        key = (e.data.get("producer"), e.data.get("seq"))
        if producers is not None and key[0] not in producers:
            continue  # another producer's traffic: not this check's business
        if key in sent:
            received[key] += 1
        else:
            unexpected.add(key)
    acknowledged = {k for k, o in outcome.items() if o == ACCEPTED and k in sent}
    lost = (sent.keys() if require_all else acknowledged) - received.keys()
    duplicated = {k for k, n in received.items() if n > 1}
    recovered = {k for k in received if not sent[k] and outcome.get(k) in (RELEASED, MODIFIED, None)}
    pending = {k for k, presettled in sent.items() if not presettled and k not in outcome}
    ok = not lost and not unexpected and (allow_duplicates or not duplicated)
    return TotalQueue(
        ok=ok, attempted=len(sent), acknowledged=len(acknowledged), delivered=len(received), lost=len(lost),
        unexpected=len(unexpected), duplicated=len(duplicated),
        copies=sum(n - 1 for n in received.values() if n > 1), recovered=len(recovered),
        rejected=sum(1 for k, o in outcome.items() if o == REJECTED and k in sent), pending=len(pending),
        allow_duplicates=allow_duplicates, require_all=require_all, lost_ids=_sample(lost),
        unexpected_ids=_sample(unexpected), duplicated_ids=_sample(duplicated))


# ---- ordering ----------------------------------------------------------------------------------------------


@dataclass
class Ordering:
    """Per producer and receiver, messages arrive in the order they were sent, except redeliveries.

    A receipt whose seq is lower than one this receiver already had from the same producer goes back in
    the sequence. That is allowed only for a redelivery, decided from what the history shows at the time of
    the receipt (AMQP gives a message back for another try by `released`/`modified`, and a router or broker
    may then deliver it after later ones):

    1. an earlier copy of the same message had already been received by some receiver (it is being delivered
       again: after a release or modify, a lost link, a restart); or
    2. the producer had already been told `released` or `modified` for it; or
    3. the receipt itself says so (`redelivered: true` or `delivery_count > 0` in its data, for clients that
       record the header).

    Anything else going back is a violation (`reordered`). A repeat of the highest seq so far is not going
    back (duplicates are total_queue's business), and gaps are not reordering. With allow_redeliveries off
    (a case with no fault and no release, where nothing has a reason to come again) every step back counts.
    """

    ok: bool
    checked: int
    reordered: int
    redeliveries: int  # receipts that went back and were allowed as redeliveries
    pairs: int  # (producer, receiver) streams checked
    violations: list = field(default_factory=list)  # [receiver, producer, seq, after_seq]
    allow_redeliveries: bool = True

    def as_details(self) -> dict:
        return {"ok": self.ok, "checked": self.checked, "reordered": self.reordered,
                "redeliveries": self.redeliveries, "pairs": self.pairs, "violations": self.violations,
                "allow_redeliveries": self.allow_redeliveries}


def ordering(history, producer: str | Iterable[str] | None = None,
             receivers: str | Iterable[str] | None = None, *, allow_redeliveries: bool = True) -> Ordering:
    events = _events(history)
    producers = _names(producer)
    rcv_names = _names(receivers)
    highest: dict[tuple, int] = {}  # (receiver, producer) -> highest seq so far
    seen_copy: set[tuple] = set()  # (producer, seq) received at least once so far
    given_back: set[tuple] = set()  # (producer, seq) the producer was told released/modified so far
    checked = reordered = redeliveries = 0
    violations = []
    for e in events:
        if e.kind == h.OUTCOME and e.data.get("outcome") in (RELEASED, MODIFIED):
            given_back.add((e.client, e.data.get("seq")))
            continue
        if e.kind != h.RECEIVE:
            continue
        key = (e.data.get("producer"), e.data.get("seq"))
        if key[0] is None or not isinstance(key[1], int):
            continue
        if (producers is not None and key[0] not in producers) or (rcv_names is not None and e.client not in rcv_names):
            seen_copy.add(key)
            continue
        checked += 1
        stream = (e.client, key[0])
        top = highest.get(stream)
        if top is not None and key[1] < top:
            if allow_redeliveries and (key in seen_copy or key in given_back or e.data.get("redelivered")
                                       or (e.data.get("delivery_count") or 0) > 0):
                redeliveries += 1
            else:
                reordered += 1
                if len(violations) < SAMPLES:
                    violations.append([e.client, key[0], key[1], top])
        else:
            highest[stream] = key[1]
        seen_copy.add(key)
    return Ordering(ok=reordered == 0, checked=checked, reordered=reordered, redeliveries=redeliveries,
                    pairs=len(highest), violations=violations, allow_redeliveries=allow_redeliveries)


# ---- distribution ------------------------------------------------------------------------------------------


@dataclass
class Distribution:
    """How messages spread over receivers.

    counts     receipts per receiver (every receiver asked for is listed, with 0 if it got nothing)
    spread     max - min of those counts
    ok         every bound given holds: spread <= max_spread, each count >= min_each, total == expected_total
    """

    ok: bool
    total: int
    counts: dict
    min: int
    max: int
    spread: int
    empty: list  # receivers that got nothing
    max_spread: int | None = None
    min_each: int | None = None
    expected_total: int | None = None
    problems: list = field(default_factory=list)

    def as_details(self) -> dict:
        return {"ok": self.ok, "total": self.total, "counts": dict(self.counts), "min": self.min, "max": self.max,
                "spread": self.spread, "empty": self.empty, "max_spread": self.max_spread,
                "min_each": self.min_each, "expected_total": self.expected_total, "problems": self.problems}


def distribution(history, producer: str | Iterable[str] | None = None,
                 receivers: str | Iterable[str] | None = None, *, max_spread: int | None = None,
                 min_each: int | None = None, expected_total: int | None = None) -> Distribution:
    events = _events(history)
    producers = _names(producer)
    wanted = _names(receivers)
    counts: dict[str, int] = {name: 0 for name in sorted(wanted or ())}
    for e in events:
        if e.kind != h.RECEIVE or (wanted is not None and e.client not in wanted):
            continue
        if producers is not None and e.data.get("producer") not in producers:
            continue
        counts[e.client] = counts.get(e.client, 0) + 1
    values = list(counts.values()) or [0]
    lo, hi, total = min(values), max(values), sum(values)
    problems = []
    if max_spread is not None and hi - lo > max_spread:
        problems.append(f"spread {hi - lo} > {max_spread}")
    if min_each is not None and lo < min_each:
        problems.append(f"a receiver got {lo} < {min_each}")
    if expected_total is not None and total != expected_total:
        problems.append(f"total {total} != {expected_total}")
    return Distribution(ok=not problems, total=total, counts=counts, min=lo, max=hi, spread=hi - lo,
                        empty=[n for n, c in counts.items() if c == 0], max_spread=max_spread,
                        min_each=min_each, expected_total=expected_total, problems=problems)


# ---- multicast outcomes ------------------------------------------------------------------------------------


def combine_multicast(states: Iterable[str]) -> str:
    """The producer's outcome for a multicast message from its copies' final states (003 §12.1.1.4):
    rejected if any consumer rejected; else accepted if any accepted; else modified if any copy may have
    reached its consumer (modified); else released (it reached none, or there was no consumer)."""
    seen = set(states)
    for winner in (REJECTED, ACCEPTED, MODIFIED):
        if winner in seen:
            return winner
    return RELEASED


@dataclass
class MulticastOutcomes:
    """Each multicast producer outcome against what its consumers did with their copies.

    A copy's state: the consumer's settle outcome (accept/reject/release/modify); received but never
    settled (held, or its link was lost) counts as modified (it may have reached the consumer); a consumer
    named in `consumers` that never received the message counts as released. The expected outcome is
    `combine_multicast` of the copies. A consumer settling a copy after the producer already had its
    outcome is a violation too (`early`): the router must wait for every copy to be final.
    """

    ok: bool
    checked: int
    matched: int
    mismatched: int
    early: int
    pending: int  # sent unsettled, no outcome yet
    outcomes: dict  # producer outcome -> count
    mismatches: list = field(default_factory=list)  # [producer, seq, expected, actual, {consumer: state}]

    def as_details(self) -> dict:
        return {"ok": self.ok, "checked": self.checked, "matched": self.matched, "mismatched": self.mismatched,
                "early": self.early, "pending": self.pending, "outcomes": dict(self.outcomes),
                "mismatches": self.mismatches}


def settled_copies(history, receivers: str | Iterable[str] | None = None) -> dict[tuple, dict[str, tuple]]:
    """(producer, seq) -> {receiver: (state, position of the settle in the history or None)} for every
    receipt; a receipt never settled has state modified and position None (pre-settled receipts: accepted)."""
    events = _events(history)
    wanted = _names(receivers)
    unsettled: dict[str, deque] = defaultdict(deque)
    copies: dict[tuple, dict[str, tuple]] = defaultdict(dict)
    for e in events:
        if wanted is not None and e.client not in wanted:
            continue
        if e.kind == h.RECEIVE:
            key = (e.data.get("producer"), e.data.get("seq"))
            if e.data.get("settled"):
                copies[key][e.client] = (ACCEPTED, e.i)
            else:
                copies[key].setdefault(e.client, (MODIFIED, None))
                unsettled[e.client].append(key)
        elif e.kind == h.SETTLE and unsettled[e.client]:
            key = unsettled[e.client].popleft()
            state = _SETTLE_STATE.get(e.data.get("outcome"), MODIFIED)
            copies[key][e.client] = (state, e.i)
    return copies


def multicast_outcomes(history, producer: str | Iterable[str] | None = None,
                       consumers: str | Iterable[str] | None = None) -> MulticastOutcomes:
    events = _events(history)
    producers = _names(producer)
    consumer_names = _names(consumers)
    copies = settled_copies(events, consumer_names)
    sent: set[tuple] = set()
    outcome: dict[tuple, tuple[str, int]] = {}
    for e in events:
        if producers is not None and e.client not in producers:
            continue
        if e.kind == h.SEND and not e.data.get("settled"):
            sent.add((e.client, e.data.get("seq")))
        elif e.kind == h.OUTCOME:
            outcome[(e.client, e.data.get("seq"))] = (e.data.get("outcome"), e.i)
    matched = mismatched = early = 0
    counts: dict[str, int] = defaultdict(int)
    mismatches = []
    for key in sorted(outcome, key=repr):
        actual, at = outcome[key]
        counts[actual] += 1
        states = {name: state for name, (state, _) in copies.get(key, {}).items()}
        for name in consumer_names or ():
            states.setdefault(name, RELEASED)
        late = [name for name, (_, pos) in copies.get(key, {}).items() if pos is not None and pos > at]
        expected = combine_multicast(states.values())
        if expected == actual and not late:
            matched += 1
            continue
        if late:
            early += 1
        if expected != actual:
            mismatched += 1
        if len(mismatches) < SAMPLES:
            mismatches.append([key[0], key[1], expected, actual, dict(sorted(states.items()))])
    pending = len(sent - outcome.keys())
    return MulticastOutcomes(ok=mismatched == 0 and early == 0, checked=len(outcome), matched=matched,
                             mismatched=mismatched, early=early, pending=pending, outcomes=dict(counts),
                             mismatches=mismatches)


# ---- composition -------------------------------------------------------------------------------------------

# The counts a verdict's summary adds up over its members (those that have them): the ones a record's details
# carry at top level and the report sums.
SUMMED = ("attempted", "delivered", "lost", "duplicated", "reordered", "unexpected", "recovered")
# The fields a failure line shows besides the counts: the members' samples and reasons.
_EVIDENCE = ("lost_ids", "unexpected_ids", "duplicated_ids", "violations", "mismatches", "problems", "counts")


@dataclass
class Verdict:
    """Several checkers' results on one history, judged together: ok when every member is ok."""

    results: dict  # name -> a checker's result (anything with .ok and .as_details())

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results.values())

    def failures(self) -> str:
        """One line per failed member, with its nonzero counts and its samples: an assertion message."""
        return "\n".join(f"{name}: {_describe(r.as_details())}" for name, r in self.results.items() if not r.ok)

    def summary(self) -> dict:
        """The SUMMED counts added up over the members that have them (a count no member has is left out)."""
        totals: dict[str, int] = {}
        for r in self.results.values():
            for key in SUMMED:
                if isinstance(getattr(r, key, None), int):
                    totals[key] = totals.get(key, 0) + getattr(r, key)
        return totals

    def fill(self, details: dict, *counts: str) -> Verdict:
        """Put every member under details["checks"][name] (the shape checks_details gives), and the summary's
        `counts` the case names (e.g. "lost", "duplicated") at top level. Returns the verdict, so that a case
        can write `verdict = compose(...).fill(details)`."""
        details.setdefault("checks", {}).update(checks_details(**self.results)["checks"])
        summary = self.summary()
        for key in counts:
            if key not in summary:
                raise KeyError(f"no member of this verdict counts {key!r} (members: {', '.join(self.results)})")
            details[key] = summary[key]
        return self


def _describe(details: dict) -> str:
    counts = [f"{k} {v}" for k, v in details.items() if type(v) is int and v]
    evidence = [f"{k} {v}" for k, v in details.items() if k in _EVIDENCE and v]
    return ", ".join(counts + evidence) or "not ok"


def compose(history=None, **checks) -> Verdict:
    """Run each named check on one history and judge them together (Jepsen's checker/compose).

    A check is a callable taking the history (e.g. `functools.partial(total_queue, producer=p)` or a lambda)
    or a result already made (anything with .ok and .as_details()). The names are the keys the record keeps:
    details.checks.<name>."""
    return Verdict({name: check(history) if callable(check) else check for name, check in checks.items()})


def every_message_once(producer: str | Iterable[str], receivers: str | Iterable[str] | None = None, *,
                       in_order: bool = True, suffix: str = "") -> dict:
    """The members of a composition for a path with no fault and no release: every message `producer` sent
    reaches `receivers` exactly once, whatever its outcome (total_queue with require_all, no duplicate) and, if
    in_order, in the order sent with no step back at all (ordering without redeliveries): what a case once
    asked by comparing a receiver's seqs with range(n). Use: compose(history, **every_message_once(p, r)).
    `suffix` tells apart the members of receivers checked one by one (a multicast: each gets every message)."""
    checks = {f"total_queue{suffix}": partial(total_queue, producer=producer, receivers=receivers,
                                              require_all=True, allow_duplicates=False)}
    if in_order:
        checks[f"ordering{suffix}"] = partial(ordering, producer=producer, receivers=receivers,
                                              allow_redeliveries=False)
    return checks
