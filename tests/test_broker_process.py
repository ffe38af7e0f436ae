"""The reference broker as a real process: `python -m reference.broker -c FILE --management-port 0`.

Config errors, a busy port, the ready lines, durable messages across SIGTERM and SIGKILL, and the management
endpoint. stderr goes to a file the tests read while the process runs; every wait is a deadline-bound
condition (harness.wait.wait_for). Message loss under kill -9 is the broker suite's business
(suites/broker/test_durability.py); here the process-level facts are checked: exit codes, log lines, where
the journal lives, and what the journal line says it recovered.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.clients import Clients
from harness.wait import wait_for

START_TIMEOUT = 20.0  # interpreter + proton import on a loaded CI machine
STOP_TIMEOUT = 10.0  # the server's own grace period is 2 s
IO_TIMEOUT = 30.0

LISTENING = re.compile(r"Listening on 127\.0\.0\.1:(\d+) \(acceptor 'clients', protocols AMQP\)")
MANAGEMENT = re.compile(r"Management on 127\.0\.0\.1:(\d+)")
JOURNAL = re.compile(r"Journal (\S+): (\d+) message\(s\) recovered(?:, (\d+) byte\(s\) of torn tail discarded)?$")


def broker_xml(*, port: int = 0, persistence: bool = True, journal: str = "data/journal", core: str = "",
               acceptors: str = "") -> str:
    """A small broker.xml: acceptor 'clients' on line 8, more `acceptors` from line 9, then `core` (from line 10
    on when there are no more acceptors)."""
    return f"""\
<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>B-test</name>
    <persistence-enabled>{str(persistence).lower()}</persistence-enabled>
    <journal-directory>{journal}</journal-directory>
    <acceptors>
      <acceptor name="clients">tcp://127.0.0.1:{port}?protocols=AMQP</acceptor>
{acceptors}    </acceptors>
{core}    <security-enabled>false</security-enabled>
    <address-settings>
      <address-setting match="#">
        <dead-letter-address>DLQ</dead-letter-address>
        <default-address-routing-type>ANYCAST</default-address-routing-type>
        <default-queue-routing-type>ANYCAST</default-queue-routing-type>
      </address-setting>
    </address-settings>
    <addresses>
      <address name="DLQ"><anycast><queue name="DLQ"/></anycast></address>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""


class BrokerProcess:
    """One run of the broker. `config` is passed as given (relative to `cwd`, or absolute)."""

    def __init__(self, config: Path | str, cwd: Path, *, management: bool = True, run: int = 1):
        self.stderr_path = cwd / f"broker-{run}.stderr"
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in close()
        args = [sys.executable, "-m", "reference.broker", "-c", str(config)]
        if management:
            args += ["--management-port", "0"]
        self.proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr)
        self.port: int | None = None
        self.management: str | None = None

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def lines(self) -> list[str]:
        return self.stderr().splitlines()

    def wait_exit(self, timeout: float = START_TIMEOUT) -> int:
        wait_for(lambda: self.proc.poll() is not None, timeout, f"broker pid {self.proc.pid} to exit",
                 describe=lambda: f"still running; stderr: {self.stderr()[-400:]}")
        return self.proc.returncode

    def wait_ready(self) -> BrokerProcess:
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"broker exited {self.proc.returncode} before ready: {self.stderr()}")
            return any(line.endswith("Broker B-test started; ready") for line in self.lines())
        wait_for(ready, START_TIMEOUT, "the broker's ready line", describe=self.stderr)
        text = self.stderr()
        listening, management = LISTENING.search(text), MANAGEMENT.search(text)
        assert listening, f"no listening line for acceptor 'clients' in: {text}"
        ready_at = text.index("started; ready")
        assert listening.start() < ready_at, "ready was logged before the acceptor's line"
        self.port = int(listening.group(1))
        if management:
            assert management.start() < ready_at, "ready was logged before the management line"
            self.management = f"http://127.0.0.1:{management.group(1)}"
        return self

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def journal_line(self) -> re.Match:
        found = [m for m in map(JOURNAL.search, self.lines()) if m]
        assert len(found) == 1, f"expected one journal line, got: {self.stderr()}"
        return found[0]

    def get(self, path: str, method: str = "GET") -> tuple[int, object]:
        assert self.management, "started without --management-port"
        try:
            request = urllib.request.Request(self.management + path, method=method)
            with urllib.request.urlopen(request, timeout=5) as reply:
                assert reply.headers["Content-Type"] == "application/json"
                return reply.status, json.load(reply)
        except urllib.error.HTTPError as exc:
            assert exc.headers["Content-Type"] == "application/json"
            return exc.code, json.load(exc)

    def queue(self, name: str) -> dict:
        status, body = self.get(f"/queues/{name}")
        assert status == 200, body
        return body

    def wait_queue(self, name: str, **expected) -> dict:
        def matches():
            row = self.queue(name)
            return row if all(row.get(k) == v for k, v in expected.items()) else None
        return wait_for(matches, IO_TIMEOUT, f"queue {name} to show {expected}", describe=lambda: self.queue(name))

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(STOP_TIMEOUT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)
        self._stderr.close()


