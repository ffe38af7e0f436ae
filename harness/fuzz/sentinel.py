"""The sentinel: ordinary traffic that keeps flowing through a server while the fuzzer attacks it.

One connection, one receiver and one sender on one address; the sender puts a message on the wire every
`interval_s`, and a watcher notes every delivery's arrival time. What a session judges from it: the longest
gap between two deliveries (a server that stalls for everyone while it chews on one hostile connection shows
it here) and messages the server accepted but never delivered.
"""

from __future__ import annotations

import threading
import time

from ..clients import Clients
from ..wait import WaitTimeout, wait_for

WATCH_INTERVAL_S = 0.01  # how finely gaps are measured


class Sentinel:
    def __init__(self, url: str, address: str, *, interval_s: float = 0.05, name: str = "fuzz-sentinel",
                 security=None):
        self.url, self.address, self.interval_s = url, address, interval_s
        self.clients = Clients(container_id=name)
        self.conn = self.clients.connect(url, name=name, security=security)
        self.receiver = self.conn.receiver(address, credit=100)
        self.sender = self.conn.sender(address)
        self.max_gap_s = 0.0
        self.gaps_over: list[float] = []  # gaps longer than 1 s, for the message
        self._stop = threading.Event()
        self._last_count, self._last_at = 0, time.monotonic()  # no delivery at all is a gap too
        self._threads = [threading.Thread(target=self._send_loop, name="fuzz-sentinel-send", daemon=True),
                         threading.Thread(target=self._watch_loop, name="fuzz-sentinel-watch", daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def sent(self) -> int:
        return self.sender.sent

    @property
    def received(self) -> int:
        return self.receiver.count

    def _send_loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += self.interval_s
            try:
                self.sender.send(1)
            except Exception:  # the client loop is gone with a dead server: the session judges that
                return

    def _watch_loop(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            self._note()

    def _note(self) -> None:
        count, now = self.receiver.count, time.monotonic()
        if count != self._last_count:
            if self._last_at is not None:
                self._record_gap(now - self._last_at)
            self._last_count, self._last_at = count, now
        elif self._last_at is not None and now - self._last_at > self.max_gap_s:
            self.max_gap_s = now - self._last_at  # a stall still going on counts too

    def _record_gap(self, gap: float) -> None:
        self.max_gap_s = max(self.max_gap_s, gap)
        if gap > 1.0:
            self.gaps_over.append(gap)

    def stop(self, drain_s: float = 5.0) -> dict:
        """Stop sending, wait (up to `drain_s`) for what was accepted to arrive, close; the figures."""
        self._stop.set()
        for t in self._threads:
            t.join(2.0)
        outcomes: dict = {}
        try:
            wait_for(lambda: self._accepted_not_received() == 0, drain_s,
                     "sentinel messages to arrive", describe=lambda: f"{self._accepted_not_received()} missing")
        except WaitTimeout:
            pass
        except Exception:  # a dead client loop: count what is known
            pass
        outcomes = dict(self.sender.outcomes)
        received = self.receiver.seqs()
        accepted = {seq for seq, o in outcomes.items() if o.outcome == "accepted"}
        figures = {"sent": self.sender.sent, "received": len(received), "accepted": len(accepted),
                   "lost": len(accepted - set(received)), "duplicates": len(received) - len(set(received)),
                   "max_gap_ms": round(self.max_gap_s * 1000), "gaps_over_1s": len(self.gaps_over)}
        try:
            self.clients.close(timeout=3.0)
        except Exception:
            pass
        return figures

    def _accepted_not_received(self) -> int:
        received = set(self.receiver.seqs())
        return sum(1 for seq, o in dict(self.sender.outcomes).items()
                   if o.outcome == "accepted" and seq not in received)
