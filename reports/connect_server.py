"""A Spark Connect server on this machine, started from the pyspark installation, for `interop report --remote`.

    python -m reports.connect_server [--port 15002] [--host 127.0.0.1] [--log FILE]

A nightly report that starts its own Spark pays for a JVM start and warm-up every time, and on a small machine
that is most of the cost of adding one run to the store. A long-lived Spark Connect server pays it once: the
report's Python side then only sends plans to it (`interop report --remote sc://HOST:PORT`). This runs one in the
foreground until Ctrl-C or SIGTERM, with the report's JVM choices (reports/jvm.py: the JDK, the options and the
ahead-of-time cache) and the report's SQL settings, made so that one report's compiled query code serves the next
(see serve). A cluster's own Connect server works the same way, compiling each report's code anew.

`start()` is the same from Python (the tests and bench/report.py use it): a free loopback port, a deadline for the
server to answer, its log kept, and a one-line error with the log's last lines when it does not come up.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports import jvm  # noqa: E402
from reports.job.session import ReportError  # noqa: E402

DEFAULT_PORT = 15002  # Spark Connect's own default
START_TIMEOUT_S = 180.0  # a cold JVM on a busy 2-core machine takes 5-30 s; a generous deadline still ends


# The server's own word that its gRPC listener is bound (serve prints it once Spark Connect has started): a readiness
# signal from the server itself, where a TCP probe would also take any other program that happens to hold the port.
READY_LINE = b"Spark Connect server started at:"
# ... and the address it names there (`127.0.0.1:41975`): how a server asked for port 0 says which one it bound
BOUND_PORT = re.compile(re.escape(READY_LINE) + rb" \S*:(\d+)")

# The server's log: warnings and errors (READY_LINE is printed beside them). Spark's default,
# INFO for everything, wrote 8 MB per bench/report.py run (lines per task and stage, and Parquet's pushed-down
# filters at up to 7 KB a line), which a long-lived server would keep adding to.
LOG_CONFIG = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
"""


def log_config() -> Path:
    """LOG_CONFIG as a file for log4j2 (-Dlog4j2.configurationFile): in the report's cache folder, else the
    temporary folder."""
    for folder in (jvm.cache_dir(), Path(tempfile.gettempdir())):
        path = folder / "connect-server-log4j2.properties"
        try:
            if not path.is_file() or path.read_text() != LOG_CONFIG:
                folder.mkdir(parents=True, exist_ok=True)
                temporary = path.with_suffix(f".{os.getpid()}.tmp")  # whole or absent, for a server started beside
                temporary.write_text(LOG_CONFIG)
                temporary.replace(path)
            return path
        except OSError:
            continue
    raise ReportError("cannot write the Spark Connect server's log configuration in the cache or temporary folder")


def _port_taken(host: str, port: int) -> bool:
    """Whether a listener already holds host:port: binding it as the server will is refused."""
    with socket.socket() as probe:
        # Without SO_REUSEADDR, connections of an earlier server still in TIME_WAIT would count as a listener.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise ReportError(f"{host}:{port}: cannot listen there: {exc.strerror or exc}") from None
    return False


class _LogWatch:
    """Reads a growing log from where it last stopped, whole lines only, so a long wait does not read it again and
    again."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""

    def bound_port(self) -> int | None:
        """The port the server's ready line (READY_LINE) names, once that whole line is in the log."""
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return None
        self.offset += len(chunk)
        # a line the writer has not ended yet waits for the next read (its port could be cut in two)
        whole, _, self.partial = (self.partial + chunk).rpartition(b"\n")
        found = BOUND_PORT.search(whole)
        return int(found.group(1)) if found else None


class ConnectServer:
    """A running server: `url` for `interop report --remote`, `stop()` (also on leaving a `with` block)."""

    def __init__(self, process: subprocess.Popen, host: str, port: int, log_path: Path):
        self.process, self.host, self.port, self.log_path = process, host, port, log_path

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def __enter__(self) -> ConnectServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()  # the JVM's shutdown hooks stop Spark cleanly
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout)


