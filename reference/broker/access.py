"""The broker's attach-time security checks: which permissions an attach needs, asked of authz.py for the
connection's authenticated user (Artemis checks at attach too: a refused attach never gets credit).

* a sending link (a producer) needs `send` on its target address; a receiving link (a consumer) `consume` on
  its source address;
* an attach that would auto-create something needs, before that: `createAddress` for a new address (or a
  routing type added to one), `createDurableQueue` for the anycast queue created with it or for a durable
  subscription, `createNonDurableQueue` for a non-durable subscription's queue;
* a mirror link (002_f23507c2891d6d06.txt, "Mirroring": "A producer to the address
  $ACTIVEMQ_ARTEMIS_MIRROR_brokerB will be created towards brokerB. If there is a security manager configured,
  security roles must be provided to the user on the broker connection") needs `send` on the
  `$ACTIVEMQ_ARTEMIS_MIRROR_<name>` address it targets; the events it then carries are applied as Artemis
  applies them, without a check per event;
* a producer with no target address (the anonymous relay) needs `send` (and what auto-creating would need) on
  each message's `to`, checked per message: a refused message is rejected with `amqp:unauthorized-access`;
* a message to the management address (management_amqp.py: a management request) needs `manage` there, as in
  Artemis's handleManagementMessage, and a producer's attach to that address needs `send` only (it creates
  nothing).

`deleteAddress` is read (authz.py) but no AMQP operation of the reference needs it: it never deletes an address
on a client's behalf. Each refusal is logged at warning with the user, the operation and the
address (authz.Authorizer's message).
"""

from __future__ import annotations

import logging

from ..security import authenticated_user
from .authz import Authorizer
from .config import ANYCAST, MULTICAST, BrokerConfig

log = logging.getLogger("BROKER")

UNAUTHORIZED = "amqp:unauthorized-access"


def user_of(connection) -> str | None:
    """Who acts on the connection: on an accepted one, the user the loop's SASL server authenticated (None:
    none); on one this broker dialled (a broker connection), its configured `user`, the identity it presented,
    so that what the other broker attaches back over it (a network's pulls, 004_05e35cdd7bc39ede.txt: both
    brokers have the same user) is allowed only by that user's roles here too, as Artemis runs a broker
    connection's local operations as its user."""
    dialled = getattr(connection, "broker_connection", None)
    if dialled is not None:
        return dialled.definition.user
    return authenticated_user(connection)


class AccessControl:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.authorizer = Authorizer(config.security_settings, config.user_roles)

    def needed(self, addresses: dict, address: str, hint: str | None, consumer: bool,
               subscription: str | None = None) -> list[str]:
        """The operations an attach to `address` needs, in the order Artemis checks them: the link's own
        operation, then what it would create. It follows Broker._resolve step by step; `subscription` is what
        a multicast consumer's queue needs: "durable" (a new durable subscription), "non-durable", or None
        (an existing durable subscription, or not a multicast consumer)."""
        ops = ["consume" if consumer else "send"]
        settings = self.config.settings_for(address)
        info = addresses.get(address)
        if info is None:
            if not settings["auto-create-addresses"]:
                return ops  # the broker refuses it as not-found
            routings = {hint or settings["default-address-routing-type"]}
            ops.append("createAddress")
            has_anycast_queue = False
        else:
            routings = set(info["routings"])
            has_anycast_queue = any(q.routing == ANYCAST for q in info["queues"])
        routing = hint if hint in routings else (ANYCAST if ANYCAST in routings else MULTICAST)
        if hint and hint not in routings:
            if not settings["auto-create-addresses"]:
                return ops
            routing = hint
            if "createAddress" not in ops:
                ops.append("createAddress")  # Artemis's updateAddress: a routing type added
        if routing == ANYCAST:
            if not has_anycast_queue and settings["auto-create-queues"]:
                ops.append("createDurableQueue")
        elif consumer and subscription == "durable":
            ops.append("createDurableQueue")
        elif consumer and subscription == "non-durable":
            ops.append("createNonDurableQueue")
        return ops

    def refuse(self, link, operations: list[str], address: str) -> str | None:
        """Why the link's user may not do `operations` on `address` (None: it may); logs the refusal."""
        user = user_of(link.connection)
        for operation in operations:
            why = self.authorizer.check(user, operation, address)
            if why is not None:
                log.warning("Refused attach of link %r from %s: %s", link.name,
                            getattr(link.connection, "url", "?"), why)
                return why
        return None

    def refuse_message(self, link, operations: list[str], address: str) -> str | None:
        """Like refuse, for one message of the anonymous relay (its `to`)."""
        user = user_of(link.connection)
        why = next((w for w in (self.authorizer.check(user, op, address) for op in operations) if w), None)
        if why is not None:
            log.warning("Refused a message on link %r from %s: %s", link.name, getattr(link.connection, "url", "?"),
                        why)
        return why
