"""The CPU verdict (issue 57): a server that keeps spending CPU after a connection has closed is a finding.

A hang is seen only once a server has no thread left to answer with. A server that burns a core on a connection
the client closed long ago still answers (until enough such connections pin every I/O thread: about 30 for
Artemis 2.40.0), so the frames fuzzer (harness/fuzz/frames.py) and the robustness suite
(suites/robustness/test_crashers.py) also measure, once a case's connection has closed, the server process's CPU
time (utime + stime of /proc/PID/stat, every thread) over a quiet window, and flag it over a threshold.

A window is over the limit when the process used more than CPU_AFTER_CLOSE_CORES of a core over it, or when one
of its threads was on a CPU or waiting for one (schedstat: run time + run-queue delay) more than BUSY_THREAD_SHARE
of it. The second reading is there for loaded machines: a spinning thread is always running or runnable, so its
share stays near 1 while the CPU time it gets shrinks with the load. Measured on this machine (2 cores, shared with
other sessions), 1 s windows after an ordinary case (the valid session of harness/fuzz/hostile.py: SASL, open,
begin, two links, a transfer, detach, end, close) while the fuzzer's sentinel client sends 20 messages a second
through the same server, 8 windows per product, 2026-12-07:
    product (load)                   cores       busiest thread share
    reference broker (15)            0.00-0.02   0.02-0.39
    reference router (15)            0.00-0.01   0.02-0.16
    qdrouterd 1.19.0 (15)            0.00-0.01   0.00-0.03
    ActiveMQ Artemis 2.40.0 (15; 70) 0.03-0.07; 0.04-0.08   0.08-0.27; 0.07-0.28
    ActiveMQ Classic 6.3.1 (15)      0.03-0.06   0.05-0.14
    RabbitMQ 3.10.8 (15)             0.01-0.03   0.02-0.09
and after each batch of a 60 s `interop fuzz --frames` session (seed 5) at most 0.08 cores (Classic), 0.03
(RabbitMQ), 0.02 (qdrouterd). After the 209-byte disposition of issue 57 (first=1, last=4294967295) on one
connection, Artemis 2.40.0 in the 6-8 windows that followed: at load 15, 0.29-0.67 cores, busiest thread
0.70-0.98; at load 40-70, 0.06-0.13 cores (the CPU time alone would miss it), busiest thread 0.77-0.97. 0.2 cores
is 2.5 times the busiest idle product; 0.6 of a thread is above every idle window and below every spinning one.

A single window over the threshold is not yet a verdict: a JVM's garbage collection or a periodic scan can take
a burst of a few hundred milliseconds with nobody connected, and a server that logs a crash report for a refused
input works on it for a second or two after close on a loaded machine (RabbitMQ 3.10.8 in CI on 2026-12-07, load
about 25: 0.28 then 0.14 cores over the two seconds after a sasl-outcome sent by the client, one scheduler thread
runnable all along; sessions before saw the same after three other refused inputs). A spin lasts minutes (Artemis:
about 90% of a core 95 s after close). So the verdict is "over the limit in the first window after close, and
still over it in each of the next windows, PERSIST_GAP_S apart": "keeps spending", not "spent once". Work that ends
stretches with the load, so the windows must span longer than such work takes on a loaded machine: in the
fresh-clone make test of 2026-12-07 11:14 (load 20-28), RabbitMQ 3.10.8 after a trickled, dropped sasl-init read
0.19 cores in the first second and 0.20 cores four seconds later (about 1 CPU-s of work in all; at load 18 it read
0.93 cores, then 0.00), so two windows were not enough and the verdict takes three, over 9 s. The gaps cost time
only after windows over the limit.

Three windows over 9 s were still not enough in CI on 2026-12-07 (the run of 20:04, six product cells side by side):
RabbitMQ 3.10.8 after `doff.large@sasl-header` read 0.22, 0.27 and 0.06 cores in the three windows, one scheduler
thread runnable 81-100% of each, about 1.1 CPU-s in all counting the gaps. On a loaded machine the time work takes
stretches without bound, but the CPU it is given does not: after-work of a refused input was 0.3-2.1 CPU-s in every
reading (the most: RabbitMQ 3.10.8 after `nesting.list@sasl-init.response-3000`, 2.11 CPU-s, 0.97 cores at its
peak, at load 1 on 2026-12-07), while a spin is given CPU for as long as it is watched. So the verdict also counts
the CPU the process was given since close (`given_cpu_s`): three windows over the limit and at least SPIN_CPU_S
given is a spin; three windows over and less given, it watches on (a window every PERSIST_GAP_S) until a window
comes under the limit (work that ended), the CPU given reaches SPIN_CPU_S, or WATCH_LIMIT_S has passed with every
window over (a thread that wanted a core for that long is a spin however little it got). A spin pays for the longer
watch: a spinning Artemis is given 5 CPU-s in about 5 s at load 2 and 5-20 s at load 8-20 (0.25-0.95 cores), where
three windows took 9 s.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .procstat import CpuSample, CpuWindow

# 1 s: long enough that a spinning thread's share reads 0.7-1.0 and an idle server's wake-ups (the sentinel's 20
# messages a second) stay below 0.4 even at load 70, with utime/stime's 10 ms clock tick 1% of it; short enough to
# cost the fuzzer one second per batch of cases and the robustness suite one second per case. A longer window would
# add no evidence against a spin that lasts minutes.
QUIET_WINDOW_S = 1.0
CPU_AFTER_CLOSE_CORES = 0.2  # see the module docstring for the measurements behind it
BUSY_THREAD_SHARE = 0.6  # ... or one thread running or runnable this much of the window (see the docstring)
# ... while the process got at least this much CPU in the window: a thread runnable all the time on a machine at load
# 25 that got 0.02 cores was waiting for a CPU, not spinning (RabbitMQ in the fresh-clone make test of 2026-12-07);
# spinning Artemis got 0.06-0.13 cores at load 40-70
BUSY_THREAD_MIN_CORES = 0.05
CONFIRM_WINDOWS = 3  # windows over the threshold, PERSIST_GAP_S apart: a burst (GC, a crash report) is not a spin
# With three windows, long enough for the transient work measured after refused inputs to end at load 25 (RabbitMQ:
# 0.3-1 CPU-s at 0.13-0.33 cores, so 1-5 s), short next to a spin's minutes; and every second of it is a second of a
# core a spinning product burns while it is judged (Artemis: seven such inputs in the robustness suite).
PERSIST_GAP_S = 3.0
# CPU-s given to the process since close, above which windows over the limit are a spin: more than twice the most
# after-work measured after a refused input (RabbitMQ, 2.11 CPU-s); a spinning Artemis or Classic 6.1 is given it in
# 5-20 s at load 2-20 (see the docstring and docs/fuzzing.md)
SPIN_CPU_S = 5.0
# ... or this long watched with every window over the limit, when the machine gives the process too little CPU to
# reach SPIN_CPU_S: that 2.11 CPU-s at the 0.06 cores CI's RabbitMQ got at load 25 would take 35 s
WATCH_LIMIT_S = 60.0


@dataclass
class CpuVerdict:
    windows: list[CpuWindow] = field(default_factory=list)
    limit: float = CPU_AFTER_CLOSE_CORES
    given_cpu_s: float = 0.0  # CPU-s the process was given from the first window's start to the last one's end
    watched_s: float = 0.0  # ... and the time that took
    gap_s: float = PERSIST_GAP_S  # between one window's end and the next one's start

    def over(self, window: CpuWindow) -> bool:
        return window.cores > self.limit or (window.busiest_thread_share > BUSY_THREAD_SHARE
                                             and window.cores >= BUSY_THREAD_MIN_CORES)

    @property
    def kept_over(self) -> bool:
        """Every window so far over the limit, and enough of them to not be a burst."""
        return len(self.windows) >= CONFIRM_WINDOWS and all(map(self.over, self.windows))

    @property
    def spinning(self) -> bool:
        """Over the limit all along, and given more CPU (or watched longer) than work that ends takes: kept over
        with less given is work a loaded machine stretches, or a spin not yet told apart from it."""
        return self.kept_over and (self.given_cpu_s >= SPIN_CPU_S or self.watched_s >= WATCH_LIMIT_S)

    @property
    def cpu_s(self) -> float:
        return sum(w.cpu_s for w in self.windows)

    @property
    def span_s(self) -> float:
        return sum(w.span_s for w in self.windows)

    @property
    def cores(self) -> float:
        return self.cpu_s / self.span_s if self.windows else 0.0

    def describe(self) -> str:
        if not self.windows:
            return "no local process to measure"
        busiest = max(w.busiest_thread_share for w in self.windows)
        return (f"{self.cpu_s:.2f} CPU-s in {len(self.windows)} windows of {self.span_s:.1f} s after close "
                f"({self.cores:.2f} cores), its busiest thread on or waiting for a CPU {busiest:.0%} of the time, "
                f"{self.given_cpu_s:.2f} CPU-s given over {self.watched_s:.1f} s (a spin: over {self.limit:g} cores, "
                f"or one thread {BUSY_THREAD_SHARE:.0%}, in each of {CONFIRM_WINDOWS}+ windows {self.gap_s:g} s "
                f"apart, and {SPIN_CPU_S:g} CPU-s given or {WATCH_LIMIT_S:g} s watched)")

    def evidence(self) -> dict:
        return {"cpu_s": round(self.cpu_s, 3), "window_s": round(self.span_s, 3), "cores": round(self.cores, 3),
                "limit_cores": self.limit, "limit_thread_share": BUSY_THREAD_SHARE,
                "given_cpu_s": round(self.given_cpu_s, 3), "watched_s": round(self.watched_s, 3),
                "windows": [w.as_dict() for w in self.windows]}


def measure_after_close(pids: list[int], window_s: float = QUIET_WINDOW_S, limit: float = CPU_AFTER_CLOSE_CORES,
                        gap_s: float | None = None) -> CpuVerdict:
    """Measure `pids` over quiet windows, starting now (call it once the case's connection has closed): one window,
    and more only while each is over the limit, each `gap_s` after the one before, until CONFIRM_WINDOWS of them were
    over and the process was given SPIN_CPU_S (or WATCH_LIMIT_S passed). A measurement over a span, not a wait for
    a state: what the server does while nobody talks to it is the thing measured."""
    gap_s = PERSIST_GAP_S if gap_s is None else gap_s  # read now: the triage's unit tests shorten it
    verdict = CpuVerdict(limit=limit, gap_s=gap_s)
    if not pids:
        return verdict
    pause = threading.Event()  # never set: waiting on it is the window (or the gap)
    first = before = CpuSample(pids)
    while True:
        pause.wait(window_s)
        after = CpuSample(pids)
        window = after.since(before)
        verdict.windows.append(window)
        verdict.given_cpu_s = max(0.0, after.cpu_s - first.cpu_s)
        verdict.watched_s = after.at - first.at
        if not verdict.over(window) or verdict.spinning:
            return verdict
        pause.wait(gap_s)
        before = CpuSample(pids)
