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

import pytest
from proton import Message
from proton.reactor import ApplicationEvent, AtMostOnce, EventInjector
from proton.utils import BlockingConnection

from harness.wait import wait_for
from reference.broker import broker as broker_module
from reference.loop import EngineLoop
from reference.router import router as router_module
from reference.router.config import load_config
from tests.test_broker_logic import broker_with

TIMEOUT = 10.0
CLIENTS = 30


def live(*classes) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, classes))


def serve(handler, listener_hook=None):
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
    return listener.port, stop


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
        kinds = (broker_module.Consumer, broker_module.Producer)
    try:
        come_and_go(port, "memory.check", accept=server == "broker")
        wait_for(lambda: live(*kinds) == 0, TIMEOUT, f"the {server}'s consumers and producers to be freed",
                 describe=lambda: f"{live(*kinds)} still alive after {CLIENTS} connections came and went")
    finally:
        stop()
