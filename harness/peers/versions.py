"""Versions of one product side by side: is the chosen one here, and getting it once when it is not.

A choice may name a version (`artemis@2.39.0`, harness/peers/vendors.py `Choice`). A product that runs here in
several versions declares a `Versions` (its registry line's `versions=`); a product without one runs in one version
only and a version given for it is a usage error. Without a version a choice means the pinned default, exactly
as before versions existed.

Getting a version (a Maven fetch, a qdrouterd build) takes 20-60 s, so it is done once per run before any peer
starts, never inside a probe: `interop run` gets every version its cells name before the first cell starts and
hands what it found to the cells' sessions (ENV), and the pytest plugin does the same at session start for a
plain pytest session. A version only a case names (`topology(name, vendors={"B2": "artemis@2.39.0"})`) is got
when its topology first starts. One at a time across processes: Maven's local repository is not locked, and two
builds of one qdrouterd write the same folders.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .base import PeerUnavailable
from .vendors import EXTERNAL, Choice, parse_choice

ENV = "INTEROP_VERSIONS"  # JSON {product: null or why not}: what `interop run` found before its cells started

Say = Callable[[str], None]


class NoSuchVersion(ValueError):
    """The version does not exist (not on Maven Central, say); str() is one line naming it and where it was looked
    for. Distinct from PeerUnavailable, which is a version that exists but cannot be had or run here."""


@dataclass(frozen=True)
class Versions:
    """How one product's versions are found and got. `missing` and `cannot_get` only look (files, PATH): fast."""

    product: str  # "Artemis", for messages
    default: str | None  # the pinned version of a choice without one; None: whichever one is installed
    missing: Callable[[str], str | None]  # why version V is not ready to run here; None when it is
    cannot_get: Callable[[str], str | None]  # why V could not be fetched or built here; None when it could
    get: Callable[[str, Say], None]  # fetch or build V into its own folder; NoSuchVersion or PeerUnavailable
    # The release before the pinned one that runs here: what an upgrade moves from. The version cells
    # (tests/products.yaml, matrix.yaml) and the mixed-version pairings of the suites (previous_choice) use it.
    previous: str | None = None
    # The version a choice without one runs where none is pinned (`default` None): what the installed binary says.
    installed: Callable[[], str | None] | None = None


def chosen_version(name: str) -> str | None:
    """The release a choice runs: the version it names, else its product's pinned default, else what the installed
    binary reports; None for a product in one version (the reference, RabbitMQ) or a peer someone else runs, where
    the choice names none."""
    choice = parse_choice(name)
    if choice.version is not None:
        return choice.version
    versions = None if choice.vendor.startswith(EXTERNAL) else versions_of(choice.vendor)
    if versions is None:
        return None
    if versions.default is not None:
        return versions.default
    return versions.installed() if versions.installed else None


def previous_choice(name: str) -> tuple[str | None, str]:
    """(`artemis@2.39.0`, "") for a session's choice `artemis` (its provider kept): the same vendor at its previous
    release, to run on one node of a mixed-version topology beside the session's. (None, why not) where there is
    none: a product in one version only (the reference, RabbitMQ), a peer someone else runs, or a session that
    already runs the previous release (the pair would be of one version)."""
    choice = parse_choice(name)
    if choice.vendor.startswith(EXTERNAL):
        return None, f"a peer someone else runs ({choice.vendor.split('?')[0]}) has no previous release here"
    versions = versions_of(choice.vendor)
    if versions is None or versions.previous is None:
        return None, f"{choice.vendor} runs here in one version only: it has no previous release to mix with"
    if choice.version == versions.previous:
        return None, (f"this session's {choice.vendor} is {versions.previous}, the previous release itself: a pair "
                      f"with it would run one version")
    return str(Choice(choice.vendor, versions.previous, choice.provider)), ""


def versions_of(vendor: str) -> Versions | None:
    """The product's Versions (registry.py), None for a product with one version only."""
    import importlib

    from .registry import entries_of

    for entry in entries_of(vendor):
        if entry.versions:
            module, _, name = entry.versions.partition(":")
            return getattr(importlib.import_module(module), name)
    return None


# product (`artemis@2.39.0`) -> None when ready, else why it cannot be had; in this process
_known: dict[str, str | None] = {}
_nonexistent: set[str] = set()
_env_read = False


def _take_env() -> None:
    """What `interop run` found (ENV), so that a cell neither fetches again nor tries a failed build again."""
    global _env_read
    if _env_read:
        return
    _env_read = True
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        for product, why in json.loads(os.environ.get(ENV) or "{}").items():
            _known.setdefault(str(product), None if why is None else str(why))


def _installs(choice: Choice) -> bool:
    """Whether the choice names a version this module installs: one for the native provider (a container's image
    or an external peer is not installed here; its provider says itself whether it can run that version)."""
    return (choice.version is not None and not choice.vendor.startswith(EXTERNAL)
            and choice.provider in (None, "native"))


def state(choice: Choice) -> str | None:
    """Why the chosen version cannot run here, None when it can or when no version was chosen. Only looks."""
    if not _installs(choice):
        return None
    _take_env()
    if choice.product in _known:
        return _known[choice.product]
    versions = versions_of(choice.vendor)
    return None if versions is None else versions.missing(choice.version)


def probe(choice: Choice) -> str | None:
    """For the matrix's probes: None when the chosen version is here or could be got here (the run gets it before
    its cells start), else why not. Only looks."""
    why = state(choice)
    if why is None or choice.product in _known:  # here, or not installed by this module, or already asked
        return why
    return versions_of(choice.vendor).cannot_get(choice.version)


def ensure(choice: Choice, say: Say = print) -> str | None:
    """Make the chosen version ready here, getting it if need be: None when it is, else why it cannot be had (a
    peer of it is then `skipped` with that reason). NoSuchVersion when the version does not exist. Asked once per
    product per process; the getting is done under a lock shared by every process using the cache."""
    if not _installs(choice):
        return None
    _take_env()
    product = choice.product
    if product in _nonexistent:
        raise NoSuchVersion(_known[product])
    if product in _known:
        return _known[product]
    versions = versions_of(choice.vendor)
    if versions is None:  # one version only: vendors.vendor() refuses such a choice before it gets here
        return None
    why = versions.missing(choice.version)
    if why is not None and (why := versions.cannot_get(choice.version)) is None:
        with install_lock():
            if versions.missing(choice.version) is not None:  # another process may have got it while we waited
                try:
                    versions.get(choice.version, say)
                except NoSuchVersion as exc:
                    _known[product] = str(exc)
                    _nonexistent.add(product)
                    raise
                except PeerUnavailable as exc:
                    why = str(exc)
            why = why or versions.missing(choice.version)  # got, but it must also check
    _known[product] = why
    return why


def found() -> dict[str, str | None]:
    """product -> None or why not, for every version this process asked about: ENV's value for the cells."""
    return dict(_known)


def cache_dir() -> Path:
    """Where products are installed, one folder per version ($INTEROP_CACHE, else ~/.cache/amqp-interop)."""
    return Path(os.environ.get("INTEROP_CACHE") or Path.home() / ".cache" / "amqp-interop")


@contextlib.contextmanager
def install_lock() -> Iterator[None]:
    """One fetch or build at a time on this machine (every process using the cache)."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
