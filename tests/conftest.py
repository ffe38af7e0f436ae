"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def spark():
    """A local SparkSession for one module of report tests (starting one takes seconds; each module stops its own,
    so that another module's session settings never leak in). One session for the whole test run would save two JVM
    starts and warm-ups, but was not yet seen passing as a whole: a report that outlives its timeout breaks the
    shared session for every later module, where a module's own session keeps the failure in that module.

    The JVM behind them is one for the whole process (stopping a session leaves py4j's gateway up), so it gets the
    report's own 4 GiB heap: with 1 GiB it crawled in GC by the fourth report module (test_report_store's seven
    reports outlived their 900 s, against 203 s alone), and the timeout that ended them broke the pytest session."""
    pytest.importorskip("pyspark")
    from reports.job import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
