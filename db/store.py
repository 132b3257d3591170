"""The result store behind a small interface; sqlite is the implementation shipped.

``Store`` names every operation the pipeline, the dashboard and the bot need, so
a PostgreSQL implementation could serve a multi-user deployment later without
touching them. ``SqliteStore`` keeps one connection per thread (Flask serves
requests on threads), runs in WAL mode so readers never wait for the writer,
and writes one build's whole result in one ``BEGIN IMMEDIATE`` transaction: a
crash (even ``kill -9``) leaves the build either complete or absent.
"""
from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import time
import zlib
from abc import ABC, abstractmethod
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from db import migrate as _migrate
from db.botstore import BotStore, SqliteBotStore
from db.errors import StoreError
from db.models import (SEVERITY_RANK, Build, BuildRecord, BuildSummary, Commit, FindingRow, FunctionRow, HistoryPoint, MatrixRow,
                       ObjectRecord, RemarkRow, Series, SeriesPatch, SymbolRow)

T = TypeVar("T")
BUSY_TIMEOUT_MS = 60_000
TEXT_LETTERS = ("t", "T", "w", "W")


def default_path() -> Path:
    """``$SIZEWATCH_DB``, else ``<cache>/sizewatch.db`` (cache: ``$SIZEWATCH_CACHE`` or ~/.cache/sizewatch)."""
    env = os.environ.get("SIZEWATCH_DB")
    if env:
        return Path(env)
    from toolchains.source import cache_dir
    return cache_dir() / "sizewatch.db"


def open_store(path: str | os.PathLike | None = None, upto: int | None = None) -> "SqliteStore":
    """Open (creating and migrating as needed) the store at ``path`` or the default location.

    ``upto`` stops migrations at that version (tests of the migration path only).
    """
    return SqliteStore(Path(path) if path else default_path(), upto=upto)


def compress(text: str | bytes | None) -> bytes | None:
    if text is None:
        return None
    return zlib.compress(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text, 6)


