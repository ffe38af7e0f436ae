"""Read the subset of ActiveMQ Artemis `broker.xml` the reference broker implements.

One topology renders to Artemis and to the reference broker the same way, so the reference reads Artemis's
own file format. What it does with each element:

* implemented: `name`, `persistence-enabled`, `journal-directory` (where the journal lives),
  `journal-datasync` (fsync before a durable message is accepted; default true), `security-enabled`
  (only `false`), `acceptors/acceptor` (tcp URL; `protocols` must allow AMQP), `addresses/address` with
  `anycast`/`multicast` queues (`durable`, `filter` refused), `address-settings/address-setting` with
  `dead-letter-address`, `expiry-address`, `max-delivery-attempts`, `redelivery-delay`,
  `auto-create-queues`, `auto-create-addresses`, `default-address-routing-type`,
  `default-queue-routing-type`;
* accepted and meaningless here (documented, no effect): journal tuning, paging/bindings/large-message
  directories, memory/disk limits, thread pools, critical analyzer, JMX/management notifications, and the
  address-setting knobs that only tune paging, auto-deletion and message counters (see `_IGNORED*`);
* refused with an error naming the element: anything else that would change behaviour (clustering,
  broker connections, diverts, bridges, HA, security settings, connectors, ...).

Errors are `ConfigError` whose text is one line: `FILE:LINE: what was expected`.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from xml.parsers import expat
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

ANYCAST, MULTICAST = "anycast", "multicast"


class ConfigError(Exception):
    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


@dataclass(frozen=True)
class Acceptor:
    name: str
    host: str
    port: int
    line: int


@dataclass(frozen=True)
class QueueDef:
    name: str
    routing: str
    durable: bool = True


@dataclass(frozen=True)
class AddressDef:
    name: str
    routings: tuple[str, ...]  # the routing types the address supports
    queues: tuple[QueueDef, ...]
    line: int


@dataclass(frozen=True)
class AddressSetting:
    match: str
    values: dict  # only the elements present in this setting; merged by specificity at lookup
    line: int


DEFAULT_SETTINGS = {
    "dead-letter-address": None,
    "expiry-address": None,
    "max-delivery-attempts": 10,  # Artemis's default
    "redelivery-delay": 0,
    "auto-create-queues": True,
    "auto-create-addresses": True,
    "default-address-routing-type": MULTICAST,  # Artemis's default; topologies render ANYCAST explicitly
    "default-queue-routing-type": MULTICAST,
}


@dataclass
class BrokerConfig:
    path: str
    name: str = "reference-broker"
    persistence_enabled: bool = True
    journal_directory: str = "data/journal"
    journal_datasync: bool = True
    acceptors: list[Acceptor] = field(default_factory=list)
    addresses: list[AddressDef] = field(default_factory=list)
    address_settings: list[AddressSetting] = field(default_factory=list)

    def settings_for(self, address: str) -> dict:
        """Effective address settings: every matching `match`, least specific first, merged."""
        merged = dict(DEFAULT_SETTINGS)
        matching = [s for s in self.address_settings if match_address(s.match, address)]
        for setting in sorted(matching, key=lambda s: _specificity(s.match)):
            merged.update(setting.values)
        return merged


# ---- elements -------------------------------------------------------------------------------------------------

_CORE_SCALARS = {"name", "persistence-enabled", "journal-directory", "journal-datasync", "security-enabled"}
_CORE_LISTS = {"acceptors", "addresses", "address-settings"}
_IGNORED_CORE = {
    "journal-type", "paging-directory", "bindings-directory", "large-messages-directory", "journal-pool-files",
    "journal-min-files", "journal-file-size", "journal-buffer-timeout", "journal-buffer-size",
    "journal-max-io", "journal-compact-min-files", "journal-compact-percentage", "journal-sync-transactional",
    "journal-sync-non-transactional", "journal-device-block-size", "journal-retention-directory",
    "create-bindings-dir", "create-journal-dir", "disk-scan-period", "max-disk-usage", "min-disk-free",
    "global-max-size", "global-max-messages", "page-sync-timeout", "critical-analyzer",
    "critical-analyzer-timeout", "critical-analyzer-check-period", "critical-analyzer-policy",
    "thread-pool-max-size", "scheduled-thread-pool-max-size", "graceful-shutdown-enabled",
    "graceful-shutdown-timeout", "jmx-management-enabled", "jmx-domain", "management-address",
    "management-notification-address", "message-counter-enabled", "message-counter-sample-period",
    "message-counter-max-day-history", "message-expiry-scan-period", "message-expiry-thread-priority",
    "address-queue-scan-period", "id-cache-size", "persist-id-cache", "wild-card-routing-enabled",
    "network-check-list", "network-check-period", "network-check-timeout", "network-check-NIC",
    "network-check-URL-list", "network-check-ping-command", "network-check-ping6-command",
    "populate-validated-user", "amqp-use-core-subscription-naming", "log-delegation-factory-class-name",
    "resolve-protocols", "persist-delivery-count-before-delivery", "temporary-queue-namespace",
    "connection-ttl-override", "async-connection-execution-enabled", "transaction-timeout",
    "transaction-timeout-scan-period", "memory-measure-interval", "memory-warning-threshold",
}
_REFUSED_CORE = {
    "cluster-connections", "cluster-user", "cluster-password", "broadcast-groups", "discovery-groups",
    "connectors", "bridges", "diverts", "ha-policy", "broker-connections", "security-settings",
    "connection-routers", "federations", "broker-plugins", "grouping-handler", "queues", "metrics",
    "resource-limit-settings", "wildcard-addresses", "store", "remoting-incoming-interceptors",
    "remoting-outgoing-interceptors",
}
_SETTING_VALUES = {
    "dead-letter-address": str, "expiry-address": str, "max-delivery-attempts": int, "redelivery-delay": int,
    "auto-create-queues": bool, "auto-create-addresses": bool,
    "default-address-routing-type": "routing", "default-queue-routing-type": "routing",
}
_IGNORED_SETTING = {
    "address-full-policy", "max-size-bytes", "max-size-messages", "page-size-bytes", "page-max-cache-size",
    "message-counter-history-day-limit", "auto-delete-queues", "auto-delete-addresses",
    "auto-delete-created-queues", "auto-delete-queues-delay", "auto-delete-addresses-delay",
    "auto-create-jms-queues", "auto-create-jms-topics", "auto-delete-jms-queues", "auto-delete-jms-topics",
    "auto-create-dead-letter-resources", "auto-create-expiry-resources", "dead-letter-queue-prefix",
    "dead-letter-queue-suffix", "expiry-queue-prefix", "expiry-queue-suffix", "redistribution-delay",
    "send-to-dla-on-no-route", "slow-consumer-threshold", "slow-consumer-policy", "slow-consumer-check-period",
    "redelivery-delay-multiplier", "max-redelivery-delay", "redelivery-collision-avoidance-factor",
    "default-purge-on-no-consumers", "default-max-consumers", "default-consumers-before-dispatch",
    "default-delay-before-dispatch", "default-exclusive-queue", "default-last-value-queue",
    "default-non-destructive", "default-consumer-window-size", "default-ring-size", "retroactive-message-count",
    "management-browse-page-size", "enable-metrics", "enable-ingress-timestamp", "config-delete-queues",
    "config-delete-addresses", "config-delete-diverts",
}


def load_config(path: str | os.PathLike) -> BrokerConfig:
    shown = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(shown, 0, f"cannot read: {exc.strerror or exc}") from None
    return parse_config(data, shown)


def parse_config(data: bytes | str, path: str = "<string>") -> BrokerConfig:
    root = _parse_xml(data, path)
    cfg = BrokerConfig(path=path)
    core = root if _local(root.tag) == "core" else next(
        (child for child in root if _local(child.tag) == "core"), None)
    if core is None:
        raise ConfigError(path, root.line, "expected a <core> element (urn:activemq:core) in <configuration>")
    for child in root:
        if child is not core and _local(child.tag) not in ("jms",):
            raise ConfigError(path, child.line, f"<{_local(child.tag)}> is not supported by the reference broker")
    for el in core:
        tag = _local(el.tag)
        if tag in _IGNORED_CORE:
            continue
        if tag in _REFUSED_CORE:
            raise ConfigError(path, el.line, f"<{tag}> is not supported yet by the reference broker")
        if tag == "name":
            cfg.name = _text(el, path)
        elif tag == "persistence-enabled":
            cfg.persistence_enabled = _bool(el, path)
        elif tag == "journal-directory":
            cfg.journal_directory = _text(el, path)
        elif tag == "journal-datasync":
            cfg.journal_datasync = _bool(el, path)
        elif tag == "security-enabled":
            if _bool(el, path):
                raise ConfigError(path, el.line, "<security-enabled>true is not supported yet (expected false)")
        elif tag == "acceptors":
            cfg.acceptors = [_acceptor(a, path) for a in _children(el, "acceptor", path)]
        elif tag == "addresses":
            cfg.addresses = [_address(a, path) for a in _children(el, "address", path)]
        elif tag == "address-settings":
            cfg.address_settings = [_setting(s, path) for s in _children(el, "address-setting", path)]
        else:
            known = sorted(_CORE_SCALARS | _CORE_LISTS)
            raise ConfigError(path, el.line, f"unknown element <{tag}> in <core> (expected one of: {', '.join(known)})")
    if not cfg.acceptors:
        raise ConfigError(path, core.line, "no <acceptors>: the broker needs at least one AMQP acceptor")
    names = [a.name for a in cfg.addresses]
    for address in cfg.addresses:
        if names.count(address.name) > 1:
            raise ConfigError(path, address.line, f"address {address.name!r} is declared twice")
    return cfg


# ---- element readers -------------------------------------------------------------------------------------------


def _acceptor(el, path) -> Acceptor:
    name = el.get("name") or "acceptor"
    url = _text(el, path)
    parts = urlsplit(url)
    if parts.scheme != "tcp" or parts.port is None:
        raise ConfigError(path, el.line, f"acceptor {name!r}: expected tcp://HOST:PORT?protocols=AMQP, got {url!r}")
    params = dict(parse_qsl(parts.query.replace(";", "&")))
    protocols = params.get("protocols")
    if protocols is not None and "AMQP" not in protocols.upper().split(","):
        raise ConfigError(path, el.line, f"acceptor {name!r}: protocols={protocols} does not include AMQP")
    return Acceptor(name, parts.hostname or "0.0.0.0", parts.port, el.line)


def _address(el, path) -> AddressDef:
    name = el.get("name")
    if not name:
        raise ConfigError(path, el.line, "<address> needs a name attribute")
    routings, queues = [], []
    for child in el:
        tag = _local(child.tag)
        if tag not in (ANYCAST, MULTICAST):
            raise ConfigError(path, child.line, f"address {name!r}: expected <anycast> or <multicast>, got <{tag}>")
        routings.append(tag)
        for q in _children(child, "queue", path):
            qname = q.get("name")
            if not qname:
                raise ConfigError(path, q.line, f"address {name!r}: <queue> needs a name attribute")
            durable = True
            for sub in q:
                subtag = _local(sub.tag)
                if subtag == "durable":
                    durable = _bool(sub, path)
                elif subtag == "filter":
                    raise ConfigError(path, sub.line, f"queue {qname!r}: <filter> is not supported yet")
                else:
                    raise ConfigError(path, sub.line, f"queue {qname!r}: unknown element <{subtag}>")
            queues.append(QueueDef(qname, tag, durable))
    if not routings:
        routings.append(ANYCAST)  # Artemis: an address with no routing element behaves as anycast
    return AddressDef(name, tuple(routings), tuple(queues), el.line)


def _setting(el, path) -> AddressSetting:
    match = el.get("match")
    if match is None:
        raise ConfigError(path, el.line, "<address-setting> needs a match attribute")
    values = {}
    for child in el:
        tag = _local(child.tag)
        if tag in _IGNORED_SETTING:
            continue
        kind = _SETTING_VALUES.get(tag)
        if kind is None:
            raise ConfigError(path, child.line,
                              f"address-setting {match!r}: <{tag}> is not supported yet by the reference broker")
        if kind is bool:
            values[tag] = _bool(child, path)
        elif kind is int:
            values[tag] = _int(child, path)
        elif kind == "routing":
            value = _text(child, path).lower()
            if value not in (ANYCAST, MULTICAST):
                raise ConfigError(path, child.line, f"<{tag}>: expected ANYCAST or MULTICAST, got {value!r}")
            values[tag] = value
        else:
            values[tag] = _text(child, path)
    return AddressSetting(match, values, el.line)


# ---- Artemis address matching (`.` separates words, `*` one word, `#` zero or more) ------------------------------


def match_address(pattern: str, address: str) -> bool:
    regex = "^" + r"\.".join(
        "[^.]+" if word == "*" else ("(?:.*)" if word == "#" else re.escape(word)) for word in pattern.split("."))
    regex = regex.replace(r"\.(?:.*)", r"(?:\..*)?").replace(r"(?:.*)\.", r"(?:.*\.)?") + "$"
    return re.match(regex, address) is not None


def _specificity(pattern: str) -> tuple:
    """Artemis orders matches by how literal they are: more literal words, then fewer wildcards."""
    words = pattern.split(".")
    return (sum(w not in ("*", "#") for w in words), -sum(w == "#" for w in words), len(words))


# ---- XML with line numbers ----------------------------------------------------------------------------------


class _Element(ET.Element):
    line = 0


def _parse_xml(data, path):
    """Parse with expat directly so that every element knows the line it starts on."""
    parser = expat.ParserCreate(namespace_separator="}")
    stack: list[_Element] = []
    roots: list[_Element] = []

    def start(tag, attrs):
        el = _Element(tag, attrs)
        el.line = parser.CurrentLineNumber
        (stack[-1].append(el) if stack else roots.append(el))
        stack.append(el)

    def text(chars):
        if stack and not len(stack[-1]):
            stack[-1].text = (stack[-1].text or "") + chars

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda _tag: stack.pop()
    parser.CharacterDataHandler = text
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise ConfigError(path, exc.lineno, f"not well-formed XML: {expat.errors.messages[exc.code]}") from None
    return roots[0]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _children(el, tag, path):
    out = []
    for child in el:
        if _local(child.tag) != tag:
            raise ConfigError(path, child.line, f"<{_local(el.tag)}>: expected <{tag}>, got <{_local(child.tag)}>")
        out.append(child)
    return out


def _text(el, path) -> str:
    text = (el.text or "").strip()
    if not text:
        raise ConfigError(path, el.line, f"<{_local(el.tag)}> needs a value")
    return os.path.expandvars(text)


def _bool(el, path) -> bool:
    text = _text(el, path).lower()
    if text not in ("true", "false"):
        raise ConfigError(path, el.line, f"<{_local(el.tag)}>: expected true or false, got {text!r}")
    return text == "true"


def _int(el, path) -> int:
    text = _text(el, path)
    try:
        return int(text)
    except ValueError:
        raise ConfigError(path, el.line, f"<{_local(el.tag)}>: expected an integer, got {text!r}") from None
