"""A class-data archive (AppCDS) per JVM broker install: what its JVMs load at start, mapped from a file instead of
read from the jars and verified again.

A test run starts Artemis about a hundred times and ActiveMQ Classic about seventy (kill -9 and restart cases,
topologies of two and three brokers), and most of a JVM broker's start is class loading: on this 2-core machine
an Artemis start took 2.2 CPU-s to "server active" without an archive and 1.7 with one (median of 3 each).

The archive is made once, when the broker is fetched (`make products`): one broker started with
-XX:ArchiveClassesAtExit and stopped cleanly writes it (the JVM writes it as it exits). Peers then start with
-XX:SharedArchiveFile when the file is there. The JVM checks the archive against its own version and class path
and runs without it (as before, only slower) when they differ, so a stale archive costs speed, never correctness.
Its name carries a digest of what it was made for (the install, the java binary and the JVM options), so a new
JDK or new options get a new archive at the next fetch.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

# the broker that makes an archive (make_by_starting): one plain node
SINGLE_BROKER = Path(__file__).resolve().parents[2] / "topologies" / "single-broker.yaml"


class ClassArchive:
    """The archive file for one broker install (`key`: its folder and the JVM options), and java binary."""

    def __init__(self, folder: Path, vendor: str, java: str | None, key: Sequence[str]):
        digest = hashlib.sha256()
        resolved = shutil.which(java) if java else None
        for part in (os.path.realpath(resolved) if resolved else "java?", *key):
            digest.update(part.encode() + b"\0")
        if resolved:  # a JDK upgraded in place keeps its path: its binary's change time tells
            digest.update(str(os.stat(os.path.realpath(resolved)).st_mtime_ns).encode())
        self.path = folder / f"{vendor}-classes-{digest.hexdigest()[:12]}.jsa"

    def options(self) -> list[str]:
        """The JVM options that use the archive, when it has been made (none otherwise)."""
        return [f"-XX:SharedArchiveFile={self.path}"] if self.path.is_file() else []

    def make(self, run_once: Callable[[list[str]], None], say: Callable[[str], None] = print) -> None:
        """Make the archive unless it exists: `run_once(extra_jvm_options)` starts one broker with those options
        and stops it cleanly. Written under a temporary name and renamed, so a peer never maps half an archive;
        a broker that fails to start or leaves no archive only means peers start without one."""
        if self.path.is_file():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.unlink(missing_ok=True)
        try:
            run_once([f"-XX:ArchiveClassesAtExit={partial}"])
        except Exception as exc:  # noqa: BLE001 -- the broker itself is checked elsewhere; only speed is at stake
            partial.unlink(missing_ok=True)
            say(f"class archive: not made ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
                "brokers start without it")
            return
        if partial.is_file() and partial.stat().st_size > 0:
            partial.replace(self.path)
            say(f"class archive: {self.path} ({self.path.stat().st_size // 1_000_000} MB)")
        else:
            partial.unlink(missing_ok=True)
            say("class archive: the broker exited without writing one; brokers start without it")


def make_by_starting(archive: ClassArchive, choice: str, say: Callable[[str], None] = print) -> None:
    """Make `archive` by starting one broker of the `--peer` choice (e.g. "artemis@native") on a single-broker
    topology with the option that writes it, and stopping it cleanly."""
    def run_once(extra: list[str]) -> None:
        from ..topology import load_topology
        from .launch import make_peer

        peer = make_peer(load_topology(SINGLE_BROKER), "B1", choice)
        peer.extra_jvm_options = extra
        try:
            peer.start()
        finally:
            peer.stop()
            peer.cleanup()

    archive.make(run_once, say)
