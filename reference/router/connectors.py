"""Outgoing connections a router keeps up: `connector` sections, redialled whenever they drop.

qdrouterd retries a failed connector for as long as it runs (003_9cdc7c48796dae4f.txt §12.1.4.2 note: it
"automatically attempts to reestablish the connection"). The delay starts short, so a restarted peer is
picked up quickly in tests, and backs off to a ceiling so a peer that stays away costs little.

A dialled connection the peer does not open within OPEN_DEADLINE_S is dropped and dialled again. A TCP
connection can be accepted and then never answered (seen: ActiveMQ Classic 6.3.1, behind a fault proxy, took
no notice of a redial for 60 s while it was still tearing down the router's previous connection under the
same container-id); without a deadline the connector would wait on it for as long as the socket stays up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from proton import Endpoint

from ..loop import abort_transport
from .config import Connector, RouterConfig
from .security import ConnectorDoor, connector_door

log = logging.getLogger("ROUTER")

FIRST_RETRY_S = 0.1
MAX_RETRY_S = 2.0
OPEN_DEADLINE_S = 10.0  # generous: a broker that is still warming up (Artemis's first AMQP connection) is slow


@dataclass(eq=False)
class Dialer:
    """One connector: its config, its current connection (if any) and its retry delay."""

    config: Connector
    door: ConnectorDoor | None = None  # its TLS and SASL settings (reference/router/security.py)
    connection: object = None
    delay: float = FIRST_RETRY_S
    removed: bool = False  # deleted through management: never dialled again

    @property
    def name(self) -> str:
        return self.config.name or f"{self.config.host}:{self.config.port}"


class Connectors:
    def __init__(self, router, configs: list[Connector], config: RouterConfig | None = None):
        self.router = router
        self.dialers = [Dialer(c, connector_door(config, c) if config is not None else None) for c in configs]
        self.container = None

    def add(self, config: Connector) -> Dialer:
        """A connector created through management: dialled now (once the router runs)."""
        dialer = Dialer(config, connector_door(self.router.config, config, self.router.ssl_profiles))
        self.dialers.append(dialer)
        if self.container is not None:
            self._dial(dialer)
        return dialer

    def remove(self, dialer: Dialer) -> None:
        """A connector deleted through management: its connection is closed and not dialled again."""
        dialer.removed = True
        if dialer in self.dialers:
            self.dialers.remove(dialer)
        conn, dialer.connection = dialer.connection, None
        if conn is not None and not conn.state & Endpoint.LOCAL_CLOSED:
            conn.close()
        log.info("Connector %r deleted", dialer.name)

    def start(self, container) -> None:
        self.container = container
        for dialer in self.dialers:
            self._dial(dialer)

    def _dial(self, dialer: Dialer) -> None:
        cfg = dialer.config
        door = dialer.door
        url = f"amqp://{cfg.host}:{cfg.port}"  # TLS comes from `tls=`: the loop reads only host and port
        if door is None:
            conn = self.container.connect(url, allowed_mechs="ANONYMOUS")
        else:
            conn = self.container.connect(url, allowed_mechs=door.mechanisms, user=door.user,
                                          password=door.password, tls=door.tls)
        conn.router_dialer = dialer
        conn.router_role = cfg.role
        dialer.connection = conn
        self.container.schedule(OPEN_DEADLINE_S, _OpenDeadline(self, dialer, conn))

    def _open_overdue(self, dialer: Dialer, conn) -> None:
        """The deadline of one dial: if that connection is still the dialer's and the peer has not opened it,
        close its transport. The transport's close comes back as `closed`, which redials."""
        if dialer.connection is not conn or conn.state & Endpoint.REMOTE_ACTIVE:
            return
        transport = conn.transport
        if transport is None:
            return
        log.warning("Connector %r: no open from the peer within %.0fs; dropping the connection and dialling again",
                    dialer.name, OPEN_DEADLINE_S)
        abort_transport(transport, f"no open from the peer within {OPEN_DEADLINE_S:.0f}s")

    def opened(self, conn) -> None:
        """The peer answered: reset the backoff."""
        dialer = getattr(conn, "router_dialer", None)
        if dialer is not None:
            dialer.delay = FIRST_RETRY_S
            log.info("Connector %r (%s) connected", dialer.name, dialer.config.role)

    def closed(self, conn) -> None:
        """The connection dropped or never came up: dial again after the current delay."""
        dialer = getattr(conn, "router_dialer", None)
        if dialer is None or dialer.connection != conn:
            return
        dialer.connection = None
        log.info("Connector %r lost; redialling in %.1fs", dialer.name, dialer.delay)
        self.container.schedule(dialer.delay, _Redial(self, dialer))
        dialer.delay = min(dialer.delay * 2, MAX_RETRY_S)



class _Redial:
    def __init__(self, connectors: Connectors, dialer: Dialer):
        self.connectors, self.dialer = connectors, dialer

    def on_timer_task(self, _event):
        if not self.dialer.removed:
            self.connectors._dial(self.dialer)


class _OpenDeadline:
    def __init__(self, connectors: Connectors, dialer: Dialer, conn):
        self.connectors, self.dialer, self.conn = connectors, dialer, conn

    def on_timer_task(self, _event):
        self.connectors._open_overdue(self.dialer, self.conn)
