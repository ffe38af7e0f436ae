"""The Spark job: result records of any number of runs -> Parquet tables and the report's aggregates.

Input is result records only (schema 1, one JSON object per line in `results.jsonl`, `run.json` beside it);
nothing here imports the harness. Stages:

  store      find the runs among the inputs and compare them with the store's manifest (reports/store.py): a run
             is read only when it is new or its files changed since the last report into the same --out
  ingest     read those runs' results.jsonl as text, parse each line against the record schema; lines that are
             not schema-1 records (torn, garbled, wrong types) are set aside with the reason, never fatal. Written
             as the store's `lines` (one partition per run), then what depends on that run alone: run_counts
             (outcome counts per run, target, suite, clause list, cell, fault), run_recovery, run_fuzz, manifest
  aggregate  over every run in the store, from those per-run tables (and the records' few columns for the
             per-case tables): runs, conformance (target x clause, latest run of each target), pass_rate
             (target x suite), flaky (same target, version and case both passing and failing), trend
             (run x target), regressions (case outcome vs the target's previous run), durations (p50/p95),
             fault_checks, checkers, recovery (lost, duplicated, time to resume per fault), fuzz_sessions and
             fuzz_findings (`interop fuzz` records, kept out of every other aggregate); and what changes between
             two releases of a product, mixed-release cases and rolling upgrades (reports/versions_table.py)

A "target" is the set of peers a case ran against, e.g. `router=reference` or
`router=reference + broker=rabbitmq`: the report compares targets. Only Spark SQL functions and the DataFrame API
are used: no Python UDFs (the executors of a cluster need no Python code of this project) and no SparkContext or
JVM gateway (the job runs the same through Spark Connect).

Run it as `interop report`, `python -m reports`, or `spark-submit reports/job.py ...` (see README).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file (spark-submit reports/job.py): make `reports` importable, and
    # keep this folder off the path so that its modules cannot shadow others
    _here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p and str(Path(p).resolve()) != _here]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports.store import Found, Plan  # noqa: E402

OUTCOMES = ("passed", "failed", "error", "skipped", "not-applicable", "xfail")
# An expected difference that belongs to a client stack, not to the peers (suites/expected/client-<stack>.yaml: the
# plugin's xfail reason then reads "expected difference: client-<stack>: ..."). Counted as an outcome of its own,
# `client-xfail`, so that a vendor's pass rate counts only what the vendor answers for: a Proton C++ decimal or a
# rhea ulong says nothing about the broker in between. The client stacks' own table shows them.
CLIENT_XFAIL = "client-xfail"
COUNTED_OUTCOMES = (*OUTCOMES, CLIENT_XFAIL)
BAD = ("failed", "error")
SHUFFLE_PARTITIONS = 4
CONFORMANCE_ORDER = ("failed", "xfail", "passed", "not-applicable", "client-difference", "not run")
SINGLE_PARTITION_ROWS = 1_000_000  # fine counts up to this many rows are read through one partition (run_job)
MAX_LISTED = 500  # rows of a per-case list (flaky, regressions, rejects) collected for the HTML report
# rows of the findings (every failure and recorded difference behind a conformance cell, with its reason and
# evidence) collected for the HTML report: a cell of four types cells x three stacks has a few hundred
FINDINGS_LISTED = 5000
# The suite of `interop fuzz` records. A fuzz session is not a conformance case: it is a seeded, time-boxed search
# whose outcome says "found something in N programs", cites no clause, and lasts as long as its budget; a finding
# record per signature appears only when one is found. Counted as cases, they would move a target's pass rate and
# durations by how long someone fuzzed, and a finding would show as a new failing case (a regression) or, found by
# one seed and not the next, as a flaky one. So every conformance aggregate leaves them out, a run counts them apart
# (runs.fuzz_records), and they have tables of their own: fuzz_sessions and fuzz_findings.
FUZZ_SUITE = "fuzz"
# The suite of benchmark records (bench/routing.py --results): figures of a scenario, not a case that conforms or
# not. Kept out of every conformance aggregate like fuzz records, counted apart (runs.bench_records), and shown in
# a table of their own (benchmarks).
BENCH_SUITE = "bench"
# The suite of mutation-score records (bench/mutation.py): one per group of reference modules per job, with the
# score and the mutant counts in details. A measurement of the suites, not a case: kept out of every conformance
# aggregate like the benchmarks (counted with them in runs.bench_records), shown in a table of its own (mutation).
MUTATION_SUITE = "mutation"
NOT_CASES = (FUZZ_SUITE, BENCH_SUITE, MUTATION_SUITE)
# The suite of type interop cases (suites/types): they are conformance cases like any other, and their details
# (type family, section, sender and receiver client stack) also make a table of their own (type_interop).
TYPES_SUITE = "types"
# The suite of the networks of brokers (suites/network): conformance cases like any other, whose details (messages
# lost and duplicated, seconds until forwarding resumed after a link outage or a broker's kill) also make a table of
# their own, per case and target (network), so that vendors' networks compare case by case.
NETWORK_SUITE = "network"


def is_case():
    """A record of a suite's case (not a fuzz session's or a benchmark's)."""
    from pyspark.sql import functions as F

    return ~F.col("suite").isin(*NOT_CASES)


class ReportError(Exception):
    """A user mistake (no input found, unreadable output folder): one line, no traceback."""


# ---- session ---------------------------------------------------------------------------------------------------


# SQL settings of every session, also set on a Spark Connect session (they are runtime settings)
SESSION_SQL = {
    "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",  # a bad value in a record is a null, never a crash
    # lower() through the JVM, not ICU: the values lowered are ASCII words (fault_checks), and loading ICU's case
    # mapping costs 2 s the first time (measured: a first lower() 2.4-2.7 s with ICU, 0.4-0.5 s without; a report
    # of 2,000 records 5% faster, paired runs; on a million, lost in the noise)
    "spark.sql.icu.caseMappings.enabled": "false",
    "spark.sql.adaptive.enabled": "true",
    # collect_set/max_by groups: keep hash aggregation (the default falls back to sorting a million rows once a
    # task holds more than 128 groups)
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "1000000",
    # the store's lines are written partitioned by run and kind: with concurrent writers Spark need not sort a
    # million rows by partition first
    "spark.sql.maxConcurrentOutputFileWriters": "4",
    # run folders are names, never numbers or dates: a folder called 2026 stays the string "2026"
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}

# Spark keeps the classes it compiles for a query's generated code in a cache of this many entries (a static
# setting: fixed when the JVM starts; Spark's default is 100). One report compiles about 375 (counted by Spark's
# CodegenMetrics on the 1M-row benchmark): with 100, a report evicted its own classes and compiled 25 of them again,
# and a Spark that makes report after report (a Spark Connect server) compiled all of them again every night, a
# fifth of a warm report's CPU time (Janino in a JFR profile). With room for all of them, the second report on one
# JVM compiled 2 classes, not 399, and took 5.7 s instead of 6.6-7.8 (the same store and run, one JVM).
CODEGEN_CACHE_ENTRIES = 1000


