"""The store's per-run tables: what depends on one run alone, made once from that run's records as it is read
into the store (reports/store.py), and their schemas.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from reports.job.aggregates import fine_counts
from reports.job.ingest import INGEST_ID_FIELDS, UNIQUE_COLUMNS, checked_lines, ingest, line_schema
from reports.job.records import BENCH_SUITE, FUZZ_SUITE, MUTATION_SUITE, NETWORK_SUITE, TYPES_SUITE
from reports.job.session import WRITERS, _listed_by_driver
from reports.job.tables.bench import bench_rows
from reports.job.tables.durations import duration_buckets
from reports.job.tables.faults import recovery_rows
from reports.job.tables.findings import FINDINGS, finding_rows
from reports.job.tables.fuzz import fuzz_rows
from reports.job.tables.interop import network_rows, type_rows
from reports.job.tables.mutation import mutation_rows
from reports.store import Plan


# what depends on one run alone, computed once per run from its records and kept in the store
# the per-run tables made from the few records whose details they decode, and those records' suites (the recovery
# table's records are found by their resume_s column)
DECODED_TABLES = ("run_recovery", "run_fuzz", "run_bench", "run_types", "run_network", "run_mutation", "run_findings")
DECODED_SUITES = (FUZZ_SUITE, BENCH_SUITE, TYPES_SUITE, NETWORK_SUITE, MUTATION_SUITE)
# the columns the other per-run tables read
COUNTED_COLUMNS = ("run_folder", "ingest_id", "run_id", "target", "suite", "case", "spec", "cell", "config_fault",
                   "peers", "fault_name", "checks", "outcome", "difference_of", "started", "duration_s")
PER_RUN_TABLES = {"run_counts": fine_counts, "run_durations": duration_buckets, "run_recovery": recovery_rows,
                  "run_fuzz": fuzz_rows, "run_bench": bench_rows, "run_types": type_rows,
                  "run_network": network_rows, "run_mutation": mutation_rows, "run_findings": finding_rows}
_SCHEMAS: dict[str, object] = {}  # this process's, found once (every session here runs the same code)


def _stored_schemas(spark) -> dict[str, object]:
    """The schema of each per-run table: what the code that writes it produces, found by planning it over an empty
    relation (no job runs). A table is read with it, never by inferring one from files: a table with no row for
    any run has no file to infer from.

    Planning them costs 0.7 s in a warm JVM and 2 s in a new one (a tenth of a nightly report on a warm Spark
    Connect server), and gives the same answer until this code or Spark changes. So the answer is kept in the
    report's cache folder (reports/jvm.py's), under a name made of the digest of the modules that define the
    tables and Spark's version; a file that cannot be read or written only means planning them again."""
    if not _SCHEMAS:
        import json
        from hashlib import sha256

        from pyspark import __version__ as spark_version
        from pyspark.sql.types import StructType

        from reports import jvm, store

        from harness import record_schema
        from reports import record_fields

        digest = sha256(spark_version.encode())
        # every module that defines a table or the records it reads (this package, the store, the record schema)
        job = Path(__file__).parent
        for module in (*sorted(job.rglob("*.py")), store.__file__, record_schema.__file__, record_fields.__file__):
            digest.update(Path(module).read_bytes())
        cached = jvm.cache_dir() / f"report-schemas-{digest.hexdigest()[:16]}.json"
        try:
            _SCHEMAS.update({name: StructType.fromJson(value)
                             for name, value in json.loads(cached.read_text()).items()})
        except (OSError, ValueError, KeyError, TypeError):
            _SCHEMAS.update(_planned_schemas(spark))
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                temporary = cached.with_suffix(f".{os.getpid()}.tmp")  # whole or absent, for a report beside this
                temporary.write_text(json.dumps({name: schema.jsonValue() for name, schema in _SCHEMAS.items()}))
                temporary.replace(cached)
            except OSError:
                pass
    return _SCHEMAS


