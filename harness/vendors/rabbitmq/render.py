"""Render one broker node of a topology for RabbitMQ 3.x with its AMQP 1.0 plugin.

Three files, for the native provider (harness/vendors/rabbitmq/native.py) and the `rabbitmq` container image alike:

* `rabbitmq.conf` (new-style sysctl format): one AMQP listener (AMQP 1.0 and 0-9-1 share it), the guest user
  allowed off loopback (the AMQP 1.0 plugin logs ANONYMOUS clients in as `guest`), console logging without
  colours, and `load_definitions` so the node declares the topology before its listener opens;
* `enabled_plugins`: `[rabbitmq_amqp1_0].` (plus `rabbitmq_management` when a management port is given);
* definitions (JSON): vhost `/`, user guest, and the topology's queues and addresses.

How a topology maps onto RabbitMQ (and so what `wire_address` returns):

* an anycast queue is a durable queue of that name, addressed `/amq/queue/NAME` (the plugin's address for
  an existing queue: it does not redeclare it; `/queue/NAME` would, and fails on a durable queue declared
  here with PRECONDITION_FAILED, ending the session);
* a multicast address is a durable fanout exchange of that name, addressed `/exchange/NAME`: each receiver
  gets its own exclusive queue bound to it;
* any other name is addressed `/queue/NAME`, which declares a (non-durable, classic) queue on attach: the
  broker's "auto-create";
* dead-lettering: a policy on every queue but the dead-letter queue itself dead-letters through the default
  exchange to the dead-letter queue (rejected messages, and expired ones: RabbitMQ has no separate expiry
  address, so `expiry_address` is not rendered); with `queue_type: quorum`, the same policy sets
  `delivery-limit` from `max_delivery_attempts` (classic queues have no delivery limit).
  `redelivery_delay_ms` has no RabbitMQ equivalent and is ignored.

Networks of brokers (a topology's `network_connectors`) become federation, applied once every node runs
(`federation_plan`, `federation_commands`: rabbitmqctl argument lists; the native provider runs them in
`join_network`): federation pulls, so the upstream sits on the node messages flow to. Where RabbitMQ's
federation differs from ActiveMQ's network connectors, the docstrings below say how.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from harness.tlsca import Issued
from harness.topology import NetworkConnector, Node, Topology

from ..artemis.render import broker_settings
from ...peers.provider import RenderError

AMQP10_PLUGIN = "rabbitmq_amqp1_0"
MANAGEMENT_PLUGIN = "rabbitmq_management"
FEDERATION_PLUGIN = "rabbitmq_federation"
DEFAULT_USER = "guest"
# rabbitmq.conf handshake_timeout, 30 s instead of RabbitMQ's 10 s: under load RabbitMQ took over 9 s to refuse a
# hostile sasl-init (it logs the megabyte of nested list first), and the robustness case must see that close come from
# the input, before the timeout that ends a connection whatever the input (crashers.yaml,
# nesting.list@sasl-init.response).
HANDSHAKE_TIMEOUT_MS = 30_000
_CONF_UNSAFE = re.compile(r"[\s#]")


@dataclass(frozen=True)
class RabbitMQFiles:
    conf: str
    enabled_plugins: str
    definitions: dict

    @property
    def definitions_json(self) -> str:
        return json.dumps(self.definitions, indent=2, sort_keys=True) + "\n"


def render_rabbitmq(
    topology: Topology,
    node_name: str,
    amqp_port: int,
    settings: dict | None = None,
    *,
    listen_host: str = "127.0.0.1",
    definitions_path: str = "definitions.json",
    management_port: int | None = None,
    tls_files: Issued | None = None,
) -> RabbitMQFiles:
    """The three files for broker `node_name`; `definitions_path` is where the node will find the JSON."""
    node = topology.node(node_name)
    if node.role != "broker":
        raise RenderError(f"{node_name}: is a {node.role}; RabbitMQ files are rendered for brokers only")
    return render_rabbitmq_node(node, amqp_port, settings, listen_host=listen_host,
                                definitions_path=definitions_path, management_port=management_port,
                                tls_files=tls_files)


def render_rabbitmq_node(
    node: Node,
    amqp_port: int,
    settings: dict | None = None,
    *,
    listen_host: str = "127.0.0.1",
    definitions_path: str = "definitions.json",
    management_port: int | None = None,
    federation: bool = False,
    tls_files: Issued | None = None,
) -> RabbitMQFiles:
    """`federation`: enable the federation plugin too, so that the node can join a network of brokers once
    running (federation_commands below); it adds nothing measurable to the start (3.46 s against 3.42 s,
    mean of four starts each on this machine). `tls_files`: the PEM files of the node's TLS listener, needed
    when its `access.tls` is set (harness.tlsca.TestPki.listener_files)."""
    s = broker_settings(settings, node.name)
    for label, port in (("amqp_port", amqp_port), ("management_port", management_port)):
        if port is not None and (not isinstance(port, int) or not 1 <= port <= 65535):
            raise RenderError(f"{node.name}: {label}: expected a port 1-65535, got {port!r}")
    if _CONF_UNSAFE.search(definitions_path):
        raise RenderError(f"{node.name}: definitions path {definitions_path!r} holds whitespace or '#', "
                          "which rabbitmq.conf cannot carry")
    conf = [
        f"# rabbitmq.conf for broker {node.name}; generated by harness.vendors.rabbitmq.render, change the topology.",
        *_listener_lines(node, listen_host, amqp_port, tls_files),
        "loopback_users = none",
        f"handshake_timeout = {HANDSHAKE_TIMEOUT_MS}",
        # Security on: no default user, so the plugin refuses ANONYMOUS instead of logging it in as guest.
        f"amqp1_0.default_user = {'none' if node.access.authenticate else DEFAULT_USER}",
        "amqp1_0.default_vhost = /",
        "amqp1_0.protocol_strict_mode = false",
        "log.console = true",
        "log.console.level = info",
        "log.console.use_colors = off",
        "log.file = false",
        f"load_definitions = {definitions_path}",
    ]
    plugins = [AMQP10_PLUGIN]
    if federation:
        plugins.append(FEDERATION_PLUGIN)
    if management_port is not None:
        plugins.append(MANAGEMENT_PLUGIN)
        conf += [f"management.tcp.ip = {listen_host}", f"management.tcp.port = {management_port}"]
    return RabbitMQFiles("\n".join(conf) + "\n", f"[{','.join(plugins)}].\n", _definitions(node, s))


def _definitions(node: Node, s: dict) -> dict:
    queues, exchanges, declared = [], [], set()
    queue_args = {"x-queue-type": s["queue_type"]}
    dlq = s["dead_letter_address"]
    if dlq:
        queues.append(_queue(dlq, {"x-queue-type": s["queue_type"]}))
        declared.add(dlq)
    for i, queue in enumerate(node.queues):
        name = queue.address
        if not name or len(name.encode()) > 255:
            raise RenderError(f"{node.name}: queues[{i}].address: expected 1-255 bytes, got {name!r}")
        if name.startswith("amq."):
            raise RenderError(f"{node.name}: queues[{i}].address {name!r}: names starting 'amq.' are reserved "
                              "by RabbitMQ")
        if name in declared:
            continue
        declared.add(name)
        if queue.routing == "anycast":
            queues.append(_queue(name, dict(queue_args)))
        else:
            exchanges.append({"name": name, "vhost": "/", "type": "fanout", "durable": True,
                              "auto_delete": False, "internal": False, "arguments": {}})
    policies = []
    definition = _settings_definition(s)
    if definition:
        # Every queue but the dead-letter queue, including the ones declared later on attach.
        pattern = f"^(?!{re.escape(dlq)}$)" if dlq else "^"
        policies.append({"name": "interop-broker-settings", "vhost": "/", "pattern": pattern,
                         "apply-to": "queues", "priority": 0, "definition": definition})
    users, permissions = _users_and_permissions(node)
    return {
        "rabbit_version": "3.10.0",
        "users": users,
        "vhosts": [{"name": "/"}],
        "permissions": permissions,
        "queues": queues,
        "exchanges": exchanges,
        "bindings": [],
        "policies": policies,
    }


# ---- security: users, permissions and TLS ----------------------------------------------------------------


def _listener_lines(node: Node, host: str, port: int, tls_files: Issued | None) -> list[str]:
    """One AMQP listener on `port`: plain TCP, or TLS only when the node's access has `tls` (RabbitMQ's
    `listeners.ssl`, with `listeners.tcp = none` so that no plain door is left; `require: false` would need a
    second port, which the topology's one clients listener does not have)."""
    tls = node.access.tls
    if tls is None:
        return [f"listeners.tcp.default = {host}:{port}"]
    if tls_files is None:
        raise RenderError(f"{node.name}: access.tls is set but no TLS files were given (a test PKI is needed)")
    if not tls.require:
        raise RenderError(f"{node.name}: access.tls.require false: a RabbitMQ listener is TLS or plain, and the "
                          "clients listener has one port")
    for label, path in (("certificate", tls_files.cert), ("key", tls_files.key), ("CA", tls_files.ca)):
        if _CONF_UNSAFE.search(str(path)):
            raise RenderError(f"{node.name}: TLS {label} path {path!r} holds whitespace or '#'")
    lines = ["listeners.tcp = none", f"listeners.ssl.default = {host}:{port}",
             f"ssl_options.cacertfile = {tls_files.ca}", f"ssl_options.certfile = {tls_files.cert}",
             f"ssl_options.keyfile = {tls_files.key}"]
    if tls_files.password:
        lines.append(f"ssl_options.password = {tls_files.password}")
    verify = tls.client_certs != "none"
    lines += [f"ssl_options.verify = {'verify_peer' if verify else 'verify_none'}",
              f"ssl_options.fail_if_no_peer_cert = {'true' if tls.client_certs == 'required' else 'false'}"]
    return lines


