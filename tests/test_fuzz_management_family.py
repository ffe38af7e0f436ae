"""The frame fuzzer's `management` family (issue 55, scope 6): hostile requests to the router's `$management` and the
broker's `activemq.management`, and what the reference router and broker answer them.

Each case is a valid session (SASL, open, begin), a receiver on a reply address of the case's own, a sender to the
management node, one malformed request, a pause for the answer and a close. The server must answer with an error
status (router: statusCode 4xx/5xx; broker: _AMQ_OperationSucceeded false) or reject the delivery, and go on
serving (harness/fuzz/mgmt_answer.py judges the answer).
"""

from __future__ import annotations

import concurrent.futures

import pytest
from proton import Data, Message

from harness.fuzz import codec as c
from harness.fuzz import frames, hostile
from harness.fuzz.hostile import EXPECT_ERROR, EXPECT_NO_REPLY, MGMT_VARIANTS, Case, Context, generate
from harness.fuzz.mgmt_answer import judge, read_answer
from harness.fuzz.session import target_for
from harness.fuzz.wire import play
from harness.peers.launch import start_topology
from harness.topology import load_topology, topology_path

ROLES = ("router", "broker")
WITHIN = 200  # every variant of a role appears within this many cases of one seed


def _cases(role: str, seed: int, n: int) -> list[Case]:
    ctx = Context(address=f"fuzz.hostile.{seed}", role=role)
    return [generate(seed, i, ctx, ["management"]) for i in range(n)]


# ---- the cases --------------------------------------------------------------------------------------------------
def test_the_family_is_a_frame_fuzzer_family():
    assert "management" in hostile.OPT_IN_FAMILIES and "management" in frames.OPT_IN_FAMILIES
    assert "management" not in hostile.FAMILIES  # asked for by name: the fixed-seed sessions keep their cases


@pytest.mark.parametrize("role", ROLES)
def test_cases_are_deterministic_per_seed_and_named_without_anything_random(role):
    first, again, other = _cases(role, 5, 60), _cases(role, 5, 60), _cases(role, 6, 60)
    assert [(k.name, k.steps) for k in first] == [(k.name, k.steps) for k in again]
    assert [k.data for k in first] != [k.data for k in other], "another seed, other cases"
    for case in first:
        assert case.family == "management" and case.name.startswith("management.")
        assert case.name.split(".", 1)[1] in MGMT_VARIANTS[role]
        assert not any(ch.isdigit() for ch in case.name), case.name
        assert sum(v for k, v in case.steps if k == "pause") <= hostile.MAX_PAUSE_S


@pytest.mark.parametrize("role", ROLES)
def test_every_variant_appears_within_the_first_cases(role):
    names = {k.name for k in _cases(role, 5, WITHIN)}
    assert names == {f"management.{v}" for v in MGMT_VARIANTS[role]}


def _frames(case: Case) -> list[tuple[int, int, bytes]]:
    found, rest = c.split_frames(case.data)
    assert rest == b"", f"{case.name}: bytes left over after the last whole frame"
    return found


def _performative(body: bytes) -> tuple[int, list, bytes]:
    d = Data()
    used = d.decode(body)
    d.rewind()
    d.next()
    described = d.get_object()
    return int(described.descriptor), list(described.value), body[used:]


def _deliveries(case: Case) -> list[tuple[bytes, bool]]:
    """The transfers of a case as (payload, aborted), each delivery's frames joined."""
    out, pending = [], b""
    for type_, _, body in _frames(case):
        if type_ != c.FRAME_AMQP or c.descriptor(body) != 0x14:
            continue
        _, fields, payload = _performative(body)
        pending += payload
        more = len(fields) > 5 and bool(fields[5])
        aborted = len(fields) > 9 and bool(fields[9])
        if aborted or not more:
            out.append((pending, aborted))
            pending = b""
    return out


@pytest.mark.parametrize("role", ROLES)
def test_the_bytes_decode_and_ask_the_roles_management_node(role):
    node = "$management" if role == "router" else "activemq.management"
    for case in _cases(role, 5, WITHIN):
        frames_ = _frames(case)
        amqp = [body for type_, _, body in frames_ if type_ == c.FRAME_AMQP and body]
        for body in amqp:  # every performative is one proton reads
            _performative(body)
        attaches = [_performative(b)[1] for b in amqp if c.descriptor(b) == 0x12]
        sender = next(f for f in attaches if f[2] is False)
        assert sender[6].value[0] == node, f"{case.name}: the sender's target"
        receiver = next(f for f in attaches if f[2] is True)
        reply_address = receiver[5].value[0]
        deliveries = _deliveries(case)
        variant = case.name.split(".", 1)[1]
        assert [a for _, a in deliveries] == ([True, False] if variant == "split-aborted" else [False])
        if variant == "body-deep":
            continue  # 500-2000 maps deep: what proton's own decoder may refuse is the point
        request = Message()
        request.decode(deliveries[-1][0])
        assert request.reply_to == (None if variant == "no-reply-to" else reply_address), case.name
        assert case.expect == (EXPECT_NO_REPLY if variant == "no-reply-to" else EXPECT_ERROR)
        if variant == "properties-not-a-map":
            assert not isinstance(request.properties, dict), case.name
        elif variant == "name-huge":
            assert len(deliveries[-1][0]) > hostile.HUGE_NAME
        elif variant == "body-huge":
            assert len(deliveries[-1][0]) > 60000, "64 or 256 KiB of body, give or take its encoding"


