"""The federation's wire form in the reference broker (reference/broker/federation.py, federation_wire.py),
against what Artemis 2.40 writes and reads. The forms come from Artemis's own source (AMQPFederationConstants,
AMQPFederationPolicySupport, AMQPFederationSource, the queue and address consumers and sender controllers) and
were seen working against a real Artemis in suites/network's mixed pairings (a reference broker dialling an
Artemis and the reverse)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from proton import Data, Described, Endpoint, Message, int32, symbol, ulong

from reference import attach_caps
from reference.broker import federation
from reference.broker import federation_wire as wire
from reference.broker.config import ConnectionElement, FederationPolicy
from tests.test_attach_caps import engines, pump  # two proton engines joined through the attach taps

QUEUES = FederationPolicy("queue", "remote", "b1-b2-queues", (("#", "#"),), (("secret", "#"),), include_federated=True)
TOPICS = FederationPolicy("address", "remote", "b1-b2-topics", (("prices.#", "#"), ("prices", "#")), max_hops=2)


TYPE_NAMES = {Data.INT: "int", Data.LONG: "long", Data.BOOL: "bool", Data.STRING: "string", Data.LIST: "list",
              Data.SYMBOL: "symbol"}


def decoded(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def section_types(data: bytes, code: int) -> dict:
    """The entries of the map in section `code` (0x72 message annotations, 0x77 amqp-value), each as its AMQP
    type's name: what proton-j would see."""
    parsed = Data()
    parsed.decode(data[data.index(b"\x00\x53" + bytes([code])):])
    parsed.rewind()
    parsed.next()
    parsed.enter()
    parsed.next()  # the descriptor
    parsed.next()  # the map
    parsed.enter()
    found = {}
    while parsed.next():
        key = parsed.get_object()
        parsed.next()
        found[str(key)] = TYPE_NAMES.get(parsed.type(), str(parsed.type()))
    return found


def typed(data: bytes) -> dict:
    return section_types(data, 0x77)


# ---- policies on the control link ------------------------------------------------------------------------------


def test_a_queue_policy_is_the_message_artemis_encodes():
    message = decoded(wire.policy_message(QUEUES))
    assert message.annotations == {symbol("x-opt-amq-federation-op-type"): "ADD_QUEUE_POLICY"}
    assert message.body == {"policy-name": "b1-b2-queues", "include-federated": True, "priority-adjustment": -1,
                            "queue-includes": ["#", "#"], "queue-excludes": ["secret", "#"]}  # flattened pairs
    # Artemis reads priority-adjustment as a Number and include-federated as a boolean: Integer and boolean as
    # its own encoder writes them
    assert typed(wire.policy_message(QUEUES))["priority-adjustment"] == "int"
    assert typed(wire.policy_message(QUEUES))["include-federated"] == "bool"


def test_an_address_policy_is_the_message_artemis_encodes():
    message = decoded(wire.policy_message(TOPICS))
    assert message.annotations == {symbol("x-opt-amq-federation-op-type"): "ADD_ADDRESS_POLICY"}
    assert message.body == {"policy-name": "b1-b2-topics", "auto-delete": False, "auto-delete-delay": 0,
                            "auto-delete-msg-count": 0, "max-hops": 2, "enable-divert-bindings": False,
                            "address-includes": ["prices.#", "prices"]}
    types = typed(wire.policy_message(TOPICS))
    # (Boolean) casts for the flags, Number for the rest; max-hops an Integer, the auto-delete figures Longs
    assert (types["max-hops"], types["auto-delete-delay"], types["auto-delete"]) == ("int", "long", "bool")


def artemis_policy(annotation: str, body: dict) -> bytes:
    """A control message laid out as encodeQueuePolicyControlMessage writes it: message annotations and an
    amqp-value, no header and no properties section."""
    data = Data()
    data.put_object(Described(ulong(0x72), {symbol(wire.OPERATION_TYPE): annotation}))
    data.put_object(Described(ulong(0x77), body))
    return data.encode()


