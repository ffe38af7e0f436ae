"""Mirroring (002_f23507c2891d6d06.txt, "Mirroring", "Pre Existing Messages"): DC1 replays on DC2 its sends,
its acknowledgements and its queue creations and deletions, through the events it keeps on its local queue
$ACTIVEMQ_ARTEMIS_MIRROR_DC2.

Cases that use the queue `orders` start by emptying it on both brokers (DC1 first: its acknowledgements
empty DC2 too), so each sees only its own messages whatever an earlier case left.

The cases on a running mirror run three ways: both brokers of the session's vendor (`same`), and, where that
vendor is not the reference, the session's vendor mirroring into a reference broker (`into-reference`) and a
reference broker mirroring into it (`from-reference`). A mirror is a wire format between brokers: the reference
claims to speak Artemis's, and only a pair of the two shows whether it does. So is it between two releases of one
product: where the session's vendor has a previous release here (harness/peers/versions.py), the cases also run
with DC2 on it (`into-previous`: the new release mirroring into the old) and with DC1 on it (`from-previous`), the
mixed period of an upgrade (UPGRADE-MIXED-1).
"""

import pytest

from harness import checkers
from harness.wait import wait_for

from ..conftest import kill_or_skip, pairing_params
from .conftest import (PAIRS, WAIT, connection, delete_queue, depth, exists, mirror_queue, mirror_ready,
                       paired_with_reference, send_accepted, sender, start_connection, stats, unique, wait_connected,
                       wait_depth, wait_mirror_idle)

pytestmark = pytest.mark.requires("mirror", "store-and-forward")

MIRROR = "DC2"  # the mirror connection's name on DC1, so its events wait on $ACTIVEMQ_ARTEMIS_MIRROR_DC2


@pytest.fixture(params=pairing_params(PAIRS))
def mirrored(request, topology, clients, interop):
    """broker-mirror with its mirror up and `orders` empty on both brokers (one end a reference broker or the
    session's vendor's previous release but for the `same` pair)."""
    running = topology("broker-mirror", vendors=paired_with_reference(interop, PAIRS[request.param]))
    mirror_ready(clients, running, MIRROR)
    return running


@pytest.mark.spec("MIRROR-SEND-1", "MIRROR-ACK-1", "MIRROR-STORE-1")
def test_sends_and_acknowledgements_are_replayed_on_the_mirror(mirrored, clients, details):
    dc1, dc2 = mirrored["DC1"], mirrored["DC2"]
    n = 20
    snd = sender(clients.connect(mirrored.client_url("primary")), "orders")
    send_accepted(snd, n)
    wait_depth(dc2, "orders", n, what=" (mirrored from DC1)")
    wait_mirror_idle(dc1, MIRROR)
    # The same messages: look at them on DC2 without taking them, then give them back.
    look = clients.connect(mirrored.client_url("mirror")).receiver("orders", unique("look"), credit=n,
                                                                  outcome="hold")
    wait_for(lambda: len(look.seqs(snd.name)) >= n, WAIT, f"the {n} mirrored messages at a receiver on DC2",
             describe=lambda: f"{look.seqs(snd.name)}")
    bodies = {m.seq: m.body for m in look.messages() if m.producer == snd.name}
    look.settle("release")
    look.detach()
    wait_for(lambda: stats(dc2, "orders")["in_flight"] == 0, WAIT, "the looked-at messages back on DC2's queue")
    on_target = {"mirror_queue_on_dc2": exists(dc2, mirror_queue(MIRROR)), "depth_on_dc2": depth(dc2, "orders")}
    consumer = clients.connect(mirrored.client_url("primary")).receiver("orders")
    wait_for(lambda: len(consumer.seqs(snd.name)) >= n, WAIT, f"the {n} messages at a consumer on DC1")
    wait_depth(dc1, "orders", 0)
    wait_depth(dc2, "orders", 0, what=" (DC1's acknowledgements mirrored)")
    wait_mirror_idle(dc1, MIRROR)
    details.update(sent=n, mirrored=len(bodies), **on_target)
    assert sorted(bodies) == list(range(n)), f"DC2 held {sorted(bodies)}"
    assert all(body == f"{snd.name}-{seq}" for seq, body in bodies.items()), "bodies changed on the way"
    assert on_target["depth_on_dc2"] == n
    assert not on_target["mirror_queue_on_dc2"], "the mirror queue exists on the source only, never on the target"


