"""The report's store (reports/store.py): a report built run by run over the same runs gives the tables of a full
rebuild, table by table; unchanged runs are not read again, changed ones are, and the store keeps its history.

One local SparkSession for the module; the runs are small synthetic ones (reports/synthetic.py) plus the known-answer
runs of test_report.py (rejected lines, run.json facts, fuzz sessions) and records with resume_s.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from reports import store  # noqa: E402
from reports.job import ReportError, run_job  # noqa: E402
from reports.synthetic import write_runs  # noqa: E402

from tests.test_report import CATALOG, RECOVERY_RUNS, write_known_runs  # noqa: E402

pytestmark = pytest.mark.timeout(900)

AGGREGATES = ("runs", "conformance", "pass_rate", "flaky", "trend", "regressions", "durations", "fault_checks",
              "checkers", "recovery", "fuzz_sessions", "fuzz_findings")
PER_RUN = ("lines", "run_counts", "run_durations", "run_recovery", "run_fuzz", "run_bench", "run_types",
           "manifest")
# when a run was read is the only thing that differs between two stores of the same runs
VOLATILE = {"ingested_at"}



@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """Run folders to add one at a time: synthetic runs with a fuzz session in some, the known-answer runs, and runs
    whose records carry resume_s."""
    root = tmp_path_factory.mktemp("all-runs")
    write_runs(root, runs=3, cases=240, fuzz_every=2, start=datetime(2026, 2, 1, tzinfo=UTC))
    write_known_runs(root)
    for run, records in RECOVERY_RUNS.items():
        folder = root / f"recovery-{run}"
        folder.mkdir()
        (folder / "results.jsonl").write_text("".join(json.dumps({**r, "run_id": f"recovery-{run}"}) + "\n"
                                                      for r in records))
    return root


def stored_rows(out: Path, name: str) -> list[dict]:
    """A stored table's rows as Python dicts, read with Arrow in either layout (Parquet files in the table's folder,
    or run_folder=<escaped> partitions as Spark writes them), hidden and marker files skipped as Spark skips them.
    Arrow, not the Spark session: comparing a store's twenty tables twice through Spark cost 8.5 s a comparison, and
    an independent reader is the better judge of what was written anyway."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    root = out / "tables" / name
    if not any(root.rglob("*.parquet")):  # a per-run table no run has a row of
        return []
    partitioned = any(p.name.startswith("run_folder=") for p in root.iterdir())
    partitions = ds.partitioning(pa.schema([("run_folder", pa.string())]), flavor="hive") if partitioned else None
    rows = ds.dataset(str(root), format="parquet", partitioning=partitions, ignore_prefixes=[".", "_"]).to_table()
    # Spark writes timestamps as INT96 (nanoseconds, no zone), this process as microseconds in UTC: one instant, read
    # as one type (Spark's own reader makes them one type too)
    for i, column in enumerate(rows.schema):
        if pa.types.is_timestamp(column.type):
            rows = rows.set_column(i, column.name, rows.column(i).cast(pa.timestamp("us")))
    return rows.to_pylist()


def table(out: Path, name: str) -> list[str]:
    """A table's rows as sorted text, columns in name order, without the columns that record when it was made."""
    return sorted(repr([(c, row[c]) for c in sorted(row) if c not in VOLATILE]) for row in stored_rows(out, name))


def current_lines(out: Path) -> list[str]:
    """The lines the store reads back (the manifest's ingest ids): a changed run's old rows are not among them."""
    current = {(r["run_folder"], r["ingest_id"]) for r in stored_rows(out, "manifest")}
    return sorted(repr([(c, row[c]) for c in sorted(row)]) for row in stored_rows(out, "lines")
                  if (row["run_folder"], row["ingest_id"]) in current)


def assert_same_report(one: tuple, other: tuple) -> None:
    (result_a, out_a), (result_b, out_b) = one, other
    for name in AGGREGATES + PER_RUN:
        if name == "lines":
            assert current_lines(out_a) == current_lines(out_b), name
        else:
            assert table(out_a, name) == table(out_b, name), name
    assert result_a.data.keys() == result_b.data.keys()
    for name in result_a.data:  # (rows that tie on a table's sort keys may come in either order)
        assert sorted(map(repr, result_a.data[name])) == sorted(map(repr, result_b.data[name])), name