def _sigterm_as_interrupt() -> None:
    """SIGTERM stops this process the way Ctrl-C does (KeyboardInterrupt), so that its cleanup runs either way."""
    def interrupt(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def command(host: str, port: int, conf: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a local server (see serve) with the report's JVM and SQL settings, and
    `conf` (Spark settings of the caller's, e.g. the tests' execution settings) last, so that they win. A JDK
    setting that names no JDK is a ReportError here, before anything starts."""
    try:
        jvm.choose_jdk()
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    argv = [sys.executable, "-m", "reports.connect_server", "--serve", "--host", host, "--port", str(port)]
    for key, value in (conf or {}).items():
        argv += ["--conf", f"{key}={value}"]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")])))
    return argv, env


def serve(host: str, port: int, conf: dict[str, str]) -> int:
    """The server itself (the process `command` starts): a local Spark application of this process, made by
    job.session.spark_session like a report's own (the same JVM, options and settings), with Spark Connect running
    in it as a plug-in; it prints READY_LINE with the port it bound and runs until SIGTERM or Ctrl-C.

    Why not Spark's SparkConnectServer: that program turns on the isolation of each Connect session's artifacts,
    so every session (every report) runs its queries with class loaders of its own, and Spark's cache of the code
    it compiles for queries is keyed by class loader: each report compiled all of its query code again, as if the
    server were new. Here sessions keep Spark's defaults and share the application's class loaders (the reports
    add no jars or classes of their own), so the code one report compiled serves the next
    (job.session.CODEGEN_CACHE_ENTRIES).
    Measured on the 1M-row benchmark, the same store and run each time, reports 2-5 on one server: 7.6-9.5 s with
    isolation, 5.2-6.6 s without (JFR: Janino's compiler a fifth of each report's samples before, none after)."""
    from reports.job.session import spark_session

    _sigterm_as_interrupt()
    settings = {
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.artifact.isolation.enabled": "false",
        "spark.sql.artifact.isolation.alwaysApplyClassloader": "false",
        # LOG_CONFIG keeps warnings and errors, and drops Spark's INFO line per task and stage
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log_config()}",
        **conf,
    }
    try:
        spark = spark_session("local[*]", app_name="interop report server", conf=settings)
    except ReportError as exc:
        print(f"connect_server: {exc}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:  # Spark did not start (a port taken meanwhile, a JVM that would not run): one line
        cause = getattr(exc, "java_exception", None)  # py4j's error from the JVM: its own message says what failed
        text = cause.toString() if cause is not None else str(exc)
        first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
        print(f"connect_server: Spark did not start: {first[:300]}", file=sys.stderr, flush=True)
        return 1
    spark.sparkContext.setLogLevel("WARN")  # spark_session's ERROR suits a report's terminal, not a server's log
    from pyspark import SparkContext

    try:
        # the plug-in's service object (a Scala object: its class is SparkConnectService$) and the gRPC server's port
        service = getattr(getattr(spark.sparkContext._jvm.org.apache.spark.sql.connect.service,
                                  "SparkConnectService$"), "MODULE$")
        bound = service.server().getPort()
        print(f"{READY_LINE.decode()} {host}:{bound}", flush=True)
        SparkContext._gateway.proc.wait()  # the JVM: it ends only if it fails (or is killed)
        print("connect_server: the server's JVM ended", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        spark.stop()
        return 0


def start(port: int = 0, host: str = "127.0.0.1", log_path: str | Path | None = None,
          timeout: float = START_TIMEOUT_S, conf: dict[str, str] | None = None) -> ConnectServer:
    """Start a server (port 0: a free one) with `conf` added to its settings (see command) and return once it says
    it listens; ReportError if it does not within `timeout` or exits first.

    With port 0 the server binds a free port itself and names it in its ready line: a port picked here and handed
    to it could be taken by another program (an outgoing connection, too) while the JVM starts."""
    if port and _port_taken(host, port):
        raise ReportError(f"{host}:{port}: something already listens there (choose another --port)")
    log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="interop-connect-", suffix=".log")[1])
    argv, env = command(host, port, conf)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    server = ConnectServer(process, host, port, log_path)
    where = f"{host}:{port}" if port else f"{host} (a port of its choice)"
    deadline = time.monotonic() + timeout
    log_watch = _LogWatch(log_path)
    try:
        while (bound := log_watch.bound_port()) is None:
            if process.poll() is not None:
                raise ReportError(f"Spark Connect server on {where} exited with status {process.returncode} "
                                  f"before it answered: {server.log_tail()} (log: {log_path})")
            if time.monotonic() > deadline:
                raise ReportError(f"Spark Connect server on {where} did not answer within {timeout:.0f}s: "
                                  f"{server.log_tail()} (log: {log_path})")
            time.sleep(0.1)  # a poll interval under a deadline, not a wait for time to pass
    except BaseException:
        # not up in time, or the caller interrupted (Ctrl-C, SIGTERM): the server runs in a session of its own and
        # would outlive this process
        server.stop()
        raise
    server.port = bound
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.connect_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"gRPC port (default {DEFAULT_PORT}; 0: a "
                                                                       "free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--log", metavar="FILE", help="the server's log (default: a file in the temporary folder)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the server process (see serve)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.host, args.port, dict(item.split("=", 1) for item in args.conf))
    if not 0 <= args.port <= 65535:
        print(f"connect_server: --port {args.port}: expected 0-65535", file=sys.stderr)
        return 2
    started = time.monotonic()
    _sigterm_as_interrupt()  # before the server starts: a SIGTERM at any moment stops it too
    try:
        server = start(args.port, args.host, args.log)
    except ReportError as exc:
        print(f"connect_server: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(f"Spark Connect server up in {time.monotonic() - started:.1f}s: interop report --remote {server.url} "
          f"(log: {server.log_path}); Ctrl-C stops it", flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    code = server.process.returncode
    return 0 if code in (0, -signal.SIGTERM, 143) else 1


if __name__ == "__main__":
    sys.exit(main())