# Topology operations -> RabbitMQ's three permission kinds (per vhost, each a regex over resource names:
# queues, and exchanges). How an Artemis permission maps, as faithfully as RabbitMQ allows:
# * send -> write on the address (an exchange for a multicast address), and on `amq.default`, the exchange a
#   message to a queue goes through: so a user who may send anywhere may send to every queue (RabbitMQ checks
#   the exchange, not the queue behind it);
# * consume -> read on the address (the queue);
# * create_address, create_durable_queue, create_non_durable_queue, delete_address -> configure (RabbitMQ has one
#   permission for declaring and deleting queues and exchanges);
# * manage -> nothing (RabbitMQ's management is user tags, not a vhost permission).
# A user's regex is the union of the matches that give it the operation. Artemis's rule that a more specific
# match replaces a less specific one cannot be written as such a union, so overlapping matches are refused.
_PERMISSION_KINDS = {"write": ("send",), "read": ("consume",),
                     "configure": ("create_address", "create_durable_queue", "create_non_durable_queue",
                                   "delete_address")}


def artemis_regex(match: str) -> str:
    """An Artemis match (`.` separates words, `*` one word, `#` zero or more words, last) as a regex."""
    if match == "#":
        return ".*"
    out = []
    for i, word in enumerate(match.split(".")):
        if word == "#":
            out.append(r"(\..*)?" if i else ".*")
        else:
            piece = "[^.]+" if word == "*" else re.escape(word).replace(r"\#", "").replace(r"\*", "[^.]*")
            out.append(piece if i == 0 else r"\." + piece)
    return "".join(out)


