"""The type interop suite's exchanges: per peer (router, broker) and ordered pair of client stacks, one sender
link and one receiver link carry every value of the type table, once per session; each case judges its part.

A value goes in the body (amqp-value, one message per value), in application-properties and in
message-annotations (one message per family and section, one key per value); the header and properties fields
go in four messages of their own. Every message carries its index in an application property (SEQ_KEY), so
that a message that arrives late (after its send timed out) is still matched to what was sent.
"""

from __future__ import annotations

import concurrent.futures
import uuid
from dataclasses import dataclass, field

import pytest

from harness.drivers import AMQP_STACKS, ClientStackError, ClientStackUnavailable, StackClient
from harness.history import History

from .values import FAMILIES, HEADER_PROPERTIES, SECTIONS, s, values_for

VIAS = {"router": ("single-router", "R1"), "broker": ("single-broker", "B1")}
RECEIVE_TIMEOUT = 60.0  # seconds for every message of one exchange (a few hundred, 64-100 KiB bodies among them)
SEND_TIMEOUT = 10.0  # seconds for the outcomes of one group of messages (a healthy peer answers in milliseconds)
LATE_TIMEOUT = 5.0  # seconds for what is still missing once the first receive has returned (see _receive)


@dataclass
class Exchange:
    """What one (peer, sender stack, receiver stack) exchange sent and got back, in order."""
    sent: list[tuple[str, str, dict]] = field(default_factory=list)  # (family, section, message)
    outcomes: list[str] = field(default_factory=list)
    received: list[dict | None] = field(default_factory=list)  # by sent index (matched by SEQ_KEY); None: not received
    error: str | None = None
    versions: dict = field(default_factory=dict)
    events: dict = field(default_factory=dict)  # what the drivers recorded (harness/history.py), by kind


def key_of(i: int) -> str:
    return f"v{i:02d}"


SEQ_KEY = "interop-seq"  # an application property naming each message's place in the exchange


def messages() -> list[tuple[str, str, dict]]:
    out = []
    for family in FAMILIES:
        for section in SECTIONS:
            values = values_for(family, section)
            if not values:
                continue
            if section == "body":
                out += [(family, section, {"body": v}) for _, v in values]
            elif section == "application-properties":
                out.append((family, section, {"app_properties": [[s(key_of(i)), v] for i, (_, v) in
                                                                 enumerate(values)], "body": s("types")}))
            else:
                out.append((family, section, {"annotations": [[{"t": "symbol", "v": f"x-opt-{key_of(i)}"}, v]
                                                              for i, (_, v) in enumerate(values)],
                                              "body": s("types")}))
    out += [("header-properties", "header-properties", {**m, "body": s("types")}) for _, m in HEADER_PROPERTIES]
    for i, (_, _, m) in enumerate(out):
        m["app_properties"] = [*m.get("app_properties", []), [s(SEQ_KEY), s(str(i))]]
    return out


def run_exchange(stacks, url: str, address: str, sender: str, receiver: str) -> Exchange:
    """The messages of one family and section go in one send (a peer that answers each message late, as
    RabbitMQ's AMQP 1.0 plugin does by about 40 ms, costs one wait per group, not per message). A group whose send
    fails (RabbitMQ resets the connection on some values) is sent again one message at a time over a new
    connection, so that the failure is pinned on its value; what was stored twice is received twice and
    counted once (messages are matched by SEQ_KEY). A group of one message is not sent again: its failure is
    pinned already, and a second try of a message the peer never answers (qdrouterd's binary annotations) only
    waited out SEND_TIMEOUT once more."""
    ex = Exchange(sent=messages())
    ex.outcomes = [""] * len(ex.sent)
    history = History()
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (family, section, _) in enumerate(ex.sent):
        groups.setdefault((family, section), []).append(i)
    try:
        rshim, sshim = stacks.get(receiver), stacks.get(sender)
        ex.versions = {"sender": sshim.version, "receiver": rshim.version}
        rc = StackClient(rshim, history)
        try:
            rc.connect(url)
            rcv = rc.receiver(address, credit=100, settle="auto")
            link = _Sender(sshim, history, url, address)
            for indexes in groups.values():
                if not link.send(ex, indexes) and len(indexes) > 1:
                    for i in indexes:
                        link.send(ex, [i])
            link.close()
            ex.received = [None] * len(ex.sent)
            _receive(ex, rcv)
        finally:
            _close_quietly(rc)
    except ClientStackUnavailable:
        raise
    except ClientStackError as exc:
        ex.error = str(exc)
    for event in history:
        ex.events[event.kind] = ex.events.get(event.kind, 0) + 1
    return ex


