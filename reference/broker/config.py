"""Read the subset of ActiveMQ Artemis `broker.xml` the reference broker implements.

One topology renders to Artemis and to the reference broker the same way, so the reference reads Artemis's
own file format. The root is `<configuration>` holding `<core>` (a `<jms>` sibling is tolerated), or a bare
`<core>`. What it does with each element:

* implemented: `name`, `persistence-enabled`, `journal-directory` (where the journal lives),
  `journal-datasync` (fsync before a durable message is accepted; default true),
  `journal-sync-non-transactional` (default true: a non-transactional durable send or acknowledgement is
  answered once its journal record is on disk; false, as in Artemis: answered at once, the record written by
  the next batch, so a crash in between loses what was acknowledged), `acceptors/acceptor`,
  `addresses/address` with `anycast`/`multicast` queues, and `address-settings/address-setting` with
  `dead-letter-address`, `expiry-address`, `max-delivery-attempts`, `redelivery-delay`,
  `auto-create-queues`, `auto-create-addresses`, `default-address-routing-type`,
  `default-queue-routing-type`.
* `security-enabled` (default true, as in Artemis): with security on, every connection authenticates with
  SASL PLAIN against the users of Artemis's properties-file login module, and every attach is authorised by
  role (authz.py). The reference reads exactly two files, always beside broker.xml (an Artemis instance's
  `etc/`, where its default `login.config` points the PropertiesLogin module): `artemis-users.properties`
  (`user = password`, plain text; `ENC(...)` hashes are refused) and `artemis-roles.properties`
  (`role = user1,user2`). `load_config` reads them; a missing one is an error at the `<security-enabled>`
  line (or the `<core>` line when the element is absent). `<security-settings>` holds
  `<security-setting match="...">` with `<permission type="..." roles="a,b"/>` (Artemis's types: send, consume,
  createAddress, createDurableQueue, createNonDurableQueue, deleteAddress, manage, and deleteDurableQueue,
  deleteNonDurableQueue, browse, read but never needed); `role-mapping` is refused. With security off,
  `<security-settings>` is accepted and ignored, as Artemis ignores it then.
* acceptors: `tcp://HOST:PORT?key=value;...` (port 0-65535). `protocols` is implemented: an acceptor whose
  protocols exclude AMQP is skipped (`BrokerConfig.skipped_acceptors`; the server logs a notice), since the
  broker serves AMQP only, but a file with no AMQP acceptor left is refused. URL parameters that only tune
  sockets or the other protocols are accepted (`_IGNORED_ACCEPTOR_PARAMS`); `amqpCredits` /
  `amqpLowCredits` and the AMQP outcome switches are accepted only at the values the reference implements
  (`_FIXED_ACCEPTOR_PARAMS`); `anycastPrefix` / `multicastPrefix` and unknown parameters are refused.
  TLS (`sslEnabled=true`, `_acceptor_tls`): the reference reads PEM files where Artemis reads keystores (Artemis
  reads the same files with `keyStoreType=PEM`): `keyStorePath` is one PEM file holding the private key and the
  certificate chain, `keyStorePassword` decrypts the key, `trustStorePath` is a PEM file of CA certificates,
  `needClientAuth` / `wantClientAuth` require or ask for a client certificate it verifies, `verifyHost` (which
  on an acceptor checks that the client's certificate names the client's host) is accepted only false;
  relative paths are relative to broker.xml's folder. A non-PEM store type and the TLS tuning parameters
  (`enabledProtocols`, `enabledCipherSuites`, `crlPath`, ...) are refused while sslEnabled is true.
* addresses: address names and queue names are broker-wide (a second declaration is refused, naming its
  line and the first one's). A queue takes `<durable>` and `<user>` (a management label only: no security
  check reads it); `<filter>` and every queue attribute but `name` (`max-consumers`, `exclusive`, `last-value-key`,
  `ring-size`, ...) change delivery and are refused.
* address-settings: Artemis's match syntax (`.` separates words, `*` is one word, `#` zero or more words and
  only as the last character; a `#` glued to a word, as in the stock `activemq.management#`, works as
  `activemq.management.#`). The effective settings of an address merge every matching setting, most
  specific first, by Artemis's MatchComparator (see `settings_for`); a repeated match replaces the earlier
  one, as in Artemis's map of settings.
* accepted and meaningless here (documented, no effect): journal tuning, paging/bindings/large-message
  directories, memory/disk limits, thread pools, critical analyzer, JMX/management notifications,
  `max-redelivery-records`, and the address-setting knobs that only tune paging, auto-deletion and
  message counters (see `_IGNORED*`);
* `broker-connections/amqp-connection` (002_f23507c2891d6d06.txt): `uri` (`tcp://HOST:PORT`, then alternates
  after `#` as `HOST:PORT` or `tcp://HOST:PORT`, comma-separated; the primary may carry TLS parameters, read as
  PEM files like an acceptor's: `sslEnabled`, `trustStorePath`, `keyStorePath` (a client certificate and its
  key), `keyStorePassword`, `verifyHost`, PEM store types; any other URI parameter is refused), `name`,
  `auto-start`, `reconnect-attempts`, `retry-interval`, `user`/`password`, holding `<sender>`, `<receiver>` and
  `<peer>` (each with `address-match` or `queue-name`), `<mirror>` (`queue-creation`, `queue-removal`,
  `message-acknowledgements`) and `<federation>` (004_05e35cdd7bc39ede.txt networks, in Artemis's AMQP federation
  form): `local-queue-policy`,
  `remote-queue-policy` (`name`, `include-federated`), `local-address-policy`, `remote-address-policy` (`name`,
  `max-hops`), each with `<include>`/`<exclude>` (`address-match`, and `queue-match` for queue policies). Every
  other attribute or element (mirror `address-filter`, `sync`, policy `priority-adjustment`, ...) is refused at
  its line;
* refused with an error naming the element: anything else that would change behaviour (clustering,
  diverts, bridges, HA, connectors, ...).

Errors are `ConfigError` whose text is one line: `FILE:LINE: what was expected`.
"""

