"""Reading and answering messages, for the broker's rules: a stored message's header fields and expiry, its
redelivery header, and a delivery's outcome.

peek (reference/peek.py) reads the fields without a full decode; these are the fallbacks by a full decode, and
the expiry rule: the header ttl, else the properties' absolute-expiry-time.
"""

from __future__ import annotations

import logging
import time

from proton import Condition, Delivery, Message

from ..peek import Peek

log = logging.getLogger("BROKER")


def decode(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def redelivered_by_decode(data: bytes, delivery_count: int) -> bytes:
    """Redelivery header by a full decode, for a header peek cannot read. A message this broker cannot decode
    goes out as it came (its header unchanged) rather than stopping the broker: it was accepted once."""
    try:
        message = decode(data)
    except Exception as exc:  # noqa: BLE001 - a stored message must never stop the dispatch of every queue
        log.warning("Redelivering a message whose header cannot be rewritten (%s): sent as it was stored", exc)
        return data
    message.delivery_count = delivery_count
    message.first_acquirer = False
    return message.encode()


def fields_of(message: Message) -> Peek:
    return Peek(durable=bool(message.durable), priority=message.priority, to=message.address,
                ttl_ms=int(round(message.ttl * 1000)) if message.ttl else None,
                absolute_expiry_ms=int(message.expiry_time * 1000) if message.expiry_time else None)


def expiry_of(fields: Peek) -> float | None:
    """Wall-clock expiry from the header ttl (ms) or the properties' absolute-expiry-time (ms since epoch)."""
    if fields.ttl_ms:
        return time.time() + fields.ttl_ms / 1000.0
    if fields.absolute_expiry_ms:
        return fields.absolute_expiry_ms / 1000.0
    return None


def answer(awaiting: list[tuple[Delivery, int | None]]) -> None:
    for dlv, state in awaiting:
        if state is None:
            dlv.settle()
        else:
            finish(dlv, state)


def finish(dlv: Delivery, state, condition: Condition | None = None) -> None:
    if condition is not None:
        dlv.local.condition = condition
    dlv.update(state)
    dlv.settle()
