"""The native ActiveMQ Artemis provider (harness/vendors/artemis/native.py).

Most cases need no Artemis: the install checks, the instance copy, the command line and environment, the
readiness and broker-connection parsing of log lines a real Artemis 2.40.0 printed on this machine, and the
management messages. The last ones start a real Artemis from the cache (`make products`) and send through it;
they are skipped with the provider's own reason where there is none.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from proton import Message

from harness.vendors.artemis import native as art
from harness.peers.base import ManagementError, PeerUnavailable
from harness.peers.launch import Wiring
from harness.peers.provider import NodeSetup
from harness.vendors.artemis.render import render_broker_xml
from harness.topology import parse_topology

NS = {"c": "urn:activemq:core"}

PLAIN = parse_topology({"name": "artemis-test", "nodes": {
    "B1": {"role": "broker", "queues": [{"address": "orders"}, {"address": "news", "routing": "multicast"}]}}})
SECURED = parse_topology({"name": "artemis-secured", "nodes": {
    "B1": {"role": "broker", "users": {"alice": "alice-secret"},
           "access": {"authenticate": True, "mechanisms": ["PLAIN"]},
           "roles": {"senders": ["alice"]}, "permissions": [{"match": "orders.#", "send": ["senders"]}]}}})

# Lines a real Artemis 2.40.0 printed here (`bin/artemis run`, console pattern `%d %-5level [%logger] %msg`).
SERVER = "INFO  [org.apache.activemq.artemis.core.server]"
STARTED = [
    f"2026-11-27 12:13:23,968 {SERVER} AMQ221080: Deploying address news supporting [MULTICAST]",
    f"2026-11-27 12:13:24,685 {SERVER} AMQ221020: Started EPOLL Acceptor at 127.0.0.1:45479 for protocols [AMQP]",
    f"2026-11-27 12:13:24,688 {SERVER} AMQ221020: Started EPOLL Acceptor at 127.0.0.1:40111 for protocols [AMQP]",
    f"2026-11-27 12:13:24,692 {SERVER} AMQ221007: Server is now active",
]
STARS = "*" * 127
# A broker connection's dials, as ActiveMQAMQPProtocolLogger 111001-111003 print them.
DIALS = f"""\
2026-11-27 12:20:01,100 INFO  [org.apache.activemq.artemis.protocol.amqp.logger] AMQ111002:
{STARS}
Retrying Server AMQP Connection P on 127.0.0.1:41001 retry 1 of 2
{STARS}
2026-11-27 12:20:01,600 INFO  [org.apache.activemq.artemis.protocol.amqp.logger] AMQ111002:
{STARS}
Retrying Server AMQP Connection P on 127.0.0.1:41002 retry 2 of 2
{STARS}
2026-11-27 12:20:02,100 INFO  [org.apache.activemq.artemis.protocol.amqp.logger] AMQ111003:
{STARS}
Connected on Server AMQP Connection P on 127.0.0.1:41001 after 2 retries
{STARS}
2026-11-27 12:20:09,000 WARN  [org.apache.activemq.artemis.protocol.amqp.logger] AMQ111001:
{STARS}
Could not re-establish AMQP Server Connection Q on 127.0.0.1:41003 after 0 retries
{STARS}
""".splitlines()


# ---- the install ------------------------------------------------------------------------------------------------


def fake_home(root: Path, version: str = art.ARTEMIS_VERSION) -> Path:
    home = root / f"apache-artemis-{version}"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "bin" / "artemis").write_text("#!/bin/sh\n")
    (home / "bin" / "artemis").chmod(0o755)
    (home / "lib" / f"artemis-server-{version}.jar").write_bytes(b"")
    return home


def test_an_install_is_checked_for_its_script_and_its_version(tmp_path):
    home = fake_home(tmp_path)
    assert art.installed_version(home) == art.ARTEMIS_VERSION
    assert art.check_install(home, art.ARTEMIS_VERSION) is None
    assert "holds Artemis 2.40.0, expected 2.41.0" in art.check_install(home, "2.41.0")
    (home / "bin" / "artemis").chmod(0o644)
    assert "bin/artemis is missing or not executable" in art.check_install(home, None)


def test_a_missing_install_is_one_line_naming_the_cache_and_the_way_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path))
    monkeypatch.delenv("ARTEMIS_HOME", raising=False)
    if art.shutil.which("java") is None:
        pytest.skip("no java here: the reason names Java instead")
    with pytest.raises(PeerUnavailable) as caught:
        art.find_artemis()
    why = str(caught.value)
    assert "\n" not in why and str(tmp_path) in why and "make products" in why and "ARTEMIS_HOME" in why
    assert art.NativeArtemis.probe() == why


def test_artemis_home_names_another_install_of_any_version(tmp_path, monkeypatch):
    home = fake_home(tmp_path, "2.39.0")
    monkeypatch.setenv("ARTEMIS_HOME", str(home))
    if art.shutil.which("java") is None:
        pytest.skip("no java here")
    assert art.find_artemis() == art.ArtemisInstall(home, "2.39.0")
    monkeypatch.setenv("ARTEMIS_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(PeerUnavailable, match="^ARTEMIS_HOME: .*nowhere/bin/artemis is missing"):
        art.find_artemis()


def fake_template(install: art.ArtemisInstall) -> Path:
    """What `artemis create` writes that the provider relies on: the instance's path in three files."""
    template = install.template
    (template / "bin").mkdir(parents=True)
    (template / "etc").mkdir()
    (template / "data").mkdir()
    (template / "bin" / "artemis").write_text(f"#!/bin/sh\nARTEMIS_INSTANCE_ETC='{template}/etc'\n")
    (template / "etc" / "artemis.profile").write_text(f"ARTEMIS_HOME='{install.home}'\n"
                                                      f"ARTEMIS_INSTANCE='{template}'\n")
    (template / "etc" / "bootstrap.xml").write_text(f'<server configuration="file:{template}/etc//broker.xml"/>\n')
    (template / "etc" / "login.config").write_text("activemq { GuestLoginModule sufficient; };\n")
    return template


