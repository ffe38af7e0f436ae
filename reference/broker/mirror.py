"""Mirroring (002_f23507c2891d6d06.txt "Mirroring", "Pre Existing Messages", "Dual Mirror (Disaster Recovery)").

The wire form is ActiveMQ Artemis's own (its AMQP mirror source, target and message factory), so a reference
broker can mirror to Artemis and be Artemis's mirror:

* The source is a sender link with target address `$ACTIVEMQ_ARTEMIS_MIRROR_<connection name>`, desired link
  capability `amq.mirror` and the link property `x-opt-amq-bkr-id` = the source's node id. The target answers
  offering `amq.mirror` and with its own node id in the same property; a target that does neither, or that
  names the source's own id (a broker mirroring to itself), is an error and the connection is retried. As in
  Artemis, a target knows a mirror link by its `$ACTIVEMQ_ARTEMIS_MIRROR` address, refuses one that does not
  desire `amq.mirror`, and takes one without the source's node id.
* A sent message travels as the message itself with delivery annotations `x-opt-amq-mr-id` (the source's
  internal id of the message, a long), `x-opt-amq-mr-dst` (the address)
  and `x-opt-amq-bkr-id` (the node it came from, only when that is not the source itself).
* Every other event is a control message: durable header, message annotations `x-opt-amq-mr-ev-type` (symbol
  `addAddress`, `deleteAddress`, `createQueue`, `deleteQueue` or `postAck`), `x-opt-amq-mr-adr` (address),
  `x-opt-amq-mr-qu` (queue), optionally `x-opt-amq-bkr-id`, and an amqp-value body: the address or queue as
  JSON for the creations and `deleteAddress` (an address as Artemis's AddressInfo.toJSON: `name` and
  `routingTypes`, an array of numbers, 0 multicast and 1 anycast; a queue as QueueConfiguration.toJSON: `name`,
  `address`, `routing-type` as a word, `durable`; other keys are ignored), the queue name for `deleteQueue`, the
  acknowledged message's internal id (a long) for `postAck`, whose `x-opt-amq-mr-ack-reason` (a byte: 1 killed,
  2 expired, 3 replaced; absent when normal) tells the target to expire its copy rather than remove it.

Source side (`MirrorSource`, one per `<mirror>` element): from the moment the broker connection starts, every
event is appended, in order, to the local durable queue named above (its store-and-forward queue); the mirror
link consumes it like any consumer, and an event leaves the queue when the target accepted it. Messages that
were stored before the start are not sent; existing addresses and queues are (creation events, as Artemis's
scan does at start). The three `<mirror>` flags turn the creation, removal and acknowledgement events off.

Target side (`MirrorTarget`, one per incoming mirror link): applies the events; a sent message is routed to
its address as if produced here, remembered under (origin node, internal id) so that a resent event is
dropped and a later `postAck` finds it. A `postAck` for a message held by a consumer here does not remove it
(the seed: both brokers may deliver it); it is dropped when it comes back unaccepted.

No echo (dual mirror): an event applied by a target is not mirrored back to the node it came from, and a
message is never mirrored to the node it originated on.
"""

from __future__ import annotations

import collections
import json
import logging
import time
import uuid

from proton import Condition, Delivery, Message, symbol

from .. import attach_caps
from ..links import link_property, read_message
from ..peek import sections
from .wire import (encode_long, encode_map, encode_string, encode_symbol, split_delivery_annotations,
                   with_delivery_annotations)

log = logging.getLogger("MIRROR")

SNF_PREFIX = "$ACTIVEMQ_ARTEMIS_MIRROR_"
MIRROR_CAPABILITY = "amq.mirror"
BROKER_ID = "x-opt-amq-bkr-id"
EVENT_TYPE = "x-opt-amq-mr-ev-type"
ADDRESS = "x-opt-amq-mr-adr"
QUEUE = "x-opt-amq-mr-qu"
INTERNAL_ID = "x-opt-amq-mr-id"
INTERNAL_DESTINATION = "x-opt-amq-mr-dst"
ACK_REASON = "x-opt-amq-mr-ack-reason"
ADD_ADDRESS, DELETE_ADDRESS = "addAddress", "deleteAddress"
CREATE_QUEUE, DELETE_QUEUE, POST_ACK = "createQueue", "deleteQueue", "postAck"
# Why a message was acknowledged (Artemis's AckReason): a `postAck` carries it as a byte in ACK_REASON, left out
# for a normal acknowledgement. The target expires an expired message, and removes the others.
NORMAL, KILLED, EXPIRED, REPLACED = "normal", "killed", "expired", "replaced"
ACK_REASONS = (NORMAL, KILLED, EXPIRED, REPLACED)  # by their byte value

