"""Fixtures for the broker suites: the single-broker topology and vendor address mapping.

Suites name queues logically ("orders", or a unique auto-created name); `address()` turns that into what
the broker under test expects on the wire (identity for Artemis and the reference broker, RabbitMQ's
`/queue/...` style for RabbitMQ), so the same case runs unchanged against every vendor.
"""

import os
import uuid

import pytest

from harness.faults.disk import DiskFaultError, slow_disk
from harness.peers.base import PeerUnavailable

# How much longer each fsync/fdatasync of a slow-disk broker takes (harness/faults/disk.py). Enough to make
# "accepted before the journal write" visible to a kill -9 every time, small enough to keep a case short.
DISK_DELAY_MS = 250  # 10 of 10 runs catch the planted bug here; 50 ms caught 4 of 5
DISK_DELAY_ENV = "INTEROP_DISK_DELAY_MS"

@pytest.fixture
def broker_topology(topology):
    return topology("single-broker")


@pytest.fixture
def broker(broker_topology):
    return broker_topology["B1"]


@pytest.fixture
def address(broker):
    def wire(name: str) -> str:
        return broker.wire_address(name)
    return wire


@pytest.fixture
def connect(clients, broker):
    """`connect(**options)` -> a new client connection to the broker (options of Clients.connect)."""
    def open_connection(**options):
        return clients.connect(broker.url, **options)
    return open_connection


@pytest.fixture
def queue(clients, address):
    """A fresh, auto-created anycast queue name (as the broker expects it on the wire) for this case."""
    # Never reused across cases or runs: a real broker keeps queues, their settings and leftovers.
    return address(f"interop.q.{uuid.uuid4().hex[:12]}")


@pytest.fixture
def disk_delay_ms() -> int:
    """The delay of a slow disk, in ms: DISK_DELAY_MS, or $INTEROP_DISK_DELAY_MS; a case may parametrize it."""
    text = os.environ.get(DISK_DELAY_ENV)
    if text is None:
        return DISK_DELAY_MS
    try:
        return int(text)
    except ValueError:
        pytest.fail(f"{DISK_DELAY_ENV}: expected a whole number of milliseconds, got {text!r}", pytrace=False)


@pytest.fixture
def disk(request, broker, disk_delay_ms, details):
    """The broker's disk for this case: parametrize `disk` (indirect) with "idle" or "slow".

    "slow" restarts the broker under a slow-disk fault (every fsync/fdatasync takes `disk_delay_ms` longer;
    kill -9 and restarts keep it) and restarts it with an idle disk after the case. A provider that cannot do it
    (a container, an external peer), or a machine without strace, makes the case `skipped`, with the reason.
    """
    kind = getattr(request, "param", "idle")
    if kind not in ("idle", "slow"):
        pytest.fail(f"disk: expected 'idle' or 'slow', got {kind!r}", pytrace=False)
    try:
        fault = slow_disk(disk_delay_ms) if kind == "slow" else None
    except DiskFaultError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        broker.set_disk_fault(fault)
    except PeerUnavailable as exc:
        pytest.skip(f"slow disk unavailable: {exc}")
    details["disk"] = kind
    if fault is not None:
        details["disk_delay_ms"] = fault.delay_ms
    yield fault
    if fault is not None:
        broker.set_disk_fault(None)  # back to an idle disk for the cases after this one (a restart if it runs)
