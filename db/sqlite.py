"""What every sqlite-backed part of the store shares: its connections, and retries while busy.

The pipeline's tables (``db.store``) and the bot's (``db.botstore``) live in one sqlite file
and use one connection per thread; reads retry while sqlite still answers busy/locked after
its own timeout (WAL recovery by another process), and any other database error becomes a
one-line StoreError.
"""
from __future__ import annotations

import functools
import json
import sqlite3
import threading
import time
import zlib
from contextlib import AbstractContextManager
from typing import Callable, Protocol, TypeVar

from db.errors import StoreError

T = TypeVar("T")
BUSY_TIMEOUT_MS = 60_000


class Connections(Protocol):
    """The connection of the calling thread, and one ``BEGIN IMMEDIATE`` transaction on it."""

    def connection(self) -> sqlite3.Connection: ...

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...


def retry_busy(fn: Callable[..., T]) -> Callable[..., T]:
    """Retry a read when sqlite still answers busy/locked after its own timeout (WAL recovery), or
    when a PostgreSQL store lost its session."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for attempt in range(20):
            try:
                return fn(*args, **kwargs)
            except sqlite3.OperationalError as e:
                msg = str(e)
                if ("locked" not in msg and "busy" not in msg) or attempt == 19:
                    raise StoreError(f"store: {msg}") from None
                time.sleep(0.05 * (attempt + 1))
            except sqlite3.DatabaseError as e:
                raise StoreError(f"store: {e}") from None
            except StoreError as e:
                # a PostgreSQL store whose session was lost (server restarted, connection cut): a read
                # is safe to repeat on a new session (db.store.PgStore reconnects), a few times
                from db.pg import StoreUnavailable
                if not isinstance(e, StoreUnavailable) or attempt >= 3:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")
    return wrapper


def s64(n: int | None) -> int | None:
    """An unsigned 64-bit address as the signed integer a column holds (sqlite and PostgreSQL
    integers are signed 64-bit: a kernel's 0xffffffff81000000 would not fit)."""
    return n - (1 << 64) if n is not None and n >= 1 << 63 else n


def u64(n: int | None) -> int | None:
    """The address :func:`s64` stored."""
    return n + (1 << 64) if n is not None and n < 0 else n


def compress(text: str | bytes | None) -> bytes | None:
    """Text and logs are stored zlib-compressed (text as UTF-8, undecodable bytes kept)."""
    if text is None:
        return None
    return zlib.compress(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text, 6)


# --- damaged rows ---------------------------------------------------------------------------------
# A row damaged on disk or by another tool (a blob that is not zlib, truncated JSON, text that is not
# UTF-8, text in an INTEGER/REAL column) must not take a page or a report down with it: readers
# substitute a marked value and note the damage for this thread, which the dashboard shows on the
# page it was reading (web.guard).

_damage = threading.local()
MAX_NOTES = 50


def note_damage(what: str) -> None:
    notes = getattr(_damage, "notes", None)
    if notes is None:
        notes = _damage.notes = []
    if len(notes) < MAX_NOTES and what not in notes:
        notes.append(what)


def take_damage() -> list[str]:
    """The damage noted on this thread since the last call (and forget it)."""
    notes = getattr(_damage, "notes", None) or []
    _damage.notes = []
    return notes


def damage_notes() -> list[str]:
    """The damage noted on this thread so far (kept)."""
    return list(getattr(_damage, "notes", None) or [])


def unreadable(what: str) -> str:
    note_damage(what)
    return f"[unreadable in the store: {what}]"


def text_factory(raw: bytes) -> str:
    """sqlite TEXT as str; bytes that are not UTF-8 (damage) shown with U+FFFD instead of raising."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        note_damage("text that is not UTF-8")
        return raw.decode("utf-8", "replace")


def loads(doc: str | None, what: str, fallback: type = dict):
    """A stored JSON column; on damage ``{}`` (dict) or a list holding the marker (list)."""
    try:
        return json.loads(doc)
    except (ValueError, TypeError):
        marker = unreadable(what)
        return [marker] if fallback is list else {}


_NUMBER = (int, float)


def number(value, what: str, default: int | float | None = 0):
    """A value of an INTEGER/REAL column. sqlite keeps text it cannot convert in such a column
    (``objects.text = 'abc'``): that reads as ``default``, noted as damage like a damaged JSON column."""
    if value is None or type(value) in _NUMBER:
        return value
    note_damage(what)
    return default


def summed(value, what: str) -> int | None:
    """An SQL ``sum()`` of an INTEGER column: sqlite adds text there as 0 and answers a REAL, which
    reads as None (unknown), noted as damage."""
    if value is None or type(value) is int:
        return value
    note_damage(what)
    return None


def numbers(values: list, what: str, default: int | float | None = 0) -> list:
    """:func:`number` over one column's values: the list itself when every value is a number."""
    if all(v is None or type(v) in _NUMBER for v in values):
        return values
    return [number(v, what, default) for v in values]


def decompress(blob: bytes | None, what: str = "a compressed column") -> str:
    if not blob:
        return ""
    try:
        return zlib.decompress(blob).decode("utf-8", "surrogateescape")
    except (zlib.error, TypeError):
        return unreadable(what)
