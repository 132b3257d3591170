"""The worked example: build mm/page_alloc.o at each patch of examples/ and diff them.

This is what ``make run`` shows until the full pipeline stores results per commit.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from toolchains.kbuild import Config, build_object
from toolchains.registry import load
from toolchains.source import cache_dir, ensure_source, git
from toolchains.worktree import apply_series, ensure_worktree

EXAMPLE_MBOX = Path(__file__).resolve().parent.parent / "examples" / "rmqueue-always-inline.mbox"


@dataclass(frozen=True)
class BuiltCommit:
    commit: str
    subject: str
    object_path: Path


def build_series(toolchain: str = "gcc-12", target: str = "mm/page_alloc.o",
                 mbox: Path = EXAMPLE_MBOX, version: str = "6.1",
                 cache: Path | None = None) -> list[BuiltCommit]:
    """Build ``target`` at the series' base and after each patch; objects are kept per commit."""
    cache = cache or cache_dir()
    src = ensure_source(version, cache)
    commits = apply_series(src.path, mbox, None, cache / "worktrees" / "am")
    base = git(src.path, "rev-parse", f"{commits[0]}^").strip()
    tc = load(toolchain)
    config = Config()
    wt_path = cache / "worktrees" / f"{tc.name}-{config.key}"
    build_dir = cache / "build" / f"{tc.name}-{config.key}"
    out: list[BuiltCommit] = []
    for sha in [base, *commits]:
        keep = cache / "objects" / tc.name / config.key / sha / target
        if not keep.exists():
            wt = ensure_worktree(src.path, wt_path, sha)
            res = build_object(wt, build_dir, tc, target, config)
            keep.parent.mkdir(parents=True, exist_ok=True)
            tmp = keep.with_suffix(".tmp")
            shutil.copyfile(res.object_path, tmp)
            tmp.rename(keep)
        subject = git(src.path, "log", "-1", "--format=%s", sha).strip()
        out.append(BuiltCommit(sha, subject, keep))
    return out
