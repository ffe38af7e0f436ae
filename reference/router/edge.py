"""What an edge router knows of the network: only its uplink (001_987f9e02a7866228.txt, "Edge vs interior
routers": edge routers take no part in route computation).

An edge router connects to one interior router. It tells the interior which addresses have consumers on
the edge (the interior then serves them as its own, so the whole network can reach them), and the
interior tells it which addresses are reachable beyond the edge. The edge delivers to its own consumers
directly and sends everything else up. This object answers the same questions as `NetworkState` so the
router's routing code is the same on interior and edge routers: the only "router" an edge can reach is
its uplink, at cost 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .network import Route


@dataclass
class EdgeState:
    my_id: str
    uplink_id: str | None = None
    reach: frozenset[str] = frozenset()  # addresses with consumers beyond this edge, per the interior
    link_routes: dict = field(default_factory=dict)  # edges hold no link-route records

    def routes(self) -> dict[str, Route]:
        return {self.uplink_id: Route(self.uplink_id, 1)} if self.uplink_id else {}

    def routers_with(self, address: str) -> set[str]:
        return {self.uplink_id} if self.uplink_id and address in self.reach else set()

    def reachable_addresses(self) -> set[str]:
        return set(self.reach) if self.uplink_id else set()

    def routers_with_link_route(self, _pattern: str) -> set[str]:
        return set()

    def records(self) -> list[dict]:
        return []
