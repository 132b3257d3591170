"""What every sqlite-backed part of the store shares: its connections, and retries while busy.

The pipeline's tables (``db.store``) and the bot's (``db.botstore``) live in one sqlite file
and use one connection per thread; reads retry while sqlite still answers busy/locked after
its own timeout (WAL recovery by another process), and any other database error becomes a
one-line StoreError.
"""
from __future__ import annotations

import functools
import sqlite3
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
    """Retry a read when sqlite still answers busy/locked after its own timeout (WAL recovery)."""
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
        raise AssertionError("unreachable")
    return wrapper


def compress(text: str | bytes | None) -> bytes | None:
    """Text and logs are stored zlib-compressed (text as UTF-8, undecodable bytes kept)."""
    if text is None:
        return None
    return zlib.compress(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text, 6)


def decompress(blob: bytes | None) -> str:
    return zlib.decompress(blob).decode("utf-8", "surrogateescape") if blob else ""
