"""A version is part of a peer choice (issue 54, scope 1): parsing, which install each vendor runs for a version,
getting a version once, the one-line errors, and a real non-default version started where the cache has it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness import cli
from harness.breaks import Break, node_vendor
from harness.cell import Cell, cell_name
from harness.matrix import load_matrix, probe_vendor
from harness.vendors.activemq_classic import native as amq
from harness.vendors.artemis import native as art
from harness.vendors.qdrouterd import build as qd
from harness.peers import versions
from harness.peers.base import PeerUnavailable
from harness.peers.vendors import Choice, parse_choice, parse_peer_choices, vendor
from harness.topology import TopologyError, load_topology, parse_topology

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fresh_versions(monkeypatch, tmp_path):
    """Each test with its own cache and nothing remembered from another test or an `interop run` around it."""
    monkeypatch.setattr(versions, "_known", {})
    monkeypatch.setattr(versions, "_nonexistent", set())
    monkeypatch.setattr(versions, "_env_read", False)
    monkeypatch.delenv(versions.ENV, raising=False)
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path / "cache"))
    for name in ("ARTEMIS_HOME", "ACTIVEMQ_HOME", "QDROUTERD_INSTALL"):
        monkeypatch.delenv(name, raising=False)


def tool(folder: Path, name: str, script: str) -> Path:
    """An executable shell script `folder/name`: a stand-in for mvn or a qdrouterd binary."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def only_on_path(monkeypatch, folder: Path, *keep: str) -> None:
    """PATH = the stand-ins' folder, plus the folders of the real tools named (java, sh, bash)."""
    import shutil

    real = [str(Path(found).parent) for name in keep if (found := shutil.which(name))]
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), *dict.fromkeys(real)]))


# ---- parsing ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, choice", [
    ("artemis", Choice("artemis")),
    ("artemis@2.39.0", Choice("artemis", "2.39.0")),
    ("rabbitmq@native", Choice("rabbitmq", None, "native")),
    ("artemis@2.39.0@native", Choice("artemis", "2.39.0", "native")),
    ("artemis@container@2.39.0", Choice("artemis", "2.39.0", "container")),
    ("qdrouterd@1.18.0", Choice("qdrouterd", "1.18.0")),
    # an external peer's URL may hold `@` (user@host): it is kept whole, its version is a URL parameter
    ("external:amqp://u@h:5672?version=1.0", Choice("external:amqp://u@h:5672?version=1.0")),
])
def test_a_part_after_at_that_starts_with_a_digit_is_a_version_any_other_a_provider(text, choice):
    assert parse_choice(text) == choice
    assert str(choice) == text or text.startswith("external:") or text == "artemis@container@2.39.0"


@pytest.mark.parametrize("text, message", [
    ("artemis@", r"^artemis@: empty part after '@'"),
    ("artemis@2.39.0@2.40.0", r"^artemis@2.39.0@2.40.0: two versions \(2.39.0, 2.40.0\)$"),
    ("artemis@native@container", r"two providers \(native, container\)$"),
])
def test_a_malformed_choice_is_one_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_choice(text)


def test_peer_choices_carry_versions_and_check_each():
    chosen = parse_peer_choices(["router=qdrouterd@1.18.0,broker=artemis@2.39.0@native"])
    assert chosen == {"router": "qdrouterd@1.18.0", "broker": "artemis@2.39.0@native"}
    assert vendor("artemis@2.39.0", "broker") is vendor("artemis", "broker")
    assert parse_peer_choices(["broker=activemq-classic@6.2.7"])["broker"] == "activemq-classic@6.2.7"


@pytest.mark.parametrize("value, message", [
    ("broker=rabbitmq@3.12.1", "--peer broker=rabbitmq@3.12.1: rabbitmq runs in one version only here; drop @3.12.1"),
    ("router=reference@0.1.0", "--peer router=reference@0.1.0: reference runs in one version only here; drop @0.1.0"),
    ("broker=artemis@2.39.0@2.40.0", "--peer broker=artemis@2.39.0@2.40.0: two versions (2.39.0, 2.40.0)"),
    ("broker=artemis@2.39.0@docker", "--peer broker=artemis@2.39.0@docker: artemis has no provider 'docker' "
                                     "(expected one of: native, container)"),
])
def test_a_version_where_none_can_be_chosen_is_a_usage_error_naming_the_choice(value, message, capsys, tmp_path):
    assert cli.main(["run", "--peer", value, "--list", "--results", str(tmp_path / "results")]) == cli.USAGE
    assert capsys.readouterr().err == f"interop: {message}\n"


