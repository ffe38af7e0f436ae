"""Parser for qdrouterd.conf files (the qdrouterd 1.19 syntax) for the reference router.

It reads a file exactly when qdrouterd 1.19 does (issue 53; checked against the real qdrouterd by
`interop fuzz --configs`, harness/fuzz/configs.py), then adds its own checks, each refusing at a line:

File shape, as qdrouterd's python/qpid_dispatch_internal/management/config.py reads it
    Each line on its own becomes a line of JSON (_to_json): `NAME {` alone opens a section, `key: value` is
    one attribute (the value is the rest of the line, copied into a JSON string: so a `"` or a backslash that
    starts no JSON escape is refused, `\\u0041` is `A`), `key: {` opens a map (its lines follow the same rules),
    `}` alone closes; a blank line or one starting with `#` is skipped; on any other line a `#` starts a comment,
    inside a word too (`id: R#1` is `R`), except on `pattern:`, `bindingKey:` and `hostname:` lines, whose value
    is their first word. Anything else is left to the JSON parser, which refuses it: a section on one line
    (`router { mode: interior }`), a brace glued to a value, a name and its brace on two lines. A key may be
    written snake_case or kebab-case (qdrouterd camelCases it); a key given twice takes the last value. The
    file is read as UTF-8 text; a byte order mark is a character before the first section (refused).
Schema, qdrouterd's qdrouter.json (_QD_SCHEMA)
    Section names and attribute names as qdrouterd knows them, with the older spellings it still takes (its
    deprecationName: `dir`, `addr` on autoLink, `output` ...; both spellings at once are refused), the required
    ones, and each value of its type as qdrouterd's schema.py validates it: integers by Python's int() (`+5`,
    `1_0`), booleans yes/no/true/false/on/off in any case, an enum value or the index of one (`mode: 1`). Then
    qdrouterd's checks over the file: one router section, `name` and `identity` unique across all sections,
    a router id of at most 127 characters without spaces or control characters, the role of listeners and
    connectors against the router's mode, and the identities qdrouterd gives unnamed sections unique (two
    unnamed listeners on one host and port are refused; so is a log module configured twice).
The reference's own checks
    What the reference needs to run the file: prefix/pattern rules, priorities and phases in range, TLS and SASL
    settings it can honour, names that connections refer to, no two sections for one address pattern; and
    `check_supported` below. Where qdrouterd would start anyway (dropping the section with an error in its log,
    or failing later), the difference is deliberate and recorded in harness/fuzz/config_known.py. Errors name the
    file, the line and the section or attribute: `FILE:LINE: listener: 'port' must be ...`.

Security (issue 20): ``sslProfile`` sections, listener ``sslProfile``/``requireSsl``/``authenticatePeer``/
``saslMechanisms`` and connector ``sslProfile``/``verifyHostname``/``saslMechanisms``/``saslUsername``/
``saslPassword`` are parsed here and cross-checked (a profile must exist, mechanisms must be ones the
reference offers); reference/router/security.py turns them into the event loop's TLS and SASL settings and
checks that the files they name can be used.

``check_supported`` then says whether the reference router can run a parsed configuration:
every construct in the file maps to a feature name and each must be in SUPPORTED_FEATURES.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import socket
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reference.router.addressing import (
    AddressTable,
    normalize_pattern,
    prefix_to_pattern,
    validate_pattern,
)


class ConfigError(Exception):
    """A user mistake in a config file; str() is one line: ``path:line: message``."""

    def __init__(self, path: str, line: int, message: str) -> None:
        message = message.replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever a value held
        super().__init__(path, line, message)  # all three in args, so the error pickles
        self.path = path
        self.line = line
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


# ---------------------------------------------------------------------------------------
# Parsed configuration


@dataclass(kw_only=True)  # not frozen: the server may override ``id`` from its command line
class RouterSection:
    mode: str = "standalone"
    id: str | None = None
    default_distribution: str = "balanced"
    sasl_config_dir: str | None = None  # where the users file for PLAIN is (reference/security/users.py)
    sasl_config_name: str | None = None
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class SslProfile:
    """qdrouterd's sslProfile: a certificate and key (the key optionally encrypted with `password`), the CA
    file that verifies peers, and the allowed ciphers and protocols."""

    name: str | None = None
    cert_file: str | None = None
    private_key_file: str | None = None
    password: str | None = field(default=None, repr=False)
    password_file: str | None = None
    ca_cert_file: str | None = None
    ciphers: str | None = None
    protocols: str | None = None
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class Listener:
    name: str | None = None
    host: str = ""  # qdrouterd: the empty string listens on every local address
    port: int = 5672
    role: str = "normal"
    sasl_mechanisms: tuple[str, ...] = ()  # empty: not restricted by the config
    authenticate_peer: bool = False
    cost: int = 1
    link_capacity: int | None = None
    idle_timeout_seconds: int | None = None
    max_frame_size: int | None = None
    ssl_profile: str | None = None
    require_ssl: bool = False
    require_encryption: bool = False
    http: bool = False
    websockets: bool = True  # with http: the WebSocket upgrade is allowed (qdrouterd's default); no: refused
    healthz: bool = True  # with http: GET /healthz answers 200 OK (qdrouterd's default)
    multi_tenant: bool = False
    sasl_plugin: str | None = None
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class Connector:
    name: str | None = None
    host: str = "127.0.0.1"
    port: int = 5672
    role: str = "normal"
    sasl_mechanisms: tuple[str, ...] = ()
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    cost: int = 1
    link_capacity: int | None = None
    idle_timeout_seconds: int | None = None
    max_frame_size: int | None = None
    ssl_profile: str | None = None
    verify_hostname: bool = True
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class AddressSection:
    prefix: str | None = None
    pattern: str | None = None
    distribution: str = "balanced"
    priority: int | None = None  # None: not set (qdrouterd spells that -1)
    waypoint: bool = False
    enable_fallback: bool = False
    ingress_phase: int | None = None
    egress_phase: int | None = None
    name: str | None = None
    line: int = 0

    @property
    def match_pattern(self) -> str:
        """The section's pattern; a prefix is turned into its pattern form (§12.1.2 note)."""
        return prefix_to_pattern(self.prefix) if self.prefix is not None else str(self.pattern)


@dataclass(frozen=True, kw_only=True)
class LinkRoute:
    prefix: str | None = None
    pattern: str | None = None
    direction: str = ""
    connection: str | None = None
    container_id: str | None = None
    add_external_prefix: str | None = None
    del_external_prefix: str | None = None
    name: str | None = None
    line: int = 0

    @property
    def match_pattern(self) -> str:
        return prefix_to_pattern(self.prefix) if self.prefix is not None else str(self.pattern)


@dataclass(frozen=True, kw_only=True)
class AutoLink:
    address: str = ""
    direction: str = ""
    connection: str | None = None
    container_id: str | None = None
    external_address: str | None = None
    phase: int | None = None
    fallback: bool = False
    name: str | None = None
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class LogSection:
    module: str = ""
    enable: str | None = None
    include_source: bool | None = None
    include_timestamp: bool | None = None
    output: str | None = None
    line: int = 0


