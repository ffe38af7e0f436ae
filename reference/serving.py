"""What the reference router and broker share as foreground servers on proton's reactor.

* listeners on host:port, where port 0 gets a free port whose real number is logged;
* SIGTERM / SIGINT handed to the event loop through an injector pipe (a signal handler must not touch
  proton state), then every connection is closed and the loop stops once peers saw the close frames;
* qdrouterd-style log lines: `time MODULE (level) text`.
"""

from __future__ import annotations

import logging
import signal
import sys
import time

from proton.reactor import ApplicationEvent, EventInjector

from .loop import EngineLoop

log = logging.getLogger("SERVER")

LEVELS = {
    "trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "notice": 25,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
}
NOTICE = LEVELS["notice"]
SHUTDOWN_GRACE_S = 2.0


def setup_logging(level: int = logging.INFO) -> logging.Handler:
    for name, value in LEVELS.items():  # qdrouterd prints lower-case level names
        logging.addLevelName(value, name)
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s (%(levelname)s) %(message)s"))
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("proton").setLevel(logging.WARNING)
    return handler


class ForegroundServer:
    """An event loop with listeners, run in the foreground until SIGTERM/SIGINT.

    `handler` is the product's proton handler. It must offer `close_all_connections() -> list`, and it
    receives the `<event_name>` application event when a shutdown is requested (it calls back `shutdown`).
    """

    def __init__(self, handler, container_id: str, event_name: str, link_capabilities: bool = False,
                 attach_termini=False):
        self.handler = handler
        self.event_name = event_name
        # reference/loop.py, not proton's Container: the loop owns the sockets, so it can check a client's
        # bytes before proton-C sees them and keep one connection's error from stopping the process.
        self.container = EngineLoop(handler, link_capabilities=link_capabilities, attach_termini=attach_termini)
        self.container.container_id = container_id
        self.acceptors: list = []
        self._injector = EventInjector()
        self.container.selectable(self._injector)
        self._stopping = False

    def listen(self, host: str, port: int, *, tls=None, sasl=None, websocket=False) -> int:
        """Start listening; returns the real port. Raises OSError when the address cannot be bound. `tls` and
        `sasl` (reference/security) put TLS and a SASL server in front of the listener's connections;
        `websocket`: AMQP over WebSocket (reference/websocket.py) on this listener, after TLS when it has `tls`
        (wss); True, or a websocket.HttpOptions (qdrouterd's `websockets` and `healthz`)."""
        doors = {key: value for key, value in (("tls", tls), ("sasl", sasl)) if value is not None}
        if websocket:
            doors["websocket"] = websocket
        acceptor = self.container.listen(f"{host}:{port}", **doors)
        self.acceptors.append(acceptor)
        return _bound_port(acceptor) or port

    def run(self, ready_line: str) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        log.log(NOTICE, ready_line)
        self.container.run()
        return 0

    def _on_signal(self, _signum, _frame):
        self._injector.trigger(ApplicationEvent(self.event_name))

    def shutdown(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.log(NOTICE, "Shutting down: closing %d listener(s) and all connections", len(self.acceptors))
        for acceptor in self.acceptors:
            acceptor.close()
        self._injector.close()
        closing = self.handler.close_all_connections()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        self.container.schedule(0.0, _StopWhenClosed(self.container, closing, deadline))


class _StopWhenClosed:
    """Stops the event loop once peers have seen our close frames (or the grace period is over)."""

    def __init__(self, container, connections, deadline):
        self.container, self.connections, self.deadline = container, connections, deadline

    def on_timer_task(self, _event):
        pending = [c for c in self.connections if c.transport is not None and not c.transport.closed]
        if not pending or time.monotonic() >= self.deadline:
            self.container.stop()
        else:
            self.container.schedule(0.05, self)


def _bound_port(acceptor) -> int | None:
    """The port the kernel gave a listener (differs from the configured one when that was 0)."""
    return acceptor.port if isinstance(getattr(acceptor, "port", None), int) else None


def level_of(enable: str | None) -> int:
    """qdrouterd `enable` values: `info+`, `debug`, `trace+`, `none`, or a comma list of them."""
    if not enable:
        return logging.INFO
    levels = []
    for word in str(enable).replace(" ", "").split(","):
        name = word.rstrip("+").lower()
        if name == "none":
            levels.append(logging.CRITICAL + 10)
        elif name in LEVELS:
            levels.append(LEVELS[name])
    return min(levels) if levels else logging.INFO
