"""The report's Spark session and its settings: how the JVM is started, the SQL settings every session gets,
the settings a stage changes for a while, and how many threads write tables.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path


SHUFFLE_PARTITIONS = 4


class ReportError(Exception):
    """A user mistake (no input found, unreadable output folder): one line, no traceback."""


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


PARALLEL_LISTING = "spark.sql.sources.parallelPartitionDiscovery.threshold"
ADAPTIVE = "spark.sql.adaptive.enabled"


def _listed_by_driver(spark, uris: list[str]):
    """Local files are looked up by the driver itself while a reader is created here. Spark lists more than 32
    paths with a job of its own: for local files that job costs 1-2 s (measured with 100 runs), the lookups a few
    milliseconds. Files on other file systems (hdfs://, s3a://, ...) keep Spark's parallel listing."""
    local = uris and all(uri.startswith("file:") for uri in uris)
    return _settings(spark, {PARALLEL_LISTING: str(max(len(uris), 32))} if local else {})


# a store on this machine holds a partition folder per run and table: listed by the driver, like the inputs
LOCAL_STORE_LISTING = 100_000
# Tables are written and collected by several threads at once: a small table's Spark job spends much of its time in
# the driver (planning, code generation, broadcasts), and the other jobs' tasks use the cores meanwhile. Measured on
# the 1M-row benchmark, paired runs, since the aggregates run without adaptive execution: the nightly report on a
# warm Spark Connect server 7.6 s with 2 threads, 7.3 with 4, 7.0 with 6 (medians of four); a cold one 23.0 -> 22.1 s
# (2 -> 6); the full rebuild the same (40-42 s). (With adaptive execution, 2 had beaten 3.)
WRITERS = 6
