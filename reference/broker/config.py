"""Read the subset of ActiveMQ Artemis `broker.xml` the reference broker implements.

One topology renders to Artemis and to the reference broker the same way, so the reference reads Artemis's
own file format, and it reads a file exactly when Artemis 2.40 does (issue 53; checked against Artemis's own
start-up by `interop fuzz --configs`, harness/fuzz/configs.py), or refuses it at a line for a recorded reason
(harness/fuzz/config_known.py). As Artemis: the file is UTF-8 text (a byte order mark is refused); the first
`<core>` below the root is read, whatever the root and its other children are (a document whose root is `<core>`
gives Artemis none: refused); `<core>` is first checked against the parts of artemis-configuration.xsd the
reference mirrors (`_check_schema`: the namespace, each child once, XSD value types, no unknown attributes); an
xs:boolean is true, false, 1 or 0 and reads true only for "true", as Java's Boolean.parseBoolean has it.
What it does with each element:

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
* `management-address` (default `activemq.management`): where AMQP management requests go (management_amqp.py).
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

import difflib
import functools
import logging
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.parsers import expat
from urllib.parse import parse_qsl, urlsplit

from .errors import ConfigError
from .logins import load_roles, load_users, login_files

ANYCAST, MULTICAST = "anycast", "multicast"
CORE_NS = "urn:activemq:core"
_XINCLUDE_NS = "http://www.w3.org/2001/XInclude"
_XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
_XML_NS = "http://www.w3.org/XML/1998/namespace"


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
PERMISSION_TYPES = OPERATIONS + ("deleteDurableQueue", "deleteNonDurableQueue", "browse", "createTempQueue",
                                 "deleteTempQueue", "view", "edit")
# Any other type: Artemis 2.40.0 (FileConfigurationParser.parseSecurityRoles) compares the type case-sensitively
# with its own and, for none of them, logs rolePermissionConfigurationError and ignores that permission; the broker
# starts. So does the reference (found by the configuration differential: type="SEND", the nightly of 2026-12-07).


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
    # where management requests go (management_amqp.py), Artemis's <management-address>
    management_address: str = "activemq.management"

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
                 "journal-sync-non-transactional", "security-enabled", "management-address"}
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
    "graceful-shutdown-timeout", "jmx-management-enabled", "jmx-domain",
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
    # Artemis takes the first <core> below the root, whatever the root is called, and reads nothing else of the
    # file (FileDeploymentManager: getElementsByTagName("core")); a document whose root is <core> has none.
    core = next((el for el in root.iter() if el is not root and el.tag.rpartition("}")[2] == "core"
                 and ":" not in el.tag.rpartition("}")[2]), None)
    if core is None:
        raise ConfigError(path, root.line, "expected a <core> element (urn:activemq:core) below the root element "
                          "(<configuration>); Artemis does not read a document whose root is <core>")
    include = next((el for el in root.iter() if el.tag.startswith(_XINCLUDE_NS + "}")), None)
    if include is not None:  # Artemis reads the file with XInclude on: an include changes what it reads
        raise ConfigError(path, include.line, "<xi:include> (XInclude) is not supported yet by the reference broker")
    _check_schema(core, path)
    security_seen = False
    security_settings = None
    for el in core:
        tag = _local(el.tag)
        if tag in _IGNORED_CORE:
            continue
        if tag in _REFUSED_CORE:
            raise ConfigError(path, el.line, f"<{tag}> is not supported yet by the reference broker")
        if tag == "name":
            cfg.name = (el.text or "").strip()  # Artemis takes an empty name
        elif tag == "persistence-enabled":
            cfg.persistence_enabled = _bool(el, path)
        elif tag == "journal-directory":
            cfg.journal_directory = _text(el, path)
        elif tag == "management-address":
            cfg.management_address = _text(el, path)
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
            # Artemis starts one acceptor per name, and which of two with one name depends on Java hash order
            # (a HashSet of their configurations): a second declaration is refused here
            first_line: dict[str, int] = {}
            for a in _children(el, "acceptor", path):
                if a.get("name") is not None and a.get("name") in first_line:
                    raise ConfigError(path, a.line, f"acceptor {a.get('name')!r} is declared twice (first at line "
                                      f"{first_line[a.get('name')]}; Artemis would start one of them)")
                first_line.setdefault(a.get("name"), a.line)
                acceptor = _acceptor(a, path)
                (cfg.acceptors if isinstance(acceptor, Acceptor) else cfg.skipped_acceptors).append(acceptor)
        elif tag == "addresses":
            cfg.addresses = _addresses(el, path)
        elif tag == "address-settings":
            cfg.address_settings = [_setting(s, path) for s in _children(el, "address-setting", path)]
        elif tag == "broker-connections":
            cfg.broker_connections = _broker_connections(el, path)
        else:  # in Artemis's schema (checked above), but neither read nor ignored here
            raise ConfigError(path, el.line, f"<{tag}> is not supported yet by the reference broker")
    if not security_seen:  # Artemis's default is true: say so in the file rather than rely on the default
        cfg.security_enabled, cfg.security_line = True, core.line
    if cfg.security_enabled and security_settings is not None:
        cfg.security_settings = _security_settings(security_settings, path)
    elif security_settings is not None:  # ignored, yet Artemis checks each match as it deploys the settings
        for setting in security_settings:
            match = setting.get("match") or ""
            if _local(setting.tag) == "security-setting" and "#" in match and match.index("#") != len(match) - 1:
                raise ConfigError(path, setting.line, f"security-setting {match!r}: '#' may only be the last "
                                  "character of a match")
    if not cfg.acceptors:
        if cfg.skipped_acceptors:
            first = cfg.skipped_acceptors[0]
            raise ConfigError(path, first.line, f"acceptor {first.name!r}: protocols={first.protocols} does not "
                              "include AMQP, and no other acceptor does (the broker serves AMQP only)")
        raise ConfigError(path, core.line, "no <acceptors>: the broker needs at least one AMQP acceptor")
    return cfg


# ---- Artemis's schema, for what it checks before anything is read ----------------------------------------------
#
# `artemis run` validates <core> against artemis-configuration.xsd (2.40) before FileConfigurationParser reads it:
# <core> in namespace urn:activemq:core, each of its children at most once (xsd:all) and known, each value of its
# XSD type (xs:boolean is true, false, 1 or 0 - and Artemis then reads it with Java's Boolean.parseBoolean, so
# "1" means false -, xs:int and xs:long optionally signed decimal digits in range, white space around them
# collapsed), unknown attributes refused. The tables below are the types of <core>'s and <address-setting>'s
# children, copied from that XSD: s string, b boolean, i int, l long, n integer, d double, A|B an enumeration,
# c an element with content of its own (checked where the reference reads it: _STRUCTURE).


def _types(spec: str) -> dict[str, str]:
    return dict(item.split(":", 1) for item in spec.split())


_CORE_TYPES = _types(
    "name:s system-property-prefix:s internal-naming-prefix:s amqp-use-core-subscription-naming:b "
    "resolve-protocols:b journal-datasync:b large-message-sync:b persistence-enabled:b "
    "scheduled-thread-pool-max-size:i thread-pool-max-size:i graceful-shutdown-enabled:b "
    "graceful-shutdown-timeout:l security-enabled:b security-invalidation-interval:l "
    "authentication-cache-size:l authorization-cache-size:l journal-lock-acquisition-timeout:l "
    "wild-card-routing-enabled:b management-address:s management-notification-address:s cluster-user:s "
    "cluster-password:s password-codec:s mask-password:b log-delegate-factory-class-name:s "
    "jmx-management-enabled:b jmx-domain:s jmx-use-broker-name:b message-counter-enabled:b "
    "message-counter-sample-period:l message-counter-max-day-history:i connection-ttl-override:l "
    "connection-ttl-check-interval:l configuration-file-refresh-period:l temporary-queue-namespace:s "
    "async-connection-execution-enabled:b transaction-timeout:l transaction-timeout-scan-period:l "
    "message-expiry-scan-period:l message-expiry-thread-priority:i address-queue-scan-period:l id-cache-size:i "
    "persist-id-cache:b remoting-incoming-interceptors:c remoting-outgoing-interceptors:c "
    "persist-delivery-count-before-delivery:b max-redelivery-records:l populate-validated-user:b "
    "reject-empty-validated-user:b mqtt-session-scan-interval:l mqtt-session-state-persistence-timeout:l "
    "connectors:c acceptors:c broadcast-groups:c discovery-groups:c diverts:c queues:c bridges:c federations:c "
    "ha-policy:c cluster-connections:c broker-connections:c connection-routers:c grouping-handler:c "
    "paging-directory:s bindings-directory:s create-bindings-dir:b page-max-concurrent-io:i read-whole-page:b "
    "journal-directory:s journal-retention-directory:c node-manager-lock-directory:s create-journal-dir:b "
    "journal-type:ASYNCIO|NIO|MAPPED journal-buffer-timeout:l journal-device-block-size:l journal-buffer-size:s "
    "journal-sync-transactional:b journal-sync-non-transactional:b log-journal-write-rate:b journal-file-size:s "
    "journal-min-files:i journal-pool-files:i journal-compact-percentage:i journal-compact-min-files:i "
    "journal-max-io:i journal-file-open-timeout:i server-dump-interval:l global-max-messages:l "
    "global-max-size-percent-of-jvm-max-memory:s global-max-size:s max-disk-usage:i min-disk-free:s "
    "disk-scan-period:l memory-warning-threshold:i memory-measure-interval:l large-messages-directory:s store:c "
    "critical-analyzer:b critical-analyzer-timeout:l critical-analyzer-check-period:l "
    "critical-analyzer-policy:LOG|HALT|SHUTDOWN page-sync-timeout:i mirror-ack-manager-queue-attempts:i "
    "mirror-ack-manager-page-attempts:i mirror-ack-manager-retry-delay:i mirror-ack-manager-warn-unacked:b "
    "mirror-page-transaction:b suppress-session-notifications:b literal-match-markers:s "
    "view-permission-method-match-pattern:s management-message-rbac:b management-rbac-prefix:s "
    "security-settings:c broker-plugins:c metrics-plugin:c metrics:c address-settings:c "
    "resource-limit-settings:c connector-services:c addresses:c network-check-list:s network-check-URL-list:s "
    "network-check-period:l network-check-timeout:l network-check-NIC:s network-check-ping-command:s "
    "network-check-ping6-command:s wildcard-addresses:c "
)
_SETTING_TYPES = _types(
    "dead-letter-address:s auto-create-dead-letter-resources:b dead-letter-queue-prefix:s "
    "dead-letter-queue-suffix:s expiry-address:s auto-create-expiry-resources:b expiry-queue-prefix:s "
    "expiry-queue-suffix:s no-expiry:b expiry-delay:l min-expiry-delay:l max-expiry-delay:l redelivery-delay:l "
    "redelivery-delay-multiplier:d redelivery-collision-avoidance-factor:d max-redelivery-delay:l "
    "max-delivery-attempts:i max-size-bytes:s max-size-messages:l page-limit-bytes:s page-limit-messages:l "
    "max-size-bytes-reject-threshold:l page-size-bytes:s page-max-cache-size:i max-read-page-messages:i "
    "prefetch-page-messages:i max-read-page-bytes:s prefetch-page-bytes:s "
    "address-full-policy:DROP|FAIL|PAGE|BLOCK page-full-policy:DROP|FAIL message-counter-history-day-limit:i "
    "last-value-queue:b default-last-value-queue:b default-last-value-key:s default-non-destructive:b "
    "default-exclusive-queue:b default-group-rebalance:b default-group-rebalance-pause-dispatch:b "
    "default-group-buckets:i default-group-first-key:s default-consumers-before-dispatch:i "
    "default-delay-before-dispatch:l redistribution-delay:l send-to-dla-on-no-route:b slow-consumer-threshold:l "
    "slow-consumer-threshold-measurement-unit:MESSAGES_PER_SECOND|MESSAGES_PER_MINUTE|MESSAGES_PER_HOUR|"
    "MESSAGES_PER_DAY slow-consumer-policy:KILL|NOTIFY slow-consumer-check-period:l auto-create-jms-queues:b "
    "auto-delete-jms-queues:b auto-create-jms-topics:b auto-delete-jms-topics:b auto-create-queues:b "
    "auto-delete-queues:b auto-delete-created-queues:b auto-delete-queues-delay:l "
    "auto-delete-queues-message-count:l auto-delete-queues-skip-usage-check:b config-delete-queues:OFF|FORCE "
    "auto-create-addresses:b auto-delete-addresses:b auto-delete-addresses-delay:l "
    "auto-delete-addresses-skip-usage-check:b config-delete-addresses:OFF|FORCE config-delete-diverts:OFF|FORCE "
    "management-browse-page-size:i management-message-attribute-size-limit:i default-purge-on-no-consumers:b "
    "default-max-consumers:i default-queue-routing-type:ANYCAST|MULTICAST "
    "default-address-routing-type:ANYCAST|MULTICAST default-consumer-window-size:i default-ring-size:l "
    "retroactive-message-count:l enable-metrics:b enable-ingress-timestamp:b id-cache-size:i "
    "initial-queue-buffer-size:i "
)
# Strings of the XSD that Artemis parses as byte sizes (ByteUtil.convertTextBytes): z
for _name in ("journal-buffer-size", "journal-file-size", "global-max-size"):
    _CORE_TYPES[_name] = "z"
for _name in ("max-size-bytes", "page-size-bytes", "page-limit-bytes", "max-read-page-bytes", "prefetch-page-bytes"):
    _SETTING_TYPES[_name] = "z"
_BYTES = re.compile(r"\s*[+-]?[0-9]+\s*(k|kb|kib|m|mb|mib|g|gb|gib)?\s*", re.IGNORECASE)
_INT_RANGES = {"i": (-2**31, 2**31 - 1), "l": (-2**63, 2**63 - 1), "n": (None, None)}
_DOUBLE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?INF|NaN")


def _xsd_value(kind: str, text: str) -> str | None:
    """Why `text` is not a value of XSD type `kind` (see _CORE_TYPES), or None when it is."""
    if kind in ("s", "c"):
        return None
    if kind == "z":
        return None if _BYTES.fullmatch(text) else "a byte size (digits, then K, KB, KiB, M, MB, MiB, G, GB or GiB)"
    value = " ".join(text.split())  # every type but string collapses white space
    if kind == "b":  # empty (not even white space): the element's XSD default applies (_NO_DEFAULT: none)
        return None if value in ("true", "false", "1", "0") or text == "" else "true or false"
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        ok = re.fullmatch(r"[+-]?[0-9]+", value) is not None and (lo is None or lo <= int(value) <= hi)
        return None if ok else {"i": "an int", "l": "a long", "n": "an integer"}[kind]
    if kind == "d":
        return None if _DOUBLE.fullmatch(value) else "a number"
    choices = kind.split("|")
    return None if text in choices else "one of " + ", ".join(choices)


# Element-only content the reference reads: element -> (children allowed: name -> (min, max) count,
# attributes: name -> (XSD type, required)). xsd:all containers allow each child once; sequences repeat.
_UNBOUNDED = 1 << 30
_STRUCTURE: dict[str, tuple[dict[str, tuple[int, int]], dict[str, tuple[str, bool]]]] = {
    "acceptors": ({"acceptor": (1, _UNBOUNDED)}, {}),
    "acceptor": ({}, {"name": ("s", False)}),
    "addresses": ({"address": (0, _UNBOUNDED)}, {}),
    "address": ({"anycast": (0, 1), "multicast": (0, 1)}, {"name": ("s", True)}),
    "anycast": ({"queue": (0, _UNBOUNDED)}, {}),
    "multicast": ({"queue": (0, _UNBOUNDED)}, {}),
    "queue": ({"filter": (0, 1), "durable": (0, 1), "user": (0, 1)}, {
        "name": ("s", True), "max-consumers": ("n", False), "purge-on-no-consumers": ("b", False),
        "exclusive": ("b", False), "group-rebalance": ("b", False), "group-rebalance-pause-dispatch": ("b", False),
        "group-buckets": ("i", False), "group-first-key": ("s", False), "last-value": ("b", False),
        "last-value-key": ("s", False), "non-destructive": ("b", False), "consumers-before-dispatch": ("i", False),
        "delay-before-dispatch": ("l", False), "ring-size": ("l", False), "enabled": ("b", False)}),
    "filter": ({}, {"string": ("s", True)}),
    "address-settings": ({"address-setting": (0, _UNBOUNDED)}, {}),
    "address-setting": ({name: (0, 1) for name in _SETTING_TYPES}, {"match": ("s", True)}),
    "security-settings": ({"security-setting": (0, _UNBOUNDED), "security-setting-plugin": (0, 1),
                           "role-mapping": (0, _UNBOUNDED)}, {}),
    "security-setting": ({"permission": (0, _UNBOUNDED)}, {"match": ("s", True)}),
    "permission": ({}, {"type": ("s", True), "roles": ("s", True)}),
    "role-mapping": ({}, {"from": ("s", True), "to": ("s", True)}),
    "broker-connections": ({"amqp-connection": (0, _UNBOUNDED)}, {}),
    "amqp-connection": ({name: (0, _UNBOUNDED) for name in ("sender", "receiver", "peer", "mirror", "federation")},
                        {"uri": ("s", True), "name": ("s", True), "auto-start": ("b", False),
                         "reconnect-attempts": ("i", False), "retry-interval": ("l", False), "user": ("s", False),
                         "password": ("s", False)}),
    "sender": ({}, {"address-match": ("s", False), "queue-name": ("s", False)}),
    "receiver": ({}, {"address-match": ("s", False), "queue-name": ("s", False)}),
    "peer": ({}, {"address-match": ("s", False), "queue-name": ("s", False)}),
    "mirror": ({"property": (0, _UNBOUNDED)}, {
        "message-acknowledgements": ("b", False), "queue-creation": ("b", False), "queue-removal": ("b", False),
        "durable": ("b", False), "sync": ("b", False), "address-filter": ("s", False)}),
}
_LEAF_TYPES = {"durable": "b", "user": "s"}  # the leaf children of <queue>
_NO_DEFAULT = {"send-to-dla-on-no-route"}  # the one boolean of the tables without an XSD default
_TEXT_CONTENT = {"acceptor"}  # of _STRUCTURE's elements, the ones whose content is text


def _check_schema(core, path) -> None:
    """What Artemis's XSD validation refuses in <core> (see above), before the reference reads the file."""
    namespace = core.tag.rpartition("}")[0]  # _parse_xml names an element NAMESPACE}LOCAL
    if namespace != CORE_NS:
        raise ConfigError(path, core.line, f"<core> must be in namespace {CORE_NS} (Artemis validates it against "
                          f"artemis-configuration.xsd; got {namespace or 'none'})")
    if core.has_text:
        raise ConfigError(path, core.line, "<core> holds text (Artemis's XSD: it takes elements only)")
    _check_children(core, {name: (0, 1) for name in _CORE_TYPES}, _CORE_TYPES, path)


