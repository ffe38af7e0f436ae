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
import urllib.request
from pathlib import Path

from .base import PeerInfo, PeerStartError
from .process import ProcessPeer

_LISTENING = re.compile(r"Listening on (\S+):(\d+) \(acceptor '([^']*)'")
_MANAGEMENT = re.compile(r"Management on (\S+):(\d+)")
_READY = re.compile(r"Broker \S+ started; ready")


class ReferenceBrokerPeer(ProcessPeer):
    def __init__(self, name: str, render, capabilities: frozenset[str], workdir: Path | None = None):
        """`render(acceptor_ports) -> broker.xml text`: ports to override (none at first, the learned ones on
        restart); the provider fills in the rest."""
        from reference import __version__

        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "broker", PeerInfo("reference", __version__, "subprocess"), capabilities, workdir)
        self._render = render
        self.config_path = workdir / "broker.xml"
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
        """{"depth", "available", "in_flight", "consumers", ...} of a queue, from the management endpoint."""
        if self.management_url is None:
            raise PeerStartError(f"{self.name}: no management endpoint (not started?)")
        try:
            with urllib.request.urlopen(f"{self.management_url}/queues/{name}", timeout=5) as reply:
                return json.load(reply)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return {"name": name, "depth": 0, "consumers": 0, "exists": False}
            raise