def _planned_schemas(spark) -> dict[str, object]:
    from reports.store import literal_rows, manifest_schema

    empty_lines = literal_rows(spark, [], [(f.name, f.dataType) for f in line_schema().fields])
    lines = checked_lines(empty_lines.withColumn("_metadata", _empty_metadata()),
                          literal_rows(spark, [], INGEST_ID_FIELDS))
    records = lines.where("kind = 'records'")
    return {"lines": lines.schema, **{name: make(records).schema for name, make in PER_RUN_TABLES.items()},
            "manifest": manifest_schema()}


def _empty_metadata():
    from pyspark.sql import functions as F

    return F.struct(F.lit("").alias("file_path"))


def store_tables() -> tuple[str, ...]:
    """Every table of the store, each row of which belongs to one run (reports/store.py)."""
    return ("lines", *PER_RUN_TABLES, "manifest")


def ingest_runs(spark, tables_dir: str, plan: Plan, schemas: dict, log: Callable[[str], None],
                here: bool) -> None:
    """Read the plan's new and changed runs into the store: their lines, then their per-run tables from those lines
    (the Parquet just written: each reads only its columns), then their manifest rows, last, so that a run is in
    the manifest only once all its tables are (see reports/store.py)."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql import functions as F

    from reports import store

    runs = plan.to_read
    if plan.fresh:
        store.remove_old_layout(tables_dir, store_tables())
    else:
        store.drop_local_partitions(tables_dir, store_tables(), [r.run_folder for r in plan.changed], log)
    ids = {r.run_folder: r.ingest_id for r in runs}
    files = [r.results for r in runs]
    with _listed_by_driver(spark, files):
        checked = ingest(spark, files, ids)
    # Every line is parsed once and written once: records and rejected lines side by side, partitioned by run and
    # kind. Not cached: the per-run tables read the Parquet this leaves.
    writer = (checked.write.mode("overwrite").option("partitionOverwriteMode", "static" if plan.fresh else "dynamic")
              .partitionBy("run_folder", "kind"))
    for column in UNIQUE_COLUMNS:
        writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
    t = time.monotonic()
    writer.parquet(f"{tables_dir}/lines")
    log(f"  store: {len(runs)} run(s) read into {tables_dir}/lines: {time.monotonic() - t:.2f}s")

    lines = store.with_current(spark.read.schema(schemas["lines"]).parquet(f"{tables_dir}/lines")
                               .where(F.col("run_folder").isin(*ids)), ids)
    records = lines.where(F.col("kind") == "records")
    # Two reads of the new lines, not one per table: the columns the counting tables read, and the few records
    # whose details other tables decode (recovery, fuzz, benchmark and type records), each cached for its tables.
    # The first tables' jobs fill the caches (a job that needs a cached partition another is computing waits for
    # it): a count of each first was two jobs more, 0.2-0.3 s of a nightly report (four paired runs).
    t = time.monotonic()
    counted = records.select(*COUNTED_COLUMNS).cache()
    decoded = records.where(F.col("resume_s").isNotNull() | F.col("suite").isin(*DECODED_SUITES)
                            | F.col("outcome").isin(*FINDINGS)).cache()
    per_run = {name: make(decoded if name in DECODED_TABLES else counted) for name, make in PER_RUN_TABLES.items()}
    replaced = list(ids)

    def write(df, name: str) -> None:
        # a few rows per run: collected (one Spark job) and written here, else written by Spark
        if here:
            store.write_per_run_here(df.coalesce(1).toArrow(), f"{tables_dir}/{name}", plan.fresh, replaced)
        else:
            store.write_per_run(df, f"{tables_dir}/{name}", plan.fresh, schemas[name], replaced)

    with ThreadPoolExecutor(WRITERS, thread_name_prefix="report-store") as pool:
        for future in [pool.submit(write, df, name) for name, df in per_run.items()]:
            future.result()
    for df in (counted, decoded):
        df.unpersist()
    log(f"  store: per-run tables ({', '.join(per_run)}): {time.monotonic() - t:.2f}s")
    t = time.monotonic()
    manifest = store.manifest_table_here(runs) if here else None
    if manifest is not None:
        store.write_per_run_here(manifest, f"{tables_dir}/manifest", plan.fresh, replaced)
    else:
        write(store.manifest_rows(spark, runs), "manifest")
    log(f"  store: manifest: {time.monotonic() - t:.2f}s")
