"""Row helpers every part of the store shares: the build row's SELECT and its reading, the
clock writes are stamped with, and nm's text letters."""
from __future__ import annotations

from datetime import datetime, timezone

from db.models import Build
from db.sqlite import loads, number

TEXT_LETTERS = ("t", "T", "w", "W")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


_BUILD_SELECT = """
SELECT b.id, t.name, c.sha, tc.name, tc.version, cf.key, b.target, b.status, b.method, b.seconds,
       b.started_at, b.errors, b.analysis_version, cf.config_hash, cf.arch
FROM builds b
JOIN commits c ON c.id = b.commit_id
JOIN trees t ON t.id = c.tree_id
JOIN toolchains tc ON tc.id = b.toolchain_id
JOIN configs cf ON cf.id = b.config_id
"""


def _build(row: tuple) -> Build:
    r = list(row)
    r[11] = loads(r[11], f"errors of build {r[0]}", list)
    r[9] = number(r[9], f"seconds of build {r[0]}", 0.0)
    r[12] = number(r[12], f"analysis version of build {r[0]}")
    return Build(*r)