def test_a_version_is_a_target_and_a_cell_name_of_its_own():
    cell = Cell(None, {"router": "reference", "broker": "artemis@2.39.0"})
    assert cell.target() == "router=reference,broker=artemis 2.39.0"
    assert Cell(None, {"router": "reference", "broker": "artemis"}).target() == "router=reference,broker=artemis"
    assert Cell(None, {"broker": "rabbitmq@native"}).target() == "broker=rabbitmq@native"  # as before versions
    assert cell.products == {"artemis@2.39.0"}
    assert Cell(None, {"broker": "artemis@2.39.0@native"}).products == {"artemis@2.39.0"}
    assert cell_name(cell.peers, []) == "router-reference-broker-artemis-2.39.0"


def test_a_break_for_a_vendor_breaks_each_of_its_versions():
    fault = Break("broker", "artemis", "no-journal-sync")
    assert fault.applies_to("broker", "artemis@2.39.0") and fault.applies_to("broker", "artemis")
    assert not fault.applies_to("broker", "activemq-classic@6.2.7")


def test_a_matrix_cell_may_choose_a_version(tmp_path):
    path = tmp_path / "matrix.yaml"
    path.write_text("cells:\n  - peers: {broker: artemis@2.39.0}\n  - peers: {broker: rabbitmq@3.12}\n")
    with pytest.raises(ValueError, match=r"cells\[1\]\.peers\.broker: broker=rabbitmq@3.12: rabbitmq runs in one "):
        load_matrix(path, ["broker"], lambda role, name: vendor(name, role), probe=lambda name: None)
    path.write_text("cells:\n  - peers: {broker: artemis@2.39.0}\n")
    matrix = load_matrix(path, ["broker"], lambda role, name: vendor(name, role), probe=lambda name: None)
    assert [c.name for c in matrix.cells] == ["broker-artemis-2.39.0"]


# ---- topologies -------------------------------------------------------------------------------------------------


def two_brokers(b2: dict) -> dict:
    return {"name": "pair", "nodes": {"B1": {"role": "broker"}, "B2": {"role": "broker", **b2}}}


def test_a_topology_node_may_name_its_own_vendor_and_version():
    topology = parse_topology(two_brokers({"vendor": "artemis@2.39.0"}))
    assert topology.nodes["B2"].vendor == "artemis@2.39.0" and topology.nodes["B1"].vendor is None
    choices = {"broker": "artemis"}
    assert node_vendor(topology, "B1", choices) == "artemis"
    assert node_vendor(topology, "B2", choices) == "artemis@2.39.0"
    # a case's own choice for a node (topology(name, vendors=...)) goes over the file's
    assert node_vendor(topology, "B2", choices, {"B2": "reference"}) == "reference"


@pytest.mark.parametrize("b2, message", [
    ({"vendor": "rabbitmq@3.12"}, "<topology>: node B2: field 'vendor': broker=rabbitmq@3.12: rabbitmq runs in one "
                                  "version only here; drop @3.12"),
    ({"vendor": "qdrouterd@1.18.0"}, "<topology>: node B2: field 'vendor': broker=qdrouterd@1.18.0: qdrouterd plays "
                                     "the router role, not broker"),
])
def test_a_bad_node_vendor_is_one_line_naming_the_node_and_field(b2, message):
    with pytest.raises(TopologyError) as caught:
        parse_topology(two_brokers(b2))
    assert str(caught.value) == message


# ---- which install a version runs ------------------------------------------------------------------------------


def test_artemis_runs_each_version_from_a_cache_folder_of_its_own(tmp_path, monkeypatch):
    if art.shutil.which("java") is None:
        pytest.skip("no java here: every Artemis reason names Java")
    from tests.test_peers_artemis import fake_home

    old = fake_home(art.cached_home("2.39.0").parent, "2.39.0")
    assert old == art.cached_home("2.39.0")
    assert art.find_artemis("2.39.0") == art.ArtemisInstall(old, "2.39.0")
    with pytest.raises(PeerUnavailable) as caught:
        art.find_artemis("2.38.0")
    why = str(caught.value)
    assert why.startswith("ActiveMQ Artemis 2.38.0 is not in the cache (") and "\n" not in why
    assert "`interop run` fetches it when chosen" in why and "--fetch --version 2.38.0" in why
    assert art.NativeArtemis.probe("2.38.0") == why and art.NativeArtemis.probe("2.39.0") is None
    # ARTEMIS_HOME is used for its own version only: another version comes from the cache
    home = fake_home(tmp_path / "own", "2.40.0")
    monkeypatch.setenv("ARTEMIS_HOME", str(home))
    assert art.find_artemis("2.39.0").home == old
    assert art.find_artemis("2.40.0").home == home and art.find_artemis().home == home


