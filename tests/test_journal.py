"""The reference broker's journal (reference/broker/journal.py): round trips, torn tails, corruption, compaction.

The record format is the documented one: `length (u32) | crc32 (u32) | body`, body = `type (u8) | payload`.
The tests read the file with that rule only (`records()`), so they check the format as well as the code.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from pathlib import Path

import pytest

from reference.broker import journal as journal_module
from reference.broker.journal import FILE_NAME, GroupCommitter, Journal, RecoveredQueue

HEADER = struct.Struct(">II")
ENQUEUE, DELETE, QUEUE, QUEUE_DELETE, ID_MARK = 1, 2, 3, 4, 6


def records(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, size, type) of each whole, crc-valid record, by the documented format; stops at the first bad one."""
    out, offset = [], 0
    while offset + HEADER.size <= len(data):
        length, crc = HEADER.unpack_from(data, offset)
        body = data[offset + HEADER.size: offset + HEADER.size + length]
        if not body or len(body) < length or zlib.crc32(body) != crc:
            break
        out.append((offset, HEADER.size + length, body[0]))
        offset += HEADER.size + length
    return out


def opened(directory: Path, datasync: bool = True) -> Journal:
    """A journal ready for writing (recover() opens the file for appending)."""
    journal = Journal(directory, datasync=datasync)
    journal.recover()
    return journal


def recover(directory: Path) -> tuple[dict[str, RecoveredQueue], int, int]:
    journal = Journal(directory)
    try:
        return journal.recover()
    finally:
        journal.close()


def live(queues: dict[str, RecoveredQueue]) -> dict[str, dict[int, bytes]]:
    return {name: dict(q.messages) for name, q in queues.items()}


@pytest.fixture
def jdir(tmp_path) -> Path:
    return tmp_path / "data" / "journal"


# ---- round trips -------------------------------------------------------------------------------------------------


def test_a_new_journal_is_empty_and_creates_its_directory(jdir):
    assert recover(jdir) == ({}, 0, 0)
    assert (jdir / FILE_NAME).exists()


def test_queue_enqueue_and_delete_records_round_trip(jdir):
    journal = opened(jdir)
    journal.add_queue("orders", "orders", "anycast")
    journal.add_queue("news.sub.1", "news", "multicast")
    journal.add_queue("empty", "empty-address", "anycast")
    journal.enqueue(1, "orders", b"first")
    journal.enqueue(2, "news.sub.1", b"\x00\x53\x70binary\x00")
    journal.enqueue(3, "orders", b"third")
    journal.enqueue(4, "orders", b"")
    journal.delete(1, "orders")
    assert journal.dirty
    journal.commit()
    assert not journal.dirty
    journal.close()

    queues, highest, torn = recover(jdir)
    assert (highest, torn) == (4, 0)
    assert queues == {
        "orders": RecoveredQueue("orders", "orders", "anycast", {3: b"third", 4: b""}),
        "news.sub.1": RecoveredQueue("news.sub.1", "news", "multicast", {2: b"\x00\x53\x70binary\x00"}),
        "empty": RecoveredQueue("empty", "empty-address", "anycast", {}),
    }
    assert list(queues["orders"].messages) == [3, 4], "messages come back in their order"


def test_deleting_a_queue_drops_it_and_its_messages(jdir):
    journal = opened(jdir)
    journal.add_queue("a", "a", "anycast")
    journal.add_queue("b", "b", "anycast")
    journal.enqueue(1, "a", b"x")
    journal.enqueue(2, "b", b"y")
    journal.delete_queue("a")
    journal.close()  # close() commits what is pending
    queues, highest, _ = recover(jdir)
    assert live(queues) == {"b": {2: b"y"}}
    assert highest == 2


def test_a_queue_deleted_then_recreated_starts_empty(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"old")
    journal.delete_queue("q")
    journal.add_queue("q", "q2", "multicast")
    journal.enqueue(2, "q", b"new")
    journal.close()
    queues, _, _ = recover(jdir)
    assert queues == {"q": RecoveredQueue("q", "q2", "multicast", {2: b"new"})}


def test_an_enqueue_without_its_queue_record_recovers_as_an_anycast_queue(jdir):
    journal = opened(jdir)
    journal.enqueue(5, "orphan", b"m")
    journal.close()
    queues, highest, _ = recover(jdir)
    assert queues == {"orphan": RecoveredQueue("orphan", "orphan", "anycast", {5: b"m"})}
    assert highest == 5