# The two policy messages a real Artemis 2.40.0 sent a reference broker it dialled (network-duplex, broker
# connection b1-b2.B2; the transfers' payloads from the reference's PN_TRACE_FRM=1 log): message annotations and an
# amqp-value map, no other section; auto-delete figures as smalllong (`U`), ints as smallint (`T`).
ARTEMIS_QUEUE_POLICY = (b"\x00Sr\xc11\x02\xa3\x1cx-opt-amq-federation-op-type\xa1\x10ADD_QUEUE_POLICY"
                        b"\x00Sw\xc1c\x08\xa1\x0bpolicy-name\xa1\x0fb1-b2.B2-queues\xa1\x11include-federatedB"
                        b"\xa1\x13priority-adjustmentT\xff\xa1\x0equeue-includes\xc0\x07\x02\xa1\x01#\xa1\x01#")
ARTEMIS_ADDRESS_POLICY = (b"\x00Sr\xc13\x02\xa3\x1cx-opt-amq-federation-op-type\xa1\x12ADD_ADDRESS_POLICY"
                          b"\x00Sw\xc1\x9d\x0e\xa1\x0bpolicy-name\xa1\x0fb1-b2.B2-topics\xa1\x0bauto-deleteB"
                          b"\xa1\x11auto-delete-delayU\x00\xa1\x15auto-delete-msg-countU\x00\xa1\x08max-hopsT\x01"
                          b"\xa1\x16enable-divert-bindingsB\xa1\x10address-includes\xc0\x09\x01\xa1\x06prices")


def test_the_policies_a_real_artemis_sent_are_read():
    queues = wire.read_policy(ARTEMIS_QUEUE_POLICY)
    assert (queues.kind, queues.name, queues.includes, queues.include_federated) == (
        "queue", "b1-b2.B2-queues", (("#", "#"),), False)
    topics = wire.read_policy(ARTEMIS_ADDRESS_POLICY)
    assert (topics.kind, topics.name, topics.includes, topics.max_hops) == (
        "address", "b1-b2.B2-topics", (("prices", "#"),), 1)


def test_the_reference_writes_the_same_body_types_as_that_artemis():
    ours = FederationPolicy("address", "remote", "b1-b2.B2-topics", (("prices", "#"),), max_hops=1)
    assert typed(wire.policy_message(ours)) == section_types(ARTEMIS_ADDRESS_POLICY, 0x77)
    ours = FederationPolicy("queue", "remote", "b1-b2.B2-queues", (("#", "#"),))
    assert typed(wire.policy_message(ours)) == section_types(ARTEMIS_QUEUE_POLICY, 0x77)
    assert section_types(wire.policy_message(ours), 0x72) == section_types(ARTEMIS_QUEUE_POLICY, 0x72)


def test_a_queue_policy_artemis_sends_is_read_as_pairs_of_address_and_queue_matches():
    policy = wire.read_policy(artemis_policy("ADD_QUEUE_POLICY", {
        "policy-name": "q", "include-federated": False, "priority-adjustment": int32(-1),
        "queue-includes": ["orders", "#", "jobs.#", "jobs.*"]}))
    assert (policy.kind, policy.side, policy.name) == ("queue", "local", "q")
    assert policy.includes == (("orders", "#"), ("jobs.#", "jobs.*")) and policy.excludes == ()
    assert policy.include_federated is False


@pytest.mark.parametrize("sent, kept", [(int32(3), 3), (int32(0), -1), (int32(-1), -1)])
def test_an_address_policy_artemis_sends_keeps_its_hop_limit(sent, kept):
    policy = wire.read_policy(artemis_policy("ADD_ADDRESS_POLICY", {
        "policy-name": "a", "auto-delete": False, "auto-delete-delay": 0, "auto-delete-msg-count": 0,
        "max-hops": sent, "enable-divert-bindings": False, "address-includes": ["prices"]}))
    assert (policy.kind, policy.includes, policy.max_hops) == ("address", (("prices", "#"),), kept)
    assert policy.matches("prices", "#") and not policy.matches("orders", "#")


