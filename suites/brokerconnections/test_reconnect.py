"""Starting, reconnecting and failing over (002_f23507c2891d6d06.txt, the `auto-start` notice and
"Reconnecting and Failover"): a connection with auto-start off waits for the management operation; a lost
connection is dialled again every retry-interval until reconnect-attempts have failed; alternate hosts are
tried in order until one answers."""

import time

import pytest

from harness import checkers
from harness.wait import wait_for

from ..conftest import kill_or_skip, restart_or_skip
from .conftest import (WAIT, configured, connection, depth, node_at, send_accepted, sender, start_connection,
                       wait_connected)

pytestmark = pytest.mark.requires("broker-connection", "store-and-forward")

SLACK = 0.9  # a retry may come up to 10% early by the broker's own clock (timer granularity), never more


@pytest.mark.spec("BROKERCONN-AUTOSTART-1")
def test_a_connection_without_auto_start_waits_for_the_management_start(topology, clients, details):
    running = topology("broker-reconnect")
    b1, b2 = running["B1"], running["B2"]
    # The broker is up and dials B2 fine on its other connection.
    wait_connected(b1, "limited", restart_if_gave_up_at_start=True)
    n = 5
    before = {"B1": depth(b1, "manual.q"), "B2": depth(b2, "manual.q")}
    snd = sender(clients.connect(running.client_url("producer")), "manual.q")
    send_accepted(snd, n)
    idle = connection(b1, "manual")
    held_on_b1 = depth(b1, "manual.q") - before["B1"]
    on_b2 = depth(b2, "manual.q") - before["B2"]
    details.update(before_start={k: idle[k] for k in ("started", "connected", "connects", "attempts")},
                   held_on_b1=held_on_b1, on_b2_before_start=on_b2)
    assert not idle["started"] and not idle["connected"], f"manual must not start with the broker: {idle}"
    assert idle["connects"] == 0 and not idle["attempt_times"], f"manual dialled before it was started: {idle}"
    assert held_on_b1 == n and on_b2 == 0, f"before the start: {held_on_b1} on B1, {on_b2} on B2 (sent {n})"
    start_connection(b1, "manual")
    started = wait_connected(b1, "manual")
    receiver = clients.connect(running.client_url("consumer")).receiver("manual.q")
    wait_for(lambda: len(set(receiver.seqs(snd.name))) >= n, WAIT, f"the {n} held messages on B2 after the start",
             describe=lambda: f"{len(receiver.seqs(snd.name))} received")
    receiver.conn.sync()
    verdict = checkers.total_queue(clients.history, producer=snd.name, receivers=receiver.name,
                                   allow_duplicates=False)
    details.update(after_start={k: started[k] for k in ("started", "connected", "connects")},
                   **checkers.checks_details(total_queue=verdict))
    assert started["started"]
    assert verdict.ok, verdict.as_details()


@pytest.mark.spec("BROKERCONN-RECONNECT-1", "BROKERCONN-RECONNECT-2")
def test_a_lost_connection_is_retried_every_interval_then_given_up(topology, details):
    running = topology("broker-reconnect")
    b1 = running["B1"]
    limited = configured(running, "B1", "limited")
    interval, allowed = limited.retry_interval_ms / 1000, limited.reconnect_attempts
    assert allowed > 0, "the topology must limit the attempts of `limited`"
    wait_connected(b1, "limited", restart_if_gave_up_at_start=True)
    lost_at = time.time()  # the broker's attempt times are epoch seconds on this same machine
    running["B2"].stop()
    seen: list[int] = []  # the attempt count each time it changed, as polled

    def poll() -> dict:
        row = connection(b1, "limited")
        if not seen or seen[-1] != row["attempts"]:
            seen.append(row["attempts"])
        return row
    last: dict = {}

    def given_up():
        last.update(poll())
        return last["gave_up"] and dict(last)
    row = wait_for(given_up, WAIT + interval * allowed, f"`limited` to give up after {allowed} attempts",
                   describe=lambda: f"attempts seen {seen}, last {last}")
    retries = [t for t in row["attempt_times"] if t >= lost_at]
    # The first redial waits an interval too: the broker learns of the loss only after B2 was told to stop.
    gaps = [round(b - a, 3) for a, b in zip([lost_at, *retries], retries, strict=False)]
    # Given up: nothing more for three more intervals. The wait ends early, and fails, if an attempt is made.
    quiet_until = time.monotonic() + 3 * interval

    def quiet_or_grew():
        now = connection(b1, "limited")
        if now["attempts"] != row["attempts"] or now["attempt_times"][-1:] != row["attempt_times"][-1:]:
            return {"grew": now}
        return time.monotonic() >= quiet_until and {"quiet": now}
    after = wait_for(quiet_or_grew, 3 * interval + WAIT, "three quiet retry intervals after giving up")
    details.update(retry_interval_s=interval, reconnect_attempts=allowed, attempts=row["attempts"],
                   attempts_seen=seen, retry_gaps_s=gaps, retries=len(retries), connected=row["connected"])
    assert not row["connected"]
    assert row["attempts"] == allowed, f"gave up after {row['attempts']} failed attempts, not {allowed}"
    assert len(retries) == allowed, f"{len(retries)} dials after the loss, {allowed} expected: {retries}"
    assert seen == sorted(seen), f"the failed attempts only grow until the broker gives up: {seen}"
    assert all(gap >= SLACK * interval for gap in gaps), \
        f"attempts closer together than the retry interval of {interval}s: {gaps}"
    assert "quiet" in after, f"an attempt after giving up: {after['grew']}"


