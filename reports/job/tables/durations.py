"""Case durations: per run, a histogram on a log scale (run_durations); over every run, p50 and p95 per target
and suite (durations).
"""

from __future__ import annotations

from reports.job.records import is_case


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
