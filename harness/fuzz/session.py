"""What the fuzzing modes share: the target under fuzz, a finding, the session report and its result records,
the time budget and the progress line.

A session is one seeded, time-boxed run of one mode against one peer. It becomes result records in the run's
results.jsonl like any suite case, so the Spark report shows fuzz sessions next to the conformance matrix:
* one record per session: case `FUZZ-<MODE>`, suite `fuzz`, outcome `passed` when nothing was found, else
  `failed`; `details` carries the seed, the budget, how many programs/cases ran and the figures;
* one record per distinct finding (case `FUZZ-<MODE>/<signature>`, outcome `failed`), so a report can count
  distinct failures by signature across seeds and runs.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import asdict, dataclass, field

from ..results import make_record, utc_now_iso

SUITE = "fuzz"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_budget(text: str) -> float:
    """`90`, `90s`, `10m`, `1.5h`, `500ms` -> seconds (> 0). ValueError names what was expected."""
    match = _DURATION.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"budget {text!r}: expected a positive duration such as 90s, 10m or 1h")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass
class FuzzTarget:
    """One running peer under fuzz, as the topology started it."""

    role: str  # "router" or "broker"
    vendor: str  # "reference", "qdrouterd", "rabbitmq", "external", ...
    host: str
    port: int  # its client (role normal) listener
    peer: object  # harness.peers.base.Peer: is_running(), down_reason(), pids(), restart(), logs()
    topology: str  # the topology's name
    peer_records: dict = field(default_factory=dict)  # role -> {vendor, version, provider}, for result records
    running: object = None  # the harness.peers.launch.RunningTopology it belongs to (other nodes, link proxies)
    # A secured target (interop fuzz --frames --secured): how clients authenticate (harness.clients.ClientSecurity,
    # SASL PLAIN over plain TCP), and whether the listener also takes TLS (the TLS families then run too).
    security: object = None
    tls: bool = False

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    @property
    def label(self) -> str:
        return f"{self.role}={self.vendor}"

    def pids(self) -> list[int]:
        """Process ids of the peer when it is a local process (for RSS and socket checks), else []."""
        return [p for p in getattr(self.peer, "pids", None) or [] if p]


def target_for(running, role: str) -> FuzzTarget:
    """The fuzz target of a running topology (harness.peers.launch.RunningTopology): its first node of `role`,
    reached on its client listener."""
    name = next(n for n, node in running.topology.nodes.items() if node.role == role)
    peer = running[name]
    endpoint = peer.client_endpoint
    return FuzzTarget(role=role, vendor=peer.info.vendor, host=endpoint.host, port=endpoint.port, peer=peer,
                      topology=running.topology.name, peer_records=running.peer_records(), running=running)


@dataclass
class Finding:
    """One distinct failure. `signature` is stable across seeds and runs (no ids, ports or timings), short,
    and made of [a-z0-9._:-], e.g. `crash:sasl-init.mechanism-null` or `lost:balanced`."""

    signature: str
    kind: str  # crash | hang | stall | lost | duplicate | order | outcome | credit | divergence | close-wait | memory
    #            | cpu-after-close
    message: str  # one line: what went wrong, naming the input
    reproducer: str | None = None  # path of a runnable reproducer (pytest file), or None
    evidence: dict = field(default_factory=dict)  # e.g. {"input_hex": ..., "program": [...], "history": ...}


@dataclass
class SessionReport:
    mode: str  # "stateful", "frames" or "configs"
    seed: int
    budget_s: float
    executed: int = 0  # programs (stateful) or hostile cases (frames) run to the end
    duration_s: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    figures: dict = field(default_factory=dict)  # mode-specific measurements (max sentinel gap, max RSS, ...)
    started_at: str = field(default_factory=utc_now_iso)
    # signature -> reason of the findings recorded as the product's differences (harness/fuzz/recorded.py): still
    # reported, as `xfail`; only the others are new
    recorded: dict = field(default_factory=dict)

    @property
    def new_findings(self) -> list[Finding]:
        """The findings not recorded as the product's differences: what makes a session fail."""
        return [f for f in self.findings if f.signature not in self.recorded]

    @property
    def case(self) -> str:
        return f"FUZZ-{self.mode.upper()}"

    def add(self, finding: Finding) -> bool:
        """Keep `finding` unless one with its signature is known; returns whether it was new."""
        if any(f.signature == finding.signature for f in self.findings):
            return False
        self.findings.append(finding)
        return True

    def records(self, target: FuzzTarget, spec: list[str] | None = None) -> list[dict]:
        """The session's result records (see the module docstring)."""
        new = self.new_findings
        recorded = [f.signature for f in self.findings if f.signature in self.recorded]
        details = {"mode": self.mode, "seed": self.seed, "budget_s": self.budget_s, "executed": self.executed,
                   "failures": len(self.findings), "signatures": [f.signature for f in self.findings],
                   "recorded": recorded, "figures": self.figures}
        # a session that met only recorded findings is an expected difference, like a suite case that meets one
        outcome = "failed" if new else "xfail" if self.findings else "passed"
        message = None if not self.findings else (
            f"{len(self.findings)} distinct failure(s) in {self.executed} {self._unit}"
            + (f", {len(recorded)} of them recorded differences" if recorded else "") + ": "
            + "; ".join(f.signature for f in (new or self.findings)[:5]))
        common = {"suite": SUITE, "spec": list(spec or []), "topology": target.topology,
                  "peers": target.peer_records, "started_at": self.started_at}
        records = [make_record(case=self.case, outcome=outcome, duration_s=round(self.duration_s, 3),
                               details=details, message=message, **common)]
        for finding in self.findings:
            reason = self.recorded.get(finding.signature)
            records.append(make_record(
                case=f"{self.case}/{finding.signature}", outcome="xfail" if reason else "failed", duration_s=0.0,
                details={"mode": self.mode, "seed": self.seed, "kind": finding.kind,
                         "signature": finding.signature, "reproducer": finding.reproducer,
                         "evidence": finding.evidence, **({"recorded": reason} if reason else {})},
                message=finding.message + (f" (recorded difference: {reason})" if reason else ""), **common))
        return records

    @property
    def _unit(self) -> str:
        return "programs" if self.mode == "stateful" else "cases"

    def as_dict(self) -> dict:
        return asdict(self)


class Progress:
    """One progress line on stderr, rewritten in place on a terminal and printed every `every_s` otherwise:
    `fuzz frames router=reference seed 7: 1234 cases, 0 failures, 02:13 / 05:00`."""

    def __init__(self, label: str, budget_s: float, unit: str, every_s: float = 10.0, stream=None):
        self.label, self.budget_s, self.unit, self.every_s = label, budget_s, unit, every_s
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        # None until the first line: a start of 0.0 hid it on a machine up for less than `every_s` (the
        # monotonic clock counts from boot), as on a fresh CI machine.
        self._last: float | None = None
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def update(self, executed: int, failures: int, note: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not force and self._last is not None and now - self._last < (0.2 if self._tty else self.every_s):
            return
        self._last = now
        line = (f"fuzz {self.label}: {executed} {self.unit}, {failures} failure(s), "
                f"{_clock(self.elapsed())} / {_clock(self.budget_s)}" + (f"  {note}" if note else ""))
        if self._tty:
            self.stream.write("\r\x1b[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self, executed: int, failures: int, note: str = "") -> None:
        self.update(executed, failures, note, force=True)
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"
