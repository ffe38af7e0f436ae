"""Broker connections into a secured broker (002_f23507c2891d6d06.txt, "Important": the target needs permission
for every operation the connection performs, so it must dial as a user holding them).

Topology `security-broker-connection`: B1 (open) dials B2 (security on) with two broker connections, each a
`<sender>` element. `granted` dials as bridge, whose role may send on B2: the positive control, its allowed.#
messages reach B2. `denied` dials as weak, who may only consume on B2: its sender link is refused there.

What "fails as seed 002 says" means here, as encoded: the connection's user lacks the permission, so the
operation (the sender's attach on B2) is refused with amqp:unauthorized-access; the source logs the failure,
reports it in its management view (`last_error`, `errors`) and retries by its reconnect policy, and nothing is
delivered: every message stays on the source's queue, and the target's queue receives none. The other
connection, whose user holds the permission, is not affected.
"""

from __future__ import annotations

import pytest

from harness.wait import wait_for

from suites.brokerconnections.conftest import WAIT, connection, send_accepted, sender, wait_connected

pytestmark = pytest.mark.requires("broker-connection", "broker:sasl.plain", "broker-permissions")

UNAUTHORIZED = "amqp:unauthorized-access"
N = 5


def depth(peer, name: str) -> int:
    return int(peer.queue_stats(name).get("depth", 0))


@pytest.fixture
def bridged(topology):
    running = topology("security-broker-connection")
    return running, running["B1"], running["B2"]


@pytest.mark.spec("SEC-BROKER-CONN-1")
def test_a_connection_whose_user_may_send_forwards_to_the_secured_broker(bridged, clients, details):
    running, b1, b2 = bridged
    wait_connected(b1, "granted")
    before = depth(b2, "allowed.q")
    snd = sender(clients.connect(running.client_url("producer")), "allowed.q")
    send_accepted(snd, N)
    wait_for(lambda: depth(b2, "allowed.q") - before >= N and depth(b1, "allowed.q") == 0, WAIT,
             f"{N} messages forwarded from B1 allowed.q to B2 as user bridge",
             describe=lambda: f"B1 {depth(b1, 'allowed.q')}, B2 {depth(b2, 'allowed.q') - before} new")
    row = connection(b1, "granted")
    details.update(forwarded=depth(b2, "allowed.q") - before, connection=row)
    # A dial may have failed before B2 listened (the brokers start together); a refusal must never have come.
    assert UNAUTHORIZED not in (row["last_error"] or ""), f"granted was refused: {row}"


@pytest.mark.spec("SEC-BROKER-CONN-2")
def test_a_connection_whose_user_lacks_send_fails_and_delivers_nothing(bridged, clients, details):
    running, b1, b2 = bridged
    before_b2 = depth(b2, "held.q")
    snd = sender(clients.connect(running.client_url("producer")), "held.q")
    send_accepted(snd, N)  # B1 is open: its own queue takes them

    def refused_twice():  # once could be chance; twice is the reconnect policy at work
        row = connection(b1, "denied")
        return row["errors"] >= 2 and UNAUTHORIZED in (row["last_error"] or "") and row
    row = wait_for(refused_twice, WAIT, "broker connection 'denied' of B1 to fail with amqp:unauthorized-access "
                   "at least twice", describe=lambda: str(connection(b1, "denied")))
    on_b1, on_b2 = depth(b1, "held.q"), depth(b2, "held.q") - before_b2
    granted = connection(b1, "granted")
    details.update(connection=row, held_on_b1=on_b1, reached_b2=on_b2, granted_error=granted["last_error"])
    assert "held.q" in row["last_error"], f"the failure does not name the address: {row['last_error']}"
    assert on_b2 == 0, f"B2 got {on_b2} held.q message(s) through a connection whose user may not send there"
    assert on_b1 == N, f"B1 holds {on_b1} of the {N} held.q messages; they must stay until a user may send them"
    assert not row["gave_up"] and row["started"], f"reconnect-attempts -1 must keep retrying: {row}"
    assert UNAUTHORIZED not in (granted["last_error"] or ""), f"the other connection was refused too: {granted}"


