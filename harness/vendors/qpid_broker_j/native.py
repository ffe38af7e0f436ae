"""Apache Qpid Broker-J as a native peer: its bin tarball from Maven Central, one JVM per node.

Getting it (`python -m harness.vendors fetch qpid-broker-j`, `make products`): Maven's dependency plugin copies
org.apache.qpid:apache-qpid-broker-j:9.2.0:tar.gz:bin into a staging folder under the cache ($INTEROP_CACHE, else
~/.cache/amqp-interop); its SHA-512 is checked against the one pinned here, and it is unpacked as
qpid-broker-j-9.2.0/qpid-broker/9.2.0/ (bin/, lib/). Maven Central serves no checksum files and no POM for this
artifact, so `mvn -C` (strict checksums, as the Artemis package uses) fails: "Checksum validation failed, no
checksums available". The pinned digest is the check instead. Then `Main -v` must name the version, and one broker
started and stopped makes the class archive (harness/peers/class_archive.py). A second fetch only checks.

Running it: `java ... -cp LIB/* org.apache.qpid.server.Main -icp WORKDIR/initial-config.json -prop
qpid.amqp_port=0 -prop qpid.management_port=P` in the node's work dir (QPID_WORK; the BDB store in
default/messages). Broker-J logs `BRK-1002 : Starting : Listening on TCP port N` for each AMQP port, without the
port's name: the clients port binds port 0 (unless another node was told where to dial it) and the management
port gets a free port up front, so the one the log adds is the clients port. Ready is `BRK-1004 : Qpid Broker
Ready` with `VHT-1011 : Open : "default" : SUCCESS` and no BRK-1019 or `VHT-1011 ... FAILURE`: a virtual host that
failed still lets the broker say Ready (clients then get `amqp:not-found` "Unknown hostname"). A restart keeps the
work dir, where config.json (written on the first start) wins over -icp, and passes the learnt port again.

Queue statistics: Broker-J's AMQP management (built in, no plugin): a request to node `$management` on the
virtual host's connection, operation getStatistics on `org.apache.qpid.Queue` by object path, answered on a
dynamic reply queue; over the loopback anonymous MANAGEMENT port.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

from ...ports import free_port, release_ports
from ...wait import WaitTimeout, accepts, wait_for
from ...peers.base import (START_FLOOR_S, Endpoint, ManagementError, PeerInfo, PeerStartError, PeerUnavailable,
                           describe_exit)
from ...peers.class_archive import ClassArchive, make_by_starting
from ...peers.java_stores import tls_stores
from ...peers.process import ProcessPeer
from ...peers.provider import NodeSetup, Provider, RenderError
from .render import PORT_PROPERTY, USERS_FILE_PROPERTY, config_text, render_config, users_text

VENDOR = "qpid-broker-j"
VERSION = "9.2.0"
ARTIFACT = f"org.apache.qpid:apache-qpid-broker-j:{VERSION}:tar.gz:bin"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
# SHA-512 of apache-qpid-broker-j-9.2.0-bin.tar.gz as Maven Central served it on 2026-12-07 (it serves no .sha512
# of its own here, nor can Apache's dist site be reached for the official one).
SHA512 = ("953e40ab77999c28eaeb309ceda35341f53cdccafa48ea5062766496ff0305622755d9ad3f6f5aa68aa6e6bcc5175"
          "abb1e69f9c32b84abf6bcb83302faf1b129")
FETCH_COMMAND = "python -m harness.vendors fetch qpid-broker-j"

# Several brokers share two cores here: a small heap, the serial collector, the client compiler only (C1 halved a
# start's CPU time here: 2.7 -> 1.35 CPU-s; the class archive takes it to about 0.9, docs/notes/qpid-broker-j).
JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
MAIN_CLASS = "org.apache.qpid.server.Main"

_LISTENING = re.compile(r"BRK-1002 : Starting : Listening on \S+ port (\d+)")
_READY = re.compile(r"BRK-1004 : Qpid Broker Ready")
_VHOST_OPEN = re.compile(r'VHT-1011 : Open : "[^"]+" : (SUCCESS|FAILURE)')
_BROKEN = re.compile(r'BRK-1019|BRK-1016|Exception during startup|VHT-1011 : Open : "[^"]+" : FAILURE')
_STARTUP = re.compile(r"BRK-1001 : Startup : Version: (\S+)")
_CORE_JAR = re.compile(r"^qpid-broker-core-(\d[\w.-]*)\.jar$")
_MAIN_VERSION = re.compile(r"Apache Qpid Broker-J Core - (\S+)")


def cache_root() -> Path:
    return Path(os.environ.get("INTEROP_CACHE") or Path.home() / ".cache" / "amqp-interop")


def install_dir(version: str = VERSION) -> Path:
    return cache_root() / f"qpid-broker-j-{version}"


def home_dir(version: str = VERSION) -> Path:
    """QPID_HOME: the tar's top folder is qpid-broker/VERSION/."""
    return install_dir(version) / "qpid-broker" / version