@dataclass
class RouterConfig:
    path: str
    router: RouterSection = field(default_factory=RouterSection)
    listeners: list[Listener] = field(default_factory=list)
    connectors: list[Connector] = field(default_factory=list)
    addresses: list[AddressSection] = field(default_factory=list)
    link_routes: list[LinkRoute] = field(default_factory=list)
    auto_links: list[AutoLink] = field(default_factory=list)
    logs: list[LogSection] = field(default_factory=list)
    ssl_profiles: list[SslProfile] = field(default_factory=list)

    def ssl_profile(self, name: str | None) -> SslProfile | None:
        return next((p for p in self.ssl_profiles if p.name == name), None) if name else None

    def address_table(self) -> AddressTable[AddressSection]:
        """The address sections keyed by their patterns, for best-match lookups."""
        table: AddressTable[AddressSection] = AddressTable()
        for section in self.addresses:
            table.add(section.match_pattern, section)
        return table


# ---------------------------------------------------------------------------------------
# qdrouterd's schema (qdrouter.json of 1.19) for the sections the reference router reads: attribute -> its type
# (string, path, integer, boolean, properties, or a tuple of enum tags), and the older spelling qdrouterd still
# takes for it (its `deprecationName`). Every entity also has `name` and `identity` (unique strings).

_STR, _PATH, _INT, _BOOL, _PROPS = "string", "path", "integer", "boolean", "properties"
_ROLES = ("normal", "inter-router", "route-container", "edge")
_DISTRIBUTIONS = ("multicast", "closest", "balanced", "unavailable")
_LOG_MODULES = ("ROUTER", "ROUTER_CORE", "ROUTER_HELLO", "ROUTER_LS", "ROUTER_MA", "MESSAGE", "SERVER", "AGENT",
                "AUTHSERVICE", "CONTAINER", "ERROR", "POLICY", "HTTP", "CONN_MGR", "PYTHON", "PROTOCOL", "DEFAULT")

_QD_SCHEMA: dict[str, dict[str, tuple[Any, str | None]]] = {
    "router": {
        "id": (_STR, None), "mode": (("standalone", "interior", "edge"), None), "area": (_STR, None),
        "version": (_STR, None), "hostName": (_STR, None), "helloIntervalSeconds": (_INT, "helloInterval"),
        "helloMaxAgeSeconds": (_INT, "helloMaxAge"), "raIntervalSeconds": (_INT, "raInterval"),
        "raIntervalFluxSeconds": (_INT, "raIntervalFlux"), "remoteLsMaxAgeSeconds": (_INT, "remoteLsMaxAge"),
        "workerThreads": (_INT, None), "debugDumpFile": (_PATH, "debugDump"),
        "saslConfigDir": (_PATH, "saslConfigPath"), "saslConfigName": (_STR, None),
        "allowResumableLinkRoute": (_BOOL, None), "timestampsInUTC": (_BOOL, None), "timestampFormat": (_STR, None),
        "allowUnsettledMulticast": (_BOOL, None), "defaultDistribution": (_DISTRIBUTIONS, None),
        "metadata": (_STR, None),
        # statistics: operational, yet in the schema, so a file may set them (qdrouterd ignores the values)
        **{counter: (_INT, None) for counter in (
            "addrCount", "linkCount", "blockedLinkCount", "nodeCount", "linkRouteCount", "autoLinkCount",
            "connectionCount", "presettledDeliveries", "droppedPresettledDeliveries", "acceptedDeliveries",
            "rejectedDeliveries", "releasedDeliveries", "modifiedDeliveries", "deliveriesDelayed1Sec",
            "deliveriesDelayed10Sec", "deliveriesStuck", "deliveriesIngress", "deliveriesEgress",
            "deliveriesTransit", "deliveriesIngressRouteContainer", "deliveriesEgressRouteContainer",
            "deliveriesRedirectedToFallback", "uptimeSeconds", "memoryUsage")},
    },
    "listener": {
        "host": (_STR, None), "port": (_STR, None), "socketAddressFamily": (("IPv4", "IPv6"), "protocolFamily"),
        "role": (_ROLES, None), "cost": (_INT, None), "sslProfile": (_STR, None), "saslMechanisms": (_STR, None),
        "authenticatePeer": (_BOOL, None), "saslPlugin": (_STR, None), "requireEncryption": (_BOOL, None),
        "requireSsl": (_BOOL, None), "trustedCertsFile": (_PATH, "trustedCerts"), "maxFrameSize": (_INT, None),
        "maxSessions": (_INT, None), "maxSessionFrames": (_INT, None), "idleTimeoutSeconds": (_INT, None),
        "initialHandshakeTimeoutSeconds": (_INT, None), "stripAnnotations": (("in", "out", "both", "no"), None),
        "linkCapacity": (_INT, None), "multiTenant": (_BOOL, None), "failoverUrls": (_STR, "failoverList"),
        "healthz": (_BOOL, None), "metrics": (_BOOL, None), "websockets": (_BOOL, None), "http": (_BOOL, None),
        "httpRootDir": (_PATH, "httpRoot"), "messageLoggingComponents": (_STR, "logMessage"),
        "policyVhost": (_STR, None), "openProperties": (_PROPS, None),
    },
    "connector": {
        "host": (_STR, None), "port": (_STR, None), "protocolFamily": (("IPv4", "IPv6"), None),
        "role": (_ROLES, None), "cost": (_INT, None), "sslProfile": (_STR, None), "saslMechanisms": (_STR, None),
        "allowRedirect": (_BOOL, None), "maxFrameSize": (_INT, None), "maxSessions": (_INT, None),
        "maxSessionFrames": (_INT, None), "idleTimeoutSeconds": (_INT, None),
        "stripAnnotations": (("in", "out", "both", "no"), None), "linkCapacity": (_INT, None),
        "verifyHostname": (_BOOL, "verifyHostName"), "saslUsername": (_STR, None), "saslPassword": (_STR, None),
        "messageLoggingComponents": (_STR, "logMessage"), "failoverUrls": (_STR, "failoverList"),
        "connectionStatus": (_STR, None), "connectionMsg": (_STR, None), "policyVhost": (_STR, None),
        "openProperties": (_PROPS, None),
    },
    "sslProfile": {
        "ciphers": (_STR, None), "protocols": (_STR, None), "caCertFile": (_PATH, "certDb"),
        "certFile": (_PATH, None), "privateKeyFile": (_PATH, "keyFile"), "passwordFile": (_PATH, None),
        "password": (_STR, None), "uidFormat": (_STR, None), "uidNameMappingFile": (_STR, "displayNameFile"),
    },
    "address": {
        "prefix": (_STR, None), "pattern": (_STR, None), "distribution": (_DISTRIBUTIONS, None),
        "waypoint": (_BOOL, None), "ingressPhase": (_INT, None), "egressPhase": (_INT, None),
        "priority": (_INT, None), "enableFallback": (_BOOL, None),
    },
    "linkRoute": {
        "prefix": (_STR, None), "pattern": (_STR, None), "addExternalPrefix": (_STR, None),
        "delExternalPrefix": (_STR, None), "containerId": (_STR, None), "connection": (_STR, None),
        "distribution": (("linkBalanced",), None), "direction": (("in", "out"), "dir"),
        "operStatus": (("inactive", "active"), None),
    },
    "autoLink": {
        "address": (_STR, "addr"), "direction": (("in", "out"), "dir"), "phase": (_INT, None),
        "containerId": (_STR, None), "connection": (_STR, None), "externalAddress": (_STR, "externalAddr"),
        "fallback": (_BOOL, None), "linkRef": (_STR, None),
        "operStatus": (("inactive", "attaching", "failed", "active", "quiescing", "idle"), None),
        "lastError": (_STR, None),
    },
    "log": {
        "module": (_LOG_MODULES, None), "enable": (_STR, None), "includeTimestamp": (_BOOL, "timestamp"),
        "includeSource": (_BOOL, "source"), "outputFile": (_STR, "output"),
    },
}
for _attrs in _QD_SCHEMA.values():
    _attrs.update({"name": (_STR, None), "identity": (_STR, None)})
