"""The vendors the matrix knows, the roles each plays, and the capabilities each declares.

One vocabulary for all vendors (DESIGN.md, "Capabilities"). A suite case lists what it needs with
`@pytest.mark.requires(...)`; a vendor without it reports the case `not-applicable`, never `passed`.
Capabilities a product has but that this harness does not drive yet are left out until a suite uses them.

A vendor name may play several roles ("reference" is both a router and a broker), so the table is keyed by
(vendor, role). A `--peer` choice is one of:

* `VENDOR`: the vendor, from the first provider that can run it here (native, then container);
* `VENDOR@PROVIDER`: one provider only (`rabbitmq@native`, `rabbitmq@container`, `artemis@container`, ...);
* `VENDOR@VERSION`: one version of a product that has several here (`artemis@2.39.0`, `qdrouterd@1.18.0`,
  `activemq-classic@6.1.8`); a part after `@` that starts with a digit is a version, any other a provider, and
  both may be given (`artemis@2.39.0@native`). Without a version, the pinned default (harness/peers/versions.py);
* `external:amqp://HOST:PORT[?caps=A,B&vendor=NAME&version=V&prefix=P]`: a peer someone else runs
  (harness/peers/external.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..topology import ROLES
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
# per-vhost configure/write/read regexes as harness/render/rabbitmq.py maps them; ActiveMQ Classic's authentication
# and authorization plugins and its amqp+ssl transport as harness/render/activemq.py renders them).
BROKER_SECURITY = frozenset({"sasl.plain", "tls", "broker-permissions", "permissions.send-per-queue"})
# RabbitMQ checks a send to a queue as write on the exchange it goes through (`amq.default` for every queue), so
# "may send to orders.* queues but not to invoices" cannot be said there: no `permissions.send-per-queue`.

# Router security (issue 20): TLS listeners and connectors with mutual authentication (`tls`), SASL EXTERNAL from
# the client certificate (`sasl.external`) and SASL PLAIN checked against the router's users (`sasl.plain`).
# qdrouterd 1.19 on this machine runs on Debian's proton-core 0.37, built without Cyrus SASL (the library does not
# link libsasl2 and has no sasl_server_new): its built-in SASL offers ANONYMOUS and EXTERNAL only, and a PLAIN
# client gets "Authentication failed [mech=none]" whatever the sasldb holds. So qdrouterd here lacks sasl.plain.
ROUTER_SECURITY = frozenset({"tls", "sasl.external", "sasl.plain"})

# Local transactions (AMQP 1.0 part 4): a coordinator that declares and discharges, transactional posting and
# retirement. A router has no coordinator of its own; qdrouterd and the reference router carry one only
# through a `$coordinator` link route to a broker (003 §12.2.2), which `coordinator-link-route` names.
TRANSACTIONS = frozenset({"transactions"})
ROUTER_COORDINATOR_ROUTE = frozenset({"coordinator-link-route"})

# Message selectors (AMQP 1.0 §3.5.3 filters; the `apache.org:selector-filter:string` filter a JMS consumer's selector
# travels as, AMQP JMS Mapping): the broker takes the filter (its attach's source answers with it, saying it is in
# place), so it must deliver to that consumer only the matching messages. A broker that answers with the filter and
# ignores it declares the capability all the same and lists the case in suites/expected/<vendor>.yaml.
SELECTOR_FILTER = frozenset({"filter.selector"})

# Subscriptions a JMS client makes on a topic beyond the plain durable one (AMQP JMS Mapping): JMS unsubscribe
# (`subscription.unsubscribe`: the broker finds a durable subscription's link again from an attach that names it
# with a null source, and ends the subscription when that link is closed), and shared subscriptions
# (`shared-subscription`: the broker offers the SHARED-SUBS connection capability and splits a subscription's
# messages between the consumers that attach with the `shared` source capability).
JMS_SUBSCRIPTIONS = frozenset({"subscription.unsubscribe", "shared-subscription"})

# Artemis's management by AMQP messages (its manual's "Management" chapter, "Using Management Message API"): requests
# to the management address (`activemq.management`) naming a resource (`broker`, `queue.NAME`,
# `brokerconnection.NAME`) and an operation or attribute, answered on the reply-to (harness/amq_management.py).
# ActiveMQ Artemis and the reference broker (reference/broker/management_amqp.py) have it; RabbitMQ and ActiveMQ
# Classic do not (their management is HTTP and JMX).
BROKER_MANAGEMENT = frozenset({"amqp-management.broker"})

DEFAULT_PEERS = {"router": "reference", "broker": "reference"}
EXTERNAL = "external:"


def vendor_roles() -> list[tuple[str, str]]:
    """Every (vendor, role) pair the registry knows, in its order."""
    from .registry import REGISTRY  # the registry imports this module's vocabulary

    return [(e.spec.vendor, e.spec.role) for e in REGISTRY]


def vendor_names(role: str | None = None) -> list[str]:
    names: list[str] = []
    for name, r in vendor_roles():
        if (role is None or r == role) and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True)
class Choice:
    """One `--peer` choice taken apart: `artemis@2.39.0@native` -> vendor artemis, version 2.39.0, provider
    native. An external choice is kept whole as its vendor (its URL may hold `@`; its version is a parameter)."""

    vendor: str
    version: str | None = None
    provider: str | None = None

    @property
    def product(self) -> str:
        """`artemis@2.39.0`: what is installed and probed (the provider does not change what must be had)."""
        return self.vendor + (f"@{self.version}" if self.version else "")

    def __str__(self) -> str:
        return self.product + (f"@{self.provider}" if self.provider else "")

    def target(self) -> str:
        """`artemis 2.39.0`, `rabbitmq@native`: how a report's target names it (versions apart, readable)."""
        provider = f"@{self.provider}" if self.provider else ""
        return self.vendor + provider + (f" {self.version}" if self.version else "")