from __future__ import annotations

import functools
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.parsers import expat
from urllib.parse import parse_qsl, urlsplit

ANYCAST, MULTICAST = "anycast", "multicast"


class ConfigError(Exception):
    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


@dataclass(frozen=True)
class AcceptorTls:
    """An acceptor's TLS (`sslEnabled=true`), from PEM files: `key_store` holds the private key and the
    certificate chain in one file (Artemis's `keyStoreType=PEM` form), `trust_store` the CA certificates that
    verify client certificates."""

    key_store: str
    key_password: str | None = None
    trust_store: str | None = None
    client_certs: str = "none"  # none | optional (wantClientAuth) | required (needClientAuth)


@dataclass(frozen=True)
class Acceptor:
    name: str
    host: str
    port: int
    line: int
    tls: AcceptorTls | None = None


# The permission types a <security-setting> may give. The broker checks the first seven (authz.py); the
# last three are Artemis's too (the stock broker.xml lists them) and are read, but no AMQP operation of the
# reference needs them: it never deletes a queue on a client's behalf (see broker.py).
OPERATIONS = ("send", "consume", "createAddress", "createDurableQueue", "createNonDurableQueue",
              "deleteAddress", "manage")
PERMISSION_TYPES = OPERATIONS + ("deleteDurableQueue", "deleteNonDurableQueue", "browse")


@dataclass(frozen=True)
class SecuritySetting:
    match: str
    roles: dict  # permission type -> frozenset of role names (types absent: no role)
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class SkippedAcceptor:
    """An acceptor whose `protocols` exclude AMQP: the broker does not open it (it serves AMQP only)."""

    name: str
    protocols: str
    line: int


@dataclass(frozen=True)
class QueueDef:
    name: str
    routing: str
    durable: bool = True
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class AddressDef:
    name: str
    routings: tuple[str, ...]  # the routing types the address supports
    queues: tuple[QueueDef, ...]
    line: int


@dataclass(frozen=True)
class ConnectionElement:
    """One `<sender>`, `<receiver>`, `<peer>` or `<mirror>` of an amqp-connection."""

    kind: str  # sender | receiver | peer | mirror | federation
    address_match: str | None = None
    queue_name: str | None = None
    queue_creation: bool = True  # mirror only, as are the next two
    queue_removal: bool = True
    message_acknowledgements: bool = True
    policies: tuple = ()  # federation only: FederationPolicy
    line: int = field(default=0, compare=False)

    def matches(self, queue_name: str, address: str) -> bool:
        """Whether a local queue is one this sender/receiver/peer element links (Artemis's validateMatching)."""
        if self.queue_name is not None:
            return queue_name == self.queue_name
        return self.address_match is not None and match_address(self.address_match, address)


@dataclass(frozen=True)
class FederationPolicy:
    """A queue or address policy of a `<federation>`: `local` pulls from the remote broker, `remote` asks the
    remote broker to pull from this one (each when its side has consumers for a matching queue or address)."""

    kind: str  # queue | address
    side: str  # local | remote
    name: str
    includes: tuple[tuple[str, str], ...]  # (address-match, queue-match); queue-match "#" for address policies
    excludes: tuple[tuple[str, str], ...] = ()
    include_federated: bool = False  # queue policies: forward messages that themselves came by federation
    max_hops: int = -1  # address policies: how many brokers a message may cross (-1: no limit)
    line: int = field(default=0, compare=False)

    def matches(self, address: str, queue: str) -> bool:
        def hit(rules):
            return any(match_address(a, address) and match_address(q, queue) for a, q in rules)
        return hit(self.includes) and not hit(self.excludes)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "includes": [list(r) for r in self.includes],
                "excludes": [list(r) for r in self.excludes], "include_federated": self.include_federated,
                "max_hops": self.max_hops}

    @staticmethod
    def from_dict(data: dict, side: str) -> FederationPolicy:
        """A policy the other broker sent (its remote policies are ours to pull by)."""
        kind = data.get("kind")
        if kind not in ("queue", "address"):
            raise ValueError(f"a federation policy of kind {kind!r}")
        return FederationPolicy(kind, side, str(data.get("name", "")),
                                tuple((str(a), str(q)) for a, q in data.get("includes", [])),
                                tuple((str(a), str(q)) for a, q in data.get("excludes", [])),
                                bool(data.get("include_federated", False)), int(data.get("max_hops", -1)))


@dataclass(frozen=True)
class ConnectionTls:
    """TLS of an `<amqp-connection>` (its URI's sslEnabled=true): PEM files as for acceptors. `trust_store`
    verifies the target's certificate (None: the system's CAs), `key_store` (key and chain in one file) is the
    client certificate when the target asks for one, `verify_host` checks that the certificate names the host
    dialled."""

    trust_store: str | None = None
    key_store: str | None = None
    key_password: str | None = None
    verify_host: bool = False


