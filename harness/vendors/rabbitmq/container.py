"""RabbitMQ in a container: the `rabbitmq:3.10` image (INTEROP_IMAGE_RABBITMQ), with rabbitmq.conf, enabled_plugins
(the AMQP 1.0 plugin) and the definitions mounted in /etc/rabbitmq; queue depths from `rabbitmqctl list_queues`."""

from __future__ import annotations

import re

from ...peers.base import PeerUnavailable
from ...peers.containers import AMQP_PORT, ContainerProvider, ContainerSpec, image_for, node_settings
from ...topology import Topology
from ..artemis.render import broker_settings
from .native import _json_rows, _logical, _stats
from .render import render_rabbitmq, wire_address

IMAGE = "rabbitmq:3.10"


def queue_stats_from(output: str, name: str) -> dict:
    """queue_stats of `name` from `rabbitmqctl list_queues --formatter json` output."""
    rows = {row["name"]: row for row in _json_rows(output)}
    logical = _logical(name)
    return _stats([rows[logical]], True) if logical in rows else _stats([], False)


def spec(topology: Topology, node_name: str, settings: dict | None = None) -> ContainerSpec:
    if len(topology.listeners_for(node_name)) > 1:
        raise PeerUnavailable(f"{node_name}: the RabbitMQ renderer writes one AMQP listener; "
                              "extra listeners are not supported")
    merged = node_settings(topology, node_name, settings)
    files = render_rabbitmq(topology, node_name, AMQP_PORT, merged, listen_host="0.0.0.0",
                            definitions_path="/etc/rabbitmq/definitions.json")
    node = topology.node(node_name)
    s = broker_settings(merged, node_name)
    return ContainerSpec(
        "rabbitmq", "broker", image_for("INTEROP_IMAGE_RABBITMQ", IMAGE), {"clients": AMQP_PORT},
        files={"/etc/rabbitmq/rabbitmq.conf": files.conf, "/etc/rabbitmq/enabled_plugins": files.enabled_plugins,
               "/etc/rabbitmq/definitions.json": files.definitions_json},
        ready=re.compile(r"Server startup complete"),
        wire=lambda name: wire_address(node, name, s),
        stats_command=["rabbitmqctl", "list_queues", "-q", "--formatter", "json", "name", "messages",
                       "messages_ready", "messages_unacknowledged", "consumers"],
        stats_from=queue_stats_from)


class RabbitMQContainer(ContainerProvider):
    vendor, role = "rabbitmq", "broker"
    spec = staticmethod(spec)
