"""PostgreSQL connections that answer like the store's sqlite ones (``execute``, ``executemany``,
cursors with ``fetchone``/``fetchall``/``lastrowid``/``rowcount``), so ``db.store``, ``db.botstore`` and
``db.migrate`` run their one set of SQL on both (rewritten by ``db.dialect``).

psycopg 3 in autocommit mode: the store opens its own transactions (``BEGIN``/``COMMIT`` as with
sqlite's ``isolation_level=None``), and ``BEGIN IMMEDIATE`` takes a transaction-scoped advisory
lock, so writers take turns exactly as they do on an sqlite file: a build's rows, its matrix rows
and the change counters move together, and two writers never deadlock on the names table.
JSON comes back as text and ``sum()`` as int, as sqlite gives them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from db import dialect
from db.errors import StoreError

# one key for "the store's write lock" (pg_advisory_xact_lock takes a bigint): 'sizewatc' in ASCII
WRITE_LOCK = 0x73697a6577617463
CONNECT_TIMEOUT_S = 10

class StoreUnavailable(StoreError):
    """The PostgreSQL server could not be reached or went away: nothing was written by the failed call;
    a caller holding a finished result may try the write again later."""


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError("a PostgreSQL store needs psycopg: pip install 'sizewatch[postgres]'") from None
    return psycopg


def _error(e: Exception, where: str, url: str | None = None) -> StoreError:
    """One line for a psycopg error: the server's own message, without the password. libpq quotes
    what it cannot parse: the whole URI, or the one token (``invalid percent-encoded token:
    "Sekr%zz3t"``), so every spelling of every password in ``url`` is masked (``dialect.scrub``)."""
    psycopg = _psycopg()
    diag = getattr(e, "diag", None)
    msg = (getattr(diag, "message_primary", None) or str(e) or type(e).__name__).strip().splitlines()[0]
    if url:
        msg = dialect.scrub(msg.replace(url, where), url)
    # a server that answered no (a wrong password, no such role or database) will answer the same
    # again: a plain error, not one to wait out
    refused = any(s in msg for s in ("authentication failed", "no password supplied", "does not exist",
                                     "not permitted to log in"))
    if isinstance(e, psycopg.OperationalError) and not isinstance(e, psycopg.errors.QueryCanceled) and not refused:
        return StoreUnavailable(f"{where}: {msg}")
    return StoreError(f"{where}: {msg}")


def _loaders(conn) -> None:
    """json as text (the store json.loads its columns itself, and a damaged one is its business),
    numeric (sum() of bigints) as int or float."""
    from psycopg.adapt import Loader

    class JsonText(Loader):
        def load(self, data):
            return bytes(data).decode("utf-8")

    class Number(Loader):
        def load(self, data):
            raw = bytes(data)
            return float(raw) if b"." in raw or b"e" in raw.lower() or b"N" in raw else int(raw)

    for name in ("json", "jsonb"):
        conn.adapters.register_loader(name, JsonText)
    conn.adapters.register_loader("numeric", Number)


class Cursor:
    """What the store reads of a cursor: rows, and for an INSERT its ``lastrowid`` and ``rowcount``."""

    def __init__(self, cur, where: str, lastrowid: int | None = None):
        self._cur, self._where = cur, where
        self.lastrowid = lastrowid
        self.rowcount = cur.rowcount

    def _rows(self) -> bool:
        return self._cur.description is not None

    def fetchone(self):
        if not self._rows():
            return None
        try:
            return self._cur.fetchone()
        except _psycopg().Error as e:
            raise _error(e, self._where) from None

    def fetchall(self) -> list:
        if not self._rows():
            return []
        try:
            return self._cur.fetchall()
        except _psycopg().Error as e:
            raise _error(e, self._where) from None

    def __iter__(self) -> Iterator:
        return iter(self.fetchall())


class Connection:
    """One PostgreSQL session, spoken to in the store's (sqlite) SQL."""

    dialect = "postgresql"

    def __init__(self, url: str, read_only: bool = False, migrations: Path | None = None):
        psycopg = _psycopg()
        self.where = dialect.redact(url)
        self.read_only = read_only
        self._identity = dialect.identity_tables(migrations or Path(__file__).with_name("migrations"))
        options = "-c default_transaction_read_only=on" if read_only else ""
        try:
            self._c = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                      application_name="sizewatch", options=options)
        except psycopg.Error as e:
            raise _error(e, self.where, url) from None
        _loaders(self._c)

    @property
    def closed(self) -> bool:
        return self._c.closed or self._c.broken

    def _params(self, params: Any, lists: tuple[int, ...]) -> tuple:
        out = list(params or ())
        for i in lists:                     # an id list given as JSON (sqlite's json_each) goes as an array
            out[i] = json.loads(out[i]) if isinstance(out[i], (str, bytes)) else list(out[i])
        for i, v in enumerate(out):
            if isinstance(v, str) and "\x00" in v:   # PostgreSQL text cannot hold NUL: shown as U+FFFD
                out[i] = v.replace("\x00", "\ufffd")
            elif isinstance(v, memoryview):
                out[i] = bytes(v)
        return tuple(out)

    def execute(self, sql: str, params: Any = ()) -> Cursor:
        head = sql.strip().upper()
        if head == "BEGIN IMMEDIATE":
            self._run("BEGIN", ())
            return self._run("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        q, lists, returning = dialect.pg_query(sql, self._identity)
        cur = self._run(q, self._params(params, lists))
        if returning:
            row = cur.fetchone()
            cur.lastrowid = row[0] if row else None
        return cur

    def executemany(self, sql: str, seq: Iterable) -> Cursor | None:
        q, lists, returning = dialect.pg_query(sql, self._identity)
        if returning:
            q = q[: -len(" RETURNING id")]
        rows = [self._params(p, lists) for p in seq]
        if not rows:
            return None
        try:
            cur = self._c.cursor()          # inside: a connection the server closed refuses a cursor
            cur.executemany(q, rows)
        except _psycopg().Error as e:
            raise _error(e, self.where) from None
        return Cursor(cur, self.where)

    def script(self, sql: str) -> None:
        """A whole migration file as PostgreSQL gives it (several statements, no parameters)."""
        try:
            self._c.execute(sql.encode("utf-8"), prepare=False)
        except _psycopg().Error as e:
            raise _error(e, self.where) from None

    def _run(self, q: str, params: tuple) -> Cursor:
        try:
            cur = self._c.cursor()          # inside: a connection the server closed refuses a cursor
            cur.execute(q, params)
        except _psycopg().Error as e:
            raise _error(e, self.where) from None
        return Cursor(cur, self.where)

    def in_transaction(self) -> bool:
        return self._c.info.transaction_status != _psycopg().pq.TransactionStatus.IDLE

    def close(self) -> None:
        try:
            self._c.close()
        except Exception:                   # closing a broken connection: nothing left to release
            pass
