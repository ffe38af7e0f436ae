"""Networks of brokers (004_05e35cdd7bc39ede.txt) as federation over broker connections, on Artemis's wire.

A network connector of ActiveMQ Classic forwards messages from its broker to the brokers whose consumers want
them ("demand"), never back where they came from, and no further than `networkTTL` brokers; `duplex` does the
same the other way over the one connection. The topology renders it as Artemis's AMQP federation in broker.xml
(harness/vendors/artemis/render.py), and the reference implements these semantics:

* A broker *pulls*: while a local queue matching a policy has a consumer, it keeps a receiving link to the
  same queue on the other broker (and for an address policy, a subscription there on the same address), and
  routes what arrives into the local queue or address. When the consumers leave, the link is closed and
  messages stay where they are (store and forward). So messages go to where the consumers are.
* Who pulls by which policy: a `local-*-policy` makes the dialling broker pull from the dialled one; a
  `remote-*-policy` is sent to the dialled broker, which pulls from the dialling one by it over the same
  connection. A network connector from B1 to B2 is a remote policy on B1 (B2's consumers pull from B1);
  duplex adds the local twin.
* Demand: a consumer of a client counts. A broker pulling from us counts as demand for our own pulls from a
  third broker only when the policy lets federated messages travel on (`include-federated` for queues,
  `max-hops` above 1 for addresses): that is how a hub passes messages between spokes.
* Loops: a message carries the number of brokers it crossed (`hops`). A broker never sends a message back to
  the broker it came from, nor to a puller once it crossed that puller's `max-hops` (queue policies without
  `include-federated`: one hop).
* Except for a queue that has no consumer of its own left: its messages go back to the broker they came from
  when that broker pulls them (the consumer moved there). Without it a consumer that moves between brokers
  strands what was already forwarded for it; ActiveMQ Classic calls this `replayWhenNoConsumers` (off by
  default there: the reference takes the choice that loses nothing). Topics (copies) never go back.
* A consumer may come before what it wants exists on the other broker (the seed's own test starts the consumer
  first). A pull for a missing address creates it where the address settings let a client's attach create it
  (as Artemis does). A pull for a missing queue is refused with amqp:not-found, and the serving broker watches
  for that queue: when it is created, the puller is told by an event, once, and pulls again if a consumer still
  wants it (Artemis 2.40's retry, which has no timer: see Federation.added). A broker in the middle of a line,
  which nobody would ever give the queue, creates it instead where demand can travel on through it (the seed's
  network TTL above 1; Federation._carries_on).

Wire form: Artemis 2.40's AMQP federation (federation_wire.py has the bytes), so a network mixes reference and
Artemis brokers freely, either one dialling. The dialling broker opens a control link: a sender to a dynamic
target desiring `AMQ_FEDERATION_CONTROL_LINK`, with link properties `federation-configuration` and
`federationName`; the dialled broker offers the capability back and names the node. The remote policies are
messages on it (`x-opt-amq-federation-op-type` ADD_QUEUE_POLICY / ADD_ADDRESS_POLICY, an amqp-value map). A pull
is a receiver desiring `AMQ_FEDERATION_QUEUE_RECEIVER` on the FQQN `address::queue`, or
`AMQ_FEDERATION_ADDRESS_RECEIVER` on the address with a no-local filter and, for a hop limit, the selector Artemis
writes on `x-opt-amq-fed-hops`; the serving broker offers the capability back. The receiving broker counts the
hop in the message annotation `x-opt-amq-fed-hops`. Event links (`AMQ_FEDERATION_EVENT_LINK`), opened by the
dialling broker after its control link is answered (a sender when it has remote policies, a receiver when it has
local ones), carry REQUESTED_QUEUE_ADDED_EVENT / REQUESTED_ADDRESS_ADDED_EVENT from the broker that refused a
pull to the one that asked; the receiver of one evaluates demand again. A broker is known by its
connection's container id (the reference's is its name): where a message came from is the container of the
connection it was pulled over, kept beside the message, not on the wire.

Where Artemis's semantics differ from the seed's, and which the reference follows:
* Artemis counts hops only over address receivers; the reference counts them over queue receivers too, and a
  queue pull without `include-federated` selects messages with no hop yet (the same selector, max-hops 1), so
  that a queue's message crosses one broker as ActiveMQ's networkTTL 1 says. Artemis serves such a selector;
  its own queue pulls carry none, and then the reference serves them every message (as Artemis would).
* Artemis sends a queue's messages to any puller, the broker they came from included; the reference never sends
  one back, but for the replay above (the seed's "never back where they came from").
* Artemis ranks federation consumers below local ones (`priority` -1); the reference serves them in turn with
  local consumers, as it did, and sends the `priority` property only for Artemis to read.
"""

