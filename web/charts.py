"""Chart data for the function page: one line per toolchain of a function's size across commits.

The chart itself is drawn in the browser by Chart.js (npm ``chart.js``, pinned in
web/package-lock.json, installed by scripts/install.sh and served by the app from
``/static/vendor/``: no CDN, works offline). Why Chart.js rather than server-side SVG
(pygal, matplotlib): a function's history in a real store is thousands of points
(1,000 commits × 8 toolchains), which a Python SVG renderer takes hundreds of
milliseconds to draw on every request, while the page must answer in ≤ 50 ms;
Chart.js draws that on a canvas in the browser, and gives per-point tooltips (commit,
size, inline status), point styles per inline status and clicks through to the commit,
all maintained upstream. The server only ships compact columns (below).
"""
from __future__ import annotations

from db.models import HistoryPoint
from db.reports import toolchain_key

# What a point says about the function's inline status (the marker drawn, and the legend's words).
STATES = ("out of line", "out of line, also inlined", "inlined only", "not analyzed", "absent", "build failed")
MARKERS = ("circle", "rectRot", "triangle", "crossRot", "cross", "rect")


def state(p: HistoryPoint) -> int:
    if p.status != "ok":
        return 5
    if p.declared is None:
        return 3 if p.size else 4
    if p.out_of_line:
        return 1 if p.inlined_count else 0
    return 2 if p.inlined_count else 4


def status_text(p: HistoryPoint) -> str:
    """The inline status of one point in words, as the tooltip and the changes table show it."""
    s = state(p)
    if s == 5:
        return f"build {p.status}"
    if s in (3, 4) and p.declared is None:
        return STATES[s]
    declared = f"{p.declared}: " if p.declared and p.declared != "unknown" else ""
    if s == 0:
        return f"{declared}out of line"
    if s == 1:
        return f"{declared}out of line, also inlined {p.inlined_count}x"
    if s == 2:
        return f"{declared}inlined {p.inlined_count}x, no out-of-line copy"
    return f"{declared}absent"


def history_columns(points: list[HistoryPoint], states: list[int] | None = None) -> dict:
    """Commits in history order and the lines (gcc first, then clang, by version), each with sizes,
    states (an index into STATES), inline counts and declarations aligned with the commits (None: no point)."""
    order: dict[str, int] = {}
    commits: dict[str, list] = {"sha": [], "subject": [], "date": []}
    for p in points:
        if p.commit_sha not in order:
            order[p.commit_sha] = len(order)
            commits["sha"].append(p.commit_sha)
            commits["subject"].append(p.subject)
            commits["date"].append(p.date)
    multi_target = len({p.target for p in points}) > 1
    lines: dict[str, dict] = {}
    states = states if states is not None else [state(p) for p in points]
    for p, st in zip(points, states):
        label = f"{p.toolchain} {p.target}" if multi_target else p.toolchain
        line = lines.get(label)
        if line is None:
            line = lines[label] = {"toolchain": p.toolchain, "target": p.target,
                                   "size": [None] * len(order), "state": [None] * len(order),
                                   "inlined": [None] * len(order), "declared": [None] * len(order)}
        i = order[p.commit_sha]
        line["size"][i] = p.size if p.status == "ok" else None
        line["state"][i] = st
        line["inlined"][i] = p.inlined_count
        line["declared"][i] = p.declared
    ordered = [{"label": label, **line} for label, line in
               sorted(lines.items(), key=lambda kv: (toolchain_key(kv[1]["toolchain"]), kv[1]["target"]))]
    return {"commits": commits, "lines": ordered, "states": list(STATES), "markers": list(MARKERS)}
