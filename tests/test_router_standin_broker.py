"""Link routes and autolinks of the reference router against a broker played by hand, for what the suites' brokers
cannot show.

003_9cdc7c48796dae4f.txt §12.2.2 and §12.1.4 let a link route or an autolink name its broker by the container id the
broker opens its connection with (`containerId`) instead of the connection's name; link routes may also rewrite the
address the broker sees (`delExternalPrefix`, `addExternalPrefix`). A suite's topology names brokers by connection,
and the container id of RabbitMQ, Artemis or ActiveMQ is theirs to choose, so those forms are checked here: the
router is a real process, and each "broker" is a connection driven by hand over a socket to the router's
route-container listener, with the container id the case gives it. It answers every link the router attaches to
it, records what it was asked for, and can end the session instead of answering, as RabbitMQ does on a link error.
"""

from __future__ import annotations


import pytest
from proton import Collector, Condition, Delivery, Endpoint, Event, Message

from harness.clients import Clients
from harness.wait import wait_for
from tests.test_router_connectors import Silent
from tests.test_router_credit import HandDrivenProducer, pump_socket, socket_connection, start_router  # noqa: F401

TIMEOUT = 10.0

ROUTER = """
    router {
        mode: interior
        id: R1
    }
    listener {
        name: clients
        host: 127.0.0.1
        port: 0
    }
    listener {
        name: brokers
        host: 127.0.0.1
        port: 0
        role: route-container
    }
    linkRoute {
        prefix: b1
        direction: in
        containerId: broker-b1
    }
    linkRoute {
        prefix: b1
        direction: out
        containerId: broker-b1
    }
    linkRoute {
        prefix: ext
        direction: in
        containerId: broker-b1
        delExternalPrefix: ext.
        addExternalPrefix: store.
    }
    linkRoute {
        prefix: !legacy
        direction: in
        containerId: broker-b1
        addExternalPrefix: store.
    }
    address {
        prefix: q1
        waypoint: yes
    }
    autoLink {
        address: q1
        direction: out
        containerId: broker-b1
    }
"""


class StandInBroker:
    """One connection to the router's route-container listener, opened with `container_id` and pumped only while
    the case waits. Every session and link the router opens is answered (a link's termini as asked, credit 10 on
    the links it receives on), except that an attach to an address in `end_session_for` is answered by ending its
    session with an error."""

    def __init__(self, url: str, container_id: str, end_session_for: tuple[str, ...] = (),
                 hold_as_received: tuple[int, int] | None = None):
        self.collector = Collector()  # for the detach/close events only: a detach frame's `closed` flag
        self.sock, self.transport, self.connection = socket_connection(url, container_id, self.collector)
        self.connection.open()
        self.end_session_for = end_session_for
        # (section number, offset): each message is answered with that non-terminal `received` state and held
        self.hold_as_received = hold_as_received
        self.attaches: list[tuple[str, str]] = []  # (the router's end: "sender" or "receiver", address)
        self.messages: list[tuple[str, object]] = []  # (address, body)
        self.ends: list[tuple[str, str]] = []  # ("detach" or "close", address): how the router ended each link

    def pump(self) -> None:
        self._serve()
        pump_socket(self.sock, self.transport)
        self._serve()

    def _serve(self) -> None:
        while (event := self.collector.peek()) is not None:
            if event.type in (Event.LINK_REMOTE_DETACH, Event.LINK_REMOTE_CLOSE):
                link = event.link
                terminus = link.remote_target if link.is_receiver else link.remote_source
                closed = event.type == Event.LINK_REMOTE_CLOSE
                self.ends.append(("close" if closed else "detach", terminus.address))
                if link.state & Endpoint.LOCAL_ACTIVE:
                    link.close() if closed else link.detach()  # answered in kind
            self.collector.pop()
        fresh = Endpoint.LOCAL_UNINIT | Endpoint.REMOTE_ACTIVE
        session = self.connection.session_head(fresh)
        while session is not None:
            session.open()
            session = session.next(fresh)
        link = self.connection.link_head(fresh)
        while link is not None:
            following = link.next(fresh)
            terminus = link.remote_target if link.is_receiver else link.remote_source
            self.attaches.append(("sender" if link.is_receiver else "receiver", terminus.address))
            if terminus.address in self.end_session_for:
                link.session.condition = Condition("amqp:not-found", f"no queue {terminus.address!r}")
                link.session.close()
            else:
                link.source.copy(link.remote_source)
                link.target.copy(link.remote_target)
                link.open()
                if link.is_receiver:
                    link.flow(10)
            link = following
        link = self.connection.link_head(Endpoint.LOCAL_ACTIVE)
        while link is not None:
            delivery = link.current if link.is_receiver else None
            while delivery is not None and delivery.readable and not delivery.partial:
                message = Message()
                message.decode(link.recv(delivery.pending))
                link.advance()
                self.messages.append((link.remote_target.address, message.body))
                if self.hold_as_received is not None:
                    delivery.local.section_number, delivery.local.section_offset = self.hold_as_received
                    delivery.update(delivery.RECEIVED)
                else:
                    delivery.update(delivery.ACCEPTED)
                    delivery.settle()
                link.flow(1)
                delivery = link.current
            link = link.next(Endpoint.LOCAL_ACTIVE)

    def wait(self, predicate, what: str):
        def check():
            self.pump()
            return predicate()
        return wait_for(check, TIMEOUT, what, describe=lambda: f"attaches {self.attaches}, messages {self.messages}")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def router(start_router):  # noqa: F811 - the imported fixture
    return start_router("R1", ROUTER)


