"""The registry: every vendor the harness knows, the role it plays, what it can do, and who can run it.

It lists no vendor itself: it finds them. Every package under harness/vendors/ declares one vendor in its
`__init__.py` (`VENDOR = Vendor(...)`, harness/peers/declaration.py); adding a vendor is adding a package
(docs/adding-a-vendor.md). `launch`, the matrix, `--peer`, the nightly and `interop run --list` all read the table
built here.

A vendor name may play several roles ("reference" is both a router and a broker), so entries are per (vendor,
role). Providers are named "module:Class" and imported only when asked, so a provider whose module needs
something absent (a Docker client, say) costs nothing until it is chosen, and a plain `--peer ROLE=VENDOR`
tries them in the order listed (native first, then container).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path

from .base import PeerUnavailable, VendorSpec
from .declaration import Vendor
from .provider import Provider

VENDORS_PACKAGE = "harness.vendors"


class VendorPackageError(Exception):
    """A package under harness/vendors/ that does not declare a vendor properly; str() names the package."""


@dataclass(frozen=True)
class Registered:
    """One vendor in one role: its declared capabilities and its providers, in the order they are tried."""

    spec: VendorSpec
    providers: tuple[str, ...]  # "module:Class", each a harness.peers.provider.Provider subclass
    # "module:NAME" of its harness.peers.versions.Versions (how each version is found, fetched or built), for a
    # product that runs here in several versions; None: one version only, and `VENDOR@VERSION` is refused.
    versions: str | None = None

    def provider_names(self) -> tuple[str, ...]:
        return tuple(provider_class(path).name for path in self.providers)

    def provider(self, name: str) -> type[Provider] | None:
        return next((cls for cls in map(provider_class, self.providers) if cls.name == name), None)


def _packages() -> list[str]:
    """The vendor packages, by module name: every package directly under harness/vendors/."""
    root = importlib.import_module(VENDORS_PACKAGE)  # by name: the vendors sit above this module
    return [f"{VENDORS_PACKAGE}.{m.name}" for m in pkgutil.iter_modules(root.__path__) if m.ispkg]


def _declared(package: str) -> Vendor:
    module = importlib.import_module(package)
    vendor = getattr(module, "VENDOR", None)
    if not isinstance(vendor, Vendor):
        raise VendorPackageError(f"{package.replace('.', '/')}/__init__.py: expected VENDOR = Vendor(...) "
                                 "(harness/peers/declaration.py)")
    return vendor


def _load() -> tuple[tuple[Vendor, ...], dict[str, str]]:
    vendors, packages = [], {}
    for package in _packages():
        vendor = _declared(package)
        if vendor.name in packages:
            raise VendorPackageError(f"{package}: vendor {vendor.name!r} is declared by {packages[vendor.name]} too")
        vendors.append(vendor)
        packages[vendor.name] = package
    vendors.sort(key=lambda v: (v.order, v.name))
    return tuple(vendors), packages


VENDORS, _PACKAGE_OF = _load()


def _qualified(package: str, name: str | None) -> str | None:
    return f"{package}.{name}" if name else None


REGISTRY: tuple[Registered, ...] = tuple(
    Registered(VendorSpec(v.name, r.role, r.capabilities),
               tuple(f"{_PACKAGE_OF[v.name]}.{p}" for p in r.providers),
               _qualified(_PACKAGE_OF[v.name], r.versions))
    for v in VENDORS for r in v.roles)


def declared(vendor: str) -> Vendor | None:
    """A vendor's own declaration (title, aliases, external prefix, fetch)."""
    return next((v for v in VENDORS if v.name == vendor), None)


def package_dir(vendor: str) -> Path | None:
    """The folder of a vendor's package (its expected.yaml, its notes), None for a vendor the registry lacks."""
    package = _PACKAGE_OF.get(vendor)
    return Path(importlib.import_module(package).__file__).parent if package else None


def expected_path(vendor: str) -> Path | None:
    """A vendor's known differences (its package's expected.yaml: cases, fuzz findings), None for a vendor the
    registry lacks (an external peer's)."""
    folder = package_dir(vendor)
    return folder / "expected.yaml" if folder else None


def qualified(vendor: str, name: str) -> str:
    """A "module:NAME" of a vendor's declaration made absolute ("native:main": harness.vendors.artemis.native:main)."""
    return f"{_PACKAGE_OF[vendor]}.{name}"


def entry(vendor: str, role: str) -> Registered | None:
    return next((e for e in REGISTRY if e.spec.vendor == vendor and e.spec.role == role), None)


def entries_of(vendor: str) -> list[Registered]:
    return [e for e in REGISTRY if e.spec.vendor == vendor]


_classes: dict[str, type[Provider]] = {}


def provider_class(path: str) -> type[Provider]:
    """The Provider class a registry line names. A module that cannot be imported yields a provider whose probe
    says why, so `--list` and the matrix report it instead of failing."""
    if path not in _classes:
        module_name, _, class_name = path.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            cls = _missing_provider(class_name, f"provider {path} cannot be loaded: {exc}")
        _classes[path] = cls
    return _classes[path]


def _missing_provider(class_name: str, why: str) -> type[Provider]:
    class Missing(Provider):
        vendor = "?"
        # The registry's naming: Native<Vendor> classes are `native` providers, <Vendor>Container ones `container`.
        name = ("native" if class_name.startswith("Native") else "container" if class_name.endswith("Container")
                else class_name.lower())
        role = "?"

        @classmethod
        def probe(cls, version: str | None = None) -> str | None:
            return why

        @classmethod
        def create(cls, setup):
            raise PeerUnavailable(why)

    return Missing
