"""Fault injection: a TCP fault proxy that speaks Toxiproxy's HTTP API, and how the harness starts it.

- `proxy.py`: the data plane (proxies, connections, per-direction toxic chains), `toxics.py`: the toxics,
  `api.py`: the HTTP API, `server.py`: `interop proxy` / `python -m harness.faults`.
- `launch.py`: `start_fault_proxy()` -> `FaultProxyHandle`, this project's server or the real
  `toxiproxy-server` (`toxiproxy_server.py` builds and checks it), as the session chose.
- `links.py`: a topology's `via: proxy` links, one proxy each, driven by link name.

Process faults (kill -9, pause, resume, restart) are methods of the peers (`harness.peers.base.Peer`).
"""

# launch.py needs harness.peers.base, which itself needs faults.disk: the names below are loaded on first use,
# so that importing harness.faults.disk does not go round that circle.
_FROM_LAUNCH = ("FaultProxyError", "FaultProxyHandle", "FaultProxyUnavailable", "choose_fault_proxy",
                "chosen_fault_proxy", "start_fault_proxy")

__all__ = list(_FROM_LAUNCH)


def __getattr__(name: str):
    if name in _FROM_LAUNCH:
        from . import launch

        return getattr(launch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
