"""qdrouterd in a container: the `quay.io/interconnectedcloud/qdrouterd` image (INTEROP_IMAGE_QDROUTERD), its
qdrouterd.conf in QDROUTERD_CONF."""

from __future__ import annotations

import re

from ...peers.base import PeerUnavailable
from ...peers.containers import ContainerProvider, ContainerSpec, image_for, listener_ports
from ...topology import Topology
from .render import render_router

IMAGE = "quay.io/interconnectedcloud/qdrouterd:latest"


def spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    if topology.links_from(node_name):
        raise PeerUnavailable(f"{node_name}: a qdrouterd container that dials other nodes needs a shared "
                              "container network, which this provider does not set up yet")
    ports = listener_ports(topology, node_name)
    conf = render_router(topology, node_name, listen_ports=ports, listen_host="0.0.0.0")
    return ContainerSpec("qdrouterd", "router", image_for("INTEROP_IMAGE_QDROUTERD", IMAGE), ports,
                         env={"QDROUTERD_CONF": conf},
                         ready=re.compile(r"Listening on|Router started|Router Engine Instantiated"))


class QdrouterdContainer(ContainerProvider):
    vendor, role = "qdrouterd", "router"
    spec = staticmethod(spec)