@pytest.mark.spec("MIRROR-QUEUE-1", "MIRROR-QUEUE-2")
def test_queue_creation_and_deletion_are_replayed_on_the_mirror(mirrored, clients, details):
    dc1, dc2 = mirrored["DC1"], mirrored["DC2"]
    name = unique("created")
    snd = sender(clients.connect(mirrored.client_url("primary")), name)  # DC1 creates the queue on attach
    send_accepted(snd, 3)
    wait_for(lambda: exists(dc2, name), WAIT, f"queue {name} created on DC1 to appear on DC2",
             describe=lambda: str(stats(dc2, name)))
    wait_depth(dc2, name, 3, what=" (mirrored sends to the new queue)")
    snd.detach()
    delete_queue(dc1, name)
    wait_for(lambda: not exists(dc2, name), WAIT, f"queue {name} deleted on DC1 to go from DC2 too",
             describe=lambda: str(stats(dc2, name)))
    details.update(queue=name, deleted_on_dc1=not exists(dc1, name))
    assert not exists(dc1, name)


@pytest.mark.spec("MIRROR-QUEUE-1", "MIRROR-SEND-1")
@pytest.mark.requires("multicast-subscription")
def test_a_subscription_on_a_multicast_address_is_mirrored_with_its_messages(mirrored, clients, details):
    """A durable subscription's queue is named after the client's container id and link name (as Artemis
    does), so the subscriber that moves to DC2 finds its subscription there with what DC1 kept for it."""
    dc1, dc2 = mirrored["DC1"], mirrored["DC2"]
    m = 8
    link = unique("sub")
    subscriber = clients.connect(mirrored.client_url("primary"))
    sub = subscriber.receiver("events", link, capabilities=("topic",), durable=True, credit=0)
    queue = f"{subscriber.container_id}.{link}"
    sub.detach(close=False)  # the subscription stays and collects what is published meanwhile
    wait_for(lambda: exists(dc2, queue), WAIT, f"the subscription queue {queue} on DC2",
             describe=lambda: str(stats(dc2, queue)))
    snd = sender(clients.connect(mirrored.client_url("primary")), "events")
    send_accepted(snd, m)
    wait_depth(dc1, queue, m)
    wait_depth(dc2, queue, m, what=" (the subscription's messages mirrored)")
    moved = clients.connect(mirrored.client_url("mirror"), container_id=subscriber.container_id).receiver(
        "events", link, capabilities=("topic",), durable=True)
    wait_for(lambda: len(moved.seqs(snd.name)) >= m, WAIT, f"the {m} messages of the subscription, read on DC2",
             describe=lambda: f"{moved.seqs(snd.name)}")
    moved.conn.sync()
    got = moved.seqs(snd.name)
    verdict = checkers.compose(clients.history, **checkers.every_message_once(snd.name, moved.name))
    moved.detach()  # closing ends the subscription on DC2
    back = subscriber.receiver("events", link, capabilities=("topic",), durable=True)
    wait_for(lambda: len(back.seqs(snd.name)) >= m, WAIT, "the subscription's messages, read on DC1")
    back.detach()  # and on DC1; the mirror replays that too
    wait_for(lambda: not exists(dc1, queue) and not exists(dc2, queue), WAIT, f"{queue} gone from both brokers",
             describe=lambda: f"DC1 {stats(dc1, queue)}, DC2 {stats(dc2, queue)}")
    details.update(subscription=queue, published=m, read_on_dc2=len(got))
    verdict.fill(details)
    assert verdict.ok, f"DC2's copy of the subscription held {got}, not each one once in order:\n{verdict.failures()}"


