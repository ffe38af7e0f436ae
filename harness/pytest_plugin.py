"""The harness's pytest plugin: peer choice, topology fixtures, spec/capability markers, result records.

Options
  --peer ROLE=VENDOR[,ROLE=VENDOR]   which vendor plays each role (default: router=reference); repeatable;
                                     VENDOR@VERSION a version other than the pinned one (artemis@2.39.0)
  --results DIR                      where run folders go (default: results/); each run writes
                                     DIR/<run_id>/results.jsonl and run.json
  --client python|cpp|rhea           the client stack of the cases that run through harness/drivers.py (default
                                     python); the `stacks` fixture starts one shim process per stack per session
Markers
  @pytest.mark.spec("ROUTING-MULTICAST-1", ...)   clauses of suites/spec/catalog.yaml a case checks
  @pytest.mark.requires("distribution.closest")   capabilities a case needs; a vendor without them makes
                                                 the case `not-applicable` (never passed, never failed)
  @pytest.mark.requires("router:sasl.plain")      the same, from the vendor playing that role: a bare name is
                                                 met by any role's vendor (the reference broker's sasl.plain
                                                 would let a PLAIN router case run on a router without it)
Outcomes in result records: passed | failed | error | skipped | not-applicable | xfail. A case whose
vendor is known to differ (harness/vendors/<vendor>/expected.yaml) runs as a strict xfail with the recorded reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from datetime import datetime, UTC
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from . import fault_log, parallel
from .breaks import CONFIG_FAULTS, BreakError, parse_break
from .catalog import coverage, format_coverage, load_catalog, spec_ids
from .cell import CELLS_DIR, Cell, CellError
from .clients import Clients
from .drivers import DEFAULT_STACK, STACKS, Stacks
from .faults.launch import KIND_ENV as FAULT_PROXY_ENV, KINDS as FAULT_PROXIES
from .faults.launch import choose_fault_proxy, chosen_fault_proxy
from .history import History
from .peers.base import PeerUnavailable
from .peers.launch import RunningTopology, start_topology, stop_all
from .peers.registry import expected_path
from .peers import vendors
from .peers.vendors import vendor
from .peers.versions import chosen_version
from .results import (RUN_ID_ENV, InvalidRecord, ResultWriter, default_results_dir, host_facts, make_record,
                      new_run_id)
from .topology import ROLES, TOPOLOGIES_DIR, load_topology

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "suites" / "spec" / "catalog.yaml"
EXPECTED = ROOT / "suites" / "expected"  # the client stacks' known differences (client-<stack>.yaml)
NOT_APPLICABLE = "not-applicable: "
PEER_LOGS = "peer-logs"  # run folder: peer-logs/[<cell>/]<topology>/<node>.log, <node>.<n>.log for retired ones
LOG_TAIL_LINES = 40
# A healthy peer answers a protocol header in milliseconds, also under load; a JVM broker in a long GC pause may
# take a second or two. Five seconds is asked only after a failed case, and only of peers that are not down.
PROBE_TIMEOUT = 5.0

_reports_key = pytest.StashKey[dict]()
_details_key = pytest.StashKey[dict]()
_topology_key = pytest.StashKey[RunningTopology]()
_leaves_hung_key = pytest.StashKey[str]()  # the vendor an expected difference leaves hung (suites/expected/)
_started_key = pytest.StashKey[tuple]()


def pytest_addoption(parser):
    group = parser.getgroup("interop", "AMQP interop harness")
    group.addoption("--peer", action="append", default=[], metavar="ROLE=VENDOR[@VERSION][@PROVIDER]",
                    help="vendor per role, e.g. router=reference (repeatable or comma-separated); @VERSION picks "
                         "a version other than the pinned one (broker=artemis@2.39.0), got at session start")
    group.addoption("--results", default=default_results_dir(), metavar="DIR",
                    help="folder for run results (DIR/<run_id>/results.jsonl, run.json); default: $INTEROP_RESULTS, "
                         "else results")
    group.addoption("--client", choices=STACKS, default=DEFAULT_STACK,
                    help="client stack of the cases that run through a stack driver (harness/drivers.py): "
                         f"{', '.join(STACKS)}; default: {DEFAULT_STACK}")
    group.addoption("--break", dest="interop_breaks", action="append", default=[],
                    metavar="[ROLE[=VENDOR]:]FAULT",
                    help="start peers of ROLE (optionally only VENDOR) with a deliberately faulty setting: "
                         + ", ".join(CONFIG_FAULTS))
    group.addoption("--interop-cell", default=None, metavar="FILE",
                    help="the matrix cell this session is (a JSON file `interop run` writes): its peers, breaks and "
                         "client stack, in place of --peer, --break and --client")
    group.addoption("--peer-probe-timeout", type=positive_seconds, default=PROBE_TIMEOUT, metavar="SECONDS",
                    help="after a failed case, a peer that does not answer an AMQP protocol header within this "
                         f"long is taken as hung and replaced before the next case; default: {PROBE_TIMEOUT:g}")
    group.addoption("--fault-proxy", choices=FAULT_PROXIES, default=None,
                    help="the server behind links that go `via: proxy`: harness (this project's) or toxiproxy (the "
                         f"real toxiproxy-server, `make toxiproxy`); default: ${FAULT_PROXY_ENV}, else harness")


def positive_seconds(text: str) -> float:
    """An option's value in seconds, > 0 (for argparse and pytest options)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value


