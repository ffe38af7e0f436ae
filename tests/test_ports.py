"""harness/ports.py: ports below the ephemeral range, never handed to two harness processes at once."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ports

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def own_folder(tmp_path, monkeypatch):
    """Reservations in a folder of the test's own (tempfile reads TMPDIR once: reset its cache)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    return tmp_path


def _child(code: str, tmp: Path) -> subprocess.Popen:
    """A python process with harness.ports imported, its reservations in `tmp`; it holds them until stdin closes."""
    script = f"import sys, json\nfrom harness import ports\n{code}\nsys.stdout.flush()\nsys.stdin.read()\n"
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp)},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _free_block(size: int) -> tuple[int, int]:
    """`size` consecutive ports of the real range where nothing listens now."""
    low, high = ports.port_range()
    for start in range(low, high - size, size):
        if all(ports._bindable("127.0.0.1", p) for p in range(start, start + size)):
            return start, start + size
    pytest.skip(f"no {size} free consecutive ports in {low}-{high}")


def test_a_port_is_below_the_ephemeral_range_bindable_and_reserved(own_folder):
    low, high = ports.port_range()
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert high == ephemeral_low and high - low == min(ports.SPAN, ephemeral_low - 1024)
    port = ports.free_port()
    try:
        assert low <= port < high and port in ports.reserved()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
    finally:
        ports.release_ports(port)
    assert port not in ports.reserved()


def test_a_port_something_listens_on_is_skipped(own_folder, monkeypatch):
    start, end = _free_block(2)
    monkeypatch.setattr(ports, "port_range", lambda: (start, end))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", start))
        busy.listen()
        got = [ports.free_port()]
        try:
            assert got == [start + 1]
            with pytest.raises(ports.NoFreePort, match=f"{start}-{start + 1} on 127.0.0.1"):
                got.append(ports.free_port())  # the only other one is this process's already
        finally:
            ports.release_ports(*got)


def test_a_port_another_process_reserved_is_not_handed_out_until_that_process_ends(own_folder, monkeypatch):
    start, end = _free_block(1)
    monkeypatch.setattr(ports, "port_range", lambda: (start, end))
    child = _child(f"ports.port_range = lambda: ({start}, {end})\nprint(ports.free_port())", own_folder)
    try:
        assert int(child.stdout.readline()) == start
        with pytest.raises(ports.NoFreePort):
            ports.free_port()
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    assert ports.free_port() == start  # its owner ended: the kernel dropped the lock
    ports.release_ports(start)


def test_processes_drawing_at_once_never_get_one_port_twice(own_folder):
    start, end = _free_block(1000)
    draw = f"ports.port_range = lambda: ({start}, {end})\nprint(json.dumps([ports.free_port() for _ in range(200)]))"
    children = [_child(draw, own_folder) for _ in range(4)]
    try:
        drawn = [json.loads(child.stdout.readline()) for child in children]
    finally:
        for child in children:
            child.stdin.close()
            child.wait(timeout=30)
    everyone = [port for ports_of_one in drawn for port in ports_of_one]
    assert len(everyone) == 800 and len(set(everyone)) == 800, "a port was handed to two processes"


def test_a_reservation_ends_after_its_hold_time_unless_held(own_folder, monkeypatch):
    brief, kept = ports.free_port(), ports.free_port(held=True)
    try:
        monkeypatch.setattr(ports, "HOLD_S", 0.0)
        mine = ports.reserved()
        assert brief not in mine and kept in mine
        fd = ports._try_lock(ports.reservation_dir() / str(brief))  # nobody holds its lock any more
        assert fd is not None
        os.close(fd)
    finally:
        ports.release_ports(brief, kept)
