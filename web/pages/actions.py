"""Actions that start work: re-run the pipeline for a commit, bisect a function's change. Read-only unless the server was given
a token (``sizewatch serve --token/--token-file`` or ``$SIZEWATCH_TOKEN``); a request without the
right token gets 403, and so does a request for a job's JSON (``/api/jobs/N``: its argv names the tree
and the store) without it.

The token travels as ``Authorization: Bearer <token>``, an ``X-Sizewatch-Token`` header, or the
``token`` field of the page's form. A re-run starts ``sizewatch run <parent>..<sha>`` against the
server's store in the background: it builds and analyzes whatever the store lacks for that commit
(toolchains given in ``toolchains``, default those already stored for it; builds of an older
analysis; anything a killed run left out) and prints the report into the job's log.
"""
from __future__ import annotations

import hmac

from flask import Blueprint, abort, jsonify, redirect, render_template, request

from db.models import Commit
from db.store import Store
from toolchains.registry import DEFAULT_TOOLCHAINS
from toolchains.targets import DEFAULT_TARGETS
from web import context, params
from web.jobs import Job
from web.pages.commit import find_commit

bp = Blueprint("actions", __name__)


def check_token() -> None:
    want = context.settings().token
    if want is None:
        abort(403, description="actions are disabled: this server was started without a token")
    auth = request.headers.get("Authorization", "")
    given = (auth[7:] if auth.startswith("Bearer ") else None) or request.headers.get("X-Sizewatch-Token") \
        or request.form.get("token") or ""
    if not hmac.compare_digest(given.encode("utf-8", "replace"), want.encode("utf-8", "replace")):
        abort(403, description="a valid token is needed to start work on this server")


def _rerun_args(store: Store, commit: Commit) -> list[str]:
    from toolchains.registry import all_toolchains
    known = {t.name for t in all_toolchains()}
    from toolchains.flavour import matches
    arch, lto = _asked(request.form or request.args)
    builds = [b for b in store.builds_for_commit(commit.sha, commit.tree) if matches(b.arch, b.config_key, arch, lto)]
    raw = (request.form.get("toolchains") or request.args.get("toolchains") or "").strip()
    if raw:
        tcs = [t.strip() for t in raw.split(",") if t.strip()]
        bad = [t for t in tcs if not params.valid_toolchain(t) or t not in known]
        if bad:
            abort(400, description=f"unknown toolchain {bad[0][:40]!r}: known are {', '.join(sorted(known))}")
    else:
        tcs = sorted({b.toolchain for b in builds}) or list(DEFAULT_TOOLCHAINS)
    targets = sorted({b.target for b in builds}) or list(DEFAULT_TARGETS)
    tree = store.tree_path(commit.tree) or commit.tree.removeprefix("linux-")
    rng = f"{commit.parent_sha}..{commit.sha}" if commit.parent_sha else commit.sha
    config = _asked_args(builds, arch, lto)
    return ["run", rng, "--tree", tree, "--toolchains", ",".join(tcs), "--targets", ",".join(targets),
            *config, *context.settings().db_args()[0]]


def _config_args(builds) -> list[str]:
    """``--config NAME`` when the stored builds used one named config other than the default (a
    re-run or bisect of an ``allocator`` commit builds ``allocator`` again, not defconfig), with
    ``--arch arm64`` and ``--lto thin`` when that config was built for arm64 or with ThinLTO
    (``toolchains.flavour.run_flags``)."""
    from toolchains.flavour import run_flags
    got = {tuple(f) if (f := run_flags(b.config_key)) is not None else None for b in builds}
    if len(got) != 1 or None in got:
        return []
    return list(got.pop())


def _asked_args(builds, arch: str | None, lto: str | None) -> list[str]:
    """``_config_args`` of the builds of the arch and LTO mode asked for, with ``--arch``/``--lto`` added
    when none of them is stored yet (a first arm64 build of a commit)."""
    config = _config_args(builds)
    if arch not in (None, "x86_64") and "--arch" not in config:
        config += ["--arch", arch]
    if lto == "thin" and "--lto" not in config:
        config += ["--lto", lto]
    return config


def _asked(where) -> tuple[str | None, str | None]:
    """The arch and LTO mode a form asks for (``arch``, ``lto``: the commit page's filter, so a re-run
    from an arm64 page builds arm64 when the commit has x86_64 builds too); None: not asked."""
    from toolchains.flavour import LTO_MODES
    from toolchains.registry import ARCHES
    arch, lto = (where.get("arch") or "").strip() or None, (where.get("lto") or "").strip() or None
    if arch is not None and arch not in ARCHES:
        abort(400, description=f"arch={arch[:20]!r}: expected one of {', '.join(ARCHES)}")
    if lto is not None and lto not in LTO_MODES:
        abort(400, description=f"lto={lto[:20]!r}: expected one of {', '.join(LTO_MODES)}")
    return arch, lto


