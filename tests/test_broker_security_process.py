"""The reference broker with security on, as a real process: the login files beside broker.xml, refusals
logged with user, operation and address, and the one-line start-up errors of the TLS acceptor. What clients
see on the wire is the security suite's business (suites/security/test_broker_*.py)."""

from __future__ import annotations

import pytest
from proton.utils import BlockingConnection, LinkDetached

from harness.tlsca import TestPki
from tests.test_broker_process import BrokerProcess

SECURED = """\
<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>B-test</name>
    <persistence-enabled>false</persistence-enabled>
    <acceptors>
      <acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP{tls}</acceptor>
    </acceptors>
    <security-enabled>true</security-enabled>
    <security-settings>
      <security-setting match="orders.#">
        <permission type="send" roles="senders"/>
        <permission type="consume" roles="receivers"/>
      </security-setting>
    </security-settings>
    <addresses>
      <address name="orders.new"><anycast><queue name="orders.new"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""


def write(folder, tls: str = "", users: str | None = "alice = a-pw\nbob = b-pw\n",
          roles: str | None = "senders = alice\nreceivers = bob\n"):
    (folder / "broker.xml").write_text(SECURED.format(tls=tls))
    if users is not None:
        (folder / "artemis-users.properties").write_text(users)
    if roles is not None:
        (folder / "artemis-roles.properties").write_text(roles)
    return folder / "broker.xml"


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(write(tmp_path), tmp_path)
    yield process
    process.terminate()
    process.close()


def connect(broker, user: str, password: str) -> BlockingConnection:
    return BlockingConnection(broker.url, user=user, password=password, allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10)


def test_a_refused_attach_is_logged_with_user_operation_and_address(broker):
    broker.wait_ready()
    assert "(acceptor 'clients', protocols AMQP) with SASL PLAIN" in broker.stderr()
    conn = connect(broker, "bob", "b-pw")
    try:
        with pytest.raises(LinkDetached) as info:
            conn.create_sender("orders.new")
        assert info.value.condition == "amqp:unauthorized-access"
        receiver = conn.create_receiver("orders.new")  # bob may consume
        receiver.close()
    finally:
        conn.close()
    refusals = [line for line in broker.lines() if "Refused attach" in line]
    assert len(refusals) == 1, broker.stderr()
    assert "user 'bob'" in refusals[0] and "may not send on 'orders.new'" in refusals[0], refusals[0]
    assert "(warning)" in refusals[0]


@pytest.mark.parametrize("missing", ["artemis-users.properties", "artemis-roles.properties"])
def test_a_missing_login_file_is_one_line_and_exit_1(tmp_path, missing):
    config = write(tmp_path, users=None if "users" in missing else "alice = a\n",
                   roles=None if "roles" in missing else "")
    process = BrokerProcess(config, tmp_path)
    try:
        assert process.wait_exit() == 1
        lines = process.lines()
        assert lines == [f"{config}:9: <security-enabled>true needs {tmp_path / missing} (the reference reads "
                         "Artemis's properties login module files beside broker.xml)"], lines
    finally:
        process.close()


def test_a_tls_key_store_that_is_not_pem_is_one_line_and_exit_1(tmp_path):
    (tmp_path / "k.pem").write_text("not a key")
    config = write(tmp_path, tls=";sslEnabled=true;keyStorePath=k.pem")
    process = BrokerProcess(config, tmp_path)
    try:
        assert process.wait_exit() == 1
        lines = process.lines()
        assert len(lines) == 1 and lines[0].startswith(f"{config}:7: acceptor 'clients': cannot load its TLS "
                                                       "files: "), lines
    finally:
        process.close()


def test_tls_acceptor_logs_tls_and_serves_a_client_trusting_its_ca(tmp_path):
    pki = TestPki(tmp_path / "pki")
    issued = pki.issue("ca", "B-test", purpose="server")
    (tmp_path / "ks.pem").write_bytes(issued.key.read_bytes() + issued.cert.read_bytes())
    process = BrokerProcess(write(tmp_path, tls=";sslEnabled=true;keyStorePath=ks.pem;keyStoreType=PEM"), tmp_path)
    try:
        process.wait_ready()
        assert "(acceptor 'clients', protocols AMQP) with TLS, SASL PLAIN" in process.stderr()
    finally:
        process.terminate()
        process.close()


def test_the_anonymous_relay_is_checked_per_message(broker):
    """A sender with no target address may attach (its messages name their address); each message then needs
    send on its own `to`: alice's is stored, bob's is rejected with amqp:unauthorized-access."""
    from proton import Message
    from proton.utils import SendException

    broker.wait_ready()
    outcomes = {}
    for user, password in (("alice", "a-pw"), ("bob", "b-pw")):
        conn = connect(broker, user, password)
        try:
            relay = conn.create_sender(None)
            try:
                relay.send(Message(address="orders.new", body=user))
                outcomes[user] = "accepted"
            except SendException as exc:
                outcomes[user] = exc.state
        finally:
            conn.close()
    assert outcomes["alice"] == "accepted"
    assert outcomes["bob"] != "accepted", outcomes
    broker.wait_queue("orders.new", depth=1)
    assert any("Refused a message" in line and "user 'bob'" in line for line in broker.lines()), broker.stderr()


@pytest.mark.parametrize("password, ready", [("ks-secret", True), ("wrong", False)])
def test_an_encrypted_key_store_needs_its_password(tmp_path, password, ready):
    pki = TestPki(tmp_path / "pki")
    issued = pki.issue("ca", "B-test", purpose="server", password="ks-secret")
    (tmp_path / "ks.pem").write_bytes(issued.key.read_bytes() + issued.cert.read_bytes())
    config = write(tmp_path, tls=f";sslEnabled=true;keyStorePath=ks.pem;keyStorePassword={password}")
    process = BrokerProcess(config, tmp_path)
    try:
        if ready:
            process.wait_ready()
        else:
            assert process.wait_exit() == 1
            lines = process.lines()
            assert len(lines) == 1 and lines[0].startswith(f"{config}:7: acceptor 'clients': cannot load its TLS "
                                                           "files: "), lines
    finally:
        process.terminate()
        process.close()
