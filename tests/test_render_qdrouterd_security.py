"""harness/vendors/qdrouterd/render.py's security sections (issue 20): sslProfiles, listener and connector TLS and SASL,
and the users files, read back with the reference router's own parser (the file serves both routers)."""

from __future__ import annotations

import pytest

from harness.peers.provider import RenderError
from harness.vendors.qdrouterd.render import render_router
from harness.tlsca import TestPki
from harness.topology import load_topology, topology_path
from reference.router.config import parse_config
from reference.router.security import check_doors, connector_door, listener_door
from tests.test_render_qdrouterd import of_kind, read_conf


@pytest.fixture
def pki(tmp_path):
    return TestPki(tmp_path / "pki")


def _render(name, node, pki, tmp_path, connect=None):
    topology = load_topology(topology_path(name))
    ports = {ls.name: 5000 + i for i, ls in enumerate(topology.listeners_for(node))}
    return render_router(topology, node, ports, connect, pki=pki, files_dir=tmp_path)


def test_plain_users_and_a_tls_listener(pki, tmp_path):
    text = _render("security-router-plain", "R1", pki, tmp_path)
    sections = read_conf(text)
    (listener,) = of_kind(sections, "listener")
    assert listener["sslProfile"] == "clients-tls" and listener["requireSsl"] == "yes"
    assert (listener["saslMechanisms"], listener["authenticatePeer"]) == ("PLAIN", "yes")
    (router,) = of_kind(sections, "router")
    users = tmp_path / "sasl-R1" / "qdrouterd.users"
    assert router["saslConfigDir"] == str(users.parent) and router["saslConfigName"] == "qdrouterd"
    assert users.read_text() == "alice:alice-secret\nbob:bob-secret\n"
    cfg = parse_config(text, "r.conf")
    check_doors(cfg)  # the reference router reads the same file, its users and its certificates
    assert listener_door(cfg, cfg.listeners[0]).sasl.users == {"alice": "alice-secret", "bob": "bob-secret"}


def test_inter_router_tls_both_ends(pki, tmp_path):
    listening = read_conf(_render("security-router-mesh-dialler-ca", "R1", pki, tmp_path))
    inter = next(ls for ls in of_kind(listening, "listener") if ls["role"] == "inter-router")
    assert (inter["saslMechanisms"], inter["authenticatePeer"], inter["requireSsl"]) == ("EXTERNAL", "yes", "yes")
    text = _render("security-router-mesh-dialler-ca", "R2", pki, tmp_path, {"R1": 5001})
    (connector,) = of_kind(read_conf(text), "connector")
    assert (connector["host"], connector["saslMechanisms"], connector["verifyHostname"]) == (
        "localhost", "EXTERNAL", "yes")
    (profile,) = of_kind(read_conf(text), "sslProfile")
    assert "rogue-ca-R2" in profile["certFile"] and profile["caCertFile"].endswith("ca-routers-ca.pem")
    cfg = parse_config(text, "r2.conf")
    assert connector_door(cfg, cfg.connectors[0]).mechanisms == "EXTERNAL"


def test_tls_without_a_pki_is_a_one_line_error(tmp_path):
    topology = load_topology(topology_path("security-router-tls"))
    with pytest.raises(RenderError, match=r"R1: TLS needs the run's test PKI"):
        render_router(topology, "R1", {"clients": 1}, files_dir=tmp_path)
