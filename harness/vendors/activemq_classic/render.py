"""Render one broker node of a topology as an ActiveMQ Classic 5.x/6.x `activemq.xml`.

The file is complete (a Spring `<beans>` document holding one `<broker>`), for the `apache/activemq-classic`
image's `conf/activemq.xml` or a native install's. It carries only what the topology says:

* `<broker brokerName="NODE" persistent=".." dataDirectory="..">`: the node name (brokers of one network must
  have different names), persistence and the data directory from the broker settings (`persistence`, and the
  parent of `journal_directory`, as broker.xml's data directories);
* `<destinationPolicy>`: the `dead_letter_address` setting as the shared dead-letter queue of every queue
  (expired messages too when `expiry_address` is the same queue: Classic has no other expiry address). The
  other broker settings (delivery attempts, journal sync) are left at Classic's defaults;
* `useJmx="false"`: no MBeans (the harness's launcher answers queue statistics), no web console (none is
  configured: Jetty is not even on the class path);
* `<destinations>`: each topology queue as a `<queue>` (anycast) or a `<topic>` (multicast);
* `<networkConnectors>` (004_05e35cdd7bc39ede.txt): one `<networkConnector>` per network connector of the node,
  `uri="static:(tcp://H:P,...)"` (a bridge to each broker listed) or `uri="masterslave:(tcp://H:P,tcp://H:P)"`
  (primary, then standby), both followed by `?initialReconnectDelay=N&useExponentialBackOff=false` (the
  topology's `retry_interval_ms`, a constant delay as Artemis's `retry-interval`), with `duplex`,
  `networkTTL`, `conduitSubscriptions` and `userName`/`password` when set, holding
  `<dynamicallyIncludedDestinations>` (the `queues` as `<queue>`, the `topics` as `<topic>`) and
  `<excludedDestinations>` (each `excluded` pattern as both a `<queue>` and a `<topic>`). A topology never
  gives a connector nothing to include, so the list is never empty (an empty list would forward everything);
* `<plugins>` when the node's `access.authenticate` is on (SASL PLAIN only, as on Artemis): a
  `simpleAuthenticationPlugin` with the node's users, anonymous access off, each user in the groups of the
  roles that name it and in `interop-users`; an `authorizationPlugin` whose entries give, per permission
  pattern (as a queue and as a topic; `a.#` also as `a`), `consume` roles ActiveMQ's `read`, `send` roles its
  `write`, and the create/delete/manage roles its `admin` (creating a destination). ActiveMQ takes the union
  of every entry that matches where Artemis takes the most specific. Every user may use the advisory topics
  (`ActiveMQ.Advisory.>`), which consumers and network bridges need. Without permissions every user may do
  everything, as on Artemis;
* `<sslContext>` when the node's clients listener is TLS (`access.tls`): PKCS#12 key and trust stores the
  provider makes from the run's test PKI; that listener is then `amqp+ssl://`, with `needClientAuth` or
  `wantClientAuth` for `client_certs` required or optional;
* `<transportConnectors>`: one per listener; the clients listener is named `amqp`. A node that another broker's
  network connector dials must also speak OpenWire there (Classic's network bridges are OpenWire, and the link
  names one port), so its clients listener is an `auto://` transport limited to AMQP and OpenWire
  (`auto.protocols=amqp,default`); every other listener is `amqp://`.

Patterns are written in Artemis's wildcard syntax in topologies and translated to ActiveMQ's: '#' becomes '>',
'*' and '.' stay. ActiveMQ's `a.>` needs at least one word after `a.` where Artemis's `a.#` also matches `a`
itself, so a topology that means both lists both (`["prices.#", "prices"]`); a bare `#` is `>`, everything.

Children of `<broker>` are written in alphabetical order, which older ActiveMQ schemas require.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from harness.topology import CLIENT_LISTENER, NetworkConnector, Node, Topology, display_path

from ..artemis.render import ALL_USERS_ROLE, broker_settings, dial_endpoints
from ...peers.provider import RenderError
from ...peers.java_stores import TlsStores

SPRING_BEANS = "http://www.springframework.org/schema/beans"
ACTIVEMQ_CORE = "http://activemq.apache.org/schema/core"


def activemq_pattern(pattern: str) -> str:
    """An Artemis-style address pattern ('#' the rest, '*' one word) in ActiveMQ's syntax ('>' and '*')."""
    return ".".join(">" if word == "#" else word for word in pattern.split("."))