def parse_peer_choices(values: list[str]) -> dict[str, str]:
    """harness.peers.vendors.parse_peer_choices, its one-line errors as pytest usage errors."""
    try:
        return vendors.parse_peer_choices(values)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def session_cell(config) -> Cell:
    """The cell this session runs: read once from --interop-cell, else made from --peer, --break and --client."""
    path = config.getoption("--interop-cell", default=None)
    given = [name for name, dest, empty in (("--peer", "--peer", []), ("--break", "interop_breaks", []),
                                            ("--client", "--client", DEFAULT_STACK))
             if config.getoption(dest, default=empty) != empty]
    if path:
        if given:
            raise pytest.UsageError(f"--interop-cell {path}: the cell says the peers, breaks and client stack; "
                                    f"drop {', '.join(given)}")
        try:
            cell = Cell.read(path)
        except CellError as exc:
            raise pytest.UsageError(str(exc)) from None
        cell.peers = parse_peer_choices([cell.peer_option()])  # checked, and completed with the default roles
        return cell
    try:
        breaks = [parse_break(b) for b in config.getoption("interop_breaks", default=[])]
    except BreakError as exc:
        raise pytest.UsageError(str(exc)) from None
    return Cell(None, parse_peer_choices(config.getoption("--peer")), breaks=breaks,
                client=config.getoption("--client", default=DEFAULT_STACK))


