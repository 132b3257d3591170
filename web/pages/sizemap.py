"""``/map/build/<id>`` and ``/map/commit/<sha>``: text bytes as a treemap, directory → file → function
(analyzer.sizemap), for one build or for what a patch changed against its parent's build (area: the
change, colour: growth or shrink). Drawn in the browser with ECharts, served by the app (no CDN)."""
from __future__ import annotations

from flask import Blueprint, abort, jsonify, render_template

from analyzer.sizemap import Sym, build_map, diff_map
from db.models import Build
from db.store import Store
from toolchains.registry import sort_key
from web import context, params
from web.pages.commit import find_commit

bp = Blueprint("sizemap", __name__)


def _syms(store: Store, build_id: int) -> list[Sym]:
    return [Sym(s.name, s.size, s.letter, s.section, s.offset) for s in store.symbols_for(build_id)]


def _decls(store: Store, build_id: int) -> dict[str, str]:
    return {f.name: f.facts.get("decl", "") for f in store.functions_for(build_id)}


def _object(store: Store, b: Build):
    objs = [o for o in store.objects_for(b.id) if o.path == b.target] or store.objects_for(b.id)
    if not objs:
        abort(404, description=f"build {b.id} has no object (status {b.status})")
    return objs[0]


def _build_info(b: Build) -> dict:
    return {"id": b.id, "commit": b.commit_sha, "toolchain": b.toolchain, "version": b.toolchain_version,
            "target": b.target, "config": b.config_key, "status": b.status}


def build_map_data(store: Store, build_id: int) -> dict:
    b = store.get_build(build_id)
    if b is None:
        abort(404, description=f"no build {build_id} in the store")
    obj = _object(store, b)
    root = build_map(_syms(store, b.id), _decls(store, b.id), b.target, obj.text, obj.sections)
    commit = store.get_commit(b.commit_sha, b.tree)
    return {"mode": "build", "build": _build_info(b), "subject": commit.subject if commit else "",
            "text": obj.text, "total": root.value, "tree": root.to_dict(),
            "links": {"json": f"/api/map/build/{b.id}", "commit": f"/commit/{b.commit_sha}"}}


def diff_map_data(store: Store, rev: str, toolchain: str | None, target: str | None) -> dict:
    commit = find_commit(store, rev)
    builds = [b for b in store.builds_for_commit(commit.sha, commit.tree)
              if b.status == "ok" and (toolchain is None or b.toolchain == toolchain)
              and (target is None or b.target == target)]
    if not builds:
        abort(404, description=f"no successful build of {commit.sha[:12]}"
                               + (f" under {toolchain}" if toolchain else "") + (f" of {target}" if target else ""))
    builds.sort(key=lambda b: (sort_key(b.toolchain), b.target, -b.id))
    head = builds[0]
    base = store.find_build(commit.tree, commit.parent_sha, head.toolchain, head.config_key, head.target,
                            head.toolchain_version) if commit.parent_sha else None
    if base is None or base.status != "ok":
        abort(404, description=f"no successful {head.toolchain} build of the parent of {commit.sha[:12]}")
    old, new = _object(store, base), _object(store, head)
    decls = {**_decls(store, base.id), **_decls(store, head.id)}
    root = diff_map(_syms(store, base.id), _syms(store, head.id), decls, head.target, old.text, new.text,
                    old.sections, new.sections)
    others = sorted({b.toolchain for b in builds}, key=sort_key)
    return {"mode": "diff", "build": _build_info(head), "base": _build_info(base), "subject": commit.subject,
            "text": new.text, "old_text": old.text, "text_delta": new.text - old.text, "total": root.value,
            "tree": root.to_dict(), "toolchains": others,
            "links": {"json": f"/api/map/commit/{commit.sha}?toolchain={head.toolchain}&target={head.target}",
                      "commit": f"/commit/{commit.sha}", "build_map": f"/map/build/{head.id}",
                      "base_map": f"/map/build/{base.id}"}}


@bp.get("/map/build/<int:build_id>")
def build_page(build_id: int):
    data = build_map_data(context.store(), build_id)
    return render_template("sizemap.html", d=data, api=data["links"]["json"])


@bp.get("/api/map/build/<int:build_id>")
def build_api(build_id: int):
    return jsonify(build_map_data(context.store(), build_id))


@bp.get("/map/commit/<rev>")
def diff_page(rev: str):
    data = diff_map_data(context.store(), rev, params.toolchain_arg(), params.target_arg())
    return render_template("sizemap.html", d=data, api=data["links"]["json"])


@bp.get("/api/map/commit/<rev>")
def diff_api(rev: str):
    return jsonify(diff_map_data(context.store(), rev, params.toolchain_arg(), params.target_arg()))
