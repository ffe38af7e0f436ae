"""`interop fuzz` (stateful): Hypothesis generates short programs of client operations, runs them against a
running topology, judges each history with the documents' properties and shrinks what fails.

A program (harness/fuzz/program.py) is at most STEP_COUNT steps: connect, attach senders and receivers
(addresses from a small alphabet that reaches every routing mechanism of topologies/fuzz-router.yaml),
dynamic receivers, anonymous senders, send (settle mode, priority, TTL, durable), flow, drain, settle with
each outcome, detach, close, drop the TCP connection, and kill/restart/pause/resume the broker. The properties
(harness/fuzz/properties.py) run after every step and at the end. In differential mode every step runs on the
target and on the same topology with reference peers at once, and the normalised observations are compared.

The session is time-boxed: Hypothesis runs in batches of a few programs, each batch seeded from the session's
seed and its number, so the same seed gives the same programs (on the same peers). A failure is shrunk by
Hypothesis (on the live peers, bounded in time), written out as a pytest reproducer
(harness/fuzz/reproducer.py) and becomes a Finding; later batches count it again but do not stop on it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.internal.conjecture import engine as _engine
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, consumes, initialize, multiple, precondition,
                                rule, run_state_machine_as_test)

from . import properties, reproducer
from .program import ALPHABETS, DYNAMIC, RECEIVER_OUTCOMES, SHORT_TTL, Step, Violation, World
from .session import Finding, FuzzTarget, Progress, SessionReport, target_for

TOPOLOGIES = {"router": "fuzz-router", "broker": "single-broker"}  # topology names (harness.topology.topology_path)
STEP_COUNT = 12
BATCH = 6  # programs per Hypothesis run: small, so that the budget is checked often
SHRINK_S = 120.0  # at most this long shrinking one batch's failures (on live peers every try is a program)
PREFIX = "stateful:"


# ---- one program against one or two worlds ---------------------------------------------------------------


class ProgramRun:
    """The worlds one program runs in (the target, and the reference in differential mode), stepped together."""

    def __init__(self, target: FuzzTarget, pid: str, reference: FuzzTarget | None = None):
        self.worlds = [World(target, pid, label=target.label)]
        if reference is not None:
            self.worlds.append(World(reference, pid, label="reference"))
        self._pool = concurrent.futures.ThreadPoolExecutor(len(self.worlds), thread_name_prefix="fuzz-world")
        self.steps: list[Step] = []
        self.ended = False

    def _each(self, fn):
        return list(self._pool.map(fn, self.worlds))

    def apply(self, step: Step) -> list[Violation]:
        self.steps.append(step)
        self._each(lambda w: w.apply(step))
        return [v for found in self._each(properties.during) for v in found]

    def end(self) -> list[Violation]:
        """Finish every world, judge it, and compare the worlds (differential mode)."""
        self.ended = True

        def judge(world: World) -> list[Violation]:
            world.finish()
            found = properties.multicast_coverage(world)
            world.close_all()
            owed = properties.owed_by_broker(world)
            world.drain_broker(owed)
            return found + properties.at_end(world, owed)
        found = [v for vs in self._each(judge) for v in vs]
        if len(self.worlds) == 2 and not found:
            target, ref = (properties.observation(w) for w in self.worlds)
            diffs = properties.differences(target, ref)
            if diffs:
                found.append(Violation(f"divergence:{diffs[0][0]}", "divergence",
                                       f"[{self.worlds[0].label} vs reference] " + "; ".join(d[1] for d in diffs),
                                       {"target": target, "reference": ref}))
        return found

    def stop(self) -> None:
        self._each(lambda w: w.stop())
        self._pool.shutdown(wait=True)


# ---- the session -----------------------------------------------------------------------------------------


class _Session:
    def __init__(self, target: FuzzTarget, reference: FuzzTarget | None, progress: Progress | None,
                 deadline: float):
        self.target, self.reference, self.progress, self.deadline = target, reference, progress, deadline
        self.programs = 0
        self.known: set[str] = set()  # signatures already reported: later programs do not stop on them
        self.repeats: dict[str, int] = {}
        self.failing: dict[str, tuple[list[Step], Violation]] = {}  # signature -> last failing program
        self.ops: Counter = Counter()  # op:result on the target, so a session shows what its programs did
        self.steps = 0
        self.first_seen: dict[str, float] = {}  # signature -> when a program first failed with it
        self._ids = 0

    def new_run(self) -> ProgramRun:
        self._ids += 1
        return ProgramRun(self.target, f"p{self._ids}", self.reference)

    def count(self, run: ProgramRun) -> None:
        self.steps += len(run.steps)
        for op, result in run.worlds[0].observations:
            self.ops[f"{op}:{str(result).split()[0]}"] += 1

    def judge(self, run: ProgramRun, found: list[Violation]) -> None:
        """Raise the first violation not reported before (a class per signature, so that Hypothesis shrinks
        each distinct failure on its own)."""
        for v in found:
            sig = PREFIX + v.signature
            if sig in self.known:
                self.repeats[sig] = self.repeats.get(sig, 0) + 1
                continue
            self.failing[sig] = (list(run.steps), v)
            self.first_seen.setdefault(sig, time.monotonic())
            raise _violation_class(sig)(v.signature, v.kind, v.message, v.evidence)

    def program_done(self, failed: bool) -> None:
        self.programs += 1
        if self.progress is not None:
            self.progress.update(self.programs, len(self.known), note="shrinking" if failed else "")


_CLASSES: dict[str, type] = {}


def _violation_class(signature: str) -> type:
    if signature not in _CLASSES:
        _CLASSES[signature] = type(f"Violation[{signature}]", (Violation,), {})
    return _CLASSES[signature]


def _machine(session: _Session, role: str, faults: bool) -> type:
    classes = tuple(ALPHABETS[role])
    receiver_classes = classes + ((DYNAMIC,) if role == "router" else ())

    class FuzzProgram(RuleBasedStateMachine):
        conns = Bundle("conns")
        senders = Bundle("senders")
        receivers = Bundle("receivers")

        def __init__(self):
            super().__init__()
            self.run = session.new_run()
            self.n = 0
            self.failed = False
            self.used: list[str] = []  # address classes this program has attached to, in order
            self.faults = 0

        def _handle(self, kind: str) -> str:
            self.n += 1
            return f"{kind}{self.n}"

        def _do(self, op: str, **args):
            try:
                session.judge(self.run, self.run.apply(Step(op, args)))
            except Violation:
                self.failed = True
                raise

        @initialize(target=conns)
        def first_connection(self):
            conn = self._handle("c")
            self._do("connect", conn=conn)
            return conn

        @rule(target=conns)
        def connect(self):
            conn = self._handle("c")
            self._do("connect", conn=conn)
            return conn

        def _cls(self, data, choices) -> str:
            """An address class, often one the program already uses: a property needs several links on one
            address (two multicast receivers and a sender) far more often than uniform draws give."""
            used = [c for c in self.used if c in choices]
            if used and data.draw(st.booleans(), label="reuse"):
                return data.draw(st.sampled_from(used), label="cls")
            cls = data.draw(st.sampled_from(choices), label="cls")
            if cls not in self.used:
                self.used.append(cls)
            return cls

        @rule(target=senders, conn=conns, data=st.data(), presettled=st.booleans(), count=st.integers(0, 3))
        def sender(self, conn, data, presettled, count):
            """Attach a sender and (count > 0) send at once: Hypothesis's swarm testing leaves whole rules out
            of many programs, and a program whose senders never send judges little."""
            link = self._handle("s")
            self._do("sender", conn=conn, link=link, cls=self._cls(data, classes), presettled=presettled)
            if count:
                self._do("send", link=link, count=count, priority=None, ttl=None, durable=False, to=None)
            return link

        @rule(target=receivers, conn=conns, data=st.data(), fan=st.integers(2, 3), count=st.integers(1, 3))
        def fan_out(self, conn, data, fan, count):
            """Receivers on one address, then a sender that sends at once: what each distribution rule needs to
            be judged (every multicast receiver gets a copy, one anycast receiver gets each message), and what
            one-link-at-a-time draws seldom assemble within a short program."""
            cls = self._cls(data, classes)
            handles = []
            for _ in range(fan):
                handles.append(self._handle("r"))
                self._do("receiver", conn=conn, link=handles[-1], cls=cls, credit="auto", outcome="accept")
            link = self._handle("s")
            self._do("sender", conn=conn, link=link, cls=cls, presettled=False)
            self._do("send", link=link, count=count, priority=None, ttl=None, durable=False, to=None)
            return multiple(*handles)

        @precondition(lambda self: role == "router")
        @rule(target=senders, conn=conns, presettled=st.booleans())
        def anonymous_sender(self, conn, presettled):
            link = self._handle("s")
            self._do("sender", conn=conn, link=link, cls=None, presettled=presettled)
            return link

        @rule(target=receivers, conn=conns, data=st.data(),
              credit=st.sampled_from(["auto", "auto", "auto", 0, 1, 3]),
              outcome=st.sampled_from(("accept", "accept") + RECEIVER_OUTCOMES))
        def receiver(self, conn, data, credit, outcome):
            link = self._handle("r")
            self._do("receiver", conn=conn, link=link, cls=self._cls(data, receiver_classes), credit=credit,
                     outcome=outcome)
            return link

        @rule(link=senders, count=st.integers(1, 3), priority=st.sampled_from([None, None, 1, 4, 9]),
              ttl=st.sampled_from([None, None, 60.0, SHORT_TTL]), durable=st.booleans(), data=st.data())
        def send(self, link, count, priority, ttl, durable, data):
            to = self._cls(data, receiver_classes) if self.run.worlds[0].links[link].cls is None else None
            self._do("send", link=link, count=count, priority=priority, ttl=ttl, durable=durable, to=to)

        @rule(link=receivers, drain=st.booleans(), credit=st.integers(0, 4))
        def credit(self, link, drain, credit):
            self._do("drain" if drain else "flow", link=link, credit=credit if drain else credit + 1)

        @rule(link=receivers, outcome=st.sampled_from(RECEIVER_OUTCOMES[:-1]), count=st.sampled_from([None, 1]))
        def settle(self, link, outcome, count):
            self._do("settle", link=link, outcome=outcome, count=count)

        @rule(link=st.one_of(consumes(senders), consumes(receivers)))
        def detach(self, link):
            self._do("detach", link=link)

        @rule(conn=consumes(conns), how=st.sampled_from(["close", "kill"]))
        def end_connection(self, conn, how):
            self._do(how, conn=conn)

        @precondition(lambda self: faults and self.faults < 3)
        @rule(data=st.data())
        def broker(self, data):
            world = self.run.worlds[0]
            actions = (["restart"] if world.broker_down else ["resume"] if world.broker_paused
                       else ["kill", "pause"])
            self.faults += 1
            self._do("broker", action=data.draw(st.sampled_from(actions), label="action"))

        def teardown(self):
            try:
                if not self.failed and not self.run.ended:
                    try:
                        session.judge(self.run, self.run.end())
                    except Violation:
                        self.failed = True
                        raise
            finally:
                self.run.stop()
                session.count(self.run)
                session.program_done(self.failed)

    FuzzProgram.__name__ = FuzzProgram.__qualname__ = f"FuzzProgram_{role}"
    return FuzzProgram


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, stateful_step_count=STEP_COUNT, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, print_blob=False,
                    report_multiple_bugs=True,
                    phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink])


def _violations(exc: BaseException | None, seen: set[int] | None = None) -> list[Violation]:
    """The violations an exception carries: itself, a group's members, or, for an error Hypothesis raised while
    handling one (it re-runs a failing program, and a peer that answers differently the second time makes it
    give up with an error of its own), the violation it was handling."""
    seen = set() if seen is None else seen
    if exc is None or id(exc) in seen:
        return []
    seen.add(id(exc))
    if isinstance(exc, Violation):
        return [exc]
    found = [v for e in getattr(exc, "exceptions", ()) for v in _violations(e, seen)]
    return found or _violations(exc.__cause__ or exc.__context__, seen)


def run_session(target: FuzzTarget, *, seed: int, budget_s: float, progress: Progress | None = None,
                out_dir: Path | None = None, reference: FuzzTarget | None = None) -> SessionReport:
    """Run programs until `budget_s` is spent; shrink, write and report each distinct failure."""
    started = time.monotonic()
    deadline = started + budget_s
    report = SessionReport(mode="stateful", seed=seed, budget_s=budget_s)
    session = _Session(target, reference, progress, deadline)
    faults = target.role == "router" and _can_fault(target) and (reference is None or _can_fault(reference))
    wait_ready(target)
    if reference is not None:
        wait_ready(reference)
    machine = _machine(session, target.role, faults)
    breaks = dict(target.running.breaks) if target.running is not None else {}
    flaky: dict[str, str] = {}  # failures whose shrunk program did not fail again: noted, not reported
    batch = 0
    per_program = 2.0
    while time.monotonic() < deadline - 1.0:
        left = deadline - time.monotonic()
        examples = max(1, min(BATCH, int(left / per_program)))
        batch_seed = (seed * 1_000_003 + batch) % (2**32)
        batch += 1
        before_programs, batch_started = session.programs, time.monotonic()
        session.failing.clear()
        _engine.MAX_SHRINKING_SECONDS = int(max(15.0, min(SHRINK_S, left)))
        try:
            run_state_machine_as_test(hypothesis_seed(batch_seed)(machine), settings=_settings(examples))
        except Exception as exc:  # noqa: BLE001 - Hypothesis ends a failing run with the violations found
            found = _violations(exc)
            if not found:
                raise
            # Hypothesis's own error over a violation (not the violation, nor a group of them): the program could
            # not be run again alike, so its shrunk form cannot be trusted; noted as flaky like a Flaky.
            handled = not isinstance(exc, Violation) and not getattr(exc, "exceptions", None)
            for v in found:
                sig = PREFIX + v.signature
                if isinstance(exc, Flaky) or handled or sig not in session.failing:
                    flaky.setdefault(sig, v.message[:300])
                    continue
                steps, _ = session.failing[sig]
                session.known.add(sig)
                finding = _finding(sig, v, steps, target, reference, breaks, out_dir)
                finding.evidence.update(first_failed_after_s=round(session.first_seen[sig] - started, 1),
                                        shrunk_after_s=round(time.monotonic() - started, 1))
                report.add(finding)
        finally:
            _engine.MAX_SHRINKING_SECONDS = 300
        ran = session.programs - before_programs
        if ran:
            per_program = max(0.2, (time.monotonic() - batch_started) / ran)
        _recover(target)
        if reference is not None:
            _recover(reference)
    report.executed = session.programs
    report.duration_s = time.monotonic() - started
    report.figures = {"programs_per_min": round(60 * session.programs / max(report.duration_s, 1e-9), 1),
                      "batches": batch, "repeats": dict(session.repeats), "flaky": flaky,
                      "differential": reference is not None, "breaks": breaks, "step_count": STEP_COUNT,
                      "mean_steps": round(session.steps / max(1, session.programs), 1),
                      "ops": dict(sorted(session.ops.items()))}
    if progress is not None:
        progress.done(session.programs, len(report.findings))
    return report


def _finding(sig: str, v: Violation, steps: list[Step], target: FuzzTarget, reference: FuzzTarget | None,
             breaks: dict, out_dir: Path | None) -> Finding:
    peers = {role: rec.get("vendor", "reference") for role, rec in (target.peer_records or {}).items()}
    ref_peers = ({role: "reference" for role in peers} if reference is not None and v.kind == "divergence"
                 else None)
    path = None
    if out_dir is not None:
        path = str(reproducer.write(out_dir, sig, v.message, [s.as_tuple() for s in steps],
                                    TOPOLOGIES[target.role], peers, breaks, ref_peers))
    evidence = {"program": [str(s) for s in steps], "steps": len(steps), **_small(v.evidence)}
    return Finding(signature=sig, kind=v.kind, message=v.message, reproducer=path, evidence=evidence)


def _small(evidence: dict) -> dict:
    return {k: (v if len(repr(v)) < 4000 else repr(v)[:4000]) for k, v in evidence.items()}


def _can_fault(target: FuzzTarget) -> bool:
    running = target.running
    if running is None:
        return False
    brokers = [n for n, node in running.topology.nodes.items() if node.role == "broker"]
    return bool(brokers) and getattr(running[brokers[0]].info, "vendor", "") == "reference"


def wait_ready(target: FuzzTarget) -> None:
    """A fresh topology may take seconds to set up its broker routes (qdrouterd's autolinks): wait for them
    before the first program, so that no program is judged while the router is still starting."""
    if target.role != "router" or target.running is None or not _can_fault(target):
        return
    world = World(target, "warmup", label=target.label)
    try:
        world._await_broker_routes()
    finally:
        world.stop()
    if world.violations:
        raise RuntimeError(f"{target.label}: the broker routes never came up: {world.violations[0].message}")


def _recover(target: FuzzTarget) -> None:
    """A program that crashed the peer under fuzz was reported; restart it so the session goes on."""
    peer = target.peer
    if hasattr(peer, "down_reason") and peer.down_reason():
        with contextlib.suppress(NotImplementedError):
            peer.restart()
            wait_ready(target)


# ---- breaks, targets and replay (reproducers) ------------------------------------------------------------


def start(topology: str, peers: dict, breaks: dict | None = None):
    """Start `topology` (a name in topologies/, or a file) with `peers`, applying `breaks` (node -> faults)."""
    from ..peers.launch import start_topology
    from ..topology import load_topology, topology_path

    return start_topology(load_topology(topology_path(topology)), peers, breaks=breaks or {})


def replay_options(peers: dict, breaks: dict) -> tuple[dict, dict]:
    """The reproducer's peers and breaks, overridden by INTEROP_FUZZ_PEERS (`router=qdrouterd,...`) and
    INTEROP_FUZZ_BREAKS (`none`, or `R1:multicast-as-balanced,...`)."""
    peers = dict(peers)
    for item in filter(None, os.environ.get("INTEROP_FUZZ_PEERS", "").split(",")):
        role, _, vendor = item.partition("=")
        peers[role.strip()] = vendor.strip()
    text = os.environ.get("INTEROP_FUZZ_BREAKS")
    if text is not None:
        breaks = {}
        for item in filter(None, text.split(",")):
            if item.strip() == "none":
                continue
            node, _, fault = item.partition(":")
            breaks.setdefault(node.strip(), []).append(fault.strip())
    return peers, breaks


def replay(topology: str, peers: dict, steps: list, *, breaks: dict | None = None,
           reference_peers: dict | None = None) -> dict[str, str]:
    """Run one program's steps on a fresh topology (and on the reference, for a differential finding);
    returns signature -> message for every property that failed."""
    # A reproducer written before topologies were named gives the file (topologies/single-broker.yaml).
    role = "broker" if Path(topology).stem == TOPOLOGIES["broker"] else "router"
    running = start(topology, peers, breaks)
    ref_running = None
    try:
        target = target_for(running, role)
        reference = None
        if reference_peers is not None:
            ref_running = start(topology, reference_peers)
            reference = target_for(ref_running, role)
        wait_ready(target)
        if reference is not None:
            wait_ready(reference)
        run = ProgramRun(target, "r1", reference)
        found: list[Violation] = []
        try:
            for op, args in steps:
                found += run.apply(Step(op, dict(args)))
            found += run.end()
        finally:
            run.stop()
        return {PREFIX + v.signature: v.message for v in found}
    finally:
        running.stop()
        if ref_running is not None:
            ref_running.stop()