@pytest.mark.parametrize("annotation, body, why", [
    ("ADD_QUEUE_POLICY", {"include-federated": True}, "policy-name"),
    ("ADD_ADDRESS_POLICY", {"policy-name": "a"}, "max-hops"),
    ("ADD_QUEUE_POLICY", {"policy-name": "q", "queue-includes": ["odd"]}, "odd"),
    ("REMOVE_EVERYTHING", {"policy-name": "q"}, "unknown"),
])
def test_a_malformed_policy_is_refused_with_its_reason(annotation, body, why):
    with pytest.raises(ValueError, match=why):
        wire.read_policy(artemis_policy(annotation, body))


# ---- hops ----------------------------------------------------------------------------------------------------------


def test_the_receiving_broker_counts_a_hop_in_the_message_annotation_and_leaves_the_bare_message_alone():
    original = Message(body="hello", annotations={symbol("x-opt-other"): "kept"}, durable=True)
    data = original.encode()
    once, hops = wire.counted_hop(data)
    assert hops == 1 and wire.stored_hops(once) == 1
    twice, hops = wire.counted_hop(once)
    assert hops == 2
    message = decoded(twice)
    assert message.annotations == {symbol("x-opt-other"): "kept", symbol("x-opt-amq-fed-hops"): 2}
    assert message.body == "hello" and message.durable
    assert data.endswith(twice[twice.index(b"\x00\x53\x73"):])  # properties and body: the same bytes
    assert typed_annotation(twice) == "int"  # an Integer, as Artemis's setAnnotation(..., 1) writes it


def typed_annotation(data: bytes) -> str:
    return section_types(data, 0x72)["x-opt-amq-fed-hops"]


def test_a_message_without_any_annotations_gets_the_section_in_its_place():
    data = Message(body="x").encode()
    counted, hops = wire.counted_hop(data)
    assert hops == 1 and decoded(counted).annotations == {symbol("x-opt-amq-fed-hops"): 1}
    assert wire.stored_hops(data) == 0


def test_the_hop_limit_is_artemis_s_own_selector():
    # AMQPFederationPolicySupport.generateAddressFilter(2), character for character
    assert wire.address_selector(2) == ('("m.x-opt-amq-fed-hops" IS NULL OR "m.x-opt-amq-fed-hops"<2) AND '
                                        '(_AMQ_Fed_Hops IS NULL OR _AMQ_Fed_Hops<2)')
    assert wire.address_selector(0) is None and wire.address_selector(-1) is None
    assert wire.selector_max_hops(wire.address_selector(5)) == 5 and wire.selector_max_hops(None) == -1
    assert wire.selector_max_hops(wire.address_selector(12)) == 12  # a limit of two digits reads back too
    with pytest.raises(ValueError, match="does not evaluate"):
        wire.selector_max_hops("color = 'red'")


def test_source_filters_are_described_as_artemis_finds_them():
    data = Data()
    wire.put_filters(data, no_local=True, selector=wire.address_selector(1))
    data.rewind()
    data.next()
    filters = data.get_object()
    assert filters[symbol("apache.org:no-local-filter:list")] == Described(ulong(0x0000468C00000003), "NoLocalFilter{}")
    assert filters[symbol("jms-selector")].descriptor == ulong(0x0000468C00000004)
    assert wire.read_filters(data) == (True, wire.address_selector(1))
    by_name = Data()  # a peer may use the symbolic descriptors: Artemis's findFilter takes either
    by_name.put_object({symbol("x"): Described(symbol("apache.org:selector-filter:string"), "a > 1")})
    assert wire.read_filters(by_name) == (False, "a > 1")
    assert wire.split_fqqn("orders::orders") == ("orders", "orders") and wire.split_fqqn("q") == (None, "q")


