"""``/function/<name>``: one function's size across the stored commits, a line per toolchain
(``?toolchain=`` keeps one), its inline status at every point, and the commits where it changed;
for a function inlined somewhere, its inlined copies (instances and bytes in the whole target,
from the stored inline cost: ``sizewatch history --inlined``) and where they changed; for a function
of a measured vmlinux, its executed instructions and calls per alloc/free pair along history."""
from __future__ import annotations

from flask import Blueprint, abort, jsonify, render_template

from db.models import Commit, FunctionLine, InlinePoint
from db.store import Store
from web import charts, context, params
from toolchains.flavour import label as line_label
from web.pages.runtime_rows import function_runtime

bp = Blueprint("function", __name__)


def changes(chart: dict, lines: list[tuple[str, FunctionLine]], commits: list[Commit],
            limit: int) -> tuple[list[dict], int]:
    """The latest ``limit`` points (newest first) whose size or inline status differs from the previous
    point of the same line, and how many there are in all (read from the chart's columns).

    A line's changes come in history order, so only the last ``limit`` of each can be among the
    latest of all: those are merged (a function that changes at most commits has thousands)."""
    total, latest = 0, []
    for col, (_, ln) in zip(chart["lines"], lines):
        size, st, inlined = col["size"], col["state"], col["inlined"]
        present = [i for i, s in enumerate(st) if s is not None]
        found = [(j, i) for j, i in zip(present, present[1:])
                 if size[i] != size[j] or st[i] != st[j] or inlined[i] != inlined[j]]
        total += len(found)
        latest += [(i, ln.toolchain, ln.build_id[i], j, ln, col) for j, i in (found[-limit:] if limit else [])]
    latest.sort(key=lambda c: c[:3])          # history order, as the commits go
    out = []
    for i, tc, _, j, ln, col in reversed(latest[-limit:] if limit else []):
        c, old, new = commits[i], col["size"][j], col["size"][i]
        out.append({"commit": c.sha, "subject": c.subject, "date": c.date, "toolchain": tc, "line": col["label"],
                    "target": ln.target,
                    "old": old, "new": new, "delta": None if new is None or old is None else new - old,
                    "was": charts.status_text(ln, j, col["state"][j]),
                    "now": charts.status_text(ln, i, col["state"][i]),
                    "url": f"/commit/{c.sha}"})
    return out, total


def cost_columns(store: Store, name: str, lines: list[tuple[str, FunctionLine]]) -> dict | None:
    """Per chart line, the likely path's instructions and llvm-mca's estimated cycles at each point
    (issue 15), None where that build stored no likely path of the function; None if none has one."""
    ids = [b for _, ln in lines for b in ln.build_id if b is not None]
    got = store.likely_path_points(name, ids) if ids else {}
    if not got:
        return None
    return {"lines": [{"label": label,
                       "insns": [got[b][0] if b in got else None for b in ln.build_id],
                       "cycles": [got[b][1] if b in got else None for b in ln.build_id]} for label, ln in lines]}


def link_columns(store: Store, name: str, lines: list[tuple[str, FunctionLine]], commits: list[Commit],
                 limit: int) -> dict | None:
    """Per chart line of a linked target (vmlinux), the function's link address, 64-byte lines spanned and
    64-byte phase at each point (0015), and the latest ``limit`` points where one of them changed
    (newest first); None when no build of it has a link layout."""
    ids = [b for _, ln in lines for b in ln.build_id if b is not None]
    got = store.link_points(name, ids) if ids else {}
    if not got:
        return None
    cols, changed = [], []
    for label, ln in lines:
        pts = [got.get(b) if b is not None else None for b in ln.build_id]
        if not any(pts):
            continue
        cols.append({"label": label, "toolchain": ln.toolchain, "target": ln.target,
                     "address": [f"{p.address:#x}" if p else None for p in pts],
                     "size": [p.size if p else None for p in pts],
                     "lines": [p.lines if p else None for p in pts], "phase": [p.phase if p else None for p in pts]})
        present = [i for i, p in enumerate(pts) if p is not None]
        cols[-1]["latest"] = present[-1]
        for j, i in zip(present, present[1:]):
            a, b = pts[j], pts[i]
            if (a.address, a.size, a.lines, a.phase) != (b.address, b.size, b.lines, b.phase):
                c = commits[i]
                changed.append({"commit": c.sha, "subject": c.subject, "toolchain": ln.toolchain, "target": ln.target,
                                "address": [f"{a.address:#x}", f"{b.address:#x}"], "shift": b.address - a.address,
                                "size": [a.size, b.size], "lines": [a.lines, b.lines], "phase": [a.phase, b.phase],
                                "neighbours": [[a.prev.name if a.prev else None, a.next.name if a.next else None],
                                               [b.prev.name if b.prev else None, b.next.name if b.next else None]],
                                "url": f"/commit/{c.sha}", "_order": i})
    changed.sort(key=lambda r: r.pop("_order"), reverse=True)
    return {"lines": cols, "changes": changed[:limit] if limit else [], "changes_total": len(changed)}


