"""Render one broker node of a topology as an ActiveMQ Artemis 2.x `broker.xml`.

The same file is read by a real Artemis (native or the `apache/activemq-artemis` image, mounted at
`etc-override/broker.xml`) and by the reference broker (`interop broker -c broker.xml`, which reads a subset
of the format), so it sticks to elements both understand:

* `name`, `persistence-enabled`, `journal-type` (NIO: no libaio needed), `journal-directory` and the other data
  directories, `journal-datasync`, `journal-sync-non-transactional` (only when false: the `no-journal-sync` fault),
  `security-enabled` false;
* one acceptor per listener, `tcp://HOST:PORT?protocols=AMQP`;
* `address-settings` for `#`: dead-letter and expiry addresses, max-delivery-attempts, redelivery-delay,
  auto-create of queues and addresses, and ANYCAST as the default routing type of auto-created addresses and
  queues (Artemis's own default is MULTICAST; topologies say `routing:` explicitly, and a name nobody declared
  is a queue, as on every other vendor of the matrix);
* `addresses`: each topology queue as an address with an `<anycast>` queue of the same name, or as a
  `<multicast/>` address whose subscribers get a queue each; the dead-letter and expiry addresses as anycast
  queues;
* `broker-connections`: one `<amqp-connection>` per broker connection of the node (002_f23507c2891d6d06.txt),
  `uri="tcp://HOST:PORT#tcp://HOST:PORT,..."` (the alternates after `#`), every attribute written even when it is
  Artemis's default, holding `<mirror>` (its three flags always written), `<sender>`, `<receiver>` and
  `<peer>`. The mirror's store-and-forward queue `$ACTIVEMQ_ARTEMIS_MIRROR_<name>` is not declared: the broker
  creates it;
* network connectors (004_05e35cdd7bc39ede.txt, ActiveMQ's network of brokers) as Artemis AMQP federation over
  broker connections, inside the same `<broker-connections>`: one `<amqp-connection>` named `NAME.NODE` per
  node of a `static` connector, one named `NAME` with the standby after `#` for a `masterslave` one, each
  holding a `<federation>`. A *remote* policy (`<remote-queue-policy>` for the connector's `queues`,
  `<remote-address-policy>` for its `topics`) asks the dialled broker to pull from this one when it has
  consumers: messages flow to where the consumers are, as they do over an ActiveMQ network connector from this
  broker. A *local* policy makes this broker pull from the dialled one when it has consumers: the duplex
  direction, so a duplex connector writes the same policies again as `<local-queue-policy>` and
  `<local-address-policy>` (names ending `-back`). `network_ttl` becomes the address policy's `max-hops` and,
  above 1, the queue policy's `include-federated="true"` (messages that came by federation go on).

Broker settings are shared with the RabbitMQ renderer (`broker_settings`), so one topology means the same on
every broker vendor wherever the vendor can express it.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from ...peers.provider import NodeSetup, RenderError
from ...tlsca import TestPki
from ...topology import NetworkConnector, Node, Topology, display_path


# Artemis's stock broker.xml values: what a broker of the matrix does when a case does not ask otherwise.
BROKER_DEFAULTS: dict = {
    "dead_letter_address": "DLQ",  # rejected and over-delivered messages go here; None: dropped
    "expiry_address": "ExpiryQueue",  # expired messages go here; None: dropped
    "max_delivery_attempts": 10,  # deliveries before a message is dead-lettered; -1: unlimited
    "redelivery_delay_ms": 0,
    "auto_create": True,  # queues and addresses created when a link attaches to an unknown name
    "persistence": True,
    "journal_directory": "data/journal",
    "journal_datasync": True,  # fsync before a durable message is accepted
    # false: a non-transactional durable send or acknowledgement is answered without waiting for its journal
    # record (Artemis's journal-sync-non-transactional); the matrix's `broker:no-journal-sync` fault sets it
    "journal_sync_non_transactional": True,
    "queue_type": "classic",  # RabbitMQ only: classic or quorum
}
QUEUE_TYPES = ("classic", "quorum")


def broker_settings(settings: dict | None, node_name: str = "?") -> dict:
    """`settings` over BROKER_DEFAULTS; an unknown key or a wrong type is a one-line RenderError."""
    merged = dict(BROKER_DEFAULTS)
    for key, value in (settings or {}).items():
        if key not in BROKER_DEFAULTS:
            raise RenderError(f"{node_name}: unknown broker setting {key!r} "
                              f"(expected one of: {', '.join(BROKER_DEFAULTS)})")
        default = BROKER_DEFAULTS[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = value is None or isinstance(value, str) and value != ""
            if key in ("journal_directory", "queue_type"):
                ok = isinstance(value, str) and value != ""
        if not ok:
            raise RenderError(f"{node_name}: broker setting {key}: expected a value like {default!r}, got {value!r}")
        merged[key] = value
    if merged["queue_type"] not in QUEUE_TYPES:
        raise RenderError(f"{node_name}: broker setting queue_type: expected one of {', '.join(QUEUE_TYPES)}, "
                          f"got {merged['queue_type']!r}")
    if merged["max_delivery_attempts"] < -1 or merged["max_delivery_attempts"] == 0:
        raise RenderError(f"{node_name}: broker setting max_delivery_attempts: expected -1 (unlimited) or >= 1, "
                          f"got {merged['max_delivery_attempts']}")
    if merged["redelivery_delay_ms"] < 0:
        raise RenderError(f"{node_name}: broker setting redelivery_delay_ms: expected >= 0, "
                          f"got {merged['redelivery_delay_ms']}")
    return merged


def _check_name(node_name: str, label: str, name: str) -> None:
    # Artemis uses '.' as its word separator and '#'/'*' as wildcards in address-setting matches; a declared
    # address holding a wildcard would mean something else in each vendor.
    if not name or any(ch in name for ch in "#*") or any(ch.isspace() for ch in name):
        raise RenderError(f"{node_name}: {label} {name!r}: expected a name without spaces, '#' or '*'")


def render_broker_xml(
    topology: Topology,
    node_name: str,
    acceptor_ports: dict[str, int],
    settings: dict | None = None,
    *,
    host: str = "127.0.0.1",
    connect_ports: dict[str, int] | None = None,
    dial_host: str = "127.0.0.1",
    pki: TestPki | None = None,
    management_port: int | None = None,
    management_role: str | None = None,
    sasl_mechanisms: bool = False,
) -> str:
    """broker.xml text for broker `node_name`.

    `acceptor_ports` maps each listener name of `topology.listeners_for(node_name)` ("clients" always) to its
    port; 0 asks a broker that reports its bound port to pick one. `host` is where acceptors bind: loopback
    for local processes, 0.0.0.0 inside a container.
    `connect_ports` maps each node this broker dials (the `to` nodes of its broker connections and network
    connectors) to the port to dial on `dial_host`: the node's listener, or the fault proxy's port when the link
    goes `via: proxy` (launch.Wiring.connect_ports[node_name]).
    `pki` gives the certificates of listeners with TLS (`access.tls`); needed when the node has one.
    `management_port` adds a plain AMQP acceptor on `host` that no topology names, for a harness that manages
    a real Artemis over AMQP messages (harness/vendors/artemis/native.py); `management_role`, on a node that
    authenticates, is the role allowed to do that: every permission on the management address and the reply
    queues under its name (`activemq.management.#`), and nothing elsewhere. `sasl_mechanisms` writes a listener's
    mechanisms where it authenticates (`saslMechanisms=PLAIN`): Artemis offers ANONYMOUS too unless told, and
    then refuses the anonymous client only after its open. The reference broker gets the first two (its peer
    manages it over AMQP the same way, harness/vendors/reference/broker.py), never the third.
    """
    node = topology.node(node_name)
    if node.role != "broker":
        raise RenderError(f"{node_name}: is a {node.role}; broker.xml is rendered for brokers only")
    s = broker_settings(settings, node_name)

    acceptors = []
    for listener in topology.listeners_for(node_name):
        if listener.name not in acceptor_ports:
            raise RenderError(f"{node_name}: no port given for acceptor {listener.name!r} (acceptor_ports)")
        port = acceptor_ports[listener.name]
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise RenderError(f"{node_name}: acceptor {listener.name!r}: expected a port 0-65535, got {port!r}")
        url = f"tcp://{host}:{port}?protocols=AMQP" + _tls_params(topology, node_name, listener.name, pki)
        authenticate, mechanisms = topology.listener_mechanisms(node_name, listener.name)
        if sasl_mechanisms and authenticate:
            url += f";saslMechanisms={','.join(mechanisms)}"
        acceptors.append(f'      <acceptor name={quoteattr(listener.name)}>{escape(url)}</acceptor>')
    if management_port is not None:
        acceptors.append(f'      <acceptor name="{MANAGEMENT_ACCEPTOR}">'
                         f'{escape(f"tcp://{host}:{management_port}?protocols=AMQP")}</acceptor>')

    addresses: list[str] = []
    declared: set[str] = set()
    for label, name in (("dead_letter_address", s["dead_letter_address"]), ("expiry_address", s["expiry_address"])):
        if name and name not in declared:
            _check_name(node_name, label, name)
            declared.add(name)
            addresses.append(_anycast(name))
    for i, queue in enumerate(node.queues):
        _check_name(node_name, f"queues[{i}].address", queue.address)
        if queue.address in declared:
            continue  # a topology may name the dead-letter queue itself; declare it once
        declared.add(queue.address)
        if queue.routing == "anycast":
            addresses.append(_anycast(queue.address))
        else:
            addresses.append(f"      <address name={quoteattr(queue.address)}>\n"
                             f"        <multicast/>\n"
                             f"      </address>")

    auto = "true" if s["auto_create"] else "false"
    setting = ["      <address-setting match=\"#\">"]
    if s["dead_letter_address"]:
        setting.append(f"        <dead-letter-address>{escape(s['dead_letter_address'])}</dead-letter-address>")
    if s["expiry_address"]:
        setting.append(f"        <expiry-address>{escape(s['expiry_address'])}</expiry-address>")
    setting += [
        f"        <redelivery-delay>{s['redelivery_delay_ms']}</redelivery-delay>",
        f"        <max-delivery-attempts>{s['max_delivery_attempts']}</max-delivery-attempts>",
        f"        <auto-create-queues>{auto}</auto-create-queues>",
        f"        <auto-create-addresses>{auto}</auto-create-addresses>",
        "        <default-address-routing-type>ANYCAST</default-address-routing-type>",
        "        <default-queue-routing-type>ANYCAST</default-queue-routing-type>",
        "      </address-setting>",
    ]
    connections = _broker_connections(node, connect_ports or {}, dial_host,
                                      lambda target: _dial_tls(topology, node_name, target, pki))
    journal = s["journal_directory"]
    data = journal.rsplit("/", 1)[0] if "/" in journal else "data"
    bool_text = {True: "true", False: "false"}
    lines = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        f"<!-- broker.xml for broker {escape(node_name)} of topology '{escape(topology.name)}'.",
        f"     Generated from {escape(display_path(topology.path))} by harness.vendors.artemis.render;"
        " change the topology, not this file. -->",
        '<configuration xmlns="urn:activemq" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"',
        '               xsi:schemaLocation="urn:activemq /schema/artemis-configuration.xsd">',
        '  <core xmlns="urn:activemq:core" xsi:schemaLocation="urn:activemq:core ">',
        f"    <name>{escape(node_name)}</name>",
        f"    <persistence-enabled>{bool_text[s['persistence']]}</persistence-enabled>",
        "    <journal-type>NIO</journal-type>",
        f"    <journal-directory>{escape(journal)}</journal-directory>",
        f"    <bindings-directory>{escape(data)}/bindings</bindings-directory>",
        f"    <paging-directory>{escape(data)}/paging</paging-directory>",
        f"    <large-messages-directory>{escape(data)}/large-messages</large-messages-directory>",
        f"    <journal-datasync>{bool_text[s['journal_datasync']]}</journal-datasync>",
        *([] if s["journal_sync_non_transactional"] else ["    <journal-sync-non-transactional>false"
                                                          "</journal-sync-non-transactional>"]),
        *_security(node, management_role, federation_users(topology, node_name)),
        "    <acceptors>",
        *acceptors,
        "    </acceptors>",
        "    <address-settings>",
        *setting,
        "    </address-settings>",
        "    <addresses>",
        *addresses,
        "    </addresses>",
        *connections,
        "  </core>",
        "</configuration>",
        "",
    ]
    return "\n".join(lines)


# Topology permission names -> Artemis's permission types.
PERMISSION_TYPES = {"send": "send", "consume": "consume", "create_address": "createAddress",
                    "create_durable_queue": "createDurableQueue", "create_non_durable_queue": "createNonDurableQueue",
                    "delete_address": "deleteAddress", "manage": "manage"}
# The role every user gets when a node authenticates but declares no permissions: authentication only, as an
# Artemis whose `#` setting gives everything to everyone logged in.
ALL_USERS_ROLE = "interop-users"
USERS_FILE, ROLES_FILE = "artemis-users.properties", "artemis-roles.properties"
MANAGEMENT_ADDRESS = "activemq.management"  # Artemis's default management-address
FEDERATION_ADDRESS = "$ACTIVEMQ_ARTEMIS_FEDERATION"  # where Artemis federation's control and event links live
FEDERATION_ROLE = "interop-federation"  # the users network connectors dial a node as (federation_users)
MANAGEMENT_ACCEPTOR = "interop-management"


def federation_users(topology: Topology, node_name: str) -> list[str]:
    """This node's users that other brokers' network connectors dial it as, where the node grants permissions
    by address: Artemis federation, which the network connectors are rendered as, opens its control and event
    links under `$ACTIVEMQ_ARTEMIS_FEDERATION`, and its user needs every permission there (Artemis's
    AMQPFederationConstants), as an ActiveMQ network user needs its advisory topics. Without it the dialled
    broker refuses the control link and nothing is forwarded, whatever the topology grants on its queues."""
    node = topology.node(node_name)
    if not node.access.authenticate or not node.permissions:
        return []
    users: list[str] = []
    for other in topology.nodes.values():
        for connector in other.network_connectors:
            dialled = {target for _name, targets in connector.connections for target in targets}
            if node_name in dialled and connector.user in node.users and connector.user not in users:
                users.append(connector.user)
    return users


def _security(node: Node, management_role: str | None = None, federated: list[str] | None = None) -> list[str]:
    """`security-enabled` and `security-settings`: on when the node's `access.authenticate` is. Artemis's
    security is broker-wide, so it covers every acceptor. Only SASL PLAIN is rendered: Artemis's EXTERNAL needs a
    certificate login module the reference does not read."""
    if not node.access.authenticate:
        return ["    <security-enabled>false</security-enabled>"]
    other = [m for m in node.access.mechanisms if m != "PLAIN"]
    if other:
        raise RenderError(f"{node.name}: access.mechanisms: a broker authenticates with PLAIN only here (Artemis's "
                          f"properties login module), got {', '.join(other)}")
    lines = ["    <security-enabled>true</security-enabled>", "    <security-settings>"]
    permissions = node.permissions
    if not permissions:
        lines.append('      <security-setting match="#">')
        lines += [f"        <permission type={quoteattr(kind)} roles={quoteattr(ALL_USERS_ROLE)}/>"
                  for kind in PERMISSION_TYPES.values()]
        lines.append("      </security-setting>")
    for permission in permissions:
        lines.append(f"      <security-setting match={quoteattr(permission.match)}>")
        for field_name, kind in PERMISSION_TYPES.items():
            roles = permission.roles_for(field_name)
            if roles:
                lines.append(f"        <permission type={quoteattr(kind)} roles={quoteattr(','.join(roles))}/>")
        lines.append("      </security-setting>")
    if federated:
        lines.append(f'      <security-setting match="{FEDERATION_ADDRESS}.#">')
        lines += [f"        <permission type={quoteattr(kind)} roles={quoteattr(FEDERATION_ROLE)}/>"
                  for kind in PERMISSION_TYPES.values()]
        lines.append("      </security-setting>")
    if management_role is not None:
        # Artemis picks the most specific match, so this covers the management address alone.
        lines.append(f'      <security-setting match="{MANAGEMENT_ADDRESS}.#">')
        lines += [f"        <permission type={quoteattr(kind)} roles={quoteattr(management_role)}/>"
                  for kind in PERMISSION_TYPES.values()]
        lines.append("      </security-setting>")
    lines.append("    </security-settings>")
    return lines


def render_artemis_security(topology: Topology, node_name: str) -> dict[str, str]:
    """The login module's files for broker `node_name` (file name -> text), to put beside broker.xml (an Artemis
    instance's etc/, where the reference broker reads them too); empty when the node does not authenticate."""
    node = topology.node(node_name)
    if not node.access.authenticate:
        return {}
    for user, password in node.users.items():  # what would read back differently from a properties file
        for label, text, bad in (("user", user, "\\\n\r=: #!,"), ("password", password, "\\\n\r")):
            if not text or any(ch in text for ch in bad) or text != text.strip():
                raise RenderError(f"{node_name}: users: {label} {text!r}: expected no spaces at either end and none "
                                  f"of {bad!r} (they mean something in a properties file)")
    roles = dict(node.roles) if node.permissions else {ALL_USERS_ROLE: tuple(node.users)}
    header = f"# generated from topology {topology.name!r} for broker {node_name} by harness.vendors.artemis.render\n"
    users = header + "".join(f"{user} = {password}\n" for user, password in node.users.items())
    federated = federation_users(topology, node_name)
    if federated:
        roles[FEDERATION_ROLE] = tuple(federated)
    role_lines = header + "".join(f"{role} = {','.join(members)}\n" for role, members in roles.items())
    return {USERS_FILE: users, ROLES_FILE: role_lines}


