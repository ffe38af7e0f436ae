"""Flaky cases, folded run by run.

A case is flaky on a target and version when it both passed and failed (or errored) there; `flips` counts the
changes between its consecutive runs in start order. Reading every run's records for that each night would make
the nightly report's cost grow with the history, so the report keeps a fold of it: per (target, version, case),
the counts, the flips so far and the first and last judged outcome (flaky_state, below). A night's report folds
its new runs' records into the last fold; a run read again (changed), a new run that started before the fold's
latest record, or a fold that is missing or was not written whole, make it fold every run again instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reports.job.aggregates import with_versions
from reports.job.records import BAD, is_case
from reports.store import Plan

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