def test_deletes_for_unknown_queues_and_messages_are_harmless(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"m")
    journal.delete(9, "q")
    journal.delete(1, "nope")
    journal.delete_queue("nope")
    journal.close()
    queues, highest, torn = recover(jdir)
    assert live(queues) == {"q": {1: b"m"}}
    assert (highest, torn) == (9, 0)


def test_names_are_utf8(jdir):
    journal = opened(jdir)
    journal.add_queue("Bestellungen.über", "adresse/ü", "anycast")
    journal.enqueue(1, "Bestellungen.über", "nachricht ✓".encode())
    journal.close()
    queues, _, _ = recover(jdir)
    assert queues["Bestellungen.über"].address == "adresse/ü"
    assert queues["Bestellungen.über"].messages == {1: "nachricht ✓".encode()}


def test_records_follow_the_documented_format(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "a", "anycast")
    journal.enqueue(7, "q", b"hello")
    journal.delete(7, "q")
    journal.delete_queue("q")
    journal.commit()
    data = (jdir / FILE_NAME).read_bytes()
    assert [kind for _, _, kind in records(data)] == [QUEUE, ENQUEUE, DELETE, QUEUE_DELETE]
    assert sum(size for _, size, _ in records(data)) == len(data)
    offset, size, _ = records(data)[1]
    body = data[offset + HEADER.size: offset + size]
    assert body == bytes([ENQUEUE]) + struct.pack(">Q", 7) + struct.pack(">H", 1) + b"q" + b"hello"
    journal.close()


def test_pending_records_are_not_on_disk_before_commit(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"m")
    assert (jdir / FILE_NAME).read_bytes() == b""
    journal.commit()
    assert len(records((jdir / FILE_NAME).read_bytes())) == 2
    journal.close()


# ---- group commit and datasync -------------------------------------------------------------------------------


@pytest.fixture
def fsyncs(monkeypatch):
    """Every sync to disk the journal asks for (fsync for compaction, fdatasync for commits)."""
    calls: list[int] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def counting(fd, real=real):
            calls.append(fd)
            real(fd)

        monkeypatch.setattr(journal_module.os, name, counting)
    return calls


def test_one_fsync_per_committed_batch(jdir, fsyncs):
    journal = opened(jdir, datasync=True)
    fsyncs.clear()  # recovery's compaction syncs the new file and the directory
    journal.add_queue("q", "q", "anycast")
    for i in range(1, 101):
        journal.enqueue(i, "q", b"m")
    journal.commit()
    assert len(fsyncs) == 1, "a batch of 101 records shares one fsync"
    journal.commit()
    assert len(fsyncs) == 1, "committing nothing syncs nothing"
    journal.delete(1, "q")
    journal.commit()
    assert len(fsyncs) == 2
    journal.close()


def test_datasync_false_still_writes_without_fsync(jdir, fsyncs):
    journal = opened(jdir, datasync=False)
    fsyncs.clear()
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"written")
    journal.commit()
    assert fsyncs == []
    # Written and flushed to the OS: another reader sees it before close().
    assert len(records((jdir / FILE_NAME).read_bytes())) == 2
    journal.close()
    assert fsyncs == []
    queues, highest, torn = recover(jdir)
    assert (live(queues), highest, torn) == ({"q": {1: b"written"}}, 1, 0)


# ---- group commit on the writer thread -------------------------------------------------------------------------------


class GatedDisk:
    """Stands in for fdatasync: each call blocks until the test opens the gate, so a write can be held "in
    progress" while the event-loop side goes on submitting."""

    def __init__(self, monkeypatch):
        self.calls: list[bytes] = []
        self.entered = threading.Semaphore(0)
        self.gate = threading.Semaphore(0)
        self.path = None
        monkeypatch.setattr(journal_module.os, "fdatasync", self._sync)

    def _sync(self, _fd):
        self.calls.append(Path(self.path).read_bytes())  # what is in the file when the sync starts
        self.entered.release()
        assert self.gate.acquire(timeout=10), "the test never let the sync finish"


