"""A test PKI made per run: certificate authorities and the certificates nodes and clients present.

Seed 001_987f9e02a7866228.txt builds a root CA for inter-router connections and a separate one for clients, and
signs each router's certificate with the first. The security suites need the same, plus the certificates a
deployment must refuse: one from another CA, an expired one, one for another host name. Every key is made
fresh in the run's folder with the `cryptography` package: nothing secret is ever checked in, and no
certificate outlives its run.

    pki = TestPki(folder)
    pki.ca_file("clients-ca")                       # the CA's certificate (PEM), made on first use
    issued = pki.issue("clients-ca", "alice", purpose="client")
    issued.cert, issued.key, issued.ca              # PEM files: certificate, private key, issuing CA

`node_files(topology, node, listener=...)` / `node_files(topology, node, link=...)` give the files a node uses
on one listener or for one outgoing link, from the topology's security fields; the same question gives the
same files, so renderers of different vendors can ask independently.

Keys are EC P-256: fast to make (a whole PKI for a suite takes milliseconds) and accepted by OpenSSL, Erlang
(RabbitMQ) and Java (Artemis) alike.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PURPOSES = ("server", "client", "both")
_VALIDITY = datetime.timedelta(days=2)  # a run is hours long; a short life keeps a leaked test key worthless
_SAFE = re.compile(r"[^A-Za-z0-9_.@-]")


class PkiError(ValueError):
    """A request the PKI cannot serve (unknown purpose, a node or link the topology does not have)."""


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files, with the certificate of the CA that issued it."""

    subject: str
    cert: Path
    key: Path
    ca: Path
    password: str | None = None


class TestPki:
    """CAs and certificates under one folder. Thread-safe: peers of a topology start in parallel."""

    __test__ = False  # not a pytest test class, whatever its name says

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._cas: dict[str, tuple[ec.EllipticCurvePrivateKey, x509.Certificate, Path]] = {}
        self._issued: dict[tuple, Issued] = {}

    # ------------------------------------------------------------------------------------------- CAs

    def ca_file(self, name: str) -> Path:
        """The certificate (PEM) of CA `name`, made on first use."""
        with self._lock:
            return self._ca(name)[2]

    def _ca(self, name: str):
        if name not in self._cas:
            key = ec.generate_private_key(ec.SECP256R1())
            subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "amqp-interop test PKI"),
                                 x509.NameAttribute(NameOID.COMMON_NAME, name)])
            now = _now()
            cert = (
                x509.CertificateBuilder()
                .subject_name(subject).issuer_name(subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + _VALIDITY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256())
            )
            path = self.folder / f"ca-{_SAFE.sub('_', name)}.pem"
            path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            self._cas[name] = (key, cert, path)
        return self._cas[name]

    # ------------------------------------------------------------------------------------------- leaves

    def issue(self, ca: str, subject: str, *, hostnames: tuple[str, ...] = ("localhost", "127.0.0.1"),
              purpose: str = "server", expired: bool = False, password: str | None = None) -> Issued:
        """A certificate for `subject` (its common name) signed by CA `ca`, valid for `hostnames` (DNS names and
        IP addresses as subject alternative names), for TLS servers, clients or both. `expired` gives one whose
        validity ended yesterday; `password` encrypts the key file with it. The same arguments give the same
        files."""
        if purpose not in PURPOSES:
            raise PkiError(f"purpose {purpose!r}: expected one of {', '.join(PURPOSES)}")
        request = (ca, subject, tuple(hostnames), purpose, expired, password)
        with self._lock:
            if request not in self._issued:
                self._issued[request] = self._make(*request)
            return self._issued[request]

    def _make(self, ca: str, subject: str, hostnames: tuple[str, ...], purpose: str, expired: bool,
              password: str | None) -> Issued:
        ca_key, ca_cert, ca_path = self._ca(ca)
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        if expired:
            start, end = now - datetime.timedelta(days=3), now - datetime.timedelta(days=1)
        else:
            start, end = now - datetime.timedelta(minutes=5), now + _VALIDITY
        usages = {"server": [ExtendedKeyUsageOID.SERVER_AUTH], "client": [ExtendedKeyUsageOID.CLIENT_AUTH],
                  "both": [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]}[purpose]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        if hostnames:
            builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hostnames]),
                                            critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        stem = "-".join(_SAFE.sub("_", part) for part in
                        (ca, subject, purpose, *(["expired"] if expired else []), *(["enc"] if password else [])))
        if hostnames != ("localhost", "127.0.0.1"):  # keep files of the same subject for other names apart
            stem += "-" + hashlib.sha256(",".join(hostnames).encode()).hexdigest()[:8]
        cert_path, key_path = self.folder / f"{stem}.crt.pem", self.folder / f"{stem}.key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               encryption))
        key_path.chmod(0o600)
        return Issued(subject=subject, cert=cert_path, key=key_path, ca=ca_path, password=password)

    # ------------------------------------------------------------------------------------------- topology

    def listener_files(self, node_name: str, tls) -> Issued:
        """The files node `node_name` presents on a listener with `tls` (a harness.topology.ListenerTls): its
        certificate for the listener's hostname, issued by its CA, which also verifies the clients."""
        return self.issue(tls.ca, node_name, hostnames=_names(tls.hostname), purpose="both")

    def node_files(self, topology, node_name: str, *, listener: str | None = None, link=None) -> Issued:
        """The certificate, key and trusted CA node `node_name` uses on its listener `listener`, or as the
        dialler of `link` (a harness.topology.Link from that node). For a listener the certificate names the
        listener's hostname and is issued by its CA, and `ca` is the CA that verifies clients (the same CA).
        For a link the certificate is the dialler's client certificate (issued by `dialler_ca`, else `ca`) and
        `ca` is the CA the dialler trusts (`trusts`, else `ca`)."""
        if (listener is None) == (link is None):
            raise PkiError("node_files: give exactly one of listener= or link=")
        if listener is not None:
            tls = topology.listener_tls(node_name, listener)
            if tls is None:
                raise PkiError(f"{node_name}: listener {listener!r} has no TLS in topology {topology.name}")
            return self.listener_files(node_name, tls)
        if link.from_ != node_name:
            raise PkiError(f"{node_name}: the link {link.name} is not one of its outgoing links")
        if link.tls is None:
            raise PkiError(f"{node_name}: the link {link.name} has no TLS in topology {topology.name}")
        own = self.issue(link.tls.dialler_issuer, node_name, hostnames=(), purpose="client")
        trust = self.ca_file(link.tls.dialler_trust)
        return Issued(subject=own.subject, cert=own.cert, key=own.key, ca=trust)


def _names(hostname: str) -> tuple[str, ...]:
    """The names a node's certificate carries: its hostname, plus the loopback address when that hostname is
    the default (clients here dial 127.0.0.1); a deliberately wrong hostname gets no address, so a check of
    the name fails whichever form the dialler uses."""
    return (hostname, "127.0.0.1") if hostname == "localhost" else (hostname,)


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
