"""The real toxiproxy-server 2.12.0 beside the harness's own fault proxy: one API, one behaviour.

- The real server is started as the harness starts it (`start_fault_proxy(kind="toxiproxy")`) and driven two
  ways, with the unmodified `toxiproxy-python` client and with the harness's own `LinkProxies` (what suites
  use), each effect observed on real TCP traffic; the same drives run against ours.
- The API contract: the same calls go to both servers and their answers (status, Content-Type, JSON) are
  compared field by field. Two things are let through, and only these: ports the kernel picked (a listen
  of ':0'), and the words after "bad request body: " (Go's JSON decoder's wording, which ours does not copy;
  the status and that prefix must still agree).

Skipped, with the reason, where the real server is not installed (`make toxiproxy`, which needs Go).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from harness.faults import FaultProxyUnavailable, start_fault_proxy
from harness.faults.links import LinkProxies
from harness.faults.toxiproxy_server import VERSION
from harness.ports import free_port, release_ports
from harness.wait import wait_for

IO_TIMEOUT = 5.0
LATENCY_MS = 800  # well above a loopback round trip on a loaded 2-core machine (load 40 seen here)
QUICK = LATENCY_MS / 1000  # a round trip without the toxic


# ---- servers -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real():
    try:
        handle = start_fault_proxy(kind="toxiproxy")
    except FaultProxyUnavailable as exc:
        pytest.skip(str(exc))
    yield handle
    assert handle.stop() == 0, handle.logs()


@pytest.fixture(scope="module")
def ours():
    handle = start_fault_proxy(kind="harness")
    yield handle
    assert handle.stop() == 0, handle.logs()


@pytest.fixture(params=["toxiproxy", "harness"])
def server(request):
    handle = request.getfixturevalue("real" if request.param == "toxiproxy" else "ours")
    _clear(handle)
    yield handle
    _clear(handle)


def _clear(handle) -> None:
    status, proxies, _ = call(handle, "GET", "/proxies")
    assert status == 200, proxies
    for name in proxies:
        call(handle, "DELETE", "/proxies/" + urllib.request.quote(name, safe=""))


class LoopbackServer:
    """A threaded server on loopback: each connection accepted is served by `_serve` in a thread of its own."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        raise NotImplementedError

    def close(self):
        self.sock.close()


class Echo(LoopbackServer):
    """Answers each chunk with `prefix` + the chunk."""

    def __init__(self, prefix: bytes = b""):
        self.prefix = prefix
        super().__init__()

    def _serve(self, conn):
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(self.prefix + data)
            except OSError:
                pass


@pytest.fixture
def echoes():
    started = []

    def start(prefix: bytes = b"") -> Echo:
        started.append(Echo(prefix))
        return started[-1]
    yield start
    for echo in started:
        echo.close()