# ---- the control link: two proton engines through the attach taps, no sockets ----------------------------------------


def dialling_broker(name: str):
    """Two joined engines, the client's connection open as broker `name` with a session, and that broker's
    federation (the dialling side)."""
    client, server = engines()
    client[0].container = name
    client[0].open()
    session = client[0].session()
    session.open()
    return client, server, session, federation.Federation(fake_broker(name))


def settle(a, b):
    for _ in range(20):
        if not (pump(a, b) + pump(b, a)):
            return


def fake_broker(name: str):
    return SimpleNamespace(node_id=f"node-{name}", config=SimpleNamespace(name=name), addresses={}, queues={})


def attach_bytes(client, server) -> list[bytes]:
    """Pump the client's output to the server, returning the raw frames as they left the client's tap."""
    conn, transport = client
    seen = []
    for _ in range(20):
        pending = transport.pending()
        if pending <= 0:
            break
        data = conn.loop_tap.feed_out(bytes(transport.peek(pending)))
        transport.pop(pending)
        seen.append(data)
        server[0].loop_tap.feed_in(data)
        server[1].push(data)
        settle(server, client)
    return seen


def _answer_as_b2(client, server, remote):
    """The server engine opens as broker B2 and its federation answers the control link `remote`; B2's federation."""
    server[0].container = "B2"
    server[0].open()
    server[0].session_head(0).open()
    dialled = federation.Federation(fake_broker("B2"))
    assert dialled.control_attach(remote) is None
    settle(server, client)
    return dialled


def test_the_control_link_attach_is_one_artemis_recognises_and_the_answer_is_read_back():
    client, server, session, dialling = dialling_broker("B1")
    element = ConnectionElement("federation", policies=(QUEUES, TOPICS))
    link = dialling.dialled(client[0], element, session, "b1-b2")
    raw = b"".join(attach_bytes(client, server))
    # The desired capability as an array of symbols with no descriptor: proton-j refuses elements described
    # by null (`00 40`), which is how proton-C writes an Array with a None descriptor
    wanted = b"AMQ_FEDERATION_CONTROL_LINK"
    assert wanted in raw
    at = raw.index(wanted)
    assert raw[at - 5:at] == b"\xb3" + len(wanted).to_bytes(4, "big")  # the array's constructor: sym32
    assert b"\x00\x40\xb3" not in raw and b"\x00\x40\xa3" not in raw

    remote = server[0].link_head(0)
    assert remote.remote_target.dynamic
    assert federation.incoming_kind(remote) == wire.CONTROL_LINK
    properties = remote.remote_properties
    assert properties[symbol("federationName")] == "b1-b2"
    assert properties[symbol("federation-configuration")]["amqpCredits"] == 1000

    dialled = _answer_as_b2(client, server, remote)
    assert remote.target.address == remote.name  # the dynamic node, named after the link as Artemis does
    assert link.remote_target.address == remote.name
    assert dialling.control_answered(link) is None  # the offered capability came back
    settle(client, server)
    assert remote.current is None, "the policies wait for the event link's answer (AMQPFederationSource's order)"
    answer_event_links(client, server, dialling, dialled)
    while remote.current is not None:  # what the broker's on_delivery does for a control link
        remote.broker_federation_deliveries(remote.current)
    settle(server, client)
    policies = dialled.sides[0].policies
    assert [(p.kind, p.name) for p in policies] == [("queue", "b1-b2-queues"), ("address", "b1-b2-topics")]
    assert policies[1].max_hops == 2 and policies[0].include_federated


def answer_event_links(client, server, dialling, dialled) -> None:
    """B2's federation answers the event links B1 opened after its control link was answered, and B1 reads each
    answer (what the broker's on_link_remote_open does with a federation link it opened)."""
    while (end := server[0].link_head(Endpoint.LOCAL_UNINIT)) is not None:
        assert dialled.event_attach(end) is None
    settle(server, client)
    for event_link in dialling.sides[0].event_links:
        event_link.broker_federation_answer(event_link)
    settle(client, server)


