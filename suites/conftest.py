"""Fixtures shared by every suite: a connection factory bound to a running topology.

Suites reach peers only through the wire (harness clients); they never import `reference/`.
"""

import pytest

from harness.clients import RecordingSender
from harness.peers.versions import previous_choice
from harness.pytest_plugin import NOT_APPLICABLE
from harness.wait import WaitTimeout, wait_for

# The vendor of a pairing's node (node -> vendor, as `topology(name, vendors=...)` takes) that runs the previous
# release of the session's vendor for its role (harness/peers/versions.py, `previous`), beside the session's own
# release on the other nodes: the mixed period of an upgrade (UPGRADE-MIXED-1).
PREVIOUS = "previous"
# The spec mark of a pairing that puts a node on PREVIOUS: pytest.param(..., marks=MIXED_RELEASES)
MIXED_RELEASES = pytest.mark.spec("UPGRADE-MIXED-1")


def mixed_releases(interop, role: str, pair: dict[str, str] | None) -> dict[str, str] | None:
    """`pair` with each PREVIOUS node given the previous release of the session's `role` vendor (`artemis` ->
    `artemis@2.39.0`); other pairs as they are. Not-applicable, with the reason, where that vendor has no previous
    release here (the reference, RabbitMQ, an external peer) or the session runs the previous release itself."""
    if not pair or PREVIOUS not in pair.values():
        return pair
    previous, why = previous_choice(interop.choices.get(role, "reference"))
    if previous is None:
        pytest.skip(f"{NOT_APPLICABLE}a topology of two releases: {why}")
    return {node: previous if name == PREVIOUS else name for node, name in pair.items()}


def pairing_params(pairings: dict[str, dict[str, str] | None]) -> list:
    """The names of `pairings` (name -> node vendors) as params of a fixture or case, a pairing that puts a node on
    PREVIOUS marked with UPGRADE-MIXED-1 beside the case's own clauses."""
    return [pytest.param(name, id=name, marks=MIXED_RELEASES) if PREVIOUS in (pair or {}).values() else name
            for name, pair in pairings.items()]


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


ROUTED_CREDIT_WAIT = 5.0  # how long a routed sender may wait for the far end's credit before a new attach


def attach_when_routed(conn, make, timeout: float = 15.0):
    """Attach once the route is known here (routers learn routes from each other asynchronously): retry
    an attach refused with no route until it succeeds or the deadline passes.

    A routed sender counts as attached once the far end's credit has reached it: while its routes settle,
    qdrouterd once answered an attach and then neither passed it on nor detached it, leaving the sender
    without credit for good. Such a sender is detached and the attach made again."""
    def attempt():
        try:
            link = make()
        except (ConnectionError, WaitTimeout):
            # refused for want of a route, or not answered within the attach's own timeout: a loaded machine
            # (a fresh-clone make test beside a Spark report) once took over 3 s to answer one; attach again
            return None
        if not isinstance(link, RecordingSender):
            return link
        try:
            wait_for(lambda: link.credit > 0 or link.detached.is_set(), ROUTED_CREDIT_WAIT, "credit")
        except WaitTimeout:
            pass
        if link.credit > 0:
            return link
        if not link.detached.is_set():
            link.detach(wait=False)
        return None
    return wait_for(attempt, timeout, f"a routed attach on {conn.url} to succeed and get credit")


def refusal_of(attach) -> str | None:
    """The error of an attach (`attach()` opens a link) that the peer refused, or None when it was attached (the
    link is then detached again): a probe of whether a route is there."""
    try:
        probe = attach()
    except ConnectionError as exc:
        return str(exc)
    probe.detach()
    return None
