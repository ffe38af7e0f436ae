"""One report: the new and changed runs of the inputs read into the store (per_run.py), then every aggregate over
the store's runs, each written as a Parquet table and collected for the HTML report. The orchestration only: the
queries are in the modules beside this one.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from reports.job.aggregates import (_pass_rate, _sum_counts, conformance, cube, run_metas, run_versions,
                                    runs_table, target_runs, trend)
from reports.job.flaky import flaky, flaky_state
from reports.job.per_run import _stored_schemas, ingest_runs
from reports.job.records import is_case
from reports.job.rows import _rows, arrow_rows
from reports.job.session import ADAPTIVE, LOCAL_STORE_LISTING, PARALLEL_LISTING, WRITERS, ReportError, _settings
from reports.job.tables.bench import benchmarks
from reports.job.tables.durations import durations
from reports.job.tables.faults import fault_checks, recovery
from reports.job.tables.findings import findings
from reports.job.tables.fuzz import fuzz_findings, fuzz_products, fuzz_records, fuzz_sessions
from reports.job.tables.interop import network, type_interop
from reports.job.tables.mutation import mutation
from reports.job.tables.regressions import latest_pairs, regressions
from reports.store import Found, Plan


@dataclass
class Result:
    tables: list[str]                   # the aggregate tables written (Parquet, under the store); not their
                                        # DataFrames, whose plans would keep the JVM's objects while a Result lives
    data: dict[str, list[dict]]         # name -> collected rows for the HTML report
    timings: dict[str, float]           # stage -> seconds
    inputs: Found                       # the runs found among the inputs
    plan: Plan                          # what the store did with each


SINGLE_PARTITION_ROWS = 1_000_000  # fine counts up to this many rows are read through one partition (run_job)
MAX_LISTED = 500  # rows of a per-case list (flaky, regressions, rejects) collected for the HTML report
# rows of the findings (every failure and recorded difference behind a conformance cell, with its reason and
# evidence) collected for the HTML report: a cell of four types cells x three stacks has a few hundred
FINDINGS_LISTED = 5000


def run_job(spark, inputs: list[str], out: str, catalog_ids: list[str] | None = None,
            log: Callable[[str], None] = lambda _: None, rebuild: bool = False) -> Result:
    """One report: the new and changed runs of `inputs` into the store under `out`, then the aggregates."""
    try:
        return _report(spark, inputs, out, catalog_ids, log, rebuild)
    finally:
        # py4j's JavaObject and the JavaMembers it caches refer to each other, so the report's Java objects (its
        # DataFrames' plans, broadcast relations) are released only by Python's cycle collector, which runs seldom:
        # a process that made report after report (the report tests, a service) held 400-600 MB more of the JVM's
        # heap per report, up to 2 GB, and its JVM ran full collections back to back. Collected once the report's
        # frames are gone, the heap after a report stays where the first left it (about 690 MB of a 4 GiB heap,
        # six reports of 720 records, against 2 GB by the fourth without).
        gc.collect()


def _report(spark, inputs: list[str], out: str, catalog_ids: list[str] | None, log: Callable[[str], None],
            rebuild: bool) -> Result:
    from reports import store

    timings: dict[str, float] = {}

    def stage(name: str, t0: float) -> float:
        timings[name] = round(time.monotonic() - t0, 3)
        log(f"{name}: {timings[name]:.2f}s")
        return time.monotonic()

    t = time.monotonic()
    tables_dir = f"{out.rstrip('/')}/tables"
    if "://" not in tables_dir:
        tables_dir = "file://" + os.path.abspath(tables_dir)
    try:
        found = store.find_runs(spark, inputs)
        if not found.runs:
            raise ReportError(f"{' '.join(inputs) or '(no input)'}: no results.jsonl found (expected run folders, "
                              "a results folder, a glob, or results.jsonl files)")
        plan = store.plan_ingest(found, None if rebuild else store.read_manifest(spark, tables_dir), rebuild)
    except store.StoreError as exc:
        raise ReportError(str(exc)) from None
    log(f"store: {len(found.runs)} run(s) among the inputs: {len(plan.new)} new, {len(plan.changed)} changed since "
        f"the last report, {len(plan.unchanged)} unchanged" + (f"; {len(plan.kept)} more kept from earlier reports"
                                                                if plan.kept else "")
        + (" (a new store)" if plan.fresh else ""))
    t = stage("resolve inputs", t)

    here = _writes_here(spark, tables_dir)  # who writes the small tables: this process, or Spark
    with _settings(spark, {PARALLEL_LISTING: str(LOCAL_STORE_LISTING)} if tables_dir.startswith("file:") else {}):
        schemas = _stored_schemas(spark)  # planned once, for the writing and the reading of the store
        if plan.to_read:
            ingest_runs(spark, tables_dir, plan, schemas, log, here)
        t = stage("ingest (new and changed runs -> the store)", t)
        # The aggregates read the per-run tables (a few hundred rows per run) and the records of a run or two: small
        # inputs, where adaptive execution costs more than it saves (each of a query's stages a job of its own,
        # the query planned again after each). Measured on a warm Spark Connect server, the nightly report of
        # bench/report.py, four paired runs: 7.8 -> 7.0 s (median); the full rebuild, whose flaky fold reads
        # every record, the same with or without (46.8/52.0 s with, 45.7/53.6 s without).
        with _settings(spark, {ADAPTIVE: "false"}):
            result = _aggregate(spark, tables_dir, plan, schemas, catalog_ids or [], timings, stage, t, log, here)
    return Result(sorted(result[0]), result[1], timings, found, plan)


def _aggregate(spark, tables_dir: str, plan: Plan, schemas: dict, catalog_ids: list[str], timings: dict[str, float],
               stage, t, log: Callable[[str], None], here: bool):
    """Every aggregate over every run the store holds for this report (plan.current)."""
    from pyspark.sql import functions as F

    from reports import store, versions_table

    def stored(name: str):
        return store.with_current(spark.read.schema(schemas[name]).parquet(f"{tables_dir}/{name}"), plan.current)

    def small(name: str):
        """A per-run table of a few rows per run, read through one partition: its aggregates then need no
        shuffle (one partition is grouped by any key), and each shuffle is a stage of fixed cost."""
        return stored(name).drop("run_folder", "ingest_id").coalesce(1)

    lines = stored("lines")
    records = lines.where(F.col("kind") == "records").drop("reason", "line", "kind")
    rejects = lines.where(F.col("kind") == "rejects").select("source_file", "reason", "line")
    # regressions read these few columns of the records (and the flaky fold its own): Parquet reads no other
    cases = records.where(is_case()).select(
        "run_folder", "run_id", "target", "suite", "case", "outcome", "started", "config_fault", "message")
    metas = run_metas(stored("manifest"))

    cached_fine = stored("run_counts").drop("run_folder", "ingest_id").cache()
    # Most queries after this one read the fine counts or what is cached from them: small tables, each query a
    # few stages per shuffle, and most of a stage's time is Spark's fixed cost. Read through one partition, they
    # need no shuffle (one partition is already grouped by any key). Measured in paired runs (medians of 3): the
    # whole job 2-5% faster on the 1M-row benchmark, 5% (2 s) on a few thousand rows. Large fine counts keep their
    # partitions, so that a cluster aggregates them in parallel. A table on this machine says its row count in its
    # files' footers; elsewhere Spark counts it (a job).
    rows = store.local_row_count(f"{tables_dir}/run_counts")
    fine = cached_fine.coalesce(1) if (rows if rows is not None else cached_fine.count()) <= SINGLE_PARTITION_ROWS \
        else cached_fine
    cubed = cube(fine).cache()
    # every aggregate but the runs table reads the suites' cases only (see FUZZ_SUITE and BENCH_SUITE)
    suites = cubed.where(is_case())
    fine_cases = fine.where(is_case())
    versions = run_versions(suites).cache()
    runs = runs_table(cubed, metas).cache()
    truns = target_runs(suites, runs).cache()
    fuzz = fuzz_records(small("run_fuzz"), runs).cache()
    # the findings are the cases behind the conformance cells: cached, or the findings' query would run the
    # conformance query again inside it (measured on the 1M-row benchmark: findings 8-11 s before, under 1 s after)
    conformance_cells = conformance(fine_cases, runs, catalog_ids).cache()
    # the runs regressions compare, known before its query is planned: a filter on them skips the other runs'
    # records where they are read. Collecting them fills the caches of cubed, versions, runs and truns, one after
    # another, before the tables built on them run side by side; fuzz and the conformance cells fill theirs as the
    # first tables written (a count of each first would be a Spark job more, for nothing shown).
    # ... with the run folders that hold them (in the same job): the records regressions reads are then those runs'
    # files alone (a filter on the partition column), not a file of every run opened to skip its rows
    # ... and, in the same job, the runs whose records the version tables read (reports/versions_table.py)
    versions_plan = versions_table.plan(fine_cases, runs)
    compared_ids = (latest_pairs(truns).select(F.explode(F.array("run_id", "prev_run_id")).alias("run_id"))
                    .withColumn("why", F.lit("regressions"))
                    .unionByName(versions_plan.needed_runs().withColumn("why", F.lit("versions"))))
    held = (stored("run_counts").select("run_folder", "run_id").join(F.broadcast(compared_ids), "run_id")
            .distinct().collect())
    compared = sorted({r["run_id"] for r in held if r["why"] == "regressions"})
    compared_folders = sorted({r["run_folder"] for r in held if r["why"] == "regressions"})
    version_folders = sorted({r["run_folder"] for r in held if r["why"] == "versions"})
    flaky_cases = flaky_state(spark, tables_dir, plan, records, versions, log, here)
    t = stage("shared aggregates (from the per-run counts)", t)

    tables = {
        "runs": runs,
        "trend": trend(suites, truns, versions),
        "pass_rate": _pass_rate(_sum_counts(suites, ["target", "suite"])),
        "conformance": conformance_cells,
        "findings": findings(small("run_findings"), conformance_cells),
        "flaky": flaky(flaky_cases),
        "regressions": regressions(cases.where(F.col("run_folder").isin(*compared_folders)), truns, versions,
                                   compared),
        "durations": durations(small("run_durations")),
        "fuzz_sessions": fuzz_sessions(fuzz),
        "fuzz_products": fuzz_products(fuzz),
        "fuzz_findings": fuzz_findings(fuzz),
        "recovery": recovery(small("run_recovery"), runs),
        "benchmarks": benchmarks(small("run_bench"), runs),
        "type_interop": type_interop(small("run_types"), truns),
        "network": network(small("run_network"), truns),
        "mutation": mutation(small("run_mutation"), runs),
        **versions_table.tables(versions_plan, records.where(is_case() & F.col("run_folder").isin(*version_folders))),
    }
    tables["fault_checks"], tables["checkers"] = fault_checks(fine_cases)
    data = _write_and_collect(tables, rejects, tables_dir, timings, log, here=here)
    stage("aggregates (-> Parquet tables, collected for the report)", t)
    data["totals"] = [{"records": sum(r["cases"] + r["fuzz_records"] + r["bench_records"] for r in data["runs"]),
                       "rejects": data["reject_count"][0]["n"],
                       "files": len(plan.current), "runs": len(data["runs"])}]
    # dependents first: uncaching a base would re-cache what was built on it
    versions_plan.unpersist()
    for df in (flaky_cases, conformance_cells, fuzz, truns, runs, versions, cubed, cached_fine):
        df.unpersist()
    tables["records"], tables["rejects"] = records, rejects
    return tables, data


# tables built on a cache that other tables read too (findings on the conformance cells): written before the others
FIRST_TABLES = ("conformance", "fuzz_sessions")


def _report_order() -> dict[str, tuple[list[str], int | None]]:
    """Table -> (sort order, row limit) of the rows the HTML report shows; `-name` sorts descending."""
    from reports import versions_table

    return {
        "runs": (["run_index"], None),
        "conformance": (["clause", "target"], None),
        "pass_rate": (["target", "suite"], None),
        "flaky": (["-flips", "-fails", "target", "case"], MAX_LISTED),
        "trend": (["run_index", "target"], None),
        "regressions": (["-run_index", "kind", "target", "case"], MAX_LISTED),
        "durations": (["target", "suite"], None),
        "fault_checks": (["target", "fault_label"], None),
        "checkers": (["target", "checker"], None),
        "fuzz_sessions": (["target", "mode", "role", "deliberate_break"], None),
        "fuzz_findings": (["-last_run_index", "-sessions", "signature", "target"], None),
        "fuzz_products": (["role", "vendor", "version", "deliberate_break"], None),
        "recovery": (["target", "suite", "fault"], None),
        "benchmarks": (["bench", "scenario", "clients", "vendor"], None),
        "type_interop": (["target", "via", "sender_stack", "receiver_stack", "type", "section"], None),
        "network": (["case", "target"], None),
        "mutation": (["group"], None),
        "findings": (["target", "clause", "outcome", "case"], FINDINGS_LISTED),
        **versions_table.REPORT_ORDER,
    }


def _write_and_collect(tables: dict, rejects, tables_dir: str, timings: dict[str, float],
                       log: Callable[[str], None], here: bool = False) -> dict[str, list[dict]]:
    """Write each aggregate as a Parquet table and collect its rows for the report; the rejected lines' reasons and
    first lines too.

    `here` (the store is a folder of this machine and Spark runs on it too, see _writes_here): each table is
    collected once, as Arrow, and this process writes its Parquet file. Otherwise Spark writes it from a cache and
    the rows are collected from that cache: two jobs per table instead of one. The aggregates are small (a few
    rows per target and clause, case or run), and a small job costs Spark a fixed 0.2-0.5 s whatever its size."""
    from concurrent.futures import ThreadPoolExecutor

    from reports import store

    order = _report_order()

    def one(name: str) -> list[dict]:
        t0 = time.monotonic()
        if here:
            table = tables[name].toArrow()
            store.write_parquet_here(table, f"{tables_dir}/{name}")
            rows = arrow_rows(table, *order[name])
        else:
            shared = tables[name].is_cached  # cached by the caller for other tables too: the caller uncaches it
            df = tables[name].cache()
            df.write.mode("overwrite").parquet(f"{tables_dir}/{name}")
            rows = _rows(df, *order[name])
            if not shared:
                df.unpersist()
        timings[f"  {name}"] = round(time.monotonic() - t0, 3)
        log(f"  {name}: {timings[f'  {name}']:.2f}s")
        return rows

    with ThreadPoolExecutor(WRITERS, thread_name_prefix="report-table") as pool:
        # the tables whose caches others read go first, one per writer: each fills its cache as it is written
        futures = {name: pool.submit(one, name) for name in FIRST_TABLES}
        for name in FIRST_TABLES:
            futures[name].result()
        futures.update({name: pool.submit(one, name) for name in tables if name not in futures})
        futures["reject_reasons"] = pool.submit(_rows, rejects.groupBy("reason").count(), ["-count", "reason"])
        futures["rejects"] = pool.submit(_rows, rejects, ["source_file"], 50)
        data = {name: future.result() for name, future in futures.items()}
    data["reject_count"] = [{"n": sum(r["count"] for r in data["reject_reasons"])}]
    for row in data["runs"]:
        for key in ("run_start", "first_case", "last_case"):
            row[key] = row[key].isoformat(timespec="seconds") + "Z" if row.get(key) else None
    for row in data["trend"]:
        row["run_start"] = row["run_start"].isoformat(timespec="seconds") + "Z" if row.get("run_start") else None
    return data


def _writes_here(spark, tables_dir: str) -> bool:
    """Whether this process may write the store's aggregate tables itself: the store is a folder of this machine
    (file:) and Spark runs here too, in this process or as a Spark Connect server on this machine (its file: is
    this machine's). A server elsewhere writes them, as it writes the rest of the store."""
    if not tables_dir.startswith("file:"):
        return False
    if not type(spark).__module__.startswith("pyspark.sql.connect"):
        # a classic session: here unless a cluster manager runs its executors
        return spark.sparkContext.master.startswith("local")
    try:
        host = spark.client._builder.host  # Spark Connect: the server's address (sc://HOST:PORT)
    except AttributeError:
        return False
    return host in ("localhost", "127.0.0.1", "::1", "[::1]")
