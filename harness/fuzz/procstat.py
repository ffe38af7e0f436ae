"""What /proc says about a local server process: its resident memory and its sockets left in CLOSE_WAIT.

A socket in CLOSE_WAIT is one whose peer has closed and which the process has not closed yet: a server that
forgets to close after a client drops keeps one per dropped client, until it runs out of descriptors. Linux
only; both readers answer 0 for a process that is gone (its death is judged elsewhere).
"""

from __future__ import annotations

import os
from pathlib import Path

TCP_CLOSE_WAIT = "08"  # the st column of /proc/net/tcp (include/net/tcp_states.h: TCP_CLOSE_WAIT = 8)


def rss_bytes(pids: list[int]) -> int:
    """The summed VmRSS of `pids` (a process that is gone counts 0)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024  # the kernel reports kB
                    break
        except (OSError, ValueError):
            continue
    return total


def socket_inodes(pids: list[int]) -> set[int]:
    """Inodes of the sockets `pids` hold open (fd links read `socket:[INODE]`)."""
    inodes: set[int] = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{fd_dir}/{name}")
            except OSError:
                continue  # closed since listdir
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def tcp_states(net_dir: str = "/proc/net") -> dict[int, tuple[str, str, str]]:
    """inode -> (state, local address, remote address) for every IPv4 and IPv6 TCP socket the kernel lists."""
    out: dict[int, tuple[str, str, str]] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(net_dir, name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) >= 10:
                out[int(cols[9])] = (cols[3], cols[1], cols[2])
    return out


def close_wait_count(pids: list[int]) -> int:
    """How many sockets held by `pids` are in CLOSE_WAIT."""
    mine = socket_inodes(pids)
    if not mine:
        return 0
    # /proc/net of a pid sees that process's network namespace; read it through the first live pid
    net = next((f"/proc/{pid}/net" for pid in pids if os.path.isdir(f"/proc/{pid}/net")), "/proc/net")
    return sum(1 for inode, (state, _, _) in tcp_states(net).items()
               if inode in mine and state == TCP_CLOSE_WAIT)
