"""A broker managed by AMQP messages, as ActiveMQ Artemis is (issue 55): requests to the management address
(`activemq.management`) naming a resource and an operation or attribute, answers on the reply-to
(harness/amq_management.py). The same cases run against Artemis and the reference broker, through the harness's
one ManagementClient over each peer's management acceptor (`peer.management`): queue counts agree with the
traffic, startBrokerConnection starts an auto-start=false connection (002_f23507c2891d6d06.txt, the `auto-start`
notice), and what the broker does not have is refused without harm. Topologies `single-broker` and
`broker-reconnect`. Brokers without AMQP management (RabbitMQ, ActiveMQ Classic) lack `amqp-management.broker`."""

import json
import uuid

import pytest

from harness.amq_management import ManagementClient
from harness.wait import wait_for

from ..brokerconnections.conftest import WAIT, send_accepted, sender
from ..conftest import restart_or_skip

pytestmark = pytest.mark.requires("amqp-management.broker")

N = 10  # messages sent to the queue whose counts are read
K = 4  # of which a consumer takes these


def management_of(peer) -> ManagementClient:
    """The peer's management client (an acceptor of its own, a user of its own where the node authenticates);
    `skipped` for a provider that has none (Artemis in a container, an external broker)."""
    client = getattr(peer, "management", None)
    if not isinstance(client, ManagementClient):
        pytest.skip(f"the {peer.info.provider} provider of {peer.info.vendor} gives the harness no AMQP management "
                    "client")
    return client


def attribute(mgmt: ManagementClient, resource: str, name: str):
    return mgmt.call(resource, f"read {name} of {resource}", attribute=name)


def queue_row(mgmt: ManagementClient, queue: str) -> dict | None:
    """The broker's listQueues row of `queue` (filter name EQUALS), or None."""
    options = json.dumps({"field": "name", "operation": "EQUALS", "value": queue})
    text = mgmt.call("broker", f"list queue {queue!r}", operation="listQueues", arguments=[options, 1, 100])
    rows = json.loads(text)["data"]
    return rows[0] if rows else None


def wait_count(mgmt: ManagementClient, queue: str, name: str, wanted: int, what: str) -> int:
    seen: list = []

    def arrived():
        seen.append(attribute(mgmt, f"queue.{queue}", name))
        return seen[-1] == wanted
    wait_for(arrived, WAIT, what, describe=lambda: f"{name} {seen[-1] if seen else None}")
    return seen[-1]


def broker_connection(mgmt: ManagementClient, name: str) -> dict:
    listed = json.loads(mgmt.call("broker", "list broker connections", operation="listBrokerConnections"))
    rows = {row["name"]: row for row in listed}
    assert name in rows, f"listBrokerConnections has no {name!r}: {sorted(rows)}"
    return rows[name]


@pytest.mark.requires("store-and-forward")
@pytest.mark.spec("MGMT-BROKER-REQUEST-1", "MGMT-BROKER-COUNTS-1")
def test_queue_counts_read_through_management_agree_with_the_traffic(topology, clients, details):
    running = topology("single-broker")
    mgmt = management_of(running["B1"])
    queue = f"mgmt.counts.{uuid.uuid4().hex[:8]}"
    conn = clients.connect(running.client_url("producer"))
    snd = sender(conn, queue)
    send_accepted(snd, N)
    after_send = wait_count(mgmt, queue, "messageCount", N, f"messageCount of {queue} to be {N} after the sends")
    consumer = conn.receiver(queue, credit=K, auto_credit=False)
    consumer.wait_received(K)
    after_consume = wait_count(mgmt, queue, "messageCount", N - K,
                               f"messageCount of {queue} to be {N - K} once {K} were accepted")
    consumers_live = attribute(mgmt, f"queue.{queue}", "consumerCount")
    delivering = attribute(mgmt, f"queue.{queue}", "deliveringCount")
    counted = mgmt.call(f"queue.{queue}", f"count the messages of {queue}", operation="countMessages")
    row = queue_row(mgmt, queue)
    consumer.detach()
    consumers_after = wait_count(mgmt, queue, "consumerCount", 0, f"consumerCount of {queue} to be 0 after detach")
    details.update(sent=N, consumed=K, message_count_after_send=after_send, message_count_after_consume=after_consume,
                   consumer_count_live=consumers_live, delivering_count=delivering, count_messages=counted,
                   list_queues_row={k: row.get(k) for k in ("messageCount", "consumerCount", "deliveringCount",
                                                            "routingType")} if row else None,
                   consumer_count_after_detach=consumers_after)
    assert consumers_live == 1, f"one receiver is attached, consumerCount says {consumers_live}"
    assert delivering == 0, f"the {K} messages taken were accepted; deliveringCount says {delivering}"
    assert counted == N - K, f"countMessages() says {counted}, {N - K} expected"
    assert row is not None, f"listQueues does not list {queue}"
    assert (row["messageCount"], row["consumerCount"]) == (str(N - K), "1"), \
        f"listQueues row: messageCount {row['messageCount']}, consumerCount {row['consumerCount']}"


