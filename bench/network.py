"""Network-of-brokers figures: end-to-end throughput through one network link against a single broker, for
every broker vendor that can run here (the reference broker, RabbitMQ, ActiveMQ Classic, Artemis), with the same
clients, in one run.

    .venv/bin/python bench/network.py [--messages N] [--rounds R] [--vendors reference,rabbitmq,...] [--via-proxy]
                                      [--results DIR]

Each vendor runs the network-pair topology (004_05e35cdd7bc39ede.txt: B1's network connector forwards to B2's
consumers): ActiveMQ Classic with the very network connector the seed configures (OpenWire between the brokers),
RabbitMQ as queue federation, Artemis as AMQP federation over a broker connection. `--vendors` defaults to every
broker vendor in the registry; one whose probe says it cannot run here (harness.matrix.probe_vendor) is skipped
with the reason. Two rows per vendor, 1 KB non-durable messages, one producer (unsettled, the broker's credit) and
one consumer of the queue `orders` (its name on the wire as each vendor wants it, peer.wire_address):

* `single broker`: produce and consume on B1 (no consumer on B2, so nothing crosses the network);
* `B1 -> B2`: produce on B1, consume on B2 (every message crosses the one network link).

The link goes direct, not through the fault proxy the topology puts it behind for the suites (`--via-proxy`
keeps the proxy: then the row measures the proxy too, see bench/fault_proxy.py). Rounds interleave vendors and
rows; each figure is the median over the rounds (min-max beside it). Prints msgs/s (first send to last receipt
at the consumer), the p50/p99 latency from the wire to the consumer, the CPU the vendor's brokers spent per 1000
messages (each broker's own processes: peer.pids; the JVM itself for Classic and Artemis), and per
vendor the ratio B1 -> B2 / single broker (the issue's target: at least 0.5x). A vendor that
cannot run here, or whose B1 does not forward to B2, is skipped with the reason. Asserts nothing. With --results
DIR it writes one result record per vendor and row (suite "bench", case `BENCH-network/single|b1-to-b2/VENDOR/python`,
the brokers' version in `peers`) into DIR/<run_id>/.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import percentile, process_cpu_s, write_bench_records
from harness.clients import Clients
from harness.matrix import probe_vendor
from harness.peers.base import PeerUnavailable
from harness.peers.launch import start_topology
from harness.peers.registry import REGISTRY
from harness.results import utc_now_iso
from harness.topology import load_topology, topology_path
from harness.wait import WaitTimeout, wait_for

BODY = "x" * 1024
QUEUE = "orders"
SINGLE, NETWORK = "single broker", "B1 -> B2"
SCENARIO = {SINGLE: "single", NETWORK: "b1-to-b2"}  # the rows' names in result records
FORWARD_WAIT = 30.0  # how long the first message may take to cross before a vendor's network counts as not working


def broker_vendors() -> list[str]:
    """Every vendor the registry lists as a broker, in its order: the default of --vendors."""
    return [e.spec.vendor for e in REGISTRY if e.spec.role == "broker"]


def run(producer_peer, consumer_peer, n: int, broker_pids: list[int], timeout: float = 600) -> dict:
    """One row: n messages produced on `producer_peer`, consumed on `consumer_peer`."""
    with Clients(container_id=f"bench-{uuid.uuid4().hex[:8]}") as clients:
        receiver = clients.connect(consumer_peer.url).receiver(consumer_peer.wire_address(QUEUE), credit=500)
        sender = clients.connect(producer_peer.url).sender(producer_peer.wire_address(QUEUE),
                                                           f"bench-{uuid.uuid4().hex[:10]}")
        sender.wait_credit(1)
        t0, cpu0 = time.monotonic(), process_cpu_s(broker_pids)
        sender.send(n, body=BODY)
        wait_for(lambda: len(set(receiver.seqs(sender.name))) >= n, timeout, f"{n} messages at the consumer",
                 describe=lambda: f"{len(set(receiver.seqs(sender.name)))} received")
        elapsed = time.monotonic() - t0
        cpu = process_cpu_s(broker_pids) - cpu0
        sender.wait_outcomes(n, timeout=timeout)
        sent_at = {e.data["seq"]: e.t for e in clients.history.events("send", sender.name)}
        latencies = [e.t - sent_at[e.data["seq"]] for e in clients.history.events("receive", receiver.name)
                     if e.data.get("producer") == sender.name]
    return {"msgs_per_s": n / elapsed, "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000, "broker_cpu_ms_per_1000": cpu * 1e6 / n}


def forwards(running) -> str | None:
    """None once a message produced on B1 reaches a consumer on B2; else why not."""
    try:
        run(running["B1"], running["B2"], 1, [], timeout=FORWARD_WAIT)
    except WaitTimeout as exc:
        return f"B1 does not forward to B2's consumer ({exc})"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure every row this many times, vendors and rows interleaved; the median is quoted")
    parser.add_argument("--vendors", default=",".join(broker_vendors()),
                        help="comma-separated broker vendors (default: every broker vendor the registry lists)")
    parser.add_argument("--via-proxy", action="store_true", help="keep the B1->B2 link behind the fault proxy")
    parser.add_argument("--results", metavar="DIR", help="write result records into DIR/<run_id>/")
    args = parser.parse_args()
    started_at = utc_now_iso()
    topology = load_topology(topology_path("network-pair"))
    if not args.via_proxy:
        topology.links = [dataclasses.replace(link, via=None) for link in topology.links]
    networks, stacks = {}, []
    try:
        for vendor in args.vendors.split(","):
            if (why := probe_vendor(vendor)) is not None:
                print(f"{vendor:<26}skipped: {why}")
                continue
            try:
                running = start_topology(topology, {"broker": vendor})
            except PeerUnavailable as exc:
                print(f"{vendor:<26}skipped: {exc}")
                continue
            stacks.append(running)
            why = forwards(running)
            if why is not None:
                print(f"{vendor:<26}skipped: {why}")
                continue
            networks[vendor] = running
        rows: dict[tuple[str, str], list[dict]] = {}
        pids = {vendor: [pid for peer in running.peers.values() for pid in peer.pids]
                for vendor, running in networks.items()}
        for running in networks.values():  # warm-up: connections, the network's pulls, caches
            run(running["B1"], running["B1"], 200, [])
            run(running["B1"], running["B2"], 200, [])
        # Rounds interleave vendors and rows so that a burst of load from elsewhere on the machine hits all rows
        # alike.
        for _ in range(args.rounds):
            for row in (SINGLE, NETWORK):
                for vendor, running in networks.items():
                    target = running["B1"] if row == SINGLE else running["B2"]
                    rows.setdefault((vendor, row), []).append(run(running["B1"], target, args.messages, pids[vendor]))
    finally:
        for running in stacks:
            running.stop()
    if not rows:
        print("no vendor measured")
        return 0
    print(f"{args.messages} messages of 1 KB per row, non-durable, {args.rounds} rounds; one producer on B1, one "
          f"consumer; the B1->B2 link {'through the fault proxy' if args.via_proxy else 'direct'}; "
          "median (min-max) over rounds")
    print(f"{'broker':<26}{'row':<16}{'msgs/s':>20}{'p50 ms':>9}{'p99 ms':>9}{'broker cpu':>12}  "
          "(cpu: all the vendor's brokers, ms per 1000 msgs)")
    medians: dict[tuple[str, str], float] = {}
    for (vendor, row), figs in sorted(rows.items(), key=lambda item: (list(networks).index(item[0][0]),
                                                                        item[0][1] != SINGLE)):
        rates = sorted(f["msgs_per_s"] for f in figs)
        medians[(vendor, row)] = statistics.median(rates)
        label = f"{vendor} {networks[vendor]['B1'].info.version}"[:25]
        print(f"{label:<26}{row:<16}{f'{medians[(vendor, row)]:.0f} ({rates[0]:.0f}-{rates[-1]:.0f})':>20}"
              f"{statistics.median(f['p50_ms'] for f in figs):>9.1f}"
              f"{statistics.median(f['p99_ms'] for f in figs):>9.1f}"
              f"{statistics.median(f['broker_cpu_ms_per_1000'] for f in figs):>12.0f}")
    for vendor in networks:
        single, network = medians.get((vendor, SINGLE)), medians.get((vendor, NETWORK))
        if single and network:
            print(f"{vendor}: B1 -> B2 / single broker = {network / single:.2f}x throughput (medians; target >= 0.50x)")
    if args.results:
        records = []
        for (vendor, row), figs in rows.items():
            info = networks[vendor]["B1"].info
            single = medians.get((vendor, SINGLE))
            records.append({"scenario": SCENARIO[row] + ("+proxy" if args.via_proxy else ""), "vendor": vendor,
                            "clients": "python", "topology": "network-pair",
                            "peer": {"role": "broker", "vendor": info.vendor, "version": info.version,
                                     "provider": info.provider},
                            **{name: statistics.median(f[name] for f in figs) for name in ("msgs_per_s", "p50_ms",
                                                                                           "p99_ms")},
                            "cpu_s_per_1000": statistics.median(f["broker_cpu_ms_per_1000"] for f in figs) / 1000,
                            "repeats": len(figs),
                            "network_to_single": medians[(vendor, row)] / single
                            if row == NETWORK and single else None})
        write_bench_records(args.results, "network", records, {"messages": args.messages, "rounds": args.rounds,
                                                               "via_proxy": bool(args.via_proxy)}, started_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
