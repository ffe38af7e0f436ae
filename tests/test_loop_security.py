"""reference/loop.py's secured path (reference/security/): TLS, the loop's own SASL server and EXTERNAL client,
against real sockets, proton clients with proton's own TLS, and certificates from harness/tlsca.py.

What is pinned: PLAIN is checked against the users (outcome `auth` on a wrong password, AMQP part 5
§5.3.3.6), ANONYMOUS is refused when authentication is on, EXTERNAL takes the client certificate's CN, a
client certificate from another CA or an expired one fails the TLS handshake, a plain client on a
TLS-required listener is refused, and an outgoing connection checks the server's certificate and name.
Every refusal is logged with the peer's address and nothing reaches the AMQP handler.
"""

from __future__ import annotations

import logging
import struct
import threading

import pytest
from proton import Message, SSLDomain
from proton.reactor import ApplicationEvent, EventInjector
from proton import ConnectionException
from proton.utils import BlockingConnection

from harness.tlsca import TestPki
from harness.wait import wait_for
from reference.loop import EngineLoop
from reference.sasl_guard import SASL_HEADER
from reference.security import ClientTls, SaslPolicy, ServerTls, authenticated_user, peer_certificate_cn
from reference.security.sasl import SaslClient, SaslServer, frame, mechanisms_frame, outcome_frame

TIMEOUT = 10.0
USERS = {"alice": "alice-secret"}


class Recorder:
    """Accepts everything and records who authenticated, per connection."""

    def __init__(self):
        self.users: list[tuple[str | None, str | None]] = []
        self.messages: list = []
        self.events: list = []

    def on_connection_remote_open(self, event):
        self.users.append((authenticated_user(event.connection), peer_certificate_cn(event.connection)))
        if event.connection.state & event.connection.LOCAL_UNINIT:
            event.connection.open()
        self.events.append(("open", event.connection.remote_container))

    def on_session_remote_open(self, event):
        event.session.open()

    def on_link_remote_open(self, event):
        link = event.link
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        if link.is_receiver:
            link.flow(10)

    def on_link_flow(self, event):
        # A receiver attached to "big:N" gets 5 messages of N bytes: more than one write's worth of output
        link = event.link
        address = link.remote_source.address or "" if link.is_sender else ""
        if address.startswith("big:") and link.credit >= 5 and not getattr(link, "done", 0):
            link.done = 1
            for i in range(5):
                link.delivery(b"%d" % i)
                link.send(Message(body=b"x" * int(address[4:])).encode())
                link.advance()

    def on_delivery(self, event):
        dlv = event.delivery
        if dlv.link.is_receiver and not dlv.partial:
            message = Message()
            message.decode(dlv.link.recv(dlv.pending))
            dlv.link.advance()
            body = message.body  # binary bodies are views into proton's decode buffer: keep a copy
            self.messages.append(bytes(body) if isinstance(body, memoryview) else body)
            dlv.update(dlv.ACCEPTED)
            dlv.settle()

    def on_connection_remote_close(self, event):
        event.connection.close()

    def on_transport_closed(self, event):
        self.events.append(("closed", str(event.transport.condition)))


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return TestPki(tmp_path_factory.mktemp("pki"))


class Served:
    def __init__(self, handler=None):
        self.handler = handler or Recorder()
        self.loop = EngineLoop(self.handler)
        self.injector = EventInjector()
        self.loop.selectable(self.injector)
        self.thread = None

    def start(self):
        self.thread = threading.Thread(target=self.loop.run, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.loop.stop()
        self.injector.trigger(ApplicationEvent("stop_now"))
        self.thread.join(TIMEOUT)


@pytest.fixture
def serve():
    started = []

    def make(handler=None):
        served = Served(handler)
        started.append(served)
        return served

    yield make
    for served in started:
        served.stop()


def server_tls(pki, verify="none", require=True, password=None):
    issued = pki.issue("clients-ca", "server", purpose="both", password=password)
    return ServerTls(cert=str(issued.cert), key=str(issued.key), password=password, ca=str(issued.ca),
                     verify=verify, require=require)


def client_ssl(pki, cert_ca=None, expired=False, subject="alice", trust="clients-ca"):
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(pki.ca_file(trust)))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if cert_ca:
        issued = pki.issue(cert_ca, subject, purpose="client", hostnames=(), expired=expired)
        domain.set_credentials(str(issued.cert), str(issued.key), None)
    return domain