@pytest.fixture
def start_broker(tmp_path):
    started: list[BrokerProcess] = []

    def start(config: Path | str, cwd: Path | None = None, **kwargs) -> BrokerProcess:
        broker = BrokerProcess(config, cwd or tmp_path, run=len(started) + 1, **kwargs)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.close()


@pytest.fixture
def clients():
    with Clients(container_id="broker-process-tests") as c:
        yield c


def one_error_line(broker: BrokerProcess) -> str:
    assert broker.wait_exit() == 1
    lines = broker.lines()
    assert len(lines) == 1, f"expected exactly one line on stderr, got {len(lines)}: {lines}"
    assert "Traceback" not in lines[0]
    return lines[0]


# ---- config errors: one line, exit 1, nothing started ---------------------------------------------------------


def test_a_refused_element_is_one_line_with_its_line_number(tmp_path, start_broker):
    (tmp_path / "broker.xml").write_text(broker_xml(core="""\
    <diverts>
      <divert name="spy"><address>orders</address><forwarding-address>spy</forwarding-address></divert>
    </diverts>
"""))
    line = one_error_line(start_broker("broker.xml"))
    assert line == "broker.xml:10: <diverts> is not supported yet by the reference broker"
    assert not (tmp_path / "data").exists(), "a config error stops the broker before the journal is created"


@pytest.mark.parametrize("core, expected", [
    ("    <cluster-connections/>\n",
     "broker.xml:10: <cluster-connections> is not supported yet by the reference broker"),
    ("    <journal-datasync>yes</journal-datasync>\n",
     "broker.xml:10: <journal-datasync>: expected true or false, got 'yes'"),
    ("    <naem>x</naem>\n", "broker.xml:10: unknown element <naem> in <core>; did you mean <name>?"),
    ("    <name>x</nam>\n", "broker.xml:10: not well-formed XML: mismatched tag"),
    ("    <name>again</name>\n", "broker.xml:10: <core>: <name> given twice"),
], ids=["refused", "bad-boolean", "unknown", "malformed", "twice"])
def test_config_errors_are_one_line(tmp_path, start_broker, core, expected):
    (tmp_path / "broker.xml").write_text(broker_xml(core=core))
    line = one_error_line(start_broker("broker.xml"))
    assert line.startswith(expected), line


def test_missing_config_file_is_one_line(tmp_path, start_broker):
    line = one_error_line(start_broker("nope.xml"))
    assert line.startswith("nope.xml:0: cannot read: "), line


def test_a_bad_acceptor_port_is_one_line(tmp_path, start_broker):
    (tmp_path / "broker.xml").write_text(broker_xml(port=99999))
    line = one_error_line(start_broker("broker.xml"))
    assert line.startswith("broker.xml:8: acceptor 'clients'"), line


STOMP = '      <acceptor name="stomp">tcp://127.0.0.1:0?protocols=STOMP</acceptor>\n'


