"""The delivery counters the reference router's management agent shows (reference/router/counters.py), counted as
qdrouterd counts them: per link, per address and for the router. suites/management reads them over the wire."""

from __future__ import annotations

from types import SimpleNamespace

from reference.router import counters as counters_module
from reference.router.counters import DeliveryCounters
from reference.router.settlement import ACCEPTED, REJECTED
from reference.router.state import _ZERO_COUNTS, ConnectionState


def make_counters(consumers=None, producers=None) -> DeliveryCounters:
    return DeliveryCounters(SimpleNamespace(consumers=consumers or {}, producers=producers or {}, now=123.0))


def producer(from_neighbour=False, container=False):
    return SimpleNamespace(counts=dict(_ZERO_COUNTS), conn_state=ConnectionState(), from_neighbour=from_neighbour,
                           container=container)


def test_a_clients_message_counts_ingress_on_its_address_its_link_and_the_router():
    counters = make_counters()
    client = producer()
    stats = counters._count_in(client, "orders", presettled=True, again=False)
    assert stats is counters.address_stats["orders"] and stats["ingress"] == 1
    assert client.counts["delivered"] == 1 and client.counts["presettled"] == 1
    assert counters.totals["ingress"] == 1 and counters.totals["presettled"] == 1
    assert client.conn_state.last_delivery == 123.0, "management's lastDlvSeconds: the end of the batch"


def test_a_neighbours_message_is_no_ingress_and_a_brokers_counts_from_the_container():
    counters = make_counters()
    neighbour = producer(from_neighbour=True)
    counters._count_in(neighbour, "orders", presettled=False, again=False)
    assert neighbour.counts["delivered"] == 1
    assert counters.address_stats["orders"]["ingress"] == 0 and counters.totals["ingress"] == 0
    broker = producer(container=True)
    counters._count_in(broker, "orders", presettled=False, again=False)
    assert counters.address_stats["orders"]["from_container"] == 1
    assert counters.totals["ingress"] == 1 and counters.totals["ingress_route_container"] == 1


def test_a_parked_message_routed_again_is_not_counted_twice():
    counters = make_counters()
    client = producer()
    counters._count_in(client, "orders", presettled=False, again=False)
    counters._count_in(client, "orders", presettled=False, again=True)
    assert client.counts["delivered"] == 1 and counters.address_stats["orders"]["ingress"] == 1


def test_copies_to_brokers_count_to_the_container_and_others_as_egress():
    counters = make_counters()
    counters._count_out("orders", [SimpleNamespace(container=True), SimpleNamespace(container=False)])
    stats = counters.address_stats["orders"]
    assert stats["to_container"] == 1 and stats["egress"] == 1
    assert counters.totals["egress"] == 2 and counters.totals["egress_route_container"] == 1


def test_outcomes_are_counted_on_the_producers_link_and_for_the_router():
    counters = make_counters()
    client = producer()
    counters._count_outcome(client, ACCEPTED)
    counters._count_outcome(client, REJECTED)
    assert client.counts[ACCEPTED] == 1 and client.counts[REJECTED] == 1
    assert counters.totals[ACCEPTED] == 1 and counters.totals[REJECTED] == 1


def test_per_address_counters_of_addresses_no_longer_in_use_are_dropped_at_the_cache_limit(monkeypatch):
    monkeypatch.setattr(counters_module, "_CACHE_LIMIT", 3)
    counters = make_counters(consumers={"live.c": []}, producers={"live.p": set()})
    for key in ("live.c", "gone", "live.p"):
        counters._address_stats(key)["egress"] += 1
    counters._address_stats("new")
    assert set(counters.address_stats) == {"live.c", "live.p", "new"}
    assert counters.address_stats["live.c"]["egress"] == 1, "the counters of addresses in use are kept"