from __future__ import annotations

import itertools
import logging
import uuid

from proton import Condition, Described, Endpoint, Link, Terminus, int32, symbol, ulong

from .. import attach_caps
from ..links import put_symbols

from . import federation_wire as wire
from .config import ANYCAST, MULTICAST, FederationPolicy

log = logging.getLogger("FEDERATION")

FEDERATION_ADDRESS = "$ACTIVEMQ_ARTEMIS_FEDERATION"  # Artemis checks `send` here for a control link
CONTROL_CREDIT = 100


def _peek_capabilities(link) -> tuple[frozenset, frozenset]:
    """The peer's (offered, desired) link capabilities, left in place for mirror.py's own look."""
    tap = getattr(link.connection, "loop_tap", None)
    if tap is None:
        return frozenset(), frozenset()
    return tap.remote.get((link.name, bool(link.is_sender)), (frozenset(), frozenset()))


def incoming_kind(link) -> str | None:
    """The federation link a peer's sending attach asks for (control or event), or None for any other."""
    _offered, desired = _peek_capabilities(link)
    for kind in (wire.CONTROL_LINK, wire.EVENT_LINK):
        if kind in desired:
            attach_caps.remote_capabilities(link)  # consumed: nobody else reads them
            return kind
    return None


def receiver_kind(link) -> str | None:
    """The federation link a peer's receiving attach asks for (queue, address or event receiver), or None."""
    _offered, desired = attach_caps.remote_capabilities(link)
    return next((k for k in (wire.QUEUE_RECEIVER, wire.ADDRESS_RECEIVER, wire.EVENT_LINK) if k in desired), None)


