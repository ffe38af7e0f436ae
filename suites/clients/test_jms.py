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

    def client(url: str, client_id: str | None = None) -> StackClient:
        """A new JMS connection; `client_id` names it (JMS clientID: the AMQP container-id), which a durable
        subscription belongs to."""
        c = StackClient(shim)
        if client_id is None:
            c.connect(url)
        else:  # StackClient.connect takes no stack options: the shim's connect does (jms.clientID)
            c.conn = c._name("conn")
            shim.request("connect", conn=c.conn, url=url, client_id=client_id)
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


@pytest.fixture
def topic(topology):
    """The broker's URL and its multicast address `news` as the broker expects it on the wire."""
    broker = topology("single-broker")["B1"]
    return broker.url, broker.wire_address("news")


def text(i: int, **properties: str) -> dict:
    """JMS TextMessage m<i> with int property seq=i and the string properties given."""
    props = [[{"t": "string", "v": "seq"}, {"t": "int", "v": str(i)}]]
    props += [[{"t": "string", "v": k}, {"t": "string", "v": v}] for k, v in properties.items()]
    return {"jms": {"type": "text", "body": {"t": "string", "v": f"m{i}"}, "properties": props}}


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


def unsubscribe(jms, url: str, client_id: str, name: str) -> None:
    """JMS unsubscribe of durable subscription `name`, on a connection of its own (a client id is one connection's
    at a time, and the subscription must have no active consumer)."""
    client = jms(url, client_id)
    try:
        client.shim.request("unsubscribe", conn=client.conn, name=name)
    finally:
        client.close()


def durable_subscription_left(jms, url: str, address: str) -> tuple[str, str]:
    """A durable subscription on `address` whose subscriber went away the way an application does (its connection
    closed, the subscription stays); its client id and name."""
    client_id, name = f"jms-durable-{uuid.uuid4().hex[:8]}", f"sub-{uuid.uuid4().hex[:8]}"
    first = jms(url, client_id)
    first.receiver(address, dest="topic", durable=name)
    first.close()
    return client_id, name


@pytest.mark.spec("JMS-DURABLE-SUB-1")
@pytest.mark.requires("multicast-subscription", "durable")
def test_a_durable_subscription_keeps_what_is_published_while_its_subscriber_is_away(topic, jms, details):
    url, address = topic
    client_id, name = durable_subscription_left(jms, url, address)
    assert jms(url).sender(address, dest="topic").send([text(i) for i in range(3)]) == ["accepted"] * 3
    back = jms(url, client_id)
    kept_receiver = back.receiver(address, dest="topic", durable=name, settle="auto")
    kept = seqs(kept_receiver.receive(3))
    nothing_else = nothing_more(kept_receiver)
    back.close()
    details.update(kept=kept, nothing_else=nothing_else)
    try:  # not judged here (JMS-DURABLE-SUB-2 is): a broker without unsubscribe keeps the subscription
        unsubscribe(jms, url, client_id, name)
    except ClientStackError as exc:
        details["unsubscribe"] = str(exc)
    assert kept == [0, 1, 2], "the subscription kept every message published while its subscriber was away, in order"
    assert nothing_else, "each kept message comes once"


@pytest.mark.spec("JMS-DURABLE-SUB-2")
@pytest.mark.requires("multicast-subscription", "durable", "subscription.unsubscribe")
def test_an_unsubscribed_durable_subscription_keeps_nothing_published_later(topic, jms, details):
    url, address = topic
    client_id, name = durable_subscription_left(jms, url, address)
    unsubscribe(jms, url, client_id, name)  # JMS unsubscribes a subscription that has no active consumer
    assert jms(url).sender(address, dest="topic").send([text(0)]) == ["accepted"]
    back = jms(url, client_id)
    # The same names again make a new subscription: a broker that ignored the unsubscribe gives m0 here.
    again = back.receiver(address, dest="topic", durable=name, settle="auto")
    empty = nothing_more(again)
    back.close()
    unsubscribe(jms, url, client_id, name)
    details.update(nothing_after_unsubscribe=empty)
    assert empty, "after unsubscribe nothing published later is kept for that subscription name"


@pytest.mark.spec("JMS-SHARED-SUB-1")
@pytest.mark.requires("multicast-subscription", "shared-subscription")
def test_a_shared_subscription_gives_each_message_to_one_of_its_consumers(topic, jms, details):
    url, address = topic
    name = f"shared-{uuid.uuid4().hex[:8]}"
    consumers = [jms(url).receiver(address, dest="topic", shared=name, settle="auto") for _ in range(2)]
    count = 10
    assert jms(url).sender(address, dest="topic").send([text(i) for i in range(count)]) == ["accepted"] * count
    got: list[list[int]] = [[] for _ in consumers]
    for _ in range(count):  # a message goes to one consumer or the other: ask each until all are accounted for
        if sum(map(len, got)) == count:
            break
        for i, consumer in enumerate(consumers):
            try:
                got[i] += seqs(consumer.receive(1, timeout=QUIET))
            except ClientStackError:
                pass  # nothing (more) for this one
    extra = [not nothing_more(c) for c in consumers]
    details.update(per_consumer=got, extra=extra)
    union = sorted(s for g in got for s in g)
    assert union == list(range(count)), "the subscription's consumers together get every message exactly once"
    assert not any(extra), "no message comes a second time"


@pytest.mark.spec("JMS-SELECTOR-1")
@pytest.mark.requires("filter.selector")
def test_a_selector_delivers_only_the_matching_messages(queue, jms, details):
    url, address = queue
    colors = ["red", "blue", "red", "green", "red"]
    sent = [text(i, color=c) for i, c in enumerate(colors)]
    assert jms(url).sender(address).send(sent) == ["accepted"] * len(sent)
    red = jms(url).receiver(address, selector="color = 'red'", settle="auto")
    matching = seqs(red.receive(3))
    more = not nothing_more(red)  # a broker that ignores the selector gives m3 and m4 here as well
    details.update(matching=matching, more_for_the_selector=more)
    assert matching == [0, 2, 4], "the selector's consumer gets the red messages, in order"
    assert not more, "and none of the others"
    left = seqs(jms(url).receiver(address, settle="auto").receive(2))
    details.update(left_for_others=left)
    assert left == [1, 3], "what did not match stays on the queue for other consumers"