@pytest.mark.spec("MIRROR-PREEXISTING-1", "BROKERCONN-AUTOSTART-1")
def test_messages_from_before_the_mirror_started_are_not_mirrored(topology, clients, details):
    running = topology("broker-mirror-late")
    dc1, dc2 = running["DC1"], running["DC2"]
    row = connection(dc1, MIRROR)
    if row["started"]:
        pytest.skip("the late mirror of this topology was already started by an earlier case of this session")
    snd = sender(clients.connect(running.client_url("primary")), "orders")
    send_accepted(snd, 10)  # seqs 0-9: there before the mirror
    start_connection(dc1, MIRROR)
    wait_connected(dc1, MIRROR)
    send_accepted(snd, 10)  # seqs 10-19: after it
    wait_mirror_idle(dc1, MIRROR)
    held = depth(dc2, "orders")
    reader = clients.connect(running.client_url("mirror")).receiver("orders")
    wait_for(lambda: len(reader.seqs(snd.name)) >= 10, WAIT, "the 10 messages sent after the start on DC2",
             describe=lambda: f"{reader.seqs(snd.name)}")
    reader.conn.sync()
    got = reader.seqs(snd.name)
    details.update(before_start=10, after_start=10, held_on_dc2=held, on_dc2=len(got), on_dc1=depth(dc1, "orders"))
    assert held == 10, f"DC2 held {held} messages once the mirror was idle; 10 were sent after the start"
    assert got == list(range(10, 20)), f"DC2 got seqs {got}; only 10-19 came after the mirror started"


@pytest.mark.spec("MIRROR-PENDING-1")
def test_an_ack_mirrored_while_the_target_delivers_loses_nothing(mirrored, clients, details):
    dc1, dc2 = mirrored["DC1"], mirrored["DC2"]
    n = 10
    snd = sender(clients.connect(mirrored.client_url("primary")), "orders")
    send_accepted(snd, n)
    wait_depth(dc2, "orders", n, what=" (mirrored)")
    pending = clients.connect(mirrored.client_url("mirror")).receiver("orders", unique("pending"), credit=n,
                                                                     outcome="hold")
    wait_for(lambda: len(pending.seqs(snd.name)) >= n, WAIT, f"{n} messages pending at a consumer on DC2")
    primary = clients.connect(mirrored.client_url("primary")).receiver("orders", unique("primary"))
    wait_for(lambda: len(primary.seqs(snd.name)) >= n, WAIT, f"{n} messages accepted by a consumer on DC1")
    wait_depth(dc1, "orders", 0)
    wait_mirror_idle(dc1, MIRROR)  # DC2 has been told of every acknowledgement
    kept = stats(dc2, "orders")
    pending.settle("accept")
    wait_depth(dc2, "orders", 0, what=" once its own consumer accepted")
    pending.conn.sync()
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=[pending.name, primary.name],
                                   allow_duplicates=True)
    both = set(pending.seqs(snd.name)) & set(primary.seqs(snd.name))
    details.update(sent=n, duplicates=len(both), delivered_by_dc1=len(primary.seqs(snd.name)),
                   delivered_by_dc2=len(pending.seqs(snd.name)), dc2_after_mirrored_acks=kept,
                   **checkers.checks_details(total_queue=verdict))
    assert verdict.lost == 0, verdict.as_details()


@pytest.mark.spec("MIRROR-CRASH-1")
def test_what_the_mirror_confirmed_survives_a_kill_of_the_primary(mirrored, clients, details):
    dc1, dc2 = mirrored["DC1"], mirrored["DC2"]
    n = 50
    snd = sender(clients.connect(mirrored.client_url("primary")), "orders")
    send_accepted(snd, n)
    wait_mirror_idle(dc1, MIRROR)
    kill_or_skip(dc1)
    reader = clients.connect(mirrored.client_url("mirror")).receiver("orders", credit=n)
    wait_for(lambda: len(set(reader.seqs(snd.name))) >= n, WAIT, f"all {n} accepted messages on DC2",
             describe=lambda: f"{len(set(reader.seqs(snd.name)))} on DC2")
    wait_depth(dc2, "orders", 0)
    reader.conn.sync()
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=reader.name,
                                   allow_duplicates=False)
    details.update(sent=n, on_dc2=verdict.delivered, **checkers.checks_details(total_queue=verdict))
    assert verdict.ok, verdict.as_details()
