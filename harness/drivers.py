"""Client stacks other than the harness's own proton clients: one long-lived shim process per stack.

A shim (clients/<stack>/) is a small program written with one AMQP client library: python-qpid-proton
(clients/python/shim.py), Qpid Proton C++ (clients/cpp/shim.cpp, built with g++ against Debian's
libqpid-proton-cpp12-dev), rhea (clients/rhea/shim.js, Node) and Qpid JMS (clients/jms, a JMS application in one
jar built with Maven; it speaks JMS, so what JMS cannot say is missing from its capabilities). The harness speaks
to it in JSON lines: one request per line on its stdin, one answer per line on its stdout, in order:

    {"id": 7, "op": "send", "link": "s1", "messages": [...]}  ->  {"id": 7, "ok": {"outcomes": ["accepted"]}}
                                                             or  {"id": 7, "error": "what went wrong"}

Operations: hello (stack, version, capabilities), connect, sender (settle: unsettled | presettled), receiver
(credit, settle: manual | auto), send, receive (count, timeout), flow (credit), settle (outcome, count),
detach, close, exit. AMQP values travel as
typed JSON, so that a value's AMQP type survives the trip: {"t": "ubyte", "v": "255"} (clients/README.md).

Every request has a deadline; a shim that does not answer in time, answers an error or dies gives a
`ClientStackError` whose one line names the stack. What a driver does and sees is recorded into the same
`History` as the harness's proton clients (harness/history.py).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from . import history as h

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "clients"
STACKS = ("python", "cpp", "rhea", "jms")
# The stacks that carry any AMQP value as typed JSON, so that the type suite crosses them pair by pair. JMS is not
# one: its values are Java's (no unsigned, decimal, described or symbol values); suites/types/test_jms_mapping.py
# judges it against the AMQP JMS mapping instead.
AMQP_STACKS = ("python", "cpp", "rhea")
DEFAULT_STACK = "python"
DEFAULT_TIMEOUT = 10.0
_CPP_BINARY = CLIENTS / "cpp" / "build" / "shim"
_JMS_JAR = CLIENTS / "jms" / "target" / "jms-shim.jar"
_JMS_SOURCES = (CLIENTS / "jms" / "pom.xml", CLIENTS / "jms" / "src" / "main" / "java" / "interop" / "Shim.java")


class ClientStackError(Exception):
    """A shim failed: the one-line message names the stack and the operation."""


class ClientStackUnavailable(ClientStackError):
    """The stack cannot run on this machine (its library or runtime is not installed); cases are skipped."""


def stack_command(stack: str) -> list[str]:
    """The command that starts a stack's shim, or ClientStackUnavailable with the reason and the fix."""
    if stack == "python":
        return [sys.executable, str(CLIENTS / "python" / "shim.py")]
    if stack == "rhea":
        node = shutil.which("node")
        if node is None:
            raise ClientStackUnavailable("rhea: no `node` on PATH (Node.js 18+ runs the rhea shim)")
        if not (CLIENTS / "rhea" / "node_modules" / "rhea").is_dir():
            raise ClientStackUnavailable("rhea: clients/rhea/node_modules is missing (`make setup` runs npm ci there)")
        return [node, str(CLIENTS / "rhea" / "shim.js")]
    if stack == "cpp":
        return [str(build_cpp_shim())]
    if stack == "jms":
        java = shutil.which("java")
        if java is None:
            raise ClientStackUnavailable("jms: no `java` on PATH (a JDK 11+ runs the Qpid JMS shim; make setup builds "
                                         "clients/jms)")
        # One small heap: the shim holds a few connections and messages; the JVM starts once per session.
        return [java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar", str(build_jms_shim())]
    raise ClientStackError(f"unknown client stack {stack!r}: expected one of {', '.join(STACKS)}")


_build_lock = threading.Lock()


def build_cpp_shim() -> Path:
    """The C++ shim's binary, built with `make -C clients/cpp` on first use (seconds; once per checkout)."""
    with _build_lock:
        source = CLIENTS / "cpp" / "shim.cpp"
        if _CPP_BINARY.exists() and _CPP_BINARY.stat().st_mtime >= source.stat().st_mtime:
            return _CPP_BINARY
        if not Path("/usr/include/proton/container.hpp").exists():
            raise ClientStackUnavailable("cpp: Qpid Proton C++ headers are missing (Debian package "
                                         "libqpid-proton-cpp12-dev, in system-packages.txt)")
        if shutil.which("g++") is None or shutil.which("make") is None:
            raise ClientStackUnavailable("cpp: g++ and make are needed to build clients/cpp/shim.cpp")
        done = subprocess.run(["make", "-s", "-C", str(CLIENTS / "cpp")], capture_output=True, text=True)
        if done.returncode != 0 or not _CPP_BINARY.exists():
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise ClientStackError(f"cpp: building clients/cpp/shim.cpp failed: {tail}")
        return _CPP_BINARY


def build_jms_shim() -> Path:
    """The JMS shim's jar, built with `mvn -q -B package` in clients/jms when missing or older than its sources
    (seconds once Maven's cache ~/.m2 holds Qpid JMS; `make setup` builds it beforehand). A file lock keeps two
    pytest workers from building into one target/ at once."""
    with _build_lock:
        if _jar_is_current():
            return _JMS_JAR
        if shutil.which("mvn") is None:
            raise ClientStackUnavailable("jms: clients/jms/target/jms-shim.jar is missing and there is no `mvn` on "
                                         "PATH to build it (make setup builds clients/jms)")
        _JMS_JAR.parent.mkdir(parents=True, exist_ok=True)
        with open(_JMS_JAR.parent / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _jar_is_current():  # another worker built it while this one waited
                return _JMS_JAR
            done = subprocess.run(["mvn", "-q", "-B", "package"], cwd=str(CLIENTS / "jms"), capture_output=True,
                                  text=True)
        if done.returncode != 0 or not _JMS_JAR.exists():
            lines = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line or "error:" in line]
            raise ClientStackUnavailable("jms: building clients/jms failed (mvn -q -B package): "
                                         + " | ".join(lines[:3] or ["no output"])[:400])
        return _JMS_JAR


def _jar_is_current() -> bool:
    return _JMS_JAR.exists() and all(_JMS_JAR.stat().st_mtime >= source.stat().st_mtime for source in _JMS_SOURCES)


class Shim:
    """One running shim process of one stack, and the request/answer exchange with it."""

    def __init__(self, stack: str, history: h.History | None = None):
        self.stack = stack
        self.history = history or h.History()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stderr: list[str] = []
        self.proc = subprocess.Popen(stack_command(stack), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1,
                                     cwd=str(CLIENTS / stack), env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._answers: dict[int, dict] = {}
        self._answered = threading.Condition()
        threading.Thread(target=self._read_stdout, name=f"shim-{stack}-out", daemon=True).start()
        threading.Thread(target=self._read_stderr, name=f"shim-{stack}-err", daemon=True).start()
        hello = self.request("hello")
        self.version: str = str(hello.get("version", ""))
        self.capabilities: frozenset[str] = frozenset(hello.get("capabilities", ()))

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                self._stderr.append(f"(stdout, not JSON) {line.rstrip()[:200]}")
                continue
            with self._answered:
                self._answers[answer.get("id")] = answer
                self._answered.notify_all()
        with self._answered:
            self._answered.notify_all()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip())
            del self._stderr[:-20]

    def request(self, op: str, timeout: float = DEFAULT_TIMEOUT, **fields) -> dict:
        """Send one request and wait for its answer; ClientStackError on an error, a timeout or a dead shim."""
        with self._lock:  # one request in flight per shim: answers come in order
            rid = next(self._ids)
            line = json.dumps({"id": rid, "op": op, "timeout": timeout, **fields}, ensure_ascii=False)
            try:
                self.proc.stdin.write(line + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                raise ClientStackError(f"{self.stack} client: {op}: the shim is gone ({self._last_words()})") from None
            # The shim enforces `timeout` itself; the extra time covers a shim that is slow to say so.
            with self._answered:
                if not self._answered.wait_for(lambda: rid in self._answers or self.proc.poll() is not None,
                                               timeout + 5.0):
                    raise ClientStackError(f"{self.stack} client: {op}: no answer within {timeout + 5.0:g}s")
                answer = self._answers.pop(rid, None)
        if answer is None:
            raise ClientStackError(f"{self.stack} client: {op}: the shim exited with {self.proc.poll()} "
                                   f"({self._last_words()})")
        if "error" in answer:
            raise ClientStackError(f"{self.stack} client: {op}: {answer['error']}")
        return answer.get("ok") or {}

    def _last_words(self) -> str:
        return " | ".join(self._stderr[-3:]) or "no output on stderr"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("exit", timeout=2.0)
            except ClientStackError:
                pass
            try:
                self.proc.wait(3.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(3.0)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


class Stacks:
    """The shims of a session: one process per stack, started on first use and kept until `close()`. A stack
    that cannot start is remembered, so each of its cases gets the same reason at once."""

    def __init__(self):
        self._shims: dict[str, Shim | ClientStackError] = {}
        self._lock = threading.Lock()

    def get(self, stack: str) -> Shim:
        with self._lock:
            shim = self._shims.get(stack)
            if isinstance(shim, Shim) and shim.proc.poll() is not None:
                shim = None  # a shim that died under one case is started again for the next
            if shim is None:
                try:
                    shim = Shim(stack)
                except ClientStackError as exc:
                    shim = exc
                self._shims[stack] = shim
        if isinstance(shim, ClientStackError):
            raise shim
        return shim

    def close(self) -> None:
        for shim in self._shims.values():
            if isinstance(shim, Shim):
                shim.close()


class StackClient:
    """A client of one stack, driven through its shim, recording into a History like harness/clients.py.

        with StackClient(stacks.get("rhea"), history) as c:
            c.connect(url)
            s = c.sender("q1")
            s.send([message, ...])     -> outcomes
            r = c.receiver("q1", credit=100)
            r.receive(3)               -> messages (typed JSON)
            r.settle("accept")
    """

    _names = itertools.count(1)

    def __init__(self, shim: Shim, history: h.History | None = None):
        self.shim = shim
        self.stack = shim.stack
        self.history = history if history is not None else h.History()
        self.conn: str | None = None

    def __enter__(self) -> StackClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _name(self, kind: str) -> str:
        return f"{self.stack}-{kind}{next(self._names)}"

    def connect(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> StackClient:
        self.conn = self._name("conn")
        try:
            self.shim.request("connect", timeout, conn=self.conn, url=url)
        except ClientStackError as exc:
            self.history.record(self.conn, h.REFUSED, condition=str(exc), stack=self.stack)
            raise
        return self

    def sender(self, address: str, settle: str = "unsettled", timeout: float = DEFAULT_TIMEOUT,
               **options) -> StackSender:
        """options: what only some stacks take, passed to the shim as they are (the JMS stack: transacted=True,
        dest="topic")."""
        return StackSender(self, address, settle, timeout, **options)

    def receiver(self, address: str, credit: int = 10, settle: str = "manual",
                 timeout: float = DEFAULT_TIMEOUT, **options) -> StackReceiver:
        """settle: "manual" (settle() does it) or "auto" (the shim accepts each message as it arrives and gives
        its credit back, so that a sender waiting for outcomes through a router needs no receive first).
        options: what only some stacks take (the JMS stack: transacted, selector, dest, durable, shared)."""
        return StackReceiver(self, address, credit, settle, timeout, **options)

    def close(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        if self.conn is None:
            return
        conn, self.conn = self.conn, None
        if self.shim.proc.poll() is None:
            self.shim.request("close", timeout, conn=conn)
        self.history.record(conn, h.DISCONNECTED, by="local", stack=self.stack)


class _StackLink:
    def __init__(self, client: StackClient, kind: str, address: str):
        self.client, self.shim, self.address = client, client.shim, address
        self.name = client._name(kind)
        self.history = client.history

    def _attach(self, op: str, timeout: float, **fields) -> None:
        try:
            self.shim.request(op, timeout, conn=self.client.conn, link=self.name, address=self.address, **fields)
        except ClientStackError as exc:
            self.history.record(self.name, h.REFUSED, condition=str(exc), stack=self.shim.stack)
            raise
        self.history.record(self.name, h.ATTACHED, address=self.address, stack=self.shim.stack)

    def detach(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.shim.request("detach", timeout, link=self.name)
        self.history.record(self.name, h.DETACHED, by="local", stack=self.shim.stack)


class StackSender(_StackLink):
    def __init__(self, client: StackClient, address: str, settle: str, timeout: float, **options):
        super().__init__(client, "sender", address)
        self.settle_mode = settle
        self.sent = 0
        self._attach("sender", timeout, settle=settle, **options)

    def send(self, messages: list[dict], timeout: float = DEFAULT_TIMEOUT) -> list[str]:
        """Send messages (typed JSON) in order; returns each one's outcome once all are settled ("settled" for
        presettled ones)."""
        first = self.sent
        answer = self.shim.request("send", timeout, link=self.name, messages=messages)
        presettled = self.settle_mode == "presettled"
        for i in range(len(messages)):
            self.history.record(self.name, h.SEND, seq=first + i, settled=presettled, stack=self.shim.stack)
        self.sent += len(messages)
        outcomes = list(answer.get("outcomes", []))
        for i, outcome in enumerate(outcomes):
            self.history.record(self.name, h.OUTCOME, seq=first + i, outcome=outcome, stack=self.shim.stack)
        return outcomes


class StackReceiver(_StackLink):
    def __init__(self, client: StackClient, address: str, credit: int, settle: str, timeout: float, **options):
        super().__init__(client, "receiver", address)
        self.received = 0
        self.auto = settle == "auto"
        self._attach("receiver", timeout, credit=credit, settle=settle, **options)

    def receive(self, count: int, timeout: float = DEFAULT_TIMEOUT) -> list[dict]:
        """Wait for `count` more messages (typed JSON); they stay unsettled until `settle()`."""
        answer = self.shim.request("receive", timeout, link=self.name, count=count)
        messages = list(answer.get("messages", []))
        for _ in messages:
            self.history.record(self.name, h.RECEIVE, seq=self.received, address=self.address,
                                stack=self.shim.stack)
            if self.auto:
                self.history.record(self.name, h.SETTLE, seq=self.received, outcome="accept", stack=self.shim.stack)
            self.received += 1
        return messages

    def flow(self, credit: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Grant `credit` more (a manual receiver's credit is what it was opened with plus what flow() adds)."""
        self.shim.request("flow", timeout, link=self.name, credit=credit)
        self.history.record(self.name, h.CREDIT, credit=credit, stack=self.shim.stack)

    def settle(self, outcome: str = "accept", count: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Settle the oldest `count` unsettled messages (all when None) with an outcome."""
        answer = self.shim.request("settle", timeout, link=self.name, outcome=outcome, count=count or 0)
        settled = int(answer.get("settled", 0))
        self.history.record(self.name, h.SETTLE, outcome=outcome, count=settled, stack=self.shim.stack)
        return settled