@pytest.fixture
def brokers(router):
    started: list[StandInBroker] = []

    def start(container_id: str, **kwargs) -> StandInBroker:
        broker = StandInBroker(router.url("brokers"), container_id, **kwargs)
        started.append(broker)
        broker.wait(lambda: broker.connection.state & Endpoint.REMOTE_ACTIVE, f"the router to open {container_id}")
        return broker

    yield start
    for broker in started:
        broker.close()


@pytest.fixture
def clients():
    with Clients(container_id="standin-broker-tests") as c:
        yield c


def _attach_sender(clients: Clients, router, broker: StandInBroker, address: str):
    """A client's sender on `address`, once the router has answered its attach (the broker is pumped meanwhile:
    a routed attach is answered only when the broker has answered the router's)."""
    sender = clients.connect(router.url()).sender(address, wait=False)
    broker.wait(lambda: sender.attached.is_set() or sender.detached.is_set(), f"the attach to {address} answered")
    return sender


def _send(broker: StandInBroker, sender, count: int = 1) -> None:
    first = sender.sent
    sender.send(count)
    broker.wait(lambda: sender.settled_count() >= first + count, f"{count} message(s) from {sender.name} settled")
    assert {o.outcome for o in sender.wait_outcomes(first + count, timeout=0).values()} == {"accepted"}


def test_link_routes_and_autolinks_keyed_by_container_id_reach_only_that_broker(router, brokers, clients):
    """Three brokers on the route-container listener; the link routes and the autolink name the one whose
    container id sorts between the other two's, so that no ordering of names can stand in for equality."""
    decoys = [brokers("broker-a0"), brokers("broker-c2")]
    b1 = brokers("broker-b1")
    b1.wait(lambda: ("sender", "q1") in b1.attaches, "the autolink for q1 to attach to broker-b1")

    sender = _attach_sender(clients, router, b1, "b1.orders")
    assert sender.attached.is_set(), f"the attach to b1.orders was refused: {sender.condition}"
    _send(b1, sender, 2)
    receiver = clients.connect(router.url()).receiver("b1.orders", wait=False)
    b1.wait(lambda: ("receiver", "b1.orders") in b1.attaches and receiver.attached.is_set(),
            "a receiver's attach to b1.orders routed to broker-b1")

    for decoy in decoys:
        decoy.pump()
        assert decoy.attaches == [] and decoy.messages == [], "nothing for broker-b1 may reach another broker"
    assert [address for address, _ in b1.messages] == ["b1.orders"] * 2


def test_a_link_route_gives_the_broker_its_external_address_and_the_client_its_own(router, brokers, clients):
    """delExternalPrefix and addExternalPrefix rewrite the address the broker sees; the client's attach is answered
    with the address it asked for. Every address is rewritten, one that sorts before `$coordinator` too (the
    transaction coordinator's link keeps its coordinator target)."""
    b1 = brokers("broker-b1")
    for address, external in (("ext.orders", "store.orders"), ("!legacy.orders", "store.!legacy.orders")):
        sender = _attach_sender(clients, router, b1, address)
        assert sender.attached.is_set(), f"the attach to {address} was refused: {sender.condition}"
        assert ("sender", external) in b1.attaches, f"the broker is asked for {external}: {b1.attaches}"
        assert sender.remote_address == address, "the client sees its own address, not the broker's"
        _send(b1, sender)
        assert b1.messages[-1][0] == external


