"""ActiveMQ Artemis as a native peer: the binary distribution from Maven Central, one instance per node.

Getting it (`python -m harness.vendors fetch artemis`, `make products`): Maven's dependency plugin unpacks
org.apache.activemq:apache-artemis:2.40.0:tar.gz:bin into the cache ($INTEROP_CACHE, else
~/.cache/amqp-interop) as artemis-2.40.0/, checks it (bin/artemis there, the server jar of the pinned version)
and makes an instance template beside it with `artemis create` (5 s, once). A second fetch only checks.
ARTEMIS_HOME names another install instead; its template goes into the cache too.

Each node gets a copy of the template in a temp work dir (the instance's absolute paths rewritten to the
copy), its broker.xml rendered from the topology (harness.vendors.artemis.render, as the reference broker reads it),
and for nodes that authenticate the login module's users and roles files and a login.config without the guest
module. `bin/artemis run` runs it in the foreground as a ProcessPeer (kill -9, pause, restart, slow disk).

Ports: Artemis logs each acceptor's bound port (AMQ221020) but not the acceptor's name, so at most one acceptor
binds port 0 (the clients listener where no other node dials it); the others get a free port up front.
Management: an extra plain acceptor on loopback that no topology names, over which the harness speaks
Artemis's management by AMQP messages (requests to `activemq.management`, ManagementClient below), so that a
TLS-only or authenticating node can still be asked for its queues and broker connections.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Management over AMQP (ManagementClient, management_request, management_answer) lives in harness/amq_management.py,
# which the reference broker's peer uses too; the names stay importable from here.
from ...amq_management import ManagementClient, management_answer, management_request  # noqa: F401
from ...ports import free_port, release_ports
from ...wait import WaitTimeout, accepts, wait_for
from ...peers.base import (START_FLOOR_S, Endpoint, ManagementError, PeerInfo, PeerStartError, PeerUnavailable,
                   describe_exit)
from ...peers.class_archive import ClassArchive, make_by_starting
from ...peers.process import ProcessPeer
from ...peers.provider import NodeSetup, Provider
from ...peers.versions import Versions
from .render import broker_xml_for

ARTEMIS_VERSION = "2.40.0"  # the pinned default: what a choice without a version runs
# listQueues failing on a queue removed while it was listed (Peer._queues asks again, at most this many times)
QUEUE_GONE_WHILE_LISTED = 'because "q" is null'
LIST_QUEUES_ATTEMPTS = 3
ARTIFACT = f"org.apache.activemq:apache-artemis:{ARTEMIS_VERSION}:tar.gz:bin"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

# Heap and start-up. Several brokers share two cores and must each start fast: a 256 MiB heap is plenty for
# the suites' message volumes (Artemis pages to disk past half of it; an instance used ~170 MB resident here),
# and the client compiler alone (C1) spends less CPU while the broker starts. The profile's G1 collector stays:
# the JVM refuses a second collector flag. Start measured here: 6.4-7.2 s with the machine moderately busy.
JAVA_OPTIONS = ("-Xms64m", "-Xmx256m", "-XX:TieredStopAtLevel=1")

# The profile's default JAVA_ARGS with the serial collector in place of G1 (and G1's string deduplication dropped):
# G1's concurrent threads cost CPU that a dozen JVMs sharing two cores do not have. Measured here on 2026-12-07 (a
# make run beside it, three runs each): start, 3,000 durable 200-byte messages sent and received, stop: 3.7-4.8
# CPU-s with G1, 2.9-3.3 with the serial collector. A broker's AMQP behaviour does not depend on its collector;
# ActiveMQ Classic runs with the serial collector here too (harness/vendors/activemq_classic/native.py).
_PROFILE_JAVA_ARGS = re.compile(r'^\s*JAVA_ARGS="([^"]*)"', re.MULTILINE)
_G1_ONLY = ("-XX:+UseG1GC", "-XX:+UseStringDeduplication")


def serial_gc_java_args(profile: Path) -> str | None:
    """The instance profile's default JAVA_ARGS with the serial collector, or None when it names none (then the
    profile's own apply). Arguments naming shell variables are left out: the profile expands them, the environment
    would not (the web console's, which these instances do not run)."""
    try:
        match = _PROFILE_JAVA_ARGS.search(profile.read_text())
    except OSError:
        return None
    if match is None:
        return None
    args = [a for a in match.group(1).split() if a not in _G1_ONLY and "${" not in a and "$" not in a]
    return " ".join(["-XX:+UseSerialGC", *args])


MANAGEMENT_USER = "interop-management"  # also its role: the one that may manage, on nodes that authenticate

# The broker's log lines the peer reads (console pattern `%d %-5level [%logger] %msg`).
_ACCEPTOR = re.compile(r"AMQ221020: Started \w+ Acceptor at (\S+):(\d+) for protocols")
_ACTIVE = re.compile(r"AMQ221007: Server is now active")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
# Broker connection events (ActiveMQAMQPProtocolLogger 111001-111003): each is a header line with the code,
# then a line of stars, then the text with the connection's name and the HOST:PORT it dialled.
_BC_EVENT = re.compile(r"(?P<event>Could not re-establish AMQP Server|Retrying Server AMQP|Connected on Server AMQP) "
                       r"Connection (?P<name>\S+) on (?P<target>\S+?)(?: after| retry)")


def cache_dir() -> Path:
    return Path(os.environ.get("INTEROP_CACHE") or Path.home() / ".cache" / "amqp-interop")


def cached_home(version: str = ARTEMIS_VERSION) -> Path:
    return cache_dir() / f"artemis-{version}" / f"apache-artemis-{version}"


@dataclass(frozen=True)
class ArtemisInstall:
    home: Path  # holds bin/artemis and lib/
    version: str

    @property
    def template(self) -> Path:
        """The instance every node copies: under the cache, one per install."""
        if self.home == cached_home(self.version):
            return self.home.parent / "instance-template"
        digest = hashlib.sha1(str(self.home).encode()).hexdigest()[:10]
        return cache_dir() / f"artemis-instance-{self.version}-{digest}"


def installed_version(home: Path) -> str | None:
    """The version of the Artemis at `home`, from its server jar's name; None when there is none."""
    jars = sorted((home / "lib").glob("artemis-server-*.jar"))
    match = re.fullmatch(r"artemis-server-(\d[\w.-]*)\.jar", jars[0].name) if jars else None
    return match.group(1) if match else None


def check_install(home: Path, expected: str | None) -> str | None:
    """Why `home` is not a usable Artemis (of version `expected`, when given); None when it is."""
    if not os.access(home / "bin" / "artemis", os.X_OK):
        return f"{home}/bin/artemis is missing or not executable"
    version = installed_version(home)
    if version is None:
        return f"{home}/lib has no artemis-server-VERSION.jar"
    if expected is not None and version != expected:
        return f"{home} holds Artemis {version}, expected {expected}"
    return None


def find_artemis(version: str | None = None) -> ArtemisInstall:
    """The Artemis to run: of `version` when given (ARTEMIS_HOME if it holds that version, else the cache's folder
    of it), else $ARTEMIS_HOME, else the cached pinned version; PeerUnavailable (one line) if none."""
    if shutil.which("java") is None:
        raise PeerUnavailable("ActiveMQ Artemis needs Java 17 or later, and `java` is not on PATH")
    named = os.environ.get("ARTEMIS_HOME")
    if named:
        home = Path(named)
        why = check_install(home, None)
        if why is not None:
            raise PeerUnavailable(f"ARTEMIS_HOME: {why} (expected an unpacked Artemis binary distribution)")
        if version is None or installed_version(home) == version:
            return ArtemisInstall(home, installed_version(home))
    wanted = version or ARTEMIS_VERSION
    home = cached_home(wanted)
    why = check_install(home, wanted)
    if why is not None:
        how = (f"`interop run` fetches it when chosen, or python -m harness.vendors.artemis.native --fetch --version "
               f"{wanted}" if version else
               "run `make products` (python -m harness.vendors fetch artemis) or set ARTEMIS_HOME")
        raise PeerUnavailable(f"ActiveMQ Artemis {wanted} is not in the cache ({why}): {how}")
    return ArtemisInstall(home, wanted)


def artifact(version: str) -> str:
    return f"org.apache.activemq:apache-artemis:{version}:tar.gz:bin"


# Maven's words for an artifact the repository does not have (fresh, or remembered from an earlier try)
_NOT_FOUND = re.compile(r"Could not find artifact|was not found in")


def fetch(say=print, version: str | None = None) -> ArtemisInstall:
    """Unpack the distribution of `version` (default: the pinned one) into the cache's folder of that version with
    Maven unless a checked copy is there; then make sure the instance template exists. With ARTEMIS_HOME set (and
    no other version asked for), only check that install and make its template. Raises NoSuchVersion when Maven
    Central has no such version, PeerUnavailable (one line) when it cannot fetch it."""
    from ...peers.versions import NoSuchVersion

    named = os.environ.get("ARTEMIS_HOME")
    if named and (version is None or installed_version(Path(named)) == version):
        install = find_artemis(version)
        instance_template(install)
        say(f"artemis: using ARTEMIS_HOME {install.home} (Artemis {install.version}, checked); nothing fetched")
        make_class_archive(install, say)
        return install
    version = version or ARTEMIS_VERSION
    home = cached_home(version)
    if check_install(home, version) is None:
        install = ArtemisInstall(home, version)
        instance_template(install)
        say(f"artemis: {version} already in {home.parent} (checked)")
        make_class_archive(install, say)
        return install
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerUnavailable(f"cannot fetch Artemis {version}: `mvn` (Maven) is not on PATH")
    say(f"artemis: fetching {version} from Maven Central into {home.parent} (about 25 s)")
    began = time.monotonic()
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=home.parent))
    try:
        command = [mvn, "-B", "-q", "-C", f"{DEPENDENCY_PLUGIN}:unpack", f"-Dartifact={artifact(version)}",
                   f"-DoutputDirectory={staging}"]
        done = subprocess.run(command, cwd=staging, capture_output=True, text=True)
        if done.returncode != 0:
            output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # Maven colours in batch mode too
            if _NOT_FOUND.search(output):
                raise NoSuchVersion(f"Artemis {version} is not on Maven Central ({artifact(version)})")
            tail = output.strip().splitlines()[-1:] or ["(no output)"]
            raise PeerUnavailable(f"cannot fetch {artifact(version)} with Maven (exit {done.returncode}): {tail[0]}")
        unpacked = staging / home.name
        why = check_install(unpacked, version)
        if why is not None:
            raise PeerUnavailable(f"fetched {artifact(version)} but it does not check: {why}")
        shutil.rmtree(home, ignore_errors=True)
        unpacked.rename(home)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not any(home.parent.iterdir()):  # a version that does not exist leaves no empty folder behind
            home.parent.rmdir()
    install = ArtemisInstall(home, version)
    instance_template(install)
    say(f"artemis: fetched {version} into {home.parent} in {time.monotonic() - began:.0f} s")
    make_class_archive(install, say)
    return install


