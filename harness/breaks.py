"""Deliberately broken settings ("breaks"): a peer started with a faulty configuration, so that the suites can be
seen to detect a regression (a demo for the report, and a test of the suites themselves).

A break is `[ROLE[=VENDOR]:]FAULT`, e.g. `router:no-priority` or `broker=reference:no-journal-sync`. It changes the
topology a node is started from, nothing else: `harness.peers.launch.start_topology(..., breaks=)` applies the
breaks that match each node's role and vendor, and the running topology says which it applied
(`RunningTopology.breaks`), so the pytest plugin and `interop fuzz` record the same thing the same way (the
record's `config_fault`). Nothing is patched at run time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass


class BreakError(ValueError):
    """A break that cannot be taken; str() is one line naming it and what was expected."""


def _no_priority(node):
    return [dataclasses.replace(a, priority=None) for a in node.addresses]


def _multicast_as_balanced(node):
    return [dataclasses.replace(a, distribution="balanced") if a.distribution == "multicast" else a
            for a in node.addresses]


def _balanced_as_closest(node):
    return [dataclasses.replace(a, distribution="closest") if a.distribution == "balanced" else a
            for a in node.addresses]


def _no_journal_sync(node):
    from .topology import BrokerSettings

    @dataclass(frozen=True)
    class UnsyncedSettings(BrokerSettings):  # the topology's settings plus the one the renderers read
        journal_sync_non_transactional: bool = False

    return UnsyncedSettings(**node.settings.__dict__)


@dataclass(frozen=True)
class ConfigFault:
    name: str
    role: str
    description: str
    addresses: Callable | None = None  # node -> the node's new address list
    settings: Callable | None = None  # node -> the node's new broker settings (harness.topology.BrokerSettings)

    def apply(self, node):
        if self.addresses is not None:
            node = dataclasses.replace(node, addresses=self.addresses(node))
        if self.settings is not None:
            node = dataclasses.replace(node, settings=self.settings(node))
        return node


CONFIG_FAULTS: dict[str, ConfigFault] = {f.name: f for f in (
    ConfigFault("no-priority", "router", "address priorities are left out of the router's configuration",
                _no_priority),
    ConfigFault("multicast-as-balanced", "router", "multicast addresses are configured as balanced (anycast)",
                _multicast_as_balanced),
    ConfigFault("balanced-as-closest", "router", "balanced addresses are configured as closest",
                _balanced_as_closest),
    # Artemis's own switch: a non-transactional durable send is acknowledged without waiting for the journal.
    ConfigFault("no-journal-sync", "broker", "broker.xml says <journal-sync-non-transactional>false: durable "
                "messages are accepted before their journal record is written (Artemis and the reference broker)",
                settings=_no_journal_sync),
)}


@dataclass(frozen=True)
class Break:
    """`router:no-priority` or `router=reference:no-priority`: which peers start with which faulty setting."""

    role: str
    vendor: str | None
    fault: str

    def __str__(self) -> str:
        return f"{self.role}{'=' + self.vendor if self.vendor else ''}:{self.fault}"

    def applies_to(self, role: str, vendor: str) -> bool:
        """Whether it breaks a node of `role` run as choice `vendor`; `artemis` names every version of Artemis."""
        from .peers.vendors import parse_choice

        return role == self.role and self.vendor in (None, vendor, parse_choice(vendor).vendor)


def parse_break(text: str, where: str = "--break", faults: dict | None = None, of: str = "") -> Break:
    """`[ROLE[=VENDOR]:]FAULT`; the role defaults to the fault's own. `faults`: another table of faults that each
    name their `role` (interop fuzz --configs has its own: harness/fuzz/config_breaks.py), `of` what it is for."""
    faults = CONFIG_FAULTS if faults is None else faults
    value = str(text).strip()
    target, sep, fault = value.rpartition(":")
    known = ", ".join(faults)
    spec = faults.get(fault)
    if spec is None:
        raise BreakError(f"{where} {value}: unknown fault {fault!r}{of} (expected one of: {known})")
    role, _, vendor_name = target.partition("=")
    role, vendor_name = role.strip() or spec.role, vendor_name.strip() or None
    if sep and not target.strip():
        raise BreakError(f"{where} {value}: expected [ROLE[=VENDOR]:]FAULT, e.g. router:{fault}")
    if role != spec.role:
        raise BreakError(f"{where} {value}: fault {fault} breaks a {spec.role}, not a {role}")
    return Break(role, vendor_name, fault)


def break_topology(topology, node_name: str, faults: Iterable[str]):
    """A copy of `topology` whose node `node_name` carries the faulty settings (the original is untouched)."""
    node = topology.nodes[node_name]
    for name in faults:
        node = CONFIG_FAULTS[name].apply(node)
    return dataclasses.replace(topology, nodes={**topology.nodes, node_name: node})


def node_vendor(topology, node_name: str, choices: dict[str, str], node_vendors: dict[str, str] | None = None) -> str:
    """The vendor choice a node runs as (a version in it too: `artemis@2.39.0`): its own in `node_vendors` (a case
    pairing vendors), else the one its topology file gives it (`vendor:`), else its role's."""
    node = topology.nodes[node_name]
    return ((node_vendors or {}).get(node_name) or getattr(node, "vendor", None)
            or choices.get(node.role, "reference"))


def breaks_by_node(topology, choices: dict[str, str], breaks: Iterable[Break],
                   node_vendors: dict[str, str] | None = None) -> dict[str, list[str]]:
    """node -> the faults that `breaks` put on it, given the vendor each node runs as (node_vendor)."""
    found: dict[str, list[str]] = {}
    breaks = list(breaks)
    for name, node in topology.nodes.items():
        chosen = node_vendor(topology, name, choices, node_vendors)
        faults = [b.fault for b in breaks if b.applies_to(node.role, chosen)]
        if faults:
            found[name] = faults
    return found


def describe(by_node: dict[str, list[str]]) -> str | None:
    """`R1:no-priority B1:no-journal-sync`, the record's `config_fault`; None when nothing was broken."""
    return " ".join(f"{node}:{fault}" for node, faults in by_node.items() for fault in faults) or None
