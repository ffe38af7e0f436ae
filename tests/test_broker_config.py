"""The broker.xml parser of the reference broker (reference/broker/config.py).

* A full stock `broker.xml`, as `artemis create` writes it for Artemis 2.3x, and what the reference does
  with each of its elements. It runs unchanged: Artemis's security is on by default, and so is the reference's
  (its security-settings are read; `load_config` also reads the login files beside it). Most cases here turn it
  off with one line (`security_off`) so that they compare the rest.
* Every error path, each with the exact line it names and on one line.
* Address-setting merge by specificity, and Artemis's match syntax, checked against a transcription of
  Artemis's own `Match` / `MatchComparator` (artemis-server, core/settings/impl) as an oracle.
* The files `harness.vendors.artemis.render.render_broker_xml` writes for the topologies parse.

A known divergence from Artemis or from the parser's own contract (its docstring: "refused ...: anything else
that would change behaviour") is pinned as `xfail(strict=True)` until it is fixed; none is open today.
"""

from __future__ import annotations

import random
import re

import pytest

from harness.vendors.artemis.render import render_broker_xml
from harness.tlsca import TestPki
from harness.topology import TOPOLOGIES_DIR, load_topology, topology_path
from reference.broker.config import (
    ANYCAST,
    DEFAULT_SETTINGS,
    MULTICAST,
    PERMISSION_TYPES,
    AcceptorTls,
    AddressDef,
    ConfigError,
    ConnectionTls,
    QueueDef,
    SecuritySetting,
    load_config,
    match_address,
    parse_config,
)

# ---- a stock broker.xml ------------------------------------------------------------------------------------------
#
# What `artemis create mybroker` (2.3x, defaults: NIO-capable host, fsync on, all protocol acceptors) writes to
# etc/broker.xml, placeholders filled in. Each part is (key, text); a key names a part the reference once
# refused (STOCK_ACCEPTED), so that `stock(without=...)` can leave it out. Comments are ours, abridged; element
# names and values are the stock ones.

_STOCK_PARTS: list[tuple[str | None, str]] = [
    (None, """\
<?xml version='1.0'?>
<!-- Licensed to the Apache Software Foundation (ASF) under the Apache License, Version 2.0. -->

<configuration xmlns="urn:activemq"
               xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
               xmlns:xi="http://www.w3.org/2001/XInclude"
               xsi:schemaLocation="urn:activemq /schema/artemis-configuration.xsd">

   <core xmlns="urn:activemq:core" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="urn:activemq:core ">

      <name>mybroker</name>


      <persistence-enabled>true</persistence-enabled>

"""),
    ("max-redelivery-records", """\
      <!-- keep 1: the fewest redelivery records in the journal -->
      <max-redelivery-records>1</max-redelivery-records>

"""),
    (None, """\
      <!-- ASYNCIO (libaio), MAPPED (mmap) or NIO (plain Java files) -->
      <journal-type>ASYNCIO</journal-type>

      <paging-directory>data/paging</paging-directory>

      <bindings-directory>data/bindings</bindings-directory>

      <journal-directory>data/journal</journal-directory>

      <large-messages-directory>data/large-messages</large-messages-directory>

      <!-- journal retention, commented out by default:
      <journal-retention-directory period="7" unit="DAYS"
                                   storage-limit="10G">data/retention</journal-retention-directory>
      -->

      <journal-datasync>true</journal-datasync>

      <journal-min-files>2</journal-min-files>

      <journal-pool-files>10</journal-pool-files>

      <journal-device-block-size>4096</journal-device-block-size>

      <journal-file-size>10M</journal-file-size>

      <!-- computed by `artemis create` from a short write benchmark of this disk -->
      <journal-buffer-timeout>12000</journal-buffer-timeout>

      <!-- with ASYNCIO: the libaio queue depth -->
      <journal-max-io>4096</journal-max-io>

      <!-- network health check, commented out by default:
      <network-check-NIC>theNicName</network-check-NIC>
      <network-check-period>10000</network-check-period>
      <network-check-list>10.0.0.1</network-check-list>
      -->

      <!-- disk monitoring period in ms -->
      <disk-scan-period>5000</disk-scan-period>

      <!-- block producers once the disk is this full (percent) -->
      <max-disk-usage>90</max-disk-usage>

      <!-- detect dead locks and other issues -->
      <critical-analyzer>true</critical-analyzer>

      <critical-analyzer-timeout>120000</critical-analyzer-timeout>

      <critical-analyzer-check-period>60000</critical-analyzer-check-period>

      <critical-analyzer-policy>HALT</critical-analyzer-policy>


      <page-sync-timeout>1628000</page-sync-timeout>


      <!-- global-max-size defaults to half of -Xmx:
      <global-max-size>100Mb</global-max-size> -->

      <global-max-messages>-1</global-max-messages>

      <acceptors>

         <!-- useEpoll: Netty epoll on Linux; amqpCredits / amqpLowCredits: AMQP producer credit and top-up mark;
              amqpDuplicateDetection; amqpMinLargeMessageSize: bytes from which a message is stored as a file -->

         <!-- Acceptor for every supported protocol -->
         <acceptor name="artemis">tcp://0.0.0.0:61616?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;amqpMinLargeMessageSize=102400;protocols=CORE,AMQP,STOMP,HORNETQ,MQTT,OPENWIRE;useEpoll=true;amqpCredits=1000;amqpLowCredits=300;amqpDuplicateDetection=true;supportAdvisory=false;suppressInternalManagementObjects=false</acceptor>

         <!-- AMQP Acceptor. Listens on default AMQP port for AMQP traffic. -->
         <acceptor name="amqp">tcp://0.0.0.0:5672?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=AMQP;useEpoll=true;amqpCredits=1000;amqpLowCredits=300;amqpMinLargeMessageSize=102400;amqpDuplicateDetection=true</acceptor>

"""),
    ("stomp-acceptor", """\
         <!-- STOMP Acceptor. -->
         <acceptor name="stomp">tcp://0.0.0.0:61613?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=STOMP;useEpoll=true</acceptor>

"""),
    ("hornetq-acceptor", """\
         <!-- HornetQ Compatibility Acceptor. Enables HornetQ Core and STOMP for legacy HornetQ clients. -->
         <acceptor name="hornetq">tcp://0.0.0.0:5445?anycastPrefix=jms.queue.;multicastPrefix=jms.topic.;protocols=HORNETQ,STOMP;useEpoll=true</acceptor>

"""),
    ("mqtt-acceptor", """\
         <!-- MQTT Acceptor -->
         <acceptor name="mqtt">tcp://0.0.0.0:1883?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=MQTT;useEpoll=true</acceptor>

"""),
    (None, """\
      </acceptors>


"""),
    ("security-settings", """\
      <security-settings>
         <security-setting match="#">
            <permission type="createNonDurableQueue" roles="amq"/>
            <permission type="deleteNonDurableQueue" roles="amq"/>
            <permission type="createDurableQueue" roles="amq"/>
            <permission type="deleteDurableQueue" roles="amq"/>
            <permission type="createAddress" roles="amq"/>
            <permission type="deleteAddress" roles="amq"/>
            <permission type="consume" roles="amq"/>
            <permission type="browse" roles="amq"/>
            <permission type="send" roles="amq"/>
            <!-- needed by `artemis data imp` -->
            <permission type="manage" roles="amq"/>
         </security-setting>
      </security-settings>

"""),
    (None, """\
      <address-settings>
         <!-- if you define auto-create on certain queues, management has to be auto-create -->
         <address-setting match="activemq.management#">
            <dead-letter-address>DLQ</dead-letter-address>
            <expiry-address>ExpiryQueue</expiry-address>
            <redelivery-delay>0</redelivery-delay>
            <!-- with -1 only the global-max-size is in use for limiting -->
            <max-size-bytes>-1</max-size-bytes>
            <message-counter-history-day-limit>10</message-counter-history-day-limit>
            <address-full-policy>PAGE</address-full-policy>
            <auto-create-queues>true</auto-create-queues>
            <auto-create-addresses>true</auto-create-addresses>
         </address-setting>
         <!--default for catch all-->
         <address-setting match="#">
            <dead-letter-address>DLQ</dead-letter-address>
            <expiry-address>ExpiryQueue</expiry-address>
            <redelivery-delay>0</redelivery-delay>

            <!-- paging starts at whichever of the two limits is hit first; -1: unlimited -->
            <max-size-bytes>-1</max-size-bytes>

            <max-size-messages>-1</max-size-messages>

            <!-- the size of each page file -->
            <page-size-bytes>10M</page-size-bytes>

"""),
    ("max-read-page", """\
            <!-- how many messages / bytes are read from paging into the queue -->
            <max-read-page-messages>-1</max-read-page-messages>

            <max-read-page-bytes>20M</max-read-page-bytes>

"""),
    (None, """\
            <message-counter-history-day-limit>10</message-counter-history-day-limit>
            <address-full-policy>PAGE</address-full-policy>
            <auto-create-queues>true</auto-create-queues>
            <auto-create-addresses>true</auto-create-addresses>
            <auto-delete-queues>false</auto-delete-queues>
            <auto-delete-addresses>false</auto-delete-addresses>
         </address-setting>
      </address-settings>

      <addresses>
         <address name="DLQ">
            <anycast>
               <queue name="DLQ" />
            </anycast>
         </address>
         <address name="ExpiryQueue">
            <anycast>
               <queue name="ExpiryQueue" />
            </anycast>
         </address>

      </addresses>


      <!-- Uncomment to log broker events with the LoggingActiveMQServerPlugin
      <broker-plugins>
         <broker-plugin class-name="org.apache.activemq.artemis.core.server.plugin.impl.LoggingActiveMQServerPlugin">
            <property key="LOG_ALL_EVENTS" value="true"/>
         </broker-plugin>
      </broker-plugins>
      -->

   </core>
</configuration>
"""),
]

