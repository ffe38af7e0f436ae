"""Fixtures shared by every suite: a connection factory bound to a running topology.

Suites reach peers only through the wire (harness clients); they never import `reference/`.
"""

import pytest

from harness.wait import wait_for


@pytest.fixture
def single_router(topology):
    return topology("single-router")


@pytest.fixture
def connect(clients, single_router):
    """`connect()` -> a new client connection to the single router (the topology's `producer` attach point)."""
    def open_connection(client: str = "producer"):
        return clients.connect(single_router.client_url(client))
    return open_connection


def restart_or_skip(peer, kill: bool = False) -> None:
    """Restart a peer (kill -9 first when `kill`); a provider that cannot restart skips the case."""
    try:
        peer.restart(kill=kill)
    except NotImplementedError as exc:
        pytest.skip(f"the {peer.info.provider} provider of {peer.name} cannot restart it: {exc}")


def kill_or_skip(peer) -> None:
    try:
        peer.kill()
    except NotImplementedError as exc:
        pytest.skip(f"the {peer.info.provider} provider of {peer.name} cannot kill it: {exc}")


def attach_when_routed(conn, make, timeout: float = 15.0):
    """Attach once the route is known here (routers learn routes from each other asynchronously): retry
    an attach refused with no route until it succeeds or the deadline passes."""
    def attempt():
        try:
            return make()
        except ConnectionError:
            return None
    return wait_for(attempt, timeout, f"a routed attach on {conn.url} to succeed")
