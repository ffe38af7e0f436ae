"""The report's Spark job on small generated runs with known answers, and its HTML page in headless Chromium.

One SparkSession for the module (starting one takes seconds); the job runs once over the known-answer runs and
the tests read its tables and its page.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from harness import record_schema  # noqa: E402
from reports import cli as report_cli  # noqa: E402
from reports import page as html  # noqa: E402
from reports.job import ReportError, run_job  # noqa: E402
from reports.synthetic import write_runs  # noqa: E402

# A Spark session and job take well under a minute alone, but several minutes when other JVMs share the two
# cores (seen in CI-like runs next to other Spark work): a generous limit still catches a hung job.
pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parent.parent
A = {"router": {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}}
B = {"router": {"vendor": "qdrouterd", "version": "1.19.0", "provider": "native"}}
A_NAME, B_NAME = "router=reference", "router=qdrouterd"
CATALOG = ["S-1", "S-2", "S-3", "S-4", "S-9"]


def record(run: int, case: str, outcome: str, peers: dict, spec: list[str], duration: float = 0.5,
           **extra) -> dict:
    return {"schema": 1, "run_id": f"run-{run}", "case": f"suites/demo/test_x.py::{case}", "suite": "demo",
            "spec": spec, "topology": "single-router", "peers": peers, "fault": extra.pop("fault", None),
            "outcome": outcome, "duration_s": duration, "started_at": f"2026-01-0{run}T00:00:0{len(case) % 9}.000Z",
            "details": extra.pop("details", {}), "message": None if outcome == "passed" else "boom", **extra}


KNOWN_RUNS = {
    1: [record(1, "c1", "passed", A, ["S-1"]), record(1, "c2", "passed", A, ["S-2"]),
        record(1, "c3", "not-applicable", A, ["S-3"]), record(1, "c4", "xfail", A, ["S-4"]),
        record(1, "c1", "passed", B, ["S-1"]), record(1, "c2", "failed", B, ["S-2"])],
    2: [record(2, "c1", "passed", A, ["S-1"]), record(2, "c2", "failed", A, ["S-2"]),
        record(2, "c1", "passed", B, ["S-1"]), record(2, "c2", "passed", B, ["S-2"])],
    3: [record(3, "c1", "failed", A, ["S-1"], details={"config_fault": "router:no-priority"}),
        record(3, "c2", "passed", A, ["S-2"]),
        # errored before its peers started: no version of its own, it ran against the run's 0.1.0
        record(3, "c5", "error", {"router": {"vendor": "reference"}}, ["S-1"],
               fault={"name": "latency", "latency_ms": 50},
               details={"checks": {"total-queue": {"ok": False, "attempted": 10, "delivered": 9, "lost": 1}}}),
        # tagged by interop run with its cell's choices: compared as that cell, whatever nodes the case used
        record(3, "c6", "passed", {"broker": {"vendor": "rabbitmq", "version": "3.10"}}, ["S-9"],
               details={"cell": "c", "cell_peers": "router=reference,broker=rabbitmq"})],
}
DAMAGED = [
    '{"schema": 1, "run_id": "run-3", "case": "torn',                       # a run killed mid-write
    "this is not json",
    json.dumps(record(3, "c9", "exploded", A, [])),                          # unknown outcome
    json.dumps({k: v for k, v in record(3, "c9", "passed", A, []).items() if k != "suite"}),
    json.dumps({**record(3, "c9", "passed", A, []), "duration_s": "slow"}),  # wrong type
]


FRAMES_TARGET, STATEFUL_TARGET = A_NAME, "broker=reference + router=reference"
CRASH, HANG = "crash:sasl-init.mechanism-null", "hang:open.max-frame-size-0"


def fuzz_session(run_id: str, mode: str, peers: dict, seed: int, executed: int, duration: float,
                 findings: list[tuple[str, str]]) -> list[dict]:
    """The records `interop fuzz` writes for one session (harness/fuzz/session.py): the session, then one per
    distinct finding (signature, kind)."""
    case, started = f"FUZZ-{mode.upper()}", f"{run_id.replace('fuzz-', '2026-01-0')}T12:00:00.000Z"
    common = {"schema": 1, "run_id": run_id, "suite": "fuzz", "spec": [], "topology": "fuzz-router",
              "peers": peers, "fault": None, "started_at": started}
    session = {**common, "case": case, "outcome": "failed" if findings else "passed", "duration_s": duration,
               "details": {"mode": mode, "seed": seed, "budget_s": 300.0, "executed": executed,
                           "failures": len(findings), "signatures": [sig for sig, _ in findings],
                           "figures": {"max_sentinel_gap_s": 0.2, "max_rss_mb": 80}},
               "message": f"{len(findings)} distinct failure(s)" if findings else None}
    return [session] + [
        {**common, "case": f"{case}/{sig}", "outcome": "failed", "duration_s": 0.0,
         "details": {"mode": mode, "seed": seed, "kind": kind, "signature": sig,
                     "reproducer": f"results/{run_id}/fuzz/test_{kind}.py", "evidence": {"input_hex": "00"}},
         "message": f"{sig} in {run_id}"} for sig, kind in findings]


# Two runs of `interop fuzz` between the conformance runs: frames sessions against the reference router that found
# two distinct failures, one of them in both runs, and a stateful session over router and broker that found nothing.
# They are runs of their own (as `interop fuzz` makes them), so counting them as cases would put them between a
# target's conformance runs and change its pass rate, trend, durations and regressions.
FUZZ_RUNS = {
    "fuzz-1": fuzz_session("fuzz-1", "frames", A, 7, 1000, 60.0, [(CRASH, "crash"), (HANG, "hang")]),
    "fuzz-2": fuzz_session("fuzz-2", "frames", A, 8, 1500, 90.0, [(CRASH, "crash")])
    + fuzz_session("fuzz-2", "stateful", {**A, "broker": {"vendor": "reference", "version": "0.1.0"}}, 9, 40, 30.0,
                   []),
}


def write_known_runs(root: Path) -> Path:
    for run, records in KNOWN_RUNS.items():
        folder = root / f"run-{run}"
        folder.mkdir(parents=True)
        lines = [json.dumps(r) for r in records] + (DAMAGED if run == 3 else [])
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        meta = {"run_id": f"run-{run}", "started_at": f"2026-01-0{run}T00:00:00Z",
                "breaks": ["router:no-priority"] if run == 3 else []}
        (folder / "run.json").write_text(json.dumps(meta) if run != 2 else "{broken json")
    for run_id, records in FUZZ_RUNS.items():
        folder = root / run_id
        folder.mkdir(parents=True)
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (folder / "run.json").write_text(json.dumps({
            "run_id": run_id, "started_at": records[0]["started_at"], "breaks": [],
            "fuzz": {"mode": "frames", "role": "router", "seed": 7, "budget_s": 300.0, "topology": "fuzz-router"}}))
    return root


def stored_records(spark, out: Path):
    """The records as the store keeps them: the lines of kind `records`."""
    return spark.read.parquet(str(out / "tables" / "lines")).where("kind = 'records'")



@pytest.fixture(scope="module")
def known(spark, tmp_path_factory):
    root = write_known_runs(tmp_path_factory.mktemp("runs"))
    out = tmp_path_factory.mktemp("report")
    result = run_job(spark, known_inputs(root), str(out), CATALOG)
    return result, out


def known_inputs(root: Path) -> list[str]:
    """The known runs given three ways: a run folder, a glob, and a results.jsonl file."""
    return [str(root / "run-1"), str(root / "run-[2]"), str(root / "run-3" / "results.jsonl"), str(root / "fuzz-*")]


def rows(result, name: str) -> list[dict]:
    return result.data[name]


# ---- the Spark job --------------------------------------------------------------------------------------------------


def test_runs_are_ordered_and_counted(known):
    result, _ = known
    runs = rows(result, "runs")
    assert [r["run_id"] for r in runs] == ["run-1", "fuzz-1", "run-2", "fuzz-2", "run-3"]
    # a run of fuzz sessions is listed in its place, with no case: its records are counted apart
    assert [(r["cases"], r["fuzz_records"]) for r in runs] == [(6, 0), (0, 3), (4, 0), (0, 3), (4, 0)]
    assert [r["pass_rate"] for r in runs if r["run_id"].startswith("fuzz")] == [None, None]
    assert runs[4]["breaks"] == ["router:no-priority"]
    assert result.data["totals"][0] == {"records": 20, "rejects": 5, "files": 5, "runs": 5}
    cell = {r["target"] for r in rows(result, "trend") if r["run_id"] == "run-3"}
    assert cell == {A_NAME, "broker=rabbitmq + router=reference"}


def test_damaged_lines_are_counted_and_set_aside(known):
    result, out = known
    reasons = {r["reason"]: r["count"] for r in rows(result, "reject_reasons")}
    assert reasons == {
        "not a JSON record (a torn or garbled line)": 2,
        "outcome: unknown value exploded": 1,
        "suite: missing, empty or not a string": 1,
        "a field has the wrong type": 1,
    }
    assert all(r["source_file"].endswith("run-3/results.jsonl") for r in rows(result, "rejects"))
    assert any(r["line"].startswith('{"schema": 1, "run_id": "run-3", "case": "torn') for r in rows(result, "rejects"))


def test_conformance_cells_use_each_clauses_latest_run(known):
    result, _ = known
    cells = {(r["target"], r["clause"]): r["status"] for r in rows(result, "conformance")}
    assert cells[(A_NAME, "S-1")] == "failed"          # run 3: c1 failed and c5 errored
    assert cells[(A_NAME, "S-2")] == "passed"          # run 3: c2 passed again
    assert cells[(A_NAME, "S-3")] == "not-applicable"  # only run 1 had a case for it
    assert cells[(A_NAME, "S-4")] == "xfail"
    assert cells[(A_NAME, "S-9")] == "not run"         # in the catalog, no case
    assert cells[(B_NAME, "S-1")] == "passed"
    assert cells[(B_NAME, "S-2")] == "passed"          # run 2 fixed it
    assert cells[(B_NAME, "S-9")] == "not run"
    assert cells[("broker=rabbitmq + router=reference", "S-9")] == "passed"
    assert cells[("broker=rabbitmq + router=reference", "S-1")] == "not run"


def test_flaky_cases_pass_and_fail_on_the_same_target_and_version(known):
    result, _ = known
    flaky = {(r["target"], r["version"], r["case"].split("::")[1]): r for r in rows(result, "flaky")}
    a, b = "router 0.1.0", "router 1.19.0"
    assert set(flaky) == {(A_NAME, a, "c1"), (A_NAME, a, "c2"), (B_NAME, b, "c2")}
    assert (flaky[(A_NAME, a, "c1")]["passes"], flaky[(A_NAME, a, "c1")]["fails"]) == (2, 1)
    assert flaky[(A_NAME, a, "c1")]["flips"] == 1
    assert flaky[(A_NAME, a, "c2")]["flips"] == 2
    assert flaky[(A_NAME, a, "c1")]["last_outcome"] == "failed"


def test_a_case_that_changes_only_with_the_version_is_not_flaky(spark, tmp_path):
    """Flaky is judged per version: passing on 1.0 and failing on 2.0 is a change of version, not flakiness,
    while a case that flips within 2.0 is flaky there (and only there)."""
    v1 = {"router": {"vendor": "reference", "version": "1.0", "provider": "subprocess"}}
    v2 = {"router": {"vendor": "reference", "version": "2.0", "provider": "subprocess"}}
    runs = {1: [record(1, "c7", "passed", v1, ["S-1"]), record(1, "c8", "passed", v1, ["S-1"])],
            2: [record(2, "c7", "failed", v2, ["S-1"]), record(2, "c8", "passed", v2, ["S-1"])],
            3: [record(3, "c7", "failed", v2, ["S-1"]), record(3, "c8", "failed", v2, ["S-1"])]}
    for run, records in runs.items():
        (tmp_path / "runs" / f"run-{run}").mkdir(parents=True)
        (tmp_path / "runs" / f"run-{run}" / "results.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    result = run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    flaky = {(r["version"], r["case"].split("::")[1]): (r["passes"], r["fails"]) for r in rows(result, "flaky")}
    assert flaky == {("router 2.0", "c8"): (1, 1)}


def test_regressions_compare_each_targets_latest_run_with_its_previous(known):
    result, _ = known
    found = {(r["kind"], r["target"], r["case"].split("::")[1], r["run_id"], r["prev_run_id"])
             for r in rows(result, "regressions")}
    assert found == {("regression", A_NAME, "c1", "run-3", "run-2"), ("fixed", A_NAME, "c2", "run-3", "run-2"),
                     ("fixed", B_NAME, "c2", "run-2", "run-1")}
    c1 = next(r for r in rows(result, "regressions") if r["kind"] == "regression")
    assert c1["config_fault"] == "router:no-priority"


def test_trend_and_pass_rates(known):
    result, _ = known
    trend = {(r["target"], r["run_id"]): r["pass_rate"] for r in rows(result, "trend")}
    assert trend[(A_NAME, "run-1")] == pytest.approx(2 / 3, abs=1e-4)   # 2 passed; the xfail counts, n/a does not
    assert trend[(A_NAME, "run-2")] == 0.5
    assert trend[(A_NAME, "run-3")] == pytest.approx(1 / 3, abs=1e-4)
    assert trend[(B_NAME, "run-2")] == 1.0
    rates = {r["target"]: r for r in rows(result, "pass_rate")}
    assert (rates[A_NAME]["cases"], rates[A_NAME]["passed"], rates[A_NAME]["error"]) == (9, 4, 1)


def test_fuzz_sessions_per_target_and_mode(known):
    result, _ = known
    sessions = {(r["target"], r["mode"]): r for r in rows(result, "fuzz_sessions")}
    assert set(sessions) == {(FRAMES_TARGET, "frames"), (STATEFUL_TARGET, "stateful")}
    frames, stateful = sessions[(FRAMES_TARGET, "frames")], sessions[(STATEFUL_TARGET, "stateful")]
    assert (frames["sessions"], frames["executed"], frames["failed_sessions"], frames["duration_s"]) == \
        (2, 2500, 2, 150.0)
    assert (frames["distinct_signatures"], frames["signatures"], frames["seeds"]) == (2, sorted([CRASH, HANG]), [7, 8])
    assert (frames["role"], frames["runs"], frames["last_run"], frames["deliberate_break"]) == \
        ("router", 2, "fuzz-2", None)
    assert (stateful["sessions"], stateful["executed"], stateful["failed_sessions"], stateful["distinct_signatures"],
            stateful["signatures"], stateful["seeds"], stateful["duration_s"]) == (1, 40, 0, 0, [], [9], 30.0)


def test_fuzz_findings_by_signature(known):
    result, _ = known
    findings = {r["signature"]: r for r in rows(result, "fuzz_findings")}
    assert set(findings) == {CRASH, HANG}
    crash, hang = findings[CRASH], findings[HANG]
    assert (crash["kind"], crash["mode"], crash["target"], crash["role"]) == \
        ("crash", "frames", FRAMES_TARGET, "router")
    assert (crash["first_run"], crash["last_run"], crash["sessions"], crash["seeds"]) == ("fuzz-1", "fuzz-2", 2, [7, 8])
    assert (crash["message"], crash["reproducer"]) == (f"{CRASH} in fuzz-2", "results/fuzz-2/fuzz/test_crash.py")
    assert (hang["kind"], hang["first_run"], hang["last_run"], hang["sessions"]) == ("hang", "fuzz-1", "fuzz-1", 1)
    assert [r["signature"] for r in rows(result, "fuzz_findings")] == [CRASH, HANG]  # latest found first


def test_fuzz_records_stay_out_of_the_conformance_figures(known):
    """A fuzz session is not a conformance case (reports/job/records.py, FUZZ_SUITE): the other tests' figures are
    those of the three conformance runs alone, and no aggregate but the fuzz tables has a row of the fuzz runs or
    suite."""
    result, _ = known
    for name in ("conformance", "pass_rate", "trend", "flaky", "regressions", "durations", "fault_checks",
                 "recovery"):
        assert not [r for r in rows(result, name) if r.get("suite") == "fuzz"
                    or str(r.get("run_id")).startswith("fuzz") or str(r.get("prev_run_id")).startswith("fuzz")], name
    assert {r["target"] for r in rows(result, "trend")} == {A_NAME, B_NAME, "broker=rabbitmq + router=reference"}


def test_versions_durations_and_fault_checks(known, spark):
    result, out = known
    records = stored_records(spark, out)
    assert records.count() == 20
    assert json.loads(records.where("case like '%c5'").first()["peers"]) == {"router": {"vendor": "reference"}}
    versions = {(r["target"], r["run_id"]): r["version"] for r in rows(result, "trend")}
    assert versions[(A_NAME, "run-3")] == "router 0.1.0"    # c5 had none of its own
    assert versions[("broker=rabbitmq + router=reference", "run-3")] == "broker 3.10"
    durations = {r["target"]: r for r in rows(result, "durations")}
    assert durations[A_NAME]["p50_s"] == 0.5 and durations[A_NAME]["p95_s"] == 0.5
    faults = {(r["target"], r["fault_label"]): r for r in rows(result, "fault_checks")}
    assert faults[(A_NAME, "latency")]["error"] == 1
    assert faults[(A_NAME, "config: router:no-priority")]["failed"] == 1
    (checker,) = rows(result, "checkers")
    assert (checker["checker"], checker["violations"], checker["lost"], checker["delivered"]) == \
        ("total-queue", 1, 1, 9)


MIRROR_PEERS = {"broker": {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}}
RABBIT_PEERS = {"broker": {"vendor": "rabbitmq", "version": "3.10", "provider": "native"}}
MIRROR_NAME, RABBIT_NAME = "broker=reference", "broker=rabbitmq"


def fault_case(run: int, fault: str, outcome: str, resume_s: float | None, peers: dict = MIRROR_PEERS,
               suite: str = "brokerconnections", **figures) -> dict:
    """A record as suites/brokerconnections/test_mirror_faults.py writes it for one mirror link fault: the fault,
    the checkers' counts and the seconds from the link's return until the mirror caught up (left out when None:
    a case that ended before the mirror resumed)."""
    details = {"fault": fault, "lost": 0, "duplicated": 0, "recovered": 0, **figures,
               "checks": {"total_queue": {"ok": outcome == "passed", "attempted": 100, "delivered": 100}}}
    if resume_s is not None:
        details["resume_s"] = resume_s
    return record(run, f"mirror[{fault}]", outcome, peers, ["MIRROR-FAULT-1"], suite=suite, details=details)


def network_case(run: int, case: str, outcome: str, peers: dict, **details) -> dict:
    """A record as suites/network writes it: the checkers' lost and duplicated, resume_s after a fault."""
    return record(run, case, outcome, peers, ["NETWORK-1"], suite="network", details=details)


