import itertools
import socket
import threading
import time

import pytest

import harness.wait
from harness.wait import WaitTimeout, accepts, wait_for


def test_returns_the_predicates_truthy_value():
    assert wait_for(lambda: {"n": 3}, timeout=1, what="a dict") == {"n": 3}


def test_returns_as_soon_as_the_condition_holds(fake_clock):
    calls = []

    def third_time_lucky():
        calls.append(1)
        return len(calls) >= 3 and "ready"

    assert wait_for(third_time_lucky, timeout=5, what="three calls") == "ready"
    assert len(calls) == 3
    assert len(fake_clock.sleeps) == 2


def test_sees_a_change_made_by_another_thread():
    box = []
    timer = threading.Timer(0.05, box.append, args=["done"])
    timer.start()
    try:
        assert wait_for(lambda: box and box[0], timeout=5, what="the timer") == "done"
    finally:
        timer.cancel()


def test_timeout_message_names_what_and_last_value():
    values = iter(range(1000000))
    with pytest.raises(WaitTimeout) as info:
        wait_for(lambda: next(values) < 0 and None, timeout=0.05, what="a negative number")
    message = str(info.value)
    assert message == "timed out after 0.05s waiting for a negative number; last seen: False"


def test_timeout_message_uses_describe_and_is_one_line():
    with pytest.raises(WaitTimeout) as info:
        wait_for(lambda: 0, timeout=0.02, what="2 receivers", describe=lambda: "receivers:\n  r1")
    assert str(info.value) == "timed out after 0.02s waiting for 2 receivers; last seen: receivers: r1"
    assert isinstance(info.value, AssertionError)


def test_a_failing_describe_does_not_hide_the_timeout():
    def broken():
        raise RuntimeError("no peer")

    with pytest.raises(WaitTimeout, match=r"last seen: <describe\(\) failed: RuntimeError: no peer>"):
        wait_for(lambda: None, timeout=0.01, what="x", describe=broken)


class _FakeClock:
    """Stands in for the `time` module inside harness.wait: sleeping advances the clock and nothing else.

    The schedule of polls is logic, so it is checked on a clock that a loaded CI machine cannot stretch
    (a real-time bound on the gaps failed there once, a 166 ms gap on 2 busy cores).
    """

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_clock(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(harness.wait, "time", clock)
    return clock


def test_deadline_is_kept_and_polling_backs_off(fake_clock):
    calls = []
    started = fake_clock.now
    with pytest.raises(WaitTimeout):
        wait_for(lambda: calls.append(fake_clock.now), timeout=0.5, what="never", interval=0.001)
    # The last sleep is cut to what remains, so the deadline is met exactly, not overshot by a poll.
    assert fake_clock.now - started == pytest.approx(0.5)
    # Polling starts at 1 ms and grows by half each time up to 50 ms, never beyond.
    assert fake_clock.sleeps[:4] == pytest.approx([0.001, 0.0015, 0.00225, 0.003375])
    assert max(fake_clock.sleeps) == pytest.approx(0.05)
    assert all(b >= a for a, b in itertools.pairwise(fake_clock.sleeps[:-1]))
    # One call per sleep and one more at the deadline.
    assert len(calls) == len(fake_clock.sleeps) + 1
    assert calls[-1] == pytest.approx(started + 0.5)


def test_deadline_is_kept_on_the_real_clock():
    # Only the lower bound: how late a loaded machine wakes a sleeper is not the harness's to assert.
    started = time.monotonic()
    with pytest.raises(WaitTimeout):
        wait_for(lambda: False, timeout=0.2, what="never", interval=0.001)
    assert time.monotonic() - started >= 0.2


def test_checks_once_more_at_the_deadline():
    deadline_hit = []

    def late():
        return deadline_hit.append(1) or len(deadline_hit) >= 2

    # timeout 0: one check, then the deadline has passed; a second check would only happen with time left.
    with pytest.raises(WaitTimeout):
        wait_for(lambda: False, timeout=0, what="nothing")
    assert wait_for(late, timeout=0.001, what="second call", interval=0.01) is True


def test_predicate_exceptions_propagate():
    def broken():
        raise KeyError("probe")

    with pytest.raises(KeyError):
        wait_for(broken, timeout=1, what="x")


def test_rejects_negative_timeout_and_non_positive_interval():
    with pytest.raises(ValueError):
        wait_for(lambda: True, timeout=-1, what="x")
    with pytest.raises(ValueError):
        wait_for(lambda: True, timeout=1, what="x", interval=0)


def test_accepts_a_listener_and_not_a_closed_port():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert accepts("127.0.0.1", port)
    assert not accepts("127.0.0.1", port)


def test_accepts_takes_a_url_s_bracketed_ipv6_host():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    with socket.socket(socket.AF_INET6) as listener:
        try:
            listener.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback on this machine")
        listener.listen()
        assert accepts("[::1]", listener.getsockname()[1])