def test_callbacks_run_only_after_their_batch_is_synced_and_busy_time_merges_batches(jdir, monkeypatch):
    disk = GatedDisk(monkeypatch)
    journal = opened(jdir)
    disk.path = journal.path
    wakes = threading.Semaphore(0)
    committer = GroupCommitter(journal, wakes.release)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"first")
    committer.submit(lambda: "batch 1")
    assert disk.entered.acquire(timeout=10), "the writer thread syncs the first batch"
    assert committer.completed() == [], "nothing is durable while its sync is in progress"
    # Two more batches arrive while the disk is busy: they must become one write and one sync.
    journal.enqueue(2, "q", b"second")
    committer.submit(lambda: "batch 2")
    journal.enqueue(3, "q", b"third")
    committer.submit(lambda: "batch 3")
    disk.gate.release()
    assert wakes.acquire(timeout=10)
    assert [cb() for cb in committer.completed()] == ["batch 1"]
    assert disk.entered.acquire(timeout=10)
    assert len(records(disk.calls[-1])) == 4, "batches 2 and 3 were written together before one sync"
    disk.gate.release()
    assert wakes.acquire(timeout=10)
    assert [cb() for cb in committer.completed()] == ["batch 2", "batch 3"], "in the order submitted"
    committer.close()
    journal.close()
    assert len(disk.calls) == 2
    queues, _, _ = recover(jdir)
    assert live(queues) == {"q": {1: b"first", 2: b"second", 3: b"third"}}


def test_a_failed_write_is_reported_and_never_acknowledged(jdir, monkeypatch):
    journal = opened(jdir)

    def broken(_fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(journal_module.os, "fdatasync", broken)
    wakes = threading.Semaphore(0)
    committer = GroupCommitter(journal, wakes.release)
    journal.add_queue("q", "q", "anycast")
    committer.submit(lambda: pytest.fail("a batch that failed to sync must not be acknowledged"))
    assert wakes.acquire(timeout=10)
    with pytest.raises(OSError, match="write failed: .*Input/output error"):
        committer.completed()


def test_callbacks_are_released_on_the_loop_thread_never_kept_by_the_writer(jdir):
    """A callback holds proton deliveries, whose C objects are freed when the last Python reference goes; the
    engine is not thread-safe, so that must happen on the event-loop thread. Once the loop has run and dropped
    what `completed()` gave it, nothing may be left behind with the writer thread."""
    journal = opened(jdir)
    wakes = threading.Semaphore(0)
    committer = GroupCommitter(journal, wakes.release)
    released_on = []

    class Answer:
        def __call__(self):
            return "answered"

        def __del__(self):
            released_on.append(threading.current_thread().name)

    journal.add_queue("q", "q", "anycast")
    committer.submit(Answer())
    assert wakes.acquire(timeout=10)
    done = committer.completed()
    assert [cb() for cb in done] == ["answered"]
    del done
    assert released_on == [threading.current_thread().name]
    committer.close()
    journal.close()


# ---- torn tails and corruption -------------------------------------------------------------------------------------


def _write_three_messages(jdir: Path) -> bytes:
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"one")
    journal.enqueue(2, "q", b"two")
    journal.enqueue(3, "q", b"three, the last record of the file")
    journal.close()
    return (jdir / FILE_NAME).read_bytes()


def test_torn_tail_at_every_byte_of_the_last_record(jdir):
    data = _write_three_messages(jdir)
    last_offset, last_size, kind = records(data)[-1]
    assert kind == ENQUEUE and last_offset + last_size == len(data)
    path = jdir / FILE_NAME
    for cut in range(last_offset, len(data)):
        path.write_bytes(data[:cut])
        queues, highest, torn = recover(jdir)
        assert live(queues) == {"q": {1: b"one", 2: b"two"}}, cut
        assert torn == cut - last_offset, cut
        assert highest == 2
        # Recovery cut the tail off: the file now ends on a whole record and the next recovery is clean.
        assert records(path.read_bytes())[-1][0] + records(path.read_bytes())[-1][1] == len(path.read_bytes())
        again, highest_again, torn_again = recover(jdir)
        assert (live(again), highest_again, torn_again) == ({"q": {1: b"one", 2: b"two"}}, 2, 0), cut
    path.write_bytes(data)
    queues, highest, torn = recover(jdir)
    assert (len(queues["q"].messages), highest, torn) == (3, 3, 0)


def test_a_torn_delete_brings_the_message_back(jdir):
    """At-least-once: a delete that never fully reached the disk did not happen."""
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"m")
    journal.delete(1, "q")
    journal.close()
    path = jdir / FILE_NAME
    data = path.read_bytes()
    offset, size, kind = records(data)[-1]
    assert kind == DELETE
    path.write_bytes(data[:offset + size - 1])
    queues, _, torn = recover(jdir)
    assert live(queues) == {"q": {1: b"m"}}
    assert torn == size - 1


