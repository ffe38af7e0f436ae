"""Type interop (AMQP 1.0 part 1, types; part 3, message format): every primitive type at its edge values, compound
and described values, in the body, application-properties and message-annotations, and the header and
properties fields, sent by one client stack through a peer and received by another, for every ordered pair of
python-qpid-proton, Qpid Proton C++ and rhea. The value received must equal the value sent, AMQP type included.

One case per (peer, sender stack, receiver stack, type family, section); the messages of one peer and pair go
over one sender link and one receiver link, once per session (conftest.py). A failure names each value that
differs, with what was sent and what came back, and the record's details carry them.
"""

from __future__ import annotations

import pytest

from harness.drivers import AMQP_STACKS

from .conftest import VIAS, key_of
from .values import FAMILIES, HEADER_PROPERTIES, SECTIONS, same, show, values_for

PAIRS = [(a, b) for a in AMQP_STACKS for b in AMQP_STACKS]
SPEC_OF_FAMILY = {
    "null-boolean": ["TYPES-PRIMITIVE-1"], "unsigned": ["TYPES-PRIMITIVE-1"], "signed": ["TYPES-PRIMITIVE-1"],
    "floating": ["TYPES-PRIMITIVE-1", "TYPES-FLOAT-1"], "decimal": ["TYPES-PRIMITIVE-1"],
    "char-timestamp-uuid": ["TYPES-PRIMITIVE-1"], "binary": ["TYPES-PRIMITIVE-1"],
    "string-symbol": ["TYPES-PRIMITIVE-1"], "compound": ["TYPES-COMPOUND-1"], "described": ["TYPES-DESCRIBED-1"],
}
SPEC_OF_SECTION = {"body": "TYPES-BODY-1", "application-properties": "TYPES-APP-PROPERTIES-1",
                   "message-annotations": "TYPES-ANNOTATIONS-1"}


def _cases():
    for via in VIAS:
        for sender, receiver in PAIRS:
            for family in FAMILIES:
                for section in SECTIONS:
                    if not values_for(family, section):
                        continue
                    marks = [pytest.mark.spec(*SPEC_OF_FAMILY[family], SPEC_OF_SECTION[section])]
                    yield pytest.param(via, sender, receiver, family, section, marks=marks,
                                       id=f"{via}-{sender}-to-{receiver}-{family}-{section}")


def _difference(name: str, sent, got, note: str | None = None) -> dict:
    return {"value": name, "sent": show(sent), "sent_type": (sent or {}).get("t"),
            "received": note or show(got), "received_type": (got or {}).get("t") if not note else None}


def _judge(exchange, via, sender, receiver, details, kind: str, section: str, checks) -> None:
    details.update({"type": kind, "section": section, "sender_stack": sender, "receiver_stack": receiver,
                    "via": via, "stack_versions": exchange.versions, "events": exchange.events})
    if exchange.error:
        details["error"] = exchange.error
        pytest.fail(f"{sender} -> {via} -> {receiver}: {exchange.error}", pytrace=False)
    failures = []
    for name, sent, got, note in checks:
        if note or not same(sent, got):
            failures.append(_difference(name, sent, got, note))
    details["values"] = len(checks)
    details["failures"] = failures
    if failures:
        lines = "; ".join(f"{f['value']}: sent {f['sent']}, received {f['received']}" for f in failures)
        pytest.fail(f"{sender} -> {via} -> {receiver}, {kind} in {section}: {len(failures)} of {len(checks)} "
                    f"values differ: {lines}"[:3000], pytrace=False)


def _not_delivered(exchange, index: int) -> str | None:
    outcome = exchange.outcomes[index] if index < len(exchange.outcomes) else None
    if outcome != "accepted":
        return f"(not delivered: the peer answered {outcome})"
    if exchange.received[index] is None:
        return "(not received)"
    return None


@pytest.mark.parametrize("via, sender, receiver, family, section", list(_cases()))
def test_value_round_trips(exchange, via, sender, receiver, family, section, details):
    ex = exchange(via, sender, receiver)
    indexes = [i for i, (f, sec, _) in enumerate(ex.sent) if f == family and sec == section]
    values = values_for(family, section)
    checks = []
    if section == "body":
        for (name, value), i in zip(values, indexes, strict=True):
            note = _not_delivered(ex, i)
            checks.append((name, value, None if note else ex.received[i].get("body"), note))
    else:
        i = indexes[0]
        note = _not_delivered(ex, i)
        field = "app_properties" if section == "application-properties" else "annotations"
        got = {} if note else {k.get("v"): v for k, v in (ex.received[i].get(field) or [])}
        for j, (name, value) in enumerate(values):
            key = key_of(j) if field == "app_properties" else f"x-opt-{key_of(j)}"
            checks.append((name, value, got.get(key), note or (None if key in got else "(key missing)")))
    _judge(ex, via, sender, receiver, details, family, section, checks)


HEADER_FIELDS = ("durable", "priority", "ttl")
PROPERTY_FIELDS = ("message_id", "correlation_id", "subject", "reply_to", "content_type", "group_id",
                   "creation_time")


def _as_typed(field: str, value):
    """Header and properties fields other than the ids have one type each (§3.2.1, §3.2.4): compared as such."""
    if value is None or isinstance(value, dict):
        return value
    kind = {"durable": "boolean", "priority": "ubyte", "ttl": "uint", "creation_time": "timestamp",
            "content_type": "symbol"}.get(field, "string")
    return {"t": kind, "v": value if kind in ("boolean", "string", "symbol") else str(value)}


@pytest.mark.spec("TYPES-HEADER-1", "TYPES-PROPERTIES-1", "TYPES-MESSAGE-ID-1")
@pytest.mark.parametrize("via, sender, receiver", [pytest.param(v, a, b, id=f"{v}-{a}-to-{b}")
                                                    for v in VIAS for a, b in PAIRS])
def test_header_and_properties_round_trip(exchange, via, sender, receiver, details):
    ex = exchange(via, sender, receiver)
    indexes = [i for i, (f, _, _) in enumerate(ex.sent) if f == "header-properties"]
    checks = []
    for (name, message), i in zip(HEADER_PROPERTIES, indexes, strict=True):
        note = _not_delivered(ex, i)
        got = ex.received[i] if not note else {}
        for part, fields in (("header", HEADER_FIELDS), ("properties", PROPERTY_FIELDS)):
            for f in fields:
                if f not in message.get(part, {}):
                    continue
                sent = _as_typed(f, message[part][f])
                received = _as_typed(f, (got.get(part) or {}).get(f))
                checks.append((f"{name}: {f}", sent, received, note or (None if received is not None else "(absent)")))
    _judge(ex, via, sender, receiver, details, "header-properties", "header-properties", checks)
