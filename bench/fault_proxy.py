"""Fault proxy figures: loopback throughput and added round-trip latency with no toxic, against a direct connection.

    .venv/bin/python bench/fault_proxy.py [--megabytes 512] [--echoes 5000] [--toxiproxy]

Starts the fault proxy server (`start_fault_proxy`, this project's unless --toxiproxy asks for the real
toxiproxy-server) and, in a separate process, a sink server and an echo server on loopback. Then:

- throughput: 1 MB writes into the sink, direct and through the proxy; the sink acknowledges once it has read
  every byte, so the figure is end to end (MB = 10^6 bytes);
- latency: 64-byte echoes on one connection, one at a time, direct and through the proxy; the proxy's added
  p50/p99 is the through-proxy percentile minus the direct one.

Bounded: a fixed byte count and echo count, a few seconds in all. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import percentile  # noqa: E402
from harness.faults import start_fault_proxy  # noqa: E402

CHUNK = 1024 * 1024
ECHO_SIZE = 64


def _sink(conn: socket.socket) -> None:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    header = b""
    while len(header) < 8:
        part = conn.recv(8 - len(header))
        if not part:
            return
        header += part
    (remaining,) = struct.unpack("!Q", header)
    while remaining:
        n = conn.recv_into(view, min(remaining, CHUNK))
        if not n:
            return
        remaining -= n
    conn.sendall(b"!")
    conn.close()


def _echo(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = conn.recv(65536)
        if not data:
            conn.close()
            return
        conn.sendall(data)


def _serve(handler, listener: socket.socket) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handler, args=(conn,), daemon=True).start()


def servers_main(pipe) -> None:
    sink, echo = socket.socket(), socket.socket()
    for s in (sink, echo):
        s.bind(("127.0.0.1", 0))
        s.listen(16)
    pipe.send((sink.getsockname()[1], echo.getsockname()[1]))
    threading.Thread(target=_serve, args=(_sink, sink), daemon=True).start()
    _serve(_echo, echo)


def throughput(port: int, megabytes: int) -> float:
    payload = b"\x5a" * CHUNK
    total = megabytes * CHUNK
    with socket.create_connection(("127.0.0.1", port)) as conn:
        t0 = time.perf_counter()
        conn.sendall(struct.pack("!Q", total))
        for _ in range(megabytes):
            conn.sendall(payload)
        if conn.recv(1) != b"!":
            raise RuntimeError("sink closed before acknowledging")
        elapsed = time.perf_counter() - t0
    return total / elapsed / 1e6


def round_trips(port: int, count: int) -> list[float]:
    message = b"e" * ECHO_SIZE
    samples = []
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(count + count // 10):
            t0 = time.perf_counter()
            conn.sendall(message)
            got = 0
            while got < ECHO_SIZE:
                got += len(conn.recv(ECHO_SIZE - got))
            if i >= count // 10:  # the first tenth warms up
                samples.append(time.perf_counter() - t0)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=512, help="bytes to push per throughput run, in MiB")
    parser.add_argument("--echoes", type=int, default=5000, help="64-byte round trips per latency run")
    parser.add_argument("--toxiproxy", action="store_true", help="use the real toxiproxy-server (`make toxiproxy`)")
    args = parser.parse_args()

    parent, child = multiprocessing.Pipe()
    servers = multiprocessing.Process(target=servers_main, args=(child,), daemon=True)
    servers.start()
    sink_port, echo_port = parent.recv()
    handle = start_fault_proxy(kind="toxiproxy" if args.toxiproxy else "harness")
    try:
        client = handle.client()
        sink_proxy = client.create(upstream=f"127.0.0.1:{sink_port}", name="bench_sink")
        echo_proxy = client.create(upstream=f"127.0.0.1:{echo_port}", name="bench_echo")
        sink_via = int(sink_proxy.listen.rsplit(":", 1)[1])
        echo_via = int(echo_proxy.listen.rsplit(":", 1)[1])

        throughput(sink_port, 32)  # warm up both paths
        throughput(sink_via, 32)
        direct_mbs = throughput(sink_port, args.megabytes)
        proxy_mbs = throughput(sink_via, args.megabytes)
        direct = round_trips(echo_port, args.echoes)
        proxied = round_trips(echo_via, args.echoes)
    finally:
        handle.stop()
        servers.terminate()

    d50, d99 = percentile(direct, 0.5) * 1e6, percentile(direct, 0.99) * 1e6
    p50, p99 = percentile(proxied, 0.5) * 1e6, percentile(proxied, 0.99) * 1e6
    print(f"fault proxy: {handle.kind} server, {args.megabytes} MiB in 1 MiB writes, "
          f"{args.echoes} x {ECHO_SIZE}-byte echoes")
    print(f"throughput   direct {direct_mbs:8.0f} MB/s   through proxy {proxy_mbs:8.0f} MB/s")
    print(f"round trip   direct p50 {d50:7.1f} us  p99 {d99:7.1f} us")
    print(f"             proxy  p50 {p50:7.1f} us  p99 {p99:7.1f} us")
    print(f"added        p50 {p50 - d50:7.1f} us  p99 {p99 - d99:7.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
