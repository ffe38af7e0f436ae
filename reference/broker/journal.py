"""The reference broker's durable store: an append-only journal with group commit.

Each record is `length (u32) | crc32 (u32) | body`, body = `type (u8) | payload`. A durable message is
accepted to its producer only after the batch that holds its record has been written and (with
`journal-datasync`, the default) fsync'ed: `commit()` runs once per batch of I/O events, so many messages
share one fsync. `GroupCommitter` moves the write and fsync off the event loop: the loop hands a batch over
with the callbacks to run once it is durable and goes on serving; batches handed over while the disk is busy
are merged into the next write, so a slow disk makes batches bigger instead of stalling the broker (the way
Artemis's journal buffers writes). On start the journal is replayed; a torn or corrupt tail (a crash
mid-write) is cut off there, and the live records are compacted into a fresh file. A record whose crc is right
but whose body does not follow the format (unknown type, a name running past the body, bytes left over, bad
UTF-8, a routing other than anycast/multicast) is corruption too: replay stops there and the rest counts as torn.

An *id mark* (type 6, a u64) says that message ids up to it may have been handed out: recovery returns the
highest id it saw in any record, marks included, and compaction keeps that figure as a mark. The broker writes a
mark a block ahead of the ids it uses, so that no id is ever handed out twice by one node, not even the id of a
message that left no record (non-durable) or whose records compaction dropped: a mirror target knows a message by
(node id, message id) for good (Artemis keeps a persistent duplicate cache per origin and drops a repeat).

An *atomic group* (`with journal.atomic():`, used by a committing transaction) is one record of type 5 whose
payload is the group's records, each in the same `length | crc32 | body` framing. One crc covers the whole
group, so a crash that tears it loses all of it: recovery applies every record of a group or none.
"""

from __future__ import annotations

import collections
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

_HEADER = struct.Struct(">II")
_ENQUEUE, _DELETE, _QUEUE, _QUEUE_DELETE, _ATOMIC, _ID_MARK = 1, 2, 3, 4, 5, 6
FILE_NAME = "journal.dat"


@dataclass
class RecoveredQueue:
    name: str
    address: str
    routing: str
    messages: dict[int, bytes] = field(default_factory=dict)  # message id -> encoded message, in id order


