"""The Python twin of amqp_bench.c: one sender or one receiver on proton's Container (the reactor every
Python AMQP client here uses), same arguments, same output, for bench/routing.py.

    amqp_bench.py send HOST:PORT ADDRESS COUNT SIZE presettled|unsettled [listen]
    amqp_bench.py recv HOST:PORT ADDRESS COUNT SIZE WINDOW [listen]

Each message is a data section of SIZE bytes whose first 8 are the send time (time.monotonic_ns(), the
CLOCK_MONOTONIC the C client reads), so latency is measured across processes on one clock. A receiver that got
nothing for IDLE_S after its first message reports what it has and exits (a router may drop pre-settled
messages).
"""

from __future__ import annotations

import json
import os
import sys
import time

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import AtLeastOnce, AtMostOnce, Container

IDLE_S = 3.0


class Bench(MessagingHandler):
    def __init__(self, mode: str, url: str, address: str, count: int, size: int, option: str, listen: bool):
        window = 0 if mode == "send" else int(option)
        super().__init__(prefetch=window, auto_accept=True)
        self.mode, self.url, self.address, self.count, self.size = mode, url, address, count, size
        self.presettled = mode == "send" and option == "presettled"
        self.listen = listen
        self.sent = self.settled = self.received = 0
        self.start = self.end = self.first = self.last = 0
        self.latencies: list[int] = []
        self.padding = bytes((97 + i % 26) for i in range(8, size))
        self.acceptor = None

    def on_start(self, event):
        if self.mode == "recv":
            event.container.schedule(IDLE_S, self)
        if self.listen:
            self.acceptor = event.container.listen(self.url)
            print(f"listening {self.acceptor.port if hasattr(self.acceptor, 'port') else ''}", flush=True)
            return
        conn = event.container.connect(self.url)
        if self.mode == "send":
            event.container.create_sender(conn, self.address,
                                          options=AtMostOnce() if self.presettled else AtLeastOnce())
        else:
            event.container.create_receiver(conn, self.address)

    def on_timer_task(self, event):
        if self.received and time.monotonic_ns() - self.last > IDLE_S * 1e9:
            print(json.dumps(self.report()), flush=True)
            os._exit(0)  # stalled: a pre-settled message was dropped on the way
        event.container.schedule(IDLE_S / 3, self)

    def on_link_opened(self, event):
        if not self.listen:
            print("ready", flush=True)

    def on_sendable(self, event):
        sender = event.sender
        while sender.credit > 0 and self.sent < self.count:
            if not self.start:
                self.start = time.monotonic_ns()
            body = time.monotonic_ns().to_bytes(8, "big") + self.padding
            sender.send(Message(body=body))
            self.sent += 1
        if self.presettled and self.sent == self.count and not self.end:
            self.end = time.monotonic_ns()
            event.connection.close()

    def on_settled(self, event):
        self.settled += 1
        if self.settled == self.count:
            self.end = time.monotonic_ns()
            event.connection.close()

    def on_message(self, event):
        now = time.monotonic_ns()
        body = event.message.body
        if self.received < self.count:
            self.latencies.append(now - int.from_bytes(bytes(body[:8]), "big"))
            if not self.received:
                self.first = now
            self.last = now
            self.received += 1
        if self.received == self.count:
            event.connection.close()

    def on_connection_closed(self, event):
        if self.acceptor is not None:
            self.acceptor.close()

    def report(self) -> dict:
        if self.mode == "send":
            return {"sent": self.sent, "settled": self.settled, "start_ns": self.start, "end_ns": self.end}
        ordered = sorted(self.latencies) or [0]
        return {"received": self.received, "first_ns": self.first, "last_ns": self.last,
                "p50_ms": ordered[len(ordered) // 2] / 1e6,
                "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] / 1e6}


def main(argv: list[str]) -> int:
    if len(argv) < 6 or argv[0] not in ("send", "recv"):
        print("usage: amqp_bench.py send|recv HOST:PORT ADDRESS COUNT SIZE presettled|unsettled|WINDOW [listen]",
              file=sys.stderr)
        return 2
    bench = Bench(argv[0], argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5], argv[6:7] == ["listen"])
    container = Container(bench)
    container.container_id = f"amqp-bench-{argv[0]}"
    container.run()
    print(json.dumps(bench.report()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
