"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import pytest

# How the tests' Spark runs its queries: settings of execution only, which change no table (checked: a report of the
# synthetic and known-answer runs of test_report_store made with Spark's defaults and with these, in one session,
# gives the same rows in its 20 stored and 21 collected tables).
# - Interpreted, not compiled: Spark's own switches for running queries without code generation, the mode its test
#   suites use (factoryMode is documented as internal, for tests). Measured on a report of 720 records in a warm
#   local session, C1-only JVM: 8.8 s and 17.1 busy CPU-s a report compiled, 6.3 s and 12.3 CPU-s interpreted.
# - No adaptive query execution: on inputs this small it only re-plans each query between its stages. Measured,
#   twelve reports of 720 records in a warm session, two runs each: 61.6-64.4 s and 79.3-82.3 CPU-s with it,
#   55.7-58.6 s and 69.9-72.9 CPU-s without. The report a user runs keeps it (it sizes a million rows' shuffles).
TEST_EXECUTION = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                  "spark.sql.adaptive.enabled": "false"}


@pytest.fixture(scope="module")
def spark():
    """A local SparkSession for one module of report tests (starting one takes seconds; each module stops its own,
    so that another module's session settings never leak in). One session for the whole test run would save two JVM
    starts and warm-ups, but was not yet seen passing as a whole: a report that outlives its timeout breaks the
    shared session for every later module, where a module's own session keeps the failure in that module.

    The JVM behind them is one for the whole process (stopping a session leaves py4j's gateway up), so it gets the
    report's own 4 GiB heap: with 1 GiB it crawled in GC by the fourth report module (test_report_store's seven
    reports outlived their 900 s, against 203 s alone), and the timeout that ended them broke the pytest session.

    Its queries run interpreted and without adaptive execution (TEST_EXECUTION): the tests' inputs are a few hundred
    records, where compiling each query's generated Java, or re-planning it between stages, costs more than running
    it. The report a user runs keeps Spark's defaults, and so do the reports of test_report_demo (a report process
    of its own)."""
    pytest.importorskip("pyspark")
    from reports.job import spark_session

    session = spark_session("local[2]")
    for key, value in TEST_EXECUTION.items():
        session.conf.set(key, value)
    yield session
    session.stop()
