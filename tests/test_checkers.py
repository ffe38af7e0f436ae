"""The history checkers on hand-built histories: what each one counts, and when its verdict is a failure."""

from __future__ import annotations

import json

import pytest

from harness import checkers as c
from harness import history as h


class Story:
    """Builds a history the way the recording clients would record it."""

    def __init__(self):
        self.history = h.History()

    def send(self, producer, *seqs, settled=False):
        for seq in seqs:
            self.history.record(producer, h.SEND, seq=seq, settled=settled, address=None)
        return self

    def outcome(self, producer, outcome, *seqs):
        for seq in seqs:
            self.history.record(producer, h.OUTCOME, seq=seq, outcome=outcome, failed=False, undeliverable=False,
                                condition=None)
        return self

    def receive(self, receiver, producer, *seqs, settle="accept", presettled=False):
        """Receipts, each settled right away with `settle` (None: held, not settled)."""
        for seq in seqs:
            self.history.record(receiver, h.RECEIVE, seq=seq, producer=producer, priority=None, address=None,
                                settled=presettled)
            if settle is not None and not presettled:
                self.history.record(receiver, h.SETTLE, seq=seq, outcome=settle)
        return self

    def settle_held(self, receiver, outcome, count):
        for _ in range(count):  # the client records a delivery handle, not the seq, for held messages
            self.history.record(receiver, h.SETTLE, seq=123456789, outcome=outcome)
        return self


# ---- total queue ---------------------------------------------------------------------------------------------


def test_total_queue_all_accounted_for():
    s = Story().send("p", 0, 1, 2).receive("r", "p", 0, 1, 2).outcome("p", "accepted", 0, 1, 2)
    r = c.total_queue(s.history)
    assert r.ok
    assert (r.attempted, r.acknowledged, r.delivered, r.lost, r.unexpected, r.duplicated, r.recovered) == (
        3, 3, 3, 0, 0, 0, 0)
    details = r.as_details()
    assert details["ok"] is True and details["lost"] == 0
    json.dumps(details)  # JSON-ready for a result record


def test_total_queue_acknowledged_but_never_delivered_is_lost():
    s = Story().send("p", 0, 1, 2).receive("r", "p", 0, 2).outcome("p", "accepted", 0, 1, 2)
    r = c.total_queue(s.history)
    assert not r.ok and r.lost == 1 and r.lost_ids == [["p", 1]]


def test_total_queue_released_and_not_delivered_is_not_lost_but_delivered_anyway_is_recovered():
    s = (Story().send("p", 0, 1, 2, 3)
         .receive("r", "p", 0, 1)
         .outcome("p", "accepted", 0).outcome("p", "modified", 1).outcome("p", "released", 2))
    r = c.total_queue(s.history)
    assert r.ok
    assert r.lost == 0 and r.acknowledged == 1
    assert r.recovered == 1  # seq 1: in doubt (modified) and it arrived
    assert r.pending == 1  # seq 3: no outcome yet


def test_total_queue_counts_duplicates_and_fails_only_if_asked_for_exactly_once():
    s = Story().send("p", 0, 1).receive("r1", "p", 0, 1).receive("r2", "p", 1).receive("r1", "p", 1)
    s.outcome("p", "accepted", 0, 1)
    r = c.total_queue(s.history)
    assert r.ok and r.duplicated == 1 and r.copies == 2 and r.duplicated_ids == [["p", 1]]
    strict = c.total_queue(s.history, allow_duplicates=False)
    assert not strict.ok


def test_total_queue_unexpected_messages():
    s = Story().send("p", 0).receive("r", "p", 0, 7).receive("r", "ghost", 0).outcome("p", "accepted", 0)
    r = c.total_queue(s.history)
    assert not r.ok and r.unexpected == 2
    assert r.unexpected_ids == [["ghost", 0], ["p", 7]]
    only_p = c.total_queue(s.history, producer="p")  # another producer's traffic is not this check's business
    assert only_p.unexpected == 1


def test_total_queue_per_producer_and_receiver_filters_and_presettled():
    s = (Story().send("a", 0, 1).send("b", 0, settled=True)
         .receive("r1", "a", 0).receive("r2", "a", 1).receive("r1", "b", 0, presettled=True)
         .outcome("a", "accepted", 0, 1))
    assert c.total_queue(s.history, producer="a").delivered == 2
    assert c.total_queue(s.history, producer="a", receivers="r1").lost == 1
    b = c.total_queue(s.history, producer="b")
    assert b.ok and b.attempted == 1 and b.acknowledged == 0 and b.recovered == 0 and b.pending == 0