def spark_session(master: str | None = None, app_name: str = "interop-report",
                  log: Callable[[str], None] = lambda _: None, remote: str | None = None,
                  jvm_log: Path | None = None, conf: dict[str, str] | None = None):
    """A SparkSession: local[*] unless a master is given (or spark-submit set one), or a Spark Connect session when
    `remote` (sc://HOST:PORT) is given. Where this process starts the JVM (not under spark-submit, not remote), it
    picks the JDK and options of reports/jvm.py, and with `jvm_log` the JVM's own output (its start-up warnings,
    log4j's, Hadoop's) goes to that file instead of the terminal: what fails still reaches the caller as an
    exception. `conf`: Spark settings of the caller's for a session this process starts, set after the report's
    SQL settings (a `spark.driver.extraJavaOptions` among them comes before the JVM options of reports/jvm.py)."""
    from pyspark.sql import SparkSession

    if remote:
        if master:
            raise ReportError("--remote and --master exclude each other: a Spark Connect server has its own master")
        import socket
        import warnings
        from urllib.parse import urlparse

        # The Connect client retries a refused connection for minutes; a server that is not there is said at once.
        where = urlparse(remote.split(";", 1)[0])
        if where.scheme != "sc" or not where.hostname:
            raise ReportError(f"--remote {remote}: expected sc://HOST:PORT")
        try:
            socket.create_connection((where.hostname, where.port or 15002), timeout=10).close()
        except OSError as exc:
            raise ReportError(f"--remote {remote}: cannot reach a Spark Connect server there: "
                              f"{exc.strerror or exc}") from None
        # the runs table numbers every run with one window over all of them, on purpose (a few hundred rows); the
        # Connect client warns about such windows on every report
        warnings.filterwarnings("ignore", message=".*No Partition Defined for Window operation.*")
        spark = SparkSession.builder.remote(remote).getOrCreate()
        for key, value in SESSION_SQL.items():
            spark.conf.set(key, value)
        return spark

    from pyspark import SparkContext

    from reports import jvm

    submitted = bool(os.environ.get("SPARK_ENV_LOADED")) or "pyspark-shell" not in os.environ.get(
        "PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    master = master or (None if submitted else "local[*]")
    if master is None or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = dict(conf or {})
    java_options = conf.pop("spark.driver.extraJavaOptions", "").split()
    builder = (SparkSession.builder.appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES)))
    for key, value in {**SESSION_SQL, **conf}.items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # local mode: the driver is the executor, and Spark's default 1 GiB heap makes a million rows crawl in GC
        builder = (builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.memory", os.environ.get("INTEROP_REPORT_DRIVER_MEMORY", "4g")))
    starting = not submitted and SparkContext._gateway is None  # this process is about to start the JVM
    if starting:
        try:
            jdk = jvm.choose_jdk()
        except ValueError as exc:
            raise ReportError(str(exc)) from None
        jvm.apply(jdk)
        options = java_options + jvm.java_options(jdk)
        log(f"JVM: {jdk.why}; options: {' '.join(options)}")
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(options))
    with _stderr_to(jvm_log if starting else None):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def _stderr_to(path: Path | None):
    """While the JVM starts, this process's file descriptor 2 is `path` (appended to): the JVM inherits it as its
    stderr and keeps it for its life. Python's own stderr is back on the terminal afterwards."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as target:
            os.dup2(target.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


# ---- ingest -----------------------------------------------------------------------------------------------------


# columns whose values hardly repeat: a Parquet dictionary for them is built only to be thrown away (measured: a
# tenth of the ingest's write)
UNIQUE_COLUMNS = ("started_at", "started", "duration_s")
RECORD_FIELDS = ("schema", "run_id", "case", "suite", "spec", "topology", "peers", "fault", "outcome", "duration_s",
                 "started_at", "details", "message", "host")
# A record's optional top-level field -> the column the aggregates read it as. Records written before these fields
# existed carry the same values in `details` under the column's name (`cell_peers` for the cell's target), so each
# column is the top-level field where there is one, else that details key: old and new runs report alike.
LIFTED = {"cell": "cell", "config_fault": "config_fault", "checks": "checks", "target": "cell_peers",
          "resume_s": "resume_s"}  # (in the order of the columns the store has always had)


def record_schema():
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("schema", T.LongType()),
        T.StructField("run_id", T.StringType()),
        T.StructField("case", T.StringType()),
        T.StructField("suite", T.StringType()),
        T.StructField("spec", T.ArrayType(T.StringType())),
        T.StructField("topology", T.StringType()),
        # role -> {vendor, version, provider}, kept as JSON text: building a map per row costs more than the rest
        # of the parse; it is decoded per distinct value (a handful per run) where versions are needed
        T.StructField("peers", T.StringType()),
        T.StructField("fault", T.StringType()),      # a name, or a fault object kept as its JSON text
        T.StructField("outcome", T.StringType()),
        T.StructField("duration_s", T.DoubleType()),
        T.StructField("started_at", T.StringType()),
        # free-form object: key -> value (a string as it is, anything else as its JSON text). Parsed here, with
        # the line, rather than kept as text and parsed again for the few keys the aggregates read: that second
        # parse cost more than a third of the whole ingest
        T.StructField("details", T.MapType(T.StringType(), T.StringType())),
        T.StructField("message", T.StringType()),
        T.StructField("host", T.StringType()),
        # optional top-level fields (harness.results.OPTIONAL_FIELDS); older records kept them in `details`
        *[T.StructField(name, T.DoubleType() if name == "resume_s" else T.StringType()) for name in LIFTED],
    ])


INGEST_ID_FIELDS = [("run_folder", "string"), ("ingest_id", "string")]


def line_schema():
    from pyspark.sql import types as T

    return T.StructType([*record_schema().fields, T.StructField("_corrupt", T.StringType())])


def ingest(spark, files: list[str], ingest_ids: dict[str, str]):
    """Every line of the results.jsonl files, parsed by Spark's JSON reader, with `reason` set on the lines that are
    not schema-1 records (and `_corrupt` holding the text of those that are not JSON), and the run folder and
    ingest id of the store (reports/store.py) it is kept under."""


    from reports.store import literal_rows

    parsed = (spark.read.schema(line_schema())
              .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt")
              .json(files))
    ids = literal_rows(spark, [{"run_folder": k, "ingest_id": v} for k, v in ingest_ids.items()], INGEST_ID_FIELDS)
    return checked_lines(parsed, ids)


def checked_lines(parsed, ingest_ids):
    """The checks and derived columns of `ingest` on parsed lines (also applied to an empty relation, for the
    store's schema). `ingest_ids` is a small DataFrame of run_folder -> ingest_id: joined by a broadcast hash join
    (a literal map would be searched key by key on every line)."""
    from pyspark.sql import functions as F

    from reports.store import run_folder_of_path

    parsed = (parsed.select("*", F.col("_metadata.file_path").alias("_file"))
              .withColumn("run_folder", run_folder_of_path(F.col("_file")))
              .join(F.broadcast(ingest_ids), "run_folder", "left")
              # parsed once: the check below and the aggregates' `started` column
              .withColumn("started", F.col("started_at").cast("timestamp")))
    c = F.col
    required = ("run_id", "case", "suite", "outcome", "started_at")
    corrupt = F.trim("_corrupt")
    reason = (F.when(c("_corrupt").isNotNull() & ~(corrupt.startswith("{") & corrupt.endswith("}")),
                     F.lit("not a JSON record (a torn or garbled line)"))
              .when(c("_corrupt").isNotNull(), F.lit("a field has the wrong type"))
              .when(c("schema").isNull() | (c("schema") != 1), F.lit("schema: expected 1")))
    for name in required:
        # `== ""`, not length() == 0: length counts characters, a scan of the string
        reason = reason.when(c(name).isNull() | (c(name) == ""), F.lit(f"{name}: missing, empty or not a string"))
    reason = (reason.when(~c("outcome").isin(*OUTCOMES),
                          F.concat(F.lit("outcome: unknown value "), F.substring("outcome", 1, 40)))
              .when(c("duration_s").isNull() | F.isnan("duration_s") | (c("duration_s") < 0),
                    F.lit("duration_s: missing or not a number >= 0"))
              .when(~c("started_at").endswith("Z") | c("started").isNull(),
                    F.lit("started_at: not an ISO-8601 UTC time"))
              .when(c("peers").isNull() | ~c("peers").startswith("{"),
                    F.lit("peers: missing or not an object of role to {vendor, ...}")))
    # the file a line came from is kept for rejected lines only: a record names its run, and copying the path
    # into every row costs a tenth of the parse
    checked = _derive(parsed.withColumn("reason", reason)
                      .withColumn("source_file", F.when(c("reason").isNotNull(), c("_file"))))
    # `line` keeps the text of a rejected line (up to 300 characters; the raw `_corrupt` column is not kept)
    line = F.substring(F.coalesce("_corrupt", F.to_json(F.struct(*RECORD_FIELDS))), 1, 300)
    return (checked.withColumn("line", F.when(F.col("reason").isNotNull(), line))
            .withColumn("kind", F.when(F.col("reason").isNull(), "records").otherwise("rejects"))
            .drop("_corrupt", "_file"))


PEERS_MAP = "map<string, struct<vendor: string, version: string, provider: string>>"
MAX_ROLES = 8  # roles named one by one in a target decoded from `peers`; more are summed up as "N more roles"


def peers_target(peers_json):
    """`broker=rabbitmq + router=reference` from a record's peers (JSON text).

    Built from functions Spark compiles into the query's generated code: one lambda or from_json in a projection
    makes Spark evaluate that whole projection row by row, and this one runs over every record (it costs a tenth
    of the ingest). Hence the JSON text goes through a variant, and the roles are taken by position."""
    from pyspark.sql import functions as F

    as_map = F.try_variant_get(F.try_parse_json(peers_json), "$", PEERS_MAP)
    entries = F.sort_array(F.map_entries(as_map))  # by role
    named = [F.when(F.size(entries) > i, F.concat(entries[i]["key"], F.lit("="), entries[i]["value"]["vendor"]))
             for i in range(MAX_ROLES)]
    more = F.when(F.size(entries) > MAX_ROLES,
                  F.concat((F.size(entries) - MAX_ROLES).cast("string"), F.lit(" more roles")))
    return F.concat_ws(" + ", *named, more)


def _roles_in_order(cell_peers):
    """`router=x,broker=y` -> `broker=y + router=x`. A cell has one or two roles, put in order by comparing the
    parts; only a longer list is split into an array and sorted (that costs several times as much per record)."""
    from pyspark.sql import functions as F

    first, last = F.substring_index(cell_peers, ",", 1), F.substring_index(cell_peers, ",", -1)
    return (F.when(~cell_peers.contains(","), cell_peers)
            .when(F.concat(first, F.lit(","), last) == cell_peers,
                  F.when(first <= last, F.concat(first, F.lit(" + "), last))
                  .otherwise(F.concat(last, F.lit(" + "), first)))
            .otherwise(F.array_join(F.sort_array(F.split(cell_peers, ",")), " + ")))


def _derive(records):
    """Per-row columns the aggregates group by: target, cell, deliberate config fault, checker counts, fault name.
    Cheap string functions only: this runs once per record."""
    from pyspark.sql import functions as F

    # The target is the cell's choice of vendor per role where the record says it (interop run tags every record
    # with its target, `details.cell_peers` in older records), else the peers the case itself used (decoded only for
    # those records).
    chosen = _roles_in_order(F.col("cell_peers"))
    # (resume_s: a column of its own, so that the recovery table's input is found without reading every `details`)
    kept = [name for name in records.columns if name not in LIFTED]
    lifted = [F.coalesce(F.col(field).cast("string"), F.col("details")[column]).alias(column)
              for field, column in LIFTED.items()]
    return (records.select(*kept, *lifted)
            .withColumn("target", F.when(F.col("cell_peers") != "", chosen)
                        .when(F.col("peers").startswith("{") & (F.col("peers") != "{}"), peers_target(F.col("peers")))
                        .otherwise(F.lit("(no peers)")))
            .withColumn("spec", F.coalesce("spec", F.array().cast("array<string>")))
            # whose recorded difference an xfail is: the expected file's name the plugin put first in its reason
            # ("expected difference: rabbitmq: ..." or "...: client-cpp: ..."), else null
            .withColumn("difference_of", F.when(F.col("outcome") == "xfail", F.nullif(F.regexp_extract(
                "message", r"^expected difference: ([A-Za-z0-9_.+-]+): ", 1), F.lit(""))))
            .withColumn("fault_name", F.when(F.col("fault").startswith("{"), F.coalesce(
                F.get_json_object("fault", "$.name"), F.get_json_object("fault", "$.type"), F.lit("fault")))
                .otherwise(F.col("fault"))))


def run_versions(cubed):
    """(run_id, target) -> `broker 3.12.1 + router 0.1.0`: every version seen among the run's records of that
    target, from the few distinct `peers` values the cube kept. A case that errored before its peers started has
    no version of its own: it ran against these."""
    from pyspark.sql import functions as F

    entries = (cubed.select("run_id", "target", F.explode("peers_seen").alias("peers"))
               .select("run_id", "target", F.explode(F.from_json("peers", PEERS_MAP)).alias("role", "peer"))
               .where(F.col("peer.version").isNotNull()))
    per_role = entries.groupBy("run_id", "target", "role").agg(
        F.array_join(F.array_sort(F.collect_set("peer.version")), "/").alias("v"))
    return per_role.groupBy("run_id", "target").agg(
        F.array_join(F.array_sort(F.collect_list(F.concat_ws(" ", "role", "v"))), " + ").alias("run_version"))


def with_versions(records, versions):
    """`version` on every record: its run's versions of its target (a small table, broadcast)."""
    from pyspark.sql import functions as F

    return (records.join(F.broadcast(versions), ["run_id", "target"], "left")
            .withColumn("version", F.coalesce("run_version", F.lit("?"))).drop("run_version"))


def run_metas(manifest):
    """run.json facts per run (started/ended, interrupted, deliberate breaks, the role a fuzz session fuzzed), from
    the store's manifest."""
    return (manifest.where("run_id is not null")
            .select("run_id", "meta_started_at", "ended_at", "interrupted", "breaks", "fuzz_role")
            .dropDuplicates(["run_id"]))


# ---- aggregates ---------------------------------------------------------------------------------------------------


def _counts(df, keys: list[str], weight: str | None = None, extra: tuple = ()):
    """Case counts per outcome (columns passed, failed, error, skipped, not_applicable, xfail) and `cases`, then the
    `extra` aggregates."""
    from pyspark.sql import functions as F

    one = F.col(weight) if weight else F.lit(1)
    aggs = [F.sum(F.when(F.col("outcome") == o, one).otherwise(0)).cast("long").alias(o.replace("-", "_"))
            for o in COUNTED_OUTCOMES]
    return df.groupBy(*keys).agg(F.sum(one).cast("long").alias("cases"), *aggs, *extra)


def _sum_counts(df, keys: list[str], extra: tuple = ()):
    from pyspark.sql import functions as F

    names = ["cases", *[o.replace("-", "_") for o in COUNTED_OUTCOMES]]
    return df.groupBy(*keys).agg(*[F.sum(n).cast("long").alias(n) for n in names], *extra)


def counted_outcome():
    """A record's outcome as the counts see it: a client stack's recorded difference is `client-xfail`."""
    from pyspark.sql import functions as F

    return F.when(F.col("difference_of").startswith("client-"), F.lit(CLIENT_XFAIL)).otherwise(F.col("outcome"))


def _pass_rate(df):
    """passed / (passed + failed + error + xfail): a client stack's difference (client_xfail) is not the vendor's,
    and counts neither way, like skipped and not-applicable."""
    from pyspark.sql import functions as F

    executed = F.col("passed") + F.col("failed") + F.col("error") + F.col("xfail")
    return df.withColumn("pass_rate", F.when(executed > 0, F.round(F.col("passed") / executed, 4)))


def fine_counts(records):
    """The one pass over every record that runs, trend, pass rate, conformance and fault counts share: outcome
    counts per run, target, suite, spec list and fault (a few hundred rows per run, not ten thousand).

    Spark's fast (generated, hash) aggregation takes only aggregates whose state is a number: a string min/max falls
    back to sorting every record, a collect_set to its slower generic aggregation. So this pass groups by the string
    columns as well (a run has one or two cells, config faults and `peers` values per target and suite), and `cube`
    reduces those few rows to their min, max and set."""
    from pyspark.sql import functions as F

    # `checks` (details.checks: checker counts, on the few records of fault cases) is a key too, so that the
    # checker sums come from this pass instead of another scan of every record; the run folder and ingest id are
    # the store's (one of each per run)
    keys = ["run_folder", "ingest_id", "run_id", "target", "suite", "spec", "cell", "config_fault", "peers",
            "fault_label", "checks"]
    # an injected fault, else a deliberate config fault, else none
    records = (records.withColumn("fault_label", F.coalesce("fault_name", F.concat(F.lit("config: "), "config_fault")))
               .withColumn("outcome", counted_outcome()))
    return _counts(records, keys, extra=(
        F.min("started").alias("first_case"), F.max("started").alias("last_case"),
        F.sum("duration_s").alias("case_seconds")))


def cube(fine):
    """Outcome counts per run, target and suite (small): runs, trend and pass rate are sums of it."""
    from pyspark.sql import functions as F

    return _sum_counts(fine, ["run_id", "target", "suite"], extra=(
        F.min("first_case").alias("first_case"), F.max("last_case").alias("last_case"),
        F.sum("case_seconds").alias("case_seconds"), F.max("config_fault").alias("config_fault"),
        # min and max rather than collect_set: a run rarely has more than two cells with the same peers and suite,
        # and the list is only shown
        F.array_distinct(F.array_compact(F.array(F.min("cell"), F.max("cell")))).alias("cells"),
        F.collect_set("peers").alias("peers_seen")))


def runs_table(cubed, metas):
    """One row per run (ordered by start), with counts, targets and any deliberate breaks. A run's case counts and
    pass rate are its suites' cases; its fuzz records are counted apart, so a run of `interop fuzz` alone is listed
    (and ordered among the others) with no case."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    fuzz, bench = F.col("suite") == FUZZ_SUITE, F.col("suite").isin(BENCH_SUITE, MUTATION_SUITE)
    counts = ["cases", *[o.replace("-", "_") for o in COUNTED_OUTCOMES]]
    cubed = cubed.withColumns({"fuzz_records": F.when(fuzz, F.col("cases")).otherwise(0),
                               "bench_records": F.when(bench, F.col("cases")).otherwise(0),
                               **{n: F.when(fuzz | bench, 0).otherwise(F.col(n)) for n in counts}})
    runs = _pass_rate(_sum_counts(cubed, ["run_id"], extra=(
        F.sum("fuzz_records").cast("long").alias("fuzz_records"),
        F.sum("bench_records").cast("long").alias("bench_records"),
        F.min("first_case").alias("first_case"), F.max("last_case").alias("last_case"),
        F.array_sort(F.collect_set("target")).alias("targets"),
        F.array_sort(F.collect_set("config_fault")).alias("config_faults"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("cells")))).alias("cells"),
        F.sum("case_seconds").alias("case_seconds"))))
    if metas is not None:
        runs = runs.join(metas, "run_id", "left")
    else:
        runs = (runs.withColumn("meta_started_at", F.lit(None).cast("string"))
                .withColumn("ended_at", F.lit(None).cast("string"))
                .withColumn("interrupted", F.lit(None).cast("boolean"))
                .withColumn("breaks", F.array().cast("array<string>"))
                .withColumn("fuzz_role", F.lit(None).cast("string")))
    runs = runs.withColumn("run_start", F.coalesce(F.try_to_timestamp("meta_started_at"), F.col("first_case")))
    return runs.withColumn("run_index", F.row_number().over(Window.orderBy("run_start", "run_id"))) \
        .drop("meta_started_at")


def target_runs(cubed, runs):
    """(target, run) pairs with the target's previous run: the spine of trend and regressions."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pairs = cubed.select("target", "run_id").distinct().join(runs.select("run_id", "run_index", "run_start"), "run_id")
    w = Window.partitionBy("target").orderBy("run_index")
    return (pairs.withColumn("prev_run_index", F.lag("run_index").over(w))
            .withColumn("prev_run_id", F.lag("run_id").over(w))
            .withColumn("target_run_no", F.row_number().over(w))
            .withColumn("is_latest", F.col("target_run_no") == F.max("target_run_no").over(
                Window.partitionBy("target"))))


def trend(cubed, truns, versions):
    from pyspark.sql import functions as F

    per_run = _pass_rate(_sum_counts(cubed, ["target", "run_id"], extra=(F.max("config_fault").alias("config_fault"),)))
    return (per_run.join(truns.select("target", "run_id", "run_index", "run_start", "target_run_no"),
                         ["target", "run_id"])
            .join(versions.withColumnRenamed("run_version", "version"), ["target", "run_id"], "left"))


def conformance(fine, runs, catalog_ids: list[str]):
    """target x clause: the clause's status in the latest run of that target that ran a case citing it:
    failed (a case failed or errored) / xfail (a recorded difference of the vendor) / passed / not-applicable /
    client-difference (its only cases differ through a client stack: suites/expected/client-<stack>.yaml) / not run.
    A case citing two clauses counts for both."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_run = _sum_counts(fine.select("*", F.explode("spec").alias("clause")),
                          ["target", "run_id", "clause"]).join(runs.select("run_id", "run_index"), "run_id")
    latest = Window.partitionBy("target", "clause").orderBy(F.desc("run_index"))
    counted = (per_run.withColumn("n", F.row_number().over(latest)).where("n = 1").drop("n", "run_index"))
    status = (F.when(F.col("failed") + F.col("error") > 0, "failed")
              .when(F.col("xfail") > 0, "xfail")
              .when(F.col("passed") > 0, "passed")
              .when(F.col("not_applicable") > 0, "not-applicable")
              .when(F.col("client_xfail") > 0, "client-difference")
              .otherwise("not run"))
    counted = counted.withColumn("status", status)
    if catalog_ids:
        spark = fine.sparkSession
        clauses = spark.createDataFrame([(c,) for c in catalog_ids], "clause string")
        grid = counted.select("target").distinct().crossJoin(clauses.union(counted.select("clause")).distinct())
        counted = grid.join(counted, ["target", "clause"], "left").fillna({"status": "not run"}).fillna(0)
    return counted


# ---- flaky, folded run by run -------------------------------------------------------------------------------------
#
# A case is flaky on a target and version when it both passed and failed (or errored) there; `flips` counts the
# changes between its consecutive runs in start order. Reading every run's records for that each night would make
# the nightly report's cost grow with the history, so the report keeps a fold of it: per (target, version, case),
# the counts, the flips so far and the first and last judged outcome (flaky_state, below). A night's report folds
# its new runs' records into the last fold; a run read again (changed), a new run that started before the fold's
# latest record, or a fold that is missing or was not written whole, make it fold every run again instead.

FLAKY_KEYS = ["target", "version", "case"]
FLAKY_STATE = "flaky_state"  # under the store's tables: a folder per fold, fold=<digest of the runs folded in>


def judged_cases(cases, versions):
    """The records that judged (passed, failed, error), each with its version and p (1 passed, 0 not)."""
    from pyspark.sql import functions as F

    judged = cases.where(F.col("outcome").isin("passed", *BAD)).withColumn(
        "p", (F.col("outcome") == "passed").cast("int"))
    return with_versions(judged, versions)


def flaky_fold(judged):
    """Per (target, version, case): suite, passes, runs, the largest config fault, flips, and the first and last
    judged outcome in start order (ties: a fail before a pass). One record per case and run; a case's history is
    a list sorted and walked for the flips (measured on a million records: a window in start order instead shuffles
    every record whole and cost a fifth more)."""
    from pyspark.sql import functions as F

    found = judged.groupBy(*FLAKY_KEYS).agg(
        F.min("suite").alias("suite"), F.sum("p").alias("passes"), F.count(F.lit(1)).alias("runs"),
        F.max("config_fault").alias("config_fault"),
        F.sort_array(F.collect_list(F.struct("started", "p", "outcome"))).alias("history"))
    passed = F.col("history")["p"]
    n = F.size(passed)
    changes = F.zip_with(F.slice(passed, 2, n), F.slice(passed, 1, n - 1),
                         lambda now, before: (now != before).cast("int"))
    first, last = F.col("history")[0], F.element_at("history", -1)
    return found.select(*FLAKY_KEYS, "suite", "passes", "runs", "config_fault",
                        F.aggregate(changes, F.lit(0), lambda total, x: total + x).alias("flips"),
                        first["started"].alias("first_started"), first["p"].alias("first_p"),
                        last["started"].alias("last_started"), last["p"].alias("last_p"),
                        last["outcome"].alias("last_outcome"))


def merge_folds(old, new):
    """The fold of old's runs and then new's: counts added, a flip more where new's first outcome differs from old's
    last, first from old and last from new. `in_order` is false where new's first record did not start after old's
    last one (the fold is then not the history's, and the caller folds every run instead)."""
    from pyspark.sql import functions as F

    o, n = old.alias("o"), new.alias("n")
    both = F.col("o.runs").isNotNull() & F.col("n.runs").isNotNull()

    def added(name: str):
        return F.coalesce(F.col(f"o.{name}"), F.lit(0)) + F.coalesce(F.col(f"n.{name}"), F.lit(0))

    def first_of(name: str, newer: bool):
        older, later = F.col(f"o.{name}"), F.col(f"n.{name}")
        return (F.coalesce(later, older) if newer else F.coalesce(older, later)).alias(name)

    return o.join(n, FLAKY_KEYS, "full").select(
        *FLAKY_KEYS, F.least("o.suite", "n.suite").alias("suite"), added("passes").alias("passes"),
        added("runs").alias("runs"), F.greatest("o.config_fault", "n.config_fault").alias("config_fault"),
        (added("flips") + F.when(both & (F.col("o.last_p") != F.col("n.first_p")), 1).otherwise(0)).alias("flips"),
        first_of("first_started", False), first_of("first_p", False),
        first_of("last_started", True), first_of("last_p", True), first_of("last_outcome", True),
        (~both | (F.col("n.first_started") > F.col("o.last_started"))).alias("in_order"))


def flaky(state):
    """The flaky table from a fold: the cases of a target and version that both passed and failed there."""
    from pyspark.sql import functions as F

    return (state.withColumn("fails", F.col("runs") - F.col("passes"))
            .where((F.col("passes") > 0) & (F.col("fails") > 0))
            .select(*FLAKY_KEYS, "suite", "passes", "runs", "last_outcome",
                    F.array_compact(F.array("config_fault")).alias("config_faults"), "fails", "flips",
                    F.round(F.col("fails") / F.col("runs"), 4).alias("fail_rate")))


def fold_id(ingest_ids) -> str:
    """The name of the fold of these readings of runs (their ingest ids, in any order)."""
    from hashlib import sha256

    return sha256("\n".join(sorted(ingest_ids)).encode()).hexdigest()[:20]


def flaky_state(spark, tables_dir: str, plan: Plan, records, versions, log: Callable[[str], None],
                here: bool = False):
    """The fold of every run of this report (cached; the caller unpersists it), stored under the store's
    flaky_state/fold=<fold_id> for the next report. See the section's comment for when only the new runs are
    folded in."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    from reports import store

    def stored(fold: str):
        """A fold written whole (Spark writes _SUCCESS last, once every file is in place), else None."""
        path = f"{tables_dir}/{FLAKY_STATE}/fold={fold}"
        try:
            _ = spark.read.text(f"{path}/_SUCCESS").schema  # a missing file fails here (no job runs)
            return spark.read.parquet(path)
        except PySparkException:
            return None

    def fold_of(where):
        cases = records.where(where & is_case()).select(
            "run_id", "target", "suite", "case", "outcome", "started", "config_fault")
        return flaky_fold(judged_cases(cases, versions))

    t = time.monotonic()
    now = fold_id(plan.current.values())
    new = {r.run_folder for r in plan.to_read}
    before = None if plan.fresh or plan.changed else stored(
        fold_id(i for folder, i in plan.current.items() if folder not in new))
    if before is not None and not new:
        log(f"  flaky fold (no new run, the last report's): {time.monotonic() - t:.2f}s")
        return before.cache()  # stored under this report's fold id already
    path = f"{tables_dir}/{FLAKY_STATE}/fold={now}"
    how, written = "every run", False
    if before is not None:
        written = _write_fold(merge_folds(before, fold_of(F.col("run_folder").isin(*new))), path, here)
        how = (f"{len(new)} new run(s) folded into the last report's" if written
               else "every run again: a new run started before the last fold's latest record")
    if not written:
        _write_fold(fold_of(F.lit(True)).withColumn("in_order", F.lit(True)), path, here)
    # the flaky table reads the fold just written, not the cached query that made it: a cached partition that is
    # evicted (or never computed) would be made again from the earlier fold, which is removed here
    store.drop_local_folders(tables_dir, FLAKY_STATE, keep=f"fold={now}")
    log(f"  flaky fold ({how}): {time.monotonic() - t:.2f}s")
    return spark.read.parquet(path).cache()


def _write_fold(state, path: str, here: bool) -> bool:
    """Write a fold (without its in_order column) to path, unless a row is out of order (a merge that must be done
    again from every run): whether it was written. Here (see _writes_here) one Spark job collects it as Arrow and
    this process checks and writes it; otherwise Spark checks it (a job) and writes it (another)."""
    from pyspark.sql import functions as F

    from reports import store

    if here:
        table = state.toArrow()
        if all(table.column("in_order").to_pylist()):
            store.write_parquet_here(table.drop_columns(["in_order"]), path)
            return True
        return False
    state = state.cache()
    try:
        if state.where(~F.col("in_order")).limit(1).count():
            return False
        state.drop("in_order").write.mode("overwrite").parquet(path)
        return True
    finally:
        state.unpersist()


def latest_pairs(truns):
    """(target, latest run, previous run) for every target that has run twice or more: what regressions compare."""
    from pyspark.sql import functions as F

    return truns.where(F.col("is_latest") & F.col("prev_run_id").isNotNull()).select(
        "target", "run_id", "prev_run_id", "run_index", "is_latest")


def regressions(records, truns, versions, run_ids: list[str] | None = None):
    """Each case whose outcome changed between the latest run of a target and that target's previous run.
    `run_ids`, the runs of latest_pairs() when known, lets the Parquet reader skip the other runs' row groups.

    The versions are joined to the few pairs of runs, not to the records; the records of each side are kept by a
    broadcast join with those pairs, so that only the two runs' records of each target meet in the last join."""
    from pyspark.sql import functions as F

    run_version = versions.select("target", "run_id", F.coalesce("run_version", F.lit("?")).alias("version"))
    pairs = (latest_pairs(truns).join(run_version, ["target", "run_id"], "left")
             .join(run_version.select("target", F.col("run_id").alias("prev_run_id"),
                                      F.col("version").alias("prev_version")), ["target", "prev_run_id"], "left")
             .fillna("?", ["version", "prev_version"]))
    if run_ids is not None:
        records = records.where(F.col("run_id").isin(*run_ids))
    judged = records.where(F.col("outcome").isin("passed", *BAD)).select(
        "target", "run_id", "suite", "case", "outcome", "message", "config_fault")
    cur = judged.join(F.broadcast(pairs), ["target", "run_id"])
    prev = judged.join(F.broadcast(pairs.select("target", F.col("prev_run_id").alias("run_id"))),
                       ["target", "run_id"], "left_semi").select(
        "target", F.col("run_id").alias("prev_run_id"), "case", F.col("outcome").alias("prev_outcome"))
    joined = cur.join(prev, ["target", "prev_run_id", "case"])
    kind = (F.when((F.col("prev_outcome") == "passed") & F.col("outcome").isin(*BAD), "regression")
            .when(F.col("prev_outcome").isin(*BAD) & (F.col("outcome") == "passed"), "fixed"))
    return (joined.withColumn("kind", kind).where(F.col("kind").isNotNull())
            .select("kind", "target", "run_id", "run_index", "is_latest", "prev_run_id", "suite", "case", "version",
                    "prev_version", "prev_outcome", "outcome", "message", "config_fault"))


# Durations are kept per run as a histogram on a log scale: a bucket is 2% wide, so a percentile read from it is
# within 2% of the exact one, and the buckets of many runs add up (a percentile does not). Each bucket keeps its
# largest duration, which is the figure given: a value a case really took.
DURATION_BUCKET_RATIO = 1.02
ZERO_BUCKET = -(1 << 30)  # cases that took no measurable time


def duration_buckets(records):
    """Per run, target and suite: the case durations in log-scale buckets (count, sum, largest). Stored per run
    (run_durations); the cases timed are those that ran (passed, failed, error, xfail), fuzz records left out."""
    from pyspark.sql import functions as F

    d = F.col("duration_s")
    bucket = F.when(d > 0, F.ceil(F.log(d) / F.log(F.lit(DURATION_BUCKET_RATIO)))).otherwise(ZERO_BUCKET)
    timed = records.where(F.col("outcome").isin("passed", "failed", "error", "xfail") & is_case())
    return (timed.groupBy("run_folder", "ingest_id", "run_id", "target", "suite", bucket.cast("int").alias("bucket"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum(d).alias("total_s"), F.max(d).alias("max_s")))


def durations(buckets):
    """Per target and suite over every run: cases, p50 and p95 (the largest duration of the bucket that holds the
    case of that rank: at most 2% above the exact percentile), mean and max."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    merged = buckets.groupBy("target", "suite", "bucket").agg(
        F.sum("n").alias("n"), F.sum("total_s").alias("total_s"), F.max("max_s").alias("max_s"))
    group = Window.partitionBy("target", "suite")
    ranked = (merged.withColumn("upto", F.sum("n").over(group.orderBy("bucket")))
              .withColumn("cases", F.sum("n").over(group)))

    def rank(q: float):  # nearest rank: the ceil(q * N)-th duration in ascending order
        return F.min(F.when(F.col("upto") >= F.ceil(F.col("cases") * q), F.struct("bucket", "max_s")))["max_s"]

    return (ranked.groupBy("target", "suite").agg(
        F.first("cases").alias("cases"), rank(0.5).alias("p50_s"), rank(0.95).alias("p95_s"),
        F.round(F.sum("total_s") / F.first("cases"), 4).alias("mean_s"), F.max("max_s").alias("max_s")))


def fault_checks(fine):
    """Per target and fault (an injected fault, or a deliberate config fault): outcomes, and the sums of the
    checkers' counts where records carry `details.checks.<checker>` objects; absent everywhere is fine. A row of
    `fine` stands for `cases` records with the same checks."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    by_fault = _sum_counts(fine.where(F.col("fault_label").isNotNull()), ["target", "fault_label"])
    checks = (fine.where(F.col("checks").isNotNull())
              .withColumn("checks", F.from_json("checks", T.MapType(T.StringType(), T.StringType())))
              .where(F.col("checks").isNotNull())
              .select("target", "cases", F.explode("checks").alias("checker", "result")))
    fields = ("attempted", "delivered", "lost", "duplicated", "reordered", "unexpected", "recovered")
    ok = F.lower(F.coalesce(F.get_json_object("result", "$.ok"), F.get_json_object("result", "$.valid"),
                            F.get_json_object("result", "$.verdict")))
    by_checker = checks.groupBy("target", "checker").agg(
        F.sum("cases").alias("cases"),
        F.sum(F.when(ok.isin("false", "fail", "failed", "invalid"), F.col("cases")).otherwise(0)).alias("violations"),
        *[F.sum(F.get_json_object("result", f"$.{name}").cast("long") * F.col("cases")).alias(name)
          for name in fields])
    return by_fault, by_checker


def recovery_rows(records):
    """A run's records whose details carry `resume_s` (seconds from a fault's end, e.g. a link's return, until the
    peers had caught up: suites/brokerconnections/test_mirror_faults.py writes it for each mirror link fault), with
    the fault (`details.fault`, else the record's own fault) and `lost`, `duplicated` and `recovered` decoded.
    Stored per run (run_recovery); fuzz records are left out like everywhere else (FUZZ_SUITE).

    Such records are few: they are found by the `resume_s` column the ingest lifted out of `details`, and only
    then is `details` (a map of strings: numbers arrive as their JSON text) decoded."""
    from pyspark.sql import functions as F

    d = F.col("details")
    return (records.where(F.col("resume_s").isNotNull() & is_case())
            .select("run_folder", "ingest_id", "run_id", "target", "suite", "outcome",
                    F.coalesce(d["fault"], F.col("fault_name")).alias("fault"),
                    F.col("resume_s").cast("double").alias("resume_s"),
                    *[d[name].cast("long").alias(name) for name in ("lost", "duplicated", "recovered")]))


def recovery(timed, runs):
    """Per target, suite and fault: what a fault cost and how long the peers took to recover once it was gone, from
    every run's recovery_rows. Any suite that records `resume_s` joins this table; `lost`, `duplicated` and
    `recovered` are summed where the records carry them too (null where none does). Cases, failed cases (outcome
    failed or error), resume_s p50 (exact median) and max, and the latest run."""
    from pyspark.sql import functions as F

    timed = timed.join(F.broadcast(runs.select("run_id", "run_index")), "run_id", "left")
    return (timed.groupBy("target", "suite", "fault").agg(
        F.count(F.lit(1)).alias("cases"),
        F.sum(F.col("outcome").isin(*BAD).cast("long")).alias("failed_cases"),
        *[F.sum(name).alias(name) for name in ("lost", "duplicated", "recovered")],
        F.round(F.median("resume_s"), 3).alias("resume_p50_s"),
        F.round(F.max("resume_s"), 3).alias("resume_max_s"),
        F.max_by("run_id", "run_index").alias("last_run")))


def fuzz_rows(records):
    """A run's records of `interop fuzz` (see FUZZ_SUITE) with the `details` their tables read, stored per run
    (run_fuzz). A session record is `FUZZ-<MODE>`, a finding record `FUZZ-<MODE>/<signature>`.

    `details` is a map of strings: a session's signature list arrives as its JSON text. from_json makes Spark
    evaluate this projection row by row, which costs nothing here: only fuzz records reach it."""
    from pyspark.sql import functions as F

    d = F.col("details")
    no_signatures = F.array().cast("array<string>")
    return (records.where(F.col("suite") == FUZZ_SUITE)
            .select("run_folder", "ingest_id", "run_id", "target", "outcome", "duration_s", "started", "message",
                    F.col("fault_name").alias("deliberate_break"),  # `interop fuzz --break` puts its breaks there
                    F.coalesce(d["mode"], F.lower(F.regexp_extract("case", r"^FUZZ-([A-Za-z]+)", 1))).alias("mode"),
                    F.col("case").contains("/").alias("is_finding"),
                    d["seed"].cast("long").alias("seed"), d["executed"].cast("long").alias("executed"),
                    F.coalesce(F.from_json(d["signatures"], "array<string>"), no_signatures).alias("signatures"),
                    # the findings the product's expected file records (harness/fuzz/recorded.py)
                    F.coalesce(F.from_json(d["recorded"], "array<string>"), no_signatures).alias("recorded"),
                    F.coalesce(d["signature"], F.substring_index("case", "/", -1)).alias("signature"),
                    d["kind"].alias("kind"), d["reproducer"].alias("reproducer"),
                    # the product fuzzed (its role's entry) and a frames session's figures: the per-product table
                    F.col("peers").alias("peers"),
                    *[F.get_json_object(d["figures"], f"$.{key}").cast("double").alias(name)
                      for key, name in FUZZ_FIGURES]))


# A frames session's figures (details.figures) the per-product table compares: key -> column
FUZZ_FIGURES = (("max_sentinel_gap_ms", "max_gap_ms"), ("max_rss_mb", "max_rss_mb"), ("start_rss_mb", "start_rss_mb"),
                ("max_cpu_after_close_cores", "cpu_after_close_cores"))


def fuzz_records(rows, runs):
    """Every run's fuzz rows with their run's order and fuzzed role (run.json)."""
    from pyspark.sql import functions as F

    return rows.join(F.broadcast(runs.select("run_id", "run_index", F.col("fuzz_role").alias("role"))), "run_id",
                     "left")


def fuzz_sessions(fuzz):
    """Per target, fuzzed role, mode and deliberate break: sessions, programs/cases run, sessions that found
    something, the distinct failure signatures (from the sessions' own lists), seeds and total duration."""
    from pyspark.sql import functions as F

    sessions = fuzz.where(~F.col("is_finding"))
    return (sessions.groupBy("target", "role", "mode", "deliberate_break").agg(
        F.count(F.lit(1)).alias("sessions"),
        F.sum("executed").alias("executed"),
        F.sum(F.col("outcome").isin(*BAD).cast("int")).alias("failed_sessions"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("signatures")))).alias("signatures"),
        F.array_sort(F.collect_set("seed")).alias("seeds"),
        F.round(F.sum("duration_s"), 3).alias("duration_s"),
        F.count_distinct("run_id").alias("runs"),
        F.max_by("run_id", "run_index").alias("last_run"))
        .withColumn("distinct_signatures", F.size("signatures")))


def fuzz_products(fuzz):
    """Per product fuzzed (role, vendor and version, from the record's `peers` entry of the role the session fuzzed)
    and deliberate break: sessions per mode, hostile-frame cases and stateful programs run, sessions that found
    something, the distinct failure signatures, and the frames sessions' worst figures: the sentinel's longest gap,
    the server's RSS (least at start, most seen) and the most CPU it spent after a batch's connections had closed
    (cores). The vendor comparison of the "Fuzzing sessions" section."""
    from pyspark.sql import functions as F

    peers = F.from_json("peers", PEERS_MAP)
    role = F.coalesce(F.col("role"), F.element_at(F.map_keys(peers), 1))
    peer = F.element_at(peers, role)
    sessions = (fuzz.where(~F.col("is_finding"))
                .select("*", role.alias("product_role"), peer["vendor"].alias("vendor"),
                        F.coalesce(peer["version"], F.lit("?")).alias("version")))
    frames, stateful, configs = (F.col("mode") == m for m in ("frames", "stateful", "configs"))

    def total(where):
        return F.sum(F.when(where, F.col("executed")).otherwise(0)).cast("long")

    return (sessions.where(F.col("vendor").isNotNull())
            .groupBy(F.col("product_role").alias("role"), "vendor", "version", "deliberate_break").agg(
                F.count(F.lit(1)).alias("sessions"),
                F.sum(frames.cast("int")).alias("frames_sessions"), total(frames).alias("frames_cases"),
                F.sum(stateful.cast("int")).alias("stateful_sessions"), total(stateful).alias("programs"),
                F.sum(configs.cast("int")).alias("configs_sessions"), total(configs).alias("config_files"),
                F.sum(F.col("outcome").isin(*BAD).cast("int")).alias("failed_sessions"),
                F.array_sort(F.array_distinct(F.flatten(F.collect_list("signatures")))).alias("signatures"),
                F.array_sort(F.array_distinct(F.flatten(F.collect_list("recorded")))).alias("recorded"),
                F.max("max_gap_ms").alias("max_gap_ms"), F.min("start_rss_mb").alias("start_rss_mb"),
                F.max("max_rss_mb").alias("max_rss_mb"), F.max("cpu_after_close_cores").alias("cpu_after_close_cores"),
                F.round(F.sum("duration_s"), 3).alias("duration_s"),
                F.max_by("run_id", "run_index").alias("last_run"), F.max("started").alias("last_started"))
            .withColumn("distinct_signatures", F.size("signatures")))


def fuzz_findings(fuzz):
    """One row per distinct failure: signature, kind, mode and target (and deliberate break), the first and last run
    that found it, how many sessions did (a session writes one record per signature it found), and the message and
    reproducer of the latest of them (the path most likely still on disk)."""
    from pyspark.sql import functions as F

    found = fuzz.where(F.col("is_finding"))
    latest = F.max_by(F.struct("message", "reproducer", "seed"), F.struct("run_index", "started"))
    return (found.groupBy("signature", "kind", "mode", "target", "role", "deliberate_break").agg(
        F.count(F.lit(1)).alias("sessions"),
        F.count_distinct("run_id").alias("runs"),
        F.min_by("run_id", "run_index").alias("first_run"), F.min("run_index").alias("first_run_index"),
        F.max_by("run_id", "run_index").alias("last_run"), F.max("run_index").alias("last_run_index"),
        F.array_sort(F.collect_set("seed")).alias("seeds"),
        latest.alias("latest"))
        .select("*", F.col("latest.message").alias("message"), F.col("latest.reproducer").alias("reproducer"))
        .drop("latest"))


def bench_rows(records):
    """A run's benchmark records (BENCH_SUITE): `BENCH-<bench>/<scenario>/<vendor>/<client stack>` with the figures
    in details. Stored per run (run_bench)."""
    from pyspark.sql import functions as F

    d = F.col("details")
    parts = F.split(F.col("case"), "/")
    return (records.where(F.col("suite") == BENCH_SUITE)
            .select("run_folder", "ingest_id", "run_id", "started", "outcome", "message",
                    F.coalesce(d["bench"], F.regexp_extract("case", r"^BENCH-([^/]+)", 1)).alias("bench"),
                    F.coalesce(d["scenario"], F.element_at(parts, 2)).alias("scenario"),
                    F.element_at(parts, 3).alias("vendor"),
                    F.coalesce(d["clients"], F.element_at(parts, 4)).alias("clients"),
                    *[d[name].cast("double").alias(name)
                      for name in ("msgs_per_s", "p50_ms", "p99_ms", "ratio", "cpu_s_per_1000")],
                    d["ratio_to"].alias("ratio_to"), d["repeats"].cast("int").alias("repeats"),
                    # the version of the product measured (the record's one peer; none for `direct`)
                    F.coalesce(F.get_json_object("peers", "$.router.version"),
                               F.get_json_object("peers", "$.broker.version")).alias("version")))


def benchmarks(rows, runs):
    """Per benchmark, scenario, vendor and client stack: the latest run's figures (throughput, latency, the ratio to
    the vendor it is compared with, CPU per 1000 messages, the product's version), the previous run's throughput and
    the best seen; and the vendor comparison: the latest msgs/s against the reference's latest of the same
    benchmark, scenario and client stack (`vs_reference`, with `reference_vendor` and `reference_version`; a row
    variant such as `artemis+mirror` against `reference+mirror`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = rows.join(F.broadcast(runs.select("run_id", "run_index")), "run_id", "left")
    order = F.struct("run_index", "started")
    figures = F.struct("msgs_per_s", "p50_ms", "p99_ms", "ratio", "ratio_to", "cpu_s_per_1000", "outcome",
                       "message", "run_id", "version")
    latest = (rows.groupBy("bench", "scenario", "vendor", "clients").agg(
        F.count(F.lit(1)).alias("runs"),
        F.max_by(figures, order).alias("latest"),
        F.max("msgs_per_s").alias("best_msgs_per_s"),
        F.sort_array(F.collect_list(F.struct(order.alias("o"), F.col("msgs_per_s"))), asc=False).alias("history"))
        .select("bench", "scenario", "vendor", "clients", "runs", "latest.*", "best_msgs_per_s",
                F.col("history")[1]["msgs_per_s"].alias("previous_msgs_per_s"))
        # a row variant (`artemis+mirror`) is compared with the reference's same variant (`reference+mirror`)
        .withColumn("reference_vendor", F.concat(F.lit("reference"), F.regexp_extract("vendor", r"(\+.*)$", 1))))
    # one window over the few rows per benchmark, scenario and client stack, no join: the reference's figures
    same = Window.partitionBy("bench", "scenario", "clients")
    refs = F.map_from_entries(F.collect_list(F.struct("vendor", F.struct("msgs_per_s", "version"))).over(same))
    reference = F.element_at(refs, F.col("reference_vendor"))
    return (latest.withColumn("reference_msgs_per_s", reference["msgs_per_s"])
            .withColumn("reference_version", reference["version"])
            .withColumn("vs_reference", F.when(F.col("reference_msgs_per_s") > 0,
                                               F.round(F.col("msgs_per_s") / F.col("reference_msgs_per_s"), 3))))


MUTATION_COUNTS = ("killed", "timeout", "survived", "equivalent", "incompetent", "pending")


def mutation_rows(records):
    """A run's mutation-score records (MUTATION_SUITE): `MUTATION/<group>` with the score, the mutant counts, the
    sample size, the run time and the survivors in details. Stored per run (run_mutation)."""
    from pyspark.sql import functions as F

    d = F.col("details")
    return (records.where(F.col("suite") == MUTATION_SUITE)
            .select("run_folder", "ingest_id", "run_id", "started", "outcome", "message",
                    F.coalesce(d["mutation_group"], F.regexp_extract("case", r"^MUTATION/(.+)$", 1)).alias("group"),
                    d["score"].cast("double").alias("score"), d["target"].cast("double").alias("target_score"),
                    d["sample"].cast("long").alias("sample"),
                    *[d[name].cast("long").alias(name) for name in MUTATION_COUNTS],
                    d["run_s"].cast("double").alias("run_s"),
                    F.from_json(d["survivors"], "array<string>").alias("survivors")))


def mutation(rows, runs):
    """Per group of reference modules: the latest run's score, counts, sample, run time and survivors, and the
    scores of every run in order (its trend)."""
    from pyspark.sql import functions as F

    rows = rows.join(F.broadcast(runs.select("run_id", "run_index")), "run_id", "left")
    order = F.struct("run_index", "started")
    latest = F.struct("score", "target_score", "sample", *MUTATION_COUNTS, "run_s", "survivors", "outcome",
                      "message", "run_id")
    return (rows.groupBy("group").agg(
        F.count(F.lit(1)).alias("runs"),
        F.max_by(latest, order).alias("latest"),
        F.transform(F.sort_array(F.collect_list(F.struct(order.alias("o"), F.col("score")))),
                    lambda x: x["score"]).alias("scores"))
        .select("group", "runs", "latest.*", "scores"))


def type_rows(records):
    """A run's type interop cases (TYPES_SUITE) with their type family, section, client stacks and peer role.
    Stored per run (run_types)."""
    from pyspark.sql import functions as F

    d = F.col("details")
    return (records.where((F.col("suite") == TYPES_SUITE) & d["type"].isNotNull())
            .select("run_folder", "ingest_id", "run_id", "target", "outcome", "message",
                    d["type"].alias("type"), d["section"].alias("section"),
                    d["sender_stack"].alias("sender_stack"), d["receiver_stack"].alias("receiver_stack"),
                    d["via"].alias("via"), d["values"].cast("int").alias("values"),
                    F.size(F.from_json(d["failures"], "array<string>")).alias("values_differing")))


def network_rows(records):
    """A run's network-of-brokers cases (NETWORK_SUITE) with the figures they wrote: the fault, messages lost and
    duplicated (the total-queue checker's counts; a topic case's, per subscriber, summed) and resume_s (seconds
    from the fault's end until forwarding resumed). Stored per run (run_network)."""
    from pyspark.sql import functions as F

    d = F.col("details")

    def count(name: str):
        # a number, or per subscriber ({"B1": 0, "B2": 1}: the topic cases) and then their sum
        per_node = F.map_values(F.from_json(d[name], "map<string,bigint>"))
        return F.coalesce(d[name].cast("long"), F.aggregate(per_node, F.lit(0).cast("long"), lambda acc, x: acc + x))
    return (records.where((F.col("suite") == NETWORK_SUITE) & is_case())
            .select("run_folder", "ingest_id", "run_id", "target", "case", "outcome", "message",
                    F.coalesce(d["fault"], F.col("fault_name")).alias("fault"),
                    count("lost").alias("lost"), count("duplicated").alias("duplicated"),
                    F.col("resume_s").cast("double").alias("resume_s")))


def network(rows, truns):
    """Per target and network case, from the target's latest run that ran network cases: outcome, fault, lost,
    duplicated, resume_s (null where the case does not measure it) and the run."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    indexed = rows.join(F.broadcast(truns.select("target", "run_id", "run_index")), ["target", "run_id"], "left")
    latest = F.max("run_index").over(Window.partitionBy("target"))
    return (indexed.withColumn("latest_index", latest).where(F.col("run_index") == F.col("latest_index"))
            .select("target", "case", "outcome", "fault", "lost", "duplicated",
                    F.round("resume_s", 3).alias("resume_s"), "message", "run_id"))


def type_interop(rows, truns):
    """Type family x section x (sender stack -> peer -> receiver stack), from each target's latest run that ran type
    interop cases: the outcome, and how many of the values differed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    indexed = rows.join(F.broadcast(truns.select("target", "run_id", "run_index")), ["target", "run_id"], "left")
    latest = F.max("run_index").over(Window.partitionBy("target"))
    return (indexed.withColumn("latest_index", latest).where(F.col("run_index") == F.col("latest_index"))
            .select("target", "via", "sender_stack", "receiver_stack", "type", "section", "outcome",
                    "values", F.greatest(F.coalesce("values_differing", F.lit(0)), F.lit(0)).alias("values_differing"),
                    "message", "run_id"))


FINDINGS = ("failed", "error", "xfail")


def finding_rows(records):
    """A run's cases that did not pass while they judged: failed, errored, or a recorded difference (the vendor's or
    a client stack's), with their message (the failure, or the expected file's clause, reason and evidence) and, for
    a type interop case, which values differed (details.failures: value, what was sent and what arrived, each with
    its AMQP type). Stored per run (run_findings): a few percent of the records."""
    from pyspark.sql import functions as F

    return (records.where(is_case() & F.col("outcome").isin(*FINDINGS))
            .select("run_folder", "ingest_id", "run_id", "target", "suite", "case", "spec",
                    counted_outcome().alias("outcome"), "difference_of", "message",
                    F.col("details")["failures"].alias("failures")))


def findings(rows, conformance_cells):
    """Per conformance cell (target x clause) that is not green, the cases behind it: the rows of the run the cell
    was taken from (its latest run citing the clause), a case citing two clauses listed under both."""
    from pyspark.sql import functions as F

    cells = conformance_cells.where(F.col("run_id").isNotNull()).select("target", "clause", "run_id")
    return (rows.select("*", F.explode("spec").alias("clause"))
            .join(F.broadcast(cells), ["target", "clause", "run_id"])
            .select("target", "clause", "case", "outcome", "difference_of", "message", "failures", "run_id"))


# ---- the job ---------------------------------------------------------------------------------------------------------


@dataclass
class Result:
    tables: list[str]                   # the aggregate tables written (Parquet, under the store); not their
                                        # DataFrames, whose plans would keep the JVM's objects while a Result lives
    data: dict[str, list[dict]]         # name -> collected rows for the HTML report
    timings: dict[str, float]           # stage -> seconds
    inputs: Found                       # the runs found among the inputs
    plan: Plan                          # what the store did with each


PARALLEL_LISTING = "spark.sql.sources.parallelPartitionDiscovery.threshold"
ADAPTIVE = "spark.sql.adaptive.enabled"
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
    report's cache folder (reports/jvm.py's), under a name made of the digest of the two modules that define the
    tables and Spark's version; a file that cannot be read or written only means planning them again."""
    if not _SCHEMAS:
        import json
        from hashlib import sha256

        from pyspark import __version__ as spark_version
        from pyspark.sql.types import StructType

        from reports import jvm, store

        digest = sha256(spark_version.encode())
        for module in (__file__, store.__file__):
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


@contextmanager
def _settings(spark, settings: dict[str, str]):
    """The session's SQL settings changed for a while, and put back as they were."""
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def _listed_by_driver(spark, uris: list[str]):
    """Local files are looked up by the driver itself while a reader is created here. Spark lists more than 32
    paths with a job of its own: for local files that job costs 1-2 s (measured with 100 runs), the lookups a few
    milliseconds. Files on other file systems (hdfs://, s3a://, ...) keep Spark's parallel listing."""
    local = uris and all(uri.startswith("file:") for uri in uris)
    return _settings(spark, {PARALLEL_LISTING: str(max(len(uris), 32))} if local else {})


# a store on this machine holds a partition folder per run and table: listed by the driver, like the inputs
LOCAL_STORE_LISTING = 100_000


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


# Tables are written and collected by several threads at once: a small table's Spark job spends much of its time in
# the driver (planning, code generation, broadcasts), and the other jobs' tasks use the cores meanwhile. Measured on
# the 1M-row benchmark, paired runs, since the aggregates run without adaptive execution: the nightly report on a
# warm Spark Connect server 7.6 s with 2 threads, 7.3 with 4, 7.0 with 6 (medians of four); a cold one 23.0 -> 22.1 s
# (2 -> 6); the full rebuild the same (40-42 s). (With adaptive execution, 2 had beaten 3.)
WRITERS = 6
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


def arrow_rows(table, order: list[str], limit: int | None = None) -> list[dict]:
    """An Arrow table's rows as _rows gives a DataFrame's (dicts; timestamps as naive UTC datetimes, as a UTC
    session's Row gives them), sorted the same way, the first `limit` of them."""
    from datetime import UTC

    import pyarrow as pa

    def plain(value, kind):
        """A value as Row.asDict(recursive=True) gives it, by its Arrow type (a map's pylist is a list of pairs)."""
        if value is None:
            return None
        if pa.types.is_timestamp(kind) and kind.tz is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        if pa.types.is_map(kind):
            return {plain(k, kind.key_type): plain(v, kind.item_type) for k, v in value}
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return [plain(v, kind.value_type) for v in value]
        if pa.types.is_struct(kind):
            return {field.name: plain(value[field.name], field.type) for field in kind}
        return value

    row_type = pa.struct(list(table.schema))
    rows = [plain(row, row_type) for row in table.to_pylist()]
    _sort_rows(rows, order)
    return rows[:limit] if limit else rows


def _sort_rows(rows: list[dict], order: list[str]) -> None:
    """Sort in place as Spark's orderBy does: nulls first ascending, last descending."""
    for key in reversed(order):  # stable sorts, the last key first
        name, descending = key.lstrip("-"), key.startswith("-")
        rows.sort(key=lambda r: (r[name] is not None, r[name]), reverse=descending)


def _rows(df, order: list[str], limit: int | None = None) -> list[dict]:
    """The rows of a small table, in `order` (Spark's: nulls first ascending, last descending). Without a limit
    they are sorted here: a Spark sort is two more jobs (sampling the range bounds, then sorting), each costing
    far more than sorting a few thousand rows in Python."""
    from pyspark.sql import functions as F

    if limit:
        keys = [F.desc(k[1:]) if k.startswith("-") else F.col(k) for k in order]
        return [row.asDict(recursive=True) for row in df.orderBy(*keys).limit(limit).collect()]
    rows = [row.asDict(recursive=True) for row in df.collect()]
    _sort_rows(rows, order)
    return rows


if __name__ == "__main__":  # spark-submit reports/job.py INPUTS... --out DIR
    from reports.cli import main

    sys.exit(main())
