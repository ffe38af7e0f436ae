"""The reference broker's AMQP management (reference/broker/management_amqp.py), as a real process with real proton
clients: requests to `activemq.management`, answers on the reply-to, as ActiveMQ Artemis speaks it (Artemis 2.40.0's
ManagementServiceImpl: `_AMQ_ResourceName`, `_AMQ_OperationName` with a JSON array of arguments or `_AMQ_Attribute`;
the reply's `_AMQ_OperationSucceeded`, correlation-id and JSON body), through the harness's ManagementClient
(harness/amq_management.py) and by hand where the wire itself is judged. No mocks.
"""

from __future__ import annotations

import contextlib
import json
import uuid

import pytest
from proton import Message
from proton.utils import BlockingConnection, SendException

from harness.amq_management import ManagementClient
from harness.peers.base import ManagementError
from harness.ports import free_port
from harness.wait import wait_for
from reference.broker.config import parse_config
from tests.test_broker_process import BrokerProcess, broker_xml, clients, start_broker  # noqa: F401 - fixtures

WAIT = 15.0


def connection_xml(port: int) -> str:
    return f"""\
    <broker-connections>
      <amqp-connection uri="tcp://127.0.0.1:{port}" name="to-nowhere" auto-start="false"
                       retry-interval="5000" reconnect-attempts="-1">
        <sender address-match="orders"/>
      </amqp-connection>
    </broker-connections>
"""


@pytest.fixture
def broker(tmp_path, start_broker):  # noqa: F811
    (tmp_path / "broker.xml").write_text(broker_xml(persistence=False, core=connection_xml(free_port())))
    return start_broker("broker.xml").wait_ready()


@pytest.fixture
def mgmt(broker):
    client = ManagementClient(broker.url, timeout=10)
    yield client
    client.close()


def send(url: str, address: str, count: int, **auth) -> None:
    conn = BlockingConnection(url, timeout=10, **auth)
    try:
        sender = conn.create_sender(address)
        for i in range(count):
            sender.send(Message(body=f"m{i}", durable=False))
    finally:
        conn.close()


def messages(mgmt, queue: str):
    return mgmt.call(f"queue.{queue}", "messageCount", attribute="messageCount")


def test_queue_counts_attributes_and_list_queues_follow_the_traffic(broker, mgmt, clients):  # noqa: F811
    send(broker.url, "orders", 5)
    assert messages(mgmt, "orders") == 5
    assert mgmt.call("queue.orders", "count", operation="countMessages") == 5
    assert mgmt.call("queue.orders", "count", operation="countMessages", arguments=[""]) == 5
    consumer = clients.connect(broker.url).receiver("orders", credit=2, auto_credit=False)
    consumer.wait_received(2)  # and accepted
    wait_for(lambda: messages(mgmt, "orders") == 3, WAIT, "two accepted messages gone",
             describe=lambda: str(messages(mgmt, "orders")))
    assert mgmt.call("queue.orders", "consumers", attribute="consumerCount") == 1
    options = json.dumps({"field": "name", "operation": "EQUALS", "value": "orders"})
    listed = json.loads(mgmt.call("broker", "list", operation="listQueues", arguments=[options, 1, 100]))
    assert listed["count"] == 1 and [row["name"] for row in listed["data"]] == ["orders"]
    row = listed["data"][0]
    assert (row["messageCount"], row["consumerCount"], row["deliveringCount"], row["routingType"], row["address"],
            row["durable"]) == ("3", "1", "0", "ANYCAST", "orders", "true")
    consumer.detach()
    wait_for(lambda: mgmt.call("queue.orders", "c", attribute="consumerCount") == 0, WAIT, "the consumer gone")
    assert messages(mgmt, "orders") == 3
    assert mgmt.call("queue.orders", "d", attribute="deliveringCount") == 0
    assert mgmt.call("queue.orders", "r", attribute="routingType") == "ANYCAST"