def test_a_broker_that_ends_the_session_on_a_refusal_still_gets_the_next_attach(router, brokers, clients):
    """RabbitMQ answers a link error by ending the whole session; the router's next routed attach to that broker
    must go on a new session, not on the ended one (where it would never be answered)."""
    b1 = brokers("broker-b1", end_session_for=("b1.missing",))
    refused = _attach_sender(clients, router, b1, "b1.missing")
    assert not refused.attached.is_set(), "the attach the broker refused is refused to the client too"
    assert "amqp:not-found" in (refused.condition or ""), f"with the broker's reason: {refused.condition}"
    sender = _attach_sender(clients, router, b1, "b1.orders")
    assert sender.attached.is_set(), f"the next attach was refused: {sender.condition}"
    _send(b1, sender)


@pytest.mark.parametrize("close", [False, True], ids=["detached", "closed"])
def test_a_routed_link_ends_at_the_broker_as_the_client_ended_it(router, brokers, clients, close):
    """A detach that does not close (AMQP 1.0 §2.6.3: `closed` false) is how a client leaves a durable subscription
    in place; a link route relays the link (003 §12.2), so the broker must get the same kind of detach, or it would
    drop the subscription the client meant to keep."""
    b1 = brokers("broker-b1")
    receiver = clients.connect(router.url()).receiver("b1.news", wait=False)
    b1.wait(lambda: receiver.attached.is_set(), "the routed attach of b1.news answered")
    receiver.detach(wait=False, close=close)
    b1.wait(lambda: b1.ends, "the broker to see the routed link end")
    assert b1.ends == [("close" if close else "detach", "b1.news")]
    b1.wait(receiver.detached.is_set, "the client's detach answered")



def test_a_broker_connection_that_never_opened_is_no_route(start_router, clients):  # noqa: F811
    """A broker that accepts the router's TCP connection and never answers its AMQP open holds no link route yet:
    an attach for its prefix is refused at once with no route (003 §12.2.2), not sent into a connection that has
    not opened (where it would wait unanswered)."""
    silent = Silent()
    try:
        router = start_router("R1", f"""
            router {{
                mode: interior
                id: R1
            }}
            listener {{
                name: clients
                host: 127.0.0.1
                port: 0
            }}
            connector {{
                name: B9
                host: 127.0.0.1
                port: {silent.port}
                role: route-container
            }}
            linkRoute {{
                prefix: b9
                direction: in
                connection: B9
            }}
        """)
        wait_for(lambda: silent.accepted, TIMEOUT, "the router to dial the silent broker")
        sender = clients.connect(router.url()).sender("b9.orders", wait=False)
        wait_for(lambda: sender.detached.is_set() or sender.attached.is_set(), TIMEOUT,
                 "the attach to b9.orders answered")
        assert not sender.attached.is_set() and "qd:no-route-to-dest" in (sender.condition or ""), sender.condition
    finally:
        silent.close()


def test_a_received_state_crosses_the_link_route_with_its_section_and_offset(router, brokers):
    """A link route relays delivery states as they are (003 §12.2.1): the non-terminal `received` state (AMQP 1.0
    §3.4.1), with which a receiver says how much of a message it has, reaches the sender with its section number
    and offset."""
    b1 = brokers("broker-b1", hold_as_received=(2, 17))
    producer = HandDrivenProducer(router.url(), "b1.orders")
    try:
        def pumped(check):
            def both():
                producer.pump()
                b1.pump()
                return check()
            return both
        wait_for(pumped(lambda: producer.link.credit > 0), TIMEOUT, "credit from the broker through the route")
        delivery = producer.send("held")
        wait_for(pumped(lambda: delivery.remote_state == Delivery.RECEIVED), TIMEOUT,
                 "the broker's received state at the producer", describe=lambda: str(delivery.remote_state))
        assert (delivery.remote.section_number, delivery.remote.section_offset) == (2, 17)
        assert not delivery.settled and b1.messages == [("b1.orders", "held")]
    finally:
        producer.close()

