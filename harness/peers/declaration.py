"""What a vendor's package declares about itself (harness/vendors/<name>/__init__.py: `VENDOR = Vendor(...)`).

The registry (harness/peers/registry.py) finds every package under harness/vendors/ and reads its `VENDOR`; nothing
else lists vendors. A declaration names code as "module:NAME" strings, relative to its package, so that reading it
imports nothing heavy: a provider whose module needs something absent (a Docker client, a JDK) costs nothing until
it is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Role:
    """One role a vendor plays, what it can do in it, and the ways of running it."""

    role: str  # "router" or "broker"
    capabilities: frozenset[str]  # words of harness/peers/capabilities.py
    providers: tuple[str, ...]  # "module:Class" (harness.peers.provider.Provider subclasses), in the order tried
    # "module:NAME" of its harness.peers.versions.Versions, for a product that runs here in several versions; None:
    # one version only, and `VENDOR@VERSION` is refused.
    versions: str | None = None
    product: str | None = None  # its name in `interop nightly --products` (default: the vendor's name)
    label: str | None = None  # how the nightly and the report name it (default: the vendor's title)


@dataclass(frozen=True)
class Vendor:
    """One vendor: its name in `--peer`, its roles, and what the harness needs to know besides."""

    name: str  # "artemis", as `--peer broker=artemis` names it
    title: str  # "ActiveMQ Artemis"
    roles: tuple[Role, ...]
    # Place in every listing (`interop run --list`, the nightly's steps): the reference first, then the products.
    order: int
    aliases: tuple[str, ...] = ()  # other names `interop nightly --products` takes ("classic")
    # The address prefix a peer of this vendor that someone else runs needs by default
    # (`external:amqp://...?vendor=rabbitmq`: RabbitMQ's /queue/NAME).
    external_prefix: str = ""
    # "module:main": the product's command line, which takes `--fetch [--version V]` and gets the product into the
    # cache (once; later only checks) and returns its exit status, saying why on stderr when it cannot
    # (`python -m harness.vendors fetch`, which make's setup runs). None: nothing to get.
    fetch: str | None = None
