"""Fixtures shared by every suite: a connection factory bound to a running topology.

Suites reach peers only through the wire (harness clients); they never import `reference/`.
"""

import pytest


@pytest.fixture
def single_router(topology):
    return topology("single-router")


@pytest.fixture
def connect(clients, single_router):
    """`connect()` -> a new client connection to the single router (the topology's `producer` attach point)."""
    def open_connection(client: str = "producer"):
        return clients.connect(single_router.client_url(client))
    return open_connection