_REQUIRED = {"linkRoute": ("direction",), "autoLink": ("address", "direction"), "log": ("module",)}
# Every other section qdrouterd 1.19 knows (its entity types a file can name): the reference does not read them.
_OTHER_QD_SECTIONS = frozenset({
    "policy", "vhost", "vhostUserGroupSettings", "authServicePlugin", "exchange", "binding", "console",
    "management", "entity", "configurationEntity", "operationalEntity", "logStats", "connection", "allocator",
    "vhostStats", "dummy",
})
_ROUTER_ID_MAX = 127  # QdSchema.ROUTER_ID_MAX_LEN


def _qd_value(kind: Any, value: Any) -> Any:
    """`value` as qdrouterd's schema validates it (schema.py of 1.19), or ValueError(what was expected):
    strings take anything (a nested map becomes its Python text), integers follow Python's int() (so `+5`,
    ` 7` and `1_0` are integers), booleans are yes/true/on/no/false/off in any case, an enum value is one of
    its tags or the index of one (negative too)."""
    if kind in (_STR, _PATH):
        return str(value)
    if kind == _INT:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError("an integer") from None
    if kind == _BOOL:
        if isinstance(value, str):
            flags = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}
            if value.lower() not in flags:
                raise ValueError("yes, no, true, false, on or off")
            return flags[value.lower()]
        return bool(value)
    if kind == _PROPS:
        if not isinstance(value, dict) or any(not isinstance(k, str) or not k.isascii() for k in value):
            raise ValueError("a map with ASCII keys")
        return value
    if value in kind:
        return value
    try:
        return kind[int(value)]
    except (TypeError, ValueError, IndexError):
        raise ValueError("one of " + ", ".join(kind)) from None


# ---------------------------------------------------------------------------------------
# What the reference does with the attributes it reads: the dataclass field and a check of the value qdrouterd's
# schema let through. Each check returns the value to keep or raises ValueError(<what was expected>).


def _keep(value: Any) -> Any:
    return value


def _at_least(lo: int) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value < lo:
            raise ValueError(f"an integer >= {lo}")
        return value

    return check


def _between(lo: int, hi: int) -> Callable[[int], int]:
    def check(value: int) -> int:
        if not lo <= value <= hi:
            raise ValueError(f"an integer {lo}..{hi}")
        return value

    return check


def _port(value: str) -> int:
    """The port qdrouterd listens on or dials for `value`: proton gives it to getaddrinfo as the service, so it is
    resolved the same way here, by the same C library: decimal digits (`+5` and `00` too; above 65535 the number
    wraps as the library wraps it) or a name of the services database (`amqp`, `amqps`, ...)."""
    try:
        found = socket.getaddrinfo(None, value, socket.AF_INET, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError):
        raise ValueError("a port number or a service name such as 'amqp' or 'amqps'") from None
    return found[0][4][1]


def _priority(value: int) -> int | None:
    if not -1 <= value <= 9:
        raise ValueError("an integer 0..9 (or -1 for unset)")
    return None if value == -1 else value


def _link_capacity(value: int) -> int | None:
    """qdrouterd: 0 means its default (250); the reference then keeps its own default."""
    if value < 0:
        raise ValueError("an integer >= 0 (0: the default)")
    return value or None


def _max_frame_size(value: int) -> int:
    """qdrouterd raises a value below AMQP's minimum (512, §2.7.1) to 512 ("silently promote")."""
    if value < 0:
        raise ValueError("an integer >= 0 (below 512: 512)")
    return max(512, value)


# The SASL mechanisms the reference offers (reference/security/sasl.py); qdrouterd takes whatever its Cyrus has.
SASL_MECHANISMS = ("ANONYMOUS", "PLAIN", "EXTERNAL")


def _mechanisms(value: str) -> tuple[str, ...]:
    names = tuple(value.replace(",", " ").split())
    unknown = [n for n in names if n not in SASL_MECHANISMS]
    if unknown:
        raise ValueError(f"a space-separated list of {', '.join(SASL_MECHANISMS)} (the mechanisms the reference "
                         f"router offers; {' '.join(unknown)} is not one)")
    return names


_TLS_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")


def _protocols(value: str) -> str:
    if not value.split() or any(word not in _TLS_PROTOCOLS for word in value.split()):
        raise ValueError(f"a space-separated list of {', '.join(_TLS_PROTOCOLS)}")
    return value


# qdrouterd's log levels (log.c of 1.19): name, the bit of that level alone, the mask of it and those above.
_LOG_LEVEL_BITS = (("default", -1, -1), ("none", 0, 0), ("trace", 1, 127), ("debug", 2, 126), ("info", 4, 124),
                   ("notice", 8, 120), ("warning", 16, 112), ("error", 32, 96), ("critical", 64, 64))


def _log_enable(value: str) -> str:
    """qdrouterd's enable_mask(): words split at `, ;:`, each a level name or any prefix of one in any case (the
    first level it begins: `i` is info, an empty word is `default`), `+` after it for that level and above; the
    bits are OR-ed and the file refused when the result is below -1 (an unknown word, unless OR-ed away)."""
    mask = 0
    for word in re.split(r"[, ;:]", value):
        if not word:
            continue
        plus = word.endswith("+")
        name = (word[:-1] if plus else word).lower()
        level = next((lv for lv in _LOG_LEVEL_BITS if lv[0][:len(name)] == name and len(name) <= len(lv[0])),
                     None)
        mask |= (-2 if level is None else level[2] if plus else level[1])
    if mask < -1:
        raise ValueError("levels of " + ", ".join(lv[0] for lv in _LOG_LEVEL_BITS[1:])
                         + " ('+': that level and above), separated by commas")
    return value


@dataclass(frozen=True)
class _Attr:
    field: str | None  # dataclass field to set; None: accepted (qdrouterd's schema checked it), then dropped
    check: Callable[[Any], Any] = _keep


_CONNECTION_FIELDS = {
    "name": _Attr("name"), "host": _Attr("host"), "port": _Attr("port", _port), "role": _Attr("role"),
    "cost": _Attr("cost", _at_least(1)), "saslMechanisms": _Attr("sasl_mechanisms", _mechanisms),
    "linkCapacity": _Attr("link_capacity", _link_capacity),
    "idleTimeoutSeconds": _Attr("idle_timeout_seconds", _at_least(0)),
    "maxFrameSize": _Attr("max_frame_size", _max_frame_size), "sslProfile": _Attr("ssl_profile"),
}

