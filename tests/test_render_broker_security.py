"""Broker security rendered from the topologies (harness/vendors/artemis/render.py) and read back by the reference
broker's parser: what a topology grants is what the reference's authorisation answers."""

from __future__ import annotations

import pytest

from harness.vendors.artemis.render import render_artemis_security, render_broker_xml
from harness.peers.provider import RenderError
from harness.tlsca import TestPki
from harness.topology import load_topology, topology_path
from reference.broker.authz import Authorizer
from reference.broker.config import load_config


def written(tmp_path, name: str, node: str, pki=None, connect_ports=None):
    topology = load_topology(topology_path(name))
    (tmp_path / "broker.xml").write_text(render_broker_xml(topology, node, {"clients": 0}, pki=pki,
                                                           connect_ports=connect_ports))
    for file_name, text in render_artemis_security(topology, node).items():
        (tmp_path / file_name).write_text(text)
    return load_config(tmp_path / "broker.xml")


def test_permissions_per_operation_read_back(tmp_path):
    cfg = written(tmp_path, "security-broker", "B1")
    assert cfg.security_enabled and cfg.users["alice"] == "alice-secret"
    authz = Authorizer(cfg.security_settings, cfg.user_roles)
    allowed = {(user, op) for user in ("alice", "bob", "carol", "dave")
               for op in ("send", "consume", "createAddress", "createDurableQueue", "createNonDurableQueue",
                          "deleteAddress", "manage")
               if authz.check(user, op, "orders.new") is None}
    assert allowed == {("alice", "send"), ("bob", "consume"), ("carol", "send"), ("carol", "consume"),
                       ("carol", "createAddress"), ("carol", "createDurableQueue"),
                       ("carol", "createNonDurableQueue")}
    assert authz.check("carol", "send", "invoices") is not None  # nothing outside orders.#


def test_open_broker_renders_security_off_and_no_files(tmp_path):
    cfg = written(tmp_path, "security-broker-connection", "B1", connect_ports={"B2": 5672})
    assert not cfg.security_enabled
    assert [(c.name, c.user, c.password) for c in cfg.broker_connections] == [
        ("granted", "bridge", "bridge-secret"), ("denied", "weak", "weak-secret"),
        ("misspelt", "bridge", "not-the-bridge-secret")]


def test_tls_acceptor_from_the_pki(tmp_path):
    pki = TestPki(tmp_path / "pki")
    folder = tmp_path / "etc"
    folder.mkdir()
    cfg = written(folder, "security-broker-tls", "B1", pki=pki)
    tls = cfg.acceptors[0].tls
    assert tls is not None and tls.client_certs == "none"
    assert tls.trust_store == str(pki.ca_file("clients-ca"))
    text = open(tls.key_store).read()
    assert "PRIVATE KEY" in text and "CERTIFICATE" in text


def test_tls_without_pki_is_one_line(tmp_path):
    topology = load_topology(topology_path("security-broker-tls"))
    with pytest.raises(RenderError, match=r"^B1: listener 'clients' has TLS but no test PKI was given \(pki=\)$"):
        render_broker_xml(topology, "B1", {"clients": 0})
