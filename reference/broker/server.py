"""`interop broker -c broker.xml`: run the reference broker in the foreground.

* A config error prints `FILE:LINE: what was expected` and exits 1 before anything listens.
* Start-up order, like the router: bind every acceptor (and the management port) first, so that a port in use
  is the one and only stderr line (exit 1, no journal touched, nothing logged); then create the configured
  queues and recover the journal; then log the acceptors and the ready line, and serve.
* The journal (persistence-enabled) lives in `journal-directory`, relative to the config file's folder.
* Ready means every acceptor accepts connections; each acceptor's line carries its real port. An acceptor
  whose `protocols` exclude AMQP is not opened; a notice line says so.
* `--management-port N` (0 = any free port) serves management as JSON over HTTP on 127.0.0.1:
  - `GET /queues` and `GET /queues/NAME` -> name, address, routing, durable, depth, available, in_flight,
    consumers, internal (a mirror's store-and-forward queue). The harness reads depths and consumer counts there;
  - `DELETE /queues/NAME` destroys a queue and its messages (Artemis's destroyQueue) -> {"deleted": NAME};
    409 while the queue has consumers (Artemis refuses too); a mirrored deleteQueue removes them;
  - `GET /broker-connections` -> per `<amqp-connection>`: name, uri, started, connected, target, attempts
    (failed dials since the last success), connects, gave_up, attempt_times and targets_tried (the last 50
    dials), mirror_queue, last_error (why the connection or a link of it last failed, with the target's
    condition: `amqp:unauthorized-access: ...` when its user lacks a permission there) and errors (how many times);
  - `POST /broker-connections/NAME/start` starts one (Artemis's startBrokerConnection) -> 200, or 404 for an
    unknown name, 409 when it is already started.
* AMQP management, as Artemis speaks it (management_amqp.py): request messages to broker.xml's
  `management-address` (`activemq.management`) on any acceptor, answered on their reply-to; the harness manages
  the reference broker that way, the HTTP endpoint above stays for the CLI and the dial history it shows.
* Security on (`<security-enabled>`, config.py): every acceptor runs the event loop's SASL server, PLAIN only,
  against artemis-users.properties; an acceptor with `sslEnabled=true` is TLS only, from its PEM files, loaded
  before anything listens (a bad file is the one stderr line, `FILE:LINE: acceptor ...`, exit 1).
* SIGTERM / SIGINT close every connection, flush the journal, then exit 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from .. import serving
from .broker import Broker
from .config import ConfigError, load_config
from .journal import Journal

log = logging.getLogger("SERVER")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="interop broker", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", required=True, help="Artemis broker.xml (the subset documented)")
    parser.add_argument("--management-port", type=int, default=None, metavar="PORT",
                        help="serve queue statistics over HTTP on 127.0.0.1:PORT (0 = a free port)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    for connection in config.broker_connections:  # TLS files load now: a bad one is a start-up error
        if connection.tls is not None:
            from ..security import ClientTls

            t = connection.tls
            try:
                ClientTls(ca=t.trust_store, verify_hostname=t.verify_host, cert=t.key_store, key=t.key_store,
                          password=t.key_password).context()
            except (OSError, ValueError) as exc:
                print(f"{config.path}:{connection.line}: amqp-connection {connection.name!r}: cannot load its TLS "
                      f"files: {' '.join(str(exc).split())}", file=sys.stderr)
                return 1
    serving.setup_logging()
    broker = Broker(config)
    # link_capabilities: mirrors announce themselves with attach capabilities proton-C does not handle
    server = serving.ForegroundServer(broker, config.name, "broker_shutdown", link_capabilities=True)
    broker.on_shutdown = server.shutdown
    ports = []
    for acceptor in config.acceptors:
        try:
            doors = _doors(config, acceptor)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: a key that does not decrypt, ...
            print(f"{config.path}:{acceptor.line}: acceptor {acceptor.name!r}: cannot load its TLS files: "
                  f"{' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        try:
            ports.append(server.listen(acceptor.host, acceptor.port, **doors))
        except OSError as exc:
            print(f"{config.path}:{acceptor.line}: acceptor {acceptor.name!r}: cannot listen on "
                  f"{acceptor.host}:{acceptor.port}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    http = None
    if args.management_port is not None:
        try:
            http = ThreadingHTTPServer(("127.0.0.1", args.management_port), _handler(broker))
        except OSError as exc:
            print(f"--management-port {args.management_port}: cannot listen on 127.0.0.1:{args.management_port}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 1
    journal = None
    if config.persistence_enabled:
        directory = Path(config.journal_directory)
        if not directory.is_absolute():
            directory = Path(args.config).resolve().parent / directory
        journal = Journal(directory, datasync=config.journal_datasync)
    recovered, torn = broker.start(journal)
    if journal is not None:
        log.log(serving.NOTICE, "Journal %s: %d message(s) recovered%s", journal.path, recovered,
                f", {torn} byte(s) of torn tail discarded" if torn else "")
    for acceptor, port in zip(config.acceptors, ports, strict=True):
        doors = [d for d, on in (("TLS", acceptor.tls), ("SASL PLAIN", config.security_enabled)) if on]
        log.log(serving.NOTICE, "Listening on %s:%d (acceptor %r, protocols AMQP)%s", acceptor.host, port,
                acceptor.name, f" with {', '.join(doors)}" if doors else "")
    for skipped in config.skipped_acceptors:
        log.log(serving.NOTICE, "Acceptor %r not opened: protocols=%s does not include AMQP (the reference broker "
                "serves AMQP only)", skipped.name, skipped.protocols)
    if http is not None:
        threading.Thread(target=http.serve_forever, name="management", daemon=True).start()
        log.log(serving.NOTICE, "Management on 127.0.0.1:%d", http.server_address[1])
    code = server.run(f"Broker {config.name} started; ready")
    broker.connections.stop()
    broker.close_journal()
    log.log(serving.NOTICE, "Broker %s stopped", config.name)
    return code


def _doors(config, acceptor) -> dict:
    """The SASL server and TLS of an acceptor, for ForegroundServer.listen: with security on, SASL PLAIN
    against artemis-users.properties and nothing else (no ANONYMOUS; a client that skips SASL is refused);
    with sslEnabled, TLS from the acceptor's PEM files (keyStorePath holds both key and chain)."""
    doors: dict = {}
    if config.security_enabled:
        from ..security import SaslPolicy

        doors["sasl"] = SaslPolicy(mechanisms=("PLAIN",), authenticate=True, users=dict(config.users))
    if acceptor.tls is not None:
        from ..security import ServerTls

        tls = acceptor.tls
        doors["tls"] = ServerTls(cert=tls.key_store, key=tls.key_store, password=tls.key_password,
                                 ca=tls.trust_store, verify=tls.client_certs, require=True)
        doors["tls"].context()  # now, so that a bad file is a start-up error and not every client's
    return doors


