"""Mobile, dynamic and anonymous-relay addressing (003 §12.1.1.2; AMQP 1.0 §3.5.3)."""

import pytest


@pytest.mark.spec("ROUTING-ADDR-2")
@pytest.mark.requires("dynamic-address", "anonymous-relay")
def test_dynamic_receivers_get_unique_addresses_others_can_send_to(connect, clients, details):
    conn = connect()
    first = conn.receiver(None, dynamic=True)
    second = conn.receiver(None, dynamic=True)
    details.update(addresses=[first.remote_address, second.remote_address])
    assert first.remote_address and second.remote_address, "a dynamic source must come back with an address"
    assert first.remote_address != second.remote_address
    sender = connect().sender(None)
    sender.send(2, to=first.remote_address)
    sender.send(1, to=second.remote_address)
    sender.wait_outcomes(3)
    first.wait_received(2)
    second.wait_received(1)
    conn.sync()
    assert (first.count, second.count) == (2, 1)


@pytest.mark.spec("ROUTING-ADDR-3", "ROUTING-ADDR-1")
@pytest.mark.requires("anonymous-relay")
def test_anonymous_sender_is_routed_per_message(connect, clients, details):
    a, b = clients.unique("adhoc.anon.a"), clients.unique("adhoc.anon.b")
    ra, rb = connect().receiver(a), connect().receiver(b)
    sender = connect().sender(None)
    sender.send(3, to=a)
    sender.send(2, to=b)
    outcomes = sender.wait_outcomes(5)
    details.update(received=[ra.count, rb.count])
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    assert ra.wait_received(3) and rb.wait_received(2)
    assert {m.address for m in ra.messages()} == {a} and {m.address for m in rb.messages()} == {b}


@pytest.mark.spec("ROUTING-ADDR-1")
@pytest.mark.parametrize("capabilities", [("queue",), ("topic",), ("shared", "global")])
def test_a_consumer_whose_source_names_broker_capabilities_is_an_ordinary_consumer(connect, clients, details,
                                                                                  capabilities):
    """Clients written for brokers put capabilities on their source (Qpid JMS: `queue` or `topic`; shared
    subscriptions: `shared`, `global`). A router has no use for them: the consumer is one more destination of its
    mobile address. The one source capability a router reads is qdrouterd's `qd.waypoint` (a broker's waypoint
    link, 003 §12.1.4), which these are not."""
    address = clients.unique("adhoc.capabilities.")
    receiver = connect().receiver(address, capabilities=capabilities)
    receiver.wait_attached()
    sender = connect().sender(address)
    sender.send(3)
    outcomes = sender.wait_outcomes(3)
    details.update(outcomes=sender.outcome_counts(), condition=receiver.condition)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    assert [m.seq for m in receiver.wait_received(3)] == [0, 1, 2]