def mutation_record(run: int, group: str, killed: int, survived: int, survivors: list[str], **counts) -> dict:
    """A record as bench/mutation.py writes it for one group: a measurement of the suites, not a case."""
    details = {"mutation_group": group, "score": killed / (killed + survived), "target": 0.95, "sample": 40,
               "killed": killed, "timeout": 0, "survived": survived, "equivalent": 0, "incompetent": 0,
               "pending": 0, "run_s": 100.0 * run, "survivors": survivors, **counts}
    return {"schema": 1, "run_id": f"run-{run}", "case": f"MUTATION/{group}", "suite": "mutation", "spec": [],
            "topology": None, "peers": {"mutated": {"vendor": "reference", "provider": "subprocess"}},
            "fault": None, "outcome": "passed", "duration_s": 100.0 * run,
            "started_at": f"2026-01-0{run}T01:00:00.000Z", "details": details, "message": None}


RECOVERY_RUNS = {
    1: [fault_case(1, "reset", "passed", 0.3),
        fault_case(1, "latency", "passed", 0.014),
        fault_case(1, "outage", "failed", 2.5, lost=1),
        fault_case(1, "reset", "passed", 0.9, peers=RABBIT_PEERS),
        # any suite that records resume_s joins the table; the fault named by the record's own fault column
        record(1, "crash", "passed", MIRROR_PEERS, [], suite="durable", fault={"name": "broker-crash"},
               details={"resume_s": 1.23456, "lost": 0}),
        # no resume_s: not in the table, whatever else they carry
        record(1, "plain", "passed", MIRROR_PEERS, [], suite="brokerconnections", details={"lost": 5}),
        record(1, "slow", "failed", MIRROR_PEERS, [], suite="brokerconnections", fault="latency",
               details={"duplicated": 3}),
        # the network table (and, with resume_s, the recovery table): per case, each target's latest network run
        network_case(1, "outage", "failed", RABBIT_PEERS, lost=4, duplicated=0, resume_s=2.0, fault="outage"),
        network_case(1, "forwarding", "passed", MIRROR_PEERS, lost=0, duplicated={"B1": 1, "B2": 2}),
        # the mutation table: per group, the latest job's figures and every job's score in order
        mutation_record(1, "router", 30, 10, ["router.py:1 in f ReplaceTrueWithFalse",
                                             "router.py:2 in g NumberReplacer"]),
        mutation_record(1, "fault-proxy", 40, 0, [])],
    2: [fault_case(2, "reset", "passed", 0.5, duplicated=2, recovered=1),
        fault_case(2, "outage", "error", 1.5),
        fault_case(2, "latency", "error", None),  # ended before the mirror resumed: no resume_s
        network_case(2, "outage", "passed", RABBIT_PEERS, lost=0, duplicated=1, resume_s=0.8, fault="outage"),
        network_case(2, "forwarding", "xfail", RABBIT_PEERS, lost=7),
        mutation_record(2, "router", 38, 2, ["router.py:2 in g NumberReplacer"], equivalent=1)],
}


