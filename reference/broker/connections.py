"""AMQP broker connections: the broker dials out (002_f23507c2891d6d06.txt, all of it but "Mirroring").

Behaviour follows the seed and, where it is silent, Artemis's own broker connection:

* Start: at broker start when `auto-start` is true (the default), else when the management operation
  `startBrokerConnection(name)` asks (the JSON endpoint's `POST /broker-connections/NAME/start`). A mirror
  starts mirroring at that moment, not before.
* Dialling ("Reconnecting and Failover"): the first dial goes to the URI's primary; a dial that fails, or a
  connection that is lost, is retried after `retry-interval` ms, at most `reconnect-attempts` times in a row
  (-1: forever), each retry going to the next endpoint of the list primary, alternates... (Artemis's
  `retryCounter % endpoints`: after losing the primary the first retry goes to the first alternate). A
  successful connection resets the count. When the attempts are used up the connection gives up (status
  `gave_up`) until it is started again.
* Links (one session per connection), for every local queue an element matches (`queue-name`, or
  `address-match` with Artemis's wildcards on the queue's address), at connect time and whenever such a
  queue is created later:
  - `<sender>`: a sending link whose source and target are the queue's address: it consumes the local queue
    like any consumer, so a message leaves this broker once the remote accepted it;
  - `<receiver>`: a receiving link from the remote address into the local address (only queues that exist
    here are matched, as the seed says);
  - `<peer>`: both, each with the terminus capability `qd.waypoint`, which tells a router (qdrouterd, or the
    reference router) that the broker is the waypoint's store: the sender feeds the address's phase 1, the
    receiver consumes phase 0; no connector or autolinks are needed on the router;
  - `<mirror>`: see mirror.py.
  A link the remote refuses or closes ends the connection, which is then retried.
* A secured target (002_f23507c2891d6d06.txt, "Important"): the connection dials with SASL PLAIN as its
  `user`/`password`; the target checks every attach against that user's permissions. A wrong password fails
  the dial (SASL outcome auth), a missing permission refuses the link (`amqp:unauthorized-access`): either way
  the connection fails, is logged at warning with the target's condition, is retried by the reconnect
  policy, and the management view's `last_error` and `errors` say why. Nothing is forwarded: a `<sender>`'s
  messages stay on this broker's queue, a mirror's events on its store-and-forward queue.
"""

from __future__ import annotations

import collections
import logging
import time
import uuid

from proton import Endpoint, Link

from ..links import put_symbols
from ..security import ClientTls

from .config import BrokerConnectionDef
from .mirror import SNF_PREFIX, MirrorSource

log = logging.getLogger("BROKER")

WAYPOINT_CAPABILITY = "qd.waypoint"
HISTORY = 50  # dial attempts remembered for the management view


class BrokerConnection:
    """One `<amqp-connection>` and its state."""

    def __init__(self, definition: BrokerConnectionDef):
        self.definition = definition
        self.started = False
        self.connected = False
        self.gave_up = False
        self.connection = None
        self.session = None
        self.retries = 0  # Artemis's retryCounter: retries in a row, also picks the endpoint
        self.failures = 0  # failed dials since the last successful connection
        self.connects = 0
        self.target: str | None = None
        self.attempt_times: collections.deque = collections.deque(maxlen=HISTORY)
        self.targets_tried: collections.deque = collections.deque(maxlen=HISTORY)
        self.linked: set[tuple[str, str]] = set()  # (queue name, "sender"/"receiver") already linked
        self.mirror: MirrorSource | None = None
        # Why the connection or one of its links last failed ("amqp:unauthorized-access: ..." when the target
        # refused an operation to the connection's user), for the management view: a broker connection whose user
        # lacks a permission keeps failing and retrying, and this says why (002_f23507c2891d6d06.txt).
        self.last_error: str | None = None
        self.errors = 0  # link or connection failures since the start
        self.client_tls = None  # reference.security.ClientTls, made on the first dial when the URI enables TLS

    @property
    def name(self) -> str:
        return self.definition.name

    def status(self) -> dict:
        return {"name": self.name, "uri": self.definition.uri, "started": self.started, "connected": self.connected,
                "target": self.target, "attempts": self.failures, "connects": self.connects,
                "gave_up": self.gave_up, "attempt_times": list(self.attempt_times),
                "targets_tried": list(self.targets_tried),
                "mirror_queue": self.mirror.queue_name if self.mirror is not None else None,
                "last_error": self.last_error, "errors": self.errors}


