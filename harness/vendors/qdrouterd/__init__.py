"""Qpid Dispatch Router (qdrouterd; AMQ Interconnect): the router the routing documents describe.

native.py runs a `qdrouterd` built here (build.py: 1.19 and the previous release from the workplace's source
archives, and a libwebsockets build for `http: yes` listeners); container.py its image; render.py writes the
qdrouterd.conf that it and the reference router read.
"""

from ...peers.capabilities import ROUTER_COORDINATOR_ROUTE, ROUTER_MESSAGE_ROUTING, ROUTER_NETWORKS, ROUTER_SECURITY
from ...peers.declaration import Role, Vendor

# qdrouterd 1.19 here has no Cyrus SASL (see ROUTER_SECURITY): it cannot check PLAIN.
SECURITY = ROUTER_SECURITY - {"sasl.plain"}
ROUTER = ROUTER_MESSAGE_ROUTING | ROUTER_NETWORKS | ROUTER_COORDINATOR_ROUTE | SECURITY

VENDOR = Vendor(
    name="qdrouterd", title="Qpid Dispatch Router (qdrouterd)", order=10,
    roles=(Role("router", ROUTER, ("native:NativeQdrouterd", "container:QdrouterdContainer"),
                versions="build:VERSIONS"),),
)
