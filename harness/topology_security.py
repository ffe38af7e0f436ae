"""The security fields of a topology (issue 20): test CAs, users, the doors of a node's listeners, broker
permissions, and TLS and SASL on links.

Seed 001_987f9e02a7866228.txt deploys routers with one CA for inter-router connections and another for
clients, clients authenticating with SASL, and inter-router listeners with `authenticatePeer` and an SSL
profile. Seed 002_f23507c2891d6d06.txt (AMQP broker connections) needs a broker connection's user to hold a
permission for each operation it performs. The model below says that once, vendor-neutrally; the renderers
turn it into sslProfiles and sasldb users (qdrouterd), security-settings and login properties (Artemis), users
and permissions (RabbitMQ).

CAs are names only: harness/tlsca.py makes each one fresh per run, so no key is ever checked in.

Parsing gets the caller's `_Where` (harness/topology.py) so that every error names the file, the node or link
and the field the same way as the rest of the topology.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# SASL mechanisms a topology may name: those every vendor here can offer without extra plugins.
MECHANISMS = ("ANONYMOUS", "PLAIN", "EXTERNAL")
CLIENT_CERTS = ("none", "optional", "required")
# Artemis's permission types (security-settings), as topology keys; the renderers map them to each vendor.
OPERATIONS = ("send", "consume", "create_address", "create_durable_queue", "create_non_durable_queue",
              "delete_address", "manage")
DEFAULT_HOSTNAME = "localhost"

_CA_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_USER_NAME = re.compile(r"^[A-Za-z0-9_.@-]+$")
# A hostname for a certificate: DNS labels (a suite may pick a wrong one on purpose, it must still be a name).
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                       r"[A-Za-z0-9])?)*$")

ACCESS_FIELDS = ("authenticate", "mechanisms", "tls")
LISTENER_TLS_FIELDS = ("ca", "client_certs", "require", "hostname")
LINK_TLS_FIELDS = ("ca", "dialler_ca", "trusts", "verify_hostname", "hostname")
PERMISSION_FIELDS = ("match", *OPERATIONS)


@dataclass(frozen=True)
class ListenerTls:
    """TLS on a listener: `ca` issues the node's certificate (for `hostname`) and verifies client certificates
    when `client_certs` is optional or required; `require` refuses a client that does not start TLS."""

    ca: str
    client_certs: str = "none"
    require: bool = True
    hostname: str = DEFAULT_HOSTNAME


@dataclass(frozen=True)
class NodeAccess:
    """The doors of a node's client listeners: whether a client must authenticate (router authenticatePeer,
    broker security-enabled), the SASL mechanisms offered, and TLS."""

    authenticate: bool = False
    mechanisms: tuple[str, ...] = ("ANONYMOUS",)
    tls: ListenerTls | None = None


@dataclass(frozen=True)
class LinkTls:
    """TLS on a link, mutual: `ca` issues both ends' certificates and both ends trust it, unless `dialler_ca`
    issues the dialler's certificate instead or the dialler `trusts` another CA (how a suite makes a wrong CA)."""

    ca: str
    dialler_ca: str | None = None
    trusts: str | None = None
    verify_hostname: bool = True
    hostname: str = DEFAULT_HOSTNAME

    @property
    def dialler_issuer(self) -> str:
        return self.dialler_ca or self.ca

    @property
    def dialler_trust(self) -> str:
        return self.trusts or self.ca

    def listener_side(self) -> ListenerTls:
        """What the listener the link lands on is configured with: its certificate from `ca`, and client
        certificates required and verified by `ca` (mutual authentication, as seed 001's inter-router listener)."""
        return ListenerTls(ca=self.ca, client_certs="required", require=True, hostname=self.hostname)


