"""The stateful fuzzer: its properties on hand-made histories (each must be able to fail), the reproducer
writer, break detection, and short real runs on the reference router."""

from __future__ import annotations

import threading
import types

import pytest

from harness.fuzz import properties, reproducer
from harness.fuzz.program import LinkInfo, SentInfo, World
from harness.fuzz.session import FuzzTarget
from harness.fuzz.stateful import TOPOLOGIES, replay, replay_options, run_session, start, target_for


class _Peer:
    def down_reason(self):
        return None


@pytest.fixture
def world():
    target = FuzzTarget(role="router", vendor="reference", host="127.0.0.1", port=1, peer=_Peer(),
                        topology="fuzz-router")
    w = World(target, "p1", label="t")
    yield w
    w.stop()


def _link(attached=True, detached=False):
    a, d = threading.Event(), threading.Event()
    if attached:
        a.set()
    if detached:
        d.set()
    return types.SimpleNamespace(attached=a, detached=d)


def _receiver(w, handle, cls, step, *, auto=True, granted=10, outcome="accept"):
    w.links[handle] = LinkInfo(handle, "c1", "receiver", cls, w.address(cls), link=_link(), auto_credit=auto,
                               granted=granted, outcome=outcome, step=step)
    w.history.record(w.wire(handle), "attached", address=w.address(cls))


def _sender(w, handle, cls, step):
    w.links[handle] = LinkInfo(handle, "c1", "sender", cls, w.address(cls), link=_link(), step=step)


def _send(w, handle, seq, step, *, presettled=False, ttl=None, durable=False):
    cls = w.links[handle].cls
    w.sent[(w.wire(handle), seq)] = SentInfo(cls, w.address(cls), presettled, ttl, durable, None, step)
    w.history.record(w.wire(handle), "send", seq=seq, settled=presettled)


def _receive(w, rcv, snd, seq, **data):
    w.history.record(w.wire(rcv), "receive", seq=seq, producer=w.wire(snd), settled=False, **data)


def _settle(w, rcv, outcome):
    w.history.record(w.wire(rcv), "settle", seq=None, outcome=outcome)


def _outcome(w, snd, seq, outcome):
    w.history.record(w.wire(snd), "outcome", seq=seq, outcome=outcome)


def _sigs(found):
    return [v.signature for v in found]


# ---- multicast: every consumer gets a copy ---------------------------------------------------------------


def test_multicast_coverage_fails_when_an_attached_receiver_misses_a_copy(world):
    _receiver(world, "r1", "multicast", 1)
    _receiver(world, "r2", "multicast", 2)
    _sender(world, "s3", "multicast", 3)
    _send(world, "s3", 0, 4)
    _receive(world, "r1", "s3", 0)
    assert _sigs(properties.multicast_coverage(world, wait_s=0.0)) == ["multicast:not-all-receivers"]
    _receive(world, "r2", "s3", 0)
    assert properties.multicast_coverage(world, wait_s=0.0) == []


def test_multicast_coverage_owes_nothing_to_a_receiver_attached_after_the_send(world):
    _receiver(world, "r1", "multicast", 1)
    _sender(world, "s2", "multicast", 2)
    _send(world, "s2", 0, 3)
    _receive(world, "r1", "s2", 0)
    _receiver(world, "r4", "multicast", 4)
    assert properties.multicast_coverage(world, wait_s=0.0) == []


# ---- the outcome table (003 §12.1.1.4) -------------------------------------------------------------------


def test_anycast_outcome_must_be_the_consumers(world):
    _receiver(world, "r1", "balanced", 1, outcome="release")
    _sender(world, "s2", "balanced", 2)
    _send(world, "s2", 0, 3)
    _receive(world, "r1", "s2", 0)
    _settle(world, "r1", "release")
    _outcome(world, "s2", 0, "accepted")
    assert _sigs(properties.outcome_table(world)) == ["balanced:outcome-table"]


def test_anycast_released_after_a_consumer_accepted_fails_and_accepted_passes(world):
    _receiver(world, "r1", "closest", 1)
    _sender(world, "s2", "closest", 2)
    _send(world, "s2", 0, 3)
    _send(world, "s2", 1, 3)
    for seq in (0, 1):
        _receive(world, "r1", "s2", seq)
        _settle(world, "r1", "accept")
    _outcome(world, "s2", 0, "accepted")
    assert properties.outcome_table(world) == []
    _outcome(world, "s2", 1, "released")
    assert _sigs(properties.outcome_table(world)) == ["closest:outcome-table"]


def test_multicast_outcome_is_rejected_when_any_consumer_rejected(world):
    _receiver(world, "r1", "pattern", 1)
    _receiver(world, "r2", "pattern", 2, outcome="reject")
    _sender(world, "s3", "pattern", 3)
    _send(world, "s3", 0, 4)
    _receive(world, "r1", "s3", 0)
    _settle(world, "r1", "accept")
    _receive(world, "r2", "s3", 0)
    _settle(world, "r2", "reject")
    _outcome(world, "s3", 0, "accepted")
    assert _sigs(properties.outcome_table(world)) == ["pattern:outcome-table"]