def test_a_zero_filled_tail_is_torn(jdir):
    data = _write_three_messages(jdir)
    (jdir / FILE_NAME).write_bytes(data + bytes(4096))  # a preallocated or half-written block after a crash
    queues, highest, torn = recover(jdir)
    assert (len(queues["q"].messages), highest, torn) == (3, 3, 4096)
    assert recover(jdir)[2] == 0


@pytest.mark.parametrize("where", ["body", "crc", "type", "length-longer", "length-shorter"])
def test_a_corrupt_record_stops_replay_there(jdir, where):
    data = bytearray(_write_three_messages(jdir))
    offset, size, _ = records(bytes(data))[2]  # the record of message 2
    if where == "body":
        data[offset + size - 1] ^= 0x01
    elif where == "crc":
        data[offset + 4] ^= 0x80
    elif where == "type":
        data[offset + HEADER.size] = 9
    else:
        length = HEADER.unpack_from(data, offset)[0]
        struct.pack_into(">I", data, offset, length + 1 if where == "length-longer" else length - 1)
    (jdir / FILE_NAME).write_bytes(bytes(data))
    queues, highest, torn = recover(jdir)
    # Replay stops at the bad record: message 1 is back; message 2 and everything after it (message 3) are cut.
    assert live(queues) == {"q": {1: b"one"}}
    assert highest == 1
    assert torn == len(data) - offset
    assert recover(jdir) == (queues, 1, 0)


def _record(kind: int, payload: bytes) -> bytes:
    body = bytes([kind]) + payload
    return HEADER.pack(len(body), zlib.crc32(body)) + body


def _name(text: str | bytes, declared: int | None = None) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(">H", len(raw) if declared is None else declared) + raw


@pytest.mark.parametrize("payload", [
    pytest.param(_record(9, struct.pack(">Q", 7) + _name("q") + b"m"), id="unknown-type"),
    pytest.param(_record(0, b""), id="type-0"),
    pytest.param(_record(ENQUEUE, struct.pack(">Q", 7) + _name("q", declared=200) + b"m"), id="name-past-end"),
    pytest.param(_record(ENQUEUE, struct.pack(">Q", 7) + b"\x00"), id="name-length-cut"),
    pytest.param(_record(ENQUEUE, b"\x00\x00\x00"), id="message-id-cut"),
    # The length of a second name cut after one byte, at an offset (6) where a bounds check that got its
    # arithmetic wrong would still pass (6 ^ 2 is 4): the record must be malformed, not a struct.error.
    pytest.param(_record(QUEUE, _name("abc") + b"\x00"), id="second-name-length-cut"),
    pytest.param(_record(ENQUEUE, struct.pack(">Q", 7) + _name(b"\xff\xfe") + b"m"), id="name-not-utf8"),
    pytest.param(_record(DELETE, struct.pack(">Q", 1) + _name("q") + b"extra"), id="delete-trailing-bytes"),
    pytest.param(_record(QUEUE, _name("q2") + _name("q2")), id="queue-no-routing"),
    pytest.param(_record(QUEUE, _name("q2") + _name("q2") + _name("sideways")), id="queue-bad-routing"),
    pytest.param(_record(QUEUE, _name("q2") + _name("q2") + _name("anycast") + b"x"), id="queue-trailing-bytes"),
    pytest.param(_record(QUEUE_DELETE, _name("q") + b"x"), id="queue-delete-trailing-bytes"),
])
def test_a_crc_valid_but_malformed_record_is_corruption(jdir, payload):
    """A record whose crc is right but whose body breaks the format stops replay there, like a torn one: the
    records before it count, it and everything after it are cut off (and reported as torn), nothing raises."""
    data = _write_three_messages(jdir)
    good = _record(ENQUEUE, struct.pack(">Q", 99) + _name("q") + b"after the bad record")
    (jdir / FILE_NAME).write_bytes(data + payload + good)
    queues, highest, torn = recover(jdir)
    assert live(queues) == {"q": {1: b"one", 2: b"two", 3: b"three, the last record of the file"}}
    assert queues["q"].routing == "anycast"
    assert highest == 3
    assert torn == len(payload) + len(good)
    assert recover(jdir) == (queues, 3, 0), "the bad tail was cut off: the next recovery is clean"


def test_a_corrupt_first_record_leaves_an_empty_journal(jdir):
    data = bytearray(_write_three_messages(jdir))
    data[HEADER.size] ^= 0xFF
    (jdir / FILE_NAME).write_bytes(bytes(data))
    assert recover(jdir) == ({}, 0, len(data))
    assert (jdir / FILE_NAME).read_bytes() == b""