# The stock parts the reference once refused, in file order, and what it does with them now: (part key, the
# text of its first line, what the reference does, why).
STOCK_ACCEPTED = [
    ("max-redelivery-records", "<max-redelivery-records>", "ignored",
     "Artemis 2.29+ writes it; it only tunes how redelivery counts are journaled"),
    ("stomp-acceptor", '<acceptor name="stomp">', "skipped",
     "the reference serves AMQP only: an acceptor without AMQP is not opened (a notice says so)"),
    ("hornetq-acceptor", '<acceptor name="hornetq">', "skipped",
     "same; its anycastPrefix / multicastPrefix concern HornetQ and STOMP clients only"),
    ("mqtt-acceptor", '<acceptor name="mqtt">', "skipped", "same"),
    ("security-settings", "<security-settings>", "ignored",
     "permissions mean nothing with <security-enabled>false</security-enabled>, as in Artemis"),
    ("max-read-page", "<max-read-page-messages>", "ignored",
     "paging knobs (2.28+), like max-size-bytes; the reference does not page"),
]

_STOCK_KEYS = [key for key, _ in _STOCK_PARTS if key]


def stock(*, without: tuple[str, ...] | list[str] = ()) -> str:
    unknown = set(without) - set(_STOCK_KEYS)
    assert not unknown, unknown
    return "".join(text for key, text in _STOCK_PARTS if key is None or key not in without)


def security_off(text: str) -> str:
    """The one line a stock file needs for the reference: security off (the reference has none)."""
    name = "      <name>mybroker</name>\n"
    assert text.count(name) == 1
    return text.replace(name, name + "\n      <security-enabled>false</security-enabled>\n")


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line number of the nth line that contains `needle`."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) >= nth, f"{needle!r} occurs {len(hits)} time(s)"
    return hits[nth - 1]


def error_of(text: str, path: str = "broker.xml") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, path)
    err = info.value
    assert "\n" not in str(err), f"not one line: {err}"
    assert str(err) == f"{err.path}:{err.line}: {err.message}"
    return err


# ---- the stock file ----------------------------------------------------------------------------------------------


def test_stock_file_runs_with_security_on_by_default():
    """A stock Artemis broker.xml has no <security-enabled>, so Artemis runs it with security ON, and so does the
    reference: its one security-setting (`#`, every permission to role amq) is read."""
    text = stock()
    cfg = parse_config(text)
    assert cfg.security_enabled is True and cfg.security_line == line_of(text, "<core xmlns=")
    assert [(s.match, s.line) for s in cfg.security_settings] == [("#", line_of(text, '<security-setting match="#">'))]
    assert cfg.security_settings[0].roles == {kind: frozenset({"amq"}) for kind in PERMISSION_TYPES
                                              if f'type="{kind}"' in text}


def test_stock_file_with_security_off_runs_unchanged_otherwise():
    text = security_off(stock())
    cfg = parse_config(text, "etc/broker.xml")
    assert [(a.name, a.host, a.port) for a in cfg.acceptors] == [("artemis", "0.0.0.0", 61616),
                                                                  ("amqp", "0.0.0.0", 5672)]
    assert [(s.name, s.protocols, s.line) for s in cfg.skipped_acceptors] == [
        ("stomp", "STOMP", line_of(text, '<acceptor name="stomp">')),
        ("hornetq", "HORNETQ,STOMP", line_of(text, '<acceptor name="hornetq">')),
        ("mqtt", "MQTT", line_of(text, '<acceptor name="mqtt">')),
    ]
    assert [a.name for a in cfg.addresses] == ["DLQ", "ExpiryQueue"]


def summary(cfg) -> tuple:
    """What a config means, without line numbers (leaving a part out moves the lines after it)."""
    return (cfg.name, cfg.persistence_enabled, cfg.journal_directory, cfg.journal_datasync,
            [(a.name, a.host, a.port) for a in cfg.acceptors],
            [(a.name, a.routings, a.queues) for a in cfg.addresses],
            [(s.match, s.values) for s in cfg.address_settings],
            {address: cfg.settings_for(address) for address in ("orders", "activemq.management.x", "DLQ")})


@pytest.mark.parametrize("key, needle, what, why", STOCK_ACCEPTED, ids=[r[0] for r in STOCK_ACCEPTED])
def test_each_formerly_refused_stock_part_is_accepted(key, needle, what, why):
    text = security_off(stock(without=[k for k, *_ in STOCK_ACCEPTED if k != key]))
    bare = parse_config(security_off(stock(without=[k for k, *_ in STOCK_ACCEPTED])))
    cfg = parse_config(text)
    assert summary(cfg) == summary(bare), why  # ignored or skipped: it changes nothing served
    skipped = [(s.name, s.line) for s in cfg.skipped_acceptors]
    if what == "skipped":
        assert skipped == [(key.removesuffix("-acceptor"), line_of(text, needle))], why
    else:
        assert skipped == [], why


def test_stock_file_without_security_settings_parses_with_stock_values():
    text = security_off(stock(without=["security-settings"]))
    cfg = parse_config(text, "etc/broker.xml")
    assert cfg.path == "etc/broker.xml"
    assert cfg.name == "mybroker"
    assert cfg.persistence_enabled is True
    assert cfg.journal_directory == "data/journal"
    assert cfg.journal_datasync is True
    # Long acceptor query strings: only host, port and `protocols` matter; the rest is Netty/AMQP tuning.
    assert [(a.name, a.host, a.port) for a in cfg.acceptors] == [("artemis", "0.0.0.0", 61616),
                                                                  ("amqp", "0.0.0.0", 5672)]
    assert cfg.addresses == [
        AddressDef("DLQ", (ANYCAST,), (QueueDef("DLQ", ANYCAST, True),), cfg.addresses[0].line),
        AddressDef("ExpiryQueue", (ANYCAST,), (QueueDef("ExpiryQueue", ANYCAST, True),), cfg.addresses[1].line),
    ]
    assert [a.line for a in cfg.addresses] == [line_of(text, '<address name="DLQ">'),
                                               line_of(text, '<address name="ExpiryQueue">')]
    assert [s.match for s in cfg.address_settings] == ["activemq.management#", "#"]
    # Paging (max-read-page-* included), message-counter and auto-delete knobs are accepted and dropped: only
    # behaviour-relevant values stay.
    assert cfg.address_settings[1].values == {
        "dead-letter-address": "DLQ", "expiry-address": "ExpiryQueue", "redelivery-delay": 0,
        "auto-create-queues": True, "auto-create-addresses": True,
    }
    assert cfg.settings_for("orders") == {
        **DEFAULT_SETTINGS, "dead-letter-address": "DLQ", "expiry-address": "ExpiryQueue",
        "max-delivery-attempts": 10, "default-address-routing-type": MULTICAST,
    }


def test_missing_security_enabled_means_true_like_artemis():
    text = stock(without=["security-settings"])
    cfg = parse_config(text)
    assert cfg.security_enabled is True and cfg.security_settings == []  # nobody may do anything


def test_stock_file_from_disk_needs_the_login_files_beside_it(tmp_path):
    path = tmp_path / "broker.xml"
    path.write_text(stock())
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"{path}:{line_of(stock(), '<core xmlns=')}: <security-enabled>true needs "
                               f"{tmp_path / 'artemis-users.properties'} (the reference reads Artemis's properties "
                               "login module files beside broker.xml)")
    (tmp_path / "artemis-users.properties").write_text("# users\nadmin = secret\nbob: pw\n")
    (tmp_path / "artemis-roles.properties").write_text("amq = admin, bob\nviewers=bob\n")
    cfg = load_config(path)
    assert cfg.users == {"admin": "secret", "bob": "pw"}
    assert cfg.user_roles == {"admin": frozenset({"amq"}), "bob": frozenset({"amq", "viewers"})}


# ---- error paths, each on its exact line -------------------------------------------------------------------------


def doc(core: str, *, acceptor: bool = True, before_core: str = "", security: bool = False) -> str:
    """A broker.xml around `core`'s lines; line 1 is the XML declaration, line 3 <core>, line 4 the first line
    of `core`. Unless `security`, the closing </core> line says <security-enabled>false (required)."""
    acc = '<acceptors><acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP</acceptor></acceptors>\n'
    return ('<?xml version="1.0"?>\n'
            '<configuration xmlns="urn:activemq">\n'
            f'{before_core}<core xmlns="urn:activemq:core">\n'
            f"{core}"
            f"{acc if acceptor else ''}"
            f"{'' if security else '<security-enabled>false</security-enabled>'}</core>\n"
            "</configuration>\n")


def test_minimal_document_parses_with_defaults():
    cfg = parse_config(doc(""), "b.xml")
    assert cfg.name == "reference-broker" and cfg.persistence_enabled and cfg.journal_datasync
    assert cfg.journal_directory == "data/journal"
    assert [(a.name, a.host, a.port, a.line) for a in cfg.acceptors] == [("clients", "127.0.0.1", 0, 4)]
    assert cfg.addresses == [] and cfg.address_settings == []
    assert cfg.settings_for("anything") == DEFAULT_SETTINGS


def test_a_bare_core_root_is_refused():
    """Artemis takes the first <core> *below* the root: a document whose root is <core> gives it none (and
    `artemis run` fails)."""
    text = ('<core xmlns="urn:activemq:core">\n'
            '<acceptors><acceptor name="a">tcp://127.0.0.1:0</acceptor></acceptors>\n'
            '<security-enabled>false</security-enabled>\n</core>\n')
    err = error_of(text)
    assert err.line == 1 and "Artemis does not read a document whose root is <core>" in err.message


