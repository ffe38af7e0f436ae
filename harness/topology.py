"""Topology files (topologies/*.yaml): which nodes exist, what each is configured with, how they connect.

The model is vendor-neutral: a node has a role (router or broker); the matrix picks the vendor per role and a renderer
(harness/vendors/<vendor>/render.py) turns a node into that vendor's configuration. A node may name its own vendor and
version (`vendor: artemis@2.39.0`), for a topology that mixes them on purpose (two versions of one product side by
side); that node then runs as it says whatever the matrix picked for its role.

Validation is strict because a topology is what every later stage trusts: an unknown field, a misspelt
value or a link to a missing node is a one-line TopologyError naming the file, the node and the field.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .peers.base import ROLES
from .topology_security import (
    LinkTls,
    ListenerTls,
    NodeAccess,
    Permission,
    parse_cas,
    parse_link_tls,
    parse_mechanisms,
    parse_node_security,
)

# The security model, re-exported for renderers, and the roles a node plays (harness/peers/base.py)
__all__ = ["LinkTls", "ListenerTls", "NodeAccess", "Permission", "ROLES"]

MODES = ("standalone", "interior", "edge")
DISTRIBUTIONS = ("balanced", "closest", "multicast")
LINK_ROLES = ("normal", "inter-router", "route-container", "edge")
DIRECTIONS = ("in", "out")
QUEUE_ROUTINGS = ("anycast", "multicast")
VIAS = ("proxy",)
# What a broker connection creates on the node it dials (002_f23507c2891d6d06.txt, AMQP broker connections).
CONNECTION_ELEMENTS = ("mirror", "sender", "receiver", "peer")
# How a network connector names the brokers it dials (004_05e35cdd7bc39ede.txt, ActiveMQ's network connector
# URIs): `static:(a,b)` bridges to each broker listed, `masterslave:(primary,standby)` to one pair at a time.
NETWORK_URIS = ("static", "masterslave")

# Every node gets a listener for clients under this name; inbound inter-router and edge connections share
# one listener per role, named after the role.
CLIENT_LISTENER = "clients"
RESERVED_LISTENER_NAMES = (CLIENT_LISTENER, "inter-router", "edge")

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_CONNECTION_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_TOPOLOGY_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
TOPOLOGIES_DIR = Path(__file__).resolve().parent.parent / "topologies"


class TopologyError(ValueError):
    """A topology file is wrong; str() is one line naming the file, the place and what was expected."""


@dataclass(frozen=True)
class AddressSpec:
    """How a router treats addresses matching `prefix` (or `pattern`, with `*`/`#` wildcards)."""

    prefix: str | None = None
    pattern: str | None = None
    distribution: str = "balanced"
    priority: int | None = None
    waypoint: bool = False
    enable_fallback: bool = False

    @property
    def match(self) -> str:
        return self.prefix if self.prefix is not None else self.pattern  # type: ignore[return-value]


@dataclass(frozen=True)
class AutoLink:
    """A link the router itself attaches to `connection` (a node) for a waypoint address."""

    address: str
    direction: str
    connection: str
    phase: int | None = None
    fallback: bool = False


@dataclass(frozen=True)
class LinkRoute:
    """Links attached to the router for matching addresses are routed to `connection` (a node)."""

    direction: str
    connection: str
    prefix: str | None = None
    pattern: str | None = None

    @property
    def match(self) -> str:
        return self.prefix if self.prefix is not None else self.pattern  # type: ignore[return-value]


@dataclass(frozen=True)
class Queue:
    address: str
    routing: str = "anycast"


@dataclass(frozen=True)
class Listener:
    name: str
    role: str = "normal"


@dataclass(frozen=True)
class BrokerSettings:
    """Vendor-neutral address settings of a broker node (rendered to Artemis address-settings et al.)."""

    dead_letter_address: str | None = None
    expiry_address: str | None = None
    max_delivery_attempts: int | None = None  # None: the vendor's default
    redelivery_delay_ms: int = 0
    auto_create: bool = True

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class BrokerConnectionElement:
    """What a broker connection creates on the node it dials: a `mirror` of this broker's events, or a
    `sender`/`receiver`/`peer` for the local queues matching `address_match` (or the one queue `queue_name`)."""

    type: str
    address_match: str | None = None  # sender, receiver, peer: exactly one of these two
    queue_name: str | None = None
    queue_creation: bool = True  # mirror only, as are the next two
    queue_removal: bool = True
    message_acknowledgements: bool = True


@dataclass(frozen=True)
class BrokerConnection:
    """An AMQP broker connection (Artemis `<amqp-connection>`): the broker dials `to[0]`, then the alternates
    `to[1:]` in order, over the links from this broker to those nodes."""

    name: str
    to: tuple[str, ...]
    elements: tuple[BrokerConnectionElement, ...]
    auto_start: bool = True
    reconnect_attempts: int = -1  # -1: forever
    retry_interval_ms: int = 5000  # Artemis's default
    user: str | None = None
    password: str | None = None

    @property
    def primary(self) -> str:
        return self.to[0]

    @property
    def alternates(self) -> tuple[str, ...]:
        return self.to[1:]

    @property
    def mirror(self) -> BrokerConnectionElement | None:
        return next((e for e in self.elements if e.type == "mirror"), None)


@dataclass(frozen=True)
class NetworkConnector:
    """An ActiveMQ-style network connector (004_05e35cdd7bc39ede.txt): this broker forwards messages to the
    consumers of the `to` brokers (and, `duplex`, theirs to its own consumers over the same connection).

    `uri: static` bridges to each `to` broker over a connection of its own; `uri: masterslave` dials
    `to[0]` (the primary) and, while it cannot, `to[1]` (the standby): one connection at a time. Patterns
    use Artemis's wildcards ('.' separates words, '*' is one word, '#' the rest, last only)."""

    name: str
    to: tuple[str, ...]
    uri: str = "static"
    duplex: bool = False
    network_ttl: int = 1  # ActiveMQ's default: a message or subscription crosses one broker
    user: str | None = None
    password: str | None = None
    queues: tuple[str, ...] = ("#",)
    topics: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    conduit_subscriptions: bool = True
    retry_interval_ms: int = 1000  # ActiveMQ's initialReconnectDelay

    @property
    def connections(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(connection name, dialled nodes in order) per connection the connector makes: `NAME.NODE` for
        each node of a static connector, `NAME` with [primary, standby] for a masterslave one."""
        if self.uri == "masterslave":
            return ((self.name, self.to),)
        return tuple((f"{self.name}.{target}", (target,)) for target in self.to)


@dataclass
class Node:
    name: str
    role: str
    mode: str = "standalone"
    addresses: list[AddressSpec] = field(default_factory=list)
    autolinks: list[AutoLink] = field(default_factory=list)
    link_routes: list[LinkRoute] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    settings: BrokerSettings = field(default_factory=BrokerSettings)
    broker_connections: list[BrokerConnection] = field(default_factory=list)
    network_connectors: list[NetworkConnector] = field(default_factory=list)
    # Security (harness/topology_security.py): PLAIN users and their passwords, the doors of the client
    # listeners, and (brokers) roles and Artemis-style permissions.
    users: dict[str, str] = field(default_factory=dict)
    access: NodeAccess = field(default_factory=NodeAccess)
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    permissions: tuple[Permission, ...] = ()
    vendor: str | None = None  # its own choice (`artemis@2.39.0`) over its role's; None: the role's


@dataclass(frozen=True)
class Link:
    """A connection between two nodes: `from_` dials, `to` listens. Any link can go through the proxy."""

    from_: str
    to: str
    role: str
    via: str | None = None
    cost: int = 1
    tls: LinkTls | None = None
    mechanisms: tuple[str, ...] = ("ANONYMOUS",)  # what the dialler authenticates with
    user: str | None = None
    password: str | None = None

    @property
    def name(self) -> str:
        return f"{self.from_}->{self.to}"


@dataclass
class Topology:
    name: str
    description: str
    nodes: dict[str, Node]
    links: list[Link]
    clients: dict[str, str]
    path: Path | None = None
    cas: tuple[str, ...] = ()  # test CAs (harness/tlsca.py makes them per run)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"topology {self.name} has no node {name!r}") from None

    def nodes_with_role(self, role: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.role == role]

    def links_from(self, name: str) -> list[Link]:
        return [link for link in self.links if link.from_ == name]

    def links_to(self, name: str) -> list[Link]:
        return [link for link in self.links if link.to == name]

    def listeners_for(self, name: str) -> list[Listener]:
        """Every listener node `name` must open: the clients listener, its declared extra listeners, and
        one per kind of inbound link. Providers allocate one port per listener name.

        Inbound route-container connections get a listener named after the dialling node, so that autolinks
        and link routes can name that node as their connection whichever side dials.
        """
        node = self.node(name)
        listeners = [Listener(CLIENT_LISTENER, "normal"), *node.listeners]
        seen = {ls.name for ls in listeners}
        for link in self.links_to(name):
            if node.role != "router" or link.role == "normal":
                continue  # brokers, and normal connections into routers, use the clients listener
            ls_name = link.from_ if link.role == "route-container" else link.role
            if ls_name not in seen:
                seen.add(ls_name)
                listeners.append(Listener(ls_name, link.role))
        return listeners

    def listener_for_link(self, link: Link) -> str:
        """Name of the listener on `link.to` that `link.from_` dials."""
        if self.node(link.to).role != "router" or link.role == "normal":
            return CLIENT_LISTENER
        return link.from_ if link.role == "route-container" else link.role

    def links_into_listener(self, node_name: str, listener_name: str) -> list[Link]:
        """The links whose dialler lands on `listener_name` of `node_name`."""
        return [link for link in self.links_to(node_name) if self.listener_for_link(link) == listener_name]

    def _own_listener(self, node_name: str, listener_name: str) -> bool:
        """True for the listeners configured by the node's `access` (clients and declared ones), False for
        the ones a kind of inbound link implies (inter-router, edge, route-container on routers)."""
        return listener_name == CLIENT_LISTENER or any(
            ls.name == listener_name for ls in self.node(node_name).listeners)

    def listener_tls(self, node_name: str, listener_name: str) -> ListenerTls | None:
        """TLS on a listener of a node: the node's `access.tls` for its own listeners, the `tls` of the links
        landing there (they agree, parsing checks it) for an implied one; None means plain TCP."""
        if self._own_listener(node_name, listener_name):
            return self.node(node_name).access.tls
        links = self.links_into_listener(node_name, listener_name)
        return links[0].tls.listener_side() if links and links[0].tls else None

    def listener_mechanisms(self, node_name: str, listener_name: str) -> tuple[bool, tuple[str, ...]]:
        """(authenticate, SASL mechanisms offered) on a listener: the node's `access` for its own listeners,
        the mechanisms of the links landing there for an implied one (authenticated unless ANONYMOUS)."""
        if self._own_listener(node_name, listener_name):
            access = self.node(node_name).access
            return access.authenticate, access.mechanisms
        links = self.links_into_listener(node_name, listener_name)
        mechanisms = links[0].mechanisms if links else ("ANONYMOUS",)
        return "ANONYMOUS" not in mechanisms, mechanisms


def topology_path(name_or_path: str | Path) -> Path:
    """A path as given if it names an existing file, else `topologies/<name>.yaml` in this project."""
    path = Path(name_or_path)
    if path.exists() or path.suffix or len(path.parts) > 1:
        return path
    return TOPOLOGIES_DIR / f"{path}.yaml"


def load_topology(path: str | Path) -> Topology:
    path = Path(path)
    return parse_topology(read_yaml(path, TopologyError), path)


# ---------------------------------------------------------------------------------------------- YAML


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys: YAML would silently keep the last one, hiding a typo."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:
            continue  # unhashable key: construct_mapping below reports it with its position
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def display_path(path: str | Path | None) -> str:
    """The path as the user would type it: relative to the working directory when it is below it."""
    if path is None:
        return "<topology>"
    path = Path(path)
    if path.is_absolute():
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            pass
    return str(path)


def read_yaml(path: str | Path, error: type[Exception]) -> Any:
    """Parse a YAML file strictly; unreadable files and syntax errors raise `error` with one line."""
    shown = display_path(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"{shown}: cannot read: {reason}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{shown}:{mark.line + 1}" if mark is not None else shown
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise error(f"{where}: YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise error(f"{shown}: YAML syntax error: {' '.join(str(exc).split())}") from None


# ------------------------------------------------------------------------------------------ checking


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Where:
    """Where in the file we are, so every error names file, place and field the same way."""

    def __init__(self, path: str | Path | None, place: str = "") -> None:
        self.path, self.place = path, place

    def at(self, place: str) -> _Where:
        return _Where(self.path, place)

    def error(self, fieldname: str | None, message: str) -> TopologyError:
        parts = [display_path(self.path)]
        if self.place:
            parts.append(self.place)
        if fieldname is not None:
            parts.append(f"field '{fieldname}'")
        parts.append(message)
        return TopologyError(": ".join(parts))

    def expected(self, fieldname: str | None, what: str, got: Any) -> TopologyError:
        return self.error(fieldname, f"expected {what}, got {_show(got)}")

    def mapping(self, data: Any, fieldname: str | None, allowed: tuple[str, ...], required=()) -> dict:
        if not isinstance(data, dict):
            raise self.expected(fieldname, "a mapping", data)
        prefix = f"{fieldname}." if fieldname else ""
        for key in data:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                did = f" (did you mean '{prefix}{hint[0]}'?)" if hint else ""
                raise self.error(
                    f"{prefix}{key}", f"unknown field; expected one of {', '.join(allowed)}{did}"
                )
        for key in required:
            if key not in data:
                raise self.error(f"{prefix}{key}", "missing (required)")
        return data

    def one_of(self, data: dict, key: str, choices: tuple[str, ...], default: Any, label: str | None = None):
        value = data.get(key, default)
        if value not in choices:
            raise self.expected(label or key, f"one of {', '.join(choices)}", value)
        return value

    def string(self, data: dict, key: str, label: str | None = None, default: Any = None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.expected(label or key, "a non-empty string", value)
        return value

    def boolean(self, data: dict, key: str, label: str) -> bool:
        value = data.get(key, False)
        if not isinstance(value, bool):
            raise self.expected(label, "true or false", value)
        return value

    def integer(self, data: dict, key: str, label: str, lo: int, hi: int | None, default: Any) -> Any:
        value = data.get(key, default)
        if value is default and default is None:
            return None
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= lo
        if not ok or (hi is not None and value > hi):
            what = f"an integer {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
            raise self.expected(label, what, value)
        return value

    def items(self, data: dict, key: str) -> list:
        value = data.get(key, [])
        if not isinstance(value, list):
            raise self.expected(key, "a list", value)
        return value


def _prefix_or_pattern(w: _Where, data: dict, label: str) -> tuple[str | None, str | None]:
    if ("prefix" in data) == ("pattern" in data):
        raise w.error(label, "expected exactly one of 'prefix' or 'pattern'")
    if "prefix" in data:
        prefix = w.string(data, "prefix", f"{label}.prefix")
        if "*" in prefix or "#" in prefix:
            # The wildcards are reserved for patterns; a prefix holding one can never match as meant.
            raise w.expected(f"{label}.prefix", "no '*' or '#' (use 'pattern' for wildcards)", prefix)
        return prefix, None
    return None, w.string(data, "pattern", f"{label}.pattern")


# ------------------------------------------------------------------------------------------- parsing

_TOP_FIELDS = ("name", "description", "cas", "nodes", "links", "clients")
_ROUTER_FIELDS = ("role", "mode", "addresses", "autolinks", "link_routes", "listeners", "users", "access", "vendor")
_BROKER_FIELDS = ("role", "queues", "listeners", "settings", "broker_connections", "network_connectors", "users",
                  "access", "roles", "permissions", "vendor")
_SETTINGS_FIELDS = ("dead_letter_address", "expiry_address", "max_delivery_attempts", "redelivery_delay_ms",
                    "auto_create")
_ADDRESS_FIELDS = ("prefix", "pattern", "distribution", "priority", "waypoint", "enable_fallback")
_AUTOLINK_FIELDS = ("address", "direction", "connection", "phase", "fallback")
_LINK_ROUTE_FIELDS = ("prefix", "pattern", "direction", "connection")
_LINK_FIELDS = ("from", "to", "role", "via", "cost", "tls", "mechanisms", "user", "password")
_CONNECTION_FIELDS = ("name", "to", "auto_start", "reconnect_attempts", "retry_interval_ms", "user", "password",
                      "elements")
_MIRROR_FIELDS = ("type", "queue_creation", "queue_removal", "message_acknowledgements")
_LINK_ELEMENT_FIELDS = ("type", "address_match", "queue_name")
_NETWORK_FIELDS = ("name", "uri", "to", "duplex", "network_ttl", "user", "password", "queues", "topics", "excluded",
                   "conduit_subscriptions", "retry_interval_ms")


def parse_topology(data: Any, path: str | Path | None = None) -> Topology:
    """Validate already-parsed YAML (a dict) and build the model; raises TopologyError."""
    top = _Where(path)
    data = top.mapping(data, None, _TOP_FIELDS, required=("name", "nodes"))
    name = top.string(data, "name")
    if not _TOPOLOGY_NAME.match(name):
        raise top.expected("name", "lower-case letters, digits, '.', '_' or '-'", name)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise top.expected("description", "a string", description)
    raw_nodes = data["nodes"]
    if not isinstance(raw_nodes, dict) or not raw_nodes:
        raise top.expected("nodes", "a non-empty mapping of node name to node", raw_nodes)
    for node_name in raw_nodes:
        if not isinstance(node_name, str) or not _NAME.match(node_name):
            raise top.expected("nodes", "node names of letters, digits, '_' or '-'", node_name)
        if node_name in RESERVED_LISTENER_NAMES:
            raise top.expected(
                "nodes", f"a node name other than {', '.join(RESERVED_LISTENER_NAMES)}", node_name
            )
    # Nodes first without cross-references, links next, then what refers to links (autolinks, routes,
    # broker connections, network connectors).
    cas = parse_cas(top, data)
    nodes = {n: _parse_node(top.at(f"node {n}"), n, raw, tuple(raw_nodes), cas) for n, raw in raw_nodes.items()}
    links = _parse_links(top, data, nodes, cas)
    for node_name, node in nodes.items():
        _check_connections(top.at(f"node {node_name}"), node, links)
        _check_broker_connections(top.at(f"node {node_name}"), node, nodes, links)
        _check_network_connectors(top.at(f"node {node_name}"), node, nodes, links)
    clients = _parse_clients(top, data, nodes)
    topology = Topology(name, description, nodes, links, clients, Path(path) if path is not None else None, cas)
    _check_shared_listeners(top, topology)
    return topology


def _parse_node(w: _Where, name: str, raw: Any, node_names: tuple[str, ...], cas: tuple[str, ...] = ()) -> Node:
    if not isinstance(raw, dict):
        raise w.expected(None, "a mapping of node fields", raw)
    if "role" not in raw:
        raise w.error("role", f"missing (required); expected one of {', '.join(ROLES)}")
    role = w.one_of(raw, "role", ROLES, None)
    allowed = _ROUTER_FIELDS if role == "router" else _BROKER_FIELDS
    other = _BROKER_FIELDS if role == "router" else _ROUTER_FIELDS
    for key in raw:
        if key not in allowed and key in other:
            raise w.error(key, f"not a field of a {role} node")
    w.mapping(raw, None, allowed)
    node = Node(name=name, role=role, vendor=_node_vendor(w, raw, role))
    security = parse_node_security(w, raw, role, cas)
    node.users, node.access = security.users, security.access
    node.roles, node.permissions = security.roles, security.permissions
    if role == "router":
        node.mode = w.one_of(raw, "mode", MODES, "standalone")
        node.addresses = [
            _parse_address(w, a, f"addresses[{i}]") for i, a in enumerate(w.items(raw, "addresses"))
        ]
        node.autolinks = [
            _parse_autolink(w, a, f"autolinks[{i}]", node_names)
            for i, a in enumerate(w.items(raw, "autolinks"))
        ]
        node.link_routes = [
            _parse_link_route(w, r, f"link_routes[{i}]", node_names)
            for i, r in enumerate(w.items(raw, "link_routes"))
        ]
    else:
        node.queues = [_parse_queue(w, q, f"queues[{i}]") for i, q in enumerate(w.items(raw, "queues"))]
        if "settings" in raw:
            node.settings = _parse_settings(w, raw["settings"])
        node.broker_connections = [
            _parse_broker_connection(w, c, f"broker_connections[{i}]", name, node_names)
            for i, c in enumerate(w.items(raw, "broker_connections"))
        ]
        names = [c.name for c in node.broker_connections]
        for i, connection_name in enumerate(names):
            if connection_name in names[:i]:
                raise w.error(f"broker_connections[{i}].name", f"duplicate broker connection name {connection_name!r}")
        node.network_connectors = [
            _parse_network_connector(w, c, f"network_connectors[{i}]", name, node_names)
            for i, c in enumerate(w.items(raw, "network_connectors"))
        ]
        _check_connection_names(w, node)
    node.listeners = [
        _parse_listener(w, ls, f"listeners[{i}]", node_names)
        for i, ls in enumerate(w.items(raw, "listeners"))
    ]
    names = [ls.name for ls in node.listeners]
    for i, ls_name in enumerate(names):
        if ls_name in names[:i]:
            raise w.error(f"listeners[{i}].name", f"duplicate listener name {ls_name!r}")
    return node


def _node_vendor(w: _Where, raw: dict, role: str) -> str | None:
    """The node's own `vendor` choice, checked as `--peer` checks one (harness/peers/vendors.py)."""
    if "vendor" not in raw:
        return None
    from .peers.vendors import vendor  # the registry: above the model, asked only for a node that names a vendor

    choice = raw["vendor"]
    if not isinstance(choice, str) or not choice.strip():
        raise w.expected("vendor", "a vendor choice such as artemis@2.39.0", choice)
    try:
        vendor(choice.strip(), role)
    except ValueError as exc:
        raise w.error("vendor", str(exc).removeprefix("--peer ")) from None
    return choice.strip()


def _parse_address(w: _Where, raw: Any, label: str) -> AddressSpec:
    w.mapping(raw, label, _ADDRESS_FIELDS)
    prefix, pattern = _prefix_or_pattern(w, raw, label)
    return AddressSpec(
        prefix=prefix,
        pattern=pattern,
        distribution=w.one_of(raw, "distribution", DISTRIBUTIONS, "balanced", f"{label}.distribution"),
        priority=w.integer(raw, "priority", f"{label}.priority", 0, 9, None),
        waypoint=w.boolean(raw, "waypoint", f"{label}.waypoint"),
        enable_fallback=w.boolean(raw, "enable_fallback", f"{label}.enable_fallback"),
    )


def _node_ref(w: _Where, raw: dict, key: str, label: str, node_names: tuple[str, ...]) -> str:
    value = raw.get(key)
    if value not in node_names:
        raise w.expected(label, f"a node name ({', '.join(node_names)})", value)
    return value


def _parse_autolink(w: _Where, raw: Any, label: str, node_names: tuple[str, ...]) -> AutoLink:
    w.mapping(raw, label, _AUTOLINK_FIELDS, required=("address", "direction", "connection"))
    return AutoLink(
        address=w.string(raw, "address", f"{label}.address"),
        direction=w.one_of(raw, "direction", DIRECTIONS, None, f"{label}.direction"),
        connection=_node_ref(w, raw, "connection", f"{label}.connection", node_names),
        phase=w.integer(raw, "phase", f"{label}.phase", 0, 9, None),
        fallback=w.boolean(raw, "fallback", f"{label}.fallback"),
    )


def _parse_link_route(w: _Where, raw: Any, label: str, node_names: tuple[str, ...]) -> LinkRoute:
    w.mapping(raw, label, _LINK_ROUTE_FIELDS, required=("direction", "connection"))
    prefix, pattern = _prefix_or_pattern(w, raw, label)
    return LinkRoute(
        direction=w.one_of(raw, "direction", DIRECTIONS, None, f"{label}.direction"),
        connection=_node_ref(w, raw, "connection", f"{label}.connection", node_names),
        prefix=prefix,
        pattern=pattern,
    )


def _parse_queue(w: _Where, raw: Any, label: str) -> Queue:
    w.mapping(raw, label, ("address", "routing"), required=("address",))
    return Queue(
        address=w.string(raw, "address", f"{label}.address"),
        routing=w.one_of(raw, "routing", QUEUE_ROUTINGS, "anycast", f"{label}.routing"),
    )


def _parse_settings(w: _Where, raw: Any) -> BrokerSettings:
    w.mapping(raw, "settings", _SETTINGS_FIELDS)
    optional = {k: w.string(raw, k, f"settings.{k}") for k in ("dead_letter_address", "expiry_address") if k in raw}
    auto_create = raw.get("auto_create", True)
    if not isinstance(auto_create, bool):
        raise w.expected("settings.auto_create", "true or false", auto_create)
    return BrokerSettings(
        max_delivery_attempts=w.integer(raw, "max_delivery_attempts", "settings.max_delivery_attempts",
                                        -1, 10**6, None),
        redelivery_delay_ms=w.integer(raw, "redelivery_delay_ms", "settings.redelivery_delay_ms", 0, 10**7, 0),
        auto_create=auto_create, **optional)


def _parse_listener(w: _Where, raw: Any, label: str, node_names: tuple[str, ...]) -> Listener:
    w.mapping(raw, label, ("name", "role"), required=("name",))
    name = w.string(raw, "name", f"{label}.name")
    # Implied listeners use these names (see Topology.listeners_for); a clash would open one port twice.
    if not _NAME.match(name) or name in RESERVED_LISTENER_NAMES or name in node_names:
        raise w.expected(
            f"{label}.name",
            "a name of letters, digits, '_' or '-' that is no node name and not "
            + "/".join(RESERVED_LISTENER_NAMES),
            name,
        )
    return Listener(name=name, role=w.one_of(raw, "role", LINK_ROLES, "normal", f"{label}.role"))


def _connection_name(w: _Where, raw: dict, label: str) -> str:
    """The `name` of a broker connection or a network connector."""
    name = w.string(raw, "name", f"{label}.name")
    if not _CONNECTION_NAME.match(name):
        raise w.expected(f"{label}.name", "a name of letters, digits, '_', '-' or '.'", name)
    return name


def _dial_targets(w: _Where, raw: dict, label: str, node_name: str, node_names: tuple[str, ...]) -> list[str]:
    """The nodes a broker connection or a network connector of `node_name` dials: its `to`, one node name or a
    non-empty list of them, each another node of the topology and listed once."""
    to = raw["to"]
    targets = [to] if isinstance(to, str) else to
    if not isinstance(targets, list) or not targets:
        raise w.expected(f"{label}.to", "a node name or a non-empty list of node names", to)
    for i, target in enumerate(targets):
        where = f"{label}.to" if isinstance(to, str) else f"{label}.to[{i}]"
        if target not in node_names:
            raise w.expected(where, f"a node name ({', '.join(node_names)})", target)
        if target == node_name:
            raise w.expected(where, f"a node other than {node_name} itself", target)
        if target in targets[:i]:
            raise w.error(where, f"{target} is listed twice")
    return targets


def _credentials(w: _Where, raw: dict, label: str) -> tuple[str | None, str | None]:
    """(user, password) a connection dials with, each None when not given; a password needs a user."""
    user, password = (_optional_string(w, raw, key, f"{label}.{key}") for key in ("user", "password"))
    if password is not None and user is None:
        raise w.error(f"{label}.password", "given without 'user'")
    return user, password


def _parse_broker_connection(w: _Where, raw: Any, label: str, node_name: str,
                             node_names: tuple[str, ...]) -> BrokerConnection:
    """One item of a broker's `broker_connections`; the nodes it dials are checked against the links later."""
    w.mapping(raw, label, _CONNECTION_FIELDS, required=("name", "to", "elements"))
    name = _connection_name(w, raw, label)
    targets = _dial_targets(w, raw, label, node_name, node_names)
    user, password = _credentials(w, raw, label)
    raw_elements = raw["elements"]
    if not isinstance(raw_elements, list) or not raw_elements:
        raise w.expected(f"{label}.elements", "a non-empty list", raw_elements)
    elements = [_parse_connection_element(w, e, f"{label}.elements[{i}]") for i, e in enumerate(raw_elements)]
    mirrors = [i for i, e in enumerate(elements) if e.type == "mirror"]
    if len(mirrors) > 1:
        raise w.error(f"{label}.elements[{mirrors[1]}]",
                      f"a second mirror (one per connection; the first is elements[{mirrors[0]}])")
    return BrokerConnection(
        name=name,
        to=tuple(targets),
        elements=tuple(elements),
        auto_start=_flag(w, raw, "auto_start", f"{label}.auto_start"),
        reconnect_attempts=w.integer(raw, "reconnect_attempts", f"{label}.reconnect_attempts", -1, None, -1),
        retry_interval_ms=w.integer(raw, "retry_interval_ms", f"{label}.retry_interval_ms", 1, None, 5000),
        user=user,
        password=password,
    )


def _parse_connection_element(w: _Where, raw: Any, label: str) -> BrokerConnectionElement:
    if not isinstance(raw, dict):
        raise w.expected(label, "a mapping", raw)
    if "type" not in raw:
        raise w.error(f"{label}.type", f"missing (required); expected one of {', '.join(CONNECTION_ELEMENTS)}")
    kind = w.one_of(raw, "type", CONNECTION_ELEMENTS, None, f"{label}.type")
    allowed, other = ((_MIRROR_FIELDS, _LINK_ELEMENT_FIELDS) if kind == "mirror"
                      else (_LINK_ELEMENT_FIELDS, _MIRROR_FIELDS))
    for key in raw:
        if key not in allowed and key in other:
            raise w.error(f"{label}.{key}", f"not a field of a {kind} element")
    w.mapping(raw, label, allowed)
    if kind == "mirror":
        return BrokerConnectionElement(
            type=kind,
            **{key: _flag(w, raw, key, f"{label}.{key}") for key in _MIRROR_FIELDS[1:]},
        )
    if ("address_match" in raw) == ("queue_name" in raw):
        raise w.error(label, "expected exactly one of 'address_match' or 'queue_name'")
    if "address_match" in raw:
        match = w.string(raw, "address_match", f"{label}.address_match")
        if any(ch.isspace() for ch in match):
            raise w.expected(f"{label}.address_match", "an address or wildcard match without spaces", match)
        return BrokerConnectionElement(type=kind, address_match=match)
    queue = w.string(raw, "queue_name", f"{label}.queue_name")
    if any(ch.isspace() or ch in "#*" for ch in queue):
        raise w.expected(f"{label}.queue_name", "a queue name without spaces, '#' or '*'", queue)
    return BrokerConnectionElement(type=kind, queue_name=queue)


def _parse_network_connector(w: _Where, raw: Any, label: str, node_name: str,
                             node_names: tuple[str, ...]) -> NetworkConnector:
    """One item of a broker's `network_connectors`; the links it dials over are checked later."""
    w.mapping(raw, label, _NETWORK_FIELDS, required=("name", "to"))
    name = _connection_name(w, raw, label)
    uri = raw.get("uri", "static")
    if uri not in NETWORK_URIS:
        if isinstance(uri, str) and uri.split(":", 1)[0] in NETWORK_URIS and ":" in uri:
            hint = f" (write uri: {uri.split(':', 1)[0]} and list the nodes in 'to')"
        else:
            close = difflib.get_close_matches(str(uri), NETWORK_URIS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise w.error(f"{label}.uri", f"expected one of {', '.join(NETWORK_URIS)}, got {_show(uri)}{hint}")
    targets = _dial_targets(w, raw, label, node_name, node_names)
    if uri == "masterslave" and len(targets) != 2:
        raise w.error(f"{label}.to", f"uri masterslave dials exactly 2 nodes, [primary, standby]; got {len(targets)}")
    user, password = _credentials(w, raw, label)
    conduit = _flag(w, raw, "conduit_subscriptions", f"{label}.conduit_subscriptions")
    if not conduit:
        raise w.error(f"{label}.conduit_subscriptions", "false is not supported yet (only true: the bridge "
                                                        "forwards one subscription per destination)")
    queues, topics, excluded = (_patterns(w, raw, key, f"{label}.{key}", default)
                                for key, default in (("queues", ["#"]), ("topics", []), ("excluded", [])))
    if not queues and not topics:
        raise w.error(label, "forwards nothing: 'queues' and 'topics' are both empty")
    return NetworkConnector(
        name=name,
        to=tuple(targets),
        uri=uri,
        duplex=w.boolean(raw, "duplex", f"{label}.duplex"),
        network_ttl=w.integer(raw, "network_ttl", f"{label}.network_ttl", 1, None, 1),
        user=user,
        password=password,
        queues=queues,
        topics=topics,
        excluded=excluded,
        conduit_subscriptions=conduit,
        retry_interval_ms=w.integer(raw, "retry_interval_ms", f"{label}.retry_interval_ms", 1, None, 1000),
    )


def _patterns(w: _Where, raw: dict, key: str, label: str, default: list) -> tuple[str, ...]:
    """A list of address patterns in Artemis's wildcard syntax, each word non-empty, '*' and '#' whole words and
    '#' only last (so that it means the same in ActiveMQ's syntax, where it becomes '>')."""
    value = raw.get(key, default)
    if not isinstance(value, list):
        raise w.expected(label, "a list of address patterns", value)
    for i, pattern in enumerate(value):
        where = f"{label}[{i}]"
        if not isinstance(pattern, str) or not pattern or any(ch.isspace() for ch in pattern):
            raise w.expected(where, "an address pattern without spaces", pattern)
        words = pattern.split(".")
        bad = next((word for word in words
                    if word == "" or (word not in ("*", "#") and any(ch in word for ch in "*#"))), None)
        if bad is not None:
            raise w.expected(where, "'.'-separated words, with '*' and '#' as whole words"
                             + (" (an empty word)" if bad == "" else ""), pattern)
        if "#" in words[:-1]:
            raise w.expected(where, "'#' only as the last word", pattern)
        if pattern in value[:i]:
            raise w.error(where, f"{pattern!r} is listed twice")
    return tuple(value)


def _check_connection_names(w: _Where, node: Node) -> None:
    """Broker connections and the connections of network connectors are all `<amqp-connection>`s of one
    broker.xml, so their names (NAME, or NAME.NODE for each node of a static connector) must differ."""
    seen: dict[str, str] = {c.name: f"broker_connections[{i}]" for i, c in enumerate(node.broker_connections)}
    for i, connector in enumerate(node.network_connectors):
        label = f"network_connectors[{i}]"
        if any(c.name == connector.name for c in node.network_connectors[:i]):
            raise w.error(f"{label}.name", f"duplicate network connector name {connector.name!r}")
        for connection_name, _targets in connector.connections:
            if connection_name in seen:
                raise w.error(f"{label}.name", f"its connection {connection_name!r} has the name of a connection "
                                               f"of {seen[connection_name]}")
            seen[connection_name] = label


def _flag(w: _Where, raw: dict, key: str, label: str) -> bool:
    """A true-or-false field whose default is true."""
    value = raw.get(key, True)
    if not isinstance(value, bool):
        raise w.expected(label, "true or false", value)
    return value


def _optional_string(w: _Where, raw: dict, key: str, label: str) -> str | None:
    if raw.get(key) is None:
        return None
    return w.string(raw, key, label)


def _parse_links(top: _Where, data: dict, nodes: dict[str, Node], cas: tuple[str, ...] = ()) -> list[Link]:
    links: list[Link] = []
    pairs: dict[tuple[str, str], int] = {}  # (from, to) -> index of the link
    names = tuple(nodes)
    for i, raw in enumerate(top.items(data, "links")):
        w = top.at(f"links[{i}]")
        w.mapping(raw, None, _LINK_FIELDS, required=("from", "to", "role"))
        src = _node_ref(w, raw, "from", "from", names)
        dst = _node_ref(w, raw, "to", "to", names)
        if src == dst:
            raise w.expected("to", "a node other than 'from'", dst)
        role = w.one_of(raw, "role", LINK_ROLES, None)
        via = raw.get("via")
        if via is not None and via not in VIAS:
            raise w.expected("via", "null or one of " + ", ".join(VIAS), via)
        cost = w.integer(raw, "cost", "cost", 1, None, 1)
        if cost != 1 and role != "inter-router":
            raise w.error("cost", f"only inter-router links have a cost (this link is {role})")
        # Router connections are named after the peer node, so a second link between the same two nodes would
        # give both ends two connections with one name. Brokers name their broker connections themselves: two
        # brokers may dial each other (dual mirroring), one link each way.
        if (src, dst) in pairs:
            raise w.error(None, f"second link between {src} and {dst} (first is links[{pairs[(src, dst)]}])")
        if (dst, src) in pairs and not nodes[src].role == nodes[dst].role == "broker":
            raise w.error(None, f"second link between {src} and {dst} (first is links[{pairs[(dst, src)]}]); "
                                "only two brokers may have a link each way")
        pairs[(src, dst)] = i
        _check_link_ends(w, role, nodes[src], nodes[dst])
        links.append(Link(from_=src, to=dst, role=role, via=via, cost=cost, **_link_security(w, raw, cas)))
    return links


def _link_security(w: _Where, raw: dict, cas: tuple[str, ...]) -> dict:
    """A link's `tls`, `mechanisms`, `user` and `password`, as keyword arguments of Link."""
    tls = parse_link_tls(w, raw["tls"], cas) if raw.get("tls") is not None else None
    mechanisms = parse_mechanisms(w, raw, "mechanisms", ["ANONYMOUS"])
    if len(mechanisms) != 1:
        raise w.error("mechanisms", f"a dialler uses one mechanism; got {', '.join(mechanisms)}")
    user, password = (_optional_string(w, raw, key, key) for key in ("user", "password"))
    if password is not None and user is None:
        raise w.error("password", "given without 'user'")
    if mechanisms == ("PLAIN",) and (user is None or password is None):
        raise w.error("mechanisms", "PLAIN needs 'user' and 'password' on the link")
    if mechanisms == ("EXTERNAL",) and tls is None:
        raise w.error("mechanisms", "EXTERNAL needs 'tls' on the link (the identity is the dialler's certificate)")
    return {"tls": tls, "mechanisms": mechanisms, "user": user, "password": password}


def _check_shared_listeners(top: _Where, topology: Topology) -> None:
    """Links landing on one listener share its configuration, so they must agree on it; a link with TLS onto
    a node's own listener (clients) needs that listener to speak TLS with the same CA and name."""
    first: dict[tuple[str, str], tuple[int, Link]] = {}
    for i, link in enumerate(topology.links):
        listener = topology.listener_for_link(link)
        w = top.at(f"links[{i}]")
        if topology._own_listener(link.to, listener):
            own = topology.node(link.to).access.tls
            if link.tls is not None and own is None:
                raise w.error("tls", f"it lands on the {listener} listener of {link.to}, which has no TLS "
                                     f"(add access.tls to node {link.to})")
            if link.tls is not None and (link.tls.ca, link.tls.hostname) != (own.ca, own.hostname):
                raise w.error("tls", f"ca/hostname must be those of {link.to}'s access.tls ({own.ca}, {own.hostname}): "
                                     "it is the certificate that listener presents")
            continue
        key = (link.to, listener)
        if key not in first:
            first[key] = (i, link)
            continue
        j, other = first[key]
        mine = (link.tls.listener_side() if link.tls else None, link.mechanisms)
        theirs = (other.tls.listener_side() if other.tls else None, other.mechanisms)
        if mine != theirs:
            raise w.error("tls", f"it shares the {listener} listener of {link.to} with links[{j}], so its tls "
                                 "(ca, hostname) and mechanisms must be the same")


def _check_link_ends(w: _Where, role: str, src: Node, dst: Node) -> None:
    def mode(n: Node) -> str:
        return n.mode if n.role == "router" else "broker"

    if role == "inter-router" and not (mode(src) == mode(dst) == "interior"):
        raise w.error(
            "role",
            f"inter-router links join interior routers; {src.name} is {mode(src)}, {dst.name} is {mode(dst)}",
        )
    if role == "edge" and not (mode(src) == "edge" and mode(dst) == "interior"):
        raise w.error(
            "role",
            f"edge links go from an edge router to an interior router; {src.name} is "
            f"{mode(src)}, {dst.name} is {mode(dst)}",
        )
    if role == "route-container" and "router" not in (src.role, dst.role):
        raise w.error(
            "role", f"route-container links need a router at one end; {src.name} and {dst.name} are brokers"
        )


def _check_connections(w: _Where, node: Node, links: list[Link]) -> None:
    """Autolinks ride a route-container connection to the node they name. A link route may also sit on a
    router without that connection (003 §12.2.3 gives every router the same link-route configuration; the
    router holding the connection advertises it), but must name a node some router reaches that way."""
    def linked_to(names):
        return {(link.to if link.from_ in names else link.from_) for link in links
                if link.role == "route-container" and (link.from_ in names or link.to in names)}
    own = linked_to({node.name})
    anywhere = {link.to for link in links if link.role == "route-container"} | {
        link.from_ for link in links if link.role == "route-container"}
    refs = [(f"autolinks[{i}]", a.connection, own) for i, a in enumerate(node.autolinks)]
    refs += [(f"link_routes[{i}]", r.connection, anywhere - {node.name}) for i, r in enumerate(node.link_routes)]
    for label, target, allowed in refs:
        if target not in allowed:
            choices = ", ".join(sorted(allowed)) or "none in this topology"
            raise w.expected(f"{label}.connection", f"a node reached by a route-container link ({choices})", target)


def _check_broker_connections(w: _Where, node: Node, nodes: dict[str, Node], links: list[Link]) -> None:
    """A broker connection dials each node it names over a link `from: <this broker>, to: <that node>` of role
    normal (the link gives the port, and the fault proxy when `via: proxy`). A mirror replays this broker's
    events on other brokers; a peer asks a router to treat the broker's queues as waypoints (002: "Do not use
    this feature to connect to another broker")."""
    outbound = {link.to: link for link in links if link.from_ == node.name}
    for i, connection in enumerate(node.broker_connections):
        label = f"broker_connections[{i}]"
        for j, target in enumerate(connection.to):
            where = f"{label}.to" if len(connection.to) == 1 else f"{label}.to[{j}]"
            _check_dial_link(w, where, node.name, target, outbound, "a broker connection")
        roles = {target: nodes[target].role for target in connection.to}
        for k, element in enumerate(connection.elements):
            need = {"mirror": "broker", "peer": "router"}.get(element.type)
            wrong = [target for target, role in roles.items() if need is not None and role != need]
            if wrong:
                raise w.error(f"{label}.elements[{k}].type",
                              f"a {element.type} connects to {need}s only; {', '.join(wrong)} "
                              f"{'is a' if len(wrong) == 1 else 'are'} {roles[wrong[0]]}"
                              f"{'' if len(wrong) == 1 else 's'}")


def _check_network_connectors(w: _Where, node: Node, nodes: dict[str, Node], links: list[Link]) -> None:
    """A network connector dials each broker it names over a link `from: <this broker>, to: <that broker>` of
    role normal (the port, and the fault proxy when `via: proxy`); a duplex connector needs no link back."""
    outbound = {link.to: link for link in links if link.from_ == node.name}
    for i, connector in enumerate(node.network_connectors):
        label = f"network_connectors[{i}]"
        for j, target in enumerate(connector.to):
            where = f"{label}.to" if len(connector.to) == 1 else f"{label}.to[{j}]"
            if nodes[target].role != "broker":
                raise w.error(where, f"{target} is a {nodes[target].role}; a network connector joins brokers")
            _check_dial_link(w, where, node.name, target, outbound, "a network connector")


def _check_dial_link(w: _Where, where: str, node_name: str, target: str, outbound: dict[str, Link],
                     what: str) -> None:
    """`what` (a broker connection, a network connector) of `node_name` dials `target` over the link from
    `node_name` to `target` in `outbound` (target -> link), which must be of role normal."""
    link = outbound.get(target)
    if link is None:
        raise w.error(where, f"no link from {node_name} to {target} in 'links' (add "
                             f"{{from: {node_name}, to: {target}, role: normal}})")
    if link.role != "normal":
        raise w.error(where, f"the link {link.name} has role {link.role}; {what} dials over a link of role normal")


def _parse_clients(top: _Where, data: dict, nodes: dict[str, Node]) -> dict[str, str]:
    raw = data.get("clients", {})
    if not isinstance(raw, dict):
        raise top.expected("clients", "a mapping of attach point to node name", raw)
    clients = {}
    for key, target in raw.items():
        if not isinstance(key, str) or not key:
            raise top.expected("clients", "attach point names that are strings", key)
        if target not in nodes:
            raise top.expected(f"clients.{key}", f"a node name ({', '.join(nodes)})", target)
        clients[key] = target
    return clients
