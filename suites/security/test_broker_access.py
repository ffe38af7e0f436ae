"""Broker security on the wire (issue 20): SASL PLAIN users and per-operation permissions.

Topology `security-broker` (users alice/bob/carol/dave in roles senders/receivers/creators, permissions on
orders.#); the TLS acceptor is test_broker_tls.py's, with the same `attempt` helper. What is checked
is what a client sees: the SASL outcome, the condition that ends an attach (or, where a broker refuses later,
the transfer), and that a refused operation left nothing behind on the broker.

The cases drive proton directly (`attempt` below) rather than harness.clients, because they must see the
exchanges a normal client hides: the SASL outcome, and refusals that come as a detach, a session end or a
rejected transfer depending on the broker (RabbitMQ ends the session; Artemis and the reference detach).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from proton import Message, SSLDomain
from proton.handlers import MessagingHandler
from proton.reactor import Container

from harness.wait import wait_for

pytestmark = pytest.mark.requires("broker:sasl.plain", "broker-permissions")

UNAUTHORIZED = "amqp:unauthorized-access"
SASL_AUTH = 1  # sasl-code `auth` (AMQP 1.0 §5.3.3.6): authentication failed, bad credentials
DEADLINE = 10.0  # seconds for one attempt: a refusal or an answer comes in well under a second on every peer


# ---- one attempt: connect, maybe attach, maybe send one message; record what came back -----------------------


@dataclass
class Attempt:
    opened: bool = False  # the broker answered our open: we are in
    sasl_outcome: int | None = None
    attached: bool = False  # the broker answered the attach with a terminus (not a refusal)
    outcome: str | None = None  # the sent message's outcome: accepted | rejected | released | modified
    refused: tuple[str, str, str] | None = None  # (where: sasl/transport/connection/session/link/transfer, name, text)
    timed_out: bool = False
    events: list[str] = field(default_factory=list)

    @property
    def condition(self) -> str | None:
        return self.refused[1] if self.refused else None

    def describe(self) -> str:
        return (f"opened={self.opened} sasl_outcome={self.sasl_outcome} attached={self.attached} "
                f"outcome={self.outcome} refused={self.refused} timed_out={self.timed_out}")


class _Probe(MessagingHandler):
    def __init__(self, attempt: Attempt, url: str, options: dict, address: str | None, role: str | None):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.attempt, self.url, self.options, self.address, self.role = attempt, url, options, address, role
        self.conn = None
        self.sent = False

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(self.url, reconnect=False, **self.options)
        event.container.schedule(DEADLINE, self)

    def on_timer_task(self, _event):
        self.attempt.timed_out = True
        self.container.stop()

    def _refused(self, where: str, condition) -> None:
        if self.attempt.refused is None and condition is not None:
            self.attempt.refused = (where, condition.name, condition.description or "")
        self.attempt.events.append(f"{where}: {condition}")

    def _done(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def on_connection_opened(self, event):
        self.attempt.opened = True
        if self.address is None:
            self._done()
        elif self.role == "sender":
            event.container.create_sender(event.connection, self.address)
        else:
            event.container.create_receiver(event.connection, self.address)

    def on_link_opened(self, event):
        link = event.link
        terminus = link.remote_target if link.is_sender else link.remote_source
        if terminus is None or terminus.address is None:
            return  # a refusal: the detach with its condition follows
        self.attempt.attached = True
        if link.is_receiver:
            self._done()

    def on_sendable(self, event):
        if not self.sent and self.attempt.attached:
            self.sent = True
            event.sender.send(Message(body="secured", durable=True))

    def on_accepted(self, event):
        self.attempt.outcome = "accepted"
        self._done()

    def on_rejected(self, event):
        self.attempt.outcome = "rejected"
        self._refused("transfer", event.delivery.remote.condition)
        self._done()

    def on_released(self, event):
        self.attempt.outcome = "released"
        self._done()

    def on_link_error(self, event):
        self._refused("link", event.link.remote_condition)
        self._done()

    def on_link_closing(self, event):
        self._refused("link", event.link.remote_condition)
        self._done()

    def on_session_error(self, event):
        self._refused("session", event.session.remote_condition)
        self._done()

    def on_session_closing(self, event):
        self._refused("session", event.session.remote_condition)
        self._done()

    def on_connection_error(self, event):
        self._refused("connection", event.connection.remote_condition)

    def on_transport_error(self, event):
        transport = event.transport
        outcome = transport.sasl().outcome if transport is not None else None
        self.attempt.sasl_outcome = outcome
        self._refused("sasl" if outcome is not None and outcome != 0 else "transport", transport.condition)
        self.container.stop()

    def on_connection_closed(self, _event):
        self.container.stop()

    def on_transport_closed(self, _event):
        self.container.stop()


def attempt(url: str, *, user: str | None = None, password: str | None = None, mechs: str | None = None,
            ssl_domain: SSLDomain | None = None, virtual_host: str | None = None, address: str | None = None,
            role: str | None = None) -> Attempt:
    """Connect (SASL PLAIN when `user`, else ANONYMOUS), then attach a `role` link to `address` and, for a
    sender, send one durable message; everything the broker answered is in the Attempt."""
    options: dict = {"allowed_mechs": mechs or ("PLAIN" if user else "ANONYMOUS")}
    if user is not None:
        options.update(user=user, password=password or "", allow_insecure_mechs=True)  # loopback only
    if ssl_domain is not None:
        options["ssl_domain"] = ssl_domain
    if virtual_host is not None:
        options["virtual_host"] = virtual_host
    result = Attempt()
    Container(_Probe(result, url, options, address, role)).run()
    return result


def url_of(peer, scheme: str = "amqp") -> str:
    endpoint = peer.endpoints["clients"]
    return f"{scheme}://{endpoint.host}:{endpoint.port}"


def queued(peer, name: str) -> int:
    return int(peer.queue_stats(name).get("depth", 0))


def assert_refused(result: Attempt, what: str) -> None:
    assert result.opened, f"{what}: the connection itself was refused: {result.describe()}"
    assert result.outcome != "accepted", f"{what}: the broker accepted the message: {result.describe()}"
    assert result.condition == UNAUTHORIZED, (f"{what}: expected a refusal with {UNAUTHORIZED}, got "
                                              f"{result.describe()}")


PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret", "dave": "dave-secret"}


@pytest.fixture
def secured(topology):
    running = topology("security-broker")
    return running["B1"]


def as_user(broker, user: str, **kwargs) -> Attempt:
    return attempt(url_of(broker), user=user, password=PASSWORDS[user], **kwargs)


# ---- authentication -----------------------------------------------------------------------------------------


@pytest.mark.spec("SEC-BROKER-AUTH-1")
def test_a_good_password_is_accepted(secured, details):
    result = as_user(secured, "alice")
    details.update(result=result.describe())
    assert result.opened and result.refused is None, result.describe()


@pytest.mark.spec("SEC-BROKER-AUTH-1")
def test_a_wrong_password_gets_sasl_outcome_auth(secured, details):
    result = attempt(url_of(secured), user="alice", password="not-alice-secret")
    details.update(result=result.describe())
    assert not result.opened, f"a wrong password opened the connection: {result.describe()}"
    assert result.sasl_outcome == SASL_AUTH, f"expected SASL outcome auth (1): {result.describe()}"


@pytest.mark.spec("SEC-BROKER-AUTH-1")
def test_an_unknown_user_gets_sasl_outcome_auth(secured, details):
    result = attempt(url_of(secured), user="mallory", password="alice-secret")
    details.update(result=result.describe())
    assert not result.opened and result.sasl_outcome == SASL_AUTH, result.describe()


@pytest.mark.spec("SEC-BROKER-AUTH-2")
def test_anonymous_is_refused_when_security_is_on(secured, details):
    result = attempt(url_of(secured), mechs="ANONYMOUS", address=secured.wire_address("orders.new"),
                     role="sender")
    details.update(result=result.describe())
    assert not result.opened, f"an ANONYMOUS client got in: {result.describe()}"
    assert result.condition == UNAUTHORIZED or result.sasl_outcome == SASL_AUTH, result.describe()


# ---- permissions per operation --------------------------------------------------------------------------------


@pytest.mark.spec("SEC-BROKER-SEND-1")
def test_a_user_with_send_may_send(secured, details):
    before = queued(secured, "orders.new")
    result = as_user(secured, "alice", address=secured.wire_address("orders.new"), role="sender")
    details.update(result=result.describe())
    assert result.outcome == "accepted", result.describe()
    wait_for(lambda: queued(secured, "orders.new") > before, DEADLINE, "alice's message on orders.new",
             describe=lambda: f"depth {queued(secured, 'orders.new')}, {before} before")


@pytest.mark.spec("SEC-BROKER-SEND-2")
def test_a_user_without_send_is_refused_and_nothing_is_stored(secured, details):
    before = queued(secured, "orders.new")
    result = as_user(secured, "bob", address=secured.wire_address("orders.new"), role="sender")
    details.update(result=result.describe(), refused_at=result.refused[0] if result.refused else None)
    assert_refused(result, "bob (receivers only) sending to orders.new")
    assert queued(secured, "orders.new") == before, "a refused sender's message was stored"


@pytest.mark.spec("SEC-BROKER-SEND-2")
@pytest.mark.requires("permissions.send-per-queue")
def test_a_user_with_send_on_some_addresses_cannot_send_to_others(secured, details):
    """alice may send on orders.# only: the declared queue invoices is covered by no setting."""
    before = queued(secured, "invoices")
    result = as_user(secured, "alice", address=secured.wire_address("invoices"), role="sender")
    details.update(result=result.describe(), refused_at=result.refused[0] if result.refused else None)
    assert_refused(result, "alice (send on orders.# only) sending to invoices")
    assert queued(secured, "invoices") == before, "a refused sender's message was stored"


