"""Fixtures for the broker suites: the single-broker topology and vendor address mapping.

Suites name queues logically ("orders", or a unique auto-created name); `address()` turns that into what
the broker under test expects on the wire (identity for Artemis and the reference broker, RabbitMQ's
`/queue/...` style for RabbitMQ), so the same case runs unchanged against every vendor.
"""

import uuid

import pytest



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
    """`connect()` -> a new client connection to the broker."""
    def open_connection():
        return clients.connect(broker.url)
    return open_connection


@pytest.fixture
def queue(clients, address):
    """A fresh, auto-created anycast queue name (as the broker expects it on the wire) for this case."""
    # Never reused across cases or runs: a real broker keeps queues, their settings and leftovers.
    return address(f"interop.q.{uuid.uuid4().hex[:12]}")
