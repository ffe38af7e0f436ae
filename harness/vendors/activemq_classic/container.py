"""ActiveMQ Classic in a container: the `apache/activemq-classic` image (INTEROP_IMAGE_ACTIVEMQ_CLASSIC), with the
image's own config (AMQP on 5672)."""

from __future__ import annotations

import re

from ...peers.base import PeerUnavailable
from ...peers.containers import AMQP_PORT, ContainerProvider, ContainerSpec, image_for
from ...topology import Topology

IMAGE = "apache/activemq-classic:latest"


def spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    node = topology.node(node_name)
    if len(topology.listeners_for(node_name)) > 1:
        raise PeerUnavailable(f"{node_name}: the activemq-classic image has one AMQP transport; "
                              "extra listeners are not supported")
    topics = {q.address for q in node.queues if q.routing == "multicast"}

    def wire(name: str) -> str:
        # Classic's AMQP transport: a bare name is a queue, `topic://NAME` a topic.
        if "://" in name:
            return name
        return f"topic://{name}" if name in topics else name
    return ContainerSpec("activemq-classic", "broker", image_for("INTEROP_IMAGE_ACTIVEMQ_CLASSIC", IMAGE),
                         {"clients": AMQP_PORT}, ready=re.compile(r"Apache ActiveMQ \S+ .*started"), wire=wire)


class ActiveMQClassicContainer(ContainerProvider):
    vendor, role = "activemq-classic", "broker"
    spec = staticmethod(spec)
