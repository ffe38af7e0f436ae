"""RabbitMQ with its AMQP 1.0 plugin: native.py runs Debian's rabbitmq-server (asked through one long-lived hidden
Erlang node, agent.py and agent.escript), container.py its image; render.py writes rabbitmq.conf, its plugins and
its definitions (queues, policies, federation)."""

from ...peers.capabilities import (
    BROKER_SECURITY,
    BROKER_STORE_AND_FORWARD,
    NETWORK_OF_BROKERS,
    SELECTOR_FILTER,
)
from ...peers.declaration import Role, Vendor

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
# - rejected goes to the dead-letter queue through a policy (render.py), expired messages
#   too (no separate expiry address); durable messages on durable queues survive kill -9;
# - no transactions: attaching a link to the coordinator ends the session with amqp:not-implemented
#   "Transactions not supported".
# - federation: queue federation for queues, exchange federation for topics (`network-of-brokers`; the
#   rabbitmq_federation plugin ships in Debian's package).
# - a JMS selector's filter is answered in the attach's source as in place, but every message is delivered
#   (`filter.selector` declared so that the case catches it: expected.yaml); Qpid JMS's
#   unsubscribe (attach by name, null source) makes it reset the connection, and it offers no SHARED-SUBS.
BROKER = ((BROKER_STORE_AND_FORWARD - {"outcome.modified", "drain"}) | NETWORK_OF_BROKERS
          | (BROKER_SECURITY - {"permissions.send-per-queue"}) | SELECTOR_FILTER)

VENDOR = Vendor(
    name="rabbitmq", title="RabbitMQ", order=40, external_prefix="/queue/",
    roles=(Role("broker", BROKER, ("native:NativeRabbitMQ", "container:RabbitMQContainer")),),
)
