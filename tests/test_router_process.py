"""The reference router as a real process: config errors, listening, routing a message, stopping on a signal.

Started the two ways a user would (`python -m reference.router -c FILE` and `interop router -c FILE`), with
stderr going to a file the tests read as the process runs. Every wait is a deadline-bound condition.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.clients import Clients
from harness.wait import wait_for

START_TIMEOUT = 20.0  # interpreter + proton import on a loaded CI machine
STOP_TIMEOUT = 10.0  # the server's own grace period is 2 s

INTEROP = Path(sys.executable).with_name("interop")
LAUNCHERS = {
    "python-m": [sys.executable, "-m", "reference.router"],
    "interop": [str(INTEROP), "router"] if INTEROP.exists() else [sys.executable, "-m", "harness.cli", "router"],
}
LISTENING = re.compile(r"Listening on 127\.0\.0\.1:(\d+) \(listener 'clients', role normal\)")
# The server prefixes config errors with its name; DESIGN.md wants them to start with FILE:LINE (see the
# strict-xfail test below). Until that is settled the other tests accept either form.
class RouterProcess:
    def __init__(self, workdir: Path, config: str, *extra: str, launcher: str = "python-m",
                 name: str = "router.conf"):
        self.config = workdir / name
        self.config.write_text(textwrap.dedent(config).lstrip("\n"))
        self.stderr_path = workdir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "w")
        # The config path is passed as typed relative to the working directory, as a user would.
        self.proc = subprocess.Popen([*LAUNCHERS[launcher], "-c", name, *extra], cwd=workdir,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr, stdin=subprocess.DEVNULL)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def lines(self) -> list[str]:
        return self.stderr().splitlines()

    def wait_exit(self, timeout: float = START_TIMEOUT) -> int:
        wait_for(lambda: self.proc.poll() is not None, timeout, f"router pid {self.proc.pid} to exit",
                 describe=lambda: f"still running; stderr: {self.stderr()[-300:]}")
        return self.proc.returncode

    def wait_ready(self) -> int:
        """Wait for the ready line; return the port the 'clients' listener got."""
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"router exited {self.proc.returncode} before ready: {self.stderr()}")
            return any(line.endswith("; ready") for line in self.lines())
        wait_for(ready, START_TIMEOUT, "the router's ready line", describe=self.stderr)
        text = self.stderr()
        match = LISTENING.search(text)
        assert match, f"no listening line for listener 'clients' in: {text}"
        assert match.start() < text.index("; ready"), "ready was logged before the listener's line"
        return int(match.group(1))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)
        self._stderr.close()


@pytest.fixture
def start_router(tmp_path):
    started: list[RouterProcess] = []

    def start(config: str, *extra: str, **kwargs) -> RouterProcess:
        router = RouterProcess(tmp_path, config, *extra, **kwargs)
        started.append(router)
        return router

    yield start
    for router in started:
        router.close()


def one_error_line(router: RouterProcess) -> str:
    assert router.wait_exit() == 1
    lines = router.lines()
    assert len(lines) == 1, f"expected exactly one line on stderr, got {len(lines)}: {lines}"
    assert "Traceback" not in lines[0]
    return lines[0]


GOOD = """
    router {
        mode: standalone
        id: R.test
    }
    listener {
        name: clients
        host: 127.0.0.1
        port: 0
    }
    address {
        prefix: multicast
        distribution: multicast
    }
