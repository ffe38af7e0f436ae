"""Large messages: the reference broker against RabbitMQ, and the reference router against qdrouterd.

    .venv/bin/python bench/large_messages.py [--mb 32] [--rounds 3] [--vendors reference,rabbitmq]
                                             [--routers reference,qdrouterd] [--sizes 1K,16K,64K,256K,1M,4M]

Broker rows (issue 22: a backlog of 256 KiB messages drained at one message per 700 ms): for each body size, a
fresh queue gets a backlog of N messages (N = --mb worth of bodies, at least 60, so every backlog is many times
the receiver's window), all accepted before anything is consumed; then one receiver with prefetch 10 (credit 10,
renewed as it goes) drains it. Printed per vendor and size: the backlog's fill rate, the drain rate in MB/s and
messages/s (from the receiver's attach to the last arrival), the p50/p99/max gap between consecutive arrivals,
and the CPU seconds the broker's processes spent on the drain. Then the reference/RabbitMQ drain-rate ratio.

Router rows: producer -> router -> consumer (prefetch 10), 256 KiB bodies, the consumer attached first; the rate
runs from the first send to the last arrival.

Clients and peers share this 2-core machine, so the ratio between vendors is the figure to quote, not the
absolute rate. Rounds interleave the vendors; each figure is the median over the rounds. The clients' garbage
collector is off while a row runs (see `no_client_gc`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import percentile, process_cpu_s  # noqa: E402
from harness.clients import Clients  # noqa: E402
from harness.peers.base import PeerUnavailable  # noqa: E402
from harness.peers.launch import start_topology  # noqa: E402
from harness.topology import load_topology, topology_path  # noqa: E402
from harness.wait import wait_for  # noqa: E402

UNITS = {"K": 1024, "M": 1024 * 1024}
PREFETCH = 10
MIN_MESSAGES = 60
TIMEOUT = 600.0


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def label(size: int) -> str:
    return f"{size // UNITS['M']}MiB" if size >= UNITS["M"] else f"{size // UNITS['K']}KiB"


def gaps_ms(times: list[float]) -> tuple[float, float, float]:
    gaps = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
    return (percentile(gaps, 0.5), percentile(gaps, 0.99), max(gaps)) if gaps else (0.0, 0.0, 0.0)


@contextlib.contextmanager
def no_client_gc():
    """The client process's garbage collector off while a row is measured. With tens of thousands of received
    messages and history events alive, a full collection stalls the clients' event loop for 60-700 ms, which
    showed up as the max inter-arrival gap of the 1 KiB rows (of every vendor) and is no figure of the peers."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def broker_row(broker, size: int, n: int) -> dict:
    address = broker.wire_address(f"bench.large.{uuid.uuid4().hex[:10]}")
    body = b"x" * size
    with Clients(container_id=f"bench-{uuid.uuid4().hex[:8]}") as clients, no_client_gc():
        sender = clients.connect(broker.url).sender(address)
        sender.wait_credit(1)
        t0 = time.monotonic()
        sender.send(n, body=body)
        sender.wait_outcomes(n, timeout=TIMEOUT)
        fill_s = time.monotonic() - t0
        if sender.outcome_counts() != {"accepted": n}:
            raise RuntimeError(f"{broker.info.vendor}: filling the backlog: {sender.outcome_counts()}")
        cpu0 = process_cpu_s(broker.pids)
        start = clients.history.record("bench", "drain-start").t
        receiver = clients.connect(broker.url).receiver(address, credit=PREFETCH)
        wait_for(lambda: receiver.count >= n, TIMEOUT, f"{n} messages at the consumer",
                 describe=lambda: f"{receiver.count} received")
        broker_cpu = process_cpu_s(broker.pids) - cpu0
        times = [e.t for e in clients.history.events("receive", receiver.name)]
    drain_s = times[-1] - start
    p50, p99, worst = gaps_ms(times)
    return {"fill_mb_s": n * size / fill_s / 1e6, "mb_s": n * size / drain_s / 1e6, "msgs_s": n / drain_s,
            "p50": p50, "p99": p99, "max": worst, "cpu_s": broker_cpu}


def router_row(running, size: int, n: int) -> dict:
    url = running.client_url("producer")
    address = f"balanced.bench.large.{uuid.uuid4().hex[:10]}"
    with Clients(container_id=f"bench-{uuid.uuid4().hex[:8]}") as clients, no_client_gc():
        receiver = clients.connect(url).receiver(address, credit=PREFETCH)
        sender = clients.connect(url).sender(address)
        sender.wait_credit(1)
        start = clients.history.record("bench", "send-start").t
        sender.send(n, body=b"x" * size)
        wait_for(lambda: receiver.count >= n, TIMEOUT, f"{n} messages at the consumer",
                 describe=lambda: f"{receiver.count} received, {sender.sent} sent")
        sender.wait_outcomes(n, timeout=TIMEOUT)
        times = [e.t for e in clients.history.events("receive", receiver.name)]
    elapsed = times[-1] - start
    p50, p99, worst = gaps_ms(times)
    return {"mb_s": n * size / elapsed / 1e6, "msgs_s": n / elapsed, "p50": p50, "p99": p99, "max": worst}


