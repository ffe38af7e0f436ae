"""The registry: every vendor the harness knows, the role it plays, what it can do, and who can run it.

This is the one place a vendor is named. Adding a vendor is one provider module (a `Provider` subclass per way
of running it: harness/peers/provider.py) plus one `Registered(...)` line below; `launch`, the matrix, `--peer`
and `interop run --list` all read this table.

A vendor name may play several roles ("reference" is both a router and a broker), so entries are per (vendor,
role). Providers are named "module:Class" and imported only when asked, so a provider whose module needs
something absent (a Docker client, say) costs nothing until it is chosen, and a plain `--peer ROLE=VENDOR`
tries them in the order listed (native first, then container).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .base import PeerUnavailable, VendorSpec
from .provider import Provider
from .vendors import (
    BROKER_CONNECTIONS,
    BROKER_MANAGEMENT,
    BROKER_SECURITY,
    BROKER_STORE_AND_FORWARD,
    JMS_SUBSCRIPTIONS,
    NETWORK_OF_BROKERS,
    ROUTER_COORDINATOR_ROUTE,
    ROUTER_MESSAGE_ROUTING,
    ROUTER_NETWORKS,
    ROUTER_SECURITY,
    SELECTOR_FILTER,
    TRANSACTIONS,
)

# ---- what each vendor declares (one vocabulary: harness/peers/vendors.py) -------------------------------------

# qdrouterd 1.19 here has no Cyrus SASL (see ROUTER_SECURITY): it cannot check PLAIN.
QDROUTERD_SECURITY = ROUTER_SECURITY - {"sasl.plain"}

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
# - a JMS selector's filter is answered in the attach's source as in place, but every message is delivered
#   (`filter.selector` declared so that the case catches it: suites/expected/rabbitmq.yaml); Qpid JMS's
#   unsubscribe (attach by name, null source) makes it reset the connection, and it offers no SHARED-SUBS.
RABBITMQ_BROKER = ((BROKER_STORE_AND_FORWARD - {"outcome.modified", "drain"}) | NETWORK_OF_BROKERS
                   | (BROKER_SECURITY - {"permissions.send-per-queue"}) | SELECTOR_FILTER)

# Not measured on this machine (no Docker engine): declared from the products' documentation; broker
# connections and mirroring from Artemis's own "AMQP broker connections" chapter (002_f23507c2891d6d06.txt), a
# network of brokers from its AMQP federation over broker connections.
ARTEMIS_BROKER = (BROKER_STORE_AND_FORWARD | TRANSACTIONS | BROKER_CONNECTIONS | NETWORK_OF_BROKERS | BROKER_SECURITY
                  | SELECTOR_FILTER | JMS_SUBSCRIPTIONS | BROKER_MANAGEMENT)
# ActiveMQ Classic's AMQP transport: outcomes, drain, TTL, durable; its dead-letter queue is its own shared
# ActiveMQ.DLQ (not the topology's), so `dead-letter` is left out. It has no AMQP broker connections (its own
# network connectors speak OpenWire), and RabbitMQ none either: neither has `broker-connection` or `mirror`.
# Its network connectors are the very ones the 004 seed configures (`network-of-brokers`).
# SASL PLAIN, permissions and TLS (amqp+ssl), and the topology's dead-letter address as its shared dead-letter
# queue, from harness/render/activemq.py.
ACTIVEMQ_CLASSIC_BROKER = (BROKER_STORE_AND_FORWARD | TRANSACTIONS | NETWORK_OF_BROKERS | BROKER_SECURITY
                           | SELECTOR_FILTER | (JMS_SUBSCRIPTIONS - {"shared-subscription"}))
# Qpid JMS 2.10 refuses a shared subscription on ActiveMQ Classic before any attach: "Remote peer does not support
# shared subscriptions" (the broker's open offers no SHARED-SUBS capability).

# Choices of the reference router stricter than the documents, which a conforming router need not make:
# - credit-withdrawal: unused credit is drained as soon as the last consumer of an address leaves (003
#   §12.1.1.1 only says credit is granted while a consumer exists; qdrouterd 1.19 keeps idle credit and stops
#   the producer after the first message it has to release).
REFERENCE_ROUTER_CHOICES = frozenset({"credit-withdrawal"})


REFERENCE_ROUTER = (ROUTER_MESSAGE_ROUTING | ROUTER_NETWORKS | ROUTER_COORDINATOR_ROUTE | REFERENCE_ROUTER_CHOICES
                    | ROUTER_SECURITY)
QDROUTERD_ROUTER = ROUTER_MESSAGE_ROUTING | ROUTER_NETWORKS | ROUTER_COORDINATOR_ROUTE | QDROUTERD_SECURITY
# The reference broker lacks what a JMS client asks of a topic beyond a plain durable subscription, measured with
# Qpid JMS 2.10: it refuses the unsubscribe's attach (null source: amqp:invalid-field "a receiver needs a source
# address"), offers no SHARED-SUBS, and applies no selector (and so leaves the filter out of its attach's answer,
# AMQP 1.0 §3.5.3; it used to echo it): no `subscription.unsubscribe`, `shared-subscription` or `filter.selector`.
REFERENCE_BROKER = (BROKER_STORE_AND_FORWARD | TRANSACTIONS | BROKER_CONNECTIONS | NETWORK_OF_BROKERS
                    | BROKER_SECURITY | BROKER_MANAGEMENT)


@dataclass(frozen=True)
class Registered:
    """One vendor in one role: its declared capabilities and its providers, in the order they are tried."""

    spec: VendorSpec
    providers: tuple[str, ...]  # "module:Class", each a harness.peers.provider.Provider subclass
    # "module:NAME" of its harness.peers.versions.Versions (how each version is found, fetched or built), for a
    # product that runs here in several versions; None: one version only, and `VENDOR@VERSION` is refused.
    versions: str | None = None

    def provider_names(self) -> tuple[str, ...]:
        return tuple(provider_class(path).name for path in self.providers)

    def provider(self, name: str) -> type[Provider] | None:
        return next((cls for cls in map(provider_class, self.providers) if cls.name == name), None)


def _entry(vendor: str, role: str, capabilities: frozenset[str], *providers: str,
           versions: str | None = None) -> Registered:
    return Registered(VendorSpec(vendor, role, capabilities), tuple(f"harness.peers.{p}" for p in providers),
                      f"harness.peers.{versions}" if versions else None)


REGISTRY: tuple[Registered, ...] = (
    _entry("reference", "router", REFERENCE_ROUTER, "process:ReferenceRouter"),
    # Qpid Dispatch Router / AMQ Interconnect: the product the routing documents describe.
    _entry("qdrouterd", "router", QDROUTERD_ROUTER, "process:NativeQdrouterd", "containers:QdrouterdContainer",
           versions="qdrouterd_build:VERSIONS"),
    _entry("reference", "broker", REFERENCE_BROKER, "reference_broker:ReferenceBroker"),
    _entry("rabbitmq", "broker", RABBITMQ_BROKER, "rabbitmq:NativeRabbitMQ", "containers:RabbitMQContainer"),
    _entry("artemis", "broker", ARTEMIS_BROKER, "artemis:NativeArtemis", "containers:ArtemisContainer",
           versions="artemis:VERSIONS"),
    _entry("activemq-classic", "broker", ACTIVEMQ_CLASSIC_BROKER, "activemq:NativeActiveMQ",
           "containers:ActiveMQClassicContainer", versions="activemq:VERSIONS"),
)


def entry(vendor: str, role: str) -> Registered | None:
    return next((e for e in REGISTRY if e.spec.vendor == vendor and e.spec.role == role), None)


def entries_of(vendor: str) -> list[Registered]:
    return [e for e in REGISTRY if e.spec.vendor == vendor]


_classes: dict[str, type[Provider]] = {}


def provider_class(path: str) -> type[Provider]:
    """The Provider class a registry line names. A module that cannot be imported yields a provider whose probe
    says why, so `--list` and the matrix report it instead of failing."""
    if path not in _classes:
        module_name, _, class_name = path.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            cls = _missing_provider(class_name, f"provider {path} cannot be loaded: {exc}")
        _classes[path] = cls
    return _classes[path]


def _missing_provider(class_name: str, why: str) -> type[Provider]:
    class Missing(Provider):
        vendor = "?"
        # The registry's naming: Native<Vendor> classes are `native` providers, <Vendor>Container ones `container`.
        name = ("native" if class_name.startswith("Native") else "container" if class_name.endswith("Container")
                else class_name.lower())
        role = "?"

        @classmethod
        def probe(cls, version: str | None = None) -> str | None:
            return why

        @classmethod
        def create(cls, setup):
            raise PeerUnavailable(why)

    return Missing
