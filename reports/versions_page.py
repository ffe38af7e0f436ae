"""The page's sections that answer "what changes if I upgrade" (the tables of reports/versions_table.py): what
changes between two releases of a product, its mixed-release cases, and its rolling upgrades. No Spark here."""

from __future__ import annotations

from reports.html import badge, e, table

EVIDENCE_CHARS = 240
UPGRADE_CHARS = 160  # the upgrades table has twelve columns: its messages are shorter
BAD = ("failed", "error")


def _case(case_id: str) -> str:
    """`suites/broker/test_x.py::test_y[p]` -> `test_x.py::test_y[p]`, the full id in its title."""
    path, _, name = case_id.partition("::")
    return f'<code title="{e(case_id)}">{e(path.rsplit("/", 1)[-1])}::{e(name)}</code>' if name else \
        f"<code>{e(case_id)}</code>"


def _evidence(message, most: int = EVIDENCE_CHARS) -> str:
    """The message shortened to `most` characters, the whole of it in its title."""
    text = message or ""
    shown = text if len(text) <= most else text[:most - 1] + "\u2026"
    return f'<span class="evidence" title="{e(text)}">{e(shown)}</span>' if text else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(pair: dict) -> str:
    """`4 cases compared: 1 same outcome, 3 different outcome; 2 not compared (...); 1 only on 2.39.0, ...`, or,
    when nothing differs, `N cases compared, same outcome on both`."""
    old, new = pair["old_release"], pair["new_release"]
    if pair["compared"] and not pair["different"]:
        parts = [f"{_plural(pair['compared'], 'case')} compared, same outcome on both"]
    elif pair["compared"]:
        parts = [f"{_plural(pair['compared'], 'case')} compared: {pair['same']} same outcome, "
                 f"{pair['different']} different outcome"]
    else:
        parts = ["no case was judged (passed, failed, error, xfail) on both releases"]
    if pair["not_compared"]:
        parts.append(f"{pair['not_compared']} not compared (skipped or not applicable on a side)")
    only = [f"{pair[key]} only on {release}" for key, release in (("only_old", old), ("only_new", new)) if pair[key]]
    if only:
        parts.append(", ".join(only))
    return "; ".join(parts)


def versions(pairs: list[dict], changes: list[dict], mixed: list[dict]) -> str:
    """The "What changes between versions" section: per product run in two releases, each release against the next
    one up (the cases' latest outcomes on each), the cases whose outcome differs, then the mixed-release cases."""
    out = ['<h2 id="versions">What changes between versions</h2>']
    if pairs:
        out.append('<p class="sub">Targets that differ only by a product\'s version (a cell chosen as '
                   "<code>broker=artemis@2.39.0</code> beside the pinned default), each side named by the release "
                   "its peers reported in its latest run. Every case that ran on both is compared by its latest "
                   "outcome there: passed, failed, error, xfail and xpass are judged; a case skipped or not "
                   "applicable on a side is counted apart. Rolling-upgrade cases have their own section below.</p>")
    else:
        out.append('<p class="empty">no product ran in two releases: a cell chosen with a version (e.g. '
                   "<code>--peer broker=artemis@2.39.0</code>, whose target is <code>broker=artemis 2.39.0 + "
                   "router=reference</code>) beside the same cell on the pinned default fills this section</p>")
    by_pair: dict[tuple, list[dict]] = {}
    for row in changes:
        by_pair.setdefault((row["base"], row["old_release"], row["new_release"]), []).append(row)
    for pair in pairs:
        old, new = pair["old_release"], pair["new_release"]
        out.append(f'<h3>{e(pair["product"])} {e(old)} vs {e(new)} <small class="mono">{e(pair["base"])}</small>'
                   "</h3>")
        out.append(f'<p><code>{e(pair["old_target"])}</code>, latest run <code>{e(pair["old_run"])}</code>; '
                   f'<code>{e(pair["new_target"])}</code>, latest run <code>{e(pair["new_run"])}</code>.<br>'
                   f'<b class="version-summary">{e(summary_line(pair))}</b></p>')
        differing = by_pair.get((pair["base"], old, new), [])
        if differing:
            out.append(table(
                ["suite", "case", "clauses", f"on {old}", f"evidence on {old}", f"on {new}", f"evidence on {new}",
                 "runs"],
                [[e(r["suite"]), _case(r["case"]), e(", ".join(r.get("spec") or [])), badge(r["old_outcome"]),
                  _evidence(r.get("old_message")), badge(r["new_outcome"]), _evidence(r.get("new_message")),
                  f"<code>{e(r['old_case_run'])}</code> / <code>{e(r['new_case_run'])}</code>"]
                 for r in differing], cls="sortable version-changes"))
    out.append(mixed_releases(mixed))
    return "".join(out)