def test_list_filters_and_pages_as_artemis_views_do(broker, mgmt):
    every = json.loads(mgmt.call("broker", "list", operation="listQueues", arguments=["", -1, -1]))
    names = {row["name"] for row in every["data"]}
    assert {"orders", "DLQ"} <= names and every["count"] == len(every["data"])
    contains = json.dumps({"field": "name", "operation": "CONTAINS", "value": "rde"})
    assert [r["name"] for r in json.loads(mgmt.call("broker", "l", operation="listQueues",
                                                    arguments=[contains, 1, 10]))["data"]] == ["orders"]
    one_page = json.loads(mgmt.call("broker", "l", operation="listQueues", arguments=["", 1, 1]))
    assert len(one_page["data"]) == 1 and one_page["count"] == every["count"]
    addresses = json.loads(mgmt.call("broker", "l", operation="listAddresses",
                                     arguments=[json.dumps({"field": "name", "operation": "EQUALS",
                                                            "value": "orders"}), 1, 10]))
    assert addresses["data"][0]["routingTypes"] == "[ANYCAST]" and addresses["data"][0]["queueCount"] == "1"
    assert "orders" in mgmt.call("broker", "names", attribute="addressNames")
    assert "orders" in mgmt.call("broker", "names", operation="getAddressNames")  # a getter is an operation too
    assert mgmt.call("address.orders", "q", attribute="queueNames") == ["orders"]


def test_broker_connections_are_listed_read_and_started(broker, mgmt):
    listed = json.loads(mgmt.call("broker", "list", operation="listBrokerConnections"))
    assert [(c["name"], c["started"], c["connected"], c["protocol"]) for c in listed] == [
        ("to-nowhere", False, False, "AMQP")]
    uri = mgmt.call("brokerconnection.to-nowhere", "uri", attribute="uri")
    assert uri.startswith("tcp://127.0.0.1:") and uri == listed[0]["uri"]
    assert mgmt.call("brokerconnection.to-nowhere", "s", attribute="started") is False
    assert mgmt.call("broker", "start", operation="startBrokerConnection", arguments=["to-nowhere"]) is None
    assert mgmt.call("brokerconnection.to-nowhere", "s", attribute="started") is True
    assert mgmt.call("brokerconnection.to-nowhere", "c", attribute="connected") is False  # nothing listens there
    # Started already: Artemis's start() does nothing and succeeds.
    assert mgmt.request("broker", operation="startBrokerConnection", arguments=["to-nowhere"]) == (True, None)
    assert mgmt.request("broker", operation="startBrokerConnection", arguments=["elsewhere"]) == (
        False, "broker connection elsewhere not found")


def test_what_the_broker_does_not_have_is_refused_in_artemis_words(broker, mgmt):
    assert mgmt.request("queue.nope", operation="countMessages") == (
        False, "AMQ229067: Cannot find resource with name queue.nope")
    assert mgmt.request("broker", operation="frobnicate", arguments=[1, 2]) == (
        False, "AMQ229069: no operation frobnicate/2")
    assert mgmt.request("broker", operation="listQueues", arguments=["just one"]) == (
        False, "AMQ229069: no operation listQueues/1")
    assert mgmt.request("broker", operation="listQueues", arguments=[1, 1, 1]) == (  # wrong types: no such method
        False, "AMQ229069: no operation listQueues/3")
    succeeded, text = mgmt.request("broker", attribute="colour")
    assert not succeeded and text.startswith("Problem while retrieving attribute colour") and "no getter" in text
    succeeded, text = mgmt.request("queue.nope", attribute="messageCount")
    assert not succeeded and text.startswith("Problem while retrieving attribute messageCount")
    succeeded, text = mgmt.request("broker", operation="listQueues",
                                   arguments=[json.dumps({"field": "name", "operation": "LIKE", "value": "x"}), 1, 1])
    assert not succeeded and "LIKE" in text
    # ... and it keeps serving.
    assert mgmt.call("broker", "name", attribute="name") == "B-test"
    send(broker.url, "orders", 1)
    assert messages(mgmt, "orders") == 1


