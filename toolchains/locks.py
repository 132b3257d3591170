"""Inter-process file locks around shared cache entries.

Several toolchains build in parallel (and several test processes may share one
cache): unpacking the source tree or preparing a build dir must happen once,
with the others waiting for it rather than racing it.
"""
from __future__ import annotations

import fcntl
import os
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


@contextmanager
def reading(path: Path) -> Iterator[Path]:
    """Hold a kept file for reading: a shared flock on the file itself, so that the retention pass
    (``toolchains.retention``) leaves it alone until the block ends. FileNotFoundError when it
    was deleted before the lock was taken (the lock would be on a file nobody can open again)."""
    with open(path, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        try:
            if os.stat(path).st_ino != os.fstat(f.fileno()).st_ino:
                raise FileNotFoundError(2, "deleted while waiting for it", str(path))
            yield path
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def delete_unless_read(path: Path) -> bool:
    """Delete ``path`` unless someone holds it with ``reading`` (then keep it: False). Deleted under
    an exclusive flock, so a reader that opened it meanwhile finds it gone, never half there."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            if os.stat(path).st_ino != os.fstat(f.fileno()).st_ino:
                return False            # replaced by a new build meanwhile: not ours to delete
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
