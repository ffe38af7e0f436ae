"""`interop fuzz --configs`: the configuration differential. The reference reads a configuration exactly when
the real product does.

    interop fuzz --configs --peer router=qdrouterd [--budget 5m] [--seed N]
    interop fuzz --configs --peer broker=artemis

Hypothesis generates configuration files - qdrouterd.conf (harness/fuzz/config_router_gen.py) or Artemis
broker.xml (config_broker_gen.py), valid ones, near misses and hostile ones - and each file is given to the
reference and to the real product, each started on it and judged accepted or refused (harness/fuzz/
config_judges.py, artemis_check.py). Two verdicts that differ are a disagreement. One recorded in
harness/fuzz/config_known.py (deliberate, with the evidence both sides must show) is counted by its id; any other
is a finding, shrunk by Hypothesis to a small file, written to `<run>/fuzz/configs/<signature>.<ext>` and printed.
Findings of the reference alone, whatever the product says: a refusal that ends in a Python traceback
(`reference-traceback`), and a refusal whose message does not start with `FILE:LINE:` (`reference-message`).
A disagreement against Artemis is confirmed by starting the real broker (`artemis run`) on the shrunk file.

Batches of Hypothesis examples run until the budget is spent, each seeded from the session's seed and its
number, so that a seed gives the same files. The session's figures: cases run, cases/s per side, agreements
(both accept, both refuse), recorded differences by id, undecided (a judge that failed).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky
from hypothesis.internal.conjecture import engine as _engine

from . import config_known
from .config_breaks import rewrite_for
from .config_judges import Verdict
from .session import Finding, Progress, SessionReport

PRODUCTS = {"router": "qdrouterd", "broker": "artemis"}
FILE_NAMES = {"router": "qdrouterd.conf", "broker": "broker.xml"}
BATCH = 25  # examples per Hypothesis run; a failure is shrunk within its batch
SHRINK_S = 60  # at most this long shrinking one batch's failures (bounded further by the budget left)
# Artemis's properties login module files, written beside every broker.xml: the reference reads them when
# security is on, and a missing one would be a difference of the session's making, not of the file's.
LOGIN_FILES = {"artemis-users.properties": "admin = admin\n", "artemis-roles.properties": "amq = admin\n"}


class Disagreement(Exception):
    """Raised inside a Hypothesis example: a finding with `signature`. A class per signature (see _error_class),
    so that Hypothesis shrinks each distinct failure on its own."""

    signature = ""


_CLASSES: dict[str, type] = {}


def _error_class(signature: str) -> type:
    if signature not in _CLASSES:
        _CLASSES[signature] = type(f"Disagreement_{len(_CLASSES)}", (Disagreement,), {"signature": signature})
    return _CLASSES[signature]


@dataclass
class CaseResult:
    text: str  # the file as generated (before any break's rewrite)
    reference: Verdict
    product: Verdict
    known: str | None = None  # id of the recorded difference it matched
    finding: tuple[str, str, str] | None = None  # (signature, kind, message)


@dataclass
class ConfigSession:
    """The state of one session: judges, counters, the last case of each finding (what Hypothesis shrank to)."""

    role: str
    reference: object  # a judge: judge(path) -> Verdict
    product: object
    work: Path
    breaks: list = field(default_factory=list)
    cases: int = 0
    counts: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)
    known_examples: dict = field(default_factory=dict)
    seconds: Counter = field(default_factory=Counter)
    failing: dict = field(default_factory=dict)  # signature -> CaseResult (latest)
    first_seen: dict = field(default_factory=dict)  # signature -> seconds into the session
    started: float = field(default_factory=time.monotonic)

    @property
    def product_name(self) -> str:
        return PRODUCTS[self.role]

    def run_case(self, text: str) -> CaseResult:
        case = self.work / f"case-{self.cases}"
        self.cases += 1
        verdicts = {}
        for side, judge, vendor in (("reference", self.reference, "reference"),
                                    ("product", self.product, self.product_name)):
            folder = case / side
            folder.mkdir(parents=True)
            path = folder / FILE_NAMES[self.role]
            path.write_bytes(rewrite_for(text, self.role, vendor, self.breaks).encode("utf-8", "surrogatepass"))
            if self.role == "broker":
                for name, content in LOGIN_FILES.items():
                    (folder / name).write_text(content)
            verdicts[side] = judge.judge(path)
            self.seconds[side] += verdicts[side].elapsed_s
        shutil.rmtree(case, ignore_errors=True)
        result = CaseResult(text, verdicts["reference"], verdicts["product"])
        self._classify(result)
        return result

    def _classify(self, result: CaseResult) -> None:
        ref, prod = result.reference, result.product
        own = _reference_own_finding(ref)
        if own is not None:
            result.finding = own
        elif "undecided" in (ref.decision, prod.decision):
            self.counts["undecided"] += 1
            return
        elif ref.decision == prod.decision:
            self.counts[f"both-{'accept' if ref.accepted else 'refuse'}"] += 1
            return
        else:
            known = config_known.match(self.role, self.product_name, ref, prod)
            if known is not None:
                result.known = known.id
                self.known[known.id] += 1
                self.known_examples.setdefault(known.id, result.text)
                return
            result.finding = _disagreement(self.role, self.product_name, ref, prod)
        self.counts["findings"] += 1
        signature = result.finding[0]
        self.failing[signature] = result
        self.first_seen.setdefault(signature, round(time.monotonic() - self.started, 1))


def _reference_own_finding(ref: Verdict) -> tuple[str, str, str] | None:
    """A refusal by the reference that breaks its own rules, whatever the product says."""
    if ref.decision != "refuse":
        return None
    if "Traceback (most recent call last)" in ref.output:
        last = ref.reason
        return (f"reference-traceback:{_slug(last.split(':')[0])}", "crash",
                f"the reference ended in a traceback instead of a one-line error: {last}")
    if not re.match(r"\S.*:\d+: \S", ref.reason):
        return (f"reference-message:{_slug(ref.reason)}", "message",
                f"the reference's refusal does not start with FILE:LINE: {ref.reason!r}")
    return None


def _disagreement(role: str, product: str, ref: Verdict, prod: Verdict) -> tuple[str, str, str]:
    if ref.accepted:
        return (f"{role}:reference-accepts:{_slug(_product_reason(prod.reason))}", "divergence",
                f"the reference accepts a file {product} refuses ({prod.reason})")
    return (f"{role}:reference-refuses:{_slug(_reference_reason(ref.reason))}", "divergence",
            f"the reference refuses a file {product} accepts ({ref.reason})")


def _reference_reason(reason: str) -> str:
    """The reference's refusal without FILE:LINE: and without the values it quotes."""
    return re.sub(r"^\S*:\d+: ", "", reason)