# ---- getting it -----------------------------------------------------------------------------------------------


def installed_version(home: Path) -> str | None:
    """The version of the Broker-J at `home`, from its core jar's name; None when there is none."""
    found = [m.group(1) for m in map(_CORE_JAR.match, (p.name for p in (home / "lib").glob("qpid-broker-core-*")))
             if m]
    return found[0] if len(found) == 1 else None


def check_install(home: Path, version: str = VERSION) -> str | None:
    """None when `home` holds Broker-J `version` (lib/qpid-broker-core-VERSION.jar), else one line saying why not."""
    if not (home / "lib").is_dir():
        return f"Apache Qpid Broker-J {version} is not fetched ({home}/lib is missing): run `{FETCH_COMMAND}`"
    found = installed_version(home)
    if found is None:
        return f"{home}/lib has no qpid-broker-core-VERSION.jar: remove {home.parent.parent} and run `{FETCH_COMMAND}`"
    if found != version:
        return f"{home} holds Broker-J {found}, expected {version}: remove {home.parent.parent} and fetch again"
    return None


def sha512_of(path: Path) -> str:
    digest = hashlib.sha512()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_tarball(path: Path, expected: str = SHA512) -> str | None:
    """None when the fetched tarball is the pinned one, else one line saying it is not."""
    digest = sha512_of(path)
    if digest != expected:
        return f"{path.name}: SHA-512 {digest[:16]}... is not the pinned {expected[:16]}...: not unpacked"
    return None


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)  # Maven colours even in batch mode


def _unpack(tarball: Path, into: Path) -> None:
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():  # nothing outside the folder, no links out of it
            target = (into / member.name).resolve()
            if into.resolve() not in target.parents and target != into.resolve():
                raise PeerUnavailable(f"{tarball.name}: member {member.name!r} points outside the folder")
        if hasattr(tarfile, "tar_filter"):  # Python 3.11.4 and later
            tar.extractall(into, filter="tar")
        else:
            tar.extractall(into)  # noqa: S202 - every member checked above


def main_version(home: Path, java: str | None = None) -> str | None:
    """The version `Main -v` prints ("Apache Qpid Broker-J Core - 9.2.0 build: ..."), None when it prints none."""
    java = java or shutil.which("java") or "java"
    done = subprocess.run([java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", str(home / "lib" / "*"),
                           MAIN_CLASS, "-v"], capture_output=True, text=True, timeout=120)
    match = _MAIN_VERSION.search(done.stdout + done.stderr)
    return match.group(1) if match else None


