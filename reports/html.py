"""The report page's building blocks: escaping, tables, badges and the SVG charts (page.py and versions_page.py
assemble the sections from them)."""

from __future__ import annotations

import html

COLORS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#8e244d", "xfail": "#ef6c00",
          "not-applicable": "#607d8b", "skipped": "#b0b0b0", "client-xfail": "#8d6e63", "not run": "#e0e0e0"}
# client-xfail: a recorded difference of a client stack (suites/expected/client-<stack>.yaml), not of the vendor
OUTCOMES = ("passed", "failed", "error", "xfail", "not-applicable", "skipped", "client-xfail")
STATUS_TEXT = {"passed": "pass", "failed": "FAIL", "xfail": "differs", "not-applicable": "n/a",
               "client-difference": "client differs", "not run": "not run"}
LINKED_STATUSES = ("failed", "xfail", "client-difference")  # matrix cells that link to their cases' evidence
SERIES = ("#1565c0", "#6a1b9a", "#00838f", "#9e9d24", "#4e342e", "#d81b60", "#283593", "#558b2f")


def e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _key(outcome: str) -> str:
    return outcome.replace("-", "_")


def _pct(rate) -> str:
    return "–" if rate is None else f"{100 * rate:.1f}%"


# ---- charts (inline SVG) ----------------------------------------------------------------------------------------


LABEL_PX_PER_CHAR = 7  # the charts' 12 px label font: a generous width per character, so no label is cut


def _label_width(labels) -> int:
    """Room for the longest label left of the bars (at least the old fixed 330 px)."""
    return max([330, *(LABEL_PX_PER_CHAR * len(text) + 16 for text in labels)])


