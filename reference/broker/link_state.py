"""What the broker keeps for each link a client or another broker attached: its role (producer, consumer, mirror
target, transaction coordinator), in a record of the broker's own (LinkState) rather than in loose attributes on
proton's link object.

proton's link holds one attribute, `broker_link_state`, that leads to the record, as the router's connections lead
to their ConnectionState. A table keyed by the link objects was tried first: every delivery then hashed the link
(proton hashes a wrapper by its C pointer, through cffi), which cost the broker 8-10% more CPU per message in
bench/broker.py (2026-12-07: 66-70 against 60-64 ms per 1,000 non-durable messages).

A link's record lives as long as its connection: it is forgotten when the connection's transport has closed
(Broker._transport_gone), after the broker has ended what the link held (Broker._connection_gone); the broker's
forget_state (prefix `broker_`) drops it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..links import links_of
from .model import Consumer, Producer

ATTRIBUTE = "broker_link_state"


@dataclass(eq=False)
class LinkState:
    producer: Producer | None = None  # a receiving link: where its messages go (intake.py)
    consumer: Consumer | None = None  # a sending link: the queue it consumes (dispatch.py)
    mirror_target: object = None  # an incoming mirror (mirror.py's MirrorTarget)
    coordinator: bool = False  # a transaction coordinator's control link (transactions.py)


class LinkStates:
    """The LinkState of every link the broker gave a role."""

    def __init__(self):
        self.kept = 0  # records made and not yet forgotten

    def of(self, link) -> LinkState:
        """`link`'s record, made when the broker first gives it a role."""
        state = getattr(link, ATTRIBUTE, None)
        if state is None:
            state = LinkState()
            setattr(link, ATTRIBUTE, state)
            self.kept += 1
        return state

    def get(self, link) -> LinkState:
        """`link`'s record; an empty one, not kept, for a link with no role here."""
        return getattr(link, ATTRIBUTE, None) or LinkState()

    def forget(self, conn) -> None:
        """The connection is gone: so are the records of its links."""
        for link in links_of(conn):
            if getattr(link, ATTRIBUTE, None) is not None:
                delattr(link, ATTRIBUTE)
                self.kept -= 1

    def __len__(self) -> int:
        return self.kept
