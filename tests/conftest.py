"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import pytest

# Spark's own switches for running queries without code generation, the mode its test suites use (factoryMode is
# documented as internal, for tests). Measured here on a report of 720 records in a warm local session, C1-only JVM:
# 8.8 s and 17.1 busy CPU-s a report compiled, 6.3 s and 12.3 CPU-s interpreted; the same tables either way.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@pytest.fixture(scope="module")
def spark():
    """A local SparkSession for one module of report tests (starting one takes seconds; each module stops its own,
    so that another module's session settings never leak in). One session for the whole test run would save two JVM
    starts and warm-ups, but was not yet seen passing as a whole: a report that outlives its timeout breaks the
    shared session for every later module, where a module's own session keeps the failure in that module.

    The JVM behind them is one for the whole process (stopping a session leaves py4j's gateway up), so it gets the
    report's own 4 GiB heap: with 1 GiB it crawled in GC by the fourth report module (test_report_store's seven
    reports outlived their 900 s, against 203 s alone), and the timeout that ended them broke the pytest session.

    Its queries run interpreted, not compiled (INTERPRETED): the tests' inputs are a few hundred records, where
    compiling each query's generated Java costs more than running it. The report a user runs keeps Spark's code
    generation, and so do the reports of test_report_demo (a report process of its own) and the Connect server's."""
    pytest.importorskip("pyspark")
    from reports.job import spark_session

    session = spark_session("local[2]")
    for key, value in INTERPRETED.items():
        session.conf.set(key, value)
    yield session
    session.stop()