def test_core_must_be_in_its_namespace():
    err = error_of(doc("").replace(' xmlns="urn:activemq:core"', ""))
    assert (err.line, err.message.split(" (")[0]) == (3, "<core> must be in namespace urn:activemq:core")
    err = error_of(doc('<name xmlns="urn:other">b</name>\n'))
    assert (err.line, err.message.split(" (")[0]) == (4, "<name> in <core> must be in namespace urn:activemq:core")


@pytest.mark.parametrize("body, line, message", [
    ("<name>a</name>\n<name>b</name>\n", 5, "<core>: <name> given twice (Artemis's XSD allows it once)"),
    ("<journal-min-files>two</journal-min-files>\n", 4,
     "<journal-min-files>: expected an int, got 'two' (Artemis's XSD)"),
    ("<journal-type>nio</journal-type>\n", 4,
     "<journal-type>: expected one of ASYNCIO, NIO, MAPPED, got 'nio' (Artemis's XSD)"),
    ("<critical-analyzer-timeout>99999999999999999999</critical-analyzer-timeout>\n", 4,
     "<critical-analyzer-timeout>: expected a long, got '99999999999999999999' (Artemis's XSD)"),
    ('<addresses>\n<address name="a" colour="red">\n<anycast/>\n</address>\n</addresses>\n', 5,
     "<address>: attribute colour='red' is not allowed (Artemis's XSD; expected: name)"),
    ('<addresses>\n<address name="a">\n<anycast/>\n<anycast/>\n</address>\n</addresses>\n', 7,
     "<address>: <anycast> given twice (Artemis's XSD allows it once)"),
    ('<addresses>\n<address name="a"/>\n</addresses>\n', 5,
     "address 'a': needs <anycast> or <multicast> (or both)"),
    ('<security-settings>\n<security-setting match="#">text</security-setting>\n</security-settings>\n', 5,
     "<security-setting> holds text (Artemis's XSD: it takes elements only)"),
    ("<journal-file-size>1.5M</journal-file-size>\n", 4, "<journal-file-size>: expected a byte size (digits, then "
     "K, KB, KiB, M, MB, MiB, G, GB or GiB), got '1.5M' (Artemis's byte sizes)"),
    ("<name b='1'>c</name>\n", 4, "<name>: attribute b='1' is not allowed (Artemis's XSD: a value element takes "
     "no attributes)"),
], ids=["twice", "int", "enum", "long-range", "attribute", "routing-twice", "no-routing", "text", "size",
        "value-attribute"])
def test_what_artemis_schema_refuses(body, line, message):
    """artemis-configuration.xsd (checked by `artemis run` before anything is read), and AMQ229247."""
    err = error_of(doc(body))
    assert (err.line, err.message) == (line, message)


@pytest.mark.parametrize("text, line, message", [
    ("", 1, "not well-formed XML: no element found"),
    ('<?xml version="1.0"?>\n<configuration>\n  <core>\n    <name>x</nam>\n  </core>\n</configuration>\n', 4,
     "not well-formed XML: mismatched tag"),
    ('<?xml version="1.0"?>\n<configuration>\n  <core>\n    <name>x</name>\n', 5,
     "not well-formed XML: no element found"),
    ('<configuration>\n<core>\n</core>\n</configuration>\n<configuration/>\n', 5,
     "not well-formed XML: junk after document element"),
    ('<configuration>\n<core>\n<name a="1" a="2">x</name>\n</core>\n</configuration>\n', 3,
     "not well-formed XML: duplicate attribute"),
    ('<configuration>\n<core>\n<name>&nbsp;</name>\n</core>\n</configuration>\n', 3,
     "not well-formed XML: undefined entity"),
], ids=["empty", "mismatched", "unclosed", "two-roots", "duplicate-attribute", "undefined-entity"])
def test_malformed_xml_names_the_line(text, line, message):
    err = error_of(text, "b.xml")
    assert (err.path, err.line, err.message) == ("b.xml", line, message)


def test_unknown_element_in_core_names_a_near_miss():
    err = error_of(doc("<name>b</name>\n<persistance-enabled>true</persistance-enabled>\n"))
    assert (err.line, err.message) == (
        5, "unknown element <persistance-enabled> in <core>; did you mean <persistence-enabled>?")


def test_schema_elements_the_reference_does_not_read_are_refused_by_name():
    err = error_of(doc("<name>b</name>\n<large-message-sync>true</large-message-sync>\n"))
    assert (err.line, err.message) == (5, "<large-message-sync> is not supported yet by the reference broker")


def test_no_core_element():
    err = error_of('<?xml version="1.0"?>\n<configuration xmlns="urn:activemq">\n</configuration>\n')
    assert err.line == 2 and err.message.startswith("expected a <core> element (urn:activemq:core) below the root")


def test_other_top_level_elements_are_ignored_as_artemis_does_but_xinclude_is_refused():
    assert parse_config(doc("", before_core="<jms xmlns=\"urn:activemq:jms\"/>\n")).acceptors
    assert parse_config(doc("", before_core="<anything-else/>\n")).acceptors
    err = error_of(doc("", before_core="<xi:include xmlns:xi=\"http://www.w3.org/2001/XInclude\" href=\"x.xml\"/>\n"))
    assert (err.line, err.message) == (3, "<xi:include> (XInclude) is not supported yet by the reference broker")


@pytest.mark.parametrize("tag", [
    "cluster-connections", "diverts", "bridges", "ha-policy", "connectors",
    "broadcast-groups", "discovery-groups", "federations", "broker-plugins",
    "resource-limit-settings", "wildcard-addresses", "store", "metrics", "connection-routers",
])
def test_behaviour_changing_core_elements_are_refused_by_name(tag):
    text = doc(f"<name>b</name>\n\n<{tag}>\n  <nested-anything/>\n</{tag}>\n")
    err = error_of(text)
    assert (err.line, err.message) == (6, f"<{tag}> is not supported yet by the reference broker")


def test_security_settings_are_ignored_with_security_off_and_read_with_it_on():
    body = ('<security-settings>\n<security-setting match="#">\n<permission type="send" roles="amq"/>\n'
            "</security-setting>\n</security-settings>\n")
    assert parse_config(doc(body)) == parse_config(doc("\n" * body.count("\n")))
    cfg = parse_config(doc(body, security=True))
    assert cfg.security_enabled and cfg.security_settings == [SecuritySetting("#", {"send": frozenset({"amq"})})]
    # <security-enabled>false after the settings counts too: the whole <core> is read first.
    cfg = parse_config(doc(body + "<security-enabled>false</security-enabled>\n", security=True))
    assert not cfg.security_enabled and cfg.security_settings == []


def test_a_divert_deep_in_a_realistic_file_names_its_line():
    text = security_off(stock()).replace("      <addresses>", """\
      <diverts>
         <divert name="order-divert">
            <address>orders</address>
            <forwarding-address>spy</forwarding-address>
            <exclusive>false</exclusive>
         </divert>
      </diverts>

      <addresses>""")
    err = error_of(text)
    assert (err.line, err.message) == (line_of(text, "<diverts>"),
                                       "<diverts> is not supported yet by the reference broker")


def test_cluster_connections_in_a_realistic_file_names_its_line():
    text = security_off(stock()).replace("      <address-settings>", """\
      <cluster-user>cluster-admin</cluster-user>
      <cluster-connections>
         <cluster-connection name="my-cluster">
            <connector-ref>artemis</connector-ref>
            <message-load-balancing>ON_DEMAND</message-load-balancing>
            <max-hops>1</max-hops>
         </cluster-connection>
      </cluster-connections>
      <address-settings>""", 1)
    err = error_of(text)
    assert (err.line, err.message) == (line_of(text, "<cluster-user>"),
                                       "<cluster-user> is not supported yet by the reference broker")
    err = error_of(text.replace("      <cluster-user>cluster-admin</cluster-user>\n", ""))
    assert err.line == line_of(text, "<cluster-connections>") - 1
    assert err.message == "<cluster-connections> is not supported yet by the reference broker"


def test_ignored_core_elements_change_nothing():
    ignored = """\
<journal-type>NIO</journal-type>
<journal-file-size>10M</journal-file-size>
<journal-buffer-timeout>12000</journal-buffer-timeout>
<journal-max-io>1</journal-max-io>
<global-max-size>100Mb</global-max-size>
<critical-analyzer-policy>LOG</critical-analyzer-policy>
<jmx-management-enabled>true</jmx-management-enabled>
<page-sync-timeout>1628000</page-sync-timeout>
"""
    assert parse_config(doc(ignored)) == parse_config(doc("\n" * ignored.count("\n")))


@pytest.mark.parametrize("core, line, message", [
    ("<acceptors>\n<acceptor name=\"core\">tcp://127.0.0.1:0?protocols=CORE,OPENWIRE</acceptor>\n</acceptors>\n",
     5, "acceptor 'core': protocols=CORE,OPENWIRE does not include AMQP, and no other acceptor does (the broker "
        "serves AMQP only)"),
    ("<acceptors>\n<acceptor name=\"v6\">tcp://[::1:5672?protocols=AMQP</acceptor>\n</acceptors>\n",
     5, "acceptor 'v6': expected tcp://HOST:PORT?protocols=AMQP, got 'tcp://[::1:5672?protocols=AMQP'"),
    ("<acceptors>\n<acceptor name=\"in-vm\">vm://0</acceptor>\n</acceptors>\n",
     5, "acceptor 'in-vm': expected tcp://HOST:PORT?protocols=AMQP, got 'vm://0'"),
    ("<acceptors>\n<acceptor name=\"noport\">tcp://127.0.0.1?protocols=AMQP</acceptor>\n</acceptors>\n",
     5, "acceptor 'noport': expected tcp://HOST:PORT?protocols=AMQP, got 'tcp://127.0.0.1?protocols=AMQP'"),
    ("<acceptors>\n<acceptor name=\"empty\"></acceptor>\n</acceptors>\n", 5, "<acceptor> needs a value"),
    ("<acceptors>\n<connector name=\"c\">tcp://127.0.0.1:0</connector>\n</acceptors>\n",
     5, "<acceptors>: unexpected <connector> (expected <acceptor>)"),
    ("<acceptors/>\n", 4, "<acceptors> needs at least one <acceptor>"),
])
def test_acceptor_errors(core, line, message):
    err = error_of(doc(core, acceptor=False))
    assert (err.line, err.message) == (line, message)


