"""Judges of the config differential: each starts one product on a config file and says whether it accepted it.

* `ReferenceJudge`: the reference router or broker, `main(["-c", FILE])` of reference/router/server.py or
  reference/broker/server.py in a child of a fork server (harness/fuzz/forkserver.py: the command line's own
  function, without paying for an interpreter per file);
* `QdrouterdJudge`: `qdrouterd -c FILE`, a process per file;
* `ArtemisJudge` (harness/fuzz/artemis_check.py): Artemis's own start-up code in one long-lived JVM.

A `Verdict` is accept or refuse (or undecided when a judge itself failed), with the one line that says why and
the output it came from. The rule for a started process is harness.fuzz.startwatch's: a ready line or still
running at the deadline is accepted; an exit with a non-zero status is refused.

What "ready" is, per product:
* reference router / broker: their last start-up line (`... started in MODE mode; ready`, `Broker NAME started;
  ready`), logged once every listener accepts;
* qdrouterd 1.19: it reads and applies the whole file (Python config reader, schema, then each entity), then
  logs `SERVER (notice) Operational`, and only then opens its listeners; a listener that cannot listen is
  logged, and ends the process when it is "required" (QdrouterdJudge.ready). So: `Operational` logged and each
  `Configured Listener` line answered by `Listening on` or a listener error that does not end it (or the
  process's exit). A file that silences these lines (log sections) falls back to the deadline.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .startwatch import Start, run_and_watch

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 3.0  # a start that neither logs ready nor exits by then counts as accepted (running)


@dataclass
class Verdict:
    decision: str  # accept | refuse | undecided
    reason: str  # one line: the refusal, or how it was seen to accept
    output: str = ""  # the product's output (head), the evidence
    elapsed_s: float = 0.0
    details: dict = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.decision == "accept"


def verdict_of(start: Start, refusal_line) -> Verdict:
    """A Start as a Verdict; `refusal_line(output)` picks the line that says why a refused start was refused."""
    if start.accepted:
        how = {"ready": "ready", "running": f"still running after {start.elapsed_s:.1f}s (no ready line)",
               "exited": "exited 0"}[start.status]
        return Verdict("accept", how, start.output, start.elapsed_s, {"status": start.status})
    return Verdict("refuse", refusal_line(start.output) or f"exit status {start.code}", start.output,
                   start.elapsed_s, {"status": start.status, "code": start.code})


def _last_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


class ReferenceJudge:
    """The reference router or broker started by the fork server, one child per file."""

    READY = {"router": r"started in \S+ mode; ready", "broker": r"Broker .* started; ready"}
    MODULE = {"router": "reference.router.server", "broker": "reference.broker.server"}

    def __init__(self, role: str, deadline_s: float = DEADLINE_S):
        self.role, self.deadline_s = role, deadline_s
        self.vendor, self.version = "reference", _reference_version()
        self._proc: subprocess.Popen | None = None

    def _server(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "harness.fuzz.forkserver", self.MODULE[self.role]], cwd=ROOT,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
            first = self._proc.stdout.readline()
            if first.strip() != "ready":
                raise RuntimeError(f"fork server for {self.MODULE[self.role]} did not start: {first!r}")
        return self._proc

    def judge(self, path: Path) -> Verdict:
        request = {"argv": ["-c", str(path)], "cwd": str(path.parent), "ready": self.READY[self.role],
                   "deadline_s": self.deadline_s}
        try:
            proc = self._server()
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            start = Start(**json.loads(line))
        except (OSError, ValueError, RuntimeError) as exc:
            self.close()
            return Verdict("undecided", f"fork server failed: {exc}")
        return verdict_of(start, _last_line)

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


def _reference_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("amqp-interop")
    except PackageNotFoundError:
        return "0"


_QD_CONFIGURED_LISTENER = re.compile(r"CONN_MGR \(info\) Configured Listener: (\S+) ")
# a listener that failed: a listen error, or an http listener this build cannot serve
_QD_LISTENER_ERROR = re.compile(r"SERVER \(error\) (?:Listener error on (\S+): |No HTTP support to listen on (\S+))")
_QD_REFUSAL = re.compile(r"(Cannot load configuration file.*|Configuration failed.*|.*\((?:error|critical)\).*)")


class QdrouterdJudge:
    """`qdrouterd -c FILE`, one process per file (it starts in ~50 ms)."""

    vendor = "qdrouterd"

    def __init__(self, deadline_s: float = DEADLINE_S):
        # The build with libwebsockets where there is one (of the same release as the plain one): the reference
        # serves `http: yes` listeners, and a build without it refuses them ("No HTTP support"), which is how it
        # was built, not how qdrouterd reads the file.
        plain = shutil.which("qdrouterd")
        from ..vendors.qdrouterd.build import reported_version, websocket_binary

        self.binary = (websocket_binary(reported_version(plain))[0] if plain else None) or plain
        self.deadline_s = deadline_s
        self.version = (subprocess.run([self.binary, "--version"], capture_output=True, text=True).stdout.strip()
                        if self.binary else None)

    def unavailable(self) -> str | None:
        return None if self.binary else "qdrouterd is not on PATH (make qdrouterd builds 1.19.0)"

    @staticmethod
    def ready(output: str) -> bool:
        """Operational, and every configured listener listening or failed for good. A failed listener ends
        qdrouterd only when it is the first one and no connector is configured (connection_manager.c: the first
        qd_connection_manager_start marks the listeners it starts exit_on_error, and connectors start first):
        then this waits for the exit instead."""
        if "SERVER (notice) Operational" not in output:
            return False
        configured = _QD_CONFIGURED_LISTENER.findall(output)
        failed = [a or b for a, b in _QD_LISTENER_ERROR.findall(output)]
        if output.count("SERVER (notice) Listening on ") + len(failed) < len(configured):
            return False
        fatal = configured and configured[0] in failed and "Configured Connector" not in output
        return not fatal

    def judge(self, path: Path) -> Verdict:
        start = run_and_watch([self.binary, "-c", str(path)], self.ready, self.deadline_s, cwd=path.parent)
        return verdict_of(start, _qdrouterd_refusal)

    def close(self) -> None:
        pass


def _qdrouterd_refusal(output: str) -> str:
    """qdrouterd's own reason: the config reader's exception, else its first error or critical log line."""
    for line in output.splitlines():
        if "Cannot load configuration file" in line or "Python: Exception" in line:
            return line.split("Python: ", 1)[-1].strip()[:500]
    errors = [ln for ln in output.splitlines() if "(error)" in ln or "(critical)" in ln]
    return (errors[0].split(" +0000 ", 1)[-1].strip()[:500] if errors else _last_line(output))