def fetch(say=print) -> Path:
    """Put Broker-J in the cache unless a checked copy is there (then only check it); its QPID_HOME.
    PeerUnavailable (one line) when it cannot."""
    home = home_dir()
    if check_install(home) is None:
        say(f"qpid-broker-j: {VERSION} already in {install_dir()} (checked)")
        make_class_archive(say)
        return home
    if shutil.which("java") is None:
        raise PeerUnavailable("java is not on PATH (Broker-J 9 needs Java 17)")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerUnavailable(f"cannot fetch Broker-J {VERSION}: `mvn` (Maven) is not on PATH (Debian package maven)")
    say(f"qpid-broker-j: fetching {VERSION} from Maven Central into {install_dir()} (about 10 s)")
    began = time.monotonic()
    cache_root().mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetch-qpid-broker-j-", dir=cache_root()))
    try:
        # no -C: Central has no checksums for this artifact (module docstring); the pinned SHA-512 is checked below.
        # cwd = staging: the plugin leaves a target/ folder of markers in its working directory.
        command = [mvn, "-B", "-q", f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={ARTIFACT}",
                   f"-DoutputDirectory={staging}"]
        done = subprocess.run(command, cwd=staging, capture_output=True, text=True)
        if done.returncode != 0:
            output = _plain(done.stdout + done.stderr)
            errors = [ln.strip() for ln in output.splitlines() if "ERROR" in ln] or [f"exit {done.returncode}"]
            raise PeerUnavailable(f"cannot fetch {ARTIFACT} with Maven: {errors[0]}")
        tarballs = sorted(staging.glob("*.tar.gz"))
        if len(tarballs) != 1:
            raise PeerUnavailable(f"Maven copied {len(tarballs)} tarballs for {ARTIFACT} into {staging}, expected 1")
        if (why := check_tarball(tarballs[0])) is not None:
            raise PeerUnavailable(why)
        unpacked = staging / "unpacked"
        unpacked.mkdir()
        _unpack(tarballs[0], unpacked)
        if (why := check_install(unpacked / "qpid-broker" / VERSION)) is not None:
            raise PeerUnavailable(f"fetched {ARTIFACT} but it does not check: {why}")
        version = main_version(unpacked / "qpid-broker" / VERSION)
        if version != VERSION:
            raise PeerUnavailable(f"fetched {ARTIFACT} but `Main -v` says {version or 'no version'}")
        shutil.rmtree(install_dir(), ignore_errors=True)
        unpacked.rename(install_dir())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"qpid-broker-j: fetched {VERSION} into {install_dir()} in {time.monotonic() - began:.0f} s")
    make_class_archive(say)
    return home


def find_install() -> Path:
    """QPID_HOME of the fetched Broker-J; PeerUnavailable (one line) when it cannot run here."""
    if shutil.which("java") is None:
        raise PeerUnavailable("java is not on PATH (Apache Qpid Broker-J 9 needs Java 17)")
    home = home_dir()
    if (why := check_install(home)) is not None:
        raise PeerUnavailable(why)
    return home


def class_archive(home: Path) -> ClassArchive:
    """The AppCDS archive of this install's brokers, made by fetch()."""
    return ClassArchive(cache_root() / "class-archives", VENDOR, shutil.which("java") or "java",
                        (str(home), *JVM_OPTIONS))


def make_class_archive(say=print) -> None:
    make_by_starting(class_archive(find_install()), f"{VENDOR}@native", say)


# ---- the peer -------------------------------------------------------------------------------------------------


