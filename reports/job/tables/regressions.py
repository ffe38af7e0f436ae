"""The regressions table: each case whose outcome changed between a target's latest run and its previous one.
"""

from __future__ import annotations

from reports.job.records import BAD


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
