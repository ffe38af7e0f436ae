"""Render one broker node of a topology as Apache Qpid Broker-J's initial configuration (the JSON `-icp` names).

Broker-J reads the file only on its first start in a work dir: it then stores the broker's configuration as
`config.json` there (variables such as `${qpid.amqp_port}` kept unresolved, so each start's `-prop` sets them again)
and the virtual host's under `default/config/`. The configuration carries only what the topology says:

* one `AMQP` port (AMQP 1.0 only, on `host`, port `${qpid.amqp_port}`): the node's clients listener. Its virtual
  host aliases are the node name, the default virtual host, and every other hostname but `$management`, which
  stays Broker-J's own broker-level management (a router or proxy opens with its own idea of the hostname:
  `node-B1`, `127.0.0.1`). TLS only (`transports: ["SSL"]`) when the node's `access.tls` says so, with the PKCS#12
  key and trust stores the provider makes from the run's test PKI, `needClientAuth`/`wantClientAuth` as
  `client_certs` says;
* a second AMQP port `MANAGEMENT` (`${qpid.management_port}`, plain TCP, anonymous, loopback) when
  `management` is set: the harness reads queue statistics over it by AMQP management whatever the clients port
  asks (TLS, PLAIN);
* the authentication provider: `Anonymous`, or for a node with `access.authenticate` a `PlainPasswordFile` on
  the users file the provider writes (`${qpid.users_file}`), with `secureOnlyMechanisms: []` so that PLAIN is
  offered on a plain TCP port (Broker-J offers it on TLS only by default);
* one virtual host node `default` (type JSON) holding a BDB virtual host whose store is under the work dir:
  each anycast queue as a durable queue, each multicast address as a durable `fanout` exchange (every receiver
  gets a subscription queue of its own), and with `auto_create` a `nodeAutoCreationPolicies` entry that
  creates a durable queue for any other address on attach (sender or receiver);
* the topology's dead-letter address as each queue's `alternateBinding` (Broker-J's dead-letter route), with
  `max_delivery_attempts` as `maximumDeliveryAttempts` (Broker-J's default, 0, is unlimited). Expired messages
  go there too (`expiryPolicy: ROUTE_TO_ALTERNATE`) only when the expiry address is the same queue: Broker-J has
  no expiry address of its own, so otherwise they are deleted.

* the topology's permissions as a `RuleBased` ACL of the virtual host (default DENIED, acl_rules below): send as
  PUBLISH (default exchange by routing key, or the exchange of that name), consume as CONSUME QUEUE, the create
  operations as CREATE QUEUE, each for the users of the roles named (Broker-J's identities are users or groups);
  Artemis's `a.#` as the names `a` and `a.*` (Broker-J's `*` is a trailing wildcard).

What Broker-J cannot express is a RenderError naming the node and the field: other listeners, broker connections
and network connectors (Broker-J has no AMQP bridges of its own), a redelivery delay, mechanisms other than PLAIN,
TLS and plain TCP on one port, permission patterns with a wildcard before their end.
"""

from __future__ import annotations

import json

from ...peers.provider import RenderError
from ...topology import CLIENT_LISTENER, Topology
from ...peers.java_stores import TlsStores

MODEL_VERSION = "9.0"
VIRTUAL_HOST_NODE = "default"
CLIENTS_PORT, MANAGEMENT_PORT = "AMQP", "MANAGEMENT"
PORT_PROPERTY = {CLIENTS_PORT: "qpid.amqp_port", MANAGEMENT_PORT: "qpid.management_port"}
USERS_FILE_PROPERTY = "qpid.users_file"
# Every hostname a client may open with reaches the virtual host, except `$management` (Broker-J's broker-level
# management): a catch-all `.*` would capture it too.
ANY_HOSTNAME_BUT_MANAGEMENT = r"(?!\$management$).*"

SETTINGS = ("dead_letter_address", "expiry_address", "max_delivery_attempts", "redelivery_delay_ms", "auto_create")