@pytest.fixture(scope="module")
def recovered(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("recovery-runs")
    for run, records in RECOVERY_RUNS.items():
        (root / f"run-{run}").mkdir()
        (root / f"run-{run}" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run_job(spark, [str(root)], str(tmp_path_factory.mktemp("recovery-report")))


def test_recovery_per_target_suite_and_fault(recovered):
    got = {(r["target"], r["suite"], r["fault"]): (r["cases"], r["failed_cases"], r["lost"], r["duplicated"],
                                                   r["recovered"], r["resume_p50_s"], r["resume_max_s"], r["last_run"])
           for r in rows(recovered, "recovery")}
    bc = "brokerconnections"
    assert got == {
        (MIRROR_NAME, bc, "reset"): (2, 0, 0, 2, 1, 0.4, 0.5, "run-2"),         # median of 0.3 and 0.5
        (MIRROR_NAME, bc, "latency"): (1, 0, 0, 0, 0, 0.014, 0.014, "run-1"),   # run 2's had no resume_s
        (MIRROR_NAME, bc, "outage"): (2, 2, 1, 0, 0, 2.0, 2.5, "run-2"),        # failed and error both count
        (RABBIT_NAME, bc, "reset"): (1, 0, 0, 0, 0, 0.9, 0.9, "run-1"),
        (MIRROR_NAME, "durable", "broker-crash"): (1, 0, 0, None, None, 1.235, 1.235, "run-1"),
        (RABBIT_NAME, "network", "outage"): (2, 1, 4, 1, None, 1.4, 2.0, "run-2"),
    }
    assert [(r["target"], r["suite"], r["fault"]) for r in rows(recovered, "recovery")] == [
        (RABBIT_NAME, bc, "reset"), (RABBIT_NAME, "network", "outage"), (MIRROR_NAME, bc, "latency"),
        (MIRROR_NAME, bc, "outage"), (MIRROR_NAME, bc, "reset"), (MIRROR_NAME, "durable", "broker-crash")]


def test_network_cases_per_target_from_its_latest_network_run(recovered):
    got = [(r["case"].split("::")[1], r["target"], r["outcome"], r["fault"], r["lost"], r["duplicated"],
            r["resume_s"], r["run_id"]) for r in rows(recovered, "network")]
    assert got == [
        ("forwarding", RABBIT_NAME, "xfail", None, 7, None, None, "run-2"),
        ("forwarding", MIRROR_NAME, "passed", None, 0, 3, None, "run-1"),   # its only network run; per node, summed
        ("outage", RABBIT_NAME, "passed", "outage", 0, 1, 0.8, "run-2"),    # run 1's failed outage is older
    ]


def test_mutation_score_per_group_with_its_trend_and_no_conformance_count(recovered):
    got = {r["group"]: (r["score"], r["target_score"], r["sample"], r["killed"], r["survived"], r["equivalent"],
                        r["run_s"], r["survivors"], r["scores"], r["runs"], r["run_id"])
           for r in rows(recovered, "mutation")}
    assert got == {
        "router": (0.95, 0.95, 40, 38, 2, 1, 200.0, ["router.py:2 in g NumberReplacer"], [0.75, 0.95], 2, "run-2"),
        "fault-proxy": (1.0, 0.95, 40, 40, 0, 0, 100.0, [], [1.0], 1, "run-1"),
    }
    # a measurement of the suites, not a case: counted apart, never in a target's cases or pass rate
    runs = {r["run_id"]: r for r in rows(recovered, "runs")}
    assert (runs["run-1"]["bench_records"], runs["run-2"]["bench_records"]) == (2, 1)
    assert all(r["suite"] != "mutation" for r in rows(recovered, "pass_rate"))


# A run as a user's vendor comparison sees it (issue 36): a product's recorded difference, a client stack's recorded
# differences (one on a clause that also passed through other stacks, one on a clause with no other case), a case
# run under an injected fault, and a plain failure. The reasons are those the plugin writes for suites/expected
# entries: "expected difference: <file name>: <clause, reason and evidence>".
SAF_REASON = ("BROKER-SAF-1: RabbitMQ 3.10 keeps a message routed while no consumer is attached only for a durable "
              "queue; evidence: 7 of 9 delivered, the management API showed 2 messages dropped")
CPP_REASON = ("TYPES-PRIMITIVE-1: Qpid Proton C++ 0.37 puts decimal32 on the wire in the host's byte order; "
              "evidence: 2210000f arrives as 0f001022")
DECIMAL = {"value": "decimal32 #1", "sent": "2210000f", "sent_type": "decimal32", "received": "0f001022",
           "received_type": "decimal32"}


def types_case(name: str, outcome: str, spec: str, message: str | None = None, failures=()) -> dict:
    details = {"type": "decimal", "section": "body", "sender_stack": name.split("-")[0], "receiver_stack": "python",
               "via": "broker", "values": 3, "failures": list(failures)}
    return record(1, f"test_value_round_trips[{name}]", outcome, RABBIT_PEERS, [spec], suite="types",
                  details=details, message=message)


JUDGED_RUN = [
    record(1, "saf", "xfail", RABBIT_PEERS, ["BROKER-SAF-1"], message=f"expected difference: rabbitmq: {SAF_REASON}"),
    record(1, "saf_durable", "passed", RABBIT_PEERS, ["BROKER-SAF-1"]),
    record(1, "lost", "failed", RABBIT_PEERS, ["BROKER-ACK-1"], message="3 of 10 messages were never delivered"),
    record(1, "crash", "passed", RABBIT_PEERS, ["BROKER-DURABLE-1"],
           fault={"name": "kill-9", "target": "broker", "at_s": 1.5, "faults": [{"kind": "kill-9"}]}),
    types_case("python-to-python", "passed", "TYPES-PRIMITIVE-1"),
    types_case("cpp-to-python", "xfail", "TYPES-PRIMITIVE-1", f"expected difference: client-cpp: {CPP_REASON}",
               [DECIMAL]),
    types_case("cpp-to-rhea", "xfail", "TYPES-ARRAY-1", f"expected difference: client-cpp: {CPP_REASON}", [DECIMAL]),
]


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("judged-runs")
    (root / "run-1").mkdir()
    (root / "run-1" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in JUDGED_RUN))
    return run_job(spark, [str(root)], str(tmp_path_factory.mktemp("judged-report")))


def test_a_client_stacks_difference_is_not_counted_against_the_vendor(judged):
    rates = {(r["target"], r["suite"]): r for r in rows(judged, "pass_rate")}
    demo, types = rates[(RABBIT_NAME, "demo")], rates[(RABBIT_NAME, "types")]
    # the product's own difference and failure count; the client stack's two differences do not
    assert (demo["passed"], demo["failed"], demo["xfail"], demo["client_xfail"], demo["pass_rate"]) == \
        (2, 1, 1, 0, 0.5)
    assert (types["passed"], types["xfail"], types["client_xfail"], types["pass_rate"]) == (1, 0, 2, 1.0)
    (trend,) = rows(judged, "trend")
    assert (trend["cases"], trend["client_xfail"], trend["pass_rate"]) == (7, 2, 0.6)
    cells = {r["clause"]: r["status"] for r in rows(judged, "conformance")}
    assert cells == {"BROKER-SAF-1": "xfail", "BROKER-ACK-1": "failed", "BROKER-DURABLE-1": "passed",
                     "TYPES-PRIMITIVE-1": "passed", "TYPES-ARRAY-1": "client-difference"}


def test_every_failed_or_differing_cell_has_its_cases_with_reason_and_evidence(judged):
    got = {(r["clause"], r["case"].split("::")[1], r["outcome"], r["difference_of"]): r
           for r in rows(judged, "findings")}
    assert set(got) == {
        ("BROKER-SAF-1", "saf", "xfail", "rabbitmq"),
        ("BROKER-ACK-1", "lost", "failed", None),
        ("TYPES-PRIMITIVE-1", "test_value_round_trips[cpp-to-python]", "client-xfail", "client-cpp"),
        ("TYPES-ARRAY-1", "test_value_round_trips[cpp-to-rhea]", "client-xfail", "client-cpp"),
    }
    assert got[("BROKER-SAF-1", "saf", "xfail", "rabbitmq")]["message"].endswith(SAF_REASON)
    types = got[("TYPES-ARRAY-1", "test_value_round_trips[cpp-to-rhea]", "client-xfail", "client-cpp")]
    assert json.loads(types["failures"]) == [DECIMAL] and types["run_id"] == "run-1"


def test_recovery_is_empty_without_resume_s(known):
    result, out = known
    assert rows(result, "recovery") == []
    assert (out / "tables" / "recovery").is_dir()


def test_target_from_peers_when_the_record_has_no_cell(spark):
    from pyspark.sql import functions as F

    from reports.job import peers_target

    many = {f"r{i:02d}": {"vendor": f"v{i}"} for i in range(10, 0, -1)}  # 10 roles, given in reverse order
    cases = {
        json.dumps({"router": {"vendor": "reference"}, "broker": {"vendor": "rabbitmq", "version": "3"}}):
            "broker=rabbitmq + router=reference",
        json.dumps({"router": {"version": "1"}}): "",            # no vendor: the role says nothing to compare
        json.dumps({"router": "reference"}): "",                 # not role -> object
        "{not json": "",
        json.dumps(many): " + ".join(f"r{i:02d}=v{i}" for i in range(1, 9)) + " + 2 more roles",
    }
    got = spark.createDataFrame([(k,) for k in cases], "peers string").select(
        "peers", peers_target(F.col("peers")).alias("target")).collect()
    assert {r["peers"]: r["target"] for r in got} == cases


def test_records_keep_details_as_a_map(known, spark):
    _, out = known
    records = stored_records(spark, out)
    c5 = records.where("case like '%c5'").first()
    assert json.loads(c5["details"]["checks"]) == {"total-queue": {"ok": False, "attempted": 10, "delivered": 9,
                                                                   "lost": 1}}
    assert records.where("case like '%c6'").first()["details"]["cell"] == "c"


def test_parquet_tables_are_written(known):
    _, out = known
    names = {p.name for p in (out / "tables").iterdir()}
    assert {"lines", "run_counts", "run_durations", "run_recovery", "run_fuzz", "run_bench", "run_types",
            "run_network", "run_mutation", "run_findings", "manifest", "flaky_state", "runs", "conformance",
            "findings", "pass_rate", "flaky",
            "benchmarks", "type_interop", "network", "mutation", "trend", "regressions", "durations", "fault_checks",
            "checkers", "recovery", "fuzz_sessions", "fuzz_products", "fuzz_findings",
            "version_pairs", "version_changes", "mixed_releases", "upgrades"} == names
    # one partition folder per run and kind of line
    assert sorted(p.name for p in (out / "tables" / "lines" / "run_folder=run-3").iterdir()) == \
        ["kind=records", "kind=rejects"]


def test_large_fine_counts_keep_their_partitions_and_give_the_same_answers(known, spark, tmp_path, monkeypatch):
    """Small fine counts are read through one partition (fewer stages); large ones keep Spark's partitions. Both
    ways must give the same tables."""
    from reports.job import run

    monkeypatch.setattr(run, "SINGLE_PARTITION_ROWS", 0)
    result, _ = known
    root = Path(result.inputs.runs[0].results.removeprefix("file://")).parent.parent  # the known runs' folder
    again = run_job(spark, known_inputs(root), str(tmp_path / "report"), CATALOG)
    assert again.data.keys() == result.data.keys()
    for name in result.data:  # (rows that tie on a table's sort keys may come in either order)
        assert sorted(map(repr, again.data[name])) == sorted(map(repr, result.data[name])), name


def test_no_input_found_is_a_one_line_user_error(spark, tmp_path):
    with pytest.raises(ReportError, match="no results.jsonl found"):
        run_job(spark, [str(tmp_path / "nothing-here")], str(tmp_path / "out"))


def test_synthetic_runs_have_the_shape_the_benchmark_needs(tmp_path):
    ids = write_runs(tmp_path / "runs", runs=6, cases=400)
    assert ids == sorted(ids) and len(ids) == 6
    lines = (tmp_path / "runs" / ids[0] / "results.jsonl").read_text().splitlines()
    assert len(lines) == 400
    first = json.loads(lines[0])
    assert first["schema"] == 1 and first["outcome"] in ("passed", "failed", "error", "skipped", "not-applicable",
                                                         "xfail")
    # the sixth run also holds a fuzz session: its session record, then one record per finding
    fuzz = [json.loads(line) for line in (tmp_path / "runs" / ids[5] / "results.jsonl").read_text().splitlines()[400:]]
    assert fuzz[0]["case"] == "FUZZ-FRAMES" and {r["suite"] for r in fuzz} == {"fuzz"}
    assert [r["case"] for r in fuzz[1:]] == [f"FUZZ-FRAMES/{sig}" for sig in fuzz[0]["details"]["signatures"]]


# ---- the HTML page -------------------------------------------------------------------------------------------------


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (make setup)")


def open_in_chromium(page: Path) -> tuple[str, list[str]]:
    """(DOM after the page's scripts ran, console messages) from headless Chromium."""
    with tempfile.TemporaryDirectory(prefix="interop-chromium-") as profile:
        done = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


@pytest.fixture(scope="module")
def page(known, tmp_path_factory) -> Path:
    result, out = known
    ids, info = CATALOG, {c: {"text": f"clause {c}", "source": "doc §1"} for c in CATALOG}
    assert ids
    return html.write(out / "index.html", result.data, title="known answers", inputs=["runs"], catalog=info,
                      timings=result.timings, allure={"text": "not built: test", "href": None})


def test_page_is_self_contained(page):
    text = page.read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text), "no external resource"
    assert "http-equiv=\"Content-Security-Policy\"" in text and "default-src 'none'" in text
    assert text.count("<svg") >= 3


