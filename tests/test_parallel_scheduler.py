"""harness/parallel.py's file-unit scheduler when a worker dies: only units with tests left go back to the queue.

xdist's own scheduler objects, driven as DSession drives them, with stand-in worker nodes that record what they
are sent (a unit test of the scheduling logic; the parallel run itself is the reference step of `make test`).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("xdist")

from harness.parallel import file_units  # noqa: E402


class Node:
    """A worker as the scheduler sees it: what it was sent, and whether it was told to stop."""

    def __init__(self, name: str):
        self.name, self.batches, self.shutting_down = name, [], False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indexes):
        self.batches.append(list(indexes))

    def shutdown(self):
        self.shutting_down = True

    def __repr__(self):
        return self.name


COLLECTION = [f"tests/test_{name}.py::case{i}" for name in "abcdefgh" for i in range(3)]


def scheduler_with(nodes):
    config = SimpleNamespace(getvalue=lambda name: ["2*popen"] if name == "tx" else None,
                             option=SimpleNamespace(loadscopereorder=False), hook=None)
    sched = file_units()(config)
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    return sched


def pending(sched, node) -> list[str]:
    return [nodeid for unit in sched.assigned_work[node].values() for nodeid, done in unit.items() if not done]


def complete(sched, node, nodeid):
    sched.mark_test_complete(node, COLLECTION.index(nodeid))


def test_a_dead_workers_finished_units_are_not_handed_out_again():
    one, two = Node("gw0"), Node("gw1")
    sched = scheduler_with([one, two])
    # gw1 runs its tests until it has finished one whole unit and started the next, then dies
    finished = set()
    while True:
        nodeid = pending(sched, two)[0]
        complete(sched, two, nodeid)
        units = sched.assigned_work[two]
        finished = {scope for scope, unit in units.items() if all(unit.values())}
        if finished and any(any(unit.values()) and not all(unit.values()) for unit in units.values()):
            break
    assert sched.remove_node(two) is not None  # it died with tests left: xdist names the one it was running
    assert not finished & set(sched.workqueue), f"a finished unit was queued again: {finished}"
    assert all(not all(unit.values()) for unit in sched.workqueue.values())
    # gw0 runs everything left, and is never sent an empty batch (after which nothing would report back)
    while pending(sched, one):
        complete(sched, one, pending(sched, one)[0])
    assert all(one.batches), f"an empty batch was sent: {one.batches}"
    assert one.shutting_down and not sched.workqueue
