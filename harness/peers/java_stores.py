"""PKCS#12 key and trust stores for a JVM product's TLS listener (ActiveMQ Classic, Qpid Broker-J), made from the
run's test PKI: Java reads PKCS#12, not the PEM files the other vendors take."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .base import PeerStartError

if TYPE_CHECKING:
    from .provider import NodeSetup


@dataclass(frozen=True)
class TlsStores:
    """PKCS#12 stores for a TLS listener: the node's key and certificate, and the CA it trusts for clients."""

    key_store: str
    trust_store: str
    password: str


def tls_stores(setup: NodeSetup, workdir: Path) -> TlsStores | None:
    """The stores, written into the node's work dir (mode 0600), for a node whose clients listener is TLS
    (`access.tls`); None for one that is not. PeerStartError (one line) when the topology gives no PKI."""
    tls = setup.node.access.tls
    if tls is None:
        return None
    if setup.wiring.pki is None:
        raise PeerStartError(f"{setup.node_name}: access.tls needs the run's test PKI (the topology declares no cas?)")
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, load_pem_private_key, pkcs12

    issued = setup.wiring.pki.listener_files(setup.node_name, tls)
    key = load_pem_private_key(issued.key.read_bytes(),
                               password=issued.password.encode() if issued.password else None)
    cert = x509.load_pem_x509_certificate(issued.cert.read_bytes())
    cas = x509.load_pem_x509_certificates(issued.ca.read_bytes())
    password = secrets.token_hex(12)
    encryption = BestAvailableEncryption(password.encode())
    key_store, trust_store = workdir / "broker.p12", workdir / "trust.p12"
    key_store.write_bytes(pkcs12.serialize_key_and_certificates(b"broker", key, cert, cas, encryption))
    trusted = [pkcs12.PKCS12Certificate(ca, f"ca{i}".encode()) for i, ca in enumerate(cas)]
    trust_store.write_bytes(pkcs12.serialize_java_truststore(trusted, encryption))
    for path in (key_store, trust_store):
        path.chmod(0o600)
    return TlsStores(str(key_store), str(trust_store), password)
