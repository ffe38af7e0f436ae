"""Networks of brokers (004_05e35cdd7bc39ede.txt) as federation over broker connections.

A network connector of ActiveMQ Classic forwards messages from its broker to the brokers whose consumers want
them ("demand"), never back where they came from, and no further than `networkTTL` brokers; `duplex` does the
same the other way over the one connection. The topology renders it as Artemis's AMQP federation in broker.xml
(harness/render/artemis.py), and the reference implements these semantics:

* A broker *pulls*: while a local queue matching a policy has a consumer, it keeps a receiving link to the
  same queue on the other broker (and for an address policy, a subscription there on the same address), and
  routes what arrives into the local queue or address. When the consumers leave, the link is closed and
  messages stay where they are (store and forward). So messages go to where the consumers are.
* Who pulls by which policy: a `local-*-policy` makes the dialling broker pull from the dialled one; a
  `remote-*-policy` is sent to the dialled broker, which pulls from the dialling one by it over the same
  connection. A network connector from B1 to B2 is a remote policy on B1 (B2's consumers pull from B1);
  duplex adds the local twin.
* Demand: a consumer of a client counts. A broker pulling from us counts as demand for our own pulls from a
  third broker only when the policy lets federated messages travel on (`include-federated` for queues,
  `max-hops` above 1 for addresses): that is how a hub passes messages between spokes.
* Loops: each forwarded message carries, in delivery annotations, the brokers it crossed (`hops`) and the
  broker it comes from. A broker never sends a message back to the broker it came from, nor to a puller once
  it crossed that puller's `max-hops` (queue policies without `include-federated`: one hop).
* Except for a queue that has no consumer of its own left: its messages go back to the broker they came from
  when that broker pulls them (the consumer moved there). Without it a consumer that moves between brokers
  strands what was already forwarded for it; ActiveMQ Classic calls this `replayWhenNoConsumers` (off by
  default there: the reference takes the choice that loses nothing). Topics (copies) never go back.

Wire form: the data links are plain AMQP (a receiver on the queue's name with the `queue` capability, or on
the address with `topic`), with the link properties `x-opt-reference-fed-node` (the puller's node id) and
`x-opt-reference-fed-max-hops`. Messages on them carry delivery annotations `x-opt-reference-fed-hops` and
`x-opt-reference-fed-from`. The remote policies travel on a control link (target
`$reference.federation.control`, link property `x-opt-reference-federation`: JSON with the node id and the
policies), answered with the other node's id. This control protocol is the reference's own: Artemis's AMQP
federation has a control protocol of its own, which the reference does not speak, so a network mixes
reference brokers only with reference brokers.
"""

from __future__ import annotations

import json
import logging
import uuid

from proton import Endpoint, symbol

from ..links import link_property, put_symbols

from .config import ANYCAST, MULTICAST, FederationPolicy
from .wire import encode_long, encode_string, encode_symbol, split_delivery_annotations, with_delivery_annotations

log = logging.getLogger("FEDERATION")

CONTROL_ADDRESS = "$reference.federation.control"
POLICIES_PROPERTY = "x-opt-reference-federation"
NODE_PROPERTY = "x-opt-reference-fed-node"
MAX_HOPS_PROPERTY = "x-opt-reference-fed-max-hops"
HOPS = "x-opt-reference-fed-hops"
FROM = "x-opt-reference-fed-from"


class Side:
    """One connection over which this broker pulls, by `policies`, from the broker at its other end."""

    def __init__(self, federation: Federation, connection, policies: tuple[FederationPolicy, ...], remote_node):
        self.federation = federation
        self.connection = connection
        self.policies = policies
        self.remote_node: str | None = remote_node
        self.session = None
        self.pulls: dict[tuple[str, str], object] = {}  # ("queue", queue name) / ("address", address) -> link

    def evaluate(self, only: str | None = None) -> None:
        """Open the pulls that local demand calls for and close the ones it no longer does (`only`: one address)."""
        if self.remote_node is None or not self.connection.state & Endpoint.LOCAL_ACTIVE:
            return  # the other broker has not said who it is yet
        addresses = self.federation.broker.addresses
        if only is None:
            looked_at = list(addresses.items())
        else:  # called on every consumer that comes or goes: look at that one address only
            looked_at = [(only, addresses[only])] if only in addresses else []
        wanted: dict[tuple[str, str], tuple[FederationPolicy, str, str]] = {}
        for name, info in looked_at:
            for policy in self.policies:
                if policy.kind == "queue":
                    for queue in info["queues"]:
                        if (queue.routing == ANYCAST and not queue.internal and policy.matches(name, queue.name)
                                and self._demand([queue], policy.include_federated)):
                            wanted.setdefault(("queue", queue.name), (policy, queue.name, name))
                elif policy.matches(name, "#") and MULTICAST in info["routings"]:
                    subscriptions = [q for q in info["queues"] if q.routing == MULTICAST]
                    if self._demand(subscriptions, policy.max_hops < 0 or policy.max_hops > 1):
                        wanted.setdefault(("address", name), (policy, name, name))
        for key, link in list(self.pulls.items()):
            if key not in wanted and (only is None or link.target.address == only):
                self._close(key)
        for key, (policy, source, address) in wanted.items():
            if key not in self.pulls:
                self._open(key, policy, source, address)

    def _demand(self, queues, federated_counts: bool) -> bool:
        for queue in queues:
            for consumer in queue.consumers:
                if consumer.closed:
                    continue
                node = consumer.federation_node
                if node is None or (federated_counts and node != self.remote_node):
                    return True
        return False

    def _open(self, key, policy: FederationPolicy, source: str, address: str) -> None:
        broker = self.federation.broker
        if self.session is None:
            self.session = self.connection.session()
            self.session.open()
        link = self.session.receiver(f"federation:{source}:{uuid.uuid4()}")
        link.source.address = source
        link.target.address = address
        put_symbols(link.source.capabilities, ["queue" if key[0] == "queue" else "topic"])
        max_hops = (-1 if policy.include_federated else 1) if key[0] == "queue" else policy.max_hops
        link.properties = {symbol(NODE_PROPERTY): broker.node_id, symbol(MAX_HOPS_PROPERTY): max_hops}
        broker.add_outgoing_producer(link, address, ANYCAST if key[0] == "queue" else MULTICAST, self)
        link.open()
        self.pulls[key] = link
        log.info("Pulling %s %r from node %s (policy %r)", key[0], source, self.remote_node, policy.name)

    def _close(self, key) -> None:
        link = self.pulls.pop(key)
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.close()
        log.info("No more demand for %s %r: stopped pulling from node %s", key[0], key[1], self.remote_node)

    def link_lost(self, link) -> None:
        """The other broker closed one of our pulls (its queue went away): forget it; demand decides again."""
        for key, pull in list(self.pulls.items()):
            if pull == link:
                del self.pulls[key]