def _tls_params(topology: Topology, node_name: str, listener: str, pki: TestPki | None) -> str:
    """The acceptor URL's TLS parameters for a listener with TLS, else "". Artemis reads a PEM key store with
    keyStoreType=PEM: one file holding the private key and the certificate, which is written next to the
    PKI's certificate (the reference broker reads the same file)."""
    tls = topology.listener_tls(node_name, listener)
    if tls is None:
        return ""
    if pki is None:
        raise RenderError(f"{node_name}: listener {listener!r} has TLS but no test PKI was given (pki=)")
    if not tls.require:
        raise RenderError(f"{node_name}: listener {listener!r}: an Artemis acceptor is TLS or plain, not both "
                          "(access.tls.require false is not supported for brokers)")
    issued = pki.node_files(topology, node_name, listener=listener)
    params = ["sslEnabled=true", f"keyStorePath={_key_store(issued)}", "keyStoreType=PEM"]
    if issued.password:
        params.append(f"keyStorePassword={issued.password}")
    params += [f"trustStorePath={issued.ca}", "trustStoreType=PEM"]
    if tls.client_certs == "required":
        params.append("needClientAuth=true")
    elif tls.client_certs == "optional":
        params.append("wantClientAuth=true")
    return ";" + ";".join(params)


def _anycast(name: str) -> str:
    return (f"      <address name={quoteattr(name)}>\n"
            f"        <anycast>\n"
            f"          <queue name={quoteattr(name)}/>\n"
            f"        </anycast>\n"
            f"      </address>")


