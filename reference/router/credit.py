"""Producer credit on the reference router: who gets it, when it is withdrawn, and what waits meanwhile.

003_9cdc7c48796dae4f.txt §12.1.1.1: the router never stores messages, so a producer gets credit only while a
consumer of its address is reachable (here, on another router of the network, or the management agent), and
when the last one goes its unused credit is asked back (a drain). At most a window (the link capacity) of its
messages is in flight. A fallback address (§12.1.4.3) counts as reachable while its fallback destination is.

An in-autolink's (a broker queue's) messages that arrive with no consumer reachable are parked, unsettled, in
order, for the next consumer, rather than released back to the broker (_park).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from proton import Endpoint

from . import raw
from .keys import FALLBACK, plain_address
from .state import Producer

if TYPE_CHECKING:
    from .router import Router


class Credit:
    """Grants, withdraws and parks for the router's producers."""

    def __init__(self, router: Router):
        self.router = router  # its address_config (management replaces it) and _reachable_remote (the network's)
        self.consumers = router.consumers
        self.producers = router.producers
        self.agent = router.agent

    def _reachable(self, key: str, fallback: bool = True) -> bool:
        if self.consumers.get(key) or key in self.router._reachable_remote or self.agent.is_mine(key):
            return True
        if fallback and key == plain_address(key):
            section = self.router.address_config.lookup(key)
            if section is not None and section.enable_fallback:
                return self._reachable(FALLBACK + key, fallback=False)
        return False

    def _credit_changed(self, key: str) -> None:
        """Destinations for `key` came or went: open or withdraw credit of the producers it concerns."""
        affected = set(self.producers.get(key, ()))
        if key.startswith(FALLBACK):
            affected |= self.producers.get(plain_address(key), set())
        for producer in affected:
            if self._reachable(producer.route_key, producer.allow_fallback):
                self._unpark(producer)
                self._top_up(producer)
            else:
                self._revoke_one(producer)

    def _park(self, producer: Producer, dlv, data) -> None:
        """Keep an in-autolink's message that has nowhere to go, unsettled, until a consumer comes back.

        Released instead, it would go back to the broker, which puts it back in the queue as it sees fit: the
        fallback and waypoint queues keep their order (003 §12.1.4.3: the order of messages stored at a fallback
        destination is preserved), but a broker that puts each released message back at the head turned 5, 6
        into 6, 5 when both had come on credit still open after the last consumer left. What is parked counts
        against the link's capacity, so no more is asked for meanwhile."""
        raw.hold(dlv)
        producer.parked.append((dlv, data))
        producer.undelivered += 1

    def _unpark(self, producer: Producer) -> None:
        """A consumer is reachable again: route the parked messages first, in the order they came."""
        parked, producer.parked = producer.parked, deque()
        for dlv, data in parked:
            producer.undelivered -= 1
            self._route(producer, dlv, data, unparking=True)
            raw.release(dlv)  # _route holds what it keeps

    def _route(self, producer: Producer, dlv, data, unparking: bool = False):
        """Routing is forwarding.py's: where parked messages go once a consumer is reachable again."""
        self.router.forwarding._route(producer, dlv, data, unparking)

    def _top_up(self, producer: Producer):
        """Keep a producer's credit window full while its address can be delivered to."""
        link = producer.impl
        credit = raw.credit(link)
        want = producer.capacity - producer.undelivered - credit
        # Grant in batches (a quarter window at least) unless the producer ran dry. Asked after every message,
        # so what decides that no grant is due comes first, and is cheap.
        if (want <= 0 or credit and want * 4 < producer.capacity) and not producer.draining:
            return
        if producer.closed or not raw.link_active(link):
            return
        if producer.route_key is not None and not self._reachable(producer.route_key, producer.allow_fallback):
            return
        if producer.draining:
            # A destination is back while our drain is unanswered (the producer may answer it late, or its
            # answer may still be on the wire): call the drain off now, with a window, rather than wait for an
            # answer that may never come (issue 53: a producer that answered 0.2 s or more later never got credit
            # again, as this returned on the credit it still seemed to hold). AMQP 1.0 §2.6.7: a flow with drain
            # false ends the drain; an answer that crosses it only lowers the credit seen here, and its flow event
            # tops the window up again. The flow must change the credit for proton to send it at all, hence 1.
            producer.draining = False
            raw.set_drain_mode(link, False)
            want = max(want, 1)
        raw.flow(link, want)

    def _revoke_one(self, producer: Producer):
        """No destination left: ask the producer to give back unused credit (drain), so none is sent on."""
        link = producer.link
        if not producer.closed and link.state & Endpoint.LOCAL_ACTIVE and link.credit > 0:
            link.drain(0)
            producer.draining = True