def settings_of(node_name: str, settings: dict | None) -> dict:
    """The topology's broker settings with Broker-J's defaults; an unknown key or a wrong type is a RenderError."""
    merged = {"dead_letter_address": None, "expiry_address": None, "max_delivery_attempts": None,
              "redelivery_delay_ms": 0, "auto_create": True}
    for key, value in (settings or {}).items():
        if key not in merged:
            raise RenderError(f"{node_name}: broker setting {key!r} has no Broker-J form "
                              f"(expected one of: {', '.join(SETTINGS)})")
        merged[key] = value
    attempts = merged["max_delivery_attempts"]
    if attempts is not None and (not isinstance(attempts, int) or isinstance(attempts, bool) or attempts == 0
                                 or attempts < -1):
        raise RenderError(f"{node_name}: broker setting max_delivery_attempts: expected -1 (unlimited) or >= 1, "
                          f"got {attempts!r}")
    if merged["redelivery_delay_ms"]:
        raise RenderError(f"{node_name}: broker setting redelivery_delay_ms: Broker-J has no redelivery delay "
                          f"(got {merged['redelivery_delay_ms']!r})")
    if not isinstance(merged["auto_create"], bool):
        raise RenderError(f"{node_name}: broker setting auto_create: expected true or false, "
                          f"got {merged['auto_create']!r}")
    for key in ("dead_letter_address", "expiry_address"):
        value = merged[key]
        if value is not None and (not isinstance(value, str) or not value):
            raise RenderError(f"{node_name}: broker setting {key}: expected a queue name, got {value!r}")
    return merged


def render_config(topology: Topology, node_name: str, settings: dict | None = None, *, host: str = "127.0.0.1",
                  management: bool = True, tls_stores: TlsStores | None = None) -> dict:
    """Broker-J's initial configuration for broker `node_name`, as a JSON-able dict (`config_text` writes it)."""
    node = topology.node(node_name)
    if node.role != "broker":
        raise RenderError(f"{node_name}: is a {node.role}; a Broker-J configuration is rendered for brokers only")
    if node.broker_connections:
        raise RenderError(f"{node_name}: broker_connections: Broker-J has no AMQP broker connections (Artemis's "
                          "<amqp-connection>)")
    if node.network_connectors:
        raise RenderError(f"{node_name}: network_connectors: Broker-J has no network of brokers")
    others = [listener.name for listener in topology.listeners_for(node_name) if listener.name != CLIENT_LISTENER]
    if others:
        raise RenderError(f"{node_name}: listeners {', '.join(others)}: only the clients listener is rendered for "
                          "Broker-J (its log does not name the port it bound)")
    s = settings_of(node_name, settings)

    providers = [{"name": "anonymous", "type": "Anonymous"}]
    clients_auth = "anonymous"
    if node.access.authenticate:
        other = [m for m in node.access.mechanisms if m != "PLAIN"]
        if other:
            raise RenderError(f"{node_name}: access.mechanisms: only PLAIN is rendered for Broker-J, "
                              f"got {', '.join(other)}")
        providers.append({"name": "plain", "type": "PlainPasswordFile", "path": f"${{{USERS_FILE_PROPERTY}}}",
                          "secureOnlyMechanisms": []})
        clients_auth = "plain"

    clients = {"name": CLIENTS_PORT, "type": "AMQP", "port": f"${{{PORT_PROPERTY[CLIENTS_PORT]}}}",
               "bindingAddress": host, "protocols": ["AMQP_1_0"], "transports": ["TCP"],
               "authenticationProvider": clients_auth,
               "virtualhostaliases": [
                   {"name": "nameAlias", "type": "nameAlias"},
                   {"name": "defaultAlias", "type": "defaultAlias"},
                   {"name": "anyHostname", "type": "patternMatchingAlias", "pattern": ANY_HOSTNAME_BUT_MANAGEMENT,
                    "virtualHostNode": VIRTUAL_HOST_NODE, "priority": 10}]}
    config: dict = {"name": node_name, "modelVersion": MODEL_VERSION}
    tls = node.access.tls
    if tls is not None:
        if not tls.require:
            raise RenderError(f"{node_name}: access.tls.require false (TLS and plain TCP on one port) is not "
                              "rendered for Broker-J")
        if tls_stores is None:
            raise RenderError(f"{node_name}: access.tls needs the key and trust stores (tls_stores) made from the "
                              "run's test PKI")
        clients["transports"] = ["SSL"]
        clients["keyStore"] = "keystore"
        if tls.client_certs != "none":
            clients["trustStores"] = ["truststore"]
            clients["needClientAuth" if tls.client_certs == "required" else "wantClientAuth"] = True
        config["keystores"] = [{"name": "keystore", "type": "FileKeyStore", "storeUrl": tls_stores.key_store,
                                "password": tls_stores.password, "keyStoreType": "PKCS12"}]
        config["truststores"] = [{"name": "truststore", "type": "FileTrustStore", "storeUrl": tls_stores.trust_store,
                                  "password": tls_stores.password, "trustStoreType": "PKCS12"}]
    ports = [clients]
    if management:
        ports.append({"name": MANAGEMENT_PORT, "type": "AMQP", "port": f"${{{PORT_PROPERTY[MANAGEMENT_PORT]}}}",
                      "bindingAddress": "127.0.0.1", "protocols": ["AMQP_1_0"], "transports": ["TCP"],
                      "authenticationProvider": "anonymous",
                      "virtualhostaliases": [{"name": "defaultAlias", "type": "defaultAlias"},
                                             {"name": "anyHostname", "type": "patternMatchingAlias",
                                              "pattern": ANY_HOSTNAME_BUT_MANAGEMENT,
                                              "virtualHostNode": VIRTUAL_HOST_NODE, "priority": 10}]})

    config.update({
        # Operational messages (BRK-, VHT-, CON-, ...) at INFO, everything else from WARN: the provider reads the
        # start's lines from stdout, and the connections' lines help when a case fails.
        "brokerloggers": [{"name": "console", "type": "Console", "brokerloginclusionrules": [
            {"name": "Root", "type": "NameAndLevel", "level": "WARN", "loggerName": "ROOT"},
            {"name": "Operational", "type": "NameAndLevel", "level": "INFO", "loggerName": "qpid.message.*"}]}],
        "authenticationproviders": providers,
        "ports": ports,
        "virtualhostnodes": [{"name": VIRTUAL_HOST_NODE, "type": "JSON", "defaultVirtualHostNode": "true",
                              "virtualHostInitialConfiguration": json.dumps(virtual_host(node_name, node, s))}],
    })
    return config


