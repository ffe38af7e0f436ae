"""The reference router and broker: this project's executable specification (reference/), run from this checkout.

The router reads the rendered qdrouterd.conf (harness/vendors/qdrouterd/render.py), the broker the rendered
broker.xml (harness/vendors/artemis/render.py): they read their products' own configuration formats.
"""

from ...peers.capabilities import (
    BROKER_CONNECTIONS,
    BROKER_MANAGEMENT,
    BROKER_SECURITY,
    BROKER_STORE_AND_FORWARD,
    NETWORK_OF_BROKERS,
    ROUTER_COORDINATOR_ROUTE,
    ROUTER_MESSAGE_ROUTING,
    ROUTER_NETWORKS,
    ROUTER_SECURITY,
    TRANSACTIONS,
)
from ...peers.declaration import Role, Vendor

# Choices of the reference router stricter than the documents, which a conforming router need not make:
# - credit-withdrawal: unused credit is drained as soon as the last consumer of an address leaves (003
#   §12.1.1.1 only says credit is granted while a consumer exists; qdrouterd 1.19 keeps idle credit and stops
#   the producer after the first message it has to release).
REFERENCE_ROUTER_CHOICES = frozenset({"credit-withdrawal"})

ROUTER = (ROUTER_MESSAGE_ROUTING | ROUTER_NETWORKS | ROUTER_COORDINATOR_ROUTE | REFERENCE_ROUTER_CHOICES
          | ROUTER_SECURITY)
# The reference broker lacks what a JMS client asks of a topic beyond a plain durable subscription, measured with
# Qpid JMS 2.10: it refuses the unsubscribe's attach (null source: amqp:invalid-field "a receiver needs a source
# address"), offers no SHARED-SUBS, and applies no selector (and so leaves the filter out of its attach's answer,
# AMQP 1.0 §3.5.3; it used to echo it): no `subscription.unsubscribe`, `shared-subscription` or `filter.selector`.
BROKER = (BROKER_STORE_AND_FORWARD | TRANSACTIONS | BROKER_CONNECTIONS | NETWORK_OF_BROKERS | BROKER_SECURITY
          | BROKER_MANAGEMENT)

VENDOR = Vendor(
    name="reference", title="reference", order=0,
    roles=(Role("router", ROUTER, ("router:ReferenceRouter",), product="reference-router", label="reference router"),
           Role("broker", BROKER, ("broker:ReferenceBroker",), product="reference-broker",
                label="reference broker")),
)
