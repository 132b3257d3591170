"""``/series/<id>``: the patches in order × toolchains; per cell the size(1) text delta against the
parent and the finding counts; failed builds and patches that did not apply shown as such."""
from __future__ import annotations

from flask import Blueprint, abort, jsonify, render_template

from ci.reports import text as render
from ci.reports.model import series_report
from db.store import Store
from web import context, params
from web.pages.cells import by_commit, column, filter_links, toolchains_of

bp = Blueprint("series", __name__)


def series_data(store: Store, sid: int, toolchains: list[str] | None = None, arch: str | None = None,
                lto: str | None = None) -> dict:
    """Columns per toolchain, arch and LTO mode (``web.pages.cells``), only ``toolchains``/``arch``/``lto``'s
    when given."""
    s = store.get_series(sid)
    if s is None:
        abort(404, description=f"no series {sid} in the store")
    cells = by_commit(store.build_summaries([p.commit_sha for p in s.patches if p.commit_sha], s.tree), arch, lto)
    tcs = [tc for tc in toolchains_of(cells) if not toolchains or tc.split(" ")[0] in toolchains]
    patches = []
    for p in s.patches:
        row = cells.get(p.commit_sha, {}) if p.commit_sha else {}
        patches.append({"position": p.position, "subject": p.subject, "author": p.author,
                        "message_id": p.message_id, "status": p.status, "error": p.error,
                        "commit": p.commit_sha, "url": f"/commit/{p.commit_sha}" if p.commit_sha else None,
                        "toolchains": {tc: row[tc] for tc in tcs if tc in row}})
    not_applied = sum(1 for p in s.patches if p.status != "applied")
    totals = {tc: column([p["toolchains"][tc] for p in patches if tc in p["toolchains"]], not_applied)
              for tc in tcs}
    return {"series": {"id": s.id, "subject": s.subject, "version": s.version, "author": s.author, "date": s.date,
                       "tree": s.tree, "message_id": s.message_id, "base": s.base_sha, "status": s.status,
                       "error": s.error, "cover": s.cover, "created_at": s.created_at},
            "toolchains": tcs, "patches": patches, "totals": totals, "arch": arch, "lto": lto,
            "filters": filter_links(arch, lto, {"toolchains": ",".join(toolchains or [])}),
            "links": {"text": f"/series/{s.id}.txt", "json": f"/api/series/{s.id}",
                      "base": f"/commit/{s.base_sha}" if s.base_sha else None}}


@bp.get("/series/<int:sid>")
def page(sid: int):
    data = series_data(context.store(), sid, params.toolchains_arg(), params.arch_arg(), params.lto_arg())
    return render_template("series.html", d=data, api=data["links"]["json"])


@bp.get("/api/series/<int:sid>")
def api(sid: int):
    return jsonify(series_data(context.store(), sid, params.toolchains_arg(), params.arch_arg(), params.lto_arg()))


@bp.get("/series/<int:sid>.txt")
def text(sid: int):
    store = context.store()
    if store.get_series(sid) is None:
        abort(404, description=f"no series {sid} in the store")
    rep = series_report(store, sid, params.toolchains_arg(), [t] if (t := params.target_arg()) else None)
    return render.text(rep), 200, {"Content-Type": "text/plain; charset=utf-8"}
