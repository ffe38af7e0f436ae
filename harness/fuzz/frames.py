"""`interop fuzz --frames`: hostile byte streams on raw TCP against one server, with a sentinel client.

Cases (harness/fuzz/hostile.py) run in batches, several at once, each on its own connection. After every
batch the session asks: is the server alive, does it answer a protocol header, does a fresh client get a
message through, has it closed every socket the fuzzer closed (no CLOSE_WAIT), how much memory does it hold.
Throughout, a sentinel client (harness/fuzz/sentinel.py) sends and receives on its own address; the session
judges its longest gap between deliveries and whether any accepted message went missing.

When the server crashes or hangs, the session restarts it, replays the batch's cases one at a time against
the fresh server (the cases closest to the moment it broke first) and names the single input that does it:
a Finding with the case's family, name and bytes in hex. Then the session goes on. Findings' signatures come
from the case's name (`crash:sasl-init.mechanism-null`), so two seeds finding one fault report it once.

A server that still answers may yet be burning a core on a connection the fuzzer closed (issue 57): after every
batch whose connections have all closed, the session measures the server's CPU over a quiet window
(harness/fuzz/cpuverdict.py). Over the threshold, it is triaged as a hang is: the server is restarted and the
batch replayed against it, a few cases at a time with a window after each group (known culprits last, so that a
second fault in the same batch gets its name) and then one case at a time within the group that set it
spinning; the input is named in a `cpu-after-close:<case>` finding with the CPU-s measured. A hang is checked the
same way: the case its replay named is replayed alone on a fresh server, and one that does not hang it alone but
leaves it spinning names the hang with its CPU (enough spinning connections pin every thread a server has); one
that does neither, or none named, sends the batch through the CPU triage.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
import uuid
from pathlib import Path

import yaml

from ..clients import Clients
from ..peers.liveness import amqp_silence
from ..wait import WaitTimeout, wait_for
from ..vendors.rabbitmq.render import HANDSHAKE_TIMEOUT_MS
from . import procstat
from .cpuverdict import QUIET_WINDOW_S, CpuVerdict, measure_after_close
from .hostile import FAMILIES, OPT_IN_FAMILIES, TLS_FAMILIES, Case, Context, generate
from .sentinel import Sentinel
from .session import Finding, FuzzTarget, Progress, SessionReport
from .wire import Reply, play

__all__ = ["FAMILIES", "OPT_IN_FAMILIES", "TLS_FAMILIES", "run_session"]

BATCH = 200  # cases between two health checks: what a crash's replay has to search
WORKERS = 12  # connections at once; the machines here have 2 cores shared with the server under fuzz
PROBE_S = 3.0  # a server that does not answer a protocol header within this is hung
FRESH_CLIENT_S = 10.0
CLOSE_WAIT_GRACE_S = 3.0  # how long a server may take to notice that the fuzzer closed
# ... and how long, past that, before a socket still in CLOSE_WAIT counts as kept: a server may close its side late on
# purpose. RabbitMQ 3.10.8 waits a few seconds before it closes a refused handshake, and a connection whose handshake
# never finished (half a frame) only at its handshake timeout, which the harness renders as 30 s: in the quick
# nightly of 2026-12-07 a 1 s wait named its unknown-SASL-mechanism input, and an 18 s one still saw one socket,
# while the robustness suite saw every input's socket closed. Longer than that timeout: late is not kept.
CLOSE_WAIT_KEPT_S = HANDSHAKE_TIMEOUT_MS / 1000 + 5.0
STALL_S = 1.0
RSS_LIMIT_MB = 200
# Past this the session stops early, whatever its budget: RabbitMQ 3.10 grew past 20 GB within 90 s of hostile
# cases on a 24 GB machine (nested arrays in a transfer body: +1.2 GB for one 500 KB frame), and a fuzzing
# session must not take the machine down with the peer.
RSS_CEILING_MB = 4096
REPLAY_LIMIT = BATCH
CLOSE_WAIT_ATTRIBUTIONS = 2  # replays to name a CLOSE_WAIT leak's input, per session (each costs up to 60 s)
# Naming the input of a CPU finding: cases are replayed CPU_GROUP at a time with a quiet window after each group
# (a spin lasts: the group that starts one still shows it), then one at a time within that group; at most
# CPU_TRIAGE_S per finding (200 cases: 20 windows, a restart, up to 10 more windows).
CPU_GROUP = 10
CPU_TRIAGE_S = 120.0


def run_session(target: FuzzTarget, *, seed: int, budget_s: float, max_cases: int | None = None,
                progress: Progress | None = None, out_dir: Path | None = None,
                families: list[str] | None = None) -> SessionReport:
    """Run hostile cases against `target` until `budget_s` or `max_cases`; the verdicts as a report."""
    return _Session(target, seed, budget_s, max_cases, progress, out_dir, families).run()


def _wire(target: FuzzTarget, name: str) -> str:
    wire = getattr(target.peer, "wire_address", None)
    return wire(name) if callable(wire) else name


class _Session:
    def __init__(self, target, seed, budget_s, max_cases, progress, out_dir, families):
        self.target, self.seed, self.max_cases = target, seed, max_cases
        self.progress, self.out_dir, self.families = progress, out_dir, families
        if not families and target.tls:  # a TLS-capable listener: the TLS families take their turns too
            self.families = FAMILIES + TLS_FAMILIES
        security = target.security
        if families:
            generate(seed, 0, Context(), families)  # an unknown family name fails here, before anything runs
        self.report = SessionReport(mode="frames", seed=seed, budget_s=budget_s)
        run = uuid.uuid4().hex[:8]
        self.ctx = Context(address=_wire(target, f"fuzz.hostile.{seed}.{run}"), container_id=f"fuzz-{seed}",
                           role=target.role,
                           user=security.user if security is not None else None,
                           password=(security.password or "") if security is not None else "")
        self.sentinel_address = _wire(target, f"fuzz.sentinel.{seed}.{run}")
        self.fresh_address = _wire(target, f"fuzz.fresh.{seed}.{run}")
        self.started = time.monotonic()
        self.deadline = self.started + budget_s
        self.per_family: collections.Counter = collections.Counter()
        self.sentinel: Sentinel | None = None
        self.sentinel_totals: collections.Counter = collections.Counter()
        self.max_gap_ms = 0
        self.max_rss = 0
        self.start_rss: int | None = None
        self.close_wait_max = 0
        self.close_wait_tries = 0
        self.close_wait_kept = 0  # sockets in CLOSE_WAIT found kept (past CLOSE_WAIT_KEPT_S) by the last check
        self.breaks = 0
        self.cpu_breaks = 0  # batches after which the server kept spending CPU
        self.max_cpu_after_close = 0.0  # cores, the highest quiet window after a batch
        self.culprits: dict[str, Case] = {}  # case name -> the case that broke the server (replayed first)
        self.fresh = Clients(container_id=f"fuzz-fresh-{seed}")
        self.restart_error = ""
        self.last_log: list[str] = []
        self.stopped: str | None = None  # why the session ended before its budget, if it did

    # ---- the loop ------------------------------------------------------------------------------------
    def run(self) -> SessionReport:
        try:
            self._sample_rss()  # before the first case: the baseline
            self._start_sentinel()
            with concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="fuzz-frames") as pool:
                index = 0
                while self._time_left() and not self._enough():
                    n = BATCH if self.max_cases is None else min(BATCH, self.max_cases - self.report.executed)
                    cases = [generate(self.seed, i, self.ctx, self.families) for i in range(index, index + n)]
                    index += n
                    replies = self._run_batch(pool, cases)
                    broken = self._health()
                    if broken:
                        if not self._on_break(*broken, cases, replies):
                            break
                    else:
                        self._check_close_wait(cases, replies)
                        if not self._check_cpu(cases):
                            break
                    self._sample_rss()
                    self._progress()
                    if self.max_rss > RSS_CEILING_MB << 20:
                        self.stopped = f"the server's RSS passed the {RSS_CEILING_MB} MB safety ceiling"
                        break
            self._end_epoch(crashed=False)
            self._check_close_wait([], final=True)
        finally:
            self.fresh.close(timeout=3.0)
            self.report.duration_s = time.monotonic() - self.started
            self.report.figures = self._figures()
            if self.progress:
                self.progress.done(self.report.executed, len(self.report.findings), self._note())
        return self.report

    def _time_left(self) -> bool:
        return time.monotonic() < self.deadline

    def _enough(self) -> bool:
        return self.max_cases is not None and self.report.executed >= self.max_cases

    def _run_batch(self, pool, cases: list[Case]) -> list[Reply | None]:
        stop = threading.Event()  # a refused connection means the server is gone: the rest would prove nothing
        host, port = self.target.host, self.target.port

        def one(case: Case) -> Reply | None:
            if stop.is_set() or not self._time_left():
                return None
            reply = play(host, port, case)
            if reply.refused or reply.error:
                stop.set()
            return reply

        replies = list(pool.map(one, cases))
        for case, reply in zip(cases, replies, strict=True):
            if reply is not None and not reply.refused and not reply.error:
                self.report.executed += 1
                self.per_family[case.family] += 1
        return replies

    # ---- health -----------------------------------------------------------------------------------------
    def _health(self, fresh_client: bool = True) -> tuple[str, str] | None:
        """None when the server serves; else (kind, one line): crash (its process ended or it refuses
        connections) or hang (it accepts and does not answer, or a fresh client cannot get a message through)."""
        peer = self.target.peer
        reason = peer.down_reason()
        if reason:
            return "crash", reason
        silence = amqp_silence(self.target.host, self.target.port, PROBE_S)
        if silence:
            try:  # a refused or reset probe is mostly a process going down: its exit status says more
                return "crash", wait_for(peer.down_reason, 2.0, "the peer's exit status")
            except WaitTimeout:
                pass
            return ("crash" if "refuses" in silence else "hang"), silence
        if fresh_client:
            problem = self._fresh_client()
            if problem:
                return "unserved", problem
        return None

    def _fresh_client(self) -> str | None:
        """A new connection attaches, sends one message and gets it back; None when it does."""
        conn = None
        try:
            conn = self.fresh.connect(self.target.url, wait=False, security=self.target.security)
            conn.wait_open(FRESH_CLIENT_S)
            rcv = conn.receiver(self.fresh_address, credit=10, timeout=FRESH_CLIENT_S)
            snd = conn.sender(self.fresh_address, timeout=FRESH_CLIENT_S)
            snd.send(1)
            rcv.wait_received(1, FRESH_CLIENT_S)
            return None
        except (AssertionError, ConnectionError, concurrent.futures.TimeoutError) as exc:
            return f"a fresh client was not served: {str(exc).splitlines()[0]}"
        finally:
            if conn is not None:
                try:
                    conn.close(wait=False)
                except Exception:  # a connection the server broke: nothing left to close
                    pass

    # ---- a crash or a hang: name the input ----------------------------------------------------------
    def _on_break(self, kind: str, message: str, cases: list[Case], replies: list[Reply | None]) -> bool:
        """Restart, replay the batch one case at a time to name the input, restart again; False when the
        server cannot be brought back (the session ends)."""
        self.breaks += 1
        self.last_log = _log_tail(self.target)
        self._end_epoch(crashed=True)
        if not self._restart():
            self.report.add(Finding(
                f"{_kind(kind)}:unrecoverable", _kind(kind),
                f"the server {message} and did not restart: {self.restart_error}", evidence={"seed": self.seed}))
            return False
        culprit = None
        for case in self._candidates(cases, replies)[:REPLAY_LIMIT]:
            if not self._time_left() and culprit is None and self.breaks > 1:
                break  # out of budget: the first break is always chased, later ones only in time
            play(self.target.host, self.target.port, case, idle_s=0.05)
            broken = self._health(fresh_client=False)
            if broken:
                culprit, (kind, message) = case, broken
                self.last_log = _log_tail(self.target)
                break
        spin = None  # the CPU verdict of a hang that took several spinning connections
        if _kind(kind) == "hang" and self._cpu_pids():
            culprit, spin = self._hang_by_spin(culprit, cases)
            if culprit is False:
                return False
        if culprit is None:
            self.report.add(Finding(
                f"{_kind(kind)}:unattributed", _kind(kind),
                f"the server {message} during a batch, and no single case of it did so again when replayed",
                evidence={"seed": self.seed, "cases": [c.label for c in cases[:REPLAY_LIMIT]],
                          "log_tail": self.last_log}))
        elif spin is not None:
            self._add_culprit(
                "hang", f"{message} during a batch; replayed alone, this case left it spending CPU after the "
                f"connection closed ({spin.describe()}), and enough such connections pin every thread it has",
                culprit, extra={"cpu_after_close": spin.evidence()})
            self._add_cpu_culprit(culprit, spin)
        else:
            self.culprits[culprit.name] = culprit
            self._add_culprit(_kind(kind), message, culprit)
        if culprit is not None and not self._restart():
            return False
        self._start_sentinel()
        return True

    def _hang_by_spin(self, culprit: Case | None, cases: list[Case]):
        """A hang named by replaying cases one after another on one server may be the sum of many: each case
        leaves a thread spinning and the last one takes the last thread (Artemis 2.40.0 answers nothing once every
        I/O thread spins), so the case replayed at that moment may be innocent. The named case is replayed alone
        on a fresh server: hung again, it is the hang's; answered but spinning, it is named with its CPU verdict;
        neither, or none named, the batch goes through the CPU triage. (case or None, verdict or None), or
        (False, None) when the server could not be restarted."""
        if not self._restart():
            return False, None
        if culprit is not None:
            play(self.target.host, self.target.port, culprit, idle_s=0.05)
            if self._health(fresh_client=False):
                return culprit, None
            verdict = measure_after_close(self._cpu_pids())
            if verdict.spinning:
                return culprit, verdict
            if not self._restart():
                return False, None
        spinner, verdict = self._cpu_culprit(cases)
        return spinner, verdict

    def _candidates(self, cases: list[Case], replies: list[Reply | None]) -> list[Case]:
        """The batch's cases in the order to replay: known culprits first, then those that ended nearest
        the moment the server broke (the first refused connection, else the batch's last reply)."""
        ran = [(c, r) for c, r in zip(cases, replies, strict=True) if r is not None]
        refused = [r.started for _, r in ran if r.refused or r.error]
        done = [(c, r) for c, r in ran if not (r.refused or r.error)]
        if not done:
            return []
        moment = min(refused) if refused else max(r.ended for _, r in done)
        done.sort(key=lambda cr: (cr[0].name not in self.culprits, abs(cr[1].ended - moment)))
        return [c for c, _ in done]

    def _add_culprit(self, kind: str, message: str, case: Case, log: list[str] | None = None,
                     extra: dict | None = None) -> None:
        finding = Finding(
            signature=f"{kind}:{case.name}", kind=kind,
            message=f"the server {message} after one {case.family} case {case.name} ({len(case.data)} bytes)",
            evidence={"input_hex": case.hex[:200_000], "family": case.family, "name": case.name,
                      "seed": self.seed, "index": case.index,
                      "pauses": [v for k, v in case.steps if k == "pause"],
                      "log_tail": self.last_log if log is None else log, **(extra or {})})
        if self.report.add(finding) and self.out_dir is not None:
            finding.reproducer = str(self._write_regression(finding, case))

    def _restart(self) -> bool:
        try:
            self.target.peer.restart(kill=True)
            self.close_wait_kept = 0  # a new process holds none of the old one's sockets
            return True
        except Exception as exc:  # reported as the session's finding by the caller
            self.restart_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return False

    # ---- CPU after close -----------------------------------------------------------------------------------
    def _cpu_pids(self) -> list[int]:
        return peer_pids(self.target.peer)

    def _check_cpu(self, cases: list[Case]) -> bool:
        """Measure the server over a quiet window now that the batch's connections have closed; over the limit,
        name the input (restarting the server). False when the server could not be brought back."""
        pids = self._cpu_pids()
        if not pids:
            return True
        verdict = measure_after_close(pids)
        self.max_cpu_after_close = max(self.max_cpu_after_close, verdict.windows[0].cores if verdict.windows else 0)
        if not verdict.spinning:
            return True
        self.cpu_breaks += 1
        self.last_log = _log_tail(self.target)
        self._end_epoch(crashed=False)  # the sentinel's epoch is judged: a spinning thread may have held its messages
        if not self._restart():
            self.report.add(Finding(
                "cpu-after-close:unrecoverable", "cpu-after-close",
                f"the server kept spending CPU after a batch's connections closed ({verdict.describe()}) and did not "
                f"restart: {self.restart_error}", evidence={"seed": self.seed, **verdict.evidence()}))
            return False
        culprit, single = (None, None)
        chased = self._time_left() or not any(f.kind == "cpu-after-close" for f in self.report.findings)
        if chased:  # out of budget, only the session's first CPU finding is chased
            culprit, single = self._cpu_culprit(cases)
        if culprit is None:
            self.report.add(Finding(
                "cpu-after-close:unattributed", "cpu-after-close",
                f"the server kept spending CPU after a batch's connections had all closed ({verdict.describe()}), "
                + ("and no single case of the batch did so again when replayed" if chased
                   else "(not replayed: the session was out of budget)"),
                evidence={"seed": self.seed, "batch": verdict.evidence(),
                          "cases": [c.label for c in cases[:REPLAY_LIMIT]], "log_tail": self.last_log}))
        else:
            self._add_cpu_culprit(culprit, single, batch=verdict)
            if not self._restart():
                return False
        self._start_sentinel()
        return True

    def _add_cpu_culprit(self, case: Case, verdict: CpuVerdict, batch: CpuVerdict | None = None) -> None:
        self.culprits[case.name] = case
        extra = {"cpu_after_close": verdict.evidence(), "rss_mb": procstat.rss_bytes(self._cpu_pids()) >> 20}
        if batch is not None:
            extra["batch_cpu_after_close"] = batch.evidence()
        self._add_culprit("cpu-after-close", f"kept spending CPU once the connection had closed: {verdict.describe()}",
                          case, log=_log_tail(self.target), extra=extra)

    def _cpu_culprit(self, cases: list[Case]) -> tuple[Case | None, CpuVerdict | None]:
        """Against a freshly restarted server: replay `cases` CPU_GROUP at a time with a quiet window after each
        group; in the group that leaves the server spinning, restart and replay one case at a time. The case and
        its verdict, or (None, None). Known culprits go last: a batch that holds one and a new spinner (Artemis
        2.40.0 spins on several dispositions) names the new one, where the crash triage's known-first order would
        name the known one every time."""
        until = time.monotonic() + CPU_TRIAGE_S
        seen: set[str] = set()
        ordered = []
        for case in sorted(cases, key=lambda c: c.name in self.culprits):
            if case.hex not in seen:
                seen.add(case.hex)
                ordered.append(case)
        groups = [ordered[i:i + CPU_GROUP] for i in range(0, len(ordered), CPU_GROUP)]
        for group in groups:
            if time.monotonic() > until:
                return None, None
            verdict = self._replay_and_measure(group)
            if not verdict.spinning:
                continue
            if len(group) == 1:
                return group[0], verdict
            if not self._restart():
                return None, None
            for case in group:
                verdict = self._replay_and_measure([case])
                if verdict.spinning:
                    return case, verdict
                if time.monotonic() > until + len(group) * (QUIET_WINDOW_S + 1):
                    break
            return None, None
        return None, None

    def _replay_and_measure(self, cases: list[Case]) -> CpuVerdict:
        for case in cases:
            play(self.target.host, self.target.port, case, idle_s=0.05)
        return measure_after_close(self._cpu_pids())

    # ---- sockets left open, memory ----------------------------------------------------------------------
    def _check_close_wait(self, cases: list[Case], replies: list[Reply | None] | None = None,
                          final: bool = False) -> None:
        pids = peer_pids(self.target.peer)
        if not pids:
            return
        kept = self.close_wait_kept  # sockets earlier batches left for good: a server that leaks never closes them
        # late is not kept: only what is still there CLOSE_WAIT_KEPT_S after the grace is a finding
        for seconds in (CLOSE_WAIT_GRACE_S, CLOSE_WAIT_KEPT_S):
            try:
                wait_for(lambda: procstat.close_wait_count(pids) <= kept, seconds,
                         "the server to close the sockets the fuzzer closed")
                return
            except WaitTimeout:
                count = procstat.close_wait_count(pids)
                self.close_wait_max = max(self.close_wait_max, count)
        self.close_wait_kept = count
        # the kept sockets' peers are the batch's client ports: the case whose connection it was, without a replay
        culprit = _case_by_port(cases, replies or [], procstat.close_wait_peer_ports(pids))
        if culprit is None and cases and self.close_wait_tries < CLOSE_WAIT_ATTRIBUTIONS:
            self.close_wait_tries += 1
            culprit = self._close_wait_culprit(cases, count)
        if culprit is not None:
            self._add_culprit("close-wait", f"kept a socket in CLOSE_WAIT ({count} after the batch)", culprit,
                              log=_log_tail(self.target))
        # sockets left while an input is already named for a leak are most likely that input's again (it recurs in
        # later batches): only a leak no input explains is a finding of its own
        elif not any(f.kind == "close-wait" for f in self.report.findings):
            self.report.add(Finding(
                "close-wait:unattributed", "close-wait",
                f"the server kept {count} socket(s) in CLOSE_WAIT {CLOSE_WAIT_GRACE_S + CLOSE_WAIT_KEPT_S:g}s after "
                "the fuzzer closed them" + (" (at the end of the session)" if final else ""),
                evidence={"seed": self.seed, "close_wait": count}))

    def _close_wait_culprit(self, cases: list[Case], baseline: int) -> Case | None:
        """Replay cases one by one until one leaves one more socket in CLOSE_WAIT (at most 60 s)."""
        pids, until = peer_pids(self.target.peer), time.monotonic() + 60.0
        seen: set[str] = set()
        for case in cases:
            if case.name in seen or time.monotonic() > until:
                continue
            seen.add(case.name)
            play(self.target.host, self.target.port, case, idle_s=0.05)
            try:
                wait_for(lambda: procstat.close_wait_count(pids) <= baseline, 1.0, "close")
            except WaitTimeout:
                try:  # closed late is not kept (CLOSE_WAIT_KEPT_S)
                    wait_for(lambda: procstat.close_wait_count(pids) <= baseline, CLOSE_WAIT_KEPT_S, "close, late")
                except WaitTimeout:
                    return case
        return None

    def _sample_rss(self) -> None:
        """Track the server's RSS. The limit is 200 MB, or 200 MB of growth for a server that starts above it
        (RabbitMQ's Erlang VM holds well over 200 MB idle on these machines)."""
        rss = procstat.rss_bytes(peer_pids(self.target.peer))
        if self.start_rss is None:
            self.start_rss = rss
        self.max_rss = max(self.max_rss, rss)
        limit = max(RSS_LIMIT_MB << 20, self.start_rss + (RSS_LIMIT_MB << 20))
        if rss > limit:
            self.report.add(Finding(
                f"memory:rss-over-{RSS_LIMIT_MB}mb", "memory",
                f"the server's RSS reached {rss >> 20} MB (from {self.start_rss >> 20} MB; limit {limit >> 20} MB) "
                f"after {self.report.executed} cases",
                evidence={"seed": self.seed, "rss_mb": rss >> 20, "start_rss_mb": self.start_rss >> 20}))

    # ---- the sentinel -----------------------------------------------------------------------------------
    def _start_sentinel(self) -> None:
        try:
            self.sentinel = Sentinel(self.target.url, self.sentinel_address, name=f"fuzz-sentinel-{self.seed}",
                                     security=self.target.security)
        except (AssertionError, ConnectionError) as exc:
            self.sentinel = None
            self.report.add(Finding("unserved:sentinel", "hang",
                                    f"the sentinel client could not attach: {str(exc).splitlines()[0]}",
                                    evidence={"seed": self.seed}))

    def _end_epoch(self, crashed: bool) -> None:
        """Stop the sentinel and judge it (a crash's own epoch is judged by the crash finding alone)."""
        if self.sentinel is None:
            return
        figures = self.sentinel.stop(drain_s=0.5 if crashed else 5.0)
        self.sentinel = None
        for key in ("sent", "received", "lost", "duplicates"):
            self.sentinel_totals[key] += figures[key]
        if crashed:
            return
        self.max_gap_ms = max(self.max_gap_ms, figures["max_gap_ms"])
        if figures["max_gap_ms"] > STALL_S * 1000:
            self.report.add(Finding("stall:sentinel", "stall",
                                    f"the sentinel got nothing for {figures['max_gap_ms']} ms while the fuzzer ran "
                                    f"(limit {STALL_S * 1000:.0f} ms)", evidence={"seed": self.seed, **figures}))
        if figures["lost"]:
            self.report.add(Finding("lost:sentinel", "lost",
                                    f"{figures['lost']} of {figures['accepted']} accepted sentinel messages never "
                                    "arrived", evidence={"seed": self.seed, **figures}))

    def _figures(self) -> dict:
        duration = max(1e-6, time.monotonic() - self.started)
        gap = self.max_gap_ms
        return {"cases_per_family": dict(sorted(self.per_family.items())),
                "cases_per_s": round(self.report.executed / duration, 1),
                "max_sentinel_gap_ms": gap, "sentinel_sent": self.sentinel_totals["sent"],
                "sentinel_received": self.sentinel_totals["received"],
                "sentinel_lost": self.sentinel_totals["lost"], "max_rss_mb": round(self.max_rss / (1 << 20), 1),
                "start_rss_mb": round((self.start_rss or 0) / (1 << 20), 1),
                "close_wait": self.close_wait_max, "breaks": self.breaks, "workers": WORKERS,
                "cpu_breaks": self.cpu_breaks, "max_cpu_after_close_cores": round(self.max_cpu_after_close, 3),
                **({"stopped_early": self.stopped} if self.stopped else {})}

    def _note(self) -> str:
        rate = self.report.executed / max(1e-6, time.monotonic() - self.started)
        live_gap = round(self.sentinel.max_gap_s * 1000) if self.sentinel else 0
        return (f"{rate:.0f}/s, gap {max(self.max_gap_ms, live_gap)} ms, rss {self.max_rss >> 20} MB, "
                f"close-wait {self.close_wait_max}, breaks {self.breaks}, cpu after close "
                f"{self.max_cpu_after_close:.2f} cores")

    def _progress(self) -> None:
        if self.progress:
            self.progress.update(self.report.executed, len(self.report.findings), self._note())

    # ---- regression entries ------------------------------------------------------------------------------
    def _write_regression(self, finding: Finding, case: Case) -> Path:
        """Append the input to out_dir/crashers.yaml, in the form suites/robustness/crashers.yaml takes."""
        path = Path(self.out_dir) / "crashers.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = yaml.safe_load(path.read_text()) if path.exists() else None
        data = data or {"crashers": []}
        if any(e.get("id") == case.name and e.get("input_hex") == case.hex for e in data["crashers"]):
            return path  # a hang named by its CPU is two findings of one input: one entry
        data["crashers"].append(regression_entry(finding, case, self.target))
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=120))
        return path