def parse_choice(text: str) -> Choice:
    """`VENDOR[@VERSION][@PROVIDER]` (either order after the vendor) -> Choice; ValueError (one line) for an empty
    part or two versions or two providers."""
    if text.startswith(EXTERNAL):
        return Choice(text)
    name, *parts = text.split("@")
    version = provider = None
    for part in parts:
        if not part:
            raise ValueError(f"{text}: empty part after '@' (expected VENDOR[@VERSION][@PROVIDER])")
        if part[0].isdigit():
            if version is not None:
                raise ValueError(f"{text}: two versions ({version}, {part})")
            version = part
        else:
            if provider is not None:
                raise ValueError(f"{text}: two providers ({provider}, {part})")
            provider = part
    return Choice(name, version, provider)


def vendor(name: str, role: str) -> VendorSpec:
    """The VendorSpec a `--peer ROLE=NAME` choice stands for; ValueError (one line) if there is none."""
    if name.startswith(EXTERNAL):
        from .external import external_spec  # external.py imports this module

        return external_spec(name, role)
    from .registry import entries_of, entry

    try:
        choice = parse_choice(name)
    except ValueError as exc:
        raise ValueError(f"--peer {role}={exc}") from None
    base, provider = choice.vendor, choice.provider
    found = entry(base, role)
    if found is None:
        roles = [e.spec.role for e in entries_of(base)]
        if roles:
            raise ValueError(f"--peer {role}={name}: {base} plays the {' and '.join(roles)} role, not {role}")
        known = ", ".join(vendor_names(role)) or "none"
        raise ValueError(f"--peer {role}={name}: unknown vendor (expected one of: {known}; "
                         f"or {EXTERNAL}amqp://HOST:PORT)")
    if provider is not None and provider not in found.provider_names():
        raise ValueError(f"--peer {role}={name}: {base} has no provider {provider!r} "
                         f"(expected one of: {', '.join(found.provider_names())})")
    if choice.version is not None and found.versions is None:
        raise ValueError(f"--peer {role}={name}: {base} runs in one version only here; drop @{choice.version}")
    return found.spec


# Commas and ampersands inside an external URL (`external:amqp://h:p?caps=a,b&vendor=x`) belong to it: a new
# choice starts only at a comma followed by `ROLE=`.
_NEXT_CHOICE = re.compile(r",(?=\s*(?:" + "|".join(ROLES) + r")\s*=)")


def parse_peer_choices(values: list[str]) -> dict[str, str]:
    """Role -> vendor choice from `--peer` values (`ROLE=VENDOR`, several per value separated by commas, the
    later winning), over DEFAULT_PEERS. The one parser of `--peer`: `interop` and the pytest plugin both use it.
    ValueError, one line naming the choice, for anything it cannot take."""
    choices = dict(DEFAULT_PEERS)
    for value in values:
        for item in filter(None, (part.strip() for part in _NEXT_CHOICE.split(value))):
            role, sep, name = (part.strip() for part in item.partition("="))
            if not sep or not role or not name:
                raise ValueError(f"--peer {item}: expected ROLE=VENDOR, e.g. router=reference")
            if role not in ROLES:
                raise ValueError(f"--peer {item}: unknown role {role!r} (expected one of: {', '.join(ROLES)})")
            vendor(name, role)
            choices[role] = name
    return choices
