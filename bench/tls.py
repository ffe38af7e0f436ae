"""TLS connection setup, side by side in one run: the reference router and a qdrouterd found on PATH.

    .venv/bin/python bench/tls.py [--connections N] [--repeats R]

One connection's setup is the time from the TCP connect to the router's AMQP open arriving: TCP, the TLS
handshake with a client certificate, SASL EXTERNAL, and the AMQP header and open exchange. That is what a
client of topology `security-router-tls` pays before its first attach (seed 001_987f9e02a7866228.txt's
client CA; issue 20's cost target: the reference's p50 at most 2x qdrouterd's).

The client is the same for both routers and kept cheap: a blocking socket, Python's `ssl`, the SASL EXTERNAL
frames from reference/security/sasl.py and proton's transport for the AMQP frames. Connections are made one at
a time; every repeat runs both routers in turn, the order alternating between repeats, because on 2 shared
cores only ratios taken in one run mean anything. The table gives p50 and p99 per router over all repeats,
each repeat's p50, and the ratio reference/qdrouterd of the p50s.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proton import Collector, Connection, Event, Transport  # noqa: E402

from harness.peers.base import PeerStartError, PeerUnavailable  # noqa: E402
from harness.peers.launch import start_topology  # noqa: E402
from harness.topology import load_topology, topology_path  # noqa: E402
from reference.security.sasl import SaslClient  # noqa: E402

TOPOLOGY = "security-router-tls"
VENDORS = ("reference", "qdrouterd")
TIMEOUT = 10.0


def client_context(running) -> ssl.SSLContext:
    cert = running.pki.issue("clients-ca", "bench-client", hostnames=(), purpose="client")
    ctx = ssl.create_default_context(cafile=str(running.pki.ca_file("clients-ca")))
    ctx.load_cert_chain(str(cert.cert), str(cert.key))
    return ctx


def one_setup(port: int, ctx: ssl.SSLContext) -> float:
    """Seconds from the TCP connect to the router's AMQP open."""
    start = time.perf_counter()
    raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with ctx.wrap_socket(raw, server_hostname="localhost") as sock:
        sasl = SaslClient("EXTERNAL")
        rest = b""
        while not sasl.done:
            sock.sendall(sasl.take_output())
            data = sock.recv(65536)
            if not data or sasl.failed:
                raise RuntimeError(f"SASL: {sasl.failed or 'the router closed the connection'}")
            rest = sasl.feed(data)
        sock.sendall(sasl.take_output())
        transport, connection, collector = Transport(Transport.CLIENT), Connection(), Collector()
        connection.collect(collector)
        transport.bind(connection)
        connection.open()
        if rest:
            transport.push(rest)
        while True:
            pending = transport.pending()
            if pending > 0:
                sock.sendall(transport.peek(pending))
                transport.pop(pending)
            while (event := collector.peek()) is not None:
                collector.pop()
                if event.type == Event.CONNECTION_REMOTE_OPEN:
                    elapsed = time.perf_counter() - start
                    return elapsed
            data = sock.recv(65536)
            if not data:
                raise RuntimeError("the router closed the connection before its open")
            transport.push(data)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/tls.py", description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200, help="connections per router per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats (default 3)")
    args = parser.parse_args(argv)
    topology = load_topology(topology_path(TOPOLOGY))
    samples: dict[str, list[float]] = {v: [] for v in VENDORS}
    medians: dict[str, list[float]] = {v: [] for v in VENDORS}
    print(f"{args.connections} TLS + SASL EXTERNAL + open setups per router per repeat, {args.repeats} repeats")
    for repeat in range(args.repeats):
        order = VENDORS if repeat % 2 == 0 else tuple(reversed(VENDORS))
        for vendor in order:
            try:
                running = start_topology(topology, {"router": vendor})
            except (PeerUnavailable, PeerStartError) as exc:
                print(f"{vendor}: not measured: {exc}")
                samples.pop(vendor, None)
                continue
            try:
                ctx = client_context(running)
                port = running["R1"].endpoints["clients"].port
                one_setup(port, ctx)  # the first connection pays for imports and caches on both sides
                times = [one_setup(port, ctx) for _ in range(args.connections)]
            finally:
                running.stop()
            samples.setdefault(vendor, []).extend(times)
            medians[vendor].append(statistics.median(times))
            print(f"  repeat {repeat + 1} {vendor:<10} p50 {statistics.median(times) * 1000:7.2f} ms")
    print(f"{'vendor':<10} {'p50 ms':>8} {'p99 ms':>8}  per-repeat p50 ms")
    for vendor, times in samples.items():
        if times:
            per = " ".join(f"{m * 1000:.2f}" for m in medians[vendor])
            print(f"{vendor:<10} {percentile(times, 0.5) * 1000:8.2f} {percentile(times, 0.99) * 1000:8.2f}  {per}")
    if samples.get("reference") and samples.get("qdrouterd"):
        ratio = percentile(samples["reference"], 0.5) / percentile(samples["qdrouterd"], 0.5)
        print(f"ratio reference/qdrouterd p50: {ratio:.2f} (target: at most 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
