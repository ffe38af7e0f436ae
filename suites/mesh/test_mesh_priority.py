"""Message priority on an inter-router connection (003 §12.1.3).

"Within the scope of a connection" the router serves higher-priority messages first, and "higher-priority
messages will travel more quickly through the router network". A router may apply this only where messages
pile up between routers (qdrouterd 1.19 does: it keeps one inter-router link per priority level), so these
cases make them pile up there, and nowhere else:

- the inter-router connection R2->R1 goes through the fault proxy, whose latency toxic holds back what R2
  says to R1 (credit, dispositions) for RETURN_DELAY_MS. R1 can then send R2 one credit window of routed
  messages at a time (250 on both routers) and keeps the rest waiting on the inter-router connection;
- the consumers on R2 have credit for everything from the start, so nothing waits at them;
- a producer on R1 puts a large earlier batch (several credit windows) on the wire, then a small later
  batch; the later batch must overtake the earlier messages still waiting at R1.

The check is the mean position at which each batch arrives at R2's consumers. Without priority handling the
connection is FIFO: the later batch arrives last (mean rank ~850 against ~400 for the earlier one, as with
`interop run --break router:no-priority`); with it, the later batch goes with the next credit (~300 against
~470). The document promises no strict order, so only the means are compared.
"""

import statistics

import pytest

# serial: RETURN_DELAY_MS must outlast the earlier batch's way to R1, which a second pytest-xdist worker's load on
# the same cores can stretch past it
pytestmark = [pytest.mark.requires("mesh", "priority"), pytest.mark.serial]

LINK = "R2->R1"  # R2 dials R1 through the proxy: R2's frames to R1 are this link's upstream stream
RETURN_DELAY_MS = 1000  # long enough for the whole earlier batch to reach R1 before R2's next credit does
EARLY_SENDERS, PER_EARLY_SENDER = 4, 200  # 800 earlier messages; each sender stays under a link's capacity
LATE_COUNT = 100


@pytest.fixture
def slow_return(topology):
    running = topology("two-router-priority")
    yield running
    running.faults.reset()  # every case leaves the inter-router link clean for the next


def mean_arrival_rank(history, receiver_names):
    """Average position (0 = first) at which each receiver's messages arrived on the shared connection."""
    arrivals = [e.client for e in history.events("receive") if e.client in receiver_names]
    return {name: statistics.mean(i for i, c in enumerate(arrivals) if c == name) for name in receiver_names}


def first_arrival(history, receiver_names, name):
    arrivals = [e.client for e in history.events("receive") if e.client in receiver_names]
    return arrivals.index(name)


def early_then_late(running, clients, early_address, late_address, early_priority, late_priority):
    """Send the early batch to `early_address`, then the late batch to `late_address`, from one connection on
    R1, with both consumers on R2 and R2's return traffic delayed; returns (early receiver, late receiver)."""
    total_early = EARLY_SENDERS * PER_EARLY_SENDER
    far = clients.connect(running.client_url("far"))
    early = far.receiver(early_address, credit=total_early)
    late = far.receiver(late_address, credit=LATE_COUNT)
    producer = clients.connect(running.client_url("producer"))
    # Several senders: a router may withhold credit from a producer whose messages wait (the reference router
    # grants at most a link capacity, 250, of them), and the early batch must be wholly on the wire before
    # the late one leaves the client, or the client, not the router, would decide the order.
    early_senders = [producer.sender(early_address) for _ in range(EARLY_SENDERS)]
    late_sender = producer.sender(late_address)
    for sender in early_senders + [late_sender]:
        sender.wait_credit(1, timeout=15)  # R1 has learnt that both addresses have a consumer on R2
    running.faults.toxic(LINK, "latency", stream="upstream", latency=RETURN_DELAY_MS)
    for sender in early_senders:
        sender.send(PER_EARLY_SENDER, priority=early_priority)
    for sender in early_senders:
        sender.wait_sent(PER_EARLY_SENDER, timeout=30)
    late_sender.send(LATE_COUNT, priority=late_priority)
    late_sender.wait_sent(LATE_COUNT, timeout=30)
    # Each credit round trip takes RETURN_DELAY_MS: 900 messages need about four.
    early.wait_received(total_early, timeout=60)
    late.wait_received(LATE_COUNT, timeout=60)
    return early, late


def judge(clients, details, early, late, label_early, label_late):
    names = {early.name, late.name}
    ranks = mean_arrival_rank(clients.history, names)
    details.update({f"mean_rank_{label_late}": ranks[late.name], f"mean_rank_{label_early}": ranks[early.name],
                    f"first_rank_{label_late}": first_arrival(clients.history, names, late.name),
                    "early": early.count, "late": late.count})
    return ranks[early.name], ranks[late.name]


@pytest.mark.spec("MESH-PRIORITY-1", "ROUTING-PRIORITY-1")
def test_high_priority_overtakes_earlier_low_priority_between_routers(slow_return, clients, details):
    low, high = early_then_late(slow_return, clients, clients.unique("mprio.low.a"),
                                clients.unique("mprio.high.a"), None, None)
    rank_low, rank_high = judge(clients, details, low, high, "low", "high")
    assert rank_high < rank_low, (
        f"priority 9 messages sent after {low.count} priority 2 ones should cross the inter-router connection "
        f"earlier on average: mean arrival rank {rank_high} (priority 9) against {rank_low} (priority 2)")


@pytest.mark.spec("MESH-PRIORITY-1", "ROUTING-PRIORITY-2")
def test_address_priority_overrides_message_priority_between_routers(slow_return, clients, details):
    # Both batches claim priority 9 in their header. mprio.low has address priority 2 on both routers, which
    # must count instead; the unconfigured address keeps its messages' own 9. Were the header to win, both
    # batches would have one priority and the connection would keep their order (on qdrouterd they would
    # share one inter-router link), so the later batch would come last: equal header priorities make
    # this case fail where the address priority is ignored, on a router with a link per priority too.
    low, plain = early_then_late(slow_return, clients, clients.unique("mprio.low.b"),
                                 clients.unique("mprio.plain.b"), 9, 9)
    rank_low, rank_plain = judge(clients, details, low, plain, "address2_header9", "header9")
    assert rank_plain < rank_low, (
        f"address priority 2 must override header priority 9 across routers: mean arrival rank {rank_plain} "
        f"(header 9, no address priority) against {rank_low} (address 2, header 9)")
    assert {m.priority for m in low.messages()} == {9}, "the routers must not rewrite the message header"
