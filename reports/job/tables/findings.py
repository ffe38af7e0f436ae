"""The findings: every failure and recorded difference behind a conformance cell, with its reason and evidence.
"""

from __future__ import annotations

from harness.record_schema import CASE
from reports.job.records import counted_outcome, is_case
from reports.record_fields import text


FINDINGS = ("failed", "error", "xfail")


def finding_rows(records):
    """A run's cases that did not pass while they judged: failed, errored, or a recorded difference (the vendor's or
    a client stack's), with their message (the failure, or the expected file's clause, reason and evidence) and, for
    a type interop case, which values differed (details.failures: value, what was sent and what arrived, each with
    its AMQP type). Stored per run (run_findings): a few percent of the records."""
    from pyspark.sql import functions as F

    return (records.where(is_case() & F.col("outcome").isin(*FINDINGS))
            .select("run_folder", "ingest_id", "run_id", "target", "suite", "case", "spec",
                    counted_outcome().alias("outcome"), "difference_of", "message",
                    text(CASE, "failures").alias("failures")))


def findings(rows, conformance_cells):
    """Per conformance cell (target x clause) that is not green, the cases behind it: the rows of the run the cell
    was taken from (its latest run citing the clause), a case citing two clauses listed under both."""
    from pyspark.sql import functions as F

    cells = conformance_cells.where(F.col("run_id").isNotNull()).select("target", "clause", "run_id")
    return (rows.select("*", F.explode("spec").alias("clause"))
            .join(F.broadcast(cells), ["target", "clause", "run_id"])
            .select("target", "clause", "case", "outcome", "difference_of", "message", "failures", "run_id"))