def call(handle, method: str, path: str, body=None, raw: bytes | None = None):
    """(status, decoded JSON or text or None, Content-Type) of one API call."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(handle.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=IO_TIMEOUT) as reply:
            status, payload, ctype = reply.status, reply.read(), reply.headers.get("Content-Type")
    except urllib.error.HTTPError as exc:
        status, payload, ctype = exc.code, exc.read(), exc.headers.get("Content-Type")
    try:
        return status, (json.loads(payload) if payload.strip() else None), ctype
    except ValueError:
        return status, payload.decode(), ctype


def round_trip(port: int, message: bytes = b"ping", expect: bytes | None = None) -> float:
    """Seconds for `message` to come back (as `expect`) through a fresh connection to `port`."""
    expect = message if expect is None else expect
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as conn:
        t0 = time.monotonic()
        conn.sendall(message)
        got = b""
        while len(got) < len(expect):
            part = conn.recv(len(expect) - len(got))
            assert part, f"connection closed after {got!r}, expected {expect!r}"
            got += part
        assert got == expect
        return time.monotonic() - t0


def quickest_round_trip(port: int, message: bytes = b"ping", expect: bytes | None = None) -> float:
    """The quickest of round trips (each on a fresh connection), made until one is under QUICK or IO_TIMEOUT passed.

    How "no latency toxic in the way" is shown: the toxic makes every round trip take LATENCY_MS or more on any
    machine, so one quicker round trip proves it gone, whereas a loaded machine can stall any single one."""
    deadline = time.monotonic() + IO_TIMEOUT
    quickest = round_trip(port, message, expect)
    while quickest >= QUICK and time.monotonic() < deadline:
        quickest = min(quickest, round_trip(port, message, expect))
    return quickest


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT).close()
    except ConnectionRefusedError:
        return True
    return False


# ---- the real server as the harness runs it ---------------------------------------------------------------------


def test_real_server_is_the_pinned_release_and_says_so_in_records(real):
    assert real.kind == "toxiproxy" and real.version == VERSION
    assert real.record() == {"proxy": "toxiproxy", "version": VERSION}
    assert call(real, "GET", "/version")[:2] == (200, {"version": VERSION})


def test_the_python_client_drives_both_servers_alike(server, echoes):
    client = server.client()
    echo = echoes()
    proxy = client.create(upstream=f"127.0.0.1:{echo.port}", name="py", listen=f"127.0.0.1:{free_port()}")
    port = int(proxy.listen.rsplit(":", 1)[1])
    assert quickest_round_trip(port) < QUICK

    proxy.add_toxic(name="slow", type="latency", stream="downstream", attributes={"latency": LATENCY_MS})
    assert list(proxy.toxics()) == ["slow"] and proxy.get_toxic("slow").attributes["latency"] == LATENCY_MS
    assert round_trip(port) >= LATENCY_MS / 1000 * 0.9
    proxy.destroy_toxic("slow")
    assert quickest_round_trip(port) < QUICK

    proxy.disable()
    assert client.get_proxy("py").enabled is False
    assert refused(port)
    proxy.enable()
    assert quickest_round_trip(port) < QUICK
    client.destroy(proxy)
    assert client.proxies() == {}


def test_link_proxies_drive_both_servers_alike(server, echoes):
    links = LinkProxies(server)
    first, second = echoes(), echoes(prefix=b"2:")
    port = links.add("A->B", first.port)
    assert quickest_round_trip(port) < QUICK

    links.toxic("A->B", "latency", stream="upstream", latency=LATENCY_MS)
    assert round_trip(port) >= LATENCY_MS / 1000 * 0.9
    links.remove_toxic("A->B", "latency_upstream")
    assert quickest_round_trip(port) < QUICK

    links.set_enabled("A->B", False)
    assert refused(port)
    links.set_enabled("A->B", True)
    assert quickest_round_trip(port) < QUICK

    assert links.retarget("A->B", second.port) == port  # same port to dial, new listener behind it
    assert quickest_round_trip(port, b"x", expect=b"2:x") < QUICK

    links.toxic("A->B", "timeout", stream="downstream", timeout=0)
    links.set_enabled("A->B", False)
    links.reset()  # every link enabled again, every toxic removed
    assert quickest_round_trip(port, b"y", expect=b"2:y") < QUICK
    assert call(server, "GET", "/proxies/A-%3EB/toxics")[:2] == (200, [])


def test_reset_peer_on_an_open_connection_closes_it_on_both_servers(server, echoes):
    links = LinkProxies(server)
    port = links.add("rst", echoes().port)
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as conn:
        conn.sendall(b"a")
        assert conn.recv(1) == b"a"
        links.toxic("rst", "reset_peer", stream="upstream", timeout=0)
        conn.sendall(b"b")
        assert conn.recv(1) == b""  # a FIN: SO_LINGER 0 is set only on connections opened with the toxic
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as conn:
        conn.sendall(b"c")
        with pytest.raises(ConnectionResetError):
            conn.recv(1)


def raw_answer(handle, request: bytes) -> bytes:
    """The whole answer to one raw HTTP request on a fresh connection, read until the server closes it."""
    with socket.create_connection((handle.host, handle.port), timeout=IO_TIMEOUT) as conn:
        conn.sendall(request)
        answer = b""
        while part := conn.recv(65536):
            answer += part
    return answer


def raw_exchange(handle, request: bytes) -> tuple[bytes, bytes]:
    """(status line, body) of one raw HTTP exchange."""
    head, _, body = raw_answer(handle, request).partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body


def test_a_chunked_body_and_a_body_of_megabytes_are_read_whole_by_both_servers(server):
    body = json.dumps({"name": "chunked", "listen": "127.0.0.1:0", "upstream": UP}).encode()
    chunks = [body[:7], body[7:20], body[20:]]
    request = (b"POST /proxies HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
               + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n")
    status, answer = raw_exchange(server, request)
    assert status == b"HTTP/1.1 201 Created" and json.loads(answer)["name"] == "chunked", (status, answer)
    # Go's server sets no limit on a body; ours takes up to 16 MiB (a topology's populate is a few KB)
    padded = {"name": "big", "listen": "127.0.0.1:0", "upstream": UP, "note": "x" * (3 * 1024 * 1024)}
    status, answer, _ = call(server, "POST", "/proxies", padded)
    assert status == 201 and answer["name"] == "big", (status, answer)


def test_a_web_browser_is_refused_403_by_both_servers(server):
    # Toxiproxy refuses a User-Agent starting with "Mozilla/", so that a web page cannot drive it
    request = b"GET /version HTTP/1.1\r\nHost: x\r\nUser-Agent: Mozilla/5.0 (X11)\r\nConnection: close\r\n\r\n"
    status, body = raw_exchange(server, request)
    assert status == b"HTTP/1.1 403 Forbidden" and body == b"User agent not allowed\n", (status, body)


def raw_head(handle, method: str, target: str, agent: str = "interop-test") -> tuple[bytes, dict[bytes, bytes]]:
    """(status line, headers with lower-case names) of a request sent as written: no client cleans its path."""
    request = (f"{method} {target} HTTP/1.1\r\nHost: x\r\nUser-Agent: {agent}\r\nContent-Length: 0\r\n"
               "Connection: close\r\n\r\n").encode()
    lines = raw_answer(handle, request).partition(b"\r\n\r\n")[0].split(b"\r\n")
    return lines[0], {k.strip().lower(): v.strip() for k, v in (line.split(b":", 1) for line in lines[1:])}


@pytest.mark.parametrize("method, target, location", [
    ("GET", "/proxies//toxics", b"/proxies/toxics"),        # a client that built the path from an empty name
    ("POST", "/proxies/./x/../", b"/proxies/"),             # dot segments; a trailing slash is kept
    ("DELETE", "/proxies/x/..", b"/proxies"),
    ("GET", "/a%2F%2Fb?x=1", b"/a/b?x=1"),                 # decoded first; the query kept
    ("GET", "/proxies/(x)//toxics", b"/proxies/%28x%29/toxics"),  # escaped as Go escapes a path
])
def test_a_path_that_is_not_clean_is_redirected_to_its_clean_form_by_both_servers(server, method, target, location):
    status, headers = raw_head(server, method, target)
    assert (status, headers.get(b"location")) == (b"HTTP/1.1 301 Moved Permanently", location), (status, headers)


def test_a_browser_is_told_404_and_405_before_it_is_refused_by_both_servers(server):
    # the browser check runs once a route and its method matched (a middleware of gorilla/mux, Toxiproxy's router)
    agent = "Mozilla/5.0 (X11)"
    assert raw_head(server, "GET", "/nope", agent)[0] == b"HTTP/1.1 404 Not Found"
    assert raw_head(server, "DELETE", "/version", agent)[0] == b"HTTP/1.1 405 Method Not Allowed"
    assert raw_head(server, "GET", "/proxies//toxics", agent)[0] == b"HTTP/1.1 301 Moved Permanently"
    assert raw_head(server, "GET", "/version", agent)[0] == b"HTTP/1.1 403 Forbidden"


def test_a_malformed_request_line_is_answered_400_and_closed_by_both_servers(server):
    status, _ = raw_exchange(server, b"GARBAGE\r\n\r\n")
    assert status == b"HTTP/1.1 400 Bad Request"


class AfterEnd(LoopbackServer):
    """A threaded server on loopback that sends `greeting` on accept, reads until the client's end of the stream,
    then answers how many bytes it got; `sent` is set once the greeting is out."""

    def __init__(self, greeting: bytes = b""):
        self.greeting = greeting
        self.sent = threading.Event()
        super().__init__()

    def _serve(self, conn):
        with conn, contextlib.suppress(OSError):
            conn.sendall(self.greeting)
            self.sent.set()
            got = 0
            while data := conn.recv(65536):
                got += len(data)
            conn.sendall(b"got %d" % got)


def read_to_end(conn: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while part := conn.recv(65536):
            data += part
    return data


def test_a_half_close_is_not_passed_on_by_either_server(server):
    # toxiproxy-server closes the upstream socket both ways when the client's stream ends (link.go: dest.Close(),
    # not CloseWrite): an answer the upstream sends after that end never reaches the client, with or without toxics.
    upstream = AfterEnd()
    try:
        links = LinkProxies(server)
        port = links.add("half", upstream.port)
        for toxic in (False, True):
            if toxic:
                links.toxic("half", "latency", stream="upstream", latency=1)
            with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as conn:
                conn.sendall(b"x" * 1000)
                conn.shutdown(socket.SHUT_WR)
                assert read_to_end(conn) == b"", f"toxic: {toxic}"
    finally:
        upstream.close()


def unread_from(port: int) -> list[int]:
    """Bytes not yet read by its owner on each established IPv4 socket connected to port `port` (rx_queue in
    /proc/net/tcp): on loopback, the proxy's socket to an upstream listening there."""
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return [int(row[4].split(":")[1], 16) for row in rows if int(row[2].split(":")[1], 16) == port and row[3] == "01"]


