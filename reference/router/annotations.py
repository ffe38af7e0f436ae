"""The router's own message annotations: where a copy sent to a neighbour router is going, and their removal
when a copy leaves the network for a client.

A copy to a neighbour carries the address key it goes to (`x-opt-interop.to`) and the routers it must still
reach (`x-opt-interop.dests`, interrouter.py), and the next router routes by those: 003_9cdc7c48796dae4f.txt
§12.1.1.3 gives each multicast consumer in the network one copy, so the ingress router names the destination
routers of each copy and every hop splits them by next hop. The message's other bytes travel as they came:
sections are spliced, not decoded and encoded (reference/peek.py). AMQP 1.0 §3.2.3 lets an intermediary add
annotations; a client gets the message as its producer sent it, without the router's.
"""

from __future__ import annotations

from dataclasses import dataclass

from proton import Message, symbol

from ..peek import annotation_keys, annotations, encode_annotations, replace_section, with_annotations
from .interrouter import DESTS, TO
from .state import CACHE_LIMIT as _CACHE_LIMIT


class RouterAnnotations:
    """Reads and writes the router's annotations, each distinct section or destination encoded or read once."""

    def __init__(self):
        self._encoded_annotations: dict = {}  # (key, router ids) -> peek.Annotations for copies to neighbours
        self._routing_by_section: dict = {}  # a neighbour's message-annotations section -> _Routing

    def _annotations_for(self, key: str, routers: list[str] | None):
        """The annotations a copy for `routers` carries (for an edge, None: only where it goes), encoded once per
        destination, not per message."""
        cache_key = (key, *routers) if routers is not None else (key,)
        found = self._encoded_annotations.get(cache_key)
        if found is None:
            if len(self._encoded_annotations) >= _CACHE_LIMIT:  # addresses come and go: keep it bounded
                self._encoded_annotations.clear()
            values = {str(TO): key} if routers is None else {str(TO): key, str(DESTS): sorted(routers)}
            found = self._encoded_annotations[cache_key] = encode_annotations(values)
        return found

    def _routing_of(self, data, view) -> _Routing | None:
        """The router's annotations in a message's message-annotations section (None: not readable without a
        decode). A neighbour's copies for one address and set of routers carry the very same section, so it is
        read once and then found by its bytes."""
        section = bytes(data[view.annotations_at:view.annotations_end])  # (a bytearray when read by proton's wrapper)
        found = self._routing_by_section.get(section)
        if found is None:
            values, keys = annotations(section, _ROUTING_KEYS), annotation_keys(section)
            if values is None or keys is None:
                return None
            if len(self._routing_by_section) >= _CACHE_LIMIT:
                self._routing_by_section.clear()
            found = self._routing_by_section[section] = routing_from(values, keys)
        return found

    def _without_router_annotations(self, data, view, routing: _Routing) -> bytes:
        """A neighbour's copy as its producer sent it, for a client: without the router's annotations, as
        qdrouterd strips its own (`stripAnnotations`, by default) and as one router delivers it. AMQP 1.0
        §3.2.3 lets an intermediary add annotations; leaving ours on made every consumer behind a mesh decode
        two it never asked for. (`routing`: what _route read of the section, NO_ROUTING when it has none.)"""
        if view is not None:
            if not view.has_annotations:
                return data
            if routing.only_router_keys:  # read from this very section by _routing_of
                return replace_section(data, view, b"")
        return _annotated(data, encode_annotations({}), drop=_ROUTING_KEYS)

    def _annotated(self, data, view, values, drop: tuple = ()) -> bytes:
        """The message with the router's annotations `values` set and `drop` removed, other bytes as they came.
        A section that holds nothing but the router's own annotations (a neighbour's copy), or none, is replaced
        whole; one with other annotations in it is merged, entry by entry (_annotated)."""
        if self._section_is_ours(data, view):
            return replace_section(data, view, values.section)
        return _annotated(data, values, drop)

    def _section_is_ours(self, data, view) -> bool:
        """May the message's message-annotations section be replaced whole: it has none (`view` says where one
        goes), or one with nothing but the router's own annotations in it?"""
        if view is None:
            return False
        if not view.has_annotations:
            return True
        routing = self._routing_of(data, view)
        return routing is not None and routing.only_router_keys


_ROUTING_KEYS = (str(TO), str(DESTS))


@dataclass(frozen=True)
class _Routing:
    """The router's own annotations on a neighbour's copy: the address key it goes to, the routers it must
    still reach (None: not said, e.g. from our interior uplink), and whether the section holds nothing else."""

    to: str | None
    dests: frozenset | None
    only_router_keys: bool


NO_ROUTING = _Routing(None, None, True)


def routing_from(values: dict, keys=None) -> _Routing:
    """From the router's annotations `values` (the section's `keys`, when it holds others; default: those)."""
    dests = values.get(DESTS)
    return _Routing(values.get(TO), None if DESTS not in values else frozenset(dests or ()),
                    all(k in _ROUTING_KEYS for k in (values.keys() if keys is None else keys)))


def _annotated(data, values, drop: tuple = ()) -> bytes:
    """The message with the router's annotations (a dict, or peek.Annotations) set and `drop` removed, its other
    bytes as they came (reference/peek.py); a message peek cannot walk is decoded and encoded whole."""
    if isinstance(values, dict):
        values = encode_annotations({str(k): v for k, v in values.items()})
    spliced = with_annotations(data, values, tuple(str(k) for k in drop))
    if spliced is not None:
        return spliced
    message = Message()
    message.decode(data)
    message.annotations = {**(message.annotations or {}), **{symbol(k): v for k, v in values.values.items()}}
    for key in drop:
        message.annotations.pop(key, None)
    return message.encode()
