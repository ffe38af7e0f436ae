"""harness/parallel.py: the suites under pytest-xdist write one run (one run id, whole records, run.json merged from
every worker), and a serial case runs while no case of another worker does."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.parallel import SerialLock, merged_meta
from harness.results import read_results
from harness.wait import wait_for

ROOT = Path(__file__).resolve().parent.parent
ROUTER = {"router": {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}}
BROKER = {"broker": {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}}


def test_merged_meta_has_every_workers_topologies_and_replacements():
    metas = [
        {"worker": "gw1", "topologies": {"single-router": ROUTER, "single-broker": BROKER},
         "replaced": [{"topology": "single-broker", "down": {"B1": "killed"}, "worker": "gw1"}]},
        {"worker": "gw0", "topologies": {"single-router": ROUTER}, "replaced": []},
    ]
    assert merged_meta(metas) == {
        "topologies": {"single-router": ROUTER, "single-broker": BROKER},
        "replaced_topologies": [{"topology": "single-broker", "down": {"B1": "killed"}, "worker": "gw1"}],
        "workers": ["gw0", "gw1"],
    }


class Holder(threading.Thread):
    """Holds a SerialLock (its own open files, as another worker would) until told to let go; notes when it got it."""

    def __init__(self, folder: Path, exclusive: bool, name: str, order: list[str]) -> None:
        super().__init__(daemon=True)
        self.lock, self.exclusive, self.label, self.order = SerialLock(folder), exclusive, name, order
        self.holding, self.release = threading.Event(), threading.Event()

    def run(self) -> None:
        with self.lock.hold(self.exclusive):
            self.order.append(self.label)
            self.holding.set()
            self.release.wait(30)


def blocked_on(path: Path) -> int:
    """How many flock() requests on the file wait (the kernel lists them in /proc/locks with `->`)."""
    inode = f":{path.stat().st_ino} "
    return sum(1 for line in Path("/proc/locks").read_text().splitlines() if " -> " in line and inode in line)


def test_a_serial_case_waits_for_running_cases_and_keeps_new_ones_out(tmp_path):
    order: list[str] = []
    running = Holder(tmp_path, False, "running", order)
    running.start()
    wait_for(running.holding.is_set, 10, "the first case to hold the lock shared")
    serial = Holder(tmp_path, True, "serial", order)
    serial.start()
    wait_for(lambda: blocked_on(tmp_path / "cases") == 1, 10, "the serial case to wait for the running one")
    # A case that starts while the serial case waits queues behind it; flock alone would let it in beside the
    # running case, and a stream of such cases could keep the serial one waiting for ever.
    later = Holder(tmp_path, False, "later", order)
    later.start()
    wait_for(lambda: blocked_on(tmp_path / "turnstile") == 1, 10, "the later case to queue behind the serial one")
    running.release.set()
    wait_for(serial.holding.is_set, 10, "the serial case to run once the running case ended")
    assert order == ["running", "serial"], "a case ran beside the serial one"
    serial.release.set()
    wait_for(later.holding.is_set, 10, "the later case to run after the serial one")
    later.release.set()
    assert order == ["running", "serial", "later"]


# A pytest session with two workers, each starting a router: a minute on a busy 2-core machine, more when it is
# shared with other runs
@pytest.mark.timeout(600)
def test_suites_under_xdist_write_one_run_with_every_record_whole(tmp_path):
    """Two suite modules on two workers (--dist loadfile): one run folder, every case's record once and whole, and
    run.json naming both workers and the topology both started; each worker's peer logs apart."""
    pytest.importorskip("xdist")
    modules = ["suites/routing/test_addresses.py", "suites/routing/test_settlement.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p", "no:randomly",
                           "--results", str(tmp_path), *modules, "-k", "addresses or anycast_producer"],
                          cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (run,) = tmp_path.iterdir()
    records, errors = read_results(run)
    assert errors == []
    cases = [r["case"] for r in records]
    assert len(cases) == len(set(cases)) and {c.split("::")[0] for c in cases} == set(modules)
    assert {r["run_id"] for r in records} == {run.name}
    meta = json.loads((run / "run.json").read_text())
    assert (meta["run_id"], meta["workers"], meta["ended_at"] is not None) == (run.name, ["gw0", "gw1"], True)
    assert meta["topologies"] == {"single-router": ROUTER}
    assert sorted(p.name for p in (run / "peer-logs").iterdir()) == ["gw0", "gw1"]
    assert f"cases: {len(cases)} passed" in done.stdout
