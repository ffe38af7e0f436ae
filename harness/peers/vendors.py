"""The vendors the matrix knows, the roles each plays, and the capabilities each declares.

One vocabulary for all vendors (DESIGN.md, "Capabilities"). A suite case lists what it needs with
`@pytest.mark.requires(...)`; a vendor without it reports the case `not-applicable`, never `passed`.
Capabilities a product has but that this harness does not drive yet are left out until a suite uses them.

A vendor name may play several roles ("reference" is both a router and a broker), so the table is keyed by
(vendor, role). A `--peer` choice is one of:

* `VENDOR`: the vendor, from the first provider that can run it here (native, then container);
* `VENDOR@PROVIDER`: one provider only (`rabbitmq@native`, `rabbitmq@container`, `artemis@container`, ...);
* `external:amqp://HOST:PORT[?caps=A,B&vendor=NAME&version=V&prefix=P]`: a peer someone else runs
  (harness/peers/external.py).
"""

from __future__ import annotations

from .base import VendorSpec

ROUTER_MESSAGE_ROUTING = frozenset({
    "distribution.balanced", "distribution.closest", "distribution.multicast",
    "credit-gating", "multicast-outcome", "priority", "anonymous-relay", "dynamic-address",
})
# Router networks and brokered messaging (003 §12.1.4, §12.2): what both the reference and qdrouterd do.
ROUTER_NETWORKS = frozenset({"mesh", "edge", "waypoint", "link-route", "fallback"})

# What a store-and-forward broker does, as the reference broker implements it (DESIGN.md, issue 3).
BROKER_STORE_AND_FORWARD = frozenset({
    "store-and-forward", "outcome.released", "outcome.modified", "outcome.rejected", "dead-letter", "ttl",
    "durable", "drain", "competing-consumers", "multicast-subscription",
})

# AMQP broker connections (002_f23507c2891d6d06.txt): a broker dials another node and creates senders,
# receivers or a router peering there (`broker-connection`), or replays its sends, acknowledgements and queue
# changes on another broker (`mirror`), as configured by `<broker-connections><amqp-connection>` in broker.xml.
BROKER_CONNECTIONS = frozenset({"broker-connection", "mirror"})

# Networks of brokers (004_05e35cdd7bc39ede.txt): a broker forwards messages to the consumers of the brokers it is
# joined to, as a topology's `network_connectors` configure it (harness/render/artemis.py, activemq.py).
NETWORK_OF_BROKERS = frozenset({"network-of-brokers"})

# Broker security (issue 20): SASL PLAIN against the broker's users (`sasl.plain`), TLS acceptors (`tls`), and
# permissions per operation and address by role (`broker-permissions`: Artemis's security-settings; RabbitMQ's
# per-vhost configure/write/read regexes as harness/render/rabbitmq.py maps them). ActiveMQ Classic has all three,
# but harness/render/activemq.py renders none of them yet, so it does not declare them.
BROKER_SECURITY = frozenset({"sasl.plain", "tls", "broker-permissions", "permissions.send-per-queue"})
# RabbitMQ checks a send to a queue as write on the exchange it goes through (`amq.default` for every queue), so
# "may send to orders.* queues but not to invoices" cannot be said there: no `permissions.send-per-queue`.

# Router security (issue 20): TLS listeners and connectors with mutual authentication (`tls`), SASL EXTERNAL from
# the client certificate (`sasl.external`) and SASL PLAIN checked against the router's users (`sasl.plain`).
# qdrouterd 1.19 on this machine runs on Debian's proton-core 0.37, built without Cyrus SASL (the library does not
# link libsasl2 and has no sasl_server_new): its built-in SASL offers ANONYMOUS and EXTERNAL only, and a PLAIN
# client gets "Authentication failed [mech=none]" whatever the sasldb holds. So qdrouterd here lacks sasl.plain.
ROUTER_SECURITY = frozenset({"tls", "sasl.external", "sasl.plain"})
QDROUTERD_SECURITY = ROUTER_SECURITY - {"sasl.plain"}

# Local transactions (AMQP 1.0 part 4): a coordinator that declares and discharges, transactional posting and
# retirement. A router has no coordinator of its own; qdrouterd and the reference router carry one only
# through a `$coordinator` link route to a broker (003 §12.2.2), which `coordinator-link-route` names.
TRANSACTIONS = frozenset({"transactions"})
ROUTER_COORDINATOR_ROUTE = frozenset({"coordinator-link-route"})

# RabbitMQ 3.10 with its AMQP 1.0 plugin, measured against the Debian package (classic queues):
# - the source advertises outcomes accepted/rejected/released (default-outcome released); a `modified`
#   disposition (with or without delivery-failed/undeliverable-here) ends the session with
#   amqp:invalid-field "Unrecognised state", and the message comes back only because the session ended;
# - drain on a classic queue ends the session with amqp:internal-error (function_clause in
#   rabbit_classic_queue:handle_event/3, send_drained); quorum queues drain correctly;
# - any link error (attach to a missing /amq/queue/NAME, a redeclare with other properties) ends the whole
#   session (`end` with the error), never a `detach` of the link alone;
# - a message to an address with no queue behind it (missing /amq/queue/NAME, unbound exchange) is
#   `accepted` and dropped;
# - rejected goes to the dead-letter queue through a policy (harness/render/rabbitmq.py), expired messages
#   too (no separate expiry address); durable messages on durable queues survive kill -9;
# - no transactions: attaching a link to the coordinator ends the session with amqp:not-implemented
#   "Transactions not supported".
# - federation: queue federation for queues, exchange federation for topics (`network-of-brokers`; the
#   rabbitmq_federation plugin ships in Debian's package).
RABBITMQ_BROKER = ((BROKER_STORE_AND_FORWARD - {"outcome.modified", "drain"}) | NETWORK_OF_BROKERS
                   | (BROKER_SECURITY - {"permissions.send-per-queue"}))

