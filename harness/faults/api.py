"""Toxiproxy's HTTP API (2.12) over the fault proxy's `ProxyCollection`, on asyncio.

Routes, status codes and bodies follow Toxiproxy's api.go, so scripts and clients written for Toxiproxy
(the `toxiproxy-python` client among them) work unchanged:

    GET    /version                          200 {"version": "..."}
    any    a path with //, /./ or /../       301 to the path cleaned (as gorilla/mux, before any route)
    GET    /proxies                          200 {name: proxy, ...}
    POST   /proxies                          201 proxy            (409 exists, 400 missing name/upstream)
    POST   /populate                         201 {"proxies": [proxy, ...]}
    GET    /proxies/{p}                      200 proxy            (404)
    POST   /proxies/{p}  (or PATCH)          200 proxy            enabled, listen, upstream
    DELETE /proxies/{p}                      204
    GET    /proxies/{p}/toxics               200 [toxic, ...]
    POST   /proxies/{p}/toxics               200 toxic            (409 exists, 400 bad type/stream/body)
    GET    /proxies/{p}/toxics/{t}           200 toxic            (404)
    POST   /proxies/{p}/toxics/{t} (PATCH)   200 toxic            attributes merge, toxicity
    DELETE /proxies/{p}/toxics/{t}           204
    POST   /reset                            204                  every proxy enabled, every toxic removed

A proxy is {"name", "listen", "upstream", "enabled", "toxics": [...]}; a toxic is {"attributes", "name",
"type", "stream", "toxicity"}. Errors are {"error": "...", "status": N}. Like Toxiproxy, requests whose
User-Agent starts with "Mozilla/" are refused (403; once the route and method matched, as there), so a web page
cannot drive the proxy.
"""

from __future__ import annotations

import asyncio
import json
import logging
from http import HTTPStatus
from urllib.parse import quote, unquote, urlsplit

from .proxy import ApiError, ProxyCollection
from .toxics import ToxicError, ToxicSpec

log = logging.getLogger("interop.faults.api")

TOXIPROXY_API_VERSION = "2.12.0"  # the Toxiproxy release whose API this one answers like
SERVER_NAME = "interop-fault-proxy"
MAX_BODY = 16 * 1024 * 1024
READ_TIMEOUT = 15.0  # as Toxiproxy's HTTP server


class Response:
    __slots__ = ("status", "body", "content_type", "location")

    def __init__(self, status: int, body: bytes = b"", content_type: str = "application/json",
                 location: str | None = None):
        self.status, self.body, self.content_type, self.location = status, body, content_type, location


def _json(status: int, value) -> Response:
    return Response(status, json.dumps(value).encode())


def _error(message: str, status: int) -> Response:
    # Toxiproxy writes its JSON error through Go's http.Error, which labels it text/plain.
    return Response(status, json.dumps({"error": message, "status": status}).encode() + b"\n",
                    "text/plain; charset=utf-8")