def _check_children(el, allowed: dict[str, tuple[int, int]], types: dict[str, str], path) -> None:
    counts: dict[str, int] = {}
    for child in el:
        namespace, _, tag = child.tag.rpartition("}")
        if namespace != CORE_NS:
            raise ConfigError(path, child.line, f"<{tag}> in <{_local(el.tag)}> must be in namespace {CORE_NS} "
                              "(Artemis's XSD knows no other)")
        if tag not in allowed:
            if len(allowed) >= 12:  # <core>, <address-setting>: too many to list
                near = difflib.get_close_matches(tag, list(allowed), n=1, cutoff=0.75)
                raise ConfigError(path, child.line, f"unknown element <{tag}> in <{_local(el.tag)}>"
                                  + (f"; did you mean <{near[0]}>?" if near else ""))
            expected = ", ".join(f"<{name}>" for name in sorted(allowed)) or "no elements"
            raise ConfigError(path, child.line, f"<{_local(el.tag)}>: unexpected <{tag}> (expected {expected})")
        counts[tag] = counts.get(tag, 0) + 1
        if counts[tag] > allowed[tag][1]:
            raise ConfigError(path, child.line, f"<{_local(el.tag)}>: <{tag}> given twice (Artemis's XSD allows it "
                              "once)" if allowed[tag][1] == 1 else f"<{_local(el.tag)}>: too many <{tag}>")
        _check_element(child, tag, types.get(tag, _LEAF_TYPES.get(tag, "c")), path)
    for tag, (low, _) in allowed.items():
        if counts.get(tag, 0) < low:
            raise ConfigError(path, el.line, f"<{_local(el.tag)}> needs at least one <{tag}>")