@dataclass(frozen=True)
class BrokerConnectionDef:
    """An `<amqp-connection>`: where the broker dials, how it retries, and what it creates there."""

    name: str
    uri: str
    endpoints: tuple[tuple[str, int], ...]  # the primary, then the alternates in the order given
    auto_start: bool = True
    reconnect_attempts: int = -1  # -1: forever
    retry_interval_ms: int = 5000
    user: str | None = None
    password: str | None = None
    elements: tuple[ConnectionElement, ...] = ()
    line: int = field(default=0, compare=False)
    tls: ConnectionTls | None = None

    @property
    def mirror(self) -> ConnectionElement | None:
        return next((e for e in self.elements if e.kind == "mirror"), None)

    @property
    def federation(self) -> ConnectionElement | None:
        return next((e for e in self.elements if e.kind == "federation"), None)


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
    journal_sync_non_transactional: bool = True
    acceptors: list[Acceptor] = field(default_factory=list)
    skipped_acceptors: list[SkippedAcceptor] = field(default_factory=list)
    addresses: list[AddressDef] = field(default_factory=list)
    address_settings: list[AddressSetting] = field(default_factory=list)
    broker_connections: list[BrokerConnectionDef] = field(default_factory=list)
    security_enabled: bool = False
    security_line: int = 0  # the <security-enabled> element's line, for errors about the login files
    security_settings: list[SecuritySetting] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)  # from artemis-users.properties (load_config)
    user_roles: dict[str, frozenset[str]] = field(default_factory=dict)  # from artemis-roles.properties

    def settings_for(self, address: str) -> dict:
        """Effective address settings, as Artemis's HierarchicalObjectRepository.getMatch merges them: every
        matching setting, most specific first (`compare_matches`); each one only fills the values the more
        specific ones left unset; then the defaults. A repeated match replaces the earlier one."""
        by_match = {s.match: s for s in self.address_settings}  # later wins, like Artemis's map
        matching = sorted((m for m in by_match if match_address(m, address)),
                          key=functools.cmp_to_key(compare_matches))
        merged: dict = {}
        for match in matching:
            for key, value in by_match[match].values.items():
                merged.setdefault(key, value)
        return {**DEFAULT_SETTINGS, **merged}


# ---- elements -------------------------------------------------------------------------------------------------

_CORE_SCALARS = {"name", "persistence-enabled", "journal-directory", "journal-datasync",
                 "journal-sync-non-transactional", "security-enabled"}
_CORE_LISTS = {"acceptors", "addresses", "address-settings", "security-settings", "broker-connections"}
_IGNORED_CORE = {
    "max-redelivery-records", "journal-type", "paging-directory", "bindings-directory", "large-messages-directory",
    "journal-pool-files",
    "journal-min-files", "journal-file-size", "journal-buffer-timeout", "journal-buffer-size",
    "journal-max-io", "journal-compact-min-files", "journal-compact-percentage", "journal-sync-transactional",
    "journal-device-block-size", "journal-retention-directory",
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
    "connectors", "bridges", "diverts", "ha-policy",
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
    "max-read-page-messages", "max-read-page-bytes", "prefetch-page-messages", "prefetch-page-bytes",
    "message-counter-history-day-limit", "auto-delete-queues", "auto-delete-addresses",
    "auto-delete-created-queues", "auto-delete-queues-delay", "auto-delete-addresses-delay",
    "auto-create-jms-queues", "auto-create-jms-topics", "auto-delete-jms-queues", "auto-delete-jms-topics",
    "dead-letter-queue-prefix", "dead-letter-queue-suffix", "expiry-queue-prefix", "expiry-queue-suffix",
    "redistribution-delay", "slow-consumer-policy", "slow-consumer-check-period", "max-redelivery-delay",
    "default-consumer-window-size", "management-browse-page-size", "enable-metrics", "config-delete-queues",
    "config-delete-addresses", "config-delete-diverts",
}
# Address-setting knobs that change delivery, accepted only at Artemis's default (where they change nothing):
# the queue defaults mirror the <queue> attributes refused in _address; the others reroute, delay, annotate
# or replay messages (max-redelivery-delay only caps a multiplied delay, and the multiplier must stay 1).
_DEFAULT_ONLY_SETTING = {
    "default-purge-on-no-consumers": "false", "default-max-consumers": "-1", "default-consumers-before-dispatch": "0",
    "default-delay-before-dispatch": "-1", "default-exclusive-queue": "false", "default-last-value-queue": "false",
    "default-non-destructive": "false", "default-ring-size": "-1", "send-to-dla-on-no-route": "false",
    "redelivery-delay-multiplier": "1.0", "redelivery-collision-avoidance-factor": "0.0",
    "auto-create-dead-letter-resources": "false", "auto-create-expiry-resources": "false",
    "slow-consumer-threshold": "-1", "retroactive-message-count": "0", "enable-ingress-timestamp": "false",
}

# Acceptor URL parameters. `protocols` is implemented (see _acceptor). These change nothing a client can observe
# over AMQP here: socket and Netty tuning, how Artemis stores large AMQP messages, the parameters of the other
# protocols (the broker serves AMQP only), and TLS material, which is meaningless unless sslEnabled=true.
# amqpDuplicateDetection: Artemis drops a message whose `_AMQ_DUPL_ID` it has seen; the reference never does
# (with or without the parameter), a known gap that the parameter neither opens nor closes.
_IGNORED_ACCEPTOR_PARAMS = {
    "tcpSendBufferSize", "tcpReceiveBufferSize", "tcpNoDelay", "useEpoll", "useKQueue", "useNio", "batchDelay",
    "directDeliver", "writeBufferLowWaterMark", "writeBufferHighWaterMark", "nioRemotingThreads",
    "remotingThreads", "quietPeriod", "shutdownTimeout", "amqpMinLargeMessageSize", "amqpDuplicateDetection",
    "supportAdvisory", "suppressInternalManagementObjects", "virtualTopicConsumerWildcards",
    "keyStoreProvider", "keyStoreType", "keyStorePath", "keyStorePassword", "keyStoreAlias",
    "trustStoreProvider", "trustStoreType", "trustStorePath", "trustStorePassword", "crlPath",
    "enabledCipherSuites", "enabledProtocols", "needClientAuth", "wantClientAuth", "verifyHost", "sslProvider",
    "sniHost", "trustManagerFactoryPlugin", "sslAutoReload",
}  # the TLS ones only while sslEnabled is not true (then _acceptor_tls reads or refuses them)
_IGNORED_ACCEPTOR_PREFIXES = ("stomp", "mqtt", "openwire")  # parameters of protocols the broker does not serve
# Parameters the reference implements at one value only (Artemis's default): producer credit (broker.py
# PRODUCER_CREDIT / PRODUCER_LOW_CREDIT) and the AMQP outcome handling of broker.py.
_FIXED_ACCEPTOR_PARAMS = {
    "amqpCredits": "1000", "amqpLowCredits": "300",
    "amqpTreatRejectAsUnmodifiedDeliveryFailed": "false", "amqpUseModifiedForTransientDeliveryErrors": "false",
}


