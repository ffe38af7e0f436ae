"""The reference broker's records of its links (reference/broker/link_state.py): a link's role is kept by the
broker, not on proton's link object, and goes with the link's connection.

Source: none of the seeds; this pins the bookkeeping that keeps the broker's memory bounded as connections come
and go (tests/test_reference_memory.py checks the same end to end).
"""

from __future__ import annotations

from reference.broker.link_state import LinkStates


class Conn:
    """A connection as links_of walks it: link_head(0), then each link's next(0)."""

    def __init__(self, count: int):
        self.links = [Link(self, n) for n in range(count)]

    def link_head(self, _mask):
        return self.links[0] if self.links else None


class Link:
    def __init__(self, conn, n):
        self.conn, self.n = conn, n

    def next(self, _mask):
        later = self.conn.links[self.n + 1:]
        return later[0] if later else None


def test_a_link_with_no_role_has_an_empty_record_that_is_not_kept():
    states = LinkStates()
    link = Conn(1).links[0]
    assert states.get(link).producer is None and not states.get(link).coordinator
    assert len(states) == 0


def test_a_links_record_is_made_once_and_found_again():
    states = LinkStates()
    link = Conn(1).links[0]
    states.of(link).coordinator = True
    assert states.of(link) is states.get(link) and states.get(link).coordinator


def test_a_connection_that_goes_takes_its_links_records_and_no_other():
    states = LinkStates()
    gone, staying = Conn(2), Conn(1)
    for link in gone.links + staying.links:
        states.of(link).coordinator = True
    states.forget(gone)
    assert len(states) == 1 and states.get(staying.links[0]).coordinator
    assert not states.get(gone.links[1]).coordinator
