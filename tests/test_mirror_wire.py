"""The mirror's wire form in the reference broker (reference/broker/mirror.py), against what Artemis 2.40 writes
and reads. The forms here come from Artemis's own source (AddressInfo.toJSON/fromJSON, AMQPMirrorMessageFactory,
AckReason) and were seen working against a real Artemis in suites/brokerconnections/test_mirror.py's mixed pairs
(an Artemis mirroring into a reference broker and the reverse)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
from proton import Message, byte

from reference.broker import mirror

# What an Artemis 2.40 source sends for its multicast address `events` (AddressInfo.toJSON; seen as such by a
# reference target in the mixed pair: "Address 'events' added by the mirror from ... (multicast)").
ARTEMIS_EVENTS = ('{"id":7,"name":"events","auto-created":false,"temporary":false,"internal":false,"firstSeen":0,'
                  '"routingTypes":[0],"created-timestamp":1795834366000}')


@pytest.mark.parametrize("body, routings", [
    (ARTEMIS_EVENTS, {"multicast"}),
    ('{"name":"orders","routingTypes":[1]}', {"anycast"}),
    ('{"name":"both","routingTypes":[0,1]}', {"multicast", "anycast"}),
    ('{"name":"old","routing-types":"ANYCAST,MULTICAST"}', {"multicast", "anycast"}),  # a reference of before
    ('{"name":"none"}', set()),
])
def test_an_address_event_gives_the_routing_types_artemis_meant(body, routings):
    assert mirror.address_routings(json.loads(body)) == routings


def test_an_address_event_is_written_as_artemis_reads_it():
    body = json.loads(mirror.address_json("events", {"multicast", "anycast"}))
    # AddressInfo.fromJSON takes routing types from `routingTypes` only, as RoutingType.getType numbers
    assert body["name"] == "events" and body["routingTypes"] == [0, 1] and body["firstSeen"] == 0
    # an address the mirror announces is a plain one on the target: not auto-created (Artemis would remove it once
    # its last queue goes), not temporary, not internal (hidden from clients and management)
    assert (body["auto-created"], body["temporary"], body["internal"]) == (False, False, False)
    assert "routing-types" not in body
    assert mirror.address_routings(body) == {"multicast", "anycast"}


def decoded(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def test_a_normal_acknowledgement_carries_no_reason_and_matches_the_generic_encoder():
    fast = decoded(mirror.post_ack_event("orders", "orders", 42, "node-a"))
    generic = decoded(mirror.control_event(mirror.POST_ACK, "orders", "orders", 42, "node-a"))
    assert (fast.annotations, fast.body, fast.durable) == (generic.annotations, generic.body, generic.durable)
    assert mirror.ACK_REASON not in fast.annotations


@pytest.mark.parametrize("reason, number", [(mirror.KILLED, 1), (mirror.EXPIRED, 2), (mirror.REPLACED, 3)])
def test_an_acknowledgement_for_another_reason_carries_it_as_a_byte(reason, number):
    message = decoded(mirror.post_ack_event("orders", "orders", 42, None, reason))
    value = message.annotations[mirror.ACK_REASON]
    # AMQPMirrorMessageFactory puts AckReason.getVal(), a Java byte; AckManager reads it as a Number
    assert isinstance(value, byte) and value == number
    assert message.body == 42 and message.annotations[mirror.EVENT_TYPE] == mirror.POST_ACK
    assert mirror.ack_reason(value) == reason


@pytest.mark.parametrize("value, reason", [(None, mirror.NORMAL), (0, mirror.NORMAL), (2, mirror.EXPIRED),
                                           (9, mirror.NORMAL), ("x", mirror.NORMAL)])
def test_an_unknown_or_missing_reason_is_a_normal_acknowledgement(value, reason):
    assert mirror.ack_reason(value) == reason  # as AckReason.fromValue does for a newer peer's reasons


def test_an_address_event_carries_its_creation_time_in_milliseconds():
    before = int(time.time() * 1000)
    stamp = json.loads(mirror.address_json("events", {"multicast"}))["created-timestamp"]
    assert before - 1000 <= stamp <= int(time.time() * 1000) + 1000  # AddressInfo's createdTimestamp: epoch ms


class _RecordingBroker:
    """What a MirrorSource needs of its broker: its addresses, and the store-and-forward queue it appends its
    events to."""

    def __init__(self, addresses: dict | None = None):
        self.appended: list[bytes] = []
        self.addresses = addresses or {}

    def internal_queue(self, name: str):
        return SimpleNamespace(name=name)

    def append_internal(self, queue, data: bytes) -> None:
        self.appended.append(data)


def _source(queue_creation: bool = True, target: str | None = "node-c",
            addresses: dict | None = None) -> tuple[mirror.MirrorSource, list[bytes]]:
    broker = _RecordingBroker(addresses)
    element = SimpleNamespace(queue_creation=queue_creation, queue_removal=True, message_acknowledgements=True)
    source = mirror.MirrorSource(broker, "to-c", element)
    source.remote_id = target
    return source, broker.appended


@pytest.mark.parametrize("queue_creation", [True, False])
def test_an_address_is_mirrored_only_when_queue_creation_is(queue_creation):
    """002 "Mirroring": queue-creation says whether created addresses and queues are mirrored."""
    source, appended = _source(queue_creation)
    source.address_added("events", {"multicast"}, None)
    if not queue_creation:
        assert appended == []
        return
    assert len(appended) == 1
    event = decoded(appended[0])
    assert event.annotations[mirror.EVENT_TYPE] == mirror.ADD_ADDRESS
    assert mirror.address_routings(json.loads(event.body)) == {"multicast"}


def test_a_message_that_came_from_another_mirror_is_mirrored_on_with_its_origin_s_ids():
    """A message this broker got from node-a's mirror keeps node-a's id and node-a's internal id when it is mirrored
    on to node-c, so that node-c tells it apart from this broker's own messages and drops it if it arrives twice."""
    source, appended = _source()
    body = Message(body="from a", address="orders").encode()
    source.sent("orders", 7, body, ("node-a", 42), None)
    source.sent("orders", 8, body, None, None)  # one of this broker's own
    relayed, own = (decoded(data) for data in appended)
    assert relayed.instructions[mirror.INTERNAL_ID] == 42 and relayed.instructions[mirror.BROKER_ID] == "node-a"
    assert own.instructions[mirror.INTERNAL_ID] == 8 and mirror.BROKER_ID not in own.instructions
    source.sent("orders", 9, body, ("node-c", 5), None)  # node-c's own message, back: never echoed
    assert len(appended) == 2


