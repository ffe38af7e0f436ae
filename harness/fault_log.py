"""The faults a case injected, for its result record's `fault` field (harness/results.py, schema 1).

Whatever injects a fault notes it here: a peer's kill -9, pause, or kill -9 and restart (harness/peers/base.py
notes them for every provider), a link proxy's toxic or outage (harness/faults/links.py), the slow disk, a client
connection dropped without a close. The pytest plugin opens the log when a case starts (`begin`) and puts what
was noted into the case's record (`take`):

    {"name": "kill -9", "target": "broker B1", "at_s": 1.42, "faults": [every fault noted, in order]}

`name` and `target` are the first fault's; `at_s` is seconds from the case's start. A case that injected nothing
gets null. Outside a case (fuzzing sessions, benchmarks, the harness stopping a hung peer: `quiet()`) nothing is
noted.
"""

from __future__ import annotations

import contextlib
import threading
import time

_lock = threading.Lock()
_faults: list[dict] | None = None  # None: no case is running
_started = 0.0
_quiet = threading.local()


def begin() -> None:
    """A case starts: an empty log."""
    global _faults, _started
    with _lock:
        _faults, _started = [], time.monotonic()


def note(name: str, target: str, **params) -> None:
    """`name` (kill -9, pause, latency, link outage, ...) was injected into `target` (`broker B1`, `link R1-R2`)."""
    if getattr(_quiet, "depth", 0):
        return
    with _lock:
        if _faults is not None:
            _faults.append({"name": name, "target": target, "at_s": round(time.monotonic() - _started, 3),
                            **params})


def take() -> dict | None:
    """The case's `fault` field (see the module docstring), and the log closed."""
    global _faults
    with _lock:
        faults, _faults = _faults, None
    if not faults:
        return None
    first = faults[0]
    return {"name": first["name"], "target": first["target"], "at_s": first["at_s"], "faults": faults}


@contextlib.contextmanager
def quiet():
    """What runs inside is the harness's own doing (stopping a hung peer, putting a topology back), not a fault."""
    _quiet.depth = getattr(_quiet, "depth", 0) + 1
    try:
        yield
    finally:
        _quiet.depth -= 1
