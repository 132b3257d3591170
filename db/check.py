"""``sizewatch db check``: is this store sound? sqlite's own integrity and foreign-key checks, the
migrations it carries against the ones this sizewatch knows, and sizewatch's own consistency:
every JSON column parses, every compressed column decompresses, text is UTF-8, every INTEGER and
REAL column holds numbers (sqlite keeps text it cannot convert in a typed column; the columns are
read from the schema, so a new migration's are checked too), each finding's details are of its
kind's shape (``analyzer.finding_details``), and rows point at rows that exist.

Read-only (``mode=ro``, no migration applied): a check never changes what it checks. Readers
already show a damaged row as unreadable (``db.sqlite.loads``/``decompress``); this says where
all of them are, so the operator can restore the store or rebuild what is lost.
"""
from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from analyzer import finding_details
from analyzer.errors import InputError
from analyzer.runtime import Runtime
from db import migrate
from db.errors import StoreError

# columns holding JSON, and zlib-compressed columns (table, column)
JSON_COLUMNS = (("builds", "errors"), ("objects", "sections"), ("functions", "facts"), ("findings", "data"),
                ("comparisons", "counts"), ("bot_messages", "recipients"), ("bot_messages", "refs"),
                ("bot_messages", "tags"), ("bot_decisions", "findings"), ("bot_mails", "recipients"),
                ("likely_paths", "calls"), ("matrix_tables", "toolchains"), ("matrix_rows", "cells"),
                ("link_layouts", "neighbours"), ("link_moves", "data"), ("runtimes", "data"))
ZLIB_COLUMNS = (("builds", "log_z"), ("objects", "facts_z"), ("series", "cover_z"),
                ("comparison_tables", "tables_z"), ("comparison_inline_costs", "report_z"), ("bot_messages", "raw_z"),
                ("bot_mails", "raw_z"))
TEXT_COLUMNS = (("commits", "subject"), ("commits", "author"), ("series", "subject"), ("series", "author"),
                ("series", "error"), ("findings", "message"), ("bot_messages", "subject"), ("bot_series", "subject"),
                ("runtimes", "message"))
# (what, query counting rows that point nowhere)
REFERENCES = (
    ("comparisons without their build", "SELECT count(*) FROM comparisons c WHERE NOT EXISTS "
     "(SELECT 1 FROM builds b WHERE b.id = c.build_id) OR NOT EXISTS "
     "(SELECT 1 FROM builds b WHERE b.id = c.base_build_id)"),
    ("builds without their commit", "SELECT count(*) FROM builds b WHERE NOT EXISTS "
     "(SELECT 1 FROM commits c WHERE c.id = b.commit_id)"),
    ("bot messages tied to a missing series", "SELECT count(*) FROM bot_messages m WHERE m.series_key IS NOT NULL "
     "AND NOT EXISTS (SELECT 1 FROM bot_series s WHERE s.key = m.series_key)"),
    ("runtime measurements without their build", "SELECT count(*) FROM runtimes r WHERE NOT EXISTS "
     "(SELECT 1 FROM builds b WHERE b.id = r.build_id)"),
    ("bot mails without their decision", "SELECT count(*) FROM bot_mails m WHERE NOT EXISTS "
     "(SELECT 1 FROM bot_decisions d WHERE d.id = m.decision_id)"),
)


@dataclass
class CheckResult:
    path: Path
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        if self.problems:
            return f"{self.path}: damaged: " + "; ".join(self.problems)
        return f"{self.path}: ok: " + ", ".join(self.facts)


_KEYS: dict[str, str] = {}


