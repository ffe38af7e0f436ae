"""The router's doors: a listener's or connector's TLS and SASL settings, from its qdrouterd.conf sections.

What qdrouterd 1.19 does with them, and so what the reference does:
* a listener with an `sslProfile` speaks TLS with the profile's certificate and key; `requireSsl` (or
  `requireEncryption`) refuses a client that does not start TLS, else plain clients are served too;
* a client certificate is asked for, required and verified against the profile's `caCertFile` exactly when
  the listener's `saslMechanisms` has EXTERNAL (qdrouterd sets its peer-authentication that way);
* `authenticatePeer: yes` refuses ANONYMOUS and clients that skip SASL; `saslMechanisms` is what is offered.
  Without it the listener offers ANONYMOUS, plus PLAIN when a users file is configured and EXTERNAL when the
  profile can verify client certificates;
* a connector with an `sslProfile` checks the server's certificate against `caCertFile`, and its name
  against the host dialled unless `verifyHostname: no`; the profile's certificate, if any, is its client
  certificate. `saslMechanisms` picks the mechanism (PLAIN with `saslUsername`/`saslPassword`).

PLAIN users: qdrouterd asks Cyrus SASL, configured by the router section's `saslConfigDir` and
`saslConfigName` (a sasldb). The reference cannot read a sasldb; it reads the plain-text users file
`<saslConfigDir>/<saslConfigName>.users` beside it (reference/security/users.py). A saslConfigDir without
that file is a config error; no saslConfigDir at all means no users (logged: every PLAIN client is refused).

An `sslProfile` password is qdrouterd's form: `pass:TEXT`, `env:VARIABLE`, `file:PATH`, or the literal text.

Each problem is a ConfigError at the line of the section that names it (`FILE:LINE: what was expected`),
raised before anything listens: the TLS contexts are built at start-up, so a missing certificate, a key that
does not match, or a wrong key password stops the router there.
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass

from ..security import ClientTls, SaslPolicy, ServerTls
from ..security.users import UsersFileError, load_users, users_file
from .config import ConfigError, Connector, Listener, RouterConfig, SslProfile

log = logging.getLogger("SERVER")


@dataclass(frozen=True)
class ListenerDoor:
    tls: ServerTls | None
    sasl: SaslPolicy | None


@dataclass(frozen=True)
class ConnectorDoor:
    tls: ClientTls | None
    mechanisms: str
    user: str | None
    password: str | None


def _password(cfg: RouterConfig, profile: SslProfile) -> str | None:
    raw = profile.password
    if raw is None and profile.password_file is not None:
        raw = f"file:{profile.password_file}"
    if raw is None:
        return None
    if raw.startswith("pass:"):
        return raw[5:]
    if raw.startswith("env:"):
        value = os.environ.get(raw[4:])
        if value is None:
            raise ConfigError(cfg.path, profile.line, f"sslProfile '{profile.name}': password: environment "
                                                      f"variable {raw[4:]} is not set")
        return value
    if raw.startswith("file:"):
        try:
            with open(raw[5:], encoding="utf-8") as handle:
                return handle.readline().rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(cfg.path, profile.line, f"sslProfile '{profile.name}': password file {raw[5:]}: "
                                                      f"{exc.strerror or exc}") from None
    return raw


def _readable(cfg: RouterConfig, profile: SslProfile, what: str, path: str | None) -> None:
    if path is not None and not os.access(path, os.R_OK):
        raise ConfigError(cfg.path, profile.line, f"sslProfile '{profile.name}': {what} {path}: expected a "
                                                  f"readable PEM file")


def _built(cfg: RouterConfig, line: int, label: str, tls) -> None:
    """Build the context now, so that a bad certificate, key or password is a start-up error."""
    try:
        tls.context()
    except (OSError, ssl.SSLError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(cfg.path, line, f"{label}: cannot use its TLS files (expected PEM files, a key that "
                                          f"matches the certificate and its right password): {reason}") from None


def users_for(cfg: RouterConfig, line: int, label: str) -> dict[str, str]:
    if cfg.router.sasl_config_dir is None:
        # qdrouterd would ask the system's Cyrus configuration; the reference has none to ask. A config written
        # for qdrouterd still runs, and every PLAIN client is refused, which the log says once here.
        log.warning("%s: %s:%d offers PLAIN but the router section has no saslConfigDir: no users, every PLAIN "
                    "client will be refused", label, cfg.path, line)
        return {}
    try:
        return load_users(users_file(cfg.router.sasl_config_dir, cfg.router.sasl_config_name))
    except UsersFileError as exc:
        raise ConfigError(cfg.path, cfg.router.line, f"router: saslConfigDir: {exc}") from None


def _profile(cfg: RouterConfig, conn: Listener | Connector, label: str,
             profiles: dict[str, SslProfile] | None) -> SslProfile | None:
    """The sslProfile a listener or connector names: from the file, or from `profiles` (those the running router
    has now: management may have created or deleted some)."""
    if profiles is None or conn.ssl_profile is None:
        return cfg.ssl_profile(conn.ssl_profile)
    found = profiles.get(conn.ssl_profile)
    if found is None:
        raise ConfigError(cfg.path, conn.line, f"{label}: sslProfile '{conn.ssl_profile}' does not name an "
                                               f"sslProfile (have: {', '.join(sorted(profiles)) or 'none'})")
    return found


def listener_door(cfg: RouterConfig, li: Listener, profiles: dict[str, SslProfile] | None = None) -> ListenerDoor:
    label = f"listener {li.name or li.port!r}"
    profile = _profile(cfg, li, label, profiles)
    tls = None
    if profile is not None:
        if profile.cert_file is None or profile.private_key_file is None:
            raise ConfigError(cfg.path, profile.line, f"sslProfile '{profile.name}': a listener's profile needs "
                                                      f"certFile and privateKeyFile")
        for what, path in (("certFile", profile.cert_file), ("privateKeyFile", profile.private_key_file),
                           ("caCertFile", profile.ca_cert_file)):
            _readable(cfg, profile, what, path)
        external = "EXTERNAL" in li.sasl_mechanisms
        if external and profile.ca_cert_file is None:
            raise ConfigError(cfg.path, li.line, f"{label}: EXTERNAL needs caCertFile in sslProfile "
                                                 f"'{profile.name}' to verify client certificates")
        tls = ServerTls(cert=profile.cert_file, key=profile.private_key_file, password=_password(cfg, profile),
                        ca=profile.ca_cert_file, verify="required" if external else "none",
                        require=li.require_ssl or li.require_encryption, ciphers=profile.ciphers,
                        protocols=profile.protocols)
        _built(cfg, profile.line, f"sslProfile '{profile.name}'", tls)
    if li.sasl_mechanisms in ((), ("ANONYMOUS",)) and not li.authenticate_peer:
        return ListenerDoor(tls, None)  # proton's own ANONYMOUS exchange, as before any security
    mechanisms = li.sasl_mechanisms or _default_mechanisms(cfg, li, tls)
    if li.authenticate_peer and mechanisms == ("ANONYMOUS",):
        raise ConfigError(cfg.path, li.line, f"{label}: authenticatePeer with only ANONYMOUS can authenticate "
                                             f"nobody (offer PLAIN or EXTERNAL)")
    users = users_for(cfg, li.line, label) if "PLAIN" in mechanisms else {}
    return ListenerDoor(tls, SaslPolicy(mechanisms, li.authenticate_peer, users))


def _default_mechanisms(cfg: RouterConfig, li: Listener, tls: ServerTls | None) -> tuple[str, ...]:
    offered = [] if li.authenticate_peer else ["ANONYMOUS"]
    if cfg.router.sasl_config_dir is not None:
        offered.append("PLAIN")
    if tls is not None and tls.ca:
        offered.append("EXTERNAL")
    return tuple(offered) or ("PLAIN",)


def connector_door(cfg: RouterConfig, co: Connector, profiles: dict[str, SslProfile] | None = None) -> ConnectorDoor:
    label = f"connector {co.name or co.port!r}"
    profile = _profile(cfg, co, label, profiles)
    tls = None
    if profile is not None:
        for what, path in (("certFile", profile.cert_file), ("privateKeyFile", profile.private_key_file),
                           ("caCertFile", profile.ca_cert_file)):
            _readable(cfg, profile, what, path)
        tls = ClientTls(ca=profile.ca_cert_file, verify_hostname=co.verify_hostname, cert=profile.cert_file,
                        key=profile.private_key_file, password=_password(cfg, profile), ciphers=profile.ciphers,
                        protocols=profile.protocols)
        _built(cfg, profile.line, f"sslProfile '{profile.name}'", tls)
    if "EXTERNAL" in co.sasl_mechanisms and (profile is None or profile.cert_file is None):
        raise ConfigError(cfg.path, co.line, f"{label}: EXTERNAL needs a client certificate (certFile in its "
                                             f"sslProfile)")
    mechanisms = " ".join(co.sasl_mechanisms) or ("PLAIN" if co.sasl_username else "ANONYMOUS")
    return ConnectorDoor(tls, mechanisms, co.sasl_username, co.sasl_password)


def check_doors(cfg: RouterConfig) -> None:
    """Every listener's and connector's security settings usable (ConfigError at the first that is not)."""
    for li in cfg.listeners:
        listener_door(cfg, li)
    for co in cfg.connectors:
        connector_door(cfg, co)