def test_checkers_read_stored_records_too():
    s = Story().send("p", 0).receive("r", "p", 0).outcome("p", "accepted", 0)
    records = json.loads(json.dumps(s.history.as_records()))
    assert c.total_queue(records).as_details() == c.total_queue(s.history).as_details()


# ---- ordering ------------------------------------------------------------------------------------------------


def test_ordering_in_order_and_gaps_are_fine():
    s = Story().send("p", *range(5)).receive("r", "p", 0, 1, 3, 4)
    r = c.ordering(s.history)
    assert r.ok and r.checked == 4 and r.reordered == 0 and r.pairs == 1


def test_ordering_going_back_without_redelivery_is_a_violation():
    s = Story().send("p", *range(4)).receive("r", "p", 0, 2, 1, 3)
    r = c.ordering(s.history)
    assert not r.ok and r.reordered == 1 and r.violations == [["r", "p", 1, 2]]
    assert r.as_details()["reordered"] == 1


def test_ordering_is_per_receiver_and_per_producer():
    # Interleaving across receivers or producers is not reordering.
    s = (Story().send("a", 0, 1, 2).send("b", 0, 1)
         .receive("r1", "a", 0, 2).receive("r2", "a", 1).receive("r1", "b", 0, 1))
    assert c.ordering(s.history).ok


def test_ordering_allows_a_redelivery_after_release():
    # r1 releases seq 1; the broker redelivers it to r2 after seq 2 and 3: allowed (an earlier copy was seen)
    s = (Story().send("p", 0, 1, 2, 3)
         .receive("r1", "p", 0).receive("r1", "p", 1, settle="release")
         .receive("r2", "p", 2, 3).receive("r2", "p", 1))
    r = c.ordering(s.history)
    assert r.ok and r.redeliveries == 1


def test_ordering_allows_a_late_copy_the_producer_was_told_to_resend():
    s = Story().send("p", 0, 1, 2).outcome("p", "modified", 1).receive("r", "p", 0, 2, 1)
    assert c.ordering(s.history).ok
    s2 = Story().send("p", 0, 1, 2).receive("r", "p", 0, 2, 1).outcome("p", "modified", 1)
    assert not c.ordering(s2.history).ok  # the outcome came after the receipt: no excuse at the time


def test_ordering_trusts_a_receipt_that_says_it_is_redelivered():
    s = Story().send("p", 0, 1, 2).receive("r", "p", 0, 2)
    s.history.record("r", h.RECEIVE, seq=1, producer="p", settled=False, delivery_count=1)
    assert c.ordering(s.history).ok


def test_ordering_filters():
    s = Story().send("a", 0, 1).send("b", 0, 1).receive("r", "a", 1, 0).receive("r", "b", 0, 1)
    assert not c.ordering(s.history).ok
    assert c.ordering(s.history, producer="b").ok
    assert c.ordering(s.history, receivers="other").checked == 0


# ---- distribution --------------------------------------------------------------------------------------------


def test_distribution_counts_and_spread():
    s = Story().send("p", *range(10)).receive("r1", "p", 0, 2, 4, 6).receive("r2", "p", 1, 3, 5, 7, 8, 9)
    r = c.distribution(s.history)
    assert r.ok and r.counts == {"r1": 4, "r2": 6} and r.total == 10 and r.spread == 2
    assert not c.distribution(s.history, max_spread=1).ok
    assert c.distribution(s.history, max_spread=2, min_each=4, expected_total=10).ok
    bad = c.distribution(s.history, expected_total=11, min_each=5)
    assert not bad.ok and len(bad.problems) == 2


def test_distribution_lists_receivers_that_got_nothing():
    s = Story().send("p", 0, 1).receive("r1", "p", 0, 1)
    r = c.distribution(s.history, receivers=["r1", "r2"], min_each=1)
    assert not r.ok and r.counts == {"r1": 2, "r2": 0} and r.empty == ["r2"] and r.spread == 2
    assert r.as_details()["counts"] == {"r1": 2, "r2": 0}


def test_distribution_per_producer():
    s = Story().send("a", 0).send("b", 0, 1).receive("r1", "a", 0).receive("r2", "b", 0, 1)
    assert c.distribution(s.history, producer="b").counts == {"r2": 2}