# The topology's Artemis-style operations as Broker-J's ACL operations on its objects. A send to a queue is a
# PUBLISH to the default exchange ("") with the queue's name as routing key, a send to a multicast address a
# PUBLISH to the exchange of that name; consuming is CONSUME on the queue; auto-creation is CREATE QUEUE.
def acl_rules(node_name: str, node) -> list[dict]:
    """The virtual host's rule-based ACL (`rules` of a `RuleBased` provider, default DENIED) for a node with
    permissions: one rule per user of each role a permission names (Broker-J's identities are users or groups,
    and a group provider is not rendered). Every authenticated user may reach the virtual host; the harness's own
    anonymous management port may do everything."""
    rules = [{"identity": "ANONYMOUS", "objectType": "ALL", "operation": "ALL", "outcome": "ALLOW"},
             {"identity": "ALL", "objectType": "VIRTUALHOST", "operation": "ACCESS", "outcome": "ALLOW"}]
    for i, permission in enumerate(node.permissions):
        names = acl_names(node_name, i, permission.match)

        def users(*operations, permission=permission):
            roles = dict.fromkeys(r for op in operations for r in permission.roles_for(op))
            return list(dict.fromkeys(u for role in roles for u in node.roles.get(role, ())))
        for user in users("send"):
            for name in names:
                rules.append(_rule(user, "EXCHANGE", "PUBLISH", {"NAME": "", "ROUTING_KEY": name}))
                rules.append(_rule(user, "EXCHANGE", "PUBLISH", {"NAME": name}))
        for user in users("consume"):
            rules += [_rule(user, "QUEUE", "CONSUME", {"NAME": name}) for name in names]
        for user in users("create_address", "create_durable_queue", "create_non_durable_queue"):
            rules += [_rule(user, "QUEUE", "CREATE", {"NAME": name}) for name in names]
        for user in users("delete_address"):
            rules += [_rule(user, "QUEUE", "DELETE", {"NAME": name}) for name in names]
    return rules


def _rule(identity: str, object_type: str, operation: str, attributes: dict) -> dict:
    return {"identity": identity, "objectType": object_type, "operation": operation, "attributes": attributes,
            "outcome": "ALLOW"}


