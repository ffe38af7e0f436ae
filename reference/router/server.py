"""`interop router -c FILE`: run the reference router in the foreground, like qdrouterd.

* A config error prints `FILE:LINE: what was expected` and exits 1 before anything listens.
* Logs go to stderr (or where the config's `log` sections say), in qdrouterd's `MODULE (level) text` style.
* Ready means: every listener accepts connections. The last start-up line says so, and each listener's line
  carries its real port (a listener may ask for port 0 to get a free one, which the harness relies on).
* SIGTERM / SIGINT close every connection, then exit 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

from proton.reactor import ApplicationEvent, Container, EventInjector

from .config import ConfigError, LogSection, RouterConfig, check_supported, load_config
from .router import Router

log = logging.getLogger("SERVER")

# qdrouterd's log levels, lowest first, mapped onto Python's.
_LEVELS = {
    "trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "notice": 25,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
}
SHUTDOWN_GRACE_S = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="interop router", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", required=True, help="qdrouterd.conf-syntax configuration file")
    parser.add_argument("--id", help="override the router id from the file")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        check_supported(config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.id:
        config.router.id = args.id
    setup_logging(config.logs)
    server = RouterServer(config)
    try:
        server.listen()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    return server.run()


def setup_logging(sections: list[LogSection]) -> None:
    for name, level in _LEVELS.items():  # qdrouterd prints lower-case level names
        logging.addLevelName(level, name)
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s (%(levelname)s) %(message)s"))
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("proton").setLevel(logging.WARNING)
    for section in sections:
        level = _level_of(section.enable)
        target = root if (section.module or "DEFAULT").upper() == "DEFAULT" else logging.getLogger(
            section.module.upper())
        target.setLevel(level)
        if section.output and section.output != "stderr":
            file_handler = logging.FileHandler(section.output)
            file_handler.setFormatter(handler.formatter)
            target.addHandler(file_handler)


def _level_of(enable: str | None) -> int:
    """qdrouterd `enable` values: `info+`, `debug`, `trace+`, `none`, or a comma list of them."""
    if not enable:
        return logging.INFO
    levels = []
    for word in str(enable).replace(" ", "").split(","):
        name = word.rstrip("+").lower()
        if name == "none":
            levels.append(logging.CRITICAL + 10)
        elif name in _LEVELS:
            levels.append(_LEVELS[name])
    return min(levels) if levels else logging.INFO


class RouterServer:
    def __init__(self, config: RouterConfig):
        self.config = config
        self.router = Router(config)
        self.container = Container(self.router)
        self.container.container_id = self.router.router_id
        self.acceptors = []
        self._injector = EventInjector()
        self.container.selectable(self._injector)
        self._stopping = False

    def listen(self) -> None:
        for listener in self.config.listeners:
            host = listener.host or "0.0.0.0"
            try:
                acceptor = self.container.listen(f"{host}:{listener.port}")
            except OSError as exc:
                raise ConfigError(self.config.path, listener.line,
                                  f"listener {listener.name or ''!r}: cannot listen on {host}:{listener.port}: {exc.strerror or exc}") from None
            port = _bound_port(acceptor) or listener.port
            self.acceptors.append(acceptor)
            log.log(25, "Listening on %s:%d (listener %r, role %s)", host, port,
                    listener.name or "", listener.role)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        self.router.on_shutdown = self._shutdown
        log.log(25, "Router %s started in %s mode; ready", self.router.router_id, self.config.router.mode)
        self.container.run()
        log.log(25, "Router %s stopped", self.router.router_id)
        return 0

    def _on_signal(self, signum, _frame):
        # Runs between bytecodes of the event loop: only hand the work to the loop through its pipe.
        self._injector.trigger(ApplicationEvent("router_shutdown"))

    def _shutdown(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.log(25, "Shutting down: closing %d listener(s) and all connections", len(self.acceptors))
        for acceptor in self.acceptors:
            acceptor.close()
        self._injector.close()
        open_connections = self.router.close_all_connections()
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        self.container.schedule(0.0, _StopWhenClosed(self.container, open_connections, deadline))


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
    sock = getattr(getattr(acceptor, "_selectable", None), "_delegate", None)
    try:
        return sock.getsockname()[1]
    except (AttributeError, OSError):
        return None


if __name__ == "__main__":
    sys.exit(main())
