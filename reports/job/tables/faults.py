"""What faults cost: outcomes and checker counts per fault (fault_checks, checkers), and the time the peers
took to recover once a fault was gone (run_recovery, recovery).
"""

from __future__ import annotations

from harness.record_schema import RECOVERY
from reports.job.aggregates import _sum_counts
from reports.job.records import BAD, is_case
from reports.record_fields import detail


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

    return (records.where(F.col("resume_s").isNotNull() & is_case())
            .select("run_folder", "ingest_id", "run_id", "target", "suite", "outcome",
                    F.coalesce(detail(RECOVERY, "fault"), F.col("fault_name")).alias("fault"),
                    F.col("resume_s").cast("double").alias("resume_s"),
                    *[detail(RECOVERY, name).alias(name) for name in ("lost", "duplicated", "recovered")]))


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
