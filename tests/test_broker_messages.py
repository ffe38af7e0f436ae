"""The reference broker's message helpers (reference/broker/messages.py): the redelivery header by a full decode,
and how a delivery is answered.

Source: AMQP 1.0 §3.2.1 (a redelivered message's delivery-count and first-acquirer), §3.4 (outcomes) and §2.6.12
(settlement). tests/test_peek.py pins fields_of and expiry_of against reference/peek.py.
"""

from __future__ import annotations

from types import SimpleNamespace

from proton import Condition, Delivery, Message

from reference.broker.messages import answer, finish, redelivered_by_decode


class Answered:
    def __init__(self):
        self.local = SimpleNamespace(condition=None)
        self.state, self.settled = None, False

    def update(self, state):
        self.state = state

    def settle(self):
        self.settled = True


def test_a_redelivery_header_by_decode_sets_the_count_and_clears_first_acquirer():
    data = redelivered_by_decode(Message(body="x", first_acquirer=True).encode(), 2)
    message = Message()
    message.decode(data)
    assert (message.delivery_count, message.first_acquirer, message.body) == (2, False, "x")


def test_an_answer_with_no_state_only_settles():
    settle_only, accepted = Answered(), Answered()
    answer([(settle_only, None), (accepted, Delivery.ACCEPTED)])
    assert (settle_only.state, settle_only.settled) == (None, True)
    assert (accepted.state, accepted.settled) == (Delivery.ACCEPTED, True)


def test_a_rejection_carries_its_error():
    dlv = Answered()
    finish(dlv, Delivery.REJECTED, Condition("amqp:not-found", "no such address"))
    assert (dlv.state, dlv.local.condition.name, dlv.settled) == (Delivery.REJECTED, "amqp:not-found", True)
