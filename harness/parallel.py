"""One run across pytest-xdist workers (`pytest -n 3` in make test): the controller and its workers share one run
id and one run folder, and the run's metadata is the controller's, merged over what every worker saw.

Each worker is a pytest session of its own: it starts the topologies its cases ask for (on free ports, as every
session does), writes its cases' records into the shared results.jsonl (ResultWriter appends each record in one
write on an O_APPEND descriptor, so records from several workers land whole), and keeps its peers' logs under
peer-logs/<worker>/. What the controller never sees (outcome counts, the topologies each worker started and
replaced, the cases' clause ids) comes back in the worker's `workeroutput`; the controller writes run.json from it
once every worker has stopped, and prints the run's summary.

With `--dist loadfile` the units handed to workers are files, as in xdist, except that the report's three Spark
modules are two units, not three (each unit's worker runs its modules one after another in one JVM, leaving the third
worker to the suites: handed out separately on two workers, both sat in Spark at once and the suites waited, 34%
after 13 min against the whole run in 14.8 min) and that the units known to take longest go first (a long unit
handed out last would end the run alone while the other workers wait).

Cases marked `@pytest.mark.serial` (CPU budgets, timings) run alone: no case of another worker runs at the same
time. A file lock shared by the workers does this (SerialLock); without xdist the marker changes nothing.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from .results import ResultWriter

RUN_ID_KEY = "interop_run_id"  # workerinput: the controller's run id
LOCK_KEY = "interop_serial_lock"  # workerinput: the folder of the serial lock's files
META_KEY = "interop_meta"  # workeroutput: what the worker's session saw


def worker_id(config) -> str | None:
    """`gw0`, `gw1`, ... in an xdist worker; None in the controller or a run without xdist."""
    return getattr(config, "workerinput", {}).get("workerid")


def run_id_from_controller(config) -> str | None:
    return getattr(config, "workerinput", {}).get(RUN_ID_KEY)


def is_controller(config) -> bool:
    """True in the process that hands cases to xdist workers (and runs none itself)."""
    # as xdist decides whether to register its controller (DSession), whose own pytest_configure may come later
    return getattr(config.option, "dist", "no") != "no" and not config.getoption("collectonly")


def install(config, session) -> None:
    """Register the controller's or the worker's side of the run (nothing in a run without xdist)."""
    if worker_id(config) is not None:
        config.pluginmanager.register(Worker(session), "interop-xdist-worker")
    elif is_controller(config):
        config.pluginmanager.register(Controller(session), "interop-xdist-controller")


# The report's Spark modules (tests/conftest.py `spark`, a session per module) in two units: test_report_store.py
# alone, and test_report.py with test_report_connect.py. One unit for all three was the step's critical path on three
# workers: measured here (reference step alone, 3 workers, interpreted Spark queries), the Spark unit ran 452 s while
# the other two workers were done after 278-291 s; step 463 s, 700 busy CPU-s. In two units the two JVMs share the
# cores (test_report_store.py 255 s alone, 362 s beside the other) and the step took 428 s, 709 CPU-s, all three
# workers done within 15 s of each other. (With compiled queries, as before, two units gained less, 543 -> 517 s:
# two compiling JVMs starved the suites.)
# The later Spark modules (the version tables, the nightly's tables; issues 54 and 57) join a unit: its JVM is warm by
# then, where a unit of their own started a cold one beside the others (the reference step took 530 s, 921 CPU-s,
# with them as units of their own on 2026-12-07). test_report_store.py shed four of its reports and its Spark-read
# comparisons (2026-12-07), so the version tables join its unit, the nightly's stay with the report's: in make test at
# 18:33 that day, with both in the store's unit, it ran about 380 s of case time against the other's 260 s.
SPARK_UNIT = "tests/test_report.py, tests/test_report_connect.py, tests/test_report_nightly.py (Spark modules)"
SPARK_STORE_UNIT = "tests/test_report_store.py, tests/test_report_versions.py (Spark modules)"
UNIT_OF = {
    **dict.fromkeys(("tests/test_report.py", "tests/test_report_connect.py", "tests/test_report_nightly.py"),
                    SPARK_UNIT),
    **dict.fromkeys(("tests/test_report_store.py", "tests/test_report_versions.py"), SPARK_STORE_UNIT),
}
# Units of minutes, handed out first, longest first: the report's Spark units, the report demo (two `interop run`s, a
# fuzz session and a report in a JVM of its own) and the broker's kill -9 cases (4 cases, 290 s of a serial run on a
# loaded machine: restarts of a broker under strace).
LONG_UNITS = (SPARK_STORE_UNIT, SPARK_UNIT, "tests/test_report_demo.py", "suites/broker/test_durability.py")


def file_units():
    """The loadfile scheduler with the Spark modules in two units and the long units first (see the module's doc)."""
    from xdist.scheduler import LoadFileScheduling

    class FileUnits(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return UNIT_OF.get(path, path)

        def _assign_work_unit(self, node) -> None:
            # the queue is in collection order (or by size); the long units go to its head before each hand-out
            for unit in reversed(LONG_UNITS):
                if unit in self.workqueue:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

        def remove_node(self, node):
            # When a worker dies, xdist (3.8) puts back in the queue every unit that worker was ever given,
            # finished ones too. A finished unit handed out again is an empty batch: the worker that gets it
            # runs nothing, so nothing reports back, and controller and workers wait on each other for ever (a
            # fresh run here hung 15 minutes after one worker died). Only the units with tests left go back.
            workload = self.assigned_work.get(node, {})
            for scope in [scope for scope, unit in workload.items() if all(unit.values())]:
                del workload[scope]
            return super().remove_node(node)

    return FileUnits


class Worker:
    def __init__(self, session) -> None:
        self.session = session
        folder = session.config.workerinput.get(LOCK_KEY)
        self.lock = SerialLock(Path(folder)) if folder else None

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if self.lock is None:
            yield
            return
        with self.lock.hold(exclusive=item.get_closest_marker("serial") is not None):
            yield

    def pytest_sessionfinish(self, session):
        """Runs before xdist's own sessionfinish sends workeroutput (a wrapper that sends after every plain hook).
        The worker stops its topologies here rather than at unconfigure: the controller stops waiting for a worker
        10 s after telling it to exit and kills it, which would leave its peers running; and the worker's last
        write of run.json must come before the controller's merged one."""
        from .catalog import spec_ids

        s = self.session
        s.config.workeroutput[META_KEY] = {
            "worker": worker_id(s.config),
            "outcomes": dict(s.outcomes),
            "topologies": {n: (t.peer_records() if hasattr(t, "peer_records") else repr(t))
                           for n, t in s.topologies.items()},
            "replaced": [{**r, "worker": worker_id(s.config)} for r in s.replaced],
            "case_ids": {item.nodeid: spec_ids(item) for item in s.suite_items},
            "wrote_records": s.writer is not None,
        }
        s.close()


class Controller:
    def __init__(self, session) -> None:
        self.session = session
        self.metas: list[dict] = []
        self.lock_dir = Path(tempfile.mkdtemp(prefix="interop-serial-"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        node.workerinput[RUN_ID_KEY] = self.session.run_id
        node.workerinput[LOCK_KEY] = str(self.lock_dir)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") == "loadfile":
            return file_units()(config, log)
        return None

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        meta = getattr(node, "workeroutput", {}).get(META_KEY)
        if meta is None:  # a worker that crashed: its records are on disk, its summary is lost
            return
        self.metas.append(meta)
        for outcome, count in meta["outcomes"].items():
            self.session.outcomes[outcome] = self.session.outcomes.get(outcome, 0) + count
        self.session.worker_case_ids.update(meta["case_ids"])

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        # trylast: after xdist's own sessionfinish has stopped the workers, so that nothing writes after this
        for path in self.lock_dir.iterdir():
            path.unlink()
        self.lock_dir.rmdir()
        if any(m["wrote_records"] for m in self.metas):
            with ResultWriter(self.session.results_dir) as writer:
                writer.write_run_meta({**self.session.run_meta(ended=True), **merged_meta(self.metas)})


def merged_meta(metas: list[dict]) -> dict:
    """The workers' parts of run.json: the topologies any of them started (the same peers in each: a topology's
    peer records name vendors and versions, not ports), every topology one of them replaced, and how many ran."""
    topologies: dict = {}
    for meta in sorted(metas, key=lambda m: m["worker"] or ""):
        for name, peers in meta["topologies"].items():
            topologies.setdefault(name, peers)
    return {"topologies": topologies, "replaced_topologies": [r for m in metas for r in m["replaced"]],
            "workers": sorted(m["worker"] for m in metas)}


class SerialLock:
    """A readers-writer lock over processes: every case holds it shared, a serial case holds it alone.

    flock() gives a waiting writer no precedence, so a worker that runs short cases back to back could keep a
    serial case waiting for ever; a turnstile in front (taken and let go by readers, held by a waiting writer)
    stops new readers while a writer waits."""

    def __init__(self, folder: Path) -> None:
        self.turnstile = os.open(folder / "turnstile", os.O_RDWR | os.O_CREAT, 0o600)
        self.cases = os.open(folder / "cases", os.O_RDWR | os.O_CREAT, 0o600)

    @contextmanager
    def hold(self, exclusive: bool):
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        if not exclusive:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        fcntl.flock(self.cases, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self.cases, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(self.turnstile, fcntl.LOCK_UN)