# ---- duplicates, credit, ordering, loss -------------------------------------------------------------------


def test_duplicates_per_multicast_consumer_and_after_an_anycast_accept(world):
    _receiver(world, "r1", "multicast", 1)
    _receiver(world, "r2", "balanced", 1)
    _receiver(world, "r3", "balanced", 1)
    _sender(world, "s4", "multicast", 2)
    _sender(world, "s5", "balanced", 2)
    _send(world, "s4", 0, 3)
    _send(world, "s5", 0, 3)
    _receive(world, "r1", "s4", 0)
    _receive(world, "r2", "s5", 0)
    _settle(world, "r2", "release")
    _receive(world, "r3", "s5", 0)  # after a release: a router may try another consumer
    assert properties.duplicates(world) == []
    _settle(world, "r3", "accept")
    _receive(world, "r2", "s5", 0)
    _receive(world, "r1", "s4", 0)
    assert sorted(_sigs(properties.duplicates(world))) == ["balanced:duplicate-after-settlement",
                                                           "multicast:duplicate"]


def test_credit_exceeded_counts_what_a_manual_receiver_granted(world):
    _receiver(world, "r1", "balanced", 1, auto=False, granted=1)
    _sender(world, "s2", "balanced", 2)
    _send(world, "s2", 0, 3)
    _send(world, "s2", 1, 3)
    _receive(world, "r1", "s2", 0)
    assert properties.credit_exceeded(world) == []
    _receive(world, "r1", "s2", 1)
    assert _sigs(properties.credit_exceeded(world)) == ["balanced:credit-exceeded"]


def test_credit_gating_fails_for_credit_before_any_consumer_was_asked_for(world):
    world.history.record("program", "step", index=0, op="sender", cls="balanced")
    _sender(world, "s1", "balanced", 0)
    world.history.record(world.wire("s1"), "credit", credit=5, drain=False)
    world.history.record("program", "step", index=1, op="receiver", cls="balanced")
    assert _sigs(properties.credit_gating(world)) == ["balanced:credit-without-consumer"]


def test_ordering_allows_redeliveries_only(world):
    _receiver(world, "r1", "default", 1)
    _sender(world, "s2", "default", 2)
    for seq in (0, 1):
        _send(world, "s2", seq, 3)
    _receive(world, "r1", "s2", 1)
    _receive(world, "r1", "s2", 0, delivery_count=1)
    assert properties.ordering(world) == []
    _send(world, "s2", 2, 4)
    _send(world, "s2", 3, 4)
    _receive(world, "r1", "s2", 3)
    _receive(world, "r1", "s2", 2)
    assert _sigs(properties.ordering(world)) == ["default:reordered"]


def test_a_brokered_message_accepted_and_never_taken_must_come_back(world):
    _sender(world, "s1", "waypoint", 0)
    _send(world, "s1", 0, 1, durable=False)
    _send(world, "s1", 1, 1, ttl=0.5)  # may expire: owed nothing
    _outcome(world, "s1", 0, "accepted")
    _outcome(world, "s1", 1, "accepted")
    owed = properties.owed_by_broker(world)
    assert owed == {"waypoint": {(world.wire("s1"), 0)}}
    world.drained = {"waypoint": set()}
    assert _sigs(properties.lost(world, owed)) == ["waypoint:lost-accepted"]
    world.drained = {"waypoint": {(world.wire("s1"), 0)}}
    assert properties.lost(world, owed) == []
    world.broker_faults = [2]  # killed after the send: a non-durable message may go with it
    assert properties.owed_by_broker(world) == {}


# ---- differential view, reproducers, breaks ----------------------------------------------------------------


def test_observations_ignore_the_program_id_and_which_balanced_receiver_got_what(world):
    other = World(world.target, "p2", label="u")
    try:
        for w, first in ((world, "r1"), (other, "r2")):
            _receiver(w, "r1", "balanced", 1)
            _receiver(w, "r2", "balanced", 1)
            _sender(w, "s3", "balanced", 2)
            _send(w, "s3", 0, 3)
            _receive(w, first, "s3", 0)
        assert properties.differences(properties.observation(world), properties.observation(other)) == []
        _send(other, "s3", 1, 4)
        _receive(other, "r1", "s3", 1)
        assert [d[0] for d in properties.differences(properties.observation(world),
                                                     properties.observation(other))] == ["anycast:balanced"]
    finally:
        other.stop()


def test_a_queue_is_judged_by_all_it_gave_whether_to_a_consumer_or_to_the_final_drain(world):
    """Whether a queued message reaches a consumer during the program, at its finish (credit granted) or only in
    the final drain is the peers' speed, so a queue is compared by everything it gave (a stateful session against
    Artemis reported the same program as diverging one way, then the other)."""
    from harness.fuzz.program import PROGRAM_EVENTS

    other = World(world.target, "p2", label="u")
    try:
        for w in (world, other):
            _receiver(w, "r1", "waypoint", 1, auto=False, granted=0, outcome="hold")
            _sender(w, "s2", "waypoint", 2)
            _send(w, "s2", 0, 3)
            _outcome(w, "s2", 0, "accepted")
            w.history.record(PROGRAM_EVENTS, "finish")
        _receive(world, "r1", "s2", 0)                         # the finish's credit won the race here...
        world.drained = {"waypoint": set()}
        other.drained = {"waypoint": {(other.wire("s2"), 0)}}  # ...the drain there
        assert properties.differences(properties.observation(world), properties.observation(other)) == []
        assert properties.observation(world)["drained"] == {"waypoint": [("s2", 0)]}
        assert properties.observation(world)["anycast"] == {}
    finally:
        other.stop()


