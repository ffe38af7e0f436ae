"""The robustness suite aims each input at one server: the router (single-router's R1) or the broker (single-broker's
B1). In a session where a real product plays one role and the reference the other (a products cell such as
router=reference, broker=artemis), the cases aimed at the reference peer test nothing the reference step does not:
they are left out (deselected, so pytest counts them), which saved 30-60 s of each such cell in make test. A session
of reference peers only runs both roles, and so does one with real products in both."""

from __future__ import annotations

from pathlib import Path

from harness.pytest_plugin import chosen_vendors

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    vendors = chosen_vendors(config)
    if "reference" not in vendors.values() or set(vendors.values()) == {"reference"}:
        return
    keep, drop = [], []
    for item in items:  # every item of the session comes here: this suite's only are judged
        role = HERE in item.path.parents and getattr(item, "callspec", None) and item.callspec.params.get("role")
        (drop if role and vendors.get(role) == "reference" else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