TARGET_CREDIT = 1000
DEDUP_PER_ORIGIN = 100_000  # internal ids remembered per origin node, to drop events sent again after a reconnect


def snf_name(connection_name: str) -> str:
    return SNF_PREFIX + connection_name


# ---- wire form ---------------------------------------------------------------------------------------------------


def control_event(event: str, address: str | None, queue: str | None, body, broker_id: str | None = None) -> bytes:
    message = Message(durable=True, body=body)
    annotations = {symbol(EVENT_TYPE): symbol(event)}
    if address is not None:
        annotations[symbol(ADDRESS)] = address
    if queue is not None:
        annotations[symbol(QUEUE)] = queue
    if broker_id is not None:
        annotations[symbol(BROKER_ID)] = broker_id
    message.annotations = annotations
    return message.encode()


# The two events of every mirrored message (its send, and its acknowledgement) are encoded by hand: through
# proton's Message and Data they cost some 40 us per message, most of the primary's extra work.
_DURABLE_HEADER = b"\x00\x53\x70\xc0\x02\x01\x41"  # header: list8 of one field, durable true


_ACK_PREFIXES: dict = {}


def post_ack_event(address: str, queue: str, internal_id: int, broker_id: str | None, reason: str = NORMAL) -> bytes:
    """The event `control_event(POST_ACK, address, queue, internal_id, broker_id)` makes (in other widths: map8,
    an 8-byte long, no properties section), from a cached prefix, with
    the ack reason as Artemis's AMQPMirrorMessageFactory writes it (a byte, only when not normal)."""
    key = (address, queue, broker_id, reason)
    prefix = _ACK_PREFIXES.get(key)
    if prefix is None:
        entries = [encode_symbol(EVENT_TYPE), encode_symbol(POST_ACK), encode_symbol(ADDRESS), encode_string(address),
                   encode_symbol(QUEUE), encode_string(queue)]
        if reason != NORMAL:
            entries += [encode_symbol(ACK_REASON), b"\x51" + bytes([ACK_REASONS.index(reason)])]  # AMQP byte
        if broker_id is not None:
            entries += [encode_symbol(BROKER_ID), encode_string(broker_id)]
        prefix = _DURABLE_HEADER + b"\x00\x53\x72" + encode_map(entries) + b"\x00\x53\x77"
        if len(_ACK_PREFIXES) > 10_000:
            _ACK_PREFIXES.clear()
        _ACK_PREFIXES[key] = prefix
    return prefix + encode_long(internal_id)


def send_event(data: bytes, internal_id: int, address: str, origin: str | None) -> bytes:
    """The message's own bytes with the mirror's delivery annotations (AMQP 1.0 §3.2 order); delivery annotations
    it carried are replaced (they are for one hop only). The address always travels (Artemis sends it only when
    the message's `to` differs; reading `to` here would cost a peek per message)."""
    entries = [encode_symbol(INTERNAL_ID), encode_long(internal_id), encode_symbol(INTERNAL_DESTINATION),
               encode_string(address)]
    values = {INTERNAL_ID: internal_id, INTERNAL_DESTINATION: address}
    if origin is not None:
        entries += [encode_symbol(BROKER_ID), encode_string(origin)]
        values[BROKER_ID] = origin
    return with_delivery_annotations(data, entries, values)


def event_type(data: bytes) -> tuple[str | None, Message | None]:
    """The control event a message carries (and the decoded message), or (None, None) for a mirrored send."""
    parts = sections(data)
    if parts is not None and not any(code == 0x72 for code, _s, _e in parts):
        return None, None  # no message annotations: a send
    message = Message()
    message.decode(data)
    event = (message.annotations or {}).get(EVENT_TYPE)
    return (str(event), message) if event is not None else (None, None)


