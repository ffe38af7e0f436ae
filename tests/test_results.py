import json
import multiprocessing
import re
import sys

import pytest

from harness import results
from harness.results import (
    OUTCOMES,
    InvalidRecord,
    ResultWriter,
    host_facts,
    make_record,
    new_run_id,
    read_results,
    validate_record,
)


def record(**overrides):
    fields = {
        "case": "suites/routing/test_distribution.py::test_multicast_fanout[3]",
        "suite": "routing",
        "spec": ["ROUTING-MULTICAST-1"],
        "topology": "single-router",
        "peers": {"router": {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}},
        "outcome": "passed",
        "duration_s": 0.41,
        "details": {"sent": 20, "received": [20, 20, 20]},
    }
    return make_record(**{**fields, **overrides})


def test_run_id_shape():
    run_id = new_run_id()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ-[0-9a-f]{4}", run_id)
    assert len({new_run_id() for _ in range(20)}) > 1  # the random suffix separates runs in one second


def test_make_record_fills_the_schema(monkeypatch):
    monkeypatch.setenv(results.RUN_ID_ENV, "2026-11-22T03-00-00Z-ab12")
    rec = record()
    assert rec["schema"] == 1
    assert rec["run_id"] == "2026-11-22T03-00-00Z-ab12"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec["started_at"])
    assert rec["fault"] is None and rec["message"] is None and rec["host"]
    assert list(rec)[:4] == ["schema", "run_id", "case", "suite"]
    validate_record(rec)
    assert make_record(case="c", extra_field=1)["extra_field"] == 1


def test_run_id_is_stable_within_a_process(monkeypatch):
    monkeypatch.delenv(results.RUN_ID_ENV, raising=False)
    assert make_record()["run_id"] == make_record()["run_id"] == results.current_run_id()


def test_write_and_read_back(tmp_path):
    with ResultWriter(tmp_path / "run") as writer:
        for outcome in OUTCOMES:
            writer.write(record(outcome=outcome))
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert len(lines) == len(OUTCOMES)
    assert json.loads(lines[0])["outcome"] == "passed"
    records, errors = read_results(tmp_path / "run")
    assert errors == []
    assert [r["outcome"] for r in records] == list(OUTCOMES)
    assert records[0]["details"] == {"sent": 20, "received": [20, 20, 20]}


def test_appends_across_writers(tmp_path):
    for _ in range(2):
        with ResultWriter(tmp_path) as writer:
            writer.write(record())
    records, errors = read_results(tmp_path / "results.jsonl")
    assert len(records) == 2 and errors == []


def test_torn_last_line_stays_one_bad_line(tmp_path):
    with ResultWriter(tmp_path) as writer:
        writer.write(record(case="a"))
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write('{"schema": 1, "case": "crashed mid-wri')  # what a crash mid-write leaves
    with ResultWriter(tmp_path) as writer:
        writer.write(record(case="b"))
    records, errors = read_results(tmp_path)
    assert [r["case"] for r in records] == ["a", "b"]
    assert [line for line, _ in errors] == [2]
    assert errors[0][1].startswith("not JSON:")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"outcome": "ok"},
            "field 'outcome': expected one of passed, failed, error, skipped, not-applicable, xfail",
        ),
        ({"duration_s": -1}, "field 'duration_s': expected a number of seconds >= 0"),
        ({"duration_s": float("nan")}, "field 'duration_s'"),
        ({"duration_s": True}, "field 'duration_s'"),
        ({"spec": "ROUTING-1"}, "field 'spec': expected a list of clause ids"),
        ({"schema": 2}, "field 'schema': expected 1, got 2"),
        (
            {"started_at": "2026-11-22T03:00:01+01:00"},
            "field 'started_at': expected ISO-8601 UTC ending in 'Z'",
        ),
        ({"peers": {"router": "reference"}}, "field 'peers'"),
        ({"peers": {"router": {"vendor": "x", "version": 1}}}, "peers.router.version"),
        ({"fault": 3}, "field 'fault'"),
        ({"details": []}, "field 'details': expected an object"),
        ({"message": 5}, "field 'message'"),
        ({"case": ""}, "field 'case': expected a non-empty string"),
    ],
)
def test_bad_records_are_refused(tmp_path, overrides, message):
    with ResultWriter(tmp_path) as writer, pytest.raises(ValueError, match=re.escape(message)):
        writer.write(record(**overrides))
    assert (tmp_path / "results.jsonl").read_text() == ""


def test_missing_fields_and_unserialisable_values(tmp_path):
    with pytest.raises(InvalidRecord, match="missing field"):
        validate_record({"schema": 1, "outcome": "passed"})
    with pytest.raises(InvalidRecord):
        validate_record(["not", "a", "dict"])
    with ResultWriter(tmp_path) as writer, pytest.raises(ValueError, match="not JSON-serialisable"):
        writer.write(record(details={"when": object()}))
    with ResultWriter(tmp_path) as writer, pytest.raises(ValueError, match="not JSON-serialisable"):
        writer.write(record(details={"latency": float("inf")}))


def test_reader_tolerates_damage(tmp_path):
    good = json.dumps(record(case="good"))
    lines = [good, "", "not json", "[1, 2]", json.dumps({**record(), "outcome": "maybe"}), good]
    path = tmp_path / "results.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    records, errors = read_results(path)
    assert [r["case"] for r in records] == ["good", "good"]
    assert [line for line, _ in errors] == [3, 4, 5, 7]
    assert errors[1][1] == "record: expected a JSON object, got list"
    assert "field 'outcome'" in errors[2][1]
    assert errors[3][1].startswith("not UTF-8")


