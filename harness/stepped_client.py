"""A python-qpid-proton client stepped by the calling thread, as an application with no loop thread of its own.

harness.clients runs its proton loop on a thread of its own and does what it is asked inside that loop's
events. Some cases are about when an application's own calls happen relative to the events it reacts to: a
producer that answers a router's drain (`Sender.drained()`) some time after the flow that asked for it, from
outside any handler, as an application thread does. Nothing happens here between the steps the case takes
(`step_until`, `step_for`), so each call lands exactly where the case puts it.

Such an answer is not always on the wire at once: proton writes what `drained()` changed only when something
else wakes that connection (issue 53: a python-qpid-proton producer answering 0.2 s after the drain had no flow
frame written until the router sent it one). A peer must not depend on when, or whether, the answer comes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from proton import Delivery, Endpoint, Message
from proton.handlers import MessagingHandler
from proton.reactor import AtLeastOnce, Container

from .wait import WaitTimeout

# By number: remote_state is an int or a DispositionType, which hash differently
_OUTCOMES = {int(Delivery.ACCEPTED): "accepted", int(Delivery.REJECTED): "rejected",
             int(Delivery.RELEASED): "released", int(Delivery.MODIFIED): "modified"}
STEP_S = 0.05  # how long one step may wait for I/O: short, so a condition is seen soon after it holds


class SteppedClient(MessagingHandler):
    """Connections, senders and receivers on one proton Container that only moves inside `step_*`.

    Receivers accept and settle what they get and keep the bodies in `received[link name]`; senders are
    at-least-once, with no automatic credit or drain handling (the case does what it means to)."""

    def __init__(self, answer_drains: bool = False) -> None:
        """`answer_drains`: a sender asked to drain hands its credit back inside the flow event that asked, as a
        handler-driven application does; otherwise only when the case calls `drained()`."""
        super().__init__(prefetch=0, auto_accept=False, auto_settle=False)
        self.answer_drains = answer_drains
        self.drains_asked = 0  # flow events that asked a sender of this client to drain
        self.container = Container(self)
        self.container.timeout = STEP_S
        self.container.start()
        self.received: dict[str, list] = {}
        self._connections: list = []

    def connect(self, url: str):
        conn = self.container.connect(url, allowed_mechs="ANONYMOUS")
        self._connections.append(conn)
        return conn

    def sender(self, conn, address: str, name: str):
        return self.container.create_sender(conn, address, name=name, options=AtLeastOnce())

    def receiver(self, conn, address: str, name: str, credit: int):
        link = self.container.create_receiver(conn, address, name=name)
        self.received[name] = []
        link.flow(credit)
        return link

    def on_link_flow(self, event):
        link = event.link
        if link.is_sender and link.drain_mode and link.credit > 0:
            self.drains_asked += 1
            if self.answer_drains:
                link.drained()

    def on_message(self, event):
        self.received.setdefault(event.link.name, []).append(event.message.body)
        event.delivery.update(Delivery.ACCEPTED)
        event.delivery.settle()

    @staticmethod
    def send(sender, body) -> Delivery:
        return sender.send(Message(body=body))

    @staticmethod
    def outcome(delivery: Delivery) -> str | None:
        """The peer's outcome as a word (accepted, released, ...), None while it has given none."""
        state = delivery.remote_state
        return _OUTCOMES.get(int(state), str(state)) if state else None

    def step_until(self, predicate: Callable[[], object], timeout: float, what: str,
                   describe: Callable[[], str] | None = None):
        """Step the loop until `predicate()` is truthy (returned) or `timeout` passes (WaitTimeout naming `what`
        and `describe()`): harness.wait.wait_for for a loop that only this thread moves."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                seen = describe() if describe is not None else repr(value)
                raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; last seen: {seen}")
            self.container.process()

    def step_for(self, seconds: float) -> None:
        """Keep the loop moving (reading, answering, recording) for `seconds`: the time an application takes
        before its next call, which is the case's input, not a wait for a state."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.container.process()

    def close(self, timeout: float = 5.0) -> None:
        """Close every connection (waiting up to `timeout` for the peers' answers), then the container's sockets."""
        for conn in self._connections:
            conn.close()
        try:
            self.step_until(lambda: all(c.state & Endpoint.REMOTE_CLOSED for c in self._connections), timeout,
                            "the peers to answer close")
        except WaitTimeout:
            pass  # a peer that does not answer close must not hang the test run: its sockets close anyway
        self.container.stop()
        deadline = time.monotonic() + timeout
        while self.container.process() and time.monotonic() < deadline:
            pass