# Not measured on this machine (no Docker engine): declared from the products' documentation; broker
# connections and mirroring from Artemis's own "AMQP broker connections" chapter (002_f23507c2891d6d06.txt), a
# network of brokers from its AMQP federation over broker connections.
ARTEMIS_BROKER = BROKER_STORE_AND_FORWARD | TRANSACTIONS | BROKER_CONNECTIONS | NETWORK_OF_BROKERS | BROKER_SECURITY
# ActiveMQ Classic's AMQP transport: outcomes, drain, TTL, durable; its dead-letter queue is its own shared
# ActiveMQ.DLQ (not the topology's), so `dead-letter` is left out. It has no AMQP broker connections (its own
# network connectors speak OpenWire), and RabbitMQ none either: neither has `broker-connection` or `mirror`.
# Its network connectors are the very ones the 004 seed configures (`network-of-brokers`).
ACTIVEMQ_CLASSIC_BROKER = (BROKER_STORE_AND_FORWARD - {"dead-letter"}) | TRANSACTIONS | NETWORK_OF_BROKERS

# Choices of the reference router stricter than the documents, which a conforming router need not make:
# - credit-withdrawal: unused credit is drained as soon as the last consumer of an address leaves (003
#   §12.1.1.1 only says credit is granted while a consumer exists; qdrouterd 1.19 keeps idle credit and stops
#   the producer after the first message it has to release).
REFERENCE_ROUTER_CHOICES = frozenset({"credit-withdrawal"})

VENDORS: dict[tuple[str, str], VendorSpec] = {
    ("reference", "router"): VendorSpec("reference", "router",
                                        ROUTER_MESSAGE_ROUTING | ROUTER_NETWORKS | ROUTER_COORDINATOR_ROUTE
                                        | REFERENCE_ROUTER_CHOICES | ROUTER_SECURITY),
    # Qpid Dispatch Router / AMQ Interconnect: the product the routing documents describe.
    ("qdrouterd", "router"): VendorSpec("qdrouterd", "router",
                                        ROUTER_MESSAGE_ROUTING | ROUTER_NETWORKS | ROUTER_COORDINATOR_ROUTE
                                        | QDROUTERD_SECURITY),
    ("reference", "broker"): VendorSpec("reference", "broker",
                                        BROKER_STORE_AND_FORWARD | TRANSACTIONS | BROKER_CONNECTIONS
                                        | NETWORK_OF_BROKERS | BROKER_SECURITY),
    ("rabbitmq", "broker"): VendorSpec("rabbitmq", "broker", RABBITMQ_BROKER),
    ("artemis", "broker"): VendorSpec("artemis", "broker", ARTEMIS_BROKER),
    ("activemq-classic", "broker"): VendorSpec("activemq-classic", "broker", ACTIVEMQ_CLASSIC_BROKER),
}

# Which providers can run each vendor, in the order they are tried for a plain `VENDOR` choice.
PROVIDERS: dict[str, tuple[str, ...]] = {
    "reference": ("subprocess",),
    "qdrouterd": ("native", "container"),
    "rabbitmq": ("native", "container"),
    "artemis": ("container",),
    "activemq-classic": ("container",),
}

DEFAULT_PEERS = {"router": "reference", "broker": "reference"}
EXTERNAL = "external:"


def vendor_roles() -> list[tuple[str, str]]:
    """Every (vendor, role) pair the matrix knows, in table order."""
    return list(VENDORS)


def vendor_names(role: str | None = None) -> list[str]:
    names: list[str] = []
    for name, r in VENDORS:
        if (role is None or r == role) and name not in names:
            names.append(name)
    return names


def split_choice(choice: str) -> tuple[str, str | None]:
    """`rabbitmq@native` -> ("rabbitmq", "native"); `rabbitmq` -> ("rabbitmq", None)."""
    name, sep, provider = choice.partition("@")
    return name, (provider if sep else None)


def vendor(name: str, role: str) -> VendorSpec:
    """The VendorSpec a `--peer ROLE=NAME` choice stands for; ValueError (one line) if there is none."""
    if name.startswith(EXTERNAL):
        from .external import external_spec  # external.py imports this module

        return external_spec(name, role)
    base, provider = split_choice(name)
    spec = VENDORS.get((base, role))
    if spec is None:
        roles = [r for v, r in VENDORS if v == base]
        if roles:
            raise ValueError(f"--peer {role}={name}: {base} plays the {' and '.join(roles)} role, not {role}")
        known = ", ".join(vendor_names(role)) or "none"
        raise ValueError(f"--peer {role}={name}: unknown vendor (expected one of: {known}; "
                         f"or {EXTERNAL}amqp://HOST:PORT)")
    if provider is not None and provider not in PROVIDERS.get(base, ()):
        raise ValueError(f"--peer {role}={name}: {base} has no provider {provider!r} "
                         f"(expected one of: {', '.join(PROVIDERS.get(base, ()))})")
    return spec