def test_acceptor_protocols_are_case_insensitive_and_default_to_all():
    cfg = parse_config(doc("", acceptor=False).replace("</core>", """\
<acceptors>
<acceptor name="lower">tcp://127.0.0.1:5672?protocols=amqp</acceptor>
<acceptor name="all">tcp://127.0.0.1:5673</acceptor>
<acceptor name="semicolons">tcp://localhost:5674?useEpoll=true;protocols=MQTT,AMQP;amqpCredits=1000</acceptor>
<acceptor>tcp://127.0.0.1:0?protocols=AMQP</acceptor>
</acceptors>
</core>"""))
    assert [(a.name, a.host, a.port, a.line) for a in cfg.acceptors] == [
        ("lower", "127.0.0.1", 5672, 5), ("all", "127.0.0.1", 5673, 6), ("semicolons", "localhost", 5674, 7),
        ("acceptor", "127.0.0.1", 0, 8)]


def test_acceptors_without_amqp_are_skipped_beside_an_amqp_one():
    cfg = parse_config(doc("<acceptors>\n"
                           '<acceptor name="stomp">tcp://127.0.0.1:61613?protocols=STOMP;stompEnableMessageId=true'
                           "</acceptor>\n"
                           '<acceptor name="amqp">tcp://127.0.0.1:0?protocols=AMQP</acceptor>\n'
                           '<acceptor name="hq">tcp://127.0.0.1:5445?protocols=HORNETQ,STOMP;anycastPrefix=jms.queue.'
                           "</acceptor>\n</acceptors>\n", acceptor=False))
    assert [(a.name, a.port, a.line) for a in cfg.acceptors] == [("amqp", 0, 6)]
    assert [(s.name, s.protocols, s.line) for s in cfg.skipped_acceptors] == [
        ("stomp", "STOMP", 5), ("hq", "HORNETQ,STOMP", 7)]


@pytest.mark.parametrize("url", ["tcp://127.0.0.1:99999?protocols=AMQP", "tcp://127.0.0.1:56x72?protocols=AMQP"])
def test_a_bad_acceptor_port_is_a_config_error(url):
    err = error_of(doc(f"<acceptors>\n<acceptor name=\"a\">{url}</acceptor>\n</acceptors>\n", acceptor=False))
    assert err.line == 5 and "acceptor 'a'" in err.message


@pytest.mark.parametrize("port", ["99999", "56x72", "-1", "65536"])
def test_a_bad_acceptor_port_says_what_was_expected(port):
    url = f"tcp://127.0.0.1:{port}?protocols=AMQP"
    err = error_of(doc(f"<acceptors>\n<acceptor name=\"a\">{url}</acceptor>\n</acceptors>\n", acceptor=False))
    assert (err.line, err.message) == (5, f"acceptor 'a': expected a port 0-65535, got {port!r}")


@pytest.mark.parametrize("params", ["sslEnabled=true", "anycastPrefix=jms.queue.", "multicastPrefix=jms.topic."])
def test_behaviour_changing_acceptor_parameters_are_refused(params):
    url = f"tcp://127.0.0.1:0?protocols=AMQP;{params}"
    error_of(doc(f"<acceptors>\n<acceptor name=\"a\">{url}</acceptor>\n</acceptors>\n", acceptor=False))


def acceptor_error(params: str) -> ConfigError:
    url = f"tcp://127.0.0.1:0?{params}"
    err = error_of(doc(f"<acceptors>\n<acceptor name=\"a\">{url}</acceptor>\n</acceptors>\n", acceptor=False))
    assert err.line == 5
    return err


@pytest.mark.parametrize("params, message", [
    ("protocols=AMQP;sslEnabled=TRUE",
     "acceptor 'a': sslEnabled=true needs keyStorePath (a PEM file with the private key and the certificate chain)"),
    ("sslEnabled=true;keyStorePath=k.jks;keyStoreType=JKS", "acceptor 'a': keyStoreType=JKS: the reference broker "
     "reads PEM files only (expected PEM)"),
    ("sslEnabled=true;keyStorePath=missing.pem", "acceptor 'a': keyStorePath=missing.pem: no such file"),
    ("sslEnabled=true;keyStorePath=k.pem;verifyHost=true", "acceptor 'a': verifyHost=true is not supported yet by "
     "the reference broker (expected false)"),
    ("sslEnabled=true;keyStorePath=k.pem;enabledProtocols=TLSv1.2", "acceptor 'a': enabledProtocols with "
     "sslEnabled=true is not supported yet by the reference broker"),
    ("sslEnabled=true;keyStorePath=k.pem;needClientAuth=true", "acceptor 'a': needClientAuth=true needs "
     "trustStorePath (PEM CA certificates)"),
    ("anycastPrefix=jms.queue.", "acceptor 'a': anycastPrefix=jms.queue.: anycastPrefix is not supported yet by the "
     "reference broker"),
    ("protocols=AMQP&amp;multicastPrefix=t.",
     "acceptor 'a': multicastPrefix=t.: multicastPrefix is not supported yet by the reference broker"),
    ("amqpCredits=500", "acceptor 'a': amqpCredits=500 is not supported yet by the reference broker (it implements "
     "amqpCredits=1000 only)"),
    ("amqpLowCredits=10", "acceptor 'a': amqpLowCredits=10 is not supported yet by the reference broker (it "
     "implements amqpLowCredits=300 only)"),
    ("amqpTreatRejectAsUnmodifiedDeliveryFailed=true", "acceptor 'a': amqpTreatRejectAsUnmodifiedDeliveryFailed=true "
     "is not supported yet by the reference broker (it implements amqpTreatRejectAsUnmodifiedDeliveryFailed=false "
     "only)"),
    ("connectionsAllowed=1", "acceptor 'a': unknown parameter 'connectionsAllowed'"),
    ("protocols=AMQP;useEpol=true", "acceptor 'a': unknown parameter 'useEpol'"),
])
def test_acceptor_parameter_errors(params, message):
    assert acceptor_error(params).message == message


def test_acceptor_flags_are_read_as_artemis_reads_them():
    """Artemis reads a URL flag with Java's Boolean.valueOf: anything but "true" (in any case) is false."""
    cfg = parse_config(doc('<acceptors>\n<acceptor name="a">tcp://127.0.0.1:0?sslEnabled=yes</acceptor>\n'
                           "</acceptors>\n", acceptor=False))
    assert cfg.acceptors[0].tls is None


def test_acceptor_parameters_that_change_nothing_are_accepted():
    params = ("protocols=AMQP;sslEnabled=false;keyStorePath=k.jks;needClientAuth=true;useEpoll=true;tcpNoDelay=true;"
              "amqpCredits=1000;amqpLowCredits=300;amqpDuplicateDetection=true;amqpMinLargeMessageSize=102400;"
              "stompEnableMessageId=true;mqttSessionScanInterval=5;supportAdvisory=false;anycastPrefix=")
    cfg = parse_config(doc(f'<acceptors>\n<acceptor name="a">tcp://127.0.0.1:5672?{params}</acceptor>\n'
                           "</acceptors>\n", acceptor=False))
    assert [(a.name, a.host, a.port, a.line) for a in cfg.acceptors] == [("a", "127.0.0.1", 5672, 5)]


@pytest.mark.parametrize("element, value", [
    ("persistence-enabled", "yes"), ("journal-datasync", "TRUE"), ("security-enabled", "no"),
])
def test_bad_core_booleans(element, value):
    err = error_of(doc(f"<name>b</name>\n<{element}>{value}</{element}>\n", security=element == "security-enabled"))
    assert (err.line, err.message) == (5, f"<{element}>: expected true or false, got {value!r} (Artemis's XSD)")


@pytest.mark.parametrize("value, read", [("true", True), ("\n  true\n", True), ("false", False), (" 0 ", False),
                                         ("1", False), ("", False)])
def test_booleans_are_read_as_artemis_reads_them(value, read):
    """xs:boolean takes true, false, 1 and 0 (and an empty element takes its XSD default); Artemis then reads the
    text with Java's Boolean.parseBoolean: only "true" is true."""
    cfg = parse_config(doc(f"<persistence-enabled>{value}</persistence-enabled>\n"))
    assert cfg.persistence_enabled is read


def test_security_enabled_true_and_false_are_read():
    assert parse_config(doc("<security-enabled>false</security-enabled>\n", security=True)).security_enabled is False
    cfg = parse_config(doc("\n<security-enabled>true</security-enabled>\n", security=True))
    assert (cfg.security_enabled, cfg.security_line) == (True, 5)


@pytest.mark.parametrize("setting, line, message", [
    ('<security-setting>', 6, "<security-setting> needs a match attribute"),
    ('<security-setting match="a.#.b">', 6, "security-setting 'a.#.b': '#' may only be the last character of a match"),
    ('<security-setting match="#">\n<permission type="send"/>', 7,
     "<permission> needs a roles attribute"),
    ('<security-setting match="#">\n<permission type="send" roles="a"/>\n<permission type="send" roles="b"/>', 8,
     "security-setting '#': permission 'send' is given twice"),
    ('<security-setting match="#">\n<role-mapping from="a" to="b"/>', 7,
     "<security-setting>: unexpected <role-mapping> (expected <permission>)"),
])
def test_security_setting_errors(setting, line, message):
    body = f"<security-enabled>true</security-enabled>\n<security-settings>\n{setting}\n</security-setting>\n" \
           "</security-settings>\n"
    err = error_of(doc(body, security=True))
    assert (err.line, err.message) == (line, message)