@pytest.mark.requires("broker-connection", "store-and-forward")
@pytest.mark.spec("MGMT-BROKER-START-1", "BROKERCONN-AUTOSTART-1")
def test_start_broker_connection_by_management_message_connects_and_delivers_the_held_messages(topology, clients,
                                                                                            details):
    running = topology("broker-reconnect")
    b1, b2 = running["B1"], running["B2"]
    mgmt1, mgmt2 = management_of(b1), management_of(b2)
    idle = broker_connection(mgmt1, "manual")
    if idle["started"]:  # an earlier case of the session started it: a fresh B1 starts without it again
        restart_or_skip(b1)
        idle = broker_connection(mgmt1, "manual")
    n = 5
    before_b2 = attribute(mgmt2, "queue.manual.q", "messageCount")
    snd = sender(clients.connect(running.client_url("producer")), "manual.q")
    send_accepted(snd, n)
    held = attribute(mgmt1, "queue.manual.q", "messageCount")
    on_b2 = attribute(mgmt2, "queue.manual.q", "messageCount") - before_b2
    connected_before = attribute(mgmt1, "brokerconnection.manual", "connected")
    assert not idle["started"] and not idle["connected"] and not connected_before, \
        f"manual has auto-start false: listBrokerConnections says {idle}, connected {connected_before}"
    assert held >= n and on_b2 == 0, f"before the start: {held} held on B1, {on_b2} new on B2 (sent {n})"
    succeeded, value = mgmt1.request("broker", operation="startBrokerConnection", arguments=["manual"])
    assert succeeded, f"startBrokerConnection(manual) refused: {value}"
    wait_for(lambda: attribute(mgmt1, "brokerconnection.manual", "connected") is True, WAIT,
             "brokerconnection.manual to say connected after startBrokerConnection")
    receiver = clients.connect(running.client_url("consumer")).receiver("manual.q")
    wait_for(lambda: len(set(receiver.seqs(snd.name))) >= n, WAIT, f"the {n} held messages on B2 after the start",
             describe=lambda: f"{len(set(receiver.seqs(snd.name)))} received")
    drained = wait_count(mgmt1, "manual.q", "messageCount", 0, "manual.q on B1 to be empty once forwarded")
    started = broker_connection(mgmt1, "manual")
    details.update(before_start=idle, held_on_b1=held, on_b2_before_start=on_b2, start_answer=value,
                   after_start=started, received_on_b2=len(set(receiver.seqs(snd.name))), left_on_b1=drained)
    assert started["started"] and started["connected"], f"after the start: {started}"
    assert sorted(set(receiver.seqs(snd.name))) == list(range(n))


@pytest.mark.spec("MGMT-BROKER-REFUSE-1", "MGMT-BROKER-REQUEST-1")
def test_unknown_resources_and_operations_are_refused_and_the_broker_keeps_serving(topology, clients, details):
    running = topology("single-broker")
    mgmt = management_of(running["B1"])
    tag = uuid.uuid4().hex[:8]
    asked = {
        # Artemis names the resource it cannot find when asked an operation; for an attribute it names the attribute
        "unknown queue, operation": (f"queue.no.such.queue.{tag}", {"operation": "countMessages"},
                                     f"no.such.queue.{tag}"),
        "unknown queue, attribute": (f"queue.no.such.queue.{tag}", {"attribute": "messageCount"}, "messageCount"),
        "unknown resource": (f"nosuchresource{tag}", {"operation": "listQueues", "arguments": ["", 1, 10]},
                             f"nosuchresource{tag}"),
        "unknown operation": ("broker", {"operation": f"noSuchOperation{tag}"}, f"noSuchOperation{tag}"),
        "unknown attribute": ("broker", {"attribute": f"noSuchAttribute{tag}"}, f"noSuchAttribute{tag}"),
        "wrong arguments": ("broker", {"operation": "listQueues", "arguments": [f"x{tag}"]}, "listQueues"),
    }
    answers = {}
    for label, (resource, request, _named) in asked.items():
        succeeded, value = mgmt.request(resource, **request)
        answers[label] = {"succeeded": succeeded, "text": value}
    # It goes on serving: management, and messaging.
    listed = queue_row(mgmt, "orders")
    address = f"mgmt.after.{tag}"
    conn = clients.connect(running.client_url("producer"))
    snd = sender(conn, address)
    send_accepted(snd, 3)
    receiver = conn.receiver(address)
    receiver.wait_received(3)
    details.update(answers=answers, orders_listed=listed is not None)
    for label, (_resource, _request, named) in asked.items():
        answer = answers[label]
        assert answer["succeeded"] is False, f"{label}: answered as succeeded: {answer}"
        assert isinstance(answer["text"], str) and named in answer["text"], \
            f"{label}: the refusal should say what it refuses ({named!r}): {answer['text']!r}"
    assert listed is not None, "listQueues after the refusals does not list 'orders'"
