"""A small AMQP management client (the OASIS AMQP Management draft, as qdrouterd speaks it) for the suites.

Request/response over one connection: a sender to the management node's address (`$management`, or
`_topo/0/<router-id>/$management` for a remote router of a network) and a dynamic receiver whose address is each
request's reply-to; each request carries a correlation-id and the response is matched by it. Every call returns
the whole `Response` (status code, description, body), so a case can judge refusals as well as answers; the
helpers (`query`, `read`, ...) raise `ManagementError` when the status is not the one expected.

Built on proton's blocking utilities (its own connection, apart from harness.clients' recording clients).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from dataclasses import dataclass

from proton import Message
from proton.utils import BlockingConnection, SyncRequestResponse

PREFIX = "org.apache.qpid.dispatch."
NODE_TYPE = "org.amqp.management"
QDSTAT = os.environ.get("QDSTAT", "qdstat")
QDMANAGE = os.environ.get("QDMANAGE", "qdmanage")


class ManagementError(Exception):
    """A response whose status was not the one expected."""

    def __init__(self, response: Response, expected: int):
        super().__init__(f"expected status {expected}, got {response.code} {response.description!r}")
        self.response = response


@dataclass
class Response:
    code: int | None  # None: no answer within the timeout
    description: str | None
    body: object
    correlation_id: object = None


def full_type(name: str) -> str:
    """A type's full name; the short names qdmanage takes are spelled out as qdmanage does (its long_type)."""
    if name.startswith(PREFIX) or name == NODE_TYPE:
        return name
    if name in ("link", "node"):
        return PREFIX + "router." + name
    if name in ("linkRoute", "address", "autoLink"):
        return PREFIX + "router.config." + name
    return PREFIX + name


def host_port(url: str) -> str:
    """`amqp://127.0.0.1:5672` -> `127.0.0.1:5672` (what qdstat's and qdmanage's -b take)."""
    return url.split("://", 1)[-1].rstrip("/")


class ManagementClient:
    def __init__(self, url: str, address: str = "$management", timeout: float = 10.0):
        self.url, self.address, self.timeout = url, address, timeout
        self._conn = BlockingConnection(url, timeout=timeout)
        self._clients: dict[str, SyncRequestResponse] = {}
        self._ids = itertools.count(1)

    @property
    def container_id(self) -> str:
        """This client's container id: its links' names start with it."""
        return self._conn.container.container_id

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def _client(self, address: str) -> SyncRequestResponse:
        found = self._clients.get(address)
        if found is None:
            found = self._clients[address] = SyncRequestResponse(self._conn, address)
        return found

    def call(self, operation: str | None, *, type: str | None = None, name: str | None = None,
             identity: str | None = None, body=None, address: str | None = None, **properties) -> Response:
        """One request; the response as it came (code None when none came within the timeout)."""
        props = {k: v for k, v in {"operation": operation, "type": type and full_type(type), "name": name,
                                   "identity": identity, **properties}.items() if v is not None}
        correlation = f"mgmt-{next(self._ids)}"
        request = Message(properties=props, body=body if body is not None else {}, correlation_id=correlation)
        try:
            answer = self._client(address or self.address).call(request)
        except Exception as exc:  # proton's Timeout: the node gave no answer
            if type_name(exc) != "Timeout":
                raise
            # The unanswered request's links stay attached; a new client would reuse their names: start over
            self._conn.close()
            self._conn = BlockingConnection(self.url, timeout=self.timeout)
            self._clients.clear()
            return Response(None, f"no answer within {self.timeout:.0f}s", None, correlation)
        props = answer.properties or {}
        code = props.get("statusCode")
        return Response(int(code) if code is not None else None, props.get("statusDescription"), answer.body,
                        answer.correlation_id)

    def node_call(self, operation: str, entity_type: str | None = None, body=None, **kw) -> Response:
        return self.call(operation, type=NODE_TYPE, name="self", body=body,
                         entityType=entity_type and full_type(entity_type), **kw)

    # ---- helpers that expect success --------------------------------------------------------------------------

    @staticmethod
    def expect(response: Response, code: int) -> Response:
        if response.code != code:
            raise ManagementError(response, code)
        return response

    def query(self, entity_type: str, attributes: list[str] | tuple = (), address: str | None = None) -> list[dict]:
        answer = self.expect(self.node_call("QUERY", entity_type, body={"attributeNames": list(attributes)},
                                            address=address), 200)
        names = answer.body["attributeNames"]
        return [dict(zip(names, row, strict=False)) for row in answer.body["results"]]

    def read(self, entity_type: str, name: str | None = None, identity: str | None = None) -> dict:
        return self.expect(self.call("READ", type=entity_type, name=name, identity=identity), 200).body

    def create(self, entity_type: str, name: str | None = None, **attributes) -> dict:
        return self.expect(self.call("CREATE", type=entity_type, name=name, body=attributes), 201).body

    def delete(self, entity_type: str, name: str | None = None, identity: str | None = None) -> None:
        self.expect(self.call("DELETE", type=entity_type, name=name, identity=identity), 204)

    def mgmt_nodes(self) -> list[str]:
        return list(self.expect(self.node_call("GET-MGMT-NODES"), 200).body)