@pytest.fixture(scope="module")
def full_store(spark, source, tmp_path_factory):
    """Every source run in a results folder and a store made from it by one report: (results, store, result). Tests
    that go on from a full store work on copies of both (shared_copy): making it is a report of every run."""
    results, out = tmp_path_factory.mktemp("full-results"), tmp_path_factory.mktemp("full-store")
    shutil.copytree(source, results, dirs_exist_ok=True)  # copy2: the files' times, which the store compares, stay
    return results, out, run_job(spark, [str(results)], str(out), CATALOG)


def shared_copy(full_store, tmp_path: Path) -> tuple[Path, Path]:
    """A results folder and a store of this test's own, as the full store's report left them."""
    results, out, _ = full_store
    shutil.copytree(results, tmp_path / "results")
    shutil.copytree(out, tmp_path / "out")
    return tmp_path / "results", tmp_path / "out"


def test_an_unchanged_store_reads_nothing_and_gives_the_same_report(spark, full_store, tmp_path):
    _, first_out, first = full_store
    results, out = shared_copy(full_store, tmp_path)
    again = run_job(spark, [str(results)], str(out), CATALOG)
    assert not again.plan.to_read and len(again.plan.unchanged) == len(first.plan.new)
    assert_same_report((first, first_out), (again, out))


def test_the_store_keeps_runs_whose_folders_are_gone_and_rebuild_drops_them(spark, full_store, tmp_path):
    before = full_store[2]
    results, out = shared_copy(full_store, tmp_path)
    shutil.rmtree(results / "run-2")
    kept = run_job(spark, [str(results)], str(out), CATALOG)
    assert kept.plan.kept == ["run-2"] and not kept.plan.to_read
    assert {r["run_id"] for r in kept.data["runs"]} == {r["run_id"] for r in before.data["runs"]}
    rebuilt = run_job(spark, [str(results)], str(out), CATALOG, rebuild=True)
    assert "run-2" not in {r["run_id"] for r in rebuilt.data["runs"]}
    assert not (out / "tables" / "lines" / "run_folder=run-2").exists()


def layout(out: Path, name: str) -> str:
    """How a per-run table is stored: "one file" (this machine wrote it) or "partitions" (Spark did)."""
    entries = [p for p in (out / "tables" / name).iterdir() if not p.name.startswith(("_", "."))]
    if all(p.name.startswith("run_folder=") for p in entries):
        return "partitions"
    assert [p.name for p in entries] == ["part-00000.parquet"], entries
    return "one file"


def test_runs_added_in_turn_by_spark_and_by_this_process_give_the_tables_of_a_rebuild(
        spark, source, tmp_path, monkeypatch):
    """Nightly reports add runs to the store a few at a time, and find a run read before grown (resumed after an
    interruption): it is read again and replaces what was stored. Whatever the order, the tables are a full
    rebuild's.

    This process writes the small per-run tables as one file each (a store on this machine); Spark, where it writes
    the store (a cluster, a remote server), a partition per run. A store may see both: each writer reads the other's
    layout, a run read again replaces its rows in either. (Each report costs 6-7 s here: the steps share reports.)"""
    from reports.job import run as job_run

    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    folders = sorted(source.iterdir())
    names = [f.name for f in folders]

    def add(step: list[Path], spark_writes: bool):
        for folder in step:
            shutil.copytree(folder, results / folder.name)
        with monkeypatch.context() as patch:
            if spark_writes:
                patch.setattr(job_run, "_writes_here", lambda *_: False)
            return run_job(spark, [str(results)], str(out), CATALOG)

    def cases_of(result, run_id: str) -> int:
        return sum(r["cases"] for r in result.data["runs"] if r["run_id"] == run_id)

    def grow(case_suffix: str, **changes) -> None:
        grown.write_text(grown.read_text() + json.dumps({**extra, "case": extra["case"] + case_suffix, **changes})
                         + "\n")

    def assert_rebuilt(result) -> None:
        rebuilt = run_job(spark, [str(results)], str(tmp_path / "rebuilt"), CATALOG, rebuild=True)
        assert rebuilt.plan.fresh and len(rebuilt.plan.new) == len(folders)
        assert_same_report((result, out), (rebuilt, tmp_path / "rebuilt"))
        # (and each resumed case is in both, once)
        assert cases_of(result, extra["run_id"]) == cases_of(rebuilt, extra["run_id"]) == cases_before + resumed

    # the first report makes a fresh store (Spark writes it), the next one adds runs beside an unchanged one (here)
    result = add(folders[:1], spark_writes=True)
    assert [r.run_folder for r in result.plan.new] == names[:1] and result.plan.fresh
    assert layout(out, "run_counts") == layout(out, "manifest") == "partitions"
    result = add(folders[1:4], spark_writes=False)
    assert [r.run_folder for r in result.plan.new] == names[1:4] and not result.plan.fresh
    assert result.plan.unchanged == names[:1] and not result.plan.changed
    assert layout(out, "run_counts") == layout(out, "manifest") == "one file"
    # a report after a few nights also finds the first run grown: read again by Spark, the one-file table is
    # rewritten as partitions, the run's old rows gone
    grown = results / names[0] / "results.jsonl"
    extra = json.loads(grown.read_text().splitlines()[0])
    cases_before, resumed = cases_of(result, extra["run_id"]), 1
    grow("-resumed", outcome="failed", message="boom")
    result = add(folders[4:], spark_writes=True)
    assert sorted(r.run_folder for r in result.plan.new) == names[4:]
    assert [r.run_folder for r in result.plan.changed] == names[:1] and result.plan.unchanged == names[1:4]
    assert layout(out, "run_counts") == layout(out, "manifest") == "partitions"
    assert_rebuilt(result)
    # and read again here: back to one file, still the rebuild's tables
    resumed = 2
    grow("-again")
    result = add([], spark_writes=False)
    assert [r.run_folder for r in result.plan.changed] == names[:1]
    assert layout(out, "run_counts") == "one file"
    assert_rebuilt(result)