def _columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Columns per table; and how to name a row of each (rowid, or the key of a WITHOUT ROWID table)."""
    out: dict[str, set[str]] = {}
    for t, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall():
        info = conn.execute(f'PRAGMA table_info("{t}")').fetchall()
        out[t] = {r[1] for r in info}
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        _KEYS[t] = ("rowid" if "without rowid" not in (sql or "").lower() or not pk
                    else " || ',' || ".join(f'"{c}"' for c in pk))
    return out


def _key(table: str) -> str:
    return _KEYS.get(table, "rowid")


def _first_ids(ids: list) -> str:
    return ", ".join(map(str, ids[:5])) + (", ..." if len(ids) > 5 else "")


def check_store(path: Path | str) -> CheckResult:
    """Every check, read-only; StoreError only when the file cannot be opened as a store at all."""
    from db.dialect import is_url
    from db.store import check_store_file
    if is_url(path):
        return check_pg(str(path))
    path = Path(path)
    check_store_file(path, must_exist=True)
    res = CheckResult(path)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: cannot open: {e}") from None
    try:
        _integrity(conn, res)
        _migrations(conn, res)
        cols = _columns(conn)
        _json(conn, cols, res)
        _zlib(conn, cols, res)
        _text(conn, cols, res)
        _numbers(conn, typed_columns(conn), res)
        _references(conn, cols, res)
        _runtimes(conn, cols, res)
        _finding_details(conn, cols, res)
        if "builds" in cols:
            n = conn.execute("SELECT count(*) FROM builds").fetchone()[0]
            res.facts.append(f"{n} builds")
        if "bot_messages" in cols:
            n = conn.execute("SELECT count(*) FROM bot_messages").fetchone()[0]
            res.facts.append(f"{n} bot messages")
        res.facts.append("every JSON, compressed, text and number column readable")
    except sqlite3.DatabaseError as e:            # damage deep enough that a query fails
        res.problems.append(f"a query failed: {e}")
    finally:
        conn.close()
    return res


def check_pg(url: str) -> CheckResult:
    """The same checks on a PostgreSQL store, in a read-only session. The server itself keeps what
    sqlite's integrity_check and foreign_key_check look for (pages, foreign keys, UTF-8 text); JSON
    and compressed columns, migrations and the references the schema does not declare are checked
    as for a file."""
    from db.dialect import redact
    from db.pg import Connection
    where = redact(url)
    conn = Connection(url, read_only=True)
    res = CheckResult(where)
    try:
        found = migrate.applied(conn)
    except StoreError:
        conn.close()
        raise
    if not found:
        conn.close()
        raise StoreError(f"{where}: no such store (no sizewatch tables in that database)")
    try:
        res.facts.append("foreign keys and UTF-8 text kept by the server")
        _migrations(conn, res)
        cols: dict[str, set[str]] = {}
        for t, c in conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                                 "WHERE table_schema = current_schema()"):
            cols.setdefault(t, set()).add(c)
        pks: dict[str, list[str]] = {}
        for t, c in conn.execute(
                "SELECT tc.table_name, k.column_name FROM information_schema.table_constraints tc "
                "JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name "
                "AND k.table_schema = tc.table_schema WHERE tc.constraint_type = 'PRIMARY KEY' "
                "AND tc.table_schema = current_schema() ORDER BY tc.table_name, k.ordinal_position"):
            pks.setdefault(t, []).append(c)
        for t, have in cols.items():
            _KEYS[t] = ("id" if "id" in have else "rowid" if "rowid" in have
                        else " || ',' || ".join(f'"{c}"' for c in pks.get(t, [])) or "ctid")
        _json(conn, cols, res)
        _zlib(conn, cols, res)
        _pg_types(conn, found, res)
        _references(conn, cols, res)
        _runtimes(conn, cols, res)
        _finding_details(conn, cols, res)
        if "builds" in cols:
            res.facts.append(f"{conn.execute('SELECT count(*) FROM builds').fetchone()[0]} builds")
        if "bot_messages" in cols:
            res.facts.append(f"{conn.execute('SELECT count(*) FROM bot_messages').fetchone()[0]} bot messages")
        res.facts.append("every JSON and compressed column readable")
    except StoreError as e:                   # damage deep enough that a query fails
        res.problems.append(f"a query failed: {e}")
    finally:
        conn.close()
    return res


def _integrity(conn: sqlite3.Connection, res: CheckResult) -> None:
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check(20)")]
    if rows != ["ok"]:
        res.problems.append(f"integrity_check: {rows[0]}" + (f" (+{len(rows) - 1} more)" if len(rows) > 1 else ""))
    else:
        res.facts.append("integrity_check ok")
    fk = conn.execute("PRAGMA foreign_key_check").fetchall()
    if fk:
        tables = sorted({r[0] for r in fk})
        res.problems.append(f"{len(fk)} rows whose foreign key points nowhere (in {', '.join(tables)})")


def _migrations(conn: sqlite3.Connection, res: CheckResult) -> None:
    try:
        todo = migrate.pending(conn)
    except StoreError as e:
        res.problems.append(str(e))
        return
    have = migrate.applied(conn)
    top = max(have) if have else 0
    res.facts.append(f"schema {top:04d}")
    if todo:
        res.facts.append(f"migration{'s' if len(todo) > 1 else ''} {', '.join(f'{m.version:04d}' for m in todo)} "
                         "pending (applied by the next command that writes)")


def _json(conn: sqlite3.Connection, cols: dict[str, set[str]], res: CheckResult) -> None:
    for table, col in JSON_COLUMNS:
        if col not in cols.get(table, ()):
            continue
        bad = [r for (r,) in conn.execute(f'SELECT {_key(table)} FROM "{table}" WHERE "{col}" IS NOT NULL AND '
                                          f'NOT json_valid("{col}")')]
        if bad:
            res.problems.append(f"{len(bad)} rows of {table}.{col} not JSON (row {_first_ids(bad)})")


def _zlib(conn: sqlite3.Connection, cols: dict[str, set[str]], res: CheckResult) -> None:
    for table, col in ZLIB_COLUMNS:
        if col not in cols.get(table, ()):
            continue
        bad = []
        for rowid, blob in conn.execute(f'SELECT {_key(table)}, "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL'):
            d = zlib.decompressobj()
            try:
                for i in range(0, len(blob), 1 << 20):       # in pieces: a huge log need not be held twice
                    d.decompress(blob[i:i + (1 << 20)], 1 << 20)
                    while d.unconsumed_tail:
                        d.decompress(d.unconsumed_tail, 1 << 20)
                d.flush()
                if not d.eof:
                    raise zlib.error("truncated")
            except (zlib.error, TypeError):
                bad.append(rowid)
        if bad:
            res.problems.append(f"{len(bad)} rows of {table}.{col} not readable zlib data (row {_first_ids(bad)})")


def _text(conn: sqlite3.Connection, cols: dict[str, set[str]], res: CheckResult) -> None:
    for table, col in TEXT_COLUMNS:
        if col not in cols.get(table, ()):
            continue
        bad = []
        conn.text_factory = bytes
        try:
            q = f'SELECT {_key(table)}, "{col}" FROM "{table}" WHERE typeof("{col}") = \'text\''
            for rowid, raw in conn.execute(q):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    bad.append(rowid)
        finally:
            conn.text_factory = str
        if bad:
            res.problems.append(f"{len(bad)} rows of {table}.{col} not UTF-8 text (row {_first_ids(bad)})")


def _numeric(decl: str) -> bool:
    """Whether sqlite gives a column of this declared type INTEGER or REAL affinity (its own rules)."""
    d = (decl or "").upper()
    return "INT" in d or any(k in d for k in ("REAL", "FLOA", "DOUB"))


def typed_columns(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Per table of an sqlite store, its INTEGER/REAL columns, read from the schema itself."""
    out: dict[str, list[str]] = {}
    for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
        for r in conn.execute(f'PRAGMA table_info("{t}")').fetchall():
            if _numeric(r[2]):
                out.setdefault(t, []).append(r[1])
    return out