class Journal:
    def __init__(self, directory: str | os.PathLike, datasync: bool = True):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / FILE_NAME
        self.datasync = datasync
        self._pending: list[bytes] = []
        self._grouping = False
        self._file = None

    # ---- recovery ---------------------------------------------------------------------------------------------

    def recover(self) -> tuple[dict[str, RecoveredQueue], int, int]:
        """Replay the journal: (queues with their live messages, highest message id, bytes cut off)."""
        queues: dict[str, RecoveredQueue] = {}
        data = self.path.read_bytes() if self.path.exists() else b""
        offset, highest = 0, 0
        while offset + _HEADER.size <= len(data):
            length, crc = _HEADER.unpack_from(data, offset)
            body = data[offset + _HEADER.size: offset + _HEADER.size + length]
            if len(body) < length or zlib.crc32(body) != crc or not body:
                break
            try:
                highest = max(highest, _apply(body, queues))
            except _Malformed:
                break
            offset += _HEADER.size + length
        torn = len(data) - offset
        self._compact(queues, highest)
        return queues, highest, torn

    def _compact(self, queues: dict[str, RecoveredQueue], highest: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            if highest:
                out.write(_record(_ID_MARK, struct.pack(">Q", highest)))
            for q in queues.values():
                out.write(_record(_QUEUE, _queue_payload(q.name, q.address, q.routing)))
                for msg_id, message in q.messages.items():
                    out.write(_record(_ENQUEUE, _message_payload(msg_id, q.name, message)))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.directory)
        self._file = open(self.path, "ab")  # noqa: SIM115 - kept open for the broker's lifetime

    # ---- writing ----------------------------------------------------------------------------------------------

    def add_queue(self, name: str, address: str, routing: str) -> None:
        self._pending.append(_record(_QUEUE, _queue_payload(name, address, routing)))

    def delete_queue(self, name: str) -> None:
        self._pending.append(_record(_QUEUE_DELETE, _name(name)))

    def enqueue(self, msg_id: int, queue: str, message: bytes) -> None:
        self._pending.append(_record(_ENQUEUE, _message_payload(msg_id, queue, message)))

    def delete(self, msg_id: int, queue: str) -> None:
        self._pending.append(_record(_DELETE, struct.pack(">Q", msg_id) + _name(queue)))

    def mark_ids(self, highest: int) -> None:
        """Ids up to `highest` may be handed out from now on (see the module docstring)."""
        self._pending.append(_record(_ID_MARK, struct.pack(">Q", highest)))

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Records added inside the block reach the disk as one atomic group (see the module docstring). If
        the block raises, its records are dropped. Nested blocks join the outer group."""
        if self._grouping:
            yield
            return
        outer, self._pending, self._grouping = self._pending, [], True
        try:
            yield
        except BaseException:
            self._pending = outer
            raise
        finally:
            self._grouping = False
        group, self._pending = self._pending, outer
        if group:
            self._pending.append(_record(_ATOMIC, b"".join(group)))

    @property
    def dirty(self) -> bool:
        return bool(self._pending)

    def commit(self) -> None:
        """Write every pending record in one go, then fsync (if datasync): the batch is now durable."""
        if not self._pending:
            return
        records = self.take_pending()
        self.write_durably(records)

    def take_pending(self) -> list[bytes]:
        """The records added since the last commit, handed over (to `write_durably`, maybe on another thread)."""
        records, self._pending = self._pending, []
        return records

    def write_durably(self, records: list[bytes]) -> None:
        self._file.write(b"".join(records))
        self._file.flush()
        if self.datasync:
            os.fdatasync(self._file.fileno())  # data (and the size it changes); not mtime

    def close(self) -> None:
        if self._file is not None:
            self.commit()
            self._file.close()
            self._file = None


class GroupCommitter:
    """Writes and fsyncs journal batches on a thread of its own, in the order they were handed over.

    `submit(on_durable)` (event-loop thread) hands the journal's pending records to the writer thread and
    numbers the batch; once a write holding that batch is on disk, the writer thread records the number and
    calls `wake()`; the loop then calls `completed()`, which returns the callbacks of every batch now durable,
    in order. Everything submitted while a write is in progress goes into the next write, as one batch. A failed
    write is fatal for the broker (as a journal I/O error is for Artemis): it is reported by `completed()`
    raising, never by answering `accepted`.

    Only bytes and batch numbers cross to the writer thread; the callbacks, and the proton deliveries they hold,
    stay on the event-loop thread. That is not tidiness: proton's C engine is not thread-safe, and its Python
    wrappers free their C objects when the last reference goes. Had the writer thread dropped the last reference
    to a callback (it did, when the loop had already run it), a delivery would have been freed there while the
    loop was inside proton with the GIL released, corrupting the heap (a segfault under a durable send).
    """

    def __init__(self, journal: Journal, wake: Callable[[], None]):
        self.journal, self.wake = journal, wake
        self._lock = threading.Condition()
        # Shared with the writer thread, under the lock: records, batch numbers and the error only.
        self._records: list[bytes] = []
        self._submitted = 0  # number of the last batch handed over
        self._durable = 0  # number of the last batch on disk
        self._error: BaseException | None = None
        self._closed = False
        # The event-loop thread's own: (batch number, callback), oldest first.
        self._waiting: collections.deque[tuple[int, Callable[[], None]]] = collections.deque()
        self._thread = threading.Thread(target=self._write_loop, name="journal-writer", daemon=True)
        self._thread.start()

    def submit(self, on_durable: Callable[[], None]) -> None:
        records = self.journal.take_pending()
        with self._lock:
            self._submitted += 1
            self._waiting.append((self._submitted, on_durable))
            self._records.extend(records)
            self._lock.notify()

    def completed(self) -> list[Callable[[], None]]:
        with self._lock:
            if self._error is not None:
                raise OSError(f"journal {self.journal.path}: write failed: {self._error}") from self._error
            durable = self._durable
        done = []
        while self._waiting and self._waiting[0][0] <= durable:
            done.append(self._waiting.popleft()[1])
        return done

    def flush(self) -> None:
        """Wait until everything submitted is on disk (shutdown)."""
        with self._lock:
            self._lock.wait_for(lambda: self._durable == self._submitted or self._error is not None)

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join()

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._submitted > self._durable or self._closed)
                if self._submitted == self._durable:
                    return
                records, upto = self._records, self._submitted
                self._records = []
            try:
                if records:
                    self.journal.write_durably(records)
            except OSError as exc:
                with self._lock:
                    self._error = exc
                    self._lock.notify_all()
                self.wake()
                return
            with self._lock:
                self._durable = upto
                self._lock.notify_all()
            self.wake()


class _Malformed(Exception):
    """A crc-valid record that does not follow the format."""


def _record(kind: int, payload: bytes) -> bytes:
    body = bytes([kind]) + payload
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


def _name(name: str) -> bytes:
    raw = name.encode()
    return struct.pack(">H", len(raw)) + raw


def _read_name(body: bytes, offset: int) -> tuple[str, int]:
    if offset + 2 > len(body):
        raise _Malformed("name length past the end of the record")
    (length,) = struct.unpack_from(">H", body, offset)
    start = offset + 2
    if start + length > len(body):
        raise _Malformed("name past the end of the record")
    try:
        return body[start:start + length].decode(), start + length
    except UnicodeDecodeError:
        raise _Malformed("name is not UTF-8") from None


def _read_id(body: bytes, offset: int) -> int:
    if offset + 8 > len(body):
        raise _Malformed("message id past the end of the record")
    return struct.unpack_from(">Q", body, offset)[0]


def _at_end(body: bytes, offset: int) -> None:
    if offset != len(body):
        raise _Malformed("bytes left over after the record")


def _queue_payload(name: str, address: str, routing: str) -> bytes:
    return _name(name) + _name(address) + _name(routing)


def _message_payload(msg_id: int, queue: str, message: bytes) -> bytes:
    return struct.pack(">Q", msg_id) + _name(queue) + message


def _apply(body: bytes, queues: dict[str, RecoveredQueue]) -> int:
    """Apply one record to the replay state; returns the message id it names (0 if none).

    The whole record is decoded before the state changes, so a malformed one (`_Malformed`) changes nothing."""
    kind = body[0]
    if kind == _ATOMIC:
        return _apply_atomic(body, queues)
    if kind == _QUEUE:
        name, offset = _read_name(body, 1)
        address, offset = _read_name(body, offset)
        routing, offset = _read_name(body, offset)
        _at_end(body, offset)
        if routing not in ("anycast", "multicast"):
            raise _Malformed(f"routing {routing!r}")
        queues.setdefault(name, RecoveredQueue(name, address, routing))
        return 0
    if kind == _QUEUE_DELETE:
        name, offset = _read_name(body, 1)
        _at_end(body, offset)
        queues.pop(name, None)
        return 0
    if kind == _ID_MARK:
        highest = _read_id(body, 1)
        _at_end(body, 9)
        return highest
    if kind not in (_ENQUEUE, _DELETE):
        raise _Malformed(f"unknown record type {kind}")
    msg_id = _read_id(body, 1)
    queue, offset = _read_name(body, 9)
    if kind == _ENQUEUE:
        target = queues.setdefault(queue, RecoveredQueue(queue, queue, "anycast"))
        target.messages[msg_id] = body[offset:]
    else:
        _at_end(body, offset)
        if queue in queues:
            queues[queue].messages.pop(msg_id, None)
    return msg_id


def _apply_atomic(body: bytes, queues: dict[str, RecoveredQueue]) -> int:
    """All the records of an atomic group, or (`_Malformed`) none of them."""
    members, offset = [], 1
    while offset < len(body):
        if offset + _HEADER.size > len(body):
            raise _Malformed("group member header past the end of the record")
        length, crc = _HEADER.unpack_from(body, offset)
        member = body[offset + _HEADER.size: offset + _HEADER.size + length]
        if len(member) < length or not member or zlib.crc32(member) != crc:
            raise _Malformed("group member cut or corrupt")
        if member[0] == _ATOMIC:
            raise _Malformed("atomic group inside an atomic group")
        members.append(member)
        offset += _HEADER.size + length
    for member in members:  # a dry run first: records are checked before any state changes
        _apply(member, {})
    return max((_apply(member, queues) for member in members), default=0)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
