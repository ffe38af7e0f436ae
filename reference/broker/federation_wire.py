"""The bytes of ActiveMQ Artemis 2.40's AMQP federation, as federation.py sends and reads them.

Everything here was read from Artemis's own source (`protocol/amqp/connect/federation/*`:
AMQPFederationConstants, AMQPFederationPolicySupport, AMQPFederationSource, the queue and address consumers and
sender controllers) and checked against a running Artemis 2.40.0; the unit tests (tests/test_federation_wire.py)
pin it. Only names, link properties, filters, annotations and message bodies live here: which link opens when
is federation.py's business.
"""

from __future__ import annotations

import re

from proton import Data, Described, Message, int32, symbol, ulong

from ..peek import section_end

from .config import FederationPolicy

# Link capabilities (attach fields 11 and 12, written and read through reference/attach_caps.py): the dialling
# broker desires them, the other end offers them back or the link is no federation link.
CONTROL_LINK = "AMQ_FEDERATION_CONTROL_LINK"
EVENT_LINK = "AMQ_FEDERATION_EVENT_LINK"
QUEUE_RECEIVER = "AMQ_FEDERATION_QUEUE_RECEIVER"
ADDRESS_RECEIVER = "AMQ_FEDERATION_ADDRESS_RECEIVER"
TEMPORARY_TOPIC = "temporary-topic"  # the control link's dynamic target asks for a node of this kind

# Link properties.
CONFIGURATION = "federation-configuration"  # control link: the dialling broker's settings, a map
FEDERATION_NAME = "federationName"  # control link: the name of the dialling broker's <federation>
POLICY_NAME = "federationPolicyName"  # data links: the policy that opened them
PRIORITY = "priority"  # queue receivers: the consumer priority the puller asks for
ADDRESS_SOURCE_PROPERTIES = "federated-address-source-properties"  # address receivers: auto-delete settings

# Policies travel as messages on the control link.
OPERATION_TYPE = "x-opt-amq-federation-op-type"  # message annotation
ADD_QUEUE_POLICY, ADD_ADDRESS_POLICY = "ADD_QUEUE_POLICY", "ADD_ADDRESS_POLICY"
DEFAULT_PRIORITY_ADJUSTMENT = -1  # Artemis's: a federation consumer ranks below the queue's own consumers

# The broker that receives a message over an address receiver counts it in this message annotation (an int).
HOPS = "x-opt-amq-fed-hops"

# Source filters (keys of the source's filter map, values described types).
NO_LOCAL_KEY, NO_LOCAL_CODE, NO_LOCAL_TEXT = "apache.org:no-local-filter:list", 0x0000468C00000003, "NoLocalFilter{}"
SELECTOR_KEY, SELECTOR_CODE = "jms-selector", 0x0000468C00000004
_SELECTOR_IDS = {SELECTOR_CODE, "apache.org:selector-filter:string"}
_NO_LOCAL_IDS = {NO_LOCAL_CODE, NO_LOCAL_KEY}

# What the reference asks of a broker it dials (Artemis reads each with `instanceof Number`/`Boolean`).
CONFIGURATION_SENT = {"amqpCredits": int32(1000), "amqpLowCredits": int32(300), "attach-timeout": int32(30),
                      "tunnel-core-messages": False}


# ---- policies on the control link ------------------------------------------------------------------------------


def policy_message(policy: FederationPolicy) -> bytes:
    """A remote policy as the control-link message Artemis's encodeQueuePolicyControlMessage /
    encodeAddressPolicyControlMessage write: the operation in a message annotation, the policy an amqp-value
    map with string keys (ints as Java Integer, the auto-delete figures as Long)."""
    if policy.kind == "queue":
        body: dict = {"policy-name": policy.name, "include-federated": policy.include_federated,
                      "priority-adjustment": int32(DEFAULT_PRIORITY_ADJUSTMENT)}
        if policy.includes:
            body["queue-includes"] = [part for rule in policy.includes for part in rule]  # flattened pairs
        if policy.excludes:
            body["queue-excludes"] = [part for rule in policy.excludes for part in rule]
        operation = ADD_QUEUE_POLICY
    else:
        body = {"policy-name": policy.name, "auto-delete": False, "auto-delete-delay": 0, "auto-delete-msg-count": 0,
                "max-hops": int32(policy.max_hops), "enable-divert-bindings": False}
        if policy.includes:
            body["address-includes"] = [address for address, _queue in policy.includes]
        if policy.excludes:
            body["address-excludes"] = [address for address, _queue in policy.excludes]
        operation = ADD_ADDRESS_POLICY
    return Message(body=body, annotations={symbol(OPERATION_TYPE): operation}).encode()