def _numbers(conn: sqlite3.Connection, typed: dict[str, list[str]], res: CheckResult) -> None:
    """Rows whose INTEGER/REAL columns hold text or a blob (what readers show as unreadable,
    db.sqlite.number): one scan per table for all of its columns."""
    for table, columns in typed.items():
        bad_of = [f"typeof(\"{c}\") NOT IN ('integer', 'real', 'null')" for c in columns]
        bad: dict[str, list] = {}
        for key, *flags in conn.execute(f'SELECT {_key(table)}, {", ".join(bad_of)} FROM "{table}" '
                                        f'WHERE {" OR ".join(bad_of)}'):
            for c, flag in zip(columns, flags):
                if flag:
                    bad.setdefault(c, []).append(key)
        for c in columns:
            if c in bad:
                res.problems.append(f"{len(bad[c])} rows of {table}.{c} not a number (row {_first_ids(bad[c])})")


# what PostgreSQL calls the types sqlite's INTEGER and REAL become (db.dialect), and their kin
_PG_NUMBERS = ("bigint", "integer", "smallint", "double precision", "real", "numeric")


def _pg_types(conn, versions: set[int], res: CheckResult) -> None:
    """PostgreSQL keeps text out of a number column itself: what is left to check is that every
    column the migrations declare INTEGER/REAL is still a number column on the server. The typed
    columns come from the same migrations run on an in-memory sqlite (the schema, not a list)."""
    mem = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate.migrate(mem, upto=max(versions) if versions else 0)
        typed = typed_columns(mem)
    finally:
        mem.close()
    have = {(t, c): ty for t, c, ty in conn.execute("SELECT table_name, column_name, data_type FROM "
                                                    "information_schema.columns WHERE table_schema = current_schema()")}
    wrong = [f"{t}.{c} ({have[(t, c)]})" for t, cols in typed.items() for c in cols
             if (t, c) in have and have[(t, c)] not in _PG_NUMBERS]
    if wrong:
        res.problems.append(f"{len(wrong)} number column{'s' if len(wrong) > 1 else ''} not of a number type on the "
                            f"server: {', '.join(wrong[:5])}" + (", ..." if len(wrong) > 5 else ""))
    else:
        res.facts.append("every INTEGER/REAL column a number column")


