"""The store's the connection plumbing every part of the store shares (part of ``db.store.SqliteStore``, split out by what it keeps).

The connection plumbing every part of the store shares: transactions, the schema version, name ids. A mixin: it only uses ``self._conn()``/``self._tx()`` and the other parts' methods,
so ``SqliteStore`` and ``PgStore`` answer every one of them alike."""
from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from typing import Iterable, Iterator

from db import migrate as _migrate
from db.errors import StoreError
from db.models import Commit



class SqliteBase:
    def connection(self) -> sqlite3.Connection:
        """This thread's connection (``db.sqlite.Connections``)."""
        return self._conn()

    def transaction(self):
        """One ``BEGIN IMMEDIATE`` transaction (``db.sqlite.Connections``)."""
        return self._tx()

    @property
    def schema_version(self) -> int:
        return _migrate.version(self._conn())

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only, cannot write")
        conn = self._conn()
        for attempt in range(20):
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as e:
                if ("locked" not in str(e) and "busy" not in str(e)) or attempt == 19:
                    raise StoreError(f"store: {e}") from None
                time.sleep(0.1)
        new_names: dict[str, int] = {}
        self._local.pending_names = new_names
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except (sqlite3.Error, StoreError):       # the connection is gone: so is the transaction
                pass
            raise
        finally:
            self._local.pending_names = None
        with self._names_lock:                 # ids handed out in a rolled-back transaction are not cached
            self._names.update(new_names)

    def _name_ids(self, conn: sqlite3.Connection, names: Iterable[str | None]) -> dict[str, int]:
        """Interned ids for names (inserting new ones); call inside _tx."""
        pending = self._local.pending_names
        want = {n for n in names if n is not None}
        out = {n: self._names[n] for n in want if n in self._names}
        out.update({n: pending[n] for n in want if n in pending})
        missing = [n for n in want if n not in out]
        if missing:
            # look up first: a store opened afresh knows most names already (a vmlinux's 75k),
            # and probing them is cheaper than offering each one to INSERT OR IGNORE
            self._select_names(conn, missing, out, pending)
            new = [n for n in missing if n not in out]
            if new:
                conn.executemany("INSERT OR IGNORE INTO names(name) VALUES (?)", ((n,) for n in new))
                self._select_names(conn, new, out, pending)
        return out

    @staticmethod
    def _select_names(conn: sqlite3.Connection, names: list[str], out: dict[str, int],
                      pending: dict[str, int]) -> None:
        for i in range(0, len(names), 500):
            chunk = names[i:i + 500]
            q = f"SELECT name, id FROM names WHERE name IN ({','.join('?' * len(chunk))})"
            for name, nid in conn.execute(q, chunk):
                out[name] = nid
                pending[name] = nid

    def _tree_id(self, conn: sqlite3.Connection, name: str, path: str = "", url: str = "") -> int:
        conn.execute("INSERT INTO trees(name, path, url) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                     "path = CASE WHEN excluded.path != '' THEN excluded.path ELSE trees.path END, "
                     "url = CASE WHEN excluded.url != '' THEN excluded.url ELSE trees.url END", (name, path, url))
        return conn.execute("SELECT id FROM trees WHERE name = ?", (name,)).fetchone()[0]

    def _commit_id(self, conn: sqlite3.Connection, tree_id: int, c: Commit) -> int:
        conn.execute(
            "INSERT INTO commits(tree_id, sha, parent_sha, subject, author, date, generation) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(tree_id, sha) DO UPDATE SET parent_sha = coalesce(excluded.parent_sha, commits.parent_sha), "
            "generation = coalesce(excluded.generation, commits.generation), "
            "subject = CASE WHEN excluded.subject != '' THEN excluded.subject ELSE commits.subject END, "
            "author = CASE WHEN excluded.author != '' THEN excluded.author ELSE commits.author END, "
            "date = CASE WHEN excluded.date != '' THEN excluded.date ELSE commits.date END",
            (tree_id, c.sha, c.parent_sha, c.subject, c.author, c.date, c.generation))
        return conn.execute("SELECT id FROM commits WHERE tree_id = ? AND sha = ?", (tree_id, c.sha)).fetchone()[0]