def test_tls_acceptor_reads_pem_paths_beside_the_file(tmp_path):
    (tmp_path / "k.pem").write_text("key and chain")
    (tmp_path / "ca.pem").write_text("ca")
    url = ("tcp://127.0.0.1:0?protocols=AMQP;sslEnabled=true;keyStorePath=k.pem;keyStorePassword=pw;"
           "keyStoreType=PEM;trustStorePath=ca.pem;trustStoreType=PEM;needClientAuth=true;verifyHost=false")
    path = tmp_path / "broker.xml"
    path.write_text(doc(f'<acceptors>\n<acceptor name="a">{url}</acceptor>\n</acceptors>\n', acceptor=False))
    tls = load_config(path).acceptors[0].tls
    assert tls == AcceptorTls(str(tmp_path / "k.pem"), "pw", str(tmp_path / "ca.pem"), "required")


def test_an_empty_name_is_taken_as_artemis_takes_it():
    assert parse_config(doc("<name>  </name>\n")).name == ""


def settings_doc(body: str, match: str = "#") -> str:
    """address-settings with one setting whose children are `body`; the setting starts on line 5."""
    return doc(f"<address-settings>\n<address-setting match=\"{match}\">\n{body}</address-setting>\n"
               "</address-settings>\n")


@pytest.mark.parametrize("body, message", [
    ("<max-delivery-attempts>ten</max-delivery-attempts>\n",
     "<max-delivery-attempts>: expected an int, got 'ten' (Artemis's XSD)"),
    ("<redelivery-delay>1.5</redelivery-delay>\n", "<redelivery-delay>: expected a long, got '1.5' (Artemis's XSD)"),
    ("<auto-create-queues>on</auto-create-queues>\n",
     "<auto-create-queues>: expected true or false, got 'on' (Artemis's XSD)"),
    ("<default-exclusive-queue>true</default-exclusive-queue>\n", "address-setting '#': <default-exclusive-queue>true "
     "is not supported yet by the reference broker (only false, Artemis's default)"),
    ("<default-max-consumers>1</default-max-consumers>\n", "address-setting '#': <default-max-consumers>1 is not "
     "supported yet by the reference broker (only -1, Artemis's default)"),
    ("<redelivery-delay-multiplier>2.0</redelivery-delay-multiplier>\n", "address-setting '#': "
     "<redelivery-delay-multiplier>2.0 is not supported yet by the reference broker (only 1.0, Artemis's default)"),
    ("<send-to-dla-on-no-route>true</send-to-dla-on-no-route>\n", "address-setting '#': <send-to-dla-on-no-route>true "
     "is not supported yet by the reference broker (only false, Artemis's default)"),
    ("<enable-ingress-timestamp>true</enable-ingress-timestamp>\n", "address-setting '#': "
     "<enable-ingress-timestamp>true is not supported yet by the reference broker (only false, Artemis's default)"),
    ("<default-address-routing-type>BROADCAST</default-address-routing-type>\n",
     "<default-address-routing-type>: expected one of ANYCAST, MULTICAST, got 'BROADCAST' (Artemis's XSD)"),
    ("<last-value-queue>true</last-value-queue>\n",
     "address-setting '#': <last-value-queue> is not supported yet by the reference broker"),
])
def test_address_setting_value_errors(body, message):
    err = error_of(settings_doc(body))
    assert (err.line, err.message) == (6, message)


def test_address_setting_needs_a_match():
    err = error_of(doc("<address-settings>\n\n<address-setting>\n</address-setting>\n</address-settings>\n"))
    assert (err.line, err.message) == (6, "<address-setting> needs a match attribute")


def test_address_setting_values_are_typed():
    cfg = parse_config(settings_doc("""\
<max-delivery-attempts>-1</max-delivery-attempts>
<redelivery-delay>250</redelivery-delay>
<auto-create-queues>false</auto-create-queues>
<default-queue-routing-type>ANYCAST</default-queue-routing-type>
<default-address-routing-type>MULTICAST</default-address-routing-type>
<dead-letter-address>DLQ</dead-letter-address>
<max-size-bytes>10M</max-size-bytes>
<address-full-policy>BLOCK</address-full-policy>
<max-read-page-messages>-1</max-read-page-messages>
<max-read-page-bytes>20M</max-read-page-bytes>
<default-exclusive-queue>false</default-exclusive-queue>
<default-ring-size>-1</default-ring-size>
<redelivery-delay-multiplier>1</redelivery-delay-multiplier>
<redelivery-collision-avoidance-factor>0</redelivery-collision-avoidance-factor>
"""))
    (setting,) = cfg.address_settings
    assert (setting.match, setting.line) == ("#", 5)
    assert setting.values == {"max-delivery-attempts": -1, "redelivery-delay": 250, "auto-create-queues": False,
                              "default-queue-routing-type": ANYCAST, "default-address-routing-type": MULTICAST,
                              "dead-letter-address": "DLQ"}


def addresses_doc(body: str) -> str:
    """<addresses> with `body` starting on line 5."""
    return doc(f"<addresses>\n{body}</addresses>\n")


@pytest.mark.parametrize("body, line, message", [
    ('<address name="orders">\n<anycast>\n<queue name="orders">\n<filter string="color=\'red\'"/>\n</queue>\n'
     "</anycast>\n</address>\n", 8, "queue 'orders': <filter> is not supported yet"),
    ('<address name="orders">\n<anycast>\n<queue name="orders">\n<durable>maybe</durable>\n</queue>\n'
     "</anycast>\n</address>\n", 8, "<durable>: expected true or false, got 'maybe' (Artemis's XSD)"),
    ('<address name="orders">\n<anycast>\n<queue name="orders">\n<usr>bob</usr>\n</queue>\n</anycast>\n'
     "</address>\n", 8, "<queue>: unexpected <usr> (expected <durable>, <filter>, <user>)"),
    ('<address name="orders">\n<anycast>\n<queue name="orders">\n<user/>\n</queue>\n</anycast>\n'
     "</address>\n", 8, "<user> needs a value"),
    ('<address name="orders">\n<anycast>\n<queue/>\n</anycast>\n</address>\n', 7,
     "<queue> needs a name attribute"),
    ('<address name="orders">\n<anycast>\n<divert/>\n</anycast>\n</address>\n', 7,
     "<anycast>: unexpected <divert> (expected <queue>)"),
    ('<address name="orders">\n<queues/>\n</address>\n', 6,
     "<address>: unexpected <queues> (expected <anycast>, <multicast>)"),
    ("<address>\n<anycast/>\n</address>\n", 5, "<address> needs a name attribute"),
    ('<queue name="orders"/>\n', 5, "<addresses>: unexpected <queue> (expected <address>)"),
], ids=["queue-filter", "bad-durable", "queue-unknown", "queue-empty-user", "queue-no-name", "bad-queue-child",
        "artemis-1-queues", "address-no-name", "queue-outside-address"])
def test_address_errors(body, line, message):
    err = error_of(addresses_doc(body))
    assert (err.line, err.message) == (line, message)


def test_a_queue_user_is_accepted_and_changes_nothing():
    """<user> only labels the queue's owner for management; with security off it changes nothing."""
    with_user = addresses_doc('<address name="orders">\n<anycast>\n<queue name="orders">\n<user>bob</user>\n'
                              "</queue>\n</anycast>\n</address>\n")
    assert parse_config(with_user) == parse_config(with_user.replace("<user>bob</user>", ""))


@pytest.mark.parametrize("attribute", ['max-consumers="1"', 'exclusive="true"', 'last-value-key="k"',
                                       'purge-on-no-consumers="true"'])
def test_behaviour_changing_queue_attributes_are_refused(attribute):
    err = error_of(addresses_doc(f'<address name="orders">\n<anycast>\n<queue name="orders" {attribute}/>\n'
                                 "</anycast>\n</address>\n"))
    assert err.line == 7


@pytest.mark.parametrize("attribute", ['ring-size="10"', 'non-destructive="false"', 'enabled="true"'])
def test_every_queue_attribute_but_name_is_refused_by_name(attribute):
    err = error_of(addresses_doc(f'<address name="orders">\n<anycast>\n<queue {attribute} name="orders"/>\n'
                                 "</anycast>\n</address>\n"))
    key, value = attribute.split("=")
    assert (err.line, err.message) == (7, f"queue 'orders': attribute {key}={value.strip(chr(34))!r} is not "
                                       "supported yet by the reference broker")


DUPLICATE = ('<address name="orders"><anycast/></address>\n<address name="news"><multicast/></address>\n\n'
             '<address name="orders"><multicast/></address>\n')


def test_duplicate_address_is_refused():
    err = error_of(addresses_doc(DUPLICATE))
    assert err.line in (5, 8) and err.message.startswith("address 'orders' is declared twice"), err


def test_duplicate_address_names_the_second_declaration():
    err = error_of(addresses_doc(DUPLICATE))
    assert err.line == 8, err
    assert err.message == "address 'orders' is declared twice (first at line 5)"


