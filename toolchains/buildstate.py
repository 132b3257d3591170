"""Which commit a persistent build dir reflects, so the fast path knows what changed since.

Two stamps, both plain text holding a commit sha:
- ``<builddir>/.sizewatch-synced``: the commit of the last make that finished cleanly
  (config, generated headers and objtool are that commit's); removed while a make runs,
  so an interrupted or failed make leaves "unknown" and the next build uses make again.
- ``<builddir>/<dir>/.<obj>.sizewatch``: the commit whose compile of that object wrote its
  ``.cmd`` record (command line and dependency list).
"""
from __future__ import annotations

from pathlib import Path

from toolchains.layout import atomic_write

SYNCED = ".sizewatch-synced"


def _object_stamp(build_dir: Path, target: str) -> Path:
    rel = Path(target)
    return build_dir / rel.parent / f".{rel.name}.sizewatch"


def _read(path: Path) -> str | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return text or None


def synced(build_dir: Path) -> str | None:
    return _read(build_dir / SYNCED)


def set_synced(build_dir: Path, sha: str | None) -> None:
    if sha is None:
        (build_dir / SYNCED).unlink(missing_ok=True)
    else:
        atomic_write(build_dir / SYNCED, sha + "\n")


def object_commit(build_dir: Path, target: str) -> str | None:
    return _read(_object_stamp(build_dir, target))


def set_object_commit(build_dir: Path, target: str, sha: str | None) -> None:
    path = _object_stamp(build_dir, target)
    if sha is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, sha + "\n")
