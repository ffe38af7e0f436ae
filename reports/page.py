"""The vendor comparison report: one self-contained HTML file (inline CSS, inline SVG charts, a little inline
script for sorting and filtering; no external URL of any kind, enforced by the page's Content-Security-Policy).

Input is the plain data the Spark job collected (lists of dicts); this module needs no Spark.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path

from reports.html import (
    COLORS,
    OUTCOMES,
    STATUS_TEXT,
    LINKED_STATUSES,
    e,
    _key,
    _pct,
    stacked_bars,
    line_chart,
    duration_bars,
    table,
    badge,
)


def finding_anchor(target: str, clause: str) -> str:
    """The id of a conformance cell's evidence in the findings section (targets and clauses hold any character)."""
    return "finding-" + hashlib.sha1(f"{target}\n{clause}".encode()).hexdigest()[:12]


def conformance_matrix(rows: list[dict], targets: list[str], catalog: dict[str, dict],
                       with_evidence: set[tuple[str, str]] = frozenset()) -> str:
    """Clause x target, each cell its status; a red, orange or brown cell whose cases are in the findings
    (`with_evidence`: (target, clause) pairs) is a link to them."""
    if not rows:
        return '<p class="empty">no clause was checked in these runs</p>'
    cells: dict[tuple[str, str], dict] = {(r["clause"], r["target"]): r for r in rows}
    clauses = list(dict.fromkeys([c for c in catalog if any((c, t) in cells for t in targets)] +
                                 sorted({r["clause"] for r in rows})))
    head = "".join(f'<th class="target">{e(t)}</th>' for t in targets)
    body = []
    for clause in clauses:
        info = catalog.get(clause, {})
        tip = f"{info.get('source', '')}: {info.get('text', '')}" if info else "not in the spec catalog"
        tds = []
        statuses = []
        for target in targets:
            r = cells.get((clause, target))
            status = r["status"] if r else "not run"
            statuses.append(status)
            counted = ""
            if r and r.get("cases"):
                counted = f" {r.get('passed', 0)}/{r['cases']}"
            title = f"{clause} on {target}: {status}" + (
                f" ({r.get('passed', 0)} passed, {r.get('failed', 0) + r.get('error', 0)} failed, "
                f"{r.get('xfail', 0)} known differences, {r.get('not_applicable', 0)} not applicable, "
                f"{r.get('skipped', 0)} skipped; run {r.get('run_id')})" if r and r.get("cases") else "")
            text = f"{e(STATUS_TEXT.get(status, status))}<small>{e(counted)}</small>"
            if status in LINKED_STATUSES and (target, clause) in with_evidence:
                text = f'<a href="#{finding_anchor(target, clause)}">{text}</a>'
            tds.append(f'<td class="cell st-{status.replace(" ", "-")}" data-status="{e(status)}" title="{e(title)}">'
                       f"{text}</td>")
        body.append(f'<tr data-statuses="{e(" ".join(s.replace(" ", "-") for s in statuses))}">'
                    f'<th class="clause" title="{e(tip)}">{e(clause)}</th>{"".join(tds)}</tr>')
    legend = "".join(f'<span class="legend st-{s.replace(" ", "-")}">{e(STATUS_TEXT[s])}: {e(d)}</span>' for s, d in (
        ("passed", "every case of the clause passed"), ("failed", "a case failed or errored"),
        ("xfail", "a recorded difference of the vendor"), ("not-applicable", "the vendor lacks a capability"),
        ("client-difference", "its cases differ only through a client stack"),
        ("not run", "no case ran (skipped, or no case)")))
    return (f'<div class="legend-row">{legend}</div>'
            '<p class="controls"><label>filter clauses <input id="clause-filter" type="search" '
            'placeholder="e.g. MULTICAST"></label> <label><input id="only-failing" type="checkbox"> only rows with a '
            'failure</label></p>'
            f'<table id="conformance" class="matrix"><thead><tr><th>clause</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


SCRIPT = """
(function () {
  function sortTable(th) {
    var table = th.closest('table'), body = table.tBodies[0];
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = th.getAttribute('data-dir') !== 'asc';
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute('data-dir'); });
    th.setAttribute('data-dir', asc ? 'asc' : 'desc');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[idx].textContent.trim(), y = b.cells[idx].textContent.trim();
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll('table.sortable th').forEach(function (th) {
    th.addEventListener('click', function () { sortTable(th); });
  });
  var filter = document.getElementById('clause-filter'), failing = document.getElementById('only-failing');
  function applyFilter() {
    var text = (filter.value || '').toUpperCase(), onlyFailing = failing.checked, shown = 0;
    document.querySelectorAll('#conformance tbody tr').forEach(function (tr) {
      var ok = tr.textContent.toUpperCase().indexOf(text) >= 0 &&
               (!onlyFailing || tr.getAttribute('data-statuses').split(' ').indexOf('failed') >= 0);
      tr.style.display = ok ? '' : 'none';
      if (ok) { shown++; }
    });
    document.body.setAttribute('data-clauses-shown', String(shown));
  }
  if (filter && failing) {
    filter.addEventListener('input', applyFilter);
    failing.addEventListener('change', applyFilter);
    applyFilter();
  }
  document.body.setAttribute('data-ready', 'yes');
})();
"""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1280px;
padding:18px 28px;color:#222}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.sub{color:#666;margin:0 0 14px}.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}.card b{display:block;font-size:20px}
.card.warn{border-color:#c62828;background:#fff5f5}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
thead th{background:#f4f4f4;position:sticky;top:0}table.sortable th{cursor:pointer}
table.matrix td.cell{text-align:center;font-weight:600;color:#fff;min-width:90px}
table.matrix td.cell small{font-weight:400;margin-left:4px}
table.matrix th.clause{font-family:ui-monospace,monospace;font-weight:500;white-space:nowrap}
.st-passed{background:#2e7d32;color:#fff}.st-failed{background:#c62828;color:#fff}.st-xfail{background:#ef6c00;color:#fff}
.st-not-applicable{background:#607d8b;color:#fff}.st-not-run{background:#e0e0e0;color:#444!important}
.st-client-difference{background:#8d6e63;color:#fff}table.matrix td.cell a{color:inherit}
table.findings .evidence{min-width:420px;max-width:640px;white-space:pre-wrap}
table.findings td.case{max-width:280px;word-break:break-all}table.findings td.clause{white-space:nowrap}
table.findings ul.values{margin:4px 0;padding-left:18px}
tr:target{outline:2px solid #1565c0}
.legend{display:inline-block;padding:2px 8px;margin:0 6px 4px 0;border-radius:4px;font-size:12px}
.badge{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px}
.chart{max-width:100%;height:auto;display:block;margin:8px 0}.chart .lbl{font-size:12px;fill:#333}
.chart .grid{stroke:#e4e4e4}.empty{color:#777;font-style:italic}
code,.mono{font-family:ui-monospace,monospace;font-size:12px}
.note{background:#fff8e1;border-left:4px solid #ef6c00;padding:6px 10px;margin:8px 0}
details{margin:6px 0}summary{cursor:pointer;color:#1565c0}
h3 small{font-weight:400;color:#666}.version-summary{font-weight:600}
table.version-changes .evidence{display:inline-block;max-width:360px;white-space:pre-wrap}
table.upgrades{font-size:12px}table.upgrades .evidence{display:inline-block;max-width:240px;white-space:pre-wrap}
table.upgrades td.case{max-width:300px;word-break:break-all}
table.upgrades td.moved{white-space:nowrap}
table.upgrades tr.step td{color:#555;background:#fafafa;border-top-style:dashed}
"""


def write(path: Path, data: dict, *, title: str, inputs: list[str], catalog: dict[str, dict],
          timings: dict[str, float], allure: dict | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, title=title, inputs=inputs, catalog=catalog, timings=timings, allure=allure),
                    encoding="utf-8")
    return path


def render(data: dict, *, title: str, inputs: list[str], catalog: dict[str, dict], timings: dict[str, float],
           allure: dict | None) -> str:
    runs = data["runs"]
    totals = data["totals"][0]
    {r["run_id"]: r["run_index"] for r in runs}
    targets = sorted({r["target"] for r in data["trend"]})
    latest_by_target = {}
    for row in data["trend"]:
        if row["target_run_no"] >= latest_by_target.get(row["target"], {}).get("target_run_no", 0):
            latest_by_target[row["target"]] = row

    out = [f"<h1>{e(title)}</h1>",
           f'<p class="sub">Generated {e(datetime.now(UTC).isoformat(timespec="seconds"))} from '
           f'{e(" ".join(inputs))}: {totals["runs"]} run(s), {totals["records"]} result records in '
           f'{totals["files"]} file(s).</p>']
    latest = runs[-1] if runs else None
    cards = [("runs", totals["runs"], False), ("result records", totals["records"], False),
             ("targets", len(targets), False), ("rejected lines", totals["rejects"], totals["rejects"] > 0),
             ("flaky cases", len(data["flaky"]), bool(data["flaky"])),
             ("regressions, latest runs", sum(1 for r in data["regressions"] if r["kind"] == "regression"
                                               and r["is_latest"]), False)]
    out.append('<div class="cards">' + "".join(
        f'<div class="card{" warn" if warn else ""}"><b>{e(v)}</b>{e(k)}</div>' for k, v, warn in cards) + "</div>")
    faults = _faults(latest) if latest else []
    if faults:
        out.append(f'<p class="note">The latest run ({e(latest["run_id"])}) deliberately broke a peer\'s '
                   f'configuration: <code>{e(", ".join(faults))}</code>. Its failures show what the suites catch; '
                   "they say nothing about the product.</p>")

    # targets overview
    out.append("<h2>Targets</h2>")
    overview = []
    for target in targets:
        row = latest_by_target[target]
        overview.append([e(target), f"<code>{e(row['run_id'])}</code>", str(row["target_run_no"]),
                         _pct(row.get("pass_rate")), *[str(row.get(_key(o), 0)) for o in OUTCOMES]])
    out.append(table(["target", "latest run", "runs", "pass rate (latest)", *OUTCOMES], overview,
                     empty="no records"))

    out.append("<h2>Conformance matrix</h2>")
    out.append('<p class="sub">Spec clause x target, from the latest run of each target. Hover a cell for its '
               "counts and a clause for its text; click a red, orange or brown cell for its cases, with the "
               "failure or the recorded reason and evidence.</p>")
    found = data.get("findings", [])
    out.append(conformance_matrix(data["conformance"], targets, catalog,
                                  {(r["target"], r["clause"]) for r in found}))
    out.append(findings(found))
    out.append(client_stacks(found))

    out.append("<h2>Pass rate per target and suite</h2>")
    out.append('<p class="sub">Over all runs read. Pass rate = passed / (passed + failed + error + known '
               "differences of the vendor); skipped, not-applicable and client-xfail cases (a difference recorded "
               "for a client stack, not for the peers) are not counted either way.</p>")
    out.append(stacked_bars(data["pass_rate"], lambda r: f"{r['target']} · {r['suite']}",
                            "pass rate per target and suite"))
    out.append(table(["target", "suite", "cases", *OUTCOMES, "pass rate"],
                     [[e(r["target"]), e(r["suite"]), str(r["cases"]), *[str(r.get(_key(o), 0)) for o in OUTCOMES],
                       _pct(r.get("pass_rate"))] for r in data["pass_rate"]]))

    out.append("<h2>Trend per run</h2>")
    series: dict[str, list] = {}
    for row in data["trend"]:
        series.setdefault(row["target"], []).append((row["run_index"], row.get("pass_rate"), row["run_id"],
                                                     bool(row.get("config_fault"))))
    out.append(line_chart(series, len(runs), "pass rate per run and target"))
    out.append("<details><summary>trend table</summary>" + table(
        ["run", "run id", "started", "target", "cases", *OUTCOMES, "pass rate", "deliberate break"],
        [[str(r["run_index"]), f"<code>{e(r['run_id'])}</code>", e(r.get("run_start")), e(r["target"]),
          str(r["cases"]), *[str(r.get(_key(o), 0)) for o in OUTCOMES], _pct(r.get("pass_rate")),
          e(r.get("config_fault") or "")] for r in data["trend"]]) + "</details>")

    out.append("<h2>Regressions against the previous run</h2>")
    out.append('<p class="sub">A case that passed in a target\'s previous run and failed in the next (or the '
               "reverse: fixed). Newest first.</p>")
    out.append(table(["kind", "target", "run", "previous run", "case", "was", "now", "message", "deliberate break"],
                     [[badge("failed") .replace(">failed<", ">regression<") if r["kind"] == "regression"
                       else badge("passed").replace(">passed<", ">fixed<"),
                       e(r["target"]), f"<code>{e(r['run_id'])}</code>{' (latest)' if r['is_latest'] else ''}",
                       f"<code>{e(r['prev_run_id'])}</code>", f"<code>{e(r['case'])}</code>",
                       badge(r["prev_outcome"]), badge(r["outcome"]), e((r.get("message") or "")[:240]),
                       e(r.get("config_fault") or "")] for r in data["regressions"]],
                     empty="no case changed between consecutive runs of a target"))

    out.append("<h2>Flaky cases</h2>")
    out.append('<p class="sub">The same case on the same target and version both passed and failed across runs.'
               "</p>")
    out.append(table(["target", "version", "case", "runs", "passed", "failed", "flips", "last", "deliberate break"],
                     [[e(r["target"]), e(r["version"]), f"<code>{e(r['case'])}</code>", str(r["runs"]),
                       str(r["passes"]), str(r["fails"]), str(r["flips"]), badge(r["last_outcome"]),
                       e(", ".join(_faults(r)))] for r in data["flaky"]],
                     empty="no flaky case"))

    out.append("<h2>Durations</h2>")
    out.append(duration_bars(data["durations"], "case duration p50 and p95 per target and suite"))
    out.append(table(["target", "suite", "cases", "p50 s", "p95 s", "mean s", "max s"],
                     [[e(r["target"]), e(r["suite"]), str(r["cases"]), f"{r['p50_s']:.3f}", f"{r['p95_s']:.3f}",
                       f"{r['mean_s']:.3f}", f"{r['max_s']:.3f}"] for r in data["durations"]]))

    out.append("<h2>Faults and checks</h2>")
    out.append(table(["target", "fault", "cases", *OUTCOMES],
                     [[e(r["target"]), e(r["fault_label"]), str(r["cases"]),
                       *[str(r.get(_key(o), 0)) for o in OUTCOMES]] for r in data["fault_checks"]],
                     empty="no case ran under an injected or deliberate fault"))
    checker_fields = ("attempted", "delivered", "lost", "duplicated", "reordered", "unexpected", "recovered")
    out.append(table(["target", "checker", "cases", "violations", *checker_fields],
                     [[e(r["target"]), e(r["checker"]), str(r["cases"]), str(r["violations"]),
                       *["" if r.get(f) is None else str(r[f]) for f in checker_fields]] for r in data["checkers"]],
                     empty="no record carries checker counts (details.checks)"))

    out.append(network(data.get("network", [])))
    out.append(recovery(data["recovery"]))
    # what changes if I upgrade: two releases of a product side by side, mixed releases, rolling upgrades
    from reports import versions_page

    out.append(versions_page.versions(data.get("version_pairs", []), data.get("version_changes", []),
                                      data.get("mixed_releases", [])))
    out.append(versions_page.upgrades(data.get("upgrades", [])))

    out.append(fuzzing(data["fuzz_sessions"], data["fuzz_findings"], data.get("fuzz_products", [])))
    out.append(type_interop(data.get("type_interop", [])))
    out.append(benchmarks(data.get("benchmarks", [])))
    out.append(mutation(data.get("mutation", [])))

    out.append("<h2>Rejected result lines</h2>")
    if totals["rejects"]:
        out.append(f'<p class="note">{totals["rejects"]} line(s) were not schema-1 result records and were set '
                   "aside (a run killed mid-write leaves a torn last line).</p>")
    out.append(table(["reason", "lines"], [[e(r["reason"]), str(r["count"])] for r in data["reject_reasons"]],
                     empty="none: every line was a valid record"))
    if data["rejects"]:
        out.append("<details><summary>first rejected lines</summary>" + table(
            ["file", "reason", "line"], [[f"<code>{e(r['source_file'])}</code>", e(r["reason"]),
                                         f"<code>{e(r['line'])}</code>"] for r in data["rejects"]]) + "</details>")

    out.append("<h2>Runs</h2>")
    out.append(table(["#", "run id", "started", "targets", "cells", "cases", *OUTCOMES, "pass rate", "notes"],
                     [[str(r["run_index"]), f"<code>{e(r['run_id'])}</code>", e(r.get("run_start")),
                       e(", ".join(r.get("targets") or [])), e(", ".join(c for c in (r.get("cells") or []) if c)),
                       str(r["cases"]), *[str(r.get(_key(o), 0)) for o in OUTCOMES], _pct(r.get("pass_rate")),
                       e("; ".join(filter(None, ["interrupted" if r.get("interrupted") else "",
                                                 f"{r['fuzz_records']} fuzz record(s)" if r.get("fuzz_records")
                                                 else "",
                                                 f"{r['bench_records']} benchmark record(s)"
                                                 if r.get("bench_records") else "",
                                                 "break: " + ", ".join(_faults(r)) if _faults(r) else ""])))]
                      for r in runs]))

    out.append("<h2>Allure</h2>")
    if allure and allure.get("href"):
        out.append(f'<p>Allure report of run <code>{e(allure.get("run_id"))}</code>: '
                   f'<a href="{e(allure["href"])}">{e(allure["href"])}</a> (open it through a web server, e.g. '
                   "<code>allure open</code>: browsers refuse its data files from file://).</p>")
    else:
        out.append(f'<p class="empty">{e((allure or {}).get("text", "not requested"))}</p>')
    out.append('<p class="sub">Spark stages: ' + e(", ".join(f"{k} {v:.2f}s" for k, v in timings.items())) + "</p>")
    out.append(f'<script type="application/json" id="report-data">{_json_for_script(_summary(data, targets))}'
               "</script>")

    csp = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(out) + f"<script>{SCRIPT}</script></body></html>\n")


def _whose(row: dict) -> str:
    who = row.get("difference_of")
    if row["outcome"] in ("failed", "error"):
        return "—"
    return f"client stack {who[len('client-'):]}" if who and who.startswith("client-") else (who or "?")


def _evidence(row: dict) -> str:
    """The failure, or the recorded difference's clause, reason and evidence; and for a type interop case each
    value that differed: what was sent and what arrived, with their AMQP types."""
    message = row.get("message") or ""
    who = row.get("difference_of")
    prefix = f"expected difference: {who}: " if who else ""
    if prefix and message.startswith(prefix):
        message = message[len(prefix):]
    out = f'<div class="evidence">{e(message)}</div>'
    try:
        values = json.loads(row["failures"]) if row.get("failures") else []
    except ValueError:
        values = []
    if values:
        items = "".join(_value_item(v) for v in values if isinstance(v, dict))
        out += f'<ul class="values">{items}</ul>'
    return out


def _value_item(v: dict) -> str:
    received_type = f" ({e(v['received_type'])})" if v.get("received_type") else ""
    return (f"<li><code>{e(v.get('value'))}</code>: sent <code>{e(v.get('sent'))}</code> "
            f"({e(v.get('sent_type') or '?')}), received <code>{e(v.get('received'))}</code>{received_type}</li>")


def findings(rows: list[dict]) -> str:
    """The "Failures and recorded differences" section: per conformance cell that is not green (target x clause,
    the run the cell was taken from), each case with its outcome, whose difference it is, and the failure or the
    expected file's reason and evidence. The matrix's cells link here."""
    out = ["<h2>Failures and recorded differences</h2>"]
    if not rows:
        out.append('<p class="empty">no case failed and no difference was recorded in the latest runs</p>')
        return "".join(out)
    out.append('<p class="sub">Each failed or differing conformance cell, case by case: the failure as the case '
               "reported it, or the difference as recorded in <code>harness/vendors/&lt;vendor&gt;/expected.yaml"
               "</code> or <code>suites/expected/client-&lt;stack&gt;.yaml</code> (clause, reason, evidence). A type "
               "interop case lists each value that came back different.</p>")
    body, seen = [], set()
    for r in rows:
        key = (r["target"], r["clause"])
        anchor = "" if key in seen else f' id="{finding_anchor(*key)}"'
        seen.add(key)
        body.append(f'<tr{anchor}><td>{e(r["target"])}</td><td class="clause"><code>{e(r["clause"])}</code></td>'
                    f"<td>{badge(r['outcome'])}</td><td>{e(_whose(r))}</td>"
                    f'<td class="case"><code>{e(r["case"])}</code></td>'
                    f"<td>{_evidence(r)}</td><td><code>{e(r['run_id'])}</code></td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("target", "clause", "outcome", "whose", "case", "reason and evidence",
                                              "run"))
    out.append(f'<table id="findings" class="findings"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
               "</tbody></table>")
    return "".join(out)


def client_stacks(rows: list[dict]) -> str:
    """The client axis's own differences: per client stack and target, the cases whose recorded difference belongs
    to the stack (counted in no vendor's pass rate), and the clauses they cite."""
    per: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        who = r.get("difference_of") or ""
        if r["outcome"] == "client-xfail" and who.startswith("client-"):
            per.setdefault((who[len("client-"):], r["target"]), []).append(r)
    out = ["<h2>Client stacks: their own recorded differences</h2>"]
    if not per:
        out.append('<p class="empty">no difference recorded for a client stack in the latest runs</p>')
        return "".join(out)
    out.append('<p class="sub">Differences that belong to a client library, whichever peer is in between '
               "(suites/expected/client-&lt;stack&gt;.yaml). They are shown here and in the findings above, and kept "
               "out of every vendor's pass rate.</p>")
    out.append(table(["client stack", "target", "cases", "clauses"],
                     [[e(stack), e(target), str(len({x["case"] for x in found})),
                       e(", ".join(sorted({x["clause"] for x in found})))]
                      for (stack, target), found in sorted(per.items())]))
    return "".join(out)


def network(rows: list[dict]) -> str:
    """The "Networks of brokers" section: a row per network case, a column per target (its latest run with network
    cases), each cell the outcome with messages lost and duplicated and the seconds until forwarding resumed."""
    out = ["<h2>Networks of brokers: per case and target</h2>"]
    if not rows:
        out.append('<p class="empty">no network-of-brokers cases (suites/network) among the runs</p>')
        return "".join(out)
    out.append('<p class="sub">Each target\'s latest run with network cases: the outcome, messages lost and '
               "duplicated (total-queue checker) and, after a fault, the seconds from its end until forwarding "
               "resumed. A blank figure: the case does not measure it.</p>")
    targets = sorted({r["target"] for r in rows})
    cells = {(r["case"], r["target"]): r for r in rows}

    def figures(r: dict) -> str:
        parts = [f"{name} {r[key]}" for name, key in (("lost", "lost"), ("dup", "duplicated"))
                 if r.get(key) is not None]
        if r.get("resume_s") is not None:
            parts.append(f"resume {r['resume_s']:.3f} s")
        return " ".join([e(r.get("fault") or ""), e(", ".join(parts))]).strip()

    def cell(case: str, target: str) -> str:
        r = cells.get((case, target))
        if r is None:
            return "<td></td>"
        return (f'<td title="{e(r.get("message") or "")}">{badge(r["outcome"])} {figures(r)} '
                f'<code>{e(r["run_id"])}</code></td>')

    head = "".join(f"<th>{e(t)}</th>" for t in targets)
    body = "".join(f"<tr><td><code>{e(case.split('::', 1)[-1])}</code></td>"
                   f"{''.join(cell(case, t) for t in targets)}</tr>"
                   for case in sorted({r["case"] for r in rows}))
    out.append(f'<table id="network" class="sortable"><thead><tr><th>case</th>{head}</tr></thead>'
               f"<tbody>{body}</tbody></table>")
    return "".join(out)


def recovery(rows: list[dict]) -> str:
    """The "Recovery after faults" section: per target, suite and fault, what was lost and duplicated and how long
    the peers took to catch up once the fault was gone (records with details.resume_s)."""
    out = ["<h2>Recovery after faults: lost, duplicated, time to resume</h2>"]
    if rows:
        out.append('<p class="sub">Cases whose record says how long the peers took to catch up once a fault was '
                   "gone (<code>details.resume_s</code>, e.g. from a mirror link's return until the mirror queue was "
                   "empty): messages lost, duplicated and recovered (sums over the cases), and that time's median and "
                   "maximum.</p>")

    def number(value) -> str:
        return "" if value is None else str(value)

    def seconds(value) -> str:
        return "" if value is None else f"{value:.3f}"

    out.append(table(["target", "suite", "fault", "cases", "failed", "lost", "duplicated", "recovered",
                      "resume p50 s", "resume max s", "latest run"],
                     [[e(r["target"]), e(r["suite"]), e(r.get("fault") or ""), str(r["cases"]),
                       str(r["failed_cases"]), number(r.get("lost")), number(r.get("duplicated")),
                       number(r.get("recovered")), seconds(r.get("resume_p50_s")), seconds(r.get("resume_max_s")),
                       f"<code>{e(r['last_run'])}</code>"] for r in rows],
                     empty="no record says how long recovery took after a fault (details.resume_s)"))
    return "".join(out)


def type_interop(rows: list[dict]) -> str:
    """The "Type interop" section: type family and section x (sender stack -> peer -> receiver stack), from each
    target's latest run, showing only the pairs and types where something differed (suites/types)."""
    out = ["<h2>Type interop: where client stacks differ</h2>"]
    if not rows:
        out.append('<p class="empty">no type interop cases (suites/types) among the runs</p>')
        return "".join(out)

    def route(r: dict) -> str:
        return f"{r['sender_stack']} \u2192 {r['via']} ({r['target']}) \u2192 {r['receiver_stack']}"

    bad = [r for r in rows if r["outcome"] != "passed"]
    routes = sorted({route(r) for r in bad})
    kinds = sorted({(r["type"], r["section"]) for r in bad})
    out.append(f'<p class="sub">{len(rows)} type x section x stack-pair cases in the latest runs; '
               f'{len(rows) - len(bad)} passed. Below, only the types and stack pairs where a case did not pass: '
               "each cell is the outcome and how many of its values came back different (value or AMQP type).</p>")
    if not bad:
        out.append('<p class="empty">every value came back as it was sent, type included, for every pair</p>')
        return "".join(out)
    cells = {(r["type"], r["section"], route(r)): r for r in rows}

    def cell(kind: tuple[str, str], where: str) -> str:
        r = cells.get((*kind, where))
        if r is None:
            return "<td></td>"
        differing = f" {r['values_differing']}/{r['values']}" if r.get("values_differing") else ""
        return f'<td title="{e(r.get("message") or "")}">{badge(r["outcome"])}{e(differing)}</td>'

    head = "".join(f"<th>{e(w)}</th>" for w in routes)
    body = "".join(f"<tr><td>{e(t)}</td><td>{e(sec)}</td>{''.join(cell((t, sec), w) for w in routes)}</tr>"
                   for t, sec in kinds)
    out.append(f'<table class="matrix"><thead><tr><th>type</th><th>section</th>{head}</tr></thead>'
               f"<tbody>{body}</tbody></table>")
    return "".join(out)


def benchmarks(rows: list[dict]) -> str:
    """The "Benchmarks" section: benchmark records (bench/*.py --results). First the vendor comparison: per benchmark,
    scenario and client stack, each product's latest msgs/s against the reference's, with both versions; then the
    latest figures per scenario, vendor and client stack."""
    out = ["<h2>Benchmarks</h2>"]

    def number(value, fmt: str) -> str:
        return "" if value is None else format(value, fmt)

    def product(r: dict) -> str:
        return e(r["vendor"]) + (f" {e(r['version'])}" if r.get("version") else "")

    def versus(r: dict) -> str:
        value = r.get("vs_reference")
        if value is None:
            return ""
        colour = COLORS["passed" if value >= 1 else "failed"]
        return f'<b style="color:{colour}">{value:.2f}x</b>'

    if rows:
        compared = [r for r in rows if not r["vendor"].startswith("reference") and r.get("vs_reference") is not None]
        out.append('<p class="sub">Each product against the reference, same benchmark, scenario and clients, the '
                   "latest run of each: its msgs/s divided by the reference's (above 1: faster than the reference). "
                   "Clients and peers share the machine, so the ratio is the figure to compare, not the rate.</p>")
        out.append(table(["benchmark", "scenario", "clients", "product", "msgs/s", "reference", "reference msgs/s",
                          "vs reference", "p50 ms", "p99 ms", "CPU s / 1000 msgs", "latest run"],
                         [[e(r["bench"]), e(r["scenario"]), e(r["clients"]), product(r),
                           number(r.get("msgs_per_s"), ",.0f"),
                           e(r.get("reference_vendor") or "reference")
                           + (f" {e(r['reference_version'])}" if r.get("reference_version") else ""),
                           number(r.get("reference_msgs_per_s"), ",.0f"), versus(r), number(r.get("p50_ms"), ".2f"),
                           number(r.get("p99_ms"), ".2f"), number(r.get("cpu_s_per_1000"), ".3f"),
                           f"<code>{e(r['run_id'])}</code>"] for r in compared],
                         empty="no product measured beside the reference"))
        out.append("<h3>Latest figures per scenario and vendor</h3>")
    out.append(table(["benchmark", "scenario", "clients", "vendor", "version", "msgs/s", "previous", "best", "p50 ms",
                      "p99 ms", "ratio", "CPU s / 1000 msgs", "runs", "latest run"],
                     [[e(r["bench"]), e(r["scenario"]), e(r["clients"]), e(r["vendor"]), e(r.get("version") or ""),
                       number(r.get("msgs_per_s"), ",.0f"), number(r.get("previous_msgs_per_s"), ",.0f"),
                       number(r.get("best_msgs_per_s"), ",.0f"), number(r.get("p50_ms"), ".2f"),
                       number(r.get("p99_ms"), ".2f"),
                       "" if r.get("ratio") is None else f"{r['ratio']:.2f}x {e(r.get('ratio_to') or '')}",
                       number(r.get("cpu_s_per_1000"), ".3f"), str(r["runs"]), f"<code>{e(r['run_id'])}</code>"]
                      for r in rows],
                     empty="no benchmark records (bench/routing.py, broker.py and network.py with --results DIR "
                           "write them; `make run` runs them)"))
    return "".join(out)


def mutation(rows: list[dict]) -> str:
    """The "Mutation score" section: per group of reference modules, the latest job's score against its target,
    the mutant counts, the sample, the run time, the scores of every job in order (trend), and the survivors."""
    out = ["<h2>Mutation score</h2>"]
    if not rows:
        out.append('<p class="empty">never run here: no mutation-score record in this store (bench/mutation.py writes '
                   "them; a weekly job, not part of the nightly: docs/benchmarks.md, \"Mutation score\")</p>")
        return "".join(out)
    latest = max((r for r in rows if r.get("run_id")), key=lambda r: r["run_id"], default=None)
    if latest is not None:
        out.append(f'<p class="note">last run: {e(_run_date(latest["run_id"]))} (run <code>{e(latest["run_id"])}'
                   "</code>; a weekly job, not part of the nightly)</p>")
    out.append('<p class="sub">Small deliberate bugs made in the reference peers (and the fault proxy), one at a '
               "time, each run against the tests that judge its group. Score = killed (timeouts included) / "
               "(killed + survived); equivalent mutants, which no behaviour can tell from the original, are left "
               "out with their argument (bench/mutation-equivalent.yaml). Trend: the score of each job, oldest "
               "first.</p>")

    def pct(value) -> str:
        return "" if value is None else f"{value:.0%}"

    def score(r: dict) -> str:
        target = r.get("target_score")
        below = r.get("score") is not None and target is not None and r["score"] < target
        colour = COLORS["failed" if below else "passed"]
        return f'<b style="color:{colour}">{pct(r.get("score"))}</b>' + (
            f" of {pct(target)}" if target is not None else "")

    def survivors(r: dict) -> str:
        names = r.get("survivors") or []
        if not names:
            return ""
        return (f"<details><summary>{len(names)}</summary>"
                + "".join(f"<div><code>{e(n)}</code></div>" for n in names) + "</details>")

    def count(r: dict, name: str) -> str:
        return "" if r.get(name) is None else str(r[name])

    out.append(table(["group", "score", "sample", "killed", "timeout", "survived", "equivalent", "pending",
                      "run s", "trend", "survivors", "runs", "latest run"],
                     [[e(r["group"]), score(r), count(r, "sample"), count(r, "killed"), count(r, "timeout"),
                       count(r, "survived"), count(r, "equivalent"), count(r, "pending"),
                       "" if r.get("run_s") is None else f"{r['run_s']:,.0f}",
                       e(" → ".join(pct(v) or "-" for v in r.get("scores") or [])), survivors(r), str(r["runs"]),
                       f"<code>{e(r['run_id'])}</code>"] for r in rows]))
    return "".join(out)


def _run_date(run_id: str) -> str:
    """`2026-11-22 03:00 UTC` from a run id the harness made (`2026-11-22T03-00-00Z-ab12`), else the id."""
    found = re.match(r"^(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})", run_id or "")
    return f"{found[1]} {found[2]}:{found[3]} UTC" if found else (run_id or "")


def fuzz_products(rows: list[dict]) -> str:
    """The vendor comparison of the fuzzing section: per product (role, vendor, version), what was run, what was
    found and the frames sessions' worst figures."""

    def number(value, fmt: str) -> str:
        return "" if value is None else format(value, fmt)

    def rss(r: dict) -> str:
        start, peak = r.get("start_rss_mb"), r.get("max_rss_mb")
        if peak is None:
            return ""
        return (f"{start:,.0f} → " if start is not None else "") + f"{peak:,.0f}"

    def found(r: dict) -> str:
        recorded = set(r.get("recorded") or [])
        new = [s for s in r["signatures"] if s not in recorded]
        colour = COLORS["failed" if new else "xfail" if recorded else "passed"]
        listed = new + [s for s in r["signatures"] if s in recorded]  # the new ones first
        return (f'<b style="color:{colour}">{r["distinct_signatures"]}</b>'
                + (f" ({len(recorded & set(r['signatures']))} recorded)" if recorded else "") + " "
                + " ".join(f"<code>{e(s)}</code>" + (" (recorded)" if s in recorded else "") for s in listed[:6])
                + (f" (+{len(listed) - 6} more)" if len(listed) > 6 else ""))

    return table(["role", "product", "version", "frames cases", "stateful programs", "config files", "sessions",
                  "sessions with failures", "distinct findings", "worst sentinel gap ms",
                  "RSS MB (least at start → most)", "CPU after close (cores)", "latest run", "deliberate break"],
                 [[e(r["role"]), e(r["vendor"]), e(r["version"]), str(r.get("frames_cases") or 0),
                   str(r.get("programs") or 0), str(r.get("config_files") or 0), str(r["sessions"]),
                   str(r["failed_sessions"]), found(r), number(r.get("max_gap_ms"), ",.0f"), rss(r),
                   number(r.get("cpu_after_close_cores"), ".2f"), f"<code>{e(r['last_run'])}</code>",
                   e(r.get("deliberate_break") or "")] for r in rows],
                 cls="sortable fuzz-products", empty="no session names its product")


def fuzzing(sessions: list[dict], findings: list[dict], products: list[dict] | None = None) -> str:
    """The "Fuzzing sessions" section: per product (the vendor comparison), sessions per target and mode, then the
    distinct failures by signature."""
    out = ["<h2>Fuzzing sessions</h2>"]
    if not sessions and not findings:
        out.append('<p class="empty">no fuzz session in these runs (<code>interop fuzz</code> writes them; '
                   "<code>make run</code> runs one of each kind per product)</p>")
        return "".join(out)
    out.append('<p class="sub">Seeded, time-boxed sessions of <code>interop fuzz</code> (stateful client programs, or '
               "hostile frames). They are not conformance cases: no figure above counts them.</p>")
    if products:
        out.append('<p class="sub">Per product: what its sessions ran and found; from the hostile-frame sessions, the '
                   "sentinel client's longest wait for its traffic, the server's resident memory, and the most CPU "
                   "it kept spending after a batch's connections had closed.</p>")
        out.append(fuzz_products(products))
        out.append('<p class="sub">Sessions per target and mode:</p>')
    out.append(table(["target", "fuzzed role", "mode", "sessions", "programs / cases", "sessions with failures",
                      "distinct failures", "signatures", "seeds", "duration", "runs", "latest run",
                      "deliberate break"],
                     [[e(r["target"]), e(r.get("role") or ""), e(r["mode"]), str(r["sessions"]),
                       str(r.get("executed") or 0), str(r["failed_sessions"]), str(r["distinct_signatures"]),
                       " ".join(f"<code>{e(s)}</code>" for s in r["signatures"]), _listed(r["seeds"]),
                       f"{r['duration_s'] or 0:.0f}s", str(r["runs"]), f"<code>{e(r['last_run'])}</code>",
                       e(r.get("deliberate_break") or "")] for r in sessions],
                     empty="no fuzz session record (only findings)"))
    out.append("<h3>Distinct failures by signature</h3>")
    out.append(table(["signature", "kind", "mode", "target", "first seen", "last seen", "sessions", "seeds",
                      "message (latest)", "reproducer (latest)", "deliberate break"],
                     [[f"<code>{e(r['signature'])}</code>", e(r.get("kind") or ""), e(r["mode"]), e(r["target"]),
                       f"<code>{e(r['first_run'])}</code>", f"<code>{e(r['last_run'])}</code>", str(r["sessions"]),
                       _listed(r["seeds"]), e((r.get("message") or "")[:240]),
                       f"<code>{e(r['reproducer'])}</code>" if r.get("reproducer") else "",
                       e(r.get("deliberate_break") or "")] for r in findings],
                     empty="no session found a failure"))
    return "".join(out)


def _listed(values: list, most: int = 8) -> str:
    """The first `most` values, then how many more: a long fuzzing campaign has hundreds of seeds."""
    shown = ", ".join(e(v) for v in values[:most])
    return shown + (f" (+{len(values) - most} more)" if len(values) > most else "")


def _faults(run: dict) -> list[str]:
    """The deliberate breaks of a run: from run.json, and from its records (space-separated in each)."""
    found = set(run.get("breaks") or [])
    for value in run.get("config_faults") or []:
        found.update((value or "").split())
    return sorted(found)


def _summary(data: dict, targets: list[str]) -> dict:
    """Machine-readable facts embedded in the page (tests and scripts read them; nothing loads them)."""
    return {"targets": targets, "runs": [r["run_id"] for r in data["runs"]], "totals": data["totals"][0],
            "flaky": len(data["flaky"]),
            "regressions": sum(1 for r in data["regressions"] if r["kind"] == "regression"),
            "fuzz_sessions": sum(r["sessions"] for r in data["fuzz_sessions"]),
            "fuzz_findings": len({r["signature"] for r in data["fuzz_findings"]})}


def _json_for_script(value) -> str:
    return json.dumps(value, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