def type_name(exc: BaseException) -> str:
    return type(exc).__name__


@dataclass
class ToolRun:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"{' '.join(self.args)} -> {self.returncode}\n{self.stdout}{self.stderr}"


def run_tool(tool: str, url: str, *args: str, timeout: float = 30.0) -> ToolRun:
    """Run the installed `qdstat` or `qdmanage` against the router at `url` (its own connection)."""
    argv = [QDSTAT if tool == "qdstat" else QDMANAGE, "-b", host_port(url), "--timeout", "10", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return ToolRun(argv, done.returncode, done.stdout, done.stderr)


def tool_available(tool: str) -> bool:
    from shutil import which
    return which(QDSTAT if tool == "qdstat" else QDMANAGE) is not None


def table_rows(output: str) -> list[dict[str, str]]:
    """The rows of a qdstat table (its `===` underlined header; columns split on runs of 2+ spaces) as dicts."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("===") and i > 0:
            header = lines[i - 1]
            starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", header)]
            names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=False)]
            rows = []
            for row in lines[i + 1:]:
                if not row.strip():
                    break
                cells = [row[a:b].strip() if a < len(row) else "" for a, b in zip(starts, [*starts[1:], None],
                                                                                   strict=False)]
                rows.append(dict(zip(names, cells, strict=False)))
            return rows
    return []


# ---- a router's state for a failed case's report ----------------------------------------------------------------

# What a reader of a failure wants to see of a router, in qdrouterd's attribute names (its qdrouter.json); the
# reference router's agent serves the same (reference/router/management.py).
LINK_COLUMNS = ("linkType", "linkDir", "linkName", "owningAddr", "capacity", "undeliveredCount", "unsettledCount",
                "deliveryCount", "operStatus")
ADDRESS_COLUMNS = ("name", "distribution", "subscriberCount", "remoteCount", "containerCount", "deliveriesIngress",
                   "deliveriesEgress", "deliveriesTransit", "deliveriesRedirectedToFallback")
STATE_ROWS = 40  # per table: a case's topology has a few links and addresses; a runaway one is cut short


def router_state(url: str, timeout: float = 2.0) -> str:
    """A router's links and addresses as its own management shows them, as text for a failed case's report: a
    table of router.link and one of router.address (the mobile and link-route addresses a client's traffic uses;
    the router's own and other routers' addresses left out). A router that cannot be asked gives one line saying
    why: a failure report is no place for a second traceback."""
    try:
        with ManagementClient(url, timeout=timeout) as mgmt:
            mine = mgmt.container_id
            links = [link for link in mgmt.query("router.link", LINK_COLUMNS)
                     if not str(link.get("linkName") or "").startswith(mine)]  # this request's own two links
            addresses = mgmt.query("router.address", ADDRESS_COLUMNS)
    except Exception as exc:  # no answer, refused, a TLS-only or authenticating listener: say so, do not fail
        return f"(management not read at {url}: {type_name(exc)}: {str(exc)[:200]})"
    # qdrouterd's class letters: M mobile, C/D a link route's prefix in/out, E/F its pattern in/out
    # (and not the routers' own mobile addresses: $management, qdrouterd's _$qd.edge_heartbeat)
    client_addresses = [a for a in addresses if str(a.get("name") or "").startswith(("M", "C", "D", "E", "F"))
                        and not str(a["name"])[2:].startswith(("$", "_$"))]
    return "\n".join([f"router.link ({len(links)}):", *_table(links, LINK_COLUMNS),
                      f"router.address, mobile and link-route ({len(client_addresses)} of {len(addresses)}):",
                      *_table(client_addresses, ADDRESS_COLUMNS)])


def _table(rows: list[dict], columns: tuple[str, ...]) -> list[str]:
    """Rows as aligned text columns (at most STATE_ROWS of them, and a line saying how many were left out)."""
    if not rows:
        return ["  (none)"]
    shown = [[_shown(row.get(c, "")) for c in columns] for row in rows[:STATE_ROWS]]
    widths = [max(len(c), *(len(r[i]) for r in shown)) for i, c in enumerate(columns)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in shown]
    if len(rows) > STATE_ROWS:
        lines.append(f"  ... and {len(rows) - STATE_ROWS} more")
    return lines


def _shown(value) -> str:
    """A value as qdstat prints it: proton's typed integers (uint(250)) as plain numbers."""
    return str(int(value)) if isinstance(value, int) and not isinstance(value, bool) else str(value)
