"""The one dialect layer between the store's SQL (written for sqlite) and PostgreSQL.

The store keeps one set of migrations and one set of query strings. They are written in sqlite's
dialect, restricted to a portable subset (/docs/architecture.md, "The store on PostgreSQL"), and a
PostgreSQL store runs them through the mechanical rewrites below: types and key columns in
migrations (``pg_ddl``), placeholders, JSON aggregates and id lists in queries (``pg_query``).
What cannot be rewritten mechanically (triggers, data migrations with sqlite functions) is written
twice: ``NNNN_name.pg.sql`` beside ``NNNN_name.sql``, run instead of it on PostgreSQL.

Rewriting strings rather than keeping two sets of queries: the queries are the tuned part of the
store (index-only reads, JSON-gathered columns, see db/store.py) and they stay one text to read and
to change; the rewrites are a dozen patterns, each tested (tests/test_pg_store.py).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from urllib.parse import unquote

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(db: object) -> bool:
    """A store named by a PostgreSQL URL rather than an sqlite file path."""
    return isinstance(db, str) and db.startswith(URL_SCHEMES)


# libpq takes a password from a URL's userinfo, from a query parameter (``password=``, also spelled
# with percent-escapes: ``%70assword=``; ``sslpassword=`` for the client key) and from a keyword/value
# string; any parameter whose name says pass/secret/token is treated as one, whatever libpq makes of it
_SECRET_NAME = re.compile(r"pass|secret|token", re.I)
_KEYWORD_SECRET = re.compile(r"([A-Za-z_]*(?:pass|secret|token)[A-Za-z_]*\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)", re.I)
MASK = "***"


def _userinfo_end(rest: str) -> int:
    """Where a URL's userinfo ends (the index of its '@' in ``rest``, the URL after ``scheme://``), -1
    without one. Two readers disagree and both count: libpq ends it at the first '@' before any '/'
    (a password may hold '?' or '#'), urllib at the last '@' of the host part (one may hold '/')."""
    libpq = re.match(r"[^@/]*@", rest)
    host_part = re.split(r"[?#]", rest, maxsplit=1)[0]
    return max(libpq.end() - 1 if libpq else -1, host_part.rfind("@"))


def _parts(url: str) -> tuple[str, str, str, str, list[str]] | None:
    """(scheme://, user, password or None, host/path, query parameters) of a URL, read as text with
    libpq's rules; None for a string that is no URL."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)$", url, re.S)
    if not m:
        return None
    scheme, rest = m.groups()
    end = _userinfo_end(rest)
    user, password = "", None
    if end >= 0:
        user, sep, pw = rest[:end].partition(":")
        password = pw if sep else None
        rest = rest[end + 1:]
    where, sep, query = rest.partition("?")
    return scheme, user, password, where, (query.split("&") if sep else [])


def _secret_param(param: str) -> bool:
    return _SECRET_NAME.search(unquote(param.partition("=")[0])) is not None


def redact(url: str) -> str:
    """The URL without any password: what messages, logs and the names of cache files may show. The
    userinfo's password is dropped (``user@host``), a password-like query parameter's value shown as
    ``***``; a keyword/value string (``host=h password=x``) has its value masked. Read as text with
    libpq's rules, so it never raises and a URL urllib cannot parse is masked all the same."""
    parts = _parts(url)
    if parts is None:
        return _KEYWORD_SECRET.sub(lambda m: m.group(1) + MASK, url)
    scheme, user, password, where, params = parts
    userinfo = f"{user}@" if user else f":{MASK}@" if password is not None else ""
    shown = [(p.partition("=")[0] + "=" + MASK if "=" in p else MASK) if _secret_param(p) else p for p in params]
    return scheme + userinfo + where + ("?" + "&".join(shown) if params else "")


def secrets(url: str) -> list[str]:
    """Every spelling of every password in ``url`` (as written and percent-decoded), longest first:
    what must not appear in a message quoting it (libpq quotes a token it cannot decode)."""
    found: list[str] = []
    parts = _parts(url)
    if parts is None:
        found += [m.group(2).strip("'") for m in _KEYWORD_SECRET.finditer(url)]
    else:
        _, _, password, _, params = parts
        if password:
            found.append(password)
        for p in params:
            if _secret_param(p):
                found.append(p.partition("=")[2] if "=" in p else p)
    found += [unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password in any form ``redact`` masks."""
    return bool(secrets(url))


def scrub(text: str, url: str) -> str:
    """``text`` (a message about ``url``) with the URL redacted and every spelling of its passwords masked."""
    text = text.replace(url, redact(url))
    for s in secrets(url):
        text = text.replace(s, MASK)
    return text


# functions the store's queries use that PostgreSQL lacks (created with schema_migrations, db.migrate)
PG_PRELUDE = """
CREATE OR REPLACE FUNCTION json_valid(doc text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF doc IS NULL THEN RETURN NULL; END IF;
    PERFORM doc::json;
    RETURN true;
EXCEPTION WHEN others THEN
    RETURN false;
END $$;
"""


# --- migrations -----------------------------------------------------------------------------------

_DDL = [            # types are matched in upper case only: column names (objects.text) are lower case
    (re.compile(r"\bINTEGER\s+PRIMARY\s+KEY(\s+AUTOINCREMENT)?\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
    (re.compile(r"\bTEXT\b(?!\s+COLLATE)"), 'TEXT COLLATE "C"'),
    (re.compile(r"\)\s*WITHOUT\s+ROWID\s*$", re.I), ")"),
    (re.compile(r"(?m)^(\s*)offset\b"), r'\1"offset"'),     # symbols.offset: reserved in PostgreSQL
]
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\((.*)\)\s*$", re.I | re.S)
_OR_IGNORE = re.compile(r"^(\s*)INSERT\s+OR\s+IGNORE\s+INTO\b", re.I)


def _strip_comments(stmt: str) -> str:
    """The statement without its ``--`` comments (quoted text kept as it is)."""
    out, i, quote = [], 0, None
    while i < len(stmt):
        ch = stmt[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif stmt.startswith("--", i):
            j = stmt.find("\n", i)
            i = len(stmt) if j < 0 else j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def pg_ddl(stmt: str) -> str:
    """One statement of a portable migration, as PostgreSQL runs it.

    A table that sqlite gives a rowid without an ``INTEGER PRIMARY KEY`` (a TEXT primary key, not
    ``WITHOUT ROWID``) gets a ``rowid`` identity column: the bot's tables are read in insertion
    order by it. Tables without any primary key do not (nothing reads their rowid)."""
    stmt = _strip_comments(stmt).strip().rstrip(";").strip()
    m = _CREATE_TABLE.match(stmt)
    if m:
        body = m.group(2)
        without_rowid = re.search(r"\)\s*WITHOUT\s+ROWID\s*$", stmt, re.I) is not None
        has_pk = re.search(r"\bPRIMARY\s+KEY\b", body, re.I) is not None
        int_pk = re.search(r"\bINTEGER\s+PRIMARY\s+KEY\b", body, re.I) is not None
        if has_pk and not int_pk and not without_rowid:
            stmt = stmt[:m.start(2)] + body.rstrip() + ",\n    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE\n)"
    if re.match(r"^\s*(CREATE\s+TABLE|ALTER\s+TABLE)\b", stmt, re.I):
        for pat, rep in _DDL:
            stmt = pat.sub(rep, stmt)
    if _OR_IGNORE.match(stmt):
        stmt = _OR_IGNORE.sub(r"\1INSERT INTO", stmt) + " ON CONFLICT DO NOTHING"
    return stmt


@functools.lru_cache(maxsize=None)
def identity_tables(directory: Path) -> frozenset[str]:
    """Tables whose ``id`` PostgreSQL generates: an ``INSERT`` into one answers ``lastrowid``."""
    found = set()
    for p in directory.glob("*.sql"):
        for m in re.finditer(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\(\s*id\s+(?:INTEGER|BIGINT)\s+"
                             r"(?:PRIMARY\s+KEY|GENERATED)", p.read_text(), re.I):
            found.add(m.group(1).lower())
    return frozenset(found)


# --- queries --------------------------------------------------------------------------------------

_ID_LIST = re.compile(r"\bIN\s*\(\s*SELECT\s+value\s+FROM\s+json_each\(\s*\?\s*\)\s*\)", re.I)
_FUNCS = {"json_group_array": ("coalesce(json_agg(", "), '[]'::json)"),
          "json_group_object": ("coalesce(json_object_agg(", "), '{}'::json)"),
          "json_array": ("json_build_array(", ")")}
_FUNC = re.compile(r"\b(" + "|".join(_FUNCS) + r")\s*\(", re.I)
_OFFSET_COLUMN = re.compile(r"(?<=[,(])(\s*)offset(?=\s*[,)])")
_INSERT_INTO = re.compile(r"^\s*INSERT\s+(?:OR\s+(?:IGNORE|REPLACE)\s+)?INTO\s+(\w+)", re.I)


def _close_paren(sql: str, start: int) -> int:
    """Index of the ``)`` closing the ``(`` just before ``start`` (quotes respected)."""
    depth, i, quote = 1, start, None
    while i < len(sql):
        ch = sql[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced parentheses in {sql!r}")


def _functions(sql: str) -> str:
    while True:
        m = _FUNC.search(sql)
        if not m:
            return sql
        end = _close_paren(sql, m.end())
        head, tail = _FUNCS[m.group(1).lower()]
        sql = sql[:m.start()] + head + sql[m.end():end] + tail + sql[end + 1:]


@functools.lru_cache(maxsize=4096)
def pg_query(sql: str, identity: frozenset[str] = frozenset()) -> tuple[str, tuple[int, ...], bool]:
    """A store query as PostgreSQL runs it: (sql with ``%s`` placeholders, positions of the
    placeholders that carry a JSON list to be passed as an array, whether ``RETURNING id`` was added).

    Rewrites: ``x IN (SELECT value FROM json_each(?))`` → ``x = ANY(?)``; sqlite's JSON aggregates to
    PostgreSQL's (empty input gives ``[]``/``{}`` as in sqlite, not NULL); ``CROSS JOIN ... ON`` (sqlite's
    join-order hint) → ``JOIN``; ``INSERT OR IGNORE`` → ``ON CONFLICT DO NOTHING``; ``?`` → ``%s``."""
    sql = _ID_LIST.sub("= ANY(\x00)", sql)          # \x00 marks an id-list placeholder until numbered
    sql = _functions(sql)
    sql = re.sub(r"\bCROSS\s+JOIN\b", "JOIN", sql, flags=re.I)
    sql = _OFFSET_COLUMN.sub(r'\1"offset"', sql)
    m = _OR_IGNORE.match(sql)
    if m:
        sql = _OR_IGNORE.sub(r"\1INSERT INTO", sql) + " ON CONFLICT DO NOTHING"
    if re.match(r"^\s*INSERT\s+OR\s+REPLACE\b", sql, re.I):
        raise ValueError("INSERT OR REPLACE is not portable: write ON CONFLICT (...) DO UPDATE")
    out, lists, n, quote = [], [], 0, None
    for ch in sql:
        if quote:
            out.append("%%" if ch == "%" else ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?" or ch == "\x00":
            if ch == "\x00":
                lists.append(n)
            n += 1
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    sql = "".join(out)
    returning = False
    ins = _INSERT_INTO.match(sql)
    if ins and ins.group(1).lower() in identity and not re.search(r"\bRETURNING\b", sql, re.I):
        sql += " RETURNING id"
        returning = True
    return sql, tuple(lists), returning