# ---- compaction -----------------------------------------------------------------------------------------------------


def test_compaction_keeps_only_live_records(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.add_queue("gone", "gone", "anycast")
    journal.add_queue("idle", "idle", "multicast")
    for i in range(1, 21):
        journal.enqueue(i, "q", f"m{i}".encode())
        journal.enqueue(100 + i, "gone", b"x")
    for i in range(1, 21, 2):
        journal.delete(i, "q")
    journal.delete_queue("gone")
    journal.close()
    before = (jdir / FILE_NAME).read_bytes()
    assert len(records(before)) == 3 + 40 + 10 + 1

    queues, highest, torn = recover(jdir)
    assert (highest, torn) == (120, 0)
    after = (jdir / FILE_NAME).read_bytes()
    kinds = [kind for _, _, kind in records(after)]
    assert kinds.count(QUEUE) == 2 and kinds.count(ENQUEUE) == 10 and kinds == [ID_MARK] + kinds[1:]
    assert len(kinds) == 13
    assert sum(size for _, size, _ in records(after)) == len(after) < len(before)
    assert not list(jdir.glob("*.tmp")), "the compaction's temporary file is renamed into place"
    assert live(queues) == {"q": {i: f"m{i}".encode() for i in range(2, 21, 2)}, "idle": {}}
    # and the highest id stays 120 (the gone queue's), not 20 (the highest live one): its mark keeps it
    assert recover(jdir) == (queues, 120, 0), "the compacted file recovers to the same state"


def test_appending_after_recovery_continues_the_compacted_file(jdir):
    _write_three_messages(jdir)
    journal = opened(jdir)
    journal.enqueue(4, "q", b"four")
    journal.delete(1, "q")
    journal.close()
    queues, highest, torn = recover(jdir)
    assert list(queues["q"].messages) == [2, 3, 4]
    assert (highest, torn) == (4, 0)


def test_many_records(jdir):
    """A sanity bound on volume (no timing asserts): 20,000 messages in 20 group commits, half deleted."""
    count, batch = 20_000, 1_000
    body = bytes(range(256)) * 2
    journal = opened(jdir)
    journal.add_queue("bulk", "bulk", "anycast")
    for start in range(1, count + 1, batch):
        for i in range(start, start + batch):
            journal.enqueue(i, "bulk", body)
        journal.commit()
    for i in range(1, count + 1, 2):
        journal.delete(i, "bulk")
    journal.close()
    size_before = (jdir / FILE_NAME).stat().st_size
    queues, highest, torn = recover(jdir)
    assert (highest, torn) == (count, 0)
    messages = queues["bulk"].messages
    assert len(messages) == count // 2
    assert list(messages) == list(range(2, count + 1, 2))
    assert all(m == body for m in messages.values())
    assert (jdir / FILE_NAME).stat().st_size < size_before * 2 // 3


# ---- atomic groups (a committing transaction's records) ----------------------------------------------------------

ATOMIC = 5


def _write_group_after_a_message(jdir: Path) -> bytes:
    """Message 1 outside any group, then one atomic group: enqueue 2 and 3, delete 1."""
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"one")
    journal.commit()
    with journal.atomic():
        journal.enqueue(2, "q", b"two")
        journal.enqueue(3, "q", b"three")
        journal.delete(1, "q")
    journal.close()
    return (jdir / FILE_NAME).read_bytes()


def test_an_atomic_group_is_one_record_and_round_trips(jdir):
    data = _write_group_after_a_message(jdir)
    assert [kind for _, _, kind in records(data)] == [QUEUE, ENQUEUE, ATOMIC]
    offset, size, _ = records(data)[-1]
    members = data[offset + HEADER.size + 1: offset + size]
    assert [kind for _, _, kind in records(members)] == [ENQUEUE, ENQUEUE, DELETE], "members use the file framing"
    queues, highest, torn = recover(jdir)
    assert (live(queues), highest, torn) == ({"q": {2: b"two", 3: b"three"}}, 3, 0)
    # Compaction rewrites the group's effect as plain records (after the id mark of the highest id seen).
    assert [kind for _, _, kind in records((jdir / FILE_NAME).read_bytes())] == [ID_MARK, QUEUE, ENQUEUE, ENQUEUE]