@pytest.mark.spec("SEC-BROKER-CONSUME-1")
def test_a_user_with_consume_may_attach_a_receiver(secured, details):
    result = as_user(secured, "bob", address=secured.wire_address("orders.new"), role="receiver")
    details.update(result=result.describe())
    assert result.attached and result.refused is None, result.describe()


@pytest.mark.spec("SEC-BROKER-CONSUME-2")
def test_a_user_without_consume_is_refused(secured, details):
    result = as_user(secured, "alice", address=secured.wire_address("orders.new"), role="receiver")
    details.update(result=result.describe(), refused_at=result.refused[0] if result.refused else None)
    assert_refused(result, "alice (senders only) consuming from orders.new")
    assert not result.attached, f"alice's receiver was attached: {result.describe()}"


@pytest.mark.spec("SEC-BROKER-CREATE-1")
def test_a_user_with_create_permissions_may_auto_create_a_queue(secured, details):
    name = f"orders.auto.{uuid.uuid4().hex[:10]}"
    result = as_user(secured, "carol", address=secured.wire_address(name), role="sender")
    details.update(result=result.describe(), queue=name)
    assert result.outcome == "accepted", result.describe()
    wait_for(lambda: secured.queue_stats(name).get("exists", True) and queued(secured, name) == 1, DEADLINE,
             f"queue {name} created with carol's message", describe=lambda: str(secured.queue_stats(name)))


@pytest.mark.spec("SEC-BROKER-CREATE-2")
@pytest.mark.parametrize("user, role", [("alice", "sender"), ("bob", "receiver")])
def test_a_user_without_create_permissions_cannot_auto_create(secured, details, user, role):
    """alice may send and bob may consume on orders.#, but neither may create an address or queue there."""
    name = f"orders.auto.{uuid.uuid4().hex[:10]}"
    result = as_user(secured, user, address=secured.wire_address(name), role=role)
    stats = secured.queue_stats(name)
    details.update(result=result.describe(), queue=name, stats=stats)
    assert_refused(result, f"{user} auto-creating {name} with a {role}")
    assert not stats.get("exists", False) or stats.get("depth", 0) == 0, f"{name} was created: {stats}"


@pytest.mark.spec("SEC-BROKER-SEND-2", "SEC-BROKER-CONSUME-2")
@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_a_user_with_no_role_may_do_nothing(secured, details, role):
    result = as_user(secured, "dave", address=secured.wire_address("orders.new"), role=role)
    details.update(result=result.describe())
    assert_refused(result, f"dave (no role) attaching a {role}")