def start_rerun(rev: str) -> tuple[Job, bool]:
    check_token()
    store = context.store()
    commit = find_commit(store, rev)
    argv = [*context.settings().command, *_rerun_args(store, commit)]
    return context.jobs().start(commit.sha, argv, context.settings().db_args()[1])


def _started(job: Job, started: bool):
    """An action's JSON answer: 202 for a job just started, 200 for the one already running."""
    return jsonify({"job": job.to_dict(), "started": started, "url": f"/api/jobs/{job.id}"}), 202 if started else 200


@bp.post("/commit/<rev>/rerun")
def rerun_form(rev: str):
    job, _ = start_rerun(rev)
    return redirect(f"/jobs/{job.id}", code=303)


@bp.post("/api/commit/<rev>/rerun")
def rerun_api(rev: str):
    job, started = start_rerun(rev)
    return _started(job, started)


_CONDITIONS = ("grew_by", "outlined", "inlined", "crossed_line")


def _bisect_args(store: Store, name: str) -> tuple[str, list[str]]:
    """``sizewatch bisect`` for the function page's "find where this changed" form (or its JSON twin)."""
    f = request.form if request.form else request.args
    name = params.function_name(name)
    spec = (f.get("range") or "").strip()
    from toolchains.errors import BuildError
    from toolchains.git import split_range
    try:
        split_range(spec)                    # A..B..C, A...B: what a range must look like
    except BuildError as e:
        abort(400, description=str(e))
    a, sep, b = spec.partition("..")
    if not sep or not a or not b:
        abort(400, description=f"range={spec[:80]!r}: expected A..B (two commits of the store)")
    first, last = find_commit(store, a), find_commit(store, b)
    tc = (f.get("toolchain") or "").strip()
    if not params.valid_toolchain(tc):
        abort(400, description=f"toolchain={tc[:40]!r}: expected a toolchain name like gcc-12")
    cond = (f.get("condition") or "").strip()
    if cond not in _CONDITIONS:
        abort(400, description=f"condition={cond[:40]!r}: expected one of {', '.join(_CONDITIONS)}")
    flag = ["--" + cond.replace("_", "-")]
    if cond == "grew_by":
        raw = (f.get("bytes") or "").strip()
        if not raw.isdigit() or not 0 < int(raw) < 10**9:
            abort(400, description=f"bytes={raw[:20]!r}: expected a positive whole number of bytes")
        flag.append(raw)
    target = (f.get("target") or DEFAULT_TARGETS[0]).strip()
    if not params.valid_target(target):
        abort(400, description=f"target={target[:80]!r}: expected an object path like mm/page_alloc.o")
    tree = store.tree_path(first.tree) or first.tree.removeprefix("linux-")
    rng = f"{first.sha}..{last.sha}"
    from toolchains.flavour import matches
    arch, lto = _asked(f)              # the function line's arch and LTO mode (gcc-12 arm64), when given
    config = _asked_args([b for b in store.builds_for_commit(last.sha, last.tree)
                          if b.toolchain == tc and b.target == target and matches(b.arch, b.config_key, arch, lto)],
                         arch, lto)
    key = " ".join(x for x in (arch if arch not in (None, "x86_64") else "", "thinlto" if lto == "thin" else "") if x)
    return (f"bisect {name} {rng} {tc}{' ' + key if key else ''} {' '.join(flag)} {target}",
            ["bisect", name, rng, "--toolchain", tc, *flag, "--tree", tree, "--target", target, *config,
             *context.settings().db_args()[0]])


def start_bisect(name: str) -> tuple[Job, bool]:
    check_token()
    key, args = _bisect_args(context.store(), name)
    return context.jobs().start(key, [*context.settings().command, *args], context.settings().db_args()[1])


@bp.post("/function/<name>/bisect")
def bisect_form(name: str):
    job, _ = start_bisect(name)
    return redirect(f"/jobs/{job.id}", code=303)


@bp.post("/api/function/<name>/bisect")
def bisect_api(name: str):
    job, started = start_bisect(name)
    return _started(job, started)


def _job(jid: int) -> Job:
    job = context.jobs().get(jid)
    if job is None:
        abort(404, description=f"no job {jid} on this server")
    return job


@bp.get("/jobs/<int:jid>")
def job_page(jid: int):
    job = _job(jid)
    return render_template("job.html", job=job, log=job.output(), api=f"/api/jobs/{jid}")


@bp.get("/api/jobs/<int:jid>")
def job_api(jid: int):
    """A job's state, its argv (the tree's and the store's paths) and its log: for the holder of the
    token that may start jobs, checked before the id is looked up (no answer says which jobs exist)."""
    check_token()
    job = _job(jid)
    return jsonify({**job.to_dict(), "log": job.output()})
