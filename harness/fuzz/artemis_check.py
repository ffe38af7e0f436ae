"""Artemis's side of the broker config differential: does Artemis 2.40 accept this broker.xml?

`artemis run` takes 2-4 s per file (a JVM, then the broker). Instead one long-lived JVM on the install's own
lib/ jars runs `ArtemisConfigCheck` (artemis_config_check/ArtemisConfigCheck.java): for each file it does what
`artemis run` does with the broker.xml of its bootstrap.xml - FileBroker.createComponents() (Artemis's XML reader,
its artemis-configuration.xsd validation and FileConfigurationParser), an activation failure listener, start(),
wait until active - and stops the broker again: 20-40 ms for a refused file, ~0.2 s for an accepted one.

The checker is compiled with javac into the cache (never into the checkout), once per source version and
Artemis install: $INTEROP_CACHE/artemis-config-check/<sha12 of source, log settings and install>/checker.jar.

`confirm(path)` starts the real broker (`bin/artemis run` in a copy of the instance template, as the peer does)
on a file: the session confirms every disagreement it reports that way, and tests/test_fuzz_config_artemis.py
checks that the checker and `artemis run` agree on files of each kind.
"""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from .config_judges import Verdict, verdict_of
from .startwatch import run_and_watch

SOURCE = Path(__file__).resolve().parent / "artemis_config_check" / "ArtemisConfigCheck.java"
ACTIVATION_MS = 3000  # a backup never activates: after this it counts as accepted (artemis run keeps running it)
CASE_TIMEOUT_S = 60.0  # a checker silent this long is stuck: restarted, the file undecided
JVM_OPTIONS = ("-Xms64m", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dlog4j2.disableJmx=true",
               "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED")  # as artemis.profile's JAVA_ARGS
LOG4J2 = """# The config checker's own log: Artemis's warnings and errors, to stderr (a file the session keeps)
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d %-5level [%logger] %msg%n
# the refusal is in the verdict line already: no stack traces here
appender.console.layout.alwaysWriteExceptions = false
"""


class CheckerUnavailable(Exception):
    """Artemis, Java or javac is missing here: one line saying which."""


def ensure_checker(home: Path, cache: Path) -> Path:
    """The checker's jar compiled from the current source against `home`/lib, compiled now if missing (in a
    scratch folder renamed at the end, so two sessions compiling at once both end with a whole one)."""
    digest = hashlib.sha256(SOURCE.read_bytes() + LOG4J2.encode() + str(home.resolve()).encode()).hexdigest()[:12]
    target = cache / "artemis-config-check" / digest
    jar = target / "checker.jar"
    if jar.is_file():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise CheckerUnavailable("javac is not on PATH: a JDK 17 compiles the Artemis config checker "
                                 "(Debian package openjdk-17-jdk-headless)")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="compiling-", dir=target.parent))
    classes = scratch / "classes"
    done = subprocess.run([javac, "-nowarn", "-cp", str(home / "lib" / "*"), "-d", str(classes), str(SOURCE)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip())
        raise CheckerUnavailable(f"compiling {SOURCE.name} failed: {first}")
    with zipfile.ZipFile(scratch / "checker.jar", "w") as archive:
        for compiled in sorted(classes.rglob("*.class")):
            archive.write(compiled, compiled.relative_to(classes).as_posix())
    shutil.rmtree(classes)
    (scratch / "log4j2.properties").write_text(LOG4J2)
    try:
        scratch.rename(target)
    except OSError:  # another session got there first: its copy is as good
        shutil.rmtree(scratch, ignore_errors=True)
    return jar


class ArtemisJudge:
    """Artemis's verdict on broker.xml files, from the checker JVM (see the module docstring)."""

    vendor = "artemis"

    def __init__(self, log_path: Path | None = None):
        self.version = None
        self._why: str | None = None
        self._proc: subprocess.Popen | None = None
        self._log_path = log_path
        self._log = None
        try:
            from ..vendors.artemis.native import cache_dir, find_artemis
            from ..peers.base import PeerUnavailable

            try:
                self.install = find_artemis()
            except PeerUnavailable as exc:
                raise CheckerUnavailable(str(exc)) from None
            self.version = self.install.version
            self.jar = ensure_checker(self.install.home, cache_dir())
        except CheckerUnavailable as exc:
            self._why = str(exc)

    def unavailable(self) -> str | None:
        return self._why

    def _checker(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._log is None:
            self._log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115
        classpath = os.pathsep.join([str(self.jar), str(self.install.home / "lib" / "*")])
        java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
        self._proc = subprocess.Popen(
            [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={self.jar.parent / 'log4j2.properties'}",
             "-cp", classpath, "ArtemisConfigCheck", str(ACTIVATION_MS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1)
        first = self._read_line(CASE_TIMEOUT_S)
        if first != "ready":
            self.close()
            raise RuntimeError(f"the Artemis config checker did not start (said {first!r})")
        return self._proc

    def _read_line(self, timeout_s: float) -> str | None:
        out = self._proc.stdout
        if select.select([out], [], [], timeout_s)[0]:
            return out.readline().rstrip("\n") or None
        return None

    def judge(self, path: Path) -> Verdict:
        started = time.monotonic()
        try:
            proc = self._checker()
            proc.stdin.write(f"{path.resolve()}\n")
            proc.stdin.flush()
            line = self._read_line(CASE_TIMEOUT_S)
        except (OSError, RuntimeError) as exc:
            self.close()
            return Verdict("undecided", f"Artemis config checker: {exc}")
        if not line:
            self.close()  # stuck or dead: the next file gets a fresh JVM
            return Verdict("undecided", f"Artemis config checker gave no verdict in {CASE_TIMEOUT_S:.0f}s")
        elapsed = time.monotonic() - started
        kind, _, rest = line.partition(" ")
        millis, _, rest = rest.partition(" ")
        if kind == "accept":
            return Verdict("accept", f"active ({rest})" if rest == "active" else rest, line, elapsed,
                           {"phase": "started", "state": rest, "artemis_ms": int(millis)})
        if kind == "refuse":
            phase, _, message = rest.partition(" ")
            return Verdict("refuse", message[:500], line, elapsed, {"phase": phase, "artemis_ms": int(millis)})
        return Verdict("undecided", f"Artemis config checker said {line[:200]!r}")

    def confirm(self, path: Path, deadline_s: float = 60.0) -> Verdict:
        """The real broker's verdict: `bin/artemis run` in a fresh instance holding a copy of `path` as its
        etc/broker.xml; accepted once it logs AMQ221007 (active), refused when it exits non-zero."""
        from ..vendors.artemis.native import JAVA_OPTIONS, _artemis_env, instance_template, make_instance

        work = Path(tempfile.mkdtemp(prefix="interop-artemis-confirm-"))
        try:
            make_instance(instance_template(self.install), work)
            shutil.copy(path, work / "etc" / "broker.xml")
            env = _artemis_env(self.install)
            env["JAVA_ARGS_APPEND"] = " ".join(JAVA_OPTIONS)
            start = run_and_watch([str(work / "bin" / "artemis"), "run"], lambda text: "AMQ221007" in text,
                                  deadline_s, stop_s=30.0, cwd=work, env=env)
            return verdict_of(start, _artemis_refusal)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
            self._log = None


def _artemis_refusal(output: str) -> str:
    """The first exception or ERROR line `artemis run` printed."""
    for line in output.splitlines():
        if "Exception" in line or " ERROR " in line:
            return line.strip()[:500]
    lines = [ln for ln in output.splitlines() if ln.strip()]
    return lines[-1].strip()[:500] if lines else ""
