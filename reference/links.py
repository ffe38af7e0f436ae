"""AMQP link helpers shared by the reference router and broker."""

from __future__ import annotations

import logging

from proton import Condition, Terminus


def refuse(link, name: str, description: str, log: logging.Logger) -> None:
    """Refuse an attach the AMQP way (1.0 §2.6.3): answer with a null terminus on the side the peer asked
    for, so it never counts as attached, then detach with the error."""
    link.source.type = Terminus.UNSPECIFIED
    link.target.type = Terminus.UNSPECIFIED
    link.condition = Condition(name, description)
    link.open()
    link.close()
    log.warning("Refused link %r: %s", link.name, description)


def read_message(link, dlv) -> bytes | None:
    """The bytes of a complete incoming delivery (and advance the link), or None while it is still partial.
    An aborted delivery is settled and dropped (None)."""
    if dlv.aborted:
        dlv.settle()
        return None
    if dlv.partial or not dlv.readable:
        return None
    data = link.recv(dlv.pending)
    link.advance()
    return data
