"""What an interior router knows about the router network: link state, paths, and who has which address.

Interior routers connected by inter-router connections compute lowest-cost paths over the whole network
(001_987f9e02a7866228.txt "Edge vs interior routers"; connector `cost`), and tell each other which mobile
addresses have consumers attached to them (003_9cdc7c48796dae4f.txt §12.1.1.2: addresses are mobile).

Every router floods two kinds of record, each stamped with a sequence number so newer ones win:
* a link-state record: its neighbours and the cost to each;
* an address record: the addresses that have consumers attached to it (and link-route prefixes it can
  reach a broker for).
From these each router runs Dijkstra from itself. An edge counts only when both ends list it, so a router
that died (its neighbours dropped it) disappears from everyone's paths even though its own record lingers.
Ties between equal-cost paths break on the lower router id, so all routers agree on the same paths; that
agreement is what lets multicast reach every consumer exactly once across redundant paths.

Pure logic, no I/O: the router feeds it records and reads answers.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Route:
    next_hop: str
    cost: int


@dataclass
class NetworkState:
    my_id: str
    link_state: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)  # id -> (seq, neighbours)
    addresses: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)  # id -> (seq, addresses)
    link_routes: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)  # id -> (seq, patterns)
    _routes: dict[str, Route] | None = None

    # ---- records ---------------------------------------------------------------------------------------

    def update_link_state(self, origin: str, seq: int, neighbours: dict[str, int]) -> bool:
        if not _newer(self.link_state.get(origin), seq):
            return False
        self.link_state[origin] = (seq, dict(neighbours))
        self._routes = None
        return True

    def update_addresses(self, origin: str, seq: int, addresses) -> bool:
        if not _newer(self.addresses.get(origin), seq):
            return False
        self.addresses[origin] = (seq, frozenset(addresses))
        return True

    def update_link_routes(self, origin: str, seq: int, patterns) -> bool:
        if not _newer(self.link_routes.get(origin), seq):
            return False
        self.link_routes[origin] = (seq, frozenset(patterns))
        return True

    def records(self) -> list[dict]:
        """Everything known, as messages to bring a new neighbour up to date."""
        out = [{"op": "LSU", "origin": o, "seq": s, "neighbours": n} for o, (s, n) in self.link_state.items()]
        out += [{"op": "MAU", "origin": o, "seq": s, "addresses": sorted(a)} for o, (s, a) in self.addresses.items()]
        out += [{"op": "LRU", "origin": o, "seq": s, "patterns": sorted(p)} for o, (s, p) in self.link_routes.items()]
        return out

    # ---- answers -----------------------------------------------------------------------------------------

    def routes(self) -> dict[str, Route]:
        """Lowest-cost route (next hop, total cost) to every reachable router other than this one."""
        if self._routes is None:
            self._routes = self._dijkstra()
        return self._routes

    def routers_with(self, address: str) -> set[str]:
        """Reachable routers (not this one) that have a consumer for `address`."""
        reachable = self.routes()
        return {o for o, (_, addrs) in self.addresses.items() if o in reachable and address in addrs}

    def reachable_addresses(self) -> set[str]:
        reachable = self.routes()
        return {a for o, (_, addrs) in self.addresses.items() if o in reachable for a in addrs}

    def routers_with_link_route(self, pattern: str) -> set[str]:
        reachable = self.routes()
        return {o for o, (_, pats) in self.link_routes.items() if o in reachable and pattern in pats}

    def _edge_cost(self, a: str, b: str) -> int | None:
        """An edge exists only when both ends report it; its cost is the larger of the two claims."""
        a_side = self.link_state.get(a, (0, {}))[1].get(b)
        b_side = self.link_state.get(b, (0, {}))[1].get(a)
        if a_side is None or b_side is None:
            return None
        return max(a_side, b_side)

    def _dijkstra(self) -> dict[str, Route]:
        best: dict[str, tuple[int, str]] = {}
        heap = [(0, "", self.my_id)]  # (cost, first hop, router); first hop "" for ourselves
        done = set()
        while heap:
            cost, first, node = heapq.heappop(heap)
            if node in done:
                continue
            done.add(node)
            if node != self.my_id:
                best[node] = (cost, first)
            for neighbour in sorted(self.link_state.get(node, (0, {}))[1]):
                edge = self._edge_cost(node, neighbour)
                if edge is None or neighbour in done:
                    continue
                heapq.heappush(heap, (cost + edge, first or neighbour, neighbour))
        return {node: Route(first, cost) for node, (cost, first) in best.items()}


def _newer(current: tuple | None, seq: int) -> bool:
    return current is None or seq > current[0]