def test_a_control_link_the_other_end_does_not_offer_back_ends_the_federation():
    client, server, session, dialling = dialling_broker("B1")
    link = dialling.dialled(client[0], ConnectionElement("federation", policies=(QUEUES,)), session, "f")
    settle(client, server)
    remote = server[0].link_head(0)
    server[0].open()
    server[0].session_head(0).open()
    remote.target.copy(remote.remote_target)
    remote.target.address = "plain"
    remote.open()  # a broker that answers the attach but knows nothing of federation
    settle(server, client)
    assert "did not offer AMQ_FEDERATION_CONTROL_LINK" in dialling.control_answered(link)


def test_an_artemis_event_is_read_for_the_log():
    # As AMQPFederationEventSupport writes a REQUESTED_QUEUE_ADDED event (seen from a real Artemis 2.40.0 in the
    # duplex pairing: the queue a reference pull had asked for was created there later)
    data = Message(body={"REQUESTED_ADDRESS_NAME": "jobs", "REQUESTED_QUEUE_NAME": "jobs"},
                   annotations={symbol("x-opt-amq-federation-ev-type"): "REQUESTED_QUEUE_ADDED_EVENT"}).encode()
    assert wire.read_event(data) == ("REQUESTED_QUEUE_ADDED_EVENT",
                                     {"REQUESTED_ADDRESS_NAME": "jobs", "REQUESTED_QUEUE_NAME": "jobs"})
    with pytest.raises(ValueError, match="x-opt-amq-federation-ev-type"):
        wire.read_event(Message(body={}).encode())


def test_a_pull_for_a_queue_not_here_is_refused_as_not_found_whatever_its_selector():
    # Artemis takes only not-found (and resource-deleted, detach-forced) as "not here": any other refusal ends its
    # whole federation connection. Seen with a real Artemis hub that asked a reference spoke for its own federation
    # subscription queue, with that queue's connection-id selector.
    broker = fake_broker("H")
    broker.queues = {"orders": SimpleNamespace(address="orders")}
    feds = federation.Federation(broker)
    connection = object()
    feds.sides.append(federation.Side(feds, connection, [], "s1-h", "S1"))
    odd = Data()
    odd.put_object({symbol("jms-selector"): Described(ulong(wire.SELECTOR_CODE), "__AMQ_CID<>'H'")})

    def pull(address):
        return SimpleNamespace(connection=connection, remote_source=SimpleNamespace(address=address, filter=odd))
    why, *_ = feds.serve(pull("prices::federation-address-receiver:x"), wire.QUEUE_RECEIVER)
    assert "does not exist" in why
    why, *_ = feds.serve(pull("orders::orders"), wire.QUEUE_RECEIVER)
    assert "does not evaluate" in why  # a queue that is here, with a selector the reference cannot honour
    # a fully qualified name (address::queue) names both: a queue of that name on another address is not the one
    why, *_ = feds.serve(pull("other::orders"), wire.QUEUE_RECEIVER)
    assert why == "Queue: 'orders' does not exist on address 'other'"


def _federated_pair():
    """A control link from B1 answered by B2's federation (B1 sends its policies only as the case says): (client,
    server, B1's session, B1's control link, B2's end of it, B2's federation)."""
    client, server, session, dialling = dialling_broker("B1")
    link = dialling.dialled(client[0], ConnectionElement("federation", policies=(QUEUES,)), session, "b1-b2")
    settle(client, server)
    remote = server[0].link_head(0)
    return client, server, session, link, remote, _answer_as_b2(client, server, remote)


def _deliver_all(client, server, remote):
    settle(client, server)
    while remote.current is not None:  # what the broker's on_delivery does
        remote.broker_federation_deliveries(remote.current)
    settle(server, client)


