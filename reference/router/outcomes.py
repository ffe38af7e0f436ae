"""Outcomes back to producers (003_9cdc7c48796dae4f.txt §12.1.1.4): a consumer's disposition of a copy, or the
fate of a copy the router could not deliver, becomes the outcome of the producer's delivery.

The router settles pre-settled deliveries itself. An unsettled delivery with one copy takes its consumer's
outcome, with its details (modified's flags, rejected's error); a multicast one takes the outcomes of all its
copies combined (settlement.combine_multicast). A copy never sent is released; a copy sent to a consumer that
left without settling it is in doubt: modified, delivery-failed. A producer's credit for a delivery comes back
once its copies are out and, for a client's unsettled delivery, once its outcome is known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proton import Condition, Delivery

from . import raw
from .settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED, combine_multicast
from .state import Inbound, Outbound

if TYPE_CHECKING:
    from .router import Router

_TERMINAL = {
    Delivery.ACCEPTED: ACCEPTED,
    Delivery.REJECTED: REJECTED,
    Delivery.RELEASED: RELEASED,
    Delivery.MODIFIED: MODIFIED,
}
_STATE_OF = {name: state for state, name in _TERMINAL.items()}
_OUTCOME_OF = {state.value: name for state, name in _TERMINAL.items()}  # remote state number -> outcome


class Outcomes:
    """Carries outcomes from consumers back to producers, and gives producers their credit back."""

    def __init__(self, router: Router):
        self.remote_paths = router.remote_paths  # a copy to a neighbour counts outstanding on its routers' paths
        self.outbound_of = router.outbound_of
        self._dirty = router._dirty  # connections the pump serves at the end of this batch of I/O
        self._top_up = router.credit._top_up
        self._count_outcome = router.counters._count_outcome

    def _consumer_disposition(self, out: Outbound, dlv):
        """A consumer's disposition for a copy (`dlv` is the engine's delivery)."""
        state = raw.remote_state(dlv)
        outcome = _OUTCOME_OF.get(state)
        if outcome is None:
            if not raw.settled_by_peer(dlv):
                return  # a non-terminal state (received): wait for the outcome
            outcome = MODIFIED  # settled with no outcome: it reached the consumer, we cannot say more
        consumer = out.consumer
        consumer.counts[outcome] += 1
        consumer.in_flight.discard(out)
        del self.outbound_of[dlv]
        # The consumer's details (modified's flags, rejected's error) travel only with those outcomes.
        remote = Delivery.wrap(dlv).remote if outcome in (MODIFIED, REJECTED) else None
        self._copy_final(out, outcome, remote=remote)
        raw.settle(dlv)
        if not consumer.closed:
            self._dirty.add(consumer.conn)  # balanced choice and drain may depend on this

    def _copy_sent_or_dropped(self, inbound: Inbound):
        """One copy left the router's queues. Once all have, a producer's credit for the delivery comes back
        when it was pre-settled or came from a neighbour router (`credit_on_send`); a client's unsettled one
        gives it back only when its outcome is known too (_copy_final).

        So at most a window of a client's messages is in flight per producer, as with qdrouterd: returning it on
        sending let a fast producer fill the consumer's whole window and wait there (p50 ~280 ms against
        qdrouterd's ~50 ms with Python clients). Between routers that bound is already kept by the ingress
        router, and the window only limits what waits here for a consumer's credit: tying it to the outcome
        too made a mesh as slow as one window per outcome round trip through both routers. qdrouterd, too,
        replenishes inter-router credit without waiting for settlement."""
        inbound.unsent -= 1
        if inbound.unsent == 0 and (inbound.credit_on_send or inbound.done):
            inbound.producer.undelivered -= 1
            self._top_up(inbound.producer)

    def _copy_final(self, out: Outbound, outcome: str, remote=None):
        for rid in out.dests:
            path = self.remote_paths.get(rid)
            if path is not None:
                path.outstanding -= 1
        inbound = out.inbound
        if inbound.presettled or inbound.done:
            return
        if inbound.multicast:
            inbound.outcomes.append(outcome)
            if len(inbound.outcomes) < inbound.copies:
                return
            outcome, remote = combine_multicast(inbound.outcomes), None
        inbound.done = True
        if inbound.unsent == 0 and not inbound.credit_on_send:  # every copy is out and the outcome known
            inbound.producer.undelivered -= 1
            self._top_up(inbound.producer)
        if inbound.producer.closed:
            raw.release(inbound.delivery)
            return  # nobody left to tell
        finish(inbound.delivery, outcome, remote=remote)
        self._count_outcome(inbound.producer, outcome)


def finish(impl, outcome: str, remote=None, condition: Condition | None = None, held: bool = True):
    """Set a terminal outcome on an inbound delivery (the engine's, see raw.py), copying the consumer's details,
    and settle it; let go of the router's reference on it (raw.hold) when it `held` one."""
    if outcome == ACCEPTED:
        raw.accept_and_settle(impl)
    elif outcome == RELEASED:
        raw.update(impl, raw.RELEASED)
        raw.settle(impl)
    else:
        finish_with_details(Delivery.wrap(impl), outcome, remote, condition)
    if held:
        raw.release(impl)


def finish_with_details(dlv: Delivery, outcome: str, remote, condition: Condition | None):
    local = dlv.local
    if outcome == MODIFIED:
        if remote is not None:
            local.failed = remote.failed
            local.undeliverable = remote.undeliverable
            if remote.annotations:
                local.annotations = remote.annotations
        else:
            local.failed = True  # in doubt: the consumer may have seen it
    elif outcome == REJECTED:
        cond = condition or (remote.condition if remote is not None else None)
        if cond is not None:
            local.condition = cond
    dlv.update(_STATE_OF[outcome])
    dlv.settle()
