"""What the broker keeps for each link a client or another broker attached: its role (producer, consumer, mirror
target, transaction coordinator), held by the broker in its own records rather than on proton's link objects.

A link's record lives as long as its connection: it is forgotten when the connection's transport has closed
(Broker._transport_gone), after the broker has ended what the link held (Broker._connection_gone). proton keeps a
link object until its connection goes, so a link's key cannot be reused by another link before that.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..links import links_of
from .model import Consumer, Producer


@dataclass(eq=False)
class LinkState:
    producer: Producer | None = None  # a receiving link: where its messages go (intake.py)
    consumer: Consumer | None = None  # a sending link: the queue it consumes (dispatch.py)
    mirror_target: object = None  # an incoming mirror (mirror.py's MirrorTarget)
    coordinator: bool = False  # a transaction coordinator's control link (transactions.py)


class LinkStates:
    """The LinkState of every link the broker gave a role, by link."""

    def __init__(self):
        self._states: dict = {}

    def of(self, link) -> LinkState:
        """`link`'s record, made when the broker first gives it a role."""
        state = self._states.get(link)
        if state is None:
            state = self._states[link] = LinkState()
        return state

    def get(self, link) -> LinkState:
        """`link`'s record; an empty one, not kept, for a link with no role here."""
        return self._states.get(link) or LinkState()

    def forget(self, conn) -> None:
        """The connection is gone: so are the records of its links."""
        for link in links_of(conn):
            self._states.pop(link, None)

    def __len__(self) -> int:
        return len(self._states)