def test_run_meta_is_written_atomically_and_merged(tmp_path):
    writer = ResultWriter(tmp_path)
    writer.write_run_meta({"run_id": "r1", "versions": {"router": "0.1.0"}})
    first = json.loads((tmp_path / "run.json").read_text())
    assert first["schema"] == 1 and first["run_id"] == "r1"
    assert first["started_at"].endswith("Z")
    assert set(first["host"]) >= {"hostname", "platform", "python", "cpu_count"}
    assert first["argv"] == sys.argv
    writer.write_run_meta({"ended_at": "2026-11-22T03:10:00.000Z", "totals": {"passed": 3}})
    second = json.loads((tmp_path / "run.json").read_text())
    assert second["started_at"] == first["started_at"]
    assert second["versions"] == {"router": "0.1.0"} and second["totals"] == {"passed": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl", "run.json"]  # no temp files left
    writer.close()
    writer.close()  # closing twice is harmless
    with pytest.raises(ValueError, match="closed"):
        writer.write(record())


def test_host_facts():
    facts = host_facts()
    assert facts["python"] == ".".join(map(str, sys.version_info[:3]))
    assert isinstance(facts["cpu_count"], int) and facts["hostname"]


def _write_many(directory: str, worker: int) -> None:
    with ResultWriter(directory) as writer:
        for i in range(50):
            writer.write(record(case=f"w{worker}-{i}", details={"pad": "x" * 2000}))


def test_parallel_processes_never_interleave(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records, errors = read_results(tmp_path)
    assert errors == []
    assert len({r["case"] for r in records}) == 200


# ---- details, as harness/record_schema.py declares them per kind of record --------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"suite": "fuzz", "details": {"mode": "frames", "seed": "5"}},
         "field 'details.seed' (fuzz record): expected an integer, got '5'"),
        ({"suite": "bench", "details": {"msgs_per_s": "fast"}}, "field 'details.msgs_per_s' (bench record)"),
        ({"suite": "bench", "details": {"repeats": True}}, "field 'details.repeats' (bench record)"),
        ({"suite": "mutation", "details": {"survivors": "m1"}}, "expected a list of strings"),
        ({"suite": "types", "details": {"values": 1.5}}, "field 'details.values' (types record)"),
        ({"suite": "network", "details": {"lost": {"B1": "x"}}}, "field 'details.lost' (network record)"),
        ({"suite": "upgrade", "details": {"steps": {"node": "B1"}}}, "field 'details.steps' (upgrade record)"),
        # a case that timed a recovery is a recovery record, top-level resume_s or (older) in details
        ({"resume_s": 1.5, "details": {"lost": "none"}}, "field 'details.lost' (recovery record)"),
        ({"details": {"resume_s": 1.5, "lost": 1.5}}, "field 'details.lost' (recovery record)"),
        ({"details": {"nodes": ["B1"]}}, "field 'details.nodes' (case record)"),
    ],
)
def test_details_of_the_wrong_type_are_refused(tmp_path, overrides, message):
    with ResultWriter(tmp_path) as writer, pytest.raises(InvalidRecord, match=re.escape(message)):
        writer.write(record(**overrides))


@pytest.mark.parametrize(
    "overrides",
    [
        {"details": {"lost": "many", "anything": [1]}},  # a plain case: lost is free-form there
        {"suite": "fuzz", "details": {"mode": "frames", "seed": 5, "recorded": "a reason", "reproducer": None,
                                      "evidence": {"seed": 5}, "figures": {"max_rss_mb": 12.5}}},
        {"suite": "network", "details": {"lost": 0, "duplicated": {"B1": 0, "B2": 1}, "fault": "outage"}},
        {"suite": "bench", "details": {"msgs_per_s": 1000, "ratio": None, "repeats": 3, "isolated": False}},
        {"suite": "upgrade", "details": {"steps": [{"node": "B1", "lost": {"x": 1}}], "downgrade": "read"}},
    ],
)
def test_details_as_writers_write_them_are_valid(overrides):
    validate_record(record(**overrides))


def test_every_details_field_is_declared_with_a_known_type():
    from harness import record_schema as rs

    types = {value for value in vars(rs).values() if isinstance(value, rs.Type)}
    assert set(rs.DETAILS) == {rs.CASE, rs.RECOVERY, rs.FUZZ, rs.BENCH, rs.MUTATION, rs.TYPES, rs.NETWORK,
                               rs.UPGRADE}
    for kind, fields in rs.DETAILS.items():
        assert fields and all(t in types for t in fields.values()), kind
    with pytest.raises(KeyError, match="details.nope: not declared for fuzz records"):
        rs.field(rs.FUZZ, "nope")


def test_an_old_record_is_migrated_to_the_current_form():
    from harness.record_schema import migrate

    old = record(details={"cell": "c", "cell_peers": "router=reference", "config_fault": "router:x",
                          "checks": {"q": {"ok": True}}, "resume_s": 2.5, "sent": 1})
    new = migrate(old)
    assert {k: new[k] for k in ("cell", "target", "config_fault", "checks", "resume_s")} == {
        "cell": "c", "target": "router=reference", "config_fault": "router:x", "checks": {"q": {"ok": True}},
        "resume_s": 2.5}
    assert new["details"] == old["details"]  # kept as written
    current = record(cell="d", details={"cell": "c"})
    assert migrate(current)["cell"] == "d"  # a top-level value wins
    plain = record()
    assert migrate(plain) is plain
    validate_record(new)
