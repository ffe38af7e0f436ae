"""The harness pytest plugin's pieces that need no running peer."""

import pytest

from harness.pytest_plugin import required_capabilities


def test_a_cases_requires_adds_to_its_modules():
    """A case marked `requires("durable")` in a module marked `requires("transactions")` needs both: a vendor
    with `durable` but without `transactions` must get not-applicable, not a failing run."""
    module, case = pytest.mark.requires("transactions").mark, pytest.mark.requires("durable").mark
    assert required_capabilities([case, module]) == {"transactions", "durable"}
    assert required_capabilities([]) == set()
