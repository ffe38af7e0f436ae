"""ActiveMQ Classic 6.x as a native peer: its jars from Maven Central, started from the node's activemq.xml.

Getting it (`python -m harness.vendors fetch activemq-classic`, once): Maven Central has no 6.x bin tarball, only
the jars, so a tiny pom in the cache folder ${INTEROP_CACHE:-~/.cache/amqp-interop}/activemq-classic-<VERSION>/
names them (the broker, its AMQP transport, KahaDB, the xbean/Spring reader of activemq.xml, Spring itself and
an slf4j backend) and maven-dependency-plugin 3.6.1 `copy-dependencies` puts them in its lib/. A MANIFEST
records each jar's SHA-256; a second call only checks them (fast). The launcher
(launcher/InteropActiveMQLauncher.java) is compiled into the same folder, again whenever its source
changes. ACTIVEMQ_HOME names a bin distribution instead (its lib/ and lib/optional/); the launcher is then
compiled against it into a folder of the cache of its own.

Running it: one JVM per broker in the foreground, `java -Xmx.. -cp LIB/*:LAUNCHER InteropActiveMQLauncher
xbean:file:WORKDIR/activemq.xml 0`, in the node's work dir (KahaDB under WORKDIR/data). The launcher prints
the port each transport connector bound, a statistics port (queue depth and consumers without JMX) and a
ready line; see its header. Kill -9, pause and restart on the same ports come from ProcessPeer.

Addresses: ActiveMQ's AMQP transport takes an address without a prefix as a queue unless the link carries
the `topic` capability, so a sender to a multicast address must say `topic://NAME` (wire_address does).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .render import render_activemq_xml
from ...peers.provider import RenderError
from ...peers.base import START_FLOOR_S, ManagementError, Peer, PeerInfo, PeerStartError, PeerUnavailable
from ...peers.class_archive import ClassArchive, make_by_starting
from ...peers.java_stores import tls_stores
from ...peers.process import ProcessPeer
from ...peers.provider import NodeSetup, Provider
from ...peers.versions import Versions

# Pinned: the newest 6.x whose jars all resolve from Maven Central and run on Java 17 (6.3.1 on Spring 7.0.8,
# whose baseline is Java 17). Spring and slf4j follow activemq-parent 6.3.1's own versions.
VERSION = "6.3.1"
SPRING_VERSION = "7.0.8"
SLF4J_VERSION = "2.0.18"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
PARENT = "org.apache.activemq:activemq-parent"  # its pom names the Spring and slf4j versions of each release


def artifacts(version: str, spring: str, slf4j: str) -> tuple[tuple[str, str, str], ...]:
    """(groupId, artifactId, version): what the pom asks for; Maven adds their own dependencies."""
    return (
        ("org.apache.activemq", "activemq-broker", version),
        ("org.apache.activemq", "activemq-amqp", version),
        ("org.apache.activemq", "activemq-kahadb-store", version),
        ("org.apache.activemq", "activemq-spring", version),
        # The simple authentication plugin's principals (render.py renders it for secured nodes).
        ("org.apache.activemq", "activemq-jaas", version),
        # Optional in activemq-spring, needed to read activemq.xml.
        ("org.springframework", "spring-context", spring),
        ("org.springframework", "spring-beans", spring),
        ("org.slf4j", "slf4j-simple", slf4j),
    )


ARTIFACTS = artifacts(VERSION, SPRING_VERSION, SLF4J_VERSION)
LAUNCHER_SOURCE = Path(__file__).resolve().parent / "launcher" / "InteropActiveMQLauncher.java"
LAUNCHER_CLASS = "InteropActiveMQLauncher"
LAUNCHER_JAR = "launcher.jar"
MANIFEST = "MANIFEST.sha256"
# Several brokers share two cores here: a small heap, the serial collector and the C1 compiler only (a quicker
# start and no C2 compiler threads competing with the peers under test; these brokers carry test loads).
JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.showDateTime=true",
               "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")

_LISTENING = re.compile(r"^Listening on (\S+):(\d+) \(connector '([^']*)'\)")
_STATISTICS = re.compile(r"^Statistics on (\S+):(\d+)")
_READY = re.compile(r"^Broker \S+ started; ready \(ActiveMQ (\S+)\)")
_JAR_VERSION = re.compile(r"^activemq-broker-(\d[\w.-]*)\.jar$")
CLIENT_CONNECTOR = "amqp"  # the renderer names the clients listener's transport connector so


def cache_root() -> Path:
    return Path(os.environ.get("INTEROP_CACHE") or Path.home() / ".cache" / "amqp-interop")


def install_dir(version: str = VERSION) -> Path:
    return cache_root() / f"activemq-classic-{version}"


# ---- getting it -----------------------------------------------------------------------------------------------


def render_pom(version: str = VERSION, wanted: tuple[tuple[str, str, str], ...] = ARTIFACTS) -> str:
    """The pom whose dependencies are the broker's runtime (packaging pom: it builds nothing)."""
    deps = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in wanted)
    return (f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by harness/vendors/activemq_classic: the jars of ActiveMQ Classic {version}, for `copy-dependencies`. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>interop.cache</groupId>
  <artifactId>activemq-classic-runtime</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
""")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parent_pom(folder: Path, version: str) -> Path:
    return folder / f"activemq-parent-{version}.pom"


def _property(pom: Path, name: str) -> str | None:
    match = re.search(rf"<{re.escape(name)}>\s*([^<\s]+)\s*</{re.escape(name)}>", pom.read_text())
    return match.group(1) if match else None


def wanted_artifacts(folder: Path, version: str) -> tuple[tuple[str, str, str], ...] | None:
    """The artifacts of `version`: the pinned one's from the constants above, another's with the Spring and slf4j
    versions its own activemq-parent pom names (saved in its folder by fetch); None before that pom is there."""
    if version == VERSION:
        return ARTIFACTS
    pom = parent_pom(folder, version)
    if not pom.is_file():
        return None
    spring, slf4j = _property(pom, "spring-version"), _property(pom, "slf4j-version")
    return artifacts(version, spring or SPRING_VERSION, slf4j or SLF4J_VERSION)


def _how_to_fetch(version: str) -> str:
    if version == VERSION:
        return "run `python -m harness.vendors.activemq_classic.native --fetch` (make products), or set ACTIVEMQ_HOME"
    return ("`interop run` fetches it when chosen, or python -m harness.vendors.activemq_classic.native --fetch "
            f"--version {version}")


def check_cache(folder: Path, version: str = VERSION) -> str | None:
    """None when `folder` holds a complete fetch of `version` (every jar of its MANIFEST, unchanged, and every
    pinned artifact among them), else one line saying what is wrong."""
    manifest = folder / MANIFEST
    wanted = wanted_artifacts(folder, version)
    if not manifest.is_file() or wanted is None:
        return f"ActiveMQ Classic {version} is not fetched ({folder} has no {MANIFEST}): {_how_to_fetch(version)}"
    names = set()
    for line in manifest.read_text().splitlines():
        digest, _, name = line.partition("  ")
        jar = folder / "lib" / name
        if not jar.is_file():
            return f"{jar} is missing: fetch again (python -m harness.vendors.activemq_classic.native --fetch)"
        if _sha256(jar) != digest:
            return f"{jar} differs from its SHA-256 in {manifest}: remove {folder} and fetch again"
        names.add(name)
    missing = [f"{a}-{v}.jar" for _, a, v in wanted if f"{a}-{v}.jar" not in names]
    if missing:
        return f"{manifest} lacks {', '.join(missing)}: remove {folder} and fetch again"
    return None


def fetch(mvn: str | None = None, version: str = VERSION, say=None) -> str:
    """Fetch the jars of `version` (default: the pinned one) into its cache folder and compile the launcher, or
    only check them when already there; one line saying which. NoSuchVersion when Maven Central has no such
    release; PeerUnavailable (one line) when Maven or javac is missing or fails."""
    folder = install_dir(version)
    if check_cache(folder, version) is None:
        launcher = ensure_launcher(folder / "launcher", _cache_classpath(folder))
        return f"ActiveMQ Classic {version}: ready in {folder} (jars checked, launcher {launcher.parent.name})"
    mvn = mvn or shutil.which("mvn")
    if mvn is None:
        raise PeerUnavailable("mvn is not on PATH: Maven is needed once to fetch ActiveMQ Classic's jars "
                              "(Debian package maven)")
    if say is not None:
        say(f"activemq-classic: fetching {version} from Maven Central into {folder} (about 20 s)")
    started = time.monotonic()
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        wanted = wanted_artifacts(folder, version) or _fetch_parent(mvn, folder, version)
    except BaseException:
        if created:  # a version that does not exist leaves no folder behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    (folder / "pom.xml").write_text(render_pom(version, wanted))
    staging = folder / "lib.partial"
    shutil.rmtree(staging, ignore_errors=True)
    result = subprocess.run(
        [mvn, "-B", "-q", "-f", str(folder / "pom.xml"), f"{DEPENDENCY_PLUGIN}:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True)
    if result.returncode != 0:
        output = _plain(result.stdout + result.stderr)
        # The release exists (its parent pom came), but this repository may lack some of its jars: say which.
        unresolved = re.search(r"could not be resolved: (.*?): (?:Could not find artifact|[\w.:-]+ was not found in)",
                               output)
        if unresolved:
            names = [a.split(":")[1] for a in unresolved.group(1).split(", ") if a.count(":") >= 2]
            raise PeerUnavailable(f"ActiveMQ Classic {version}: Maven Central here lacks {', '.join(names)} "
                                  f"{version}")
        errors = [ln for ln in output.splitlines() if "ERROR" in ln]
        raise PeerUnavailable(f"fetching ActiveMQ Classic {version} with Maven failed: "
                              f"{(errors or ['exit status ' + str(result.returncode)])[0].strip()}")
    shutil.rmtree(folder / "lib", ignore_errors=True)
    staging.rename(folder / "lib")  # whole or not at all: a half-copied lib/ never carries a MANIFEST
    jars = sorted((folder / "lib").glob("*.jar"))
    (folder / MANIFEST).write_text("".join(f"{_sha256(j)}  {j.name}\n" for j in jars))
    if (why := check_cache(folder, version)) is not None:
        raise PeerUnavailable(why)
    ensure_launcher(folder / "launcher", _cache_classpath(folder))
    return (f"ActiveMQ Classic {version}: fetched {len(jars)} jars into {folder} and compiled the launcher "
            f"in {time.monotonic() - started:.0f} s")


_NOT_FOUND = re.compile(r"Could not find artifact|was not found in")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def _plain(text: str) -> str:
    """Maven's output without its colour codes (it colours even in batch mode)."""
    return _COLOUR.sub("", text)


def _fetch_parent(mvn: str, folder: Path, version: str) -> tuple[tuple[str, str, str], ...]:
    """Copy activemq-parent's pom of `version` into its folder (which Spring and slf4j it was released with):
    also the check that the release exists at all."""
    result = subprocess.run(
        [mvn, "-B", "-q", "-C", f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={PARENT}:{version}:pom",
         f"-DoutputDirectory={folder}"], capture_output=True, text=True, cwd=folder)
    output = _plain(result.stdout + result.stderr)
    if result.returncode != 0:
        from ...peers.versions import NoSuchVersion

        if _NOT_FOUND.search(output):
            raise NoSuchVersion(f"ActiveMQ Classic {version} is not on Maven Central ({PARENT}:{version}:pom)")
        errors = [ln for ln in output.splitlines() if "ERROR" in ln] or [f"exit status {result.returncode}"]
        raise PeerUnavailable(f"fetching ActiveMQ Classic {version}'s parent pom with Maven failed: "
                              f"{errors[0].strip()}")
    return wanted_artifacts(folder, version)


def ensure_launcher(parent: Path, classpath: list[str]) -> Path:
    """The jar of the launcher compiled from the current source against `classpath`: parent/<sha12 of the
    source>-jar/launcher.jar, compiled now if missing (in a temporary folder renamed at the end, so that two harness
    processes compiling at once both end with a whole one). A jar, not a folder of classes: the JVM writes a class
    archive (harness/peers/class_archive.py) only for a class path without non-empty folders."""
    source = LAUNCHER_SOURCE.read_bytes()
    target = parent / f"{hashlib.sha256(source).hexdigest()[:12]}-jar"
    if (target / LAUNCHER_JAR).is_file():
        return target / LAUNCHER_JAR
    javac = shutil.which("javac")
    if javac is None:
        raise PeerUnavailable("javac is not on PATH: a JDK 17 is needed to compile the ActiveMQ launcher "
                              "(Debian package openjdk-17-jdk-headless)")
    parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="compiling-", dir=parent))
    classes = scratch / "classes"
    result = subprocess.run([javac, "-nowarn", "-cp", os.pathsep.join(classpath), "-d", str(classes),
                             str(LAUNCHER_SOURCE)], capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        first = next((ln for ln in result.stderr.splitlines() if "error" in ln), result.stderr.strip())
        raise PeerUnavailable(f"compiling {LAUNCHER_SOURCE.name} failed: {first}")
    with zipfile.ZipFile(scratch / LAUNCHER_JAR, "w") as jar:  # a jar is a zip; -cp needs no manifest
        for compiled in sorted(classes.rglob("*.class")):
            jar.write(compiled, compiled.relative_to(classes).as_posix())
    shutil.rmtree(classes)
    try:
        scratch.rename(target)
    except OSError:  # another process got there first: its copy is as good
        shutil.rmtree(scratch, ignore_errors=True)
    return target / LAUNCHER_JAR


def _cache_classpath(folder: Path) -> list[str]:
    return [str(folder / "lib" / "*")]


# ---- finding it -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActiveMQInstall:
    version: str
    classpath: tuple[str, ...]  # entries for `java -cp` (folders of jars as DIR/*)
    launcher_parent: Path  # where the launcher is (or will be) compiled against that classpath
    origin: str  # for messages: the cache folder or ACTIVEMQ_HOME=...


def find_install(version: str | None = None) -> ActiveMQInstall:
    """ACTIVEMQ_HOME when set (a bin distribution) and no other version is asked for, else the fetched cache of
    `version` (default: the pinned one); PeerUnavailable (one line) if neither can run a broker with AMQP."""
    home = os.environ.get("ACTIVEMQ_HOME")
    if home:
        install = _home_install(Path(home))
        if version is None or install.version == version:
            return install
    version = version or VERSION
    folder = install_dir(version)
    if (why := check_cache(folder, version)) is not None:
        raise PeerUnavailable(why)
    # the version the jars say, for the record: the broker jar's name (activemq-broker-6.2.7.jar)
    found = [m.group(1) for m in map(_JAR_VERSION.match, (p.name for p in (folder / "lib").glob("activemq-broker-*")))
             if m]
    return ActiveMQInstall(found[0] if len(found) == 1 else version, tuple(_cache_classpath(folder)),
                           folder / "launcher", str(folder))


def _home_install(home: Path) -> ActiveMQInstall:
    lib = home / "lib"
    brokers = sorted(lib.glob("activemq-broker-*.jar"))
    if not brokers:
        raise PeerUnavailable(f"ACTIVEMQ_HOME={home}: expected an ActiveMQ Classic bin distribution "
                              "(no lib/activemq-broker-*.jar)")
    if not list((lib / "optional").glob("activemq-amqp-*.jar")) + list(lib.glob("activemq-amqp-*.jar")):
        raise PeerUnavailable(f"ACTIVEMQ_HOME={home}: no activemq-amqp jar in lib/ or lib/optional/ "
                              "(this install cannot speak AMQP)")
    match = _JAR_VERSION.match(brokers[-1].name)
    version = match.group(1) if match else "unknown"
    classpath = (str(lib / "*"), str(lib / "optional" / "*"))
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:8]
    return ActiveMQInstall(version, classpath, cache_root() / f"activemq-classic-launcher-{version}-{digest}",
                           f"ACTIVEMQ_HOME={home}")


