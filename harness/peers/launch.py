"""Start every node of a topology with the vendor chosen for its role, in parallel, and stop them all.

This is the one place that turns (topology, `--peer` choices) into running peers; suites get the result
through the pytest plugin's fixtures.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
from collections.abc import Iterable
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import fault_log
from ..breaks import Break, break_topology, breaks_by_node, node_vendor
from ..tlsca import TestPki
from ..topology import Topology
from ..ports import free_port, release_ports
from .base import Peer, PeerUnavailable
from .provider import NodeSetup
from .registry import entry, provider_class
from . import versions
from .vendors import EXTERNAL, parse_choice, vendor


def make_peer(topology: Topology, node_name: str, vendor_name: str, wiring: Wiring | None = None) -> Peer:
    """A not-yet-started peer for one node; raises PeerUnavailable if it cannot run here.

    `vendor_name` is a `--peer` choice: `VENDOR` (each provider the registry lists for it in turn, native
    first), `VENDOR@PROVIDER` (that provider only), `VENDOR@VERSION` (that version: harness/peers/versions.py,
    got now if no one got it before) or `external:amqp://...` (harness/peers/external.py).
    """
    node = topology.nodes[node_name]
    spec = vendor(vendor_name, node.role)
    if vendor_name.startswith(EXTERNAL):
        return _external_peer(topology, node_name, vendor_name)
    choice = parse_choice(vendor_name)
    try:
        # None at once when the run got it before its peers started; a case's own node vendor is got here
        if (why := versions.ensure(choice)) is not None:
            raise PeerUnavailable(why)
    except versions.NoSuchVersion as exc:
        raise PeerUnavailable(str(exc)) from None
    setup = NodeSetup(topology, node_name, spec.capabilities, wiring or Wiring(), choice.version)
    reasons = []
    for provider in map(provider_class, entry(choice.vendor, node.role).providers):
        if choice.provider is not None and provider.name != choice.provider:
            continue
        try:
            if (why := provider.probe(choice.version)) is not None:
                raise PeerUnavailable(why)
            return provider.create(setup)
        except PeerUnavailable as exc:
            reasons.append(str(exc))
    raise PeerUnavailable("; ".join(reasons) or f"no provider for a {node.role} of vendor {choice.vendor} yet")


def _external_peer(topology: Topology, node_name: str, choice: str) -> Peer:
    from .external import ExternalPeer, parse_external

    node = topology.nodes[node_name]
    same_role = [n.name for n in topology.nodes_with_role(node.role)]
    if len(same_role) > 1:
        raise PeerUnavailable(f"{choice} stands for one {node.role}; topology {topology.name} has "
                              f"{len(same_role)} ({', '.join(same_role)})")
    return ExternalPeer(node_name, node.role, parse_external(choice, node.role))


@dataclass
class Wiring:
    """How nodes find each other: ports of listeners other nodes dial, and broker wire addresses."""

    listen_ports: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> listener -> port
    connect_ports: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> dialled node -> port
    external_address: object = None  # (broker node, address) -> wire address
    # The run's test PKI (harness/tlsca.py) when the topology declares CAs: every renderer and peer gets it
    # as `pki=`, so all vendors present certificates from the same CAs.
    pki: TestPki | None = None
    # The started topology's own folder (users files for routers' SASL, the PKI's keys), removed with it.
    files: Path | None = None


@dataclass
class RunningTopology:
    topology: Topology
    peers: dict[str, Peer] = field(default_factory=dict)
    faults: object = None  # harness.faults.links.LinkProxies when some link goes `via: proxy`
    silent: dict[str, str] = field(default_factory=dict)  # node -> why, for running peers found hung by probe_peers
    pki: TestPki | None = None  # the test PKI when the topology declares CAs: cases ask it for CA files
    breaks: dict[str, list[str]] = field(default_factory=dict)  # node -> deliberate config faults it runs with
    files: Path | None = None  # its own folder (Wiring.files: users files, the PKI's keys), removed with it
    held_ports: list[int] = field(default_factory=list)  # dialled listeners' ports (harness/ports.py), freed with it

    def __getitem__(self, node: str) -> Peer:
        return self.peers[node]

    def client_url(self, client: str) -> str:
        """URL a named client (`producer`, `consumer`, ...) of the topology attaches to."""
        node = self.topology.clients.get(client)
        if node is None:
            raise KeyError(f"topology {self.topology.name} has no client named {client!r}")
        return self.peers[node].url

    @property
    def capabilities(self) -> frozenset[str]:
        caps: set[str] = set()
        for peer in self.peers.values():
            caps |= peer.capabilities
        return frozenset(caps)

    def peer_records(self) -> dict:
        """role -> {vendor, version, provider}, for result records (first node of each role)."""
        records: dict = {}
        for peer in self.peers.values():
            records.setdefault(peer.role, peer.info.as_record())
        return records

    def node_records(self) -> dict | None:
        """node -> {vendor, version, provider} where the nodes of one role differ in vendor or version (a pairing
        that mixes vendors or releases), which peer_records, one node per role, cannot show; None where each role's
        nodes are alike. For the record's `details.nodes`."""
        records = {name: peer.info.as_record() for name, peer in self.peers.items()}
        kinds: dict[str, set] = {}
        for name, peer in self.peers.items():
            kinds.setdefault(peer.role, set()).add((records[name]["vendor"], records[name]["version"]))
        return records if any(len(seen) > 1 for seen in kinds.values()) else None

    def down_peers(self) -> dict[str, str]:
        """node -> why it is down, for every peer that no longer serves: it crashed, a case killed or stopped it
        and did not bring it back, or it runs but probe_peers() found it hung."""
        down = {name: reason for name, peer in self.peers.items() if (reason := peer.down_reason())}
        return {**self.silent, **down}  # a hung peer that then died is down for the reason it died

    def probe_peers(self, timeout: float) -> dict[str, str]:
        """Ask every peer that is not down whether it still answers on the wire (Peer.silence), all at once so
        that the wait is one `timeout` at most; remember the ones that do not (down_peers() names them from
        then on) and return them."""
        down = self.down_peers()
        asked = [name for name in self.peers if name not in down]
        if not asked:
            return {}
        with concurrent.futures.ThreadPoolExecutor(len(asked), thread_name_prefix="probe") as pool:
            answers = list(pool.map(lambda name: self.peers[name].silence(timeout, tls=self._client_tls(name)), asked))
        found = {name: why for name, why in zip(asked, answers, strict=True) if why}
        self.silent.update(found)
        return found

    def _client_tls(self, name: str) -> bool:
        """Whether the peer's client listener speaks TLS (the node's access.tls, or a TLS link's landing)."""
        endpoint = self.peers[name].client_endpoint
        return (endpoint is not None and self.topology is not None
                and self.topology.listener_tls(name, endpoint.name) is not None)

    def save_logs(self, directory: Path, suffix: str = "") -> list[Path]:
        """Write each peer's whole log (every run of a restarted peer) to DIRECTORY/<node><suffix>.log."""
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for name, peer in self.peers.items():
            text = peer.all_logs()
            if text:
                path = directory / f"{name}{suffix}.log"
                path.write_text(text + "\n")
                written.append(path)
        return written

    def stop(self) -> None:
        """Stop every peer, all at once: a JVM's graceful stop takes seconds (up to its stop timeout when the
        machine is loaded), and one after another they made a cell of 46 Artemis nodes spend 7 minutes stopping
        after its last case (measured 2026-11-27)."""
        stop_all([self])

    def _stop_peer(self, name: str, peer: Peer) -> None:
        with fault_log.quiet():  # the harness putting things away, not a case's fault
            try:
                if name in self.silent:  # a hung peer would not act on SIGTERM either: no use waiting for it
                    with contextlib.suppress(NotImplementedError):  # an external peer is not the harness's to kill
                        peer.kill()
                peer.stop()
            except Exception:  # stopping must reach every peer even if one misbehaves
                peer.kill()
            peer.cleanup()

    def _release(self) -> None:
        """What the topology holds besides its peers: the fault proxy and the scratch files."""
        if self.faults is not None:
            self.faults.close()
        release_ports(*self.held_ports)
        if self.files is not None:
            shutil.rmtree(self.files, ignore_errors=True)