def connect(url, **kwargs):
    conn = BlockingConnection(url, timeout=TIMEOUT, **kwargs)
    conn.create_sender("q").send(Message(body="hi"))
    conn.close()


def test_plain_password_good_and_bad(serve, caplog):
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", sasl=SaslPolicy(("PLAIN",), True, USERS))
    served.start()
    url = f"amqp://127.0.0.1:{listener.port}"
    connect(url, user="alice", password="alice-secret", allowed_mechs="PLAIN", allow_insecure_mechs=True)
    assert served.handler.users == [("alice", None)] and served.handler.messages == ["hi"]
    with caplog.at_level(logging.WARNING, logger="SERVER"):
        with pytest.raises(ConnectionException, match="unauthorized|Authentication"):
            connect(url, user="alice", password="wrong", allowed_mechs="PLAIN", allow_insecure_mechs=True)
        wait_for(lambda: "wrong user name or password" in caplog.text, TIMEOUT, "the refusal in the log")
    assert "127.0.0.1:" in caplog.text and served.handler.messages == ["hi"]
    wait_for(lambda: len(served.loop._peers) == 0, TIMEOUT, "the refused connection to be dropped")


def test_anonymous_refused_when_authentication_is_on(serve):
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", sasl=SaslPolicy(("ANONYMOUS", "PLAIN"), True, USERS))
    served.start()
    with pytest.raises(ConnectionException):
        connect(f"amqp://127.0.0.1:{listener.port}", allowed_mechs="ANONYMOUS")
    assert served.handler.messages == []


def test_tls_with_plain_and_the_identity_reaches_the_handler(serve, pki):
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", tls=server_tls(pki, password="key-pass"),
                                  sasl=SaslPolicy(("PLAIN",), True, USERS))
    served.start()
    connect(f"amqps://localhost:{listener.port}", user="alice", password="alice-secret", allowed_mechs="PLAIN",
            ssl_domain=client_ssl(pki))
    assert served.handler.users == [("alice", None)] and served.handler.messages == ["hi"]


def test_external_takes_the_client_certificate_cn(serve, pki):
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", tls=server_tls(pki, verify="optional"),
                                  sasl=SaslPolicy(("EXTERNAL",), True, USERS))
    served.start()
    url = f"amqps://localhost:{listener.port}"
    connect(url, allowed_mechs="EXTERNAL", ssl_domain=client_ssl(pki, cert_ca="clients-ca", subject="carol"))
    assert served.handler.users == [("carol", "carol")]
    with pytest.raises(ConnectionException):  # no certificate: nothing EXTERNAL can vouch for
        connect(url, allowed_mechs="EXTERNAL", ssl_domain=client_ssl(pki))
    assert served.handler.messages == ["hi"]


@pytest.mark.parametrize("cert_ca, expired", [("rogue-ca", False), ("clients-ca", True)], ids=["other-ca", "expired"])
def test_a_bad_client_certificate_fails_the_handshake(serve, pki, caplog, cert_ca, expired):
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", tls=server_tls(pki, verify="required"),
                                  sasl=SaslPolicy(("EXTERNAL",), True, USERS))
    served.start()
    with caplog.at_level(logging.WARNING, logger="SERVER"):
        with pytest.raises(ConnectionException):
            connect(f"amqps://localhost:{listener.port}", allowed_mechs="EXTERNAL",
                    ssl_domain=client_ssl(pki, cert_ca=cert_ca, expired=expired))
        wait_for(lambda: "refused: TLS" in caplog.text, TIMEOUT, "the TLS refusal in the log")
    assert served.handler.users == [] and served.handler.messages == []


def test_a_plain_client_on_a_tls_required_listener_is_refused(serve, pki, caplog):
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", tls=server_tls(pki))
    served.start()
    with caplog.at_level(logging.WARNING, logger="SERVER"):
        with pytest.raises(ConnectionException):
            connect(f"amqp://127.0.0.1:{listener.port}")
        wait_for(lambda: "requireSsl" in caplog.text, TIMEOUT, "the refusal in the log")
    assert served.handler.events == [("closed", "Condition('proton:io', 'TLS: the client did not start TLS, and "
                                                 "this listener requires it (requireSsl)')")]


def test_tls_optional_listener_takes_both(serve, pki):
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", tls=server_tls(pki, require=False))
    served.start()
    connect(f"amqp://127.0.0.1:{listener.port}")
    connect(f"amqps://localhost:{listener.port}", ssl_domain=client_ssl(pki))
    assert served.handler.messages == ["hi", "hi"]


