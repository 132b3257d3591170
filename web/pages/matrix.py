"""``/matrix/<sha>``: for one commit, every function whose size or inline status differs between
the toolchains (``?all=1``: every function)."""
from __future__ import annotations

from html import escape

from flask import Blueprint, jsonify, render_template
from markupsafe import Markup

from analyzer.clones import parse
from db.models import MatrixRow
from toolchains.registry import sort_key
from db.store import Store
from web import context, params
from web.formatting import num
from web.pages.commit import find_commit

bp = Blueprint("matrix", __name__)


def _differs(row: MatrixRow) -> bool:
    vals = list(row.cells.values())
    return any((v[0], v[2], bool(v[3])) != (vals[0][0], vals[0][2], bool(vals[0][3])) for v in vals[1:])


def by_source_function(rows: list[MatrixRow]) -> tuple[list[MatrixRow], dict[str, dict[str, list[str]]]]:
    """Clone symbols (``foo.constprop.0``, ``foo.cold``...) summed into their source function's row, so a
    function gcc clones and clang does not compares as one; returns the rows and, per function and
    toolchain, the symbols that make up its size."""
    groups: dict[str, list[MatrixRow]] = {}
    for r in rows:
        groups.setdefault(parse(r.name).base, []).append(r)
    out, symbols = [], {}
    for base, members in groups.items():
        if len(members) == 1 and members[0].name == base:
            out.append(members[0])
            continue
        own = next((m for m in members if m.name == base), None)
        cells = {}
        for tc in {tc for m in members for tc in m.cells}:
            sizes = [m.cells[tc][0] for m in members if tc in m.cells and m.cells[tc][0] is not None]
            facts = own.cells.get(tc, (None,) * 4) if own else (None,) * 4
            cells[tc] = (sum(sizes) if sizes else None, facts[1], facts[2], facts[3])
            symbols.setdefault(base, {})[tc] = sorted(m.name for m in members
                                                      if tc in m.cells and m.cells[tc][0] is not None)
        out.append(MatrixRow(base, cells))
    return out, symbols


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
                limit: int = PAGE_ROWS, offset: int = 0) -> dict:
    """Rows by spread (largest minus smallest size), widest first, a page of ``limit`` rows from
    ``offset``; each cell says whether it is the row's largest or smallest, so the page only prints.
    Cells are prepared for the rows shown only (a commit has ~600 functions, 8 toolchains each)."""
    commit = find_commit(store, rev)
    rows, symbols = by_source_function(store.toolchain_matrix(commit.sha, commit.tree, target))
    tcs = sorted({tc for r in rows for tc in r.cells}, key=sort_key)
    ranked = []
    for r in rows:
        if not show_all and not _differs(r):
            continue
        sizes = [v[0] for v in r.cells.values() if v[0] is not None]
        ranked.append((-(max(sizes) - min(sizes)) if sizes else 0, r.name, r, sizes))
    ranked.sort(key=lambda x: x[:2])
    out = []
    for neg_spread, _, r, sizes in ranked[offset:offset + limit]:
        top, bottom = (max(sizes), min(sizes)) if sizes else (None, None)
        cells = {}
        for tc in tcs:
            if tc not in r.cells:
                continue
            size, declared, ool, inlined = r.cells[tc]
            mark = "" if top == bottom or size is None else "largest" if size == top else \
                "smallest" if size == bottom else ""
            syms = symbols.get(r.name, {}).get(tc, [r.name] if size else [])
            cells[tc] = {"size": size, "declared": declared, "out_of_line": ool, "inlined_count": inlined,
                         "symbols": syms, "mark": mark, "status": _status(declared, ool, inlined),
                         "clones": " ".join(x[len(r.name):] for x in syms if x != r.name)}
        out.append({"function": r.name, "spread": -neg_spread, "cells": cells})
    return {"commit": commit.to_dict(), "toolchains": tcs, "all": show_all, "functions": len(rows),
            "differing": len(ranked), "rows": out, "limit": limit, "offset": offset,
            "links": {"commit": f"/commit/{commit.sha}", "json": f"/api/matrix/{commit.sha}"}}


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
            "offset": params.int_arg("offset", 0, 0, 1_000_000)}


@bp.get("/matrix/<rev>")
def page(rev: str):
    data = matrix_data(context.store(), rev, **_args())
    return render_template("matrix.html", d=data, api=data["links"]["json"])


@bp.get("/api/matrix/<rev>")
def api(rev: str):
    return jsonify(matrix_data(context.store(), rev, **_args()))
