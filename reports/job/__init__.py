"""The Spark job: result records of any number of runs -> Parquet tables and the report's aggregates.

Input is result records only (schema 1, one JSON object per line in `results.jsonl`, `run.json` beside it); of the
harness, only its declaration of a record's fields is read (harness/record_schema.py, pure Python). Stages:

  store      find the runs among the inputs and compare them with the store's manifest (reports/store.py): a run
             is read only when it is new or its files changed since the last report into the same --out
  ingest     read those runs' results.jsonl as text, parse each line against the record schema; lines that are
             not schema-1 records (torn, garbled, wrong types) are set aside with the reason, never fatal; older
             records are migrated to the current form (ingest.py). Written as the store's `lines` (one partition
             per run), then what depends on that run alone (per_run.py): run_counts (outcome counts per run,
             target, suite, clause list, cell, fault), run_recovery, run_fuzz, ..., manifest
  aggregate  over every run in the store, from those per-run tables (and the records' few columns for the
             per-case tables): runs, conformance (target x clause, latest run of each target), pass_rate
             (target x suite), flaky (same target, version and case both passing and failing: flaky.py), trend
             (run x target), regressions (case outcome vs the target's previous run), durations (p50/p95),
             fault_checks, checkers, recovery (lost, duplicated, time to resume per fault), fuzz_sessions and
             fuzz_findings (`interop fuzz` records, kept out of every other aggregate); and what changes between
             two releases of a product, mixed-release cases and rolling upgrades (reports/versions_table.py)

Modules: session.py (the Spark session and its settings), records.py (outcomes, suites), ingest.py, per_run.py,
aggregates.py, flaky.py, tables/ (one module per kind of table), rows.py (collecting rows) and run.py (run_job:
the orchestration and the writers).

A "target" is the set of peers a case ran against, e.g. `router=reference` or
`router=reference + broker=rabbitmq`: the report compares targets. Only Spark SQL functions and the DataFrame API
are used: no Python UDFs (the executors of a cluster need no Python code of this project) and no SparkContext or
JVM gateway (the job runs the same through Spark Connect).

Run it as `interop report`, `python -m reports`, or `spark-submit reports/submit.py ...` (see docs/report.md).
This package re-exports what callers import from it.
"""

from harness.record_schema import PEERS_MAP
from reports.job.ingest import line_schema, peers_target, record_schema
from reports.job.per_run import PER_RUN_TABLES, store_tables
from reports.job.records import (BAD, BENCH_SUITE, CLIENT_XFAIL, COUNTED_OUTCOMES, FUZZ_SUITE, MUTATION_SUITE,
                                 NETWORK_SUITE, NOT_CASES, OUTCOMES, TYPES_SUITE, is_case)
from reports.job.rows import _rows, arrow_rows
from reports.job.run import Result, _report_order, _writes_here, run_job
from reports.job.session import CODEGEN_CACHE_ENTRIES, SESSION_SQL, WRITERS, ReportError, _stderr_to, spark_session

__all__ = ["BAD", "BENCH_SUITE", "CLIENT_XFAIL", "CODEGEN_CACHE_ENTRIES", "COUNTED_OUTCOMES", "FUZZ_SUITE",
           "MUTATION_SUITE", "NETWORK_SUITE", "NOT_CASES", "OUTCOMES", "PEERS_MAP", "PER_RUN_TABLES", "SESSION_SQL",
           "TYPES_SUITE", "WRITERS", "ReportError", "Result", "_report_order", "_rows", "_stderr_to", "_writes_here",
           "arrow_rows", "is_case", "line_schema", "peers_target", "record_schema", "run_job", "spark_session",
           "store_tables"]