class Dialler(Recorder):
    def __init__(self, url, **kwargs):
        super().__init__()
        self.url, self.kwargs = url, kwargs

    def on_reactor_init(self, event):
        event.container.connect(self.url, **self.kwargs)


@pytest.mark.parametrize("case", ["mutual-external", "plain-over-tls", "wrong-name", "wrong-name-unchecked",
                                  "other-ca"])
def test_outgoing_tls(serve, pki, case):
    server = serve()
    tls = server_tls(pki, verify="optional")
    if case.startswith("wrong-name"):
        issued = pki.issue("clients-ca", "elsewhere", hostnames=("elsewhere.example",), purpose="both")
        tls = ServerTls(cert=str(issued.cert), key=str(issued.key), ca=str(issued.ca), verify="optional")
    listener = server.loop.listen("127.0.0.1:0", tls=tls, sasl=SaslPolicy(("PLAIN", "EXTERNAL"), True, USERS))
    server.start()
    own = pki.issue("clients-ca", "router-b", purpose="client", hostnames=())
    trust = pki.ca_file("rogue-ca" if case == "other-ca" else "clients-ca")
    client_tls = ClientTls(ca=str(trust), verify_hostname=case != "wrong-name-unchecked", cert=str(own.cert),
                           key=str(own.key))
    kwargs = {"allowed_mechs": "EXTERNAL"} if case != "plain-over-tls" else {
        "allowed_mechs": "PLAIN", "user": "alice", "password": "alice-secret"}
    dialler = serve(Dialler(f"amqps://localhost:{listener.port}", tls=client_tls, **kwargs))
    dialler.start()
    wait_for(lambda: dialler.handler.events, TIMEOUT, "the outgoing connection to open or fail")
    if case in ("wrong-name", "other-ca"):
        assert dialler.handler.events[0][0] == "closed" and "TLS" in dialler.handler.events[0][1]
        assert server.handler.users == []
    else:
        assert dialler.handler.events[0][0] == "open"
        wait_for(lambda: server.handler.users, TIMEOUT, "the server to see the open")
        assert server.handler.users == [("alice" if case == "plain-over-tls" else "router-b", "router-b")]


def test_large_messages_both_ways_over_tls(serve, pki):
    """More output than one write takes: the secured path must go on writing until the transport has nothing
    left (it once sent one bounded batch and then slept, with the rest of a 1 MB message waiting)."""
    served = serve()
    listener = served.loop.listen("127.0.0.1:0", tls=server_tls(pki), sasl=SaslPolicy(("PLAIN",), True, USERS))
    served.start()
    conn = BlockingConnection(f"amqps://localhost:{listener.port}", timeout=TIMEOUT, user="alice",
                              password="alice-secret", allowed_mechs="PLAIN", ssl_domain=client_ssl(pki))
    try:
        receiver = conn.create_receiver("big:1000000", credit=5)
        bodies = [receiver.receive(TIMEOUT).body for _ in range(5)]
        receiver.accept()
        conn.create_sender("q").send(Message(body=b"y" * 1000000))
    finally:
        conn.close()
    assert [len(b) for b in bodies] == [1000000] * 5
    assert [bytes(m) for m in served.handler.messages] == [b"y" * 1000000]


# ---- the SASL layers on their own (reference/security/sasl.py), fed bytes ----------------------------------------

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


@pytest.mark.parametrize("header, why", [
    (AMQP_HEADER, "the client skipped SASL, but this listener authenticates its peers"),
    (b"HTTP/1.1", "expected the SASL protocol header, got b'HTTP/1.1'"),
])
def test_a_client_that_does_not_start_sasl_is_answered_with_the_sasl_header_and_told_why(header, why):
    server = SaslServer(SaslPolicy(("PLAIN",), True, USERS))
    assert server.feed(header) == b""
    assert server.take_output() == SASL_HEADER  # AMQP 1.0 §2.2: the header it would serve, then it closes
    assert server.failed == why


def test_a_server_outcome_without_its_code_is_a_failed_authentication():
    """sasl-outcome's code is mandatory (AMQP 1.0 §5.3.3.6); a server that leaves it out has not said ok."""
    client = SaslClient("EXTERNAL")
    empty_outcome = frame(b"\x00\x53\x44\x45")  # sasl-outcome, an empty list
    client.feed(SASL_HEADER + mechanisms_frame(("EXTERNAL",)) + empty_outcome)
    assert client.failed == "SASL outcome 1 (authentication failed)" and not client.done


