"""Peers someone else runs: `--peer broker=external:amqp://HOST:PORT?caps=...&vendor=...`.

The harness neither starts nor stops such a peer; `start()` only checks that its port accepts connections
(a one-line error otherwise), `stop()` does nothing, and whatever needs process control (kill, restart,
pause) raises NotImplementedError, which suites report as "cannot do that with this provider".

Query parameters (all optional):

* `caps=A,B,...`: the capabilities it has, from the one vocabulary (harness/peers/vendors.py); `caps=` (empty)
  for none. Default: the capabilities of `vendor` if the matrix knows it for this role, else none.
* `vendor=NAME`: what it is (`artemis`, `rabbitmq`, ...), for result records and expected differences.
  Default `external`.
* `version=V`: for result records. Default `unknown`.
* `prefix=P`: put in front of every logical address (`prefix=/queue/` for RabbitMQ 3.x queues declared on
  attach). Default: `/queue/` for vendor=rabbitmq, nothing otherwise.

An external peer stands for one node: a topology with two nodes of that role cannot use it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from ..wait import WaitTimeout, accepts, wait_for
from .base import Endpoint, Peer, PeerInfo, PeerStartError, VendorSpec
from .registry import REGISTRY, declared, entry

EXTERNAL = "external:"  # the prefix of a `--peer` choice that names a peer someone else runs
_PARAMS = ("caps", "vendor", "version", "prefix")
CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True)
class ExternalTarget:
    host: str
    port: int
    vendor: str
    version: str
    capabilities: frozenset[str]
    prefix: str

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"


def known_capabilities() -> frozenset[str]:
    caps: set[str] = set()
    for spec in (e.spec for e in REGISTRY):
        caps |= spec.capabilities
    return frozenset(caps)


def parse_external(choice: str, role: str) -> ExternalTarget:
    """Parse `external:amqp://HOST:PORT?...`; ValueError with one line naming what is wrong."""
    where = f"--peer {role}={choice}"
    if not choice.startswith(EXTERNAL):
        raise ValueError(f"{where}: expected {EXTERNAL}amqp://HOST:PORT")
    url = choice[len(EXTERNAL):]
    parts = urlsplit(url)
    if parts.scheme == "amqps":
        raise ValueError(f"{where}: amqps (TLS) is not supported yet; expected amqp://HOST:PORT")
    if parts.scheme != "amqp" or not parts.hostname:
        raise ValueError(f"{where}: expected {EXTERNAL}amqp://HOST:PORT[?caps=A,B&vendor=NAME]")
    try:
        port = parts.port or 5672
    except ValueError:
        raise ValueError(f"{where}: the port must be a number 1-65535") from None
    if parts.path not in ("", "/") or parts.username or parts.fragment:
        raise ValueError(f"{where}: expected amqp://HOST:PORT with no path, user or fragment")
    params: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in _PARAMS:
            hint = difflib.get_close_matches(key, _PARAMS, 1)
            raise ValueError(f"{where}: unknown parameter {key!r}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else f" (expected {', '.join(_PARAMS)})"))
        if key in params:
            raise ValueError(f"{where}: parameter {key!r} given twice")
        params[key] = value
    name = params.get("vendor") or "external"
    if "caps" in params:
        caps = frozenset(c.strip() for c in params["caps"].split(",") if c.strip())
        known = known_capabilities()
        for cap in sorted(caps - known):
            hint = difflib.get_close_matches(cap, sorted(known), 1)
            raise ValueError(f"{where}: unknown capability {cap!r}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    else:
        registered = entry(name, role)
        spec = registered.spec if registered is not None else None
        caps = spec.capabilities if spec is not None else frozenset()
    declaration = declared(name)  # its vendor's default prefix (RabbitMQ's /queue/), unless one is given
    prefix = params.get("prefix", declaration.external_prefix if declaration else "")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return ExternalTarget(host, port, name, params.get("version") or "unknown", caps, prefix)


def external_spec(choice: str, role: str) -> VendorSpec:
    target = parse_external(choice, role)
    return VendorSpec(target.vendor, role, target.capabilities)


class ExternalPeer(Peer):
    def __init__(self, name: str, role: str, target: ExternalTarget):
        self.name, self.role, self.target = name, role, target
        self.info = PeerInfo(target.vendor, target.version, "external")
        self.capabilities = target.capabilities
        self.endpoints = {"clients": Endpoint("clients", target.host, target.port, "normal")}

    def start(self, timeout: float = CONNECT_TIMEOUT) -> None:
        try:
            wait_for(lambda: accepts(self.target.host, self.target.port), min(timeout, CONNECT_TIMEOUT),
                     f"external {self.role} {self.target.url} to accept connections")
        except WaitTimeout:
            raise PeerStartError(f"external {self.role} {self.target.url} is unreachable: nothing accepts "
                                 f"connections there (checked for {min(timeout, CONNECT_TIMEOUT):g}s)") from None

    def stop(self, timeout: float = 10.0) -> None:
        """Someone else runs it: nothing to stop."""

    def kill(self) -> None:
        raise NotImplementedError(f"the harness does not control external peer {self.target.url}")

    def restart(self, timeout: float = 30.0, kill: bool = False) -> None:
        raise NotImplementedError(f"the harness does not control external peer {self.target.url}")

    def pause(self) -> None:
        raise NotImplementedError(f"the harness does not control external peer {self.target.url}")

    resume = pause

    def is_running(self) -> bool:
        return accepts(self.target.host, self.target.port)

    def logs(self) -> str:
        return f"(external peer {self.target.url}: its logs are wherever its owner keeps them)"

    def wire_address(self, name: str) -> str:
        if not self.target.prefix or name.startswith(("/", self.target.prefix)) or "://" in name:
            return name
        return self.target.prefix + name

    def queue_stats(self, name: str) -> dict:
        raise NotImplementedError(f"no management access to external peer {self.target.url}")
