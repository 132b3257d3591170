"""Rendered pages shared by every server process: a small sqlite file beside the store
(``<db>.pages``), keyed by the page's URL and the change counters under it (web.cache), holding
each page gzip-compressed (compressed once, sent as it is to the readers that accept gzip).

A key names one exact page: it never needs invalidating, only evicting. The file is bounded: when
it grows past ``max_bytes`` the least recently used pages go (use times are written at most once a
minute per page, so a hit costs one indexed read). It is a cache: any failure to read or write it
(busy, read-only directory) is a miss, never an error page.

The file sits beside the store, under a name anyone who can write that directory can plant (issue
27), so it is never followed (web.pagefile): only a regular file is opened (``O_NOFOLLOW``, then
sqlite without creating anything, then the name checked again to be that very file). A symbolic
link (even one to the store, or dangling), a FIFO or a socket there, or a file sqlite calls damaged,
is replaced by a new cache file made aside and renamed over the name, with one log line; a
directory is left alone and the pages are rendered per request.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

from web import pagefile

log = logging.getLogger("sizewatch.web")

SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    key   TEXT PRIMARY KEY,
    ctype TEXT NOT NULL,
    body  BLOB NOT NULL,          -- gzip
    size  INTEGER NOT NULL,
    used  REAL NOT NULL
)"""
# who is rendering which page right now (one row per key, gone when the page is stored)
CLAIMS = "CREATE TABLE IF NOT EXISTS rendering (key TEXT PRIMARY KEY, until REAL NOT NULL) WITHOUT ROWID"
CLAIM_SECONDS = 10.0    # a claim older than this is a renderer that died: the next reader renders
WAIT_STEP = 0.005
LOCK_SECONDS = 2.0
TOUCH_EVERY = 60.0      # seconds between use-time writes of one page
TRIM_EVERY = 64         # inserts between size checks


def _setup(conn: sqlite3.Connection) -> None:
    """What every connection runs first (on a file that is not a database, the first to fail)."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")          # a cache: a lost page is rendered again
    conn.execute(SCHEMA)
    conn.execute(CLAIMS)


class PageCache:
    def __init__(self, path: Path, max_bytes: int):
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._local = threading.local()
        self._puts = 0
        self._broken = False
        self._suspect: tuple | None = None      # the file a query found damaged: replaced when next opened

    def _conn(self) -> sqlite3.Connection | None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        if self._broken:
            return None
        try:
            # (a PostgreSQL store's cache lives in a directory of its own under the cache dir: web.settings)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = pagefile.connect(self.path, _setup, self._suspect, LOCK_SECONDS, log.warning)
        except pagefile.Busy:                   # another process making it, or sqlite's lock: next time
            return None
        except (pagefile.Refused, sqlite3.Error, OSError) as e:
            log.warning("page cache %s unusable, pages are rendered per request: %s", self.path, e)
            self._broken = True
            return None
        self._suspect = None
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _failed(self, e: sqlite3.Error) -> None:
        """A query failed: when sqlite calls the file damaged, drop this thread's connection and have
        the next one replace that very file (not one another process made meanwhile)."""
        if not pagefile.damaged(e):
            return
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            self._suspect = pagefile.identity(self.path)
            conn.close()

    def get(self, key: str) -> tuple[str, bytes] | None:
        """(content type, gzip body) of the page, or None."""
        conn = self._conn()
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT ctype, body, used FROM pages WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            now = time.time()
            if now - row[2] > TOUCH_EVERY:
                conn.execute("UPDATE pages SET used = ? WHERE key = ?", (now, key))
            return row[0], row[1]
        except sqlite3.Error as e:
            self._failed(e)
            return None

    def put(self, key: str, ctype: str, body: bytes) -> None:
        conn = self._conn()
        if conn is None or len(body) > self.max_bytes // 4:
            return
        try:
            conn.execute("INSERT OR REPLACE INTO pages(key, ctype, body, size, used) VALUES (?, ?, ?, ?, ?)",
                         (key, ctype, body, len(body), time.time()))
            self._puts += 1
            if self._puts % TRIM_EVERY == 1:
                self.trim()
        except sqlite3.Error as e:
            self._failed(e)

    def claim(self, key: str) -> bool:
        """True: render the page (nobody else is, or their claim expired); False: another request, in
        this or another process, is rendering it right now (wait for it: ``wait``). When a mail goes
        out, hundreds of readers ask for the same new page at once: one renders, the rest get its
        bytes instead of each rendering it again on the same cores."""
        conn = self._conn()
        if conn is None:
            return True
        now = time.time()
        try:
            cur = conn.execute("INSERT INTO rendering(key, until) VALUES (?, ?) "
                               "ON CONFLICT(key) DO UPDATE SET until = excluded.until WHERE until < ?",
                               (key, now + CLAIM_SECONDS, now))
            return cur.rowcount > 0
        except sqlite3.Error as e:
            self._failed(e)
            return True

    def release(self, key: str) -> None:
        conn = self._conn()
        if conn is not None:
            try:
                conn.execute("DELETE FROM rendering WHERE key = ?", (key,))
            except sqlite3.Error:
                pass

    def wait(self, key: str, seconds: float) -> tuple[str, bytes] | None:
        """The page once the request rendering it stored it, or None after ``seconds`` (or when that
        request gave up without storing it, e.g. its answer was an error)."""
        conn = self._conn()
        deadline = time.monotonic() + seconds
        while conn is not None and time.monotonic() < deadline:
            time.sleep(WAIT_STEP)
            hit = self.get(key)
            if hit is not None:
                return hit
            try:
                if conn.execute("SELECT 1 FROM rendering WHERE key = ?", (key,)).fetchone() is None:
                    return self.get(key)
            except sqlite3.Error:
                return None
        return None

    def trim(self) -> int:
        """Evict the least recently used pages until the file's pages fit in 3/4 of the bound; returns
        how many went."""
        conn = self._conn()
        if conn is None:
            return 0
        total = conn.execute("SELECT coalesce(sum(size), 0) FROM pages").fetchone()[0]
        if total <= self.max_bytes:
            return 0
        goal, gone, freed = total - self.max_bytes * 3 // 4, [], 0
        for key, size in conn.execute("SELECT key, size FROM pages ORDER BY used"):
            if freed >= goal:
                break
            gone.append((key,))
            freed += size
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("DELETE FROM pages WHERE key = ?", gone)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return len(gone)

    def stats(self) -> tuple[int, int]:
        """(pages, bytes) held."""
        conn = self._conn()
        if conn is None:
            return 0, 0
        return tuple(conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM pages").fetchone())
