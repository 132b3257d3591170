"""``/commit/<sha-or-prefix>``: the patch page. Per toolchain: the bloat-o-meter table against the
parent (sortable), clone-aware groups, inline changes with the compilers' reasons, where inlined code
landed (per inlined callee and declaring file, from the stored inline cost), alignment and
cache-line crossings with their headroom, a measured vmlinux's fast path in executed instructions per
alloc/free pair under QEMU TCG, the build's own findings and its compiler errors.

The same report as plain text is ``/commit/<sha>.txt`` (what ``sizewatch report`` prints) and as
JSON ``/api/commit/<sha>``.
"""
from __future__ import annotations

from flask import Blueprint, abort, jsonify, render_template

from analyzer import formats
from analyzer.bloat import Comparison
from analyzer.clones import parse
from analyzer import link_views
from analyzer.finding_details import Crossing, InlineChange, NowInlined, NowOutOfLine, OutOfLineCopy
from ci.reports import text as render
from ci.reports.model import PatchReport, ToolchainReport, commit_report, finding_order
from db.models import Commit, FindingRow
from db.store import Store
from toolchains.flavour import label, matches
from web import context, params
from web.pages.cells import filter_links
from web.pages.runtime_rows import commit_runtime

bp = Blueprint("commit", __name__)


def find_commit(store: Store, rev: str) -> Commit:
    commit = store.get_commit(params.commit_ref(rev))
    if commit is None:
        abort(404, description=f"no commit {rev} in the store")
    return commit


def _table(t: Comparison) -> dict:
    d = formats.table_dict(t)
    for r in d["rows"]:
        r["function"] = parse(r["name"]).base
    return d


def _clone_groups(t: Comparison) -> list[dict]:
    """Only the groups where a clone (.part, .constprop, .isra, .cold...) is involved."""
    out = []
    for g in formats.clone_groups(t):
        if not any(parse(m.name).is_clone for m in g.members) and not any(
                parse(n).base == g.base and n != g.base for n in (t.old_sizes.keys() | t.new_sizes.keys())):
            continue
        names = sorted(n for n in t.old_sizes.keys() | t.new_sizes.keys() if parse(n).base == g.base)
        out.append({"function": g.base, "old": g.old, "new": g.new, "delta": g.delta, "moved": g.delta == 0,
                    "members": [{"name": n, "old": t.old_sizes.get(n), "new": t.new_sizes.get(n),
                                 "delta": (t.new_sizes.get(n) or 0) - (t.old_sizes.get(n) or 0)} for n in names]})
    return out


def _finding(f: FindingRow) -> dict:
    d = f.details
    change = d if isinstance(d, InlineChange) else None
    copy = d if isinstance(d, OutOfLineCopy) else None
    return {"kind": f.kind, "function": f.function, "severity": f.severity or "info", "message": f.message,
            "reason": d.reason, "was": change.base or None if change else None,
            "now": change.head or None if change else None,
            "declared": change.declared_head if change else copy.declared if copy else None,
            "pushed_by": list(d.pushed_by) if isinstance(d, NowOutOfLine) else [],
            "inlined_into": d.inlined_into if isinstance(d, NowInlined) else {},
            "size": d.base_size if isinstance(d, NowInlined) else d.size if isinstance(d, (NowOutOfLine, OutOfLineCopy))
            else None}


def _crossing(f: FindingRow) -> dict:
    d = f.details if isinstance(f.details, Crossing) else Crossing()
    return {"function": f.function, "message": f.message, "delta": d.delta, "crossed": list(d.crossed),
            "placed": d.placed, "base": d.base.to_dict() if d.base else {}, "head": d.head.to_dict() if d.head else {}}


def _link(t: ToolchainReport) -> dict | None:
    """A linked target's hot functions: the changed ones against the parent (analyzer.link_views), or
    where each sits when there is no parent to compare with; None for objects."""
    if not t.link_layout:
        return None
    rows = link_views.rows(t.link_moves)
    return {"compared": t.link_moves is not None, "rows": rows,
            "unchanged": len(t.link_moves) - len(rows) if t.link_moves is not None else None,
            "layout": [{"function": p.name, "section": p.section, "address": f"{p.address:#x}", "size": p.size,
                        "lines": p.lines, "phase": p.phase, "pad_before": p.pad_before, "pad_after": p.pad_after,
                        "prev": p.prev.name if p.prev else None, "next": p.next.name if p.next else None}
                       for p in t.link_layout]}