class ApiServer:
    def __init__(self, collection: ProxyCollection):
        self.collection = collection

    # ---- HTTP ---------------------------------------------------------------------------------------------

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await asyncio.wait_for(self._read_request(reader, writer), READ_TIMEOUT)
                if request is None:
                    break
                method, target, headers, body, keep_alive = request
                response = self.dispatch(method, target, body, headers)
                log.debug("%s %s -> %d", method, target, response.status)
                self._write(writer, response, keep_alive)
                await writer.drain()
                if not keep_alive:
                    break
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except _BadRequest as exc:
            self._write(writer, Response(400, f"400 Bad Request: {exc}\n".encode(), "text/plain"), False)
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass

    async def _read_request(self, reader, writer):
        line = await reader.readline()
        if not line:
            return None
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise _BadRequest("malformed request line")
        method, target, version = parts
        headers: dict[str, str] = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked(reader)
        else:
            try:
                length = int(headers.get("content-length", "0") or 0)
            except ValueError:
                raise _BadRequest("bad Content-Length") from None
            if length < 0:  # as Go's server (and so Toxiproxy) answers it; reading -n bytes would raise
                raise _BadRequest("bad Content-Length")
            if length > MAX_BODY:
                raise _BadRequest("body too large")
            body = await reader.readexactly(length) if length else b""
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
        return method.upper(), target, headers, body, keep_alive

    async def _read_chunked(self, reader) -> bytes:
        body = bytearray()
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BadRequest("bad chunk size") from None
            if size < 0:
                raise _BadRequest("bad chunk size")
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(body)
            body += await reader.readexactly(size)
            await reader.readline()
            if len(body) > MAX_BODY:
                raise _BadRequest("body too large")

    def _write(self, writer, response: Response, keep_alive: bool) -> None:
        status = response.status
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
        head = [f"HTTP/1.1 {status} {reason}", f"Server: {SERVER_NAME}"]
        if response.location is not None:
            head.append(f"Location: {response.location}")
        if status != 204:
            if response.content_type:
                head.append(f"Content-Type: {response.content_type}")
            head.append(f"Content-Length: {len(response.body)}")
        head.append("Connection: keep-alive" if keep_alive else "Connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (response.body if status != 204 else b""))

    # ---- routing ------------------------------------------------------------------------------------------

    def dispatch(self, method: str, target: str, body: bytes, headers: dict[str, str] | None = None) -> Response:
        url = urlsplit(target)
        path = unquote(url.path)  # mux matches the decoded path: %2F is a slash there too
        cleaned = clean_path(path)
        if cleaned != path:
            # gorilla/mux, Toxiproxy's router, sends a path that is not clean to its cleaned form before it
            # matches any route (so a client that built /proxies//toxics from an empty name is sent to
            # /proxies/toxics, and a POST there arrives as the GET its client makes of a 301)
            return Response(301, b"", "", location=quote(cleaned, safe="$&+,/:;=@")
                            + (f"?{url.query}" if url.query else ""))
        parts = path.split("/")[1:]
        route, args = _route(parts)
        if route is None:
            return Response(404, b"404 page not found\n", "text/plain; charset=utf-8")
        handler = ROUTES[route].get(method)
        if handler is None:
            return Response(405, b"", "")  # as gorilla/mux: no body, no Content-Type
        # Toxiproxy refuses browsers in a middleware, which gorilla/mux runs only for a request that matched a
        # route and method: a browser's request for an unknown path is a 404 there, for a known one a 403
        if (headers or {}).get("user-agent", "").startswith("Mozilla/"):
            return Response(403, b"User agent not allowed\n", "text/plain; charset=utf-8")
        try:
            return handler(self, *args, body)
        except (ApiError, ToxicError) as exc:
            return _error(str(exc), exc.status)

    # ---- handlers -----------------------------------------------------------------------------------------

    def version(self, body: bytes) -> Response:
        return Response(200, json.dumps({"version": TOXIPROXY_API_VERSION}).encode() + b"\n",
                        "application/json;charset=utf-8")

    def reset(self, body: bytes) -> Response:
        self.collection.reset()
        return Response(204)

    def proxy_index(self, body: bytes) -> Response:
        # Go's encoding/json writes a map's keys sorted
        return _json(200, {name: self.collection.proxies[name].as_json() for name in sorted(self.collection.proxies)})

    def proxy_create(self, body: bytes) -> Response:
        return _json(201, self.collection.create(_decode(body)).as_json())

    def populate(self, body: bytes) -> Response:
        # Always a JSON answer (also for errors, unlike the other routes), with the proxies done before an error;
        # none is `null`, as Go writes a nil slice.
        try:
            proxies, error = self.collection.populate(_decode(body))
        except (ApiError, ToxicError) as exc:
            proxies, error = [], exc
        listed = {"proxies": [p.as_json() for p in proxies] or None}
        if error is not None:
            return _json(error.status, {"error": str(error), "status": error.status, **listed})
        return _json(201, listed)

    def proxy_show(self, name: str, body: bytes) -> Response:
        return _json(200, self.collection.get(name).as_json())

    def proxy_update(self, name: str, body: bytes) -> Response:
        self.collection.get(name)
        return _json(200, self.collection.update(name, _decode(body)).as_json())

    def proxy_delete(self, name: str, body: bytes) -> Response:
        self.collection.delete(name)
        return Response(204)

    def toxic_index(self, name: str, body: bytes) -> Response:
        return _json(200, [t.as_json() for t in self.collection.get(name).toxic_list()])

    def toxic_create(self, name: str, body: bytes) -> Response:
        proxy = self.collection.get(name)
        spec = ToxicSpec.from_json(_decode(body), taken=proxy.toxics)
        proxy.add_toxic(spec)
        return _json(200, spec.as_json())

    def toxic_show(self, name: str, toxic: str, body: bytes) -> Response:
        spec = self.collection.get(name).toxics.get(toxic)
        if spec is None:
            raise ToxicError("toxic not found", 404)
        return _json(200, spec.as_json())

    def toxic_update(self, name: str, toxic: str, body: bytes) -> Response:
        proxy = self.collection.get(name)
        if toxic not in proxy.toxics:
            raise ToxicError("toxic not found", 404)
        return _json(200, proxy.update_toxic(toxic, _decode(body)).as_json())

    def toxic_delete(self, name: str, toxic: str, body: bytes) -> Response:
        self.collection.get(name).remove_toxic(toxic)
        return Response(204)


class _BadRequest(Exception):
    pass


def _decode(body: bytes):
    if not body.strip():
        raise ApiError("bad request body: EOF", 400)
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"bad request body: {exc}", 400) from None


def clean_path(path: str) -> str:
    """Go's path.Clean of a request path, rooted, keeping a trailing slash (gorilla/mux's cleanPath): repeated
    slashes become one, `.` segments go, and `..` takes the segment before it (never above the root)."""
    kept: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if kept:
                kept.pop()
        else:
            kept.append(segment)
    cleaned = "/" + "/".join(kept)
    return cleaned + "/" if path.endswith("/") and cleaned != "/" else cleaned


def _route(parts: list[str]) -> tuple[str | None, tuple]:
    if parts == ["version"]:
        return "version", ()
    if parts == ["reset"]:
        return "reset", ()
    if parts == ["populate"]:
        return "populate", ()
    if parts == ["proxies"]:
        return "proxies", ()
    if len(parts) == 2 and parts[0] == "proxies" and parts[1]:
        return "proxy", (parts[1],)
    if len(parts) == 3 and parts[0] == "proxies" and parts[1] and parts[2] == "toxics":
        return "toxics", (parts[1],)
    if len(parts) == 4 and parts[0] == "proxies" and parts[1] and parts[2] == "toxics" and parts[3]:
        return "toxic", (parts[1], parts[3])
    return None, ()


ROUTES = {
    "version": {"GET": ApiServer.version},
    "reset": {"POST": ApiServer.reset},
    "populate": {"POST": ApiServer.populate},
    "proxies": {"GET": ApiServer.proxy_index, "POST": ApiServer.proxy_create},
    "proxy": {"GET": ApiServer.proxy_show, "POST": ApiServer.proxy_update, "PATCH": ApiServer.proxy_update,
              "DELETE": ApiServer.proxy_delete},
    "toxics": {"GET": ApiServer.toxic_index, "POST": ApiServer.toxic_create},
    "toxic": {"GET": ApiServer.toxic_show, "POST": ApiServer.toxic_update, "PATCH": ApiServer.toxic_update,
              "DELETE": ApiServer.toxic_delete},
}
