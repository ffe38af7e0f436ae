"""The vendors the matrix knows, the role each plays, and the capabilities each declares.

One vocabulary for all vendors (DESIGN.md, "Capabilities"). A suite case lists what it needs with
`@pytest.mark.requires(...)`; a vendor without it reports the case `not-applicable`, never `passed`.
Capabilities a product has but that this harness does not drive yet are left out until a suite uses them.
"""

from __future__ import annotations

from .base import VendorSpec

ROUTER_MESSAGE_ROUTING = frozenset({
    "distribution.balanced", "distribution.closest", "distribution.multicast",
    "credit-gating", "multicast-outcome", "priority", "anonymous-relay", "dynamic-address",
})

VENDORS: dict[str, VendorSpec] = {
    "reference": VendorSpec("reference", "router", ROUTER_MESSAGE_ROUTING),
    # Qpid Dispatch Router / AMQ Interconnect: the product the routing documents describe.
    "qdrouterd": VendorSpec("qdrouterd", "router", ROUTER_MESSAGE_ROUTING),
}

DEFAULT_PEERS = {"router": "reference"}


def vendor(name: str, role: str) -> VendorSpec:
    spec = VENDORS.get(name)
    if spec is None:
        known = ", ".join(sorted(n for n, v in VENDORS.items() if v.role == role))
        raise ValueError(f"--peer {role}={name}: unknown vendor (expected one of: {known})")
    if spec.role != role:
        raise ValueError(f"--peer {role}={name}: {name} plays the {spec.role} role, not {role}")
    return spec