def acl_names(node_name: str, index: int, pattern: str) -> list[str]:
    """An Artemis-style address pattern as Broker-J ACL names: `a.#` is `a` itself and `a.*` (Broker-J's `*` is a
    trailing wildcard: any rest), `#` everything; a '*' word or a '#' anywhere but at the end has no ACL form."""
    words = pattern.split(".")
    if pattern == "#":
        return ["*"]
    if any(w in ("*", "#") for w in words[:-1]) or words[-1] == "*" or any(("*" in w or "#" in w) and len(w) > 1
                                                                          for w in words):
        raise RenderError(f"{node_name}: permissions[{index}].match {pattern!r}: Broker-J's ACL has a trailing "
                          "wildcard only ('a.#')")
    if words[-1] == "#":
        prefix = ".".join(words[:-1])
        return [prefix, f"{prefix}.*"]
    return [pattern]


def virtual_host(node_name: str, node, s: dict) -> dict:
    """The virtual host's initial configuration: its store, queues, exchanges and auto-creation policy."""
    dla, expiry = s["dead_letter_address"], s["expiry_address"]
    attempts = s["max_delivery_attempts"]
    queue_attributes: dict = {"durable": True}
    if attempts is not None:
        queue_attributes["maximumDeliveryAttempts"] = 0 if attempts == -1 else attempts
    if dla:
        queue_attributes["alternateBinding"] = {"destination": dla}
        if expiry == dla:
            queue_attributes["expiryPolicy"] = "ROUTE_TO_ALTERNATE"
    ends = {dla, expiry} - {None}  # where messages end: no alternate binding of their own (no loop)

    queues, exchanges, seen = [], [], {}
    for i, queue in enumerate(node.queues):
        name = queue.address
        if not name or any(ch.isspace() for ch in name) or any(ch in name for ch in "#*/"):
            raise RenderError(f"{node_name}: queues[{i}].address {name!r}: expected a name without spaces, '#', "
                              "'*' or '/'")
        if name in seen:
            if seen[name] != queue.routing:
                raise RenderError(f"{node_name}: queues[{i}].address {name!r}: both anycast and multicast; Broker-J "
                                  "has a queue or an exchange of one name, not both")
            continue
        seen[name] = queue.routing
        if queue.routing == "multicast":
            exchanges.append({"name": name, "type": "fanout", "durable": True})
        else:
            queues.append({"name": name, **({"durable": True} if name in ends else queue_attributes)})
    for name in sorted(ends - set(seen)):  # the dead-letter and expiry queues exist whether declared or not
        queues.append({"name": name, "durable": True})

    vhost: dict = {"type": "BDB", "storePath": "${qpid.work_dir}/default/messages"}
    if node.permissions:
        if not node.access.authenticate:
            raise RenderError(f"{node_name}: permissions without access.authenticate: Broker-J's ACL needs users")
        vhost["virtualhostaccesscontrolproviders"] = [{"name": "permissions", "type": "RuleBased",
                                                       "defaultResult": "DENIED", "rules": acl_rules(node_name, node)}]
    if queues:
        vhost["queues"] = queues
    if exchanges:
        vhost["exchanges"] = exchanges
    if s["auto_create"]:
        vhost["nodeAutoCreationPolicies"] = [{"pattern": auto_create_pattern([e["name"] for e in exchanges]),
                                              "nodeType": "Queue", "createdOnPublish": True,
                                              "createdOnConsume": True, "attributes": queue_attributes}]
    return vhost


def auto_create_pattern(exchanges: list[str]) -> str:
    """The auto-creation policy's pattern (a Java regex on the address): everything but the multicast addresses.
    Broker-J applies a policy that creates on consume before it looks for an exchange of that name: measured, a
    receiver on the fanout exchange `news` under a `.*` policy got a new queue `news` (QUE-1001 Create "news"),
    and the messages sent to the exchange were discarded (EXH-1003)."""
    if not exchanges:
        return ".*"
    return "(?!(?:" + "|".join(f"\\Q{name}\\E" for name in exchanges) + ")$).*"


def config_text(config: dict) -> str:
    return json.dumps(config, indent=2) + "\n"


def users_text(users: dict[str, str], node_name: str = "?") -> str:
    """The PlainPasswordFile's lines (`user:password`)."""
    for user, password in users.items():
        if ":" in user or "\n" in user or "\n" in password:
            raise RenderError(f"{node_name}: users: {user!r}: a Broker-J password file cannot hold a name with ':' "
                              "or a newline")
    return "".join(f"{user}:{password}\n" for user, password in users.items())