def _check_element(el, tag: str, kind: str, path) -> None:
    structure = _STRUCTURE.get(tag)
    if structure is None:
        if kind != "c":
            extra = [k for k in el.attrib if not k.startswith((_XSI_NS + "}", _XML_NS + "}"))]
            if extra:
                raise ConfigError(path, el.line, f"<{tag}>: attribute {_local(extra[0])}={el.attrib[extra[0]]!r} is "
                                  "not allowed (Artemis's XSD: a value element takes no attributes)")
            if len(el):
                raise ConfigError(path, el[0].line, f"<{tag}> holds a value, not <{_local(el[0].tag)}>")
            why = _xsd_value(kind, el.text or "")
            if why is None and kind == "b" and not (el.text or "").strip() and tag in _NO_DEFAULT:
                why = "true or false (it has no default)"
            if why is not None:
                source = "Artemis's byte sizes" if kind == "z" else "Artemis's XSD"
                raise ConfigError(path, el.line, f"<{tag}>: expected {why}, got {(el.text or '')!r} ({source})")
        return
    children, attributes = structure
    if el.has_text and tag not in _TEXT_CONTENT:
        raise ConfigError(path, el.line, f"<{tag}> holds text (Artemis's XSD: it takes elements only)")
    for key, value in el.attrib.items():
        if key.startswith((_XML_NS + "}", _XSI_NS + "}")):
            continue  # xml:lang, xml:base ... (the XSD's xml:specialAttrs)
        if key not in attributes:
            raise ConfigError(path, el.line, f"<{tag}>: attribute {_local(key)}={value!r} is not allowed "
                              f"(Artemis's XSD; expected: {', '.join(sorted(attributes)) or 'none'})")
        why = _xsd_value(attributes[key][0], value)
        if why is not None:
            raise ConfigError(path, el.line, f"<{tag}>: attribute {key}: expected {why}, got {value!r}")
    for key, (_, required) in attributes.items():
        if required and key not in el.attrib:
            raise ConfigError(path, el.line, f"<{tag}> needs a {key} attribute")
    if children or not len(el):
        _check_children(el, children, _SETTING_TYPES if tag == "address-setting" else {}, path)
    if tag == "amqp-connection" and not len(el):  # its XSD choice is required once at least
        raise ConfigError(path, el.line, "<amqp-connection> needs at least one of <sender>, <receiver>, <peer>, "
                          "<mirror> or <federation> (Artemis's XSD)")


