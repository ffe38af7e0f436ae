"""The mutation-score tables (records.MUTATION_SUITE): run_mutation per run, then mutation.
"""

from __future__ import annotations

from harness.record_schema import MUTATION
from reports.job.records import MUTATION_SUITE
from reports.record_fields import detail


MUTATION_COUNTS = ("killed", "timeout", "survived", "equivalent", "incompetent", "pending")


def mutation_rows(records):
    """A run's mutation-score records (MUTATION_SUITE): `MUTATION/<group>` with the score, the mutant counts, the
    sample size, the run time and the survivors in details. Stored per run (run_mutation)."""
    from pyspark.sql import functions as F

    def d(name: str):
        return detail(MUTATION, name)

    return (records.where(F.col("suite") == MUTATION_SUITE)
            .select("run_folder", "ingest_id", "run_id", "started", "outcome", "message",
                    F.coalesce(d("mutation_group"), F.regexp_extract("case", r"^MUTATION/(.+)$", 1)).alias("group"),
                    d("score").alias("score"), d("target").alias("target_score"),
                    d("sample").alias("sample"),
                    *[d(name).alias(name) for name in MUTATION_COUNTS],
                    d("run_s").alias("run_s"),
                    d("survivors").alias("survivors")))


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