def decompress(blob: bytes | None) -> str:
    return zlib.decompress(blob).decode("utf-8", "surrogateescape") if blob else ""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Store(BotStore, ABC):
    """What the rest of sizewatch may ask of a store. Every method returns plain dataclasses.

    The mail bot's methods (``bot_*``) come from ``db.botstore.BotStore``.
    """

    # --- writes -------------------------------------------------------------------------------
    @abstractmethod
    def ensure_tree(self, name: str, path: str = "", url: str = "") -> int: ...

    @abstractmethod
    def record_commits(self, tree: str, commits: Iterable[Commit]) -> None:
        """Insert or update commit metadata (no builds)."""

    @abstractmethod
    def record_build(self, rec: BuildRecord) -> int:
        """Write one build's entire result (replacing an earlier one for the same key) atomically."""

    @abstractmethod
    def record_comparison(self, build_id: int, base_build_id: int, findings: list[FindingRow]) -> None:
        """Store the head-vs-base findings of two stored builds (replacing earlier ones)."""

    @abstractmethod
    def record_series(self, series: Series) -> int: ...

    # --- reads --------------------------------------------------------------------------------
    @abstractmethod
    def get_commit(self, rev: str, tree: str | None = None) -> Commit | None:
        """A stored commit by full sha or unique prefix (≥ 4 hex digits)."""

    @abstractmethod
    def find_build(self, tree: str, sha: str, toolchain: str, config_key: str, target: str,
                   toolchain_version: str | None = None) -> Build | None: ...

    def has_build(self, tree: str, sha: str, toolchain: str, config_key: str, target: str,
                  toolchain_version: str | None = None, analysis_version: int = 0) -> bool:
        """True when that build is stored (failures too: they are results) and analyzed at least that far."""
        b = self.find_build(tree, sha, toolchain, config_key, target, toolchain_version)
        return b is not None and (b.status != "ok" or b.analysis_version >= analysis_version)

    @abstractmethod
    def get_build(self, build_id: int) -> Build | None: ...

    @abstractmethod
    def builds_for_commit(self, sha: str, tree: str | None = None) -> list[Build]: ...

    @abstractmethod
    def build_log(self, build_id: int) -> str: ...

    @abstractmethod
    def objects_for(self, build_id: int) -> list[ObjectRecord]:
        """The build's objects with their section sizes (symbols and facts not filled in)."""

    @abstractmethod
    def object_facts(self, build_id: int) -> dict[str, dict]:
        """{object path: the analyzer's ObjectFacts.to_dict()} for the build's analyzed objects."""

    @abstractmethod
    def symbols_for(self, build_id: int) -> list[SymbolRow]:
        """Every nm-listed symbol of the build's objects, as bloat-o-meter would read them."""

    @abstractmethod
    def functions_for(self, build_id: int) -> list[FunctionRow]: ...

    @abstractmethod
    def remarks_for(self, build_id: int, passed: bool | None = None) -> list[RemarkRow]: ...

    @abstractmethod
    def findings_for(self, build_id: int, base_build_id: int | None = None) -> list[FindingRow]:
        """The build's own findings, plus those against ``base_build_id`` when given."""

    @abstractmethod
    def has_comparison(self, build_id: int, base_build_id: int) -> bool: ...

    @abstractmethod
    def function_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                         target: str | None = None) -> list[HistoryPoint]: ...

    @abstractmethod
    def toolchain_matrix(self, sha: str, tree: str | None = None, target: str | None = None) -> list[MatrixRow]: ...

    @abstractmethod
    def list_commits(self, limit: int = 50, offset: int = 0, tree: str | None = None) -> list[Commit]: ...

    @abstractmethod
    def list_series(self, limit: int = 50, offset: int = 0, tree: str | None = None) -> list[Series]: ...

    @abstractmethod
    def get_series(self, ref: int | str) -> Series | None:
        """A series by id, or by its message-id (with or without <>)."""

    @abstractmethod
    def series_for_commit(self, sha: str) -> list[Series]: ...

    @abstractmethod
    def build_summaries(self, shas: list[str], tree: str | None = None) -> list[BuildSummary]:
        """For each commit, the latest build per (toolchain, config, target) beside its parent's build:
        status, size(1) text of both, and the findings a report lists (without their data; only the
        worst one of each build with its message)."""

    @abstractmethod
    def tree_path(self, name: str) -> str | None:
        """Where the named tree was built from (None: unknown tree)."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _retry_busy(fn: Callable[..., T]) -> Callable[..., T]:
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


_BUILD_SELECT = """
SELECT b.id, t.name, c.sha, tc.name, tc.version, cf.key, b.target, b.status, b.method, b.seconds,
       b.started_at, b.errors, b.analysis_version, cf.config_hash