class BrokerJPeer(ProcessPeer):
    """One Broker-J JVM in its own work dir (QPID_WORK)."""

    def __init__(self, setup: NodeSetup, home: Path, workdir: Path | None = None):
        name = setup.node_name
        self.setup, self.home = setup, home
        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-brokerj-"))
        super().__init__(name, "broker", PeerInfo(VENDOR, VERSION, "native"), setup.capabilities, workdir)
        self.extra_jvm_options: list[str] = []  # class_archive's, when it is being made
        self.start_seconds: float | None = None
        self.config_path = workdir / "initial-config.json"
        self.users_path = workdir / "users.passwd"
        self.ports = {"clients": int(setup.listen_ports.get("clients", 0))}
        self.management_port = free_port(held=True)
        try:
            stores = tls_stores(setup, workdir)
            config = render_config(setup.topology, name, setup.broker_settings(), tls_stores=stores)
            self.config_path.write_text(config_text(config))
            if setup.node.access.authenticate:
                self.users_path.write_text(users_text(setup.node.users, name))
                self.users_path.chmod(0o600)
        except BaseException:
            release_ports(self.management_port)
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        self._management: _Management | None = None

    def command(self) -> list[str]:
        java = shutil.which("java") or "java"
        props = {PORT_PROPERTY["AMQP"]: self.ports["clients"], PORT_PROPERTY["MANAGEMENT"]: self.management_port,
                 USERS_FILE_PROPERTY: self.users_path}
        return [java, *JVM_OPTIONS, *class_archive(self.home).options(), *self.extra_jvm_options,
                f"-DQPID_HOME={self.home}", f"-DQPID_WORK={self.workdir}", "-cp", str(self.home / "lib" / "*"),
                MAIN_CLASS, "-icp", str(self.config_path),
                *(arg for key, value in props.items() for arg in ("-prop", f"{key}={value}"))]

    def start(self, timeout: float = 60.0) -> None:
        timeout = max(timeout, START_FLOOR_S)  # a JVM's start is CPU-bound; starting is not what a case judges
        began = time.monotonic()
        self.endpoints = {}
        self._spawn()

        def ready():
            self._check_alive()
            if self._log_matches(_BROKEN):
                raise PeerStartError(f"{self.name} (Broker-J) did not start cleanly: "
                                     f"{self._log_matches(_BROKEN)[0].string.strip()}\n{self._log_tail()}")
            return bool(self._log_matches(_READY)) and any(m.group(1) == "SUCCESS"
                                                           for m in self._log_matches(_VHOST_OPEN))
        try:
            wait_for(ready, timeout, f"Broker-J {self.name} to log BRK-1004 and VHT-1011 SUCCESS",
                     describe=self._last_log_line)
        except WaitTimeout as exc:
            self.kill()
            raise PeerStartError(f"{exc}\n{self._log_tail()}") from None
        except PeerStartError:
            self.kill()
            raise
        self.start_seconds = round(time.monotonic() - began, 2)
        bound = {int(m.group(1)) for m in self._log_matches(_LISTENING)} - {self.management_port}
        port = self.ports["clients"]
        if port == 0:
            if len(bound) != 1:
                self.kill()
                raise PeerStartError(f"{self.name}: expected one AMQP port besides management {self.management_port} "
                                     f"in the BRK-1002 lines, got {sorted(bound)}")
            port = bound.pop()
        self.endpoints = {"clients": Endpoint("clients", "127.0.0.1", port, "normal")}
        for endpoint in (*self.endpoints.values(), Endpoint("management", "127.0.0.1", self.management_port)):
            if not accepts(endpoint.host, endpoint.port):
                raise PeerStartError(f"{self.name}: Broker-J said it listens on {endpoint.host}:{endpoint.port} "
                                     "but refuses connections")
        found = self._log_matches(_STARTUP)
        if found and found[0].group(1) != self.info.version:
            self.info = PeerInfo(VENDOR, found[0].group(1), "native")

    def _log_tail(self, lines: int = 15) -> str:
        return "\n".join([ln for ln in self.logs().splitlines() if not ln.startswith("\tat ")][-lines:])

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise PeerStartError(f"{self.name} (Broker-J) stopped while starting: "
                                 f"{describe_exit(self._proc.returncode)}:\n{self._log_tail()}")

    def _prepare_restart(self) -> None:
        """Come back on the port the clients port got; the work dir's config.json and store stay."""
        if "clients" in self.endpoints:
            self.ports["clients"] = self.endpoints["clients"].port
        self._close_management()

    @property
    def data_dir(self) -> Path:
        """The virtual host's BDB store."""
        return self.workdir / "default" / "messages"

    def stop(self, timeout: float = 10.0) -> None:
        self._close_management()
        super().stop(timeout)

    def kill(self) -> None:
        self._close_management()
        super().kill()

    def cleanup(self) -> None:
        super().cleanup()
        if not self.is_running():
            release_ports(self.management_port)

    # ---- queue statistics by AMQP management ----------------------------------------------------------------

    def _close_management(self) -> None:
        management, self._management = self._management, None
        if management is not None:
            management.close()

    def queue_stats(self, name: str) -> dict:
        """{"depth", "available", "in_flight", "consumers", "enqueued", "dequeued", "exists"} of queue `name`;
        a queue the broker does not have is {"exists": False} with depth and consumers 0. Broker-J's
        queueDepthMessages counts the messages being delivered too (as Artemis's messageCount)."""
        if not self.is_running():
            raise ManagementError(f"{self.name}: cannot read the statistics of queue {name!r}: Broker-J is not running")
        if self._management is None:
            self._management = _Management(f"amqp://127.0.0.1:{self.management_port}")
        status, body = self._management.call(
            {"operation": "getStatistics", "type": "org.apache.qpid.Queue", "index": "object-path", "key": name},
            f"{self.name}: read the statistics of queue {name!r}")
        if status == 404:
            return {"name": name, "depth": 0, "available": 0, "in_flight": 0, "consumers": 0, "exists": False}
        if status != 200 or not isinstance(body, dict):
            raise ManagementError(f"{self.name}: cannot read the statistics of queue {name!r}: Broker-J answered "
                                  f"status {status}: {str(body)[:200]}", status)
        depth, in_flight = int(body.get("queueDepthMessages", 0)), int(body.get("unacknowledgedMessages", 0))
        return {"name": name, "exists": True, "depth": depth, "in_flight": in_flight,
                "available": depth - in_flight, "consumers": int(body.get("consumerCount", 0)),
                "enqueued": int(body.get("totalEnqueuedMessages", 0)),
                "dequeued": int(body.get("totalDequeuedMessages", 0))}


