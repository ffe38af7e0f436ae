"""The tables of `interop fuzz` records (see records.FUZZ_SUITE): run_fuzz per run, then fuzz_sessions,
fuzz_products and fuzz_findings.
"""

from __future__ import annotations

from harness.record_schema import FUZZ, PEERS_MAP
from reports.job.records import BAD, FUZZ_SUITE
from reports.record_fields import detail


def fuzz_rows(records):
    """A run's records of `interop fuzz` (see FUZZ_SUITE) with the `details` their tables read, stored per run
    (run_fuzz). A session record is `FUZZ-<MODE>`, a finding record `FUZZ-<MODE>/<signature>`.

    `details` is a map of strings: a session's signature list arrives as its JSON text. from_json makes Spark
    evaluate this projection row by row, which costs nothing here: only fuzz records reach it."""
    from pyspark.sql import functions as F

    def d(name: str):
        return detail(FUZZ, name)

    no_signatures = F.array().cast("array<string>")
    return (records.where(F.col("suite") == FUZZ_SUITE)
            .select("run_folder", "ingest_id", "run_id", "target", "outcome", "duration_s", "started", "message",
                    F.col("fault_name").alias("deliberate_break"),  # `interop fuzz --break` puts its breaks there
                    F.coalesce(d("mode"), F.lower(F.regexp_extract("case", r"^FUZZ-([A-Za-z]+)", 1))).alias("mode"),
                    F.col("case").contains("/").alias("is_finding"),
                    d("seed").alias("seed"), d("executed").alias("executed"),
                    F.coalesce(d("signatures"), no_signatures).alias("signatures"),
                    # the findings the product's expected file records (harness/fuzz/recorded.py)
                    F.coalesce(d("recorded"), no_signatures).alias("recorded"),
                    F.coalesce(d("signature"), F.substring_index("case", "/", -1)).alias("signature"),
                    d("kind").alias("kind"), d("reproducer").alias("reproducer"),
                    # the product fuzzed (its role's entry) and a frames session's figures: the per-product table
                    F.col("peers").alias("peers"),
                    *[F.get_json_object(d("figures"), f"$.{key}").cast("double").alias(name)
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
