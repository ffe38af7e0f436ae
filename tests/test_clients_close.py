"""Closing the harness's proton clients gives back every file descriptor they took.

Proton's EventInjector never closes its pipe, so each `Clients` left two descriptors open; a stateful fuzz session
makes one or two per program and, some 250 programs in, its descriptors passed select()'s limit of 1024.
"""

from __future__ import annotations

import os

from harness.clients import Clients


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_closing_clients_releases_their_descriptors():
    Clients().close()  # whatever the first one loads for good (modules, the selector's own) is taken here
    before = open_descriptors()
    for _ in range(20):
        Clients().close()
    assert open_descriptors() <= before + 1, "each closed Clients must give its injector's pipe back"
