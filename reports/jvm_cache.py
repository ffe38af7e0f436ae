"""`python -m reports.jvm_cache DIR`: the training run of the report JVM's ahead-of-time cache (reports/jvm.py's
build_cache starts it in a process of its own, with the JVM options that write the cache: they are fixed when the
JVM starts). Apart from jvm.py because it runs a whole report: jvm.py is imported by the job's session, and the job
must not be imported back by it."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

TRAINING_RUNS, TRAINING_CASES = 6, 3000  # enough for every stage of the job to run its code many times


def training_run(folder: str) -> None:
    """Reports on synthetic runs in `folder`, both ways a report is made: a new store over every run, then one more
    run added to it (the nightly case), and the page of the last."""
    from reports import page
    from reports.job.run import run_job
    from reports.job.session import spark_session
    from reports.synthetic import write_runs

    runs = Path(folder) / "runs"
    write_runs(runs, runs=TRAINING_RUNS, cases=TRAINING_CASES)
    spark = spark_session()
    run_job(spark, [str(runs)], str(Path(folder) / "report"))
    write_runs(runs, runs=1, cases=TRAINING_CASES, seed=11, start=datetime(2027, 1, 1, tzinfo=UTC))
    result = run_job(spark, [str(runs)], str(Path(folder) / "report"))
    page.write(Path(folder) / "report" / "index.html", result.data, title="training", inputs=[], catalog={},
               timings=result.timings, allure=None)
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m reports.jvm_cache DIR (the training run: see python -m reports.jvm --build-cache)")
    training_run(sys.argv[1])
