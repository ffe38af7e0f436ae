"""Bodies for the large-message cases (suites/*/test_large_messages.py): random bytes whose SHA-256 travels in
the message's application properties, so a truncated, padded or spliced body cannot pass."""

import hashlib
import random

import pytest

KiB, MiB = 1024, 1024 * 1024
MIN_MAX_FRAME_SIZE = 512  # AMQP 1.0 §2.4.1: the smallest max-frame-size a peer may offer in its open
SIZES = [pytest.param(n, id=label) for n, label in
         ((KiB, "1KiB"), (64 * KiB, "64KiB"), (256 * KiB, "256KiB"), (MiB, "1MiB"), (4 * MiB, "4MiB"))]
ABORTS = [pytest.param(KiB, 512, id="1KiB-one-transfer"),
          pytest.param(MiB, 512 * KiB, id="1MiB-many-transfers")]  # (body size, bytes sent before the abort)
TIMEOUT = 60.0  # a deadline generous enough for several 4 MiB messages on a loaded 2-core machine


def body_of(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def send_bodies(sender, bodies: list[bytes]) -> list[int]:
    """Send each body as one message, its digest in the application properties; returns the seqs."""
    seqs = []
    for body in bodies:
        seqs += sender.send(1, body=body, properties={"sha256": hashlib.sha256(body).hexdigest()})
    return seqs


def assert_intact(got, bodies: list[bytes], what: str) -> None:
    assert len(got) == len(bodies), f"{what}: {len(got)} messages arrived, {len(bodies)} expected"
    for i, (msg, body) in enumerate(zip(got, bodies, strict=True)):
        data = bytes(msg.body) if msg.body is not None else b""
        assert hashlib.sha256(data).hexdigest() == msg.properties.get("sha256"), (
            f"{what}: message {i} (seq {msg.seq}) arrived with {len(data)} bytes that do not match the digest it "
            f"was sent with")
        assert data == body, f"{what}: message {i} (seq {msg.seq}) is not the body sent ({len(data)} of {len(body)})"


def assert_small_frame_transfer(details, producer, consumer, frames_in_before: int, got, bodies: list[bytes],
                                 seqs: list[int], size: int, peer: str) -> None:
    """The checks after bodies crossed connections that offered the smallest max-frame-size: both connections
    still open, each message once and in order, every body intact; the frame counts go to the record."""
    sent_frames, got_frames = producer.frames(), consumer.frames()
    details.update({"size": size, "received": len(got), "consumer_frames_in": got_frames["in"] - frames_in_before,
                    "producer_frames_out": sent_frames["out"],
                    f"{peer}_max_frame_size": sent_frames["remote_max_frame_size"]})
    assert not consumer.ended and not producer.ended, (
        f"a connection ended: consumer {consumer.condition}, producer {producer.condition}")
    assert [m.seq for m in got] == seqs, "each message once, in the order sent"
    assert_intact(got, bodies, f"{size}-byte bodies over {MIN_MAX_FRAME_SIZE}-byte frames")
    # The peer wrote to the consumer in frames of at most 512 bytes (proton refuses a larger one with a framing
    # error, which would have ended the connection): each body took at least size/512 transfers.
    assert got_frames["in"] - frames_in_before >= len(bodies) * size // MIN_MAX_FRAME_SIZE, details
    peer_max = sent_frames["remote_max_frame_size"]
    if peer_max and peer_max < size:  # and the producer's deliveries were split to the peer's size
        assert sent_frames["out"] >= len(bodies) * (size // peer_max), details


def inter_arrival_ms(clients, receiver) -> dict:
    """p50/p99/max gap between consecutive arrivals, for the result record (never asserted)."""
    times = [e.t for e in clients.history.events("receive", receiver.name)]
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
    if not gaps:
        return {}
    return {"gap_p50_ms": round(gaps[len(gaps) // 2] * 1000, 1),
            "gap_p99_ms": round(gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] * 1000, 1),
            "gap_max_ms": round(gaps[-1] * 1000, 1)}