def load_config(path: str | os.PathLike) -> BrokerConfig:
    shown = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(shown, 0, f"cannot read: {exc.strerror or exc}") from None
    cfg = parse_config(data, shown)
    if cfg.security_enabled:
        from .authz import load_roles, load_users, login_files

        users_path, roles_path = login_files(shown)
        for login_file in (users_path, roles_path):
            if not os.path.isfile(login_file):
                raise ConfigError(shown, cfg.security_line, f"<security-enabled>true needs {login_file} (the "
                                  "reference reads Artemis's properties login module files beside broker.xml)")
        cfg.users = load_users(users_path)
        cfg.user_roles = load_roles(roles_path, cfg.users)
    return cfg


def parse_config(data: bytes | str, path: str = "<string>") -> BrokerConfig:
    root = _parse_xml(data, path)
    cfg = BrokerConfig(path=path)
    if _local(root.tag) == "core":
        core = root  # a bare <core> document: it has no siblings to check
    else:
        core = next((child for child in root if _local(child.tag) == "core"), None)
        if core is None:
            raise ConfigError(path, root.line, "expected a <core> element (urn:activemq:core) in <configuration>")
        for child in root:
            if child is not core and _local(child.tag) not in ("jms",):
                raise ConfigError(path, child.line,
                                  f"<{_local(child.tag)}> is not supported by the reference broker")
    security_seen = False
    security_settings = None
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
        elif tag == "journal-sync-non-transactional":
            cfg.journal_sync_non_transactional = _bool(el, path)
        elif tag == "security-enabled":
            cfg.security_enabled, cfg.security_line, security_seen = _bool(el, path), el.line, True
        elif tag == "security-settings":
            security_settings = el  # read once security-enabled is known: with security off it is ignored
        elif tag == "acceptors":
            cfg.acceptors, cfg.skipped_acceptors = [], []
            for a in _children(el, "acceptor", path):
                acceptor = _acceptor(a, path)
                (cfg.acceptors if isinstance(acceptor, Acceptor) else cfg.skipped_acceptors).append(acceptor)
        elif tag == "addresses":
            cfg.addresses = _addresses(el, path)
        elif tag == "address-settings":
            cfg.address_settings = [_setting(s, path) for s in _children(el, "address-setting", path)]
        elif tag == "broker-connections":
            cfg.broker_connections = _broker_connections(el, path)
        else:
            known = sorted(_CORE_SCALARS | _CORE_LISTS)
            raise ConfigError(path, el.line, f"unknown element <{tag}> in <core> (expected one of: {', '.join(known)})")
    if not security_seen:  # Artemis's default is true: say so in the file rather than rely on the default
        cfg.security_enabled, cfg.security_line = True, core.line
    if cfg.security_enabled and security_settings is not None:
        cfg.security_settings = _security_settings(security_settings, path)
    if not cfg.acceptors:
        if cfg.skipped_acceptors:
            first = cfg.skipped_acceptors[0]
            raise ConfigError(path, first.line, f"acceptor {first.name!r}: protocols={first.protocols} does not "
                              "include AMQP, and no other acceptor does (the broker serves AMQP only)")
        raise ConfigError(path, core.line, "no <acceptors>: the broker needs at least one AMQP acceptor")
    return cfg


# ---- element readers -------------------------------------------------------------------------------------------


def _acceptor(el, path) -> Acceptor | SkippedAcceptor:
    name = el.get("name") or "acceptor"
    url = _text(el, path)
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        parts = None
    after_host = parts.netloc.rpartition("]")[2] if parts else ""  # an IPv6 host is in brackets
    if parts is None or parts.scheme != "tcp" or not after_host.rpartition(":")[1]:
        raise ConfigError(path, el.line, f"acceptor {name!r}: expected tcp://HOST:PORT?protocols=AMQP, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise ConfigError(path, el.line,
                          f"acceptor {name!r}: expected a port 0-65535, got {after_host.rpartition(':')[2]!r}")
    params = dict(parse_qsl(parts.query.replace(";", "&"), keep_blank_values=True))
    protocols = params.pop("protocols", None)
    if protocols is not None and "AMQP" not in [p.strip() for p in protocols.upper().split(",")]:
        return SkippedAcceptor(name, protocols, el.line)  # its other parameters concern the other protocols
    tls = _acceptor_tls(name, params, path, el.line)
    for key, value in params.items():
        what = f"acceptor {name!r}: {key}={value}"
        if key == "sslEnabled" or key in _TLS_PARAMS and tls is not None:
            continue  # read by _acceptor_tls
        elif key in ("anycastPrefix", "multicastPrefix"):
            if value:
                raise ConfigError(path, el.line, f"{what}: {key} is not supported yet by the reference broker")
        elif key in _FIXED_ACCEPTOR_PARAMS:
            if value.strip().lower() != _FIXED_ACCEPTOR_PARAMS[key].lower():
                raise ConfigError(path, el.line, f"{what} is not supported yet by the reference broker "
                                  f"(it implements {key}={_FIXED_ACCEPTOR_PARAMS[key]} only)")
        elif key not in _IGNORED_ACCEPTOR_PARAMS and not key.startswith(_IGNORED_ACCEPTOR_PREFIXES):
            raise ConfigError(path, el.line, f"acceptor {name!r}: unknown parameter {key!r}")
    return Acceptor(name, parts.hostname or "0.0.0.0", port, el.line, tls)


