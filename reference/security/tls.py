"""TLS for the event loop's own sockets: Python's `ssl` module over memory BIOs (AMQP 1.0 part 5 §5.2).

The loop owns its sockets (reference/loop.py), so TLS sits between the socket and the SASL/AMQP bytes as an
`ssl.SSLObject`: ciphertext read from the socket goes in, plaintext comes out for the SASL layer, and the
transport's output goes the other way. The handshake advances whenever bytes arrive, so it never blocks and
never polls.

`ServerTls` and `ClientTls` are what a listener and a connector are given; each builds its `ssl.SSLContext`
once. The `protocols` value is qdrouterd's: a space-separated list such as `TLSv1.2 TLSv1.3`, read as the
lowest and highest version allowed.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

VERIFY = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
TLS_RECORD_HANDSHAKE = 0x16  # the first byte of a ClientHello: how an optional-TLS listener tells TLS apart


class TlsFailure(Exception):
    """The TLS layer failed (handshake or record); the message says why, for the log and the peer's condition."""


def _versions(ctx: ssl.SSLContext, protocols: str | None) -> None:
    if not protocols:
        return
    names = protocols.replace(",", " ").split()
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown:
        raise ValueError(f"unknown TLS protocol(s) {unknown}: expected some of {list(_VERSIONS)}")
    chosen = sorted(_VERSIONS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = chosen[0], chosen[-1]


@dataclass(frozen=True)
class ServerTls:
    """A listener's TLS: its certificate and key (the key may be encrypted with `password`), the CA that
    verifies client certificates, whether one is asked for (`verify`: none | optional | required), and
    whether a client that does not start TLS is refused (`require`, qdrouterd's requireSsl)."""

    cert: str
    key: str
    password: str | None = None
    ca: str | None = None
    verify: str = "none"
    require: bool = True
    ciphers: str | None = None
    protocols: str | None = None
    _ctx: list = field(default_factory=list, compare=False, repr=False)

    def context(self) -> ssl.SSLContext:
        """Built on first use (OSError / ssl.SSLError / ValueError on bad files or values)."""
        if not self._ctx:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.cert, self.key, self.password)
            if self.ca:
                ctx.load_verify_locations(self.ca)
            if self.verify not in VERIFY:
                raise ValueError(f"verify {self.verify!r}: expected one of {list(VERIFY)}")
            ctx.verify_mode = VERIFY[self.verify]
            if self.ciphers:
                ctx.set_ciphers(self.ciphers)
            _versions(ctx, self.protocols)
            self._ctx.append(ctx)
        return self._ctx[0]


@dataclass(frozen=True)
class ClientTls:
    """A connector's TLS: the CA it trusts (None: the system's), whether the server's certificate must name
    the host dialled (`verify_hostname`), and an optional client certificate for mutual authentication."""

    ca: str | None = None
    verify_hostname: bool = True
    cert: str | None = None
    key: str | None = None
    password: str | None = None
    ciphers: str | None = None
    protocols: str | None = None
    _ctx: list = field(default_factory=list, compare=False, repr=False)

    def context(self) -> ssl.SSLContext:
        if not self._ctx:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if self.ca:
                ctx.load_verify_locations(self.ca)
            else:
                ctx.load_default_certs()
            ctx.check_hostname = self.verify_hostname
            ctx.verify_mode = ssl.CERT_REQUIRED
            if self.cert:
                ctx.load_cert_chain(self.cert, self.key or self.cert, self.password)
            if self.ciphers:
                ctx.set_ciphers(self.ciphers)
            _versions(ctx, self.protocols)
            self._ctx.append(ctx)
        return self._ctx[0]


class TlsLayer:
    """One connection's TLS state. `feed(ciphertext) -> plaintext`; `wrap(plaintext)` queues data to encrypt;
    `take_output()` returns the ciphertext to send (handshake records included). Raises TlsFailure."""

    def __init__(self, ctx: ssl.SSLContext, server: bool, hostname: str | None = None):
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=server,
                                server_hostname=None if server else hostname)
        self.ready = False  # handshake complete
        self.closed = False  # the peer sent close_notify
        if not server:
            self._handshake()  # the ClientHello goes out with the first write

    def _handshake(self) -> None:
        try:
            self.obj.do_handshake()
            self.ready = True
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLError, ssl.CertificateError) as exc:
            raise TlsFailure(_reason(exc)) from None

    def feed(self, data: bytes) -> bytes:
        self.incoming.write(data)
        if not self.ready:
            self._handshake()
            if not self.ready:
                return b""
        chunks = []
        while True:
            try:
                chunk = self.obj.read(65536)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.closed = True
                break
            except ssl.SSLError as exc:
                raise TlsFailure(_reason(exc)) from None
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def wrap(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # SSL_write may take less than all of it (one record at a time): the rest must follow
            try:
                written = self.obj.write(view)
            except ssl.SSLError as exc:
                raise TlsFailure(_reason(exc)) from None
            view = view[written:]

    def take_output(self) -> bytes:
        return self.outgoing.read()

    def peer_cn(self) -> str | None:
        """The verified client certificate's subject CN (EXTERNAL's identity), or None."""
        cert = self.obj.getpeercert() if self.ready else None
        for rdn in (cert or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    return value
        return None


def _reason(exc: Exception) -> str:
    reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
    return f"TLS: {reason}"
