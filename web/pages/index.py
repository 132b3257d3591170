"""``/``: the recent series and commits, each with its worst finding per toolchain."""
from __future__ import annotations

from flask import Blueprint, jsonify, render_template

from db.store import Store
from web import context, params
from web.pages.cells import by_commit, column, filter_links, toolchains_of

bp = Blueprint("index", __name__)


def index_data(store: Store, commits: int = 20, series: int = 6, tree: str | None = None,
               arch: str | None = None, lto: str | None = None) -> dict:
    """Columns per toolchain, arch and LTO mode (``web.pages.cells``); ``arch``/``lto``: only those builds."""
    recent_series = store.list_series(limit=series, tree=tree)
    recent = store.list_commits(limit=commits, tree=tree)
    shas = {c.sha for c in recent} | {p.commit_sha for s in recent_series for p in s.patches if p.commit_sha}
    cells = by_commit(store.build_summaries(sorted(shas), tree), arch, lto)
    tcs = toolchains_of(cells)
    out_series = []
    for s in recent_series:
        failed = [p for p in s.patches if p.status != "applied"]
        cols = {}
        for tc in tcs:
            cs = [cells[p.commit_sha][tc] for p in s.patches if p.commit_sha and tc in cells.get(p.commit_sha, {})]
            if cs or failed:
                cols[tc] = column(cs, len(failed))
        out_series.append({"id": s.id, "url": f"/series/{s.id}", "subject": s.subject, "version": s.version,
                           "author": s.author, "date": s.date, "tree": s.tree, "status": s.status,
                           "error": s.error, "patches": len(s.patches), "not_applied": len(failed),
                           "message_id": s.message_id, "created_at": s.created_at, "toolchains": cols})
    out_commits = [{"sha": c.sha, "url": f"/commit/{c.sha}", "subject": c.subject, "author": c.author,
                    "date": c.date, "tree": c.tree, "toolchains": cells.get(c.sha, {})} for c in recent]
    return {"toolchains": tcs, "series": out_series, "commits": out_commits, "arch": arch, "lto": lto,
            "filters": filter_links(arch, lto, {"tree": tree})}


def _args() -> dict:
    return {"commits": params.int_arg("commits", 20, 0, 500), "series": params.int_arg("series", 6, 0, 200),
            "tree": params.tree_arg(), "arch": params.arch_arg(), "lto": params.lto_arg()}


@bp.get("/")
def page():
    data = index_data(context.store(), **_args())
    return render_template("index.html", d=data, api="/api/")


@bp.get("/api/")
@bp.get("/api")
def api():
    return jsonify(index_data(context.store(), **_args()))