@needs_chromium
def test_page_in_headless_chromium_shows_matrix_and_charts_without_console_errors(page):
    dom, console = open_in_chromium(page)
    assert console == [], console
    assert 'data-ready="yes"' in dom, "the page's script did not run to its end"
    matrix = dom[dom.index('<table id="conformance"'):]
    matrix = matrix[:matrix.index("</table>")]
    assert matrix.count("<tr") == 1 + len(CATALOG)   # header + one row per clause
    assert '<th class="target">broker=rabbitmq + router=reference</th>' in matrix
    assert f'<th class="target">{A_NAME}</th>' in matrix and f'<th class="target">{B_NAME}</th>' in matrix
    assert re.search(r'data-status="failed" title="S-1 on router=reference: failed', matrix)
    assert dom.count('class="chart"') >= 3             # pass rate, trend, durations
    assert 'data-clauses-shown="5"' in dom              # the filter script ran over every row
    assert "c1" in dom[dom.index("Flaky cases"):]
    fuzzing = dom[dom.index("<h2>Fuzzing sessions</h2>"):dom.index("<h2>Rejected result lines</h2>")]
    sessions, findings = fuzzing.split("<h3>")
    # the per product table first (one product fuzzed: the reference router), then the sessions per target and mode
    products, sessions = sessions.split("Sessions per target and mode:")
    assert products.count("<tr>") == 2 and "<td>router</td><td>reference</td><td>0.1.0</td><td>2500</td>" in products
    assert sessions.count("<tr>") == 3 and findings.count("<tr>") == 3  # header + 2 rows each
    frames_row = next(tr for tr in sessions.split("<tr>") if "<td>frames</td>" in tr)
    assert re.search(rf"<td>{A_NAME}</td><td>router</td><td>frames</td><td>2</td><td>2500</td><td>2</td><td>2</td>",
                     frames_row), frames_row
    assert f"<code>{CRASH}</code>" in frames_row and "<td>7, 8</td>" in frames_row
    assert "results/fuzz-2/fuzz/test_crash.py" in findings and f"{CRASH} in fuzz-2" in findings


