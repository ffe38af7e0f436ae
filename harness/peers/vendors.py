"""`--peer` choices: parsed once, checked against the registry (harness/peers/registry.py).

(The capability vocabulary is harness/peers/capabilities.py; each vendor's package declares its own set.)

A vendor name may play several roles ("reference" is both a router and a broker), so the table is keyed by
(vendor, role). A `--peer` choice is one of:

* `VENDOR`: the vendor, from the first provider that can run it here (native, then container);
* `VENDOR@PROVIDER`: one provider only (`rabbitmq@native`, `rabbitmq@container`, `artemis@container`, ...);
* `VENDOR@VERSION`: one version of a product that has several here (`artemis@2.39.0`, `qdrouterd@1.18.0`,
  `activemq-classic@6.1.8`); a part after `@` that starts with a digit is a version, any other a provider, and
  both may be given (`artemis@2.39.0@native`). Without a version, the pinned default (harness/peers/versions.py);
* `external:amqp://HOST:PORT[?caps=A,B&vendor=NAME&version=V&prefix=P]`: a peer someone else runs
  (harness/peers/external.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import ROLES, VendorSpec
from .external import EXTERNAL, external_spec
from .registry import REGISTRY, entries_of, entry

DEFAULT_PEERS = {"router": "reference", "broker": "reference"}


def vendor_roles() -> list[tuple[str, str]]:
    """Every (vendor, role) pair the registry knows, in its order."""
    return [(e.spec.vendor, e.spec.role) for e in REGISTRY]


def vendor_names(role: str | None = None) -> list[str]:
    names: list[str] = []
    for name, r in vendor_roles():
        if (role is None or r == role) and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True)
class Choice:
    """One `--peer` choice taken apart: `artemis@2.39.0@native` -> vendor artemis, version 2.39.0, provider
    native. An external choice is kept whole as its vendor (its URL may hold `@`; its version is a parameter)."""

    vendor: str
    version: str | None = None
    provider: str | None = None

    @property
    def product(self) -> str:
        """`artemis@2.39.0`: what is installed and probed (the provider does not change what must be had)."""
        return self.vendor + (f"@{self.version}" if self.version else "")

    def __str__(self) -> str:
        return self.product + (f"@{self.provider}" if self.provider else "")

    def target(self) -> str:
        """`artemis 2.39.0`, `rabbitmq@native`: how a report's target names it (versions apart, readable)."""
        provider = f"@{self.provider}" if self.provider else ""
        return self.vendor + provider + (f" {self.version}" if self.version else "")


def parse_choice(text: str) -> Choice:
    """`VENDOR[@VERSION][@PROVIDER]` (either order after the vendor) -> Choice; ValueError (one line) for an empty
    part or two versions or two providers."""
    if text.startswith(EXTERNAL):
        return Choice(text)
    name, *parts = text.split("@")
    version = provider = None
    for part in parts:
        if not part:
            raise ValueError(f"{text}: empty part after '@' (expected VENDOR[@VERSION][@PROVIDER])")
        if part[0].isdigit():
            if version is not None:
                raise ValueError(f"{text}: two versions ({version}, {part})")
            version = part
        else:
            if provider is not None:
                raise ValueError(f"{text}: two providers ({provider}, {part})")
            provider = part
    return Choice(name, version, provider)


def vendor(name: str, role: str) -> VendorSpec:
    """The VendorSpec a `--peer ROLE=NAME` choice stands for; ValueError (one line) if there is none."""
    if name.startswith(EXTERNAL):
        return external_spec(name, role)
    try:
        choice = parse_choice(name)
    except ValueError as exc:
        raise ValueError(f"--peer {role}={exc}") from None
    base, provider = choice.vendor, choice.provider
    found = entry(base, role)
    if found is None:
        roles = [e.spec.role for e in entries_of(base)]
        if roles:
            raise ValueError(f"--peer {role}={name}: {base} plays the {' and '.join(roles)} role, not {role}")
        known = ", ".join(vendor_names(role)) or "none"
        raise ValueError(f"--peer {role}={name}: unknown vendor (expected one of: {known}; "
                         f"or {EXTERNAL}amqp://HOST:PORT)")
    if provider is not None and provider not in found.provider_names():
        raise ValueError(f"--peer {role}={name}: {base} has no provider {provider!r} "
                         f"(expected one of: {', '.join(found.provider_names())})")
    if choice.version is not None and found.versions is None:
        raise ValueError(f"--peer {role}={name}: {base} runs in one version only here; drop @{choice.version}")
    return found.spec


# Commas and ampersands inside an external URL (`external:amqp://h:p?caps=a,b&vendor=x`) belong to it: a new
# choice starts only at a comma followed by `ROLE=`.
_NEXT_CHOICE = re.compile(r",(?=\s*(?:" + "|".join(ROLES) + r")\s*=)")


def parse_peer_choices(values: list[str]) -> dict[str, str]:
    """Role -> vendor choice from `--peer` values (`ROLE=VENDOR`, several per value separated by commas, the
    later winning), over DEFAULT_PEERS. The one parser of `--peer`: `interop` and the pytest plugin both use it.
    ValueError, one line naming the choice, for anything it cannot take."""
    choices = dict(DEFAULT_PEERS)
    for value in values:
        for item in filter(None, (part.strip() for part in _NEXT_CHOICE.split(value))):
            role, sep, name = (part.strip() for part in item.partition("="))
            if not sep or not role or not name:
                raise ValueError(f"--peer {item}: expected ROLE=VENDOR, e.g. router=reference")
            if role not in ROLES:
                raise ValueError(f"--peer {item}: unknown role {role!r} (expected one of: {', '.join(ROLES)})")
            vendor(name, role)
            choices[role] = name
    return choices
