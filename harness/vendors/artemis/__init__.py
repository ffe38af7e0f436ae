"""ActiveMQ Artemis: native.py runs it from Maven Central's distribution (2.18-2.40 in the cache), container.py its
image; render.py writes the broker.xml that it and the reference broker read."""

from ...peers.capabilities import (
    BROKER_CONNECTIONS,
    BROKER_MANAGEMENT,
    BROKER_SECURITY,
    BROKER_STORE_AND_FORWARD,
    JMS_SUBSCRIPTIONS,
    NETWORK_OF_BROKERS,
    SELECTOR_FILTER,
    TRANSACTIONS,
)
from ...peers.declaration import Role, Vendor

# Broker connections and mirroring from Artemis's own "AMQP broker connections" chapter (002_f23507c2891d6d06.txt),
# a network of brokers from its AMQP federation over broker connections; each measured against the native broker.
BROKER = (BROKER_STORE_AND_FORWARD | TRANSACTIONS | BROKER_CONNECTIONS | NETWORK_OF_BROKERS | BROKER_SECURITY
          | SELECTOR_FILTER | JMS_SUBSCRIPTIONS | BROKER_MANAGEMENT)

VENDOR = Vendor(
    name="artemis", title="ActiveMQ Artemis", order=20,
    roles=(Role("broker", BROKER, ("native:NativeArtemis", "container:ArtemisContainer"), versions="native:VERSIONS"),),
    fetch="native:main",
)