def fake_activemq(version: str, spring: str) -> Path:
    """A fetched ActiveMQ Classic of `version` in the cache: its parent pom (Spring's version), jars, MANIFEST."""
    import hashlib

    folder = amq.install_dir(version)
    (folder / "lib").mkdir(parents=True)
    amq.parent_pom(folder, version).write_text(f"<project><properties><spring-version>{spring}</spring-version>"
                                               "<slf4j-version>2.0.17</slf4j-version></properties></project>")
    lines = []
    for _, artifact, v in amq.wanted_artifacts(folder, version):
        jar = folder / "lib" / f"{artifact}-{v}.jar"
        jar.write_bytes(artifact.encode())
        lines.append(f"{hashlib.sha256(artifact.encode()).hexdigest()}  {jar.name}\n")
    (folder / amq.MANIFEST).write_text("".join(lines))
    return folder


def test_activemq_runs_each_version_with_the_spring_its_release_names():
    folder = fake_activemq("6.2.7", "6.2.18")
    assert ("org.springframework", "spring-context", "6.2.18") in amq.wanted_artifacts(folder, "6.2.7")
    assert amq.wanted_artifacts(amq.install_dir(), amq.VERSION) == amq.ARTIFACTS  # the pinned one, as before
    install = amq.find_install("6.2.7")
    assert install.version == "6.2.7" and install.origin == str(folder)  # the version its broker jar says
    assert amq.probe_reason("6.2.7") is None
    why = amq.probe_reason("6.2.5")
    assert why.startswith("ActiveMQ Classic 6.2.5 is not fetched (") and "--fetch --version 6.2.5" in why
    assert "\n" not in why


def test_qdrouterd_runs_a_version_from_its_own_binary_or_the_plain_one_that_says_it(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "qdrouterd", "echo 1.19.0")
    tool(bin_dir, "qdrouterd-1.18.0", "echo 1.18.0")
    only_on_path(monkeypatch, bin_dir, "sh")
    qd.reported_version.cache_clear()
    try:
        assert qd.binary_for(None) == str(bin_dir / "qdrouterd")  # no version: the one on PATH, as before
        assert qd.binary_for("1.18.0") == str(bin_dir / "qdrouterd-1.18.0")
        assert qd.binary_for("1.19.0") == str(bin_dir / "qdrouterd")
        assert qd.binary_for("1.17.0") is None
        assert qd.missing("1.17.0") == ("qdrouterd 1.17.0 is not installed here (no qdrouterd-1.17.0 on PATH; the "
                                        "qdrouterd on PATH is 1.19.0)")
    finally:
        qd.reported_version.cache_clear()


def test_qdrouterd_is_built_only_from_a_source_archive_beside_the_install_script(tmp_path, monkeypatch):
    script = tool(tmp_path / "peers", "install.sh", 'echo "built $QDROUTERD_VERSION"')
    monkeypatch.setenv("QDROUTERD_INSTALL", str(script))
    assert qd.cannot_build("1.17.0") == (f"qdrouterd 1.17.0 is not installed and there is no source archive "
                                         f"{tmp_path / 'peers' / 'qpid-dispatch-1.17.0.tar.gz'} to build it")
    (tmp_path / "peers" / "qpid-dispatch-1.17.0.tar.gz").write_bytes(b"")
    if os.geteuid() == 0:
        assert qd.cannot_build("1.17.0") is None
    said = []
    qd.build("1.17.0", said.append)
    assert said[0].startswith("qdrouterd: building 1.17.0 from ") and said[1].startswith("qdrouterd: built 1.17.0")
    assert (versions.cache_dir() / "qdrouterd-build-1.17.0.log").read_text() == "built 1.17.0\n"
    tool(tmp_path / "peers", "install.sh", "echo 'cmake: no compiler' >&2; exit 3")
    with pytest.raises(PeerUnavailable, match=r"^building qdrouterd 1.17.0 failed \(exit 3\): cmake: no compiler "):
        qd.build("1.17.0", said.append)