def test_what_a_chain_holds_still_arrives_when_the_other_side_ends_on_both_servers(server):
    # The client's end closes the upstream, and the other direction ends as if the upstream had closed: the greeting
    # a latency toxic still holds is delivered, then the client's socket closes.
    upstream = AfterEnd(greeting=b"hello")
    try:
        links = LinkProxies(server)
        port = links.add("held", upstream.port)
        links.toxic("held", "latency", stream="downstream", latency=LATENCY_MS)
        with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as conn:
            assert upstream.sent.wait(IO_TIMEOUT)
            # Read by the proxy (into its chain), not only in its socket: closing a socket with unread bytes is an RST
            # that drops them, on either server.
            wait_for(lambda: unread_from(upstream.port) == [0], IO_TIMEOUT, "the proxy to read the greeting",
                     describe=lambda: unread_from(upstream.port))
            t0 = time.monotonic()
            conn.shutdown(socket.SHUT_WR)  # while the greeting is held for LATENCY_MS
            assert read_to_end(conn) == b"hello"
            assert time.monotonic() - t0 < LATENCY_MS / 1000 + 2
    finally:
        upstream.close()


def test_limit_data_ends_its_direction_and_the_other_still_delivers_on_both_servers(server):
    # limit_data closes its stub in toxiproxy-server: the end of its direction, not of the whole connection at once.
    # The upstream socket closes after 3 bytes; the greeting a latency toxic holds downstream still arrives.
    upstream = AfterEnd(greeting=b"greet")
    try:
        links = LinkProxies(server)
        port = links.add("cap", upstream.port)
        links.toxic("cap", "latency", stream="downstream", latency=LATENCY_MS)
        links.toxic("cap", "limit_data", stream="upstream", bytes=3)
        with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as conn:
            assert upstream.sent.wait(IO_TIMEOUT)
            wait_for(lambda: unread_from(upstream.port) == [0], IO_TIMEOUT, "the proxy to read the greeting",
                     describe=lambda: unread_from(upstream.port))
            conn.sendall(b"hello")  # past the limit: the upstream direction ends
            assert read_to_end(conn) == b"greet"
    finally:
        upstream.close()


