"""ActiveMQ Classic: native.py runs its jars from Maven Central (6.1-6.3 in the cache) through a small launcher of
its own (launcher/), container.py its image; render.py writes its activemq.xml."""

from ...peers.capabilities import (
    BROKER_SECURITY,
    BROKER_STORE_AND_FORWARD,
    JMS_SUBSCRIPTIONS,
    NETWORK_OF_BROKERS,
    SELECTOR_FILTER,
    TRANSACTIONS,
)
from ...peers.declaration import Role, Vendor

# ActiveMQ Classic's AMQP transport: outcomes, drain, TTL, durable; its dead-letter queue is its own shared
# ActiveMQ.DLQ (not the topology's), so `dead-letter` is left out. It has no AMQP broker connections (its own
# network connectors speak OpenWire): no `broker-connection` or `mirror`. Its network connectors are the very ones
# the 004 seed configures (`network-of-brokers`). SASL PLAIN, permissions and TLS (amqp+ssl), and the topology's
# dead-letter address as its shared dead-letter queue, from render.py.
# Qpid JMS 2.10 refuses a shared subscription on ActiveMQ Classic before any attach: "Remote peer does not support
# shared subscriptions" (the broker's open offers no SHARED-SUBS capability).
BROKER = (BROKER_STORE_AND_FORWARD | TRANSACTIONS | NETWORK_OF_BROKERS | BROKER_SECURITY | SELECTOR_FILTER
          | (JMS_SUBSCRIPTIONS - {"shared-subscription"}))

VENDOR = Vendor(
    name="activemq-classic", title="ActiveMQ Classic", order=30, aliases=("classic", "activemq"),
    roles=(Role("broker", BROKER, ("native:NativeActiveMQ", "container:ActiveMQClassicContainer"),
                versions="native:VERSIONS"),),
    fetch="native:main",
)
