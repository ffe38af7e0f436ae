"""AMQP link and connection helpers shared by the reference router and broker."""

from __future__ import annotations

import logging

from proton import Condition, Data, Endpoint, Terminus, symbol


def answer_refused(link) -> None:
    """Answer an attach that is refused the AMQP way (1.0 §2.6.3): with null termini, so the peer never counts the
    link as attached; the detach with the error is the caller's to send. (A link's own termini are empty ones, not
    null, until they are set: answered as they are, a refused link looks attached.)"""
    link.source.type = Terminus.UNSPECIFIED
    link.target.type = Terminus.UNSPECIFIED
    link.open()


def refuse(link, name: str, description: str, log: logging.Logger) -> None:
    """Refuse an attach: answered with null termini (answer_refused), then detached with the error."""
    link.condition = Condition(name, description)
    answer_refused(link)
    link.close()
    log.warning("Refused link %r: %s", link.name, description)


def terminus_symbols(data) -> set[str]:
    """A terminus's capabilities (a single symbol or an array of them) as plain strings."""
    if data is None:
        return set()
    data.rewind()
    if data.next() is None:
        return set()
    value = data.get_object()
    values = getattr(value, "elements", None)
    return {str(v) for v in (values if values is not None else [value])}


def put_symbols(data, names) -> None:
    """Write `names` as an array of symbols (terminus capabilities), as Artemis and qdrouterd send them."""
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for name in names:
        data.put_symbol(symbol(name))
    data.exit()


def link_property(properties, key: str):
    """A link property by name: proton's symbol keys compare and hash as the plain strings they are."""
    return (properties or {}).get(key)


def read_message(link, dlv) -> bytes | None:
    """The bytes of a complete incoming delivery (and advance the link), or None while it is still partial.
    An aborted delivery is settled and dropped (None)."""
    if dlv.aborted:
        dlv.settle()
        return None
    if dlv.partial or not dlv.readable:
        return None
    data = link.recv(dlv.pending)
    link.advance()
    return data


def forget_state(conn, prefix: str) -> None:
    """Drop the attributes named `<prefix>...` a server hung on a connection that is gone and on its links.

    proton keeps a wrapper's attributes in the C object's record, which holds them strongly; a consumer object
    kept there that holds its link back (as the servers' do) is a cycle through C that Python's collector
    cannot see, so neither the connection nor anything it carried was ever freed: the reference router grew by
    some 7 KB per closed connection under the frame fuzzer. Call once the transport has closed."""
    for endpoint in [conn, *links_of(conn)]:
        attrs = endpoint.__dict__.get("_attrs")  # the wrapper's attribute dict (proton's Wrapper)
        for name in [n for n in attrs or () if n.startswith(prefix)]:
            del attrs[name]


def links_of(conn):
    """Every link of a connection, whatever its session or state (proton's own list of them)."""
    link = conn.link_head(0)
    while link:
        yield link
        link = link.next(0)


class ServedConnections:
    """The connection lifecycle the reference router and broker share, mixed into their proton handlers.

    A server keeps every connection it sees in `self._connections` (its on_connection_init adds them), answers
    a peer's session, treats a remote close and a lost transport alike, and closes them all on shutdown. It
    names STATE_PREFIX, the prefix of the attributes it hangs on connections and links, and implements
    `_connection_gone(conn)`, which runs on a remote close and again when the transport closes (so a second
    call must be harmless); `_transport_gone(conn)` is for what only a closed transport ends (a server's
    own dialers, which redial from there).
    """

    STATE_PREFIX: str
    _connections: set

    def _connection_gone(self, conn) -> None:
        raise NotImplementedError

    def _transport_gone(self, conn) -> None:
        """Nothing by default."""

    def on_session_remote_open(self, event):
        if event.session.state & Endpoint.LOCAL_UNINIT:
            event.session.open()

    def on_connection_remote_close(self, event):
        self._connection_gone(event.connection)
        event.connection.close()

    def on_transport_closed(self, event):
        conn = event.connection
        if conn is None:
            return
        self._connection_gone(conn)
        self._transport_gone(conn)
        # Forget it now: proton frees a connection (CONNECTION_FINAL) only once nothing holds it, so keeping it
        # in this set until FINAL kept every connection ever closed, with its links and state (the frame fuzzer
        # saw the router's memory grow by some 7 KB per hostile connection).
        self._connections.discard(conn)
        forget_state(conn, self.STATE_PREFIX)

    def on_connection_final(self, event):
        self._connections.discard(event.connection)

    def close_all_connections(self) -> list:
        """Close every open connection (the peers see a clean close); returns them."""
        closing = [conn for conn in self._connections if conn.state & Endpoint.LOCAL_ACTIVE]
        for conn in closing:
            conn.close()
        return closing
