"""The records of the reference broker: a message in a queue (`Entry`), a queue, a consumer and a producer.

Plain data. The rules that change them each live in one module: registry.py (addresses and queues, routing),
dispatch.py (which consumer gets what), outcomes.py (AMQP 1.0 §3.4 outcomes, dead letters, redelivery),
mirror_store.py (what mirroring does to them) and durability.py (the journal side).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proton import Link


@dataclass(eq=False)
class Entry:
    """One message in one queue."""

    msg_id: int
    data: bytes
    durable: bool
    expiry: float | None  # wall-clock seconds, or None
    delivery_count: int = 0
    excluded: set = field(default_factory=set)  # consumer ids that said undeliverable-here
    ready_at: float = 0.0  # redelivery delay
    origin: tuple | None = None  # (node id, internal id) of a message a mirror brought here
    in_flight: bool = False  # sent to a consumer, not settled yet
    removed: bool = False  # acknowledged through a mirror while waiting in `available` (skipped, not sent)
    # acknowledged through a mirror while in flight: its ack reason (mirror.NORMAL, EXPIRED, ...), and the entry
    # is dropped (or expired) if it comes back
    mirror_acked: str | None = None
    hops: int = 0  # brokers of a network it crossed to get here (federation.py)
    came_from: str | None = None  # node id of the broker it was pulled from

    def __lt__(self, other: Entry) -> bool:  # heap order: message id, i.e. arrival order
        return self.msg_id < other.msg_id


@dataclass(eq=False)
class Queue:
    name: str
    address: str
    routing: str
    durable: bool  # survives restarts (journaled)
    temporary: bool = False  # deleted when its (only) consumer leaves
    durable_subscription: bool = False  # kept across detach; ended when its link is closed
    available: list = field(default_factory=list)  # heap of Entry
    delayed: list = field(default_factory=list)
    consumers: list = field(default_factory=list)
    in_flight: int = 0
    turn: int = 0
    internal: bool = False  # a mirror's store-and-forward queue: never mirrored or linked itself
    dead: int = 0  # entries of `available` marked removed, not popped yet
    keyed: dict = field(default_factory=dict)  # (node id, internal id) -> Entry, while mirrors need to find them
    federation_filter: tuple | None = None  # (node, max hops) of the broker whose pull made this subscription

    @property
    def depth(self) -> int:
        return len(self.available) - self.dead + len(self.delayed) + self.in_flight


@dataclass(eq=False)
class Consumer:
    link: Link
    queue: Queue
    id: int
    unsettled: dict = field(default_factory=dict)  # delivery tag -> Entry
    closed: bool = False
    federation_node: str | None = None  # another broker pulling (federation.py): its node id
    max_hops: int = -1  # ... and how many brokers a message may have crossed to go to it


@dataclass(eq=False)
class Producer:
    link: Link
    address: str | None
    routing_hint: str | None  # from the target's capabilities
    closed: bool = False
    federation_side: object = None  # our pull from another broker (federation.py): its Side
