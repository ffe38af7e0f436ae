"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def spark():
    """A local SparkSession for one module of report tests (starting one takes seconds; each module stops its own,
    so that another module's session settings never leak in)."""
    pytest.importorskip("pyspark")
    from reports.job import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