def dial_endpoints(node: Node, what: str, targets: tuple[str, ...], connect_ports: dict[str, int],
                   dial_host: str) -> list[str]:
    """`HOST:PORT` to dial for each of `targets` (the nodes `what` of `node` connects to), from `connect_ports`;
    a target without a port, or a port that is no TCP port, is a one-line RenderError. Shared with the ActiveMQ
    renderer's network connectors."""
    endpoints = []
    for target in targets:
        port = connect_ports.get(target)
        if port is None:
            have = ", ".join(sorted(connect_ports)) or "nothing"
            raise RenderError(f"{node.name}: {what}: no port for node {target!r} in connect_ports (it has {have})")
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise RenderError(f"{node.name}: {what}: connect_ports[{target!r}]: expected a TCP port 1..65535, "
                              f"got {port!r}")
        endpoints.append(f"{dial_host}:{port}")
    return endpoints


def _connection_uri(node: Node, what: str, targets: tuple[str, ...], connect_ports: dict[str, int],
                    dial_host: str, params: str = "") -> str:
    """`tcp://HOST:PORT?PARAMS` of the first target, the others as alternates after `#`, each a URI of its own
    (`#tcp://H2:P2,tcp://H3:P3`): real Artemis parses every alternate as a URI and refuses to start on a bare
    `H2:P2` ("Illegal character in scheme name"); an alternate takes the primary's parameters."""
    endpoints = dial_endpoints(node, what, targets, connect_ports, dial_host)
    return (f"tcp://{endpoints[0]}" + (f"?{params}" if params else "")
            + (f"#{','.join(f'tcp://{e}' for e in endpoints[1:])}" if len(endpoints) > 1 else ""))


