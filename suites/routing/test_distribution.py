"""Routing patterns: anycast (balanced, closest) and multicast (003 §12.1.1.3, §12.1.2)."""

import pytest

from harness import checkers


def _each_once_across(clients, sender, receivers):
    """Every message the sender sent reached exactly one of the receivers (competing consumers: no order
    asked across them)."""
    names = [r.name for r in receivers]
    return checkers.compose(clients.history, **checkers.every_message_once(sender.name, names, in_order=False))


@pytest.mark.spec("ROUTING-ANYCAST-1", "ROUTING-BALANCED-2", "ROUTING-ADDR-1")
@pytest.mark.requires("distribution.balanced")
def test_unconfigured_address_is_anycast_each_message_to_exactly_one_consumer(connect, clients, details):
    address = clients.unique("adhoc.anycast.")  # no address section matches: the default applies
    receivers = [connect().receiver(address) for _ in range(3)]
    sender = connect().sender(address)
    sender.send(60)
    sender.wait_outcomes(60)
    details.update(received=[r.count for r in receivers])
    verdict = _each_once_across(clients, sender, receivers).fill(details)
    assert verdict.ok, f"every message exactly once across the consumers:\n{verdict.failures()}"
    assert all(r.count > 0 for r in receivers), "a balanced address spreads over all its consumers"


@pytest.mark.spec("ROUTING-BALANCED-1")
@pytest.mark.requires("distribution.balanced")
def test_balanced_favours_the_consumer_that_settles(connect, clients, details):
    """A consumer that never settles gets at most window+1 messages: it always has more unsettled."""
    address = clients.unique("balanced.uneven.")
    fast = connect().receiver(address, outcome="accept")
    stuck = connect().receiver(address, outcome="hold", credit=200)
    window = 4  # the producer keeps at most this many deliveries unsettled
    sender = connect().sender(address, window=window)
    total = 100
    sender.send(total)
    wait_until = total - (window + 1)
    fast.wait_received(wait_until, timeout=30)
    sender.conn.sync()
    details.update(fast=fast.count, stuck=stuck.count, window=window)
    assert stuck.count <= window + 1, (
        f"the non-settling consumer got {stuck.count} messages; balanced must route by unsettled count")
    assert fast.count + stuck.count == sender.sent
    stuck.settle("accept")
    sender.wait_outcomes(total, timeout=30)
    verdict = _each_once_across(clients, sender, [fast, stuck]).fill(details)
    assert verdict.ok, f"every message exactly once across the two consumers:\n{verdict.failures()}"


@pytest.mark.spec("ROUTING-CLOSEST-1", "ROUTING-ANYCAST-1")
@pytest.mark.requires("distribution.closest")
def test_closest_spreads_evenly_over_consumers_at_the_same_cost(connect, clients, details):
    address = clients.unique("closest.even.")
    receivers = [connect().receiver(address) for _ in range(2)]
    sender = connect().sender(address)
    total = 40
    sender.send(total)
    sender.wait_outcomes(total)
    counts = [r.count for r in receivers]
    details.update(received=counts)
    verdict = _each_once_across(clients, sender, receivers).fill(details)
    assert verdict.ok, f"every message exactly once across the consumers:\n{verdict.failures()}"
    assert max(counts) - min(counts) <= total // 5, f"local consumers share the lowest cost: {counts}"


@pytest.mark.spec("ROUTING-MULTICAST-1")
@pytest.mark.requires("distribution.multicast")
@pytest.mark.parametrize("consumers", [1, 3, 5])
def test_multicast_gives_each_consumer_one_copy(connect, clients, details, consumers):
    address = clients.unique("multicast.fanout.")
    receivers = [connect().receiver(address) for _ in range(consumers)]
    sender = connect().sender(address)
    total = 20
    sender.send(total)
    for r in receivers:
        r.wait_received(total)
    sender.wait_outcomes(total)
    sender.conn.sync()
    details.update(sent=total, received=[r.count for r in receivers])
    checks = {}
    for i, r in enumerate(receivers):  # each consumer is asked for every message on its own
        checks.update(checkers.every_message_once(sender.name, r.name, suffix=f"_{i}"))
    verdict = checkers.compose(clients.history, **checks).fill(details, "duplicated")
    assert verdict.ok, f"one copy of each message at each consumer, none duplicated, in order:\n{verdict.failures()}"
