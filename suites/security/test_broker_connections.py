"""Broker connections into a secured broker (002_f23507c2891d6d06.txt, "Important": the target needs permission
for every operation the connection performs, so it must dial as a user holding them).

Topology `security-broker-connection`: B1 (open) dials B2 (security on) with broker connections, each a
`<sender>` element. `granted` dials as bridge, whose role may send on B2: the positive control, its allowed.#
messages reach B2. `denied` dials as weak, who may only consume on B2: its sender link is refused there.
`misspelt` dials as bridge with a wrong password.

What "fails as seed 002 says" means here: the connection's user lacks the permission, so the operation is
refused and nothing is delivered (every message stays on the source's queue, the target's queue receives none),
while the connection whose user holds the permission delivers, and the source keeps trying by its reconnect
policy (reconnect-attempts -1). Every broker is judged on that, through what any broker shows:
- nothing delivered: queue depths on both ends, read only after the granted control has delivered in the same
  case and the refused connection has dialled twice more with the messages waiting, so the absence follows a
  positive round trip and two refusals instead of a wait that proves nothing;
- it keeps trying: its dials grow (the row's `connects` and `attempts`), it stays started and never gives up.
Where the provider's management view also says why and how often the connection failed (`last_error`,
`errors`: the reference broker's), those are judged too: two more failures, each with the target's condition.
A field a provider's rows lack is not asserted (ActiveMQ Artemis 2.40's view has name, uri, started and
connected, and its log does not name the connection a refusal belonged to; see harness/vendors/artemis/native.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.wait import wait_for

from suites.brokerconnections.conftest import WAIT, connection, mirror_queue, send_accepted, sender

pytestmark = pytest.mark.requires("broker-connection", "broker:sasl.plain", "broker-permissions")

UNAUTHORIZED = "amqp:unauthorized-access"
N = 5
REFUSALS = 2  # once could be chance; twice is the reconnect policy at work


def depth(peer, name: str) -> int:
    return int(peer.queue_stats(name).get("depth", 0))


# ---- what a broker's view of its connection tells, where it tells it ------------------------------------------


def reported(row: dict, key: str):
    """A field of the view that not every provider gives (`last_error`, `errors`); None where it is absent."""
    return row.get(key)


def dials(row: dict) -> int | None:
    """A lower bound on the dials the connection has made: each dial either comes up (`connects` + 1) or fails
    (`attempts` + 1, reset by the next success, so the sum can only undercount). None where the row has
    neither."""
    if row.get("connects") is None and row.get("attempts") is None:
        return None
    return (row.get("connects") or 0) + (row.get("attempts") or 0)


def failed_again(before: dict, row: dict, condition: str) -> bool:
    """Has the connection failed and dialled again REFUSALS times since `before`, as far as its row tells?
    Its dials must have grown; where the row counts failures and says why (`errors`, `last_error`), those
    failures must have been counted and the last one must name `condition` (case-insensitive)."""
    now, then = dials(row), dials(before)
    if now is not None and now - (then or 0) < REFUSALS:
        return False
    errors = reported(row, "errors")
    if errors is None:
        return True
    return (errors - (reported(before, "errors") or 0) >= REFUSALS
            and condition.lower() in (reported(row, "last_error") or "").lower())


def wait_refused(peer, name: str, before: dict, condition: str, control: Callable[[], bool],
                 control_what: str, control_describe: Callable[[], str]) -> dict:
    """Wait until `control` holds (the granted connection has delivered: the positive round trip) and broker
    connection `name` of `peer` has failed again since `before` (failed_again); its row then."""
    last: dict = {}

    def both():
        last.update(connection(peer, name))
        return control() and failed_again(before, last, condition) and dict(last)
    told = "dials" + (", errors and last_error" if reported(before, "errors") is not None else "")
    return wait_for(both, WAIT, f"{control_what}, and broker connection {name!r} of {peer.name} to fail "
                    f"({condition}) and dial again {REFUSALS} times (judged by its {told})",
                    describe=lambda: f"control: {control_describe()}; {name}: {_since(before, last)}")


def _since(before: dict, row: dict) -> str:
    keys = ("started", "connected", "connects", "attempts", "gave_up", "errors", "last_error")
    now = ", ".join(f"{k}={row.get(k)!r}" for k in keys if k in row) or "no answer yet"
    errors = f", errors {before['errors']} -> {row['errors']}" if reported(before, "errors") is not None else ""
    return f"{now} (dials {dials(before)} -> {dials(row)}{errors})"


def assert_not_refused(row: dict, what: str) -> None:
    """A connection whose user holds the permission was never refused for it, where the view tells why a
    connection failed. (A dial may have failed before the target listened: the brokers start together.)"""
    assert UNAUTHORIZED not in (reported(row, "last_error") or ""), f"{what} was refused: {row}"


# ---- senders -----------------------------------------------------------------------------------------------------


@pytest.fixture
def bridged(topology):
    running = topology("security-broker-connection")
    return running, running["B1"], running["B2"]


def queue_for_granted(clients, running, b1, b2) -> tuple[Callable[[], bool], Callable[[], str]]:
    """Queue N allowed.q messages on B1 for the granted connection (the positive control): a check that they
    have all reached B2 and left B1, and a description of where they are."""
    before = depth(b2, "allowed.q")
    send_accepted(sender(clients.connect(running.client_url("producer")), "allowed.q"), N)
    return (lambda: depth(b2, "allowed.q") - before >= N and depth(b1, "allowed.q") == 0,
            lambda: f"B1 allowed.q {depth(b1, 'allowed.q')}, B2 allowed.q {depth(b2, 'allowed.q') - before} new")


def queue_for(clients, running, b1, b2, queue: str, name: str) -> tuple[int, dict]:
    """Queue N messages on B1 for broker connection `name`: (B2's depth of `queue` before, the connection's
    row once they are all on B1, the baseline its later dials and failures are counted from)."""
    before_b2 = depth(b2, queue)
    send_accepted(sender(clients.connect(running.client_url("producer")), queue), N)  # B1 is open: it takes them
    return before_b2, connection(b1, name)


@pytest.mark.spec("SEC-BROKER-CONN-1")
def test_a_connection_whose_user_may_send_forwards_to_the_secured_broker(bridged, clients, details):
    running, b1, b2 = bridged
    arrived, where = queue_for_granted(clients, running, b1, b2)
    wait_for(arrived, WAIT, f"{N} messages forwarded from B1 allowed.q to B2 as user bridge", describe=where)
    row = connection(b1, "granted")
    details.update(forwarded=where(), connection=row)
    assert_not_refused(row, "granted")


@pytest.mark.spec("SEC-BROKER-CONN-2")
def test_a_connection_whose_user_lacks_send_fails_and_delivers_nothing(bridged, clients, details):
    running, b1, b2 = bridged
    before_b2, before = queue_for(clients, running, b1, b2, "held.q", "denied")
    arrived, where = queue_for_granted(clients, running, b1, b2)
    row = wait_refused(b1, "denied", before, UNAUTHORIZED, arrived,
                       f"granted to forward its {N} allowed.q messages to B2", where)
    on_b1, on_b2 = depth(b1, "held.q"), depth(b2, "held.q") - before_b2
    granted = connection(b1, "granted")
    details.update(connection=row, dials_since_queued=[dials(before), dials(row)], held_on_b1=on_b1,
                   reached_b2=on_b2, control=where(), granted_error=reported(granted, "last_error"))
    if reported(row, "last_error") is not None:
        assert "held.q" in row["last_error"], f"the failure does not name the address: {row['last_error']}"
    assert on_b2 == 0, f"B2 got {on_b2} held.q message(s) through a connection whose user may not send there"
    assert on_b1 == N, f"B1 holds {on_b1} of the {N} held.q messages; they must stay until a user may send them"
    assert not row["gave_up"] and row["started"], f"reconnect-attempts -1 must keep retrying: {row}"
    assert_not_refused(granted, "the other connection (granted)")


@pytest.mark.spec("SEC-BROKER-CONN-2")
def test_a_connection_with_a_wrong_password_fails_and_delivers_nothing(bridged, clients, details):
    running, b1, b2 = bridged
    before_b2, before = queue_for(clients, running, b1, b2, "lost.q", "misspelt")
    arrived, where = queue_for_granted(clients, running, b1, b2)
    row = wait_refused(b1, "misspelt", before, UNAUTHORIZED, arrived,
                       f"granted (same user, right password) to forward its {N} allowed.q messages", where)
    on_b1, on_b2 = depth(b1, "lost.q"), depth(b2, "lost.q") - before_b2
    details.update(connection=row, dials_since_queued=[dials(before), dials(row)], held_on_b1=on_b1,
                   reached_b2=on_b2, control=where())
    assert on_b2 == 0 and on_b1 == N, f"B1 holds {on_b1} of {N}, B2 got {on_b2}"
    assert not row["gave_up"] and row["started"], f"reconnect-attempts -1 must keep retrying: {row}"
    # "Never opened an AMQP connection" only where the view can tell: one that says why dials fail (the
    # reference's) counts an AMQP open as a connect; Artemis counts its TCP connection (its "Connected" line
    # comes before SASL: measured, connects grows with every refused dial), which a wrong password still opens.
    if reported(row, "errors") is not None:
        assert row["connects"] == 0, f"a wrong password opened a connection: {row}"


# ---- mirrors (002, "Mirroring": the target's producer to $ACTIVEMQ_ARTEMIS_MIRROR_<name> needs roles) ----------


@pytest.fixture
def mirrors(topology):
    running = topology("security-broker-mirror")
    return running


def mirror_to_b4(clients, mirrors) -> tuple[Callable[[], bool], Callable[[], str]]:
    """Send N messages to B3, whose mirror to B4 dials as a user with the roles (the positive control): a check
    that B4 has them all, and a description of how many it has."""
    b4 = mirrors["B4"]
    before = depth(b4, "mirrored.q")
    send_accepted(sender(clients.connect(mirrors.client_url("control_producer")), "mirrored.q"), N)
    return (lambda: depth(b4, "mirrored.q") - before >= N,
            lambda: f"B4 mirrored.q {depth(b4, 'mirrored.q') - before} new")


@pytest.mark.requires("mirror")
@pytest.mark.spec("SEC-BROKER-CONN-1")
def test_a_mirror_whose_user_has_the_roles_mirrors_into_the_secured_broker(mirrors, clients, details):
    arrived, where = mirror_to_b4(clients, mirrors)
    wait_for(arrived, WAIT, f"{N} messages mirrored from B3 to B4", describe=where)
    row = connection(mirrors["B3"], "granted")
    details.update(mirrored=where(), connection=row)
    assert_not_refused(row, "granted")


@pytest.mark.requires("mirror")
@pytest.mark.spec("SEC-BROKER-CONN-2")
def test_a_mirror_whose_user_lacks_the_roles_fails_and_mirrors_nothing(mirrors, clients, details):
    b1, b2 = mirrors["B1"], mirrors["B2"]
    before_b2 = depth(b2, "mirrored.q")
    send_accepted(sender(clients.connect(mirrors.client_url("producer")), "mirrored.q"), N)
    before = connection(b1, "denied")
    arrived, where = mirror_to_b4(clients, mirrors)
    row = wait_refused(b1, "denied", before, UNAUTHORIZED, arrived, f"B3's mirror to bring its {N} messages to B4",
                       where)
    # Where the mirror keeps its events: the view's own word, else the queue 002 names; judged where it exists.
    events = reported(row, "mirror_queue") or mirror_queue("denied")
    held = b1.queue_stats(events)
    waiting = int(held.get("depth", 0)) if held.get("exists", True) else None
    on_b2 = depth(b2, "mirrored.q") - before_b2
    details.update(connection=row, dials_since_queued=[dials(before), dials(row)], reached_b2=on_b2,
                   mirror_events_waiting=waiting, mirror_events_queue=events, control=where())
    assert on_b2 == 0, f"B2 got {on_b2} message(s) through a mirror whose user may not send there"
    assert waiting is None or waiting >= N, f"B1's mirror queue {events} holds {waiting} events, expected >= {N}"
    assert depth(b1, "mirrored.q") == N, "B1's own queue must keep its messages"
    assert not row["gave_up"] and row["started"], f"reconnect-attempts -1 must keep retrying: {row}"