@pytest.fixture
def install(tmp_path, monkeypatch):
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path / "cache"))
    found = art.ArtemisInstall(fake_home(tmp_path), art.ARTEMIS_VERSION)
    fake_template(found)
    return found


def test_a_node_copies_the_template_and_points_its_paths_at_the_copy(install, tmp_path):
    workdir = tmp_path / "interop-B1"
    art.make_instance(install.template, workdir)
    for name in ("bin/artemis", "etc/artemis.profile", "etc/bootstrap.xml"):
        text = (workdir / name).read_text()
        assert str(workdir) in text and str(install.template) not in text, name
    assert f"ARTEMIS_HOME='{install.home}'" in (workdir / "etc" / "artemis.profile").read_text()


def test_an_upgrade_in_place_takes_the_other_releases_scripts_and_keeps_the_data_and_rendered_config(install,
                                                                                                      tmp_path):
    workdir = tmp_path / "interop-B1"
    art.make_instance(install.template, workdir)
    (workdir / "etc" / "broker.xml").write_text("<rendered/>")
    (workdir / "data" / "journal").mkdir()
    (workdir / "data" / "journal" / "activemq-data-1.amq").write_bytes(b"journal")
    other = art.ArtemisInstall(install.home.parent / "apache-artemis-9.9.9", "9.9.9")
    template = tmp_path / "other-template"
    shutil.copytree(install.template, template)
    old = (template / "etc" / "artemis.profile").read_text()
    (template / "etc" / "artemis.profile").write_text(old.replace(str(install.home), str(other.home))
                                                      .replace(str(install.template), str(template)))
    (template / "etc" / "broker.xml").write_text("<template/>")
    art.refresh_instance(template, workdir, keep={"broker.xml"})
    profile = (workdir / "etc" / "artemis.profile").read_text()
    assert f"ARTEMIS_HOME='{other.home}'" in profile and f"ARTEMIS_INSTANCE='{workdir}'" in profile
    assert (workdir / "etc" / "broker.xml").read_text() == "<rendered/>"
    assert (workdir / "data" / "journal" / "activemq-data-1.amq").read_bytes() == b"journal"


def peer_for(topology, install, tmp_path, **wiring):
    setup = NodeSetup(topology, "B1", frozenset({"store-and-forward"}), Wiring(**wiring))
    return art.ArtemisPeer(setup, install, workdir=tmp_path / "interop-B1")