# An address's routing types as Artemis's AddressInfo.toJSON writes them (RoutingType.getType()): numbers.
ROUTING_NUMBERS = {"multicast": 0, "anycast": 1}


def address_json(address: str, routings) -> str:
    """An `addAddress` body in Artemis's own form (AddressInfo.toJSON): `routingTypes` is an array of numbers, 0
    multicast and 1 anycast, in that order. Artemis 2.40's AddressInfo.fromJSON reads no other key for them, so
    the reference's former `"routing-types": "MULTICAST"` arrived as an address with no routing type."""
    numbers = sorted(ROUTING_NUMBERS[r.lower()] for r in routings if r.lower() in ROUTING_NUMBERS)
    body = {"name": address, "auto-created": False, "temporary": False, "internal": False,
            "routingTypes": numbers, "created-timestamp": int(time.time() * 1000)}
    if numbers:
        body["firstSeen"] = numbers[0]
    return json.dumps(body)


def address_routings(body: dict) -> set[str]:
    """The routing types of an `addAddress` body: Artemis's `routingTypes` numbers, else the `routing-types`
    string that reference brokers before this form wrote (a journal or a peer of that age)."""
    names = {number: name for name, number in ROUTING_NUMBERS.items()}
    numbers = body.get("routingTypes")
    if isinstance(numbers, list):
        return {names[n] for n in numbers if n in names}
    text = body.get("routing-types")
    return {r.strip().lower() for r in str(text).split(",") if r.strip()} & set(ROUTING_NUMBERS) if text else set()


def ack_reason(value) -> str:
    """The reason a `postAck` carries (absent: normal). An unknown number is taken as normal, as Artemis's
    AckReason.fromValue does for a newer peer's reasons."""
    try:
        number = int(value) if value is not None else 0
    except (TypeError, ValueError):
        return NORMAL
    return ACK_REASONS[number] if 0 <= number < len(ACK_REASONS) else NORMAL


# ---- node id -------------------------------------------------------------------------------------------------------


def node_id(directory) -> str:
    """This broker's node id: kept beside the journal so that it survives restarts (a mirror recognises its
    own messages and acknowledgements by it); a broker without persistence gets a new one per run."""
    if directory is None:
        return str(uuid.uuid4())
    path = directory / "node.id"
    try:
        text = path.read_text().strip()
        if text:
            return text
    except OSError:
        pass
    value = str(uuid.uuid4())
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(value + "\n")
    return value


# ---- source --------------------------------------------------------------------------------------------------------