class _Sender:
    """A sender that connects again after its connection was lost."""

    def __init__(self, shim, history, url: str, address: str):
        self.shim, self.history, self.url, self.address = shim, history, url, address
        self.client, self.link = None, None

    def send(self, ex: Exchange, indexes: list[int]) -> bool:
        try:
            if self.link is None:
                self.client = StackClient(self.shim, self.history).connect(self.url)
                self.link = self.client.sender(self.address)
            outcomes = self.link.send([ex.sent[i][2] for i in indexes], timeout=SEND_TIMEOUT)
        except ClientStackError as exc:
            for i in indexes:
                ex.outcomes[i] = f"error ({exc})"
            self.close()
            return False
        for i, outcome in zip(indexes, outcomes, strict=False):
            ex.outcomes[i] = outcome
        return True

    def close(self) -> None:
        _close_quietly(self.client)
        self.client, self.link = None, None


def _receive(ex: Exchange, rcv) -> None:
    """Until every accepted message has come (a message stored twice, or one whose send timed out, may come
    too), or nothing more comes within the deadline."""
    missing = {i for i, o in enumerate(ex.outcomes) if o == "accepted"}
    timeout = RECEIVE_TIMEOUT
    while missing:
        try:
            got = rcv.receive(len(missing), timeout=timeout)
        except ClientStackError:
            return  # what has not come is recorded as not received
        for m in got:
            seq = _seq_of(m, -1)
            if 0 <= seq < len(ex.sent):
                ex.received[seq] = m
                missing.discard(seq)
        timeout = LATE_TIMEOUT


def _seq_of(message: dict, position: int) -> int:
    """Which sent message this is: its SEQ_KEY application property, else its place in the order of arrival."""
    for key, value in message.get("app_properties") or []:
        if key.get("v") == SEQ_KEY and value.get("t") == "string" and value.get("v", "").isdigit():
            return int(value["v"])
    return position


def _close_quietly(client) -> None:
    if client is None:
        return
    try:
        client.close(timeout=5.0)
    except ClientStackError:
        pass  # the peer closed it already


@pytest.fixture(scope="session")
def exchanges():
    """(peer, topology peers, sender, receiver) -> Exchange, made on first use."""
    return {}


@pytest.fixture
def exchange(topology, stacks, exchanges, interop):
    """`exchange(via, sender, receiver)` -> the Exchange of that peer and pair. The first case of a peer and
    receiving stack makes the exchanges of the three senders to it at once, side by side (each over its own
    address): a peer that is slow to answer (RabbitMQ takes about 3 s to reset a connection it cannot go on with)
    then makes the senders wait together, not in turn; each case stays far below a per-case timeout. Each shim
    carries one request at a time, so three senders of one stack would only queue: the senders differ."""
    def get(via: str, sender: str, receiver: str) -> Exchange:
        name, node = VIAS[via]
        running = topology(name)
        for stack in (sender, receiver):
            try:
                stacks.get(stack)
            except ClientStackUnavailable as exc:
                pytest.skip(f"client stack unavailable: {exc}")
        peers = tuple(sorted(interop.choices.items()))
        if (via, peers, sender, receiver) not in exchanges:
            peer = running[node]
            pairs = [(a, receiver) for a in AMQP_STACKS if (via, peers, a, receiver) not in exchanges]
            with concurrent.futures.ThreadPoolExecutor(len(pairs)) as pool:
                futures = {(a, b): pool.submit(_exchange_of, stacks, peer, via, a, b) for a, b in pairs}
            for (a, b), future in futures.items():
                exchanges[(via, peers, a, b)] = future.result()
        made = exchanges[(via, peers, sender, receiver)]
        if isinstance(made, ClientStackUnavailable):
            pytest.skip(f"client stack unavailable: {made}")
        return made
    return get


def _exchange_of(stacks, peer, via: str, sender: str, receiver: str) -> Exchange | ClientStackUnavailable:
    address = (peer.wire_address(f"interop.types.{uuid.uuid4().hex[:10]}") if via == "broker"
               else f"types.{sender}.{receiver}.{uuid.uuid4().hex[:10]}")
    try:
        return run_exchange(stacks, peer.url, address, sender, receiver)
    except ClientStackUnavailable as exc:
        return exc
