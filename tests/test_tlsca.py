"""The test PKI (harness/tlsca.py), checked by real TLS handshakes over loopback with Python's ssl module (the
same OpenSSL the reference peers use): what it issues is accepted where it should be and refused where a
suite needs a refusal."""

import socket
import ssl
import threading

import pytest

from harness.tlsca import PkiError, TestPki
from harness.topology import parse_topology


def handshake(server_files, client_ca, *, client_files=None, hostname="localhost", require_client=False):
    """One TLS handshake over a loopback socket pair; returns None on success or the failure's text (either
    side's)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(server_files.cert, server_files.key, password=server_files.password)
    if require_client:
        server_ctx.verify_mode = ssl.CERT_REQUIRED
        server_ctx.load_verify_locations(server_files.ca)
    client_ctx = ssl.create_default_context(cafile=str(client_ca))
    if client_files is not None:
        client_ctx.load_cert_chain(client_files.cert, client_files.key)
    a, b = socket.socketpair()
    errors = []

    def serve():
        try:
            with server_ctx.wrap_socket(a, server_side=True) as tls:
                tls.recv(1)  # TLS 1.3 reports a refused client certificate on the first read
        except (ssl.SSLError, OSError) as exc:
            errors.append(f"server: {exc}")

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(b, server_hostname=hostname) as tls:
            tls.sendall(b"x")
            tls.settimeout(5)
            try:
                tls.recv(1)
            except (ssl.SSLError, OSError) as exc:
                errors.append(f"client read: {exc}")
    except (ssl.SSLError, OSError) as exc:
        errors.append(f"client: {exc}")
        a.close()
    thread.join(10)
    failures = [e for e in errors if "EOF" not in e or "server" in e]
    return "; ".join(failures) or None


@pytest.fixture
def pki(tmp_path):
    return TestPki(tmp_path / "pki")


def test_server_certificate_is_trusted_by_its_ca_only(pki):
    server = pki.issue("ca1", "R1")
    assert handshake(server, pki.ca_file("ca1")) is None
    assert "certificate verify failed" in handshake(server, pki.ca_file("ca2"))


def test_expired_and_wrong_host_are_refused(pki):
    assert "expired" in handshake(pki.issue("ca1", "R1", expired=True), pki.ca_file("ca1"))
    other = pki.issue("ca1", "R1", hostnames=("wrong.example",))
    assert "Hostname mismatch" in handshake(other, pki.ca_file("ca1"))
    assert handshake(other, pki.ca_file("ca1"), hostname="wrong.example") is None


def test_client_certificates_are_checked_by_the_server(pki):
    server = pki.issue("ca1", "R1", purpose="both")
    good = pki.issue("ca1", "alice", purpose="client", hostnames=())
    rogue = pki.issue("rogue", "mallory", purpose="client", hostnames=())
    assert handshake(server, pki.ca_file("ca1"), client_files=good, require_client=True) is None
    assert "server:" in handshake(server, pki.ca_file("ca1"), client_files=rogue, require_client=True)
    assert "server:" in handshake(server, pki.ca_file("ca1"), require_client=True)


def test_encrypted_key_and_same_question_same_files(pki):
    issued = pki.issue("ca1", "R1", password="s3cret")
    assert b"ENCRYPTED" in issued.key.read_bytes() and issued.key.stat().st_mode & 0o077 == 0
    assert handshake(issued, pki.ca_file("ca1")) is None
    assert pki.issue("ca1", "R1", password="s3cret") == issued
    assert pki.issue("ca1", "R1") != issued
    with pytest.raises(PkiError, match="purpose 'web'"):
        pki.issue("ca1", "R1", purpose="web")


def test_node_files_follow_the_topology(pki):
    topo = parse_topology({
        "name": "t", "cas": ["routers", "rogue"],
        "nodes": {"R1": {"role": "router", "mode": "interior"}, "R2": {"role": "router", "mode": "interior"}},
        "links": [{"from": "R2", "to": "R1", "role": "inter-router", "tls": {"ca": "routers", "trusts": "rogue"}}],
    })
    listener = pki.node_files(topo, "R1", listener="inter-router")
    dialler = pki.node_files(topo, "R2", link=topo.links[0])
    assert listener.ca == pki.ca_file("routers")
    assert dialler.ca == pki.ca_file("rogue")  # the dialler trusts the wrong CA: it must refuse R1
    assert "certificate verify failed" in handshake(listener, dialler.ca, client_files=dialler, require_client=True)
    with pytest.raises(PkiError, match="R1: listener 'clients' has no TLS"):
        pki.node_files(topo, "R1", listener="clients")
    with pytest.raises(PkiError, match="not one of its outgoing links"):
        pki.node_files(topo, "R1", link=topo.links[0])
