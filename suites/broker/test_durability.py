"""Durable messages survive a broker crash (000 seed: the broker persists and retains; AMQP 1.0 §3.2.1)."""

import pytest

from harness.wait import wait_for


@pytest.mark.spec("BROKER-DURABLE-1")
@pytest.mark.requires("durable")
def test_kill_9_during_durable_send_loses_no_accepted_message(connect, queue, broker, details):
    total = 1000
    producer = connect()
    sender = producer.sender(queue, durable=True)
    sender.send(total, durable=True)
    # Crash the broker in the middle of the stream, once a good part has been accepted.
    wait_for(lambda: sender.settled_count() >= total // 3, 30, f"{total // 3} accepted durable messages",
             describe=lambda: f"{sender.settled_count()} outcomes")
    try:
        broker.restart(kill=True)
    except NotImplementedError as exc:
        pytest.skip(f"the {broker.info.provider} provider cannot restart a broker: {exc}")
    accepted = {seq for seq, o in sender.outcomes.items() if o.outcome == "accepted"}

    receiver = connect().receiver(queue, credit=200, durable=True)  # same terminus durability as the sender
    wait_for(lambda: accepted <= set(receiver.seqs(sender.name)), 30,
             f"all {len(accepted)} accepted messages after the restart",
             describe=lambda: f"{len(accepted - set(receiver.seqs(sender.name)))} still missing")
    receiver.conn.sync()
    seqs = receiver.seqs(sender.name)
    details.update(sent=sender.sent, accepted=len(accepted), received=len(seqs),
                   recovered_unacknowledged=len(set(seqs) - accepted))
    assert len(seqs) == len(set(seqs)), "no message may be delivered twice after recovery"
    assert seqs == sorted(seqs), "recovered messages keep their order"