def toolchain_data(t: ToolchainReport) -> dict:
    """The page's data for one toolchain: the report model's (ci.reports.model), rendered; nothing
    is read from the store here, so the page, ``sizewatch report`` and the mail cannot disagree."""
    col = label(t.toolchain, t.arch, t.lto)
    return {
        "toolchain": t.toolchain, "version": t.toolchain_version, "target": t.target, "config": t.config_key,
        "arch": t.arch, "lto": t.lto or "none", "label": col, "anchor": col.replace(" ", "-"),
        "status": t.status, "build_id": t.build_id, "base_build_id": t.base_build_id, "base_status": t.base_status,
        "seconds": t.seconds, "analyzed": t.analyzed, "errors": t.errors,
        "text": {"old": t.base_text, "new": t.text,
                 "delta": None if t.text is None or t.base_text is None else t.text - t.base_text},
        "size_text": t.size_text,          # vmlinux: binutils size's lines, parent and this build
        "tables": [_table(tab) for tab in t.tables],
        "clone_groups": [g for tab in t.tables for g in _clone_groups(tab)],
        "inline_changes": [_finding(f) for f in t.inline_changes],
        "crossings": [_crossing(f) for f in t.crossings],
        "other_changes": [_finding(f) for f in t.other_changes],
        "likely_paths": t.likely_path_rows(),
        "link": _link(t),
        "inline_cost": t.inline_cost.to_dict() if t.inline_cost is not None else None,
        "runtime": commit_runtime(t.runtime),      # measured vmlinux: the fast path under emulation
        "build_findings": [_finding(f) for f in sorted(t.new_in_build, key=finding_order)],
        "carried": t.carried,
        "links": {"log": f"/build/{t.build_id}/log"},
    }


def report_for(store: Store, commit: Commit, toolchains: list[str] | None, target: str | None,
               arch: str | None = None, lto: str | None = None) -> PatchReport:
    """The commit's report, only the builds of ``arch`` and ``lto`` when given (``?arch=``, ``?lto=``)."""
    rep = commit_report(store, commit.sha, commit.tree, toolchains, [target] if target else None,
                        cache=context.symbol_cache())
    rep.toolchains = [t for t in rep.toolchains if matches(t.arch, t.config_key, arch, lto)]
    return rep


def commit_data(store: Store, rev: str, toolchains: list[str] | None = None, target: str | None = None,
                arch: str | None = None, lto: str | None = None) -> dict:
    """The patch page's data; ``arches``: those the commit has builds of (the re-run form's choice)."""
    commit = find_commit(store, rev)
    rep = report_for(store, commit, toolchains, target, arch, lto)
    series = []
    for s in store.series_for_commit(commit.sha):
        pos = next((p.position for p in s.patches if p.commit_sha == commit.sha), None)
        series.append({"id": s.id, "subject": s.subject, "position": pos, "patches": len(s.patches),
                       "url": f"/series/{s.id}"})
    parent = store.get_commit(commit.parent_sha, commit.tree) if commit.parent_sha else None
    return {"commit": commit.to_dict(), "series": series,
            "parent": {"sha": commit.parent_sha, "subject": parent.subject if parent else None,
                       "stored": parent is not None},
            "toolchains": [toolchain_data(t) for t in rep.toolchains], "arch": arch, "lto": lto,
            "filters": filter_links(arch, lto, {"toolchains": ",".join(toolchains or []), "target": target}),
            "arches": sorted({b.arch for b in store.builds_for_commit(commit.sha, commit.tree)},
                             key=lambda a: (a != "x86_64", a)),
            "links": {"text": f"/commit/{commit.sha}.txt", "json": f"/api/commit/{commit.sha}",
                      "matrix": f"/matrix/{commit.sha}" + (f"?arch={arch}" if arch else ""), "rerun": f"/api/commit/{commit.sha}/rerun",
                      "parent": f"/commit/{commit.parent_sha}" if parent else None}}


def _args() -> dict:
    return {"toolchains": params.toolchains_arg(), "target": params.target_arg(), "arch": params.arch_arg(),
            "lto": params.lto_arg()}


@bp.get("/commit/<rev>")
def page(rev: str):
    data = commit_data(context.store(), rev, **_args())
    return render_template("commit.html", d=data, api=data["links"]["json"])


@bp.get("/api/commit/<rev>")
def api(rev: str):
    return jsonify(commit_data(context.store(), rev, **_args()))


@bp.get("/commit/<rev>.txt")
def text(rev: str):
    store = context.store()
    args = _args()
    rep = report_for(store, find_commit(store, rev), **args)
    return render.patch_text(rep), 200, {"Content-Type": "text/plain; charset=utf-8"}


@bp.get("/build/<int:build_id>/log")
def build_log(build_id: int):
    store = context.store()
    b = store.get_build(build_id)
    if b is None:
        abort(404, description=f"no build {build_id} in the store")
    head = (f"# build {b.id}: {b.commit_sha} {b.toolchain} ({b.toolchain_version}) {b.target} "
            f"[{b.config_key}]: {b.status}, {b.seconds:.1f} s\n")
    return head + (store.build_log(build_id) or "(no log stored)\n"), 200, {"Content-Type": "text/plain; charset=utf-8"}