# ---- element readers -------------------------------------------------------------------------------------------


def _acceptor(el, path) -> Acceptor | SkippedAcceptor:
    name = el.get("name") or "acceptor"
    url = _text(el, path)
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        parts = None
    after_host = parts.netloc.rpartition("]")[2] if parts else ""  # an IPv6 host is in brackets
    # the scheme as written: urlsplit lowers it, Artemis does not ("Schema TCP not found")
    if parts is None or not url.startswith("tcp://") or not after_host.rpartition(":")[1]:
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
    # an empty protocols= is Artemis's "every protocol", AMQP among them
    if protocols is not None and protocols.strip() and "AMQP" not in [p.strip() for p in protocols.upper().split(",")]:
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


def _java_flag(params: dict, key: str) -> bool:
    """A URL parameter read as Artemis reads it (ConfigurationHelper: Java's Boolean.valueOf): "true" in any case
    is true, anything else false."""
    return params.get(key, "false").strip().lower() == "true"


def _acceptor_tls(name: str, params: dict, path, line: int) -> AcceptorTls | None:
    """The TLS of an acceptor URL: keyStorePath and trustStorePath are PEM files (the reference reads no Java
    keystore: keyStoreType and trustStoreType must be PEM when given); keyStorePassword decrypts the key;
    trustStorePassword means nothing for PEM and is ignored; needClientAuth / wantClientAuth ask for a client
    certificate verified by trustStorePath; verifyHost=true is refused."""
    if not _java_flag(params, "sslEnabled"):
        return None

    def flag(key: str) -> bool:
        return _java_flag(params, key)

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
                logging.getLogger(__name__).warning(
                    "%s:%s: security-setting %r: permission type %r is none of %s: ignored, as Artemis does", path,
                    perm.line, match, kind, ", ".join(PERMISSION_TYPES))
                continue
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
    if not routings:  # AMQ229247 at start-up: "Address must support multicast and/or anycast"
        raise ConfigError(path, el.line, f"address {name!r}: needs <anycast> or <multicast> (or both)")
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


