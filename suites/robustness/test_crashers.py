"""Every input the hostile-frame fuzzer found to crash or wedge a server, replayed against router and broker.

Each entry of crashers.yaml is sent as it was found, on a raw TCP connection, to the single router and to the
single broker under test. Two cases per entry and role:
* the server survives it (ROBUST-ISOLATION-1): still running, still answering a protocol header, and a fresh
  client still gets a message through; where the server is a local process, it leaves no socket in
  CLOSE_WAIT once the client has closed (ROBUST-CLOSE-1), and it does not keep spending CPU once the input's
  connection has closed (harness/fuzz/cpuverdict.py: three or more quiet 1 s windows 3 s apart, each over 0.2 of a
  core or with one thread on or waiting for a CPU over 60% of it, while the process is given 5 CPU-s or 60 s
  pass, fail it);
* the server answers it as AMQP 1.0 says (the entry's `answer`):
  - close-with-error: the connection ends with a close frame carrying one of the entry's `conditions`;
  - sasl-refused: no successful sasl-outcome and no AMQP open; the server ends the connection itself;
  - closed: the server ends the connection itself (the input is undecodable before any close frame is due);
  - any: AMQP asks nothing in particular of the server (say, a disposition naming deliveries that were never
    sent): only the first case runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.fuzz.cpuverdict import measure_after_close
from harness.fuzz.frames import peer_pids
from harness.fuzz.hostile import Case
from harness.fuzz.procstat import close_wait_count
from harness.fuzz.wire import play
from harness.peers.liveness import amqp_silence
from harness.vendors.rabbitmq.render import HANDSHAKE_TIMEOUT_MS
from harness.wait import WaitTimeout, wait_for

CRASHERS = yaml.safe_load((Path(__file__).parent / "crashers.yaml").read_text())["crashers"]
ROLES = {"router": ("single-router", "R1"), "broker": ("single-broker", "B1")}
# How long a server has to end a connection it must end: a deadline, returned early by every server that closes.
# An entry may give itself longer (crashers.yaml `answer_s`, with its reason), always below RabbitMQ's
# handshake_timeout (30 s as the harness renders it, 10 s by default): RabbitMQ ends a connection whose handshake has
# not finished by then whatever the input was, and that would pass an input it ignores.
ANSWER_S = 5.0
CLOSE_WAIT_S = 15.0  # a deadline, not a wait: a server under load may take seconds to close its side


def _case(entry: dict) -> Case:
    """The entry's bytes as one send, or as its `steps` (hex chunks and pauses, for an input whose timing matters),
    then its hold."""
    if entry.get("steps"):
        steps = [("send", bytes.fromhex(x)) if isinstance(x, str) else ("pause", float(x)) for x in entry["steps"]]
        sent = b"".join(v for k, v in steps if k == "send")
        assert sent.hex() == entry["input_hex"], f"crashers.yaml: {entry['id']}: steps do not add up to input_hex"
    else:
        steps = [("send", bytes.fromhex(entry["input_hex"]))]
    if entry.get("hold_s"):
        steps.append(("pause", float(entry["hold_s"])))
    return Case(entry["family"], entry["id"], steps)


def _params(answered_only: bool = False):
    return [pytest.param(role, entry, id=f"{role}-{entry['id']}",
                         marks=pytest.mark.spec(*entry["spec"]))
            for entry in CRASHERS for role in ROLES if not (answered_only and entry["answer"] == "any")]


@pytest.fixture
def server(topology, request):
    role = request.node.callspec.params["role"]
    name, node = ROLES[role]
    return topology(name)[node]


def _address(peer, name: str) -> str:
    wire = getattr(peer, "wire_address", None)
    return wire(name) if callable(wire) else name


def _down_reason(server, seen_silent: bool) -> str | None:
    """Why the server is down, if it is. One that stopped answering may be a process still on its way down: it gets
    a moment to be seen so, so that the failure says it crashed rather than only that it went quiet."""
    if not seen_silent:
        return server.down_reason()
    try:
        return wait_for(server.down_reason, 2.0, "the server that stopped answering to be seen down")
    except WaitTimeout:
        return None


@pytest.mark.parametrize("role, entry", _params())
def test_server_survives_the_input(server, clients, role, entry, details):
    ep = server.client_endpoint
    pids = peer_pids(server)
    # Sockets an earlier case left in CLOSE_WAIT (a recorded difference of that case) are not this case's.
    leaked_before = close_wait_count(pids) if pids else 0
    reply = play(ep.host, ep.port, _case(entry), idle_s=0.2, max_read_s=ANSWER_S)
    assert not reply.refused and reply.error is None, f"could not send the input: {reply.error or 'refused'}"
    # A round trip first, then the verdict (docs/writing-a-case.md): a server the input brought down no longer
    # answers a protocol header, where a fixed wait for a crash would hold every case that passes for its length.
    silence = amqp_silence(ep.host, ep.port, 5.0)
    down = _down_reason(server, seen_silent=silence is not None)
    assert down is None, f"{server.name} went down after the {entry['id']} input: {down}"
    assert silence is None, f"{server.name} stopped answering after the {entry['id']} input: {silence}"
    details.update(input=entry["id"], reply_bytes=len(reply.reply), closed_by_server=reply.closed_by_server)
    if pids:  # the input's connection (and the probe's) closed: a server that still burns CPU works on nothing
        verdict = measure_after_close(pids)
        details.update(cpu_after_close=verdict.evidence())
        assert not verdict.spinning, (f"{server.name} kept spending CPU after the {entry['id']} input's connection "
                                      f"closed: {verdict.describe()}")
    address = _address(server, clients.unique("robust.fresh."))
    conn = clients.connect(server.url)
    receiver = conn.receiver(address, credit=5)
    conn.sender(address).send(1)
    receiver.wait_received(1, 10.0)
    down = server.down_reason()  # a crash that came while the fresh client's message went through
    assert down is None, f"{server.name} went down after the {entry['id']} input: {down}"
    if pids:  # a local process: its sockets are visible in /proc
        try:
            wait_for(lambda: close_wait_count(pids) <= leaked_before, CLOSE_WAIT_S,
                     "no new server socket in CLOSE_WAIT",
                     describe=lambda: f"{close_wait_count(pids)} in CLOSE_WAIT, {leaked_before} before the input")
        except WaitTimeout as exc:
            raise AssertionError(f"{server.name} left sockets in CLOSE_WAIT after the {entry['id']} input and "
                                 f"the client's close: {exc}") from None


@pytest.mark.parametrize("role, entry", _params(answered_only=True))
def test_server_answers_the_input_as_amqp_says(server, role, entry, details):
    ep = server.client_endpoint
    answer_s = float(entry.get("answer_s", ANSWER_S))
    assert answer_s < HANDSHAKE_TIMEOUT_MS / 1000, (f"crashers.yaml: {entry['id']}: answer_s {answer_s:g} must stay "
                                                    "below RabbitMQ's handshake_timeout as the harness renders it")
    reply = play(ep.host, ep.port, _case(entry), idle_s=answer_s, max_read_s=answer_s)
    assert not reply.refused and reply.error is None, f"could not send the input: {reply.error or 'refused'}"
    condition = reply.close_condition
    opened = any(t == 0 and body[:3] == b"\x00\x53\x10" for t, _, body in reply.frames)
    details.update(input=entry["id"], close_condition=condition, sent_close=reply.sent_close,
                   closed_by_server=reply.closed_by_server, sasl_outcome=reply.sasl_outcome_code,
                   reply_hex=reply.reply[:200].hex())
    answer = entry["answer"]
    if answer == "close-with-error":
        assert reply.sent_close, (f"{server.name} answered the {entry['id']} input without a close frame "
                                  f"(closed its socket: {reply.closed_by_server}); AMQP wants a close with "
                                  f"{' or '.join(entry['conditions'])}")
        assert condition in entry["conditions"], (
            f"{server.name} closed after the {entry['id']} input with {condition!r}, expected "
            f"{' or '.join(entry['conditions'])}")
    elif answer == "sasl-refused":
        assert reply.sasl_outcome_code != 0, f"{server.name} authenticated a sasl-init with no usable mechanism"
        assert not opened, f"{server.name} went on to an AMQP open after a sasl-init with no usable mechanism"
    elif answer != "closed":
        raise AssertionError(f"crashers.yaml: {entry['id']}: unknown answer {answer!r}")
    assert reply.closed_by_server, (f"{server.name} kept the connection open {answer_s:g}s after the "
                                    f"{entry['id']} input instead of closing it")