# ---- multicast outcomes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("states, expected", [
    (["accepted", "accepted"], "accepted"),
    (["accepted", "released"], "accepted"),
    (["accepted", "modified"], "accepted"),
    (["accepted", "rejected"], "rejected"),
    (["released", "rejected"], "rejected"),
    (["released", "modified"], "modified"),
    (["released", "released"], "released"),
    ([], "released"),
])
def test_combine_multicast_follows_the_table(states, expected):
    assert c.combine_multicast(states) == expected


def test_multicast_outcomes_match():
    s = (Story().send("p", 0, 1, 2)
         .receive("c1", "p", 0).receive("c2", "p", 0)
         .outcome("p", "accepted", 0)
         .receive("c1", "p", 1, settle="reject").receive("c2", "p", 1)
         .outcome("p", "rejected", 1)
         .receive("c1", "p", 2, settle="release").receive("c2", "p", 2, settle="modify")
         .outcome("p", "modified", 2))
    r = c.multicast_outcomes(s.history, producer="p", consumers=["c1", "c2"])
    assert r.ok and r.checked == 3 and r.matched == 3
    assert r.outcomes == {"accepted": 1, "rejected": 1, "modified": 1}


def test_multicast_outcome_that_breaks_the_table():
    s = (Story().send("p", 0)
         .receive("c1", "p", 0, settle="reject").receive("c2", "p", 0)
         .outcome("p", "accepted", 0))
    r = c.multicast_outcomes(s.history, consumers=["c1", "c2"])
    assert not r.ok and r.mismatched == 1
    assert r.mismatches == [["p", 0, "rejected", "accepted", {"c1": "rejected", "c2": "accepted"}]]


def test_multicast_held_copies_are_paired_with_receipts_in_order():
    s = (Story().send("p", 0, 1)
         .receive("c1", "p", 0, 1, settle=None)       # held
         .settle_held("c1", "reject", 1)              # settles seq 0
         .settle_held("c1", "accept", 1)              # settles seq 1
         .outcome("p", "rejected", 0).outcome("p", "accepted", 1))
    r = c.multicast_outcomes(s.history, consumers=["c1"])
    assert r.ok, r.mismatches


def test_multicast_missing_and_unsettled_copies():
    # c2 never got seq 0 (released: it reached nobody); c1 held it and its link was lost (modified)
    s = Story().send("p", 0, 1).receive("c1", "p", 0, settle=None).outcome("p", "modified", 0)
    s.outcome("p", "released", 1)
    r = c.multicast_outcomes(s.history, consumers=["c1", "c2"])
    assert r.ok and r.checked == 2


def test_multicast_outcome_before_every_copy_was_final_is_early():
    s = (Story().send("p", 0)
         .receive("c1", "p", 0).receive("c2", "p", 0, settle=None)
         .outcome("p", "accepted", 0)
         .settle_held("c2", "accept", 1))
    r = c.multicast_outcomes(s.history, consumers=["c1", "c2"])
    assert not r.ok and r.early == 1 and r.mismatched == 0


def test_multicast_pending_and_details():
    s = Story().send("p", 0, 1).receive("c1", "p", 0).outcome("p", "accepted", 0)
    r = c.multicast_outcomes(s.history, consumers=["c1"])
    assert r.ok and r.pending == 1
    details = c.checks_details(multicast=r, queue=c.total_queue(s.history))
    assert set(details["checks"]) == {"multicast", "queue"}
    json.dumps(details)


# ---- strictness knobs ----------------------------------------------------------------------------------------


def test_total_queue_require_all_counts_a_sent_message_never_delivered_as_lost_whatever_its_outcome():
    s = Story().send("p", 0, 1, settled=True).send("q", 0, 1).receive("r", "p", 0).receive("r", "q", 0)
    s.outcome("q", "released", 1)
    assert c.total_queue(s.history).ok  # nothing acknowledged went missing
    strict = c.total_queue(s.history, require_all=True)
    assert not strict.ok and strict.lost == 2 and strict.lost_ids == [["p", 1], ["q", 1]]
    assert strict.as_details()["require_all"] is True


def test_ordering_without_redeliveries_counts_every_step_back():
    s = Story().send("p", 0, 1, 2).outcome("p", "modified", 1).receive("r", "p", 0, 2, 1)
    assert c.ordering(s.history).ok
    strict = c.ordering(s.history, allow_redeliveries=False)
    assert not strict.ok and strict.reordered == 1 and strict.redeliveries == 0
    assert strict.as_details()["allow_redeliveries"] is False


