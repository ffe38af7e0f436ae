"""Transport security for the reference servers: TLS (tls.py), SASL (sasl.py) and users files (users.py).

The event loop (reference/loop.py) applies them per listener and per outgoing connection:
`EngineLoop.listen(url, tls=ServerTls(...), sasl=SaslPolicy(...))` and
`EngineLoop.connect(url, allowed_mechs=..., user=..., password=..., tls=ClientTls(...))`.
A handler reads who the peer authenticated as with `authenticated_user(connection)`.
"""

from __future__ import annotations

from .sasl import MECHANISMS, SaslPolicy
from .tls import ClientTls, ServerTls, TlsFailure


def authenticated_user(connection) -> str | None:
    """The identity the loop's SASL layer accepted for this accepted connection: the PLAIN user name, the
    EXTERNAL certificate's subject CN, or `anonymous`. None on a listener without a SASL policy (proton's
    own ANONYMOUS exchange, no identity checked) and before the exchange is over."""
    return getattr(connection, "security_user", None) if connection is not None else None


def peer_certificate_cn(connection) -> str | None:
    """The subject CN of the client certificate the connection's TLS layer verified, or None."""
    return getattr(connection, "security_peer_cn", None) if connection is not None else None


__all__ = ["ClientTls", "ServerTls", "SaslPolicy", "TlsFailure", "MECHANISMS", "authenticated_user",
           "peer_certificate_cn"]
