"""The reference router as a subprocess, `python -m reference.router -c FILE`, fed the rendered qdrouterd.conf
(harness/vendors/qdrouterd/render.py: the reference router reads qdrouterd's own configuration format). It listens on
port 0 and reports the port the kernel gave it; ready means it logged its ready line and the listener accepts."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from ...peers.base import Endpoint, Peer, PeerInfo
from ...peers.process import ProcessPeer
from ...peers.provider import NodeSetup, Provider
from ..qdrouterd.render import render_for

_LISTENING = re.compile(r"Listening on (\S+):(\d+) \(listener '([^']*)', role (?P<role>\S+)\)")
_READY = re.compile(r"Router \S+ started .*; ready")


class ReferenceRouterPeer(ProcessPeer):
    """The reference router as a subprocess: `python -m reference.router -c FILE`."""

    def __init__(self, name: str, config_text: str, capabilities: frozenset[str], workdir: Path | None = None):
        from reference import __version__

        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "router", PeerInfo("reference", __version__, "subprocess"), capabilities, workdir)
        self.config_path = workdir / "qdrouterd.conf"
        self.config_path.write_text(config_text)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "reference.router", "-c", str(self.config_path)]

    def start(self, timeout: float = 30.0) -> None:
        self._start_logged(timeout, _READY, _LISTENING, "reference router")

    def _prepare_restart(self) -> None:
        """Write the ports the listeners got into the config, so a listener that asked for port 0 comes back
        on the same port after a restart."""
        if self.endpoints:
            pinned = _pin_listener_ports(self.config_path.read_text(), list(self.endpoints.values()))
            self.config_path.write_text(pinned)


_LISTENER_BLOCK = re.compile(r"(?<![\w.])listener\s*\{[^{}]*\}")
_PORT_ATTR = re.compile(r"(?<![\w.])(port\s*:\s*)([\"']?)([^\s}#\"']+)\2")
_NAME_ATTR = re.compile(r"(?<![\w.])name\s*:\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s}#]+))")


def _pin_listener_ports(text: str, endpoints: list[Endpoint]) -> str:
    """qdrouterd.conf text with every `port: 0` of a listener section replaced by the port that listener got.

    A named listener is matched to the endpoint of that name; unnamed ones by their order (the router logs
    its listeners in the order of the file).
    """
    by_name = {ep.name: ep for ep in endpoints if ep.name}
    blocks = list(_LISTENER_BLOCK.finditer(text))
    out, last = [], 0
    for index, block in enumerate(blocks):
        body = block.group(0)
        name_match = _NAME_ATTR.search(body)
        name = next((g for g in name_match.groups() if g is not None), None) if name_match else None
        endpoint = by_name.get(name) if name else (endpoints[index] if len(blocks) == len(endpoints) else None)
        port_match = _PORT_ATTR.search(body)
        if endpoint is not None and port_match is not None and port_match.group(3) == "0":
            body = body[:port_match.start(3)] + str(endpoint.port) + body[port_match.end(3):]
        out.append(text[last:block.start()])
        out.append(body)
        last = block.end()
    out.append(text[last:])
    return "".join(out)


class ReferenceRouter(Provider):
    """The reference router, `python -m reference.router`, from this checkout: it always runs."""

    vendor, name, role = "reference", "subprocess", "router"

    @classmethod
    def create(cls, setup: NodeSetup) -> Peer:
        return ReferenceRouterPeer(setup.node_name, render_for(setup), setup.capabilities)