# ---- composition ---------------------------------------------------------------------------------------------


def test_compose_runs_callables_on_the_history_and_takes_ready_results():
    s = Story().send("p", 0, 1, 2).receive("r", "p", 0, 1, 2).outcome("p", "accepted", 0, 1, 2)
    ready = c.ordering(s.history)
    v = c.compose(s.history, total_queue=lambda hist: c.total_queue(hist, allow_duplicates=False), ordering=ready)
    assert v.ok and v.failures() == ""
    assert v.results["ordering"] is ready
    assert v.results["total_queue"].delivered == 3


def test_compose_one_failing_member_fails_the_verdict_and_is_named_with_its_counts_and_samples():
    s = Story().send("p", 0, 1, 2).receive("r", "p", 0, 2, 1, 2).outcome("p", "accepted", 0, 1, 2)
    v = c.compose(s.history, total_queue=c.total_queue(s.history, allow_duplicates=False),
                  ordering=c.ordering(s.history, allow_redeliveries=False),
                  spread=c.distribution(s.history, expected_total=4))
    assert not v.ok
    lines = v.failures().splitlines()
    assert len(lines) == 2  # the distribution member holds
    queue, order = lines
    assert queue.startswith("total_queue: ") and "duplicated 1" in queue and "duplicated_ids [['p', 2]]" in queue
    assert order.startswith("ordering: ") and "reordered 1" in order and "violations [['r', 'p', 1, 2]]" in order


def test_compose_summary_adds_the_counts_of_the_members_that_have_them():
    s = (Story().send("p", 0, 1, 2).outcome("p", "accepted", 0, 1, 2)
         .receive("r1", "p", 0, 1).receive("r2", "p", 0, 1, 2, 2))
    v = c.compose(s.history, at_r1=c.total_queue(s.history, receivers="r1"),
                  at_r2=c.total_queue(s.history, receivers="r2"), ordering=c.ordering(s.history))
    assert v.summary() == {"attempted": 6, "delivered": 5, "lost": 1, "duplicated": 1, "unexpected": 0,
                           "recovered": 0, "reordered": 0}
    assert c.compose(s.history, spread=c.distribution(s.history)).summary() == {}


def test_compose_fill_gives_the_shape_checks_details_gives_plus_the_counts_asked_for():
    s = Story().send("p", 0, 1).receive("r", "p", 0).outcome("p", "accepted", 0, 1)
    queue, order = c.total_queue(s.history), c.ordering(s.history)
    v = c.compose(s.history, total_queue=queue, ordering=order)
    details = {"sent": 2}
    assert v.fill(details, "lost", "delivered") is v
    assert details == {"sent": 2, **c.checks_details(total_queue=queue, ordering=order), "lost": 1, "delivered": 1}
    bare = {}
    v.fill(bare)
    assert bare == c.checks_details(total_queue=queue, ordering=order)
    json.dumps(details)
    # a second verdict on the same record adds its members beside the first one's
    c.compose(s.history, later=c.distribution(s.history)).fill(details)
    assert set(details["checks"]) == {"total_queue", "ordering", "later"}
    with pytest.raises(KeyError, match="reordered"):
        c.compose(s.history, total_queue=queue).fill({}, "reordered")


def test_every_message_once_asks_all_once_and_in_order_as_a_comparison_with_range_did():
    def verdict(story, **kwargs):
        return c.compose(story.history, **c.every_message_once("p", "r", **kwargs))

    fine = Story().send("p", 0, 1, 2).send("other", 0).receive("r", "p", 0, 1, 2).receive("r", "other", 0)
    v = verdict(fine)
    assert v.ok and set(v.results) == {"total_queue", "ordering"}
    assert not verdict(Story().send("p", 0, 1, 2, settled=True).receive("r", "p", 0, 2)).ok  # 1 never came
    assert not verdict(Story().send("p", 0, 1).receive("r", "p", 0, 1, 1)).ok  # 1 twice
    assert verdict(Story().send("p", 0, 1).receive("r", "p", 0, 1).receive("elsewhere", "p", 0, 1)).ok  # not r's
    swapped = Story().send("p", 0, 1).receive("r", "p", 1, 0)
    assert not verdict(swapped).ok
    assert verdict(swapped, in_order=False).ok  # across competing consumers only the set is asked
    per_receiver = c.every_message_once("p", "r1", suffix="_r1")
    assert set(per_receiver) == {"total_queue_r1", "ordering_r1"}