# ---- getting a version once, and the one-line errors ------------------------------------------------------------


def fake_mvn(tmp_path: Path, monkeypatch, script: str) -> None:
    only_on_path(monkeypatch, tool(tmp_path / "tools", "mvn", script).parent, "java", "sh", "javac")


def test_a_version_maven_central_does_not_have_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    if art.shutil.which("java") is None:
        pytest.skip("no java here")
    fake_mvn(tmp_path, monkeypatch, "echo '[ERROR] Failed to execute goal: Could not find artifact "
                                    "org.apache.activemq:apache-artemis:tar.gz:bin:9.9.9 in central'; exit 1")
    results = tmp_path / "results"
    argv = ["run", "--peer", "broker=artemis@9.9.9", "--suite", "broker", "--results", str(results)]
    assert cli.main(argv) == cli.USAGE
    out, err = capsys.readouterr()
    assert err == ("interop: --peer broker=artemis@9.9.9: Artemis 9.9.9 is not on Maven Central "
                   "(org.apache.activemq:apache-artemis:9.9.9:tar.gz:bin)\n")
    assert out.startswith("artemis: fetching 9.9.9 from Maven Central into ")
    assert not (versions.cache_dir() / "artemis-9.9.9").exists() and not any(results.iterdir())


def test_activemq_that_does_not_exist_is_one_line(tmp_path, monkeypatch):
    fake_mvn(tmp_path, monkeypatch, "echo '[ERROR] org.apache.activemq:activemq-parent:pom:9.9.9 was not found in "
                                    "https://repo'; exit 1")
    if amq._cannot_fetch("9.9.9") is not None:
        pytest.skip(amq._cannot_fetch("9.9.9"))
    with pytest.raises(versions.NoSuchVersion) as caught:
        versions.ensure(parse_choice("activemq-classic@9.9.9"), say=lambda line: None)
    assert str(caught.value) == ("ActiveMQ Classic 9.9.9 is not on Maven Central "
                                 "(org.apache.activemq:activemq-parent:9.9.9:pom)")
    assert not amq.install_dir("9.9.9").exists()
    with pytest.raises(versions.NoSuchVersion):  # remembered: asked again, not fetched again
        versions.ensure(parse_choice("activemq-classic@9.9.9"))


def test_a_release_whose_jars_this_repository_lacks_cannot_be_had_here_and_says_which(tmp_path, monkeypatch):
    # Measured here: activemq-broker 6.2.7 and its parent pom are served, activemq-amqp 6.2.x is not (6.1.x is).
    fake_mvn(tmp_path, monkeypatch, """case "$*" in *copy-dependencies*)
  echo "[ERROR] Failed to execute goal: The following artifacts could not be resolved: \
org.apache.activemq:activemq-amqp:jar:6.2.7, org.apache.activemq:activemq-jaas:jar:6.2.7: \
org.apache.activemq:activemq-amqp:jar:6.2.7 was not found in https://repo during a previous attempt"; exit 1;;
esac
for a in "$@"; do case $a in -DoutputDirectory=*) out=${a#-DoutputDirectory=};; esac; done
echo '<project><spring-version>6.2.18</spring-version></project>' > "$out/activemq-parent-6.2.7.pom"
""")
    if amq._cannot_fetch("6.2.7") is not None:
        pytest.skip(amq._cannot_fetch("6.2.7"))
    said = []
    why = versions.ensure(parse_choice("activemq-classic@6.2.7"), say=said.append)
    assert why == "ActiveMQ Classic 6.2.7: Maven Central here lacks activemq-amqp, activemq-jaas 6.2.7"
    assert said == [f"activemq-classic: fetching 6.2.7 from Maven Central into {amq.install_dir('6.2.7')} "
                    "(about 20 s)"]


