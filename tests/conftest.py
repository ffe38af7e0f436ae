"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import os

import pytest

# The report tests' JVMs (the session below, the Spark Connect server, the demo's `interop report`) read a few hundred
# records. The report's own default heap is 4 GiB, for a million rows; ParallelGC grows a JVM towards it when it
# allocates fast, so that each of these JVMs held 3.5-4.5 GB on a 24 GB machine shared with other runs. A user's own
# setting wins.
REPORT_TEST_ENV = {"INTEROP_REPORT_DRIVER_MEMORY": "1g"}


@pytest.fixture(scope="session")
def report_jvm_env():
    """REPORT_TEST_ENV in the environment of the report tests' JVMs, from the first report test to the session's end."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in REPORT_TEST_ENV.items():
            if name not in os.environ:
                patch.setenv(name, value)
        yield


@pytest.fixture(scope="module")
def spark(report_jvm_env):
    """A local SparkSession for one module of report tests (starting one takes seconds; each module stops its own,
    so that another module's session settings never leak in). One session for the whole test run would save two JVM
    starts and warm-ups, but was not yet seen passing as a whole: a report that outlives its timeout breaks the
    shared session for every later module, where a module's own session keeps the failure in that module."""
    pytest.importorskip("pyspark")
    from reports.job import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
