"""The reference servers free what a connection carried once it is gone.

proton keeps a wrapper's attributes in the C object's record; the servers hang their consumer and producer
objects there, and those hold their links back: a cycle through C that Python's collector cannot see. Until the
servers dropped that state when the transport closed, every connection ever closed stayed in memory with its
links (the frame fuzzer saw the router grow some 7 KB per connection, past 200 MB in long sessions). These
cases run each server in-process on its own loop, let clients come and go, and count what is left.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest
from proton import Message
from proton.reactor import ApplicationEvent, AtMostOnce, EventInjector
from proton.utils import BlockingConnection

from harness.wait import wait_for
from reference.broker import dispatch as broker_dispatch
from reference.broker import model as broker_model
from reference.loop import EngineLoop
from reference.router import router as router_module
from reference.router.config import load_config
from tests.test_broker_logic import broker_with

TIMEOUT = 10.0
CLIENTS = 30


def live(*classes) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, classes))


def serve(handler, listener_hook=None, with_injector=False):
    loop = EngineLoop(handler)
    listener = loop.listen("127.0.0.1:0")
    if listener_hook:
        listener_hook(listener)
    injector = EventInjector()
    loop.selectable(injector)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()

    def stop():
        loop.stop()
        injector.trigger(ApplicationEvent("stop_now"))
        thread.join(TIMEOUT)
    return (listener.port, stop, injector) if with_injector else (listener.port, stop)


def come_and_go(port: int, address: str, accept: bool) -> None:
    for i in range(CLIENTS):
        conn = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
        receiver = conn.create_receiver(f"{address}.{i}")
        # Pre-settled: a router settles a delivery only once its consumer has, and this one thread could not
        # receive while a blocking send waits for that.
        conn.create_sender(f"{address}.{i}", options=AtMostOnce()).send(Message(body=i))
        assert receiver.receive(timeout=TIMEOUT).body == i
        if accept:  # a broker delivers unsettled; a router passes the pre-settled message on as it came
            receiver.accept()
        if i % 2:
            conn.close()
        else:  # half of them just vanish, as a crashed client would
            conn.conn.transport.close_tail()
            conn.conn.transport.close_head()
            conn.container.process()


@pytest.mark.parametrize("server", ["router", "broker"])
def test_closed_connections_leave_nothing_behind(server):
    if server == "router":
        config = load_config("examples/single-router.conf")
        handler = router_module.Router(config)
        port, stop = serve(handler, lambda listener: handler.listener_of.__setitem__(listener, config.listeners[0]))
        kinds = (router_module.Consumer, router_module.Producer, router_module.ConnectionState)
    else:
        handler = broker_with()
        port, stop = serve(handler)
        kinds = (broker_model.Consumer, broker_model.Producer)
    try:
        come_and_go(port, "memory.check", accept=server == "broker")
        wait_for(lambda: live(*kinds) == 0, TIMEOUT, f"the {server}'s consumers and producers to be freed",
                 describe=lambda: f"{live(*kinds)} still alive after {CLIENTS} connections came and went")
    finally:
        stop()


def test_a_consumer_that_stops_reading_is_not_buffered_without_bound():
    """A client grants credit for everything on a queue and then never reads its socket. The broker must
    not encode the whole queue into that connection's output (credit does not bound it): it holds back at
    OUTPUT_HOLD_BYTES, the rest waits in the queue, and other consumers are served meanwhile."""
    handler = broker_with()
    seen: list[tuple[int, int, int]] = []

    def on_probe(_event):  # runs on the loop's thread: proton objects are not thread-safe
        queue = handler.queues.get("orders")
        backlog = max((broker_dispatch.unwritten(c.link) for q in handler.queues.values() for c in q.consumers
                       if not c.closed), default=0)
        seen.append((queue.depth if queue else 0, len(queue.available) if queue else 0, backlog))

    handler.on_probe = on_probe
    port, stop, injector = serve(handler, with_injector=True)

    def settled() -> tuple[int, int, int] | None:
        """The numbers once all are stored and two probes in a row agree (dispatch has stopped)."""
        before = len(seen)
        injector.trigger(ApplicationEvent("probe"))
        wait_for(lambda: len(seen) > before, TIMEOUT, "the loop to answer a probe")
        if len(seen) >= 2 and seen[-1] == seen[-2] and seen[-1][0] == MESSAGES:
            return seen[-1]
        return None

    body = b"x" * 65536
    # More than the kernel's socket buffers can take on loopback, so that what is left must wait somewhere in the
    # broker (else `available > 0` below fails, or the hold is never reached and the backlog bound proves nothing).
    # The most they take is this host's autotuning ceilings, the slow client's receive buffer (tcp_rmem's) and the
    # broker's send buffer (tcp_wmem's), read here rather than assumed: 32 MiB + 4 MiB on these machines, 128 MiB
    # or more on hosts tuned for fast networks. 100 messages more for what proton buffers on either side; and at
    # least 1,200 x 64 KiB (75 MiB), as before, where that is more.
    kernel_most = sum(int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[2])
                      for name in ("tcp_rmem", "tcp_wmem"))
    MESSAGES = max(1200, (kernel_most + broker_dispatch.OUTPUT_HOLD_BYTES) // len(body) + 100)
    try:
        slow = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
        slow.create_receiver("orders", credit=100_000)  # then never touched again: its socket is not read
        producer = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
        sender = producer.create_sender("orders")  # each send waits for the broker's accepted: all are stored
        for _ in range(MESSAGES):
            sender.send(Message(body=body))
        _, available, backlog = wait_for(settled, TIMEOUT, "the broker to stop dispatching to the slow consumer",
                                         describe=lambda: f"(depth, available, unwritten bytes) {seen[-1:]}")
        assert backlog <= broker_dispatch.OUTPUT_HOLD_BYTES + 2 * len(body), (
            f"{backlog} bytes wait for a client that reads nothing")
        assert available > 0, "what the connection could not take waits in the queue"
        other = producer.create_receiver("other.queue", credit=1)
        producer.create_sender("other.queue", options=AtMostOnce()).send(Message(body="meanwhile"))
        assert other.receive(timeout=TIMEOUT).body == "meanwhile"
        slow.close()
        producer.close()
    finally:
        stop()