def read_policy(data: bytes) -> FederationPolicy:
    """The policy a control-link message carries, for this broker to pull by; ValueError names what is wrong
    (Artemis ends the federation on a malformed one: so does the caller)."""
    message = Message()
    message.decode(data)
    operation = (message.annotations or {}).get(symbol(OPERATION_TYPE))
    body = message.body
    if not isinstance(body, dict):
        raise ValueError(f"the body is {type(body).__name__}, not an amqp-value map")
    if "policy-name" not in body:
        raise ValueError("the policy carries no policy-name")
    name = str(body["policy-name"])
    if operation == ADD_QUEUE_POLICY:
        includes, excludes = _pairs(body, "queue-includes"), _pairs(body, "queue-excludes")
        return FederationPolicy("queue", "local", name, includes, excludes,
                                include_federated=bool(body.get("include-federated", False)))
    if operation == ADD_ADDRESS_POLICY:
        if "max-hops" not in body:
            raise ValueError("an address policy without max-hops")
        return FederationPolicy("address", "local", name,
                                tuple((str(a), "#") for a in body.get("address-includes") or []),
                                tuple((str(a), "#") for a in body.get("address-excludes") or []),
                                max_hops=_max_hops(int(body["max-hops"])))
    raise ValueError(f"unknown {OPERATION_TYPE} {operation!r}")


def _pairs(body: dict, key: str) -> tuple[tuple[str, str], ...]:
    flat = [str(v) for v in body.get(key) or []]
    if len(flat) % 2:
        raise ValueError(f"{key} has an odd number of entries")
    return tuple((flat[i], flat[i + 1]) for i in range(0, len(flat), 2))


def _max_hops(value: int) -> int:
    """Artemis's max-hops 0 (or below) means no limit, the reference's -1."""
    return value if value > 0 else -1


# ---- events ----------------------------------------------------------------------------------------------------


EVENT_TYPE = "x-opt-amq-federation-ev-type"  # message annotation: REQUESTED_QUEUE_ADDED_EVENT, ...
QUEUE_ADDED, ADDRESS_ADDED = "REQUESTED_QUEUE_ADDED_EVENT", "REQUESTED_ADDRESS_ADDED_EVENT"
QUEUE_NAME, ADDRESS_NAME = "REQUESTED_QUEUE_NAME", "REQUESTED_ADDRESS_NAME"  # keys of an event's body map
# Event links: a dynamic node of this kind, gone with the link (AMQPFederationSource's events sender and receiver).
LIFETIME_POLICY, DELETE_ON_CLOSE = "lifetime-policy", 0x2b


def added_event(address: str, queue: str | None = None) -> bytes:
    """The event that tells a broker whose pull was refused that the queue (or, with no `queue`, the address) it
    asked for exists now (AMQPFederationEventSupport.encodeQueueAddedEvent / encodeAddressAddedEvent): the type
    in a message annotation, as a string (Artemis compares it with String.equals: a symbol would be an unknown
    event, and an unknown event ends its federation), the names in an amqp-value map."""
    body = {ADDRESS_NAME: address} if queue is None else {ADDRESS_NAME: address, QUEUE_NAME: queue}
    event = ADDRESS_ADDED if queue is None else QUEUE_ADDED
    return Message(body=body, annotations={symbol(EVENT_TYPE): event}).encode()


def read_event(data: bytes) -> tuple[str, dict]:
    """(event type, body map) of a message on an event link (Artemis's AMQPFederationEventSupport)."""
    message = Message()
    message.decode(data)
    event = (message.annotations or {}).get(symbol(EVENT_TYPE))
    if event is None:
        raise ValueError(f"no {EVENT_TYPE} annotation")
    body = message.body if isinstance(message.body, dict) else {}
    return str(event), {str(k): v for k, v in body.items()}


# ---- hops --------------------------------------------------------------------------------------------------------


