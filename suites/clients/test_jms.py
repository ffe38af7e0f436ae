"""JMS delivery semantics through a broker, carried out by the Qpid JMS stack (clients/jms, `--client jms`):
client-acknowledge, recover, and transacted sessions consuming and producing. A JMS application leans on these,
and each rests on an AMQP mechanism the broker must honour: unsettled deliveries of a session that ends come
again, and transactional work (AMQP 1.0 part 4) takes effect at commit and never after a rollback.

These cases need the JMS stack: in a cell of another stack they are not-applicable. What a JMS consumer was given
travels as the shim's JMS view (class, JMSRedelivered, JMSXDeliveryCount, properties).
"""

from __future__ import annotations

import uuid

import pytest

from harness.drivers import ClientStackError, ClientStackUnavailable, StackClient
from harness.pytest_plugin import NOT_APPLICABLE

QUIET = 1.0  # seconds a consumer waits to show that nothing (more) is there for it


@pytest.fixture
def jms(stacks, client_stack, details):
    """The session's JMS shim; not-applicable in a cell whose client stack is another."""
    if client_stack != "jms":
        pytest.skip(f"{NOT_APPLICABLE}client stack {client_stack} is not a JMS client (these cases are --client jms)")
    try:
        shim = stacks.get("jms")
    except ClientStackUnavailable as exc:
        pytest.skip(f"client stack unavailable: {exc}")
    details["client_stack"], details["stack_version"] = "jms", shim.version
    made: list[StackClient] = []

    def client(url: str) -> StackClient:
        c = StackClient(shim).connect(url)
        made.append(c)
        return c
    yield client
    for c in made:
        try:
            c.close()
        except ClientStackError:
            pass  # closed by the case, or by the peer


@pytest.fixture
def queue(topology):
    broker = topology("single-broker")["B1"]
    return broker.url, broker.wire_address(f"interop.jms.{uuid.uuid4().hex[:10]}")


def text(i: int) -> dict:
    return {"jms": {"type": "text", "body": {"t": "string", "v": f"m{i}"},
                    "properties": [[{"t": "string", "v": "seq"}, {"t": "int", "v": str(i)}]]}}


def seqs(messages: list[dict]) -> list[int]:
    return [int(v["v"]) for m in messages for k, v in m["jms"]["properties"] if k["v"] == "seq"]


def nothing_more(receiver) -> bool:
    """True when no message comes within QUIET seconds (the receive's own deadline, no sleep)."""
    try:
        receiver.receive(1, timeout=QUIET)
    except ClientStackError:
        return True
    return False


@pytest.mark.spec("JMS-ACK-1")
@pytest.mark.requires("store-and-forward")
def test_unacknowledged_messages_of_a_closed_connection_come_again(queue, jms, details):
    url, address = queue
    assert jms(url).sender(address).send([text(i) for i in range(3)]) == ["accepted"] * 3
    first = jms(url)
    taken = seqs(first.receiver(address).receive(3))  # client-acknowledge: taken, not acknowledged
    first.close()
    again_receiver = jms(url).receiver(address)
    again = again_receiver.receive(3)
    details.update(taken=taken, again=seqs(again), redelivered=[m["jms"]["JMSRedelivered"] for m in again],
                   delivery_count=[m["jms"]["JMSXDeliveryCount"] for m in again])
    assert seqs(again) == taken == [0, 1, 2], "what was not acknowledged comes again, in its order"
    again_receiver.settle("accept")
    assert nothing_more(jms(url).receiver(address)), "acknowledged messages are gone from the queue"


@pytest.mark.spec("JMS-RECOVER-1")
@pytest.mark.requires("store-and-forward")
def test_recover_gives_the_unacknowledged_messages_again_as_redelivered(queue, jms, details):
    url, address = queue
    assert jms(url).sender(address).send([text(i) for i in range(2)]) == ["accepted"] * 2
    receiver = jms(url).receiver(address)
    first = receiver.receive(2)
    receiver.shim.request("recover", link=receiver.name)
    again = receiver.receive(2)
    receiver.settle("accept")
    details.update(first=seqs(first), again=seqs(again),
                   redelivered=[m["jms"]["JMSRedelivered"] for m in again],
                   delivery_count=[m["jms"]["JMSXDeliveryCount"] for m in again])
    assert seqs(again) == seqs(first) == [0, 1]
    assert [m["jms"]["JMSRedelivered"] for m in first] == [False, False]
    assert [m["jms"]["JMSRedelivered"] for m in again] == [True, True]
    assert [m["jms"]["JMSXDeliveryCount"] for m in again] == [2, 2], "JMSXDeliveryCount counts the first delivery"


@pytest.mark.spec("JMS-TXN-CONSUME-1")
@pytest.mark.requires("store-and-forward", "transactions")
def test_a_rolled_back_transacted_receive_comes_again_and_a_committed_one_is_gone(queue, jms, details):
    url, address = queue
    assert jms(url).sender(address).send([text(i) for i in range(2)]) == ["accepted"] * 2
    receiver = jms(url).receiver(address, transacted=True)
    first = seqs(receiver.receive(2))
    receiver.shim.request("rollback", link=receiver.name)
    again = receiver.receive(2)
    receiver.shim.request("commit", link=receiver.name)
    details.update(first=first, again=seqs(again), redelivered=[m["jms"]["JMSRedelivered"] for m in again])
    assert first == seqs(again) == [0, 1], "a rollback gives the messages back, in their order"
    assert [m["jms"]["JMSRedelivered"] for m in again] == [True, True]
    assert nothing_more(jms(url).receiver(address)), "what a committed transaction consumed is gone"


@pytest.mark.spec("JMS-TXN-SEND-1")
@pytest.mark.requires("store-and-forward", "transactions")
def test_transacted_sends_reach_a_consumer_only_at_commit_and_never_after_rollback(queue, jms, details):
    url, address = queue
    sender = jms(url).sender(address, transacted=True)
    sender.send([text(0), text(1)])
    receiver = jms(url).receiver(address, settle="auto")
    before_commit = nothing_more(receiver)
    sender.shim.request("commit", link=sender.name)
    committed = seqs(receiver.receive(2))
    sender.send([text(2)])
    sender.shim.request("rollback", link=sender.name)
    after_rollback = nothing_more(receiver)
    details.update(before_commit_empty=before_commit, committed=committed, after_rollback_empty=after_rollback)
    assert before_commit, "nothing sent in a transaction reaches a consumer before the commit"
    assert committed == [0, 1], "the commit makes the transaction's messages available, in order"
    assert after_rollback, "a rolled back send never reaches a consumer"