@pytest.mark.parametrize("size", range(225, 256))
def test_a_sasl_init_of_any_size_is_written_as_a_list_that_reads_back(size):
    """A list's fields longer than a list8 can hold (255 bytes with its count) go in a list32 (AMQP 1.0 §1.6.22);
    around that edge the frame must still read back as written."""
    from reference.sasl_guard import decode_frame
    from reference.security.sasl import init_frame

    response = b"\x00alice\x00" + b"x" * size
    code, fields = decode_frame(init_frame("PLAIN", response), from_client=True)
    assert code == 0x41 and fields[0] == ("symbol", b"PLAIN") and fields[1] == ("binary", response)


def test_a_client_without_sasl_is_served_where_nobody_must_authenticate():
    """AMQP 1.0 §5.3.1: without a SASL layer the connection starts at the AMQP header; a listener that
    authenticates nobody lets it through as anonymous, with what followed the header."""
    server = SaslServer(SaslPolicy(("ANONYMOUS",), False))
    assert server.feed(AMQP_HEADER + b"\x00\x00\x00\x08") == AMQP_HEADER + b"\x00\x00\x00\x08"
    assert server.done and server.user == "anonymous" and server.take_output() == b""


def test_a_server_that_answers_the_sasl_header_with_an_outcome_is_refused():
    """The server must offer its mechanisms first (sasl-mechanisms, AMQP 1.0 §5.3.2); an outcome in its place is
    a broken exchange, named as such, not read as a list of mechanisms."""
    client = SaslClient("EXTERNAL")
    client.feed(SASL_HEADER + outcome_frame(0))
    assert client.failed == "the server's SASL frames: unexpected SASL performative 0x44 in state mechanisms"


def test_a_malformed_sasl_frame_fails_that_exchange_and_raises_nothing():
    server = SaslServer(SaslPolicy(("PLAIN",), True, USERS))
    server.feed(SASL_HEADER + frame(b"\x00\x53\x41\xc0\x10\x01\xa3\x09ANONYMOUS"))  # a list larger than its frame
    assert server.failed and "does not fit the frame" in server.failed
    client = SaslClient("EXTERNAL")
    client.feed(SASL_HEADER + frame(b"\xa3\x09ANONYMOUS"))  # a body that is no described type
    assert client.failed and client.failed.startswith("the server's SASL frames:")


def test_a_sasl_frame_over_the_limit_is_refused_by_its_size():
    from reference.sasl_guard import MAX_SASL_FRAME

    server = SaslServer(SaslPolicy(("PLAIN",), True, USERS))
    server.feed(SASL_HEADER + struct.pack(">IBBH", MAX_SASL_FRAME + 1, 2, 1, 0))
    assert server.failed and str(MAX_SASL_FRAME + 1) in server.failed, server.failed


def test_a_server_outcome_whose_code_is_not_a_ubyte_is_a_failed_authentication():
    """sasl-outcome's code is a ubyte (AMQP 1.0 §5.3.3.6); a null there, or any other type, has not said ok."""
    for code in (b"\x40", b"\x52\x00", b"\xa1\x02ok"):
        client = SaslClient("EXTERNAL")
        client.feed(SASL_HEADER + mechanisms_frame(("EXTERNAL",)) + frame(b"\x00\x53\x44\xc0" + bytes(
            [len(code) + 1, 1]) + code))
        assert client.failed == "SASL outcome 1 (authentication failed)", (code, client.failed)


def test_a_challenge_before_the_outcome_is_passed_over_by_a_single_step_client():
    """EXTERNAL has nothing to answer to a sasl-challenge (AMQP 1.0 §5.3.3.4): the outcome that follows decides."""
    client = SaslClient("EXTERNAL")
    challenge = frame(b"\x00\x53\x42\xc0\x03\x01\xa0\x00")
    client.feed(SASL_HEADER + mechanisms_frame(("EXTERNAL",)) + challenge + outcome_frame(0))
    assert client.done and client.failed is None


def test_a_second_mechanisms_frame_in_place_of_the_outcome_is_refused():
    client = SaslClient("EXTERNAL")
    client.feed(SASL_HEADER + mechanisms_frame(("EXTERNAL",)) + mechanisms_frame(("EXTERNAL",)))
    assert client.failed == "the server's SASL frames: unexpected SASL performative 0x40 in state outcome"