class Side:
    """One connection over which this broker pulls, by `policies`, from the broker at its other end."""

    def __init__(self, federation: Federation, connection, policies: list[FederationPolicy], name: str,
                 remote_node: str | None):
        self.federation = federation
        self.connection = connection
        self.policies = policies
        self.name = name  # the federation's name (Artemis's `federationName`)
        self.remote_node: str | None = remote_node  # the other broker's container id, once it answered
        self.remote_policies: list[FederationPolicy] = []  # dialling side: sent once the other broker answered
        self.session = None
        self.control = None  # the control link
        self.pulls: dict[tuple[str, str], object] = {}  # ("queue", queue name) / ("address", address) -> link
        # Dialled side: pulls as the policies come. Dialling side: once the other broker answered the event
        # receiver (or refused it), as Artemis's AMQPFederationSource starts its local policies only then: a pull
        # refused before the other broker has somewhere to send its event would never be retried.
        self.pulling = remote_node is not None
        self.events = None  # the link this broker sends its events to the other broker on (see Federation.added)
        self.event_links: list = []  # every event link over this connection, either way
        # What this broker refused the other broker's pulls for, ("queue", name) / ("address", name) -> the hop
        # limit of the refused pull (-1 none; None: not known): when one comes into being here, the other broker
        # is told once, and pulls again if it still has demand
        self.watches: dict[tuple[str, str], int | None] = {}
        # Pulls the other broker said are servable now while they were still open here: its event can overtake the
        # detach that refused the pull (Artemis sends events from another executor than the link's), and a pull
        # still open when the event comes would otherwise never be tried again once that detach arrives
        self.told: set[tuple[str, str]] = set()
        self._event_tags = itertools.count()

    def evaluate(self, only: str | None = None) -> None:
        """Open the pulls that local demand calls for and close the ones it no longer does (`only`: one address)."""
        if self.remote_node is None or not self.pulling or not self.connection.state & Endpoint.LOCAL_ACTIVE:
            return  # the other broker has not answered yet
        addresses = self.federation.broker.addresses
        if only is None:
            looked_at = list(addresses.items())
        else:  # called on every consumer that comes or goes: look at that one address only
            looked_at = [(only, addresses[only])] if only in addresses else []
        wanted: dict[tuple[str, str], tuple[FederationPolicy, str, str]] = {}
        for name, info in looked_at:
            for policy in self.policies:
                if policy.kind == "queue":
                    for queue in info["queues"]:
                        if (queue.routing == ANYCAST and not queue.internal and policy.matches(name, queue.name)
                                and self._demand([queue], policy.include_federated)):
                            wanted.setdefault(("queue", queue.name), (policy, queue.name, name))
                elif policy.matches(name, "#") and MULTICAST in info["routings"]:
                    subscriptions = [q for q in info["queues"] if q.routing == MULTICAST]
                    if self._demand(subscriptions, policy.max_hops < 0 or policy.max_hops > 1):
                        wanted.setdefault(("address", name), (policy, name, name))
        for key, link in list(self.pulls.items()):
            if key not in wanted and (only is None or link.broker_federation_address == only):
                self._close(key)
        for key, (policy, source, address) in wanted.items():
            if key not in self.pulls:
                self._open(key, policy, source, address)

    def _demand(self, queues, federated_counts: bool) -> bool:
        for queue in queues:
            for consumer in queue.consumers:
                if consumer.closed:
                    continue
                node = consumer.federation_node
                if node is None or (federated_counts and node != self.remote_node):
                    return True
        return False

    def _open(self, key, policy: FederationPolicy, source: str, address: str) -> None:
        broker = self.federation.broker
        if self.session is None:
            self.session = self.connection.session()
            self.session.open()
        if key[0] == "queue":
            remote = f"{address}::{source}"
            link = self.session.receiver(f"federation-queue-receiver:{self.name}:{remote}:{uuid.uuid4()}")
            capability, routing = wire.QUEUE_RECEIVER, ANYCAST
            selector = None if policy.include_federated else wire.address_selector(1)
            properties = {symbol(wire.PRIORITY): int32(wire.DEFAULT_PRIORITY_ADJUSTMENT),
                          symbol(wire.POLICY_NAME): policy.name}
        else:
            remote = address
            # The serving broker names its subscription queue after this link: unique per pull.
            link = self.session.receiver(f"federation-address-receiver:{self.name}:{remote}:{uuid.uuid4()}")
            capability, routing = wire.ADDRESS_RECEIVER, MULTICAST
            selector = wire.address_selector(policy.max_hops)
            properties = {symbol(wire.ADDRESS_SOURCE_PROPERTIES): {"auto-delete": False, "auto-delete-delay": 0,
                                                                    "auto-delete-msg-count": 0},
                          symbol(wire.POLICY_NAME): policy.name}
        link.source.address = remote
        link.target.address = remote
        link.source.durability = Terminus.NONDURABLE
        link.source.expiry_policy = Terminus.EXPIRE_WITH_LINK
        put_symbols(link.source.capabilities, ["queue" if routing == ANYCAST else "topic"])
        wire.put_filters(link.source.filter, no_local=routing == MULTICAST, selector=selector)
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        link.properties = properties
        link.broker_federation_address = address
        link.broker_federation_answer = lambda answered, cap=capability: self._answered(answered, cap)
        attach_caps.set_capabilities(link, desired=[capability])
        broker.add_outgoing_producer(link, address, routing, self)
        link.open()
        self.pulls[key] = link
        log.info("Pulling %s %r from node %s (policy %r)", key[0], remote, self.remote_node, policy.name)

    def _answered(self, link, capability: str) -> None:
        """The serving broker answered a pull: with a source it must offer the capability back (as Artemis
        requires); without one a detach follows and link_lost forgets the pull."""
        offered, _desired = attach_caps.remote_capabilities(link)
        if link.remote_source is not None and link.remote_source.type != Terminus.UNSPECIFIED \
                and capability not in offered:
            log.warning("Node %s answered pull %r without offering %s: closing it", self.remote_node, link.name,
                        capability)
            for key, pull in list(self.pulls.items()):
                if pull == link:
                    self._close(key)

    def _close(self, key) -> None:
        self.told.discard(key)
        link = self.pulls.pop(key)
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.close()
        log.info("No more demand for %s %r: stopped pulling from node %s", key[0], key[1], self.remote_node)

    def link_lost(self, link) -> None:
        """The other broker refused or closed one of our pulls (its queue is not there, or went away): forget it.
        Nothing pulls again by itself: the other broker's event says when the queue is there (as in Artemis, whose
        AMQPFederationConsumerManager leaves a remotely closed consumer for that event), and a consumer coming or
        going here evaluates demand again."""
        for key, pull in list(self.pulls.items()):
            if pull == link:
                del self.pulls[key]
                if key in self.told:  # its event came before this refusal: it is there now, pull again
                    self.told.discard(key)
                    self.evaluate(only=getattr(link, "broker_federation_address", None))

    def event_for(self, body: dict) -> None:
        """The other broker says a queue or address we asked for exists now: note it for a pull still open here
        (its refusal may not have arrived yet, see `told`), then evaluate demand."""
        for key in (("queue", body.get(wire.QUEUE_NAME)), ("address", body.get(wire.ADDRESS_NAME))):
            if key in self.pulls:
                self.told.add(key)
        self.evaluate()

    def send_event(self, event: bytes, what: str) -> None:
        """Send an event to the other broker (pre-settled, as Artemis's events sender is), if it has an event link
        from us; `what` names the event for the log."""
        link = self.events
        if link is None or not link.state & Endpoint.LOCAL_ACTIVE or link.state & Endpoint.REMOTE_CLOSED:
            log.info("%s exists now, but node %s has no event link from this broker: it is not told", what,
                     self.remote_node)
            return
        dlv = link.delivery(f"event-{next(self._event_tags)}")
        link.send(event)
        link.advance()
        dlv.settle()
        log.info("%s exists now: told node %s, whose pull for it was refused", what, self.remote_node)