def stop_all(topologies: Iterable[RunningTopology]) -> None:
    """Stop the peers of every topology given, each on its own thread, then release what the topologies hold.
    Every peer is reached and every topology released even when one fails to stop; the first failure is raised
    after that."""
    topologies = list(topologies)
    work = [(running, name, peer) for running in topologies for name, peer in running.peers.items()]
    failures: list[BaseException] = []
    if work:
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(work), thread_name_prefix="stop") as pool:
            futures = [pool.submit(running._stop_peer, name, peer) for running, name, peer in work]
        failures = [f.exception() for f in futures if f.exception() is not None]
    for running in topologies:
        running._release()
    if failures:
        raise failures[0]


def start_topology(topology: Topology, choices: dict[str, str], timeout: float = 60.0, *,
                   breaks: Iterable[Break] | dict[str, list[str]] = (),
                   node_vendors: dict[str, str] | None = None) -> RunningTopology:
    """Create every peer, wire the dialling ones to the ports of the ones they dial, start all concurrently.

    `choices` give each role's vendor; `node_vendors` (node -> vendor) overrides them for the nodes it names, for
    the cases that pair two vendors in one topology (a mirror from Artemis into a reference broker).

    `breaks` (harness/breaks.py) start the nodes whose role and vendor they name with a deliberately faulty
    setting (or, as a dict node -> faults, the nodes named: a fuzz reproducer's replay); `RunningTopology.breaks`
    says which node got which, and its `topology` is the one given, unbroken.

    Listeners that another node dials get a free port up front (a reference peer could bind port 0, but
    the dialler's config must name the port before either starts); brokers whose provider picks its own
    ports (RabbitMQ) are created first so their ports are known. Diallers retry, so start order is free.
    On any failure the peers already started are stopped and the error re-raised.
    """
    running = RunningTopology(topology)
    running.breaks = (dict(breaks) if isinstance(breaks, dict)
                      else breaks_by_node(topology, choices, breaks, node_vendors))
    for name, faults in running.breaks.items():
        topology = break_topology(topology, name, faults)
    wiring = Wiring(external_address=lambda node, address: running.peers[node].wire_address(address))
    if topology.cas or any(node.users for node in topology.nodes.values()):
        running.files = wiring.files = Path(tempfile.mkdtemp(prefix=f"interop-files-{topology.name}-"))
    if topology.cas:  # fresh CAs per started topology: nothing outlives it, nothing is shared between cases
        wiring.pki = running.pki = TestPki(running.files)
    dialled = {(link.to, topology.listener_for_link(link)) for link in topology.links}
    for name in topology.nodes:
        # held for the topology's life: a restarted peer binds its port again, and it must be nobody else's then
        wiring.listen_ports[name] = {ls.name: free_port(held=True) if (name, ls.name) in dialled else 0
                                     for ls in topology.listeners_for(name)}
        running.held_ports += [port for port in wiring.listen_ports[name].values() if port]
    if any(link.via == "proxy" for link in topology.links):
        from ..faults import start_fault_proxy
        from ..faults.links import LinkProxies

        running.faults = LinkProxies(start_fault_proxy())
    order = sorted(topology.nodes, key=lambda n: (topology.nodes[n].role != "broker", n))
    try:
        for name in order:
            wiring.connect_ports[name] = {}
            for link in topology.links_from(name):
                port = _dial_port(running, wiring, link)
                if link.via == "proxy":  # the dialler connects to the link's proxy, which forwards to the listener
                    # Refusing until every peer is up: a proxy that accepts while its upstream is still starting
                    # must close the connection it accepted, and Artemis does not dial again after a connection
                    # closed before the AMQP header until its 60 s TTL (a mirror that stayed down for the first
                    # two fault cases of a fresh topology); a refused dial it retries at its retry interval.
                    port = running.faults.add(link.name, port, enabled=False)
                wiring.connect_ports[name][link.to] = port
            running.peers[name] = make_peer(topology, name, node_vendor(topology, name, choices, node_vendors),
                                            wiring)
    except BaseException:  # a vendor that cannot run here (PeerUnavailable) is common: give back the held ports
        running._release()
        raise
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(running.peers))) as pool:
        futures = {pool.submit(peer.start, timeout): name for name, peer in running.peers.items()}
        errors = [f.exception() for f in futures if f.exception() is not None]
    if not errors and running.faults is not None:
        for link_name in running.faults.links:
            running.faults.set_enabled(link_name, True)
    if not errors:  # peers that form a network once all are up and their ports known (RabbitMQ federation)
        joining = [peer for peer in running.peers.values() if hasattr(peer, "join_network")]
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(joining))) as pool:
            futures = [pool.submit(peer.join_network, running, timeout) for peer in joining]
            errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        running.stop()
        raise errors[0]
    return running


def _dial_port(running: RunningTopology, wiring: Wiring, link) -> int:
    """The port `link.from_` dials: the listener's pre-assigned port, or what the target's provider chose."""
    listener = running.topology.listener_for_link(link)
    target = running.peers.get(link.to)
    if target is not None and listener in target.endpoints and target.endpoints[listener].port:
        return target.endpoints[listener].port
    return wiring.listen_ports[link.to][listener]
