"""The capability vocabulary: one set of words for all vendors (DESIGN.md, "Capabilities").

A suite case lists what it needs with `@pytest.mark.requires(...)`; a vendor (harness/vendors/<name>/__init__.py)
declares what it has from these sets. A vendor without a capability a case needs reports the case
`not-applicable`, never `passed`. Capabilities a product has but that this harness does not drive yet are left out
until a suite uses them.
"""

from __future__ import annotations

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
# joined to, as a topology's `network_connectors` configure it (harness/vendors/artemis/render.py, activemq.py).
NETWORK_OF_BROKERS = frozenset({"network-of-brokers"})

# Broker security (issue 20): SASL PLAIN against the broker's users (`sasl.plain`), TLS acceptors (`tls`), and
# permissions per operation and address by role (`broker-permissions`: Artemis's security-settings; RabbitMQ's
# per-vhost configure/write/read regexes as harness/vendors/rabbitmq/render.py maps them; ActiveMQ Classic's
# authentication and authorization plugins and its amqp+ssl transport as harness/vendors/activemq_classic/render.py
# renders them).
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
# ignores it declares the capability all the same and lists the case in harness/vendors/<vendor>/expected.yaml.
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
