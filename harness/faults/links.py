"""Topology links that go `via: proxy`: one fault-proxy proxy per link, driven by link name.

The provider wires the dialling node to the proxy's listen port and the proxy to the real listener, so a
suite can add, change and remove toxics on `R2->B2` (or disable the link outright) while traffic flows.
It speaks the Toxiproxy HTTP API directly (JSON over HTTP), so it works the same against the harness's
own proxy and a real toxiproxy-server.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from .. import fault_log
from ..ports import free_port, release_ports
from .launch import FaultProxyHandle


class FaultProxyRequestError(Exception):
    """The fault proxy answered an API call with an error; str() says which call and what it said."""


class LinkProxies:
    def __init__(self, handle: FaultProxyHandle):
        self.handle = handle
        self.links: dict[str, int] = {}  # link name -> listen port

    def add(self, link_name: str, upstream_port: int, host: str = "127.0.0.1", enabled: bool = True) -> int:
        """Create the proxy for one link; returns the port the dialling node must connect to. `enabled=False`:
        it refuses connections until set_enabled(link_name, True)."""
        port = free_port(host, held=True)  # a disabled link's port is unbound until enabled again: keep it ours
        self._call("POST", "/proxies", {"name": link_name, "listen": f"{host}:{port}",
                                         "upstream": f"{host}:{upstream_port}", "enabled": enabled})
        self.links[link_name] = port
        return port

    def close(self) -> None:
        """Stop the fault proxy and give up the links' ports."""
        self.handle.stop()
        release_ports(*self.links.values())

    def retarget(self, link_name: str, upstream_port: int, host: str = "127.0.0.1") -> int:
        """Point an existing link's proxy at another listener (a link whose connection is dialled from the other
        end, as RabbitMQ federation dials); returns the port to dial, which stays the same."""
        self._call("POST", f"/proxies/{self._q(link_name)}", {"upstream": f"{host}:{upstream_port}"})
        return self.links[link_name]

    def toxic(self, link_name: str, kind: str, stream: str = "downstream", toxicity: float = 1.0,
              name: str | None = None, **attributes) -> str:
        """Add a toxic (latency, bandwidth, slow_close, timeout, reset_peer, slicer, limit_data) to a link."""
        name = name or f"{kind}_{stream}"
        self._call("POST", f"/proxies/{self._q(link_name)}/toxics",
                   {"name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attributes})
        fault_log.note(kind, f"link {link_name}", stream=stream, **attributes)
        return name

    def remove_toxic(self, link_name: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{self._q(link_name)}/toxics/{self._q(name)}")

    def set_enabled(self, link_name: str, enabled: bool) -> None:
        """Disabled: open connections are dropped and new ones refused, as if the network were cut."""
        self._call("POST", f"/proxies/{self._q(link_name)}", {"enabled": enabled})
        if not enabled:
            fault_log.note("link outage", f"link {link_name}")

    def reset(self) -> None:
        """Every link enabled again, every toxic removed."""
        self._call("POST", "/reset")

    @staticmethod
    def _q(name: str) -> str:
        return urllib.request.quote(name, safe="")

    def _call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.handle.url}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                text = reply.read()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip()
            raise FaultProxyRequestError(f"fault proxy {method} {path}: {exc.code} {detail}") from None