def test_a_version_that_cannot_be_had_here_is_a_reason_got_once(tmp_path, monkeypatch):
    if art.shutil.which("java") is None:
        pytest.skip("no java here")
    calls = tmp_path / "calls"
    fake_mvn(tmp_path, monkeypatch, f"echo fetch >> {calls}; echo 'Network is unreachable'; exit 1")
    said = []
    why = versions.ensure(parse_choice("artemis@2.38.0"), say=said.append)
    assert why == ("cannot fetch org.apache.activemq:apache-artemis:2.38.0:tar.gz:bin with Maven (exit 1): "
                   "Network is unreachable")
    assert said == [f"artemis: fetching 2.38.0 from Maven Central into {versions.cache_dir() / 'artemis-2.38.0'} "
                    "(about 25 s)"]
    assert versions.ensure(parse_choice("artemis@2.38.0@native")) == why  # one try per process
    assert calls.read_text() == "fetch\n"
    assert versions.state(parse_choice("artemis@2.38.0")) == why
    assert versions.found() == {"artemis@2.38.0": why}


def test_a_cell_takes_what_the_run_found_and_fetches_nothing(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    fake_mvn(tmp_path, monkeypatch, f"echo fetch >> {calls}; exit 1")
    monkeypatch.setenv(versions.ENV, json.dumps({"artemis@2.38.0": "no network here"}))
    assert versions.ensure(parse_choice("artemis@2.38.0")) == "no network here"
    assert probe_vendor("artemis@2.38.0") == "no network here"
    assert not calls.exists()
    assert versions.ensure(parse_choice("artemis")) is None  # no version chosen: the pinned default, nothing to get


def test_the_matrix_probe_counts_a_version_that_can_be_got_as_here(tmp_path, monkeypatch):
    if art.shutil.which("java") is None:
        pytest.skip("no java here")
    fake_mvn(tmp_path, monkeypatch, "exit 1")
    assert probe_vendor("artemis@2.38.0") is None  # `interop run` fetches it before its cells start
    only_on_path(monkeypatch, tool(tmp_path / "no-mvn", "java", "exit 0").parent)  # java, and no Maven
    assert probe_vendor("artemis@2.38.0") == ("ActiveMQ Artemis 2.38.0 is not in the cache and `mvn` (Maven) is not "
                                              "on PATH to fetch it")


# ---- a real non-default version ---------------------------------------------------------------------------------


# The machine's own cache, where `interop run` fetched the versions (read before the fixture points elsewhere)
REAL_CACHE = os.environ.get("INTEROP_CACHE") or str(Path.home() / ".cache" / "amqp-interop")


@pytest.mark.parametrize("role, choice, version", [
    ("broker", "artemis@2.39.0", "2.39.0"),
    ("router", "qdrouterd@1.18.0", "1.18.0"),
])
def test_a_non_default_version_in_the_cache_starts_and_reports_its_own_version(role, choice, version, monkeypatch):
    from harness.clients import Clients
    from harness.peers.launch import start_topology
    from harness.wait import wait_for

    monkeypatch.setenv("INTEROP_CACHE", REAL_CACHE)
    parsed = parse_choice(choice)
    if (why := versions.state(parsed)) is not None:
        pytest.skip(f"peer unavailable: {why}")
    topology = load_topology(ROOT / "topologies" / ("single-broker.yaml" if role == "broker" else "single-router.yaml"))
    running = start_topology(topology, {role: choice}, timeout=120)
    try:
        record = running.peer_records()[role]
        assert record["vendor"] == parsed.vendor and record["version"] == version and record["provider"] == "native"
        node = next(n for n in topology.nodes if topology.nodes[n].role == role)
        with Clients() as clients:  # it serves: three messages through it
            conn = clients.connect(running.peers[node].url)
            receiver = conn.receiver("versions.q", credit=10)
            conn.sender("versions.q").send(3)
            wait_for(lambda: receiver.count == 3, 30, f"3 messages through {choice}")
    finally:
        running.stop()


def test_a_topology_node_runs_the_version_it_names_beside_the_roles_vendor(monkeypatch):
    from harness.peers.launch import start_topology

    monkeypatch.setenv("INTEROP_CACHE", REAL_CACHE)
    if (why := versions.state(parse_choice("artemis@2.39.0"))) is not None:
        pytest.skip(f"peer unavailable: {why}")
    topology = parse_topology(two_brokers({"vendor": "artemis@2.39.0"}))
    running = start_topology(topology, {"broker": "reference"}, timeout=120)
    try:
        assert running.peers["B2"].info.as_record() == {"vendor": "artemis", "version": "2.39.0", "provider": "native"}
        assert running.peers["B1"].info.vendor == "reference"
    finally:
        running.stop()
