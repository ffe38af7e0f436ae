"""Helpers of the router network suites: the mixed-release pairing (UPGRADE-MIXED-1).

The anycast, closest, multicast and re-route cases, and the edge cases beside them, also run with one router of
the topology on the previous release of the session's router vendor (harness/peers/versions.py: qdrouterd 1.18.0
beside 1.19.0), the others on the session's own: routers of two releases exchanging router advertisements and
forwarding each other's deliveries, as in the middle of a rolling upgrade. Those are cases of their own
(`..._across_releases`) that run the same body, so that the ids, known differences and history of the cases of one
release stay as they were. Not-applicable, with the reason, where the session's router has no previous release
here (the reference) or is the previous release itself.
"""

from ..conftest import PREVIOUS, mixed_releases

# The router each topology puts on the previous release: the one its consumers sit on (far from the producer's), so
# that every delivery crosses from one release to the other. In router-triangle that is R3, which the re-route case
# reaches over the direct R1-R3 connection once R2 is lost; in edge-interior the interior between the two edges.
PREVIOUS_NODE = {"two-router-mesh": "R2", "router-triangle": "R3", "router-triangle-equal": "R3",
                 "edge-interior": "R1"}


def across_releases(topology, interop, name: str):
    """Topology `name` running with PREVIOUS_NODE[name] on the previous release of the session's router vendor
    (not-applicable where there is none)."""
    return topology(name, vendors=mixed_releases(interop, "router", {PREVIOUS_NODE[name]: PREVIOUS}))
