"""The benchmark tables (records.BENCH_SUITE): run_bench per run, then benchmarks.
"""

from __future__ import annotations

from harness.record_schema import BENCH
from reports.job.records import BENCH_SUITE
from reports.record_fields import detail


def bench_rows(records):
    """A run's benchmark records (BENCH_SUITE): `BENCH-<bench>/<scenario>/<vendor>/<client stack>` with the figures
    in details. Stored per run (run_bench)."""
    from pyspark.sql import functions as F

    def d(name: str):
        return detail(BENCH, name)

    parts = F.split(F.col("case"), "/")
    return (records.where(F.col("suite") == BENCH_SUITE)
            .select("run_folder", "ingest_id", "run_id", "started", "outcome", "message",
                    F.coalesce(d("bench"), F.regexp_extract("case", r"^BENCH-([^/]+)", 1)).alias("bench"),
                    F.coalesce(d("scenario"), F.element_at(parts, 2)).alias("scenario"),
                    F.element_at(parts, 3).alias("vendor"),
                    F.coalesce(d("clients"), F.element_at(parts, 4)).alias("clients"),
                    *[d(name).alias(name)
                      for name in ("msgs_per_s", "p50_ms", "p99_ms", "ratio", "cpu_s_per_1000")],
                    d("ratio_to").alias("ratio_to"), d("repeats").alias("repeats"),
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
