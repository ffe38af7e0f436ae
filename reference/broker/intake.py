"""A producer's message arriving at the broker: where it goes and how it is answered.

* The producer's credit is topped up as it sends (store-and-forward, 000_902de7174695f2b6.txt: whether or not
  anyone consumes).
* The address is the link's target, else the message's `to` (the anonymous relay, checked per message when
  security is on); a message that cannot be decoded, or has no address, or whose address does not exist and
  cannot be created, is rejected (AMQP 1.0 §3.4.2) with the error that says why.
* A message to the management address is a management request (management_amqp.py), not routed.
* A transactional transfer is held for its transaction's commit (transactions.py).
* A durable message is accepted once its journal batch is on disk (durability.py), unless
  `journal-sync-non-transactional` is false (Artemis: accepted before the write); a message sent settled is
  just stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proton import Condition, Delivery

from ..links import read_message
from ..peek import peek
from . import access as access_module
from . import federation as federating
from .attachments import PRODUCER_CREDIT, PRODUCER_LOW_CREDIT
from .messages import decode, expiry_of, fields_of, finish
from .model import Producer
from .transactions import TRANSACTIONAL_STATE

if TYPE_CHECKING:
    from .broker import Broker


class Intake:
    """Takes the messages of the broker's producers."""

    def __init__(self, broker: Broker):
        self.broker = broker

    def receive(self, producer: Producer, dlv: Delivery):
        broker = self.broker
        link = producer.link
        data = read_message(link, dlv)
        if data is None:
            return
        if link.credit < PRODUCER_LOW_CREDIT:
            link.flow(PRODUCER_CREDIT - link.credit)
        hops, came_from = 0, None
        if producer.federation_side is not None:  # pulled from another broker of a network
            data, hops, came_from = federating.incoming(data, producer.federation_side.remote_node)
        fields = peek(data)  # durable, ttl and `to` without a full decode; None: decode to be sure
        if fields is None:
            try:
                fields = fields_of(decode(data))
            except Exception as exc:  # noqa: BLE001 - any decode failure is the sender's problem, not ours
                finish(dlv, Delivery.REJECTED, Condition("amqp:decode-error", f"cannot decode message: {exc}"))
                return
        address = producer.address or fields.to
        if not address:
            finish(dlv, Delivery.REJECTED, Condition("amqp:invalid-field", "message has no 'to' address"))
            return
        if broker.management.is_management(address):  # a management request (management_amqp.py), not routed
            finish(dlv, *broker.management.handle(link, data))
            return
        if producer.address is None and broker.access is not None:  # the anonymous relay: checked per message
            why = broker.access.refuse_message(
                link, broker.access.needed(broker.addresses, address, producer.routing_hint, consumer=False), address)
            if why is not None:
                finish(dlv, Delivery.REJECTED, Condition(access_module.UNAUTHORIZED, why))
                return
        info, _ = broker.registry.resolve(address, producer.routing_hint, for_consumer=False)
        if info is None:
            finish(dlv, Delivery.REJECTED, Condition("amqp:not-found", f"address {address!r} does not exist"))
            return
        durable = fields.durable and broker.journal is not None
        if dlv.remote_state == TRANSACTIONAL_STATE:  # held for the commit, answered by transactions.py
            broker.transactions.post(dlv, info, data, durable, expiry_of(fields))
            return
        broker.registry.route(info, next(broker.ids), data, durable, expiry_of(fields), hops=hops, came_from=came_from)
        if dlv.settled:
            dlv.settle()
        elif durable and broker.config.journal_sync_non_transactional:  # false: accepted before the write (Artemis)
            broker.durability.awaiting_commit.append((dlv, Delivery.ACCEPTED))  # accepted once its batch is on disk
        else:
            finish(dlv, Delivery.ACCEPTED)