def _key_store(issued) -> str:
    """One PEM file with the private key and the certificate (Artemis's keyStoreType=PEM form), written beside
    the PKI's certificate; its path."""
    path = issued.cert.with_name(issued.cert.name.replace(".crt.pem", "") + ".keystore.pem")
    path.write_bytes(issued.key.read_bytes() + issued.cert.read_bytes())
    path.chmod(0o600)
    return str(path)


def _dial_tls(topology: Topology, node_name: str, target: str, pki: TestPki | None) -> str:
    """The TLS parameters of a broker connection's URI towards `target`, from the topology link's `tls` ("" when
    the link has none): the CA the dialler trusts, its client certificate, and whether it checks the name."""
    link = next((lk for lk in topology.links_from(node_name) if lk.to == target), None)
    if link is None or link.tls is None:
        return ""
    if pki is None:
        raise RenderError(f"{node_name}: the link to {target} has TLS but no test PKI was given (pki=)")
    issued = pki.node_files(topology, node_name, link=link)
    params = ["sslEnabled=true", f"trustStorePath={issued.ca}", "trustStoreType=PEM",
              f"keyStorePath={_key_store(issued)}", "keyStoreType=PEM",
              f"verifyHost={'true' if link.tls.verify_hostname else 'false'}"]
    if issued.password:
        params.append(f"keyStorePassword={issued.password}")
    return ";".join(params)


