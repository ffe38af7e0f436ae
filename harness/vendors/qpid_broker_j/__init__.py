"""Apache Qpid Broker-J: native.py runs its bin tarball from Maven Central (9.2.0, SHA-512 pinned) one JVM per node;
render.py writes the initial configuration (JSON) it starts from."""

from ...peers.capabilities import (
    BROKER_SECURITY,
    BROKER_STORE_AND_FORWARD,
    JMS_SUBSCRIPTIONS,
    SELECTOR_FILTER,
    TRANSACTIONS,
)
from ...peers.declaration import Role, Vendor

# Measured with the suites on 2026-12-07: store-and-forward (outcomes, dead-letter through each queue's alternate
# binding, TTL, durable over kill -9, drain, competing consumers, fanout exchanges for multicast), local transactions,
# the selector filter and JMS subscriptions (shared, unsubscribe: every --client jms case passes), SASL PLAIN, TLS
# and permissions (render.py's rule-based ACL). Where it has the capability and differs: expected.yaml.
# Left out, with the evidence:
# - `broker-connection`, `mirror` (BROKER_CONNECTIONS) and `network-of-brokers`: Broker-J 9.2.0 has no AMQP broker
#   connections, mirroring, federation or network connectors of its own (no such object type in its configuration
#   model; render.py raises RenderError for a node that has them).
# - `amqp-management.broker`: Broker-J's AMQP management is its own (node `$management`, operations such as
#   getStatistics on org.apache.qpid.Queue), not Artemis's management address that the capability names.
BROKER = BROKER_STORE_AND_FORWARD | TRANSACTIONS | SELECTOR_FILTER | JMS_SUBSCRIPTIONS | BROKER_SECURITY

VENDOR = Vendor(
    name="qpid-broker-j", title="Apache Qpid Broker-J", order=35, aliases=("brokerj", "broker-j"),
    roles=(Role("broker", BROKER, ("native:NativeBrokerJ",)),),
    fetch="native:main",
)