def mixed_releases(rows: list[dict]) -> str:
    """Per target, its latest run's cases citing UPGRADE-MIXED-1: outcome counts, which node ran which release."""
    out = ["<h3>Mixed releases (UPGRADE-MIXED-1)</h3>"]
    if not rows:
        out.append('<p class="empty">no mixed-release case among the runs (a record citing UPGRADE-MIXED-1: a '
                   "topology whose nodes run two releases of one product, as during an upgrade)</p>")
        return "".join(out)
    out.append('<p class="sub">Cases run on a topology whose nodes run two releases of one product (the period of '
               "an upgrade when some nodes are upgraded and some not), from each target's latest run with any. On a "
               "cell of the previous release they are not applicable: it has no older release beside it.</p>")
    per: dict[str, list[dict]] = {}
    for row in rows:
        per.setdefault(row["target"], []).append(row)
    body = []
    for target, found in sorted(per.items()):
        count = {o: sum(1 for r in found if r["outcome"] == o) for o in
                 ("passed", "failed", "error", "xfail", "not-applicable", "skipped")}
        pairings = sorted({r["nodes"] for r in found if r.get("nodes")})
        listed = "".join(f"<div>{badge(r['outcome'])} {_case(r['case'])} {_evidence(r.get('message'))}</div>"
                         for r in sorted(found, key=lambda r: r["case"]))
        body.append([e(target), str(len(found)), str(count["passed"]), str(count["failed"] + count["error"]),
                     str(count["xfail"]), str(count["not-applicable"] + count["skipped"]),
                     "<br>".join(e(p) for p in pairings),
                     f"<code>{e(found[0]['run_id'])}</code>",
                     f"<details><summary>{len(found)}</summary>{listed}</details>"])
    out.append(table(["target", "cases", "passed", "failed or error", "xfail", "not applicable or skipped",
                      "nodes (vendor and release)", "run", "cases"], body, cls="mixed-releases"))
    return "".join(out)


def _number(value) -> str:
    return "" if value is None else str(value)


def _seconds(value) -> str:
    return "" if value is None else f"{value:.3f}"


def _row(cells: list[str], attributes: str = "") -> str:
    """A row of the upgrades table: the case column may break anywhere, from -> to never."""
    tds = "".join(f'<td class="case">{c}</td>' if i == 1 else f'<td class="moved">{c}</td>' if i == 5
                  else f"<td>{c}</td>" for i, c in enumerate(cells))
    return f"<tr{attributes}>{tds}</tr>"


def upgrades(rows: list[dict]) -> str:
    """The "Rolling upgrades" section: each target's latest run of the upgrade suite, a row per case (topology,
    step, stop, from -> to, outcome, lost, duplicated, downtime) and a sub-row per node of a multi-node topology."""
    out = ['<h2 id="upgrades">Rolling upgrades</h2>']
    if not rows:
        out.append('<p class="empty">no rolling-upgrade record among the runs (suite <code>upgrade</code>: '
                   "<code>interop run --suite upgrade</code> with a product that has a previous release here, e.g. "
                   "<code>--peer broker=artemis</code>)</p>")
        return "".join(out)
    out.append('<p class="sub">Each target\'s latest run of the upgrade suite: a node stopped (gracefully or with '
               "kill -9) under traffic and started again on the other release over the same data. Lost and "
               "duplicated messages over the whole case (a duplicate is a redelivery across the step); downtime: "
               "seconds from the stop until the new release accepted a message. A multi-node topology has a row per "
               "node's step under its case.</p>")
    head = ["target", "case", "topology", "step", "stop", "from → to", "outcome", "lost", "duplicated",
            "downtime s", "downgrade", "message", "run"]
    body = []
    for r in sorted(rows, key=lambda r: (r["target"], r["case"])):
        moved = f"{r.get('from_version') or '?'} → {r.get('to_version') or '?'}" \
            if r.get("from_version") or r.get("to_version") else ""
        downgrade = r.get("downgrade") or ""
        if downgrade == "refused" and r.get("refusal"):
            downgrade = f"refused: {r['refusal']}"
        cells = [e(r["target"]), _case(r["case"]), e(r.get("topology") or ""), e(r.get("step") or ""),
                 e(r.get("stop") or ""), e(moved), badge(r["outcome"]), _number(r.get("lost")),
                 _number(r.get("duplicated")), _seconds(r.get("resume_s")), _evidence(downgrade, UPGRADE_CHARS),
                 _evidence(r.get("message"), UPGRADE_CHARS), f"<code>{e(r['run_id'])}</code>"]
        body.append(_row(cells))
        for step in r.get("steps") or []:
            cells = ["", f"\u21b3 {e(step.get('node') or '?')}", "", "", "",
                     f"→ {e(step.get('to_version') or '?')}", "", _number(step.get("lost")),
                     _number(step.get("duplicated")), _seconds(step.get("resume_s")), "", "", ""]
            body.append(_row(cells, ' class="step"'))
    out.append('<table class="upgrades"><thead><tr>' + "".join(f"<th>{e(h)}</th>" for h in head)
               + f"</tr></thead><tbody>{''.join(body)}</tbody></table>")
    return "".join(out)
