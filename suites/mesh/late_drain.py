"""A producer that answers its router's drain late, and a consumer that comes back: shared by the mesh and edge
cases of MESH-CREDIT-3 (003_9cdc7c48796dae4f.txt §12.1.1.1: a producer is given credit while a consumer can be
reached).

The producer is a python-qpid-proton application stepped by its own thread (harness.stepped_client). Its first
consumer, on another router, takes 10 messages and leaves; a router that withdraws credit then asks the producer
for it back (a drain). The application answers inside the flow event that asked (delay 0), or `delay` seconds
later from its own thread. Such an answer may never reach the router: this client writes it only when something
else wakes the connection (seen on the wire with PN_TRACE_FRM, issue 53), even inside the event. Then a consumer
comes back on the far router; the producer must get credit again and its next message must reach that consumer.
qdrouterd keeps idle credit and asks for none back: there the producer never sees a drain, and its first message
after the consumer returns may come back released before the consumer's address has reached its router.
"""

from __future__ import annotations

from harness.stepped_client import SteppedClient

LATE_DRAIN_DELAYS = [0, 0.2, 2]
LATE_DRAIN_IDS = ["in-the-flow-event", "0.2s-later", "2s-later"]
ROUTE_TIMEOUT = 15  # address changes between routers take well under a second; leave room
SETTLE_S = 0.5  # after the answer: time for it to reach the router, if it is written at all


def answers_drain_late(topology, producer_at: str, consumer_at: str, address: str, delay: float) -> dict:
    """Run the case on `topology` (its clients `producer_at` and `consumer_at` on different routers); assert
    what MESH-CREDIT-3 requires and return figures for the result record."""
    app = SteppedClient(answer_drains=delay == 0)
    try:
        far = app.connect(topology.client_url(consumer_at))
        first = app.receiver(far, address, "rx-1", credit=20)
        near = app.connect(topology.client_url(producer_at))
        tx = app.sender(near, address, "tx-1")
        app.step_until(lambda: tx.credit > 0, ROUTE_TIMEOUT, "credit for the producer once the consumer is known")
        sent = [app.send(tx, f"m-{i}") for i in range(10)]
        app.step_until(lambda: all(d.remote_state for d in sent), ROUTE_TIMEOUT, "outcomes of the first 10")
        assert {app.outcome(d) for d in sent} == {"accepted"}
        for d in sent:
            d.settle()

        first.close()
        app.step_until(lambda: first.state & first.REMOTE_CLOSED, ROUTE_TIMEOUT, "the consumer's detach answered")
        # The drain may have come by now or not (nor at all, from qdrouterd); drained() is a no-op without one.
        app.step_for(delay)
        tx.drained()
        app.step_for(SETTLE_S)

        app.receiver(far, address, "rx-2", credit=20)  # a consumer comes back on the far router
        tries: list = []

        def accepted():
            if tries and app.outcome(tries[-1]) == "accepted":
                return True
            if tx.drain_mode and tx.credit > 0:
                tx.drained()  # a later drain: answered at once, nothing is queued
            if tx.credit > 0 and (not tries or app.outcome(tries[-1])):
                tries.append(app.send(tx, f"back-{len(tries)}"))  # one at a time, until one is accepted
            return False

        app.step_until(accepted, ROUTE_TIMEOUT, "a message from the producer to be accepted by the new consumer",
                       describe=lambda: (f"credit {tx.credit}, drain {tx.drain_mode}, drains asked "
                                         f"{app.drains_asked}, outcomes {[app.outcome(d) for d in tries]}"))
        outcomes = [app.outcome(d) for d in tries]
        assert set(outcomes) <= {"accepted", "released"}, f"every message settled plainly: {outcomes}"
        last = f"back-{len(tries) - 1}"
        app.step_until(lambda: last in app.received["rx-2"], ROUTE_TIMEOUT, "the accepted message at the consumer",
                       describe=lambda: f"rx-2 got {app.received['rx-2']}")
        assert app.received["rx-2"] == [last], "the new consumer gets exactly the accepted message"
        assert app.received["rx-1"] == [f"m-{i}" for i in range(10)], "the consumer that left got nothing more"
        return {"drains_asked": app.drains_asked, "outcomes": outcomes}
    finally:
        app.close()
