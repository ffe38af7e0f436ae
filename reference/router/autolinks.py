"""Autolinks: links the router itself keeps attached to a broker queue (003_9cdc7c48796dae4f.txt §12.1.4).

* An `out` autolink is a sending link to the broker: to the router it is one more consumer of the address
  (phase 0 of a waypoint address, or the fallback destination of an `enableFallback` address), so
  messages producers send are stored on the broker queue.
* An `in` autolink is a receiving link from the broker queue: to the router it is one more producer,
  whose messages go to the address's client consumers (phase 1 of a waypoint), never back to the broker.
  Like any producer it is given credit only while some consumer is reachable, so the broker keeps the
  messages until then (store and forward) and a consumer that comes back drains them in order.

Each autolink is attached when the connection it names (connector/listener name, or the broker's
container id) comes up, and attached again after every reconnect. A lost connection drops the autolink
like any consumer: copies never sent come back released, copies in flight come back modified.
"""

from __future__ import annotations

import logging

from proton import Endpoint

from ..links import links_of
from .config import AutoLink
from .keys import FALLBACK, PHASE1
from .state import connection_name

log = logging.getLogger("ROUTER")

REATTACH_DELAY_S = 0.1


class AutoLinks:
    def __init__(self, router, configs: list[AutoLink]):
        self.router = router
        self.configs = list(configs)  # management may add and remove some (live configuration)

    def add(self, config: AutoLink, connections) -> None:
        """An autolink created through management: attached now on the connection it names, if that is up."""
        self.configs.append(config)
        for conn in connections:
            if self._names(config, conn):
                self._attach(config, conn)

    def remove(self, config: AutoLink, connections) -> list:
        """An autolink deleted through management: its links, for the router to drop and detach."""
        self.configs.remove(config)
        return [link for conn in connections for link in links_of(conn)
                if getattr(link, "router_autolink", None) is config]

    def link_of(self, config: AutoLink):
        """The autolink's link while it is attached and routing (None otherwise)."""
        for conn in self.router.open_connections():
            for link in links_of(conn):
                if getattr(link, "router_autolink", None) is config and link.state & Endpoint.REMOTE_ACTIVE \
                        and link.state & Endpoint.LOCAL_ACTIVE and (getattr(link, "router_consumer", None)
                                                                    or getattr(link, "router_producer", None)):
                    return link
        return None

    def connection_up(self, conn) -> None:
        for config in self.configs:
            if self._names(config, conn):
                self._attach(config, conn)

    def _names(self, config: AutoLink, conn) -> bool:
        if config.connection:
            return config.connection == connection_name(conn)
        return bool(config.container_id) and config.container_id == conn.remote_container

    def _attach(self, config: AutoLink, conn) -> None:
        session = conn.session()
        session.open()
        external = config.external_address or config.address
        name = f"{self.router.router_id}.autolink.{config.address}.{config.direction}"
        if config.direction == "out":
            link = session.sender(name)
            link.target.address = external
        else:
            link = session.receiver(name)
            link.source.address = external
        link.router_autolink = config
        link.open()
        log.info("Autolink %s %r -> %r attaching on %s", config.direction, config.address, external,
                 connection_name(conn, conn.remote_container))

    def attached(self, link) -> None:
        """The broker answered our attach: start routing through the autolink (or log its refusal)."""
        config: AutoLink = link.router_autolink
        terminus = link.remote_target if link.is_sender else link.remote_source
        if link.remote_condition is not None or terminus.address is None and not terminus.dynamic:
            log.warning("Autolink %s %r refused by the broker: %s", config.direction, config.address,
                        link.remote_condition)
            return
        router = self.router
        section = router.address_config.lookup(config.address)
        if config.direction == "out":
            key = FALLBACK + config.address if config.fallback else config.address
            router.add_consumer(link, key)
        else:
            key = PHASE1 + config.address if section is not None and section.waypoint else config.address
            router.add_producer(link, key, allow_fallback=False)
        log.info("Autolink %s %r active (routing key %r)", config.direction, config.address, key)

    def session_ended(self, links, conn, container) -> None:
        """The broker ended the session of some autolinks: attach them again on a new session shortly."""
        for link in links:
            config = getattr(link, "router_autolink", None)
            if config is not None and container is not None:
                log.info("Autolink %s %r lost with its session; attaching again", config.direction, config.address)
                container.schedule(REATTACH_DELAY_S, _Reattach(self, config, conn))

    def is_autolink(self, link) -> bool:
        return getattr(link, "router_autolink", None) is not None and link.state & Endpoint.LOCAL_ACTIVE


class _Reattach:
    def __init__(self, autolinks: AutoLinks, config: AutoLink, conn):
        self.autolinks, self.config, self.conn = autolinks, config, conn

    def on_timer_task(self, _event):
        if self.config not in self.autolinks.configs:
            return  # deleted meanwhile
        if self.conn.state & Endpoint.LOCAL_ACTIVE and self.conn.state & Endpoint.REMOTE_ACTIVE:
            self.autolinks._attach(self.config, self.conn)
