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


@pytest.fixture(scope="session")
def spark(report_jvm_env):
    """One local SparkSession for every report test of the session. Starting one takes seconds, and its JVM spends
    far more CPU than that compiling the job's code while it warms up: once per session, not once per module. Under
    pytest-xdist each worker would have its own, so the scheduler (harness/parallel.py, --dist loadfile) hands every
    module that uses it to one worker. A test that changes a session setting puts it back (run_job does)."""
    pytest.importorskip("pyspark")
    from reports.job import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
