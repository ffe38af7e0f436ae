"""The report's vendor comparison after a nightly (issue 57): the fuzzing section per product (role, vendor, version:
cases run, findings, worst sentinel gap, RSS, CPU after close) and the benchmarks against the reference with each
product's version, through the real Spark job over runs shaped as `interop fuzz` and bench/*.py --results write
them; and the page in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from reports import page as html  # noqa: E402
from reports.job import run_job  # noqa: E402

from tests.test_report import needs_chromium, open_in_chromium  # noqa: E402

pytestmark = pytest.mark.timeout(600)

REF_ROUTER = {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}
REF_BROKER = {"vendor": "reference", "version": "0.1.0", "provider": "subprocess"}
QDR = {"vendor": "qdrouterd", "version": "1.19.0", "provider": "native"}
ARTEMIS = {"vendor": "artemis", "version": "2.40.0", "provider": "native"}
HANG = "cpu-after-close:disposition.unknown-id"


def fuzz_run(root: Path, run_id: str, mode: str, role: str, peers: dict, executed: int, figures: dict,
             findings: tuple[str, ...] = (), recorded: tuple[str, ...] = ()) -> None:
    """One `interop fuzz` run: its session record, one record per finding (`recorded`: those the product's expected
    file records, harness/fuzz/recorded.py), and run.json naming the fuzzed role."""
    started = f"{run_id[:10]}T{run_id[11:13]}:{run_id[14:16]}:00.000Z"
    common = {"schema": 1, "run_id": run_id, "suite": "fuzz", "spec": [], "topology": "fuzz-router", "peers": peers,
              "fault": None, "started_at": started}
    new = [sig for sig in findings if sig not in recorded]
    records = [{**common, "case": f"FUZZ-{mode.upper()}",
                "outcome": "failed" if new else "xfail" if findings else "passed",
                "duration_s": 20.0, "details": {"mode": mode, "seed": 5, "budget_s": 20.0, "executed": executed,
                                                "failures": len(findings), "signatures": list(findings),
                                                "recorded": list(recorded), "figures": figures},
                "message": None}]
    records += [{**common, "case": f"FUZZ-{mode.upper()}/{sig}", "outcome": "xfail" if sig in recorded else "failed",
                 "duration_s": 0.0,
                 "details": {"mode": mode, "seed": 5, "kind": sig.split(":")[0], "signature": sig,
                             "reproducer": None, "evidence": {}}, "message": f"{sig} found"} for sig in findings]
    folder = root / run_id
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "started_at": started,
                                                 "fuzz": {"mode": mode, "role": role, "seed": 5}}))


def bench_run(root: Path, run_id: str, bench: str, role: str, rows: list[tuple[str, str, dict | None, float]]) -> None:
    """One benchmark run as bench/*.py --results writes it: (scenario, vendor, peer, msgs/s) per row."""
    records = [{"schema": 1, "run_id": run_id, "case": f"BENCH-{bench}/{scenario}/{vendor}/python", "suite": "bench",
                "spec": [], "topology": None, "peers": {role: peer} if peer else {}, "fault": None,
                "outcome": "passed", "duration_s": 1.0, "started_at": f"{run_id[:10]}T05:00:00.000Z",
                "details": {"bench": bench, "scenario": scenario, "clients": "python", "msgs_per_s": rate,
                            "p50_ms": 2.0, "p99_ms": 9.0, "cpu_s_per_1000": 0.05},
                "message": None} for scenario, vendor, peer, rate in rows]
    (root / run_id).mkdir(parents=True)
    (root / run_id / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def frames(gap: float, start_rss: float, rss: float, cpu: float) -> dict:
    return {"max_sentinel_gap_ms": gap, "start_rss_mb": start_rss, "max_rss_mb": rss,
            "max_cpu_after_close_cores": cpu, "cases_per_s": 50.0}


def write_nightly_runs(root: Path) -> Path:
    """Two nights' worth: the frames and stateful sessions of three products (Artemis found something on the
    second night, and its RSS grew), and the routing and broker benchmarks with each product's version."""
    fuzz_run(root, "2026-12-06T01-30-00Z-aa01", "frames", "router", {"router": REF_ROUTER}, 1000,
             frames(120, 30.1, 31.7, 0.0))
    fuzz_run(root, "2026-12-06T01-31-00Z-aa02", "frames", "broker", {"broker": ARTEMIS}, 400,
             frames(300, 140.0, 220.0, 0.1))
    fuzz_run(root, "2026-12-07T01-30-00Z-bb01", "frames", "router", {"router": REF_ROUTER}, 1100,
             frames(240, 29.8, 32.5, 0.01))
    fuzz_run(root, "2026-12-07T01-31-00Z-bb02", "frames", "router", {"router": QDR}, 900, frames(80, 12.0, 14.0, 0.0))
    fuzz_run(root, "2026-12-07T01-32-00Z-bb03", "frames", "broker", {"broker": ARTEMIS}, 500,
             frames(1450, 150.0, 330.5, 0.93), findings=(HANG, "hang:disposition.huge-range"), recorded=(HANG,))
    # a stateful session over router and broker, fuzzing the broker: the broker's entry is its product
    fuzz_run(root, "2026-12-07T01-33-00Z-bb04", "stateful", "broker", {"router": REF_ROUTER, "broker": ARTEMIS}, 12,
             {"programs_per_min": 30.0})
    bench_run(root, "2026-12-07T02-00-00Z-cc01", "routing", "router",
              [("anycast-unsettled", "reference", REF_ROUTER, 4000.0), ("anycast-unsettled", "qdrouterd", QDR, 10000.0),
               ("anycast-unsettled", "direct", None, 16000.0)])
    bench_run(root, "2026-12-07T02-05-00Z-cc02", "broker", "broker",
              [("1kb", "reference", REF_BROKER, 4000.0), ("1kb", "artemis", ARTEMIS, 3000.0),
               ("1kb", "reference+mirror", REF_BROKER, 2000.0), ("1kb", "artemis+mirror", ARTEMIS, 2500.0)])
    return root


@pytest.fixture(scope="module")
def nightly(spark, tmp_path_factory):
    root = write_nightly_runs(tmp_path_factory.mktemp("nightly-runs"))
    out = tmp_path_factory.mktemp("nightly-report")
    return run_job(spark, [str(root)], str(out)), out


def test_fuzzing_per_product_compares_cases_findings_gap_rss_and_cpu(nightly):
    result, _ = nightly
    got = {(r["role"], r["vendor"], r["version"]): r for r in result.data["fuzz_products"]}
    assert set(got) == {("router", "reference", "0.1.0"), ("router", "qdrouterd", "1.19.0"),
                        ("broker", "artemis", "2.40.0")}
    ref, artemis = got[("router", "reference", "0.1.0")], got[("broker", "artemis", "2.40.0")]
    assert (ref["sessions"], ref["frames_cases"], ref["programs"], ref["distinct_signatures"]) == (2, 2100, 0, 0)
    assert (ref["max_gap_ms"], ref["start_rss_mb"], ref["max_rss_mb"]) == (240, 29.8, 32.5)
    assert (artemis["sessions"], artemis["frames_sessions"], artemis["stateful_sessions"]) == (3, 2, 1)
    assert (artemis["frames_cases"], artemis["programs"], artemis["failed_sessions"]) == (900, 12, 1)
    assert artemis["signatures"] == [HANG, "hang:disposition.huge-range"] and artemis["recorded"] == [HANG]
    assert ref["recorded"] == []
    assert (artemis["max_gap_ms"], artemis["max_rss_mb"], artemis["cpu_after_close_cores"]) == (1450, 330.5, 0.93)
    assert artemis["last_run"] == "2026-12-07T01-33-00Z-bb04"


def test_benchmarks_give_each_product_its_version_and_its_ratio_to_the_reference(nightly):
    result, _ = nightly
    got = {(r["bench"], r["vendor"]): r for r in result.data["benchmarks"]}
    assert (got[("routing", "qdrouterd")]["version"], got[("routing", "qdrouterd")]["vs_reference"]) == ("1.19.0", 2.5)
    assert got[("routing", "qdrouterd")]["reference_version"] == "0.1.0"
    assert (got[("routing", "direct")]["version"], got[("routing", "direct")]["vs_reference"]) == (None, 4.0)
    assert (got[("broker", "artemis")]["version"], got[("broker", "artemis")]["vs_reference"]) == ("2.40.0", 0.75)
    assert got[("broker", "reference")]["vs_reference"] == 1.0
    # a variant against the reference's same variant
    mirrored = got[("broker", "artemis+mirror")]
    assert (mirrored["reference_vendor"], mirrored["reference_msgs_per_s"], mirrored["vs_reference"]) == \
        ("reference+mirror", 2000.0, 1.25)


@needs_chromium
def test_page_in_headless_chromium_compares_products_in_fuzzing_and_benchmarks(nightly):
    result, out = nightly
    written = html.write(out / "index.html", result.data, title="nightly", inputs=["runs"], catalog={},
                         timings=result.timings, allure=None)
    dom, console = open_in_chromium(written)
    assert console == [], console
    fuzzing = dom[dom.index("<h2>Fuzzing sessions</h2>"):dom.index("<h2>Type interop")]
    products = fuzzing[fuzzing.index('class="sortable fuzz-products"'):]
    products = products[:products.index("</table>")]
    assert products.count("<tr>") == 1 + 3
    artemis = next(tr for tr in products.split("<tr>") if "<td>artemis</td>" in tr)
    assert "<td>broker</td><td>artemis</td><td>2.40.0</td><td>900</td><td>12</td><td>0</td><td>3</td><td>1</td>" \
        in artemis, artemis
    assert f"<code>{HANG}</code> (recorded)" in artemis and "(1 recorded)" in artemis
    assert artemis.index("hang:disposition.huge-range") < artemis.index(HANG)  # the new finding first
    assert "<td>1,450</td><td>140 → 330</td><td>0.93</td>" in artemis  # least start, most seen
    bench = dom[dom.index("<h2>Benchmarks</h2>"):dom.index("<h2>Mutation score</h2>")]
    compared = bench[:bench.index("<h3>")]
    assert compared.count("<tr>") == 1 + 4   # qdrouterd, direct, artemis and artemis+mirror; not the reference
    assert "<td>reference+mirror 0.1.0</td><td>2,000</td>" in compared
    qdr = next(tr for tr in compared.split("<tr>") if "qdrouterd 1.19.0" in tr)
    assert "<td>10,000</td><td>reference 0.1.0</td><td>4,000</td>" in qdr and "2.50x</b>" in qdr
    artemis = next(tr for tr in compared.split("<tr>") if "artemis 2.40.0" in tr)
    assert "0.75x</b>" in artemis
    mutation = dom[dom.index("<h2>Mutation score</h2>"):dom.index("<h2>Rejected result lines</h2>")]
    assert "never run here" in mutation


def test_mutation_section_says_when_it_last_ran():
    rows = [{"group": "router", "runs": 2, "score": 0.95, "target_score": 0.95, "run_id": "2026-12-01T03-00-00Z-ab12",
             "scores": [0.9, 0.95]},
            {"group": "broker", "runs": 1, "score": 0.9, "target_score": 0.95, "run_id": "2026-11-24T03-00-00Z-cd34",
             "scores": [0.9]}]
    section = html.mutation(rows)
    assert "last run: 2026-12-01 03:00 UTC" in section and "2026-12-01T03-00-00Z-ab12" in section
    assert "never run here" in html.mutation([])
