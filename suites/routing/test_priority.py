"""Message priority within a connection (003 §12.1.3).

The document promises no strict order ("does not guarantee"), only that higher-priority messages move
faster. So the cases queue both kinds inside the router (the consumer has no credit yet), send the
*low* ones first, then open the credit on both links at once, and check that the high-priority messages
arrive earlier on average. Without priority handling arrival follows sending order and the check fails.
"""

import statistics

import pytest

pytestmark = pytest.mark.requires("priority")


def mean_arrival_rank(history, receiver_names):
    """Average position (0 = first) at which each receiver's messages arrived on the shared connection."""
    arrivals = [e.client for e in history.events("receive") if e.client in receiver_names]
    return {name: statistics.mean(i for i, c in enumerate(arrivals) if c == name) for name in receiver_names}


def queue_then_release(connect, clients, first_address, second_address, first_priority, second_priority, n=20):
    consumer = connect()
    first = consumer.receiver(first_address, credit=0, auto_credit=False)
    second = consumer.receiver(second_address, credit=0, auto_credit=False)
    producer = connect()
    a = producer.sender(first_address)
    b = producer.sender(second_address)
    a.send(n, priority=first_priority)
    a.wait_sent(n)
    b.send(n, priority=second_priority)
    b.wait_sent(n)
    producer.sync()
    consumer.flow_together([first, second], n)
    first.wait_received(n)
    second.wait_received(n)
    return first, second


@pytest.mark.spec("ROUTING-PRIORITY-1")
def test_higher_priority_address_overtakes_waiting_lower_priority(connect, clients, details):
    low, high = queue_then_release(connect, clients, clients.unique("prio.low.a"), clients.unique("prio.high.a"),
                                   None, None)
    ranks = mean_arrival_rank(clients.history, {low.name, high.name})
    details.update(mean_rank_high=ranks[high.name], mean_rank_low=ranks[low.name])
    assert ranks[high.name] < ranks[low.name], (
        f"priority 9 messages sent last should arrive earlier than priority 2 ones: ranks {ranks}")


@pytest.mark.spec("ROUTING-PRIORITY-1", "ROUTING-PRIORITY-2")
def test_address_priority_takes_precedence_over_message_priority(connect, clients, details):
    # prio.low has address priority 2: its messages claim 9 in their header, which must be ignored.
    # The unconfigured address keeps its messages' own priority 6, which beats 2.
    low, plain = queue_then_release(connect, clients, clients.unique("prio.low.b"), clients.unique("adhoc.prio."),
                                    9, 6)
    ranks = mean_arrival_rank(clients.history, {low.name, plain.name})
    details.update(mean_rank_header6=ranks[plain.name], mean_rank_address2=ranks[low.name])
    assert ranks[plain.name] < ranks[low.name], f"address priority 2 must override header priority 9: {ranks}"
    assert {m.priority for m in low.messages()} == {9}, "the router must not rewrite the message header"