_probe_cache: dict[tuple[str | None, str | None, str | None], str | None] = {}


def probe_reason(version: str | None = None) -> str | None:
    """None when a broker (of `version`, default the pinned one) can run here, else why not (checked once per
    ACTIVEMQ_HOME/cache/version per process: the check reads every jar)."""
    key = (os.environ.get("ACTIVEMQ_HOME"), os.environ.get("INTEROP_CACHE"), version)
    if key not in _probe_cache:
        reason = None
        if shutil.which("java") is None:
            reason = "java is not on PATH (ActiveMQ Classic 6 needs Java 17)"
        else:
            try:
                find_install(version)
            except PeerUnavailable as exc:
                reason = str(exc)
        if reason is not None:  # not kept: a version fetched later in this process must be found then
            return reason
        _probe_cache[key] = reason
    return _probe_cache[key]


def _cannot_fetch(version: str) -> str | None:
    if shutil.which("java") is None:
        return "java is not on PATH (ActiveMQ Classic 6 needs Java 17)"
    if shutil.which("mvn") is None or shutil.which("javac") is None:
        return (f"ActiveMQ Classic {version} is not in the cache, and fetching it needs `mvn` and `javac` on PATH "
                "(Debian packages maven, openjdk-17-jdk-headless)")
    return None


