"""What clients saw, as one ordered event history.

Every client action and every thing a client observes on the wire (attach, credit, send, outcome, receipt,
detach, errors) is one `Event`, timestamped on a monotonic clock shared by all clients of a history. The
checkers judge histories; the result records carry their counts. Nothing here knows about proton.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# Event kinds, in the order a link's life usually shows them.
ATTACHED = "attached"  # a link was attached by the peer (data: address)
REFUSED = "refused"  # the peer refused or closed a link/connection with an error (data: condition)
CREDIT = "credit"  # a sender's credit changed (data: credit, drain)
SEND = "send"  # a message was put on the wire (data: seq, settled)
OUTCOME = "outcome"  # a sent message reached a terminal outcome (data: seq, outcome, ...)
RECEIVE = "receive"  # a message arrived (data: seq, producer, body, priority, address, settled)
ABORTED = "aborted"  # a sender aborted a delivery it had begun (data: seq, sent_bytes), or a receiver saw one
                     # aborted (data: bytes: what had arrived of it, now discarded)
SETTLE = "settle"  # a receiver settled a message with an outcome (data: seq, outcome)
DECLARE = "declare"  # a transaction controller's declare was answered (data: txn, outcome, condition)
DISCHARGE = "discharge"  # a commit or rollback was answered (data: txn, fail, outcome, condition)
DETACHED = "detached"  # a link was detached (data: by, condition)
DISCONNECTED = "disconnected"  # a connection ended (data: by, condition)


@dataclass(frozen=True)
class Event:
    t: float  # seconds since the history started
    client: str  # the client's name (a link or connection name)
    kind: str
    data: dict = field(default_factory=dict)

    def as_record(self) -> dict:
        return {"t": round(self.t, 6), "client": self.client, "kind": self.kind, **self.data}


class History:
    """Thread-safe, append-only list of events."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def record(self, client: str, kind: str, **data) -> Event:
        event = Event(time.monotonic() - self._t0, client, kind, data)
        with self._lock:
            self._events.append(event)
        return event

    def events(self, kind: str | None = None, client: str | None = None) -> list[Event]:
        with self._lock:
            snapshot = list(self._events)
        return [e for e in snapshot if (kind is None or e.kind == kind) and (client is None or e.client == client)]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def count(self, kind: str, client: str | None = None) -> int:
        return len(self.events(kind, client))

    def as_records(self) -> list[dict]:
        return [e.as_record() for e in self.events()]