class MirrorSource:
    """One `<mirror>` element: its events, its store-and-forward queue and its link's checks."""

    def __init__(self, broker, connection_name: str, element):
        self.broker = broker
        self.name = connection_name
        self.element = element
        self.queue_name = snf_name(connection_name)
        self.snf = None  # the broker's Queue, created by start()
        self.remote_id: str | None = None  # the target's node id, once its link answered

    def start(self) -> None:
        """Create (or reuse: a restart recovers it from the journal) the store-and-forward queue, then announce
        the addresses and queues that exist now. Messages already stored are not mirrored (the seed)."""
        self.snf = self.broker.internal_queue(self.queue_name)
        if self.element.queue_creation:
            for name, info in list(self.broker.addresses.items()):
                if self._mirrored_address(name):
                    self.address_added(name, info["routings"], None)
                    for queue in list(info["queues"]):
                        self.queue_created(queue, None)
        log.info("Mirror %r started: events go to %r", self.name, self.queue_name)

    def _mirrored_address(self, address: str) -> bool:
        return not address.startswith(SNF_PREFIX) and not address.startswith("activemq.management")

    def _echo(self, via: str | None, origin: str | None = None) -> bool:
        """Whether an event would go back where it came from: applied from this source's own target (`via`),
        or a message that originated there. While the target's id is unknown (never connected since the start)
        an applied event counts as an echo, as in Artemis, which takes the id from the link it came in on."""
        if via is None and origin is None:
            return False
        if self.remote_id is None:
            return via is not None
        return self.remote_id in (via, origin)

    def _append(self, data: bytes) -> None:
        self.broker.append_internal(self.snf, data)

    # events, called by the broker ----------------------------------------------------------------------------

    def address_added(self, address: str, routings, via: str | None) -> None:
        if not self.element.queue_creation or self._echo(via) or not self._mirrored_address(address):
            return
        self._append(control_event(ADD_ADDRESS, address, None, address_json(address, routings)))

    def queue_created(self, queue, via: str | None) -> None:
        if not self.element.queue_creation or self._echo(via) or not self._mirrored_address(queue.address):
            return
        if queue.temporary or queue.internal:
            return
        body = json.dumps({"name": queue.name, "address": queue.address, "routing-type": queue.routing.upper(),
                           "durable": queue.durable, "temporary": False, "auto-created": False})
        self._append(control_event(CREATE_QUEUE, queue.address, queue.name, body))

    def queue_deleted(self, queue, via: str | None) -> None:
        if not self.element.queue_removal or self._echo(via) or not self._mirrored_address(queue.address):
            return
        if queue.temporary or queue.internal:
            return
        self._append(control_event(DELETE_QUEUE, queue.address, queue.name, queue.name))

    def sent(self, address: str, msg_id: int, data: bytes, origin, via: str | None) -> None:
        """A message was stored on `address` (`origin`: (node id, internal id) when it came from a mirror)."""
        node = origin[0] if origin else None
        if self._echo(via, node) or not self._mirrored_address(address):
            return
        internal = origin[1] if origin else msg_id
        self._append(send_event(data, internal, address, node))

    def acked(self, queue, entry, via: str | None, reason: str = NORMAL) -> None:
        if not self.element.message_acknowledgements or queue.internal or queue.temporary:
            return
        node = entry.origin[0] if entry.origin else None
        if self._echo(via) or not self._mirrored_address(queue.address):
            return
        internal = entry.origin[1] if entry.origin else entry.msg_id
        self._append(post_ack_event(queue.address, queue.name, internal, node, reason))

    # the link --------------------------------------------------------------------------------------------------

    def attach(self, session, own_id: str):
        link = session.sender(f"{self.queue_name}:{uuid.uuid4()}")
        link.target.address = self.queue_name
        link.source.address = self.queue_name
        link.snd_settle_mode = link.SND_UNSETTLED
        link.rcv_settle_mode = link.RCV_FIRST
        link.properties = {symbol(BROKER_ID): own_id}
        attach_caps.set_capabilities(link, desired=[MIRROR_CAPABILITY])
        link.open()
        return link

    def check_answer(self, link, own_id: str) -> str | None:
        """Why the target's answer to our attach is not a mirror target (None when it is one)."""
        offered, _desired = attach_caps.remote_capabilities(link)
        if MIRROR_CAPABILITY not in offered:
            return f"the target does not offer the {MIRROR_CAPABILITY} capability"
        remote = link_property(link.remote_properties, BROKER_ID)
        if not remote:
            return f"the target names no node id ({BROKER_ID})"
        if str(remote) == own_id:
            return "the target is this broker itself"
        self.remote_id = str(remote)
        return None


# ---- target --------------------------------------------------------------------------------------------------------


MIRROR_ADDRESS = "$ACTIVEMQ_ARTEMIS_MIRROR"  # Artemis's ProtonProtocolManager.MIRROR_ADDRESS


def is_mirror_attach(link) -> bool:
    """Whether a peer's sending link is a mirror source's. Artemis 2.40 (AMQPConnectionContext.isReplicaTarget)
    goes by the target address alone, `$ACTIVEMQ_ARTEMIS_MIRROR...`, and then requires the `amq.mirror` desired
    capability; a link that desires it under another address is taken as one too. What it desired is kept on the
    link for MirrorTarget.open (the capabilities can be read once)."""
    _offered, desired = attach_caps.remote_capabilities(link)
    link.mirror_desired = MIRROR_CAPABILITY in desired
    address = link.remote_target.address or ""
    return address.startswith(MIRROR_ADDRESS) or link.mirror_desired