# ---- the API contract: ours against the real one, field by field ------------------------------------------------


UP = "127.0.0.1:9"  # the API never dials the upstream: nothing need listen there


def contract_calls(p1: int, p2: int, p3: int) -> list[tuple]:
    """(method, path, body or raw bytes): every route, the defaults, the errors and the odd corners measured."""
    return [
        ("GET", "/version", None),
        ("GET", "/proxies", None),
        ("POST", "/proxies", {"name": "a", "listen": f"127.0.0.1:{p1}", "upstream": UP}),
        ("POST", "/proxies", {"name": "a", "listen": f"127.0.0.1:{p1}", "upstream": UP}),
        ("POST", "/proxies", {"listen": "127.0.0.1:0", "upstream": UP}),
        ("POST", "/proxies", {"name": "x", "listen": "127.0.0.1:0"}),
        ("POST", "/proxies", b"{bad"),
        ("POST", "/proxies", b""),
        ("POST", "/proxies", {"name": 5, "upstream": UP}),
        ("POST", "/proxies", {"name": "off", "upstream": UP, "enabled": False}),
        ("POST", "/proxies", {"name": "off2", "listen": f"127.0.0.1:{p2}", "upstream": UP, "enabled": False}),
        ("POST", "/proxies", {"name": "taken", "listen": f"127.0.0.1:{p1}", "upstream": UP}),
        ("POST", "/proxies", {"name": "any", "upstream": UP}),
        ("POST", "/proxies", {"name": "lh", "listen": "localhost:0", "upstream": UP}),
        ("POST", "/proxies", {"name": "en", "listen": "127.0.0.1:0", "upstream": UP, "enabled": None}),
        ("POST", "/proxies", {"name": "badup", "listen": "127.0.0.1:0", "upstream": "nocolon"}),
        ("POST", "/proxies", {"name": "badlisten", "listen": "nocolon", "upstream": UP}),
        ("POST", "/proxies", {"name": "range", "listen": "127.0.0.1:70000", "upstream": UP}),
        ("POST", "/proxies", {"name": "range2", "listen": "127.0.0.1:65536", "upstream": UP}),  # one past the last
        ("POST", "/proxies", {"name": "mapped", "listen": "[::ffff:127.0.0.1]:0", "upstream": UP}),  # Go: IPv4
        ("GET", "/proxies/a", None),
        ("GET", "/proxies/nope", None),
        ("POST", "/proxies/a", {"enabled": False}),
        ("PATCH", "/proxies/a", {"enabled": True}),
        ("PATCH", "/proxies/a", {"upstream": "127.0.0.1:10"}),
        ("PATCH", "/proxies/a", {"upstream": UP}),  # one that sorts after the current one changes it too
        ("PATCH", "/proxies/a", {"upstream": "127.0.0.1:10"}),
        ("PATCH", "/proxies/a", {"listen": f"127.0.0.1:{p3}"}),
        ("PATCH", "/proxies/a", b""),
        ("PATCH", "/proxies/lh", {"listen": "nocolon"}),
        ("PATCH", "/proxies/off", {"enabled": True}),
        ("PATCH", "/proxies/nope", {"enabled": True}),
        ("GET", "/proxies/a/toxics", None),
        ("POST", "/proxies/a/toxics", {"type": "latency", "attributes": {"latency": 100}}),
        ("POST", "/proxies/a/toxics", {"type": "latency", "attributes": {"latency": 100}}),
        ("POST", "/proxies/a/toxics", {"name": "bw", "type": "bandwidth", "stream": "upstream", "toxicity": 0.5,
                                       "attributes": {"rate": 10}}),
        ("POST", "/proxies/a/toxics", {"name": "sc", "type": "slow_close"}),
        ("POST", "/proxies/a/toxics", {"name": "bw0", "type": "bandwidth"}),  # each type's default attributes
        ("POST", "/proxies/a/toxics", {"name": "sl0", "type": "slicer", "stream": "upstream"}),
        ("POST", "/proxies/a/toxics", {"name": "ld0", "type": "limit_data", "stream": "upstream"}),
        ("POST", "/proxies/a/toxics", {"name": "to0", "type": "timeout", "stream": "upstream"}),
        ("POST", "/proxies/a/toxics", {"name": "to", "type": "timeout", "stream": "UpStream",
                                       "attributes": {"timeout": 5}}),
        ("POST", "/proxies/a/toxics", {"type": "latency", "stream": "Upstream"}),
        ("POST", "/proxies/a/toxics", {"name": "rp", "type": "reset_peer"}),
        ("POST", "/proxies/a/toxics", {"name": "sl", "type": "slicer",
                                       "attributes": {"average_size": 10, "size_variation": 2, "delay": 5}}),
        ("POST", "/proxies/a/toxics", {"name": "ld", "type": "limit_data", "attributes": {"bytes": 1000}}),
        ("POST", "/proxies/a/toxics", {"name": "extra", "type": "latency", "attributes": {"latency": 5, "x": 1}}),
        ("POST", "/proxies/a/toxics", {"name": "t0", "type": "latency", "toxicity": 0}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "nosuch"}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "latency", "stream": "sideways"}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "latency", "stream": ""}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "latency", "attributes": {"latency": "x"}}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "latency", "attributes": {"latency": 100.0}}),
        # attributes are Go int64s: both ends of the range are taken, one past either end is a 400
        ("POST", "/proxies/a/toxics", {"name": "max", "type": "limit_data", "attributes": {"bytes": 2**63 - 1}}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "limit_data", "attributes": {"bytes": 2**63}}),
        ("POST", "/proxies/a/toxics", {"name": "min", "type": "limit_data", "stream": "upstream",
                                       "attributes": {"bytes": -(2**63)}}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "limit_data", "attributes": {"bytes": -(2**63) - 1}}),
        ("POST", "/proxies/a/toxics", {"name": "bad", "type": "latency", "toxicity": "x"}),
        ("POST", "/proxies/a/toxics", {"name": "sc", "type": "latency"}),
        ("POST", "/proxies/a/toxics", b"[]"),
        ("POST", "/proxies/nope/toxics", {"type": "latency"}),
        ("GET", "/proxies/a/toxics", None),
        ("GET", "/proxies/a/toxics/bw", None),
        ("GET", "/proxies/a/toxics/nope", None),
        ("PATCH", "/proxies/a/toxics/latency_downstream", {"attributes": {"jitter": 7}}),
        ("POST", "/proxies/a/toxics/latency_downstream", {"toxicity": 0.25}),
        ("PATCH", "/proxies/a/toxics/latency_downstream", {"type": "bandwidth", "stream": "upstream", "name": "z"}),
        ("PATCH", "/proxies/a/toxics/latency_downstream", {"toxicity": None, "attributes": {"latency": 3}}),
        ("PATCH", "/proxies/a/toxics/nope", {"toxicity": 1}),
        ("GET", "/proxies", None),
        ("DELETE", "/proxies/a/toxics/bw", None),
        ("DELETE", "/proxies/a/toxics/bw", None),
        ("POST", "/reset", None),
        ("GET", "/proxies/a", None),
        ("POST", "/populate", [{"name": "a", "listen": f"127.0.0.1:{p3}", "upstream": "127.0.0.1:10"},
                               {"name": "b", "listen": "127.0.0.1:0", "upstream": UP}]),
        ("POST", "/populate", [{"name": "c", "upstream": UP}, {"listen": "127.0.0.1:0"}]),
        ("POST", "/populate", [{"name": "d", "listen": "127.0.0.1:0", "upstream": UP, "enabled": False},
                               {"name": "e", "listen": "nocolon", "upstream": UP}]),
        # a body of a few KB (every proxy of a larger topology at once)
        ("POST", "/populate", [{"name": f"many-{i:02d}", "listen": "127.0.0.1:0", "upstream": UP} for i in range(30)]),
        ("POST", "/populate", []),
        ("POST", "/populate", {"name": "c"}),
        ("DELETE", "/proxies/a", None),
        ("DELETE", "/proxies/a", None),
        ("GET", "/proxies", None),
        ("PUT", "/proxies", {}),
        ("GET", "/nowhere", None),
        # paths next to a route (a part that sorts just before or after the route's, one part too many) are no route
        *[("GET", path, None) for path in (
            "/proxie/a", "/proxiez/a", "/proxie/a/toxics", "/proxiez/a/toxics", "/proxies/a/toxic", "/proxies/a/toxicz",
            "/proxie/a/toxics/t", "/proxiez/a/toxics/t", "/proxies/a/toxic/t", "/proxies/a/toxicz/t",
            "/proxies/a/toxics/t/x", "/proxies/a/b/c/d", "/versionz", "/resets")],
    ]


