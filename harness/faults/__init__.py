"""Fault injection: a TCP fault proxy that speaks Toxiproxy's HTTP API, and how the harness starts it.

- `proxy.py`: the data plane (proxies, connections, per-direction toxic chains), `toxics.py`: the toxics,
  `api.py`: the HTTP API, `server.py`: `interop proxy` / `python -m harness.faults`.
- `launch.py`: `start_fault_proxy()` -> `FaultProxyHandle` (a real `toxiproxy-server` on PATH is preferred).

Process faults (kill -9, pause, resume, restart) are methods of the peers (`harness.peers.base.Peer`).
"""

from .launch import FaultProxyError, FaultProxyHandle, start_fault_proxy

__all__ = ["FaultProxyError", "FaultProxyHandle", "start_fault_proxy"]