def stacked_bars(rows: list[dict], label, title: str) -> str:
    """Horizontal bars, one per row, split by outcome counts."""
    if not rows:
        return ""
    label_w, bar_w, row_h = _label_width(label(r) for r in rows), 520, 24
    height = row_h * len(rows) + 30
    parts = [f'<svg class="chart" role="img" aria-label="{e(title)}" viewBox="0 0 {label_w + bar_w + 90} {height}" '
             f'width="{label_w + bar_w + 90}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{e(title)}</title>"]
    for i, row in enumerate(rows):
        y = 10 + i * row_h
        total = sum(row.get(_key(o), 0) or 0 for o in OUTCOMES) or 1
        parts.append(f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end" class="lbl">{e(label(row))}</text>')
        x = float(label_w)
        for outcome in OUTCOMES:
            n = row.get(_key(outcome), 0) or 0
            if not n:
                continue
            w = bar_w * n / total
            parts.append(f'<rect class="seg" x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{row_h - 6}" '
                         f'fill="{COLORS[outcome]}"><title>{e(label(row))}: {n} {outcome}</title></rect>')
            x += w
        parts.append(f'<text x="{label_w + bar_w + 6}" y="{y + 15}" class="lbl">{_pct(row.get("pass_rate"))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def line_chart(series: dict[str, list[tuple[int, float | None, str, bool]]], runs: int, title: str) -> str:
    """Pass rate (0..1) per target over the run index; a hollow red ring marks a run with a deliberate break."""
    if not series:
        return ""
    # the legend goes under the plot, a line per target at full width: a long target name is never cut
    w, plot_h, left, top, bottom = 900, 240, 50, 15, 40
    h = plot_h + 20 * len(series) + 8
    pw, ph = w - left - 30, plot_h - top - bottom
    span = max(runs - 1, 1)

    def xy(index: int, rate: float) -> tuple[float, float]:
        x = left + pw / 2 if runs == 1 else left + pw * (index - 1) / span  # one run: in the middle, not on the axis
        return x, top + ph * (1 - rate)

    parts = [f'<svg class="chart" role="img" aria-label="{e(title)}" viewBox="0 0 {w} {h}" width="{w}" '
             f'height="{h}" xmlns="http://www.w3.org/2000/svg"><title>{e(title)}</title>']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        y = top + ph * (1 - tick)
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="lbl">{int(tick * 100)}%</text>')
    step = max(1, runs // 10)
    for i in range(1, runs + 1, step):
        x, _ = xy(i, 0)
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle" class="lbl">{i}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{plot_h - 4}" text-anchor="middle" class="lbl">run (oldest to newest)'
                 f'</text>')
    for n, (target, points) in enumerate(series.items()):
        color = SERIES[n % len(SERIES)]
        pts = [(i, r, run_id, broken) for i, r, run_id, broken in points if r is not None]
        if len(pts) > 1:
            path = " ".join(f"{'M' if k == 0 else 'L'}{xy(i, r)[0]:.1f},{xy(i, r)[1]:.1f}"
                            for k, (i, r, _, _) in enumerate(pts))
            parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2" class="series"/>')
        for i, r, run_id, broken in pts:
            x, y = xy(i, r)
            ring = f'stroke="{COLORS["failed"]}" stroke-width="2"' if broken else ""
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{5 if broken else 3}" fill="{color}" {ring}'
                         f' class="point"><title>{e(target)} run {i} ({e(run_id)}): {_pct(r)}'
                         f'{" (deliberately broken)" if broken else ""}</title></circle>')
        ly = plot_h + 14 + 20 * n
        latest = pts[-1][1] if pts else None
        parts.append(f'<rect x="{left}" y="{ly - 9}" width="12" height="12" fill="{color}" class="legend"/>'
                     f'<text x="{left + 18}" y="{ly + 1}" class="lbl">{e(target)}'
                     f'{f" (latest {_pct(latest)})" if latest is not None else ""}</text>')
    parts.append("</svg>")
    return "".join(parts)


def duration_bars(rows: list[dict], title: str) -> str:
    """p50 and p95 per target x suite, as paired horizontal bars on one scale."""
    if not rows:
        return ""
    label_w, bar_w, row_h = _label_width(f"{r['target']} · {r['suite']}" for r in rows), 480, 30
    top = max((r.get("p95_s") or 0) for r in rows) or 1
    height = row_h * len(rows) + 34
    parts = [f'<svg class="chart" role="img" aria-label="{e(title)}" viewBox="0 0 {label_w + bar_w + 120} {height}" '
             f'width="{label_w + bar_w + 120}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
             f"<title>{e(title)}</title>"]
    for i, row in enumerate(rows):
        y = 8 + i * row_h
        name = f"{row['target']} · {row['suite']}"
        parts.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end" class="lbl">{e(name)}</text>')
        for k, (key, color) in enumerate((("p50_s", "#42a5f5"), ("p95_s", "#1565c0"))):
            value = row.get(key) or 0
            parts.append(f'<rect class="seg" x="{label_w}" y="{y + k * 12}" width="{max(bar_w * value / top, 0.5):.1f}"'
                         f' height="11" fill="{color}"><title>{e(name)} {key[:3]}: {value:.3f}s</title></rect>')
        parts.append(f'<text x="{label_w + bar_w + 6}" y="{y + 16}" class="lbl">'
                     f'{(row.get("p50_s") or 0):.3f}s / {(row.get("p95_s") or 0):.3f}s</text>')
    parts.append(f'<text x="{label_w}" y="{height - 6}" class="lbl">■ p50 (light) ■ p95 (dark), seconds</text></svg>')
    return "".join(parts)


# ---- tables ---------------------------------------------------------------------------------------------------------


def table(headers: list[str], rows: list[list[str]], cls: str = "sortable", empty: str = "none") -> str:
    if not rows:
        return f'<p class="empty">{e(empty)}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def badge(outcome: str | None) -> str:
    outcome = outcome or "not run"
    return f'<span class="badge" style="background:{COLORS.get(outcome, "#999")}">{e(outcome)}</span>'