@dataclass(frozen=True)
class Permission:
    """One Artemis security-setting: for addresses matching `match`, the roles allowed each operation."""

    match: str
    send: tuple[str, ...] = ()
    consume: tuple[str, ...] = ()
    create_address: tuple[str, ...] = ()
    create_durable_queue: tuple[str, ...] = ()
    create_non_durable_queue: tuple[str, ...] = ()
    delete_address: tuple[str, ...] = ()
    manage: tuple[str, ...] = ()

    def roles_for(self, operation: str) -> tuple[str, ...]:
        if operation not in OPERATIONS:
            raise KeyError(f"unknown operation {operation!r}; expected one of {', '.join(OPERATIONS)}")
        return getattr(self, operation)


@dataclass
class NodeSecurity:
    """Everything security-related on one node (kept together so Node stays readable)."""

    users: dict[str, str] = field(default_factory=dict)
    access: NodeAccess = field(default_factory=NodeAccess)
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    permissions: tuple[Permission, ...] = ()


# ------------------------------------------------------------------------------------------- parsing


def parse_cas(w, data: dict) -> tuple[str, ...]:
    raw = data.get("cas", [])
    if not isinstance(raw, list):
        raise w.expected("cas", "a list of CA names", raw)
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not _CA_NAME.match(name):
            raise w.expected(f"cas[{i}]", "a CA name of letters, digits, '_' or '-'", name)
        if name in raw[:i]:
            raise w.error(f"cas[{i}]", f"{name!r} is listed twice")
    return tuple(raw)


def parse_node_security(w, raw: dict, role: str, cas: tuple[str, ...]) -> NodeSecurity:
    """The `users`, `access`, `roles` and `permissions` fields of one node (roles and permissions: brokers)."""
    security = NodeSecurity(users=_parse_users(w, raw))
    if "access" in raw:
        security.access = _parse_access(w, raw["access"], cas)
    if role == "broker":
        security.roles = _parse_roles(w, raw, security.users)
        security.permissions = tuple(_parse_permission(w, p, f"permissions[{i}]", security.roles)
                                     for i, p in enumerate(w.items(raw, "permissions")))
        if security.permissions and not security.access.authenticate:
            raise w.error("permissions", "need access.authenticate: true (an open broker cannot check them)")
    if "PLAIN" in security.access.mechanisms and not security.users:
        raise w.error("access.mechanisms", "PLAIN needs 'users' (nobody could log in)")
    return security


def _parse_users(w, raw: dict) -> dict[str, str]:
    users = raw.get("users", {})
    if not isinstance(users, dict):
        raise w.expected("users", "a mapping of user name to password", users)
    for name, password in users.items():
        if not isinstance(name, str) or not _USER_NAME.match(name):
            raise w.expected("users", "user names of letters, digits, '_', '.', '@' or '-'", name)
        if not isinstance(password, str) or not password or any(ch.isspace() for ch in password):
            raise w.expected(f"users.{name}", "a non-empty password without spaces", password)
    return dict(users)


def _parse_access(w, raw: Any, cas: tuple[str, ...]) -> NodeAccess:
    w.mapping(raw, "access", ACCESS_FIELDS)
    authenticate = w.boolean(raw, "authenticate", "access.authenticate")
    default = ["PLAIN"] if authenticate else ["ANONYMOUS"]
    mechanisms = parse_mechanisms(w, raw, "access.mechanisms", default)
    if authenticate and "ANONYMOUS" in mechanisms:
        raise w.error("access.mechanisms", "ANONYMOUS with authenticate: true (it would let anybody in)")
    tls = _parse_listener_tls(w, raw["tls"], "access.tls", cas) if raw.get("tls") is not None else None
    if "EXTERNAL" in mechanisms and (tls is None or tls.client_certs == "none"):
        raise w.error("access.mechanisms", "EXTERNAL needs access.tls with client_certs optional or required")
    return NodeAccess(authenticate=authenticate, mechanisms=mechanisms, tls=tls)


