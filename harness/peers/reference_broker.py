"""The reference broker as a subprocess: `python -m reference.broker -c broker.xml --management-port 0`.

It reads the same Artemis broker.xml the topology renders for ActiveMQ Artemis. Its acceptor listens on
port 0 and the broker logs the real port; a restart reuses that port (clients and routers reconnect to
the same address) and the same journal directory (durable messages survive).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .base import ManagementError, PeerInfo, PeerStartError
from .process import ProcessPeer
from .provider import NodeSetup, Provider

_LISTENING = re.compile(r"Listening on (\S+):(\d+) \(acceptor '([^']*)'")
_MANAGEMENT = re.compile(r"Management on (\S+):(\d+)")
_READY = re.compile(r"Broker \S+ started; ready")


class ReferenceBrokerPeer(ProcessPeer):
    def __init__(self, name: str, render, capabilities: frozenset[str], workdir: Path | None = None, *,
                 files: dict[str, str] | None = None):
        """`render(acceptor_ports) -> broker.xml text`: ports to override (none at first, the learned ones on
        restart); the provider fills in the rest. `files` (name -> text) are written beside broker.xml: the
        login module's users and roles (harness.render.artemis.render_artemis_security), which the broker reads
        from there. TLS files are named by broker.xml itself (absolute paths in the run's test PKI)."""
        from reference import __version__

        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "broker", PeerInfo("reference", __version__, "subprocess"), capabilities, workdir)
        self._render = render
        self.config_path = workdir / "broker.xml"
        for file_name, text in (files or {}).items():
            path = workdir / file_name
            path.write_text(text)
            path.chmod(0o600)  # passwords
        self.config_path.write_text(render({}))
        self.management_url: str | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "reference.broker", "-c", str(self.config_path), "--management-port", "0"]

    def start(self, timeout: float = 30.0) -> None:
        self._start_logged(timeout, _READY, _LISTENING, "reference broker")
        for m in self._log_matches(_MANAGEMENT):
            self.management_url = f"http://{m.group(1)}:{m.group(2)}"

    def _prepare_restart(self) -> None:
        """Come back on the ports the acceptors got, with the same journal directory (the workdir)."""
        self.config_path.write_text(self._render({name: ep.port for name, ep in self.endpoints.items()}))

    def wire_address(self, name: str) -> str:
        return name

    def queue_stats(self, name: str) -> dict:
        """{"depth", "available", "in_flight", "consumers", "exists", ...} of a queue, from the management
        endpoint; a queue the broker does not have is {"exists": False} with depth and consumers 0."""
        try:
            stats = self._management("GET", f"/queues/{_q(name)}", f"queue statistics of {name!r}")
        except ManagementError as exc:
            if exc.status == 404:
                return {"name": name, "depth": 0, "consumers": 0, "exists": False}
            raise
        return {**stats, "exists": True}

    def broker_connections(self) -> list[dict]:
        return self._management("GET", "/broker-connections", "list broker connections")

    def start_broker_connection(self, name: str) -> None:
        self._management("POST", f"/broker-connections/{_q(name)}/start", f"start broker connection {name!r}")

    def delete_queue(self, name: str) -> None:
        self._management("DELETE", f"/queues/{_q(name)}", f"delete queue {name!r}")

    def _management(self, method: str, path: str, what: str, timeout: float = 5.0):
        """One call to the broker's management endpoint; its JSON answer, or ManagementError naming this peer,
        `what` was asked and what the broker said."""
        if self.management_url is None:
            raise PeerStartError(f"{self.name}: cannot {what}: no management endpoint (not started?)")
        request = urllib.request.Request(f"{self.management_url}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                text = reply.read()
        except urllib.error.HTTPError as exc:
            raise ManagementError(f"{self.name}: cannot {what}: {method} {path} answered {exc.code} "
                                  f"{_reason(exc)}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ManagementError(f"{self.name}: cannot {what}: {method} {self.management_url}{path} failed: "
                                  f"{reason}") from None
        try:
            return json.loads(text) if text else None
        except ValueError:
            raise ManagementError(f"{self.name}: cannot {what}: {method} {path} answered something that is not "
                                  f"JSON: {text[:80]!r}") from None


def _q(name: str) -> str:
    """A queue or connection name as one path segment (`$ACTIVEMQ_ARTEMIS_MIRROR_DC2`, `a/b`)."""
    return urllib.parse.quote(name, safe="")


def _reason(exc: urllib.error.HTTPError) -> str:
    """The `error` of a JSON error body, else the body's first line, else the HTTP reason."""
    try:
        body = exc.read().decode(errors="replace").strip()
    except OSError:
        body = ""
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
    except ValueError:
        pass
    return body.splitlines()[0][:200] if body else str(exc.reason)


class ReferenceBroker(Provider):
    """The reference broker, `python -m reference.broker`, from this checkout, reading the node's broker.xml."""

    vendor, name, role = "reference", "subprocess", "broker"

    @classmethod
    def create(cls, setup: NodeSetup) -> ReferenceBrokerPeer:
        from ..render.artemis import render_artemis_security

        return ReferenceBrokerPeer(setup.node_name, setup.render_broker_xml, setup.capabilities,
                                   files=render_artemis_security(setup.topology, setup.node_name))
