"""What the management cases share: a management client bound to a running router, and qdstat/qdmanage runs.

Cases read a router back two ways: through the harness's own management client (harness/management.py) and
through the installed qdrouterd tools, `qdstat` and `qdmanage`, run as subprocesses, unchanged, against whichever
router the session runs (the reference or qdrouterd).
"""

from __future__ import annotations

import json
import uuid

import pytest

from harness.management import ManagementClient, run_tool, table_rows, tool_available
from harness.wait import wait_for

TOOLS_MISSING = "qdstat and qdmanage (qdrouterd 1.19's tools) are not installed here"


def unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def management(topo, node: str = "R1", address: str = "$management", timeout: float = 10.0) -> ManagementClient:
    return ManagementClient(topo[node].url, address=address, timeout=timeout)


def need_tools() -> None:
    if not (tool_available("qdstat") and tool_available("qdmanage")):
        pytest.skip(TOOLS_MISSING)


def qdstat(topo, node: str, *args: str) -> list[dict[str, str]]:
    """qdstat's table for `args` against `node`, as rows; fails the case with the tool's output on an error."""
    run = run_tool("qdstat", topo[node].url, *args)
    assert run.returncode == 0, f"qdstat failed: {run}"
    return table_rows(run.stdout)


def qdmanage(topo, node: str, *args: str, expect_ok: bool = True):
    """qdmanage's JSON answer (None when it printed nothing), or the failed run when `expect_ok` is False."""
    run = run_tool("qdmanage", topo[node].url, *args)
    if not expect_ok:
        return run
    assert run.returncode == 0, f"qdmanage failed: {run}"
    return json.loads(run.stdout) if run.stdout.strip() else None


def link_row(mgmt: ManagementClient, link_name: str, direction: str) -> dict:
    rows = [r for r in mgmt.query("router.link") if r.get("linkName") == link_name and r.get("linkDir") == direction]
    assert len(rows) == 1, f"one router.link named {link_name!r} ({direction}) expected, found {rows}"
    return rows[0]


def address_row(mgmt: ManagementClient, address: str) -> dict | None:
    rows = [r for r in mgmt.query("router.address") if r.get("name") == "M0" + address]
    return rows[0] if rows else None


def wait_for_link_counts(mgmt: ManagementClient, link_name: str, direction: str, wanted: dict, what: str) -> dict:
    """Counters settle a moment after the clients see the outcomes (the router counts when it settles)."""
    seen: dict = {}

    def arrived():
        seen.update(link_row(mgmt, link_name, direction))
        return all(seen.get(k) == v for k, v in wanted.items())
    wait_for(arrived, 10, what, describe=lambda: str({k: seen.get(k) for k in wanted}))
    return seen