def test_page_without_fuzz_sessions_says_so(known):
    result, _ = known
    data = {**result.data, "fuzz_sessions": [], "fuzz_findings": []}
    text = html.render(data, title="t", inputs=["runs"], catalog={}, timings={}, allure=None)
    section = text[text.index("<h2>Fuzzing sessions</h2>"):text.index("<h2>Rejected result lines</h2>")]
    assert "no fuzz session in these runs" in section and "<table" not in section


RECOVERY_H2 = "<h2>Recovery after faults: lost, duplicated, time to resume</h2>"


def recovery_section(text: str) -> str:
    return text[text.index(RECOVERY_H2):text.index("<h2>Fuzzing sessions</h2>")]


def test_page_without_resume_s_says_so(page):
    section = recovery_section(page.read_text())
    assert "no record says how long recovery took after a fault" in section and "<table" not in section


@needs_chromium
def test_page_in_headless_chromium_shows_the_recovery_figures(recovered, tmp_path):
    written = html.write(tmp_path / "index.html", recovered.data, title="recovery", inputs=["runs"], catalog={},
                         timings=recovered.timings, allure=None)
    dom, console = open_in_chromium(written)
    assert console == [], console
    assert 'data-ready="yes"' in dom
    section = recovery_section(dom)
    assert "<table" in section and section.count("<tr>") == 1 + 6  # header + one row per target, suite and fault
    outage = next(tr for tr in section.split("<tr>") if "<td>brokerconnections</td><td>outage</td>" in tr)
    assert (f"<td>{MIRROR_NAME}</td><td>brokerconnections</td><td>outage</td><td>2</td><td>2</td><td>1</td>"
            "<td>0</td><td>0</td><td>2.000</td><td>2.500</td><td><code>run-2</code></td>") in outage, outage
    crash = next(tr for tr in section.split("<tr>") if "<td>broker-crash</td>" in tr)
    assert "<td>1</td><td>0</td><td>0</td><td></td><td></td><td>1.235</td><td>1.235</td>" in crash, crash
    network = dom[dom.index("<h2>Networks of brokers"):dom.index(RECOVERY_H2)]
    assert network.count("<tr>") == 1 + 2 and f"<th>{RABBIT_NAME}</th>" in network  # header + one row per case
    outage = next(tr for tr in network.split("<tr>") if "<code>outage</code>" in tr)
    assert "outage lost 0, dup 1, resume 0.800 s <code>run-2</code>" in outage, outage
    mutation = dom[dom.index("<h2>Mutation score"):]
    mutation = mutation[:mutation.index("</table>")]
    assert mutation.count("<tr>") == 1 + 2  # header + one row per group
    router = next(tr for tr in mutation.split("<tr>") if "<td>router</td>" in tr)
    assert "95%</b> of 95%" in router and "<td>75% → 95%</td>" in router and "NumberReplacer" in router, router


