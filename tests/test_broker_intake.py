"""A producer's message arriving at the reference broker (reference/broker/intake.py): where it goes and how it is
answered.

Source: seed 000 (store-and-forward: a producer's message is stored and accepted whether or not anyone consumes,
and the producer keeps getting credit), AMQP 1.0 §3.4.2 (rejected, with the error), Artemis's
journal-sync-non-transactional (a durable message is accepted once it is on disk).
"""

from __future__ import annotations

from types import SimpleNamespace

from proton import Delivery, Message

from reference.broker.attachments import PRODUCER_CREDIT, PRODUCER_LOW_CREDIT
from reference.broker.model import Producer
from tests.test_broker_logic import available, broker_with


class ReceivingLink:
    def __init__(self, data: bytes, credit=PRODUCER_CREDIT):
        self.data, self.credit, self.granted = data, credit, 0

    def recv(self, _size):
        return self.data

    def advance(self):
        self.credit -= 1

    def flow(self, credit):
        self.granted += credit


class Transfer:
    """A complete incoming delivery, and what the broker answers to it."""

    aborted, partial, readable, remote_state = False, False, True, None

    def __init__(self, data: bytes, settled=False):
        self.pending, self.settled = len(data), settled
        self.local = SimpleNamespace(condition=None)
        self.state, self.settled_here = None, False

    def update(self, state):
        self.state = state

    def settle(self):
        self.settled_here = True


def receive(broker, message: Message, address: str | None = "orders", settled=False, credit=PRODUCER_CREDIT):
    data = message.encode()
    link = ReceivingLink(data, credit)
    dlv = Transfer(data, settled)
    broker.intake.receive(Producer(link, address, None), dlv)
    return link, dlv


def test_a_message_is_stored_and_accepted_with_nobody_consuming():
    broker = broker_with()
    _, dlv = receive(broker, Message(body="x"))
    assert (dlv.state, dlv.settled_here) == (Delivery.ACCEPTED, True)
    assert len(available(broker, "orders")) == 1


def test_the_anonymous_relay_routes_by_the_messages_to():
    broker = broker_with()
    _, dlv = receive(broker, Message(address="DLQ", body="x"), address=None)
    assert dlv.state == Delivery.ACCEPTED and len(available(broker, "DLQ")) == 1


def test_a_message_with_no_address_at_all_is_rejected_with_invalid_field():
    broker = broker_with()
    _, dlv = receive(broker, Message(body="x"), address=None)
    assert dlv.state == Delivery.REJECTED and dlv.local.condition.name == "amqp:invalid-field"


def test_an_address_that_cannot_be_created_is_rejected_with_not_found():
    broker = broker_with("<auto-create-addresses>false</auto-create-addresses>")
    _, dlv = receive(broker, Message(body="x"), address="nowhere")
    assert dlv.state == Delivery.REJECTED and dlv.local.condition.name == "amqp:not-found"


def test_a_message_sent_settled_is_stored_without_an_outcome():
    broker = broker_with()
    _, dlv = receive(broker, Message(body="x"), settled=True)
    assert dlv.state is None and dlv.settled_here and len(available(broker, "orders")) == 1


def test_a_durable_message_is_accepted_with_its_journal_batch():
    broker = broker_with()
    broker.journal = SimpleNamespace(enqueue=lambda *_: None)
    _, dlv = receive(broker, Message(body="x", durable=True))
    assert dlv.state is None, "not before the batch is on disk"
    assert broker.durability.awaiting_commit == [(dlv, Delivery.ACCEPTED)]
    assert broker.queues["orders"].available[0].durable


def test_without_a_journal_a_durable_message_is_accepted_at_once():
    broker = broker_with()
    _, dlv = receive(broker, Message(body="x", durable=True))
    assert dlv.state == Delivery.ACCEPTED and not broker.queues["orders"].available[0].durable


def test_a_message_with_a_ttl_gets_an_expiry():
    broker = broker_with()
    receive(broker, Message(body="x", ttl=60))
    assert broker.queues["orders"].available[0].expiry is not None


def test_credit_is_topped_up_only_below_the_low_mark():
    broker = broker_with()
    above, _ = receive(broker, Message(body="x"), credit=PRODUCER_LOW_CREDIT + 1)
    below, _ = receive(broker, Message(body="x"), credit=PRODUCER_LOW_CREDIT)
    assert above.granted == 0
    assert below.credit + below.granted == PRODUCER_CREDIT