class InteropSession:
    """Per-session state: the cell (chosen peers, breaks, client stack), running topologies, the result writer."""

    def __init__(self, config):
        self.config = config
        self.cell = session_cell(config)
        self.choices = self.cell.peers
        self.run_id = os.environ.get(RUN_ID_ENV) or parallel.run_id_from_controller(config) or new_run_id()
        self.results_dir = Path(config.getoption("--results")) / self.run_id
        self.writer: ResultWriter | None = None
        self.topologies: dict[str, RunningTopology | Exception] = {}
        self.outcomes: dict[str, int] = {}
        self.started_at = _now()
        self.expected = _load_expected(self.choices)
        self.suite_items: list = []
        self.replaced: list[dict] = []  # topologies retired because a peer went down
        self.current_case: str | None = None
        self._asked: dict[str, str | None] = {}  # topology -> the last case that asked for it
        self.worker_case_ids: dict[str, list[str]] = {}  # an xdist controller's, from its workers (parallel.py)
        self.closed = False

    @property
    def capabilities(self) -> frozenset[str]:
        """Every role's vendor's capabilities, each also as `ROLE:CAPABILITY` for cases that need it from one
        role (see the `requires` marker)."""
        caps: set[str] = set()
        for role, name in self.choices.items():
            own = vendor(name, role).capabilities
            caps |= own | {f"{role}:{cap}" for cap in own}
        return frozenset(caps)

    def topology(self, name: str, node_vendors: dict[str, str] | None = None) -> RunningTopology:
        """Start a topology once per session (peers are shared by the cases that use it). One with a peer that
        went down (crashed, or killed and not brought back by an earlier case) is replaced by a fresh one, so
        one crash fails one case, not every later case on that topology. `node_vendors` (node -> vendor) puts
        other vendors than the session's on the nodes it names: that pairing is a topology of its own."""
        topology_name = name
        if node_vendors:
            name = f"{name}[{','.join(f'{node}={v}' for node, v in sorted(node_vendors.items()))}]"
        running = self.topologies.get(name)
        # Checked once per case, when it first asks: a case that kills or pauses a peer on purpose and asks for
        # its topology again before bringing the peer back must get the same one.
        first_ask = self._asked.get(name) != self.current_case
        self._asked[name] = self.current_case
        if first_ask and isinstance(running, RunningTopology) and (down := running.down_peers()):
            self._retire(name, running, down)
            del self.topologies[name]
        if name not in self.topologies:
            try:
                self.topologies[name] = start_topology(load_topology(TOPOLOGIES_DIR / f"{topology_name}.yaml"),
                                                       self.choices, breaks=self.cell.breaks,
                                                       node_vendors=node_vendors)
            except Exception as exc:  # remembered so every case using it reports the same reason
                self.topologies[name] = exc
        running = self.topologies[name]
        if isinstance(running, PeerUnavailable):
            pytest.skip(f"peer unavailable: {running}")
        if isinstance(running, Exception):
            raise running
        return running

    def get_versions(self) -> None:
        """Get the product versions this session chose (`--peer broker=artemis@2.39.0`, or a topology file's node
        `vendor:`) before its first case: a fetch or build takes 20-60 s, which no case's deadline should pay.
        Under `interop run` the run got them already (harness/peers/versions.py, ENV) and this only looks. One
        that cannot be had here is said once; its cases are `skipped` with the reason. One that does not exist
        is a usage error naming the choice."""
        from .peers import versions

        for where, name in [*((f"--peer {r}={v}", v) for r, v in self.choices.items()), *_topology_choices()]:
            try:
                why = versions.ensure(vendors.parse_choice(name), say=self._say)
            except versions.NoSuchVersion as exc:
                raise pytest.UsageError(f"{where}: {exc}") from None
            if why is not None:
                self._say(f"interop: {where}: {why}; its cases are skipped")

    def _retire(self, name: str, running: RunningTopology, down: dict[str, str]) -> None:
        """Keep the logs of a topology that lost a peer, stop what is left of it, and say so."""
        generation = 1 + sum(1 for r in self.replaced if r["topology"] == name)
        logs = self._keep_logs(name, running, suffix=f".{generation}")
        running.stop()
        self.replaced.append({"topology": name, "down": down, "before_case": self.current_case,
                              "logs": [str(p) for p in logs]})
        reasons = "; ".join(f"{node}: {why}" for node, why in down.items())
        self._say(f"interop: topology {name} lost a peer ({reasons}); starting it again for "
                  f"{self.current_case} (logs kept in {self.peer_logs_dir / name})")

    def _keep_logs(self, name: str, running: RunningTopology, suffix: str = "") -> list[Path]:
        try:
            return running.save_logs(self.peer_logs_dir / name, suffix)
        except OSError as exc:  # a full or read-only disk must not keep the peers running
            self._say(f"interop: cannot keep the peer logs of topology {name}: {exc}")
            return []

    def _say(self, line: str) -> None:
        """A line on the terminal, also from inside a case (where output capture would swallow it)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.ensure_newline()
            reporter.write_line(line, yellow=True)

    @property
    def peer_logs_dir(self) -> Path:
        """The run folder's peer-logs/, or peer-logs/<cell>/ in a matrix cell: cells share the run folder, run
        side by side and start the same topologies."""
        cell = self.cell.name
        folder = self.results_dir / PEER_LOGS / cell if cell else self.results_dir / PEER_LOGS
        worker = parallel.worker_id(self.config)  # xdist workers start the same topologies side by side too
        return folder / worker if worker else folder

    def write(self, record: dict) -> None:
        if self.writer is None:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            self.writer = ResultWriter(self.results_dir)
            self.writer.write_run_meta(self.run_meta())
        try:
            self.writer.write(record)
        except InvalidRecord as exc:
            # A case whose details break the record schema (harness/record_schema.py: a key it declares, filled with
            # something else) is an error of that case, not of the session: its record is kept, as an error that
            # says why, with the details as text, and the other cases go on.
            print(f"\ninterop: {record.get('case')}: its record breaks the record schema: {exc}", file=sys.stderr)
            record = {**record, "outcome": "error", "message": f"the case's record breaks the record schema: {exc}",
                      "details": {"rejected_details": json.dumps(record.get("details"), default=str)[:4000]}}
            self.writer.write(record)
        self.outcomes[record["outcome"]] = self.outcomes.get(record["outcome"], 0) + 1

    def run_meta(self, ended: bool = False) -> dict:
        return {"schema": 1, "run_id": self.run_id, "started_at": self.started_at,
                "ended_at": _now() if ended else None, "host": host_facts(), "peers": self.choices,
                "cell": self.cell.as_dict(),
                "argv": list(self.config.invocation_params.args),
                "topologies": {n: (t.peer_records() if isinstance(t, RunningTopology) else repr(t))
                               for n, t in self.topologies.items()},
                "replaced_topologies": self.replaced}

    def close(self) -> None:
        if self.closed:  # an xdist worker closes at sessionfinish (parallel.py), before pytest_unconfigure
            return
        self.closed = True
        started = [(name, running) for name, running in self.topologies.items()
                   if isinstance(running, RunningTopology)]
        for name, running in started:
            self._keep_logs(name, running)
        stop_all(running for _, running in started)
        if self.writer is not None:
            self.writer.write_run_meta(self.run_meta(ended=True))


_session_key = pytest.StashKey[InteropSession]()


def chosen_vendors(config) -> dict[str, str]:
    """role -> vendor (without a version) of the session's peers, for a suite's own collection hooks."""
    return {role: vendor(name, role).vendor for role, name in config.stash[_session_key].choices.items()}


def _topology_choices() -> list[tuple[str, str]]:
    """(where, choice) of every topology file's node that names its own version (`vendor: artemis@2.39.0`). The
    files are read as text first: most name no vendor, and parsing them all would cost each session."""
    found = []
    for path in sorted(TOPOLOGIES_DIR.glob("*.yaml")):
        text = path.read_text(errors="replace")
        if "vendor:" not in text:
            continue
        with contextlib.suppress(Exception):  # a broken file is reported by the case that loads it
            for node_name, node in load_topology(path).nodes.items():
                if node.vendor and vendors.parse_choice(node.vendor).version:
                    found.append((f"{path.name}: nodes.{node_name}.vendor", node.vendor))
    return found


def pytest_sessionstart(session):
    interop = session.config.stash.get(_session_key, None)
    if interop is not None:
        interop.get_versions()


def pytest_configure(config):
    try:  # the session's fault proxy, for every topology it starts (a bad $INTEROP_FAULT_PROXY is a usage error)
        choose_fault_proxy(config.getoption("--fault-proxy", default=None) or chosen_fault_proxy())
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_session_key] = InteropSession(config)
    parallel.install(config, config.stash[_session_key])


def pytest_unconfigure(config):
    session = config.stash.get(_session_key, None)
    if session is not None:
        session.close()


class Expected(NamedTuple):
    """One entry of suites/expected/<name>.yaml, as a case sees it."""

    reason: str
    strict: bool
    leaves_hung: str | None  # the vendor whose peers the case leaves hung (`leaves_peer_hung: true`), else None


def expected_file(name: str) -> Path | None:
    """The known differences of a vendor (its package's expected.yaml) or of a client stack (`client-<stack>`)."""
    return EXPECTED / f"{name}.yaml" if name.startswith("client-") else expected_path(name)


def _load_expected(choices: dict[str, str]) -> dict[str, Expected]:
    """nodeid (or nodeid without parameters) -> Expected, for every vendor in use.

    An entry is strict unless it says `strict: false`, which is only for a difference the vendor shows
    intermittently (a strict xfail would then fail the runs where it happens to behave). An entry with
    `leaves_peer_hung: true` is a difference that leaves the product unable to serve (some of) its later
    connections: after that case its topology is replaced before the next one, so that later cases judge a
    healthy product instead of failing as victims of this one. The files of the
    client stacks (client-<stack>.yaml) are read whatever the peers. An entry with
    `peers: {ROLE: VENDOR, ...}` applies only when those roles are played by those vendors: a difference that
    shows only in front of one product (qdrouterd's link routes to RabbitMQ, say) is not expected elsewhere. An entry
    with `versions: SPECIFIERS` (PEP 440: `<2.40.0`, `>=1.18,<1.19`) applies only to the releases of its vendor it
    names: a difference one release has and another has not (harness/peers/versions.py `chosen_version`; a session
    whose release cannot be told is not expected to differ)."""
    expected: dict[str, Expected] = {}
    vendors = {role: vendor(n, role).vendor for role, n in choices.items()}
    releases = {vendors[role]: chosen_version(n) for role, n in choices.items()}
    # A client stack's differences (suites/expected/client-<stack>.yaml) name cases whose ids carry the stack (the
    # type suite's `python-to-rhea`), so every stack's file is read: an entry matches only its own cases.
    for name in [*sorted(set(vendors.values())), *(f"client-{stack}" for stack in STACKS)]:
        path = expected_file(name)
        if path is None or not path.exists():
            continue
        data = yaml.safe_load(path.read_text()) or {}
        for i, entry in enumerate(data.get("cases") or []):
            if not isinstance(entry, dict) or not entry.get("case") or not entry.get("reason"):
                raise pytest.UsageError(f"{path}: cases[{i}]: expected a mapping with 'case' and 'reason'")
            strict = entry.get("strict", True)
            if not isinstance(strict, bool):
                raise pytest.UsageError(f"{path}: cases[{i}].strict: expected true or false, got {strict!r}")
            when = entry.get("peers", {})
            if not isinstance(when, dict) or not all(r in ROLES and isinstance(v, str) for r, v in when.items()):
                raise pytest.UsageError(f"{path}: cases[{i}].peers: expected a mapping of role "
                                        f"({', '.join(ROLES)}) to vendor, got {when!r}")
            hung = entry.get("leaves_peer_hung", False)
            if not isinstance(hung, bool):
                raise pytest.UsageError(f"{path}: cases[{i}].leaves_peer_hung: expected true or false, got {hung!r}")
            within = _version_range(path, i, entry.get("versions"))
            if any(vendors.get(role) != v for role, v in when.items()):
                continue
            if within is not None and not (releases.get(name) and within.contains(releases[name], prereleases=True)):
                continue
            expected[entry["case"]] = Expected(f"{name}: {entry['reason']}", strict, name if hung else None)
    return expected


def _version_range(path: Path, index: int, text):
    """An entry's `versions` as a SpecifierSet (None without one); a UsageError naming the entry for a bad one."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if text is None:
        return None
    try:
        if not isinstance(text, str) or not text.strip():
            raise InvalidSpecifier(repr(text))
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise pytest.UsageError(f"{path}: cases[{index}].versions: expected PEP 440 version specifiers such as "
                                f"'<2.40.0' or '>=1.18,<1.19', got {text!r}") from None


def pytest_collection_modifyitems(config, items):
    session = config.stash[_session_key]
    for item in items:
        known = session.expected.get(item.nodeid) or session.expected.get(item.nodeid.split("[")[0])
        if known:
            item.add_marker(pytest.mark.xfail(reason=f"expected difference: {known.reason}", strict=known.strict))
            if known.leaves_hung:
                item.stash[_leaves_hung_key] = known.leaves_hung


def required_capabilities(markers) -> set[str]:
    """Every capability the `requires` markers name: a module's `pytestmark` and a case's own add up (a
    case-level marker must not hide its module's needs, as `get_closest_marker` would)."""
    return {cap for marker in markers for cap in marker.args}


def pytest_runtest_setup(item):
    session = item.config.stash[_session_key]
    _tag_with_cell(item, session.cell)  # first: a case found not-applicable below is a record of the cell too
    needed = required_capabilities(item.iter_markers("requires"))
    missing = sorted(needed - session.capabilities)
    if missing:
        pytest.skip(f"{NOT_APPLICABLE}missing capability {', '.join(missing)}")


def _tag_with_cell(item, cell: Cell) -> None:
    """Tag the case's record (and its Allure entry) with the matrix cell and any deliberate break."""
    if not (cell.name or cell.breaks):
        return
    try:
        import allure
    except ImportError:
        return
    if cell.name:
        allure.dynamic.parameter("cell", cell.name)
        allure.dynamic.parent_suite(cell.name)
    if cell.breaks:
        allure.dynamic.tag("config-fault")


# ---- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def interop(request) -> InteropSession:
    return request.config.stash[_session_key]


@pytest.fixture
def topology(request, interop):
    """`topology("single-router")` -> the running topology (started once per session); `vendors={"DC2":
    "reference"}` runs the nodes it names with those vendors instead of the session's."""
    def get(name: str, vendors: dict[str, str] | None = None) -> RunningTopology:
        running = interop.topology(name, vendors)
        request.node.stash[_topology_key] = running
        return running
    return get


@pytest.fixture(scope="session")
def stacks():
    """The client stacks' shims (harness/drivers.py): one process per stack, started on first use, stopped at the
    end of the session."""
    running = Stacks()
    yield running
    running.close()


@pytest.fixture(scope="session")
def client_stack(interop) -> str:
    """The session's client stack (python, cpp or rhea): its cell's, or --client's."""
    return interop.cell.client


@pytest.fixture
def details(request) -> dict:
    """Counts and figures a case wants in its result record's `details`."""
    return request.node.stash.setdefault(_details_key, {})


@pytest.fixture
def clients(details):
    """Recording clients on their own event loop; their history's counts go into the result record."""
    with Clients(History()) as c:
        yield c
    counts: dict[str, int] = {}
    for event in c.history:
        counts[event.kind] = counts.get(event.kind, 0) + 1
    details.setdefault("events", counts)


# ---- result records -------------------------------------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.config.stash[_session_key].current_case = item.nodeid
    item.stash[_started_key] = (_now(), time.monotonic())
    fault_log.begin()  # what the case injects (a kill, a toxic, an outage) goes into its record's `fault`
    item.stash[_reports_key] = {}
    yield
    if _is_suite_case(item):
        item.config.stash[_session_key].write(_record_for(item))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    item.stash.setdefault(_reports_key, {})[call.when] = report
    running = item.stash.get(_topology_key, None)
    if call.when == "call" and running is not None and (hung_vendor := item.stash.get(_leaves_hung_key, None)):
        running.silent.update({node: f"left hung by {item.nodeid} (a recorded difference: leaves_peer_hung)"
                               for node, peer in running.peers.items() if peer.info.vendor == hung_vendor})
    # An expected failure is checked too: a recorded difference can be one that leaves the product hung (Artemis's
    # I/O thread after an oversized SASL frame), and the next case on that topology must get a fresh one instead
    # of failing for it.
    if (report.failed or hasattr(report, "wasxfail")) and running is not None:
        _show_down_peers(item, report, running)
    if report.failed and call.when == "call" and running is not None:
        _show_router_state(report, running)


def _show_down_peers(item, report, running: RunningTopology) -> None:
    """A case failed while a peer of its topology was down: the peer's last log lines (a crash's traceback)
    go into the failure report, and the reason into the record's details. The peers that still run are asked
    on the wire whether they answer: one that is hung is down too (and replaced before the next case)."""
    running.probe_peers(item.config.getoption("--peer-probe-timeout"))
    down = running.down_peers()
    for node, reason in down.items():
        tail = "\n".join(running[node].logs().splitlines()[-LOG_TAIL_LINES:]) or "(the peer logged nothing)"
        report.sections.append((f"peer {node} is down: {reason}; its last log lines", tail))
    if down:
        item.stash.setdefault(_details_key, {}).setdefault("peers_down", down)


def _show_router_state(report, running: RunningTopology) -> None:
    """A failed case's report shows each running router's links and addresses as its management shows them
    (router.link and router.address: credit, undelivered and unsettled copies, consumers per address), read when
    the case failed: what a reader would ask the router with qdstat -l and -a. Not for an expected failure, whose
    reason is written down, and not for a router found down (its log tail is shown instead)."""
    from .management import router_state

    down = running.down_peers()
    for node, peer in running.peers.items():
        if peer.role == "router" and node not in down:
            report.sections.append((f"router {node}: links and addresses (its management, when the case failed)",
                                    router_state(peer.url)))


def _is_suite_case(item) -> bool:
    return Path(str(item.path)).resolve().is_relative_to(ROOT / "suites")


def _outcome_of(reports: dict) -> tuple[str, str | None]:
    setup, call, teardown = reports.get("setup"), reports.get("call"), reports.get("teardown")
    for report in (setup, call):
        if report is None:
            continue
        if report.skipped:
            reason = _skip_reason(report)
            if hasattr(report, "wasxfail"):
                return "xfail", report.wasxfail or None
            if reason.startswith(NOT_APPLICABLE):
                return "not-applicable", reason[len(NOT_APPLICABLE):]
            return "skipped", reason
        if report.failed:
            if report.when == "setup":
                return "error", _short(report)
            return "failed", _short(report)
    if teardown is not None and teardown.failed:
        return "error", _short(teardown)
    return "passed", None


def _expected_failure(reports: dict) -> str | None:
    """What an expected failure (xfail) said this time, in the words of its assertion: the record's message is the
    recorded reason, and a difference that shows only in some runs is told apart by this (which wait ran out, what
    the peer answered, the credit and queue a failure message prints). A case that calls pytest.xfail itself says
    its own words here; None for an xfail case that passed."""
    for report in (reports.get("setup"), reports.get("call")):
        if report is not None and report.skipped and hasattr(report, "wasxfail") and report.longrepr is not None \
                and not isinstance(report.longrepr, tuple):
            return _short(report) or None
    return None


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def _chosen(name: str) -> dict:
    """A record's peer where none ran (a skipped case): the vendor, and the version asked for when one was."""
    choice = vendors.parse_choice(name)
    return {"vendor": choice.vendor, **({"version": choice.version} if choice.version else {})}


def _short(report) -> str:
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    lines = [line for line in text.splitlines() if line.startswith("E ")]
    return (" ".join(line[1:].strip() for line in lines[:3]) or text.splitlines()[-1] if text else "")[:500]


def _record_for(item) -> dict:
    session = item.config.stash[_session_key]
    started_at, t0 = item.stash[_started_key]
    reports = item.stash.get(_reports_key, {})
    outcome, message = _outcome_of(reports)
    running = item.stash.get(_topology_key, None)
    rel = Path(str(item.path)).resolve().relative_to(ROOT)
    details = dict(item.stash.get(_details_key, {}))
    # What the report reads as columns goes to the record's top level (harness.results.OPTIONAL_FIELDS), out of
    # the free-form details: cases put their checkers' results and resume time into `details` as before.
    lifted = {key: details.pop(key) for key in ("checks", "resume_s") if key in details}
    if session.cell.name:
        # The cell's choice of vendor per role (a case's own `peers` lists only the nodes it used): the report
        # compares cells by it.
        lifted.update(cell=session.cell.name, target=session.cell.target())
    if session.cell.breaks:
        lifted["config_fault"] = " ".join(map(str, session.cell.breaks))
    if running and (nodes := running.node_records()):
        details["nodes"] = nodes  # a mixed topology: `peers` shows the first node of each role only
    if outcome == "xfail" and (said := _expected_failure(reports)):
        details["xfail_message"] = said
    if message and details.get("peers_down"):
        down = "; ".join(f"peer {node} down ({why})" for node, why in details["peers_down"].items())
        message = f"{down}: {message}"[:500]
    return make_record(
        run_id=session.run_id, case=item.nodeid, suite=rel.parts[1] if len(rel.parts) > 2 else rel.stem,
        spec=spec_ids(item), topology=running.topology.name if running else None,
        peers=running.peer_records() if running else {r: _chosen(v) for r, v in session.choices.items()},
        fault=fault_log.take(), outcome=outcome, duration_s=round(time.monotonic() - t0, 4), started_at=started_at,
        details={**details, "fault_proxy": running.faults.handle.record()} if running and running.faults else details,
        **lifted,
        message=message)


# ---- summary ---------------------------------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter, config):
    session = config.stash[_session_key]
    if not session.outcomes:
        return
    tr = terminalreporter
    tr.section("interop results")
    order = ["passed", "failed", "error", "xfail", "not-applicable", "skipped"]
    tr.write_line("peers: " + ", ".join(f"{r}={v}" for r, v in session.choices.items()))
    tr.write_line("cases: " + ", ".join(f"{session.outcomes.get(o, 0)} {o}" for o in order))
    tr.write_line(f"results: {session.results_dir / 'results.jsonl'}")
    if CATALOG.exists():
        case_ids = {item.nodeid: spec_ids(item) for item in session.suite_items} or session.worker_case_ids
        tr.write_line(format_coverage(coverage(load_catalog(CATALOG), case_ids), most=12))


def pytest_collection_finish(session):
    interop = session.config.stash[_session_key]
    interop.suite_items = [item for item in session.items if _is_suite_case(item)]
    if interop.cell.name and os.environ.get(RUN_ID_ENV):
        # `interop run` follows its cells' progress by these counts (harness/matrix.py, Progress)
        folder = interop.results_dir / CELLS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        info = {"cell": interop.cell.name, "collected": len(session.items), "pid": os.getpid()}
        tmp = folder / f".{interop.cell.name}.json.tmp"
        tmp.write_text(json.dumps(info))
        os.replace(tmp, folder / f"{interop.cell.name}.json")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