"""


# ---- config errors --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_typo_in_an_attribute_is_one_line_naming_file_and_line(start_router, launcher):
    router = start_router("""
        router {
            mode: standalone
        }
        listener {
            host: 127.0.0.1
            prot: 5672
        }
    """, launcher=launcher)
    line = one_error_line(router)
    assert line.startswith("router.conf:6: "), line
    assert "listener: unknown attribute 'prot'" in line
    assert "did you mean 'port'?" in line


def test_a_typo_on_a_later_line_reports_that_line(start_router):
    router = start_router("""
        # a comment line counts too
        listener {
            name: clients
            host: 127.0.0.1
            port: 0
        }

        address {
            prefix: multicast
            distrbution: multicast
        }
    """)
    line = one_error_line(router)
    assert line.startswith("router.conf:10: address: unknown attribute 'distrbution'"), line


def test_unimplemented_section_is_refused_as_not_supported_yet(start_router):
    router = start_router("""
        listener {
            host: 127.0.0.1
            port: 0
        }
        listener {
            port: 0
            multiTenant: yes
        }
    """)
    line = one_error_line(router)
    assert line.startswith("router.conf:5: "), line
    assert "multiTenant" in line and "not supported yet" in line


def test_missing_config_file_is_one_line(tmp_path):
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([*LAUNCHERS["interop"], "-c", "nope.conf"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda: proc.poll() is not None, START_TIMEOUT, "router with a missing config to exit")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
    lines = stderr_path.read_text().splitlines()
    assert proc.returncode == 1
    assert len(lines) == 1 and lines[0].startswith("nope.conf:0: cannot read"), lines


def test_port_in_use_exits_1_naming_the_listener(start_router):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        router = start_router(f"""
            router {{
                mode: standalone
            }}
            listener {{
                name: clients
                host: 127.0.0.1
                port: {port}
            }}
        """)
        line = one_error_line(router)
    assert line.startswith("router.conf:4: listener 'clients': "), line
    assert f"127.0.0.1:{port}" in line
    assert "already in use" in line.lower()


def test_config_error_line_starts_with_file_and_line(start_router):
    router = start_router("listener {\n    prot: 1\n}\n")
    assert router.wait_exit() == 1
    assert router.stderr().startswith("router.conf:2: "), router.stderr()


# ---- a running router -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_router_listens_routes_and_stops_on_sigterm(start_router, launcher):
    router = start_router(GOOD, launcher=launcher)
    port = router.wait_ready()
    assert port > 0
    assert "Router R.test started in standalone mode; ready" in router.stderr()

    with Clients() as clients:
        url = f"127.0.0.1:{port}"
        consumer = clients.connect(url)
        producer = clients.connect(url)
        receiver = consumer.receiver("balanced.process")
        sender = producer.sender("balanced.process")
        sender.send(1, body="over the wire")
        got = receiver.wait_received(1)
        assert [m.body for m in got] == ["over the wire"]
        assert sender.wait_outcomes(1)[0].outcome == "accepted"

        router.proc.send_signal(signal.SIGTERM)
        assert router.wait_exit(STOP_TIMEOUT) == 0
        wait_for(lambda: consumer.ended and producer.ended, STOP_TIMEOUT, "clients to see their connections close",
                 describe=lambda: f"consumer ended={consumer.ended}, producer ended={producer.ended}")
        assert receiver.detached.is_set() and sender.detached.is_set()
    log = router.stderr()
    assert "Shutting down" in log
    assert "Router R.test stopped" in log
    assert "Traceback" not in log


def test_sigint_also_stops_cleanly_and_id_can_be_overridden(start_router):
    router = start_router(GOOD, "--id", "R.override")
    router.wait_ready()
    assert "Router R.override started in standalone mode; ready" in router.stderr()
    router.proc.send_signal(signal.SIGINT)
    assert router.wait_exit(STOP_TIMEOUT) == 0
    assert "Router R.override stopped" in router.stderr()
    assert "Traceback" not in router.stderr()


def test_a_multicast_message_reaches_every_consumer_of_a_real_process(start_router):
    router = start_router(GOOD)
    port = router.wait_ready()
    with Clients() as clients:
        conn = clients.connect(f"127.0.0.1:{port}")
        receivers = [conn.receiver("multicast.process") for _ in range(3)]
        sender = clients.connect(f"127.0.0.1:{port}").sender("multicast.process")
        sender.send(2)
        for receiver in receivers:
            assert sorted(m.seq for m in receiver.wait_received(2)) == [0, 1]
        assert sender.wait_outcomes(2) and sender.outcome_counts() == {"accepted": 2}
    router.proc.send_signal(signal.SIGTERM)
    assert router.wait_exit(STOP_TIMEOUT) == 0