@needs_chromium
def test_page_leads_from_a_cell_to_its_evidence_and_lists_faults_and_client_stacks(judged, tmp_path):
    catalog = {c: {"text": f"clause {c}", "source": "doc"} for c in
               ("BROKER-SAF-1", "BROKER-ACK-1", "BROKER-DURABLE-1", "TYPES-PRIMITIVE-1", "TYPES-ARRAY-1")}
    written = html.write(tmp_path / "index.html", judged.data, title="judged", inputs=["runs"], catalog=catalog,
                         timings=judged.timings, allure=None)
    dom, console = open_in_chromium(written)
    assert console == [], console
    assert 'data-ready="yes"' in dom
    matrix = dom[dom.index('<table id="conformance"'):]
    matrix = matrix[:matrix.index("</table>")]
    # an orange (vendor), a red and a brown (client stack) cell each link to the row of their evidence
    for clause, text in (("BROKER-SAF-1", "differs"), ("BROKER-ACK-1", "FAIL"), ("TYPES-ARRAY-1", "client differs")):
        anchor = html.finding_anchor(RABBIT_NAME, clause)
        assert f'<a href="#{anchor}">{text}' in matrix, clause
        row = dom[dom.index(f'<tr id="{anchor}">'):]
        row = row[:row.index("</tr>")]
        assert f"<code>{clause}</code>" in row, row
    assert "<a " not in matrix[matrix.index("BROKER-DURABLE-1"):].split("</tr>")[0]  # a green cell has no link
    saf = dom[dom.index(f'<tr id="{html.finding_anchor(RABBIT_NAME, "BROKER-SAF-1")}">'):].split("</tr>")[0]
    assert "<td>rabbitmq</td>" in saf and "the management API showed 2 messages dropped" in saf
    assert "expected difference: rabbitmq:" not in saf  # the reason is shown without the plugin's prefix
    cpp = dom[dom.index(f'<tr id="{html.finding_anchor(RABBIT_NAME, "TYPES-ARRAY-1")}">'):].split("</tr>")[0]
    assert "client stack cpp" in cpp and "host's byte order" in cpp
    assert ("<code>decimal32 #1</code>: sent <code>2210000f</code> (decimal32), received <code>0f001022</code> "
            "(decimal32)") in cpp, cpp
    # the vendor's pass rate leaves the client stack's differences out, and the client axis lists them
    targets = dom[dom.index("<h2>Targets</h2>"):dom.index("<h2>Conformance matrix</h2>")]
    assert f"<td>{RABBIT_NAME}</td><td><code>run-1</code></td><td>1</td><td>60.0%</td>" in targets, targets
    clients = dom[dom.index("<h2>Client stacks"):]
    clients = clients[:clients.index("</table>")]
    assert f"<td>cpp</td><td>{RABBIT_NAME}</td><td>2</td><td>TYPES-ARRAY-1, TYPES-PRIMITIVE-1</td>" in clients
    # the case run under an injected fault is in the faults table
    faults = dom[dom.index("<h2>Faults and checks</h2>"):]
    faults = faults[:faults.index("</table>")]
    assert f"<td>{RABBIT_NAME}</td><td>kill-9</td><td>1</td><td>1</td>" in faults, faults


