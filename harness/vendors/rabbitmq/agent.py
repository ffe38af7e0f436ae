"""A long-lived management agent beside a RabbitMQ node: queue depths and federation links in milliseconds.

The harness asks a RabbitMQ node the same few questions many times a case (queue depths until they settle,
federation links until they run). `rabbitmqctl` answers each by booting an Elixir VM: 1.6 s wall and 1.6 CPU-s per
call on an idle machine here, 3-4 s on a busy one, and a network case of three nodes polls for tens of seconds. In
CI that made the RabbitMQ network suite the longest cell of `make test` (730 of its 1300 case-seconds) and left a
case's settle wait outliving its timeout while every message had arrived.

The agent (agent.escript) is one hidden Erlang node started on the first question and kept until the peer
stops: each answer is one `rpc:call` on the node, the call rabbitmqctl makes, without the boot. Its questions are
read-only; everything that changes the node still goes through rabbitmqctl (RabbitMQPeer.ctl).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import threading
import time
from itertools import count
from pathlib import Path

SCRIPT = Path(__file__).with_name("agent.escript")
_AGENTS = count(1)


class AgentError(RuntimeError):
    """The agent could not answer; str() is one line naming the node and the question."""


class ManagementAgent:
    """One agent process for one RabbitMQ node; thread-safe; restarted on the next question after a failure."""

    def __init__(self, node_name: str, environment, workdir: Path):
        """`environment`: a callable giving the node's environment (HOME with its cookie, ERL_EPMD_PORT)."""
        self.node_name = node_name
        self._environment = environment
        self._workdir = workdir
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def ask(self, question: str, timeout: float = 20.0):
        """The agent's answer to `question` (queues, bindings, federation) as parsed JSON, or AgentError."""
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._spawn()
            try:
                line = self._exchange(proc, question, timeout)
            except AgentError:
                self._stop_locked()  # a half-read answer would be taken for the next one
                raise
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise AgentError(f"RabbitMQ agent of {self.node_name}: {question}: not JSON: {line[:200]!r}") from None
        if "error" in reply:
            raise AgentError(f"RabbitMQ agent of {self.node_name}: {question}: {str(reply['error'])[:300]}")
        return reply["ok"]

    def close(self) -> None:
        with self._lock:
            self._stop_locked()

    # ---- the process ----

    def _spawn(self) -> subprocess.Popen:
        self._stop_locked()
        name = f"interop-agent-{os.getpid()}-{next(_AGENTS)}@localhost"
        self._proc = subprocess.Popen(["escript", str(SCRIPT), self.node_name, name], env=self._environment(),
                                      cwd=self._workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        return self._proc

    def _exchange(self, proc: subprocess.Popen, question: str, timeout: float) -> str:
        try:
            proc.stdin.write(question.encode() + b"\n")
            proc.stdin.flush()
        except OSError as exc:
            raise AgentError(f"RabbitMQ agent of {self.node_name}: {question}: the agent is gone ({exc})") from None
        deadline = time.monotonic() + timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while not buf.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise AgentError(f"RabbitMQ agent of {self.node_name}: {question}: no answer within {timeout:g}s")
                chunk = os.read(proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise AgentError(f"RabbitMQ agent of {self.node_name}: {question}: the agent exited "
                                     f"({proc.poll()}): {buf.decode(errors='replace').strip()[:300]}")
                buf += chunk
        return buf.decode("utf-8", errors="replace").strip()

    def _stop_locked(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # end of stdin ends the agent
        except OSError:
            pass
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
