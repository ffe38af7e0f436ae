"""The report's answer to "what changes if I upgrade" (reports/versions_table.py, reports/versions_page.py): a product
run in two releases side by side, its mixed-release cases and its rolling upgrades, through the real Spark job and
the page in headless Chromium.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from reports import page as html  # noqa: E402
from reports.job import run_job  # noqa: E402

from tests.test_report import needs_chromium, open_in_chromium, record, rows  # noqa: E402

pytestmark = pytest.mark.timeout(600)
VERSIONS_H2 = '<h2 id="versions">What changes between versions</h2>'
UPGRADES_H2 = '<h2 id="upgrades">Rolling upgrades</h2>'


def peers(broker: str, router: str = "0.1.0") -> dict:
    return {"broker": {"vendor": "artemis", "version": broker, "provider": "native"},
            "router": {"vendor": "reference", "version": router, "provider": "subprocess"}}


OLD, NEW = peers("2.39.0"), peers("2.40.0")
# the cells' targets as interop run writes them (harness/cell.py Cell.target): the previous release is named, the
# pinned default is not
OLD_CELL, NEW_CELL = "router=reference,broker=artemis 2.39.0", "router=reference,broker=artemis"
OLD_TARGET, NEW_TARGET = "broker=artemis 2.39.0 + router=reference", "broker=artemis + router=reference"
RHEA_OLD, RHEA_NEW = f"{OLD_CELL},client=rhea", f"{NEW_CELL},client=rhea"
RHEA_BASE = "broker=artemis + client=rhea + router=reference"  # the roles in order, the stack among them
MESH_CELL, MESH_TARGET = "router=qdrouterd,broker=reference", "broker=reference + router=qdrouterd"
NODES = {"B1": {"vendor": "artemis", "version": "2.39.0", "provider": "native"},
         "B2": {"vendor": "artemis", "version": "2.40.0", "provider": "native"}}
B_MESSAGE = "3 of 10 messages were never delivered on 2.40.0"


def case(run: int, name: str, outcome: str, who: dict, cell: str, spec=("BROKER-TX-1",), suite: str = "broker",
         **extra) -> dict:
    found = record(run, name, outcome, who, list(spec), suite=suite, target=cell, cell=cell.replace(" ", "@"),
                   **extra)
    return {**found, "case": f"suites/{suite}/test_x.py::{name}"}


def upgrade(run: int, name: str, outcome: str, cell: str = NEW_CELL, who: dict = NEW, **details) -> dict:
    return case(run, name, outcome, who, cell, spec=("UPGRADE-ROLLING-1",), suite="upgrade", details=details)


VERSION_RUNS = {
    # the previous release's cell
    1: [case(1, "a", "passed", OLD, OLD_CELL), case(1, "b", "passed", OLD, OLD_CELL),
        case(1, "c", "failed", OLD, OLD_CELL, message="c failed on 2.39.0"),
        case(1, "d", "skipped", OLD, OLD_CELL), case(1, "e", "passed", OLD, OLD_CELL),
        case(1, "x", "xfail", OLD, OLD_CELL, message="expected difference: artemis: X-1: an old quirk"),
        # a mixed pairing needs the previous release beside the session's: not applicable on the previous one
        case(1, "m", "not-applicable", OLD, OLD_CELL, spec=("MESH-ADDR-1", "UPGRADE-MIXED-1"), suite="mesh"),
        upgrade(1, "in_place[graceful]", "not-applicable", cell=OLD_CELL, who=OLD),
        # another client stack: a group of its own, where nothing differs
        case(1, "a", "passed", OLD, RHEA_OLD)],
    # the pinned default's cell (the newer release)
    2: [case(2, "a", "passed", NEW, NEW_CELL), case(2, "b", "failed", NEW, NEW_CELL, message=B_MESSAGE),
        case(2, "c", "passed", NEW, NEW_CELL), case(2, "d", "passed", NEW, NEW_CELL),
        case(2, "f", "passed", NEW, NEW_CELL), case(2, "x", "passed", NEW, NEW_CELL),
        # the first node runs the previous release: `peers` shows it, details.nodes shows both
        case(2, "m", "passed", OLD, NEW_CELL, spec=("MESH-ADDR-1", "UPGRADE-MIXED-1"), suite="mesh",
             details={"nodes": NODES}),
        case(2, "m2", "failed", OLD, NEW_CELL, spec=("MESH-PATH-1", "UPGRADE-MIXED-1"), suite="mesh",
             details={"nodes": NODES}, message="one copy short"),
        case(2, "a", "passed", NEW, RHEA_NEW)],
    # the newer release's rolling upgrades, a run of their own
    3: [upgrade(3, "in_place[graceful]", "passed", topology="upgrade-broker", step="upgrade", stop="graceful",
                from_version="2.39.0", to_version="2.40.0", lost=0, duplicated=0, resume_s=3.21),
        upgrade(3, "in_place[kill-9]", "failed", topology="upgrade-broker", step="upgrade", stop="kill-9",
                from_version="2.39.0", to_version="2.40.0", lost=2, duplicated={"upgrade.a": 1, "upgrade.b": 2},
                resume_s=5.5),
        upgrade(3, "downgrade", "failed", who=OLD, topology="upgrade-broker", step="downgrade", stop="graceful",
                from_version="2.40.0", to_version="2.39.0", downgrade="refused",
                refusal="AMQ224097: the journal was written by a newer release"),
        # a multi-node topology: a step per node, named `router` or `node`
        upgrade(3, "mesh[kill-9]", "passed", cell=MESH_CELL,
                who={"router": {"vendor": "qdrouterd", "version": "1.19.0"},
                     "broker": {"vendor": "reference", "version": "0.1.0"}},
                topology="upgrade-mesh-broker", step="upgrade", stop="kill-9", from_version="1.18.0",
                to_version="1.19.0", lost=0, duplicated=3, resume_s=2.5,
                steps=[{"router": "R1", "to_version": "1.19.0", "resume_s": 1.25, "lost": 0, "duplicated": 1},
                       {"node": "R2", "to_version": "1.19.0", "resume_s": 2.5, "lost": 0, "duplicated": 2}])],
}


def write(root: Path, runs: dict) -> Path:
    for run, records in runs.items():
        (root / f"run-{run}").mkdir(parents=True)
        (root / f"run-{run}" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


@pytest.fixture(scope="module")
def versioned(spark, tmp_path_factory):
    root = write(tmp_path_factory.mktemp("version-runs"), VERSION_RUNS)
    return run_job(spark, [str(root)], str(tmp_path_factory.mktemp("version-report")))


def short(case_id: str) -> str:
    return case_id.split("::")[1]


def test_each_release_against_the_next_one_up_with_its_counts(versioned):
    pairs = {(r["base"], r["old_release"], r["new_release"]): r for r in rows(versioned, "version_pairs")}
    assert set(pairs) == {(NEW_TARGET, "2.39.0", "2.40.0"), (RHEA_BASE, "2.39.0", "2.40.0")}
    main = pairs[(NEW_TARGET, "2.39.0", "2.40.0")]
    assert (main["product"], main["old_target"], main["new_target"], main["old_run"], main["new_run"]) == \
        ("artemis", OLD_TARGET, NEW_TARGET, "run-1", "run-2")
    # a, b, c and x judged on both (b and c and x differ), d skipped on 2.39.0, m and m2 not applicable there, e and
    # f on one side only; the upgrade suite's cases are not compared
    assert (main["compared"], main["same"], main["different"], main["not_compared"], main["only_old"],
            main["only_new"]) == (4, 1, 3, 2, 1, 2)
    rhea = pairs[(RHEA_BASE, "2.39.0", "2.40.0")]
    assert (rhea["compared"], rhea["same"], rhea["different"]) == (1, 1, 0)


def test_the_cases_whose_outcome_differs_between_releases(versioned):
    changes = {short(r["case"]): r for r in rows(versioned, "version_changes")}
    assert set(changes) == {"b", "c", "x"}
    b = changes["b"]
    assert (b["old_outcome"], b["new_outcome"], b["new_message"], b["old_message"], b["spec"], b["suite"],
            b["old_case_run"], b["new_case_run"]) == ("passed", "failed", B_MESSAGE, None, ["BROKER-TX-1"],
                                                      "broker", "run-1", "run-2")
    assert (changes["c"]["old_outcome"], changes["c"]["new_outcome"]) == ("failed", "passed")
    assert (changes["x"]["old_outcome"], changes["x"]["new_outcome"]) == ("xfail", "passed")


def test_a_case_that_differs_only_between_releases_is_not_flaky(versioned):
    """Passing on 2.39.0 and failing on 2.40.0 is what an upgrade changes, not flakiness: the flaky table is keyed
    by target and version, and the case is in the version section instead."""
    assert rows(versioned, "flaky") == []
    assert "b" in {short(r["case"]) for r in rows(versioned, "version_changes")}


def test_mixed_release_cases_with_their_nodes(versioned):
    got = {(r["target"], short(r["case"])): (r["outcome"], r["nodes"], r["run_id"])
           for r in rows(versioned, "mixed_releases")}
    pairing = "B1 artemis 2.39.0, B2 artemis 2.40.0"
    assert got == {(NEW_TARGET, "m"): ("passed", pairing, "run-2"), (NEW_TARGET, "m2"): ("failed", pairing, "run-2"),
                   (OLD_TARGET, "m"): ("not-applicable", None, "run-1")}


def test_rolling_upgrades_per_case_with_the_steps_of_a_mesh(versioned):
    got = {short(r["case"]): r for r in rows(versioned, "upgrades")}
    assert set(got) == {"in_place[graceful]", "in_place[kill-9]", "downgrade", "mesh[kill-9]"}  # latest runs
    kill = got["in_place[kill-9]"]
    assert (kill["target"], kill["topology"], kill["step"], kill["stop"], kill["from_version"], kill["to_version"],
            kill["outcome"], kill["lost"], kill["duplicated"], kill["resume_s"], kill["run_id"]) == \
        (NEW_TARGET, "upgrade-broker", "upgrade", "kill-9", "2.39.0", "2.40.0", "failed", 2, 3, 5.5, "run-3")
    down = got["downgrade"]
    assert (down["step"], down["downgrade"], down["refusal"]) == \
        ("downgrade", "refused", "AMQ224097: the journal was written by a newer release")
    mesh = got["mesh[kill-9]"]
    assert mesh["target"] == MESH_TARGET and mesh["steps"] == [
        {"node": "R1", "to_version": "1.19.0", "lost": 0, "duplicated": 1, "resume_s": 1.25},
        {"node": "R2", "to_version": "1.19.0", "lost": 0, "duplicated": 2, "resume_s": 2.5}]
    assert got["in_place[graceful]"]["steps"] is None


def test_no_second_release_and_no_upgrade_leave_the_tables_empty(spark, tmp_path):
    """One release of each product: no pair, no change, no upgrade; the page says what would fill each section."""
    root = write(tmp_path / "runs", {2: VERSION_RUNS[2][:3]})
    result = run_job(spark, [str(root)], str(tmp_path / "out"))
    assert [rows(result, name) for name in ("version_pairs", "version_changes", "upgrades")] == [[], [], []]
    text = html.render(result.data, title="t", inputs=["runs"], catalog={}, timings={}, allure=None)
    versions = text[text.index(VERSIONS_H2):text.index(UPGRADES_H2)]
    assert "no product ran in two releases" in versions and "broker=artemis@2.39.0" in versions
    upgrades = text[text.index(UPGRADES_H2):text.index("<h2>Fuzzing sessions</h2>")]
    assert "no rolling-upgrade record" in upgrades and "<table" not in upgrades


@needs_chromium
def test_page_in_headless_chromium_shows_the_version_and_upgrade_sections(versioned, tmp_path):
    written = html.write(tmp_path / "index.html", versioned.data, title="versions", inputs=["runs"], catalog={},
                         timings=versioned.timings, allure=None)
    dom, console = open_in_chromium(written)
    assert console == [], console
    assert 'data-ready="yes"' in dom
    versions = dom[dom.index(VERSIONS_H2):dom.index(UPGRADES_H2)]
    assert "artemis 2.39.0 vs 2.40.0" in versions
    assert ("4 cases compared: 1 same outcome, 3 different outcome; 2 not compared (skipped or not applicable on a "
            "side); 1 only on 2.39.0, 2 only on 2.40.0") in versions, versions
    assert "1 case compared, same outcome on both" in versions  # the rhea cell's pair
    changed = versions[versions.index('<table class="sortable version-changes"'):]
    changed = changed[:changed.index("</table>")]
    assert changed.count("<tr>") == 1 + 3  # header + b, c, x
    b = next(tr for tr in changed.split("<tr>") if ">test_x.py::b</code>" in tr)
    assert B_MESSAGE in b and "BROKER-TX-1" in b and ">passed<" in b and ">failed<" in b, b
    mixed = versions[versions.index("<h3>Mixed releases"):]
    assert "B1 artemis 2.39.0, B2 artemis 2.40.0" in mixed and f"<td>{NEW_TARGET}</td><td>2</td><td>1</td>" in mixed
    upgrades = dom[dom.index(UPGRADES_H2):dom.index("<h2>Fuzzing sessions</h2>")]
    kill = next(tr for tr in upgrades.split("<tr") if "in_place[kill-9]" in tr)
    assert '<td>kill-9</td><td class="moved">2.39.0 → 2.40.0</td>' in kill, kill
    assert "<td>2</td><td>3</td><td>5.500</td>" in kill, kill  # lost, duplicated (summed per queue), downtime
    assert "refused: AMQ224097" in upgrades
    steps = [tr for tr in upgrades.split("<tr") if 'class="step"' in tr]
    assert len(steps) == 2 and "R1" in steps[0] and "R2" in steps[1] and "<td>1.250</td>" in steps[0], steps
