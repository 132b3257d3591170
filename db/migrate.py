"""Versioned schema migrations: ``db/migrations/NNNN_name.sql`` applied in ascending order.

Numbers may have gaps (other parts add their own files: 0100_* for the mail bot,
0200_* for the dashboard). Applied versions are recorded in ``schema_migrations``
(so a file numbered below the highest applied one is still applied when it
appears later); ``PRAGMA user_version`` mirrors the highest for tools like sqlite3.
Each file runs in its own ``BEGIN IMMEDIATE`` transaction: a crash leaves the
schema at the previous version, never half-migrated.

A PostgreSQL store (``db.pg``) runs the same files through ``db.dialect.pg_ddl``, or the file's
``NNNN_name.pg.sql`` twin verbatim when there is one (triggers, data migrations written with
sqlite's functions); its transactions hold the store's write lock as ``BEGIN IMMEDIATE`` does.
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from db.errors import StoreError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_FILE = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.sql$")
_PG_FILE = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.pg\.sql$")


def _pg(conn) -> bool:
    return getattr(conn, "dialect", "sqlite") == "postgresql"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def statements(self) -> list[str]:
        """The file split into complete SQL statements (execute() takes one at a time)."""
        out, buf = [], ""
        for line in self.path.read_text().splitlines(keepends=True):
            buf += line
            if sqlite3.complete_statement(buf):
                if buf.strip():
                    out.append(buf.strip())
                buf = ""
        if buf.strip() and not all(ln.strip().startswith("--") or not ln.strip() for ln in buf.splitlines()):
            raise StoreError(f"{self.path.name}: incomplete SQL statement at the end")
        return out

    @property
    def pg_path(self) -> Path | None:
        """The PostgreSQL twin ``NNNN_name.pg.sql``, if the file has one."""
        p = self.path.with_name(f"{self.version:04d}_{self.name}.pg.sql")
        return p if p.exists() else None

    def run(self, conn) -> None:
        """Apply the file on ``conn`` (inside the caller's transaction), in that connection's dialect."""
        if not _pg(conn):
            for stmt in self.statements():
                conn.execute(stmt)
        elif self.pg_path is not None:
            conn.script(self.pg_path.read_text())
        else:
            from db.dialect import pg_ddl
            for stmt in self.statements():
                conn.script(pg_ddl(stmt))


def available(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found: dict[int, Migration] = {}
    for p in sorted(directory.glob("*.sql")):
        if _PG_FILE.match(p.name):
            if not p.with_name(p.name[:-len(".pg.sql")] + ".sql").exists():
                raise StoreError(f"{p}: a PostgreSQL variant without its NNNN_name.sql")
            continue
        m = _FILE.match(p.name)
        if not m:
            raise StoreError(f"{p}: migration files are named NNNN_name.sql")
        v = int(m.group(1))
        if v in found:
            raise StoreError(f"{p.name}: migration version {v} also used by {found[v].path.name}")
        found[v] = Migration(v, m.group(2), p)
    return [found[v] for v in sorted(found)]


def applied(conn: sqlite3.Connection) -> set[int]:
    if _pg(conn):
        if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:
            return set()
        return {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
    try:
        return {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return set()
        raise


def migrate(conn: sqlite3.Connection, upto: int | None = None,
            directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply every migration not yet applied (up to ``upto``); return the versions applied now.

    ``conn`` must be in autocommit mode (isolation_level=None). Safe when several
    processes open the store at once: each file is checked again inside its write lock.
    """
    known = available(directory)
    todo = [m for m in known if upto is None or m.version <= upto]
    done = applied(conn)
    check_known(done, known)
    if all(m.version in done for m in todo):
        return []
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                     "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
        if _pg(conn):
            from db.dialect import PG_PRELUDE
            conn.script(PG_PRELUDE)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    now: list[int] = []
    for m in todo:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if m.version in applied(conn):          # another process got there first
                conn.execute("ROLLBACK")
                continue
            m.run(conn)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                         (m.version, m.name, datetime.now(timezone.utc).isoformat(timespec="seconds")))
            _bump_schema(conn)
            if not _pg(conn):
                top = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
                conn.execute(f"PRAGMA user_version = {int(top)}")
            conn.execute("COMMIT")
        except (sqlite3.Error, StoreError) as e:
            _rollback(conn)
            raise StoreError(f"migration {m.path.name} failed: {e}") from None
        except BaseException:
            _rollback(conn)
            raise
        now.append(m.version)
    return now


def check_known(done: set[int], known: list[Migration]) -> None:
    """A store a newer sizewatch migrated has tables and meanings this code does not know: refuse it
    rather than read it wrongly or write rows the newer code would misread."""
    unknown = sorted(done - {m.version for m in known})
    if unknown:
        top = max((m.version for m in known), default=0)
        raise StoreError(f"store was written by a newer sizewatch: migration {unknown[0]:04d} unknown "
                         f"(this sizewatch knows migrations up to {top:04d})")


def pending(conn: sqlite3.Connection, directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The known migrations this store has not applied (StoreError for a newer store)."""
    known = available(directory)
    done = applied(conn)
    check_known(done, known)
    return [m for m in known if m.version not in done]


def _bump_schema(conn: sqlite3.Connection) -> None:
    """A migration may change what any page shows: the 'schema' change counter (0012) moves with it,
    in the migration's own transaction (db.changes)."""
    if _pg(conn):
        exists = conn.execute("SELECT to_regclass('change_counters')").fetchone()[0] is not None
    else:
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'change_counters'"
                              ).fetchone() is not None
    if exists:
        conn.execute("UPDATE change_counters SET n = n + 1 WHERE scope = 'schema'")


def version(conn: sqlite3.Connection) -> int:
    """The highest applied migration (0 for an empty store)."""
    got = applied(conn)
    return max(got) if got else 0


def _rollback(conn) -> None:
    """Roll back what a failed migration did; a connection lost meanwhile has nothing left to roll back."""
    try:
        conn.execute("ROLLBACK")
    except (sqlite3.Error, StoreError):
        pass