def render_activemq_xml(
    topology: Topology,
    node_name: str,
    ports: dict[str, int],
    settings: dict | None = None,
    *,
    host: str = "0.0.0.0",
    connect_ports: dict[str, int] | None = None,
    dial_host: str = "127.0.0.1",
    tls_stores: TlsStores | None = None,
) -> str:
    """activemq.xml text for broker `node_name`.

    `ports` maps each listener name of `topology.listeners_for(node_name)` ("clients" always) to its port;
    `host` is where the transports bind (0.0.0.0 inside a container). `connect_ports` maps each broker this one
    dials (the `to` nodes of its network connectors) to the port to dial on `dial_host`: the node's clients
    listener, or the fault proxy's port when the link goes `via: proxy`. `tls_stores`: the key and trust stores
    of a node whose `access.tls` makes its clients listener TLS (the provider makes them from the run's PKI).
    """
    node = topology.node(node_name)
    if node.role != "broker":
        raise RenderError(f"{node_name}: is a {node.role}; activemq.xml is rendered for brokers only")
    if node.broker_connections:
        raise RenderError(f"{node_name}: broker connections (Artemis's <amqp-connection>) have no ActiveMQ Classic "
                          "form; Classic joins brokers with network connectors")
    s = broker_settings(settings, node_name)
    bool_text = {True: "true", False: "false"}

    dialled = any(node_name in c.to for other in topology.nodes_with_role("broker")
                  for c in other.network_connectors)
    transports = []
    for listener in topology.listeners_for(node_name):
        if listener.name not in ports:
            raise RenderError(f"{node_name}: no port given for transport {listener.name!r} (ports)")
        port = ports[listener.name]
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise RenderError(f"{node_name}: transport {listener.name!r}: expected a port 0-65535, got {port!r}")
        if listener.name == CLIENT_LISTENER and node.access.tls is not None:
            uri = _tls_uri(node, host, port, dialled, tls_stores)
            attrs = [("name", "amqp"), ("uri", uri)]
        elif listener.name == CLIENT_LISTENER:
            uri = (f"auto://{host}:{port}?auto.protocols=amqp,default" if dialled else f"amqp://{host}:{port}")
            attrs = [("name", "amqp"), ("uri", uri)]
        else:
            attrs = [("name", listener.name), ("uri", f"amqp://{host}:{port}")]
        transports.append(f"      <transportConnector {_attributes(attrs)}/>")

    destinations = []
    seen: set[str] = set()
    for i, queue in enumerate(node.queues):
        name = queue.address
        if not name or any(ch in name for ch in "#*>") or any(ch.isspace() for ch in name):
            raise RenderError(f"{node_name}: queues[{i}].address {name!r}: expected a name without spaces, "
                              "'#', '*' or '>'")
        if name in seen:
            continue
        seen.add(name)
        kind = "queue" if queue.routing == "anycast" else "topic"
        destinations.append(f"      <{kind} {_attributes([('physicalName', name)])}/>")

    connectors = []
    for connector in node.network_connectors:
        connectors += _network_connector(node, connector, connect_ports or {}, dial_host)

    journal = s["journal_directory"]
    data = journal.rsplit("/", 1)[0] if "/" in journal else "data"
    broker_attrs = [("xmlns", ACTIVEMQ_CORE), ("brokerName", node_name),
                    ("persistent", bool_text[s["persistence"]]), ("dataDirectory", data),
                    # No JMX: the harness reads queue statistics from its launcher (native.py), and
                    # MBeans for every destination and connection cost heap and CPU on a shared machine.
                    ("useJmx", "false")]
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<!-- activemq.xml for broker {escape(node_name)} of topology '{escape(topology.name)}'.",
        f"     Generated from {escape(display_path(topology.path))} by harness.vendors.activemq_classic.render;"
        " change the topology, not this file. -->",
        f'<beans xmlns="{SPRING_BEANS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"',
        f'       xsi:schemaLocation="{SPRING_BEANS} {SPRING_BEANS}/spring-beans.xsd',
        f'                           {ACTIVEMQ_CORE} {ACTIVEMQ_CORE}/activemq-core.xsd">',
        f"  <broker {_attributes(broker_attrs)}>",
        *_destination_policy(s),
        *(["    <destinations>", *destinations, "    </destinations>"] if destinations else []),
        *(["    <networkConnectors>", *connectors, "    </networkConnectors>"] if connectors else []),
        *_plugins(node),
        *(_ssl_context(tls_stores) if node.access.tls is not None else []),
        "    <transportConnectors>",
        *transports,
        "    </transportConnectors>",
        "  </broker>",
        "</beans>",
        "",
    ]
    return "\n".join(lines)