def _product_reason(reason: str) -> str:
    """The product's reason without file names; for a Java exception chain, its deepest cause."""
    reason = reason.rsplit(" <- ", 1)[-1]
    reason = re.sub(r"^(Python: )?Exception: ", "", reason)
    reason = re.sub(r"Cannot load configuration file \S+: ", "", reason)
    return reason.replace("org.apache.qpid.dispatch.", "")


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\[[^]]*\]|\([^)]*\)|\{[^}]*\}")


def _slug(text: str, words: int = 6) -> str:
    """A stable short name for a message: its first words, without the value it quotes after `got`, paths,
    numbers, brackets and quoted text that is no name (a quoted attribute name, `'port'`, stays)."""
    text = re.sub(r"\bgot .*$", "", text)
    text = re.sub(r"'([A-Za-z][\w-]{0,30})'", r"\1", text)
    text = _QUOTED.sub(" ", text)
    text = re.sub(r"/\S+|\d+", " ", text)
    parts = [p for p in re.split(r"[^a-z0-9.]+", text.lower()) if p.strip(".")][:words]
    return "-".join(p.strip(".") for p in parts) or "empty"


def run_session(role: str, reference, product, *, seed: int, budget_s: float, progress: Progress | None = None,
                out_dir: Path | None = None, breaks: list | None = None) -> SessionReport:
    """Generate files until `budget_s` is spent; shrink, write and report each distinct disagreement."""
    from .config_broker_gen import broker_docs
    from .config_router_gen import router_docs

    strategy = router_docs() if role == "router" else broker_docs()
    started = time.monotonic()
    deadline = started + budget_s
    report = SessionReport(mode="configs", seed=seed, budget_s=budget_s)
    work = Path(tempfile.mkdtemp(prefix=f"interop-fuzz-configs-{role}-"))
    session = ConfigSession(role, reference, product, work, list(breaks or []))
    flaky: dict[str, str] = {}
    confirmed: dict[str, Verdict] = {}
    batch = 0
    per_case = 0.2
    try:
        while time.monotonic() < deadline - 0.5:
            left = deadline - time.monotonic()
            examples = max(1, min(BATCH, int(left / per_case)))
            batch_started, before = time.monotonic(), session.cases
            batch_seed = (seed * 1_000_003 + batch) % (2**32)
            batch += 1
            session.failing.clear()
            _engine.MAX_SHRINKING_SECONDS = int(max(5.0, min(SHRINK_S, left)))

            @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                      verbosity=Verbosity.quiet, print_blob=False, report_multiple_bugs=True,
                      phases=[Phase.generate, Phase.shrink])
            @hypothesis_seed(batch_seed)
            @given(doc=strategy)
            def differential(doc):
                result = session.run_case(doc.render())
                if progress is not None:
                    progress.update(session.cases, len(report.findings))
                if result.finding is not None:
                    raise _error_class(result.finding[0])(result.finding[2])

            try:
                differential()
            except Exception as exc:  # noqa: BLE001 - Hypothesis ends a failing run with what it found
                found = _disagreements(exc)
                if not found:
                    raise
                for error in found:
                    signature = error.signature
                    result = session.failing.get(signature)
                    if isinstance(exc, Flaky) or result is None:
                        flaky.setdefault(signature, str(error)[:300])
                        continue
                    if any(f.signature == signature for f in report.findings):
                        continue  # met again in a later batch: the first one's file stays the reproducer
                    finding = _finding(result, role, session, out_dir)
                    if role == "broker" and hasattr(product, "confirm") and signature not in confirmed:
                        confirmed[signature] = _confirm(product, result, work, session.breaks)
                    if signature in confirmed:
                        finding.evidence["artemis_run"] = confirmed[signature].decision + ": " + \
                            confirmed[signature].reason
                        if confirmed[signature].decision != result.product.decision:
                            finding.kind = "checker"
                            finding.message += (f"; but `artemis run` {confirmed[signature].decision}s the file "
                                                "(the checker disagrees with the real broker)")
                    report.add(finding)
            finally:
                _engine.MAX_SHRINKING_SECONDS = 300
            if session.cases > before:
                per_case = max(0.01, (time.monotonic() - batch_started) / (session.cases - before))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.executed = session.cases
    report.duration_s = time.monotonic() - started
    report.figures = {
        "cases_per_s": round(session.cases / max(report.duration_s, 1e-9), 1),
        # each side's pace on its own: cases over the seconds its judge took (what a session of it alone could do)
        "reference_cases_per_s": _pace(session.cases, session.seconds["reference"]),
        "product_cases_per_s": _pace(session.cases, session.seconds["product"]),
        "product": PRODUCTS[role], "batches": batch, **dict(sorted(session.counts.items())),
        "known": dict(sorted(session.known.items())), "flaky": flaky,
        "breaks": [str(b) for b in session.breaks],
    }
    if progress is not None:
        progress.done(session.cases, len(report.findings))
    return report