_KERNEL_PORT = re.compile(r"^(.*):(\d+)$")
_DECODER = "bad request body: "


def normalized(value, fixed_ports: set[int]):
    """`value` with kernel-picked listen ports as ':<kernel>' and Go's decoder wording cut after its prefix."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "listen" and isinstance(item, str) and (m := _KERNEL_PORT.match(item)) \
                    and int(m.group(2)) not in fixed_ports:
                item = f"{m.group(1)}:<kernel>"
            elif key == "error" and isinstance(item, str) and item.startswith(_DECODER) and item != _DECODER + "EOF":
                item = _DECODER + "<decoder's words>"
            out[key] = normalized(item, fixed_ports)
        return out
    if isinstance(value, list):
        return [normalized(item, fixed_ports) for item in value]
    return value


def differences(ours, theirs, path: str = "") -> list[str]:
    """Every field where two JSON values differ (values, types, missing keys, key order), by path."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = [f"{path}: keys in order {list(ours)} vs {list(theirs)}"] if list(ours) != list(theirs) else []
        for key in dict.fromkeys([*ours, *theirs]):
            if key not in ours or key not in theirs:
                continue  # already in the key list above
            found += differences(ours[key], theirs[key], f"{path}.{key}")
        return found
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items vs {len(theirs)}: {ours!r} vs {theirs!r}"]
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    if type(ours) is not type(theirs) or ours != theirs:
        return [f"{path or 'body'}: {ours!r} vs {theirs!r}"]
    return []