FROM builds b
JOIN commits c ON c.id = b.commit_id
JOIN trees t ON t.id = c.tree_id
JOIN toolchains tc ON tc.id = b.toolchain_id
JOIN configs cf ON cf.id = b.config_id
"""


def _build(row: tuple) -> Build:
    r = list(row)
    r[11] = json.loads(r[11])
    return Build(*r)


class SqliteStore(SqliteBotStore, Store):
    def __init__(self, path: Path, upto: int | None = None):
        self.path = Path(path)
        self._local = threading.local()
        self._names: dict[str, int] = {}
        self._names_lock = threading.Lock()
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a store file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._conn()
        try:
            _migrate.migrate(conn, upto=upto)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot use as a sizewatch store: {e}") from None

    # --- connections and transactions -----------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=BUSY_TIMEOUT_MS / 1000)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(f"{self.path}: cannot switch to WAL mode (got {mode})")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot use as a sizewatch store: {e}") from None
        self._local.conn = conn
        return conn

    @property
    def schema_version(self) -> int:
        return _migrate.version(self._conn())

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
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
            conn.execute("ROLLBACK")
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
            conn.executemany("INSERT OR IGNORE INTO names(name) VALUES (?)", ((n,) for n in missing))
            for i in range(0, len(missing), 500):
                chunk = missing[i:i + 500]
                q = f"SELECT name, id FROM names WHERE name IN ({','.join('?' * len(chunk))})"
                for name, nid in conn.execute(q, chunk):
                    out[name] = nid
                    pending[name] = nid
        return out

    def _tree_id(self, conn: sqlite3.Connection, name: str, path: str = "", url: str = "") -> int:
        conn.execute("INSERT INTO trees(name, path, url) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                     "path = CASE WHEN excluded.path != '' THEN excluded.path ELSE path END, "
                     "url = CASE WHEN excluded.url != '' THEN excluded.url ELSE url END", (name, path, url))
        return conn.execute("SELECT id FROM trees WHERE name = ?", (name,)).fetchone()[0]

    def _commit_id(self, conn: sqlite3.Connection, tree_id: int, c: Commit) -> int:
        conn.execute(
            "INSERT INTO commits(tree_id, sha, parent_sha, subject, author, date, generation) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(tree_id, sha) DO UPDATE SET parent_sha = coalesce(excluded.parent_sha, parent_sha), "
            "generation = coalesce(excluded.generation, generation), "
            "subject = CASE WHEN excluded.subject != '' THEN excluded.subject ELSE subject END, "
            "author = CASE WHEN excluded.author != '' THEN excluded.author ELSE author END, "
            "date = CASE WHEN excluded.date != '' THEN excluded.date ELSE date END",
            (tree_id, c.sha, c.parent_sha, c.subject, c.author, c.date, c.generation))
        return conn.execute("SELECT id FROM commits WHERE tree_id = ? AND sha = ?", (tree_id, c.sha)).fetchone()[0]

    # --- writes ---------------------------------------------------------------------------------
    def ensure_tree(self, name: str, path: str = "", url: str = "") -> int:
        with self._tx() as conn:
            return self._tree_id(conn, name, path, url)

    def record_commits(self, tree: str, commits: Iterable[Commit]) -> None:
        with self._tx() as conn:
            tid = self._tree_id(conn, tree)
            for c in commits:
                self._commit_id(conn, tid, c)

    def record_build(self, rec: BuildRecord) -> int:
        with self._tx() as conn:
            tid = self._tree_id(conn, rec.tree, rec.tree_path)
            cid = self._commit_id(conn, tid, rec.commit)
            conn.execute("INSERT OR IGNORE INTO toolchains(name, version, family) VALUES (?, ?, ?)",
                         (rec.toolchain, rec.toolchain_version, rec.toolchain_family))
            tcid = conn.execute("SELECT id FROM toolchains WHERE name = ? AND version = ?",
                                (rec.toolchain, rec.toolchain_version)).fetchone()[0]
            cf = rec.config
            conn.execute("INSERT OR IGNORE INTO configs(key, arch, base, fragment, config_hash, config_z) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (cf.key, cf.arch, cf.base, cf.fragment, cf.config_hash,
                                                       compress(cf.config_text)))
            if cf.config_text is not None:
                conn.execute("UPDATE configs SET config_z = ? WHERE key = ? AND config_hash = ? AND config_z IS NULL",
                             (compress(cf.config_text), cf.key, cf.config_hash))
            cfid = conn.execute("SELECT id FROM configs WHERE key = ? AND config_hash = ?",
                                (cf.key, cf.config_hash)).fetchone()[0]
            conn.execute("DELETE FROM builds WHERE commit_id = ? AND toolchain_id = ? AND config_id = ? AND target = ?",
                         (cid, tcid, cfid, rec.target))
            bid = conn.execute(
                "INSERT INTO builds(commit_id, toolchain_id, config_id, target, status, method, seconds, started_at, "
                "log_z, errors, analysis_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, tcid, cfid, rec.target, rec.status, rec.method, rec.seconds, rec.started_at or _now(),
                 compress(rec.log), json.dumps(rec.errors), rec.analysis_version)).lastrowid
            for obj in rec.objects:
                self._insert_object(conn, bid, obj)
            self._insert_findings(conn, bid, rec.findings)
            return bid

    def _insert_object(self, conn: sqlite3.Connection, build_id: int, obj: ObjectRecord) -> None:
        oid = conn.execute("INSERT INTO objects(build_id, path, sha256, text, data, bss, sections, facts_z) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (build_id, obj.path, obj.sha256, obj.text, obj.data, obj.bss, json.dumps(obj.sections),
                            compress(json.dumps(obj.facts)) if obj.facts is not None else None)).lastrowid
        ids = self._name_ids(conn, [s.name for s in obj.symbols] + [s.section for s in obj.symbols]
                             + [f.name for f in obj.functions]
                             + [r.callee for r in obj.remarks] + [r.caller for r in obj.remarks])
        conn.executemany("INSERT INTO symbols(object_id, name_id, size, letter, section_id, offset) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids[s.name], s.size, s.letter, ids.get(s.section) if s.section else None, s.offset)
                          for s in obj.symbols])
        conn.executemany("INSERT OR REPLACE INTO functions(object_id, name_id, size, declared, out_of_line, "
                         "inlined_count, inlined_bytes, callers, facts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, ids[f.name], f.size, f.declared, int(f.out_of_line), f.inlined_count,
                           f.inlined_bytes, f.callers, json.dumps(f.facts)) for f in obj.functions])
        conn.executemany("INSERT INTO remarks(object_id, callee_id, caller_id, passed, reason, location) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids.get(r.callee) if r.callee else None, ids.get(r.caller) if r.caller else None,
                           int(r.passed), r.reason, r.location) for r in obj.remarks])

    @staticmethod
    def _insert_findings(conn: sqlite3.Connection, build_id: int, findings: list[FindingRow],
                         base_build_id: int | None = None) -> None:
        conn.executemany("INSERT INTO findings(build_id, base_build_id, kind, function, severity, message, data) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(build_id, base_build_id if base_build_id is not None else f.base_build_id, f.kind,
                           f.function, f.severity, f.message, json.dumps(f.data)) for f in findings])

    def record_comparison(self, build_id: int, base_build_id: int, findings: list[FindingRow]) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM findings WHERE build_id = ? AND base_build_id = ?", (build_id, base_build_id))
            self._insert_findings(conn, build_id, findings, base_build_id)
            conn.execute("INSERT OR IGNORE INTO comparisons(build_id, base_build_id) VALUES (?, ?)",
                         (build_id, base_build_id))

    def record_series(self, s: Series) -> int:
        with self._tx() as conn:
            tid = self._tree_id(conn, s.tree)
            conn.execute(
                "INSERT INTO series(tree_id, message_id, version, subject, author, date, cover_z, base_sha, status, "
                "error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(tree_id, message_id, base_sha) DO UPDATE SET version = excluded.version, "
                "subject = excluded.subject, author = excluded.author, date = excluded.date, "
                "cover_z = excluded.cover_z, status = excluded.status, error = excluded.error",
                (tid, s.message_id, s.version, s.subject, s.author, s.date, compress(s.cover) if s.cover else None,
                 s.base_sha, s.status, s.error, s.created_at or _now()))
            sid = conn.execute("SELECT id FROM series WHERE tree_id = ? AND message_id = ? AND base_sha = ?",
                               (tid, s.message_id, s.base_sha)).fetchone()[0]
            conn.execute("DELETE FROM series_patches WHERE series_id = ?", (sid,))
            conn.executemany("INSERT INTO series_patches(series_id, position, message_id, subject, author, "
                             "commit_sha, status, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             [(sid, p.position, p.message_id, p.subject, p.author, p.commit_sha, p.status, p.error)
                              for p in s.patches])
            return sid

    # --- reads ----------------------------------------------------------------------------------
    @_retry_busy
    def get_commit(self, rev: str, tree: str | None = None) -> Commit | None:
        rev = rev.strip().lower()
        if len(rev) < 4 or any(ch not in "0123456789abcdef" for ch in rev):
            return None
        q = ("SELECT c.sha, c.parent_sha, c.subject, c.author, c.date, t.name, c.id, c.generation FROM commits c "
             "JOIN trees t ON t.id = c.tree_id WHERE c.sha >= ? AND c.sha < ?")
        args: list = [rev, rev + "g"]
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        rows = self._conn().execute(q + " LIMIT 2", args).fetchall()
        if len(rows) > 1 and not any(r[0] == rev for r in rows):
            raise StoreError(f"commit {rev!r} is ambiguous in the store")
        row = next((r for r in rows if r[0] == rev), rows[0] if rows else None)
        return Commit(*row) if row else None

    @_retry_busy
    def find_build(self, tree: str, sha: str, toolchain: str, config_key: str, target: str,
                   toolchain_version: str | None = None) -> Build | None:
        q = _BUILD_SELECT + " WHERE t.name = ? AND c.sha = ? AND tc.name = ? AND cf.key = ? AND b.target = ?"
        args = [tree, sha, toolchain, config_key, target]
        if toolchain_version is not None:
            q += " AND tc.version = ?"
            args.append(toolchain_version)
        row = self._conn().execute(q + " ORDER BY b.id DESC LIMIT 1", args).fetchone()
        return _build(row) if row else None

    @_retry_busy
    def get_build(self, build_id: int) -> Build | None:
        row = self._conn().execute(_BUILD_SELECT + " WHERE b.id = ?", (build_id,)).fetchone()
        return _build(row) if row else None

    @_retry_busy
    def builds_for_commit(self, sha: str, tree: str | None = None) -> list[Build]:
        q = _BUILD_SELECT + " WHERE c.sha = ?"
        args = [sha]
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        return [_build(r) for r in self._conn().execute(q + " ORDER BY tc.name, b.target, b.id", args)]

    @_retry_busy
    def build_log(self, build_id: int) -> str:
        row = self._conn().execute("SELECT log_z FROM builds WHERE id = ?", (build_id,)).fetchone()
        return decompress(row[0]) if row else ""

    @_retry_busy
    def objects_for(self, build_id: int) -> list[ObjectRecord]:
        rows = self._conn().execute("SELECT path, sha256, text, data, bss, sections, id FROM objects "
                                    "WHERE build_id = ? ORDER BY path", (build_id,))
        return [ObjectRecord(p, h, t, d, b, json.loads(s), id=i) for p, h, t, d, b, s, i in rows]

    @_retry_busy
    def object_facts(self, build_id: int) -> dict[str, dict]:
        rows = self._conn().execute("SELECT path, facts_z FROM objects WHERE build_id = ? AND facts_z IS NOT NULL "
                                    "ORDER BY path", (build_id,))
        return {p: json.loads(decompress(z)) for p, z in rows}

    @_retry_busy
    def symbols_for(self, build_id: int) -> list[SymbolRow]:
        rows = self._conn().execute(
            "SELECT n.name, s.size, s.letter, sn.name, s.offset FROM objects o "
            "JOIN symbols s ON s.object_id = o.id JOIN names n ON n.id = s.name_id "
            "LEFT JOIN names sn ON sn.id = s.section_id WHERE o.build_id = ?", (build_id,))
        return [SymbolRow(*r) for r in rows]

    @_retry_busy
    def functions_for(self, build_id: int) -> list[FunctionRow]:
        rows = self._conn().execute(
            "SELECT n.name, f.size, f.declared, f.out_of_line, f.inlined_count, f.inlined_bytes, f.callers, f.facts "
            "FROM objects o JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id "
            "WHERE o.build_id = ? ORDER BY n.name", (build_id,))
        return [FunctionRow(n, s, d, bool(oo), ic, ib, ca, json.loads(fa)) for n, s, d, oo, ic, ib, ca, fa in rows]

    @_retry_busy
    def remarks_for(self, build_id: int, passed: bool | None = None) -> list[RemarkRow]:
        q = ("SELECT ce.name, cr.name, r.passed, r.reason, r.location FROM objects o "
             "JOIN remarks r ON r.object_id = o.id LEFT JOIN names ce ON ce.id = r.callee_id "
             "LEFT JOIN names cr ON cr.id = r.caller_id WHERE o.build_id = ?")
        args: list = [build_id]
        if passed is not None:
            q += " AND r.passed = ?"
            args.append(int(passed))
        return [RemarkRow(a, b, bool(p), r, loc) for a, b, p, r, loc in self._conn().execute(q, args)]

    @_retry_busy
    def findings_for(self, build_id: int, base_build_id: int | None = None) -> list[FindingRow]:
        rows = self._conn().execute(
            "SELECT kind, function, severity, message, data, base_build_id FROM findings WHERE build_id = ? "
            "AND (base_build_id IS NULL OR base_build_id = ?) ORDER BY id", (build_id, base_build_id))
        return [FindingRow(k, f, s, m, json.loads(d), b) for k, f, s, m, d, b in rows]

    @_retry_busy
    def has_comparison(self, build_id: int, base_build_id: int) -> bool:
        return self._conn().execute("SELECT 1 FROM comparisons WHERE build_id = ? AND base_build_id = ?",
                                    (build_id, base_build_id)).fetchone() is not None

    @_retry_busy
    def function_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                         target: str | None = None) -> list[HistoryPoint]:
        """The function in every stored build where it has a symbol or inline facts, along history
        (commit generation, then date).

        ``size`` sums the function's text symbols and its clones (``name.part.0``,
        ``name.cold``, ``name.constprop.0``...): what the source function costs.
        """
        conn = self._conn()
        ids = [i for (i,) in conn.execute("SELECT id FROM names WHERE name = ? OR (name > ? AND name < ?)",
                                          (name, name + ".", name + "/"))]
        if not ids:
            return []
        exact = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        # three index-only reads merged here: LEFT JOINs of aggregates make sqlite rescan per build
        sizes = dict(conn.execute(
            f"SELECT o.build_id, sum(s.size) FROM symbols s JOIN objects o ON o.id = s.object_id "
            f"WHERE s.name_id IN ({','.join('?' * len(ids))}) AND s.letter IN ('t','T','w','W') GROUP BY o.build_id",
            ids))
        facts = {bid: (decl, bool(ool), ic) for bid, decl, ool, ic in conn.execute(
            "SELECT o.build_id, f.declared, f.out_of_line, f.inlined_count FROM functions f "
            "JOIN objects o ON o.id = f.object_id WHERE f.name_id = ?", (exact[0] if exact else -1,))}
        wanted = sorted(sizes.keys() | facts.keys())
        if not wanted:
            return []
        q = ("SELECT c.sha, c.subject, c.date, tc.name, tc.version, b.target, b.id, b.status FROM builds b "
             "JOIN commits c ON c.id = b.commit_id JOIN trees t ON t.id = c.tree_id "
             "JOIN toolchains tc ON tc.id = b.toolchain_id WHERE b.id IN (SELECT value FROM json_each(?))")
        args: list = [json.dumps(wanted)]
        for col, val in (("tc.name", toolchain), ("t.name", tree), ("b.target", target)):
            if val:
                q += f" AND {col} = ?"
                args.append(val)
        q += " ORDER BY coalesce(c.generation, 0), c.date, c.id, tc.name, b.id"
        none = (None, None, None)
        return [HistoryPoint(sha, subj, date, tc, ver, tgt, bid, st, sizes.get(bid), *facts.get(bid, none))
                for sha, subj, date, tc, ver, tgt, bid, st in conn.execute(q, args)]

    @_retry_busy
    def toolchain_matrix(self, sha: str, tree: str | None = None, target: str | None = None) -> list[MatrixRow]:
        """Every function of a commit's builds, one cell per toolchain (latest build of each)."""
        builds: dict[str, Build] = {}
        for b in self.builds_for_commit(sha, tree):
            if b.status == "ok" and (target is None or b.target == target):
                builds[b.toolchain] = b          # ordered by id: the latest wins
        cells: dict[str, dict] = {}
        conn = self._conn()
        for label, b in builds.items():
            for name, size in conn.execute(
                    "SELECT n.name, sum(s.size) FROM objects o JOIN symbols s ON s.object_id = o.id "
                    "JOIN names n ON n.id = s.name_id WHERE o.build_id = ? AND s.letter IN ('t','T','w','W') "
                    "GROUP BY n.name", (b.id,)):
                cells.setdefault(name, {})[label] = [size, None, None, None]
            for name, decl, ool, ic in conn.execute(
                    "SELECT n.name, f.declared, f.out_of_line, f.inlined_count FROM objects o "
                    "JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id WHERE o.build_id = ?",
                    (b.id,)):
                cell = cells.setdefault(name, {}).setdefault(label, [None, None, None, None])
                cell[1:] = [decl, bool(ool), ic]
        out = []
        for name in sorted(cells):
            row = {label: tuple(cells[name].get(label, (None, None, None, None))) for label in builds}
            out.append(MatrixRow(name, row))
        return out

    @_retry_busy
    def list_commits(self, limit: int = 50, offset: int = 0, tree: str | None = None) -> list[Commit]:
        """Most recently stored commits that have builds or belong to a series."""
        q = ("SELECT c.sha, c.parent_sha, c.subject, c.author, c.date, t.name, c.id, c.generation FROM commits c "
             "JOIN trees t ON t.id = c.tree_id WHERE (EXISTS (SELECT 1 FROM builds b WHERE b.commit_id = c.id) "
             "OR EXISTS (SELECT 1 FROM series_patches p WHERE p.commit_sha = c.sha))")
        args: list = []
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        q += " ORDER BY c.id DESC LIMIT ? OFFSET ?"
        return [Commit(*r) for r in self._conn().execute(q, [*args, limit, offset])]

    def _series(self, rows: list[tuple]) -> list[Series]:
        conn = self._conn()
        out = []
        for (sid, tree, mid, ver, subj, author, date, cover_z, base, status, err, created) in rows:
            patches = [SeriesPatch(*p) for p in conn.execute(
                "SELECT position, subject, message_id, author, commit_sha, status, error FROM series_patches "
                "WHERE series_id = ? ORDER BY position", (sid,))]
            out.append(Series(tree, mid, subj, ver, author, date, decompress(cover_z), base, status, err, created,
                              patches, sid))
        return out

    _SERIES_SELECT = ("SELECT s.id, t.name, s.message_id, s.version, s.subject, s.author, s.date, s.cover_z, "
                      "s.base_sha, s.status, s.error, s.created_at FROM series s JOIN trees t ON t.id = s.tree_id")

    @_retry_busy
    def list_series(self, limit: int = 50, offset: int = 0, tree: str | None = None) -> list[Series]:
        q, args = self._SERIES_SELECT, []
        if tree:
            q += " WHERE t.name = ?"
            args.append(tree)
        rows = self._conn().execute(q + " ORDER BY s.id DESC LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
        return self._series(rows)

    @_retry_busy
    def get_series(self, ref: int | str) -> Series | None:
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            rows = self._conn().execute(self._SERIES_SELECT + " WHERE s.id = ?", (int(ref),)).fetchall()
        else:
            mid = ref.strip()
            mid = mid if mid.startswith("<") else f"<{mid}>"
            rows = self._conn().execute(self._SERIES_SELECT + " WHERE s.message_id = ? ORDER BY s.id DESC LIMIT 1",
                                        (mid,)).fetchall()
        got = self._series(rows)
        return got[0] if got else None

    @_retry_busy
    def series_for_commit(self, sha: str) -> list[Series]:
        rows = self._conn().execute(
            self._SERIES_SELECT + " WHERE s.id IN (SELECT series_id FROM series_patches WHERE commit_sha = ?) "
            "ORDER BY s.id DESC", (sha,)).fetchall()
        return self._series(rows)

    @_retry_busy
    def build_summaries(self, shas: list[str], tree: str | None = None) -> list[BuildSummary]:
        """A handful of set-wise queries for any number of commits (the dashboard asks for ~100 at once)."""
        if not shas:
            return []
        conn = self._conn()
        q = ("SELECT b.id, c.sha, c.parent_sha, t.name, tc.name, tc.version, cf.key, b.target, b.status, b.errors "
             "FROM builds b JOIN commits c ON c.id = b.commit_id JOIN trees t ON t.id = c.tree_id "
             "JOIN toolchains tc ON tc.id = b.toolchain_id JOIN configs cf ON cf.id = b.config_id "
             "WHERE c.sha IN (SELECT value FROM json_each(?))")
        tree_q, tree_a = (" AND t.name = ?", [tree]) if tree else ("", [])
        heads: dict[tuple, tuple] = {}
        parents: dict[str, str | None] = {}
        for row in conn.execute(q + tree_q + " ORDER BY b.id", [json.dumps(list(shas)), *tree_a]):
            bid, sha, parent, tname, tc, ver, key, target = row[:8]
            heads[(sha, tc, key, target)] = row          # ordered by id: the latest build wins
            parents[sha] = parent
        wanted_parents = sorted({p for p in parents.values() if p})
        bases: dict[tuple, tuple[int, str]] = {}
        if wanted_parents:
            for bid, sha, _, tname, tc, ver, key, target, status, _ in conn.execute(
                    q + tree_q + " ORDER BY b.id", [json.dumps(wanted_parents), *tree_a]):
                bases[(tname, sha, tc, ver, key, target)] = (bid, status)
        out: list[BuildSummary] = []
        for (sha, tc, key, target), (bid, _, parent, tname, _, ver, _, _, status, errors) in heads.items():
            base = bases.get((tname, parent, tc, ver, key, target)) if parent else None
            out.append(BuildSummary(sha, bid, tc, ver, key, target, status, json.loads(errors), None,
                                    base[0] if base else None, base[1] if base else None))
        ids = [s.build_id for s in out] + [s.base_build_id for s in out if s.base_build_id is not None]
        ids_json = json.dumps(ids)
        text = dict(conn.execute("SELECT build_id, sum(text) FROM objects WHERE build_id IN "
                                 "(SELECT value FROM json_each(?)) GROUP BY build_id", (ids_json,)))
        for s in out:
            s.text = text.get(s.build_id) if s.status == "ok" else None
            s.base_text = text.get(s.base_build_id) if s.base_status == "ok" else None
        # read from the findings_summary index alone (0007), never the rows with their JSON data
        found: dict[int, list[tuple]] = {}
        for row in conn.execute("SELECT build_id, base_build_id, kind, function, severity, id FROM findings "
                                "WHERE build_id IN (SELECT value FROM json_each(?))", (ids_json,)):
            found.setdefault(row[0], []).append(row)
        worst_ids: dict[int, BuildSummary] = {}
        for s in out:
            before = ({(k, fn) for _, b, k, fn, _, _ in found.get(s.base_build_id, ()) if b is None}
                      if s.base_status == "ok" else set())
            sev_n, kind_n, best = s.severities, s.kinds, None
            for _, b, k, fn, sev, fid in found.get(s.build_id, ()):
                if b is None and (k, fn) in before:
                    s.carried += 1
                    continue
                if b is not None and b != s.base_build_id:
                    continue
                sev = sev or "info"
                sev_n[sev] = sev_n.get(sev, 0) + 1
                kind_n[k] = kind_n.get(k, 0) + 1
                key = (SEVERITY_RANK.get(sev, 4), b is None, k, fn, fid)
                if best is None or key < best:
                    best = key
            if best is not None:
                worst_ids[best[-1]] = s
            s.severities = dict(sorted(sev_n.items(), key=lambda kv: SEVERITY_RANK.get(kv[0], 4)))
        if worst_ids:                   # messages only for each build's worst finding: the rest are counted
            for fid, kind, fn, sev, msg, b in conn.execute(
                    "SELECT id, kind, function, severity, message, base_build_id FROM findings "
                    "WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(list(worst_ids)),)):
                worst_ids[fid].worst = FindingRow(kind, fn, sev, msg, {}, b)
        return out

    @_retry_busy
    def tree_path(self, name: str) -> str | None:
        row = self._conn().execute("SELECT path FROM trees WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
