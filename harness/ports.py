"""TCP ports for peers that must be told their port before they start, never handed to two peers at once.

Most peers cannot bind port 0 and report back what they got: a dialling node's config must name its target's
port before either starts, Erlang's daemons take a port on their command line, and a restarted peer binds the
same port again. So the harness picks a port, and the peer binds it seconds later. Two things can take the port
in that window, and both made whole CI runs fail ("Address already in use"):

- the kernel, for any process's bind(0) or outgoing connection, if the port is in its ephemeral range
  (`net.ipv4.ip_local_port_range`, 32768-60999 by default). Ports here come from the range just below it,
  which only an explicit bind takes;
- another harness process (make test runs pytest workers, four matrix cells and their peers at once) that picks
  the same number. Each port handed out is reserved across processes: a lock file per port under
  `$TMPDIR/interop-ports-<uid>`, held with flock(2) for as long as the reservation lasts. The kernel drops the
  lock when its process ends, however it ends, so a reservation never outlives its owner and nothing is swept.

A reservation ends on `release_ports`, when its process ends, or after `HOLD_S` seconds, long enough for any peer
to bind the port; `free_port(held=True)` holds it until released, for a port a peer binds again after a restart
(the port is unbound while the peer is down, and must not go to anyone else then).
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HOLD_S = 300.0  # longer than any peer's start timeout, so the peer has bound the port before anyone else may take it
SPAN = 20000  # how many ports below the ephemeral range are used
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_TRIES = 1000


class NoFreePort(Exception):
    """No port of the range could be reserved and bound; str() says which range and host."""


@dataclass
class _Reservation:
    fd: int  # the lock file, flock'ed; closing it ends the reservation
    taken_at: float
    held: bool


_lock = threading.Lock()
_mine: dict[int, _Reservation] = {}


def port_range() -> tuple[int, int]:
    """[low, high): the SPAN ports just below the kernel's ephemeral range (never below 1024)."""
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768  # Linux's default, also where /proc is not readable
    return max(1024, ephemeral_low - SPAN), ephemeral_low


def reservation_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"interop-ports-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def free_port(host: str = "127.0.0.1", held: bool = False) -> int:
    """A port below the ephemeral range that nobody listens on and no other harness process has reserved.

    Reserved for HOLD_S seconds, or until `release_ports` when `held`. Raises NoFreePort if the range is full."""
    low, high = port_range()
    folder = reservation_dir()
    rng = random.SystemRandom()
    with _lock:
        _expire(time.monotonic())
        for _ in range(_TRIES):
            port = rng.randrange(low, high)
            if port in _mine:
                continue
            fd = _try_lock(folder / str(port))
            if fd is None:
                continue  # another process holds it
            if not _bindable(host, port):
                os.close(fd)
                continue
            _mine[port] = _Reservation(fd, time.monotonic(), held)
            return port
    raise NoFreePort(f"no free TCP port in {low}-{high - 1} on {host} after {_TRIES} tries "
                     f"(reservations in {folder})")


def release_ports(*ports: int) -> None:
    """End this process's reservations of `ports` (ports it does not hold are ignored)."""
    with _lock:
        for port in ports:
            reservation = _mine.pop(port, None)
            if reservation is not None:
                os.close(reservation.fd)


def reserved() -> set[int]:
    """The ports this process holds now (for tests and diagnostics)."""
    with _lock:
        _expire(time.monotonic())
        return set(_mine)


def _expire(now: float) -> None:
    for port in [p for p, r in _mine.items() if not r.held and now - r.taken_at > HOLD_S]:
        os.close(_mine.pop(port).fd)


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise
    return fd


def bindable(host: str, port: int) -> bool:
    """Whether a new listener could bind host:port now (see _bindable): for a peer that restarts on its ports."""
    return _bindable(host, port)


def _bindable(host: str, port: int) -> bool:
    """Nothing listens on host:port nor holds it otherwise (a socket in TIME_WAIT counts as holding it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host.strip("[]"), port))
        except OSError:
            return False
    return True
