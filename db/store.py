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

import os
import re
import sqlite3
import threading
import zlib
from urllib.parse import urlsplit
from abc import ABC, abstractmethod
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from analyzer.likely_path_cost import FunctionCost
from analyzer.link_layout import HotPlacement, Move
from analyzer.runtime import Runtime
from db import dialect as _dialect, matrix as _matrix, migrate as _migrate
from db.botstore import BotStore, SqliteBotStore
from db.sqlite import BUSY_TIMEOUT_MS, text_factory, unreadable
from db.errors import NoStoreYet, StoreError
from db.builds import MAX_BUNDLE, BuildRows  # noqa: F401  (MAX_BUNDLE: API)
from db.comparisons import ComparisonRows
from db.dashboard import DashboardRows
from db.history import HistoryRows
from db.matrix_rows import MatrixRows
from db.sqlite_base import SqliteBase
from db.models import (Build, BuildRecord, build_complete, BuildSummary, Commit, FindingRow, FunctionRow, FunctionSeries, HistoryPoint, InlineCostRecord, InlinePoint, MatrixRow, ObjectRecord, RemarkRow, RuntimePoint, Series, SymbolRow)


def default_path() -> Path | str:
    """``$SIZEWATCH_DB`` (a file, or a ``postgresql://`` URL returned as the string it is), else
    ``<cache>/sizewatch.db`` (cache: ``$SIZEWATCH_CACHE`` or ~/.cache/sizewatch)."""
    env = os.environ.get("SIZEWATCH_DB")
    if env:
        return env if _dialect.is_url(env) else Path(env)
    from toolchains.source import cache_dir
    return cache_dir() / "sizewatch.db"


def beside(where: str | os.PathLike, suffix: str) -> Path:
    """Where files kept for a store go (the page cache ``.pages``, job logs ``.jobs``): beside an sqlite file ``<db><suffix>``; for a PostgreSQL store, which has no file to
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


def create_store_file(path: Path) -> None:
    """A new store file, made whole before it has its name. sqlite creates the file when it opens it
    and writes its first page only later (switching to WAL, an fsync away): a process killed in between
    left a zero-byte file, which check_store_file rightly refuses as not a store, so every later run
    failed until someone removed it. The first page is written to a file of its own beside it, linked
    into place only when complete and only when no other process made the store meanwhile."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        finally:
            conn.close()
        if mode.lower() != "wal":
            raise StoreError(f"{path}: cannot switch to WAL mode (got {mode})")
        try:
            os.link(tmp, path)
        except FileExistsError:                     # another process made it first: theirs is used
            pass
        except OSError:                             # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: cannot create a store: {e}") from None
    except OSError as e:
        raise StoreError(f"{path}: cannot create a store: {e.strerror or e}") from None
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)


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

    def build_done(self, build: Build | None, analysis_version: int = 0, measured: bool = False) -> bool:
        """Whether ``build`` (as ``find_build`` returned it; None: not stored) needs nothing more: stored,
        failed (a result) or analyzed at ``analysis_version`` or later and, with ``measured``, its measurement
        stored (a failed measurement is a result: not measured again). ``models.build_complete``'s rule."""
        if build is None:
            return False
        return build_complete(build.status, build.analysis_version, analysis_version,
                              not measured or build.status != "ok" or self.runtime_for(build.id) is not None)

    def has_build(self, tree: str, sha: str, toolchain: str, config_key: str, target: str,
                  toolchain_version: str | None = None, analysis_version: int = 0, measured: bool = False) -> bool:
        """``build_done`` of the build stored for that key."""
        return self.build_done(self.find_build(tree, sha, toolchain, config_key, target, toolchain_version),
                               analysis_version, measured)

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


class SqliteStore(BuildRows, ComparisonRows, HistoryRows, MatrixRows, DashboardRows, SqliteBase, Store):
    """The store on sqlite (and, as ``PgStore``, on PostgreSQL): its parts by what they keep
    (``db.builds``, ``db.comparisons``, ``db.history``, ``db.matrix_rows``, ``db.dashboard``) over
    the shared connection plumbing (``db.sqlite_base``); here the opening, checking and closing."""
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
            if not self.path.exists():
                create_store_file(self.path)
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


    _PLACEMENT = ("l.ordinal, l.section, l.address, l.size, l.blocks, l.lines, l.phase, l.pad_before, l.pad_after, "
                  "l.neighbours")


    _SERIES_SELECT = ("SELECT s.id, t.name, s.message_id, s.version, s.subject, s.author, s.date, s.cover_z, "
                      "s.base_sha, s.status, s.error, s.created_at FROM series s JOIN trees t ON t.id = s.tree_id")

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
                # schema_migrations alone: another process is creating the store right now (it commits
                # that table before the first migration): not a foreign database, migrate takes turns
                tables = [t for (t,) in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    "ORDER BY table_name") if t != "schema_migrations"]
                if tables and not _migrate.applied(conn):    # (or committed its first one since)
                    raise StoreError(f"a database that is not a sizewatch store (its tables: {', '.join(tables[:5])}"
                                     f"{', ...' if len(tables) > 5 else ''}); left untouched")
                if read_only:
                    raise NoStoreYet("no store there yet (sizewatch run or sizewatch bot writes one)")
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
