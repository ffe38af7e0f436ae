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
import sys

from .. import serving
from ..websocket import HttpOptions
from .config import ConfigError, LogSection, RouterConfig, check_supported, load_config
from .router import Router
from .security import check_doors, listener_door

log = logging.getLogger("SERVER")

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="interop router", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", required=True, help="qdrouterd.conf-syntax configuration file")
    parser.add_argument("--id", help="override the router id from the file")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        check_supported(config)
        check_doors(config)
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
    handler = serving.setup_logging()
    root = logging.getLogger()
    for section in sections:
        level = serving.level_of(section.enable)
        target = root if (section.module or "DEFAULT").upper() == "DEFAULT" else logging.getLogger(
            section.module.upper())
        target.setLevel(level)
        if section.output and section.output != "stderr":
            file_handler = logging.FileHandler(section.output)
            file_handler.setFormatter(handler.formatter)
            target.addHandler(file_handler)


def _http(listener) -> HttpOptions | None:
    """What an `http: yes` listener serves (qdrouterd's `websockets` and `healthz`); None: plain AMQP."""
    return HttpOptions(websockets=listener.websockets, healthz=listener.healthz) if listener.http else None


class RouterServer:
    def __init__(self, config: RouterConfig):
        self.config = config
        self.router = Router(config)
        # attach_termini: a link route passes an attach on as the client sent it (reference/attach_caps.py); only
        # connections made while the router may link-route are tapped
        self.server = serving.ForegroundServer(self.router, self.router.router_id, "router_shutdown",
                                               attach_termini=lambda: self.router.link_router.may_route())
        self.router.on_shutdown = self.server.shutdown
        self.router.listen_hook = self._listen_live
        self.router.listening_port = self._port_of

    def _port_of(self, listener) -> int | None:
        for acceptor, section in self.router.listener_of.items():
            if section is listener:
                port = getattr(acceptor, "port", None)
                return port if isinstance(port, int) else None
        return None

    def _listen_live(self, listener) -> None:
        """A listener created through management: listening from now on (raises OSError when it cannot bind, and
        ConfigError when the sslProfile it names is not the router's or its files cannot be used)."""
        host = listener.host or "0.0.0.0"
        door = listener_door(self.config, listener, self.router.ssl_profiles)
        port = self.server.listen(host, listener.port, tls=door.tls, sasl=door.sasl, websocket=_http(listener))
        self.router.listener_of[self.server.acceptors[-1]] = listener
        log.log(serving.NOTICE, "Listening on %s:%d (listener %r, role %s)%s", host, port, listener.name or "",
                listener.role, " with AMQP over WebSocket" if listener.http else "")

    def listen(self) -> None:
        for listener in self.config.listeners:
            host = listener.host or "0.0.0.0"
            door = listener_door(self.config, listener)
            try:
                port = self.server.listen(host, listener.port, tls=door.tls, sasl=door.sasl,
                                          websocket=_http(listener))
                self.router.listener_of[self.server.acceptors[-1]] = listener
            except OSError as exc:
                raise ConfigError(self.config.path, listener.line,
                                  f"listener {listener.name or ''!r}: cannot listen on {host}:{listener.port}: "
                                  f"{exc.strerror or exc}") from None
            ws = "AMQP over WebSocket" if listener.websockets else "HTTP, WebSocket upgrades refused (websockets: no)"
            doors = [*([ws] if listener.http else []), *(["TLS"] if door.tls else []),
                     *([f"SASL {' '.join(door.sasl.mechanisms)}"] if door.sasl else [])]
            log.log(serving.NOTICE, "Listening on %s:%d (listener %r, role %s)%s", host, port,
                    listener.name or "", listener.role, f" with {', '.join(doors)}" if doors else "")

    def run(self) -> int:
        code = self.server.run(f"Router {self.router.router_id} started in {self.config.router.mode} mode; ready")
        log.log(serving.NOTICE, "Router %s stopped", self.router.router_id)
        return code


if __name__ == "__main__":
    sys.exit(main())
