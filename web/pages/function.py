"""``/function/<name>``: one function's size across the stored commits, a line per toolchain
(``?toolchain=`` keeps one), its inline status at every point, and the commits where it changed."""
from __future__ import annotations

from flask import Blueprint, abort, jsonify, render_template

from db.models import HistoryPoint
from db.store import Store
from web import charts, context, params

bp = Blueprint("function", __name__)


def changes(points: list[HistoryPoint], states: list[int], limit: int) -> tuple[list[dict], int]:
    """The latest ``limit`` points (newest first) whose size or inline status differs from the previous
    point of the same line, and how many there are in all."""
    last: dict[tuple, int] = {}
    changed: list[tuple[int, int]] = []
    for i, p in enumerate(points):
        key = (p.toolchain, p.target)
        j = last.get(key)
        last[key] = i
        if j is None:
            continue
        q = points[j]
        size = p.size if p.status == "ok" else None
        prev_size = q.size if q.status == "ok" else None
        if size != prev_size or states[i] != states[j] or p.inlined_count != q.inlined_count:
            changed.append((j, i))
    out = []
    for j, i in reversed(changed[-limit:] if limit else []):
        p, q = points[i], points[j]
        size = p.size if p.status == "ok" else None
        prev_size = q.size if q.status == "ok" else None
        out.append({"commit": p.commit_sha, "subject": p.subject, "date": p.date, "toolchain": p.toolchain,
                    "target": p.target, "old": prev_size, "new": size,
                    "delta": None if size is None or prev_size is None else size - prev_size,
                    "was": charts.status_text(q), "now": charts.status_text(p), "url": f"/commit/{p.commit_sha}"})
    return out, len(changed)


def function_data(store: Store, name: str, toolchain: str | None = None, target: str | None = None,
                  limit: int = 50) -> dict:
    points = store.function_history(params.function_name(name), toolchain, target=target)
    if not points:
        where = f" under {toolchain}" if toolchain else ""
        abort(404, description=f"no function {name} in any stored build{where}")
    states = [charts.state(p) for p in points]
    cols = charts.history_columns(points, states)
    changed, n_changed = changes(points, states, limit)
    multi_target = len({p.target for p in points}) > 1
    latest: dict[str, HistoryPoint] = {}
    for p in points:                          # history order: the last point of each line wins
        latest[f"{p.toolchain} {p.target}" if multi_target else p.toolchain] = p
    current = [{"line": label, "toolchain": latest[label].toolchain, "commit": latest[label].commit_sha,
                "size": latest[label].size if latest[label].status == "ok" else None,
                "status": charts.status_text(latest[label])} for label in (ln["label"] for ln in cols["lines"])]
    return {"function": name, "toolchain": toolchain, "target": target, "points": len(points),
            "chart": cols, "current": current,
            "changes": changed, "changes_total": n_changed,
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
