"""The provider seam: one small class per (vendor, way of running it).

A provider answers two questions, as testcontainers-python's one-class-per-product modules do:

* `probe()`: can it run here? None when it can, else the one-line reason (shown as the `skipped` reason of
  every case that needed it, and by `interop run --list`). Fast: it looks, it never starts anything.
* `create(setup)`: a not-yet-started `Peer` for one node of a topology, its config rendered from the topology.

The registry (harness/peers/registry.py) is the only place that names vendors and lists their providers, in
the order a plain `--peer ROLE=VENDOR` tries them. Optional process faults (pause, restart, slow disk) are
methods of the `Peer` a provider returns; one it cannot do raises NotImplementedError / PeerUnavailable
with its reason, which a fault case reports as `skipped`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # launch imports this module; the types are for readers only
    from ..topology import Node, Topology
    from .base import Peer
    from .launch import Wiring


@dataclass
class NodeSetup:
    """What a provider gets to create one node's peer: the topology, the node, its vendor's capabilities and
    how it is wired to the other nodes (ports it listens on and dials, the run's PKI and files folder)."""

    topology: Topology
    node_name: str
    capabilities: frozenset[str]
    wiring: Wiring
    version: str | None = None  # the chosen version (`artemis@2.39.0`); None: the provider's pinned default

    @property
    def node(self) -> Node:
        return self.topology.nodes[self.node_name]

    @property
    def listen_ports(self) -> dict[str, int]:
        """listener name -> port another node was told to dial (0: the peer's own choice)."""
        return self.wiring.listen_ports.get(self.node_name) or {"clients": 0}

    @property
    def connect_ports(self) -> dict[str, int] | None:
        """dialled node -> port this node dials (through the fault proxy where the link goes `via: proxy`)."""
        return self.wiring.connect_ports.get(self.node_name)

    @property
    def pki(self) -> dict:
        """`pki=` for a renderer or peer, given only when the topology has a PKI, so renderers of topologies
        without security fields are called exactly as before."""
        return {"pki": self.wiring.pki} if self.wiring.pki is not None else {}

    def broker_settings(self) -> dict:
        """The topology's broker settings for the renderers: what it leaves out, the vendor's default (None for
        the dead-letter and expiry addresses: none unless the topology names one)."""
        settings = {"dead_letter_address": None, "expiry_address": None}
        node_settings = getattr(self.node, "settings", None)
        if node_settings is not None:
            settings.update(node_settings.as_dict())
        return settings


class RenderError(ValueError):
    """A node its vendor's configuration cannot express; str() is one line naming the node and the field."""


class Provider(abc.ABC):
    """One way of running one vendor: subclasses set the three names and implement create()."""

    vendor: ClassVar[str]  # "artemis"
    name: ClassVar[str]  # "native", "container", "subprocess"
    role: ClassVar[str]  # "router" or "broker"
    versioned: ClassVar[bool] = False  # whether it runs the version a choice names (create() reads setup.version)

    @classmethod  # noqa: B027 - an optional hook: a provider that always runs need not override it
    def require(cls, version: str | None = None) -> None:
        """Raise PeerUnavailable (one line) when this provider cannot run its vendor (in `version`, when given)
        here; the usual override."""

    @classmethod
    def probe(cls, version: str | None = None) -> str | None:
        """None when this provider can run its vendor (in `version`: None is the pinned default) on this machine,
        else one line saying why not."""
        from .base import PeerUnavailable

        if version is not None and not cls.versioned:
            return f"{cls.label()} runs its one version only, not a chosen one ({version})"
        try:
            cls.require(version)
        except PeerUnavailable as exc:
            return str(exc)
        return None

    @classmethod
    @abc.abstractmethod
    def create(cls, setup: NodeSetup) -> Peer:
        """A not-yet-started peer for `setup.node_name`; PeerUnavailable (one line) when it cannot run it."""

    @classmethod
    def label(cls) -> str:
        return f"{cls.vendor}@{cls.name}"