# ---- mirrors (002, "Mirroring": the target's producer to $ACTIVEMQ_ARTEMIS_MIRROR_<name> needs roles) ----------


@pytest.fixture
def mirrors(topology):
    running = topology("security-broker-mirror")
    return running


@pytest.mark.requires("mirror")
@pytest.mark.spec("SEC-BROKER-CONN-1")
def test_a_mirror_whose_user_has_the_roles_mirrors_into_the_secured_broker(mirrors, clients, details):
    b3, b4 = mirrors["B3"], mirrors["B4"]
    wait_connected(b3, "granted")
    before = depth(b4, "mirrored.q")
    snd = sender(clients.connect(mirrors.client_url("control_producer")), "mirrored.q")
    send_accepted(snd, N)
    wait_for(lambda: depth(b4, "mirrored.q") - before >= N, WAIT, f"{N} messages mirrored from B3 to B4",
             describe=lambda: f"B4 {depth(b4, 'mirrored.q') - before} new")
    row = connection(b3, "granted")
    details.update(mirrored=depth(b4, "mirrored.q") - before, connection=row)
    assert UNAUTHORIZED not in (row["last_error"] or ""), f"granted was refused: {row}"


@pytest.mark.requires("mirror")
@pytest.mark.spec("SEC-BROKER-CONN-2")
def test_a_mirror_whose_user_lacks_the_roles_fails_and_mirrors_nothing(mirrors, clients, details):
    b1, b2 = mirrors["B1"], mirrors["B2"]
    before_b2 = depth(b2, "mirrored.q")
    snd = sender(clients.connect(mirrors.client_url("producer")), "mirrored.q")
    send_accepted(snd, N)

    def refused_twice():
        row = connection(b1, "denied")
        return row["errors"] >= 2 and UNAUTHORIZED in (row["last_error"] or "") and row
    row = wait_for(refused_twice, WAIT, "mirror 'denied' of B1 to fail with amqp:unauthorized-access at least "
                   "twice", describe=lambda: str(connection(b1, "denied")))
    waiting = depth(b1, row["mirror_queue"]) if row.get("mirror_queue") else None
    on_b2 = depth(b2, "mirrored.q") - before_b2
    details.update(connection=row, reached_b2=on_b2, mirror_events_waiting=waiting)
    assert on_b2 == 0, f"B2 got {on_b2} message(s) through a mirror whose user may not send there"
    assert waiting is None or waiting >= N, f"B1's mirror queue holds {waiting} events, expected >= {N}"
    assert depth(b1, "mirrored.q") == N, "B1's own queue must keep its messages"


@pytest.mark.spec("SEC-BROKER-CONN-2")
def test_a_connection_with_a_wrong_password_fails_and_delivers_nothing(bridged, clients, details):
    running, b1, b2 = bridged
    before_b2 = depth(b2, "lost.q")
    snd = sender(clients.connect(running.client_url("producer")), "lost.q")
    send_accepted(snd, N)

    def failed_twice():
        row = connection(b1, "misspelt")
        return row["errors"] >= 2 and UNAUTHORIZED in (row["last_error"] or "") and row
    row = wait_for(failed_twice, WAIT, "broker connection 'misspelt' of B1 to fail authentication at least twice",
                   describe=lambda: str(connection(b1, "misspelt")))
    on_b1, on_b2 = depth(b1, "lost.q"), depth(b2, "lost.q") - before_b2
    details.update(connection=row, held_on_b1=on_b1, reached_b2=on_b2)
    assert on_b2 == 0 and on_b1 == N, f"B1 holds {on_b1} of {N}, B2 got {on_b2}"
    assert row["connects"] == 0, f"a wrong password opened a connection: {row}"