def test_a_run_folder_name_with_special_characters_is_one_partition_and_matches_its_manifest(spark, tmp_path):
    name = "run 7+a%b=c"  # a space, '+', '%' and '=': URI and partition-path escaping both apply
    write_runs(tmp_path / "runs", runs=1, cases=40, fuzz_every=0)
    (tmp_path / "runs" / next(p.name for p in (tmp_path / "runs").iterdir())).rename(tmp_path / "runs" / name)
    first = run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    assert [r.run_folder for r in first.plan.new] == [name]
    again = run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    assert again.plan.unchanged == [name] and not again.plan.to_read
    assert again.data["totals"][0]["records"] == 40
    stored = spark.read.parquet(str(tmp_path / "out" / "tables" / "lines")).select("run_folder").distinct().collect()
    assert [r["run_folder"] for r in stored] == [name]


def test_only_the_manifests_runs_are_read_whatever_characters_their_names_hold(spark):
    """with_current's filter is one SQL expression with the names as string literals: a quote or a backslash in a
    run folder or ingest id must neither break it nor match another name."""
    names = ["plain", "it's", "back\\slash", "quote'\\'", "new\nline", "2026"]
    rows = [(folder, f"{folder}@{i}") for folder in names for i in (1, 2)]  # two readings of each run, one current
    df = spark.createDataFrame(rows, "run_folder string, ingest_id string")
    current = {folder: f"{folder}@2" for folder in names[1:]}
    kept = {(r["run_folder"], r["ingest_id"]) for r in store.with_current(df, current).collect()}
    assert kept == set(current.items())
    assert store.with_current(df, {}).count() == 0


def test_a_store_of_another_format_version_is_refused_with_a_one_line_error(spark, tmp_path, monkeypatch):
    write_runs(tmp_path / "runs", runs=1, cases=20, fuzz_every=0)
    run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    written = store.STORE_VERSION
    monkeypatch.setattr(store, "STORE_VERSION", written + 1)
    with pytest.raises(ReportError, match=rf"format version {written}, this report reads version {written + 1}: run "
                                          r"`interop report --rebuild`") as caught:
        run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    assert "\n" not in str(caught.value)
    assert run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"), rebuild=True).plan.fresh


