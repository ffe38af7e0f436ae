"""What a server answered a hostile management request (the frame fuzzer's `management` family), and whether it is
the answer AMQP management asks for.

A `management` case (harness/fuzz/hostile.py) sends one malformed request to the management node with a reply-to
of its own, holds the socket for the answer and closes. Its `expect` says what must come back:
* `management-error`: an error status on the reply address (qdrouterd's management: `statusCode` 400-599 in the
  reply's application-properties; Artemis's: `_AMQ_OperationSucceeded` false), or the request's delivery rejected.
  A success status, no answer at all, or the link or connection ended with an error instead, is a finding.
* `management-no-reply`: a request without reply-to; nothing may come back on the reply address.

Reads a `harness.fuzz.wire.Reply` (the frames the server sent); decodes with proton, which reading an answer may do
(the hostile input itself is built without it, by codec.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import codec as c
from .hostile import EXPECT_ERROR, EXPECT_NO_REPLY, Case

TRANSFER, DISPOSITION, DETACH, END, CLOSE = 0x14, 0x15, 0x16, 0x17, 0x18
REJECTED, ACCEPTED = 0x25, 0x24


@dataclass
class Answer:
    # per reply message: ("router", statusCode, statusDescription) | ("broker", _AMQ_OperationSucceeded, body)
    statuses: list = field(default_factory=list)
    outcomes: list = field(default_factory=list)  # descriptor codes of the server's dispositions' states
    errors: list = field(default_factory=list)  # "detach|end|close: <condition>" the server sent with an error
    undecodable: int = 0  # reply messages proton could not decode

    def describe(self) -> str:
        parts = [f"{k} status {v!r}" for k, v, _ in self.statuses]
        parts += [{REJECTED: "rejected", ACCEPTED: "accepted"}.get(o, f"outcome 0x{o:02x}") for o in self.outcomes]
        return ", ".join(parts + self.errors) or "nothing"


def _split(body: bytes) -> tuple[list, bytes]:
    """A transfer or disposition frame body -> (its performative's fields, the payload after it)."""
    from .wire import split_performative

    return split_performative(body)


def _state_code(body: bytes) -> int | None:
    """The descriptor of a disposition's state (its fifth field), read from the raw bytes."""
    try:
        fields, _ = _split(body)
    except Exception:  # noqa: BLE001 - an answer proton cannot read is no outcome
        return None
    state = fields[4] if len(fields) > 4 else None
    descriptor = getattr(state, "descriptor", None)
    try:
        return int(descriptor) if descriptor is not None else None
    except (TypeError, ValueError):
        return {"amqp:rejected:list": REJECTED, "amqp:accepted:list": ACCEPTED}.get(str(descriptor))


def read_answer(frames: list[tuple[int, int, bytes]]) -> Answer:
    from proton import Message

    out = Answer()
    pending = b""
    for type_, _, body in frames:
        if type_ != c.FRAME_AMQP:
            continue
        code = c.descriptor(body)
        if code == TRANSFER:
            try:
                fields, payload = _split(body)
            except Exception:  # noqa: BLE001
                out.undecodable += 1
                continue
            more = len(fields) > 5 and bool(fields[5])
            aborted = len(fields) > 9 and bool(fields[9])
            pending += payload
            if aborted:
                pending = b""
            elif not more:
                message = Message()
                try:
                    message.decode(pending)
                except Exception:  # noqa: BLE001
                    out.undecodable += 1
                    pending = b""
                    continue
                pending = b""
                props = message.properties if isinstance(message.properties, dict) else {}
                if "statusCode" in props:
                    out.statuses.append(("router", props.get("statusCode"), props.get("statusDescription")))
                elif "_AMQ_OperationSucceeded" in props:
                    out.statuses.append(("broker", props.get("_AMQ_OperationSucceeded"), message.body))
                else:
                    out.statuses.append(("unknown", None, props))
        elif code == DISPOSITION:
            state = _state_code(body)
            if state is not None:
                out.outcomes.append(state)
        elif code in (DETACH, END, CLOSE):
            condition = c.error_condition(body)
            if condition:
                out.errors.append(f"{ {DETACH: 'detach', END: 'end', CLOSE: 'close'}[code]}: {condition}")
    return out


def is_error(status: tuple) -> bool:
    kind, value, _ = status
    if kind == "router":
        try:
            return 400 <= int(value) <= 599
        except (TypeError, ValueError):
            return False
    if kind == "broker":
        return value is False
    return False


def judge(case: Case, frames: list[tuple[int, int, bytes]]) -> str | None:
    """None when the server answered `case` as its `expect` asks; else one line saying what it did instead."""
    if case.expect not in (EXPECT_ERROR, EXPECT_NO_REPLY):
        return None
    answer = read_answer(frames)
    if case.expect == EXPECT_NO_REPLY:
        if answer.statuses:
            return f"answered a request without reply-to: {answer.describe()}"
        return None
    successes = [s for s in answer.statuses if not is_error(s)]
    if successes:
        return f"answered a malformed request with a status that is no error: {answer.describe()}"
    if answer.statuses or REJECTED in answer.outcomes:
        return None
    if answer.errors:
        return f"ended the link or connection instead of answering: {answer.describe()}"
    return f"did not answer the request (saw {answer.describe()})"