def _network_connector(node: Node, connector: NetworkConnector, connect_ports: dict[str, int],
                       dial_host: str) -> list[str]:
    """One `<networkConnector>`: this broker forwards to the consumers of the `to` brokers (and, duplex, they
    to its own over the same bridge) the destinations it includes dynamically, as they gain consumers."""
    what = f"network connector {connector.name!r}"
    endpoints = [f"tcp://{e}" for e in dial_endpoints(node, what, connector.to, connect_ports, dial_host)]
    options = f"initialReconnectDelay={connector.retry_interval_ms}&useExponentialBackOff=false"
    uri = f"{connector.uri}:({','.join(endpoints)})?{options}"
    bool_text = {True: "true", False: "false"}
    attrs = [("name", connector.name), ("uri", uri), ("duplex", bool_text[connector.duplex]),
             ("networkTTL", str(connector.network_ttl)),
             ("conduitSubscriptions", bool_text[connector.conduit_subscriptions])]
    if connector.user is not None:
        attrs.append(("userName", connector.user))
        if connector.password is not None:
            attrs.append(("password", connector.password))

    def destination(kind: str, pattern: str) -> str:
        return f"          <{kind} {_attributes([('physicalName', activemq_pattern(pattern))])}/>"

    lines = [f"      <networkConnector {_attributes(attrs)}>",
             "        <dynamicallyIncludedDestinations>",
             *(destination("queue", p) for p in connector.queues),
             *(destination("topic", p) for p in connector.topics),
             "        </dynamicallyIncludedDestinations>"]
    if connector.excluded:
        lines += ["        <excludedDestinations>",
                  *(destination(kind, p) for p in connector.excluded for kind in ("queue", "topic")),
                  "        </excludedDestinations>"]
    lines.append("      </networkConnector>")
    return lines


def _destination_policy(s: dict) -> list[str]:
    """`<destinationPolicy>` for every queue: the topology's dead-letter address as the one shared dead-letter
    queue, for persistent and non-persistent messages alike (ActiveMQ's default keeps only persistent ones and
    calls its queue ActiveMQ.DLQ). Expired messages go there only when the expiry address is the same queue:
    ActiveMQ has no separate expiry address, so otherwise they are dropped. Nothing when there is no
    dead-letter address (ActiveMQ's own default then)."""
    dla = s["dead_letter_address"]
    if not dla:
        return []
    expired = "true" if s["expiry_address"] == dla else "false"
    return ["    <destinationPolicy>",
            "      <policyMap>",
            "        <policyEntries>",
            '          <policyEntry queue=">">',
            "            <deadLetterStrategy>",
            f'              <sharedDeadLetterStrategy processNonPersistent="true" processExpired="{expired}">',
            "                <deadLetterQueue>",
            f"                  <queue {_attributes([('physicalName', dla)])}/>",
            "                </deadLetterQueue>",
            "              </sharedDeadLetterStrategy>",
            "            </deadLetterStrategy>",
            "          </policyEntry>",
            "        </policyEntries>",
            "      </policyMap>",
            "    </destinationPolicy>"]




