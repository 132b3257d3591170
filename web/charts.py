"""Chart data for the function page: one line per toolchain of a function's size across commits.

The chart itself is drawn in the browser by Chart.js (npm ``chart.js``, pinned in
web/package-lock.json, installed by scripts/install.sh and served by the app from
``/static/vendor/``: no CDN, works offline). Why Chart.js rather than server-side SVG
(pygal, matplotlib): a function's history in a real store is thousands of points
(1,000 commits × 8 toolchains), which a Python SVG renderer takes hundreds of
milliseconds to draw on every request, while the page must answer in ≤ 50 ms;
Chart.js draws that on a canvas in the browser, and gives per-point tooltips (commit,
size, inline status), point styles per inline status and clicks through to the commit,
all maintained upstream. The server only ships compact columns (below), built straight
from the store's columns (``Store.function_series``): no object per point.
"""
from __future__ import annotations

from db.models import FunctionLine, FunctionSeries
from toolchains.flavour import label, label_key

# What a point says about the function's inline status (the marker drawn, and the legend's words).
STATES = ("out of line", "out of line, also inlined", "inlined only", "not analyzed", "absent", "build failed")
MARKERS = ("circle", "rectRot", "triangle", "crossRot", "cross", "rect")


def state(status: str, size: int | None, declared: str | None, out_of_line: bool | None,
          inlined_count: int | None) -> int:
    """One point's index into STATES."""
    if status != "ok":
        return 5
    if declared is None:
        return 3 if size else 4
    if out_of_line:
        return 1 if inlined_count else 0
    return 2 if inlined_count else 4


def line_states(line: FunctionLine) -> list[int | None]:
    """The state of every point of a line (None where the commit has no build under it)."""
    return [None if st is None else state(st, z, d, o, n)
            for st, z, d, o, n in zip(line.status, line.size, line.declared, line.out_of_line, line.inlined_count)]


def status_text(line: FunctionLine, i: int, st: int) -> str:
    """The inline status of point ``i`` (state ``st``) in words, as the tooltip and the changes table show it."""
    declared, inlined = line.declared[i], line.inlined_count[i]
    if st == 5:
        return f"build {line.status[i]}"
    if st in (3, 4) and declared is None:
        return STATES[st]
    prefix = f"{declared}: " if declared and declared != "unknown" else ""
    if st == 0:
        return f"{prefix}out of line"
    if st == 1:
        return f"{prefix}out of line, also inlined {inlined}x"
    if st == 2:
        return f"{prefix}inlined {inlined}x, no out-of-line copy"
    return f"{prefix}absent"


def ordered_lines(series: FunctionSeries) -> list[tuple[str, FunctionLine]]:
    """(label, line): gcc first, then clang, by version, x86_64 before arm64 (``toolchains.flavour``:
    ``gcc-12 arm64``); the target in the label when there are several."""
    multi_target = len({ln.target for ln in series.lines}) > 1
    lines = sorted(series.lines, key=lambda ln: (label_key(label(ln.toolchain, ln.arch, ln.lto)), ln.target))
    return [(label(ln.toolchain, ln.arch, ln.lto) + (f" {ln.target}" if multi_target else ""), ln) for ln in lines]


def history_columns(series: FunctionSeries, lines: list[tuple[str, FunctionLine]],
                    states: list[list[int | None]]) -> dict:
    """Commits in history order and the lines, each with sizes (None: build failed), states (an index
    into STATES), inline counts and declarations aligned with the commits (None: no point)."""
    commits = series.commits
    return {"commits": {"sha": [c.sha for c in commits], "subject": [c.subject for c in commits],
                        "date": [c.date for c in commits]},
            "lines": [{"label": label, "toolchain": ln.toolchain, "target": ln.target,
                       "size": [z if s == "ok" else None for z, s in zip(ln.size, ln.status)],
                       "state": st, "inlined": ln.inlined_count, "declared": ln.declared}
                      for (label, ln), st in zip(lines, states)],
            "states": list(STATES), "markers": list(MARKERS)}