def test_a_torn_atomic_group_is_lost_whole_at_every_byte(jdir):
    data = _write_group_after_a_message(jdir)
    offset, _, kind = records(data)[-1]
    assert kind == ATOMIC
    path = jdir / FILE_NAME
    for cut in range(offset, len(data)):
        path.write_bytes(data[:cut])
        queues, highest, torn = recover(jdir)
        assert live(queues) == {"q": {1: b"one"}}, f"cut at {cut}: none of the group, all that came before"
        assert (highest, torn) == (1, cut - offset), cut


def test_records_outside_the_group_keep_their_own_framing(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(1, "q", b"before")  # pending when the group starts: stays a record of its own
    with journal.atomic():
        journal.enqueue(2, "q", b"inside")
        with journal.atomic():  # a nested block joins the outer group
            journal.enqueue(3, "q", b"nested")
    journal.enqueue(4, "q", b"after")
    journal.close()
    data = (jdir / FILE_NAME).read_bytes()
    assert [kind for _, _, kind in records(data)] == [QUEUE, ENQUEUE, ATOMIC, ENQUEUE]
    assert live(recover(jdir)[0]) == {"q": {1: b"before", 2: b"inside", 3: b"nested", 4: b"after"}}


def test_a_group_whose_block_raises_writes_nothing(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    with pytest.raises(RuntimeError):
        with journal.atomic():
            journal.enqueue(1, "q", b"half a transaction")
            raise RuntimeError("commit failed half way")
    journal.enqueue(2, "q", b"later")
    journal.close()
    assert live(recover(jdir)[0]) == {"q": {2: b"later"}}


def _group(*members: bytes) -> bytes:
    return _record(ATOMIC, b"".join(members))


_ENQ_7 = _record(ENQUEUE, struct.pack(">Q", 7) + _name("q") + b"seven")


@pytest.mark.parametrize("payload", [
    pytest.param(_group(_ENQ_7, _ENQ_7[:-1]), id="member-cut"),
    pytest.param(_group(_ENQ_7, _ENQ_7[:5] + bytes([_ENQ_7[5] ^ 0x80]) + _ENQ_7[6:]), id="member-bad-crc"),
    pytest.param(_group(_ENQ_7, HEADER.pack(0, zlib.crc32(b""))), id="member-empty"),
    pytest.param(_group(_ENQ_7, b"\x00\x00"), id="member-header-cut"),
    pytest.param(_group(_ENQ_7, _record(9, b"x")), id="member-unknown-type"),
    pytest.param(_group(_ENQ_7, _group(_ENQ_7)), id="nested-group"),
])
def test_a_malformed_group_applies_none_of_its_members(jdir, payload):
    """The first member (message 7) is well formed: it must not be applied when a later one is bad."""
    data = _write_three_messages(jdir)
    good = _record(ENQUEUE, struct.pack(">Q", 99) + _name("q") + b"after the bad group")
    (jdir / FILE_NAME).write_bytes(data + payload + good)
    queues, highest, torn = recover(jdir)
    assert live(queues) == {"q": {1: b"one", 2: b"two", 3: b"three, the last record of the file"}}
    assert (highest, torn) == (3, len(payload) + len(good))


# ---- id marks ------------------------------------------------------------------------------------------------------


def test_an_id_mark_outlives_the_messages_and_every_compaction(jdir):
    """Ids of consumed messages must not come back after two restarts: the first compaction drops their records,
    the mark keeps the highest id (a mirror target would take a repeated id for a duplicate and drop it)."""
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.enqueue(7, "q", b"kept")
    journal.enqueue(9, "q", b"consumed")
    journal.delete(9, "q")
    journal.mark_ids(500)
    journal.close()
    for _restart in range(3):
        queues, highest, torn = recover(jdir)
        assert (live(queues), highest, torn) == ({"q": {7: b"kept"}}, 500, 0)


def test_a_mark_below_the_highest_message_id_does_not_lower_it(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.mark_ids(3)
    journal.enqueue(40, "q", b"x")
    journal.close()
    assert recover(jdir)[1] == 40


def test_a_malformed_mark_is_corruption(jdir):
    journal = opened(jdir)
    journal.add_queue("q", "q", "anycast")
    journal.close()
    body = bytes([ID_MARK]) + b"\x00\x01"  # a mark of two bytes instead of eight
    with open(jdir / FILE_NAME, "ab") as out:
        out.write(HEADER.pack(len(body), zlib.crc32(body)) + body)
    queues, highest, torn = recover(jdir)
    assert (list(queues), highest, torn) == (["q"], 0, HEADER.size + len(body))
