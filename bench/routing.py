"""Message-routing figures for one router: throughput and send-to-receive latency.

    .venv/bin/python bench/routing.py [--messages N] [--peer router=reference]

Starts the single-router topology with the chosen vendor (reference by default), then for each scenario
sends N messages from one producer and prints msgs/s and the p50/p99 latency from the moment a message went
on the wire to the moment a consumer had it (both ends are in this process, on one clock). Clients and
router share this 2-core machine, so the figures are for comparing runs and vendors, not absolute limits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.clients import Clients
from harness.peers.launch import start_topology
from harness.pytest_plugin import parse_peer_choices
from harness.topology import load_topology
from harness.wait import wait_for

SCENARIOS = [
    # name, address prefix, consumers, pre-settled
    ("anycast unsettled", "balanced.bench.", 1, False),
    ("anycast pre-settled", "balanced.bench.", 1, True),
    ("anycast 2 consumers", "balanced.bench.", 2, False),
    ("multicast 3 consumers", "multicast.bench.", 3, False),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_scenario(url: str, prefix: str, consumers: int, presettled: bool, n: int) -> dict:
    with Clients() as clients:
        address = clients.unique(prefix)
        receivers = [clients.connect(url).receiver(address, credit=300) for _ in range(consumers)]
        sender = clients.connect(url).sender(address, presettled=presettled)
        sender.wait_credit(1)
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
    topology = load_topology(Path(__file__).resolve().parent.parent / "topologies" / "single-router.yaml")
    running = start_topology(topology, parse_peer_choices(args.peer))
    try:
        url = running.client_url("producer")
        vendor = running["R1"].info
        print(f"router: {vendor.vendor} {vendor.version} ({vendor.provider}); {args.messages} messages of ~40 B")
        print(f"{'scenario':<24}{'msgs/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
        for name, prefix, consumers, presettled in SCENARIOS:
            fig = run_scenario(url, prefix, consumers, presettled, args.messages)
            print(f"{name:<24}{fig['msgs_per_s']:>10.0f}{fig['p50_ms']:>10.2f}{fig['p99_ms']:>10.2f}")
    finally:
        running.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