def test_addresses_and_queues():
    cfg = parse_config(addresses_doc("""\
<address name="orders">
  <anycast>
    <queue name="orders"/>
    <queue name="orders.audit"><durable>false</durable></queue>
  </anycast>
</address>
<address name="news">
  <multicast>
    <queue name="news.archive"/>
  </multicast>
</address>
<address name="both"><anycast/><multicast/></address>
"""))
    assert cfg.addresses == [
        AddressDef("orders", (ANYCAST,), (QueueDef("orders", ANYCAST, True), QueueDef("orders.audit", ANYCAST, False)),
                   5),
        AddressDef("news", (MULTICAST,), (QueueDef("news.archive", MULTICAST, True),), 11),
        AddressDef("both", (ANYCAST, MULTICAST), (), 16),
    ]


def test_the_same_queue_name_on_two_addresses_is_refused():
    """Artemis queue names are broker-wide: a second queue of the same name is refused at its line."""
    err = error_of(addresses_doc('<address name="a"><anycast><queue name="q"/></anycast></address>\n'
                                 '<address name="b">\n<anycast>\n<queue name="q"/></anycast></address>\n'))
    assert (err.line, err.message) == (8, "queue 'q' is declared twice (first on address 'a' at line 5; queue "
                                       "names are broker-wide)")
    err = error_of(addresses_doc('<address name="a">\n<anycast><queue name="q"/></anycast>\n'
                                 '<multicast><queue name="q"/></multicast>\n</address>\n'))
    assert (err.line, err.message) == (7, "queue 'q' is declared twice (first on address 'a' at line 6; queue "
                                       "names are broker-wide)")


