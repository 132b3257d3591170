"""The result store behind a small interface: an sqlite file (the default), or PostgreSQL.

``Store`` names every operation the pipeline, the dashboard and the bot need. ``SqliteStore``
keeps one connection per thread (Flask serves requests on threads), runs in WAL mode so readers
never wait for the writer, and writes one build's whole result in one ``BEGIN IMMEDIATE``
transaction: a crash (even ``kill -9``) leaves the build either complete or absent.
``PgStore`` (a ``postgresql://`` URL, for workers on several machines writing to one store) is the
same class over ``db.pg`` connections: the same queries and migrations, rewritten by
``db.dialect``, the same one-writer-at-a-time transactions (an advisory lock).
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
import zlib
from urllib.parse import urlsplit
from abc import ABC, abstractmethod
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

from analyzer.cost import FunctionCost
from analyzer.link_layout import HotPlacement, Move, Neighbour
from analyzer.errors import InputError
from analyzer.inline_cost import CallerCost, FileCost, Unattributed
from analyzer.runtime import Runtime
from db import changes as _changes, dialect as _dialect, matrix as _matrix, migrate as _migrate
from db.botstore import BotStore, SqliteBotStore
from db.sqlite import s64, u64
from db.sqlite import (BUSY_TIMEOUT_MS, compress, decompress, loads, note_damage, number, numbers,  # noqa: F401
                       retry_busy as _retry_busy, summed, text_factory, unreadable)  # compress: API
from db.errors import StoreError
from db.finding_counts import count_findings, own_keys
from db.models import (Build, BuildRecord, BuildSummary, Commit, FindingRow, FunctionLine, FunctionRow,
                       FunctionSeries, HistoryPoint, InlineCalleeRow, InlineCostRecord, InlinePoint, MatrixRow,
                       ObjectRecord, RemarkRow, RuntimePoint, Series, SeriesPatch, SymbolRow)

TEXT_LETTERS = ("t", "T", "w", "W")


def default_path() -> Path | str:
    """``$SIZEWATCH_DB`` (a file, or a ``postgresql://`` URL returned as the string it is), else
    ``<cache>/sizewatch.db`` (cache: ``$SIZEWATCH_CACHE`` or ~/.cache/sizewatch)."""
    env = os.environ.get("SIZEWATCH_DB")
    if env:
        return env if _dialect.is_url(env) else Path(env)
    from toolchains.source import cache_dir
    return cache_dir() / "sizewatch.db"


def beside(where: str | os.PathLike, suffix: str) -> Path:
    """Where files kept for a store go (the page cache ``.pages``, job logs ``.jobs``, the bot's
    ``-series``): beside an sqlite file ``<db><suffix>``; for a PostgreSQL store, which has no file to
    put them beside, ``<cache>/postgresql/pg-<hash><suffix>``, the hash of the URL without its password
    (``dialect.redact``): no part of the URL is in the name, so no spelling of a password the masking
    might miss can be either, and the same database given with another password shares the files."""
    if _dialect.is_url(str(where)):
        import hashlib
        from toolchains.source import cache_dir
        digest = hashlib.sha256(_dialect.redact(str(where)).encode("utf-8", "surrogateescape")).hexdigest()[:20]
        return cache_dir() / "postgresql" / (f"pg-{digest}" + suffix)
    where = Path(where)
    return where.with_name(where.name + suffix)


def open_store(path: str | os.PathLike | None = None, upto: int | None = None,
               read_only: bool = False) -> "SqliteStore":
    """Open (creating and migrating as needed) the store at ``path`` or the default location.

    ``upto`` stops migrations at that version (tests of the migration path only). ``read_only``:
    every connection is opened ``mode=ro`` (a reader cannot write by mistake, and a store on
    read-only media or without write permission opens); pending migrations are applied first, by one writable connection, only when that is needed and possible; a
    missing store is a StoreError (a reader never creates what it reads).

    A ``postgresql://`` URL (``--db``, ``$SIZEWATCH_DB``) opens a PostgreSQL store (``PgStore``): the
    database must exist; its tables are created and migrated the same way.
    """
    where = path if path else default_path()
    if _dialect.is_url(str(where)):
        return PgStore(str(where), upto=upto, read_only=read_only)
    if _dialect.has_password(str(where)):        # libpq's "host=h password=x": would name an sqlite file
        raise StoreError(f"{_dialect.redact(str(where))}: not a store: a PostgreSQL store is named by a "
                         "postgresql:// URL, an sqlite one by a file path")
    return SqliteStore(Path(where), upto=upto, read_only=read_only)


SQLITE_MAGIC = b"SQLite format 3\x00"


def check_store_file(path: Path, must_exist: bool = False) -> None:
    """Refuse, before sqlite touches it, a file sizewatch did not create: sqlite would silently make
    a zero-byte file a new database and fail later on anything else. Nothing is written to it."""
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a store file")
    if not path.exists():
        if must_exist:
            raise StoreError(f"{path}: no such store")
        return
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise StoreError(f"{path}: cannot read the store ({e.strerror})") from None
    if not head:
        raise StoreError(f"{path}: an empty file, not a sizewatch store (left untouched; remove it or give "
                         "another --db to create a store)")
    if head != SQLITE_MAGIC:
        raise StoreError(f"{path}: not an sqlite database, so not a sizewatch store (left untouched)")
    # before any writable connection (switching to WAL rewrites the header): whose database is it?
    try:
        ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = [t for (t,) in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        finally:
            ro.close()
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: cannot use as a sizewatch store: {e} (left untouched)") from None
    if tables and "schema_migrations" not in tables:
        raise StoreError(f"{path}: an sqlite database that is not a sizewatch store (its tables: "
                         f"{', '.join(sorted(tables)[:5])}{', ...' if len(tables) > 5 else ''}); left untouched")


MAX_BUNDLE = 64 * 1024 * 1024       # bytes of one git bundle (0018's CHECK says the same)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Store(ABC):
    """What the rest of sizewatch may ask of a store. Every method returns plain dataclasses.

    The mail bot's tables have an interface of their own, ``store.bot`` (``db.botstore.BotStore``).
    """

    @property
    @abstractmethod
    def bot(self) -> BotStore:
        """The bot's messages, series, decisions and mails, in the same database."""

    # --- writes -------------------------------------------------------------------------------
    @abstractmethod
    def ensure_tree(self, name: str, path: str = "", url: str = "") -> int: ...

    @abstractmethod
    def record_bundle(self, tree: str, sha: str, base_sha: str, data: bytes) -> None:
        """Keep the git bundle of ``base_sha..sha`` of ``tree`` (0018) for workers whose own tree lacks
        ``sha``; one written before for the key is kept (a sha names its content)."""

    @abstractmethod
    def bundle_for(self, tree: str, sha: str) -> bytes | None:
        """The git bundle ``record_bundle`` kept for (tree, sha), else None."""

    @abstractmethod
    def record_commits(self, tree: str, commits: Iterable[Commit]) -> None:
        """Insert or update commit metadata (no builds)."""

    @abstractmethod
    def record_build(self, rec: BuildRecord, replace: bool = True) -> int:
        """Write one build's entire result (replacing an earlier one for the same key) atomically.

        ``replace=False``: a build already stored for the key that is complete for this analysis
        (failed, or analyzed at ``rec.analysis_version`` or later) is kept and its id returned, in
        the same transaction: two workers delivering one job write one result, and comparisons
        made from the first are not dropped by the second."""

    @abstractmethod
    def record_comparison(self, build_id: int, base_build_id: int, findings: list[FindingRow],
                          tables: dict | None = None, inline_cost: dict | None = None,
                          link_moves: list[Move] | None = None) -> None:
        """Store the head-vs-base findings of two stored builds (replacing earlier ones), with their
        bloat-o-meter tables when given (``db.bloat_tables.to_stored``), their inline-cost comparison
        when given (``ci.reports.model.InlineReport.to_dict``, 0014), the counts the dashboard
        shows (``db.finding_counts``) and, for linked targets, the hot functions' moves (0015; kept
        when not given)."""

    @abstractmethod
    def record_series(self, series: Series) -> int: ...

    @abstractmethod
    def record_runtime(self, build_id: int, runtime: Runtime) -> None:
        """Write a stored build's measurement under emulation (0016) whole, replacing an earlier one, in
        one transaction (the commit's change counters move with it). A build measured when it is built
        gets its measurement in ``record_build``'s transaction instead (``BuildRecord.runtime``)."""

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
    def likely_paths_for(self, build_id: int) -> dict[str, list[FunctionCost]]:
        """Per object path, the likely paths of its hot functions (migration 0011)."""

    @abstractmethod
    def likely_path_points(self, name: str, build_ids: list[int]) -> dict[int, tuple[int, int | None]]:
        """{build id: (likely-path instructions, estimated cycles)} of one function in those builds."""

    @abstractmethod
    def link_layout_for(self, build_id: int) -> dict[str, list[HotPlacement]]:
        """Per object path, its hot functions at their link addresses, in address order (0015)."""

    @abstractmethod
    def text_symbols(self, build_ids: list[int], path: str, sections: list[str]
                     ) -> dict[int, list[tuple[str, str, int, int]]]:
        """Per build, (name, section, address, size) of its object's stored symbols in those sections: the
        text map ``analyzer.link_layout.text_map_from_rows`` rebuilds for a comparison."""

    @abstractmethod
    def link_moves_for(self, build_id: int, base_build_id: int) -> list[Move] | None:
        """The hot functions' moves of a stored comparison (head address order); None: none stored."""

    @abstractmethod
    def link_points(self, name: str, build_ids: list[int]) -> dict[int, HotPlacement]:
        """{build id: the function at its link address} in those builds (first of its name)."""

    @abstractmethod
    def inline_costs_for(self, build_id: int) -> list[InlineCostRecord]:
        """The inline cost of each of the build's objects that has one stored (migration 0014), by path."""

    @abstractmethod
    def inline_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                       target: str | None = None) -> list[InlinePoint]:
        """An inline function's instances and bytes in every stored build that has an inline cost
        (0 where it is inlined nowhere), along history; [] when no build inlines it anywhere."""

    @abstractmethod
    def runtime_for(self, build_id: int) -> Runtime | None:
        """The build's measurement under emulation (None: not measured); a damaged one reads as a
        failed measurement whose line is the unreadable marker (the damage is noted)."""

    @abstractmethod
    def runtime_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                        target: str | None = None) -> list[RuntimePoint]:
        """A function's executed instructions and calls per pair in every build measured ``ok`` (no
        orders where it did not run), along history; [] when no measurement has it at all."""

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
    def comparison_tables(self, build_id: int, base_build_id: int) -> dict | None:
        """The tables stored with a comparison (None: not stored)."""

    @abstractmethod
    def comparison_inline_cost(self, build_id: int, base_build_id: int) -> dict | None:
        """The inline-cost comparison stored with a comparison (None: not stored, or unreadable)."""

    @abstractmethod
    def function_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                         target: str | None = None) -> list[HistoryPoint]:
        """The function in every stored build (every compiler version), along history."""

    @abstractmethod
    def function_series(self, name: str, toolchain: str | None = None, tree: str | None = None,
                        target: str | None = None) -> FunctionSeries:
        """The same history as columns: the commits once, a line per (toolchain, target) holding each
        commit's latest build. What a chart of thousands of points reads without an object per point."""

    @abstractmethod
    def toolchain_matrix(self, sha: str, tree: str | None = None, target: str | None = None) -> list[MatrixRow]: ...

    def matrix_table(self, sha: str, tree: str | None, target: str | None, show_all: bool, limit: int,
                     offset: int) -> "_matrix.MatrixTable | None":
        """A page of the commit's matrix as ranked when its builds were written (None: not stored)."""
        return None

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
    def change_stamp(self, commit: str | None = None, series: int | None = None) -> tuple:
        """The change counters under a page (db.changes): of the commit ``commit`` names and its
        parent, of series ``series``, else of the whole store. Equal stamps, equal pages."""

    @abstractmethod
    def identity(self) -> str:
        """The store's own name, secret-free: its random ``store_id`` (migration 0012). A queued job
        names its store by it rather than by a URL that may carry a password (ci.queue.wire)."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
    r[11] = loads(r[11], f"errors of build {r[0]}", list)
    r[9] = number(r[9], f"seconds of build {r[0]}", 0.0)
    r[12] = number(r[12], f"analysis version of build {r[0]}")
    return Build(*r)


class SqliteStore(Store):
    def __init__(self, path: Path, upto: int | None = None, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        self._local = threading.local()
        self._bot = SqliteBotStore(self)
        self._names: dict[str, int] = {}
        self._names_lock = threading.Lock()
        check_store_file(self.path)
        if read_only and not self.path.exists():      # a reader never creates what it reads
            raise StoreError(f"{self.path}: no store there yet (sizewatch run or sizewatch bot writes one)")
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if read_only:
                self._read_only_ready(upto)
            else:
                _migrate.migrate(self._conn(), upto=upto)
        except sqlite3.DatabaseError as e:
            self.close()
            raise StoreError(f"{self.path}: cannot use as a sizewatch store: {e}") from None
        except StoreError as e:
            self.close()
            msg = str(e)
            raise StoreError(msg if msg.startswith(str(self.path)) else f"{self.path}: {msg}") from None

    def _read_only_ready(self, upto: int | None) -> None:
        conn = self._conn()
        todo = [m for m in _migrate.pending(conn) if upto is None or m.version <= upto]
        if not todo:
            return
        if not os.access(self.path, os.W_OK) or not os.access(self.path.parent, os.W_OK):
            raise StoreError(f"the store needs migration {todo[0].path.name} and is read-only: open it once "
                             "with write access (any sizewatch run)")
        self.close()                                 # one writable connection, for the migrations only
        writer = SqliteStore(self.path, upto=upto)
        writer.close()

    # --- connections and transactions -----------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            if self.read_only:
                conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
                conn.text_factory = text_factory
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self._local.conn = conn
                return conn
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=BUSY_TIMEOUT_MS / 1000)
            conn.text_factory = text_factory         # damaged text shown with U+FFFD, not a 500
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
    def bot(self) -> SqliteBotStore:
        return self._bot

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

    # --- writes ---------------------------------------------------------------------------------
    def ensure_tree(self, name: str, path: str = "", url: str = "") -> int:
        with self._tx() as conn:
            return self._tree_id(conn, name, path, url)

    def record_bundle(self, tree: str, sha: str, base_sha: str, data: bytes) -> None:
        if len(data) > MAX_BUNDLE:
            raise StoreError(f"the bundle of {sha[:12]} is {len(data)} bytes, over the {MAX_BUNDLE} a store keeps")
        with self._tx() as conn:
            conn.execute("INSERT OR IGNORE INTO git_bundles(tree_id, sha, base_sha, size, bundle, created_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (self._tree_id(conn, tree), sha, base_sha, len(data), data, _now()))

    @_retry_busy
    def bundle_for(self, tree: str, sha: str) -> bytes | None:
        row = self._conn().execute("SELECT g.bundle FROM git_bundles g JOIN trees t ON t.id = g.tree_id "
                                   "WHERE t.name = ? AND g.sha = ?", (tree, sha)).fetchone()
        return None if row is None else bytes(row[0])

    def record_commits(self, tree: str, commits: Iterable[Commit]) -> None:
        with self._tx() as conn:
            tid = self._tree_id(conn, tree)
            for c in commits:
                self._commit_id(conn, tid, c)

    def record_build(self, rec: BuildRecord, replace: bool = True) -> int:
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
            if not replace:
                have = conn.execute("SELECT id, status, analysis_version FROM builds WHERE commit_id = ? AND "
                                    "toolchain_id = ? AND config_id = ? AND target = ? ORDER BY id DESC LIMIT 1",
                                    (cid, tcid, cfid, rec.target)).fetchone()
                if have is not None and (have[1] != "ok" or have[2] >= rec.analysis_version) and not (
                        rec.runtime is not None and have[1] == "ok" and conn.execute(
                            "SELECT 1 FROM runtimes WHERE build_id = ?", (have[0],)).fetchone() is None):
                    return have[0]         # (a measurement the stored build lacks replaces it)
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
            if rec.runtime is not None:
                self._insert_runtime(conn, bid, rec.runtime)
            self._write_matrix(conn, cid, rec.commit.sha, rec.tree)
            return bid

    def record_runtime(self, build_id: int, runtime: Runtime) -> None:
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM builds WHERE id = ?", (build_id,)).fetchone() is None:
                raise StoreError(f"no build {build_id} in the store to record a measurement for")
            self._insert_runtime(conn, build_id, runtime)

    def _insert_runtime(self, conn: sqlite3.Connection, build_id: int, rt: Runtime) -> None:
        """The measurement's row and its functions' rows (0016), replacing the build's earlier ones."""
        conn.execute("DELETE FROM runtime_functions WHERE build_id = ?", (build_id,))
        conn.execute("DELETE FROM runtimes WHERE build_id = ?", (build_id,))
        conn.execute("INSERT INTO runtimes(build_id, status, message, pairs, emulator, seconds, measured_at, data) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (build_id, rt.status, rt.message, rt.pairs, rt.emulator, rt.seconds, _now(),
                      json.dumps(rt.to_dict(), separators=(",", ":"))))
        ids = self._name_ids(conn, [n for o in rt.orders for n in o.functions])
        conn.executemany("INSERT INTO runtime_functions(build_id, page_order, name_id, unit, instructions, calls, "
                         "lines) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(build_id, o.order, ids[f.name], int(f.unit), f.instructions, f.calls, f.lines)
                          for o in rt.orders for f in o.functions.values()])

    def _write_matrix(self, conn: sqlite3.Connection, commit_id: int, sha: str, tree: str) -> None:
        """The commit's matrix rows (db.matrix) for every target and for all of them, ranked now, in
        the transaction that changed its builds (0013): a reader never sees rows of other builds."""
        targets = sorted(t for (t,) in conn.execute("SELECT DISTINCT target FROM builds WHERE commit_id = ?",
                                                    (commit_id,)))
        conn.execute("DELETE FROM matrix_rows WHERE commit_id = ?", (commit_id,))
        conn.execute("DELETE FROM matrix_tables WHERE commit_id = ?", (commit_id,))
        for target in [None, *targets]:
            table = _matrix.rank(self.toolchain_matrix(sha, tree, target))
            key = target or ""
            conn.execute("INSERT INTO matrix_tables(commit_id, target, toolchains, functions, differing) "
                         "VALUES (?, ?, ?, ?, ?)", (commit_id, key, json.dumps(table.toolchains), table.functions,
                                                    table.differing))
            rows, d = [], 0
            for i, line in enumerate(table.lines):
                rows.append((commit_id, key, i, d if line.differs else None, line.function, line.spread,
                             json.dumps({tc: list(c) for tc, c in line.cells.items()}, separators=(",", ":"))))
                d += line.differs
            conn.executemany("INSERT INTO matrix_rows(commit_id, target, pos, diff_pos, function, spread, cells) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def refresh_matrices(self, only_missing: bool = True) -> int:
        """Rank the matrix rows of stored commits that have builds (those stored before 0013, or all):
        one transaction per commit. Returns how many commits were ranked."""
        q = ("SELECT c.id, c.sha, t.name FROM commits c JOIN trees t ON t.id = c.tree_id "
             "WHERE EXISTS (SELECT 1 FROM builds b WHERE b.commit_id = c.id)")
        if only_missing:
            q += " AND NOT EXISTS (SELECT 1 FROM matrix_tables m WHERE m.commit_id = c.id)"
        todo = self._conn().execute(q + " ORDER BY c.id").fetchall()
        for cid, sha, tree in todo:
            with self._tx() as conn:
                self._write_matrix(conn, cid, sha, tree)
        return len(todo)

    def _insert_object(self, conn: sqlite3.Connection, build_id: int, obj: ObjectRecord) -> None:
        oid = conn.execute("INSERT INTO objects(build_id, path, sha256, text, data, bss, sections, facts_z) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (build_id, obj.path, obj.sha256, obj.text, obj.data, obj.bss, json.dumps(obj.sections),
                            compress(json.dumps(obj.facts)) if obj.facts is not None else None)).lastrowid
        ids = self._name_ids(conn, [s.name for s in obj.symbols] + [s.section for s in obj.symbols]
                             + [f.name for f in obj.functions] + [c.function for c in obj.likely_paths]
                             + [p.name for p in obj.link_layout]
                             + [r.callee for r in obj.remarks] + [r.caller for r in obj.remarks])
        conn.executemany("INSERT INTO symbols(object_id, name_id, size, letter, section_id, offset) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids[s.name], s.size, s.letter, ids.get(s.section) if s.section else None,
                           s64(s.offset)) for s in obj.symbols])
        # one row per name, the last one given (what INSERT OR REPLACE kept; plain INSERTs run on both dialects)
        functions = list({f.name: f for f in obj.functions}.values())
        conn.executemany("INSERT INTO functions(object_id, name_id, size, declared, out_of_line, "
                         "inlined_count, inlined_bytes, callers, facts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, ids[f.name], f.size, f.declared, int(f.out_of_line), f.inlined_count,
                           f.inlined_bytes, f.callers, json.dumps(f.facts)) for f in functions])
        conn.executemany("INSERT INTO remarks(object_id, callee_id, caller_id, passed, reason, location) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids.get(r.callee) if r.callee else None, ids.get(r.caller) if r.caller else None,
                           int(r.passed), r.reason, r.location) for r in obj.remarks])
        likely = list({c.function: c for c in obj.likely_paths}.values())
        conn.executemany("INSERT INTO likely_paths(object_id, name_id, insns, bytes, branches, calls, "
                         "pushes, frame, memory, lines, end_kind, cycles, rthroughput, mcpu) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, ids[c.function], c.insns, c.bytes, c.branches, json.dumps(list(c.calls)), c.pushes,
                           c.frame, c.memory, c.lines, c.end, c.cycles, c.rthroughput, c.mcpu)
                          for c in likely])
        conn.executemany("INSERT INTO link_layouts(object_id, pos, name_id, ordinal, section, address, size, blocks, "
                         "lines, phase, pad_before, pad_after, neighbours) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, i, ids[p.name], p.ordinal, p.section, s64(p.address), p.size, p.blocks, p.lines,
                           p.phase, p.pad_before, p.pad_after,
                           json.dumps({"prev": p.prev.to_dict() if p.prev else None,
                                       "next": p.next.to_dict() if p.next else None}))
                          for i, p in enumerate(obj.link_layout)])
        if obj.inline_cost is not None:
            self._insert_inline_cost(conn, oid, obj.inline_cost)

    def _insert_inline_cost(self, conn: sqlite3.Connection, oid: int, ic: InlineCostRecord) -> None:
        """An object's inline cost (0014), in the transaction writing its build."""
        ids = self._name_ids(conn, [c.name for c in ic.callees] + [c.decl_file for c in ic.callees]
                             + [s for c in ic.callees for s in c.callers] + [c.symbol for c in ic.callers]
                             + [f.file for f in ic.files])
        u = ic.unattributed
        conn.execute("INSERT INTO inline_costs(object_id, units, scope, inlined_bytes, outside_symbols, "
                     "no_origin_name, empty_instances, undescribed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (oid, ic.units, json.dumps(list(ic.scope)) if ic.scope else "", ic.inlined_bytes,
                      u.outside_symbols, u.no_origin_name, u.empty_instances, u.undescribed))
        conn.executemany("INSERT INTO inline_callees(object_id, pos, name_id, decl_file_id, instances, bytes, "
                         "including, empty, callers, units) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(oid, i, ids[c.name], ids.get(c.decl_file) if c.decl_file else None, c.instances,
                           c.bytes, c.including, c.empty, len(c.callers), c.units) for i, c in enumerate(ic.callees)])
        conn.executemany("INSERT INTO inline_callee_callers(object_id, pos, caller_id, bytes) VALUES (?, ?, ?, ?)",
                         [(oid, i, ids[s], n) for i, c in enumerate(ic.callees) for s, n in c.callers.items()])
        conn.executemany("INSERT INTO inline_callers(object_id, name_id, size, inlined, own, undescribed) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(oid, ids[c.symbol], c.size, c.inlined, c.own, c.undescribed) for c in ic.callers])
        conn.executemany("INSERT INTO inline_files(object_id, file_id, callees, instances, bytes) "
                         "VALUES (?, ?, ?, ?, ?)",
                         [(oid, ids[f.file], f.callees, f.instances, f.bytes) for f in ic.files])

    @staticmethod
    def _insert_findings(conn: sqlite3.Connection, build_id: int, findings: list[FindingRow],
                         base_build_id: int | None = None) -> None:
        conn.executemany("INSERT INTO findings(build_id, base_build_id, kind, function, severity, message, data) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(build_id, base_build_id if base_build_id is not None else f.base_build_id, f.kind,
                           f.function, f.severity, f.message, json.dumps(f.data)) for f in findings])

    def record_comparison(self, build_id: int, base_build_id: int, findings: list[FindingRow],
                          tables: dict | None = None, inline_cost: dict | None = None,
                          link_moves: list[Move] | None = None) -> None:
        with self._tx() as conn:
            if link_moves is not None:      # in the transaction that upserts the comparisons row (0015)
                conn.execute("DELETE FROM link_moves WHERE build_id = ? AND base_build_id = ?",
                             (build_id, base_build_id))
                ids = self._name_ids(conn, [m.name for m in link_moves])
                conn.executemany("INSERT INTO link_moves(build_id, base_build_id, pos, name_id, shift, data) "
                                 "VALUES (?, ?, ?, ?, ?, ?)",
                                 [(build_id, base_build_id, i, ids[m.name], max(-(1 << 63), min(m.shift, (1 << 63) - 1)),
                                   json.dumps(m.to_dict(), separators=(",", ":")))
                                  for i, m in enumerate(link_moves)])
            conn.execute("DELETE FROM findings WHERE build_id = ? AND base_build_id = ?", (build_id, base_build_id))
            self._insert_findings(conn, build_id, findings, base_build_id)
            found = self._finding_keys(conn, [build_id, base_build_id])
            counts = count_findings(found.get(build_id, ()), base_build_id, own_keys(found.get(base_build_id, ())))
            conn.execute("INSERT INTO comparisons(build_id, base_build_id, counts) VALUES (?, ?, ?) "
                         "ON CONFLICT(build_id, base_build_id) DO UPDATE SET counts = excluded.counts",
                         (build_id, base_build_id, json.dumps(counts)))
            if tables is not None:          # (they depend on the two builds' symbols alone: kept when not given)
                conn.execute("INSERT INTO comparison_tables(build_id, base_build_id, tables_z) VALUES (?, ?, ?) "
                             "ON CONFLICT(build_id, base_build_id) DO UPDATE SET tables_z = excluded.tables_z",
                             (build_id, base_build_id, compress(json.dumps(tables, separators=(",", ":")))))
            if inline_cost is not None:     # (in this transaction: the comparisons upsert's triggers cover it)
                conn.execute("INSERT INTO comparison_inline_costs(build_id, base_build_id, report_z) VALUES (?, ?, ?) "
                             "ON CONFLICT(build_id, base_build_id) DO UPDATE SET report_z = excluded.report_z",
                             (build_id, base_build_id, compress(json.dumps(inline_cost, separators=(",", ":")))))

    @staticmethod
    def _finding_keys(conn: sqlite3.Connection, build_ids: list[int]) -> dict[int, list[tuple]]:
        """Each build's findings as db.finding_counts reads them, from the findings_summary index alone
        (0007), never the rows with their JSON data."""
        found: dict[int, list[tuple]] = {}
        for row in conn.execute("SELECT build_id, base_build_id, kind, function, severity, id FROM findings "
                                "WHERE build_id IN (SELECT value FROM json_each(?))", (json.dumps(build_ids),)):
            found.setdefault(row[0], []).append(row)
        return found

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
        return decompress(row[0], f"log of build {build_id}") if row else ""

    @_retry_busy
    def objects_for(self, build_id: int) -> list[ObjectRecord]:
        rows = self._conn().execute("SELECT path, sha256, text, data, bss, sections, id FROM objects "
                                    "WHERE build_id = ? ORDER BY path", (build_id,))
        return [ObjectRecord(p, h, *(number(v, f"sizes of object {i}") for v in (t, d, b)),
                             loads(s, f"sections of object {i}"), id=i) for p, h, t, d, b, s, i in rows]

    @_retry_busy
    def object_facts(self, build_id: int) -> dict[str, dict]:
        rows = self._conn().execute("SELECT path, facts_z FROM objects WHERE build_id = ? AND facts_z IS NOT NULL "
                                    "ORDER BY path", (build_id,))
        return {p: loads(decompress(z, f"facts of {p} (build {build_id})"), f"facts of {p} (build {build_id})")
                for p, z in rows}

    @_retry_busy
    def likely_paths_for(self, build_id: int) -> dict[str, list[FunctionCost]]:
        """Per object path, the stored likely paths of its hot functions (in function order)."""
        rows = self._conn().execute(
            "SELECT o.path, n.name, l.insns, l.bytes, l.branches, l.calls, l.pushes, l.frame, l.memory, l.lines, "
            "l.end_kind, l.cycles, l.rthroughput, l.mcpu FROM objects o JOIN likely_paths l ON l.object_id = o.id "
            "JOIN names n ON n.id = l.name_id WHERE o.build_id = ? ORDER BY o.path, n.name", (build_id,))
        out: dict[str, list[FunctionCost]] = {}
        for path, name, ins, by, br, calls, pu, fr, me, li, end, cy, rt, mc in rows:
            what = f"likely path of {name} (build {build_id})"
            ins, by, br, pu, fr, me, li = (number(v, what) for v in (ins, by, br, pu, fr, me, li))
            cy, rt = number(cy, what, None), number(rt, what, None)
            out.setdefault(path, []).append(FunctionCost(name, ins, by, br,
                                                         tuple(loads(calls, f"likely path calls of {name} (build {build_id})", list)), pu, fr, me,
                                                         li, end, cy, rt, mc))
        return out

    @_retry_busy
    def likely_path_points(self, name: str, build_ids: list[int]) -> dict[int, tuple[int, int | None]]:
        rows = self._conn().execute(
            "SELECT o.build_id, l.insns, l.cycles FROM names n JOIN likely_paths l ON l.name_id = n.id "
            "JOIN objects o ON o.id = l.object_id WHERE n.name = ? AND o.build_id IN (SELECT value FROM json_each(?))",
            (name, json.dumps(build_ids)))
        return {b: (number(i, f"likely path of {name} (build {b})"),
                    number(c, f"likely path of {name} (build {b})", None))
                for b, i, c in rows}

    @_retry_busy
    def inline_costs_for(self, build_id: int) -> list[InlineCostRecord]:
        conn = self._conn()
        heads = conn.execute(
            "SELECT o.id, o.path, i.units, i.scope, i.inlined_bytes, i.outside_symbols, i.no_origin_name, "
            "i.empty_instances, i.undescribed FROM objects o JOIN inline_costs i ON i.object_id = o.id "
            "WHERE o.build_id = ? ORDER BY o.path", (build_id,)).fetchall()
        out = []
        for oid, path, units, scope, inlined, outside, noname, empty, undescribed in heads:
            what = f"inline cost of {path} (build {build_id})"
            units, inlined, outside, noname, empty, undescribed = (
                number(v, what) for v in (units, inlined, outside, noname, empty, undescribed))
            callees: dict[int, InlineCalleeRow] = {}
            for pos, name, decl, inst, by, incl, em, un in conn.execute(
                    "SELECT c.pos, n.name, d.name, c.instances, c.bytes, c.including, c.empty, c.units "
                    "FROM inline_callees c JOIN names n ON n.id = c.name_id LEFT JOIN names d ON d.id = c.decl_file_id "
                    "WHERE c.object_id = ? ORDER BY c.pos", (oid,)):
                callees[pos] = InlineCalleeRow(name, decl, *(number(v, what) for v in (inst, by, incl, em, un)))
            for pos, caller, by in conn.execute(
                    "SELECT p.pos, n.name, p.bytes FROM inline_callee_callers p JOIN names n ON n.id = p.caller_id "
                    "WHERE p.object_id = ? ORDER BY p.pos, p.bytes DESC, n.name", (oid,)):
                if pos in callees:
                    callees[pos].callers[caller] = number(by, what)
            callers = [CallerCost(r[0], *(number(v, what) for v in r[1:])) for r in conn.execute(
                "SELECT n.name, c.size, c.inlined, c.own, c.undescribed FROM inline_callers c "
                "JOIN names n ON n.id = c.name_id WHERE c.object_id = ? ORDER BY n.name", (oid,))]
            files = [FileCost(r[0], *(number(v, what) for v in r[1:])) for r in conn.execute(
                "SELECT n.name, f.callees, f.instances, f.bytes FROM inline_files f JOIN names n ON n.id = f.file_id "
                "WHERE f.object_id = ? ORDER BY n.name", (oid,))]
            out.append(InlineCostRecord(path, units, list(callees.values()), callers, files,
                                        Unattributed(outside, noname, empty, undescribed), inlined,
                                        tuple(loads(scope, f"scope of the {what}", list)) if scope else ()))
        return out

    @_retry_busy
    def inline_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                       target: str | None = None) -> list[InlinePoint]:
        """Ordered as function_history: by commit (generation, then date), toolchain name, build id."""
        conn = self._conn()
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        if nid is None or conn.execute("SELECT 1 FROM inline_callees WHERE name_id = ? LIMIT 1",
                                       (nid[0],)).fetchone() is None:
            return []
        where, args = self._build_filters(toolchain, tree, target)
        got: dict[int, list] = {}
        for bid, inst, by, incl, callers, units, decl in conn.execute(
                "SELECT o.build_id, c.instances, c.bytes, c.including, c.callers, c.units, d.name "
                "FROM inline_callees c JOIN objects o ON o.id = c.object_id LEFT JOIN names d ON d.id = c.decl_file_id "
                "WHERE c.name_id = ?", (nid[0],)):
            p = got.setdefault(bid, [0, 0, 0, 0, 0, []])
            for i, v in enumerate((inst, by, incl, callers, units)):
                p[i] += number(v, f"inline cost of {name} (build {bid})")
            if decl and decl not in p[5]:
                p[5].append(decl)
        rows = conn.execute(f"SELECT DISTINCT b.id, b.commit_id, b.toolchain_id, b.target FROM builds b "
                            f"JOIN objects o ON o.build_id = b.id JOIN inline_costs i ON i.object_id = o.id "
                            f"WHERE 1 = 1{where}", args).fetchall()
        commits, tcs = self._commits_by_id({r[1] for r in rows}), self._toolchain_names()
        rows = self._placed(rows, commits, tcs, 1, 2)
        rows.sort(key=lambda r: (self._history_order(commits[r[1]]), tcs[r[2]][0], r[0]))
        out = []
        for bid, cid, tcid, tgt in rows:
            c = commits[cid]
            inst, by, incl, callers, units, decls = got.get(bid, [0, 0, 0, 0, 0, []])
            out.append(InlinePoint(c.sha, c.subject, c.date, *tcs[tcid], tgt, bid, inst, by, incl, callers, units,
                                   sorted(decls)))
        return out

    @_retry_busy
    def runtime_for(self, build_id: int) -> Runtime | None:
        row = self._conn().execute("SELECT data FROM runtimes WHERE build_id = ?", (build_id,)).fetchone()
        if row is None:
            return None
        try:
            return Runtime.from_dict(json.loads(row[0]))
        except (ValueError, TypeError, InputError):
            return Runtime("failed", unreadable(f"runtime measurement of build {build_id}"))

    @_retry_busy
    def runtime_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                        target: str | None = None) -> list[RuntimePoint]:
        """Ordered as function_history: by commit (generation, then date), toolchain name, build id."""
        conn = self._conn()
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        if nid is None:
            return []
        got: dict[int, dict[int, tuple[float, float, int]]] = {}
        for bid, order, ins, calls, lines in conn.execute(
                "SELECT build_id, page_order, instructions, calls, lines FROM runtime_functions WHERE name_id = ? "
                "ORDER BY build_id, page_order", (nid[0],)):
            got.setdefault(bid, {})[order] = (ins, calls, lines)
        if not got:
            return []
        where, args = self._build_filters(toolchain, tree, target)
        rows = conn.execute(f"SELECT b.id, b.commit_id, b.toolchain_id, b.target FROM builds b "
                            f"JOIN runtimes r ON r.build_id = b.id WHERE r.status = 'ok'{where}", args).fetchall()
        commits, tcs = self._commits_by_id({r[1] for r in rows}), self._toolchain_names()
        rows.sort(key=lambda r: (self._history_order(commits[r[1]]), tcs[r[2]][0], r[0]))
        return [RuntimePoint(commits[cid].sha, commits[cid].subject, commits[cid].date, *tcs[tcid], tgt, bid,
                             got.get(bid, {})) for bid, cid, tcid, tgt in rows]

    @_retry_busy
    def symbols_for(self, build_id: int) -> list[SymbolRow]:
        rows = self._conn().execute(
            "SELECT n.name, s.size, s.letter, sn.name, s.\"offset\" FROM objects o "
            "JOIN symbols s ON s.object_id = o.id JOIN names n ON n.id = s.name_id "
            "LEFT JOIN names sn ON sn.id = s.section_id WHERE o.build_id = ?", (build_id,))
        what = f"symbols of build {build_id}"
        return [SymbolRow(n, z if type(z) is int else number(z, what), le, sec,
                          u64(off if type(off) is int else number(off, what))) for n, z, le, sec, off in rows]

    @staticmethod
    def _placement(name: str, row: tuple, what: str) -> HotPlacement:
        ordinal, section, address, size, blocks, lines, phase, pad_before, pad_after, nb = row
        ordinal, address, size, blocks, lines, pad_before, pad_after = (
            number(v, f"link layout of {name}") for v in (ordinal, address, size, blocks, lines, pad_before, pad_after))
        nb = loads(nb, what)
        near = {k: Neighbour(str(v.get("name", "")), int(v.get("address", 0)), int(v.get("size", 0)))
                if isinstance(v, dict) else None for k, v in ((k, nb.get(k)) for k in ("prev", "next"))}
        return HotPlacement(name, ordinal, section, u64(address), size, blocks, lines, phase, pad_before, pad_after,
                            near["prev"], near["next"])

    _PLACEMENT = ("l.ordinal, l.section, l.address, l.size, l.blocks, l.lines, l.phase, l.pad_before, l.pad_after, "
                  "l.neighbours")

    @_retry_busy
    def link_layout_for(self, build_id: int) -> dict[str, list[HotPlacement]]:
        rows = self._conn().execute(
            f"SELECT o.path, n.name, {self._PLACEMENT} FROM objects o JOIN link_layouts l ON l.object_id = o.id "
            "JOIN names n ON n.id = l.name_id WHERE o.build_id = ? ORDER BY o.path, l.pos", (build_id,))
        out: dict[str, list[HotPlacement]] = {}
        for path, name, *rest in rows:
            out.setdefault(path, []).append(self._placement(name, tuple(rest), f"neighbours of {name} (build {build_id})"))
        return out

    @_retry_busy
    def text_symbols(self, build_ids: list[int], path: str, sections: list[str]
                     ) -> dict[int, list[tuple[str, str, int, int]]]:
        # the symbols by name id, then each distinct name once for all the builds (a vmlinux pair shares
        # nearly all of its ~50k text symbols): a third of the time of joining names per row
        conn = self._conn()
        secs = dict(conn.execute("SELECT id, name FROM names WHERE name IN (SELECT value FROM json_each(?))",
                                 (json.dumps(sections),)))
        got = {b: conn.execute(
            "SELECT s.name_id, s.section_id, s.\"offset\", s.size FROM objects o JOIN symbols s ON s.object_id = o.id "
            "WHERE o.build_id = ? AND o.path = ? AND s.section_id IN (SELECT value FROM json_each(?))",
            (b, path, json.dumps(sorted(secs)))).fetchall() for b in build_ids}
        ids = sorted({r[0] for rows in got.values() for r in rows})
        names = dict(conn.execute("SELECT id, name FROM names WHERE id IN (SELECT value FROM json_each(?))",
                                  (json.dumps(ids),)))
        what = f"symbols of {path}"
        return {b: [(names[n], secs[sec], u64(a if type(a) is int else number(a, what)),
                     z if type(z) is int else number(z, what)) for n, sec, a, z in rows] for b, rows in got.items()}

    @_retry_busy
    def link_moves_for(self, build_id: int, base_build_id: int) -> list[Move] | None:
        rows = self._conn().execute("SELECT data FROM link_moves WHERE build_id = ? AND base_build_id = ? ORDER BY pos",
                                    (build_id, base_build_id)).fetchall()
        if not rows:
            return None
        out = []
        for (data,) in rows:
            d = loads(data, f"link moves of build {build_id} vs {base_build_id}")
            try:
                out.append(Move.from_dict(d))
            except (KeyError, TypeError, ValueError):
                continue            # a damaged row (loads noted it): the others are still shown
        return out

    @_retry_busy
    def link_points(self, name: str, build_ids: list[int]) -> dict[int, HotPlacement]:
        rows = self._conn().execute(
            f"SELECT o.build_id, {self._PLACEMENT} FROM names n JOIN link_layouts l ON l.name_id = n.id "
            "JOIN objects o ON o.id = l.object_id WHERE n.name = ? AND o.build_id IN (SELECT value FROM json_each(?)) "
            "ORDER BY o.build_id, l.ordinal, l.pos", (name, json.dumps(build_ids)))
        out: dict[int, HotPlacement] = {}
        for bid, *rest in rows:
            if bid not in out:
                out[bid] = self._placement(name, tuple(rest), f"neighbours of {name} (build {bid})")
        return out

    @_retry_busy
    def functions_for(self, build_id: int) -> list[FunctionRow]:
        rows = self._conn().execute(
            "SELECT n.name, f.size, f.declared, f.out_of_line, f.inlined_count, f.inlined_bytes, f.callers, f.facts "
            "FROM objects o JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id "
            "WHERE o.build_id = ? ORDER BY n.name", (build_id,))
        return [FunctionRow(n, *self._function_numbers(n, build_id, s, d, oo, ic, ib, ca),
                            loads(fa, f"facts of function {n} (build {build_id})"))
                for n, s, d, oo, ic, ib, ca, fa in rows]

    @staticmethod
    def _function_numbers(n: str, build_id: int, s, d, oo, ic, ib, ca) -> tuple:
        what = f"facts of function {n} (build {build_id})"
        s, oo, ic, ib, ca = (number(v, what) for v in (s, oo, ic, ib, ca))
        return s, d, bool(oo), ic, ib, ca

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
        return [FindingRow(k, f, s, m, loads(d, f"data of a {k} finding (build {build_id})"), b)
                for k, f, s, m, d, b in rows]

    @_retry_busy
    def has_comparison(self, build_id: int, base_build_id: int) -> bool:
        return self._conn().execute("SELECT 1 FROM comparisons WHERE build_id = ? AND base_build_id = ?",
                                    (build_id, base_build_id)).fetchone() is not None

    @_retry_busy
    def comparison_tables(self, build_id: int, base_build_id: int) -> dict | None:
        row = self._conn().execute("SELECT tables_z FROM comparison_tables WHERE build_id = ? AND base_build_id = ?",
                                   (build_id, base_build_id)).fetchone()
        if not row:
            return None
        what = f"bloat-o-meter tables of build {build_id} vs {base_build_id}"
        got = loads(decompress(row[0], what), what)
        return got or None               # unreadable: computed again from the stored symbols

    @_retry_busy
    def comparison_inline_cost(self, build_id: int, base_build_id: int) -> dict | None:
        row = self._conn().execute("SELECT report_z FROM comparison_inline_costs WHERE build_id = ? "
                                   "AND base_build_id = ?", (build_id, base_build_id)).fetchone()
        if not row:
            return None
        what = f"inline cost of build {build_id} vs {base_build_id}"
        return loads(decompress(row[0], what), what) or None     # unreadable: compared again from the rows

    @staticmethod
    def _build_filters(toolchain: str | None, tree: str | None, target: str | None) -> tuple[str, list]:
        """SQL conditions on ``builds b`` (and their arguments) keeping one toolchain, tree or target."""
        where, args = "", []
        for cond, val in ((" AND b.toolchain_id IN (SELECT id FROM toolchains WHERE name = ?)", toolchain),
                          (" AND b.commit_id IN (SELECT c.id FROM commits c JOIN trees t ON t.id = c.tree_id "
                           "WHERE t.name = ?)", tree),
                          (" AND b.target = ?", target)):
            if val:
                where += cond
                args.append(val)
        return where, args

    def _history_rows(self, name: str, toolchain: str | None, tree: str | None, target: str | None) -> list[tuple]:
        """Every stored build holding the function as (build id, commit id, toolchain id, target, status,
        size, declared, out_of_line, inlined_count).

        ``size`` sums the function's text symbols and its clones (``name.part.0``, ``name.cold``,
        ``name.constprop.0``...): what the source function costs. A plain name is one index range of
        function_sizes (0009, kept by triggers: 0010); a name with a dot (one clone) is summed from the
        symbols. CROSS JOIN keeps function_sizes the outer loop: with ANALYZE statistics sqlite otherwise
        walks every build and probes function_sizes per build (8,000 probes: 25 ms instead of 7).
        """
        conn = self._conn()
        where, args = self._build_filters(toolchain, tree, target)
        head = "SELECT b.id, b.commit_id, b.toolchain_id, b.target, b.status"
        if "." in name:
            return self._clone_history_rows(conn, name, f"{head} FROM builds b "
                                            f"WHERE b.id IN (SELECT value FROM json_each(?)){where}", args)
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        return conn.execute(f"{head}, p.size, p.declared, p.out_of_line, p.inlined_count FROM function_sizes p "
                            f"CROSS JOIN builds b ON b.id = p.build_id WHERE p.name_id = ?{where}",
                            [nid[0], *args]).fetchall() if nid else []

    def _history_columns(self, name: str, toolchain: str | None, tree: str | None,
                         target: str | None) -> list[tuple]:
        """The same as (toolchain id, target, build ids, commit ids, statuses, sizes, declared, out_of_line,
        inlined_count): one tuple of parallel lists per toolchain id and target.

        For a plain name sqlite gathers each of those lists into a JSON array: the sqlite3 module turns
        every row into Python objects and releases the GIL per row, so 8,000 rows cost ~12 ms alone and,
        beside a busy request thread, wait up to the 5 ms switch interval each; 8 rows of JSON decode in C.
        """
        if "." in name:
            lines: dict[tuple, list[tuple]] = {}
            for r in self._history_rows(name, toolchain, tree, target):
                lines.setdefault((r[2], r[3]), []).append(r)
            return [(tcid, tgt, *(list(col) for i, col in enumerate(zip(*rows)) if i not in (2, 3)))
                    for (tcid, tgt), rows in lines.items()]
        conn = self._conn()
        nid = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        if nid is None:
            return []
        where, args = self._build_filters(toolchain, tree, target)
        cols = ("b.id", "b.commit_id", "b.status", "p.size", "p.declared", "p.out_of_line", "p.inlined_count")
        rows = conn.execute(f"SELECT b.toolchain_id, b.target, {', '.join(f'json_group_array({c})' for c in cols)} "
                            f"FROM function_sizes p CROSS JOIN builds b ON b.id = p.build_id "
                            f"WHERE p.name_id = ?{where} GROUP BY b.toolchain_id, b.target", [nid[0], *args]).fetchall()
        return [(tcid, tgt, *map(json.loads, arrays)) for tcid, tgt, *arrays in rows]

    def _commits_by_id(self, ids: set[int]) -> dict[int, Commit]:
        rows = self._conn().execute(
            "SELECT c.sha, c.parent_sha, c.subject, c.author, c.date, t.name, c.id, c.generation FROM commits c "
            "JOIN trees t ON t.id = c.tree_id WHERE c.id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(i for i in ids if type(i) is int)),))   # text in a commit_id points nowhere
        return {c.id: c for c in (Commit(*r) for r in rows)}

    def _toolchain_names(self) -> dict[int, tuple[str, str]]:
        """(name, version) by id: history rows carry the id, 8,000 copies of the strings cost more than the query."""
        return {i: (n, v) for i, n, v in self._conn().execute("SELECT id, name, version FROM toolchains")}

    @staticmethod
    def _clone_history_rows(conn: sqlite3.Connection, name: str, builds_q: str, args: list) -> list[tuple]:
        ids = [i for (i,) in conn.execute("SELECT id FROM names WHERE name = ? OR (name > ? AND name < ?)",
                                          (name, name + ".", name + "/"))]
        if not ids:
            return []
        exact = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        # index-only reads merged here: LEFT JOINs of aggregates make sqlite rescan per build
        sizes = {b: summed(n, f"symbols of build {b}") for b, n in conn.execute(
            f"SELECT o.build_id, sum(s.size) FROM symbols s JOIN objects o ON o.id = s.object_id "
            f"WHERE s.name_id IN ({','.join('?' * len(ids))}) AND s.letter IN ('t','T','w','W') GROUP BY o.build_id",
            ids)}
        facts = {bid: (decl, ool, ic) for bid, decl, ool, ic in conn.execute(
            "SELECT o.build_id, f.declared, f.out_of_line, f.inlined_count FROM functions f "
            "JOIN objects o ON o.id = f.object_id WHERE f.name_id = ?", (exact[0] if exact else -1,))}
        wanted = sorted(sizes.keys() | facts.keys())
        none = (None, None, None)
        return [(*r, sizes.get(r[0]), *facts.get(r[0], none))
                for r in conn.execute(builds_q, [json.dumps(wanted), *args])] if wanted else []

    @staticmethod
    def _placed(rows: list, commits: dict | None, tcs: dict, commit_at: int | None, toolchain_at: int) -> list:
        """The rows whose commit and toolchain exist: a build whose key points nowhere (a damaged
        ``commit_id``/``toolchain_id``, which ``db check`` reports) is left out, noted as damage."""
        kept = [r for r in rows if (commit_at is None or r[commit_at] in commits) and r[toolchain_at] in tcs]
        if len(kept) != len(rows):
            note_damage("builds whose commit or toolchain is missing")
        return kept

    @staticmethod
    def _history_order(c: Commit) -> tuple:
        return (c.generation or 0, c.date, c.id)

    @_retry_busy
    def function_history(self, name: str, toolchain: str | None = None, tree: str | None = None,
                         target: str | None = None) -> list[HistoryPoint]:
        """Ordered by commit (generation, then date), then toolchain name and build id."""
        rows = self._history_rows(name, toolchain, tree, target)
        commits, tcs = self._commits_by_id({r[1] for r in rows}), self._toolchain_names()
        rows = self._placed(rows, commits, tcs, 1, 2)
        rows.sort(key=lambda r: (self._history_order(commits[r[1]]), tcs[r[2]][0], r[0]))
        out = []
        for bid, cid, tcid, tgt, st, size, decl, ool, ic in rows:
            c = commits[cid]
            what = f"size of {name} (build {bid})"
            size, ool, ic = number(size, what, None), number(ool, what, None), number(ic, what, None)
            out.append(HistoryPoint(c.sha, c.subject, c.date, *tcs[tcid], tgt, bid, st, size, decl,
                                    None if ool is None else bool(ool), ic))
        return out

    @_retry_busy
    def function_series(self, name: str, toolchain: str | None = None, tree: str | None = None,
                        target: str | None = None) -> FunctionSeries:
        found = self._history_columns(name, toolchain, tree, target)
        commits = self._commits_by_id(set().union(*(f[3] for f in found)))
        tcs = self._toolchain_names()
        order = sorted(commits.values(), key=self._history_order)
        pos = {c.id: i for i, c in enumerate(order)}
        n = len(order)
        lines: dict[tuple[str, str], FunctionLine] = {}
        for tcid, tgt, bids, cids, sts, sizes, decls, ools, ics in self._placed(found, None, tcs, None, 0):
            key = (tcs[tcid][0], tgt)           # several versions of one toolchain name: one line
            line = lines.get(key)
            if line is None:
                line = lines[key] = FunctionLine(*key, *([None] * n for _ in range(6)))
            have = line.build_id
            what = f"sizes of {name} ({key[0]}, {key[1]})"
            sizes, ools, ics = (numbers(v, what, None) for v in (sizes, ools, ics))
            for bid, cid, st, size, decl, ool, ic in zip(bids, cids, sts, sizes, decls, ools, ics):
                i = pos.get(cid)
                if i is None:
                    note_damage(f"builds of {name} whose commit is missing")
                    continue
                if have[i] is not None and have[i] > bid:
                    continue                    # a commit's latest build of the line wins
                have[i], line.status[i], line.size[i], line.declared[i] = bid, st, size, decl
                line.out_of_line[i], line.inlined_count[i] = None if ool is None else bool(ool), ic
        return FunctionSeries(name, order, [ln for ln in lines.values() if any(b is not None for b in ln.build_id)])

    @_retry_busy
    def toolchain_matrix(self, sha: str, tree: str | None = None, target: str | None = None) -> list[MatrixRow]:
        """Every function of a commit's builds, one cell per toolchain (latest build of each)."""
        builds: dict[str, Build] = {}
        for b in self.builds_for_commit(sha, tree):
            if b.status == "ok" and (target is None or b.target == target):
                builds[b.toolchain] = b          # ordered by id: the latest wins
        conn = self._conn()
        ids = json.dumps([b.id for b in builds.values()])
        # one JSON object per build, gathered by sqlite (see _history_columns: rows cost more than the query)
        sizes = {bid: json.loads(doc) for bid, doc in conn.execute(
            "SELECT build_id, json_group_object(name, size) FROM (SELECT o.build_id AS build_id, n.name AS name, "
            "sum(s.size) AS size FROM objects o JOIN symbols s ON s.object_id = o.id JOIN names n ON n.id = s.name_id "
            "WHERE o.build_id IN (SELECT value FROM json_each(?)) AND s.letter IN ('t','T','w','W') "
            "GROUP BY o.build_id, n.name) AS per_name GROUP BY build_id", (ids,))}
        facts = {bid: json.loads(doc) for bid, doc in conn.execute(
            "SELECT o.build_id, json_group_object(n.name, json_array(f.declared, f.out_of_line, f.inlined_count)) "
            "FROM objects o JOIN functions f ON f.object_id = o.id JOIN names n ON n.id = f.name_id "
            "WHERE o.build_id IN (SELECT value FROM json_each(?)) GROUP BY o.build_id", (ids,))}
        cells: dict[str, dict] = {}
        for label, b in builds.items():
            what = f"symbols of build {b.id}"
            for name, size in sizes.get(b.id, {}).items():
                cells.setdefault(name, {})[label] = [summed(size, what), None, None, None]
            for name, (decl, ool, ic) in facts.get(b.id, {}).items():
                cell = cells.setdefault(name, {}).setdefault(label, [None, None, None, None])
                cell[1:] = [decl, bool(number(ool, what)), number(ic, what)]
        out = []
        for name in sorted(cells):
            row = {label: tuple(cells[name].get(label, (None, None, None, None))) for label in builds}
            out.append(MatrixRow(name, row))
        return out

    @_retry_busy
    def matrix_table(self, sha: str, tree: str | None, target: str | None, show_all: bool, limit: int,
                     offset: int) -> _matrix.MatrixTable | None:
        conn = self._conn()
        q = ("SELECT m.commit_id, m.toolchains, m.functions, m.differing FROM matrix_tables m "
             "JOIN commits c ON c.id = m.commit_id JOIN trees t ON t.id = c.tree_id WHERE c.sha = ? AND m.target = ?")
        args: list = [sha, target or ""]
        if tree:
            q += " AND t.name = ?"
            args.append(tree)
        head = conn.execute(q, args).fetchone()
        if head is None:
            return None
        cid, tcs, functions, differing = head
        if show_all:
            rows = conn.execute("SELECT function, spread, diff_pos, cells FROM matrix_rows WHERE commit_id = ? "
                                "AND target = ? ORDER BY pos LIMIT ? OFFSET ?", (cid, target or "", limit, offset))
        else:
            rows = conn.execute("SELECT function, spread, diff_pos, cells FROM matrix_rows WHERE commit_id = ? "
                                "AND target = ? AND diff_pos IS NOT NULL ORDER BY diff_pos LIMIT ? OFFSET ?",
                                (cid, target or "", limit, offset))
        lines = []
        try:
            tcs = json.loads(tcs)
            for f, spread, pos, cells in rows:
                cells = json.loads(cells)
                if type(spread) is not int or not isinstance(cells, dict) or not all(
                        isinstance(c, list) and len(c) == 5 for c in cells.values()):
                    return None
                lines.append(_matrix.MatrixLine(f, spread, pos is not None, {tc: tuple(c) for tc, c in cells.items()}))
        except (ValueError, TypeError):
            return None             # damaged ranking: ranked again from the builds' own rows, per request
        if not isinstance(tcs, list) or type(functions) is not int or type(differing) is not int:
            return None
        return _matrix.MatrixTable(tcs, functions, differing, lines)

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
            cover = decompress(cover_z, f"cover letter of series {sid}")
            ver = number(ver, f"version of series {sid}", 1)
            out.append(Series(tree, mid, subj, ver, author, date, cover, base, status, err, created,
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
        bases: dict[tuple, tuple[int, str]] = {}       # any build as a base: ordered by id, the latest wins

        def base_rows(rows: Iterable[tuple]) -> None:
            for bid, sha, _, tname, tc, ver, key, target, status, _ in rows:
                bases[(tname, sha, tc, ver, key, target)] = (bid, status)
        rows = conn.execute(q + tree_q + " ORDER BY b.id", [json.dumps(list(shas)), *tree_a]).fetchall()
        for row in rows:
            bid, sha, parent, tname, tc, ver, key, target = row[:8]
            heads[(sha, tc, key, target)] = row          # ordered by id: the latest build wins
            parents[sha] = parent
        base_rows(rows)
        # the parents not asked for themselves (along a history most are: a page lists runs of commits)
        wanted_parents = sorted({p for p in parents.values() if p} - set(parents))
        if wanted_parents:
            base_rows(conn.execute(q + tree_q + " ORDER BY b.id", [json.dumps(wanted_parents), *tree_a]))
        out: list[BuildSummary] = []
        for (sha, tc, key, target), (bid, _, parent, tname, _, ver, _, _, status, errors) in heads.items():
            base = bases.get((tname, parent, tc, ver, key, target)) if parent else None
            out.append(BuildSummary(sha, bid, tc, ver, key, target, status,
                                    loads(errors, f"errors of build {bid}", list) if errors != "[]" else [], None,
                                    base[0] if base else None, base[1] if base else None))
        ids = [s.build_id for s in out] + [s.base_build_id for s in out if s.base_build_id is not None]
        ids_json = json.dumps(ids)
        text = dict(conn.execute("SELECT build_id, sum(text) FROM objects WHERE build_id IN "
                                 "(SELECT value FROM json_each(?)) GROUP BY build_id", (ids_json,)))
        text = {b: summed(n, f"sizes of objects of build {b}") for b, n in text.items()}
        for s in out:
            s.text = text.get(s.build_id) if s.status == "ok" else None
            s.base_text = text.get(s.base_build_id) if s.base_status == "ok" else None
        # counts stored with the comparison (0009), all in one JSON document (~500 small json.loads calls
        # cost ~4 ms); builds without stored counts are counted here from their findings
        (doc,) = conn.execute(
            "SELECT json_group_array(json_array(build_id, base_build_id, json(counts))) FROM comparisons "
            "WHERE json_valid(counts) AND "           # damaged counts: counted again from the findings below
            "counts IS NOT NULL AND build_id IN (SELECT value FROM json_each(?))",
            (json.dumps([s.build_id for s in out]),)).fetchone()
        stored = {(b, base): c for b, base, c in json.loads(doc)}
        counts: list[dict | None] = [stored.get((s.build_id, s.base_build_id)) if s.base_status == "ok" else None
                                     for s in out]
        missing = [s for s, c in zip(out, counts) if c is None]
        if missing:
            found = self._finding_keys(conn, [s.build_id for s in missing] +
                                       [s.base_build_id for s in missing if s.base_status == "ok"])
            for k, s in enumerate(out):
                if counts[k] is None:
                    before = own_keys(found.get(s.base_build_id, ())) if s.base_status == "ok" else set()
                    counts[k] = count_findings(found.get(s.build_id, ()), s.base_build_id, before)
        worst_ids: dict[int, BuildSummary] = {}
        for s, c in zip(out, counts):
            s.severities, s.kinds, s.carried = c["severities"], c["kinds"], c["carried"]
            if c["worst"] is not None:
                worst_ids[c["worst"]] = s
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

    @_retry_busy
    def change_stamp(self, commit: str | None = None, series: int | None = None) -> tuple:
        conn = self._conn()
        if commit is not None:
            return _changes.commit_stamp(conn, commit)
        if series is not None:
            return _changes.series_stamp(conn, series)
        return _changes.store_stamp(conn)

    def identity(self) -> str:
        row = self._conn().execute("SELECT n FROM change_counters WHERE scope = 'store_id'").fetchone()
        if row is None:
            raise StoreError(f"{self.path}: the store has no store_id (damaged: sizewatch db check)")
        return f"store-{int(row[0]):x}"

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class PgStore(SqliteStore):
    """The store in a PostgreSQL database (``postgresql://user:password@host:port/dbname``).

    Every query and write is SqliteStore's, over ``db.pg`` connections (one per thread, reconnected
    after the server went away). What the sqlite store does with its file, this does with the
    database: creates and migrates the tables in an empty database, refuses one holding tables it
    did not write or a newer schema, and a reader (``read_only``: every transaction read-only)
    never creates a store. ``path`` is the URL without its password (messages, cache names).
    """

    def __init__(self, url: str, upto: int | None = None, read_only: bool = False):
        from db.pg import Connection
        self._Connection = Connection
        self.url = url
        self.path = _dialect.redact(url)
        try:                                 # a URL psycopg would refuse with a traceback: one line here
            urlsplit(url).port
        except ValueError as e:
            # urllib quotes what it could not read, which may be a piece of a password ('u:ab#cd@h')
            why = re.sub(r"'[^']*'", "'...'", _dialect.scrub(str(e), url))
            raise StoreError(f"{self.path}: not a usable PostgreSQL URL: {why}") from None
        self.read_only = read_only
        self._local = threading.local()
        self._bot = SqliteBotStore(self)
        self._names: dict[str, int] = {}
        self._names_lock = threading.Lock()
        try:
            conn = self._conn()
            done = _migrate.applied(conn)
            if not done:
                tables = [t for (t,) in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    "ORDER BY table_name")]
                if tables:
                    raise StoreError(f"a database that is not a sizewatch store (its tables: {', '.join(tables[:5])}"
                                     f"{', ...' if len(tables) > 5 else ''}); left untouched")
                if read_only:
                    raise StoreError("no store there yet (sizewatch run or sizewatch bot writes one)")
            if read_only:
                self._read_only_ready(upto)
            else:
                _migrate.migrate(conn, upto=upto)
        except StoreError as e:
            self.close()
            msg = str(e)
            raise type(e)(msg if msg.startswith(self.path) else f"{self.path}: {msg}") from None

    def _read_only_ready(self, upto: int | None) -> None:
        todo = [m for m in _migrate.pending(self._conn()) if upto is None or m.version <= upto]
        if not todo:
            return
        try:
            PgStore(self.url, upto=upto).close()     # one writable session, for the migrations only
        except StoreError as e:
            raise StoreError(f"the store needs migration {todo[0].path.name} and this session cannot apply "
                             f"it ({e}): open it once with a role that may (any sizewatch run)") from None

    @contextmanager
    def exclusive(self, what: str) -> Iterator[bool]:
        """Whether this process holds ``what`` (one bot per store) while the block runs: a session
        advisory lock on a connection of its own, so it holds across machines and goes with the
        process (a killed bot's lock is released by the server)."""
        conn = self._Connection(self.url)
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(?, ?)", (1, zlib.crc32(what.encode()) & 0x7FFFFFFF)
                               ).fetchone()[0]
            yield bool(got)
        finally:
            conn.close()

    def _conn(self):
        conn = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed:
            return conn
        if conn is not None:
            conn.close()
        conn = self._Connection(self.url, read_only=self.read_only)
        self._local.conn = conn
        return conn
