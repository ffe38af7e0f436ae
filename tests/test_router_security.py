"""reference/router/security.py: the router's listener and connector doors from qdrouterd.conf text, and the
one-line errors for settings that cannot be used (checked before anything listens)."""

from __future__ import annotations

import pytest

from harness.tlsca import TestPki
from reference.router.config import ConfigError, parse_config
from reference.router.security import check_doors, connector_door, listener_door
from reference.security.users import write_users


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("router-security")
    pki = TestPki(folder / "pki")
    server = pki.issue("routers-ca", "R1", purpose="both", password="key-pass")
    write_users(folder / "qdrouterd.users", {"alice": "alice-secret"})
    return folder, server


def conf(files, body: str, password: str = "pass:key-pass") -> str:
    folder, server = files
    return (f"router {{\n mode: interior\n id: R1\n saslConfigDir: {folder}\n}}\n"
            f"sslProfile {{\n name: tls\n certFile: {server.cert}\n privateKeyFile: {server.key}\n"
            f" password: {password}\n caCertFile: {server.ca}\n}}\n" + body)


def test_a_listener_with_tls_plain_and_external(files):
    cfg = parse_config(conf(files, "listener {\n port: 0\n sslProfile: tls\n requireSsl: yes\n"
                                   " authenticatePeer: yes\n saslMechanisms: PLAIN EXTERNAL\n}\n"), "r.conf")
    door = listener_door(cfg, cfg.listeners[0])
    assert door.tls.verify == "required" and door.tls.require  # EXTERNAL asks for a client certificate
    assert door.sasl.mechanisms == ("PLAIN", "EXTERNAL") and door.sasl.authenticate
    assert door.sasl.users == {"alice": "alice-secret"}


def test_a_plain_listener_keeps_protons_own_exchange(files):
    cfg = parse_config(conf(files, "listener {\n port: 0\n}\n"), "r.conf")
    door = listener_door(cfg, cfg.listeners[0])
    assert door.tls is None and door.sasl is None


def test_a_connector_with_tls_and_external(files):
    cfg = parse_config(conf(files, "connector {\n name: R2\n port: 1\n role: inter-router\n sslProfile: tls\n"
                                   " saslMechanisms: EXTERNAL\n verifyHostname: no\n}\n"), "r.conf")
    door = connector_door(cfg, cfg.connectors[0])
    assert door.mechanisms == "EXTERNAL" and door.tls.cert and not door.tls.verify_hostname


@pytest.mark.parametrize("body, password, line, message", [
    ("listener {\n port: 0\n sslProfile: tls\n}\n", "pass:wrong", 6, "sslProfile 'tls': cannot use its TLS files"),
    ("listener {\n port: 0\n authenticatePeer: yes\n saslMechanisms: ANONYMOUS\n}\n", "pass:key-pass", 13,
     "authenticatePeer with only ANONYMOUS can authenticate nobody"),
    ("connector {\n port: 1\n saslMechanisms: EXTERNAL\n}\n", "pass:key-pass", 13,
     "connector: saslMechanisms EXTERNAL needs an sslProfile"),
], ids=["wrong-key-password", "anonymous-only", "external-without-tls"])
def test_errors_name_the_line(files, body, password, line, message):
    with pytest.raises(ConfigError) as info:
        check_doors(parse_config(conf(files, body, password), "r.conf"))
    assert info.value.line == line and message in info.value.message and "\n" not in str(info.value)


def test_a_missing_certificate_file_is_named(files):
    text = conf(files, "listener {\n port: 0\n sslProfile: tls\n}\n").replace(".crt.pem", ".missing.pem", 1)
    with pytest.raises(ConfigError, match=r"sslProfile 'tls': certFile .*missing.pem: expected a readable PEM"):
        check_doors(parse_config(text, "r.conf"))


def test_plain_without_a_users_file_is_an_error(files, tmp_path):
    text = conf(files, "listener {\n port: 0\n saslMechanisms: PLAIN\n}\n").replace(str(files[0]), str(tmp_path))
    with pytest.raises(ConfigError, match="cannot read the users file"):
        check_doors(parse_config(text, "r.conf"))


def test_plain_without_a_sasl_config_dir_has_no_users_and_says_so(caplog):
    cfg = parse_config("listener {\n port: 0\n saslMechanisms: ANONYMOUS PLAIN\n authenticatePeer: no\n}\n", "r.conf")
    door = listener_door(cfg, cfg.listeners[0])
    assert door.sasl.users == {} and door.sasl.mechanisms == ("ANONYMOUS", "PLAIN")
    assert "no saslConfigDir" in caplog.text and "r.conf:1" in caplog.text