def fixed_ports(n: int) -> tuple[int, ...]:
    """`n` distinct ports below the kernel's ephemeral range, so that no listen of ':0' (by either server) can be
    given one of them: normalized() tells a fixed port from a kernel-picked one by its number. Reserved across
    harness processes (harness.ports) until released: each server binds them in its turn and frees them between
    the turns, and a port only seen free once was taken by someone in that gap (the real server's PATCH to it
    failed 'address already in use', 1 of 20 loaded runs beside other pytest sessions; harness processes pick
    their peers' ports from this same range, and now skip a reserved one)."""
    return tuple(free_port(held=True) for _ in range(n))


def test_the_api_contract_field_by_field(real, ours):
    ports = fixed_ports(3)
    answers = {}
    try:
        for handle in (ours, real):  # one after the other: the fixed ports are free again when the first is cleared
            _clear(handle)
            answers[handle.kind] = [call(handle, method, path, None if isinstance(body, bytes) else body,
                                         body if isinstance(body, bytes) else None)
                                    for method, path, body in contract_calls(*ports)]
            _clear(handle)
    finally:
        release_ports(*ports)
    report = []
    for (method, path, body), mine, theirs in zip(contract_calls(*ports), answers["harness"], answers["toxiproxy"],
                                                  strict=True):
        step = f"{method} {path} {body!r}"
        if mine[0] != theirs[0]:
            report.append(f"{step}: status {mine[0]} vs {theirs[0]}")
        if mine[2] != theirs[2]:
            report.append(f"{step}: Content-Type {mine[2]!r} vs {theirs[2]!r}")
        report += [f"{step}: {d}" for d in differences(normalized(mine[1], set(ports)),
                                                        normalized(theirs[1], set(ports)))]
    assert not report, "ours vs toxiproxy-server " + VERSION + ":\n" + "\n".join(report)