def address_selector(max_hops: int) -> str | None:
    """The selector an address receiver carries for `max_hops` (Artemis's generateAddressFilter, character for
    character: it also covers core messages' `_AMQ_Fed_Hops`); None for no limit."""
    if max_hops <= 0:
        return None
    return (f'("m.{HOPS}" IS NULL OR "m.{HOPS}"<{max_hops}) AND (_AMQ_Fed_Hops IS NULL OR _AMQ_Fed_Hops<{max_hops})')


_SELECTOR = re.compile(r'^\("m\.x-opt-amq-fed-hops" IS NULL OR "m\.x-opt-amq-fed-hops"<(\d+)\) AND '
                       r'\(_AMQ_Fed_Hops IS NULL OR _AMQ_Fed_Hops<(\d+)\)$')


def selector_max_hops(selector: str | None) -> int:
    """The hop limit of a federation receiver's selector (-1: none). The reference evaluates no other
    selector: ValueError for one it does not know."""
    if not selector:
        return -1
    found = _SELECTOR.match(selector.strip())
    if found is None or found.group(1) != found.group(2):
        raise ValueError(f"a selector the reference does not evaluate: {selector!r}")
    return int(found.group(1))


def counted_hop(data: bytes) -> tuple[bytes, int]:
    """A message as the receiving broker stores it: `x-opt-amq-fed-hops` one more than it said (1 when it had
    none), and that count. Only the message annotations section is rewritten; the bare message stays its bytes."""
    start = _skip(data, 0, 0x70)  # header
    start = _skip(data, start, 0x71)  # delivery annotations
    end = _skip(data, start, 0x72)
    annotations: dict = {}
    if end != start:
        decoded = Data()
        decoded.decode(data[start:end])
        decoded.rewind()
        decoded.next()
        annotations = dict(getattr(decoded.get_object(), "value", None) or {})
    key = symbol(HOPS)
    hops = int(annotations.get(key) or 0) + 1
    annotations[key] = int32(hops)
    encoded = Data()
    encoded.put_object(Described(ulong(0x72), annotations))
    return data[:start] + encoded.encode() + data[end:], hops


def stored_hops(data: bytes) -> int:
    """The hop count a stored message carries (0: it never crossed a federation link)."""
    start = _skip(data, _skip(data, 0, 0x70), 0x71)
    end = _skip(data, start, 0x72)
    if end == start:
        return 0
    decoded = Data()
    decoded.decode(data[start:end])
    decoded.rewind()
    decoded.next()
    return int((getattr(decoded.get_object(), "value", None) or {}).get(symbol(HOPS)) or 0)


def _skip(data: bytes, pos: int, code: int) -> int:
    """The end of the section at `pos` when it is of type `code` (small-ulong descriptor), else `pos`."""
    if pos + 3 <= len(data) and data[pos:pos + 3] == b"\x00\x53" + bytes([code]):
        end = section_end(data, pos)
        if end is None:
            raise ValueError("a message whose sections cannot be walked")
        return end
    return pos


# ---- source filters -----------------------------------------------------------------------------------------------


def put_filters(data: Data, no_local: bool, selector: str | None) -> None:
    """Write a source's filter map as Artemis's federation consumers do."""
    entries = {}
    if no_local:
        entries[symbol(NO_LOCAL_KEY)] = Described(ulong(NO_LOCAL_CODE), NO_LOCAL_TEXT)
    if selector:
        entries[symbol(SELECTOR_KEY)] = Described(ulong(SELECTOR_CODE), selector)
    if entries:
        data.put_object(entries)


def read_filters(data: Data | None) -> tuple[bool, str | None]:
    """(whether a source's filters ask for no-local, its selector or None), found by descriptor as Artemis
    does (the map's keys are free)."""
    if data is None:
        return False, None
    data.rewind()
    if not data.next():
        return False, None
    entries = data.get_object()
    no_local, selector = False, None
    for value in (entries or {}).values() if isinstance(entries, dict) else ():
        if not isinstance(value, Described):
            continue
        descriptor = value.descriptor
        descriptor = int(descriptor) if isinstance(descriptor, int) else str(descriptor)
        if descriptor in _NO_LOCAL_IDS:
            no_local = True
        elif descriptor in _SELECTOR_IDS:
            selector = str(value.value)
    return no_local, selector


def split_fqqn(address: str) -> tuple[str | None, str]:
    """(address, queue) of a fully qualified queue name `address::queue`; (None, name) for a bare name."""
    if "::" in address:
        head, _, queue = address.partition("::")
        return head, queue
    return None, address