def _overlap(a: str, b: str) -> bool:
    """Whether two Artemis matches can cover one address (checked on samples of each: conservative enough for
    the topologies' patterns, which share a literal stem or not at all)."""
    def sample(match: str) -> str:
        return ".".join("x" if w in ("*", "#") else w for w in match.split("."))
    return bool(re.fullmatch(artemis_regex(a), sample(b)) or re.fullmatch(artemis_regex(b), sample(a))
                or re.fullmatch(artemis_regex(a), sample(b).removesuffix(".x"))
                or re.fullmatch(artemis_regex(b), sample(a).removesuffix(".x")))


def _users_and_permissions(node: Node) -> tuple[list[dict], list[dict]]:
    """Definitions' users and permissions. Security off: guest, who may do everything (ANONYMOUS clients are
    logged in as guest). Security on: the topology's users only (no guest), each with regexes from the
    permissions of its roles; a node that authenticates but declares no permissions lets every user do
    everything, as harness/vendors/artemis/render.py renders it."""
    def user(name: str, password: str, tags: list[str]) -> dict:
        return {"name": name, "password_hash": _password_hash(password),
                "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": tags, "limits": {}}

    if not node.access.authenticate:
        return ([user(DEFAULT_USER, DEFAULT_USER, ["administrator"])],
                [{"user": DEFAULT_USER, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}])
    other = [m for m in node.access.mechanisms if m != "PLAIN"]
    if other:
        raise RenderError(f"{node.name}: access.mechanisms: a RabbitMQ broker authenticates with PLAIN only here, "
                          f"got {', '.join(other)}")
    matches = [p.match for p in node.permissions]
    for i, a in enumerate(matches):
        for b in matches[i + 1:]:
            if _overlap(a, b):
                raise RenderError(f"{node.name}: permissions {a!r} and {b!r} overlap: RabbitMQ's permissions are one "
                                  "regex per user and kind, which cannot say that the more specific match wins")
    users, permissions = [], []
    for name, password in node.users.items():
        users.append(user(name, password, []))
        roles = {role for role, members in node.roles.items() if name in members}
        regexes = {}
        for kind, operations in _PERMISSION_KINDS.items():
            if not node.permissions:
                regexes[kind] = ".*"
                continue
            granted = [artemis_regex(p.match) for p in node.permissions
                       if any(roles & set(p.roles_for(op)) for op in operations)]
            if kind == "write" and granted:
                granted.append(re.escape("amq.default"))
            regexes[kind] = f"^({'|'.join(granted)})$" if granted else "^$"
        permissions.append({"user": name, "vhost": "/", **regexes})
    return users, permissions