@pytest.mark.parametrize("messages", [3 * federation.CONTROL_CREDIT])
def test_the_control_and_event_links_keep_their_credit_however_many_messages_come(messages):
    """A long-lived federation gets a policy per policy change and an event per demand change: its links must be
    topped up as they go, or the peer stops after one window (CONTROL_CREDIT)."""
    client, server, session, link, remote, dialled = _federated_pair()
    _deliver_all(client, server, remote)
    for n in range(messages):
        if link.credit == 0:
            break
        link.delivery(f"policy-{n}")
        link.send(wire.policy_message(FederationPolicy("queue", "remote", f"p{n}", (("#", "#"),), ())))
        link.advance()
        _deliver_all(client, server, remote)
    assert len(dialled.sides[0].policies) == messages, "every policy arrived"

    events = session.sender("events")  # Artemis's event link, B1 to B2
    events.target.address = "events"
    events.open()
    settle(client, server)
    event_end = server[0].link_head(Endpoint.LOCAL_UNINIT)
    assert dialled.event_attach(event_end) is None
    settle(server, client)
    event = Message(body={"REQUESTED_ADDRESS_NAME": "jobs"},
                    annotations={symbol("x-opt-amq-federation-ev-type"): "REQUESTED_ADDRESS_ADDED_EVENT"}).encode()
    sent = 0
    for n in range(messages):
        if events.credit == 0:
            break
        events.delivery(f"event-{n}")
        events.send(event)
        events.advance()
        sent += 1
        _deliver_all(client, server, event_end)
    assert sent == messages and event_end.credit > 0, f"the event link ran dry after {sent} events"


def _b2_side(policies: list, addresses: dict | None = None):
    """B2's side of a federation with B1 (which has answered), over joined engines: (client, server, side)."""
    client, server = engines()
    client[0].container = "B2"
    client[0].open()
    broker = fake_broker("B2")
    broker.add_outgoing_producer = lambda *args: None
    broker.addresses = addresses or {}
    return client, server, federation.Side(federation.Federation(broker), client[0], policies, "b2-b1", "B1")


def _pulling_side(kind: str):
    """B2's side and the one pull it opened for `kind` ("queue": orders, "address": prices); returns (client,
    server, side, pull link, B1's end of it)."""
    policy = QUEUES if kind == "queue" else TOPICS
    client, server, side = _b2_side([policy])
    side._open((kind, "orders" if kind == "queue" else "prices"), policy, "orders" if kind == "queue" else "prices",
               "orders" if kind == "queue" else "prices")
    settle(client, server)
    server[0].open()
    server[0].session_head(0).open()
    return client, server, side, client[0].link_head(0), server[0].link_head(0)


def test_an_address_pull_asks_artemis_to_keep_its_subscription_queue():
    # AMQPFederationAddressPolicy's source properties: a subscription queue that Artemis removes on its own (by
    # delay or message count) would lose what is published between two pulls of a long-lived federation
    client, server, side, pull, served = _pulling_side("address")
    properties = served.remote_properties[symbol(wire.ADDRESS_SOURCE_PROPERTIES)]
    assert properties == {"auto-delete": False, "auto-delete-delay": 0, "auto-delete-msg-count": 0}


@pytest.mark.parametrize("offered", [True, False])
def test_a_pull_answered_without_the_capability_is_closed(offered):
    """Artemis requires the serving broker to offer the pull's capability back; a pull answered without it is
    closed (demand opens it again later), one answered with it stays."""
    client, server, side, pull, served = _pulling_side("queue")
    served.source.copy(served.remote_source)
    served.target.copy(served.remote_target)
    if offered:
        attach_caps.set_capabilities(served, offered=[wire.QUEUE_RECEIVER])
    served.open()
    settle(server, client)
    side._answered(pull, wire.QUEUE_RECEIVER)
    assert bool(pull.state & Endpoint.LOCAL_CLOSED) != offered
    assert (("queue", "orders") in side.pulls) == offered