# What an acceptor with sslEnabled=true reads (_acceptor_tls); without it they are ignored, as Artemis does.
_TLS_PARAMS = {"keyStorePath", "keyStorePassword", "keyStoreType", "trustStorePath", "trustStorePassword",
               "trustStoreType", "needClientAuth", "wantClientAuth", "verifyHost", "enabledProtocols",
               "enabledCipherSuites", "keyStoreProvider", "trustStoreProvider", "keyStoreAlias", "sslProvider",
               "crlPath", "sniHost", "trustManagerFactoryPlugin", "sslAutoReload"}
_TLS_READ = {"keyStorePath", "keyStorePassword", "keyStoreType", "trustStorePath", "trustStorePassword",
             "trustStoreType", "needClientAuth", "wantClientAuth", "verifyHost", "sslProvider"}


def _acceptor_tls(name: str, params: dict, path, line: int) -> AcceptorTls | None:
    """The TLS of an acceptor URL: keyStorePath and trustStorePath are PEM files (the reference reads no Java
    keystore: keyStoreType and trustStoreType must be PEM when given); keyStorePassword decrypts the key;
    trustStorePassword means nothing for PEM and is ignored; needClientAuth / wantClientAuth ask for a client
    certificate verified by trustStorePath; verifyHost=true is refused."""
    enabled = params.get("sslEnabled", "false").strip().lower()
    if enabled not in ("true", "false"):
        raise ConfigError(path, line, f"acceptor {name!r}: sslEnabled: expected true or false, got {enabled!r}")
    if enabled == "false":
        return None

    def flag(key: str) -> bool:
        value = params.get(key, "false").strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(path, line, f"acceptor {name!r}: {key}: expected true or false, got {value!r}")
        return value == "true"

    for key in params:
        if key in _TLS_PARAMS and key not in _TLS_READ:
            raise ConfigError(path, line, f"acceptor {name!r}: {key} with sslEnabled=true is not supported yet by "
                              "the reference broker")
    for key in ("keyStoreType", "trustStoreType"):
        if key in params and params[key].strip().upper() != "PEM":
            raise ConfigError(path, line, f"acceptor {name!r}: {key}={params[key]}: the reference broker reads PEM "
                              "files only (expected PEM)")
    if params.get("sslProvider", "JDK").strip().upper() not in ("JDK", "OPENSSL"):
        raise ConfigError(path, line, f"acceptor {name!r}: sslProvider: expected JDK or OPENSSL")
    key_store = os.path.expandvars(params.get("keyStorePath", "").strip())
    if not key_store:
        raise ConfigError(path, line, f"acceptor {name!r}: sslEnabled=true needs keyStorePath (a PEM file with the "
                          "private key and the certificate chain)")
    trust = os.path.expandvars(params.get("trustStorePath", "").strip()) or None
    need, want = flag("needClientAuth"), flag("wantClientAuth")
    if (need or want) and trust is None:
        raise ConfigError(path, line, f"acceptor {name!r}: {'needClientAuth' if need else 'wantClientAuth'}=true "
                          "needs trustStorePath (PEM CA certificates)")
    if flag("verifyHost"):  # on an acceptor: the client certificate must name the client's host
        raise ConfigError(path, line, f"acceptor {name!r}: verifyHost=true is not supported yet by the reference "
                          "broker (expected false)")
    folder = os.path.dirname(os.path.abspath(path)) if path != "<string>" else os.getcwd()
    for key, file in (("keyStorePath", key_store), ("trustStorePath", trust)):
        if file is not None and not os.path.isfile(os.path.join(folder, file)):
            raise ConfigError(path, line, f"acceptor {name!r}: {key}={file}: no such file")
    return AcceptorTls(
        key_store=os.path.join(folder, key_store),
        key_password=params.get("keyStorePassword") or None,
        trust_store=os.path.join(folder, trust) if trust else None,
        client_certs="required" if need else "optional" if want else "none")


def _security_settings(el, path) -> list[SecuritySetting]:
    """`<security-setting match="..."><permission type="send" roles="a, b"/>...`: a repeated type within one
    setting is refused (Artemis would keep one of them silently)."""
    settings = []
    for child in _children(el, "security-setting", path):
        match = child.get("match")
        if match is None:
            raise ConfigError(path, child.line, "<security-setting> needs a match attribute")
        if "#" in match and match.index("#") != len(match) - 1:
            raise ConfigError(path, child.line, f"security-setting {match!r}: '#' may only be the last character "
                              "of a match")
        roles: dict[str, frozenset[str]] = {}
        for perm in child:
            tag = _local(perm.tag)
            if tag != "permission":
                raise ConfigError(path, perm.line, f"security-setting {match!r}: expected <permission>, got <{tag}>"
                                  + (" (not supported yet by the reference broker)" if tag == "role-mapping" else ""))
            kind, names = perm.get("type"), perm.get("roles")
            if kind not in PERMISSION_TYPES:
                raise ConfigError(path, perm.line, f"security-setting {match!r}: permission type {kind!r}: expected "
                                  f"one of {', '.join(PERMISSION_TYPES)}")
            if names is None:
                raise ConfigError(path, perm.line, f"security-setting {match!r}: permission {kind!r} needs a roles "
                                  "attribute")
            if kind in roles:
                raise ConfigError(path, perm.line, f"security-setting {match!r}: permission {kind!r} is given twice")
            roles[kind] = frozenset(r.strip() for r in names.split(",") if r.strip())
        settings.append(SecuritySetting(match, roles, child.line))
    return settings


