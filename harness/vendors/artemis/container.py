"""ActiveMQ Artemis in a container: the `apache/activemq-artemis` image (INTEROP_IMAGE_ARTEMIS), broker.xml mounted at
etc-override/, anonymous login on."""

from __future__ import annotations

import re

from ...peers.base import PeerUnavailable
from ...peers.containers import ContainerProvider, ContainerSpec, image_for, listener_ports, node_settings
from ...topology import Topology
from .render import render_broker_xml

IMAGE = "apache/activemq-artemis:latest"
ARTEMIS_INSTANCE = "/var/lib/artemis-instance"


def spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    if getattr(topology.node(node_name), "broker_connections", None):
        raise PeerUnavailable(f"{node_name}: an Artemis container with broker connections dials other nodes, which "
                              "needs a shared container network that this provider does not set up yet")
    ports = listener_ports(topology, node_name)
    xml = render_broker_xml(topology, node_name, ports, node_settings(topology, node_name, settings), host="0.0.0.0")
    return ContainerSpec(
        "artemis", "broker", image_for("INTEROP_IMAGE_ARTEMIS", IMAGE), ports,
        env={"ANONYMOUS_LOGIN": "true", "ARTEMIS_USER": "artemis", "ARTEMIS_PASSWORD": "artemis"},
        files={f"{ARTEMIS_INSTANCE}/etc-override/broker.xml": xml},
        ready=re.compile(r"AMQ221007"))  # "Server is now live" (older) / "Server is now active" (newer)


class ArtemisContainer(ContainerProvider):
    vendor, role = "artemis", "broker"
    spec = staticmethod(spec)