def _broker_connections(node: Node, connect_ports: dict[str, int], dial_host: str,
                        dial_tls=lambda _t: "") -> list[str]:
    """`<broker-connections>` lines for the node's broker connections and network connectors; none when it has
    neither."""
    if not node.broker_connections and not node.network_connectors:
        return []
    bool_text = {True: "true", False: "false"}
    lines = ["    <broker-connections>"]
    for connection in node.broker_connections:
        what = f"broker connection {connection.name!r}"
        tls = {dial_tls(target) for target in connection.to}
        if len(tls) > 1:  # one URI's parameters serve the primary and its alternates alike
            raise RenderError(f"{node.name}: {what}: its targets' links differ in tls; Artemis's URI has one set")
        uri = _connection_uri(node, what, connection.to, connect_ports, dial_host, tls.pop())
        attrs = [("uri", uri), ("name", connection.name), ("retry-interval", str(connection.retry_interval_ms)),
                 ("reconnect-attempts", str(connection.reconnect_attempts)),
                 ("auto-start", bool_text[connection.auto_start])]
        if connection.user is not None:
            attrs.append(("user", connection.user))
            if connection.password is not None:
                attrs.append(("password", connection.password))
        lines.append(f"      <amqp-connection {_attributes(attrs)}>")
        for element in connection.elements:
            if element.type == "mirror":
                flags = [("queue-creation", bool_text[element.queue_creation]),
                         ("queue-removal", bool_text[element.queue_removal]),
                         ("message-acknowledgements", bool_text[element.message_acknowledgements])]
                lines.append(f"        <mirror {_attributes(flags)}/>")
            elif element.address_match is not None:
                lines.append(f"        <{element.type} {_attributes([('address-match', element.address_match)])}/>")
            else:
                lines.append(f"        <{element.type} {_attributes([('queue-name', element.queue_name)])}/>")
        lines.append("      </amqp-connection>")
    for connector in node.network_connectors:
        lines += _network_connector(node, connector, connect_ports, dial_host, dial_tls)
    lines.append("    </broker-connections>")
    return lines