@pytest.mark.parametrize("persistence", [False, True])
def test_port_in_use_is_the_only_line(tmp_path, start_broker, persistence):
    """Like the router: the acceptors are bound before the journal is touched and before any queue is created
    or logged, so a busy port is the one stderr line, and no journal directory is created."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (tmp_path / "broker.xml").write_text(broker_xml(port=port, persistence=persistence, acceptors=STOMP))
        line = one_error_line(start_broker("broker.xml"))
    assert line.startswith(f"broker.xml:8: acceptor 'clients': cannot listen on 127.0.0.1:{port}: "), line
    assert not (tmp_path / "data").exists(), "the journal directory is created only once the acceptors are bound"


def test_management_port_in_use_is_the_only_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (tmp_path / "broker.xml").write_text(broker_xml())
        args = [sys.executable, "-m", "reference.broker", "-c", "broker.xml", "--management-port", str(port)]
        done = subprocess.run(args, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=START_TIMEOUT)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"--management-port {port}: cannot listen on 127.0.0.1:{port}: "), lines
    assert not (tmp_path / "data").exists()


def test_an_acceptor_without_amqp_is_skipped_with_a_notice(tmp_path, start_broker, clients):
    (tmp_path / "broker.xml").write_text(broker_xml(persistence=False, acceptors=STOMP))
    broker = start_broker("broker.xml", management=False).wait_ready()
    text = broker.stderr()
    assert "acceptor 'stomp'" not in text, "no listening line for it"
    notices = [line for line in broker.lines() if "'stomp'" in line]
    assert len(notices) == 1 and notices[0].endswith(
        "SERVER (notice) Acceptor 'stomp' not opened: protocols=STOMP does not include AMQP (the reference broker "
        "serves AMQP only)"), notices
    assert text.index("Acceptor 'stomp' not opened") < text.index("started; ready")
    assert clients.connect(broker.url).opened.is_set()
    assert broker.terminate() == 0


# ---- running --------------------------------------------------------------------------------------------------


def test_ready_lines_and_a_connection(tmp_path, start_broker, clients):
    (tmp_path / "broker.xml").write_text(broker_xml())
    broker = start_broker("broker.xml").wait_ready()
    text = broker.stderr()
    assert re.search(r"Journal \S+journal\.dat: 0 message\(s\) recovered$", text, re.M), text
    assert text.index("Journal ") < text.index("Listening on ") < text.index("Management on ") \
        < text.index("Broker B-test started; ready")
    assert "Traceback" not in text
    conn = clients.connect(broker.url)
    assert conn.opened.is_set()
    assert broker.terminate() == 0
    wait_for(lambda: conn.ended, STOP_TIMEOUT, "the client to see the broker close its connection")
    assert "Broker B-test stopped" in broker.stderr()


def test_sigint_exits_0(tmp_path, start_broker):
    (tmp_path / "broker.xml").write_text(broker_xml(persistence=False))
    broker = start_broker("broker.xml", management=False).wait_ready()
    assert "Journal" not in broker.stderr(), "no journal without persistence"
    broker.proc.send_signal(signal.SIGINT)
    assert broker.wait_exit(STOP_TIMEOUT) == 0


def test_durable_messages_survive_sigterm_and_restart(tmp_path, start_broker, clients):
    home, elsewhere = tmp_path / "etc", tmp_path / "cwd"
    home.mkdir()
    elsewhere.mkdir()
    config = home / "broker.xml"
    config.write_text(broker_xml())
    broker = start_broker(config, cwd=elsewhere).wait_ready()

    sender = clients.connect(broker.url).sender("orders")
    durable = sender.send(30, durable=True)
    transient = sender.send(10, durable=False)
    outcomes = sender.wait_outcomes(40, IO_TIMEOUT)
    assert {o.outcome for o in outcomes.values()} == {"accepted"}
    broker.wait_queue("orders", depth=40, consumers=0)

    assert broker.terminate() == 0  # with the client still connected

    restarted = start_broker(config, cwd=elsewhere).wait_ready()
    journal = restarted.journal_line()
    assert Path(journal.group(1)) == home / "data" / "journal" / "journal.dat", \
        "journal-directory is relative to the config file's folder, not the working directory"
    assert not (elsewhere / "data").exists()
    assert (int(journal.group(2)), journal.group(3)) == (30, None), "durable ones only, and no torn tail"
    row = restarted.wait_queue("orders", depth=30)
    assert (row["available"], row["in_flight"], row["consumers"], row["durable"]) == (30, 0, 0, True)

    receiver = clients.connect(restarted.url).receiver("orders", credit=100)
    receiver.wait_received(30, IO_TIMEOUT)
    receiver.conn.sync()
    assert receiver.seqs(sender.name) == durable, "every durable message, once, in order; no transient one"
    assert not set(receiver.seqs(sender.name)) & set(transient)
    restarted.wait_queue("orders", depth=0, consumers=1)

    # Consumed (accepted) messages are deleted in the journal too: a third run recovers nothing.
    assert restarted.terminate() == 0
    third = start_broker(config, cwd=elsewhere, management=False).wait_ready()
    assert int(third.journal_line().group(2)) == 0


def test_persistence_disabled_keeps_nothing(tmp_path, start_broker, clients):
    (tmp_path / "broker.xml").write_text(broker_xml(persistence=False))
    broker = start_broker("broker.xml").wait_ready()
    sender = clients.connect(broker.url).sender("orders")
    sender.send(5, durable=True)
    assert {o.outcome for o in sender.wait_outcomes(5, IO_TIMEOUT).values()} == {"accepted"}
    assert broker.terminate() == 0
    again = start_broker("broker.xml").wait_ready()
    assert again.queue("orders")["depth"] == 0
    assert not (tmp_path / "data").exists()


def test_management_endpoint(tmp_path, start_broker, clients):
    (tmp_path / "broker.xml").write_text(broker_xml())
    broker = start_broker("broker.xml").wait_ready()

    status, rows = broker.get("/queues")
    assert status == 200
    assert {r["name"] for r in rows} == {"DLQ", "orders"}
    assert all(set(r) == {"name", "address", "routing", "durable", "depth", "available", "in_flight",
                          "consumers", "internal"} for r in rows), rows
    assert broker.queue("orders") == {"name": "orders", "address": "orders", "routing": "anycast", "durable": True,
                                      "depth": 0, "available": 0, "in_flight": 0, "consumers": 0,
                                      "internal": False}

    conn = clients.connect(broker.url)
    sender = conn.sender("orders")
    sender.send(7, durable=True)
    sender.wait_outcomes(7, IO_TIMEOUT)
    holder = conn.receiver("orders", credit=3, auto_credit=False, outcome="hold")
    holder.wait_received(3, IO_TIMEOUT)
    broker.wait_queue("orders", depth=7, available=4, in_flight=3, consumers=1)
    idle = clients.connect(broker.url).receiver("orders", credit=0)
    broker.wait_queue("orders", consumers=2)

    # An auto-created queue shows up in the list.
    clients.connect(broker.url).sender("auto.created").send(1)
    wait_for(lambda: "auto.created" in {r["name"] for r in broker.get("/queues")[1]}, IO_TIMEOUT,
             "the auto-created queue in /queues", describe=lambda: broker.get("/queues"))
    broker.wait_queue("auto.created", depth=1, routing="anycast")

    assert holder.settle("accept") == 3
    idle.detach()
    broker.wait_queue("orders", depth=4, in_flight=0, consumers=1)

    status, body = broker.get("/queues/no-such-queue")
    assert (status, body) == (404, {"error": "no queue 'no-such-queue'"})
    for path in ("/", "/topics", "/queues/orders/extra"):
        status, body = broker.get(path)
        assert (status, body) == (404, {"error": "expected /queues, /queues/NAME or /broker-connections"}), path

    # Operations: a broker without broker connections lists none and starts none; a queue can be destroyed.
    assert broker.get("/broker-connections") == (200, [])
    assert broker.get("/broker-connections/nope/start", method="POST") == (
        404, {"error": "no broker connection 'nope' (known: none)"})
    assert broker.get("/queues/auto.created", method="DELETE") == (200, {"deleted": "auto.created"})
    assert broker.get("/queues/auto.created") == (404, {"error": "no queue 'auto.created'"})
    assert broker.get("/queues/auto.created", method="DELETE") == (404, {"error": "no queue 'auto.created'"})


def test_sigkill_mid_stream_then_restart_recovers_the_journal(tmp_path, start_broker, clients):
    (tmp_path / "broker.xml").write_text(broker_xml())
    broker = start_broker("broker.xml", management=False).wait_ready()
    conn = clients.connect(broker.url)
    sender = conn.sender("orders")
    total = 3000
    sender.send(total, durable=True)
    wait_for(lambda: sender.settled_count() >= 300, IO_TIMEOUT, "300 accepted durable messages",
             describe=lambda: f"{sender.settled_count()} outcomes, {sender.sent} sent")
    broker.proc.send_signal(signal.SIGKILL)
    assert broker.wait_exit(STOP_TIMEOUT) == -signal.SIGKILL
    wait_for(lambda: conn.ended, STOP_TIMEOUT, "the client to see the connection drop")
    accepted = sum(1 for o in sender.outcomes.values() if o.outcome == "accepted")
    assert accepted >= 300

    restarted = start_broker("broker.xml", management=False).wait_ready()
    journal = restarted.journal_line()
    recovered = int(journal.group(2))
    assert accepted <= recovered <= sender.sent, (accepted, recovered, sender.sent)

    # Recovery compacted the journal: a clean stop and start recovers the same messages and no torn tail.
    assert restarted.terminate() == 0
    third = start_broker("broker.xml", management=False).wait_ready()
    again = third.journal_line()
    assert (int(again.group(2)), again.group(3)) == (recovered, None)

    receiver = clients.connect(third.url).receiver("orders", credit=500)
    receiver.wait_received(recovered, IO_TIMEOUT)
    receiver.conn.sync()
    seqs = receiver.seqs(sender.name)
    assert len(seqs) == recovered == len(set(seqs))
    accepted_seqs = {seq for seq, o in sender.outcomes.items() if o.outcome == "accepted"}
    assert accepted_seqs <= set(seqs)


def test_a_durable_subscription_name_reused_on_another_address_starts_afresh(tmp_path, start_broker, clients):
    # Artemis names a durable subscription after the container id and link name; a subscriber that comes back
    # under that name on another address gets a new, empty subscription there, not the old address's queue.
    (tmp_path / "broker.xml").write_text(broker_xml(persistence=False))
    broker = start_broker("broker.xml").wait_ready()
    conn = clients.connect(broker.url, container_id="broker-process-tests")  # the subscription's name below
    first = conn.receiver("old.topic", name="sub", capabilities=("topic",), durable=True)
    first.wait_attached()
    first.detach(close=False)
    conn.sender("old.topic").send(2)
    broker.wait_queue("broker-process-tests.sub", depth=2)
    again = conn.receiver("new.topic", name="sub", capabilities=("topic",), durable=True)
    sender = conn.sender("new.topic")
    sender.send(1, body="to the new address")
    sender.wait_outcomes(1, IO_TIMEOUT)
    got = again.wait_received(1, IO_TIMEOUT)
    assert [m.body for m in got] == ["to the new address"]
    row = broker.wait_queue("broker-process-tests.sub", depth=0)
    assert row["address"] == "new.topic", "the old address's messages went with the old subscription"


def test_a_committed_transaction_is_one_journal_group_and_a_torn_one_is_lost_whole(tmp_path, start_broker, clients):
    """What a commit changes in the journal (AMQP 1.0 §4.4) is one atomic record: kill -9 right after the commit
    leaves it whole; a tail torn inside it (a crash mid-write) brings back none of its effects."""
    from test_journal import records  # the journal's documented framing, read independently of journal.py

    config = tmp_path / "broker.xml"
    config.write_text(broker_xml())
    broker = start_broker(config).wait_ready()
    conn = clients.connect(broker.url)
    stored = conn.sender("orders")
    stored.send(1, durable=True)
    stored.wait_outcomes(1, IO_TIMEOUT)
    controller = conn.coordinator()
    held = controller.receiver("orders", credit=1, auto_credit=False, outcome="hold")
    held.wait_received(1, IO_TIMEOUT)
    txn = controller.declare()
    controller.sender("orders").send(3, durable=True, txn=txn)
    held.settle("accept", txn=txn)
    assert controller.commit(txn, IO_TIMEOUT).outcome == "accepted"
    broker.proc.kill()
    broker.wait_exit(STOP_TIMEOUT)

    path = tmp_path / "data" / "journal" / "journal.dat"
    data = path.read_bytes()
    offset, size, kind = records(data)[-1]
    assert (kind, offset + size) == (5, len(data)), "the commit is the journal's last record, an atomic group"
    members = data[offset + 9: offset + size]  # past the record's header and type byte
    assert sorted(k for _, _, k in records(members)) == [1, 1, 1, 2], "three enqueues and one delete"

    path.write_bytes(data[:offset + size // 2])
    restarted = start_broker(config).wait_ready()
    journal = restarted.journal_line()
    assert (int(journal.group(2)), int(journal.group(3))) == (1, size // 2)
    receiver = clients.connect(restarted.url).receiver("orders")
    receiver.wait_received(1, IO_TIMEOUT)
    receiver.conn.sync()
    assert [(m.producer, m.seq) for m in receiver.messages()] == [(stored.name, 0)], \
        "the accepted message is back and none of the three posted: nothing of the torn transaction"