def _references(conn: sqlite3.Connection, cols: dict[str, set[str]], res: CheckResult) -> None:
    for what, q in REFERENCES:
        tables = {w for w in ("comparisons", "builds", "commits", "bot_messages", "bot_series", "bot_mails",
                              "bot_decisions", "runtimes") if f" {w} " in f" {q} "}
        if not all(t in cols for t in tables):
            continue
        n = conn.execute(q).fetchone()[0]
        if n:
            res.problems.append(f"{n} {what}")


def _runtimes(conn: sqlite3.Connection, cols: dict[str, set[str]], res: CheckResult) -> None:
    """Each measurement's JSON (0016) is a measurement the reports can read, with its row's status: valid
    JSON that is not one would show as unreadable on every page. Few rows (one per measured vmlinux)."""
    if "data" not in cols.get("runtimes", ()):
        return
    bad = []
    for bid, status, data in conn.execute("SELECT build_id, status, data FROM runtimes ORDER BY build_id"):
        try:
            if Runtime.from_dict(json.loads(data)).status != status:
                bad.append(bid)
        except (ValueError, TypeError, InputError):
            bad.append(bid)
    if bad:
        res.problems.append(f"{len(bad)} runtime measurements not readable as one (build {_first_ids(bad)})")


def _finding_details(conn: sqlite3.Connection, cols: dict[str, set[str]], res: CheckResult) -> None:
    """Each finding's details are of its kind's shape (analyzer.finding_details): valid JSON with a field
    of the wrong type reads as the kind's empty details, marked unreadable, on every page showing it."""
    if "data" not in cols.get("findings", ()):
        return
    bad = []
    for fid, kind, data in conn.execute("SELECT id, kind, data FROM findings ORDER BY id"):
        try:
            doc = json.loads(data)
        except (ValueError, TypeError):           # not JSON: _json says so
            continue
        try:
            if not isinstance(doc, dict):
                raise finding_details.BadDetails("not an object")
            finding_details.read(kind, doc.get("details"))
        except finding_details.BadDetails:
            bad.append(fid)
    if bad:
        res.problems.append(f"{len(bad)} rows of findings.data with details not of their kind (row {_first_ids(bad)})")