_FIELDS: dict[str, dict[str, _Attr]] = {
    "router": {"id": _Attr("id"), "mode": _Attr("mode"), "defaultDistribution": _Attr("default_distribution"),
               "saslConfigDir": _Attr("sasl_config_dir"), "saslConfigName": _Attr("sasl_config_name"),
               # qdrouterd allocates this many threads before it serves: below 1 it cannot start (qd_calloc)
               "workerThreads": _Attr(None, _at_least(1))},
    "listener": {**_CONNECTION_FIELDS, "authenticatePeer": _Attr("authenticate_peer"),
                 "requireSsl": _Attr("require_ssl"), "requireEncryption": _Attr("require_encryption"),
                 "http": _Attr("http"), "websockets": _Attr("websockets"), "healthz": _Attr("healthz"),
                 "multiTenant": _Attr("multi_tenant"), "saslPlugin": _Attr("sasl_plugin")},
    "connector": {**_CONNECTION_FIELDS, "saslUsername": _Attr("sasl_username"),
                  "saslPassword": _Attr("sasl_password"), "verifyHostname": _Attr("verify_hostname")},
    "sslProfile": {"name": _Attr("name"), "certFile": _Attr("cert_file"),
                   "privateKeyFile": _Attr("private_key_file"), "password": _Attr("password"),
                   "passwordFile": _Attr("password_file"), "caCertFile": _Attr("ca_cert_file"),
                   "ciphers": _Attr("ciphers"), "protocols": _Attr("protocols", _protocols)},
    "address": {"prefix": _Attr("prefix"), "pattern": _Attr("pattern"), "distribution": _Attr("distribution"),
                "priority": _Attr("priority", _priority), "waypoint": _Attr("waypoint"),
                "enableFallback": _Attr("enable_fallback"), "ingressPhase": _Attr("ingress_phase", _between(0, 9)),
                "egressPhase": _Attr("egress_phase", _between(0, 9)), "name": _Attr("name")},
    "linkRoute": {"prefix": _Attr("prefix"), "pattern": _Attr("pattern"), "direction": _Attr("direction"),
                  "connection": _Attr("connection"), "containerId": _Attr("container_id"),
                  "addExternalPrefix": _Attr("add_external_prefix"),
                  "delExternalPrefix": _Attr("del_external_prefix"), "name": _Attr("name")},
    "autoLink": {"address": _Attr("address"), "direction": _Attr("direction"), "connection": _Attr("connection"),
                 "containerId": _Attr("container_id"), "externalAddress": _Attr("external_address"),
                 "phase": _Attr("phase", _between(0, 9)), "fallback": _Attr("fallback"), "name": _Attr("name")},
    "log": {"module": _Attr("module"), "enable": _Attr("enable", _log_enable),
            "includeSource": _Attr("include_source"), "includeTimestamp": _Attr("include_timestamp"),
            "outputFile": _Attr("output")},
}

_SECTION_TYPES: dict[str, type] = {
    "router": RouterSection,
    "listener": Listener,
    "connector": Connector,
    "address": AddressSection,
    "linkRoute": LinkRoute,
    "autoLink": AutoLink,
    "log": LogSection,
    "sslProfile": SslProfile,
}


# ---------------------------------------------------------------------------------------
# Reading the file as qdrouterd 1.19 does (python/qpid_dispatch_internal/management/config.py): every line on its
# own is turned into a line of JSON by the regexes below, the lines are joined into one JSON list, commas before
# a closing bracket are dropped, and json.loads reads it. Line N of the file is line N of the JSON text.

_ENTITY = re.compile(r"([\w-]+)[ \t]*{[ \t]*$")  # WORD {
_ATTR_MAP = re.compile(r"([\$]*[\w-]+)[ \t]*:[ \t]*{[ \t]*$")  # WORD: {
_JSON_MAP = re.compile(r'("[\$]*[\w-]+)"[ \t]*:[ \t]*{[ \t]*$')  # "WORD": {
_ATTR_ITEM = re.compile(r"([\w-]+)[ \t]*:[ \t]*([^ \t{]+.*)$")  # WORD: VALUE
_END = re.compile(r"^}$")  # } alone
_JSON_END = re.compile(r"}$")
_HASH_OK = re.compile(r"([\w-]+)[ \t]*:[ \t]*([\S]+).*")  # a key whose value may hold '#': its first word
_HASH_KEYS = ("pattern", "bindingKey", "hostname")
_JSON_KEYS = ("openProperties", "groups")  # their `{ ... }` is copied as JSON
_SPARE_COMMA = re.compile(r",\s*([]}])")
_SEPARATOR = re.compile(r" |_|-|\.")


@dataclass
class _Line:
    kind: str  # blank | json | attr | map | section | end | other
    key: str | None = None  # attr and map lines: the key as written


def _to_json(lines: list[str]) -> tuple[list[str], list[_Line]]:
    """qdrouterd's per-line substitution (Config._parse.sub), line for line."""
    out: list[str] = []
    kinds: list[_Line] = []
    level, in_json = 0, False
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            out.append("")
            kinds.append(_Line("blank"))
            continue
        if in_json:  # inside openProperties/groups: JSON as written, nested maps counted
            if _JSON_MAP.search(line):
                level += 1
            if _JSON_END.search(line):
                level -= 1
                if level == 0:
                    in_json = False
                    line = _JSON_END.sub("},", line)
            out.append(line)
            kinds.append(_Line("json"))
            continue
        if _ATTR_ITEM.search(line) and _ATTR_ITEM.sub(r"\1", line) in _HASH_KEYS:
            out.append(_HASH_OK.sub(r'"\1": "\2",', line))  # a '#' here is no comment
            kinds.append(_Line("attr", _ATTR_ITEM.search(line).group(1)))
            continue
        line = line.split("#")[0].strip()  # a '#' anywhere else starts a comment
        if _ENTITY.search(line):
            kinds.append(_Line("section", _ENTITY.search(line).group(1)))
            line = _ENTITY.sub(r'["\1", {', line)
        elif _ATTR_MAP.search(line):
            key = _ATTR_MAP.sub(r"\1", line)
            kinds.append(_Line("map", _ATTR_MAP.search(line).group(1)))
            line = _ATTR_MAP.sub(r'"\1": {', line)
            level += 1
            if key in _JSON_KEYS:
                in_json = True
        elif _ATTR_ITEM.search(line):
            kinds.append(_Line("attr", _ATTR_ITEM.search(line).group(1)))
            line = _ATTR_ITEM.sub(r'"\1": "\2",', line)
        elif _END.search(line):
            kinds.append(_Line("end"))
            if level > 0:
                line = _END.sub("},", line)
                level -= 1
            else:
                line = _END.sub("}],", line)
        else:
            kinds.append(_Line("other"))  # qdrouterd leaves it to the JSON parser
        out.append(line)
    return out, kinds


