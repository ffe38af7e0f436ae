"""The per-message proton calls of the router, on the engine's own pointers.

proton's Python classes wrap every delivery and link a handler touches in a Python object, with a reference
count and a record lookup each, and an attribute hung on one (`dlv.router_outbound = ...`) is a record write
through C: five wrappers and some 285 Python calls per routed message, most of the router's CPU. The message
path (receive, route, send, settle) needs none of that, so it calls proton-C directly on the pointers the
event carries; everything else (attach, detach, link routes, the mesh's control links) keeps the wrappers.

Pointers compare and hash by address, so a dict keyed by them finds the router's state for a link or a
delivery. A pointer is only valid while proton keeps the object: the router takes a reference on an inbound
delivery it keeps (`hold`) and lets go once it settled it (`release`), as proton's wrappers do.
"""

from __future__ import annotations

from cproton import (
    pn_decref,
    pn_delivery_aborted,
    pn_delivery_partial,
    pn_delivery_pending,
    pn_delivery_readable,
    pn_delivery_remote_state,
    pn_delivery_settle,
    pn_delivery_settled,
    pn_delivery_update,
    pn_event_delivery,
    pn_event_link,
    pn_incref,
    pn_link_advance,
    pn_link_credit,
    pn_link_flow,
    pn_link_get_drain,
    pn_link_session,
    pn_link_set_drain,
    pn_link_state,
    pn_session_outgoing_bytes,
)
from cproton_ffi import ffi, lib
from proton import Delivery, Endpoint

ACCEPTED = Delivery.ACCEPTED.value
RELEASED = Delivery.RELEASED.value
LOCAL_ACTIVE = int(Endpoint.LOCAL_ACTIVE)

__all__ = [
    "ACCEPTED", "RELEASED", "LOCAL_ACTIVE", "event_delivery", "event_link", "read_complete", "send_copy",
    "settled_by_peer", "remote_state", "settle", "accept_and_settle", "update", "hold", "release", "credit",
    "flow", "drain_mode", "set_drain_mode", "link_active", "link_session", "outgoing_bytes",
]

_from_buffer = ffi.from_buffer
_recv, _send, _new_delivery = lib.pn_link_recv, lib.pn_link_send, lib.pn_delivery

event_delivery = pn_event_delivery
event_link = pn_event_link
settled_by_peer = pn_delivery_settled  # the peer settled it (or, incoming, sent it pre-settled)
remote_state = pn_delivery_remote_state
settle = pn_delivery_settle
update = pn_delivery_update
hold = pn_incref
release = pn_decref
credit = pn_link_credit
flow = pn_link_flow
drain_mode = pn_link_get_drain
set_drain_mode = pn_link_set_drain


def read_complete(link, dlv):
    """The bytes of a complete, readable, not aborted delivery (and advance the link); None otherwise, and
    then nothing is consumed: the wrapper path handles partial and aborted deliveries."""
    if pn_delivery_partial(dlv) or pn_delivery_aborted(dlv) or not pn_delivery_readable(dlv):
        return None
    # cproton's pn_link_recv and pn_link_send wrappers, written out here: a Python call less per message each.
    size = pn_delivery_pending(dlv)
    data = bytearray(size)
    read = _recv(link, _from_buffer(data), size)
    if read < 0:  # end of stream or an error: what the wrapper path does with it is what it always did
        return None
    pn_link_advance(link)
    return data if read == size else data[:read]


def send_copy(link, tag: bytes, data):
    """A new delivery on a sending link, its whole message written; returns the delivery."""
    dlv = _new_delivery(link, (len(tag), _from_buffer(tag)))  # the tag as a pn_bytes_t
    _send(link, _from_buffer(data), len(data))
    pn_link_advance(link)
    return dlv


def accept_and_settle(dlv) -> None:
    pn_delivery_update(dlv, ACCEPTED)
    pn_delivery_settle(dlv)


def link_active(link) -> bool:
    return bool(pn_link_state(link) & LOCAL_ACTIVE)


link_session = pn_link_session
outgoing_bytes = pn_session_outgoing_bytes  # of a session: bytes it has not yet handed to the socket
