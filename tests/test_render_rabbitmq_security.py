"""Broker security rendered for RabbitMQ (harness/vendors/rabbitmq/render.py): users and per-vhost permission regexes
from the topology's roles and Artemis-style permissions, no guest and no ANONYMOUS once security is on, and a
TLS-only listener from the test PKI's files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.peers.provider import RenderError
from harness.vendors.rabbitmq.render import artemis_regex, render_rabbitmq
from harness.tlsca import Issued
from harness.topology import load_topology, parse_topology, topology_path


def files(name: str, **kwargs):
    return render_rabbitmq(load_topology(topology_path(name)), "B1", 5672, **kwargs)


def allowed(permissions: dict, kind: str, resource: str) -> bool:
    return re.fullmatch(permissions[kind], resource) is not None  # RabbitMQ anchors nothing itself; we do


def test_users_and_permissions_per_operation():
    rendered = files("security-broker")
    assert "amqp1_0.default_user = none" in rendered.conf
    users = {u["name"] for u in rendered.definitions["users"]}
    assert users == {"alice", "bob", "carol", "dave"}  # no guest
    perms = {p["user"]: p for p in rendered.definitions["permissions"]}
    assert allowed(perms["alice"], "write", "amq.default") and allowed(perms["alice"], "write", "orders.new")
    assert not allowed(perms["alice"], "read", "orders.new") and not allowed(perms["alice"], "configure", "orders.x")
    assert allowed(perms["bob"], "read", "orders.new") and not allowed(perms["bob"], "write", "amq.default")
    assert not allowed(perms["bob"], "configure", "orders.auto.1")
    assert allowed(perms["carol"], "configure", "orders.auto.1") and not allowed(perms["carol"], "configure", "x")
    assert perms["dave"] == {"user": "dave", "vhost": "/", "configure": "^$", "write": "^$", "read": "^$"}


def test_open_broker_keeps_guest():
    rendered = files("single-broker")
    assert "amqp1_0.default_user = guest" in rendered.conf
    assert [p["user"] for p in rendered.definitions["permissions"]] == ["guest"]


@pytest.mark.parametrize("match, yes, no", [
    ("#", ["a", "a.b"], []),
    ("orders.#", ["orders", "orders.a", "orders.a.b"], ["ordersx", "x.orders"]),
    ("orders.*", ["orders.a"], ["orders", "orders.a.b"]),
    ("a.b", ["a.b"], ["aXb", "a.b.c"]),
])
def test_artemis_matches_as_regexes(match, yes, no):
    regex = artemis_regex(match)
    assert all(re.fullmatch(regex, name) for name in yes) and not any(re.fullmatch(regex, name) for name in no)


def test_overlapping_permissions_are_refused():
    topology = parse_topology({
        "name": "t", "nodes": {"B1": {
            "role": "broker", "users": {"a": "pw"}, "access": {"authenticate": True}, "roles": {"r": ["a"]},
            "permissions": [{"match": "orders.#", "send": ["r"]}, {"match": "orders.vip", "consume": ["r"]}]}}})
    with pytest.raises(RenderError, match=r"^B1: permissions 'orders.#' and 'orders.vip' overlap"):
        render_rabbitmq(topology, "B1", 5672)


def test_tls_listener_only():
    tls = Issued("B1", Path("/pki/b1.crt.pem"), Path("/pki/b1.key.pem"), Path("/pki/ca.pem"))
    conf = files("security-broker-tls", tls_files=tls).conf
    assert "listeners.tcp = none" in conf and "listeners.ssl.default = 127.0.0.1:5672" in conf
    assert "ssl_options.certfile = /pki/b1.crt.pem" in conf and "ssl_options.verify = verify_none" in conf
    with pytest.raises(RenderError, match="no TLS files were given"):
        files("security-broker-tls")