class Federation:
    """Every federation side of one broker, and the hooks the broker calls."""

    def __init__(self, broker):
        self.broker = broker
        self.sides: list[Side] = []

    def side_of(self, connection) -> Side | None:
        return next((s for s in self.sides if s.connection == connection), None)

    # dialling side ---------------------------------------------------------------------------------------------

    def dialled(self, connection, element, session, name: str) -> object:
        """A broker connection with a `<federation>` came up: open the control link. Once the other broker
        answered (`control_answered`) the event links follow, and once those are answered we send it the remote
        policies and pull by the local ones (`_event_link_answered`)."""
        local = [p for p in element.policies if p.side == "local"]
        side = Side(self, connection, local, name, None)  # pulling once the event receiver is answered
        side.session = session
        side.remote_policies = [p for p in element.policies if p.side == "remote"]
        self.sides.append(side)
        link = session.sender(f"federation-control-link:{name}:{self.broker.node_id}:{uuid.uuid4()}")
        link.target.dynamic = True
        # The node goes with the link (lifetime-policy delete-on-close), as Artemis asks for its own
        link.target.properties.put_object({symbol("lifetime-policy"): Described(ulong(0x2b), [])})
        link.target.durability = Terminus.NONDURABLE
        link.target.expiry_policy = Terminus.EXPIRE_WITH_LINK
        put_symbols(link.target.capabilities, [wire.TEMPORARY_TOPIC])
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        link.properties = {symbol(wire.CONFIGURATION): dict(wire.CONFIGURATION_SENT),
                           symbol(wire.FEDERATION_NAME): name}
        attach_caps.set_capabilities(link, desired=[wire.CONTROL_LINK])
        link.broker_federation_side = side
        link.broker_federation_deliveries = _settle_when_remote_settled
        side.control = link
        link.open()
        return link

    def control_answered(self, link) -> str | None:
        """The dialled broker answered our control link; returns why it is no federation peer, or None."""
        side: Side = link.broker_federation_side
        offered, _desired = attach_caps.remote_capabilities(link)
        if wire.CONTROL_LINK not in offered:
            return f"the remote broker did not offer {wire.CONTROL_LINK} back: it takes no federation"
        node = link.connection.remote_container
        if not node:
            return "the remote broker's connection names no container id"
        if node == self.broker.config.name:
            return "the remote broker is this broker itself"
        side.remote_node = node
        # The event links first, as AMQPFederationSource opens them once the control link is answered: one to
        # send events on when there are remote policies (the other broker pulls from us by them; the policies go
        # once it is answered), one to hear events on when there are local ones (we pull by them once it is
        # answered). An event is how a pull refused for want of its queue gets retried (Federation.added).
        if side.remote_policies:
            self._open_event_link(side, link.session, sending=True)
        if side.policies:
            self._open_event_link(side, link.session, sending=False)
        log.info("Federation %r with node %s: %d remote and %d local policy(ies), opening its event link(s)",
                 side.name, node, len(side.remote_policies), len(side.policies))
        return None

    def _open_event_link(self, side: Side, session, sending: bool) -> None:
        """An event link to (`sending`) or from the other broker, on a dynamic node of its own that goes with the
        link (AMQPFederationSource's events sender and receiver: temporary-topic, delete-on-close, settled)."""
        name = (f"federation-events-{'sender' if sending else 'receiver'}:{side.name}:{self.broker.node_id}:"
                f"{uuid.uuid4()}")
        link = session.sender(name) if sending else session.receiver(name)
        node = link.target if sending else link.source
        node.dynamic = True
        node.properties.put_object({symbol(wire.LIFETIME_POLICY): Described(ulong(wire.DELETE_ON_CLOSE), [])})
        node.durability = Terminus.NONDURABLE
        node.expiry_policy = Terminus.EXPIRE_WITH_LINK
        put_symbols(node.capabilities, [wire.TEMPORARY_TOPIC])
        link.snd_settle_mode = Link.SND_SETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        attach_caps.set_capabilities(link, desired=[wire.EVENT_LINK])
        link.broker_federation_answer = lambda answered: self._event_link_answered(side, answered, sending)
        if not sending:
            link.broker_federation_deliveries = lambda dlv: self._event_arrived(link, dlv)
        side.event_links.append(link)
        link.open()
        if not sending:
            link.flow(CONTROL_CREDIT)

    def _event_link_answered(self, side: Side, link, sending: bool) -> None:
        """The other broker answered an event link: the federation goes on either way (as Artemis's does), without
        events if it refused the link or did not offer the capability back."""
        if side not in self.sides:
            return  # the control link went meanwhile: this federation is over
        offered, _desired = attach_caps.remote_capabilities(link)
        node = link.remote_target if sending else link.remote_source
        if node is None or node.type == Terminus.UNSPECIFIED or wire.EVENT_LINK not in offered:
            log.warning("Federation %r: node %s took no event link %s it (%s): a pull refused for want of its "
                        "queue is not retried", side.name, side.remote_node, "from" if sending else "to", link.name)
            if link.state & Endpoint.LOCAL_ACTIVE:
                link.close()
        elif sending:
            side.events = link
        if sending:
            for policy in side.remote_policies:
                dlv = side.control.delivery(f"policy-{policy.name}")
                dlv.link.send(wire.policy_message(policy))
                dlv.link.advance()
                log.debug("Sent %s policy %r to node %s on %r", policy.kind, policy.name, side.remote_node,
                          dlv.link.name)
            log.info("Federation %r with node %s: %d remote policy(ies) sent", side.name, side.remote_node,
                     len(side.remote_policies))
        else:
            side.pulling = True
            log.info("Federation %r with node %s: pulling by %d local policy(ies)", side.name, side.remote_node,
                     len(side.policies))
            side.evaluate()
            self.carry_on_watched()

    # dialled side ----------------------------------------------------------------------------------------------

    def control_attach(self, link) -> str | None:
        """A dialling broker's control link: answer it, then pull by the policies it sends on it. Returns why
        it is refused."""
        if link.remote_target is None or not link.remote_target.dynamic:
            return "a federation control link needs a dynamic target"
        node = link.connection.remote_container
        if node == self.broker.config.name:
            return "a broker cannot federate with itself"
        if self.side_of(link.connection) is not None:
            return "this connection has a federation already"
        name = str(attach_property(link, wire.FEDERATION_NAME) or link.name)
        link.target.copy(link.remote_target)
        link.target.address = link.name  # the dynamic node: Artemis names it after the link, so does the reference
        link.source.copy(link.remote_source)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = Link.RCV_FIRST
        attach_caps.set_capabilities(link, offered=[wire.CONTROL_LINK])
        side = Side(self, link.connection, [], name, node)
        side.control = link
        link.broker_federation_side = side
        link.broker_federation_deliveries = lambda dlv: self._policy_arrived(side, link, dlv)
        self.sides.append(side)
        link.open()
        link.flow(CONTROL_CREDIT)
        log.info("Federation %r from node %s: control link open, awaiting its policies", name, node)
        return None

    def _policy_arrived(self, side: Side, link, dlv) -> None:
        if dlv.partial:
            return
        data = link.recv(dlv.pending)
        try:
            policy = wire.read_policy(data)
        except Exception as exc:  # noqa: BLE001 - any malformed command ends the federation, as in Artemis
            log.warning("Federation %r: a malformed control message (%s): closing the connection", side.name, exc)
            dlv.update(dlv.REJECTED)
            dlv.settle()
            link.connection.close()
            return
        dlv.update(dlv.ACCEPTED)
        dlv.settle()
        if link.credit < CONTROL_CREDIT // 2:
            link.flow(CONTROL_CREDIT - link.credit)
        side.policies.append(policy)
        log.info("Federation %r from node %s: pulling by its %s policy %r", side.name, side.remote_node,
                 policy.kind, policy.name)
        side.evaluate()
        self.carry_on_watched()

    def event_attach(self, link) -> str | None:
        """The dialling broker's event link (either way): answered and kept. One it receives on is where this
        broker sends its events (Federation.added); one it sends on brings the other broker's."""
        side = self.side_of(link.connection)
        if side is None:
            return "an event link on a connection without a federation"
        terminus_remote, terminus = ((link.remote_target, link.target) if link.is_receiver
                                     else (link.remote_source, link.source))
        link.target.copy(link.remote_target)
        link.source.copy(link.remote_source)
        if terminus_remote is not None and terminus_remote.dynamic:
            terminus.address = link.name
        attach_caps.set_capabilities(link, offered=[wire.EVENT_LINK])
        link.broker_federation_deliveries = lambda dlv: self._event_arrived(link, dlv)
        side.event_links.append(link)
        link.open()
        if link.is_receiver:
            link.flow(CONTROL_CREDIT)
        else:
            side.events = link
        return None

    def _event_arrived(self, link, dlv) -> None:
        if not link.is_receiver or dlv.partial:
            return
        data = link.recv(dlv.pending)
        # The retry of a refused pull (Artemis's AMQPFederationEventProcessor -> processRemoteQueueAdded /
        # processRemoteAddressAdded -> the policy manager's recover(), which makes a new consumer only while demand
        # lasts): evaluate() below opens the pull again only where a consumer here still wants it. No timer: a pull
        # is retried when, and only when, the other broker says that what it asked for is there.
        body: dict = {}
        try:
            event, body = wire.read_event(data)
            log.info("Federation event %s %s on %r: demand is evaluated again", event, body, link.name)
        except Exception as exc:  # noqa: BLE001 - events are advice: a malformed one costs nothing but a log line
            log.warning("Federation event on %r not understood (%s): %d bytes", link.name, exc, len(data))
        dlv.update(dlv.ACCEPTED)
        dlv.settle()
        if link.credit < CONTROL_CREDIT // 2:
            link.flow(CONTROL_CREDIT - link.credit)
        side = self.side_of(link.connection)
        if side is not None:
            side.event_for(body if isinstance(body, dict) else {})

    # serving another broker's pulls ------------------------------------------------------------------------------

    def serve(self, link, kind: str) -> tuple[str | None, object, str, str | None]:
        """What a federation receiver of `kind` pulls: (why it is refused or None, the local queue or None for a
        new subscription, the address, its selector). Answers nothing yet: the broker attaches the consumer."""
        side = self.side_of(link.connection)
        if side is None:
            return f"a {kind} on a connection without a federation control link", None, "", None
        # Existence first, as Artemis checks it: a puller takes not-found as "not here (yet)", while any other
        # refusal ends its whole federation connection (AMQPFederationConsumer.remoteLinkClosedInterceptor).
        # What is refused for not being here is watched: the puller is told when it comes (Federation.added).
        source = link.remote_source
        _no_local, selector = wire.read_filters(source.filter)
        try:
            max_hops, unreadable = wire.selector_max_hops(selector), None
        except ValueError as exc:
            max_hops, unreadable = None, str(exc)  # refused below, if the queue or address is here
        queue = None
        if kind == wire.QUEUE_RECEIVER:
            address, queue_name = wire.split_fqqn(source.address or "")
            queue = self.broker.queues.get(queue_name)
            if queue is None and address in (None, queue_name) and self._carries_on(link.connection, queue_name,
                                                                                    max_hops):
                self.broker.auto_create(queue_name, ANYCAST)
                queue = self.broker.queues.get(queue_name)
            if queue is None or (address is not None and queue.address != address):
                side.watches[("queue", queue_name)] = max_hops
                return f"Queue: {queue_name!r} does not exist" + (f" on address {address!r}" if address else ""), \
                    None, "", None
            address = queue.address
        else:
            address = source.address or ""
            # Artemis's AMQPFederationAddressSenderController creates a missing address (multicast) where its
            # address settings let it auto-create, so that a subscriber that comes first is served at once
            info = self.broker.addresses.get(address) or self.broker.auto_create(address, MULTICAST)
            if info is None:
                side.watches[("address", address)] = max_hops
                return f"address {address!r} does not exist", None, "", None
            if MULTICAST not in info["routings"]:
                return f"Address {address} is not configured for MULTICAST support", None, "", None
        if unreadable is not None:
            return unreadable, None, "", None
        return None, queue, address, selector

    def _carries_on(self, connection, queue_name: str, max_hops: int | None) -> bool:
        """Whether a pull for `queue_name`, missing here, should create it (where the address settings allow),
        rather than be refused until it comes. Artemis refuses (AMQPFederationQueueSenderController: not-found and
        a watch), which is enough where the queue will come to this broker: a producer's. A broker in the middle
        of a line gets the queue from nobody, though, so a consumer two brokers away from the producer would wait
        for good. ActiveMQ (the seed's network connectors) creates the queue of a demand subscription on each
        broker of its path as far as the network TTL lets demand travel; so does the reference, where demand can
        travel: the pull takes messages that came from further away (no hop limit, or one above 1), and this broker
        pulls the queue from another broker by a policy that counts a federated consumer as demand
        (include-federated, as Side._demand). `max_hops`: the pull's hop limit (-1 none, None not known)."""
        if max_hops is None or max_hops == 1:
            return False
        return any(side.connection != connection and any(
            p.kind == "queue" and p.include_federated and p.matches(queue_name, queue_name) for p in side.policies)
            for side in self.sides)

    def serving(self, link, kind: str, consumer, selector: str | None) -> None:
        """A federation receiver is attached to `consumer`: it is another broker pulling."""
        consumer.federation_node = link.connection.remote_container
        consumer.max_hops = wire.selector_max_hops(selector)
        attach_caps.set_capabilities(link, offered=[kind])
        if consumer.queue.temporary:
            consumer.queue.federation_filter = (consumer.federation_node, consumer.max_hops)

    # events from the broker -------------------------------------------------------------------------------------

    def demand_changed(self, address: str) -> None:
        for side in list(self.sides):
            side.evaluate(address)

    def added(self, address: str, queue: str | None = None) -> None:
        """A queue (or, with no `queue`, an address) came into being here: each broker whose pull for it this broker
        refused is told, once (Artemis's AMQPFederationEventDispatcher: its queue and address watches, fired from
        afterAddBinding / afterAddAddress and then forgotten); it pulls again if it still has demand. The event is
        the whole retry: nothing is scheduled, and a broker no longer wanting the queue does nothing with it."""
        key = ("address", address) if queue is None else ("queue", queue)
        for side in self.sides:
            if key in side.watches:
                del side.watches[key]
                side.send_event(wire.added_event(address, queue),
                                f"Address {address!r}" if queue is None else f"Queue {queue!r} on address {address!r}")

    def carry_on_watched(self) -> None:
        """A policy that lets demand travel on arrived, or a side started pulling: a queue refused earlier to another
        broker's pull that can now be carried on is created (where the address settings allow), which tells that
        broker (added). Seen when a line's far connection came up before the near one: the far broker's pull
        reached the middle broker while it pulled from no one yet."""
        for side in list(self.sides):
            for (kind, name), max_hops in list(side.watches.items()):
                if kind == "queue" and name not in self.broker.queues and self._carries_on(side.connection, name,
                                                                                           max_hops):
                    log.info("Queue %r, refused to node %s's pull, can be carried on now: creating it", name,
                             side.remote_node)
                    self.broker.auto_create(name, ANYCAST)

    def queue_deleted(self, queue) -> None:
        """A queue other brokers pull is being destroyed (their pulls end with amqp:resource-deleted): each of them is
        told when it comes back, as for a refused pull (Artemis's sender controllers' resourceDeletedAction)."""
        for consumer in queue.consumers:
            side = self.side_of(consumer.link.connection) if consumer.federation_node is not None else None
            if side is not None:
                side.watches[("queue", queue.name)] = consumer.max_hops

    def connection_gone(self, connection) -> None:
        self.sides = [s for s in self.sides if s.connection != connection]

    def control_closed(self, link) -> None:
        side = getattr(link, "broker_federation_side", None)
        if side is not None and side in self.sides:
            self.sides.remove(side)
            for key in list(side.pulls):
                side._close(key)
            for event_link in side.event_links:
                if event_link.state & Endpoint.LOCAL_ACTIVE:
                    event_link.close()