def start(kind: str, role: str, vendors: list[str]) -> tuple[dict, list]:
    topology = load_topology(topology_path(kind))
    running, stacks = {}, []
    for vendor in vendors:
        try:
            stack = start_topology(topology, {role: vendor})
        except PeerUnavailable as exc:
            print(f"{role} {vendor}: skipped: {exc}")
            continue
        stacks.append(stack)
        running[vendor] = stack
    return running, stacks


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=32, help="MiB of bodies per broker row (at least 60 messages)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vendors", default="reference,rabbitmq", help="brokers; empty: no broker rows")
    parser.add_argument("--routers", default="reference,qdrouterd", help="routers; empty: no router rows")
    parser.add_argument("--sizes", default="1K,16K,64K,256K,1M,4M")
    parser.add_argument("--router-messages", type=int, default=120, help="256 KiB messages per router row")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    counts = {size: max(MIN_MESSAGES, int(args.mb * UNITS["M"]) // size) for size in sizes}
    router_size = 256 * UNITS["K"]

    brokers, stacks = start("single-broker", "broker", [v for v in args.vendors.split(",") if v])
    routers, more = start("single-router", "router", [v for v in args.routers.split(",") if v])
    stacks += more
    broker_rows: dict[tuple[str, int], list[dict]] = {}
    router_rows: dict[str, list[dict]] = {}
    try:
        for running in brokers.values():  # warm-up: first connection, first queue
            broker_row(running["B1"], 64 * UNITS["K"], MIN_MESSAGES)
        for running in routers.values():
            router_row(running, router_size, 20)
        for _ in range(args.rounds):
            for size in sizes:
                for vendor, running in brokers.items():
                    broker_rows.setdefault((vendor, size), []).append(broker_row(running["B1"], size, counts[size]))
            for vendor, running in routers.items():
                router_rows.setdefault(vendor, []).append(router_row(running, router_size, args.router_messages))
    finally:
        for stack in stacks:
            stack.stop()

    if broker_rows:
        print(f"Brokers: a backlog of N messages per size (--mb {args.mb:g} MiB, at least {MIN_MESSAGES}) queued and "
              f"accepted first, then drained by one receiver with prefetch {PREFETCH}; median over {args.rounds} "
              "rounds")
        print(f"{'broker':<22}{'size':>7}{'N':>7}{'fill MB/s':>11}{'drain MB/s':>12}{'msgs/s':>9}"
              f"{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'cpu s':>7}")
        for (vendor, size), rows in broker_rows.items():
            name = f"{vendor} {brokers[vendor]['B1'].info.version}"[:21]
            print(f"{name:<22}{label(size):>7}{counts[size]:>7}{median(rows, 'fill_mb_s'):>11.1f}"
                  f"{median(rows, 'mb_s'):>12.1f}{median(rows, 'msgs_s'):>9.0f}{median(rows, 'p50'):>8.1f}"
                  f"{median(rows, 'p99'):>8.1f}{median(rows, 'max'):>8.1f}{median(rows, 'cpu_s'):>7.2f}")
        ratios = []
        for size in sizes:
            ref, other = broker_rows.get(("reference", size)), broker_rows.get(("rabbitmq", size))
            if ref and other:
                ratios.append(f"{label(size)} {median(ref, 'mb_s') / median(other, 'mb_s'):.2f}x")
        if ratios:
            print("reference / rabbitmq drain throughput (medians): " + ", ".join(ratios))
    if router_rows:
        print(f"\nRouters: producer -> router -> consumer (prefetch {PREFETCH}), {args.router_messages} x "
              f"{label(router_size)}, consumer attached first; median over {args.rounds} rounds")
        print(f"{'router':<22}{'MB/s':>8}{'msgs/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}")
        for vendor, rows in router_rows.items():
            name = f"{vendor} {routers[vendor]['R1'].info.version}"[:21]
            print(f"{name:<22}{median(rows, 'mb_s'):>8.1f}{median(rows, 'msgs_s'):>9.0f}{median(rows, 'p50'):>8.1f}"
                  f"{median(rows, 'p99'):>8.1f}{median(rows, 'max'):>8.1f}")
        ref, other = router_rows.get("reference"), router_rows.get("qdrouterd")
        if ref and other:
            print(f"reference / qdrouterd throughput at {label(router_size)}: "
                  f"{median(ref, 'mb_s') / median(other, 'mb_s'):.2f}x (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
