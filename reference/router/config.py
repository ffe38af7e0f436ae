"""Parser for qdrouterd.conf files (the qdrouterd 1.19 syntax) for the reference router.

File shape
    A file is a list of sections ``name { ... }``. The ``{`` may follow the name on the same
    line or on a later one. Inside a section each attribute is ``key: value``; a key is a
    bare word ending in ``:`` (``prefix:``). A value is every following token on the same
    line up to the next key, ``}`` or comment, joined by single spaces, so
    ``saslMechanisms: ANONYMOUS PLAIN`` works and several attributes may share one line:
    ``address { prefix: a distribution: multicast }``. A value must start on its key's line.
    ``{`` and ``}`` outside quotes always stand alone, even when glued to a word.
    Values may be quoted with ``"`` or ``'`` to keep spaces, ``#``, braces or a trailing
    ``:`` literal; there are no escapes inside quotes.

Comment rule
    Outside quotes, a token that *starts* with ``#`` begins a comment running to the end of
    the line, unless that token comes straight after a key on the same line: then it is the
    first token of the value. A ``#`` inside a token is never a comment.
    So ``pattern: #``, ``pattern: #/x`` and ``pattern: news/#`` keep their wildcards,
    ``pattern: # # anything`` is the pattern ``#`` followed by a comment, ``port: 5672 # x``
    and ``listener {  # x`` end in comments, and a line whose first token starts with ``#``
    is a comment. (qdrouterd itself special-cases the ``pattern`` key; this rule is lexical
    and applies to every key, and a stray ``key: # text`` becomes a value that later fails
    validation instead of silently vanishing.)

Attribute names are qdrouterd's camelCase spellings, case-sensitive. Deprecated spellings
that qdrouterd still accepts (``dir``, ``addr``, ``containerID``, ``output`` ...) are
aliases. Attributes that qdrouterd knows but that change nothing in the reference router
are accepted and dropped; they are listed in the tables below (``_Attr`` with no field).
Anything else is an error naming the file, line, section and what was expected.

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
import os
import re
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
# Value converters: each returns the converted value or raises ValueError(<what was expected>)


def _string(raw: str) -> str:
    return raw


def _boolean(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("yes", "true"):
        return True
    if lowered in ("no", "false"):
        return False
    raise ValueError("yes, no, true or false")


def _integer(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    span = f" {lo}..{hi}" if lo is not None and hi is not None else (f" >= {lo}" if lo is not None else "")

    def convert(raw: str) -> int:
        if not re.fullmatch(r"-?[0-9]+", raw):
            raise ValueError(f"an integer{span}")
        value = int(raw)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ValueError(f"an integer{span}")
        return value

    return convert


def _port(raw: str) -> int:
    named = {"amqp": 5672, "amqps": 5671}
    if raw in named:
        return named[raw]
    if re.fullmatch(r"[0-9]+", raw) and int(raw) <= 65535:
        return int(raw)
    raise ValueError("a port number 0..65535, 'amqp' or 'amqps'")


def _choice(*allowed: str) -> Callable[[str], str]:
    def convert(raw: str) -> str:
        if raw not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return raw

    return convert


def _priority(raw: str) -> int | None:
    if not re.fullmatch(r"-?[0-9]+", raw) or not -1 <= int(raw) <= 9:
        raise ValueError("an integer 0..9 (or -1 for unset)")
    return None if int(raw) == -1 else int(raw)


# The SASL mechanisms the reference offers (reference/security/sasl.py); qdrouterd takes whatever its Cyrus has.
SASL_MECHANISMS = ("ANONYMOUS", "PLAIN", "EXTERNAL")


def _mechanisms(raw: str) -> tuple[str, ...]:
    names = tuple(raw.replace(",", " ").split())
    unknown = [n for n in names if n not in SASL_MECHANISMS]
    if unknown:
        raise ValueError(f"a space-separated list of {', '.join(SASL_MECHANISMS)} (the mechanisms the reference "
                         f"router offers; {' '.join(unknown)} is not one)")
    return names


_TLS_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")


def _protocols(raw: str) -> str:
    if not raw.split() or any(word not in _TLS_PROTOCOLS for word in raw.split()):
        raise ValueError(f"a space-separated list of {', '.join(_TLS_PROTOCOLS)}")
    return raw


_LOG_LEVELS = ("trace", "debug", "info", "notice", "warning", "error", "critical")


def _log_enable(raw: str) -> str:
    if raw in ("none", "default"):
        return raw
    for item in raw.split(","):
        if item.strip().rstrip("+") not in _LOG_LEVELS:
            raise ValueError(
                "'none', 'default' or a comma-separated list of " + ", ".join(_LOG_LEVELS)
                + " (each optionally followed by '+')"
            )
    return raw


# ---------------------------------------------------------------------------------------
# Section schemas


@dataclass(frozen=True)
class _Attr:
    field: str | None  # dataclass field to set; None: accepted, validated, then dropped
    convert: Callable[[str], Any] = _string


_ROLES = ("normal", "inter-router", "route-container", "edge")
_DISTRIBUTIONS = ("balanced", "closest", "multicast", "unavailable")
_LOG_MODULES = (
    "ROUTER", "ROUTER_CORE", "ROUTER_HELLO", "ROUTER_LS", "ROUTER_MA", "MESSAGE", "SERVER",
    "AGENT", "AUTHSERVICE", "CONTAINER", "ERROR", "POLICY", "HTTP", "CONN_MGR", "PYTHON",
    "PROTOCOL", "TCP_ADAPTOR", "HTTP_ADAPTOR", "DEFAULT",
)

# Listener and connector attributes that tune qdrouterd internals the reference does not have.
_CONNECTION_IGNORED = {
    "maxSessions": _Attr(None, _integer(0)),
    "maxSessionFrames": _Attr(None, _integer(0)),
    "stripAnnotations": _Attr(None, _choice("in", "out", "both", "no")),
    "socketAddressFamily": _Attr(None, _choice("IPv4", "IPv6")),
    "messageLoggingComponents": _Attr(None),
    "policyVhost": _Attr(None),
}

_SCHEMAS: dict[str, dict[str, _Attr]] = {
    "router": {
        "id": _Attr("id"),
        "mode": _Attr("mode", _choice("standalone", "interior", "edge")),
        "defaultDistribution": _Attr("default_distribution", _choice(*_DISTRIBUTIONS)),
        # Routing-protocol timers, threading, SASL database location, dumps, formatting.
        "name": _Attr(None),
        "helloIntervalSeconds": _Attr(None, _integer(1)),
        "helloMaxAgeSeconds": _Attr(None, _integer(1)),
        "raIntervalSeconds": _Attr(None, _integer(1)),
        "raIntervalFluxSeconds": _Attr(None, _integer(1)),
        "remoteLsMaxAgeSeconds": _Attr(None, _integer(1)),
        "workerThreads": _Attr(None, _integer(1)),
        "debugDumpFile": _Attr(None),
        "saslConfigDir": _Attr("sasl_config_dir"),
        "saslConfigName": _Attr("sasl_config_name"),
        "allowResumableLinkRoute": _Attr(None, _boolean),
        "timestampsInUTC": _Attr(None, _boolean),
        "timestampFormat": _Attr(None),
        "metadata": _Attr(None),
        "dataConnectionCount": _Attr(None),
        "mobileAddrMaxAge": _Attr(None, _integer(0)),
    },
    "listener": {
        "name": _Attr("name"),
        "host": _Attr("host"),
        "port": _Attr("port", _port),
        "role": _Attr("role", _choice(*_ROLES)),
        "cost": _Attr("cost", _integer(1)),
        "saslMechanisms": _Attr("sasl_mechanisms", _mechanisms),
        "authenticatePeer": _Attr("authenticate_peer", _boolean),
        "linkCapacity": _Attr("link_capacity", _integer(1)),
        "idleTimeoutSeconds": _Attr("idle_timeout_seconds", _integer(0)),
        "maxFrameSize": _Attr("max_frame_size", _integer(512)),
        "sslProfile": _Attr("ssl_profile"),
        "requireSsl": _Attr("require_ssl", _boolean),
        "requireEncryption": _Attr("require_encryption", _boolean),
        "http": _Attr("http", _boolean),
        "multiTenant": _Attr("multi_tenant", _boolean),
        "saslPlugin": _Attr("sasl_plugin"),
        **_CONNECTION_IGNORED,
        "initialHandshakeTimeoutSeconds": _Attr(None, _integer(0)),
        "failoverUrls": _Attr(None),
        "httpRootDir": _Attr(None),
        "websockets": _Attr(None, _boolean),
        "healthz": _Attr(None, _boolean),
        "metrics": _Attr(None, _boolean),
        "trustedCerts": _Attr(None),
        "allowNoSasl": _Attr(None, _boolean),
        "requirePeerAuth": _Attr(None, _boolean),
        "allowUnsecured": _Attr(None, _boolean),
    },
    "connector": {
        "name": _Attr("name"),
        "host": _Attr("host"),
        "port": _Attr("port", _port),
        "role": _Attr("role", _choice(*_ROLES)),
        "cost": _Attr("cost", _integer(1)),
        "saslMechanisms": _Attr("sasl_mechanisms", _mechanisms),
        "saslUsername": _Attr("sasl_username"),
        "saslPassword": _Attr("sasl_password"),
        "linkCapacity": _Attr("link_capacity", _integer(1)),
        "idleTimeoutSeconds": _Attr("idle_timeout_seconds", _integer(0)),
        "maxFrameSize": _Attr("max_frame_size", _integer(512)),
        "sslProfile": _Attr("ssl_profile"),
        "verifyHostname": _Attr("verify_hostname", _boolean),
        **_CONNECTION_IGNORED,
        "allowRedirect": _Attr(None, _boolean),
    },
    "sslProfile": {
        "name": _Attr("name"),
        "certFile": _Attr("cert_file"),
        "privateKeyFile": _Attr("private_key_file"),
        "password": _Attr("password"),
        "passwordFile": _Attr("password_file"),  # deprecated in qdrouterd for `password: file:PATH`
        "caCertFile": _Attr("ca_cert_file"),
        "ciphers": _Attr("ciphers"),
        "protocols": _Attr("protocols", _protocols),
        # Certificate-to-user mappings: the reference takes the subject CN (reference/security/sasl.py).
        "uidFormat": _Attr(None),
        "uidNameMappingFile": _Attr(None),
    },
    "address": {
        "prefix": _Attr("prefix"),
        "pattern": _Attr("pattern"),
        "distribution": _Attr("distribution", _choice(*_DISTRIBUTIONS)),
        "priority": _Attr("priority", _priority),
        "waypoint": _Attr("waypoint", _boolean),
        "enableFallback": _Attr("enable_fallback", _boolean),
        "ingressPhase": _Attr("ingress_phase", _integer(0, 9)),
        "egressPhase": _Attr("egress_phase", _integer(0, 9)),
        "name": _Attr("name"),
    },
    "linkRoute": {
        "prefix": _Attr("prefix"),
        "pattern": _Attr("pattern"),
        "direction": _Attr("direction", _choice("in", "out")),
        "connection": _Attr("connection"),
        "containerId": _Attr("container_id"),
        "addExternalPrefix": _Attr("add_external_prefix"),
        "delExternalPrefix": _Attr("del_external_prefix"),
        "name": _Attr("name"),
        "distribution": _Attr(None, _choice("linkBalanced")),  # the only value qdrouterd has
    },
    "autoLink": {
        "address": _Attr("address"),
        "direction": _Attr("direction", _choice("in", "out")),
        "connection": _Attr("connection"),
        "containerId": _Attr("container_id"),
        "externalAddress": _Attr("external_address"),
        "phase": _Attr("phase", _integer(0, 9)),
        "fallback": _Attr("fallback", _boolean),
        "name": _Attr("name"),
    },
    "log": {
        "module": _Attr("module", _choice(*_LOG_MODULES)),
        "enable": _Attr("enable", _log_enable),
        "includeSource": _Attr("include_source", _boolean),
        "includeTimestamp": _Attr("include_timestamp", _boolean),
        "outputFile": _Attr("output"),
        "name": _Attr(None),
    },
}

# Older or alternative spellings qdrouterd still accepts -> the canonical key above.
_ALIASES: dict[str, dict[str, str]] = {
    "router": {
        "routerId": "id",
        "helloInterval": "helloIntervalSeconds",
        "helloMaxAge": "helloMaxAgeSeconds",
        "raInterval": "raIntervalSeconds",
        "raIntervalFlux": "raIntervalFluxSeconds",
        "remoteLsMaxAge": "remoteLsMaxAgeSeconds",
        "debugDump": "debugDumpFile",
        "saslConfigPath": "saslConfigDir",
    },
    "listener": {
        "addr": "host",
        "protocolFamily": "socketAddressFamily",
        "logMessage": "messageLoggingComponents",
        "httpRoot": "httpRootDir",
        "failoverList": "failoverUrls",
    },
    "connector": {
        "addr": "host",
        "protocolFamily": "socketAddressFamily",
        "logMessage": "messageLoggingComponents",
        "verifyHostName": "verifyHostname",
    },
    "sslProfile": {"certDb": "caCertFile", "keyFile": "privateKeyFile"},
    "address": {},
    "linkRoute": {"dir": "direction", "containerID": "containerId"},
    "autoLink": {"addr": "address", "dir": "direction", "containerID": "containerId",
                 "externalAddr": "externalAddress"},
    "log": {"output": "outputFile", "source": "includeSource", "timestamp": "includeTimestamp"},
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

# Real qdrouterd sections the reference router does not parse yet.
_NOT_YET_SECTIONS = frozenset({
    "policy", "vhost", "authServicePlugin", "exchange", "binding", "console",
    "tcpListener", "tcpConnector", "httpListener", "httpConnector", "site", "management",
})


# ---------------------------------------------------------------------------------------
# Tokenizer


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "quoted", "{" or "}"
    text: str
    line: int

    @property
    def is_key(self) -> bool:
        return self.kind == "word" and _KEY.fullmatch(self.text) is not None


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*:")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _tokenize(text: str, path: str) -> list[_Token]:
    tokens: list[_Token] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        on_line: list[_Token] = []
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if ch.isspace():
                i += 1
            elif ch in "{}":
                on_line.append(_Token(ch, ch, lineno))
                i += 1
            elif ch in "\"'":
                close = line.find(ch, i + 1)
                if close < 0:
                    raise ConfigError(path, lineno, f"unterminated {ch} quote")
                if close + 1 < n and not (line[close + 1].isspace() or line[close + 1] in "{}"):
                    raise ConfigError(path, lineno, f"unexpected text after closing {ch} quote")
                on_line.append(_Token("quoted", line[i + 1:close], lineno))
                i = close + 1
            elif ch == "#" and not (on_line and on_line[-1].is_key):
                break  # comment (see the module docstring for the rule)
            else:
                start = i
                while i < n and not line[i].isspace() and line[i] not in "{}":
                    i += 1
                on_line.append(_Token("word", line[start:i], lineno))
        tokens.extend(on_line)
    return tokens


# ---------------------------------------------------------------------------------------
# Parser


@dataclass
class _Section:
    name: str
    line: int
    attrs: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # key -> (written, value, line)


def _close_match(word: str, options: list[str]) -> str:
    near = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean '{near[0]}'?" if near else ""


def _read_sections(tokens: list[_Token], path: str) -> Iterator[_Section]:
    pos, count = 0, len(tokens)
    while pos < count:
        tok = tokens[pos]
        if tok.kind == "{":
            raise ConfigError(path, tok.line, "'{' without a section name before it")
        if tok.kind == "}":
            raise ConfigError(path, tok.line, "'}' without a matching '{'")
        if tok.is_key:
            raise ConfigError(path, tok.line, f"attribute '{tok.text[:-1]}' outside of any section")
        if tok.kind != "word" or not _NAME.fullmatch(tok.text):
            raise ConfigError(path, tok.line, f"expected a section name, got '{tok.text}'")
        _check_section_name(tok, path)
        if pos + 1 >= count or tokens[pos + 1].kind != "{":
            raise ConfigError(path, tok.line, f"expected '{{' after section name '{tok.text}'")
        section = _Section(tok.text, tok.line)
        pos += 2
        while True:
            if pos >= count:
                raise ConfigError(path, section.line,
                                  f"section '{section.name}' is never closed (missing '}}')")
            tok = tokens[pos]
            if tok.kind == "}":
                pos += 1
                break
            if tok.kind == "{" or (pos + 1 < count and tokens[pos + 1].kind == "{"):
                raise ConfigError(
                    path, tok.line,
                    f"{section.name}: unexpected '{{' inside the section; is the '}}' closing the "
                    f"'{section.name}' section of line {section.line} missing?",
                )
            if not tok.is_key:
                hint = " (put a space after ':')" if ":" in tok.text else ""
                raise ConfigError(path, tok.line,
                                  f"{section.name}: expected 'attribute: value', got '{tok.text}'{hint}")
            pos += 1
            values: list[str] = []
            while (pos < count and tokens[pos].line == tok.line
                   and tokens[pos].kind in ("word", "quoted") and not tokens[pos].is_key):
                values.append(tokens[pos].text)
                pos += 1
            key = tok.text[:-1]
            if not values:
                raise ConfigError(path, tok.line, f"{section.name}: attribute '{key}' has no value")
            _store(section, key, " ".join(values), tok.line, path)
        yield section


def _check_section_name(tok: _Token, path: str) -> None:
    name = tok.text
    if name in _SECTION_TYPES:
        return
    if name in _NOT_YET_SECTIONS:
        raise ConfigError(path, tok.line, f"section '{name}' is not supported yet by the reference router")
    known = sorted(_SECTION_TYPES)
    raise ConfigError(
        path, tok.line,
        f"unknown section '{name}' (expected one of: {', '.join(known)})"
        + _close_match(name, known + sorted(_NOT_YET_SECTIONS)),
    )


def _store(section: _Section, key: str, value: str, line: int, path: str) -> None:
    schema = _SCHEMAS[section.name]
    canonical = _ALIASES[section.name].get(key, key)
    if canonical not in schema:
        names = list(schema)
        raise ConfigError(
            path, line,
            f"{section.name}: unknown attribute '{key}' (expected one of: {', '.join(names)})"
            + _close_match(key, names + list(_ALIASES[section.name])),
        )
    if canonical in section.attrs:
        written, _, first = section.attrs[canonical]
        same = f"'{written}'" if written == key else f"'{written}' (same attribute as '{key}')"
        raise ConfigError(path, line, f"{section.name}: attribute {same} given twice (first at line {first})")
    section.attrs[canonical] = (key, value, line)


def _build(section: _Section, path: str) -> Any:
    schema = _SCHEMAS[section.name]
    kwargs: dict[str, Any] = {}
    for canonical, (written, raw, line) in section.attrs.items():
        attr = schema[canonical]
        try:
            value = attr.convert(raw)
        except ValueError as exc:
            raise ConfigError(path, line, f"{section.name}: '{written}' must be {exc}, got '{raw}'") from None
        if attr.field is not None:
            kwargs[attr.field] = value
    obj = _SECTION_TYPES[section.name](line=section.line, **kwargs)
    _VALIDATORS.get(section.name, _no_check)(obj, section, path)
    return obj


def _no_check(obj: Any, section: _Section, path: str) -> None:
    pass


def _line_of(section: _Section, key: str) -> int:
    return section.attrs[key][2] if key in section.attrs else section.line


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
    if not obj.direction:
        raise ConfigError(path, section.line, "linkRoute: 'direction' (in or out) is required")
    if obj.connection is not None and obj.container_id is not None:
        raise ConfigError(path, _line_of(section, "containerId"),
                          "linkRoute: 'connection' and 'containerId' cannot both be given")


def _check_auto_link(obj: AutoLink, section: _Section, path: str) -> None:
    if not obj.address:
        raise ConfigError(path, section.line, "autoLink: 'address' is required")
    if not obj.direction:
        raise ConfigError(path, section.line, "autoLink: 'direction' (in or out) is required")
    if (obj.connection is None) == (obj.container_id is None):
        raise ConfigError(path, section.line,
                          "autoLink: exactly one of 'connection' or 'containerId' is required")


def _check_log(obj: LogSection, section: _Section, path: str) -> None:
    if not obj.module:
        raise ConfigError(path, section.line, "log: 'module' is required")


_VALIDATORS: dict[str, Callable[[Any, _Section, str], None]] = {
    "address": _check_address,
    "linkRoute": _check_link_route,
    "autoLink": _check_auto_link,
    "log": _check_log,
}


def parse_config(text: str, path: str = "<string>") -> RouterConfig:
    """Parse qdrouterd.conf text; raises ConfigError at the first mistake."""
    cfg = RouterConfig(path=path)
    router_line = 0
    text = text.removeprefix("\ufeff")  # editors on some platforms start UTF-8 files with a BOM
    for section in _read_sections(_tokenize(text, path), path):
        obj = _build(section, path)
        if isinstance(obj, RouterSection):
            if router_line:
                raise ConfigError(path, section.line,
                                  f"duplicate section 'router' (first at line {router_line})")
            router_line = section.line
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
    names: dict[str, Listener | Connector] = {}
    for conn in sorted([*cfg.listeners, *cfg.connectors], key=lambda c: c.line):
        if conn.name is None:
            continue
        if conn.name in names:
            raise ConfigError(path, conn.line, f"{_kind(conn)}: name '{conn.name}' already used by the "
                                               f"{_kind(names[conn.name])} of line {names[conn.name].line}")
        names[conn.name] = conn
    # A linkRoute may name a connection this router does not have: 003 §12.2.3 recommends giving every
    # router of the network the same link-route configuration, though only one holds the broker connection.
    for ref in sorted(cfg.auto_links, key=lambda r: r.line):
        if ref.connection is not None and ref.connection not in names:
            raise ConfigError(path, ref.line, f"{_kind(ref)}: connection '{ref.connection}' does not name "
                                              f"any listener or connector")
    _check_security_references(cfg)
    modules: dict[str, int] = {}
    for log in cfg.logs:
        if log.module in modules:
            raise ConfigError(path, log.line, f"log: module '{log.module}' configured twice "
                                              f"(first at line {modules[log.module]})")
        modules[log.module] = log.line


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


def _describe(addr: AddressSection) -> str:
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