def _addresses(el, path) -> list[AddressDef]:
    """Address and queue names are broker-wide in Artemis: a second declaration of either is refused."""
    addresses: list[AddressDef] = []
    first_address: dict[str, AddressDef] = {}
    first_queue: dict[str, tuple[QueueDef, AddressDef]] = {}
    for child in _children(el, "address", path):
        address = _address(child, path)
        if address.name in first_address:
            raise ConfigError(path, address.line, f"address {address.name!r} is declared twice "
                              f"(first at line {first_address[address.name].line})")
        first_address[address.name] = address
        for queue in address.queues:
            if queue.name in first_queue:
                other, owner = first_queue[queue.name]
                raise ConfigError(path, queue.line, f"queue {queue.name!r} is declared twice (first on address "
                                  f"{owner.name!r} at line {other.line}; queue names are broker-wide)")
            first_queue[queue.name] = (queue, address)
        addresses.append(address)
    return addresses


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
            # Every other queue attribute (max-consumers, exclusive, last-value, last-value-key, non-destructive,
            # purge-on-no-consumers, ring-size, group-*, consumers-before-dispatch, delay-before-dispatch,
            # enabled, ...) changes how the queue delivers: refused, whatever its value.
            for attribute in q.attrib:
                if attribute != "name":
                    raise ConfigError(path, q.line, f"queue {qname!r}: attribute {_local(attribute)}="
                                      f"{q.get(attribute)!r} is not supported yet by the reference broker")
            durable = True
            for sub in q:
                subtag = _local(sub.tag)
                if subtag == "durable":
                    durable = _bool(sub, path)
                elif subtag == "user":
                    # The user that owns the queue: in Artemis a label shown by management, which no security
                    # check reads (permissions go by address and role), so the reference reads and drops it.
                    _text(sub, path)
                elif subtag == "filter":
                    raise ConfigError(path, sub.line, f"queue {qname!r}: <filter> is not supported yet")
                else:
                    raise ConfigError(path, sub.line, f"queue {qname!r}: unknown element <{subtag}>")
            queues.append(QueueDef(qname, tag, durable, q.line))
    if not routings:
        routings.append(ANYCAST)  # Artemis: an address with no routing element behaves as anycast
    return AddressDef(name, tuple(routings), tuple(queues), el.line)


_CONNECTION_ATTRS = {"uri", "name", "auto-start", "reconnect-attempts", "retry-interval", "user", "password"}
_LINK_ELEMENT_ATTRS = {"address-match", "queue-name"}
_MIRROR_ATTRS = {"queue-creation", "queue-removal", "message-acknowledgements"}


def _refuse_other_attrs(attrs: dict[str, str], allowed: set[str], path, line: int, owner: str) -> None:
    """A ConfigError for the first attribute of `owner` (how the message names the element) not in `allowed`,
    listing the ones the reference broker reads."""
    for key in attrs:
        if key not in allowed:
            raise ConfigError(path, line, f"{owner} attribute {key}={attrs[key]!r} is not supported yet by the "
                              f"reference broker (expected: {', '.join(sorted(allowed))})")


def _broker_connections(el, path) -> list[BrokerConnectionDef]:
    connections: list[BrokerConnectionDef] = []
    for child in el:
        tag = _local(child.tag)
        if tag != "amqp-connection":
            raise ConfigError(path, child.line, f"<broker-connections>: expected <amqp-connection>, got <{tag}>"
                              + (" (not supported yet by the reference broker)" if tag.endswith("-connection") else ""))
        connection = _amqp_connection(child, path)
        first = next((c for c in connections if c.name == connection.name), None)
        if first is not None:
            raise ConfigError(path, child.line, f"amqp-connection {connection.name!r} is declared twice (first at "
                              f"line {first.line})")
        connections.append(connection)
    return connections


def _amqp_connection(el, path) -> BrokerConnectionDef:
    attrs = {_local(k): v for k, v in el.attrib.items()}
    name = attrs.get("name")
    if not name:
        raise ConfigError(path, el.line, "<amqp-connection> needs a name attribute")
    what = f"amqp-connection {name!r}"
    _refuse_other_attrs(attrs, _CONNECTION_ATTRS, path, el.line, f"{what}:")
    uri = attrs.get("uri")
    if not uri:
        raise ConfigError(path, el.line, f"{what}: needs a uri attribute (tcp://HOST:PORT)")
    endpoints, tls = _connection_endpoints(uri, path, el.line, what)
    if "password" in attrs and "user" not in attrs:
        raise ConfigError(path, el.line, f"{what}: a password needs a user")
    elements = []
    for child in el:
        tag = _local(child.tag)
        if tag in ("sender", "receiver", "peer"):
            elements.append(_link_element(child, tag, path, what))
        elif tag == "mirror":
            if any(e.kind == "mirror" for e in elements):
                raise ConfigError(path, child.line, f"{what}: a second <mirror> (one per connection)")
            elements.append(_mirror_element(child, path, what))
        elif tag == "federation":
            if any(e.kind == "federation" for e in elements):
                raise ConfigError(path, child.line, f"{what}: a second <federation> (one per connection)")
            elements.append(_federation_element(child, path, what))
        else:
            raise ConfigError(path, child.line, f"{what}: <{tag}> is not supported yet by the reference broker "
                              "(expected <sender>, <receiver>, <peer>, <mirror> or <federation>)")
    return BrokerConnectionDef(
        name=name, uri=uri, endpoints=endpoints,
        auto_start=_attr_bool(attrs, "auto-start", True, path, el.line, what),
        reconnect_attempts=_attr_int(attrs, "reconnect-attempts", -1, -1, path, el.line, what),
        retry_interval_ms=_attr_int(attrs, "retry-interval", 5000, 0, path, el.line, what),
        user=os.path.expandvars(attrs["user"]) if "user" in attrs else None,
        password=os.path.expandvars(attrs["password"]) if "password" in attrs else None,
        elements=tuple(elements), line=el.line, tls=tls)