def _pace(cases: int, seconds: float) -> float | None:
    return round(cases / seconds, 1) if seconds > 0 else None


def _disagreements(exc: BaseException | None, seen: set[int] | None = None) -> list[Disagreement]:
    seen = set() if seen is None else seen
    if exc is None or id(exc) in seen:
        return []
    seen.add(id(exc))
    if isinstance(exc, Disagreement):
        return [exc]
    found = [d for e in getattr(exc, "exceptions", ()) for d in _disagreements(e, seen)]
    return found or _disagreements(exc.__cause__ or exc.__context__, seen)


def _finding(result: CaseResult, role: str, session: ConfigSession, out_dir: Path | None) -> Finding:
    signature, kind, message = result.finding
    path = None
    if out_dir is not None:
        folder = Path(out_dir) / "configs"
        folder.mkdir(parents=True, exist_ok=True)
        suffix = ".conf" if role == "router" else ".xml"
        path = folder / (re.sub(r"[^a-z0-9._-]+", "-", signature.lower()).strip("-") + suffix)
        path.write_bytes(result.text.encode("utf-8", "surrogatepass"))
    evidence = {"file_text": result.text, "reference": f"{result.reference.decision}: {result.reference.reason}",
                PRODUCTS[role]: f"{result.product.decision}: {result.product.reason}",
                "first_seen_after_s": session.first_seen.get(signature)}
    return Finding(signature=signature, kind=kind, message=message, reproducer=str(path) if path else None,
                   evidence=evidence)


def _confirm(product, result: CaseResult, work: Path, breaks: list) -> Verdict:
    """Artemis's own verdict on the shrunk file, from `artemis run`."""
    folder = work / "confirm"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "broker.xml"
    path.write_bytes(rewrite_for(result.text, "broker", "artemis", breaks).encode("utf-8", "surrogatepass"))
    try:
        return product.confirm(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
