"""Synthetic result records (schema 1) for the report's tests and benchmark: many runs, known answers.

`write_runs(folder, runs=100, cases=10_000)` writes `folder/<run_id>/results.jsonl` and `run.json` for `runs`
runs of `cases` records each, spread over a few targets and suites, with seeded randomness: some cases always
fail on one vendor, a few flip between runs (flaky), durations are log-normal, some records carry a fault and
checker counts. Every `fuzz_every`-th run (the sixth, sixteenth, ...) also holds the records of a fuzz session
(`interop fuzz`: a session record and one per finding), so that the job's fuzz tables run too. Writing is plain
Python and fast enough for a million rows (a few seconds).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

TARGETS = (
    ({"router": {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}}, 0.97),
    ({"router": {"vendor": "qdrouterd", "version": "1.19.0", "provider": "native"}}, 0.93),
    ({"router": {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"},
      "broker": {"vendor": "rabbitmq", "version": "3.12.1", "provider": "native"}}, 0.88),
    ({"router": {"vendor": "qdrouterd", "version": "1.19.0", "provider": "native"},
      "broker": {"vendor": "artemis", "version": "2.31.2", "provider": "container"}}, 0.9),
)
SUITES = ("routing", "broker", "faults", "mesh", "linkroute")
FUZZ_SIGNATURES = (("crash:sasl-init.mechanism-null", "crash"), ("stall:flow.link-credit-max", "stall"),
                   ("lost:balanced", "lost"))


def run_id_for(i: int, start: datetime) -> str:
    return (start + timedelta(hours=i)).strftime("%Y-%m-%dT%H-%M-%SZ") + f"-{i:04x}"


def write_runs(folder: str | Path, runs: int = 100, cases: int = 10_000, seed: int = 7,
               start: datetime = datetime(2026, 1, 1, tzinfo=UTC), fuzz_every: int = 10) -> list[str]:
    """Write `runs` run folders of `cases` records each (and a fuzz session in every `fuzz_every`-th, none when
    0); returns their run ids (oldest first)."""
    rng = random.Random(seed)
    folder = Path(folder)
    per_target = max(1, cases // len(TARGETS))
    case_ids = [f"suites/{SUITES[k % len(SUITES)]}/test_{k % 37}.py::test_case_{k}" for k in range(per_target)]
    specs = [[f"{SUITES[k % len(SUITES)].upper()}-CLAUSE-{k % 60}"] for k in range(per_target)]
    always_bad = {k for k in range(per_target) if rng.random() < 0.02}
    flaky = {k for k in range(per_target) if rng.random() < 0.01}
    ids = []
    for i in range(runs):
        run_id = run_id_for(i, start)
        ids.append(run_id)
        t0 = start + timedelta(hours=i)
        lines = []
        written = 0
        for t, (peers, pass_p) in enumerate(TARGETS):
            cell = "-".join(f"{r}-{p['vendor']}" for r, p in peers.items())
            # as `interop run` tags records: the cell's choice of vendor per role (routing-only cases list only
            # the router in `peers`, the cell still says which broker was chosen)
            cell_peers = ",".join(f"{r}={p['vendor']}" for r, p in peers.items())
            for k in range(per_target):
                if written >= cases:
                    break
                written += 1
                roll = rng.random()
                if k in always_bad and t == 1:
                    outcome = "failed"
                elif k in flaky:
                    outcome = "failed" if rng.random() < 0.3 else "passed"
                elif roll < pass_p:
                    outcome = "passed"
                elif roll < pass_p + (1 - pass_p) / 2:
                    outcome = "not-applicable"
                else:
                    outcome = rng.choice(("failed", "error", "skipped", "xfail"))
                details = {"cell": cell, "cell_peers": cell_peers, "sent": 20}
                fault = None
                if k % 50 == 0:
                    fault = {"name": "latency", "link": "R1->B1", "latency_ms": 100}
                    details["checks"] = {"total-queue": {"ok": outcome == "passed", "attempted": 100,
                                                          "delivered": 100 if outcome == "passed" else 97,
                                                          "lost": 0 if outcome == "passed" else 3, "duplicated": 0}}
                record = {"schema": 1, "run_id": run_id, "case": case_ids[k], "suite": SUITES[k % len(SUITES)],
                          "spec": specs[k], "topology": "single-router", "peers": peers, "fault": fault,
                          "outcome": outcome, "duration_s": round(rng.lognormvariate(-1.5, 0.8), 4),
                          "started_at": (t0 + timedelta(milliseconds=k * 10 + t)).isoformat(
                              timespec="milliseconds").replace("+00:00", "Z"),
                          "details": details, "message": None if outcome == "passed" else "AssertionError: x",
                          "host": "bench"}
                lines.append(json.dumps(record, separators=(",", ":")))
        if fuzz_every and i % fuzz_every == fuzz_every // 2:
            lines.extend(json.dumps(r, separators=(",", ":")) for r in _fuzz_session(run_id, t0, rng))
        run_dir = folder / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
        (run_dir / "run.json").write_text(json.dumps({"schema": 1, "run_id": run_id,
                                                      "started_at": t0.isoformat().replace("+00:00", "Z")}))
    return ids


def _fuzz_session(run_id: str, t0: datetime, rng: random.Random) -> list[dict]:
    """The records of one frames session against the reference router, as harness/fuzz/session.py writes them."""
    found = [f for f in FUZZ_SIGNATURES if rng.random() < 0.5]
    common = {"schema": 1, "run_id": run_id, "suite": "fuzz", "spec": [], "topology": "single-router",
              "peers": TARGETS[0][0], "fault": None, "host": "bench",
              "started_at": t0.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
    seed = rng.randrange(1 << 31)
    session = {**common, "case": "FUZZ-FRAMES", "outcome": "failed" if found else "passed", "duration_s": 300.0,
               "details": {"mode": "frames", "seed": seed, "budget_s": 300.0, "executed": rng.randrange(5000, 9000),
                           "failures": len(found), "signatures": [sig for sig, _ in found],
                           "figures": {"max_sentinel_gap_ms": 80, "max_rss_mb": 30.5}},
               "message": f"{len(found)} distinct failure(s)" if found else None}
    return [session] + [{**common, "case": f"FUZZ-FRAMES/{sig}", "outcome": "failed", "duration_s": 0.0,
                         "details": {"mode": "frames", "seed": seed, "kind": kind, "signature": sig,
                                     "reproducer": f"results/{run_id}/fuzz/test_{kind}.py", "evidence": {}},
                         "message": f"{sig}: seed {seed}"} for sig, kind in found]
