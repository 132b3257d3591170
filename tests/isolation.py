"""Processes that share no disk with this one: a mount namespace of their own (``unshare -m``, root or
a user namespace) where the given directories are empty private tmpfs. Used for queue workers that must
not see the coordinator's kernel tree, build dirs or caches (tests/test_queue_noshare.py,
bench/queue_bench.py)."""
from __future__ import annotations

import shlex
from pathlib import Path


def isolated(cmd: list[str], hide: list[Path]) -> list[str]:
    """``cmd`` in a mount namespace of its own where each existing directory of ``hide`` is an empty
    private tmpfs (the deepest first: hiding ~/.cache first would hide a mount point under it)."""
    dirs = sorted({p.resolve() for p in hide if p.is_dir()}, key=lambda p: -len(p.parts))
    mounts = "".join(f"mount -t tmpfs -o size=1m,mode=0755 sizewatch-hidden {shlex.quote(str(p))} && " for p in dirs)
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mounts}exec "$@"', "sh", *cmd]
