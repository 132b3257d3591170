"""Actions that start work: re-run the pipeline for a commit. Read-only unless the server was given
a token (``sizewatch serve --token/--token-file`` or ``$SIZEWATCH_TOKEN``); a request without the
right token gets 403.

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
    builds = store.builds_for_commit(commit.sha, commit.tree)
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
    return ["run", rng, "--tree", tree, "--toolchains", ",".join(tcs), "--targets", ",".join(targets),
            "--db", str(context.settings().db)]


def start_rerun(rev: str) -> tuple[Job, bool]:
    check_token()
    store = context.store()
    commit = find_commit(store, rev)
    argv = [*context.settings().command, *_rerun_args(store, commit)]
    return context.jobs().start(commit.sha, argv)


@bp.post("/commit/<rev>/rerun")
def rerun_form(rev: str):
    job, _ = start_rerun(rev)
    return redirect(f"/jobs/{job.id}", code=303)


@bp.post("/api/commit/<rev>/rerun")
def rerun_api(rev: str):
    job, started = start_rerun(rev)
    return jsonify({"job": job.to_dict(), "started": started, "url": f"/api/jobs/{job.id}"}), 202 if started else 200


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
    job = _job(jid)
    return jsonify({**job.to_dict(), "log": job.output()})
