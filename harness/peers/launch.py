"""Start every node of a topology with the vendor chosen for its role, in parallel, and stop them all.

This is the one place that turns (topology, `--peer` choices) into running peers; suites get the result
through the pytest plugin's fixtures.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field

from ..render.qdrouterd import render_router
from ..topology import Topology
from .base import Peer, PeerUnavailable
from .process import NativeQdrouterdPeer, ReferenceRouterPeer
from .vendors import vendor


def make_peer(topology: Topology, node_name: str, vendor_name: str) -> Peer:
    """A not-yet-started peer for one node; raises PeerUnavailable if it cannot run here."""
    node = topology.nodes[node_name]
    spec = vendor(vendor_name, node.role)
    if node.role == "router":
        if vendor_name == "reference":
            text = render_router(topology, node_name, listen_ports={"clients": 0})
            return ReferenceRouterPeer(node_name, text, spec.capabilities)
        if vendor_name == "qdrouterd":
            return NativeQdrouterdPeer(
                node_name, lambda ports: render_router(topology, node_name, listen_ports=ports), spec.capabilities)
    raise PeerUnavailable(f"no provider for a {node.role} of vendor {vendor_name} yet")


@dataclass
class RunningTopology:
    topology: Topology
    peers: dict[str, Peer] = field(default_factory=dict)

    def __getitem__(self, node: str) -> Peer:
        return self.peers[node]

    def client_url(self, client: str) -> str:
        """URL a named client (`producer`, `consumer`, ...) of the topology attaches to."""
        node = self.topology.clients.get(client)
        if node is None:
            raise KeyError(f"topology {self.topology.name} has no client named {client!r}")
        return self.peers[node].url

    @property
    def capabilities(self) -> frozenset[str]:
        caps: set[str] = set()
        for peer in self.peers.values():
            caps |= peer.capabilities
        return frozenset(caps)

    def peer_records(self) -> dict:
        """role -> {vendor, version, provider}, for result records (first node of each role)."""
        records: dict = {}
        for peer in self.peers.values():
            records.setdefault(peer.role, peer.info.as_record())
        return records

    def stop(self) -> None:
        for peer in self.peers.values():
            try:
                peer.stop()
            except Exception:  # stopping must reach every peer even if one misbehaves
                peer.kill()


def start_topology(topology: Topology, choices: dict[str, str], timeout: float = 60.0) -> RunningTopology:
    """Start all nodes concurrently; on any failure stop those already started and re-raise."""
    running = RunningTopology(topology)
    for name, node in topology.nodes.items():
        running.peers[name] = make_peer(topology, name, choices.get(node.role, "reference"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(running.peers))) as pool:
        futures = {pool.submit(peer.start, timeout): name for name, peer in running.peers.items()}
        errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        running.stop()
        raise errors[0]
    return running
