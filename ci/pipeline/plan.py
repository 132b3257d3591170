"""Stage 1 of the pipeline: which commits a run reports on and builds, recorded in the store.

A range ``A..B`` reports on B's first-parent commits after A and builds A too (the first
commit is compared with it); a series is applied with ``git am`` patch by patch on its
base, and recorded with the patch that did not apply, if any.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from db.models import Commit, Series, SeriesPatch
from db.store import Store
from toolchains.git import am_locked, commit_range, git, pick_base
from toolchains.series import MboxSeries, read_mbox
from toolchains.source import Tree, cache_dir


def commit_info(tree: Tree, sha: str, parent: Commit | None = None) -> Commit:
    """Metadata of one commit; its generation from ``parent`` when that is its first parent."""
    out = git(tree.path, "log", "-1", "--format=%H%x00%P%x00%s%x00%an <%ae>%x00%cI", sha)
    full, parents, subject, author, date = out.rstrip("\n").split("\0")
    first = parents.split()[0] if parents.strip() else None
    if parent is not None and parent.sha == first and parent.generation is not None:
        gen = parent.generation + 1
    else:
        gen = int(git(tree.path, "rev-list", "--count", "--first-parent", full).strip())
    return Commit(full, first, subject, author, date, tree.name, generation=gen)


def commit_chain(tree: Tree, shas: list[str], parent: Commit | None = None) -> list[Commit]:
    out = []
    for sha in shas:
        parent = commit_info(tree, sha, parent)
        out.append(parent)
    return out


@dataclass
class RunPlan:
    tree: Tree
    commits: list[Commit]                 # to report on, oldest first
    to_build: list[Commit]                # commits plus the parents they are compared with
    series: Series | None = None


def plan_range(store: Store, tree: Tree, spec: str) -> RunPlan:
    shas = commit_range(tree.path, spec).commits
    first = commit_info(tree, shas[0])
    parents = [commit_info(tree, first.parent_sha)] if first.parent_sha else []
    commits = commit_chain(tree, shas, parents[0] if parents else None)
    store.record_commits(tree.name, parents + commits)
    return RunPlan(tree, commits, parents + commits)


def plan_series(store: Store, tree: Tree, mbox: Path, base: str | None = None,
                cover: Path | None = None) -> RunPlan:
    """The series of an mbox file (``sizewatch run --series``): :func:`plan_messages` of what it holds."""
    if cover is None:
        guess = mbox.with_name(mbox.stem + ".cover-letter.eml")
        cover = guess if guess.exists() else None
    return plan_messages(store, tree, read_mbox(mbox, cover), base)


def plan_messages(store: Store, tree: Tree, ser: MboxSeries, base: str | None = None) -> RunPlan:
    """Apply the series patch by patch and record it (with the patch that did not apply, if any).
    The bot hands its assembled messages on here as data, never through a file."""
    base_sha = pick_base(tree.path, ser, base)
    applied = am_locked(tree.path, ser, base_sha, cache_dir() / "worktrees" / f"am-{tree.name}")
    base_commit = commit_info(tree, base_sha)
    commits = commit_chain(tree, [a.commit for a in applied if a.commit], base_commit)
    failed = next((a for a in applied if a.status == "failed"), None)
    rec = Series(tree.name, ser.message_id, ser.subject, ser.version,
                 (ser.cover or ser.patches[0]).author, (ser.cover or ser.patches[0]).date,
                 ser.cover.body if ser.cover else "", base_sha,
                 "failed" if failed else "applied",
                 f"patch {failed.position} does not apply: {failed.error}" if failed else "",
                 patches=[SeriesPatch(a.position, a.subject, a.message_id, a.author, a.commit, a.status, a.error)
                          for a in applied])
    store.record_commits(tree.name, [base_commit, *commits])
    rec.id = store.record_series(rec)
    return RunPlan(tree, commits, [base_commit, *commits], rec)
