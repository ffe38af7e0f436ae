"""Routing and broker cases that only send, receive and settle, carried out by the client stack chosen with
`--client python|cpp|rhea` (harness/drivers.py; one shim process per stack per session), so that the delivery
guarantees are checked with each stack's own encoder, decoder and flow control, not only with proton's Python
binding. A case needing what the stack's shim does not declare is not-applicable.
"""

from __future__ import annotations

import uuid

import pytest

from harness.drivers import ClientStackError, ClientStackUnavailable, StackClient
from harness.pytest_plugin import NOT_APPLICABLE

N = 20


def message(i: int) -> dict:
    return {"body": {"t": "string", "v": f"m{i}"}, "app_properties": [[{"t": "string", "v": "seq"},
                                                                      {"t": "int", "v": str(i)}]]}


def seq_of(m: dict) -> int:
    return next(int(v["v"]) for k, v in m.get("app_properties") or [] if k.get("v") == "seq")


@pytest.fixture
def stack(stacks, client_stack, details, request):
    """The chosen stack's shim; `stack.client()` -> a new StackClient recording into this case's history."""
    try:
        shim = stacks.get(client_stack)
    except ClientStackUnavailable as exc:
        pytest.skip(f"client stack unavailable: {exc}")
    details["client_stack"] = client_stack
    details["stack_version"] = shim.version
    made: list[StackClient] = []

    class Stack:
        name = client_stack

        @staticmethod
        def require(*capabilities: str) -> None:
            missing = sorted(set(capabilities) - shim.capabilities)
            if missing:
                pytest.skip(f"{NOT_APPLICABLE}client stack {client_stack} lacks {', '.join(missing)}")

        @staticmethod
        def client(url: str) -> StackClient:
            c = StackClient(shim).connect(url)
            made.append(c)
            return c

    yield Stack
    counts: dict[str, int] = {}
    for c in made:
        for event in c.history:
            counts[event.kind] = counts.get(event.kind, 0) + 1
        try:
            c.close()
        except Exception:  # the case's own failure says more
            pass
    details["events"] = counts


@pytest.mark.spec("ROUTING-ANYCAST-1", "ROUTING-OUTCOME-ANYCAST-ACCEPTED")
def test_router_anycast_goes_to_one_consumer_and_its_accept_comes_back(topology, stack, details):
    url = topology("single-router").client_url("producer")
    address = f"balanced.clients.{uuid.uuid4().hex[:8]}"
    receivers = [stack.client(url).receiver(address, credit=N, settle="auto") for _ in range(2)]
    outcomes = stack.client(url).sender(address).send([message(i) for i in range(N)], timeout=20)
    assert outcomes == ["accepted"] * N, f"the consumers accepted, so the producer learns accepted: {outcomes}"
    counts, got = [0, 0], []
    for i, r in enumerate(receivers):  # all N were accepted, so all have arrived: each takes what it holds
        while True:
            try:
                got += [seq_of(m) for m in r.receive(1, timeout=0.3)]
                counts[i] += 1
            except ClientStackError:
                break
    details.update(sent=N, received=counts)
    assert sorted(got) == list(range(N)), "each message reaches exactly one consumer"


@pytest.mark.spec("ROUTING-SETTLE-1")
def test_router_presettled_messages_arrive_and_get_no_outcome(topology, stack, details):
    stack.require("settle.presettled")
    url = topology("single-router").client_url("producer")
    address = f"closest.clients.{uuid.uuid4().hex[:8]}"
    receiver = stack.client(url).receiver(address, credit=N, settle="auto")
    outcomes = stack.client(url).sender(address, settle="presettled").send([message(i) for i in range(N)])
    got = [seq_of(m) for m in receiver.receive(N, timeout=10)]
    details.update(sent=N, received=len(got))
    assert outcomes == ["settled"] * N and sorted(got) == list(range(N))


@pytest.mark.spec("ROUTING-MULTICAST-1")
@pytest.mark.requires("distribution.multicast")
def test_router_multicast_gives_every_consumer_a_copy(topology, stack, details):
    stack.require("settle.presettled")
    url = topology("single-router").client_url("producer")
    address = f"multicast.clients.{uuid.uuid4().hex[:8]}"
    receivers = [stack.client(url).receiver(address, credit=N, settle="auto") for _ in range(2)]
    stack.client(url).sender(address, settle="presettled").send([message(i) for i in range(5)])
    copies = [sorted(seq_of(m) for m in r.receive(5, timeout=10)) for r in receivers]
    details.update(sent=5, received=[len(c) for c in copies])
    assert copies == [list(range(5))] * 2


@pytest.fixture
def broker_queue(topology):
    broker = topology("single-broker")["B1"]
    return broker.url, broker.wire_address(f"interop.clients.{uuid.uuid4().hex[:10]}")


@pytest.mark.spec("BROKER-SAF-1", "BROKER-ORDER-1")
@pytest.mark.requires("store-and-forward")
def test_broker_stores_until_a_consumer_comes_and_keeps_the_order(broker_queue, stack, details):
    url, queue = broker_queue
    outcomes = stack.client(url).sender(queue).send([message(i) for i in range(N)], timeout=20)
    assert outcomes == ["accepted"] * N, "no consumer yet: the broker stores and accepts"
    receiver = stack.client(url).receiver(queue, credit=N)
    got = [seq_of(m) for m in receiver.receive(N, timeout=10)]
    receiver.settle("accept")
    details.update(sent=N, received=len(got))
    assert got == list(range(N)), "one producer, one queue, one consumer: in the order sent"


@pytest.mark.spec("BROKER-OUTCOME-RELEASED")
@pytest.mark.requires("outcome.released")
def test_broker_gives_a_released_message_again_first(broker_queue, stack, details):
    stack.require("outcome.release")
    url, queue = broker_queue
    assert stack.client(url).sender(queue).send([message(i) for i in range(3)]) == ["accepted"] * 3
    receiver = stack.client(url).receiver(queue, credit=1)
    first = seq_of(receiver.receive(1)[0])
    receiver.settle("release")
    receiver.flow(1)
    again = seq_of(receiver.receive(1)[0])
    receiver.settle("accept")
    receiver.flow(2)
    rest = [seq_of(m) for m in receiver.receive(2)]
    receiver.settle("accept")
    details.update(first=first, again=again, rest=rest)
    assert first == again == 0 and rest == [1, 2]