class BrokerConnections:
    def __init__(self, broker, definitions: list[BrokerConnectionDef]):
        self.broker = broker
        self.items = {d.name: BrokerConnection(d) for d in definitions}
        self.loop = None

    # ---- starting ------------------------------------------------------------------------------------------------

    def install(self) -> None:
        """At broker start, before any client connects: the auto-start connections begin (their mirrors
        record events from now on); the dialling begins once the event loop runs (`run`)."""
        for bc in self.items.values():
            if bc.definition.auto_start:
                self._begin(bc)

    def run(self, loop) -> None:
        self.loop = loop
        for bc in self.items.values():
            if bc.started and bc.connection is None:
                self._dial(bc)

    def start(self, name: str) -> tuple[int, dict]:
        """Management's startBrokerConnection(name): (HTTP status, reply)."""
        bc = self.items.get(name)
        if bc is None:
            return 404, {"error": f"no broker connection {name!r} (known: {', '.join(self.items) or 'none'})"}
        if bc.started:
            return 409, {"error": f"broker connection {name!r} is already started"}
        self._begin(bc)
        if self.loop is not None:
            self._dial(bc)
        return 200, {"name": name, "started": True}

    def _begin(self, bc: BrokerConnection) -> None:
        bc.started, bc.gave_up, bc.retries, bc.failures = True, False, 0, 0
        element = bc.definition.mirror
        if element is not None and bc.mirror is None:
            bc.mirror = MirrorSource(self.broker.mirror_store, bc.name, element)
            self.broker.mirror_store.add_mirror(bc.mirror)
        log.info("Broker connection %r started (%s)", bc.name, bc.definition.uri)

    def status(self) -> list[dict]:
        return [bc.status() for bc in self.items.values()]

    # ---- dialling --------------------------------------------------------------------------------------------

    def _dial(self, bc: BrokerConnection) -> None:
        if not bc.started or bc.connection is not None:
            return
        endpoints = bc.definition.endpoints
        host, port = endpoints[bc.retries % len(endpoints)]
        bc.target = f"{host}:{port}"
        bc.attempt_times.append(time.time())
        bc.targets_tried.append(bc.target)
        d = bc.definition
        conn = self.loop.connect(f"amqp://{host}:{port}", allowed_mechs="PLAIN" if d.user else "ANONYMOUS",
                                 user=d.user, password=d.password, **_tls(bc))
        conn.broker_connection = bc
        bc.connection = conn
        log.info("Broker connection %r dialling %s", bc.name, bc.target)

    def opened(self, conn) -> None:
        """The remote answered our open: reset the retry count and create the links."""
        bc: BrokerConnection = conn.broker_connection
        if bc.connection != conn:
            return
        bc.connected, bc.retries, bc.failures = True, 0, 0
        bc.connects += 1
        bc.linked.clear()
        bc.session = conn.session()
        bc.session.open()
        log.info("Broker connection %r connected to %s", bc.name, bc.target)
        for queue in list(self.broker.queues.values()):
            self._link_queue(bc, queue)
        if bc.mirror is not None:
            link = bc.mirror.attach(bc.session, self.broker.node_id)
            link.broker_outgoing = (bc, "mirror", bc.mirror.snf)
        if bc.definition.federation is not None:
            link = self.broker.federation.dialled(conn, bc.definition.federation, bc.session, bc.name)
            link.broker_outgoing = (bc, "federation", None)

    def closed(self, conn) -> None:
        """Our connection's transport closed: a failed dial or a lost connection. Retry or give up."""
        bc: BrokerConnection = conn.broker_connection
        if bc.connection != conn:
            return
        was_up = bc.connected
        bc.connection, bc.session, bc.connected = None, None, False
        bc.linked.clear()
        if not was_up:
            bc.failures += 1
        condition = conn.transport.condition if conn.transport is not None else None
        why = f"{condition.name}: {condition.description}" if condition is not None else "closed"
        if condition is not None:  # a failed dial or SASL exchange (a wrong password: the SASL outcome auth)
            bc.last_error, bc.errors = why, bc.errors + 1
        if not bc.started:
            return
        d = bc.definition
        if d.reconnect_attempts < 0 or bc.retries < d.reconnect_attempts:
            bc.retries += 1
            log.info("Broker connection %r to %s %s (%s); retry %d%s in %d ms", bc.name, bc.target,
                     "lost" if was_up else "failed", why, bc.retries,
                     "" if d.reconnect_attempts < 0 else f" of {d.reconnect_attempts}", d.retry_interval_ms)
            self.loop.schedule(d.retry_interval_ms / 1000.0, _Redial(self, bc))
        else:
            bc.gave_up, bc.started = True, False
            log.warning("Broker connection %r gave up after %d failed attempt(s) (last: %s, %s)", bc.name,
                        bc.failures, bc.target, why)

    def error(self, bc: BrokerConnection, why: str) -> None:
        """A link of the connection failed: end the connection; closed() then retries it."""
        log.warning("Broker connection %r: %s; closing it", bc.name, why)
        bc.last_error, bc.errors = why, bc.errors + 1
        conn = bc.connection
        if conn is not None and conn.state & Endpoint.LOCAL_ACTIVE:
            conn.close()

    # ---- links -----------------------------------------------------------------------------------------------

    def queue_created(self, queue) -> None:
        for bc in self.items.values():
            if bc.connected:
                self._link_queue(bc, queue)

    def _link_queue(self, bc: BrokerConnection, queue) -> None:
        if queue.internal or queue.temporary or queue.name.startswith(SNF_PREFIX):
            return
        for element in bc.definition.elements:
            if element.kind in ("mirror", "federation") or not element.matches(queue.name, queue.address):
                continue
            if element.kind in ("sender", "peer"):
                self._attach(bc, queue, "sender", element.kind == "peer")
            if element.kind in ("receiver", "peer"):
                self._attach(bc, queue, "receiver", element.kind == "peer")

    def _attach(self, bc: BrokerConnection, queue, direction: str, waypoint: bool) -> None:
        if (queue.name, direction) in bc.linked:
            return
        bc.linked.add((queue.name, direction))
        name = f"{queue.address}:{uuid.uuid4()}"
        link = bc.session.sender(name) if direction == "sender" else bc.session.receiver(name)
        link.source.address = queue.address
        link.target.address = queue.address
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        if waypoint:
            put_symbols((link.target if direction == "sender" else link.source).capabilities, [WAYPOINT_CAPABILITY])
        link.broker_outgoing = (bc, direction, queue)
        link.open()

    def link_opened(self, link) -> None:
        """The remote answered one of our attaches."""
        bc, kind, queue = link.broker_outgoing
        if bc.connection is None or link.connection != bc.connection:
            return
        terminus = link.remote_target if link.is_sender else link.remote_source
        what = f"{kind} link" + (f" for {queue.address!r}" if queue is not None else "")
        if link.remote_condition is not None or terminus is None or (terminus.address is None
                                                                     and not terminus.dynamic):
            condition = link.remote_condition
            shown = f"{condition.name}: {condition.description}" if condition is not None else "no condition"
            self.error(bc, f"the remote refused the {what}: {shown}")
            return
        if kind == "federation":
            why = self.broker.federation.control_answered(link)
            if why is not None:
                self.error(bc, f"federation refused: {why}")
        elif kind == "mirror":
            why = bc.mirror.check_answer(link, self.broker.node_id)
            if why is not None:
                self.error(bc, f"mirror link refused: {why}")
                return
            self.broker.add_consumer(link, queue)
            log.info("Mirror %r linked to node %s", bc.name, bc.mirror.remote_id)
        elif kind == "sender":
            self.broker.add_consumer(link, queue)
        else:
            self.broker.add_outgoing_producer(link, queue.address, queue.routing)

    def link_closed(self, link) -> None:
        """The remote detached one of our links. An answer to our own detach (the queue was deleted here) is
        no failure; one the remote started ends the connection, as Artemis does."""
        bc, kind, queue = link.broker_outgoing
        if not link.state & Endpoint.LOCAL_ACTIVE:
            return
        if bc.connection is not None and link.connection == bc.connection and bc.connected:
            what = f"{kind} link" + (f" for {queue.address!r}" if queue is not None else "")
            condition = link.remote_condition
            shown = f"{condition.name}: {condition.description}" if condition is not None else "no condition"
            self.error(bc, f"the remote closed the {what}: {shown}")

    def stop(self) -> None:
        for bc in self.items.values():
            bc.started = False


def _tls(bc: BrokerConnection) -> dict:
    """`tls=` for the loop's connect when the URI enabled TLS; the context is made once per connection and kept
    (ClientTls builds it on first use), so a redial does not read the files again."""
    t = bc.definition.tls
    if t is None:
        return {}
    if bc.client_tls is None:
        bc.client_tls = ClientTls(ca=t.trust_store, verify_hostname=t.verify_host, cert=t.key_store, key=t.key_store,
                                  password=t.key_password)
    return {"tls": bc.client_tls}


class _Redial:
    def __init__(self, connections: BrokerConnections, bc: BrokerConnection):
        self.connections, self.bc = connections, bc

    def on_timer_task(self, _event):
        self.connections._dial(self.bc)