def _get(version: str, say) -> None:
    say(fetch(version=version, say=say))
    make_class_archive(say, version)


# Every 6.x release whose jars Maven Central serves (here 6.1.x and 6.3.1: no activemq-amqp 6.2.x), each in its own
# cache folder; Java 17.
# The previous release is 6.1.8, not 6.2.x: Maven Central as reached from here serves no activemq-amqp 6.2.x.
VERSIONS = Versions("ActiveMQ Classic", VERSION, probe_reason, _cannot_fetch, _get, previous="6.1.8")


# ---- the peer -------------------------------------------------------------------------------------------------


def class_archive(install: ActiveMQInstall) -> ClassArchive:
    """The AppCDS archive of this install's brokers (harness/peers/class_archive.py), made by `--fetch`."""
    return ClassArchive(cache_root() / "class-archives", "activemq-classic", shutil.which("java") or "java",
                        (*install.classpath, str(install.launcher_parent), *JVM_OPTIONS))


def make_class_archive(say=print, version: str | None = None) -> None:
    """Start one broker with the option that writes the archive, and stop it: once per install."""
    install = find_install(version)
    # the install's own version: a broker of another one would write (or map) another install's archive
    make_by_starting(class_archive(install), f"activemq-classic@{install.version}@native", say)


class ActiveMQPeer(ProcessPeer):
    """One ActiveMQ Classic broker for node `setup.node_name`."""

    def __init__(self, setup: NodeSetup, install: ActiveMQInstall, workdir: Path | None = None):
        self.setup = setup
        self.install = install
        self.launcher = ensure_launcher(install.launcher_parent, list(install.classpath))
        name = setup.node_name
        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "broker", PeerInfo("activemq-classic", install.version, "native"),
                         setup.capabilities, workdir)
        self.config_path = workdir / "activemq.xml"
        self.tls_stores = tls_stores(setup, workdir)
        self.config_path.write_text(self.render({}))  # a RenderError here is the topology's, said before start
        self.statistics: tuple[str, int] | None = None
        self.start_seconds: float | None = None
        self.extra_jvm_options: list[str] = []  # class_archive's, when it is being made

    def render(self, ports: dict[str, int]) -> str:
        """activemq.xml with the wiring's ports, `ports` over them (the learned ones on restart)."""
        return render_activemq_xml(self.setup.topology, self.name, {**self.setup.listen_ports, **ports},
                                   self.setup.broker_settings(), host="127.0.0.1",
                                   connect_ports=self.setup.connect_ports, tls_stores=self.tls_stores)

    def command(self) -> list[str]:
        java = shutil.which("java") or "java"
        classpath = os.pathsep.join([*self.install.classpath, str(self.launcher)])
        return [java, *JVM_OPTIONS, *class_archive(self.install).options(), *self.extra_jvm_options,
                "-cp", classpath, LAUNCHER_CLASS, f"xbean:file:{self.config_path}", "0"]

    def start(self, timeout: float = 60.0) -> None:
        started = time.monotonic()
        self.endpoints = {}
        self._start_logged(max(timeout, START_FLOOR_S), _READY, _LISTENING, "ActiveMQ Classic broker")
        # The clients listener's connector is named `amqp` in activemq.xml; the harness knows it as `clients`.
        if CLIENT_CONNECTOR in self.endpoints:
            endpoint = self.endpoints.pop(CLIENT_CONNECTOR)
            endpoint.name = "clients"
            self.endpoints = {"clients": endpoint, **self.endpoints}
        found = self._log_matches(_STATISTICS)
        if not found:
            raise PeerStartError(f"{self.name}: the launcher said it was ready but gave no statistics port")
        self.statistics = (found[-1].group(1), int(found[-1].group(2)))
        self.start_seconds = round(time.monotonic() - started, 2)

    def _prepare_restart(self) -> None:
        """Come back on the ports the connectors got, with the same KahaDB (the work dir's data/)."""
        self.config_path.write_text(self.render({name: ep.port for name, ep in self.endpoints.items()}))

    @property
    def data_dir(self) -> Path:
        """KahaDB's folder (activemq.xml's dataDirectory, relative to the work dir)."""
        return self.workdir / "data"

    def _install_for(self, version: str | None) -> ActiveMQInstall:
        from ...peers.vendors import Choice
        from ...peers.versions import ensure

        if (why := ensure(Choice("activemq-classic", version, "native"))) is not None:
            raise PeerUnavailable(f"{self.name}: cannot put ActiveMQ Classic {version} in place: {why}")
        return find_install(version)

    def _use_install(self, install: ActiveMQInstall) -> None:
        """The same activemq.xml and KahaDB, the other release's jars and its own compile of the launcher."""
        self.launcher = ensure_launcher(install.launcher_parent, list(install.classpath))
        self.install = install
        self.info = PeerInfo("activemq-classic", install.version, "native")

    def wire_address(self, name: str) -> str:
        """`topic://NAME` for a multicast address of the node, else the name (a queue, ActiveMQ's default);
        names already prefixed pass unchanged."""
        if "://" in name:
            return name
        routing = {q.address: q.routing for q in self.setup.node.queues}
        return f"topic://{name}" if routing.get(name) == "multicast" else name

    def queue_stats(self, name: str) -> dict:
        """{"depth", "consumers", "in_flight", "enqueued", "dequeued", ..., "exists"} of queue `name`; a queue the
        broker does not have is {"exists": False} with depth and consumers 0."""
        return self._ask(f"QUEUE {name}", f"queue statistics of {name!r}")

    def topic_stats(self, name: str) -> dict:
        return self._ask(f"TOPIC {name}", f"topic statistics of {name!r}")

    def network_bridges(self) -> dict[str, list[dict]]:
        """network connector name -> its bridges up now ({"remote_broker", "remote_address"} each)."""
        answer = self._ask("BRIDGES", "the network bridges")
        return {c["name"]: c["bridges"] for c in answer["connectors"]}

    def _ask(self, request: str, what: str, timeout: float = 5.0) -> dict:
        """One request to the launcher's statistics port; its JSON answer, or ManagementError (one line)."""
        if self.statistics is None or not self.is_running():
            raise ManagementError(f"{self.name}: cannot read {what}: the broker is not running")
        try:
            with socket.create_connection(self.statistics, timeout=timeout) as sock:
                sock.sendall(request.encode() + b"\n")
                line = sock.makefile("r", encoding="utf-8").readline()
        except OSError as exc:
            raise ManagementError(f"{self.name}: cannot read {what}: {exc}") from None
        try:
            answer = json.loads(line)
        except ValueError:
            raise ManagementError(f"{self.name}: cannot read {what}: the launcher answered {line[:80]!r}") from None
        if "error" in answer:
            raise ManagementError(f"{self.name}: cannot read {what}: {answer['error']}")
        return answer