_CLIENT_AUTH = {"none": "", "optional": "?wantClientAuth=true", "required": "?needClientAuth=true"}


def _tls_uri(node: Node, host: str, port: int, dialled: bool, stores: TlsStores | None) -> str:
    """`amqp+ssl://` for a TLS-only clients listener, asking for client certificates as `client_certs` says."""
    tls = node.access.tls
    if stores is None:
        raise RenderError(f"{node.name}: access.tls needs the key and trust stores (tls_stores) made from the "
                          "run's test PKI")
    if not tls.require:
        raise RenderError(f"{node.name}: access.tls.require false (TLS and plain TCP on one port) is not rendered "
                          "for ActiveMQ Classic")
    if dialled:
        raise RenderError(f"{node.name}: a TLS clients listener that other brokers' network connectors dial is not "
                          "rendered for ActiveMQ Classic (its bridges speak OpenWire)")
    return f"amqp+ssl://{host}:{port}{_CLIENT_AUTH[tls.client_certs]}"


def _ssl_context(stores: TlsStores) -> list[str]:
    attrs = [("keyStore", stores.key_store), ("keyStorePassword", stores.password), ("keyStoreType", "PKCS12"),
             ("trustStore", stores.trust_store), ("trustStorePassword", stores.password),
             ("trustStoreType", "PKCS12")]
    return ["    <sslContext>", f"      <sslContext {_attributes(attrs)}/>", "    </sslContext>"]


# ActiveMQ's three permissions, from the topology's Artemis-style operations.
_ACL = (("read", ("consume",)), ("write", ("send",)),
        ("admin", ("create_address", "create_durable_queue", "create_non_durable_queue", "delete_address", "manage")))


def _plugins(node: Node) -> list[str]:
    """`<plugins>`: authentication and authorization when the node authenticates its clients, else nothing."""
    if not node.access.authenticate:
        return []
    other = [m for m in node.access.mechanisms if m != "PLAIN"]
    if other:
        raise RenderError(f"{node.name}: access.mechanisms: an ActiveMQ broker authenticates with PLAIN only here "
                          f"(its simple authentication plugin), got {', '.join(other)}")
    users = []
    for user, password in node.users.items():
        groups = [ALL_USERS_ROLE, *(role for role, members in node.roles.items() if user in members)]
        users.append(f"          <authenticationUser "
                     f"{_attributes([('username', user), ('password', password), ('groups', ','.join(groups))])}/>")
    entries = []
    everything = [(acl, ALL_USERS_ROLE) for acl, _ in _ACL]
    if not node.permissions:
        entries += [_entry(kind, ">", everything) for kind in ("queue", "topic")]
    for permission in node.permissions:
        acls = [(acl, ",".join(dict.fromkeys(r for op in ops for r in permission.roles_for(op)))) for acl, ops in _ACL]
        acls = [(acl, roles) for acl, roles in acls if roles]
        if not acls:
            continue
        patterns = [activemq_pattern(permission.match)]
        if permission.match.endswith(".#"):  # Artemis's a.# matches a itself; ActiveMQ's a.> does not
            patterns.append(permission.match[:-2])
        entries += [_entry(kind, pattern, acls) for pattern in patterns for kind in ("queue", "topic")]
    entries.append(_entry("topic", "ActiveMQ.Advisory.>", everything))
    return ["    <plugins>",
            '      <simpleAuthenticationPlugin anonymousAccessAllowed="false">',
            "        <users>", *users, "        </users>",
            "      </simpleAuthenticationPlugin>",
            "      <authorizationPlugin>",
            "        <map>",
            "          <authorizationMap>",
            "            <authorizationEntries>", *entries, "            </authorizationEntries>",
            "          </authorizationMap>",
            "        </map>",
            "      </authorizationPlugin>",
            "    </plugins>"]


def _entry(kind: str, pattern: str, acls: list[tuple[str, str]]) -> str:
    return f"              <authorizationEntry {_attributes([(kind, pattern), *acls])}/>"


def _attributes(attrs: list[tuple[str, str]]) -> str:
    return " ".join(f"{key}={quoteattr(value)}" for key, value in attrs)