class MirrorTarget:
    """Applies the events arriving on one incoming mirror link."""

    def __init__(self, broker, link):
        self.broker = broker
        self.link = link
        remote = link_property(link.remote_properties, BROKER_ID)
        # Artemis does not require the source's node id (its target then has none for the peer): the remote
        # container id stands in for it, so that what this source sends is still told apart from other origins.
        self.remote_id = str(remote) if remote else f"container:{link.connection.remote_container}"

    def open(self, own_id: str) -> str | None:
        """Answer the attach as a mirror target; returns why it is refused, or None."""
        if not getattr(self.link, "mirror_desired", False):
            return f"a mirror link must desire the {MIRROR_CAPABILITY} capability"  # as Artemis refuses it
        if self.remote_id == own_id:
            return "a broker cannot mirror to itself"
        link = self.link
        link.target.copy(link.remote_target)
        link.source.copy(link.remote_source)
        link.properties = {symbol(BROKER_ID): own_id}
        attach_caps.set_capabilities(link, offered=[MIRROR_CAPABILITY])
        link.open()
        link.flow(TARGET_CREDIT)
        log.info("Mirror target for node %s attached (%s)", self.remote_id, link.target.address)
        return None

    def delivery(self, dlv) -> None:
        link = self.link
        data = read_message(link, dlv)
        if data is None:
            return
        if link.credit < TARGET_CREDIT // 3:
            link.flow(TARGET_CREDIT - link.credit)
        try:
            self._apply(dlv, data)
        except Exception as exc:  # noqa: BLE001 - one bad event is rejected; the mirror goes on
            log.warning("Mirror event from %s rejected: %s: %s", self.remote_id, type(exc).__name__, exc)
            dlv.local.condition = Condition("amqp:decode-error", f"cannot apply the mirror event: {exc}")
            dlv.update(Delivery.REJECTED)
            dlv.settle()

    def _apply(self, dlv, data: bytes) -> None:
        broker, via = self.broker, self.remote_id
        event, message = event_type(data)
        if event is None:
            annotations, stored = split_delivery_annotations(data)
            internal = annotations.get(INTERNAL_ID)
            origin = annotations.get(BROKER_ID) or via
            address = annotations.get(INTERNAL_DESTINATION)
            if internal is None:
                raise ValueError(f"a mirrored message without {INTERNAL_ID}")
            if self._seen_before(str(origin), int(internal)):
                broker.accept_when_durable(dlv, False)  # sent again after a reconnect: already here
                return
            durable = broker.store_mirrored(stored, address, (str(origin), int(internal)), via)
            broker.accept_when_durable(dlv, durable)
            return
        annotations = message.annotations or {}

        def annotation(key):  # symbol keys compare and hash as plain strings
            value = annotations.get(key)
            return str(value) if value is not None else None

        if event in (ADD_ADDRESS, CREATE_QUEUE, DELETE_ADDRESS):
            body = json.loads(message.body) if isinstance(message.body, str) else {}
            if event == ADD_ADDRESS:
                broker.mirror_add_address(body.get("name") or annotation(ADDRESS), address_routings(body), via)
            elif event == CREATE_QUEUE:
                broker.mirror_create_queue(body.get("name") or annotation(QUEUE),
                                           body.get("address") or annotation(ADDRESS),
                                           body.get("routing-type"), bool(body.get("durable", True)), via)
            else:
                broker.mirror_delete_address(body.get("name") or annotation(ADDRESS), via)
        elif event == DELETE_QUEUE:
            broker.mirror_delete_queue(annotation(QUEUE) or str(message.body), via)
        elif event == POST_ACK:
            node = annotation(BROKER_ID) or via
            broker.mirror_ack(annotation(QUEUE), node, int(message.body), via, ack_reason(annotations.get(ACK_REASON)))
        else:
            raise ValueError(f"unknown mirror event {event!r}")
        broker.accept_when_durable(dlv, True)

    def _seen_before(self, origin: str, internal: int) -> bool:
        # Broker-wide, not per link: after a reconnect the new link gets the events the old one left unsettled.
        seen = self.broker.mirror_seen.setdefault(origin, collections.OrderedDict())
        if internal in seen:
            return True
        seen[internal] = None
        if len(seen) > DEDUP_PER_ORIGIN:
            seen.popitem(last=False)
        return False
