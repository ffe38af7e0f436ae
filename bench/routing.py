"""Message-routing figures: throughput and send-to-receive latency on one router, across a two-router mesh
and through a waypoint to a broker, in one run.

    .venv/bin/python bench/routing.py [--messages N] [--peer router=reference] [--peer broker=rabbitmq]

For each scenario the topology is started with the chosen vendors, one producer sends N messages and the
consumers take them; it prints msgs/s and the p50/p99 latency from the moment a message went on the wire to
the moment a consumer had it (both ends are in this process, on one clock). Clients, routers and brokers
share this 2-core machine, so the figures are for comparing scenarios, runs and vendors, not absolute limits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import percentile
from harness.clients import Clients
from harness.peers.launch import start_topology
from harness.pytest_plugin import parse_peer_choices
from harness.topology import load_topology
from harness.wait import wait_for

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"

SCENARIOS = [
    # name, topology, producer client, consumer client, address prefix, consumers, pre-settled
    ("1 router anycast", "single-router", "producer", "consumer", "balanced.bench.", 1, False),
    ("1 router pre-settled", "single-router", "producer", "consumer", "balanced.bench.", 1, True),
    ("1 router 2 consumers", "single-router", "producer", "consumer", "balanced.bench.", 2, False),
    ("1 router multicast x3", "single-router", "producer", "consumer", "multicast.bench.", 3, False),
    ("2-router mesh anycast", "two-router-mesh", "producer", "far", "balanced.bench.", 1, False),
    ("waypoint via broker", "router-broker-waypoint", "producer", "consumer", "queue.orders", 1, False),
]


def run_scenario(producer_url: str, consumer_url: str, prefix: str, consumers: int, presettled: bool,
                 n: int) -> dict:
    with Clients() as clients:
        address = clients.unique(prefix) if prefix.endswith(".") else prefix
        receivers = [clients.connect(consumer_url).receiver(address, credit=300) for _ in range(consumers)]
        sender = clients.connect(producer_url).sender(address, presettled=presettled)
        sender.wait_credit(1, timeout=30)
        t0 = time.monotonic()
        sender.send(n)
        expected = n * consumers if prefix.startswith("multicast") else n
        wait_for(lambda: sum(r.count for r in receivers) >= expected, 300, f"{expected} messages to arrive")
        if not presettled:
            sender.wait_outcomes(n, timeout=300)
        elapsed = time.monotonic() - t0
        sent_at = {e.data["seq"]: e.t for e in clients.history.events("send", sender.name)}
        latencies = [e.t - sent_at[e.data["seq"]] for e in clients.history.events("receive")
                     if e.data.get("producer") == sender.name]
    return {"msgs_per_s": n / elapsed, "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000, "mean_ms": statistics.mean(latencies) * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--peer", action="append", default=[])
    args = parser.parse_args()
    choices = parse_peer_choices(args.peer)
    print(f"peers: {choices}; {args.messages} messages of ~40 B per scenario")
    print(f"{'scenario':<26}{'msgs/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
    running = {}
    try:
        for name, topo, producer, consumer, prefix, consumers, presettled in SCENARIOS:
            if topo not in running:
                running[topo] = start_topology(load_topology(TOPOLOGIES / f"{topo}.yaml"), choices)
            rt = running[topo]
            fig = run_scenario(rt.client_url(producer), rt.client_url(consumer), prefix, consumers, presettled,
                               args.messages)
            print(f"{name:<26}{fig['msgs_per_s']:>10.0f}{fig['p50_ms']:>10.2f}{fig['p99_ms']:>10.2f}")
    finally:
        for rt in running.values():
            rt.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