@needs_chromium
def test_the_page_of_a_real_fault_case_names_its_fault(spark, tmp_path):
    """Issue 36: a real case that injects a fault (a proxy reset of the link between the reference router and
    broker), run by pytest as a user runs it, then the report over its record: the faults table names the fault."""
    case = "suites/faults/test_faults.py::test_reset_mid_stream_then_resend_gets_everything_through"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--results", str(tmp_path / "runs"), case], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    result = run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    written = html.write(tmp_path / "index.html", result.data, title="a fault case", inputs=["runs"], catalog={},
                         timings=result.timings, allure=None)
    dom, console = open_in_chromium(written)
    assert console == [], console
    faults = dom[dom.index("<h2>Faults and checks</h2>"):]
    faults = faults[:faults.index("</table>")]
    assert "<td>broker=reference + router=reference</td><td>reset_peer</td><td>1</td><td>1</td>" in faults, faults
    assert "no case ran under an injected or deliberate fault" not in dom


@needs_chromium
def test_the_console_check_catches_errors(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    _, console = open_in_chromium(bad)
    assert any("undefinedFunction" in line for line in console), console


# ---- the command ----------------------------------------------------------------------------------------------------


def test_report_command_writes_the_page_and_tables(tmp_path, capsys, spark):
    root = write_known_runs(tmp_path / "results")
    assert report_cli.main([str(root), "--no-allure", "--master", "local[2]"]) == 0
    out = capsys.readouterr().out
    index = root / "report" / "index.html"
    assert index.is_file() and f"report: {index.resolve()}" in out
    assert "5 run(s), 20 records, 5 rejected line(s)" in out


def test_report_command_with_no_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert report_cli.main([str(tmp_path / "none"), "--out", str(tmp_path / "o"), "--no-allure"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file or folder" in err


@pytest.mark.skipif(not (Path(report_cli.REPO) / "reports" / "node_modules" / ".bin" / "allure").exists()
                    and shutil.which("allure") is None, reason="allure command line not installed")
def test_allure_report_is_built_from_the_latest_run_with_allure_results(tmp_path):
    from reports import allure_report as allure

    run = tmp_path / "r1"
    (run / "allure-results").mkdir(parents=True)
    (run / "allure-results" / "a-result.json").write_text(json.dumps({
        "uuid": "a", "historyId": "h", "name": "test_x", "fullName": "t.test_x", "status": "passed",
        "stage": "finished", "start": 1, "stop": 2, "labels": []}))
    note = allure.build([(run / "results.jsonl").as_uri()], [{"run_id": "r1", "run_index": 1}], tmp_path / "allure")
    assert note["href"] == "allure/index.html", note
    assert (tmp_path / "allure" / "index.html").is_file()


def test_report_reuses_no_harness_module():
    # The wall of DESIGN.md: reports/ reads result records only. The one module of the harness it shares is the
    # declaration of those records' fields (harness/record_schema.py: pure Python, importing nothing).
    root = Path(report_cli.__file__).parent
    for path in [*root.glob("*.py"), *(root / "job").rglob("*.py")]:
        for line in re.findall(r"^\s*(?:from|import)\s+harness\b.*$", path.read_text(), re.M):
            assert re.match(r"\s*from harness(\.record_schema import | import record_schema\b)", line), (path, line)
    schema = ast.parse(Path(record_schema.__file__).read_text())
    imported = {name.split(".")[0] for node in ast.walk(schema) if isinstance(node, (ast.Import, ast.ImportFrom))
                for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module])}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert os.path.exists(Path(report_cli.__file__).parent / "package.json")


def test_no_query_names_a_details_key_outside_the_record_fields_module():
    """A query reads a record's details through reports/record_fields.py, as harness/record_schema.py declares each
    field for its kind of record: nowhere else is the `details` column indexed."""
    root = Path(report_cli.__file__).parent
    for path in [*root.glob("*.py"), *(root / "job").rglob("*.py")]:
        if path.name != "record_fields.py":
            assert not re.search(r"""col\(["']details["']\)|["']details["']\)?\[""", path.read_text()), path


def _lifted(record: dict) -> dict:
    """A record as the harness writes it now: what the report reads as columns at the top level
    (harness.results.OPTIONAL_FIELDS), where older records kept it in `details`."""
    details = dict(record["details"])
    names = {"cell": "cell", "cell_peers": "target", "config_fault": "config_fault", "checks": "checks",
             "resume_s": "resume_s"}
    return {**record, "details": details, **{top: details.pop(key) for key, top in names.items() if key in details}}


def test_records_with_top_level_fields_report_exactly_as_those_with_details(known, spark, tmp_path):
    """The same runs written the old way (cell, target, config fault, checks in `details`: the known runs) and the
    new way (top-level fields) give the same report, table by table."""
    new = write_known_runs(tmp_path / "new")
    for folder in new.glob("run-*"):
        lines = (folder / "results.jsonl").read_text().splitlines()
        (folder / "results.jsonl").write_text("".join(
            (json.dumps(_lifted(json.loads(line))) if line.startswith('{"schema": 1') and line.endswith("}")
             else line) + "\n" for line in lines))
    assert '"target": "router=reference,broker=rabbitmq"' in (new / "run-3" / "results.jsonl").read_text()
    before = known[0].data
    after = run_job(spark, known_inputs(new), str(tmp_path / "report-new"), CATALOG).data
    assert before.keys() == after.keys()

    def plain(table):  # the runs' folders are the only thing that may differ
        text = json.dumps(table, sort_keys=True, default=str)
        return re.sub(r"/[^\s\"']*/(?=(run-|fuzz-)[\w\[\]*-]*)", "RUNS/", text)
    for name in before:
        assert plain(before[name]) == plain(after[name]), f"table {name} differs"


def test_the_trend_of_a_single_run_sits_in_the_middle_with_its_whole_legend():
    """One run: the points stand in the middle of the plot, not on its left edge, and the legend under the plot
    names each target in full with its latest pass rate (a long target name was cut at the right before)."""
    long_target = "broker=activemq-classic + router=qdrouterd, cell activemq-classic-qdrouterd-types"
    svg = html.line_chart({long_target: [(1, 0.889, "run-1", False)], A_NAME: [(1, 1.0, "run-1", False)]}, 1, "t")
    xs = {float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)}
    width = float(re.search(r'viewBox="0 0 (\d+)', svg).group(1))
    assert len(xs) == 1 and abs(xs.pop() - width / 2) < width * 0.1, svg
    assert f"{long_target} (latest 88.9%)" in svg


