"""A network of secured brokers joined by their common user (004_05e35cdd7bc39ede.txt: both brokers hold a user
with the same name and password, and the network connector dials as that user).

Topology `security-broker-network`: B1's network connector forwards jobs.# to B2's consumers as myCommonUser.
The producer and the consumer are users of their own, who may only send (producer) or consume (consumer): the
messages cross the network only through the common user's permissions on both brokers.
"""

from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection

from suites.brokerconnections.conftest import WAIT

pytestmark = pytest.mark.requires("network-of-brokers", "broker:sasl.plain", "broker-permissions")

N = 5


def connect(peer, user: str) -> BlockingConnection:
    endpoint = peer.endpoints["clients"]
    return BlockingConnection(f"amqp://{endpoint.host}:{endpoint.port}", user=user, password=f"{user}-secret",
                              allowed_mechs="PLAIN", allow_insecure_mechs=True, timeout=WAIT)


@pytest.mark.spec("SEC-BROKER-NETWORK-1")
def test_the_common_user_carries_messages_across_the_network(topology, details):
    running = topology("security-broker-network")
    b1, b2 = running["B1"], running["B2"]
    consumer = connect(b2, "consumer")
    producer = connect(b1, "producer")
    try:
        receiver = consumer.create_receiver(b2.wire_address("jobs.q"), credit=N)  # the demand B1 forwards to
        sender = producer.create_sender(b1.wire_address("jobs.q"))
        bodies = [f"job-{i}" for i in range(N)]
        for body in bodies:
            sender.send(Message(body=body, durable=True))  # blocks until accepted
        received = []
        for _ in bodies:
            message = receiver.receive(timeout=WAIT)  # a deadline-bound wait for the next one
            received.append(message.body)
            receiver.accept()
        details.update(sent=N, received=len(received))
        assert sorted(received) == sorted(bodies), f"B2's consumer got {received}, B1's producer sent {bodies}"
    finally:
        producer.close()
        consumer.close()
