"""The delivery counters the router's management agent shows (router.link, router.address and router entities;
reference/router/management.py), counted where the router routes, as qdrouterd counts them.

Per link: deliveries and their outcomes (a producer's as the router settles them, a consumer's as it settles
them). Per address and for the router: ingress, egress, transit, to and from route containers (brokers), and
what was diverted to a fallback destination (003_9cdc7c48796dae4f.txt §12.1.4.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED
from .state import CACHE_LIMIT as _CACHE_LIMIT
from .state import Producer

if TYPE_CHECKING:
    from .router import Router

_ZERO_ADDRESS = {"ingress": 0, "egress": 0, "transit": 0, "to_container": 0, "from_container": 0, "fallback": 0}
_ZERO_TOTALS = {**_ZERO_ADDRESS, "presettled": 0, ACCEPTED: 0, REJECTED: 0, RELEASED: 0, MODIFIED: 0,
                "ingress_route_container": 0, "egress_route_container": 0}


class DeliveryCounters:
    """The router's delivery counters, and which parked deliveries were counted already."""

    def __init__(self, router: Router):
        self.router = router  # its `now`: the end of the last batch of I/O, when a connection last had a delivery
        self.consumers = router.consumers  # the addresses in use (the per-address counters are pruned to them)
        self.producers = router.producers
        self.totals = dict(_ZERO_TOTALS)  # the router entity's
        self.address_stats: dict[str, dict] = {}  # routing key -> the router.address entity's
        self._counted_parked: set = set()  # parked deliveries counted already (parked for want of a route)

    def _address_stats(self, key: str) -> dict:
        stats = self.address_stats.get(key)
        if stats is None:
            if len(self.address_stats) >= _CACHE_LIMIT:  # addresses come and go: keep those still in use
                live = set(self.consumers) | set(self.producers)
                self.address_stats = {k: v for k, v in self.address_stats.items() if k in live}
            stats = self.address_stats[key] = dict(_ZERO_ADDRESS)
        return stats

    def _count_in(self, producer: Producer, key: str, presettled: bool, again: bool) -> dict:
        """A message arrived on `producer` for routing key `key` (`again`: a parked one, counted already)."""
        stats = self._address_stats(key)
        if again:
            return stats
        counts = producer.counts
        counts["delivered"] += 1
        if producer.conn_state is not None:
            producer.conn_state.last_delivery = self.router.now
        totals = self.totals
        if presettled:
            counts["presettled"] += 1
        if not producer.from_neighbour:
            stats["ingress"] += 1
            totals["ingress"] += 1
            if presettled:
                totals["presettled"] += 1
            if producer.container:
                stats["from_container"] += 1
                totals["ingress_route_container"] += 1
        return stats

    def _count_out(self, key: str, local) -> None:
        stats = self._address_stats(key)
        totals = self.totals
        for consumer in local:
            if consumer.container:
                stats["to_container"] += 1
                totals["egress_route_container"] += 1
            else:
                stats["egress"] += 1
            totals["egress"] += 1

    def _count_outcome(self, producer: Producer, outcome: str) -> None:
        """The router settled a producer's delivery with `outcome` (qdrouterd counts outcomes on incoming links)."""
        producer.counts[outcome] += 1
        self.totals[outcome] += 1
