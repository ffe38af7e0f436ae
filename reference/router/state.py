"""The reference router's own records of the links, connections and deliveries it routes.

Vocabulary used here and in the router's other modules (the router's point of view is reversed from the client's):
* a *producer* is a client sender; the router holds the receiving end of its link;
* a *consumer* is a client receiver; the router holds the sending end of its link;
* an *inbound* delivery is one a producer sent; each copy the router makes for a consumer is an *outbound*.

The message path finds these records by the engine's pointers (raw.py), not through proton's wrappers. They
carry what 003_9cdc7c48796dae4f.txt §12.1.1 needs: a producer's credit window (§12.1.1.1), a consumer's copies
waiting for credit and in flight (§12.1.1.3), an inbound delivery's copies and their outcomes (§12.1.1.4).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from proton import Link

from . import raw
from .settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED

CACHE_LIMIT = 10000  # entries in each of the router's per-address caches: addresses come and go
# The delivery counters management shows of each link (router.link); counted by counters.py, where routing happens
_ZERO_COUNTS = {"delivered": 0, "presettled": 0, ACCEPTED: 0, REJECTED: 0, RELEASED: 0, MODIFIED: 0}


@dataclass(eq=False)
class Producer:
    link: Link
    address: str | None  # None: anonymous sender, routed per message by its `to`
    capacity: int
    undelivered: int = 0  # inbound deliveries not finished (copies unsent, or unsettled ones not yet settled)
    closed: bool = False
    from_neighbour: bool = False  # the data link from a neighbour router
    neighbour: object = None  # that router (interrouter.Neighbour), once a message came
    route_key: str | None = None  # where its messages go; the address, or a phase-1 key for in-autolinks
    allow_fallback: bool = True  # in-autolinks must not send back to a fallback destination
    draining: bool = False  # we asked for its credit back (_revoke_one) and have not called that off since
    container: bool = False  # on a route-container connection (an in-autolink or waypoint link from a broker)
    conn_state: object = None  # its connection's ConnectionState
    # An in-autolink's messages that came with no consumer reachable (on credit granted while one was, or
    # during the drain that withdraws it): kept unsettled, in order, for the next consumer (_park)
    parked: deque = field(default_factory=deque)
    counts: dict = field(default_factory=lambda: dict(_ZERO_COUNTS))  # management's router.link counters

    def __post_init__(self):
        self.impl = self.link._impl  # the engine's link, for the per-message calls (raw.py)


@dataclass(eq=False)
class Consumer:
    link: Link
    address: str
    conn: ConnectionState
    pending: deque = field(default_factory=deque)  # Outbound copies waiting for credit
    in_flight: set = field(default_factory=set)  # Outbound copies sent and not yet settled
    cost: int = 0  # a local consumer; router networks add path costs
    closed: bool = False
    neighbour: bool = False  # the data link to a neighbour router, not a client
    edge: bool = False  # stands for an edge router's consumers of this address (interior side)
    counts: dict = field(default_factory=lambda: dict(_ZERO_COUNTS))  # management's router.link counters
    container: bool = False  # on a route-container connection (an out-autolink or waypoint link to a broker)

    def __post_init__(self):
        self.impl = self.link._impl  # the engine's link, for the per-message calls (raw.py)
        self.session_impl = raw.link_session(self.impl)  # its session, whose output the pump watches (neighbours)
        # Read once: a sending link's settle mode is fixed when it is attached, which is before it is a consumer.
        self.at_most_once = self.link.snd_settle_mode == Link.SND_SETTLED

    @property
    def outstanding(self) -> int:
        return len(self.pending) + len(self.in_flight)


@dataclass(eq=False, slots=True)
class Inbound:
    delivery: object  # the engine's delivery (a pointer, held until settled: raw.hold / raw.release)
    producer: Producer
    presettled: bool
    multicast: bool
    copies: int = 0
    unsent: int = 0
    credit_on_send: bool = False  # its producer's credit comes back once every copy is sent (_copy_sent_or_dropped)
    outcomes: list = field(default_factory=list)
    done: bool = False


@dataclass(eq=False, slots=True)
class Outbound:
    inbound: Inbound
    consumer: Consumer
    data: bytes
    priority: int
    seq: int
    delivery: object = None  # the engine's delivery once sent unsettled (a key of Router.outbound_of)
    dests: tuple = ()  # remote routers this copy is for (copies sent to a neighbour)


@dataclass(eq=False)
class ConnectionState:
    role: str = "normal"  # normal | inter-router | route-container | edge
    cost: int = 1  # its listener's or connector's `cost`: the path cost of an inter-router connection
    name: str | None = None  # its listener's or connector's name, as link routes and autolinks name it (`connection`)
    neighbour: object = None  # the router at its other end (interrouter.Neighbour), once it is an inter-router one
    lr_session: object = None  # the session link routes attach their far ends on (linkroutes.py)
    producers: set = field(default_factory=set)
    consumers: set = field(default_factory=set)
    closed: bool = False
    last_delivery: float | None = None  # when a message last came or went on it (management's lastDlvSeconds)


@dataclass(eq=False)
class RemotePath:
    """The way to a remote router, as a destination anycast can choose (cost = path cost)."""

    router_id: str
    cost: int
    outstanding: int = 0


def state_of(conn, create: bool = False) -> ConnectionState | None:
    state = getattr(conn, "router_state", None)
    if state is None and create:
        state = ConnectionState()
        conn.router_state = state
    return state


def connection_name(conn, default=None):
    """The name of the listener or connector a connection came by (None if it had none); `default` for a connection
    the router has no state of."""
    state = state_of(conn)
    return state.name if state is not None else default