def test_destroy_queue_as_artemis_does(broker, mgmt):
    send(broker.url, "scratch", 2)
    assert messages(mgmt, "scratch") == 2
    consumer_conn = BlockingConnection(broker.url, timeout=10)
    consumer_conn.create_receiver("scratch", credit=0)
    succeeded, text = mgmt.request("broker", operation="destroyQueue", arguments=["scratch"])
    assert not succeeded and text.startswith("AMQ229025: Cannot delete queue scratch") and "consumers = 1" in text
    assert mgmt.request("broker", operation="destroyQueue", arguments=["scratch", True]) == (True, None)
    assert mgmt.request("queue.scratch", attribute="messageCount")[0] is False
    with contextlib.suppress(Exception):  # its link was closed by the broker (amqp:resource-deleted)
        consumer_conn.close()
    assert mgmt.request("broker", operation="destroyQueue", arguments=["scratch"]) == (
        False, "AMQ229017: Queue scratch does not exist")
    assert "scratch" not in mgmt.call("broker", "names", attribute="queueNames")


def test_the_reply_correlates_and_carries_a_json_array(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        reply_to = f"activemq.management.reply.{uuid.uuid4().hex}"
        receiver = conn.create_receiver(reply_to, credit=10)
        sender = conn.create_sender("activemq.management")
        by_id = Message(id="req-1", reply_to=reply_to, body="[]",
                        properties={"_AMQ_ResourceName": "queue.orders", "_AMQ_Attribute": "messageCount"})
        sender.send(by_id)
        reply = receiver.receive(timeout=10)
        receiver.accept()
        assert reply.correlation_id == "req-1" and reply.address == reply_to
        assert reply.properties == {"_AMQ_OperationSucceeded": True} and json.loads(reply.body) == [0]
        by_correlation = Message(id="req-2", correlation_id="mine", reply_to=f"queue://{reply_to}", body="[]",
                                 properties={"_AMQ_ResourceName": "broker", "_AMQ_OperationName": "nothing"})
        sender.send(by_correlation)
        reply = receiver.receive(timeout=10)
        receiver.accept()
        assert reply.correlation_id == "mine" and reply.properties["_AMQ_OperationSucceeded"] is False
        assert json.loads(reply.body) == ["AMQ229069: no operation nothing/0"]
        # The anonymous relay reaches management too: a message whose `to` is the management address.
        relay = conn.create_sender(None)
        relay.send(Message(id="req-3", address="activemq.management", reply_to=reply_to, body="[]",
                           properties={"_AMQ_ResourceName": "broker", "_AMQ_Attribute": "name"}))
        reply = receiver.receive(timeout=10)
        receiver.accept()
        assert reply.correlation_id == "req-3" and json.loads(reply.body) == ["B-test"]
        # A request without an operation or an attribute is answered, refused.
        sender.send(Message(id="req-4", reply_to=reply_to, properties={"_AMQ_ResourceName": "broker"}))
        reply = receiver.receive(timeout=10)
        receiver.accept()
        assert reply.properties["_AMQ_OperationSucceeded"] is False and "names neither" in json.loads(reply.body)[0]
    finally:
        conn.close()


def test_management_address_comes_from_broker_xml():
    cfg = parse_config(broker_xml(core="    <management-address>ops.manage</management-address>\n"))
    assert cfg.management_address == "ops.manage"
    assert parse_config(broker_xml()).management_address == "activemq.management"


# ---- security: `manage` on the management address ---------------------------------------------------------------

SECURED = """\
<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>B-test</name>
    <persistence-enabled>false</persistence-enabled>
    <acceptors>
      <acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP</acceptor>
    </acceptors>
    <security-enabled>true</security-enabled>
    <security-settings>
      <security-setting match="activemq.management.#">
        <permission type="send" roles="operators,viewers"/>
        <permission type="consume" roles="operators,viewers"/>
        <permission type="createAddress" roles="operators,viewers"/>
        <permission type="createDurableQueue" roles="operators,viewers"/>
        <permission type="createNonDurableQueue" roles="operators,viewers"/>
        <permission type="manage" roles="operators"/>
      </security-setting>
    </security-settings>
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""


def test_only_a_user_whose_role_may_manage_is_answered(tmp_path):
    (tmp_path / "broker.xml").write_text(SECURED)
    (tmp_path / "artemis-users.properties").write_text("olga = o-pw\nvic = v-pw\n")
    (tmp_path / "artemis-roles.properties").write_text("operators = olga\nviewers = vic\n")
    broker = BrokerProcess(tmp_path / "broker.xml", tmp_path, management=False).wait_ready()
    try:
        with ManagementClient(broker.url, "olga", "o-pw") as allowed:
            assert allowed.call("queue.orders", "count", attribute="messageCount") == 0
        # vic may send to the management address and read his reply queue, but not manage: the request is
        # rejected (amqp:unauthorized-access), nothing is answered, and the refusal is logged.
        conn = BlockingConnection(broker.url, user="vic", password="v-pw", allowed_mechs="PLAIN",
                                  allow_insecure_mechs=True, timeout=10)
        try:
            reply_to = f"activemq.management.reply.{uuid.uuid4().hex}"
            receiver = conn.create_receiver(reply_to, credit=10)
            sender = conn.create_sender("activemq.management")
            with pytest.raises(SendException):
                sender.send(Message(id="x", reply_to=reply_to, body="[]",
                                    properties={"_AMQ_ResourceName": "broker", "_AMQ_OperationName": "destroyQueue"}))
            with pytest.raises(Exception):  # noqa: B017 - proton's Timeout: no reply comes
                receiver.receive(timeout=1)
        finally:
            conn.close()
        wait_for(lambda: "may not manage on 'activemq.management'" in broker.stderr(), WAIT,
                 "the refusal in the broker's log", describe=lambda: broker.stderr()[-400:])
        with pytest.raises(ManagementError):
            ManagementClient(broker.url, "vic", "v-pw", timeout=3).call("broker", "list",
                                                                        operation="listBrokerConnections")
    finally:
        broker.terminate()
        broker.close()


def test_the_peer_manages_the_reference_broker_over_amqp_with_a_user_of_its_own(tmp_path):
    """ReferenceBrokerPeer with amqp_management: the management acceptor and user the renderer writes (as for
    Artemis), no endpoint for it among the topology's, and the same ManagementClient as for Artemis."""
    from harness.vendors.reference.broker import MANAGEMENT_USER, ReferenceBrokerPeer
    from harness.vendors.artemis.render import MANAGEMENT_ACCEPTOR

    def render(ports, management_port=None, management_role=None):
        text = SECURED.replace('<permission type="manage" roles="operators"/>',
                               f'<permission type="manage" roles="operators,{management_role}"/>')
        text = text.replace('roles="operators,viewers"', f'roles="operators,viewers,{management_role}"')
        extra = f'\n      <acceptor name="{MANAGEMENT_ACCEPTOR}">tcp://127.0.0.1:{management_port}?protocols=AMQP' \
                '</acceptor>'
        text = text.replace("    </security-settings>", '      <security-setting match="orders">\n'
                            '        <permission type="send" roles="operators"/>\n      </security-setting>\n'
                            "    </security-settings>")
        clients_port = ports.get("clients", 0)
        return text.replace('<acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP</acceptor>',
                            f'<acceptor name="clients">tcp://127.0.0.1:{clients_port}?protocols=AMQP</acceptor>'
                            + extra)

    peer = ReferenceBrokerPeer("B1", render, frozenset(), workdir=tmp_path, files={
        "artemis-users.properties": "olga = o-pw\n", "artemis-roles.properties": "operators = olga\n"},
        amqp_management=True)
    try:
        peer.start()
        assert list(peer.endpoints) == ["clients"]
        assert peer.management.user == MANAGEMENT_USER and peer.management.url.endswith(f":{peer.management_port}")
        send(peer.url, "orders", 2, user="olga", password="o-pw", allowed_mechs="PLAIN", allow_insecure_mechs=True)
        assert peer.management.call("queue.orders", "count", attribute="messageCount") == 2
        assert peer.queue_stats("orders")["depth"] == 2  # the peer reads it the same way
        assert peer.queue_stats("nothing.here") == {"name": "nothing.here", "depth": 0, "consumers": 0, "exists": False}
        peer.restart()
        assert peer.management.call("queue.orders", "count", attribute="messageCount") == 0  # not durable
    finally:
        peer.stop()
        peer.cleanup()
