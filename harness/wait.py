"""The project's only waiting primitive: poll a condition until it holds or a deadline passes.

Nothing else in the project sleeps to wait for a state. A bare sleep either wastes time (too long) or makes
a test flaky (too short); a deadline-bound condition does neither, and its failure says what was awaited.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Polls start fast because most conditions (a listener opening, a delivery arriving) hold within a few
# milliseconds; they back off so a long wait does not steal CPU from the peers under test.
_BACKOFF = 1.5
_MAX_INTERVAL = 0.05


class WaitTimeout(AssertionError):
    """A condition did not hold before its deadline.

    An AssertionError so that pytest reports it as a failed expectation, not as a crash of the harness.
    """


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    interval: float = 0.01,
    describe: Callable[[], str] | None = None,
) -> T:
    """Call `predicate` until it returns something truthy and return that value.

    Polling starts every `interval` seconds and backs off to at most 50 ms. The predicate is called once
    more at the deadline so a condition that becomes true during the last sleep is not missed. Exceptions
    from the predicate propagate: a broken probe is a bug to see, not a state to wait out.
    On timeout raises WaitTimeout with one line naming `what` and the last thing seen (`describe()` if
    given, else the predicate's last value).
    """
    if timeout < 0:
        raise ValueError(f"timeout must be >= 0, got {timeout}")
    if interval <= 0:
        raise ValueError(f"interval must be > 0, got {interval}")
    delay = min(interval, _MAX_INTERVAL)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(_timeout_message(timeout, what, value, describe))
        time.sleep(min(delay, remaining))
        delay = min(delay * _BACKOFF, _MAX_INTERVAL)


def _timeout_message(timeout: float, what: str, last: object, describe: Callable[[], str] | None) -> str:
    if describe is not None:
        # The timeout is the real news; a description that fails must not hide it.
        try:
            seen = describe()
        except Exception as exc:  # noqa: BLE001
            seen = f"<describe() failed: {type(exc).__name__}: {exc}>"
    else:
        seen = repr(last)
    # One line, so it reads well in a pytest summary and in a result record's message field.
    seen = " ".join(str(seen).split())
    return f"timed out after {timeout:g}s waiting for {what}; last seen: {seen}"


def accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something on host:port completes a TCP handshake within `timeout` seconds: a listener is up.

    It says nothing about whether the program behind it serves (harness.peers.liveness asks that); it is the
    cheap first condition to wait for after starting a peer, and the cheap test that an external one is there.
    """
    try:
        # A URL's IPv6 host comes in brackets ("[::1]"), which the socket layer does not take.
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False