class NativeActiveMQ(Provider):
    """ActiveMQ Classic from the fetched jars (or ACTIVEMQ_HOME), one JVM per broker."""

    vendor, name, role = "activemq-classic", "native", "broker"
    versioned = True

    @classmethod
    def probe(cls, version: str | None = None) -> str | None:
        return probe_reason(version)

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        try:
            return ActiveMQPeer(setup, find_install(setup.version))
        except RenderError as exc:
            raise PeerStartError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.vendors.activemq_classic.native",
                                     description="Get ActiveMQ Classic for the harness (docs/getting-products.md: "
                                                 "Getting ActiveMQ Classic).")
    parser.add_argument("--fetch", action="store_true",
                        help=f"fetch ActiveMQ Classic {VERSION}'s jars into {install_dir()} and compile the "
                             "launcher (once; later only checks); with ACTIVEMQ_HOME, check that install")
    parser.add_argument("--version", default=None, metavar="V",
                        help=f"fetch this 6.x release instead of {VERSION}, into a cache folder of its own")
    args = parser.parse_args(argv)
    if not args.fetch:
        parser.print_usage(sys.stderr)
        return 2
    from ...peers.versions import NoSuchVersion

    try:
        if os.environ.get("ACTIVEMQ_HOME") and args.version is None:
            install = find_install()
            launcher = ensure_launcher(install.launcher_parent, list(install.classpath))
            print(f"ActiveMQ Classic {install.version}: {install.origin} usable (launcher in {launcher})")
        else:
            print(fetch(version=args.version or VERSION))
        make_class_archive(version=args.version)
    except (PeerUnavailable, NoSuchVersion) as exc:
        print(f"activemq: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