def _network_connector(node: Node, connector: NetworkConnector, connect_ports: dict[str, int],
                       dial_host: str, dial_tls=lambda _t: "") -> list[str]:
    """The `<amqp-connection>`s of one network connector, each holding its `<federation>`.

    Which way messages flow: a remote policy is sent to the dialled broker, which then pulls matching messages
    from this one whenever it has consumers for them (this broker's network connector forwards to the
    consumers over there); a local policy makes this broker pull from the dialled one whenever it has
    consumers (the duplex direction, over the same connection)."""
    lines = []
    for name, targets in connector.connections:
        what = f"network connector {connector.name!r}"
        if any(dial_tls(target) for target in targets):
            raise RenderError(f"{node.name}: {what}: TLS on a network connector's link is not rendered yet")
        uri = _connection_uri(node, what, targets, connect_ports, dial_host)
        attrs = [("uri", uri), ("name", name), ("retry-interval", str(connector.retry_interval_ms)),
                 ("reconnect-attempts", "-1"), ("auto-start", "true")]
        if connector.user is not None:
            attrs.append(("user", connector.user))
            if connector.password is not None:
                attrs.append(("password", connector.password))
        lines.append(f"      <amqp-connection {_attributes(attrs)}>")
        lines.append("        <federation>")
        lines += _federation_policies(connector, name, "remote", "")
        if connector.duplex:
            lines += _federation_policies(connector, name, "local", "-back")
        lines.append("        </federation>")
        lines.append("      </amqp-connection>")
    return lines


