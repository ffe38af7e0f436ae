"""A fuzz program and the world it runs in: client operations against one running topology, recorded.

A program is a list of `Step`s (an operation name and plain arguments), so that the Hypothesis state machine
that generates it, the reproducer file that replays it and the differential run against the reference all
execute the same thing through one `World.apply`. Steps name connections and links by handles (`c1`, `s2`,
`r3`); the wire names carry the program's id (`p7.s2`) so that messages left in the broker by an earlier
program are told apart from this one's.

Addresses come from a small alphabet of classes, one per routing mechanism of the fuzz topology
(topologies/fuzz-router.yaml, 003 §12.1-§12.2). Router-only classes get a fresh address per program (the
router keeps no state for them across programs); the brokered ones are the topology's fixed queues, emptied
by each program's final drain.

Waits are condition waits with short deadlines: a step that cannot make progress (no credit, a paused broker)
moves on, and the properties (harness/fuzz/properties.py) judge what the history shows.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from .. import history as h
from ..clients import Clients, ClientConnection, RecordingReceiver, RecordingSender
from ..wait import WaitTimeout, wait_for

# address class -> (distribution family, address template); {p} is the program id
ADDRESSES = {
    "multicast": ("multicast", "mc.{p}"),
    "pattern": ("multicast", "pat/{p}/mc"),
    "balanced": ("anycast", "bal.{p}"),
    "closest": ("anycast", "cl.{p}"),
    "default": ("anycast", "any.{p}"),
    "waypoint": ("brokered", "queue.orders"),
    "fallback": ("brokered", "fb.orders"),
    "linkroute": ("brokered", "lr.events"),
}
CLASSES = tuple(ADDRESSES)
# A broker under fuzz on its own (topologies/single-broker.yaml): a fresh auto-created queue per program and
# the pre-declared one.
BROKER_ADDRESSES = {
    "queue": ("brokered", "q.{p}"),
    "orders": ("brokered", "orders"),
}
ALPHABETS = {"router": ADDRESSES, "broker": BROKER_ADDRESSES}
DYNAMIC = "dynamic"  # a dynamic receiver's address: anycast to that one receiver (anonymous senders reach it)
RECEIVER_OUTCOMES = ("accept", "reject", "release", "modify", "modify-undeliverable", "hold")
AUTO_WINDOW = 10  # an auto-credit receiver keeps this much credit open
SHORT_TTL = 0.5  # seconds: a TTL that may pass within a program (such messages may expire; nothing owed)
ATTACH_TIMEOUT = 5.0
STEP_SETTLE_S = 0.5  # how long a send waits for its messages to be answered or received before moving on
OUTCOME_WAIT_S = 8.0  # at the end: how long outcomes owed to attached senders may take
DRAIN_WAIT_S = 6.0  # at the end: how long the accepted messages owed by the broker may take to come back
ROUTE_WAIT_S = 30.0  # after a broker restart: how long the router may take to restore its broker routes
PROGRAM_EVENTS = "program"  # the history's client name for step markers


def family(cls: str | None) -> str:
    if cls == DYNAMIC:
        return "anycast"
    for alphabet in ALPHABETS.values():
        if cls in alphabet:
            return alphabet[cls][0]
    return "anonymous"


@dataclass(frozen=True)
class Step:
    op: str
    args: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.op}({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"

    def as_tuple(self) -> tuple:
        return (self.op, dict(self.args))


@dataclass
class LinkInfo:
    handle: str
    conn: str
    kind: str  # sender | receiver
    cls: str | None  # address class; None for an anonymous sender
    address: str | None
    link: RecordingSender | RecordingReceiver | None = None
    refused: bool = False
    auto_credit: bool = True
    outcome: str = "accept"
    granted: int = 0  # credit this receiver granted, all told (manual receivers)
    step: int = 0  # the step that attached it
    lost_abnormally: bool = False  # its connection was dropped or its broker killed while it was attached


@dataclass
class SentInfo:
    cls: str | None
    address: str
    presettled: bool
    ttl: float | None
    durable: bool
    priority: int | None
    step: int


class Violation(AssertionError):
    """A property failed: `signature` is stable (class and property, no ids), `message` one line."""

    def __init__(self, signature: str, kind: str, message: str, evidence: dict | None = None):
        super().__init__(f"{signature}: {message}")
        self.signature, self.kind, self.message = signature, kind, message
        self.evidence = evidence or {}


class World:
    """One program's clients against one target; applies steps and keeps what the properties need."""

    def __init__(self, target, program: str, *, label: str = "target"):
        self.target, self.pid, self.label = target, program, label
        self.alphabet = ALPHABETS.get(target.role, ADDRESSES)
        self.clients = Clients(container_id=f"fuzz-{program}-{label}")
        self.history = self.clients.history  # (an empty History is falsy: Clients would not take one passed in)
        self.conns: dict[str, ClientConnection] = {}
        self.closed_by_us: set[str] = set()
        self.links: dict[str, LinkInfo] = {}
        self.sent: dict[tuple, SentInfo] = {}  # (producer wire name, seq) -> what was asked
        self.steps: list[Step] = []
        self.observations: list = []  # normalised per-step results, for the differential comparison
        self.broker_down = False
        self.broker_paused = False
        self.broker_faults: list[int] = []  # steps at which the broker was killed
        self.violations: list[Violation] = []
        self.drained: dict[str, set] = {}  # brokered class -> messages of this program the final drain got
        self.finished = False

    # ---- names -------------------------------------------------------------------------------------------

    def wire(self, handle: str) -> str:
        return f"{self.pid}.{handle}"

    def handle_of(self, wire_name: str | None) -> str | None:
        prefix = f"{self.pid}."
        return wire_name[len(prefix):] if wire_name and wire_name.startswith(prefix) else None

    def address(self, cls: str) -> str:
        return self.alphabet[cls][1].format(p=self.pid)

    @property
    def broker(self):
        running = self.target.running
        names = [n for n, node in running.topology.nodes.items() if node.role == "broker"]
        return running[names[0]] if names else None

    # ---- steps -------------------------------------------------------------------------------------------

    def apply(self, step: Step):
        """Run one step; returns its observation (also kept in `observations`)."""
        index = len(self.steps)
        self.steps.append(step)
        self.history.record(PROGRAM_EVENTS, "step", index=index, op=step.op, **step.args)
        result = getattr(self, f"_op_{step.op}")(index, **step.args)
        self.observations.append((step.op, result))
        return result

    def _op_connect(self, index, conn):
        try:
            self.conns[conn] = self.clients.connect(self.target.url, name=self.wire(conn))
            return "ok"
        except (ConnectionError, WaitTimeout) as exc:
            self._violate(f"connect:{'refused'}", "crash", f"connection {conn} to {self.target.url} failed: {exc}")
            return "refused"

    def _live_conn(self, conn) -> ClientConnection | None:
        c = self.conns.get(conn)
        return c if c is not None and not c.ended and conn not in self.closed_by_us else None

    def _op_sender(self, index, conn, link, cls=None, presettled=False):
        address = self.address(cls) if cls else None
        info = LinkInfo(link, conn, "sender", cls, address, step=index)
        failed = self._attach(info, lambda c: c.sender(address, name=self.wire(link), presettled=presettled,
                                                       timeout=ATTACH_TIMEOUT))
        return failed or self._attached(info)

    def _op_receiver(self, index, conn, link, cls, credit="auto", outcome="accept"):
        dynamic = cls == DYNAMIC
        address = None if dynamic else self.address(cls)
        auto = credit == "auto"
        info = LinkInfo(link, conn, "receiver", cls, address, auto_credit=auto, outcome=outcome, step=index,
                        granted=AUTO_WINDOW if auto else int(credit))
        failed = self._attach(info, lambda c: c.receiver(address, name=self.wire(link), credit=info.granted,
                                                         auto_credit=auto, outcome=outcome, dynamic=dynamic,
                                                         timeout=ATTACH_TIMEOUT))
        if failed:
            return failed
        if dynamic:
            info.address = info.link.remote_address
        return self._attached(info)

    def _attach(self, info: LinkInfo, make) -> str | None:
        """Attach `info`'s link with `make(connection)`; None when it attached, else what came of it."""
        self.links[info.handle] = info
        c = self._live_conn(info.conn)
        if c is None:
            info.refused = True
            return "no-connection"
        try:
            info.link = make(c)
        except (ConnectionError, WaitTimeout) as exc:
            info.refused = True
            return self._refused(info, exc)
        return None

    def _attached(self, info: LinkInfo) -> str:
        if info.cls == "linkroute" and self.broker_down:
            self._violate("linkroute:attached-without-broker", "outcome",
                          f"{info.kind} {info.handle} on {info.address} attached while the broker behind the "
                          "link route was down (003 §12.2: the route is unreachable, the attach must fail)")
        return "ok"

    def _refused(self, info: LinkInfo, exc) -> str:
        expected = info.cls == "linkroute" and (self.broker_down or self.broker_paused)
        if not expected:
            self._violate(f"{info.cls or 'anonymous'}:attach-refused", "outcome",
                          f"{info.kind} {info.handle} on {info.address!r} was refused although its route "
                          f"exists: {exc}")
        return "refused"

    def _op_send(self, index, link, count=1, priority=None, ttl=None, durable=False, to=None):
        info = self.links.get(link)
        if info is None or info.link is None or info.link.detached.is_set():
            return "no-link"
        snd: RecordingSender = info.link
        cls = info.cls if info.cls is not None else to
        if info.cls is None:
            address = self._target_address(to)
            if address is None:
                return "no-target"
        else:
            address = info.address
        seqs = snd.send(count, to=address if info.cls is None else None, priority=priority, ttl=ttl,
                        durable=durable)
        for seq in seqs:
            self.sent[(snd.name, seq)] = SentInfo(cls, address, snd.presettled, ttl, durable, priority, index)
        self._settle_point(snd, seqs)
        return "ok"

    def _target_address(self, to: str | None) -> str | None:
        if to == DYNAMIC:
            dyn = [i for i in self.links.values() if i.cls == DYNAMIC and i.link is not None and i.address
                   and not i.link.detached.is_set()]
            return dyn[-1].address if dyn else None
        return self.address(to) if to else None

    def _settle_point(self, snd: RecordingSender, seqs: list[int]) -> None:
        """Let the step's messages go out and be answered or received before the next step, so programs mean
        the same on every run; a message that cannot move (no credit, a paused broker) is left as it is."""
        names = {(snd.name, s) for s in seqs}

        def moved():
            if snd.detached.is_set() or snd.queued and snd.credit == 0:
                return True
            if snd.queued:
                return False
            if snd.presettled:
                return True
            answered = {(snd.name, s) for s in snd.outcomes}
            received = {(e.data.get("producer"), e.data.get("seq")) for e in self.history.events(h.RECEIVE)}
            return names <= answered | received
        with contextlib.suppress(WaitTimeout):
            wait_for(moved, STEP_SETTLE_S, "the step's messages to move")

    def _receiver(self, link) -> RecordingReceiver | None:
        info = self.links.get(link)
        if info is None or info.kind != "receiver" or info.link is None or info.link.detached.is_set():
            return None
        return info.link

    def _op_flow(self, index, link, credit):
        rcv = self._receiver(link)
        if rcv is None or self.links[link].auto_credit:
            return "skipped"
        self.links[link].granted += credit
        rcv.flow(credit)
        return "ok"

    def _op_drain(self, index, link, credit):
        rcv = self._receiver(link)
        if rcv is None or self.links[link].auto_credit:
            return "skipped"
        self.links[link].granted += credit
        rcv.drain(credit)
        with contextlib.suppress(WaitTimeout):  # the drain is answered: credit used up or handed back
            wait_for(lambda: rcv.detached.is_set() or rcv.credit == 0, STEP_SETTLE_S, "the drain to be answered")
        return "ok"

    def _op_settle(self, index, link, outcome, count=None):
        rcv = self._receiver(link)
        if rcv is None:
            return "skipped"
        return f"settled {rcv.settle(outcome, count)}"

    def _closing(self, conn: str | None = None, link: str | None = None) -> None:
        """Mark links as closing: a settle they make from now on may never reach the peer (proton writes
        nothing after a local close), so the properties do not count it as taken for good."""
        names = [self.wire(i.handle) for i in self.links.values() if i.handle == link or (conn and i.conn == conn)]
        self.history.record(PROGRAM_EVENTS, "closing", links=names)

    def _op_detach(self, index, link):
        info = self.links.get(link)
        if info is None or info.link is None or info.link.detached.is_set():
            return "skipped"
        self._closing(link=link)
        with contextlib.suppress(WaitTimeout):
            info.link.detach(timeout=ATTACH_TIMEOUT)
        return "ok"

    def _ending(self, conn):
        """The live connection `conn`, marked as ended by the program (None when it is gone already)."""
        c = self._live_conn(conn)
        if c is not None:
            self.closed_by_us.add(conn)
            self._closing(conn=conn)
        return c

    def _op_close(self, index, conn):
        c = self._ending(conn)
        if c is None:
            return "skipped"
        with contextlib.suppress(WaitTimeout):
            c.close(timeout=ATTACH_TIMEOUT)
        return "ok"

    def _op_kill(self, index, conn):
        c = self._ending(conn)
        if c is None:
            return "skipped"
        for info in self.links.values():
            if info.conn == conn and info.link is not None and not info.link.detached.is_set():
                info.lost_abnormally = True
        c.kill()
        return "ok"

    def _op_broker(self, index, action):
        broker = self.broker
        if broker is None:
            return "no-broker"
        if action == "kill":
            if self.broker_down:
                return "skipped"
            if self.broker_paused:
                broker.resume()
                self.broker_paused = False
            routed = [i for i in self.links.values() if i.cls == "linkroute" and i.link is not None
                      and not i.link.detached.is_set()]
            for info in self.links.values():
                if info.cls in ("waypoint", "fallback", "linkroute"):
                    info.lost_abnormally = True
            broker.kill()
            self.broker_down = True
            self.broker_faults.append(index)
            self._check_routed_links_lost(routed)
            self._await_linkroute_refused()
            return "ok"
        if action == "restart":
            if not self.broker_down:
                return "skipped"
            broker.restart()
            self.broker_down = False
            self._await_broker_routes()
            return "ok"
        if action == "pause":
            if self.broker_down or self.broker_paused:
                return "skipped"
            broker.pause()
            self.broker_paused = True
            return "ok"
        if action == "resume":
            if not self.broker_paused:
                return "skipped"
            broker.resume()
            self.broker_paused = False
            return "ok"
        raise ValueError(f"unknown broker action {action!r}")

    # ---- broker fault expectations (003 §12.2.2) ---------------------------------------------------------

    def _check_routed_links_lost(self, routed: list[LinkInfo]) -> None:
        """Links routed to a broker that died are detached; the clients' connections stay open."""
        try:
            wait_for(lambda: all(i.link.detached.is_set() for i in routed), 10.0,
                     "links routed to the killed broker to be detached")
        except WaitTimeout:
            left = [i.handle for i in routed if not i.link.detached.is_set()]
            self._violate("linkroute:not-detached-on-broker-loss", "outcome",
                          f"links {left} routed to the killed broker stayed attached for 10 s (003 §12.2.2)")
            return
        dropped = sorted({i.conn for i in routed if self.conns[i.conn].ended and i.conn not in self.closed_by_us})
        if dropped:
            self._violate("linkroute:connection-dropped-on-broker-loss", "outcome",
                          f"connections {dropped} were closed when the broker behind their routed links died; "
                          "003 §12.2.2 says the client sees its links detached, not its connection")

    def _probe_linkroute(self, timeout: float) -> bool:
        """Whether a link-route attach succeeds now (a throw-away receiver with no credit)."""
        with self.clients_probe() as conn:
            try:
                rcv = conn.receiver(self.address("linkroute"), credit=0, auto_credit=False, timeout=timeout)
            except (ConnectionError, WaitTimeout):
                return False
            rcv.detach(wait=False)
            return True

    @contextlib.contextmanager
    def clients_probe(self):
        conn = self.clients.connect(self.target.url, name=self.clients.unique(f"{self.pid}.probe"))
        try:
            yield conn
        finally:
            with contextlib.suppress(Exception):
                conn.close(timeout=ATTACH_TIMEOUT)

    def _await_linkroute_refused(self) -> None:
        try:
            wait_for(lambda: not self._probe_linkroute(2.0), 10.0, "a link-route attach to be refused")
        except WaitTimeout:
            self._violate("linkroute:attach-not-refused-when-broker-down", "outcome",
                          "attaches to the link-routed address still succeeded 10 s after its broker was killed "
                          "(003 §12.2.2: no route, the attach must fail)")

    def _await_broker_routes(self) -> None:
        """After a restart the router reconnects (003 §12.2.2): the link route and the waypoint work again."""
        try:
            wait_for(lambda: self._probe_linkroute(2.0), ROUTE_WAIT_S, "the link route to work again")
        except WaitTimeout:
            self._violate("linkroute:not-restored-after-broker-restart", "outcome",
                          f"no link-route attach succeeded within {ROUTE_WAIT_S:g} s of the broker's restart")
        with self.clients_probe() as conn:
            try:
                snd = conn.sender(self.address("waypoint"), timeout=ATTACH_TIMEOUT)
                wait_for(lambda: snd.credit > 0, ROUTE_WAIT_S, "the waypoint's producer to get credit again")
            except (ConnectionError, WaitTimeout) as exc:
                self._violate("waypoint:not-restored-after-broker-restart", "outcome",
                              f"the waypoint took no messages {ROUTE_WAIT_S:g} s after the broker restarted: {exc}")

    # ---- the end of a program ----------------------------------------------------------------------------

    def finish(self) -> None:
        """Unblock what the program left blocked, let owed outcomes and messages arrive, close everything and
        drain the broker queues the program used (the properties judge the result)."""
        if self.finished:
            return
        self.finished = True
        broker = self.broker
        if self.broker_paused:
            broker.resume()
            self.broker_paused = False
        if self.broker_down:
            broker.restart()
            self.broker_down = False
            self._await_broker_routes()
        self.history.record(PROGRAM_EVENTS, "finish")
        live = [i for i in self.links.values() if i.kind == "receiver" and i.link is not None]
        for info in live:
            if not info.auto_credit and not info.link.detached.is_set():
                info.granted += 100
                with contextlib.suppress(Exception):
                    info.link.flow(100)

        def owed():
            for info in live:  # a held message is answered at the end: the program is over
                if info.outcome == "hold" and not info.link.detached.is_set():
                    with contextlib.suppress(Exception):
                        info.link.settle("accept")
            return not self.outstanding()
        with contextlib.suppress(WaitTimeout):
            wait_for(owed, OUTCOME_WAIT_S, "outcomes owed to attached senders")
        self.history.record(PROGRAM_EVENTS, "quiesced", outstanding=[list(k) for k in self.outstanding()])

    def outstanding(self) -> set[tuple]:
        """Unsettled messages on the wire, on senders still attached, with no outcome yet."""
        out = set()
        for info in self.links.values():
            snd = info.link
            if info.kind != "sender" or snd is None or snd.detached.is_set() or snd.presettled:
                continue
            with snd._lock:
                answered = set(snd.outcomes)
            sent = {e.data["seq"] for e in self.history.events(h.SEND, snd.name)}
            out |= {(snd.name, s) for s in sent - answered}
        return out

    def close_all(self) -> None:
        for name, conn in self.conns.items():
            if not conn.ended and name not in self.closed_by_us:
                self.closed_by_us.add(name)
                self._closing(conn=name)
                with contextlib.suppress(Exception):
                    conn.close(timeout=ATTACH_TIMEOUT)

    def drain_broker(self, owed: dict[str, set]) -> None:
        """Take back what the broker still holds for each brokered class: `owed` (class -> message ids that
        must come back) is waited for; everything is accepted, so the next program starts with empty queues."""
        self.history.record(PROGRAM_EVENTS, "drain")
        for cls in [c for c, (fam, _) in self.alphabet.items() if fam == "brokered"]:
            self.drained[cls] = self._drain_one(cls, owed.get(cls, set()))

    def _drain_one(self, cls: str, owed: set) -> set:
        got: set = set()
        with self.clients_probe() as conn:
            try:
                rcv = conn.receiver(self.address(cls), name=self.wire(f"drain-{cls}"), credit=100,
                                    timeout=ATTACH_TIMEOUT)
            except (ConnectionError, WaitTimeout):
                return got

            def have():
                got.update((m.producer, m.seq) for m in rcv.messages())
                return owed <= got
            with contextlib.suppress(WaitTimeout):
                wait_for(have, DRAIN_WAIT_S if owed else 0.0, f"the {cls} queue to give back")
            conn.sync()  # whatever else was on its way is in too
            have()
        return {k for k in got if self.handle_of(k[0]) is not None}

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.close_all()
        with contextlib.suppress(Exception):
            self.clients.close(timeout=3.0)

    # ---- violations --------------------------------------------------------------------------------------

    def _violate(self, signature: str, kind: str, message: str, evidence: dict | None = None) -> None:
        self.violations.append(Violation(signature, kind, f"[{self.label}] {message}", evidence))