def test_the_contract_comparison_catches_a_difference():
    # The comparison above must be able to fail: a changed field, a missing one, another order, a type.
    a = {"name": "a", "listen": "127.0.0.1:5", "enabled": True, "Logger": {}, "toxics": [{"toxicity": 1}]}
    assert differences(a, a) == []
    assert differences(a, {**a, "enabled": False}) == [".enabled: True vs False"]
    assert differences(a, {k: v for k, v in a.items() if k != "Logger"})
    assert differences(a, dict(reversed(list(a.items()))))
    assert differences(a, {**a, "toxics": [{"toxicity": 1.0}]}) == [".toxics[0].toxicity: 1 vs 1.0"]
    assert normalized({"listen": "[::]:41559"}, set()) == {"listen": "[::]:<kernel>"}
    assert normalized({"listen": "127.0.0.1:5"}, {5}) == {"listen": "127.0.0.1:5"}
    assert normalized({"error": "bad request body: EOF"}, set()) == {"error": "bad request body: EOF"}


def test_real_server_unavailable_is_a_one_line_skip_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("INTEROP_CACHE", str(tmp_path))
    with pytest.raises(FaultProxyUnavailable) as caught:
        start_fault_proxy(kind="toxiproxy")
    reason = str(caught.value)
    assert "\n" not in reason and f"toxiproxy-server {VERSION} is not installed at {tmp_path}" in reason