def _camelcase(name: Any) -> str:
    """qdrouterd's camelcase(): words split at ' ', '_', '-' or '.', the first kept, the rest capitalized
    (`sasl_mechanisms` and `link-route` are `saslMechanisms` and `linkRoute`)."""
    if not name:
        return ""
    words = _SEPARATOR.split(name)
    return words[0] + "".join(w.capitalize() for w in words[1:])


def _split_lines(text: str) -> list[str]:
    """The lines Python's text mode gives qdrouterd: split at \\n, \\r\\n and \\r, nothing else."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _json_error_line(js_text: str, position: int) -> int:
    """The line of `position`, a place in `js_text` after qdrouterd dropped its spare commas (with the white
    space, newlines too, between each and its bracket), in `js_text` before that."""
    shift = 0
    for match in _SPARE_COMMA.finditer(js_text):
        if match.start() - shift > position:
            break
        shift += match.start(1) - match.start()
    return js_text.count("\n", 0, position + shift) + 1


def _syntax_error(path: str, lines: list[str], kinds: list[_Line], js_text: str,
                  exc: json.JSONDecodeError) -> ConfigError:
    """A JSON error as a one-line ConfigError at the file line that caused it, saying what qdrouterd expects."""
    line = max(1, min(len(lines), _json_error_line(js_text, exc.pos)))
    culprit = _culprit(kinds, lines, line)
    text = lines[culprit - 1].strip()
    kind = kinds[culprit - 1]
    shown = text if len(text) <= 60 else text[:57] + "..."
    key = f"attribute '{kind.key}': " if kind.kind == "attr" else ""
    if kind.kind == "attr" and "{" not in text and not any(k.kind == "section" for k in kinds[:culprit]):
        hint = f"attribute '{kind.key}' outside of any section"
    elif kind.kind in ("other", "attr") and "{" in text and "}" in text:
        hint = ("a section on one line: qdrouterd reads 'NAME {' alone on a line, one 'attribute: value' per "
                "line, then '}' alone on a line")
    elif kind.kind in ("other", "attr") and "{" in text:
        hint = f"{key}'{{' must end the line that names a section ('NAME {{')"
    elif kind.kind in ("other", "attr") and "}" in text:
        hint = f"{key}'}}' must stand alone on its line"
    elif kind.kind == "other" and text.endswith(":"):
        hint = f"attribute '{text[:-1].strip()}' has no value"
    elif kind.kind == "other":
        hint = "expected 'NAME {', 'attribute: value' or '}'"
    elif kind.kind == "attr" and '"' in text:
        hint = f"{key}a value may not hold '\"' (qdrouterd copies it into a JSON string)"
    elif kind.kind == "attr" and "\\" in text:
        hint = f"{key}a backslash in a value must start a JSON escape (\\\\, \\n, \\u0041 ...)"
    elif kind.kind == "attr":
        hint = f"{key}its value is not the text of a JSON string (a control character?)"
    elif kind.kind == "section":
        hint = f"section '{kind.key}' starts inside another section: is a '}}' missing before it?"
    elif kind.kind == "end":
        hint = "'}' without a section to close"
    else:  # past the last line: a section left open
        opened = [n for n, k in enumerate(kinds[:culprit], start=1) if k.kind == "section"]
        if opened:
            culprit = opened[-1]
            hint = f"section '{kinds[culprit - 1].key}' is never closed (missing '}}')"
        else:
            hint = "the file ends inside a section: is a '}' missing?"
        return ConfigError(path, culprit, f"{hint} (qdrouterd: {exc.msg} at the end of the file)")
    return ConfigError(path, culprit, f"{hint} (qdrouterd: {exc.msg}, at '{shown}')")


def _culprit(kinds: list[_Line], lines: list[str], line: int) -> int:
    """The line to blame. JSON errors show up after the line that caused them at times (a '}' glued to a value
    leaves the section open until the next one starts): prefer, at or up to three lines before the error, a line
    qdrouterd could not read, or an attribute line holding a brace or a double quote."""
    for candidate in range(line, max(0, line - 4), -1):
        kind, text = kinds[candidate - 1], lines[candidate - 1]
        if kind.kind == "other" or (kind.kind == "attr" and any(ch in text for ch in '{}"')):
            return candidate
    return line


@dataclass
class _Section:
    name: str  # as qdrouterd names it after camelcase()
    line: int
    attrs: dict[str, Any]  # key (camelCase) -> value (JSON: a string, or a map)
    lines: dict[str, int]  # key -> line of its last occurrence
    validated: dict[str, Any] = field(default_factory=dict)


def _read_json_sections(text: str, path: str) -> list[_Section]:
    lines = _split_lines(text)
    out, kinds = _to_json(lines)
    js_text = "[" + "\n".join(out) + "]"
    try:
        loaded = json.loads(_SPARE_COMMA.sub(r"\1", js_text))
    except json.JSONDecodeError as exc:
        raise _syntax_error(path, lines, kinds, js_text, exc) from None
    except RecursionError:
        raise ConfigError(path, 1, "sections nested too deep") from None
    heads = [i + 1 for i, k in enumerate(kinds) if k.kind == "section"]
    sections: list[_Section] = []
    for index, item in enumerate(loaded):
        line = heads[index] if index < len(heads) else (heads[-1] if heads else 1)
        if not isinstance(item, list) or len(item) < 2 or not isinstance(item[1], dict) or (
                item[0] and not isinstance(item[0], str)):
            raise ConfigError(path, line, "expected a section ('NAME {' ... '}'), got a JSON value in its place")
        sections.append(_Section(_camelcase(item[0]), line, {}, {}))
        for key, value in item[1].items():
            sections[-1].attrs[_camelcase(key)] = value
    _attribute_lines(sections, kinds, lines)
    return sections


def _attribute_lines(sections: list[_Section], kinds: list[_Line], lines: list[str]) -> None:
    """Where each attribute was written (its last line): for the messages."""
    index, depth = -1, 0
    for number, kind in enumerate(kinds, start=1):
        if kind.kind == "section" and depth == 0:
            index += 1
            depth = 1
        elif kind.kind == "map":
            if depth == 1 and 0 <= index < len(sections):
                sections[index].lines[_camelcase(kind.key)] = number
            depth += 1
        elif kind.kind == "end":
            depth = max(0, depth - 1)
        elif kind.kind == "attr" and depth == 1 and 0 <= index < len(sections):
            sections[index].lines[_camelcase(kind.key)] = number


def _close_match(word: str, options: list[str]) -> str:
    near = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean '{near[0]}'?" if near else ""


def _validate_schema(section: _Section, path: str) -> None:
    """qdrouterd's EntityType.validate for one section: older spellings moved to the current name (both given
    is an error), required attributes present, every attribute known and of its type."""
    schema = _QD_SCHEMA[section.name]
    attrs = dict(section.attrs)
    if "type" in attrs:
        raise ConfigError(path, section.lines.get("type", section.line),
                          f"{section.name}: attribute 'type' cannot be set (qdrouterd sets it from the section)")
    for name, (_, old) in schema.items():
        if attrs.get(name) is None:
            if old is not None and attrs.get(old) is not None:
                attrs[name] = attrs.pop(old)
                section.lines.setdefault(name, section.lines.get(old, section.line))
            elif name in _REQUIRED.get(section.name, ()):
                raise ConfigError(path, section.line, f"{section.name}: attribute '{name}' is required")
            else:
                attrs.pop(name, None)
        elif old is not None and attrs.get(old) is not None:
            raise ConfigError(path, section.lines.get(old, section.line),
                              f"{section.name}: '{old}' and '{name}' are the same attribute; give one")
    known = {name for name in schema} | {old for _, old in schema.values() if old}
    for key, value in attrs.items():
        line = section.lines.get(key, section.line)
        if key not in schema:
            names = sorted(schema)
            raise ConfigError(path, line, f"{section.name}: unknown attribute '{key}' (expected one of: "
                                          f"{', '.join(names)})" + _close_match(key, sorted(known)))
        try:
            section.validated[key] = _qd_value(schema[key][0], value)
        except ValueError as exc:
            raise ConfigError(path, line, f"{section.name}: '{key}' must be {exc}, got {_shown(value)}") from None


def _shown(value: Any) -> str:
    return f"a map {json.dumps(value)[:60]}" if isinstance(value, dict) else repr(str(value))


def _check_entities(sections: list[_Section], path: str) -> None:
    """qdrouterd's checks over the whole file, in its order: Schema.validate_add (one router; `name` and
    `identity` unique across all sections) and QdSchema.validate_add (router id length; the role of the last
    listener or connector so far against the router's mode), then the agent's (a router id without control or
    space characters; each entity's identity and name, with qdrouterd's defaults, unique)."""
    seen: list[_Section] = []
    router_mode = router_id = last_role = last_listener_role = None
    for section in sections:
        values = section.validated
        for unique in ("name", "identity"):
            if unique in values and any(other.validated.get(unique) == values[unique] for other in seen):
                raise ConfigError(path, section.lines.get(unique, section.line),
                                  f"{section.name}: {unique} '{values[unique]}' is already used by another section")
        if section.name == "router" and any(other.name == "router" for other in seen):
            first = next(other for other in seen if other.name == "router")
            raise ConfigError(path, section.line, f"duplicate section 'router' (first at line {first.line})")
        seen.append(section)
        if section.name == "router":
            router_mode = values.get("mode", "standalone")
            router_id = values.get("id", router_id)
        if section.name in ("listener", "connector"):
            last_role = values.get("role", "normal")
            if section.name == "listener":
                last_listener_role = last_role
        if router_id is not None and len(router_id) > _ROUTER_ID_MAX:
            router = next(other for other in seen if other.name == "router")
            raise ConfigError(path, router.lines.get("id", router.line), f"router: 'id' is longer than "
                              f"{_ROUTER_ID_MAX} characters")
        if router_mode and last_role:
            if router_mode == "standalone" and last_role in ("inter-router", "edge"):
                raise ConfigError(path, _role_line(seen), f"{_last_connection(seen).name}: role '{last_role}' "
                                  "needs router mode interior (a standalone router connects to no other router)")
            if router_mode != "interior" and last_role == "inter-router":
                raise ConfigError(path, _role_line(seen), f"{_last_connection(seen).name}: role 'inter-router' "
                                  f"needs router mode interior (mode is {router_mode})")
        if router_mode == "edge" and last_listener_role == "edge":
            listener = next(s for s in reversed(seen) if s.name == "listener")
            raise ConfigError(path, listener.lines.get("role", listener.line), "listener: role 'edge' needs "
                              "router mode interior (edge routers connect to interior routers only)")
    _check_agent(sections, path)


def _last_connection(seen: list[_Section]) -> _Section:
    return next(s for s in reversed(seen) if s.name in ("listener", "connector"))


def _role_line(seen: list[_Section]) -> int:
    last = _last_connection(seen)
    return last.lines.get("role", last.line)


def _check_agent(sections: list[_Section], path: str) -> None:
    """What qdrouterd's management agent checks as it creates each entity (agent.py of 1.19)."""
    router = next(s for s in sections if s.name == "router")
    # The agent creates the router first and then each listener and connector, and QdSchema.validate_add checks
    # the one just added against the router's mode: every one is checked, wherever the router section stands in
    # the file (a file with the router after an inter-router listener passes validate_all, then this refuses it:
    # found by the configuration differential, make run of 2026-12-07, seed 538119116).
    mode = router.validated.get("mode", "standalone")
    for section in sections:
        if section.name not in ("listener", "connector"):
            continue
        role = section.validated.get("role", "normal")
        where = section.lines.get("role", section.line)
        if mode == "standalone" and role in ("inter-router", "edge"):
            raise ConfigError(path, where, f"{section.name}: role '{role}' needs router mode interior (a standalone "
                              "router connects to no other router)")
        if mode != "interior" and role == "inter-router":
            raise ConfigError(path, where, f"{section.name}: role 'inter-router' needs router mode interior (mode "
                              f"is {mode})")
        if mode == "edge" and role == "edge" and section.name == "listener":
            raise ConfigError(path, where, "listener: role 'edge' needs router mode interior (edge routers connect "
                              "to interior routers only)")
    router_id = router.validated.get("id")
    for ch in router_id or "":
        if unicodedata.category(ch)[0] in "CZ":
            raise ConfigError(path, router.lines.get("id", router.line),
                              f"router: 'id' must not hold spaces or control characters, got {_shown(router_id)}")
    # identity TYPE/IDENTIFIER (listener and connector: host:port[:name], defaults filled in; sslProfile: its
    # name; log: its module; router: its id; others: a counter), and name defaulting to the identity
    taken: dict[str, _Section] = {}
    counters: Counter[str] = Counter()
    for section in _agent_order(sections):
        values = section.validated
        identity = values.get("identity") or f"{section.name}/{_identifier(section, counters)}"
        name = values.get("name") or identity
        for key, value in (("identity", identity), ("name", name)):
            other = taken.get(f"{key}:{value}")
            if other is not None and other is not section:
                raise ConfigError(path, section.line, f"{section.name}: {key} '{value}' is the same as that of the "
                                  f"{other.name} of line {other.line} (qdrouterd names an unnamed "
                                  f"{section.name} {identity})")
            taken[f"{key}:{value}"] = section


def _agent_order(sections: list[_Section]) -> list[_Section]:
    """configure_dispatch's order: logs, router, the other kinds, then connectors and listeners."""
    first = [s for s in sections if s.name == "log"] + [s for s in sections if s.name == "router"]
    last = [s for s in sections if s.name == "connector"] + [s for s in sections if s.name == "listener"]
    return first + [s for s in sections if s not in first and s not in last] + last


def _identifier(section: _Section, counters: Counter[str]) -> str:
    values = section.validated
    if section.name in ("listener", "connector"):
        host = values.get("host", "" if section.name == "listener" else "127.0.0.1")
        port = values.get("port", "amqp")
        return f"{host}:{port}:{values['name']}" if values.get("name") else f"{host}:{port}"
    if section.name == "sslProfile":
        return str(values.get("name"))
    if section.name == "log":
        return str(values.get("module"))
    if section.name == "router":
        return str(values.get("id"))
    counters[section.name] += 1
    return str(counters[section.name])


def _build(section: _Section, path: str) -> Any:
    fields = _FIELDS[section.name]
    kwargs: dict[str, Any] = {}
    for key, value in section.validated.items():
        attr = fields.get(key)
        if attr is None:
            continue
        try:
            checked = attr.check(value)
            if attr.field is not None:
                kwargs[attr.field] = checked
        except ValueError as exc:
            raise ConfigError(path, section.lines.get(key, section.line),
                              f"{section.name}: '{key}' must be {exc}, got {_shown(value)}") from None
    obj = _SECTION_TYPES[section.name](line=section.line, **kwargs)
    _VALIDATORS.get(section.name, _no_check)(obj, section, path)
    return obj


def _no_check(obj: Any, section: _Section, path: str) -> None:
    pass


def _line_of(section: _Section, key: str) -> int:
    return section.lines.get(key, section.line)


def _check_match_target(obj: AddressSection | LinkRoute, section: _Section, path: str) -> None:
    """Exactly one of prefix/pattern, and it must be usable for matching."""
    name = section.name
    if obj.prefix is None and obj.pattern is None:
        raise ConfigError(path, section.line, f"{name}: one of 'prefix' or 'pattern' is required")
    if obj.prefix is not None and obj.pattern is not None:
        raise ConfigError(path, _line_of(section, "pattern"),
                          f"{name}: 'prefix' and 'pattern' cannot both be given")
    key = "prefix" if obj.prefix is not None else "pattern"
    value = str(obj.prefix if obj.prefix is not None else obj.pattern)
    line = _line_of(section, key)
    if not value.strip("./"):
        raise ConfigError(path, line, f"{name}: '{key}' must not be empty")
    if any(ch.isspace() for ch in value):
        raise ConfigError(path, line, f"{name}: {key} '{value}' must not contain whitespace")
    if key == "prefix" and ("*" in value or "#" in value):
        raise ConfigError(path, line, f"{name}: prefix '{value}' must not contain '*' or '#' "
                                      f"(they are wildcards; use 'pattern:' instead)")
    try:
        validate_pattern(obj.match_pattern)
    except ValueError as exc:
        raise ConfigError(path, line, f"{name}: {exc}") from None


def _check_address(obj: AddressSection, section: _Section, path: str) -> None:
    _check_match_target(obj, section, path)


def _check_link_route(obj: LinkRoute, section: _Section, path: str) -> None:
    _check_match_target(obj, section, path)
    if obj.connection is not None and obj.container_id is not None:
        raise ConfigError(path, _line_of(section, "containerId"),
                          "linkRoute: 'connection' and 'containerId' cannot both be given")


def _check_auto_link(obj: AutoLink, section: _Section, path: str) -> None:
    if not obj.address:
        raise ConfigError(path, _line_of(section, "address"), "autoLink: 'address' must not be empty")
    if (obj.connection is None) == (obj.container_id is None):
        raise ConfigError(path, section.line,
                          "autoLink: exactly one of 'connection' or 'containerId' is required")


_VALIDATORS: dict[str, Callable[[Any, _Section, str], None]] = {
    "address": _check_address,
    "linkRoute": _check_link_route,
    "autoLink": _check_auto_link,
}


def parse_config(text: str, path: str = "<string>") -> RouterConfig:
    """Parse qdrouterd.conf text; raises ConfigError at the first mistake."""
    sections = _read_json_sections(text, path)
    for section in sections:
        if section.name in _SECTION_TYPES:
            continue
        if section.name in _OTHER_QD_SECTIONS:
            raise ConfigError(path, section.line, f"section '{section.name}' is not supported yet by the reference "
                                                  "router")
        known = sorted(_SECTION_TYPES)
        raise ConfigError(path, section.line, f"unknown section '{section.name}' (expected one of: "
                          f"{', '.join(known)})" + _close_match(section.name, known + sorted(_OTHER_QD_SECTIONS)))
    if not any(s.name == "router" for s in sections):  # qdrouterd adds the singleton with its defaults, last
        sections.append(_Section("router", 0, {}, {}))
    for section in sections:
        _validate_schema(section, path)
    _check_entities(sections, path)
    cfg = RouterConfig(path=path)
    for section in sections:
        obj = _build(section, path)
        if isinstance(obj, RouterSection):
            cfg.router = obj
        elif isinstance(obj, Listener):
            cfg.listeners.append(obj)
        elif isinstance(obj, Connector):
            cfg.connectors.append(obj)
        elif isinstance(obj, AddressSection):
            cfg.addresses.append(obj)
        elif isinstance(obj, LinkRoute):
            cfg.link_routes.append(obj)
        elif isinstance(obj, AutoLink):
            cfg.auto_links.append(obj)
        elif isinstance(obj, SslProfile):
            cfg.ssl_profiles.append(obj)
        else:
            cfg.logs.append(obj)
    _check_across_sections(cfg)
    return cfg


def _check_across_sections(cfg: RouterConfig) -> None:
    path = cfg.path
    patterns: dict[str, AddressSection] = {}
    for addr in cfg.addresses:
        key = normalize_pattern(addr.match_pattern)
        if key in patterns:
            first = patterns[key]
            raise ConfigError(
                path, addr.line,
                f"address: {_describe(addr)} duplicates {_describe(first)} of line {first.line} "
                f"(both match the pattern '{key}')",
            )
        patterns[key] = addr
    routes: dict[tuple[str, str], LinkRoute] = {}
    for route in cfg.link_routes:  # each direction's routes are one table, keyed by pattern (linkroutes.py)
        key = (route.direction, normalize_pattern(route.match_pattern))
        if key in routes:
            first = routes[key]
            raise ConfigError(path, route.line, f"linkRoute: {_describe(route)} direction {route.direction} "
                              f"duplicates {_describe(first)} of line {first.line} (both match the pattern "
                              f"'{key[1]}')")
        routes[key] = route
    names: dict[str, Listener | Connector] = {
        conn.name: conn for conn in [*cfg.listeners, *cfg.connectors] if conn.name is not None}
    # A linkRoute may name a connection this router does not have: 003 §12.2.3 recommends giving every
    # router of the network the same link-route configuration, though only one holds the broker connection.
    for ref in sorted(cfg.auto_links, key=lambda r: r.line):
        if ref.connection is not None and ref.connection not in names:
            raise ConfigError(path, ref.line, f"{_kind(ref)}: connection '{ref.connection}' does not name "
                                              f"any listener or connector")
    _check_security_references(cfg)


def _check_security_references(cfg: RouterConfig) -> None:
    """Profiles named once and every sslProfile reference resolved; TLS-only settings only with a profile."""
    path = cfg.path
    profiles: dict[str, SslProfile] = {}
    for profile in cfg.ssl_profiles:
        if not profile.name:
            raise ConfigError(path, profile.line, "sslProfile: 'name' is required")
        if profile.name in profiles:
            raise ConfigError(path, profile.line, f"sslProfile: name '{profile.name}' already used by the "
                                                  f"sslProfile of line {profiles[profile.name].line}")
        profiles[profile.name] = profile
    for conn in sorted([*cfg.listeners, *cfg.connectors], key=lambda c: c.line):
        kind = _kind(conn)
        if conn.ssl_profile is not None and conn.ssl_profile not in profiles:
            have = ", ".join(sorted(profiles)) or "none defined"
            raise ConfigError(path, conn.line, f"{kind}: sslProfile '{conn.ssl_profile}' does not name an "
                                               f"sslProfile section (have: {have})")
        if "EXTERNAL" in conn.sasl_mechanisms and conn.ssl_profile is None:
            raise ConfigError(path, conn.line, f"{kind}: saslMechanisms EXTERNAL needs an sslProfile (the "
                                               f"identity comes from the TLS certificate)")
    for li in cfg.listeners:
        if (li.require_ssl or li.require_encryption) and li.ssl_profile is None:
            raise ConfigError(path, li.line, "listener: requireSsl/requireEncryption needs an sslProfile")
    for co in cfg.connectors:
        if "PLAIN" in co.sasl_mechanisms and co.sasl_username is None:
            raise ConfigError(path, co.line, "connector: saslMechanisms PLAIN needs saslUsername and saslPassword")


def _describe(addr: AddressSection | LinkRoute) -> str:
    return f"prefix '{addr.prefix}'" if addr.prefix is not None else f"pattern '{addr.pattern}'"


def _kind(obj: object) -> str:
    kinds = {Listener: "listener", Connector: "connector", LinkRoute: "linkRoute", AutoLink: "autoLink"}
    return kinds[type(obj)]


def load_config(path: str | os.PathLike[str]) -> RouterConfig:
    """Read and parse a config file; an unreadable file is a ConfigError at line 0."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(name, 0, f"cannot read: {reason}") from None
    return parse_config(text, name)


# ---------------------------------------------------------------------------------------
# What the reference router can run
#
# Each rule looks at one kind of section and yields (feature, description) for every construct
# it uses; check_supported fails on the first (by line) feature outside the supported set.
# Supporting something new is a matter of adding its feature name to SUPPORTED_FEATURES.

SUPPORTED_FEATURES: frozenset[str] = frozenset({
    "router.standalone",
    "router.interior",
    "router.edge",
    "listener.edge",
    "connector.edge",
    "listener.normal",
    "listener.inter-router",
    "connector.inter-router",
    "connector.route-container",
    "listener.route-container",
    "link-route",
    "auto-link",
    "auto-link.fallback",
    "address.waypoint",
    "address.fallback",
    "address",
    "address.distribution.balanced",
    "address.distribution.closest",
    "address.distribution.multicast",
    "address.priority",
    "log",
    "listener.authenticate-peer",
    "listener.tls",
    "listener.http",
    "connector.tls",
})

_ANONYMOUS_ONLY = frozenset({"ANONYMOUS"})

_Uses = Iterator[tuple[str, str]]


def _router_uses(r: RouterSection) -> _Uses:
    yield f"router.{r.mode}", f"router: mode '{r.mode}'"
    if r.default_distribution != "balanced":
        yield "router.default-distribution", f"router: defaultDistribution '{r.default_distribution}'"


def _listener_uses(li: Listener) -> _Uses:
    yield f"listener.{li.role}", f"listener: role '{li.role}'"
    if li.authenticate_peer and (not li.sasl_mechanisms or set(li.sasl_mechanisms) - _ANONYMOUS_ONLY):
        mechs = " ".join(li.sasl_mechanisms) or "(any)"
        yield "listener.authenticate-peer", f"listener: authenticatePeer with saslMechanisms {mechs}"
    if li.ssl_profile is not None or li.require_ssl or li.require_encryption:
        yield "listener.tls", "listener: TLS (sslProfile/requireSsl/requireEncryption)"
    if li.http:
        yield "listener.http", "listener: http (AMQP over WebSocket)"
    if li.multi_tenant:
        yield "listener.multi-tenant", "listener: multiTenant"
    if li.sasl_plugin is not None:
        yield "listener.sasl-plugin", "listener: saslPlugin"


def _connector_uses(c: Connector) -> _Uses:
    yield f"connector.{c.role}", f"connector: role '{c.role}'"
    if c.ssl_profile is not None:
        yield "connector.tls", "connector: sslProfile"


def _address_uses(a: AddressSection) -> _Uses:
    yield "address", "address"
    yield f"address.distribution.{a.distribution}", f"address: distribution '{a.distribution}'"
    if a.priority is not None:
        yield "address.priority", "address: priority"
    if a.waypoint:
        yield "address.waypoint", "address: waypoint"
    if a.enable_fallback:
        yield "address.fallback", "address: enableFallback"
    if a.ingress_phase is not None or a.egress_phase is not None:
        yield "address.phase", "address: ingressPhase/egressPhase"


def _link_route_uses(lr: LinkRoute) -> _Uses:
    yield "link-route", "linkRoute"


def _auto_link_uses(al: AutoLink) -> _Uses:
    yield "auto-link", "autoLink"
    if al.fallback:
        yield "auto-link.fallback", "autoLink: fallback"


def _log_uses(lg: LogSection) -> _Uses:
    yield "log", "log"


_FEATURE_RULES: tuple[tuple[Callable[[RouterConfig], list[Any]], Callable[[Any], _Uses]], ...] = (
    (lambda cfg: [cfg.router], _router_uses),
    (lambda cfg: cfg.listeners, _listener_uses),
    (lambda cfg: cfg.connectors, _connector_uses),
    (lambda cfg: cfg.addresses, _address_uses),
    (lambda cfg: cfg.link_routes, _link_route_uses),
    (lambda cfg: cfg.auto_links, _auto_link_uses),
    (lambda cfg: cfg.logs, _log_uses),
)

KNOWN_FEATURES: frozenset[str] = frozenset(
    {f"router.{m}" for m in ("standalone", "interior", "edge")}
    | {"router.default-distribution"}
    | {f"listener.{r}" for r in _ROLES}
    | {f"listener.{x}" for x in ("authenticate-peer", "tls", "http", "multi-tenant", "sasl-plugin")}
    | {f"connector.{r}" for r in _ROLES}
    | {"connector.tls"}
    | {"address", "address.priority", "address.waypoint", "address.fallback", "address.phase"}
    | {f"address.distribution.{d}" for d in _DISTRIBUTIONS}
    | {"link-route", "auto-link", "auto-link.fallback", "log"}
)


def features_used(cfg: RouterConfig) -> list[tuple[str, int, str]]:
    """(feature, line, description) for every construct in the config, in line order."""
    uses = [
        (feature, section.line, what)
        for sections, rule in _FEATURE_RULES
        for section in sections(cfg)
        for feature, what in rule(section)
    ]
    return sorted(uses, key=lambda use: use[1])


def check_supported(cfg: RouterConfig, supported: frozenset[str] = SUPPORTED_FEATURES) -> None:
    """Raise ConfigError at the first construct the reference router cannot run yet."""
    for feature, line, what in features_used(cfg):
        if feature not in supported:
            raise ConfigError(
                cfg.path, line,
                f"{what} (feature '{feature}') is not supported yet by the reference router",
            )