# ---- the oracle --------------------------------------------------------------------------------------------------
def _reply_frames(*messages: Message, state: bytes | None = None) -> list[tuple[int, int, bytes]]:
    out = []
    for i, message in enumerate(messages):
        body = c.composite("transfer", handle=0, delivery_id=i, delivery_tag=b"r", message_format=0, settled=True)
        out.append((c.FRAME_AMQP, 0, body + message.encode()))
    if state is not None:
        out.append((c.FRAME_AMQP, 0, c.composite("disposition", role=True, first=0, settled=True, state=state)))
    return out


def test_the_oracle_wants_an_error_status_or_a_rejection():
    case = Case("management", "management.read-missing", expect=EXPECT_ERROR)
    assert judge(case, _reply_frames(Message(properties={"statusCode": 404, "statusDescription": "Not Found"}))) is None
    assert judge(case, _reply_frames(Message(properties={"_AMQ_OperationSucceeded": False}, body='["no"]'))) is None
    assert judge(case, _reply_frames(state=c.composite("rejected"))) is None
    assert "no error" in judge(case, _reply_frames(Message(properties={"statusCode": 200})))
    assert "no error" in judge(case, _reply_frames(Message(properties={"_AMQ_OperationSucceeded": True})))
    assert "did not answer" in judge(case, _reply_frames(state=c.composite("accepted")))
    closed = [(c.FRAME_AMQP, 0, c.composite("close", error=dict(condition="amqp:internal-error")))]
    assert "ended the link or connection" in judge(case, closed)
    quiet = Case("management", "management.no-reply-to", expect=EXPECT_NO_REPLY)
    assert judge(quiet, _reply_frames(state=c.composite("accepted"))) is None
    assert "without reply-to" in judge(quiet, _reply_frames(Message(properties={"statusCode": 404})))
    assert judge(Case("utf8", "x"), []) is None, "a case without `expect` is not judged"


# ---- what the reference answers: the fix for application-properties that are not a map --------------------------
def test_the_reference_router_answers_properties_that_are_not_a_map_with_400():
    from reference.router.management import Agent

    agent = Agent.__new__(Agent)  # respond() refuses before it needs the router
    for props in (["operation", "QUERY"], "operation=QUERY", b"\xd1"):
        request = Message(reply_to="reply", correlation_id=7)
        request.properties = props
        answer = agent.respond(request)
        assert answer.properties["statusCode"] == 400, props
        assert "not a map" in answer.properties["statusDescription"]
        assert answer.correlation_id == 7


def test_the_reference_broker_refuses_properties_that_are_not_a_map():
    from reference.broker.management_amqp import AmqpManagement

    management = AmqpManagement.__new__(AmqpManagement)
    for props in (["_AMQ_ResourceName", "broker"], "_AMQ_ResourceName=broker"):
        request = Message()
        request.properties = props
        succeeded, text = management.answer(request)
        assert succeeded is False and "not a map" in text, props


# ---- sessions against the reference peers -----------------------------------------------------------------------
@pytest.fixture(scope="module", params=ROLES)
def target(request):
    role = request.param
    topology = "single-router" if role == "router" else "single-broker"
    running = start_topology(load_topology(topology_path(topology)), {role: "reference"})
    try:
        yield target_for(running, role)
    finally:
        running.stop()


@pytest.mark.serial
def test_a_short_session_against_the_reference_finds_nothing(target):
    # the session's Context says the target's role (the broker's management node is another address)
    report = frames.run_session(target, seed=5, budget_s=30, max_cases=40, families=["management"])
    assert report.executed == 40, f"ran {report.executed} of 40 cases in the budget"
    assert report.figures["cases_per_family"] == {"management": 40}
    assert report.findings == [], [f"{f.signature}: {f.message}" for f in report.findings]
    assert target.peer.down_reason() is None


@pytest.mark.serial
def test_the_reference_answers_every_variant_with_an_error(target):
    ctx = Context(address=f"fuzz.hostile.oracle.{target.role}", role=target.role)
    first: dict[str, Case] = {}
    for i in range(WITHIN):
        case = generate(7, i, ctx, ["management"])
        first.setdefault(case.name, case)
    assert len(first) == len(MGMT_VARIANTS[target.role])
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        replies = dict(zip(first, pool.map(lambda k: play(target.host, target.port, k), first.values()), strict=True))
    problems = {name: judge(first[name], reply.frames) for name, reply in replies.items()}
    assert {n: p for n, p in problems.items() if p} == {}, {n: read_answer(r.frames).describe()[:200]
                                                          for n, r in replies.items()}
    assert target.peer.down_reason() is None