def _cannot_fetch(version: str) -> str | None:
    if shutil.which("java") is None:
        return "ActiveMQ Artemis needs Java 17 or later, and `java` is not on PATH"
    if shutil.which("mvn") is None:
        return f"ActiveMQ Artemis {version} is not in the cache and `mvn` (Maven) is not on PATH to fetch it"
    return None


def _missing(version: str) -> str | None:
    try:
        find_artemis(version)
    except PeerUnavailable as exc:
        return str(exc)
    return None


# Every version Maven Central serves as a bin tarball (2.18.0-2.40.0 here), each in its own cache folder.
VERSIONS = Versions("Artemis", ARTEMIS_VERSION, _missing, _cannot_fetch, lambda version, say: fetch(say, version),
                    previous="2.39.0")


def instance_template(install: ArtemisInstall) -> Path:
    """The instance `artemis create` made for this install, made now if missing (under a lock: parallel
    sessions may ask at once)."""
    template = install.template
    if (template / "etc" / "artemis.profile").is_file():
        return template
    template.parent.mkdir(parents=True, exist_ok=True)
    with open(template.parent / f".{template.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (template / "etc" / "artemis.profile").is_file():
            return template
        staging = template.with_name(f".{template.name}-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        # --silent: no questions; --no-web: no console (the harness manages over AMQP); --nio: no libaio;
        # --no-autotune: no disk benchmark. broker.xml is replaced per node, so its journal flags do not matter.
        command = [str(install.home / "bin" / "artemis"), "create", str(staging), "--silent", "--force",
                   "--user", "admin", "--password", "admin", "--allow-anonymous", "--no-web", "--no-autotune",
                   "--nio", "--java-memory", "256M"]
        done = subprocess.run(command, capture_output=True, text=True, env=_artemis_env(install), timeout=120)
        if done.returncode != 0 or not (staging / "etc" / "artemis.profile").is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["(no output)"]
            shutil.rmtree(staging, ignore_errors=True)
            raise PeerUnavailable(f"`artemis create` failed for {install.home} (exit {done.returncode}): {tail[0]}")
        for scratch in ("data", "log", "tmp"):
            shutil.rmtree(staging / scratch, ignore_errors=True)
            (staging / scratch).mkdir()
        staging.rename(template)
    return template


def class_archive(install: ArtemisInstall) -> ClassArchive:
    """The AppCDS archive of this install's brokers (harness/peers/class_archive.py), made by fetch()."""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    return ClassArchive(cache_dir() / "class-archives", "artemis", java, (str(install.home), *JAVA_OPTIONS))


def make_class_archive(install: ArtemisInstall, say=print) -> None:
    """Start one broker of the install with the option that writes the archive, and stop it: once per install."""
    # the install's own version: a broker of another one would write (or map) another install's archive
    make_by_starting(class_archive(install), f"artemis@{install.version}@native", say)


def _artemis_env(install: ArtemisInstall) -> dict[str, str]:
    """The environment for Artemis's scripts: its home, and none of the user's JAVA_ARGS (which would replace
    the profile's, including an --add-opens the broker needs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_ARGS", "ARTEMIS_INSTANCE")}
    env["ARTEMIS_HOME"] = str(install.home)
    return env


_TEMPLATE_PATH = re.compile(r"^ARTEMIS_INSTANCE='([^']+)'", re.MULTILINE)


def make_instance(template: Path, workdir: Path) -> None:
    """Copy the template into `workdir` and point the copy's scripts and configs at it (`create` writes the
    instance's absolute path into bin/artemis, etc/artemis.profile and etc/bootstrap.xml)."""
    shutil.copytree(template, workdir, dirs_exist_ok=True, symlinks=True)
    _point_at(template, workdir)


def refresh_instance(template: Path, workdir: Path, keep: set[str]) -> None:
    """Give the instance in `workdir` another release's scripts and profile: the bin/ and etc/ files of that
    release's template, except the etc files named in `keep` (the node's rendered broker.xml and users), pointed at
    `workdir`. Its data/ is left as it is. This is the instance side of Artemis's upgrade procedure (the new home in
    etc/artemis.profile and bin/artemis, the instance's own configuration kept)."""
    for folder in ("bin", "etc"):
        for path in (template / folder).iterdir():
            if path.is_file() and not (folder == "etc" and path.name in keep):
                shutil.copy2(path, workdir / folder / path.name)
    _point_at(template, workdir)


def _point_at(template: Path, workdir: Path) -> None:
    """Rewrite the template's own path (which `create` wrote into its scripts and configs) to `workdir`."""
    match = _TEMPLATE_PATH.search((template / "etc" / "artemis.profile").read_text())
    if match is None:
        raise PeerStartError(f"{template}/etc/artemis.profile names no ARTEMIS_INSTANCE: remake the template")
    old = match.group(1)
    for folder in ("bin", "etc"):
        for path in (workdir / folder).iterdir():
            if path.is_file():
                text = path.read_text(errors="surrogateescape")
                if old in text:
                    path.write_text(text.replace(old, str(workdir)), errors="surrogateescape")


def login_config(users_file: str, roles_file: str) -> str:
    """A login.config with the properties module alone: a node that authenticates takes no guests."""
    return ("activemq {\n"
            "   org.apache.activemq.artemis.spi.core.security.jaas.PropertiesLoginModule required\n"
            "       debug=false\n"
            "       reload=false\n"
            f'       org.apache.activemq.jaas.properties.user="{users_file}"\n'
            f'       org.apache.activemq.jaas.properties.role="{roles_file}";\n'
            "};\n")


def acceptor_ports(wanted: dict[str, int], pick=lambda: free_port(held=True)) -> dict[str, int]:
    """Ports for the acceptors: the ones given stay; of those asking for port 0, the clients listener (else the
    first) keeps 0 and the others get a port of their own (`pick`), since the log does not say which acceptor
    got which port. Picked below the ephemeral range and reserved across processes (harness/ports.py): a free
    port from that range was taken by someone else before a broker bound it ("Address already in use")."""
    zero = [name for name, port in wanted.items() if port == 0]
    keep = "clients" if "clients" in zero else (zero[0] if zero else None)
    return {name: (pick() if port == 0 and name != keep else port) for name, port in wanted.items()}


def bound_ports(log_lines: list[str]) -> list[tuple[str, int]]:
    """(host, port) of every acceptor the broker said it started, in log order."""
    return [(m.group(1), int(m.group(2))) for m in map(_ACCEPTOR.search, log_lines) if m]


def log_time(line: str) -> float | None:
    """Epoch seconds of a log line's timestamp (the broker logs local time with milliseconds)."""
    m = _STAMP.match(line)
    if m is None:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000


def connection_events(log_lines: list[str]) -> dict[str, list[tuple[str, str, float | None]]]:
    """name -> [(event, HOST:PORT, epoch seconds)] of every broker connection event in the log, in order;
    event is "retrying" (a dial failed, another comes), "connected" or "gave-up" (a dial failed, no more come)."""
    events: dict[str, list[tuple[str, str, float | None]]] = {}
    stamp = None
    kinds = {"Could not re-establish AMQP Server": "gave-up", "Retrying Server AMQP": "retrying",
             "Connected on Server AMQP": "connected"}
    for line in log_lines:
        if _STAMP.match(line):
            stamp = log_time(line)
        m = _BC_EVENT.search(line)
        if m:
            events.setdefault(m.group("name"), []).append((kinds[m.group("event")], m.group("target"), stamp))
    return events


def connection_row(name: str, uri: str, started: bool, connected: bool,
                   events: list[tuple[str, str, float | None]]) -> dict:
    """One broker connection as Peer.broker_connections describes it, from the management view (name, uri,
    started, connected) and the broker's log of its dials (connection_events).

    Artemis logs a successful dial ("Connected", once its TCP connection is up) and every failure after which
    it retries or gives up, with the HOST:PORT concerned. A failure right after a success is the loss of that
    connection, not a dial; every other failure is a failed dial. So the dials are the successes and the
    failures that do not follow a success, and "attempts" counts the failed dials since the last success."""
    failures = connects = 0
    dials: list[tuple[str, float | None]] = []
    previous = None
    for event, target, at in events:
        if event == "connected":
            connects, failures = connects + 1, 0
            dials.append((target, at))
        elif previous != "connected":  # a failed dial (a failure after a success is that connection's loss)
            failures += 1
            dials.append((target, at))
        previous = event
    last = events[-1] if events else None
    return {"name": name, "uri": uri, "started": started, "connected": connected,
            "target": last[1] if last else None, "attempts": failures, "connects": connects,
            "gave_up": bool(last and last[0] == "gave-up" and not started),
            "attempt_times": [at for _target, at in dials if at is not None],
            "targets_tried": [target for target, _at in dials]}


# ---- the peer -------------------------------------------------------------------------------------------------


class ArtemisPeer(ProcessPeer):
    """One Artemis instance in its own work dir, run by `bin/artemis run`."""

    def __init__(self, setup: NodeSetup, install: ArtemisInstall, workdir: Path | None = None):
        name = setup.node_name
        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-artemis-"))
        super().__init__(name, "broker", PeerInfo("artemis", install.version, "native"), setup.capabilities, workdir)
        self.install, self.setup = install, setup
        self.extra_jvm_options: list[str] = []  # class_archive's, when it is being made
        try:
            self._make(workdir)
        except BaseException:  # a node that cannot be made leaves no instance behind
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        self.start_seconds: float | None = None

    def _make(self, workdir: Path) -> None:
        """The node's instance: the template's copy, its broker.xml and, when it authenticates, its users."""
        from .render import ROLES_FILE, USERS_FILE, render_artemis_security

        make_instance(instance_template(self.install), workdir)
        self.ports = acceptor_ports(dict(self.setup.listen_ports))
        self.management_port = free_port(held=True)
        self._own_ports = [self.management_port] + [port for name, port in self.ports.items()
                                                    if port and port != self.setup.listen_ports.get(name)]
        self.management_user = self.management_password = None
        files = render_artemis_security(self.setup.topology, self.name)
        if files:  # the node authenticates: its users, plus the harness's own who may only manage
            self.management_user, self.management_password = MANAGEMENT_USER, secrets.token_hex(12)
            files[USERS_FILE] += f"{MANAGEMENT_USER} = {self.management_password}\n"
            files[ROLES_FILE] += f"{MANAGEMENT_USER} = {MANAGEMENT_USER}\n"
            files["login.config"] = login_config(USERS_FILE, ROLES_FILE)
        self._rendered = {"broker.xml", *files}  # what an upgrade in place keeps of etc/ (refresh_instance)
        for file_name, text in files.items():
            path = workdir / "etc" / file_name
            path.write_text(text)
            path.chmod(0o600)
        self.config_path = workdir / "etc" / "broker.xml"
        self.config_path.write_text(self._render())
        self.management = ManagementClient(f"amqp://127.0.0.1:{self.management_port}", self.management_user,
                                           self.management_password)

    def _render(self) -> str:
        return broker_xml_for(self.setup, self.ports, management_port=self.management_port,
                                            management_role=self.management_user, sasl_mechanisms=True)

    def command(self) -> list[str]:
        return [str(self.workdir / "bin" / "artemis"), "run"]

    def environment(self) -> dict[str, str]:
        env = _artemis_env(self.install)
        java_args = serial_gc_java_args(self.workdir / "etc" / "artemis.profile")
        if java_args:
            env["JAVA_ARGS"] = java_args
        env["JAVA_ARGS_APPEND"] = " ".join([*JAVA_OPTIONS, *class_archive(self.install).options(),
                                            *self.extra_jvm_options])
        return env

    def start(self, timeout: float = 60.0) -> None:
        # A JVM's start is CPU-bound (class loading, the JIT): 6-7 s here on a quiet machine, but over 60 s when
        # two cores run dozens of processes, where the reference broker's 60 s deadline would fail a start that
        # is only slow. Starting is not what a case judges, so Artemis gets at least START_FLOOR_S.
        timeout = max(timeout, START_FLOOR_S)
        began = time.monotonic()
        self._spawn()

        def active():
            self._check_alive()
            return bool(self._log_matches(_ACTIVE))
        try:
            wait_for(active, timeout, f"Artemis {self.name} to log AMQ221007 (server active)",
                     describe=self._last_log_line)
        except WaitTimeout as exc:
            self.kill()
            raise PeerStartError(f"{exc}\n{self._log_tail()}") from None
        self.start_seconds = time.monotonic() - began
        with self._log_lock:
            bound = bound_ports(self._log_lines)
        fixed = {port for port in self.ports.values() if port} | {self.management_port}
        chosen = [port for _host, port in bound if port not in fixed]
        self.endpoints = {}
        for listener, port in self.ports.items():
            if port == 0:
                if len(chosen) != 1:
                    self.kill()
                    raise PeerStartError(f"{self.name}: acceptor {listener!r} asked for port 0 but the log gives "
                                         f"{len(chosen)} such ports: {bound}")
                port = chosen[0]
            self.endpoints[listener] = Endpoint(listener, "127.0.0.1", port, "normal")
        for endpoint in self.endpoints.values():
            if not accepts(endpoint.host, endpoint.port):
                raise PeerStartError(f"{self.name}: Artemis said it listens on {endpoint.host}:{endpoint.port} "
                                     "but refuses connections")

    def _log_tail(self, lines: int = 15) -> str:
        """The last lines of the log without Java stack frames, which would hide the exception's own line."""
        return "\n".join([line for line in self.logs().splitlines() if not line.startswith("\tat ")][-lines:])

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise PeerStartError(f"{self.name} (artemis) stopped while starting: "
                                 f"{describe_exit(self._proc.returncode)}:\n{self._log_tail()}")

    def _prepare_restart(self) -> None:
        """Come back on the ports the acceptors got, with the same data directory (under the work dir)."""
        self.ports = {name: ep.port for name, ep in self.endpoints.items()}
        self.config_path.write_text(self._render())
        self.management.close()

    @property
    def data_dir(self) -> Path:
        """The journal, bindings, paging and large-messages folders (broker.xml's, relative to the instance)."""
        return self.workdir / "data"

    def _install_for(self, version: str | None) -> ArtemisInstall:
        from ...peers.vendors import Choice
        from ...peers.versions import ensure

        if (why := ensure(Choice("artemis", version, "native"))) is not None:
            raise PeerUnavailable(f"{self.name}: cannot put Artemis {version} in place: {why}")
        return find_artemis(version)

    def _use_install(self, install: ArtemisInstall) -> None:
        refresh_instance(instance_template(install), self.workdir, self._rendered)
        self.install = install
        self.info = PeerInfo("artemis", install.version, "native")

    def stop(self, timeout: float = 20.0) -> None:
        self.management.close()
        super().stop(timeout)

    def cleanup(self) -> None:
        super().cleanup()
        if not self.is_running():
            release_ports(*self._own_ports)

    def kill(self) -> None:
        self.management.close()
        super().kill()

    # ---- management view ----------------------------------------------------------------------------------

    def _manage(self, resource: str, what: str, **request):
        if not self.is_running():
            raise PeerStartError(f"{self.name}: cannot {what}: Artemis is not running")
        return self.management.call_for(self.name, resource, what, **request)

    def _queues(self, field: str, value: str) -> list[dict]:
        """The broker's rows (listQueues) of the queues whose `field` equals `value`."""
        options = json.dumps({"field": field, "operation": "EQUALS", "value": value})
        for attempt in range(LIST_QUEUES_ATTEMPTS):
            try:
                text = self._manage("broker", f"list queues with {field} {value!r}", operation="listQueues",
                                    arguments=[options, 1, 1000])
                break
            except ManagementError as exc:
                # listQueues reads each queue it found by name again; one removed in between (a mirror replaying
                # a deletion, measured 2026-12-07 on 2.40.0) fails the whole listing with a NullPointerException
                # ("... because "q" is null"). The next listing no longer finds it: ask again.
                if QUEUE_GONE_WHILE_LISTED not in str(exc) or attempt == LIST_QUEUES_ATTEMPTS - 1:
                    raise
        return json.loads(text).get("data", []) if isinstance(text, str) else []

    def queue_stats(self, name: str) -> dict:
        """{"depth", "available", "in_flight", "consumers", "exists", ...} of a queue; for a multicast address,
        the sums over its subscription queues plus "subscriptions"; a name that is neither is {"exists": False}
        with depth and consumers 0. Artemis's messageCount counts the messages being delivered too."""
        rows = self._queues("name", name)
        if rows:
            return {**_sums(rows), "name": name, "exists": True}
        subscriptions = self._queues("address", name)
        if subscriptions or self._is_multicast_address(name):
            return {**_sums(subscriptions), "name": name, "exists": True, "subscriptions": len(subscriptions)}
        # An anycast address whose queue was deleted (destroyQueue leaves the address) holds no queue: gone.
        return {"name": name, "depth": 0, "available": 0, "in_flight": 0, "consumers": 0, "exists": False}

    def _is_multicast_address(self, name: str) -> bool:
        """Whether `name` is a multicast address (a topic, with or without subscriptions now)."""
        options = json.dumps({"field": "name", "operation": "EQUALS", "value": name})
        text = self._manage("broker", f"list addresses named {name!r}", operation="listAddresses",
                            arguments=[options, 1, 10])
        rows = json.loads(text).get("data", []) if isinstance(text, str) else []
        return any("MULTICAST" in json.dumps(row) for row in rows)

    def delete_queue(self, name: str) -> None:
        """destroyQueue(name, removeConsumers=true): as an operator would, whoever consumes it."""
        self._manage("broker", f"delete queue {name!r}", operation="destroyQueue", arguments=[name, True])

    def broker_connections(self) -> list[dict]:
        text = self._manage("broker", "list broker connections", operation="listBrokerConnections")
        listed = json.loads(text) if isinstance(text, str) else (text or [])
        with self._log_lock:
            events = connection_events(self._log_lines)
        rows = []
        for item in listed:
            name = item["name"]
            control = f"brokerconnection.{name}"
            uri = self._manage(control, f"read the uri of broker connection {name!r}", attribute="uri")
            connected = self._manage(control, f"ask whether {name!r} is connected", attribute="connected")
            rows.append(connection_row(name, uri, bool(item.get("started")), bool(connected), events.get(name, [])))
        return rows

    def start_broker_connection(self, name: str) -> None:
        self._manage("broker", f"start broker connection {name!r}", operation="startBrokerConnection",
                     arguments=[name])


def _sums(rows: list[dict]) -> dict:
    """Depth, in-flight and consumers summed over listQueues rows (numbers come back as strings)."""
    depth = sum(int(row.get("messageCount", 0)) for row in rows)
    in_flight = sum(int(row.get("deliveringCount", 0)) for row in rows)
    return {"depth": depth, "available": depth - in_flight, "in_flight": in_flight,
            "consumers": sum(int(row.get("consumerCount", 0)) for row in rows)}


class NativeArtemis(Provider):
    """ActiveMQ Artemis from the cache (`make products`) or ARTEMIS_HOME, one local instance per node."""

    vendor = "artemis"
    name = "native"
    role = "broker"
    versioned = True

    @classmethod
    def require(cls, version: str | None = None) -> None:
        find_artemis(version)

    @classmethod
    def create(cls, setup: NodeSetup) -> ArtemisPeer:
        return ArtemisPeer(setup, find_artemis(setup.version))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.vendors.artemis.native",
                                     description="Get ActiveMQ Artemis for the harness.")
    parser.add_argument("--fetch", action="store_true",
                        help="fetch it into the cache with Maven unless a checked copy is there (then only check)")
    parser.add_argument("--version", default=None, metavar="V",
                        help=f"the version to fetch (default: {ARTEMIS_VERSION}, or ARTEMIS_HOME's)")
    args = parser.parse_args(argv)
    if not args.fetch:
        parser.print_usage()
        return 2
    from ...peers.versions import NoSuchVersion

    try:
        fetch(version=args.version)
    except (PeerUnavailable, NoSuchVersion) as exc:
        print(f"artemis: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