def test_bar_labels_get_the_room_the_longest_one_needs():
    rows = [{"target": "broker=activemq-classic + router=reference", "suite": "brokerconnections",
             "p50_s": 1.0, "p95_s": 2.0}]
    svg = html.duration_bars(rows, "d")
    label_x = float(re.search(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="end"', svg).group(1))
    label = "broker=activemq-classic + router=reference · brokerconnections"
    from reports.html import LABEL_PX_PER_CHAR  # (the charts' helpers moved from page.py to html.py)

    assert label_x >= LABEL_PX_PER_CHAR * len(label), (label_x, len(label))


def test_tables_written_here_are_the_tables_spark_writes(spark, tmp_path):
    """Where the store is on this machine the report writes its aggregate tables from Arrow itself
    (reports.store.write_parquet_here); Spark must read back what it would have written, and the page's rows must be
    the ones collected through Spark: timestamps as naive UTC, nulls ordered as Spark orders them, arrays, structs
    and maps as Row.asDict gives them, and a row limit after the sort."""
    from datetime import datetime

    from reports import job, store

    df = spark.createDataFrame(
        [("b", 2, datetime(2026, 12, 5, 3, 4, 5), ["x", "y"], {"k": "v"}, ("n", 1)),
         (None, 1, None, [], {}, None),
         ("a", None, datetime(2025, 1, 1), None, None, ("m", None))],
        "name string, n bigint, at timestamp, tags array<string>, props map<string,string>, "
        "inner struct<s: string, i: int>")
    for order, limit in ((["name"], None), (["-n", "name"], 2)):
        spark_rows = job._rows(df, order, limit)
        arrow = df.toArrow()
        assert job.arrow_rows(arrow, order, limit) == spark_rows
    spark_folder, here_folder = tmp_path / "spark", tmp_path / "here"
    df.write.parquet(str(spark_folder))
    here_folder.mkdir()
    (here_folder / "stale.parquet").write_text("an earlier table, replaced whole")
    store.write_parquet_here(df.toArrow(), f"file://{here_folder}")
    assert sorted(p.name for p in here_folder.iterdir()) == ["_SUCCESS", "part-00000.parquet"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left beside it
    written, expected = spark.read.parquet(str(here_folder)), spark.read.parquet(str(spark_folder))
    assert written.schema.simpleString() == expected.schema.simpleString()
    assert job._rows(written, ["name"]) == job._rows(expected, ["name"])
    assert job._writes_here(spark, f"file://{tmp_path}") and not job._writes_here(spark, "hdfs://nn/store")