def test_wait_until_a_started_real_server_answers(real):
    # The handle came back ready: /version answered at once, and the log names the API address.
    wait_for(lambda: f"{real.host}:{real.port}" in real.logs(), IO_TIMEOUT, "the server's log to name its address",
             describe=lambda: real.logs()[-300:])


def test_the_session_choice_comes_before_the_environment(monkeypatch):
    from harness.faults import launch

    monkeypatch.setattr(launch, "_session_kind", None)
    monkeypatch.delenv(launch.KIND_ENV, raising=False)
    assert launch.chosen_fault_proxy() == "harness"
    monkeypatch.setenv(launch.KIND_ENV, "toxiproxy")
    assert launch.chosen_fault_proxy() == "toxiproxy"
    launch.choose_fault_proxy("harness")
    assert launch.chosen_fault_proxy() == "harness"
    launch.choose_fault_proxy(None)
    monkeypatch.setenv(launch.KIND_ENV, "toxyproxy")
    with pytest.raises(ValueError, match="INTEROP_FAULT_PROXY must be one of harness, toxiproxy, got 'toxyproxy'"):
        launch.chosen_fault_proxy()
    with pytest.raises(ValueError):
        launch.choose_fault_proxy("docker")


def test_a_server_nobody_stopped_ends_with_the_process_that_started_it():
    # start_topology may fail after the proxy started (a peer that cannot be made): the server must not outlive us.
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = "from harness.faults import start_fault_proxy; print(start_fault_proxy(kind='harness').process.pid)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    wait_for(gone, 10, f"the fault proxy (pid {pid}) to end with the process that started it")