def inlined_data(points: list[InlinePoint], limit: int) -> dict | None:
    """Per (toolchain, target) line: the latest point, and the latest ``limit`` points whose instances or
    bytes differ from the line's previous one (newest first), with how many there are in all."""
    if not points:
        return None
    last: dict[tuple[str, str], InlinePoint] = {}
    changed = []
    for p in points:                    # history order; an arm64 or ThinLTO build: a line of its own
        key = (line_label(p.toolchain, p.arch, p.lto), p.target)
        prev = last.get(key)
        if prev is not None and (prev.instances, prev.bytes) != (p.instances, p.bytes):
            changed.append({"commit": p.commit_sha, "subject": p.subject, "toolchain": p.toolchain, "line": key[0],
                            "target": p.target,
                            "instances_old": prev.instances, "instances_new": p.instances, "old": prev.bytes,
                            "new": p.bytes, "delta": p.bytes - prev.bytes, "url": f"/commit/{p.commit_sha}"})
        last[key] = p
    current = [{"toolchain": p.toolchain, "line": line, "target": p.target, "commit": p.commit_sha,
                "instances": p.instances, "bytes": p.bytes, "including": p.including, "callers": p.callers,
                "units": p.units, "decl_files": p.decl_files}
               for (line, _), p in sorted(last.items(), key=lambda kv: (kv[1].toolchain, kv[0][0], kv[1].target))]
    return {"current": current, "changes": changed[::-1][:limit] if limit else [], "changes_total": len(changed),
            "points": len(points)}


def function_data(store: Store, name: str, toolchain: str | None = None, target: str | None = None,
                  limit: int = 50) -> dict:
    series = store.function_series(params.function_name(name), toolchain, target=target)
    inlined = inlined_data(store.inline_history(name, toolchain, target=target), limit)
    runtime = function_runtime(store.runtime_history(name, toolchain, target=target), limit)
    if not series.lines:
        where = f" under {toolchain}" if toolchain else ""
        if inlined is None and runtime is None:
            abort(404, description=f"no function {name} in any stored build{where}")
        return {"function": name, "toolchain": toolchain, "target": target, "points": 0, "chart": None,
                "current": [], "cost_chart": None, "changes": [], "changes_total": 0, "inlined": inlined,
                "runtime": runtime,
                "links": {"json": f"/api/function/{name}" + (f"?toolchain={toolchain}" if toolchain else "")}}
    lines = charts.ordered_lines(series)
    states = [charts.line_states(ln) for _, ln in lines]
    chart = charts.history_columns(series, lines, states)
    changed, n_changed = changes(chart, lines, series.commits, limit)
    current = []
    for (label, ln), st in zip(lines, states):
        i = next(k for k in range(len(st) - 1, -1, -1) if st[k] is not None)     # the line's latest point
        current.append({"line": label, "toolchain": ln.toolchain, "arch": ln.arch, "lto": ln.lto or "none",
                        "commit": series.commits[i].sha,
                        "size": ln.size[i] if ln.status[i] == "ok" else None,
                        "status": charts.status_text(ln, i, st[i])})
    return {"function": name, "toolchain": toolchain, "target": target, "points": series.points,
            "chart": chart, "current": current, "cost_chart": cost_columns(store, name, lines),
            "link": link_columns(store, name, lines, series.commits, limit),
            "changes": changed, "changes_total": n_changed, "inlined": inlined, "runtime": runtime,
            "links": {"json": f"/api/function/{name}" + (f"?toolchain={toolchain}" if toolchain else "")}}


def _args() -> dict:
    return {"toolchain": params.toolchain_arg(), "target": params.target_arg(),
            "limit": params.int_arg("changes", 50, 0, 1_000_000)}


@bp.get("/function/<name>")
def page(name: str):
    data = function_data(context.store(), name, **_args())
    return render_template("function.html", d=data, api=data["links"]["json"])


@bp.get("/api/function/<name>")
def api(name: str):
    return jsonify(function_data(context.store(), name, **_args()))
