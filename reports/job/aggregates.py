"""The shared aggregates: outcome counts per run (fine counts), their cube, the runs table, each target's runs,
trend, conformance, and the versions each run's targets ran.
"""

from __future__ import annotations

from harness.record_schema import PEERS_MAP
from reports.job.records import BENCH_SUITE, COUNTED_OUTCOMES, FUZZ_SUITE, MUTATION_SUITE, counted_outcome


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