def refuse_pull(link, name: str, description: str) -> None:
    """Refuse another broker's pull as Artemis does: a null source with its target echoed (Artemis's receiver
    fails with "Remote should have sent an valid Target" on a null target), then a detach with the error."""
    link.source.type = Terminus.UNSPECIFIED
    link.target.copy(link.remote_target)
    link.condition = Condition(name, description)
    link.open()
    link.close()
    log.warning("Refused federation pull %r: %s", link.name, description)


def attach_property(link, key: str):
    properties = link.remote_properties or {}
    return properties.get(symbol(key), properties.get(key))


def _settle_when_remote_settled(dlv) -> None:
    if dlv.remote_state is not None or dlv.settled:
        if dlv.remote_state not in (None, dlv.ACCEPTED):
            log.warning("Federation control message refused by the remote broker: %s", dlv.remote_state)
        dlv.settle()


# ---- the hop annotation -------------------------------------------------------------------------------------------


def incoming(data: bytes, came_from: str | None) -> tuple[bytes, int, str | None]:
    """(the message as stored here, with its hop counted, brokers it crossed, the broker it came from)."""
    data, hops = wire.counted_hop(data)
    return data, hops, came_from


def may_forward(came_from: str | None, hops: int, node: str | None, max_hops: int) -> bool:
    """Whether a message (that crossed `hops` brokers, the last one `came_from`) may go to the broker `node`
    pulling with `max_hops`: never back where it came from, never past the puller's hop limit."""
    if node is not None and came_from == node:
        return False
    return max_hops < 0 or hops < max_hops