# A broker connection URI without a port: Artemis's Netty transport dials TransportConstants.DEFAULT_PORT (61616 in
# artemis-core-client 2.40.0; its config check accepts such a file, found by the configuration differential, seed 15).
CONNECTION_DEFAULT_PORT = 61616


def _connection_endpoints(uri: str, path, line: int,
                          what: str) -> tuple[tuple[tuple[str, int], ...], ConnectionTls | None]:
    """`tcp://HOST:PORT?PARAMS#ALT:PORT,tcp://ALT2:PORT` -> ((HOST, PORT), (ALT, PORT), (ALT2, PORT)) and the TLS
    the primary's parameters give (it applies to every endpoint: alternates carry no parameters). A primary without
    a port gets CONNECTION_DEFAULT_PORT (an alternate without one stays refused: no file showed what Artemis does)."""
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
        if i == 0 and split is not None and port is None and not split.netloc.endswith(":"):
            port = CONNECTION_DEFAULT_PORT  # no port: Artemis dials its transport's default, as the reference does
        if split is None or not text.startswith("tcp://") or not split.hostname or port is None:
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
    flags = {key: _java_flag(params, key) for key in ("sslEnabled", "verifyHost")}
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
    """An xs:boolean attribute as Artemis reads it (see _bool)."""
    if key not in attrs:
        return default
    text = " ".join(attrs[key].split())
    if text not in ("true", "false", "1", "0"):
        raise ConfigError(path, line, f"{what}: {key}: expected true or false, got {attrs[key]!r}")
    return text == "true"


