"""The tables of type interop and network-of-brokers cases (records.TYPES_SUITE, records.NETWORK_SUITE):
run_types and run_network per run, then type_interop and network from each target's latest run.
"""

from __future__ import annotations

from harness.record_schema import NETWORK, TYPES
from reports.job.records import NETWORK_SUITE, TYPES_SUITE, is_case
from reports.record_fields import detail


def type_rows(records):
    """A run's type interop cases (TYPES_SUITE) with their type family, section, client stacks and peer role.
    Stored per run (run_types)."""
    from pyspark.sql import functions as F

    def d(name: str):
        return detail(TYPES, name)

    return (records.where((F.col("suite") == TYPES_SUITE) & d("type").isNotNull())
            .select("run_folder", "ingest_id", "run_id", "target", "outcome", "message",
                    *[d(name).alias(name) for name in ("type", "section", "sender_stack", "receiver_stack", "via",
                                                       "values")],
                    F.size(d("failures")).alias("values_differing")))


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


def network_rows(records):
    """A run's network-of-brokers cases (NETWORK_SUITE) with the figures they wrote: the fault, messages lost and
    duplicated (the total-queue checker's counts; a topic case's, per subscriber, summed) and resume_s (seconds
    from the fault's end until forwarding resumed). Stored per run (run_network)."""
    from pyspark.sql import functions as F

    # (lost and duplicated: a number, or per subscriber, {"B1": 0, "B2": 1}, in the topic cases: then their sum)
    return (records.where((F.col("suite") == NETWORK_SUITE) & is_case())
            .select("run_folder", "ingest_id", "run_id", "target", "case", "outcome", "message",
                    F.coalesce(detail(NETWORK, "fault"), F.col("fault_name")).alias("fault"),
                    detail(NETWORK, "lost").alias("lost"), detail(NETWORK, "duplicated").alias("duplicated"),
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