def _handler(broker: Broker) -> type[BaseHTTPRequestHandler]:
    """The management endpoint's request handler: queue statistics as JSON."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            parts = self._parts()
            if parts == ["broker-connections"]:
                self._reply(200, self._on_loop(broker.connections.status))
                return
            rows = broker.stats()
            if parts == ["queues"]:
                self._reply(200, rows)
            elif len(parts) == 2 and parts[0] == "queues":
                row = next((r for r in rows if r["name"] == parts[1]), None)
                self._reply(200, row) if row else self._reply(404, {"error": f"no queue {parts[1]!r}"})
            else:
                self._reply(404, {"error": "expected /queues, /queues/NAME or /broker-connections"})

        def do_POST(self):  # noqa: N802
            parts = self._parts()
            if len(parts) == 3 and parts[0] == "broker-connections" and parts[2] == "start":
                self._reply(*self._on_loop(lambda: broker.connections.start(parts[1])))
            else:
                self._reply(404, {"error": "expected POST /broker-connections/NAME/start"})

        def do_DELETE(self):  # noqa: N802
            parts = self._parts()
            if len(parts) != 2 or parts[0] != "queues":
                self._reply(404, {"error": "expected DELETE /queues/NAME"})
                return

            def delete():
                queue = broker.queues.get(parts[1])
                if queue is None or queue.internal:
                    return 404, {"error": f"no queue {parts[1]!r}"}
                if queue.consumers:  # Artemis's destroyQueue(name) refuses too (removeConsumers false)
                    return 409, {"error": f"queue {parts[1]!r} has {len(queue.consumers)} consumer(s)"}
                broker.delete_queue(queue)
                return 200, {"deleted": parts[1]}

            self._reply(*self._on_loop(delete))

        def _parts(self) -> list[str]:
            return [unquote(p) for p in self.path.split("?")[0].strip("/").split("/") if p]

        @staticmethod
        def _on_loop(function):
            return broker.call_soon(function).result(timeout=10)

        def _reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args):  # keep stderr for the broker's own log
            pass

    return Handler


if __name__ == "__main__":
    sys.exit(main())
