"""Broker figures: the reference broker against every broker vendor that runs here, same clients, one run.

    .venv/bin/python bench/broker.py [--messages N] [--rounds R] [--vendors reference,rabbitmq,artemis,...]
                                     [--results DIR]

For each broker vendor (started from the single-broker topology; `--vendors` defaults to every broker vendor
in the registry, and one that cannot run here is skipped with the reason) and for non-durable and durable 1 KB
messages: one producer (unsettled, the broker's credit) and one consumer attached to a fresh queue, N
messages. For each vendor that mirrors (the reference, Artemis), a `VENDOR+mirror` row does the same durable run
on DC1 of the broker-mirror topology (002_f23507c2891d6d06.txt "Mirroring": DC1 mirrors every send and
acknowledgement to DC2), with a consumer on DC2 too; it prints the cost of mirroring (unmirrored / mirrored
durable msgs/s, the issue's target is at most 1.3x) and the mirror lag (send to arrival on DC2: p50, p99).

Prints msgs/s (first send to last outcome), the p50/p99 latency from the moment a message
went on the wire to the moment the consumer had it, and the CPU time the broker's processes and the client
process spent per 1000 messages (so a slow row says whether the broker was busy or the pipeline waited).
Clients and brokers share this 2-core machine, so the ratio between vendors is the figure to quote, not the
absolute rate. With --results DIR it writes one result record per row (suite "bench", case
`BENCH-broker/1kb|1kb-durable/VENDOR/python`, the broker's version in `peers`) into DIR/<run_id>/.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import own_cpu_s, percentile, process_cpu_s, write_bench_records
from harness.clients import Clients
from harness.peers.base import PeerUnavailable
from harness.peers.launch import start_topology
from harness.peers.registry import REGISTRY, entry
from harness.results import utc_now_iso
from harness.topology import load_topology, topology_path
from harness.wait import wait_for

BODY = "x" * 1024
MIRRORED = "+mirror"  # the suffix of a mirrored row's name: reference+mirror, artemis+mirror
MIRROR_QUEUE = "$ACTIVEMQ_ARTEMIS_MIRROR_DC2"  # DC1's mirror queue in topologies/broker-mirror.yaml


def mirror_idle(primary) -> bool:
    return primary.queue_stats(MIRROR_QUEUE)["depth"] == 0


def run(url: str, address: str, n: int, durable: bool, broker_pids: list[int], mirror=None) -> dict:
    """One row. `mirror`: (url of the mirror broker or None, function -> True once the primary's mirror queue is
    empty): wait for the mirror to catch up after the row, and with a url also time each message's arrival on
    the mirror (a consumer there, whose work shares the machine: the lag run is a run of its own)."""
    # A container id of its own per row: a durable receiver makes a durable subscription named after the
    # container id and link name, and rows must not share one.
    with Clients(container_id=f"bench-{uuid.uuid4().hex[:8]}") as clients:
        receiver = clients.connect(url).receiver(address, credit=500, durable=durable)
        # On the mirror: a consumer of the mirrored queue (a mirrored acknowledgement that arrives first
        # removes the message there, so it sees most messages, not necessarily all).
        far = clients.connect(mirror[0]).receiver(address, credit=500) if mirror and mirror[0] else None
        sender = clients.connect(url).sender(address, durable=durable)
        sender.wait_credit(1)
        t0, broker0, clients0 = time.monotonic(), process_cpu_s(broker_pids), own_cpu_s()
        sender.send(n, body=BODY, durable=durable)
        sender.wait_outcomes(n, timeout=600)
        wait_for(lambda: receiver.count >= n, 600, f"{n} messages at the consumer")
        elapsed = time.monotonic() - t0
        broker_cpu, clients_cpu = process_cpu_s(broker_pids) - broker0, own_cpu_s() - clients0
        if mirror:
            wait_for(mirror[1], 600, "the primary's mirror queue to be empty (every event at the mirror)")
        if far is not None:
            far.conn.sync()
        sent_at = {e.data["seq"]: e.t for e in clients.history.events("send", sender.name)}
        latencies = [e.t - sent_at[e.data["seq"]] for e in clients.history.events("receive", receiver.name)]
        lags = [e.t - sent_at[e.data["seq"]] for e in clients.history.events("receive", far.name)] if far else []
        accepted = sender.outcome_counts().get("accepted", 0)
    figures = {"msgs_per_s": n / elapsed, "p50_ms": percentile(latencies, 0.5) * 1000,
               "p99_ms": percentile(latencies, 0.99) * 1000, "accepted": accepted,
               "broker_cpu_ms_per_1000": broker_cpu * 1e6 / n, "clients_cpu_ms_per_1000": clients_cpu * 1e6 / n}
    if lags:
        figures.update(lag_p50_ms=percentile(lags, 0.5) * 1000, lag_p99_ms=percentile(lags, 0.99) * 1000,
                       lag_seen=len(lags))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure every row this many times, vendors interleaved; the median is quoted")
    parser.add_argument("--vendors", default=",".join(e.spec.vendor for e in REGISTRY if e.spec.role == "broker"),
                        help="broker vendors, comma-separated (default: every broker vendor in the registry)")
    parser.add_argument("--results", metavar="DIR", help="write result records into DIR/<run_id>/")
    args = parser.parse_args()
    started_at = utc_now_iso()
    topology = load_topology(topology_path("single-broker"))
    brokers, stacks = {}, []
    for vendor in args.vendors.split(","):
        try:
            running = start_topology(topology, {"broker": vendor})
        except PeerUnavailable as exc:
            print(f"{vendor:<28}skipped: {exc}")
            continue
        stacks.append(running)
        brokers[vendor] = running["B1"]
    mirrors, lag_runs = {}, {}  # mirrored row -> its running broker-mirror topology; -> its lag runs
    for vendor in list(brokers):
        if "mirror" in entry(vendor, "broker").spec.capabilities:
            mirrors[vendor + MIRRORED] = start_topology(load_topology(topology_path("broker-mirror")),
                                                        {"broker": vendor}, timeout=180)
            stacks.append(mirrors[vendor + MIRRORED])
            brokers[vendor + MIRRORED] = mirrors[vendor + MIRRORED]["DC1"]
    rows: dict[tuple[str, bool], list[dict]] = {}
    try:
        for broker in brokers.values():  # warm-up: first connections, first queue, caches
            run(broker.url, broker.wire_address(f"warmup.{uuid.uuid4().hex[:10]}"), 200, False, broker.pids)
        # Rounds interleave the vendors so that a burst of load from elsewhere on the machine hits all rows
        # alike; each figure printed is the median over the rounds (min-max beside it).
        for _ in range(args.rounds):
            for durable in (False, True):
                for vendor, broker in brokers.items():
                    if vendor in mirrors and not durable:
                        continue  # mirroring is for disaster recovery: its row is the durable one
                    address = broker.wire_address(f"bench.{uuid.uuid4().hex[:10]}")
                    mirror = (None, functools.partial(mirror_idle, broker)) if vendor in mirrors else None
                    rows.setdefault((vendor, durable), []).append(
                        run(broker.url, address, args.messages, durable, broker.pids, mirror))
        for name, mirrored in mirrors.items():  # the lag, with a consumer on DC2 timing each arrival
            primary = brokers[name]
            lag_runs[name] = [run(primary.url, primary.wire_address(f"lag.{uuid.uuid4().hex[:10]}"), args.messages,
                                  True, primary.pids, (mirrored["DC2"].url, functools.partial(mirror_idle, primary)))
                              for _ in range(args.rounds)]
    finally:
        for running in stacks:
            running.stop()
    print(f"{args.messages} messages of 1 KB per row, {args.rounds} rounds; one producer, one consumer, "
          "same clients; median (min-max) over rounds")
    print(f"{'broker':<22}{'durable':<9}{'msgs/s':>20}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'broker cpu':>12}{'client cpu':>12}  (cpu: ms per 1000 msgs)")
    medians: dict[tuple[str, bool], float] = {}
    for (vendor, durable), figs in rows.items():
        rates = sorted(f["msgs_per_s"] for f in figs)
        medians[(vendor, durable)] = statistics.median(rates)
        label = (vendor if vendor in mirrors else f"{vendor} {brokers[vendor].info.version}")[:21]
        spread = f"{medians[(vendor, durable)]:.0f} ({rates[0]:.0f}-{rates[-1]:.0f})"
        print(f"{label:<22}{'yes' if durable else 'no':<9}{spread:>20}"
              f"{statistics.median(f['p50_ms'] for f in figs):>9.1f}"
              f"{statistics.median(f['p99_ms'] for f in figs):>9.1f}"
              f"{statistics.median(f['broker_cpu_ms_per_1000'] for f in figs):>12.0f}"
              f"{statistics.median(f['clients_cpu_ms_per_1000'] for f in figs):>12.0f}")
    for durable in (False, True):
        ref = medians.get(("reference", durable))
        for vendor in brokers:
            other = medians.get((vendor, durable))
            if ref and other and vendor != "reference" and vendor not in mirrors:
                print(f"reference / {vendor}, {'durable' if durable else 'non-durable'}: {ref / other:.2f}x "
                      "throughput (medians)")
    for name in mirrors:
        vendor = name.removesuffix(MIRRORED)
        plain, mirror_rate = medians.get((vendor, True)), medians.get((name, True))
        if not (plain and mirror_rate):
            continue
        figs = [f for f in lag_runs.get(name, []) if "lag_p50_ms" in f]
        cpu = statistics.median(f["broker_cpu_ms_per_1000"] for f in rows[(name, True)]) / statistics.median(
            f["broker_cpu_ms_per_1000"] for f in rows[(vendor, True)])
        print(f"{vendor}: mirroring cost, durable: {plain / mirror_rate:.2f}x (unmirrored / mirrored msgs/s, "
              f"medians; target <= 1.30x); the primary's CPU per message: {cpu:.2f}x")
        if figs:
            print(f"{vendor}: mirror lag (send -> arrival on DC2, a run with a consumer there): "
                  f"p50 {statistics.median(f['lag_p50_ms'] for f in figs):.1f} ms, "
                  f"p99 {statistics.median(f['lag_p99_ms'] for f in figs):.1f} ms (medians over rounds; "
                  f"{statistics.median(f['lag_seen'] for f in figs):.0f} of {args.messages} messages seen on DC2 "
                  "before DC1's acknowledgement removed them)")
    if args.results:
        records = []
        for (vendor, durable), figs in rows.items():
            info = brokers[vendor].info
            figures = {name: statistics.median(f[name] for f in figs)
                       for name in ("msgs_per_s", "p50_ms", "p99_ms", "broker_cpu_ms_per_1000")}
            records.append({"scenario": "1kb-durable" if durable else "1kb", "vendor": vendor, "clients": "python",
                            "peer": {"role": "broker", "vendor": info.vendor, "version": info.version,
                                     "provider": info.provider},
                            "topology": "broker-mirror" if vendor in mirrors else "single-broker",
                            "msgs_per_s": figures["msgs_per_s"], "p50_ms": figures["p50_ms"],
                            "p99_ms": figures["p99_ms"], "cpu_s_per_1000": figures["broker_cpu_ms_per_1000"] / 1000,
                            "repeats": len(figs), "durable": durable})
        write_bench_records(args.results, "broker", records, {"messages": args.messages, "rounds": args.rounds,
                                                              "size": len(BODY)}, started_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