def _connection_endpoints(uri: str, path, line: int,
                          what: str) -> tuple[tuple[tuple[str, int], ...], ConnectionTls | None]:
    """`tcp://HOST:PORT?PARAMS#ALT:PORT,tcp://ALT2:PORT` -> ((HOST, PORT), (ALT, PORT), (ALT2, PORT)) and the TLS
    the primary's parameters give (it applies to every endpoint: alternates carry no parameters)."""
    primary, _, alternates = uri.partition("#")
    parts = [primary] + [a for a in (x.strip() for x in alternates.split(",")) if a] if alternates else [primary]
    endpoints = []
    for i, part in enumerate(parts):
        text = part if "://" in part else f"tcp://{part}"
        try:
            split = urlsplit(text)
            port = split.port
        except ValueError:
            split, port = None, None
        shown = "the uri" if i == 0 else f"alternate {part!r}"
        if split is None or split.scheme != "tcp" or not split.hostname or port is None:
            raise ConfigError(path, line, f"{what}: {shown}: expected tcp://HOST:PORT (alternates after '#' as "
                              f"HOST:PORT, comma-separated), got {uri!r}")
        if (split.query and i > 0) or (split.path and split.path != "/"):
            raise ConfigError(path, line, f"{what}: {shown}: parameters on an alternate and paths are not supported "
                              f"yet by the reference broker, got {part!r}")
        endpoints.append((split.hostname, port))
    params = dict(parse_qsl(urlsplit(parts[0] if "://" in parts[0] else f"tcp://{parts[0]}").query.replace(";", "&"),
                            keep_blank_values=True))
    return tuple(endpoints), _connection_tls(params, path, line, what)


_CONNECTION_TLS_PARAMS = {"sslEnabled", "trustStorePath", "trustStoreType", "trustStorePassword", "keyStorePath",
                          "keyStoreType", "keyStorePassword", "verifyHost"}


def _connection_tls(params: dict, path, line: int, what: str) -> ConnectionTls | None:
    """The TLS parameters of a broker connection's URI, read as PEM files like an acceptor's (relative paths
    from broker.xml's folder); any other parameter is refused."""
    for key, value in params.items():
        if key not in _CONNECTION_TLS_PARAMS:
            raise ConfigError(path, line, f"{what}: URI parameter {key}={value} is not supported yet by the reference "
                              f"broker (expected TLS ones: {', '.join(sorted(_CONNECTION_TLS_PARAMS))})")
    for key in ("keyStoreType", "trustStoreType"):
        if key in params and params[key].strip().upper() != "PEM":
            raise ConfigError(path, line, f"{what}: {key}={params[key]}: the reference broker reads PEM files only "
                              "(expected PEM)")
    flags = {}
    for key in ("sslEnabled", "verifyHost"):
        value = params.get(key, "false").strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(path, line, f"{what}: {key}: expected true or false, got {value!r}")
        flags[key] = value == "true"
    if not flags["sslEnabled"]:
        return None
    folder = os.path.dirname(os.path.abspath(path)) if path != "<string>" else os.getcwd()
    files = {}
    for key in ("trustStorePath", "keyStorePath"):
        value = os.path.expandvars(params.get(key, "").strip())
        if value and not os.path.isfile(os.path.join(folder, value)):
            raise ConfigError(path, line, f"{what}: {key}={value}: no such file")
        files[key] = os.path.join(folder, value) if value else None
    return ConnectionTls(trust_store=files["trustStorePath"], key_store=files["keyStorePath"],
                         key_password=params.get("keyStorePassword") or None, verify_host=flags["verifyHost"])


def _link_element(el, kind: str, path, what: str) -> ConnectionElement:
    attrs = {_local(k): v for k, v in el.attrib.items()}
    for key in attrs:
        if key not in _LINK_ELEMENT_ATTRS:
            raise ConfigError(path, el.line, f"{what}: <{kind}> attribute {key}={attrs[key]!r} is not supported yet "
                              "(expected address-match or queue-name)")
    if ("address-match" in attrs) == ("queue-name" in attrs) or not (attrs.get("address-match")
                                                                     or attrs.get("queue-name")):
        raise ConfigError(path, el.line, f"{what}: <{kind}> needs exactly one of address-match or queue-name")
    match = attrs.get("address-match")
    if match and "#" in match and match.index("#") != len(match) - 1:
        raise ConfigError(path, el.line, f"{what}: <{kind}> address-match {match!r}: '#' may only be the last "
                          "character")
    return ConnectionElement(kind, address_match=match, queue_name=attrs.get("queue-name"), line=el.line)


def _mirror_element(el, path, what: str) -> ConnectionElement:
    attrs = {_local(k): v for k, v in el.attrib.items()}
    _refuse_other_attrs(attrs, _MIRROR_ATTRS, path, el.line, f"{what}: <mirror>")
    if len(el):
        raise ConfigError(path, el[0].line, f"{what}: <mirror> takes no elements, got <{_local(el[0].tag)}>")
    flags = {key: _attr_bool(attrs, key, True, path, el.line, f"{what}: <mirror>") for key in _MIRROR_ATTRS}
    return ConnectionElement("mirror", queue_creation=flags["queue-creation"], queue_removal=flags["queue-removal"],
                             message_acknowledgements=flags["message-acknowledgements"], line=el.line)


_POLICY_TAGS = {"local-queue-policy": ("queue", "local"), "remote-queue-policy": ("queue", "remote"),
                "local-address-policy": ("address", "local"), "remote-address-policy": ("address", "remote")}


def _federation_element(el, path, what: str) -> ConnectionElement:
    if el.attrib:
        key = _local(next(iter(el.attrib)))
        raise ConfigError(path, el.line, f"{what}: <federation> attribute {key!r} is not supported yet by the "
                          "reference broker")
    policies = []
    for child in el:
        tag = _local(child.tag)
        if tag not in _POLICY_TAGS:
            raise ConfigError(path, child.line, f"{what}: <federation>: <{tag}> is not supported yet by the reference "
                              f"broker (expected one of: {', '.join(_POLICY_TAGS)})")
        policies.append(_federation_policy(child, *_POLICY_TAGS[tag], path, what))
    if not policies:
        raise ConfigError(path, el.line, f"{what}: <federation> needs at least one policy")
    return ConnectionElement("federation", policies=tuple(policies), line=el.line)