def test_a_run_found_twice_is_a_one_line_error(spark, tmp_path):
    for where in ("a", "b"):
        write_runs(tmp_path / where, runs=1, cases=10, fuzz_every=0)
    with pytest.raises(ReportError, match=r"run .* is found twice: file://.*/a/.* and file://.*/b/"):
        run_job(spark, [str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out"))


def test_tables_of_the_layout_before_the_store_are_replaced(spark, tmp_path):
    """A report folder written before the store existed (records/, rejects/ of one full read) holds nothing the
    store could trust: a new store is started there and the old tables go."""
    write_runs(tmp_path / "runs", runs=1, cases=10, fuzz_every=0)
    for old in ("records", "rejects"):
        (tmp_path / "out" / "tables" / old).mkdir(parents=True)
    result = run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    assert result.plan.fresh
    assert not (tmp_path / "out" / "tables" / "records").exists()


def test_duration_percentiles_from_the_stored_histograms_are_within_two_percent_of_exact(spark, tmp_path):
    """The durations table adds up each run's log-scale histogram; its p50 and p95 are durations cases really took,
    at or at most 2% above the exact nearest-rank percentiles of every run's cases."""
    import math

    write_runs(tmp_path / "runs", runs=3, cases=400, fuzz_every=0)
    result = run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    timed: dict[tuple[str, str], list[float]] = {}
    for file in (tmp_path / "runs").glob("*/results.jsonl"):
        for line in file.read_text().splitlines():
            r = json.loads(line)
            if r["outcome"] in ("passed", "failed", "error", "xfail"):
                target = " + ".join(sorted(r["details"]["cell_peers"].split(",")))
                timed.setdefault((target, r["suite"]), []).append(r["duration_s"])
    got = {(r["target"], r["suite"]): r for r in result.data["durations"]}
    assert got.keys() == timed.keys()
    for key, values in timed.items():
        values.sort()
        row = got[key]
        assert row["cases"] == len(values) and row["max_s"] == values[-1], key
        assert row["mean_s"] == pytest.approx(sum(values) / len(values), abs=1e-4), key
        for q, column in ((0.5, "p50_s"), (0.95, "p95_s")):
            exact = values[math.ceil(q * len(values)) - 1]
            assert exact <= row[column] <= exact * 1.02 and row[column] in values, (key, column)


def bench_record(run_id: str, scenario: str, vendor: str, stack: str, msgs: float, ratio: float | None,
                 day: int) -> dict:
    """A record as bench/routing.py --results writes it."""
    peers = {} if vendor == "direct" else {"router": {"vendor": vendor, "version": "1", "provider": "native"}}
    return {"schema": 1, "run_id": run_id, "case": f"BENCH-routing/{scenario}/{vendor}/{stack}", "suite": "bench",
            "spec": [], "topology": "single-router", "peers": peers, "fault": None, "outcome": "passed",
            "duration_s": 3.0, "started_at": f"2026-03-0{day}T00:00:00.000Z", "message": None,
            "details": {"bench": "routing", "scenario": scenario, "clients": stack, "repeats": 3,
                        "ratio_to": "qdrouterd", "ratio": ratio, "msgs_per_s": msgs, "p50_ms": 1.5, "p99_ms": 9.0}}


def type_record(run_id: str, sender: str, receiver: str, kind: str, section: str, outcome: str, failures: list,
                day: int) -> dict:
    """A record as suites/types writes it (details trimmed to what the report reads)."""
    return {"schema": 1, "run_id": run_id, "case": f"suites/types/test_types.py::test_value_round_trips[{sender}-"
            f"{receiver}-{kind}-{section}]", "suite": "types", "spec": ["TYPES-PRIMITIVE-1"], "topology": "t",
            "peers": {"broker": {"vendor": "rabbitmq", "version": "3"}}, "fault": None, "outcome": outcome,
            "duration_s": 0.1, "started_at": f"2026-03-0{day}T00:00:01.000Z", "message": None,
            "details": {"type": kind, "section": section, "sender_stack": sender, "receiver_stack": receiver,
                        "via": "broker", "values": 12, "failures": failures}}


def test_benchmark_and_type_interop_records_have_tables_of_their_own(spark, tmp_path):
    runs = {
        "b-1": [bench_record("b-1", "anycast", "reference", "c", 1000.0, 0.5, 1),
                bench_record("b-1", "anycast", "qdrouterd", "c", 2000.0, None, 1),
                type_record("b-1", "rhea", "cpp", "floating", "body", "failed", [{"value": "nan"}], 1)],
        "b-2": [bench_record("b-2", "anycast", "reference", "c", 1500.0, 0.75, 2),
                bench_record("b-2", "anycast", "qdrouterd", "c", 2000.0, None, 2),
                type_record("b-2", "rhea", "cpp", "floating", "body", "failed",
                            [{"value": "nan"}, {"value": "-0.0"}], 2),
                type_record("b-2", "cpp", "rhea", "floating", "body", "passed", [], 2)],
    }
    for run_id, records in runs.items():
        (tmp_path / "runs" / run_id).mkdir(parents=True)
        (tmp_path / "runs" / run_id / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    result = run_job(spark, [str(tmp_path / "runs")], str(tmp_path / "out"))
    bench = {(r["vendor"], r["clients"]): r for r in result.data["benchmarks"]}
    ref = bench[("reference", "c")]
    assert (ref["msgs_per_s"], ref["previous_msgs_per_s"], ref["best_msgs_per_s"], ref["ratio"], ref["runs"],
            ref["run_id"]) == (1500.0, 1000.0, 1500.0, 0.75, 2, "b-2")
    # benchmark records are no cases: no pass rate, no clause, no target of their own
    assert [(r["run_id"], r["cases"], r["bench_records"]) for r in result.data["runs"]] == [("b-1", 1, 2),
                                                                                           ("b-2", 2, 2)]
    assert {r["target"] for r in result.data["pass_rate"]} == {"broker=rabbitmq"}
    types = {(r["sender_stack"], r["receiver_stack"]): r for r in result.data["type_interop"]}
    assert types.keys() == {("rhea", "cpp"), ("cpp", "rhea")}  # the latest run of the target only
    assert (types[("rhea", "cpp")]["outcome"], types[("rhea", "cpp")]["values_differing"]) == ("failed", 2)
    assert result.data["totals"][0]["records"] == 7

    from reports import page

    html = page.render(result.data, title="t", inputs=[], catalog={}, timings={}, allure=None)
    assert "rhea \u2192 broker (broker=rabbitmq) \u2192 cpp" in html  # the pair that differed is a column
    assert "cpp \u2192 broker (broker=rabbitmq) \u2192 rhea" not in html  # the one that did not is left out
    assert "0.75x qdrouterd" in html and "1,500" in html


def test_the_flaky_fold_reads_only_new_runs_and_folds_every_run_when_it_cannot(spark, tmp_path):
    """Nightly runs are folded into the last report's fold one at a time; a run that started before the fold's
    latest record, and a fold that was not written whole, make the report fold every run again. A fold of new runs
    gives the flaky table a rebuild makes (a fold of every run is the rebuild's own way)."""
    nights, results, out = tmp_path / "nights", tmp_path / "results", tmp_path / "out"
    write_runs(nights, runs=4, cases=300, fuzz_every=0, start=datetime(2026, 3, 1, tzinfo=UTC))
    results.mkdir()

    def report_after(*folders: Path, compare: bool = False) -> list[str]:
        for folder in folders:
            shutil.copytree(folder, results / folder.name)
        said: list[str] = []
        run_job(spark, [str(results)], str(out), CATALOG, log=said.append)
        if compare:
            rebuilt = tmp_path / f"rebuilt-{len(list(results.iterdir()))}"
            run_job(spark, [str(results)], str(rebuilt), CATALOG, rebuild=True)
            assert table(out, "flaky") == table(rebuilt, "flaky")
            assert table(out, "flaky"), "the synthetic runs have flaky cases"
        return [line.strip().rsplit(": ", 1)[0] for line in said if line.strip().startswith("flaky fold")]

    first, second, third, fourth = sorted(nights.iterdir())
    assert report_after(first, second) == ["flaky fold (every run)"]
    assert report_after(third, compare=True) == ["flaky fold (1 new run(s) folded into the last report's)"]
    folded = table(out, "flaky")
    assert report_after() == ["flaky fold (no new run, the last report's)"]
    assert table(out, "flaky") == folded
    # a run that started a day before every other one, read after them
    write_runs(tmp_path / "late", runs=1, cases=300, seed=8, fuzz_every=0, start=datetime(2026, 2, 28, tzinfo=UTC))
    assert report_after(*(tmp_path / "late").iterdir(), compare=True) == [
        "flaky fold (every run again: a new run started before the last fold's latest record)"]
    # a report that stopped while it wrote its fold: the next one does not trust it
    (fold,) = (out / "tables" / "flaky_state").glob("fold=*")
    (fold / "_SUCCESS").unlink()
    assert report_after(fourth) == ["flaky fold (every run)"]
    (now,) = (out / "tables" / "flaky_state").glob("fold=*")  # the new fold replaced it, written whole
    assert now != fold and (now / "_SUCCESS").exists()