def _settings_definition(s: dict) -> dict:
    """The definition of the `interop-broker-settings` policy (every queue but the dead-letter queue); {}: none."""
    definition: dict = {}
    dlq = s["dead_letter_address"]
    if dlq:
        definition.update({"dead-letter-exchange": "", "dead-letter-routing-key": dlq})
    if s["queue_type"] == "quorum" and s["max_delivery_attempts"] > 0:
        definition["delivery-limit"] = s["max_delivery_attempts"]
    return definition


def _queue(name: str, arguments: dict) -> dict:
    return {"name": name, "vhost": "/", "durable": True, "auto_delete": False, "arguments": arguments}


def _password_hash(password: str) -> str:
    """RabbitMQ's rabbit_password_hashing_sha256: base64(salt + sha256(salt + password)), 4-byte salt."""
    salt = os.urandom(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def wire_address(node: Node | None, name: str, settings: dict | None = None) -> str:
    """What a client attaches to on RabbitMQ's AMQP 1.0 plugin for the logical address `name`.

    Names that already carry a RabbitMQ address prefix (`/queue/`, `/amq/queue/`, `/exchange/`, `/topic/`)
    are passed through unchanged.
    """
    if name.startswith("/"):
        return name
    kind = declared_names(node, settings).get(name)
    if kind == "queue":
        return f"/amq/queue/{name}"
    if kind == "exchange":
        return f"/exchange/{name}"
    return f"/queue/{name}"


def declared_names(node: Node | None, settings: dict | None = None) -> dict[str, str]:
    """Logical name -> "queue" or "exchange" for everything the definitions declare."""
    names: dict[str, str] = {}
    s = broker_settings(settings, node.name if node else "?")
    if s["dead_letter_address"]:
        names[s["dead_letter_address"]] = "queue"
    for queue in node.queues if node is not None else ():
        names.setdefault(queue.address, "queue" if queue.routing == "anycast" else "exchange")
    return names


# ---- networks of brokers: the federation plugin ------------------------------------------------------------

# Federation pulls: the *downstream* node holds an upstream pointing at the node it fetches from. So a network
# connector on B1 to B2 (messages produced on B1 reach consumers on B2) is an upstream on B2 pointing at B1;
# the duplex direction is an upstream on B1 pointing at B2. Never federated, whatever the patterns say: the
# queues the AMQP 1.0 plugin makes for each multicast subscriber (server-named `amq.gen-...`), and the queues
# and exchanges federation itself declares on an upstream (`federation: NAME -> NODE`), which the duplex
# direction would otherwise federate back.
_NEVER_FEDERATED = r"(?!amq\.)(?!federation: )"
# RabbitMQ applies one policy per queue, the matching one of highest priority. The federation policies beat
# interop-broker-settings (priority 0) and carry its definition merged in wherever it applies, so a federated
# queue keeps its dead-lettering and delivery limit.
FEDERATION_PRIORITY = 1
# Different (patterns, excluded) selections on one node partition its names by which selections match them:
# one policy per non-empty combination, so 2**n - 1 policies per kind (queues, exchanges).
MAX_SELECTIONS = 5


@dataclass(frozen=True)
class Upstream:
    """A `federation-upstream` on the downstream node: the node(s) it pulls from for one connection of one
    network connector. Named OWNER:CONNECTION (`B1:b1-b2.B2`, `B1:b1-pair`), with `:back` for the duplex
    direction, on the owner itself."""

    name: str
    nodes: tuple[str, ...]  # the nodes it dials, in the connector's order (masterslave: primary, standby)
    connector: NetworkConnector
    owner: str  # the node the connector is declared on
    back: bool  # the duplex direction: the owner pulls from the nodes its connector names

    def value(self, dial_ports: Mapping[str, int], host: str = "127.0.0.1") -> dict:
        c = self.connector
        missing = [n for n in self.nodes if n not in dial_ports]
        if missing:
            raise RenderError(f"upstream {self.name}: no port to dial for {', '.join(missing)}")
        uris = [_amqp_uri(c.user, c.password, host, dial_ports[n]) for n in self.nodes]
        delay = c.retry_interval_ms / 1000
        return {
            # Several URIs: federation picks one AT RANDOM on each connection attempt (not primary first).
            "uri": uris[0] if len(uris) == 1 else uris,
            "reconnect-delay": int(delay) if delay.is_integer() else delay,  # seconds; fractions accepted
            "max-hops": c.network_ttl,  # exchange federation only: queue federation has no hop limit
            "ack-mode": "on-confirm",  # acknowledged upstream once confirmed downstream: no loss on failures
            "trust-user-id": False,
        }


@dataclass(frozen=True)
class FederationPolicy:
    name: str
    pattern: str  # a PCRE that Python's re reads the same way (anchors, lookaheads, classes, escapes only)
    apply_to: str  # "queues" or "exchanges"
    definition: dict
    upstreams: tuple[str, ...]  # the upstreams it applies, in order

    def matches(self, name: str) -> bool:
        return re.search(self.pattern, name) is not None

    def command(self) -> list[str]:
        return ["set_policy", "--apply-to", self.apply_to, "--priority", str(FEDERATION_PRIORITY), self.name,
                self.pattern, json.dumps(self.definition, sort_keys=True)]


@dataclass(frozen=True)
class FederationPlan:
    """What one node needs to take its part in a topology's network of brokers."""

    node: str
    upstreams: tuple[Upstream, ...]
    upstream_sets: dict  # set name -> upstream names, for the names several upstreams feed
    policies: tuple[FederationPolicy, ...]
    users: dict  # user -> password: the connectors' users, on both ends (the dialling direction is reversed)
    in_network: bool  # the node is an end of some network connector (an upstream of another node, at least)

    def commands(self, dial_ports: Mapping[str, int], host: str = "127.0.0.1") -> list[list[str]]:
        """rabbitmqctl argument lists, in order: users, upstreams, upstream sets, policies (a policy applied
        before its upstream exists would start links that fail). `dial_ports`: node -> the port this node
        dials to reach it (its AMQP port, or a fault proxy's in front of it)."""
        commands = []
        for user, password in self.users.items():
            commands += [["add_user", user, password], ["set_permissions", "-p", "/", user, ".*", ".*", ".*"]]
        for upstream in self.upstreams:
            commands.append(["set_parameter", "federation-upstream", upstream.name,
                             json.dumps(upstream.value(dial_ports, host), sort_keys=True)])
        for name, members in self.upstream_sets.items():
            commands.append(["set_parameter", "federation-upstream-set", name,
                             json.dumps([{"upstream": member} for member in members])])
        return commands + [policy.command() for policy in self.policies]

    def definitions(self, dial_ports: Mapping[str, int], host: str = "127.0.0.1") -> dict:
        """The same as a definitions document for `rabbitmqctl import_definitions`, which applies it all in
        one call (each rabbitmqctl call starts an Erlang VM: about 0.45 s on this machine, several seconds
        when four nodes share two cores) and merges: objects of the same name are replaced, others kept."""
        return {
            "users": [{"name": user, "password_hash": _password_hash(password),
                       "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": [], "limits": {}}
                      for user, password in self.users.items()],
            "permissions": [{"user": user, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
                            for user in self.users],
            "parameters": [{"vhost": "/", "component": "federation-upstream", "name": upstream.name,
                            "value": upstream.value(dial_ports, host)} for upstream in self.upstreams]
                          + [{"vhost": "/", "component": "federation-upstream-set", "name": name,
                              "value": [{"upstream": member} for member in members]}
                             for name, members in self.upstream_sets.items()],
            "policies": [{"vhost": "/", "name": policy.name, "pattern": policy.pattern, "apply-to": policy.apply_to,
                          "priority": FEDERATION_PRIORITY, "definition": policy.definition}
                         for policy in self.policies],
        }

    def policy_for(self, name: str, kind: str) -> FederationPolicy | None:
        """The federation policy RabbitMQ applies to queue or exchange `name` (kind "queue" or "exchange")."""
        return next((p for p in self.policies if p.apply_to == f"{kind}s" and p.matches(name)), None)

    def expected_links(self, declared: Mapping[str, str]) -> set[tuple[str, str, str]]:
        """(kind, name, upstream) of every federation link the node runs once the plan is applied, for the
        queues and exchanges in `declared` (name -> "queue" or "exchange", as declared_names gives)."""
        links = set()
        for name, kind in declared.items():
            policy = self.policy_for(name, kind)
            links |= {(kind, name, upstream) for upstream in (policy.upstreams if policy else ())}
        return links


def federation_plan(topology: Topology, node_name: str, settings: dict | None = None) -> FederationPlan:
    """The upstreams, upstream sets, policies and users broker `node_name` needs for the topology's network
    connectors (ActiveMQ's network of brokers, 004 seed), as RabbitMQ federation.

    * A connector on X to T (static: each T; masterslave: the primary and the standby each) makes on T an
      upstream pointing at X: T's queues pull from X's same-named queues when they have consumers with spare
      capacity, and T's exchanges bind to X's (demand follows T's bindings);
    * duplex adds, on X, one upstream pointing at the connection's nodes: one URI for static, two for
      masterslave (primary, standby: federation picks one at random on each attempt);
    * the connector's `queues` select queues, its `topics` exchanges (the fanout exchanges of multicast
      addresses), both as Artemis patterns ('.' between words, '*' one word, '#' zero or more words), minus
      its `excluded` ones;
    * `network_ttl` is the upstream's `max-hops` (exchanges), `retry_interval_ms` its `reconnect-delay`,
      `user`/`password` go in its URI and are created on both ends (else guest, allowed from loopback).
    """
    node = topology.node(node_name)
    if node.role != "broker":
        raise RenderError(f"{node_name}: is a {node.role}; federation is rendered for brokers only")
    s = broker_settings(settings, node_name)
    upstreams: list[Upstream] = []
    users: dict[str, str] = {}
    in_network = False
    for owner in topology.nodes.values():
        for connector in owner.network_connectors:
            for connection, targets in connector.connections:
                if owner.name != node_name and node_name not in targets:
                    continue
                in_network = True
                if connector.user is not None:
                    if not connector.password:  # measured: the link's login is ACCESS_REFUSED, forever
                        raise RenderError(f"{node_name}: network connector {connector.name!r} of {owner.name}: "
                                          f"user {connector.user!r} has no password, and RabbitMQ refuses "
                                          "blank passwords")
                    password = connector.password
                    own = node.access.authenticate and connector.user in node.users
                    if own and node.users[connector.user] != password:
                        raise RenderError(f"{node_name}: network connector {connector.name!r} of {owner.name}: "
                                          f"user {connector.user!r} has another password in {node_name}'s users")
                    # A secured node declares the user itself, with the permissions of its roles (the seed 004
                    # common user): the plan must not widen them to everything.
                    if not own and users.setdefault(connector.user, password) != password:
                        raise RenderError(f"{node_name}: network connectors give user {connector.user!r} two "
                                          "passwords; RabbitMQ holds one per user")
                if node_name in targets:
                    upstreams.append(Upstream(f"{owner.name}:{connection}", (owner.name,), connector,
                                              owner.name, back=False))
                if owner.name == node_name and connector.duplex:
                    upstreams.append(Upstream(f"{owner.name}:{connection}:back", targets, connector,
                                              owner.name, back=True))
    sets: dict[str, tuple[str, ...]] = {}
    base = _settings_definition(s)
    policies = _federation_policies(
        node_name, "queues", [(u.name, u.connector.queues, u.connector.excluded) for u in upstreams
                              if u.connector.queues], sets, base, s["dead_letter_address"] if base else None)
    policies += _federation_policies(
        node_name, "exchanges", [(u.name, u.connector.topics, u.connector.excluded) for u in upstreams
                                 if u.connector.topics], sets, {}, None)
    return FederationPlan(node_name, tuple(upstreams), sets, tuple(policies), users, in_network)


def federation_commands(topology: Topology, node_name: str, dial_ports: Mapping[str, int],
                        settings: dict | None = None, host: str = "127.0.0.1") -> list[list[str]]:
    """The rabbitmqctl argument lists that make `node_name` take its part in the topology's network."""
    return federation_plan(topology, node_name, settings).commands(dial_ports, host)


def _federation_policies(node_name: str, kind: str, sources: list[tuple[str, tuple, tuple]],
                         sets: dict[str, tuple[str, ...]], base: dict,
                         base_excluded: str | None) -> list[FederationPolicy]:
    """Policies for `kind` ("queues", "exchanges") from (upstream, patterns, excluded) sources, one per
    non-empty combination of distinct selections, so that each name gets exactly the upstreams whose
    selection matches it; each carries `base` (the settings policy) merged in, except on `base_excluded`
    (the dead-letter queue, which the settings policy leaves out), which gets a policy of its own."""
    selections: dict[tuple, list[str]] = {}
    for upstream, patterns, excluded in sources:
        selections.setdefault((tuple(patterns), tuple(excluded)), []).append(upstream)
    keys = list(selections)
    if len(keys) > MAX_SELECTIONS:
        raise RenderError(f"{node_name}: {len(keys)} different {kind} selections among the network connectors "
                          f"it takes part in; at most {MAX_SELECTIONS} (each combination is a RabbitMQ policy)")
    bodies = [selection_regex(patterns, excluded) for patterns, excluded in keys]
    policies = []
    for mask in range(1, 2 ** len(keys)):
        chosen = [i for i in range(len(keys)) if mask >> i & 1]
        members = tuple(dict.fromkeys(u for i in chosen for u in selections[keys[i]]))
        if len(members) == 1:
            federation = {"federation-upstream": members[0]}
        else:
            set_name = "+".join(members)
            sets[set_name] = members
            federation = {"federation-upstream-set": set_name}
        if len(keys) == 1:
            core = bodies[0]
            name = f"interop-federation-{kind}"
        else:
            core = "".join(f"(?={body})" if i in chosen else f"(?!{body})" for i, body in enumerate(bodies))
            name = f"interop-federation-{kind}-{'+'.join(str(i + 1) for i in chosen)}"
        if not base:
            policies.append(FederationPolicy(name, f"^{_NEVER_FEDERATED}{core}", kind, federation, members))
            continue
        guard = f"(?!{_literal(base_excluded)}$)" if base_excluded else ""
        policies.append(FederationPolicy(name, f"^{_NEVER_FEDERATED}{guard}{core}", kind,
                                         {**base, **federation}, members))
        if base_excluded and re.search(f"^{_NEVER_FEDERATED}{core}", base_excluded):
            policies.append(FederationPolicy(f"{name}-dead-letter-queue", f"^{_literal(base_excluded)}$", kind,
                                             federation, members))
    return policies


def selection_regex(patterns: tuple[str, ...] | list[str], excluded: tuple[str, ...] | list[str] = ()) -> str:
    """A regex (to search from the start of a name) matching the whole names that one of `patterns` matches
    and none of `excluded` does; RabbitMQ policies have no exclusions, so they are negative lookaheads."""
    exclude = f"(?!(?:{'|'.join(wildcard_regex(p) for p in excluded)})$)" if excluded else ""
    return f"{exclude}(?:{'|'.join(wildcard_regex(p) for p in patterns)})$"


def wildcard_regex(pattern: str) -> str:
    """An Artemis address pattern as a regex for a whole name (no anchors): '.' separates words, '*' is one
    word, '#' zero or more words (`a.#` matches `a`, `a.b`, `a.b.c`; `#` alone, any name). The topology
    allows '#' only as the last word."""
    words = pattern.split(".")
    if words == ["#"]:
        return ".*"
    regex = ""
    for i, word in enumerate(words):
        if word == "#":
            regex += r"(?:\..+)?"
            continue
        regex += (r"\." if i else "") + (r"[^.]+" if word == "*" else _literal(word))
    return regex


def _literal(text: str) -> str:
    """`text` matched literally by PCRE and by Python's re alike: every ASCII character that is not a letter
    or a digit is escaped (both read a backslash before one as the character itself)."""
    return "".join(f"\\{ch}" if ch.isascii() and not ch.isalnum() else ch for ch in text)


def _amqp_uri(user: str | None, password: str | None, host: str, port: int) -> str:
    if user is None:
        return f"amqp://{host}:{port}"  # guest: loopback_users = none lets it in from anywhere
    return f"amqp://{quote(user, safe='')}:{quote(password or '', safe='')}@{host}:{port}"
