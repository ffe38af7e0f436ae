"""The peers' management operations (broker connections, queue deletion) as HTTP calls, against a real local
HTTP server that plays the reference broker's management endpoint: what is asked on the wire, and how each
answer (or no answer) comes back to a suite."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

from harness.peers.base import Endpoint, ManagementError, Peer, PeerInfo, PeerStartError
from harness.vendors.reference.broker import ReferenceBrokerPeer
from harness.ports import free_port

CONNECTIONS = [
    {"name": "bridge", "uri": "tcp://127.0.0.1:5673", "started": True, "connected": True,
     "target": "127.0.0.1:5673", "attempts": 0, "connects": 1, "gave_up": False,
     "attempt_times": [1700000000.25], "targets_tried": ["127.0.0.1:5673"]},
]


class FakeManagement:
    """A management endpoint on a real socket: answers from `routes` ((method, raw path) -> (status, body)),
    and records every request as (method, raw path, decoded path)."""

    def __init__(self):
        self.routes: dict[tuple[str, str], tuple[int, object]] = {}
        self.requests: list[tuple[str, str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                fake.requests.append((self.command, self.path, unquote(self.path)))
                status, body = fake.routes.get((self.command, self.path), (404, {"error": "no such thing"}))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _answer  # noqa: N815 - the http.server API

            def log_message(self, *_args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def management():
    fake = FakeManagement()
    yield fake
    fake.close()


@pytest.fixture
def broker(tmp_path, management):
    peer = ReferenceBrokerPeer("B1", lambda ports: "<configuration/>", frozenset(), workdir=tmp_path)
    peer.management_url = management.url
    return peer


def test_broker_connections_are_read_as_json(broker, management):
    management.routes[("GET", "/broker-connections")] = (200, CONNECTIONS)
    assert broker.broker_connections() == CONNECTIONS
    assert management.requests == [("GET", "/broker-connections", "/broker-connections")]


def test_start_broker_connection_posts_to_its_name(broker, management):
    management.routes[("POST", "/broker-connections/manual/start")] = (200, {"name": "manual", "started": True})
    assert broker.start_broker_connection("manual") is None
    assert management.requests == [("POST", "/broker-connections/manual/start", "/broker-connections/manual/start")]


@pytest.mark.parametrize(("status", "error"), [(404, "no broker connection 'nope'"), (409, "already started")])
def test_a_refused_start_names_the_peer_the_operation_and_the_answer(broker, management, status, error):
    management.routes[("POST", "/broker-connections/nope/start")] = (status, {"error": error})
    with pytest.raises(ManagementError) as info:
        broker.start_broker_connection("nope")
    message = str(info.value)
    assert info.value.status == status
    assert message.startswith("B1: cannot start broker connection 'nope': ")
    assert f"answered {status} {error}" in message
    assert "\n" not in message


def test_delete_queue_sends_the_name_as_one_path_segment(broker, management):
    name = "$ACTIVEMQ_ARTEMIS_MIRROR_DC2/x y"
    raw = "/queues/%24ACTIVEMQ_ARTEMIS_MIRROR_DC2%2Fx%20y"
    management.routes[("DELETE", raw)] = (200, {"deleted": name})
    broker.delete_queue(name)
    assert management.requests == [("DELETE", raw, f"/queues/{name}")]


def test_deleting_a_missing_queue_is_an_error_with_its_status(broker, management):
    with pytest.raises(ManagementError) as info:
        broker.delete_queue("gone")
    assert info.value.status == 404
    assert str(info.value) == "B1: cannot delete queue 'gone': DELETE /queues/gone answered 404 no such thing"


def test_an_error_body_that_is_not_json_is_quoted_by_its_first_line(broker, management):
    management.routes[("DELETE", "/queues/q")] = (500, b"Traceback (most recent call last):\n  boom")
    with pytest.raises(ManagementError, match=r"answered 500 Traceback \(most recent call last\):$") as info:
        broker.delete_queue("q")
    assert info.value.status == 500


def test_queue_stats_say_whether_the_queue_exists(broker, management):
    row = {"name": "orders", "address": "orders", "routing": "anycast", "durable": True, "depth": 3,
           "available": 3, "in_flight": 0, "consumers": 0}
    management.routes[("GET", "/queues/orders")] = (200, row)
    assert broker.queue_stats("orders") == {**row, "exists": True}
    assert broker.queue_stats("missing") == {"name": "missing", "depth": 0, "consumers": 0, "exists": False}
    management.routes[("GET", "/queues/%24ACTIVEMQ_ARTEMIS_MIRROR_DC2")] = (200, {**row, "depth": 7})
    assert broker.queue_stats("$ACTIVEMQ_ARTEMIS_MIRROR_DC2")["depth"] == 7


def test_a_non_json_answer_is_an_error(broker, management):
    management.routes[("GET", "/broker-connections")] = (200, b"<html>not json</html>")
    with pytest.raises(ManagementError, match="^B1: cannot list broker connections: GET /broker-connections "
                                              "answered something that is not JSON"):
        broker.broker_connections()


def test_an_endpoint_that_does_not_answer_is_an_error_without_status(tmp_path):
    peer = ReferenceBrokerPeer("DC1", lambda ports: "<configuration/>", frozenset(), workdir=tmp_path)
    peer.management_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(ManagementError) as info:
        peer.broker_connections()
    assert info.value.status is None
    assert str(info.value).startswith(f"DC1: cannot list broker connections: GET {peer.management_url}"
                                      "/broker-connections failed: ")


def test_a_broker_not_started_has_no_management(tmp_path):
    peer = ReferenceBrokerPeer("B2", lambda ports: "<configuration/>", frozenset(), workdir=tmp_path)
    with pytest.raises(PeerStartError, match="^B2: cannot start broker connection 'x': no management endpoint"):
        peer.start_broker_connection("x")


class BarePeer(Peer):
    """A provider with no management view at all."""

    def __init__(self):
        self.name, self.role, self.capabilities = "X1", "broker", frozenset()
        self.info = PeerInfo("somebroker", "1.0", "external")
        self.endpoints = {"amqp": Endpoint("amqp", "127.0.0.1", 5672)}

    def start(self, timeout=30.0): ...
    def stop(self, timeout=10.0): ...
    def kill(self): ...
    def is_running(self): return True
    def logs(self): return ""


@pytest.mark.parametrize(("call", "says"), [
    (lambda p: p.broker_connections(), "cannot list broker connections"),
    (lambda p: p.start_broker_connection("DC2"), "cannot start a broker connection"),
    (lambda p: p.delete_queue("orders"), "cannot delete a queue"),
])
def test_providers_without_management_say_so_in_one_line(call, says):
    with pytest.raises(NotImplementedError) as info:
        call(BarePeer())
    assert str(info.value) == f"external provider of somebroker {says}"