def test_reproducer_file_is_valid_python_named_by_signature(tmp_path):
    steps = [("connect", {"conn": "c1"}), ("receiver", {"conn": "c1", "link": "r2", "cls": "multicast"})]
    path = reproducer.write(tmp_path, "stateful:multicast:not-all-receivers", 'a "quoted" message', steps,
                            TOPOLOGIES["router"], {"router": "reference"}, {"R1": ["multicast-as-balanced"]})
    assert path == tmp_path / "fuzz" / "stateful-multicast-not-all-receivers.py"
    source = path.read_text()
    namespace: dict = {}
    exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - our own generated file
    assert namespace["STEPS"] == [tuple(s) for s in steps]
    assert namespace["BREAKS"] == {"R1": ["multicast-as-balanced"]}
    assert callable(namespace["test_stateful_multicast_not_all_receivers"])


def test_replay_options_override_peers_and_breaks(monkeypatch):
    monkeypatch.setenv("INTEROP_FUZZ_PEERS", "router=qdrouterd")
    monkeypatch.setenv("INTEROP_FUZZ_BREAKS", "none")
    assert replay_options({"router": "reference", "broker": "reference"}, {"R1": ["x"]}) == (
        {"router": "qdrouterd", "broker": "reference"}, {})


def test_breaks_are_applied_by_node_for_the_vendor_chosen():
    """The running topology says which node runs with which break (a reproducer starts the same broken peer);
    a break for another vendor touches nothing."""
    from harness.breaks import breaks_by_node, parse_break
    from harness.topology import load_topology, topology_path

    topo = load_topology(topology_path(TOPOLOGIES["router"]))
    wanted = [parse_break("router=reference:multicast-as-balanced")]
    assert breaks_by_node(topo, {"router": "reference"}, wanted) == {"R1": ["multicast-as-balanced"]}
    assert breaks_by_node(topo, {"router": "qdrouterd"}, wanted) == {}


def test_a_break_for_a_vendor_skips_the_nodes_a_case_runs_with_another():
    """A case that pairs vendors (topology(name, vendors=...)) runs some nodes as another vendor than the
    session's: a break naming the session's vendor must not reach those."""
    from harness.breaks import breaks_by_node, parse_break
    from harness.topology import load_topology, topology_path

    topo = load_topology(topology_path("broker-mirror"))
    wanted = [parse_break("broker=artemis:no-journal-sync")]
    assert breaks_by_node(topo, {"broker": "artemis"}, wanted) == {"DC1": ["no-journal-sync"],
                                                                   "DC2": ["no-journal-sync"]}
    assert breaks_by_node(topo, {"broker": "artemis"}, wanted, {"DC2": "reference"}) == {"DC1": ["no-journal-sync"]}


# ---- real peers ----------------------------------------------------------------------------------------------

MULTICAST_PROGRAM = [
    ("connect", {"conn": "c1"}),
    ("receiver", {"conn": "c1", "link": "r2", "cls": "multicast", "credit": "auto", "outcome": "accept"}),
    ("receiver", {"conn": "c1", "link": "r3", "cls": "multicast", "credit": "auto", "outcome": "hold"}),
    ("sender", {"conn": "c1", "link": "s4", "cls": "multicast", "presettled": False}),
    ("send", {"link": "s4", "count": 2}),
]


def test_replay_catches_multicast_configured_as_balanced_and_passes_unbroken():
    broken = replay(TOPOLOGIES["router"], {"router": "reference"}, MULTICAST_PROGRAM,
                    breaks={"R1": ["multicast-as-balanced"]})
    assert "stateful:multicast:not-all-receivers" in broken, broken
    assert replay(TOPOLOGIES["router"], {"router": "reference"}, MULTICAST_PROGRAM) == {}


# serial: a 15 s budget must hold 5 programs, which a second pytest-xdist worker's load on 2 cores can take away
@pytest.mark.serial
def test_a_short_seeded_session_on_the_reference_router_finds_nothing(tmp_path):
    running = start(TOPOLOGIES["router"], {"router": "reference"})
    try:
        target = target_for(running, "router")
        report = run_session(target, seed=7, budget_s=15, out_dir=tmp_path)
    finally:
        running.stop()
    assert report.executed >= 5, report.figures
    assert report.findings == [], [f.message for f in report.findings]
    records = report.records(target)
    assert records[0]["case"] == "FUZZ-STATEFUL" and records[0]["outcome"] == "passed"
    assert records[0]["details"]["executed"] == report.executed