def _federation_policy(el, kind: str, side: str, path, what: str) -> FederationPolicy:
    attrs = {_local(k): v for k, v in el.attrib.items()}
    tag = _local(el.tag)
    allowed = {"name", "include-federated"} if kind == "queue" else {"name", "max-hops"}
    _refuse_other_attrs(attrs, allowed, path, el.line, f"{what}: <{tag}>")
    name = attrs.get("name")
    if not name:
        raise ConfigError(path, el.line, f"{what}: <{tag}> needs a name attribute")
    rules: dict[str, list] = {"include": [], "exclude": []}
    for child in el:
        rule = _local(child.tag)
        if rule not in rules:
            raise ConfigError(path, child.line, f"{what}: <{tag}>: expected <include> or <exclude>, got <{rule}>")
        cattrs = {_local(k): v for k, v in child.attrib.items()}
        keys = {"address-match", "queue-match"} if kind == "queue" else {"address-match"}
        for key in cattrs:
            if key not in keys:
                raise ConfigError(path, child.line, f"{what}: <{rule}> attribute {key!r} is not supported here "
                                  f"(expected: {', '.join(sorted(keys))})")
        address, queue = cattrs.get("address-match", "#"), cattrs.get("queue-match", "#")
        for value in (address, queue):
            if not value or ("#" in value and value.index("#") != len(value) - 1):
                raise ConfigError(path, child.line, f"{what}: <{rule}> match {value!r}: expected a name or wildcard "
                                  "with '#' only last")
        rules[rule].append((address, queue))
    if not rules["include"]:
        raise ConfigError(path, el.line, f"{what}: <{tag}> {name!r} needs at least one <include>")
    return FederationPolicy(
        kind, side, name, tuple(rules["include"]), tuple(rules["exclude"]),
        include_federated=_attr_bool(attrs, "include-federated", False, path, el.line, what),
        max_hops=_attr_int(attrs, "max-hops", -1, -1, path, el.line, what), line=el.line)


def _attr_bool(attrs: dict, key: str, default: bool, path, line: int, what: str) -> bool:
    if key not in attrs:
        return default
    text = attrs[key].strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(path, line, f"{what}: {key}: expected true or false, got {attrs[key]!r}")
    return text == "true"


def _attr_int(attrs: dict, key: str, default: int, lowest: int, path, line: int, what: str) -> int:
    if key not in attrs:
        return default
    try:
        value = int(attrs[key].strip())
    except ValueError:
        value = None
    if value is None or value < lowest:
        raise ConfigError(path, line, f"{what}: {key}: expected an integer >= {lowest}, got {attrs[key]!r}")
    return value


def _setting(el, path) -> AddressSetting:
    match = el.get("match")
    if match is None:
        raise ConfigError(path, el.line, "<address-setting> needs a match attribute")
    if "#" in match and match.index("#") != len(match) - 1:  # Artemis's Match.verify
        raise ConfigError(path, el.line,
                          f"address-setting {match!r}: '#' may only be the last character of a match")
    values = {}
    for child in el:
        tag = _local(child.tag)
        if tag in _IGNORED_SETTING:
            continue
        if tag in _DEFAULT_ONLY_SETTING:
            value, default = _text(child, path), _DEFAULT_ONLY_SETTING[tag]
            if not _same_value(value, default):
                raise ConfigError(path, child.line, f"address-setting {match!r}: <{tag}>{value} is not supported "
                                  f"yet by the reference broker (only {default}, Artemis's default)")
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
    """Artemis's Match: a wildcard-free pattern is an exact name; `#` alone matches everything; otherwise
    `.#` and a glued `#` both mean "then zero or more words" (`a#` works as `a.#`), `*` is one word.
    Other characters are literal (Artemis leaves some regex characters active; the reference does not)."""
    if "#" not in pattern and "*" not in pattern:
        return pattern == address
    if pattern == "#":
        return True
    regex = []
    for char in pattern.replace(".#", "#"):
        if char == "*":
            regex.append(r"[^.]+")
        elif char == "#":
            regex.append(r"(?:\..+)*")
        else:
            regex.append(re.escape(char))
    return re.fullmatch("".join(regex), address, re.DOTALL) is not None


def compare_matches(left: str, right: str) -> int:
    """Artemis's MatchComparator (HierarchicalObjectRepository): negative when `left` is more specific.

    Any match without `#` ranks above any with `#`; of two with `#`, the longer is more specific. Then any
    without `*` above any with `*`; two with `*` go word by word, and at the first word where one is `*` and
    the other is not, the literal one wins. Otherwise the shorter text ranks first. Ties, which Artemis leaves
    to hash order, are broken by the text, so that the file order never matters."""
    result = _artemis_compare(left, right)
    return result if result else (left > right) - (left < right)


def _artemis_compare(o1: str, o2: str) -> int:
    if ("#" in o1) != ("#" in o2):
        return 1 if "#" in o1 else -1
    if "#" in o1:
        return len(o2) - len(o1)
    if ("*" in o1) != ("*" in o2):
        return 1 if "*" in o1 else -1
    if "*" in o1:
        right = o2.split(".")
        for i, word in enumerate(o1.split(".")):
            if i >= len(right):
                return -1
            if (word == "*") != (right[i] == "*"):
                return 1 if word == "*" else -1
    return len(o1) - len(o2)


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


def _same_value(value: str, default: str) -> bool:
    try:
        return float(value) == float(default)
    except ValueError:
        return value.lower() == default.lower()


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