def parse_mechanisms(w, raw: dict, label: str, default: list[str]) -> tuple[str, ...]:
    value = raw.get(label.rsplit(".", 1)[-1], default)
    if not isinstance(value, list) or not value:
        raise w.expected(label, f"a non-empty list of SASL mechanisms ({', '.join(MECHANISMS)})", value)
    for i, mechanism in enumerate(value):
        if mechanism not in MECHANISMS:
            raise w.expected(f"{label}[{i}]", f"one of {', '.join(MECHANISMS)}", mechanism)
        if mechanism in value[:i]:
            raise w.error(f"{label}[{i}]", f"{mechanism} is listed twice")
    return tuple(value)


def _ca(w, raw: dict, key: str, label: str, cas: tuple[str, ...], required: bool) -> str | None:
    if raw.get(key) is None and not required:
        return None
    value = raw.get(key)
    if value not in cas:
        declared = ", ".join(cas) or "none: add a top-level 'cas' list"
        raise w.expected(f"{label}.{key}", f"a CA named in 'cas' ({declared})", value)
    return value


def _hostname(w, raw: dict, label: str) -> str:
    value = raw.get("hostname", DEFAULT_HOSTNAME)
    if not isinstance(value, str) or not _HOSTNAME.match(value):
        raise w.expected(f"{label}.hostname", "a DNS name", value)
    return value


def _parse_listener_tls(w, raw: Any, label: str, cas: tuple[str, ...]) -> ListenerTls:
    w.mapping(raw, label, LISTENER_TLS_FIELDS, required=("ca",))
    require = raw.get("require", True)
    if not isinstance(require, bool):
        raise w.expected(f"{label}.require", "true or false", require)
    return ListenerTls(
        ca=_ca(w, raw, "ca", label, cas, True),
        client_certs=w.one_of(raw, "client_certs", CLIENT_CERTS, "none", f"{label}.client_certs"),
        require=require,
        hostname=_hostname(w, raw, label),
    )


def parse_link_tls(w, raw: Any, cas: tuple[str, ...]) -> LinkTls:
    w.mapping(raw, "tls", LINK_TLS_FIELDS, required=("ca",))
    verify = raw.get("verify_hostname", True)
    if not isinstance(verify, bool):
        raise w.expected("tls.verify_hostname", "true or false", verify)
    return LinkTls(
        ca=_ca(w, raw, "ca", "tls", cas, True),
        dialler_ca=_ca(w, raw, "dialler_ca", "tls", cas, False),
        trusts=_ca(w, raw, "trusts", "tls", cas, False),
        verify_hostname=verify,
        hostname=_hostname(w, raw, "tls"),
    )


def _parse_roles(w, raw: dict, users: dict[str, str]) -> dict[str, tuple[str, ...]]:
    roles = raw.get("roles", {})
    if not isinstance(roles, dict):
        raise w.expected("roles", "a mapping of role name to a list of users", roles)
    parsed = {}
    for name, members in roles.items():
        if not isinstance(name, str) or not _USER_NAME.match(name):
            raise w.expected("roles", "role names of letters, digits, '_', '.', '@' or '-'", name)
        if not isinstance(members, list) or not members:
            raise w.expected(f"roles.{name}", "a non-empty list of user names", members)
        for i, member in enumerate(members):
            if member not in users:
                raise w.expected(f"roles.{name}[{i}]", f"a user of 'users' ({', '.join(users) or 'none'})", member)
        parsed[name] = tuple(members)
    return parsed


def _parse_permission(w, raw: Any, label: str, roles: dict[str, tuple[str, ...]]) -> Permission:
    w.mapping(raw, label, PERMISSION_FIELDS, required=("match",))
    match = w.string(raw, "match", f"{label}.match")
    granted = {}
    for operation in OPERATIONS:
        value = raw.get(operation, [])
        if not isinstance(value, list):
            raise w.expected(f"{label}.{operation}", "a list of role names", value)
        for i, role in enumerate(value):
            if role not in roles:
                raise w.expected(f"{label}.{operation}[{i}]", f"a role of 'roles' ({', '.join(roles) or 'none'})",
                                 role)
        granted[operation] = tuple(value)
    return Permission(match=match, **granted)