class _Management:
    """One AMQP connection to Broker-J's `$management` node of the virtual host, with a dynamic reply queue."""

    def __init__(self, url: str, timeout: float = 10.0):
        self.url, self.timeout = url, timeout
        self._lock = threading.Lock()
        self._conn = self._sender = self._receiver = None
        self.reply_to = None

    def _open(self) -> None:
        from proton.utils import BlockingConnection

        self._conn = BlockingConnection(self.url, timeout=self.timeout, allowed_mechs="ANONYMOUS")
        self._receiver = self._conn.create_receiver(None, dynamic=True, credit=10)
        self.reply_to = self._receiver.link.remote_source.address
        self._sender = self._conn.create_sender("$management")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broker gone already
                pass

    def call(self, properties: dict, what: str) -> tuple[int | None, object]:
        """(statusCode, body) of one request; ManagementError when no answer came (twice: a broken connection is
        reopened once, the broker may have restarted)."""
        from proton import Message

        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None:
                        self._open()
                    request_id = secrets.token_hex(8)
                    # Broker-J answers with the request's correlation-id, else its message-id: both set
                    self._sender.send(Message(id=request_id, correlation_id=request_id, reply_to=self.reply_to,
                                              properties=properties))
                    deadline = time.monotonic() + self.timeout
                    while True:  # skip answers to earlier requests that timed out
                        reply = self._receiver.receive(timeout=max(0.1, deadline - time.monotonic()))
                        self._receiver.accept()
                        if reply.correlation_id == request_id:
                            break
                except Exception as exc:  # proton's timeouts, link and connection errors
                    self.close()
                    if attempt == 2:
                        raise ManagementError(f"cannot {what}: AMQP management over {self.url} failed: "
                                              f"{type(exc).__name__}: {exc}") from None
                    continue
                status = (reply.properties or {}).get("statusCode")
                return (int(status) if status is not None else None), reply.body
        raise AssertionError("unreachable")


class NativeBrokerJ(Provider):
    """Apache Qpid Broker-J from the cache (`make products`), one JVM per node."""

    vendor, name, role = VENDOR, "native", "broker"

    @classmethod
    def require(cls, version: str | None = None) -> None:
        find_install()

    @classmethod
    def create(cls, setup: NodeSetup) -> BrokerJPeer:
        try:
            return BrokerJPeer(setup, find_install())
        except RenderError as exc:
            raise PeerStartError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.vendors.qpid_broker_j.native",
                                     description="Get Apache Qpid Broker-J for the harness (docs/getting-products.md: "
                                                 "Getting Qpid Broker-J).")
    parser.add_argument("--fetch", action="store_true",
                        help=f"fetch Broker-J {VERSION} into {install_dir()} with Maven and check its SHA-512 "
                             "(once; later only checks)")
    parser.add_argument("--version", default=None, metavar="V", help=f"only {VERSION} is supported")
    args = parser.parse_args(argv)
    if not args.fetch:
        parser.print_usage(sys.stderr)
        return 2
    if args.version not in (None, VERSION):
        print(f"qpid-broker-j: only {VERSION} is supported, not {args.version}", file=sys.stderr)
        return 1
    try:
        fetch()
    except PeerUnavailable as exc:
        print(f"qpid-broker-j: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
