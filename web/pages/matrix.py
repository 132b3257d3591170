"""``/matrix/<sha>``: for one commit, every function whose size or inline status differs between
the toolchains (``?all=1``: every function)."""
from __future__ import annotations

from html import escape

from flask import Blueprint, jsonify, render_template
from markupsafe import Markup

from db import matrix as _matrix
from db.store import Store
from web import context, params
from web.formatting import num
from web.pages.commit import find_commit

bp = Blueprint("matrix", __name__)


# kept under their old names: the grouping is db.matrix's (the store computes the rows with it)
_differs = _matrix.differs
by_source_function = _matrix.by_source_function


def _status(declared: str | None, out_of_line: bool | None, inlined: int | None) -> str:
    if declared is None:
        return "not analyzed"
    if out_of_line:
        where = f"out of line, inl {inlined}x" if inlined else "out of line"
    else:
        where = f"inlined {inlined}x" if inlined else "–"
    if declared not in ("unknown", "plain"):
        where += f" · declared {declared.replace('_', ' ')}"
    return where


PAGE_ROWS = 100


def matrix_data(store: Store, rev: str, show_all: bool = False, target: str | None = None,
                limit: int = PAGE_ROWS, offset: int = 0, arch: str | None = None) -> dict:
    """Rows by spread (largest minus smallest size), widest first, a page of ``limit`` rows from
    ``offset``; each cell says whether it is the row's largest or smallest, so the page only prints.
    The rows were ranked when the commit's builds were written (db.matrix, 0013): a request reads its
    page of them. A commit stored before that is ranked here, the same way. Cells are prepared for
    the rows shown only (a commit has ~600 functions, 8 toolchains each). One matrix per arch
    (``arch``; default x86_64, else the commit's only arch), with links to the others."""
    commit = find_commit(store, rev)
    arches = sorted({b.arch for b in store.builds_for_commit(commit.sha, commit.tree)},
                    key=lambda a: (a != "x86_64", a))
    arch = arch or (arches[0] if arches else "x86_64")
    table = store.matrix_table(commit.sha, commit.tree, target, show_all, limit, offset, arch)
    if table is None:
        whole = _matrix.rank(store.toolchain_matrix(commit.sha, commit.tree, target, arch))
        table = _matrix.page(whole, show_all, limit, offset)
    tcs = table.toolchains
    out = []
    for line in table.lines:
        sizes = [v[0] for v in line.cells.values() if v[0] is not None]
        top, bottom = (max(sizes), min(sizes)) if sizes else (None, None)
        cells = {}
        for tc in tcs:
            if tc not in line.cells:
                continue
            size, declared, ool, inlined, syms = line.cells[tc]
            mark = "" if top == bottom or size is None else "largest" if size == top else \
                "smallest" if size == bottom else ""
            cells[tc] = {"size": size, "declared": declared, "out_of_line": ool, "inlined_count": inlined,
                         "symbols": list(syms), "mark": mark, "status": _status(declared, ool, inlined),
                         "clones": " ".join(x[len(line.function):] for x in syms if x != line.function)}
        out.append({"function": line.function, "spread": line.spread, "cells": cells})
    # with ?all=1 every row is counted as shown (as the page always did)
    aq = "" if arch == "x86_64" else f"?arch={arch}"
    return {"commit": commit.to_dict(), "arch": arch, "toolchains": tcs, "all": show_all, "functions": table.functions,
            "differing": table.functions if show_all else table.differing, "rows": out, "limit": limit,
            "offset": offset, "links": {"commit": f"/commit/{commit.sha}{aq}", "json": f"/api/matrix/{commit.sha}{aq}",
                                        "arches": {a: f"/matrix/{commit.sha}?arch={a}" for a in arches}}}


@bp.app_template_filter("matrix_cells")
def matrix_cells(row: dict, toolchains: list[str]) -> Markup:
    """A row's cells, one per toolchain. In Python, not in the template: a page has up to 1,600 cells,
    and Jinja's per-expression work on each cost a third of the page's time."""
    out = []
    for tc in toolchains:
        x = row["cells"].get(tc)
        if not x or (x["size"] is None and x["declared"] is None):
            out.append('<td class="num absent" data-value="">absent</td>')
            continue
        size = x["size"]
        clones = f'<br>as {escape(x["clones"])}' if x["clones"] else ""
        out.append(f'<td title="{escape(" + ".join(x["symbols"]))}" class="num {x["mark"]}" '
                   f'data-value="{0 if size is None else size}">{"no copy" if size is None else num(size)}'
                   f'<div class="istatus">{escape(x["status"])}{clones}</div></td>')
    return Markup("\n".join(out))


def _args() -> dict:
    return {"show_all": params.flag_arg("all"), "target": params.target_arg(),
            "limit": params.int_arg("limit", PAGE_ROWS, 1, 1_000_000),
            "offset": params.int_arg("offset", 0, 0, 1_000_000), "arch": params.arch_arg()}


@bp.get("/matrix/<rev>")
def page(rev: str):
    data = matrix_data(context.store(), rev, **_args())
    return render_template("matrix.html", d=data, api=data["links"]["json"])


@bp.get("/api/matrix/<rev>")
def api(rev: str):
    return jsonify(matrix_data(context.store(), rev, **_args()))