class Federation:
    """Every federation side of one broker, and the hooks the broker calls."""

    def __init__(self, broker):
        self.broker = broker
        self.sides: list[Side] = []

    # dialling side ---------------------------------------------------------------------------------------------

    def dialled(self, connection, element, session) -> object:
        """A broker connection with a `<federation>` came up: pull by its local policies once the other node
        answered, and send it the remote ones. Returns the control link (answered in `control_answered`)."""
        local = tuple(p for p in element.policies if p.side == "local")
        remote = [p.as_dict() for p in element.policies if p.side == "remote"]
        side = Side(self, connection, local, None)
        self.sides.append(side)
        link = session.sender(f"federation-control:{uuid.uuid4()}")
        link.target.address = CONTROL_ADDRESS
        link.source.address = CONTROL_ADDRESS
        link.properties = {symbol(POLICIES_PROPERTY): json.dumps({"node": self.broker.node_id, "policies": remote}),
                           symbol(NODE_PROPERTY): self.broker.node_id}
        link.broker_federation_side = side
        link.open()
        return link

    def control_answered(self, link) -> str | None:
        """The dialled broker answered our control link; returns why it is no federation peer, or None."""
        side: Side = link.broker_federation_side
        node = link_property(link.remote_properties, NODE_PROPERTY)
        if not node:
            return f"the remote broker named no node id ({NODE_PROPERTY}): it takes no federation"
        if str(node) == self.broker.node_id:
            return "the remote broker is this broker itself"
        side.remote_node = str(node)
        log.info("Federation with node %s: pulling by %d local policy(ies)", node, len(side.policies))
        side.evaluate()
        return None

    # dialled side ----------------------------------------------------------------------------------------------

    def control_attach(self, link) -> str | None:
        """A dialling broker's control link: pull from it by the policies it sent. Returns why it is refused."""
        try:
            body = json.loads(str(link_property(link.remote_properties, POLICIES_PROPERTY) or ""))
            node = str(body["node"])
            policies = tuple(FederationPolicy.from_dict(p, "local") for p in body.get("policies", []))
        except (ValueError, KeyError, TypeError) as exc:
            return f"a federation control link needs {POLICIES_PROPERTY} as JSON with node and policies ({exc})"
        if node == self.broker.node_id:
            return "a broker cannot federate with itself"
        link.target.copy(link.remote_target)
        link.source.copy(link.remote_source)
        link.properties = {symbol(NODE_PROPERTY): self.broker.node_id}
        link.open()
        side = Side(self, link.connection, policies, node)
        link.broker_federation_side = side
        self.sides.append(side)
        log.info("Federation from node %s: pulling by %d policy(ies) it sent", node, len(policies))
        side.evaluate()
        return None

    # events from the broker -------------------------------------------------------------------------------------

    def demand_changed(self, address: str) -> None:
        for side in list(self.sides):
            side.evaluate(address)

    def connection_gone(self, connection) -> None:
        self.sides = [s for s in self.sides if s.connection != connection]

    def control_closed(self, link) -> None:
        side = getattr(link, "broker_federation_side", None)
        if side is not None and side in self.sides:
            self.sides.remove(side)
            for key in list(side.pulls):
                side._close(key)


# ---- the hop annotations ---------------------------------------------------------------------------------------


def outgoing(data: bytes, hops: int, node: str) -> bytes:
    """A message as a puller gets it: delivery annotations saying it crossed `hops` brokers, from `node`."""
    return with_delivery_annotations(data, [encode_symbol(HOPS), encode_long(hops), encode_symbol(FROM),
                                            encode_string(node)], {HOPS: hops, FROM: node})


def incoming(data: bytes, default_from: str | None) -> tuple[bytes, int, str | None]:
    """(the message without our annotations, brokers it crossed, the broker it came from)."""
    annotations, stored = split_delivery_annotations(data)
    hops = annotations.get(HOPS)
    return stored, int(hops) if hops is not None else 1, str(annotations.get(FROM) or default_from or "") or None


def may_forward(came_from: str | None, hops: int, node: str | None, max_hops: int) -> bool:
    """Whether a message (that crossed `hops` brokers, the last one `came_from`) may go to the broker `node`
    pulling with `max_hops`: never back where it came from, never past the puller's hop limit."""
    if node is not None and came_from == node:
        return False
    return max_hops < 0 or hops < max_hops
