"""What the reference router's rule modules' unit tests share (tests/test_router_<module>.py): a router made from a
few lines of configuration, and its ends of links on proton engine connections with no transport (credit and drain
are their local view), whose router state is dropped after each case.

A test module takes these by importing them; importing `forget_router_state` is what makes it run after each case."""

from __future__ import annotations

import pytest
from proton import Connection

from reference.links import forget_state
from reference.router.config import parse_config
from reference.router.router import Router

STANDALONE = "router {\n    mode: standalone\n    id: RT\n}\n"

_MADE: list[Connection] = []  # the engine connections the running case made


def new_connection() -> Connection:
    conn = Connection()
    _MADE.append(conn)
    return conn


@pytest.fixture(autouse=True)
def forget_router_state():
    """Drop the router's attributes from the connections a case made, and their links, as the server does when a
    transport closes (reference/links.py forget_state): held in proton's records, they would keep what a case
    made alive through C, where Python's collector cannot see it (tests/test_reference_memory.py counts them)."""
    yield
    while _MADE:
        forget_state(_MADE.pop(), Router.STATE_PREFIX)


def make_router(sections: str = "", **options) -> Router:
    """A standalone router RT with these configuration sections after its router section."""
    return Router(parse_config(STANDALONE + sections, "test.conf"), **options)


def router_end(kind: str, name: str, conn: Connection | None = None, open_it: bool = True):
    """The router's end of a link: a receiver for a client's sender (a producer), a sender for a client's receiver
    (a consumer), opened unless asked not to."""
    session = (conn or new_connection()).session()
    link = session.receiver(name) if kind == "receiver" else session.sender(name)
    if open_it:
        link.open()
    return link
