"""A series' commits carried between machines as git bundles (issue 27: workers share no disk).

The coordinator applies a series with ``git am`` in its own copy of Debian's tree; a worker on
another machine has its own copy, made the same way (``toolchains.source``: the same root commit sha
everywhere), but not the commits ``git am`` made. ``create`` packs ``root..commit`` of the
coordinator's tree, ``fetch`` puts it into the worker's tree after checking it: ``git bundle verify``
(a bundle, whose prerequisites the tree has), one head and that head the commit asked for, every
object hashed and checked on the way in (``fetch.fsckObjects``). A commit is named by its sha, so the
worker builds exactly the commit the coordinator planned, or nothing.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from toolchains.errors import BuildError
from toolchains.git import git, has_commit
from toolchains.locks import file_lock

MAX_BUNDLE = 64 * 1024 * 1024         # bytes: a series' commits are a few trees and blobs, never this
REF = "refs/sizewatch/queued/"        # where the commits a bundle carries are kept (git gc keeps them)
# every object fetched is hashed and checked (git's -c, as environment: git's errors name "fetch")
FSCK = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "fetch.fsckObjects", "GIT_CONFIG_VALUE_0": "true",
        "GIT_CONFIG_KEY_1": "transfer.fsckObjects", "GIT_CONFIG_VALUE_1": "true"}


def root_commit(tree: Path, sha: str) -> str:
    """The commit ``sha`` descends from that has no parent (Debian's tree: the same on every machine)."""
    roots = git(tree, "rev-list", "--max-parents=0", sha).split()
    if len(roots) != 1:
        raise BuildError(f"{sha[:12]}: descends from {len(roots)} root commits in {tree}; a bundle needs one")
    return roots[0]


def create(tree: Path, base: str, sha: str, limit: int = MAX_BUNDLE) -> bytes:
    """The bytes of a bundle of ``base..sha`` of ``tree`` (its one head ``REF<sha>``); at most ``limit``."""
    ref = REF + sha
    git(tree, "update-ref", ref, sha)           # a bundle's heads are refs: a bare sha makes an empty one
    with tempfile.TemporaryDirectory(prefix="sizewatch-bundle-") as tmp:
        path = Path(tmp) / "series.bundle"
        git(tree, "bundle", "create", "-q", str(path), f"{base}..{ref}")
        size = path.stat().st_size
        if size > limit:
            raise BuildError(f"{sha[:12]}: its bundle from {base[:12]} is {size} bytes, over the {limit} allowed")
        return path.read_bytes()


def fetch(tree: Path, sha: str, data: bytes, limit: int = MAX_BUNDLE) -> str:
    """Put the commit ``sha`` of the bundle ``data`` into ``tree``, checked; returns ``sha`` as ``tree`` now
    has it. A bundle that is not one, lacks its base here, carries another head or damaged objects is a
    one-line BuildError and leaves no ref behind."""
    if len(data) > limit:
        raise BuildError(f"{sha[:12]}: its bundle is {len(data)} bytes, over the {limit} allowed")
    ref = REF + sha
    with tempfile.TemporaryDirectory(prefix="sizewatch-bundle-") as tmp:
        path = Path(tmp) / "series.bundle"
        path.write_bytes(data)
        git(tree, "bundle", "verify", "-q", str(path))
        heads = [ln.split() for ln in git(tree, "bundle", "list-heads", str(path)).splitlines() if ln.strip()]
        if heads != [[sha, ref]]:
            raise BuildError(f"{sha[:12]}: the bundle's head is not that commit "
                             f"({' '.join(h[0][:12] for h in heads) or 'none'})")
        with file_lock(tree.parent / f".{tree.name}.fetch.lock"):
            git(tree, "fetch", "-q", "--no-tags", "--no-write-fetch-head", str(path), f"{ref}:{ref}", env=FSCK)
    got = has_commit(tree, ref)
    if got != sha:
        raise BuildError(f"{sha[:12]}: {tree} holds {str(got)[:12]} after fetching its bundle")
    return got
