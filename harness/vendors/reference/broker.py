"""The reference broker as a subprocess: `python -m reference.broker -c broker.xml --management-port 0`.

It reads the same Artemis broker.xml the topology renders for ActiveMQ Artemis. Its acceptor listens on
port 0 and the broker logs the real port; a restart reuses that port (clients and routers reconnect to
the same address) and the same journal directory (durable messages survive).

Management, as for Artemis: `self.management` speaks Artemis's management by AMQP messages (harness/amq_management.py,
the same client as ArtemisPeer's) over an extra plain acceptor on loopback that no topology names, as a user of
its own on a node that authenticates (render_broker_xml's management_port and management_role, as for Artemis).
queue_stats (listQueues), start_broker_connection (startBrokerConnection) and delete_queue (destroyQueue with
removeConsumers) go through it, and so does the management suite. broker_connections stays on the broker's HTTP
endpoint (`--management-port`): its rows carry the dial history (attempts, attempt_times, targets_tried,
last_error) the broker-connection suites judge, which Artemis's listBrokerConnections has no field for
(artemis.py reads that history from Artemis's log instead). A peer built without `amqp_management` (unit tests)
uses the HTTP endpoint for all four.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from ...amq_management import ManagementClient
from ...ports import free_port, release_ports
from ...peers.base import ManagementError, PeerInfo, PeerStartError
from ...peers.process import ProcessPeer
from ...peers.provider import NodeSetup, Provider
from ..artemis.render import broker_xml_for

_LISTENING = re.compile(r"Listening on (\S+):(\d+) \(acceptor '([^']*)'")
_MANAGEMENT = re.compile(r"Management on (\S+):(\d+)")
_READY = re.compile(r"Broker \S+ started; ready")
MANAGEMENT_USER = "interop-management"  # also its role: the one that may manage, on nodes that authenticate


class ReferenceBrokerPeer(ProcessPeer):
    def __init__(self, name: str, render, capabilities: frozenset[str], workdir: Path | None = None, *,
                 files: dict[str, str] | None = None, amqp_management: bool = False):
        """`render(acceptor_ports, **options) -> broker.xml text`: ports to override (none at first, the learned
        ones on restart); the provider fills in the rest. `files` (name -> text) are written beside broker.xml:
        the login module's users and roles (harness.vendors.artemis.render.render_artemis_security), which the broker
        reads from there. TLS files are named by broker.xml itself (absolute paths in the run's test PKI).
        `amqp_management`: add the management acceptor (and, where the node authenticates, the management user)
        that `self.management` talks to; `render` then takes render_broker_xml's management options."""
        from reference import __version__

        workdir = workdir or Path(tempfile.mkdtemp(prefix=f"interop-{name}-"))
        super().__init__(name, "broker", PeerInfo("reference", __version__, "subprocess"), capabilities, workdir)
        self._render_xml = render
        self.config_path = workdir / "broker.xml"
        files = dict(files or {})
        self.management_port: int | None = None
        self.management_user = self.management_password = None
        if amqp_management:
            from ..artemis.render import ROLES_FILE, USERS_FILE

            self.management_port = free_port(held=True)
            if files:  # the node authenticates: its users, plus the harness's own who may only manage
                self.management_user, self.management_password = MANAGEMENT_USER, secrets.token_hex(12)
                files[USERS_FILE] += f"{MANAGEMENT_USER} = {self.management_password}\n"
                files[ROLES_FILE] += f"{MANAGEMENT_USER} = {MANAGEMENT_USER}\n"
        self.management = ManagementClient(f"amqp://127.0.0.1:{self.management_port}", self.management_user,
                                           self.management_password) if amqp_management else None
        for file_name, text in files.items():
            path = workdir / file_name
            path.write_text(text)
            path.chmod(0o600)  # passwords
        self.config_path.write_text(self._render({}))
        self.management_url: str | None = None

    def _render(self, ports: dict[str, int]) -> str:
        if self.management_port is None:
            return self._render_xml(ports)
        return self._render_xml(ports, management_port=self.management_port, management_role=self.management_user)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "reference.broker", "-c", str(self.config_path), "--management-port", "0"]

    def start(self, timeout: float = 30.0) -> None:
        from ..artemis.render import MANAGEMENT_ACCEPTOR

        self._start_logged(timeout, _READY, _LISTENING, "reference broker")
        self.endpoints.pop(MANAGEMENT_ACCEPTOR, None)  # the harness's own door, no listener of the topology
        for m in self._log_matches(_MANAGEMENT):
            self.management_url = f"http://{m.group(1)}:{m.group(2)}"

    def _prepare_restart(self) -> None:
        """Come back on the ports the acceptors got, with the same journal directory (the workdir)."""
        self.config_path.write_text(self._render({name: ep.port for name, ep in self.endpoints.items()}))
        if self.management is not None:
            self.management.close()

    def stop(self, timeout: float = 10.0) -> None:
        if self.management is not None:
            self.management.close()
        super().stop(timeout)

    def kill(self) -> None:
        if self.management is not None:
            self.management.close()
        super().kill()

    def cleanup(self) -> None:
        super().cleanup()
        if self.management_port is not None and not self.is_running():
            release_ports(self.management_port)

    def wire_address(self, name: str) -> str:
        return name

    def queue_stats(self, name: str) -> dict:
        """{"depth", "available", "in_flight", "consumers", "exists", ...} of a queue, from its listQueues row over
        AMQP management (the HTTP endpoint's GET /queues/NAME for a peer built without it); a queue the broker
        does not have is {"exists": False} with depth and consumers 0."""
        if self.management is None:
            try:
                stats = self._management("GET", f"/queues/{_q(name)}", f"queue statistics of {name!r}")
            except ManagementError as exc:
                if exc.status == 404:
                    return {"name": name, "depth": 0, "consumers": 0, "exists": False}
                raise
            return {**stats, "exists": True}
        options = json.dumps({"field": "name", "operation": "EQUALS", "value": name})
        text = self._manage("broker", f"list queue {name!r}", operation="listQueues", arguments=[options, 1, 10])
        rows = [row for row in json.loads(text).get("data", []) if row.get("name") == name]
        if not rows:
            return {"name": name, "depth": 0, "consumers": 0, "exists": False}
        row = rows[0]
        depth, in_flight = int(row["messageCount"]), int(row["deliveringCount"])
        return {"name": name, "address": row["address"], "routing": row["routingType"].lower(),
                "durable": row["durable"] == "true", "depth": depth, "available": depth - in_flight,
                "in_flight": in_flight, "consumers": int(row["consumerCount"]),
                "internal": row.get("internalQueue") == "true", "exists": True}

    def broker_connections(self) -> list[dict]:
        """From the HTTP endpoint: its rows carry the dial history (attempts, attempt_times, targets_tried,
        last_error) that Artemis's listBrokerConnections has no field for."""
        return self._management("GET", "/broker-connections", "list broker connections")

    def start_broker_connection(self, name: str) -> None:
        if self.management is None:
            self._management("POST", f"/broker-connections/{_q(name)}/start", f"start broker connection {name!r}")
            return
        self._manage("broker", f"start broker connection {name!r}", operation="startBrokerConnection",
                     arguments=[name])

    def delete_queue(self, name: str) -> None:
        """destroyQueue(name, removeConsumers=true), as for Artemis: as an operator would, whoever consumes it."""
        if self.management is None:
            self._management("DELETE", f"/queues/{_q(name)}", f"delete queue {name!r}")
            return
        self._manage("broker", f"delete queue {name!r}", operation="destroyQueue", arguments=[name, True])

    def _manage(self, resource: str, what: str, **request):
        """One request over AMQP management; ManagementError naming this peer, what was asked and the answer."""
        if not self.is_running():
            raise ManagementError(f"{self.name}: cannot {what}: the reference broker is not running")
        return self.management.call_for(self.name, resource, what, **request)

    def _management(self, method: str, path: str, what: str, timeout: float = 5.0):
        """One call to the broker's management endpoint; its JSON answer, or ManagementError naming this peer,
        `what` was asked and what the broker said."""
        if self.management_url is None:
            raise PeerStartError(f"{self.name}: cannot {what}: no management endpoint (not started?)")
        request = urllib.request.Request(f"{self.management_url}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                text = reply.read()
        except urllib.error.HTTPError as exc:
            raise ManagementError(f"{self.name}: cannot {what}: {method} {path} answered {exc.code} "
                                  f"{_reason(exc)}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ManagementError(f"{self.name}: cannot {what}: {method} {self.management_url}{path} failed: "
                                  f"{reason}") from None
        try:
            return json.loads(text) if text else None
        except ValueError:
            raise ManagementError(f"{self.name}: cannot {what}: {method} {path} answered something that is not "
                                  f"JSON: {text[:80]!r}") from None


def _q(name: str) -> str:
    """A queue or connection name as one path segment (`$ACTIVEMQ_ARTEMIS_MIRROR_DC2`, `a/b`)."""
    return urllib.parse.quote(name, safe="")


def _reason(exc: urllib.error.HTTPError) -> str:
    """The `error` of a JSON error body, else the body's first line, else the HTTP reason."""
    try:
        body = exc.read().decode(errors="replace").strip()
    except OSError:
        body = ""
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
    except ValueError:
        pass
    return body.splitlines()[0][:200] if body else str(exc.reason)


class ReferenceBroker(Provider):
    """The reference broker, `python -m reference.broker`, from this checkout, reading the node's broker.xml."""

    vendor, name, role = "reference", "subprocess", "broker"

    @classmethod
    def create(cls, setup: NodeSetup) -> ReferenceBrokerPeer:
        from ..artemis.render import render_artemis_security

        return ReferenceBrokerPeer(setup.node_name, functools.partial(broker_xml_for, setup), setup.capabilities,
                                   files=render_artemis_security(setup.topology, setup.node_name),
                                   amqp_management=True)
