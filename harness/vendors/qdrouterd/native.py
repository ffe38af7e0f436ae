"""A native `qdrouterd` (Qpid Dispatch Router) as a local process, fed the same rendered qdrouterd.conf as the
reference router (render.py). qdrouterd cannot report the port a port-0 listener got, so the harness gives it a free
one; ready means the listener accepts."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ...peers.base import Endpoint, Peer, PeerInfo, PeerStartError, PeerUnavailable
from ...peers.process import ProcessPeer
from ...peers.provider import NodeSetup, Provider
from ...ports import free_port, release_ports
from ...wait import WaitTimeout, accepts, wait_for
from .render import render_for


class NativeQdrouterdPeer(ProcessPeer):
    """A `qdrouterd` binary on PATH, fed the same rendered qdrouterd.conf as the reference router."""

    def __init__(self, name: str, render, capabilities: frozenset[str], workdir: Path | None = None,
                 clients_port: int | None = None, version: str | None = None, binary: str | None = None):
        """`clients_port`: the port another node was told to dial (a broker's broker connection lands on the
        clients listener); else a free one. qdrouterd cannot report a port 0 listener, so it is always fixed.
        `version`: the chosen one (build.py), else the `qdrouterd` on PATH. `binary`: this
        qdrouterd instead (e.g. one built with libwebsockets, build.websocket_binary)."""
        from .build import binary_for, missing, reported_version

        binary = binary or binary_for(version)
        if binary is None:
            raise PeerUnavailable(missing(version) if version else
                                  "qdrouterd is not on PATH (no native Qpid Dispatch Router on this machine)")
        version = reported_version(binary)  # what the binary says, for the record
        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "router", PeerInfo("qdrouterd", version, "native"), capabilities, workdir)
        self.binary = binary
        # its own port is held until cleanup: a restarted qdrouterd binds it again
        self._own_port = None if clients_port else free_port(held=True)
        self.port = clients_port or self._own_port
        self.config_path = workdir / "qdrouterd.conf"
        self.config_path.write_text(render({"clients": self.port}))

    def command(self) -> list[str]:
        return [self.binary, "-c", str(self.config_path)]

    def _install_for(self, version: str | None) -> str:
        """The binary of release `version` (a router keeps no data: its qdrouterd.conf and port are what stay)."""
        from .build import binary_for, missing

        binary = binary_for(version)
        if binary is None:
            why = missing(version) if version else "qdrouterd is not on PATH"
            raise PeerUnavailable(f"{self.name}: cannot put qdrouterd {version or ''} in place: {why}")
        return binary

    def _use_install(self, binary: str) -> None:
        from .build import reported_version

        self.binary = binary
        self.info = PeerInfo("qdrouterd", reported_version(binary), "native")

    def cleanup(self) -> None:
        super().cleanup()
        if self._own_port is not None and not self.is_running():
            release_ports(self._own_port)
            self._own_port = None

    def start(self, timeout: float = 30.0) -> None:
        self._spawn()
        self.endpoints["clients"] = Endpoint("clients", "127.0.0.1", self.port, "normal")

        def ready():
            self._check_alive()
            return accepts("127.0.0.1", self.port)
        try:
            wait_for(ready, timeout, f"qdrouterd {self.name} to accept on port {self.port}")
        except WaitTimeout as exc:
            self.kill()
            raise PeerStartError(str(exc)) from None


class NativeQdrouterd(Provider):
    """A `qdrouterd` on PATH (docs/getting-products.md)."""

    vendor, name, role = "qdrouterd", "native", "router"
    versioned = True

    @classmethod
    def probe(cls, version: str | None = None) -> str | None:
        if version is not None:
            from .build import missing

            return missing(version)
        return None if shutil.which("qdrouterd") else "qdrouterd is not on PATH"

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        return NativeQdrouterdPeer(setup.node_name, lambda ports: render_for(setup, ports), setup.capabilities,
                                   clients_port=setup.listen_ports.get("clients") or None, version=setup.version)