def test_missing_file_is_line_0(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.xml")
    assert str(info.value).startswith(f"{tmp_path / 'nope.xml'}:0: cannot read: ")


# ---- Artemis match syntax --------------------------------------------------------------------------------------


def artemis_match(pattern: str, address: str) -> bool:
    """Artemis's own rule, transcribed from core/settings/impl/Match.java (delimiter '.', '#', '*')."""
    if "#" not in pattern and "*" not in pattern:
        return pattern == address  # HierarchicalObjectRepository keeps wildcard-free matches as exact ones
    if pattern == "#":
        regex = ".*"
    else:
        regex = pattern.replace(".#", "#").replace(".", r"\.").replace("$", r"\$")
        regex = regex.replace("*", r"[^\.]+").replace("#", r"(\..+)*")
    return re.fullmatch(regex, address) is not None


def artemis_valid(pattern: str) -> bool:
    """Match.verify: '#' may only be the last character."""
    return "#" not in pattern or pattern.index("#") == len(pattern) - 1


PATTERNS = ["#", "orders", "orders.#", "orders.*", "*", "*.eu", "orders.*.x", "*.#", "*.*", "orders.eu.#",
            "orders.eu", "a.b.c.#", "news.europe.#", "news.*.sport", "activemq.management#", "orders#", "ord*",
            "orders.*#"]
ADDRESSES = ["orders", "orders.eu", "orders.eu.x", "orders.us.x", "ordersx", "x.orders", "eu", "x.eu", "a.b.c",
             "a.b", "a.b.c.d", "news.europe", "news.europe.sport", "news.usaeurope", "news.europe.fr.sport",
             "news.usa.sport", "activemq.management", "activemq.management.abc", "activemq.managementx"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matching_agrees_with_artemis(pattern):
    assert artemis_valid(pattern)
    got = {a for a in ADDRESSES if match_address(pattern, a)}
    want = {a for a in ADDRESSES if artemis_match(pattern, a)}
    assert got == want


@pytest.mark.parametrize("pattern, address, matches", [
    # Artemis's documented examples (wildcard syntax chapter)
    ("news.europe.#", "news.europe", True), ("news.europe.#", "news.europe.sport", True),
    ("news.europe.#", "news.europe.politics.regional", True), ("news.europe.#", "news.usaeurope", False),
    ("news.*", "news.europe", True), ("news.*", "news.europe.sport", False), ("news.*", "news", False),
    ("news.*.sport", "news.europe.sport", True), ("news.*.sport", "news.europe.fr.sport", False),
    # words, not characters
    ("my", "myqueue", False), ("orders.#", "ordersx", False), ("#", "", True), ("#", "a.b.c", True),
    ("*", "a", True), ("*", "a.b", False), ("*", "", False),
    # regex characters are literal
    ("a+b", "a+b", True), ("a+b", "aab", False), ("q(1)", "q(1)", True), ("a.b", "axb", False),
    ("a$b", "a$b", True), ("[x]", "x", False),
])
def test_match_examples(pattern, address, matches):
    assert match_address(pattern, address) is matches
    assert artemis_match(pattern, address) is matches


@pytest.mark.parametrize("address", ["activemq.management", "activemq.management.abc"])
def test_stock_management_match_matches_like_artemis(address):
    assert artemis_match("activemq.management#", address)
    assert match_address("activemq.management#", address)


@pytest.mark.parametrize("match", ["#.eu", "a.#.c", "a#b", "##"])
def test_hash_before_the_end_is_refused(match):
    assert not artemis_valid(match)
    err = error_of(settings_doc("<max-delivery-attempts>3</max-delivery-attempts>\n", match=match))
    assert err.line == 5
    assert err.message == f"address-setting {match!r}: '#' may only be the last character of a match"


@pytest.mark.parametrize("match", ["#", "a.#", "a#", "*.#", "a.b.c"])
def test_hash_at_the_end_is_accepted(match):
    assert artemis_valid(match)
    cfg = parse_config(settings_doc("<max-delivery-attempts>3</max-delivery-attempts>\n", match=match))
    assert [s.match for s in cfg.address_settings] == [match]


# ---- merge by specificity ---------------------------------------------------------------------------------------


def artemis_settings_for(settings: list[tuple[str, dict]], address: str) -> dict:
    """Artemis's merge (HierarchicalObjectRepository.getMatch): matches sorted by MatchComparator, most
    specific first; each later (less specific) one only fills values the ones before left unset."""
    import functools

    def compare(o1: str, o2: str) -> int:
        if "#" in o1 and "#" not in o2:
            return 1
        if "#" not in o1 and "#" in o2:
            return -1
        if "#" in o1 and "#" in o2:
            return len(o2) - len(o1)
        if "*" in o1 and "*" not in o2:
            return 1
        if "*" not in o1 and "*" in o2:
            return -1
        if "*" in o1 and "*" in o2:
            left, right = o1.split("."), o2.split(".")
            for i, word in enumerate(left):
                if i >= len(right):
                    return -1
                if word == "*" and right[i] != "*":
                    return 1
                if word != "*" and right[i] == "*":
                    return -1
        return len(o1) - len(o2)

    matching = {m: v for m, v in settings if artemis_match(m, address)}  # a map: a repeated match replaces
    merged: dict = {}
    for m in sorted(matching, key=functools.cmp_to_key(compare)):
        for key, value in matching[m].items():
            merged.setdefault(key, value)
    return {**DEFAULT_SETTINGS, **merged}


MERGE_SETTINGS = [
    ("#", {"dead-letter-address": "DLQ", "max-delivery-attempts": 5, "redelivery-delay": 100}),
    ("orders.#", {"max-delivery-attempts": 3, "expiry-address": "orders.expired"}),
    ("orders.eu", {"dead-letter-address": "orders.eu.DLQ"}),
    ("*.us", {"redelivery-delay": 7}),
    ("orders.*", {"auto-create-queues": False}),
]


def merge_doc(settings: list[tuple[str, dict]]) -> str:
    def xml(value):
        return str(value).lower() if isinstance(value, bool) else str(value)
    body = "".join(f'<address-setting match="{m}">\n'
                   + "".join(f"<{k}>{xml(v)}</{k}>\n" for k, v in values.items())
                   + "</address-setting>\n" for m, values in settings)
    return doc(f"<address-settings>\n{body}</address-settings>\n")


@pytest.mark.parametrize("address, expected", [
    ("orders.eu", {"dead-letter-address": "orders.eu.DLQ", "max-delivery-attempts": 3, "redelivery-delay": 100,
                   "expiry-address": "orders.expired", "auto-create-queues": False}),
    ("orders.us", {"dead-letter-address": "DLQ", "max-delivery-attempts": 3, "redelivery-delay": 7,
                   "expiry-address": "orders.expired", "auto-create-queues": False}),
    ("orders", {"dead-letter-address": "DLQ", "max-delivery-attempts": 3, "redelivery-delay": 100,
                "expiry-address": "orders.expired"}),
    ("orders.eu.x", {"dead-letter-address": "DLQ", "max-delivery-attempts": 3, "redelivery-delay": 100,
                     "expiry-address": "orders.expired"}),
    ("billing", {"dead-letter-address": "DLQ", "max-delivery-attempts": 5, "redelivery-delay": 100}),
    ("billing.us", {"dead-letter-address": "DLQ", "max-delivery-attempts": 5, "redelivery-delay": 7}),
])
def test_settings_merge_by_specificity_in_any_file_order(address, expected):
    want = {**DEFAULT_SETTINGS, **expected}
    assert artemis_settings_for(MERGE_SETTINGS, address) == want  # the oracle agrees with the hand-written value
    shuffled = list(MERGE_SETTINGS)
    for seed in range(6):
        random.Random(seed).shuffle(shuffled)
        assert parse_config(merge_doc(shuffled)).settings_for(address) == want, [m for m, _ in shuffled]


def test_literal_beats_star_beats_hash_for_one_word():
    settings = [("#", {"max-delivery-attempts": 1}), ("*", {"max-delivery-attempts": 2}),
                ("orders", {"max-delivery-attempts": 3})]
    cfg = parse_config(merge_doc(settings))
    assert cfg.settings_for("orders")["max-delivery-attempts"] == 3
    assert cfg.settings_for("billing")["max-delivery-attempts"] == 2
    assert cfg.settings_for("billing.x")["max-delivery-attempts"] == 1
    for address in ("orders", "billing", "billing.x"):
        assert cfg.settings_for(address) == artemis_settings_for(settings, address)


def test_longer_hash_match_beats_shorter():
    settings = [("#", {"redelivery-delay": 1}), ("orders.#", {"redelivery-delay": 2}),
                ("orders.eu.#", {"redelivery-delay": 3})]
    cfg = parse_config(merge_doc(settings))
    for address, delay in [("orders.eu.x", 3), ("orders.eu", 3), ("orders.us", 2), ("x", 1)]:
        assert cfg.settings_for(address)["redelivery-delay"] == delay
        assert artemis_settings_for(settings, address)["redelivery-delay"] == delay


def test_star_beats_a_longer_hash_match():
    settings = [("orders.*", {"max-delivery-attempts": 2}), ("orders.eu.#", {"max-delivery-attempts": 7})]
    assert artemis_settings_for(settings, "orders.eu")["max-delivery-attempts"] == 2
    assert parse_config(merge_doc(settings)).settings_for("orders.eu")["max-delivery-attempts"] == 2


def test_star_matches_compare_word_by_word():
    settings = [("orders.*.x", {"max-delivery-attempts": 2}), ("*.eu.x", {"max-delivery-attempts": 7})]
    assert artemis_settings_for(settings, "orders.eu.x")["max-delivery-attempts"] == 2
    assert parse_config(merge_doc(settings)).settings_for("orders.eu.x")["max-delivery-attempts"] == 2


def test_a_repeated_match_replaces_the_earlier_one_like_artemis():
    settings = [("orders.#", {"max-delivery-attempts": 2, "redelivery-delay": 5}),
                ("orders.#", {"max-delivery-attempts": 3})]
    want = artemis_settings_for(settings, "orders.eu")
    assert (want["max-delivery-attempts"], want["redelivery-delay"]) == (3, 0)
    assert parse_config(merge_doc(settings)).settings_for("orders.eu") == want


@pytest.mark.parametrize("seed", range(40))
def test_merge_agrees_with_artemis_on_random_settings(seed):
    rng = random.Random(seed)
    keys = ["max-delivery-attempts", "redelivery-delay", "dead-letter-address"]
    settings = []
    for i, match in enumerate(rng.sample(PATTERNS, rng.randint(1, len(PATTERNS)))):
        values = {key: (f"dla{i}" if key == "dead-letter-address" else i)
                  for key in rng.sample(keys, rng.randint(1, len(keys)))}
        settings.append((match, values))
    cfg = parse_config(merge_doc(settings))
    for address in ADDRESSES:
        assert cfg.settings_for(address) == artemis_settings_for(settings, address), (address, settings)


# ---- rendered files ----------------------------------------------------------------------------------------------


def node_settings(topology, name: str) -> dict:
    """What the providers pass to the renderer (harness/peers/provider.py `NodeSetup.broker_settings`)."""
    return {"dead_letter_address": None, "expiry_address": None, **topology.node(name).settings.as_dict()}


def test_rendered_single_broker_file_parses():
    topology = load_topology(topology_path("single-broker"))
    text = render_broker_xml(topology, "B1", {"clients": 0}, node_settings(topology, "B1"))
    cfg = parse_config(text, "broker.xml")
    assert cfg.name == "B1" and cfg.persistence_enabled and cfg.journal_datasync
    assert cfg.journal_directory == "data/journal"
    assert [(a.name, a.host, a.port) for a in cfg.acceptors] == [("clients", "127.0.0.1", 0)]
    assert [(a.name, a.routings, tuple(q.name for q in a.queues)) for a in cfg.addresses] == [
        ("DLQ", (ANYCAST,), ("DLQ",)), ("ExpiryQueue", (ANYCAST,), ("ExpiryQueue",)),
        ("orders", (ANYCAST,), ("orders",)), ("news", (MULTICAST,), ()),
    ]
    for address in ("orders", "interop.q.7", "news"):
        assert cfg.settings_for(address) == {
            "dead-letter-address": "DLQ", "expiry-address": "ExpiryQueue", "max-delivery-attempts": 3,
            "redelivery-delay": 0, "auto-create-queues": True, "auto-create-addresses": True,
            "default-address-routing-type": ANYCAST, "default-queue-routing-type": ANYCAST,
        }


@pytest.mark.parametrize("settings", [
    {"persistence": False, "journal_datasync": False},
    {"dead_letter_address": None, "expiry_address": None, "auto_create": False},
    {"max_delivery_attempts": -1, "redelivery_delay_ms": 250, "journal_directory": "/var/lib/b1/journal"},
    {"journal_directory": "journal"},
])
def test_rendered_settings_round_trip(settings):
    topology = load_topology(topology_path("single-broker"))
    cfg = parse_config(render_broker_xml(topology, "B1", {"clients": 5672}, settings))
    assert cfg.acceptors[0].port == 5672
    effective = cfg.settings_for("orders")
    if "persistence" in settings:
        assert cfg.persistence_enabled is False and cfg.journal_datasync is False
    if "auto_create" in settings:
        assert effective["dead-letter-address"] is None and effective["expiry-address"] is None
        assert effective["auto-create-queues"] is False and effective["auto-create-addresses"] is False
        assert [a.name for a in cfg.addresses] == ["orders", "news", "DLQ", "ExpiryQueue"]  # the topology's
    if "max_delivery_attempts" in settings:
        assert effective["max-delivery-attempts"] == -1 and effective["redelivery-delay"] == 250
    if "journal_directory" in settings:
        assert cfg.journal_directory == settings["journal_directory"]


@pytest.mark.parametrize("path", sorted(TOPOLOGIES_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_broker_node_of_every_topology_renders_to_a_file_the_reference_reads(path, tmp_path):
    topology = load_topology(path)
    pki = TestPki(tmp_path) if topology.cas else None  # as launch.py gives it: only to topologies with CAs
    for node in topology.nodes_with_role("broker"):
        ports = {ls.name: 0 for ls in topology.listeners_for(node.name)}
        dialled = {link.to: 5000 + i for i, link in enumerate(topology.links_from(node.name))}
        text = render_broker_xml(topology, node.name, ports, node_settings(topology, node.name),
                                 connect_ports=dialled, **({"pki": pki} if pki else {}))
        cfg = parse_config(text, f"{node.name}.xml")
        assert {a.name for a in cfg.acceptors} == set(ports)
        assert {q.address for q in node.queues} <= {a.name for a in cfg.addresses}
        # Every broker connection of the topology reaches the reference, with its endpoints in order.
        wanted = {bc.name: [dialled[t] for t in bc.to] for bc in getattr(node, "broker_connections", [])}
        # Network connectors are federation over broker connections: one per target (static), or one with the
        # standby as an alternate (masterslave).
        for nc in getattr(node, "network_connectors", []):
            if nc.uri == "masterslave":
                wanted[nc.name] = [dialled[t] for t in nc.to]
            else:
                wanted.update({f"{nc.name}.{t}": [dialled[t]] for t in nc.to})
        assert {bc.name: [p for _h, p in bc.endpoints] for bc in cfg.broker_connections} == wanted
        for bc in cfg.broker_connections:
            federation = bc.federation
            assert federation is None or federation.policies, f"{bc.name}: a <federation> with no policy"


# ---- journal-sync-non-transactional (the `broker:no-journal-sync` fault) ----------------------------------------


def test_journal_sync_non_transactional_defaults_to_true_and_reads_false():
    assert parse_config(doc("<name>b</name>\n")).journal_sync_non_transactional is True
    cfg = parse_config(doc("<journal-sync-non-transactional>false</journal-sync-non-transactional>\n"))
    assert cfg.journal_sync_non_transactional is False
    cfg = parse_config(doc("<journal-sync-non-transactional> true </journal-sync-non-transactional>\n"))
    assert cfg.journal_sync_non_transactional is True


def test_a_bad_journal_sync_non_transactional_is_one_line():
    err = error_of(doc("<name>b</name>\n<journal-sync-non-transactional>no</journal-sync-non-transactional>\n"))
    assert (err.line, err.message) == (
        5, "<journal-sync-non-transactional>: expected true or false, got 'no' (Artemis's XSD)")


def test_the_no_journal_sync_fault_renders_artemis_s_setting_and_nothing_else():
    from harness.breaks import break_topology

    topology = load_topology(topology_path("single-broker"))
    plain = render_broker_xml(topology, "B1", {"clients": 0}, node_settings(topology, "B1"))
    broken = break_topology(topology, "B1", ["no-journal-sync"])
    text = render_broker_xml(broken, "B1", {"clients": 0}, node_settings(broken, "B1"))
    assert "journal-sync-non-transactional" not in plain
    assert [line for line in text.splitlines() if line not in plain.splitlines()] == [
        "    <journal-sync-non-transactional>false</journal-sync-non-transactional>"]
    assert parse_config(text).journal_sync_non_transactional is False
    assert summary(parse_config(text)) == summary(parse_config(plain))
    assert topology.node("B1").settings == load_topology(topology_path("single-broker")).node("B1").settings


# ---- broker connections (002_f23507c2891d6d06.txt) -----------------------------------------------------------------


def connections(inner: str) -> str:
    return doc(f"<broker-connections>\n{inner}</broker-connections>\n")


def test_broker_connection_with_every_element_and_alternates_is_read():
    text = connections('<amqp-connection uri="tcp://10.0.0.1:5672#backup:5673,tcp://other:5674" name="dc2" '
                       'retry-interval="100" reconnect-attempts="3" auto-start="false" user="u" password="p">\n'
                       '<sender address-match="queue.#"/><receiver queue-name="in.q"/><peer address-match="wp.*"/>\n'
                       '<mirror queue-removal="false" message-acknowledgements="false"/>\n'
                       "</amqp-connection>\n")
    (bc,) = parse_config(text).broker_connections
    assert bc.endpoints == (("10.0.0.1", 5672), ("backup", 5673), ("other", 5674))
    assert (bc.name, bc.retry_interval_ms, bc.reconnect_attempts, bc.auto_start) == ("dc2", 100, 3, False)
    assert (bc.user, bc.password) == ("u", "p")
    assert [e.kind for e in bc.elements] == ["sender", "receiver", "peer", "mirror"]
    assert (bc.mirror.queue_creation, bc.mirror.queue_removal, bc.mirror.message_acknowledgements) == (
        True, False, False)
    sender, receiver, peer, _ = bc.elements
    assert sender.matches("anything", "queue.orders.eu") and not sender.matches("queue.orders", "other")
    assert receiver.matches("in.q", "whatever") and not receiver.matches("in.r", "in.q")
    assert peer.matches("x", "wp.a") and not peer.matches("x", "wp.a.b")


def test_broker_connection_defaults_are_artemis_defaults():
    (bc,) = parse_config(connections('<amqp-connection uri="tcp://h:1" name="n"><mirror/></amqp-connection>\n')
                         ).broker_connections
    assert (bc.auto_start, bc.reconnect_attempts, bc.retry_interval_ms, bc.user) == (True, -1, 5000, None)


def test_a_permission_type_artemis_does_not_know_is_ignored_as_artemis_does(caplog):
    """Artemis 2.40.0 compares a permission's type case-sensitively and logs and ignores one it does not know
    (found by the configuration differential: type="SEND")."""
    text = stock().replace('<permission type="send" roles="amq"/>', '<permission type="SEND" roles="amq"/>')
    assert 'type="SEND"' in text
    (setting,) = parse_config(text).security_settings
    assert "send" not in setting.roles and "SEND" not in setting.roles and "consume" in setting.roles
    assert "permission type 'SEND' is none of" in caplog.text


def test_a_broker_connection_uri_without_a_port_dials_artemis_default_port():
    """Found by the configuration differential (seed 15): Artemis 2.40.0 accepts `tcp://127.0.0.1` and its Netty
    transport dials TransportConstants.DEFAULT_PORT, 61616."""
    (bc,) = parse_config(connections('<amqp-connection uri="tcp://127.0.0.1" name="n"><mirror/></amqp-connection>\n')
                         ).broker_connections
    assert bc.endpoints == (("127.0.0.1", 61616),)


@pytest.mark.parametrize("inner, line, message", [
    ('<amqp-connection name="n"/>', 5, "<amqp-connection> needs a uri attribute"),
    ('<amqp-connection uri="tcp://h:1"/>', 5, "<amqp-connection> needs a name attribute"),
    ('<amqp-connection uri="amqp://h:1" name="n"><mirror/></amqp-connection>', 5,
     "amqp-connection 'n': the uri: expected tcp://HOST:PORT (alternates after '#' as HOST:PORT, comma-separated), "
     "got 'amqp://h:1'"),
    ('<amqp-connection uri="tcp://h:1#nope" name="n"><mirror/></amqp-connection>', 5,
     "amqp-connection 'n': alternate 'nope': expected tcp://HOST:PORT (alternates after '#' as HOST:PORT, "
     "comma-separated), got 'tcp://h:1#nope'"),
    ('<amqp-connection uri="tcp://h:1" name="n" sync="true"/>', 5,
     "<amqp-connection>: attribute sync='true' is not allowed (Artemis's XSD; expected: auto-start, name, password, "
     "reconnect-attempts, retry-interval, uri, user)"),
    ('<amqp-connection uri="tcp://h:1" name="n" retry-interval="soon"/>', 5,
     "<amqp-connection>: attribute retry-interval: expected a long, got 'soon'"),
    ('<amqp-connection uri="tcp://h:1" name="n"><bridge/></amqp-connection>', 5,
     "<amqp-connection>: unexpected <bridge> (expected <federation>, <mirror>, <peer>, <receiver>, <sender>)"),
    ('<amqp-connection uri="tcp://h:1" name="n"><federation/></amqp-connection>', 5,
     "amqp-connection 'n': <federation> needs at least one policy"),
    ('<amqp-connection uri="tcp://h:1" name="n"><federation><local-queue-policy name="q" priority-adjustment="1">'
     '<include address-match="#" queue-match="#"/></local-queue-policy></federation></amqp-connection>', 5,
     "amqp-connection 'n': <local-queue-policy> attribute priority-adjustment='1' is not supported yet by the "
     "reference broker (expected: include-federated, name)"),
    ('<amqp-connection uri="tcp://h:1" name="n"><federation><remote-address-policy name="a" max-hops="1"/>'
     '</federation></amqp-connection>', 5, "amqp-connection 'n': <remote-address-policy> 'a' needs at least one "
     "<include>"),
    ('<amqp-connection uri="tcp://h:1" name="n"><federation><queue-policy name="a"/></federation>'
     '</amqp-connection>', 5, "amqp-connection 'n': <federation>: <queue-policy> is not supported yet by the reference "
     "broker (expected one of: local-queue-policy, remote-queue-policy, local-address-policy, remote-address-policy)"),
    ('<amqp-connection uri="tcp://h:1" name="n"><sender/></amqp-connection>', 5,
     "amqp-connection 'n': <sender> needs exactly one of address-match or queue-name"),
    ('<amqp-connection uri="tcp://h:1" name="n"><mirror address-filter="eu"/></amqp-connection>', 5,
     "amqp-connection 'n': <mirror> attribute address-filter='eu' is not supported yet by the reference broker "
     "(expected: message-acknowledgements, queue-creation, queue-removal)"),
    ('<amqp-connection uri="tcp://h:1" name="n"><mirror/><mirror/></amqp-connection>', 5,
     "amqp-connection 'n': a second <mirror> (one per connection)"),
    ('<amqp-connection uri="tcp://h:1" name="n"><mirror/></amqp-connection>\n'
     '<amqp-connection uri="tcp://h:2" name="n"><mirror/></amqp-connection>', 6,
     "amqp-connection 'n' is declared twice (first at line 5)"),
    ('<amqp-connection uri="tcp://h:1" name="n"/>', 5, "<amqp-connection> needs at least one of <sender>, <receiver>, "
     "<peer>, <mirror> or <federation> (Artemis's XSD)"),
])
def test_broker_connection_mistakes_are_refused_at_their_line(inner, line, message):
    err = error_of(connections(inner + "\n"))
    assert (err.line, err.message) == (line, message)


def test_federation_policies_are_read_with_their_matches():
    (bc,) = parse_config(connections(
        '<amqp-connection uri="tcp://h:1" name="n"><federation>\n'
        '<remote-queue-policy name="q" include-federated="true"><include address-match="#" queue-match="#"/>'
        '<exclude address-match="private.#" queue-match="#"/></remote-queue-policy>\n'
        '<local-address-policy name="t" max-hops="2"><include address-match="prices"/></local-address-policy>\n'
        "</federation></amqp-connection>\n")).broker_connections
    queues, topics = bc.federation.policies
    assert (queues.kind, queues.side, queues.include_federated) == ("queue", "remote", True)
    assert queues.matches("orders", "orders") and not queues.matches("private.x", "private.x")
    assert (topics.kind, topics.side, topics.max_hops) == ("address", "local", 2)
    assert topics.matches("prices", "#") and not topics.matches("prices.eu", "#")
    assert type(queues).from_dict(queues.as_dict(), "local") == queues.__class__(
        "queue", "local", "q", (("#", "#"),), (("private.#", "#"),), True, -1)


def test_broker_connection_uri_tls_parameters(tmp_path):
    (tmp_path / "ca.pem").write_text("ca")
    (tmp_path / "ks.pem").write_text("key and chain")
    body = ('<broker-connections>\n<amqp-connection name="c" uri="tcp://127.0.0.1:5672?sslEnabled=true;'
            'trustStorePath=ca.pem;trustStoreType=PEM;keyStorePath=ks.pem;verifyHost=true#127.0.0.1:5673">\n'
            '<sender address-match="#"/>\n</amqp-connection>\n</broker-connections>\n')
    path = tmp_path / "broker.xml"
    path.write_text(doc(body))
    connection = load_config(path).broker_connections[0]
    assert connection.endpoints == (("127.0.0.1", 5672), ("127.0.0.1", 5673))
    assert connection.tls == ConnectionTls(str(tmp_path / "ca.pem"), str(tmp_path / "ks.pem"), None, True)


@pytest.mark.parametrize("uri, message", [
    ("tcp://h:1?retryInterval=5", "amqp-connection 'c': URI parameter retryInterval=5 is not supported yet by the "
     "reference broker (expected TLS ones: keyStorePassword, keyStorePath, keyStoreType, sslEnabled, "
     "trustStorePassword, trustStorePath, trustStoreType, verifyHost)"),
    ("tcp://h:1?sslEnabled=true;trustStoreType=JKS", "amqp-connection 'c': trustStoreType=JKS: the reference broker "
     "reads PEM files only (expected PEM)"),
    ("tcp://h:1?sslEnabled=true;trustStorePath=nope.pem", "amqp-connection 'c': trustStorePath=nope.pem: no such "
     "file"),
    ("tcp://h:1#h:2?sslEnabled=true", "amqp-connection 'c': alternate 'h:2?sslEnabled=true': parameters on an "
     "alternate and paths are not supported yet by the reference broker, got 'h:2?sslEnabled=true'"),
])
def test_broker_connection_uri_parameter_errors(uri, message):
    body = (f'<broker-connections>\n<amqp-connection name="c" uri="{uri}">\n<sender address-match="#"/>\n'
            "</amqp-connection>\n</broker-connections>\n")
    err = error_of(doc(body))
    assert (err.line, err.message) == (5, message)