def test_the_command_line_and_environment(install, tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_ARGS", "-Xmx8g")  # a user's JAVA_ARGS would replace the profile's needed ones
    peer = peer_for(PLAIN, install, tmp_path)
    assert peer.command() == [str(tmp_path / "interop-B1" / "bin" / "artemis"), "run"]
    env = peer.environment()
    assert "JAVA_ARGS" not in env and env["ARTEMIS_HOME"] == str(install.home)
    assert env["JAVA_ARGS_APPEND"].split() == list(art.JAVA_OPTIONS)
    assert "-Xmx256m" in art.JAVA_OPTIONS
    assert peer.info.vendor == "artemis" and peer.info.provider == "native" and peer.info.version == "2.40.0"


def test_broker_xml_gets_the_management_acceptor_and_the_clients_port_zero(install, tmp_path):
    peer = peer_for(PLAIN, install, tmp_path)
    core = ET.fromstring(peer.config_path.read_text().encode()).find("c:core", NS)
    acceptors = {a.get("name"): a.text for a in core.findall("c:acceptors/c:acceptor", NS)}
    assert acceptors == {"clients": "tcp://127.0.0.1:0?protocols=AMQP",
                         "interop-management": f"tcp://127.0.0.1:{peer.management_port}?protocols=AMQP"}
    assert core.findtext("c:security-enabled", namespaces=NS) == "false"
    assert (peer.workdir / "etc" / "login.config").read_text().startswith("activemq { Guest")  # the template's
    assert not (peer.workdir / "etc" / "artemis-users.properties").exists()


def test_a_node_that_authenticates_gets_its_users_the_harness_manager_and_no_guest(install, tmp_path):
    peer = peer_for(SECURED, install, tmp_path)
    etc = peer.workdir / "etc"
    users = (etc / "artemis-users.properties").read_text()
    assert "alice = alice-secret\n" in users
    assert f"{art.MANAGEMENT_USER} = {peer.management_password}\n" in users and len(peer.management_password) >= 16
    assert f"{art.MANAGEMENT_USER} = {art.MANAGEMENT_USER}\n" in (etc / "artemis-roles.properties").read_text()
    assert oct((etc / "artemis-users.properties").stat().st_mode & 0o777) == "0o600"
    login = (etc / "login.config").read_text()
    assert "PropertiesLoginModule required" in login and "Guest" not in login
    core = ET.fromstring(peer.config_path.read_text().encode()).find("c:core", NS)
    settings = {s.get("match"): {p.get("type"): p.get("roles") for p in s.findall("c:permission", NS)}
                for s in core.findall("c:security-settings/c:security-setting", NS)}
    assert settings["orders.#"] == {"send": "senders"}
    assert set(settings["activemq.management.#"].values()) == {art.MANAGEMENT_USER}
    assert "manage" in settings["activemq.management.#"] and "consume" in settings["activemq.management.#"]
    assert peer.management.user == art.MANAGEMENT_USER
    acceptors = {a.get("name"): a.text for a in core.findall("c:acceptors/c:acceptor", NS)}
    assert acceptors["clients"] == "tcp://127.0.0.1:0?protocols=AMQP;saslMechanisms=PLAIN", "no ANONYMOUS offered"


def test_the_renderer_adds_nothing_for_the_reference_broker():
    text = render_broker_xml(SECURED, "B1", {"clients": 5672})
    assert "activemq.management" not in text and "interop-management" not in text
    assert "saslMechanisms" not in text


# ---- ports and readiness ----------------------------------------------------------------------------------------


def test_at_most_one_acceptor_binds_port_zero():
    assert art.acceptor_ports({"clients": 0}) == {"clients": 0}
    ports = art.acceptor_ports({"clients": 0, "inter": 0, "fixed": 6000})
    assert ports["clients"] == 0 and ports["fixed"] == 6000 and 0 < ports["inter"] < 65536
    other = art.acceptor_ports({"a": 0, "b": 0})
    assert sorted(port == 0 for port in other.values()) == [False, True]


def test_the_bound_ports_and_the_active_line_come_from_the_log():
    assert art.bound_ports(STARTED) == [("127.0.0.1", 45479), ("127.0.0.1", 40111)]
    assert any(art._ACTIVE.search(line) for line in STARTED)
    assert not any(art._ACTIVE.search(line) for line in STARTED[:-1])
    assert art.log_time(STARTED[-1]) % 1 == pytest.approx(0.692)


# ---- broker connections from the log ----------------------------------------------------------------------------


def test_broker_connection_dials_are_read_from_the_log():
    events = art.connection_events(DIALS)
    assert [(e, t) for e, t, _ in events["P"]] == [("retrying", "127.0.0.1:41001"), ("retrying", "127.0.0.1:41002"),
                                                   ("connected", "127.0.0.1:41001")]
    assert events["P"][1][2] - events["P"][0][2] == pytest.approx(0.5)
    row = art.connection_row("P", "tcp://127.0.0.1:41001#127.0.0.1:41002", True, True, events["P"])
    assert row["attempts"] == 0 and row["connects"] == 1 and row["target"] == "127.0.0.1:41001"
    assert row["targets_tried"] == ["127.0.0.1:41001", "127.0.0.1:41002", "127.0.0.1:41001"]
    assert len(row["attempt_times"]) == 3 and not row["gave_up"]
    gave_up = art.connection_row("Q", "tcp://127.0.0.1:41003", False, False, events["Q"])
    assert gave_up["gave_up"] and gave_up["attempts"] == 1 and gave_up["connects"] == 0
    # A connection lost and then given up after 2 retries (reconnect-attempts 2): Artemis logs the loss as
    # "retry 1", then each failed redial; the loss is not a dial, so 2 failed attempts, both after the loss.
    lost = [("connected", "h:1", 1.0), ("retrying", "h:1", 5.0), ("retrying", "h:1", 5.2), ("gave-up", "h:1", 5.4)]
    row = art.connection_row("L", "tcp://h:1", False, False, lost)
    assert row["attempts"] == 2 and row["connects"] == 1 and row["gave_up"]
    assert row["attempt_times"] == [1.0, 5.2, 5.4] and row["targets_tried"] == ["h:1"] * 3
    idle = art.connection_row("R", "tcp://x:1", False, False, [])
    assert idle["attempt_times"] == [] and idle["connects"] == 0 and idle["target"] is None


# ---- management messages ----------------------------------------------------------------------------------------


def test_a_management_request_names_the_resource_and_the_operation_or_attribute():
    request = art.management_request("broker", "activemq.management.reply.x", operation="destroyQueue",
                                     arguments=["orders", True])
    assert request.address == "activemq.management" and request.reply_to == "activemq.management.reply.x"
    assert request.properties == {"_AMQ_ResourceName": "broker", "_AMQ_OperationName": "destroyQueue"}
    assert json.loads(request.body) == ["orders", True]
    read = art.management_request("queue.orders", "r", attribute="messageCount")
    assert read.properties == {"_AMQ_ResourceName": "queue.orders", "_AMQ_Attribute": "messageCount"}
    assert read.body == "[]"
    with pytest.raises(ValueError):
        art.management_request("broker", "r", operation="a", attribute="b")


def test_a_management_answer_is_the_value_or_the_brokers_own_words():
    ok = Message(properties={"_AMQ_OperationSucceeded": True}, body='[["orders","DLQ"]]')
    assert art.management_answer(ok, "list") == ["orders", "DLQ"]
    failed = Message(properties={"_AMQ_OperationSucceeded": False},
                     body='["Problem while retrieving attribute messageCount"]')
    with pytest.raises(ManagementError, match="cannot read: the broker answered: Problem while retrieving"):
        art.management_answer(failed, "read")
    with pytest.raises(ManagementError, match="not JSON"):
        art.management_answer(Message(properties={"_AMQ_OperationSucceeded": True}, body="{oops"), "read")


def test_queue_rows_are_summed_with_in_flight_apart():
    rows = [{"messageCount": "5", "deliveringCount": "2", "consumerCount": "1"},
            {"messageCount": "1", "deliveringCount": "0", "consumerCount": "0"}]
    assert art._sums(rows) == {"depth": 6, "available": 4, "in_flight": 2, "consumers": 1}


# ---- a real Artemis ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker():
    why = art.NativeArtemis.probe()
    if why is not None:
        pytest.skip(f"peer unavailable: {why}")
    setup = NodeSetup(PLAIN, "B1", frozenset({"store-and-forward"}), Wiring())
    peer = art.NativeArtemis.create(setup)
    try:
        peer.start(timeout=120)
        yield peer
    finally:
        peer.stop()
        peer.cleanup()


def test_a_real_artemis_starts_takes_a_message_and_reports_its_queue(broker):
    from harness.clients import Clients
    from harness.wait import wait_for

    assert broker.url.startswith("amqp://127.0.0.1:") and broker.endpoints["clients"].port != 0
    assert broker.start_seconds is not None and "AMQ221007" in broker.logs()
    with Clients() as clients:
        conn = clients.connect(broker.url)
        sender = conn.sender("orders")
        sender.send(3)
        sender.wait_outcomes(3)
        assert sender.outcome_counts() == {"accepted": 3}
        assert broker.queue_stats("orders") | {"name": "orders"} == {
            "name": "orders", "depth": 3, "available": 3, "in_flight": 0, "consumers": 0, "exists": True}
        receiver = conn.receiver("orders", credit=10)
        wait_for(lambda: receiver.count == 3, 20, "the 3 messages back from Artemis")
    assert broker.queue_stats("news")["subscriptions"] == 0 and broker.queue_stats("news")["exists"]
    assert broker.queue_stats("nowhere")["exists"] is False
    with Clients() as clients:  # an auto-created queue, deleted by management, is gone (its address stays)
        scratch = clients.connect(broker.url).sender("scratch")
        scratch.send(1)
        scratch.wait_outcomes(1)
        scratch.detach()
    assert broker.queue_stats("scratch")["depth"] == 1
    broker.delete_queue("scratch")
    assert broker.queue_stats("scratch")["exists"] is False
    assert broker.broker_connections() == []


def test_a_real_artemis_refuses_a_management_call_for_a_missing_queue_in_one_line(broker):
    with pytest.raises(ManagementError) as caught:
        broker.delete_queue("no-such-queue")
    assert "\n" not in str(caught.value) and "B1" in str(caught.value)


def test_the_module_fetch_command_needs_its_flag(capsys):
    assert art.main([]) == 2
    assert "--fetch" in capsys.readouterr().out


def test_a_network_connectors_user_may_use_artemis_federation_addresses_on_the_broker_it_dials():
    from harness.vendors.artemis.render import render_artemis_security
    from harness.topology import load_topology, topology_path

    topology = load_topology(topology_path("security-broker-network"))
    core = ET.fromstring(render_broker_xml(topology, "B2", {"clients": 5672}).encode()).find("c:core", NS)
    settings = {s.get("match"): {p.get("type"): p.get("roles") for p in s.findall("c:permission", NS)}
                for s in core.findall("c:security-settings/c:security-setting", NS)}
    assert set(settings["$ACTIVEMQ_ARTEMIS_FEDERATION.#"].values()) == {"interop-federation"}
    assert settings["jobs.#"]["send"] == "network,producers", "the topology's own grants are unchanged"
    assert "interop-federation = myCommonUser\n" in render_artemis_security(topology, "B2")["artemis-roles.properties"]
    dialler = render_broker_xml(topology, "B1", {"clients": 5672}, connect_ports={"B2": 5673})
    assert "ACTIVEMQ_ARTEMIS_FEDERATION" not in dialler, "nobody dials B1"


def test_fetch_with_artemis_home_only_checks_that_install(install, monkeypatch):
    monkeypatch.setenv("ARTEMIS_HOME", str(install.home))
    if art.shutil.which("java") is None:
        pytest.skip("no java here")
    said = []
    assert art.fetch(say=said.append) == install
    assert said[0] == f"artemis: using ARTEMIS_HOME {install.home} (Artemis 2.40.0, checked); nothing fetched"
    assert all(line.startswith("class archive: ") for line in said[1:])  # made once per install
    monkeypatch.setenv("ARTEMIS_HOME", str(install.home.parent / "nowhere"))
    with pytest.raises(PeerUnavailable, match="^ARTEMIS_HOME: "):
        art.fetch(say=said.append)


def test_a_queue_listing_that_races_the_queues_removal_is_asked_again():
    """listQueues fails on a queue removed while it was being listed (a mirror replaying a deletion); the next
    listing no longer finds it. Any other refusal is raised at once."""
    answers = [ManagementError('DC2: cannot list queues: the broker answered: Cannot invoke "org.apache.activemq.'
                               'artemis.core.server.Queue.isPaused()" because "q" is null'), '{"data": []}']
    asked = []

    def manage(resource, what, **request):
        asked.append(what)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    fake = SimpleNamespace(_manage=manage)
    assert art.ArtemisPeer._queues(fake, "name", "created-1") == [] and len(asked) == 2
    answers[:] = [ManagementError("DC2: cannot list queues: the broker answered: AMQ229017: Queue x does not exist")]
    with pytest.raises(ManagementError, match="AMQ229017"):
        art.ArtemisPeer._queues(fake, "name", "x")