@pytest.mark.spec("BROKERCONN-FAILOVER-1")
def test_alternates_take_over_in_order_when_the_target_goes(topology, clients, details):
    running = topology("broker-failover")
    p = running["P"]
    order = list(configured(running, "P", "backups").to)  # S1, then the alternates S2 and S3
    first = wait_connected(p, "backups")
    if node_at(running, first["target"]) != order[0]:
        # The topology starts its brokers together, so P's first dial may come before S1 listens: it is
        # refused and P walks on to S2. That walk must follow the URI too; then P starts again, now that all
        # of S1..S3 listen, and its first dial must stay on S1.
        raced = _walked(running, first)
        details.update(start_race=raced)
        assert raced == (order * len(raced))[:len(raced)], f"alternates tried out of URI order at start: {first}"
        restart_or_skip(p)
        first = wait_connected(p, "backups")
    details.update(first_target=node_at(running, first["target"]))
    assert node_at(running, first["target"]) == order[0], \
        f"with S1, S2 and S3 all up the connection must be on S1, the first of the URI: {first}"
    snd = sender(clients.connect(running.client_url("producer")), "jobs.a")
    at_s1 = clients.connect(running.client_url("s1")).receiver("jobs.a")
    send_accepted(snd, 5)
    wait_for(lambda: len(set(at_s1.seqs(snd.name))) >= 5, WAIT, "the first 5 messages on S1",
             describe=lambda: f"{at_s1.seqs(snd.name)}")
    # The walk judged starts at S1's connection: a start race that went round S1, S2, S3 and back to S1 (the
    # brokers start together) is history from before, seen on Artemis as ['S1', 'S2', 'S3', 'S1', 'S2'].
    before = len(connection(p, "backups")["targets_tried"])
    kill_or_skip(running["S1"])
    at_s2 = clients.connect(running.client_url("s2")).receiver("jobs.a")
    send_accepted(snd, 5)  # seqs 5..9: queued on P while it fails over, then forwarded to S2
    wait_for(lambda: set(range(5, 10)) <= set(at_s2.seqs(snd.name)), WAIT,
             "the 5 messages sent after S1 died to reach S2",
             describe=lambda: f"S2 got {at_s2.seqs(snd.name)}; P says {connection(p, 'backups')}")
    row = connection(p, "backups")
    walked = _walked(running, row, since=before - 1)
    on_s3 = depth(running["S3"], "jobs.a")
    details.update(targets_tried=[node_at(running, t) or t for t in row["targets_tried"]], walked=walked,
                   now_on=node_at(running, row["target"]), connects=row["connects"],
                   on_s2=len(set(at_s2.seqs(snd.name))), on_s3=on_s3)
    assert row["connected"] and node_at(running, row["target"]) == "S2", f"P must be on S2 now: {row}"
    assert walked == ["S1", "S2"], f"alternates in URI order, stopping at the first that answers: {walked}"
    assert on_s3 == 0, f"S3 got {on_s3} messages though S2 answered"


def _walked(running, row: dict, since: int = 0) -> list[str]:
    """The nodes a broker connection dialled, in order from its `since`-th dial, with repeats of one node in a row
    folded."""
    tried = [node_at(running, t) or t for t in row["targets_tried"][since:]]
    return [t for i, t in enumerate(tried) if i == 0 or t != tried[i - 1]]
