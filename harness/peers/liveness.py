"""Does a running peer still serve? Asked on the wire: it must answer an AMQP protocol header.

A peer whose process is alive can still be lost to the run: a deadlock, an event loop stuck in a call, a JVM
in a stop-the-world pause that never ends. Its listen socket stays open and the kernel completes TCP
handshakes for it, so a client's connection is accepted and then waits, and every case on that peer fails
after its own timeout. The one thing any AMQP 1.0 peer does, before any authentication, is answer a protocol
header with one of its own (AMQP 1.0 part 2, section 2.2, "Version Negotiation"): `AMQP` then the protocol id
and version. Which header it sends back (plain AMQP, SASL, TLS, or the version it prefers) does not matter
here; that it sends one within the deadline does.
"""

from __future__ import annotations

import socket
import ssl
import time

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"  # protocol id 0 (AMQP), version 1.0.0
HEADER_SIZE = len(AMQP_HEADER)


def amqp_silence(host: str, port: int, timeout: float, tls: bool = False) -> str | None:
    """None when whatever listens on host:port answers an AMQP protocol header within `timeout` seconds;
    otherwise why not, in the words of Peer.down_reason (`it ...`: they follow "peer R1 is down: "). `tls`: the
    listener speaks TLS from the first byte (amqps), so the header goes inside a TLS session; its certificate is
    not checked (the question is whether the peer answers, not whom to trust). A plain header there is not AMQP
    to the server, which closes: a healthy TLS listener would be taken for a dead one."""
    where = f"{host}:{port}"
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
        if tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            sock = context.wrap_socket(sock)
    except ConnectionRefusedError:
        return f"it refuses connections on {where}"
    except TimeoutError:
        return f"it does not accept connections on {where} within {timeout:g}s"
    except ssl.SSLError:
        return None  # it answered the handshake, if only to refuse it (a listener that wants a client certificate)
    except OSError as exc:
        return f"it cannot be reached on {where}: {exc.strerror or exc}"
    answer = b""
    with sock:
        try:
            sock.sendall(AMQP_HEADER)
            while len(answer) < HEADER_SIZE and (remaining := deadline - time.monotonic()) > 0:
                sock.settimeout(remaining)
                chunk = sock.recv(HEADER_SIZE - len(answer))
                if not chunk:
                    return f"it closed a connection on {where} without an AMQP protocol header (after {answer!r})"
                answer += chunk
        except TimeoutError:
            pass
        except OSError as exc:  # e.g. reset by a peer that is going down
            return f"it broke a connection on {where} before answering an AMQP protocol header: {exc.strerror or exc}"
    if len(answer) < HEADER_SIZE:
        return (f"it accepts connections on {where} but sent no AMQP protocol header within {timeout:g}s "
                f"(hung{'; it sent only ' + repr(answer) if answer else ''})")
    if not answer.startswith(b"AMQP"):
        return f"it answered on {where} with {answer!r}, not an AMQP protocol header (another program on its port?)"
    return None