def test_a_mirror_that_starts_announces_the_addresses_there_are_but_not_the_brokers_own():
    """002 "Mirroring": a mirror created on a broker that has addresses already sends their creation first; its own
    store-and-forward queue and the management address are the broker's business, never mirrored."""
    addresses = {name: {"routings": {"anycast"}, "queues": []}
                 for name in ("orders", mirror.snf_name("to-c"), "activemq.management.1234")}
    source, appended = _source(addresses=addresses)
    source.start()
    announced = [decoded(data) for data in appended]
    assert [(e.annotations[mirror.EVENT_TYPE], json.loads(e.body)["name"]) for e in announced] == [
        (mirror.ADD_ADDRESS, "orders")]



def test_a_mirror_event_of_an_unknown_type_is_refused_not_applied_as_another():
    """An event this target does not know (a newer Artemis's, say) is refused with its name; the delivery loop
    rejects it and the mirror goes on. It must not be taken for an acknowledgement."""
    applied = []
    broker = SimpleNamespace(mirror_ack=lambda *args: applied.append(args),
                             mirror_delete_queue=lambda *args: applied.append(args))
    target = mirror.MirrorTarget.__new__(mirror.MirrorTarget)  # no link: _apply is judged alone
    target.broker, target.remote_id = broker, "node-a"
    event = mirror.control_event("renameQueue", "orders", "orders", 42, "node-a")
    with pytest.raises(ValueError, match="unknown mirror event 'renameQueue'"):
        target._apply(None, event)
    assert applied == []


def test_an_address_event_from_artemis_is_applied_with_its_routing_types():
    """The body of an addAddress event is Artemis's AddressInfo JSON, read for its routing types: a multicast
    address from an Artemis source is declared multicast here, not as the anycast default."""
    declared = []
    broker = SimpleNamespace(mirror_add_address=lambda name, routings, via: declared.append((name, routings)),
                             accept_when_durable=lambda dlv, durable: None)
    target = mirror.MirrorTarget.__new__(mirror.MirrorTarget)  # no link: _apply is judged alone
    target.broker, target.remote_id = broker, "node-a"
    target._apply(None, mirror.control_event(mirror.ADD_ADDRESS, "events", None, ARTEMIS_EVENTS))
    assert declared == [("events", {"multicast"})]


def test_before_its_target_is_known_a_mirror_echoes_nothing_applied_from_elsewhere():
    """Until the target has connected once, its node id is unknown: an event applied from a mirror link (via
    someone) counts as an echo and is not sent on, as in Artemis; one of this broker's own (via None) is sent."""
    source, appended = _source(target=None)
    source.address_added("from-a-link", {"anycast"}, "node-x")
    assert appended == []
    source.address_added("local", {"anycast"}, None)
    assert [json.loads(decoded(data).body)["name"] for data in appended] == ["local"]


def test_a_create_queue_event_whose_body_names_no_queue_takes_the_annotation_s():
    created = []
    broker = SimpleNamespace(mirror_create_queue=lambda name, address, routing, durable, via: created.append(
        (name, address)), accept_when_durable=lambda dlv, durable: None)
    target = mirror.MirrorTarget.__new__(mirror.MirrorTarget)  # no link: _apply is judged alone
    target.broker, target.remote_id = broker, "node-a"
    target._apply(None, mirror.control_event(mirror.CREATE_QUEUE, "orders", "orders.q", '{"address": "orders"}'))
    assert created == [("orders.q", "orders")]