def _case_by_port(cases: list[Case], replies: list, ports: list[int]) -> Case | None:
    """The first case whose connection used one of `ports` as its client port (a socket the server keeps)."""
    by_port = {r.local_port: c for c, r in zip(cases, replies, strict=False) if r is not None and r.local_port}
    return next((by_port[p] for p in ports if p in by_port), None)


def regression_entry(finding: Finding, case: Case, target: FuzzTarget) -> dict:
    entry = {"id": case.name, "finding": finding.signature, "family": case.family,
             "found": f"{target.label} ({target.topology}), interop fuzz --frames seed "
                      f"{finding.evidence.get('seed')} case {case.index}: {finding.message}",
             "input_hex": case.hex, "hold_s": sum(v for k, v in case.steps if k == "pause")}
    if any(k == "pause" for k, _ in case.steps[:-1]):  # a trickle: when each piece arrives may be the fault
        entry["steps"] = [v.hex() if k == "send" else v for k, v in case.steps if k in ("send", "pause")]
        entry["hold_s"] = 0
    return entry


def peer_pids(peer) -> list[int]:
    """A peer's live process ids (harness.peers.base.Peer.pids; [] for one that is not a local process)."""
    return [p for p in (getattr(peer, "pids", None) or []) if p]


def _log_tail(target: FuzzTarget, lines: int = 8) -> list[str]:
    logs = getattr(target.peer, "logs", None)
    try:
        return (logs() if callable(logs) else "").splitlines()[-lines:]
    except Exception:  # a provider without logs
        return []


def _kind(kind: str) -> str:
    return "hang" if kind == "unserved" else kind