@pytest.mark.parametrize(("max_hops", "pulled"), [(1, False), (2, True), (-1, True)])
def test_a_consumer_federated_from_a_third_broker_is_demand_only_when_hops_allow(max_hops, pulled):
    """B2 federates topic `prices` from B1; its only subscriber is B3's federation (a consumer whose node is B3).
    A message from B1 reaches B3 in two hops, so B2 pulls for it only when the policy's max-hops is more than one
    (or unlimited): with one hop the message could go no further than B2 (004: networks of brokers, hops)."""
    subscription = SimpleNamespace(routing="multicast", internal=False, consumers=[
        SimpleNamespace(closed=False, federation_node="B3")])
    policy = FederationPolicy("address", "local", "b2-b1-topics", (("prices", "#"),), (), max_hops=max_hops)
    _, _, side = _b2_side([policy], {"prices": {"routings": {"multicast"}, "queues": [subscription]}})
    side.evaluate()
    assert (("address", "prices") in side.pulls) == pulled


def test_a_queue_whose_routing_was_read_at_run_time_is_pulled_for_too():
    """A queue a mirror created has its routing type from the event's text (lower-cased there: a string made at
    run time, not the module's constant); a local consumer on it is demand like any other."""
    routing = "ANYCAST".lower()  # as reference/broker/broker.py's mirror_create_queue reads it
    queue = SimpleNamespace(name="orders", routing=routing, internal=False,
                            consumers=[SimpleNamespace(closed=False, federation_node=None)])
    _, _, side = _b2_side([QUEUES], {"orders": {"routings": {routing}, "queues": [queue]}})
    side.evaluate()
    assert ("queue", "orders") in side.pulls


@pytest.mark.parametrize(("came_from", "hops", "node", "max_hops", "allowed"), [
    ("B1", 0, "B1", -1, False),  # never back where it came from
    ("B1", 0, "B2", -1, True), ("B1", 50, "B2", -1, True),  # no limit
    (None, 0, "B2", 1, True), (None, 1, "B2", 1, False),  # one hop: a message that crossed one goes no further
    ("B1", 1, "B3", 2, True), ("B1", 2, "B3", 2, False), ("B1", 3, "B3", 2, False),
])
def test_a_message_goes_to_a_puller_only_within_its_hops_and_never_back(came_from, hops, node, max_hops, allowed):
    assert federation.may_forward(came_from, hops, node, max_hops) is allowed


def test_the_dialling_side_pulls_by_its_local_policies_and_sends_the_remote_ones():
    client, server, session, dialling = dialling_broker("B1")
    local = FederationPolicy("queue", "local", "mine", (("#", "#"),), ())
    dialling.dialled(client[0], ConnectionElement("federation", policies=(local, QUEUES, TOPICS)), session, "b1-b2")
    side = dialling.sides[0]
    assert side.policies == [local] and side.remote_policies == [QUEUES, TOPICS]


def test_the_hop_count_is_found_behind_large_delivery_annotations():
    """The sections before the message annotations are stepped over whatever their size: a stored message whose
    delivery annotations are most of its bytes keeps its count."""
    original = Message(body="x", instructions={symbol("x-opt-routing-note"): "n" * 200}, durable=True)
    once, _ = wire.counted_hop(original.encode())
    twice, hops = wire.counted_hop(once)
    assert hops == 2 and wire.stored_hops(twice) == 2
    # the sections stay in AMQP 1.0 §3.2's order: delivery annotations, then message annotations
    assert twice.index(b"\x00\x53\x71") < twice.index(b"\x00\x53\x72") < twice.index(b"\x00\x53\x77")


def test_a_pull_the_other_broker_closed_is_forgotten_so_that_demand_can_open_it_again():
    """link_lost gets the link as the closing event carries it: the same link, not the same Python object."""
    client, server, side, pull, served = _pulling_side("queue")
    assert ("queue", "orders") in side.pulls
    side.link_lost(client[0].link_head(0))  # a fresh wrapper of that link, as an event gives it
    assert side.pulls == {}