def _federation_policies(connector: NetworkConnector, name: str, side: str, suffix: str) -> list[str]:
    """A queue policy for the connector's `queues` and an address policy for its `topics`, each only when it
    has patterns; `excluded` applies to both."""
    lines = []
    if connector.queues:
        federated = "true" if connector.network_ttl > 1 else "false"
        policy = [("name", f"{name}-queues{suffix}"), ("include-federated", federated)]
        lines.append(f"          <{side}-queue-policy {_attributes(policy)}>")
        lines += [f"            <include {_attributes([('address-match', p), ('queue-match', '#')])}/>"
                  for p in connector.queues]
        lines += [f"            <exclude {_attributes([('address-match', p), ('queue-match', '#')])}/>"
                  for p in connector.excluded]
        lines.append(f"          </{side}-queue-policy>")
    if connector.topics:
        policy = [("name", f"{name}-topics{suffix}"), ("max-hops", str(connector.network_ttl))]
        lines.append(f"          <{side}-address-policy {_attributes(policy)}>")
        lines += [f"            <include {_attributes([('address-match', p)])}/>" for p in connector.topics]
        lines += [f"            <exclude {_attributes([('address-match', p)])}/>" for p in connector.excluded]
        lines.append(f"          </{side}-address-policy>")
    return lines


def _attributes(attrs: list[tuple[str, str]]) -> str:
    return " ".join(f"{key}={quoteattr(value)}" for key, value in attrs)


def broker_xml_for(setup: NodeSetup, ports: dict[str, int] | None = None, **options) -> str:
    """The node's broker.xml as a provider renders it (the reference broker and Artemis both read it): the ports
    the node was told to listen on, with `ports` over them; `options` as render_broker_xml takes them."""
    return render_broker_xml(setup.topology, setup.node_name, {**setup.listen_ports, **(ports or {})},
                             setup.broker_settings(), connect_ports=setup.connect_ports, **setup.pki, **options)
