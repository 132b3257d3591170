"""Which kernel tree a worker builds a job in: its own, fed through the store (issue 27).

A job names its tree (``linux-6.1``) and where the coordinator has it (``tree_path``). On one host
the worker builds there, as before. A worker on another machine shares nothing with the coordinator
but Redis and the store, so:

- the coordinator (``publish``), before it enqueues a commit of Debian's linux-source tree, writes the
  commit's git bundle into the store: the commits from the tree's root (the same sha on every machine,
  ``toolchains.source``) up to it, what ``git am`` made there;
- the worker (``local_tree``) builds in ``tree_path`` when that is a tree of its own holding the commit;
  else in its own Debian tree of that version (``ensure_source`` under its own cache, unpacked on first
  use), fetching the commit from the store's bundle when that tree lacks it (``toolchains.bundle``:
  verified, fsck'd, its head the job's sha). A user's tree given by path travels in no bundle: a
  worker without that tree refuses the job, saying so.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from ci.pipeline.run import BuildJob
from ci.queue.names import QueueError
from db.store import Store
from toolchains import bundle
from toolchains.errors import BuildError
from toolchains.git import has_commit
from toolchains.source import debian_version, ensure_source


def publish(store: Store, jobs: Iterable[BuildJob], progress: Callable[[str], None] = lambda s: None) -> int:
    """Write the bundle of every commit of ``jobs`` in a Debian tree that the store lacks and a fresh
    Debian tree would lack (its root commit needs none); returns how many were written."""
    n, seen = 0, set()
    for job in jobs:
        key = (job.tree, job.commit.sha)
        if key in seen:
            continue
        seen.add(key)
        tree = Path(job.tree_path)
        if debian_version(tree) is None:
            continue                              # a user's tree: workers need it at that path
        base = bundle.root_commit(tree, job.commit.sha)
        if base == job.commit.sha or store.bundle_for(job.tree, job.commit.sha) is not None:
            continue
        data = bundle.create(tree, base, job.commit.sha)
        store.record_bundle(job.tree, job.commit.sha, base, data)
        n += 1
    if n:
        progress(f"queue: {n} commit(s) written to the store as git bundles for workers without this tree")
    return n


def local_tree(job: BuildJob, read_bundle: Callable[[], bytes | None]) -> Path:
    """The tree of this machine to build ``job`` in, holding its commit (fetched from ``read_bundle()``,
    the store's bundle, when needed); a ``QueueError`` says what this worker lacks."""
    sha = job.commit.sha
    given = Path(job.tree_path)
    if (given / ".git").exists() and has_commit(given, sha) == sha:
        return given                              # one host, or a tree every machine has at that path
    version = job.tree.removeprefix("linux-") if job.tree.startswith("linux-") else None
    if version is None or not _is_version(version):
        raise QueueError(f"{job.tree}: this worker needs that tree at {job.tree_path} holding {sha[:12]} "
                         "(only Debian's linux-source trees come through the store)")
    try:
        own = ensure_source(version).path         # this worker's own, under its own cache
        if has_commit(own, sha) == sha:
            return own
        data = read_bundle()
        if data is None:
            raise QueueError(f"{job.tree}: {sha[:12]} is neither in this worker's tree {own} nor in the store "
                             "as a bundle (a coordinator older than the workers?)")
        bundle.fetch(own, sha, data)
    except BuildError as e:
        raise QueueError(f"{job.tree} {sha[:12]}: {e}") from None
    return own


def _is_version(v: str) -> bool:
    return all(p.isdigit() for p in v.split(".")) and bool(v)
