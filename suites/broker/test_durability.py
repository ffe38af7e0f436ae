"""Durable messages survive a broker crash (000 seed: the broker persists and retains; AMQP 1.0 §3.2.1).

A durable message may be `accepted` only once it is on disk. On an idle disk the journal write and the answer
are microseconds apart, so a broker that answers first is seldom caught by a kill -9; each case therefore also
runs with a slow disk (`disk="slow"`: every fsync takes tens of ms longer, harness/faults/disk.py), which holds
that window open while the stream goes on.
"""

import time
from functools import partial

import pytest

from harness import checkers
from harness.wait import wait_for

DISKS = pytest.mark.parametrize("disk", ["idle", "slow"], indirect=True)
SOFT_S = 30  # after this long, a window of accepted messages is enough to kill mid-stream


def kill_mid_stream(connect, queue, broker, details, total: int, window: int, body: bytes | None = None) -> None:
    """Stream `total` durable messages, kill -9 the broker once a third are accepted, restart it, and check that
    every accepted message is there, once each, in order.

    At most `window` messages are in flight (unsettled), as with a producer's send window: the broker's answers
    then reach this side as they are given, so the outcomes seen at the kill are the broker's latest, not ones
    it gave a long while (and many journal writes) before."""
    producer = connect()
    sender = producer.sender(queue, durable=True, window=window)
    sender.send(total, durable=True, body=body)
    # Kill once a third are accepted; or, from a broker that syncs each message on its own (one slow-disk delay
    # per message: ActiveMQ Classic's KahaDB answers one AMQP producer about every 0.32 s at 250 ms, so a third
    # of 1000 takes some 105 s), once a window is accepted and SOFT_S have passed: either way mid-stream.
    soft = time.monotonic() + SOFT_S
    wait_for(lambda: sender.settled_count() >= total // 3
             or (time.monotonic() > soft and sender.settled_count() >= window), 60 + SOFT_S,
             f"{total // 3} accepted durable messages (or {window} after {SOFT_S} s)",
             describe=lambda: f"{sender.settled_count()} outcomes")
    details["accepted_at_kill"] = sender.settled_count()
    try:
        broker.restart(kill=True)
    except NotImplementedError as exc:
        pytest.skip(f"the {broker.info.provider} provider cannot restart a broker: {exc}")
    accepted = {seq for seq, o in sender.outcomes.items() if o.outcome == "accepted"}

    # What the broker recovered: wait for that many, not for the accepted ones (a broker that lost some would
    # only be found at the deadline).
    try:
        stats = broker.queue_stats(queue)
        stored = stats["depth"]
        details.update(stored_after_restart=stored, queue_after_restart=stats.get("exists", True))
    except NotImplementedError:
        stored = None
    receiver = connect().receiver(queue, credit=200, durable=True)  # same terminus durability as the sender
    if stored is not None:
        wait_for(lambda: len(receiver.seqs(sender.name)) >= stored, 60, f"the {stored} recovered messages",
                 describe=lambda: f"{len(receiver.seqs(sender.name))} received")
    else:
        wait_for(lambda: accepted <= set(receiver.seqs(sender.name)), 30,
                 f"all {len(accepted)} accepted messages after the restart",
                 describe=lambda: f"{len(accepted - set(receiver.seqs(sender.name)))} still missing")
    # The round trip waits behind what the broker still writes: on the slow disk, ActiveMQ Classic syncs each
    # acknowledgement of the recovered messages alone (some 0.3 s each), so it gets the time a disk write has.
    receiver.conn.sync(timeout=60)
    seqs = receiver.seqs(sender.name)
    # Lost: accepted before the kill and not there after it (accepted before it was on disk). Messages in
    # flight at the kill may be there or not; whatever is there comes once each, in the order sent.
    verdict = checkers.compose(
        producer.history,
        total_queue=partial(checkers.total_queue, producer=sender.name, receivers=receiver.name,
                            allow_duplicates=False),
        ordering=partial(checkers.ordering, producer=sender.name, receivers=receiver.name, allow_redeliveries=False))
    details.update(sent=sender.sent, window=window, accepted=len(accepted), received=len(seqs),
                   recovered_unacknowledged=len(set(seqs) - accepted))
    verdict.fill(details, "lost")
    assert verdict.ok, (f"after kill -9, every accepted durable message once, in order (lost: accepted before "
                        f"it was on disk; duplicated or reordered: recovery broke the queue):\n{verdict.failures()}")


@pytest.mark.spec("BROKER-DURABLE-1")
@pytest.mark.requires("durable")
@DISKS
def test_kill_9_during_durable_send_loses_no_accepted_message(connect, queue, broker, disk, details):
    kill_mid_stream(connect, queue, broker, details, total=1000, window=20)


@pytest.mark.spec("BROKER-DURABLE-1")
@pytest.mark.requires("durable")
@DISKS
def test_kill_9_during_large_durable_stream_loses_no_accepted_message(connect, queue, broker, disk, details):
    kill_mid_stream(connect, queue, broker, details, total=600, window=16, body=b"\x5a" * 64 * 1024)
