"""Inter-process file locks around shared cache entries.

Several toolchains build in parallel (and several test processes may share one
cache): unpacking the source tree or preparing a build dir must happen once,
with the others waiting for it rather than racing it.
"""
from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created if missing) for the block's duration."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
