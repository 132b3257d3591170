"""Keep linked kernels only for the newest commits: a vmlinux with DWARF is 40-730 MB.

The store keeps what reports need of every build (symbols, sections, facts); the vmlinux file
itself is only needed to analyze it again or to look at it by hand, so per (toolchain, config)
only the ``keep`` most recently built or read ones stay in ``<cache>/objects/<tc>/<config>/``.
"Recent" is the file's mtime: a build writes it, ``touch`` (the pipeline, on every read) renews
it. A file someone holds with ``toolchains.locks.reading`` is never deleted; its build record
(``vmlinux.json``) and log stay, so a later build of that commit knows to make it again.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from toolchains.locks import delete_unless_read

DEFAULT_KEEP = 3


def touch(path: Path) -> None:
    """Mark a kept file as just used (it counts as the newest for retention)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        pass


def kept(objects: Path, name: str = "vmlinux") -> list[Path]:
    """The kept ``name`` files under ``objects`` (one per commit dir), newest first."""
    out = []
    try:
        dirs = list(os.scandir(objects))
    except FileNotFoundError:
        return []
    for d in dirs:
        if not d.is_dir(follow_symlinks=False):
            continue
        p = Path(d.path) / name
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        out.append((st.st_mtime_ns, p))
    return [p for _, p in sorted(out, key=lambda t: (-t[0], str(t[1])))]


def prune(objects: Path, keep: int = DEFAULT_KEEP, name: str = "vmlinux",
          done: Callable[[str], bool] = lambda sha: True) -> list[Path]:
    """Delete all but the ``keep`` newest ``name`` files under ``objects``; returns what went.
    Only files whose commit ``done(sha)`` says is stored go: a vmlinux built but not yet analyzed
    (a build thread or another worker runs ahead of the analysis) stays however old it is. Files
    being read are skipped too (they go in a later pass)."""
    if keep < 0:
        raise ValueError("keep must be >= 0")
    return [p for p in kept(objects, name)[keep:] if done(p.parent.name) and delete_unless_read(p)]
