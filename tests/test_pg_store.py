"""The store on PostgreSQL (issue 16), against a real PostgreSQL 15 the tests start (tests/pgserver.py).

- every migration applies, and after each one PostgreSQL has the tables, columns and triggers
  sqlite has (the dialect rewrite and the .pg.sql twins cannot drift apart unnoticed);
- the rewrites of db.dialect, one by one;
- what the sqlite store does with a file, the PostgreSQL store does with a database: a foreign one
  and a newer schema refused in one line and left as they were, readers read-only and never
  creating a store, db check naming each damaged row, damaged rows shown unreadable on the pages;
- the example series through ``sizewatch run --db postgresql://...``: the same report text as the
  sqlite run, the same dashboard pages.
"""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess

import pytest

from conftest import sizewatch_cmd
from db import dialect
from db import migrate as migrate_mod
from db.errors import StoreError
from db.store import open_store
from pgserver import RawSql


def sw(*args, env=None) -> subprocess.CompletedProcess:
    import os
    return subprocess.run([*sizewatch_cmd(), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def one_line_error(proc: subprocess.CompletedProcess, *want: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("sizewatch: "), proc.stderr
    for w in want:
        assert w in lines[0], (w, lines[0])


# --- the schema ------------------------------------------------------------------------------------

def _sqlite_schema(db) -> dict:
    conn = sqlite3.connect(db)
    tables = {t: sorted(r[1] for r in conn.execute(f'PRAGMA table_info("{t}")'))
              for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name NOT LIKE 'sqlite_%'")}
    triggers = sorted(t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
    indexes = sorted(t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                                                "AND name NOT LIKE 'sqlite_%'"))
    conn.close()
    return {"tables": tables, "triggers": triggers, "indexes": indexes}


def _pg_schema(url) -> dict:
    conn = RawSql(url)
    tables: dict[str, list[str]] = {}
    for t, c in conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                             "WHERE table_schema = current_schema()"):
        if c != "rowid":                                   # the bot tables' insertion order (db.dialect)
            tables.setdefault(t, []).append(c)
    triggers = sorted({t for (t,) in conn.execute("SELECT trigger_name FROM information_schema.triggers "
                                                  "WHERE trigger_schema = current_schema()")})
    indexes = sorted(i for (i,) in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname NOT LIKE '%_pkey' "
        "AND indexname NOT LIKE '%_key' AND indexname NOT LIKE '%_key1'"))
    conn.close()
    return {"tables": {t: sorted(c) for t, c in tables.items()}, "triggers": triggers, "indexes": indexes}


def test_every_migration_applies_and_the_schema_matches_sqlite(tmp_path, pg_url):
    """Migration by migration, on one PostgreSQL database and one sqlite file: the same tables with the
    same columns, the same triggers, the same named indexes."""
    db = tmp_path / "s.db"
    for m in migrate_mod.available():
        open_store(db, upto=m.version).close()
        open_store(pg_url, upto=m.version).close()
        want, got = _sqlite_schema(db), _pg_schema(pg_url)
        assert got["tables"] == want["tables"], m.path.name
        assert got["triggers"] == want["triggers"], m.path.name
        assert got["indexes"] == want["indexes"], m.path.name
    assert open_store(pg_url).schema_version == max(m.version for m in migrate_mod.available())


def test_a_pg_twin_without_its_migration_is_refused(tmp_path):
    import shutil
    d = tmp_path / "mig"
    shutil.copytree(migrate_mod.MIGRATIONS_DIR, d)
    (d / "0400_orphan.pg.sql").write_text("SELECT 1;\n")
    with pytest.raises(StoreError, match="without its NNNN_name.sql"):
        migrate_mod.available(d)


def test_migrations_of_another_sizewatch_run_on_postgresql(tmp_path, pg_url):
    """A migration added later (a plain portable file) and one with a trigger twin apply on a migrated
    store; a broken one leaves the schema where it was (one transaction per file)."""
    import shutil
    from db.pg import Connection
    d = tmp_path / "mig"
    shutil.copytree(migrate_mod.MIGRATIONS_DIR, d)
    (d / "0100_bot.sql").write_text("CREATE TABLE bot_mail (id INTEGER PRIMARY KEY, body TEXT, raw BLOB, "
                                    "w REAL);\nINSERT OR IGNORE INTO change_counters(scope, n) VALUES ('x', 1);\n")
    (d / "0101_trig.sql").write_text("CREATE TRIGGER t AFTER INSERT ON bot_mail BEGIN SELECT 1; END;\n")
    (d / "0101_trig.pg.sql").write_text(
        "CREATE FUNCTION t() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;\n"
        "CREATE TRIGGER t AFTER INSERT ON bot_mail FOR EACH ROW EXECUTE FUNCTION t();\n")
    conn = Connection(pg_url)
    assert migrate_mod.migrate(conn, directory=d)[-2:] == [100, 101]
    conn.execute("INSERT INTO bot_mail(body, raw, w) VALUES (?, ?, ?)", ("b", b"\x00\xff", 0.1))
    assert conn.execute("SELECT id, body, raw, w FROM bot_mail").fetchall() == [(1, "b", b"\x00\xff", 0.1)]
    (d / "0300_bad.sql").write_text("CREATE TABLE ok_part (x INTEGER);\nCREATE TABLE bot_mail (x INTEGER);\n")
    with pytest.raises(StoreError, match="0300_bad.sql"):
        migrate_mod.migrate(conn, directory=d)
    assert migrate_mod.version(conn) == 101
    assert conn.execute("SELECT to_regclass('ok_part')").fetchone()[0] is None
    conn.close()


# --- the rewrites ----------------------------------------------------------------------------------

def test_dialect_rewrites():
    assert dialect.pg_ddl("CREATE TABLE t (\n  id INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused\n"
                          "  text INTEGER NOT NULL, z BLOB, r REAL, s TEXT\n) WITHOUT ROWID;") == (
        'CREATE TABLE t (\n  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, \n'
        '  text BIGINT NOT NULL, z BYTEA, r DOUBLE PRECISION, s TEXT COLLATE "C"\n)')
    # a TEXT primary key (the bot's tables): an identity rowid keeps sqlite's insertion order
    assert dialect.pg_ddl("CREATE TABLE m (key TEXT PRIMARY KEY, -- a, b\n  v TEXT -- c\n)").endswith(
        "rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE\n)")
    assert "rowid" not in dialect.pg_ddl("CREATE TABLE s (a INTEGER, b TEXT)")
    assert dialect.pg_ddl("INSERT OR IGNORE INTO names(name) SELECT 'a'") == \
        "INSERT INTO names(name) SELECT 'a' ON CONFLICT DO NOTHING"
    q, lists, ret = dialect.pg_query(
        "SELECT json_group_array(json_array(a, json(c))), json_group_object(n, s) FROM x CROSS JOIN y ON y.i = x.i "
        "WHERE x.id IN (SELECT value FROM json_each(?)) AND n LIKE 'a%' AND m = ? LIMIT ? OFFSET ?")
    assert q == ("SELECT coalesce(json_agg(json_build_array(a, json(c))), '[]'::json), "
                 "coalesce(json_object_agg(n, s), '{}'::json) FROM x JOIN y ON y.i = x.i "
                 "WHERE x.id = ANY(%s) AND n LIKE 'a%%' AND m = %s LIMIT %s OFFSET %s")
    assert lists == (0,) and not ret
    q, _, ret = dialect.pg_query("INSERT INTO symbols(object_id, size, offset) VALUES (?, ?, ?)",
                                 frozenset({"builds"}))
    assert q == 'INSERT INTO symbols(object_id, size, "offset") VALUES (%s, %s, %s)' and not ret
    q, _, ret = dialect.pg_query("INSERT INTO builds(a) VALUES (?)", frozenset({"builds"}))
    assert q == "INSERT INTO builds(a) VALUES (%s) RETURNING id" and ret
    with pytest.raises(ValueError, match="not portable"):
        dialect.pg_query("INSERT OR REPLACE INTO t VALUES (?)")
    assert dialect.redact("postgresql://u:secret@h:5/db") == "postgresql://u@h:5/db"
    assert dialect.is_url("postgresql://h/db") and dialect.is_url("postgres://h/db")
    assert not dialect.is_url("store.db") and not dialect.is_url(None)


def test_the_store_gives_sqlite_types_back(pg_url):
    """JSON as text, sum() as int, bytes as bytes, NUL in text as U+FFFD (PostgreSQL text cannot hold it)."""
    s = open_store(pg_url)
    conn = s.connection()
    assert conn.execute("SELECT json_group_array(x) FROM (SELECT 1 AS x) AS t").fetchone()[0] == "[1]"
    assert conn.execute("SELECT json_group_array(x) FROM (SELECT 1 AS x) AS t WHERE x = 2").fetchone()[0] == "[]"
    assert conn.execute("SELECT sum(n) FROM change_counters").fetchone()[0].__class__ is int
    s.ensure_tree("a\x00b")
    assert conn.execute("SELECT name FROM trees").fetchone()[0] == "a\ufffdb"
    s.close()


# --- files it did not write, newer schemas, readers --------------------------------------------------

def test_a_database_sizewatch_did_not_create_is_refused_and_untouched(pg_url):
    raw = RawSql(pg_url)
    raw.execute("CREATE TABLE people (name TEXT)")
    raw.execute("INSERT INTO people VALUES ('ann')")
    why = "a database that is not a sizewatch store (its tables: people)"
    for cmd in (("report", "abc"), ("history", "f"), ("bot", "status"), ("db", "matrix")):
        one_line_error(sw(*cmd, "--db", pg_url), pg_url.split("//")[1], why)
    with pytest.raises(StoreError, match=re.escape(why)):
        open_store(pg_url)
    assert raw.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
                       ).fetchall() == [("people",)]
    raw.close()


def test_an_empty_or_missing_database(pg_url, pg_server):
    for cmd in (("report", "abc"), ("history", "f"), ("bot", "status"), ("serve", "--port", "0", "--wait", "0")):
        one_line_error(sw(*cmd, "--db", pg_url), "no store there yet")
    one_line_error(sw("db", "check", "--db", pg_url), "no such store")
    raw = RawSql(pg_url)
    assert raw.one("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'") == 0
    raw.close()                                           # a reader created nothing
    one_line_error(sw("history", "f", "--db", f"{pg_server.url}/no_such_db"), 'database "no_such_db" does not exist')
    one_line_error(sw("history", "f", "--db", "postgresql://u:hunter2@127.0.0.1:1/x"), "postgresql://u@127.0.0.1:1/x")
    assert "hunter2" not in sw("history", "f", "--db", "postgresql://u:hunter2@127.0.0.1:1/x").stderr
    # $SIZEWATCH_DB names it too
    one_line_error(sw("history", "f", env={"SIZEWATCH_DB": pg_url}), "no store there yet")


def test_writers_opening_a_new_database_at_once_make_one_store(pg_server):
    """compose starts its workers together on an empty database: each opens (and migrates) it at
    once; none may take another's half-made store for a foreign database."""
    import threading
    for _ in range(3):
        url = pg_server.database()
        barrier = threading.Barrier(4)
        errors: list[BaseException] = []

        def opener():
            barrier.wait()
            try:
                open_store(url).close()
            except BaseException as e:          # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=opener) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        open_store(url, read_only=True).close()
        pg_server.drop(url)


def test_serve_waits_for_its_writers_to_make_the_store(pg_url):
    """A deployment's dashboard starts beside the workers that make the store (compose): it waits,
    saying so, and serves once a writer has made it, instead of exiting."""
    import os
    import time
    proc = subprocess.Popen([*sizewatch_cmd(), "serve", "--port", "0", "--workers", "1", "--db", pg_url,
                             "--wait", "60"], stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        first = proc.stderr.readline()
        assert first.startswith("sizewatch: waiting up to 60 s for the store: ") and "no store there yet" in first
        time.sleep(1)
        assert proc.poll() is None                        # still waiting, not exited
        open_store(pg_url).close()                        # a writer makes it
        up = proc.stderr.readline()
        assert up.startswith("sizewatch: the store is up after "), up
        assert "serving" in proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_store_from_a_newer_sizewatch_is_refused(pg_url):
    open_store(pg_url).close()
    raw = RawSql(pg_url)
    future = migrate_mod.available()[-1].version + 1      # one past the newest this sizewatch knows
    raw.execute(f"INSERT INTO schema_migrations VALUES ({future}, 'from_the_future', '2030-01-01T00:00:00+00:00')")
    raw.close()
    want = f"store was written by a newer sizewatch: migration {future:04d} unknown"
    for cmd in (("report", "abc"), ("history", "f"), ("bot", "status"), ("db", "check"), ("serve", "--port", "0"),
                ("db", "matrix")):
        proc = sw(*cmd, "--db", pg_url)
        if cmd[0] == "db":
            assert proc.returncode == 1 and want in proc.stderr, proc.stderr
        else:
            one_line_error(proc, want)
    with pytest.raises(StoreError, match=want):
        open_store(pg_url, read_only=True)


def test_readers_are_read_only_and_migrate_once(pg_url):
    open_store(pg_url, upto=11).close()
    s = open_store(pg_url, read_only=True)         # pending migrations applied by one writable session
    try:
        assert s.schema_version == max(m.version for m in migrate_mod.available())
        assert s.list_commits() == []
        with pytest.raises(StoreError, match="opened read-only"):
            s.ensure_tree("x")
        with pytest.raises(StoreError, match="read-only transaction"):
            s.connection().execute("CREATE TABLE x (y INTEGER)")
    finally:
        s.close()


def test_a_lost_session_is_reopened_for_reads_and_writes_say_unavailable(pg_url, pg_server):
    """The server ends the store's session (as a restart does): the next read reconnects and answers;
    a write on a lost session fails as StoreUnavailable (nothing written: the caller may retry it)."""
    from db.pg import StoreUnavailable
    s = open_store(pg_url)
    s.ensure_tree("t")
    name = pg_url.rsplit("/", 1)[1]
    kill = f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    pg_server.admin(kill)
    assert s.tree_path("t") == ""                       # read: a new session
    pg_server.admin(kill)
    with pytest.raises(StoreUnavailable):
        s.ensure_tree("u")
    s.ensure_tree("u")                                  # the next write: a new session
    assert s.tree_path("u") == ""
    s.close()


def test_writers_take_turns_and_a_key_keeps_one_build(pg_url, compile_c):
    """Four writers (threads, each its own session) record the same build key and builds of their own
    at once, as workers on several machines do: no error, no deadlock, one build per key, every
    change counter moved once per write."""
    import threading
    from test_store import _objects, _record
    a, b = _objects(compile_c)
    s = open_store(pg_url)
    s.record_build(_record(None, "a" * 40, None, a))
    before = s.change_stamp()
    errors = []

    def writer(k: int) -> None:
        try:
            for i in range(3):
                s.record_build(_record(None, "b" * 40, "a" * 40, b))                  # the shared key
                s.record_build(_record(None, f"{k}{i}".ljust(40, "c"), "a" * 40, b))  # its own
        except Exception as e:                          # noqa: BLE001  (reported below)
            errors.append(repr(e))
        finally:
            s.close()                                   # this thread's session

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in threads), errors
    assert [x.commit_sha for x in s.builds_for_commit("b" * 40)] == ["b" * 40]
    raw = RawSql(pg_url)
    assert raw.one("SELECT count(*) FROM builds") == 1 + 1 + 4 * 3
    store_n = dict(before)["store"]
    # every record_build bumps 'store' at least once (build row and its matrix tables): 24 writes
    assert raw.one("SELECT n FROM change_counters WHERE scope = 'store'") >= store_n + 24
    raw.close()
    s.close()


def test_one_bot_per_store(pg_url):
    from ci.bot.service import instance_lock
    from analyzer.errors import InputError
    s, t = open_store(pg_url), open_store(pg_url)
    with instance_lock(s):
        with pytest.raises(InputError, match="another sizewatch bot is running"):
            with instance_lock(t):
                pass
    with instance_lock(t):                          # released with the first
        pass
    s.close()
    t.close()


# --- damaged rows ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile_db(compile_c, pg_server):
    """test_web_hostile's store (two real builds, a comparison, a series), written to PostgreSQL
    through the store's API: a template the damage tests copy."""
    from test_web_hostile import fill
    url = pg_server.database()
    s = open_store(url)
    fill(s, compile_c)
    s.close()
    return url.rsplit("/", 1)[1]


def _pg_damage(sql: str) -> str:
    return re.sub(r"x'([0-9a-f]*)'", r"'\\x\1'::bytea", sql)


def _damaged(pg_server, template: str, what: str) -> str:
    from test_web_hostile import DAMAGE
    url = pg_server.database(template=template)
    raw = RawSql(url)
    raw.execute(_pg_damage(DAMAGE[what]))
    raw.close()
    return url


PG_DAMAGE = ["errors of build 2", "log of build 2", "cover letter of series 1", "sections of object",
             "data of a newly_out_of_line finding", "counts", "tables", "likely path calls"]


def test_text_that_is_not_utf8_cannot_be_stored(pg_server, hostile_db):
    """The one damage sqlite can hold and PostgreSQL cannot: the server refuses it."""
    url = pg_server.database(template=hostile_db)
    raw = RawSql(url)
    with pytest.raises(StoreError, match="invalid byte sequence for encoding"):
        raw.execute("UPDATE commits SET subject = convert_from('\\x66ff6f'::bytea, 'UTF8') WHERE id = 2")
    raw.close()


def test_text_in_a_number_column_cannot_be_stored_and_a_column_that_lost_its_type_is_named(pg_server, hostile_db):
    """sqlite keeps 'abc' in an INTEGER column, the server refuses it; what ``db check`` can still find
    is a number column another tool turned into text (the typed columns read from the migrations)."""
    url = pg_server.database(template=hostile_db)
    raw = RawSql(url)
    with pytest.raises(StoreError, match="invalid input syntax for type bigint"):
        raw.execute("UPDATE objects SET text = 'abc'")
    raw.execute("ALTER TABLE objects ALTER COLUMN text TYPE text")
    raw.execute("UPDATE objects SET text = 'abc'")
    raw.close()
    one_line_error(sw("db", "check", "--db", url), "damaged:",
                   "1 number column not of a number type on the server: objects.text (text)")
    pg_server.drop(url)


def test_db_check_ok_and_every_damage_named(pg_server, hostile_db):
    ok = sw("db", "check", "--db", f"{pg_server.url}/{hostile_db}")
    assert ok.returncode == 0, ok.stderr
    assert "ok: foreign keys and UTF-8 text kept by the server, schema" in ok.stdout and "2 builds" in ok.stdout
    assert "every INTEGER/REAL column a number column" in ok.stdout
    names = {"errors of build 2": "builds.errors not JSON", "log of build 2": "builds.log_z not readable zlib",
             "cover letter of series 1": "series.cover_z not readable zlib",
             "sections of object": "objects.sections not JSON",
             "data of a newly_out_of_line finding": "findings.data not JSON", "counts": "comparisons.counts not JSON",
             "tables": "comparison_tables.tables_z not readable zlib",
             "likely path calls": "likely_paths.calls not JSON"}
    from test_web_hostile import HEAD
    for what in PG_DAMAGE:
        url = _damaged(pg_server, hostile_db, what)
        one_line_error(sw("db", "check", "--db", url), "damaged:", names[what])
        for ref in (HEAD[:12], "1"):                                   # the reports still print, and say so
            rep = sw("report", ref, "--db", url)
            assert rep.returncode == 0 and "Traceback" not in rep.stderr and rep.stdout, (what, ref, rep.stderr)
        if what == "cover letter of series 1":
            assert f"warning: unreadable in the store: {what}" in sw("report", "1", "--db", url).stderr
        pg_server.drop(url)


@pytest.mark.parametrize("what", PG_DAMAGE)
def test_a_damaged_row_is_shown_unreadable_not_a_500(pg_server, hostile_db, tmp_path, what):
    from test_web_hostile import HEAD, PAGES, marked_pages
    from web.app import create_app
    from web.settings import WebSettings
    url = _damaged(pg_server, hostile_db, what)
    c = create_app(WebSettings(url, token=None, jobs_dir=tmp_path / "jobs", pages_file=tmp_path / "p")).test_client()
    marked = marked_pages(c, what, PAGES)
    if what in ("counts", "tables"):
        if what == "counts":
            assert marked == []
        healthy = create_app(WebSettings(f"{pg_server.url}/{hostile_db}", token=None, jobs_dir=tmp_path / "j2",
                                         pages_file=tmp_path / "p2")).test_client()
        for page in (f"/commit/{HEAD}.txt", "/api/"):
            assert c.get(page).get_data() == healthy.get(page).get_data(), page
        healthy.application.extensions["sizewatch.store"].close()     # the template is copied again after
    else:
        assert marked, what
    c.application.extensions["sizewatch.store"].close()


# --- the example series through the pipeline -----------------------------------------------------

def _first_difference(a, b, path="") -> str:
    """Where two JSON documents first differ (for the failure message)."""
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {str(a)[:200]!r} != {str(b)[:200]!r}"


def _without_times(doc):
    """A JSON report without the fields that say when, and how long, each run worked, and the build
    ids (the order the pipeline's threads wrote their builds in, on either kind of store)."""
    if isinstance(doc, dict):
        return {k: _without_times(v) for k, v in doc.items()
                if k not in ("seconds", "started_at", "created_at", "build_id", "base_build_id")}
    if isinstance(doc, list):
        return [_without_times(v) for v in doc]
    return doc


@pytest.mark.kernel
def test_the_pipeline_writes_postgresql_and_reports_as_on_sqlite(example_store, example_pg_store, pg_server):
    """``sizewatch run --db postgresql://`` of the example series prints the report the sqlite run
    prints, and every report read back from the two stores is the same text."""
    db, sqlite_run = example_store
    name, pg_run = example_pg_store
    url = f"{pg_server.url}/{name}"
    assert pg_run.stdout == sqlite_run.stdout
    s = open_store(db, read_only=True)
    (series,) = s.list_series()
    shas = [series.base_sha] + [p.commit_sha for p in series.patches]
    s.close()
    for args in (("report", "1"), ("report", "1", "--markdown"), ("report", "1", "--json"),
                 *(("report", sha) for sha in shas[1:]), ("history", "rmqueue"),
                 ("history", "get_page_from_freelist", "--toolchain", "clang-19")):
        a, b = sw(*args, "--db", db), sw(*args, "--db", url)
        assert a.returncode == b.returncode == 0, (args, a.stderr, b.stderr)
        if "--json" in args:                    # when and how long each run took: not the store's doing
            a_out, b_out = (_without_times(json.loads(x.stdout)) for x in (a, b))
            assert b_out == a_out, (args, _first_difference(a_out, b_out))
        else:
            assert b.stdout == a.stdout, args
    # a second run builds nothing and finds every result stored
    again = sw("run", "--series", str(__import__("conftest").EXAMPLE_MBOX), "--toolchains", "gcc-12,clang-19",
               "--db", pg_server.database(template=name))
    assert again.returncode == 0 and again.stdout == sqlite_run.stdout, again.stderr


@pytest.mark.parametrize("url", ["postgresql://u:secret@h:xx/d", "postgresql://u:secret@[::1/d",
                                 "postgresql://u:secret@h:99999/d"])
def test_a_url_urllib_cannot_parse_is_one_line_without_its_password(url):
    """A stranger's --db URL with a bad port or a broken IPv6 host: one line, exit 1, no password."""
    import subprocess
    from conftest import sizewatch_cmd
    for args in (["report", "1"], ["history", "f"], ["db", "check"]):
        p = subprocess.run([*sizewatch_cmd(), *args, "--db", url], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "secret" not in p.stderr, p.stderr


# --- passwords (issue 27): never in a message, a banner or a file name ----------------------------

PW = "Sekr3tPW"
PASSWORD_FORMS = [
    "postgresql://u:Sekr3tPW@h:5/db", "postgresql://u@h:5/db?password=Sekr3tPW",
    "postgresql://u@h/db?sslmode=require&password=Sekr3tPW&application_name=x",
    "postgresql://u@h/db?%70assword=Sekr3tPW", "postgresql://u@h/db?PASSWORD=Sekr3tPW",
    "postgresql://u@h/db?sslpassword=Sekr3tPW", "postgresql://u@h/db?passwordSekr3tPW",
    "postgresql://u:Sekr%zz3tPW@h/db", "postgresql://u:ab#Sekr3tPW@h/db", "postgresql://u:ab/Sekr3tPW@h:5/db",
    "postgresql://u:a?Sekr3tPW@h/db", "postgresql://:Sekr3tPW@h/db", "postgres://u:Sekr3tPW@[::1/db",
    "postgresql://u:Sekr3tPW@h:xx/db", "host=h password=Sekr3tPW dbname=d", "host=h password = 'Sekr3t PW' dbname=d",
]


@pytest.mark.parametrize("url", PASSWORD_FORMS)
def test_every_spelling_of_a_password_is_masked(url):
    from db.store import beside
    assert "Sekr" not in dialect.redact(url) and dialect.has_password(url), dialect.redact(url)
    quoted = " ".join(f'"{s}"' for s in dialect.secrets(url))       # as libpq quotes a token it cannot read
    assert "Sekr" not in dialect.scrub(f"bad URI {url}: {quoted}", url)
    if dialect.is_url(url):
        name = beside(url, ".pages").name
        assert "Sekr" not in name and re.fullmatch(r"pg-[0-9a-f]{20}\.pages", name), name
    else:                      # libpq's keyword/value string is no store name (it would be an sqlite file's)
        with pytest.raises(StoreError, match="not a store: a PostgreSQL store is named by a postgresql:// URL") as e:
            open_store(url)
        assert "Sekr" not in str(e.value)


def test_redact_keeps_what_is_not_secret():
    assert dialect.redact("postgresql://u:secret@h:5/db") == "postgresql://u@h:5/db"
    assert dialect.redact("postgresql://u@h/db?sslmode=require&password=x") == \
        "postgresql://u@h/db?sslmode=require&password=***"
    assert dialect.redact("postgresql://h/db?application_name=me@x") == "postgresql://h/db?application_name=me@x"
    assert not dialect.has_password("postgresql://u@h/db?sslmode=require") and dialect.secrets("store.db") == []
    from db.store import beside
    # one database, whatever password it is given with: one page cache
    assert beside("postgresql://u:a@h/db", ".pages") == beside("postgresql://u:b@h/db", ".pages") \
        != beside("postgresql://u@h/other", ".pages")


@pytest.mark.parametrize("tail", ["u:Sekr%zz3tPW@{h}/d", "u@{h}/d?password=Sekr%zz3tPW", "u@{h}/d?%70assword=Sekr%zz3tPW",
                                  "u@{h}/d?passwordSekr3tPW", "u@{h}/d?sslpassword=Sekr%zz3tPW",
                                  "u:ab#Sekr3tPW@h:xx/d", "u:Sekr3tPW@h:99999/d"])
def test_libpq_quoting_a_password_is_masked(pg_server, tail):
    """libpq quotes a token it cannot decode (``invalid percent-encoded token: "Sekr%zz3tPW"``), urllib a
    port it cannot read: every command says one line without the password."""
    url = "postgresql://" + tail.format(h=f"127.0.0.1:{pg_server.port}")
    for args in (["history", "f"], ["db", "check"], ["report", "1"]):
        p = sw(*args, "--db", url)
        one_line_error(p)
        assert "Sekr" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_wrong_password_is_one_line_without_either(pg_server):
    url = pg_server.password_database("swpg", PW)
    ok = url.replace("swpg@", f"swpg:{PW}@")
    with open_store(ok) as st:                            # the right one opens, in either spelling
        assert st.identity().startswith("store-")
    with open_store(f"{url}?password={PW}", read_only=True) as st:
        assert st.identity().startswith("store-")
    p = sw("history", "f", env={"SIZEWATCH_DB": f"{url}?password=wrong{PW}"})
    one_line_error(p, "password authentication failed", "password=***")
    assert PW not in p.stderr and "wrong" not in p.stderr


def test_serve_banner_and_page_cache_hold_no_password(pg_server, tmp_path):
    import os
    import time
    import urllib.request
    url = pg_server.password_database("swweb", PW)
    open_store(f"{url}?password={PW}").close()
    cache = tmp_path / "cache"
    proc = subprocess.Popen([*sizewatch_cmd(), "serve", "--db", f"{url}?password={PW}", "--host", "127.0.0.1",
                             "--port", "0", "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "SIZEWATCH_CACHE": str(cache)})
    try:
        banner = proc.stderr.readline()
        m = re.search(r"on (http://127\.0\.0\.1:\d+)/", banner)
        assert m and f"serving {url}?password=*** on" in banner and PW not in banner, banner
        with urllib.request.urlopen(m[1] + "/", timeout=60) as r:
            assert r.status == 200
        deadline = time.monotonic() + 30
        while not list(cache.rglob("*.pages*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        names = [str(p.relative_to(cache)) for p in cache.rglob("*")]
        assert any(n.endswith(".pages") for n in names), names          # the page cache is there ...
        assert not any("Sekr" in n or "password" in n or "swweb" in n for n in names), names   # ... by a hash
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert PW not in err