def _attr_int(attrs: dict, key: str, default: int, lowest: int, path, line: int, what: str) -> int:
    if key not in attrs:
        return default
    text = " ".join(attrs[key].split())
    value = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None
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
            default = _DEFAULT_ONLY_SETTING[tag]
            if _SETTING_TYPES.get(tag) == "b":  # as Artemis reads it: "1" and empty are false
                value = str(_bool(child, path)).lower()
            else:
                value = _text(child, path)
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
        else:  # an address: empty is Artemis's "" (an address nothing is bound to), here no address at all
            values[tag] = os.path.expandvars((child.text or "").strip()) or None
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
    has_text = False  # text other than white space directly inside it, between its children too


def _parse_xml(data, path):
    """Parse with expat directly so that every element knows the line it starts on. Artemis reads the file as
    UTF-8 text (undecodable bytes become U+FFFD, the declared encoding plays no part) and parses that text, in
    which a byte order mark is content before the root ("Content is not allowed in prolog"): so here."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    if data.startswith("\ufeff"):
        raise ConfigError(path, 1, "a byte order mark before the XML declaration (Artemis reads the file as text and "
                          "refuses it: content is not allowed in prolog)")
    parser = expat.ParserCreate(namespace_separator="}")
    stack: list[_Element] = []
    roots: list[_Element] = []

    def start(tag, attrs):
        el = _Element(tag, attrs)
        el.line = parser.CurrentLineNumber
        (stack[-1].append(el) if stack else roots.append(el))
        stack.append(el)

    def text(chars):
        if stack and chars.strip():
            stack[-1].has_text = True
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
    """An xs:boolean (true, false, 1, 0, or empty for its default: _check_schema) as Artemis reads it: Java's
    Boolean.parseBoolean of the text, true only for "true" ("1" and an empty element are false)."""
    text = " ".join((el.text or "").split())
    if text not in ("true", "false", "1", "0", ""):
        raise ConfigError(path, el.line, f"<{_local(el.tag)}>: expected true or false, got {text!r}")
    return text == "true"


def _int(el, path) -> int:
    text = " ".join((el.text or "").split())
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ConfigError(path, el.line, f"<{_local(el.tag)}>: expected an integer, got {text!r}")
    return int(text)
