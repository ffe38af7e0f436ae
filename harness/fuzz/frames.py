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
from . import procstat
from .hostile import FAMILIES, TLS_FAMILIES, Case, Context, generate
from .sentinel import Sentinel
from .session import Finding, FuzzTarget, Progress, SessionReport
from .wire import Reply, play

__all__ = ["FAMILIES", "TLS_FAMILIES", "run_session"]

BATCH = 200  # cases between two health checks: what a crash's replay has to search
WORKERS = 12  # connections at once; the machines here have 2 cores shared with the server under fuzz
PROBE_S = 3.0  # a server that does not answer a protocol header within this is hung
FRESH_CLIENT_S = 10.0
CLOSE_WAIT_GRACE_S = 3.0  # how long a server may take to notice that the fuzzer closed
STALL_S = 1.0
RSS_LIMIT_MB = 200
# Past this the session stops early, whatever its budget: RabbitMQ 3.10 grew past 20 GB within 90 s of hostile
# cases on a 24 GB machine (nested arrays in a transfer body: +1.2 GB for one 500 KB frame), and a fuzzing
# session must not take the machine down with the peer.
RSS_CEILING_MB = 4096
REPLAY_LIMIT = BATCH
CLOSE_WAIT_ATTRIBUTIONS = 2  # replays to name a CLOSE_WAIT leak's input, per session (each costs up to 60 s)


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
        self.breaks = 0
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
                        self._check_close_wait(cases)
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
        if culprit is None:
            self.report.add(Finding(
                f"{_kind(kind)}:unattributed", _kind(kind),
                f"the server {message} during a batch, and no single case of it did so again when replayed",
                evidence={"seed": self.seed, "cases": [c.label for c in cases[:REPLAY_LIMIT]],
                          "log_tail": self.last_log}))
        else:
            self.culprits[culprit.name] = culprit
            self._add_culprit(_kind(kind), message, culprit)
            if not self._restart():
                return False
        self._start_sentinel()
        return True

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

    def _add_culprit(self, kind: str, message: str, case: Case, log: list[str] | None = None) -> None:
        finding = Finding(
            signature=f"{kind}:{case.name}", kind=kind,
            message=f"the server {message} after one {case.family} case {case.name} ({len(case.data)} bytes)",
            evidence={"input_hex": case.hex[:200_000], "family": case.family, "name": case.name,
                      "seed": self.seed, "index": case.index,
                      "pauses": [v for k, v in case.steps if k == "pause"],
                      "log_tail": self.last_log if log is None else log})
        if self.report.add(finding) and self.out_dir is not None:
            finding.reproducer = str(self._write_regression(finding, case))

    def _restart(self) -> bool:
        try:
            self.target.peer.restart(kill=True)
            return True
        except Exception as exc:  # reported as the session's finding by the caller
            self.restart_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return False

    # ---- sockets left open, memory ----------------------------------------------------------------------
    def _check_close_wait(self, cases: list[Case], final: bool = False) -> None:
        pids = peer_pids(self.target.peer)
        if not pids:
            return
        try:
            wait_for(lambda: procstat.close_wait_count(pids) == 0, CLOSE_WAIT_GRACE_S,
                     "the server to close the sockets the fuzzer closed")
            return
        except WaitTimeout:
            count = procstat.close_wait_count(pids)
        self.close_wait_max = max(self.close_wait_max, count)
        culprit = None
        if cases and self.close_wait_tries < CLOSE_WAIT_ATTRIBUTIONS:
            self.close_wait_tries += 1
            culprit = self._close_wait_culprit(cases, count)
        if culprit is not None:
            self._add_culprit("close-wait", f"kept a socket in CLOSE_WAIT ({count} after the batch)", culprit,
                              log=_log_tail(self.target))
        elif not any(f.kind == "close-wait" for f in self.report.findings) or final:
            self.report.add(Finding(
                "close-wait:unattributed", "close-wait",
                f"the server kept {count} socket(s) in CLOSE_WAIT {CLOSE_WAIT_GRACE_S:g}s after the fuzzer closed "
                "them" + (" (at the end of the session)" if final else ""),
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
                **({"stopped_early": self.stopped} if self.stopped else {})}

    def _note(self) -> str:
        rate = self.report.executed / max(1e-6, time.monotonic() - self.started)
        live_gap = round(self.sentinel.max_gap_s * 1000) if self.sentinel else 0
        return (f"{rate:.0f}/s, gap {max(self.max_gap_ms, live_gap)} ms, rss {self.max_rss >> 20} MB, "
                f"close-wait {self.close_wait_max}, breaks {self.breaks}")

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
        data["crashers"].append(regression_entry(finding, case, self.target))
        path.write_text(yaml.safe_dump(data, sort_keys=False, width=120))
        return path


def regression_entry(finding: Finding, case: Case, target: FuzzTarget) -> dict:
    return {"id": case.name, "finding": finding.signature, "family": case.family,
            "found": f"{target.label} ({target.topology}), interop fuzz --frames seed "
                     f"{finding.evidence.get('seed')} case {case.index}: {finding.message}",
            "input_hex": case.hex, "hold_s": sum(v for k, v in case.steps if k == "pause")}


def peer_pids(peer) -> list[int]:
    """A peer's process ids: ProcessPeer has `pids` as a property, RabbitMQPeer as a method (and
    FuzzTarget.pids() only calls a method), so both are read here."""
    pids = getattr(peer, "pids", None)
    pids = pids() if callable(pids) else pids
    return [p for p in (pids or []) if p]


def _log_tail(target: FuzzTarget, lines: int = 8) -> list[str]:
    logs = getattr(target.peer, "logs", None)
    try:
        return (logs() if callable(logs) else "").splitlines()[-lines:]
    except Exception:  # a provider without logs
        return []


def _kind(kind: str) -> str:
    return "hang" if kind == "unserved" else kind
