"""The store against files it did not write and rows damaged after it wrote them: a zero-byte,
text or foreign sqlite file given as ``--db`` is refused in one line and left byte for byte as it
was; a store from a newer sizewatch is refused; readers open ``mode=ro``; ``sizewatch db check``
names every damaged row (exit 1, one line) and says ok for a sound store."""
from __future__ import annotations

import hashlib
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import sizewatch_cmd
from db.errors import StoreError
from db.store import open_store
from test_web_hostile import DAMAGE, HEAD, store_path  # noqa: F401  (the module fixture: two real builds)


def sw(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*sizewatch_cmd(), *map(str, args)], capture_output=True, text=True, timeout=120)


def one_line_error(proc: subprocess.CompletedProcess, *want: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("sizewatch: "), proc.stderr
    for w in want:
        assert w in lines[0], (w, lines[0])


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_files_sizewatch_did_not_create_are_refused_and_untouched(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    text = tmp_path / "notes.db"
    text.write_text("my notes, not a database\n" * 100)
    foreign = tmp_path / "foreign.db"
    c = sqlite3.connect(foreign)
    c.execute("CREATE TABLE people(name)")
    c.commit()
    c.close()
    cases = {empty: "an empty file, not a sizewatch store", text: "not an sqlite database",
             foreign: "an sqlite database that is not a sizewatch store (its tables: people)"}
    for path, why in cases.items():
        before = digest(path)
        for cmd in (("report", "abc"), ("history", "f"), ("db", "check"), ("bot", "status")):
            one_line_error(sw(*cmd, "--db", path), str(path.name), why)
        with pytest.raises(StoreError, match=why.replace("(", r"\(").replace(")", r"\)")):
            open_store(path)
        assert digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == sorted(
            p.name for p in cases), "nothing written, no -wal/-shm beside it"


def test_a_store_from_a_newer_sizewatch_is_refused(tmp_path):
    db = tmp_path / "s.db"
    open_store(db).close()
    c = sqlite3.connect(db)
    from db import migrate
    future = migrate.available()[-1].version + 1          # one past the newest this sizewatch knows
    c.execute("INSERT INTO schema_migrations VALUES (?, 'from_the_future', '2030-01-01T00:00:00+00:00')", (future,))
    c.commit()
    c.close()
    want = f"store was written by a newer sizewatch: migration {future:04d} unknown"
    for cmd in (("report", "abc"), ("history", "f"), ("bot", "status"), ("db", "check"), ("serve", "--port", "0")):
        one_line_error(sw(*cmd, "--db", db), want)
    with pytest.raises(StoreError, match=want):
        open_store(db, read_only=True)


def test_readers_open_read_only(store_path, tmp_path):  # noqa: F811
    s = open_store(store_path, read_only=True)
    try:
        assert s.get_commit(HEAD).sha == HEAD                          # reads work
        with pytest.raises(StoreError, match="opened read-only"):
            s.ensure_tree("x")
        conn = s.connection()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("CREATE TABLE x(y)")                          # the connection itself is mode=ro
    finally:
        s.close()
    report = sw("report", HEAD[:12], "--db", store_path)
    assert report.returncode == 0 and "subject bbbb" in report.stdout, report.stderr


def test_db_check_ok_and_every_damage_named(store_path, tmp_path):  # noqa: F811
    ok = sw("db", "check", "--db", store_path)
    assert ok.returncode == 0, ok.stderr
    assert "ok: integrity_check ok, schema" in ok.stdout and "2 builds" in ok.stdout
    assert "every JSON, compressed, text and number column readable" in ok.stdout
    names = {"errors of build 2": "builds.errors not JSON", "log of build 2": "builds.log_z not readable zlib",
             "cover letter of series 1": "series.cover_z not readable zlib",
             "text that is not UTF-8": "commits.subject not UTF-8", "sections of object": "objects.sections not JSON",
             "data of a newly_out_of_line finding": "findings.data not JSON",
             "details of a newly_out_of_line finding": "findings.data with details not of their kind (row 1)",
             "counts": "comparisons.counts not JSON",
             "tables": "comparison_tables.tables_z not readable zlib",
             "likely path calls": "likely_paths.calls not JSON",
             "sizes of object": "objects.text not a number (row 1, 2)",
             "symbols of build": "symbols.size not a number"}
    for what, sql in DAMAGE.items():
        db = tmp_path / f"{what[:8].replace(' ', '_')}.db"
        a, b = sqlite3.connect(store_path), sqlite3.connect(db)
        a.backup(b)
        b.execute(sql)
        b.commit()
        a.close()
        b.close()
        before = digest(db)
        one_line_error(sw("db", "check", "--db", db), "damaged:", names[what])
        assert digest(db) == before                                    # a check changes nothing
        for ref in (HEAD[:12], "1"):                                   # the reports still print, and say so
            rep = sw("report", ref, "--db", db)
            assert rep.returncode == 0 and "Traceback" not in rep.stderr and rep.stdout, (what, ref, rep.stderr)
        if what in ("text that is not UTF-8", "cover letter of series 1"):
            assert f"warning: unreadable in the store: {what}" in sw("report", "1", "--db", db).stderr
    # damage sqlite itself finds: a page of the file overwritten
    db = tmp_path / "torn.db"
    a, b = sqlite3.connect(store_path), sqlite3.connect(db)
    a.backup(b)
    a.close()
    b.close()
    data = bytearray(db.read_bytes())
    page = 4096
    data[page * 3:page * 4] = b"\xa5" * page
    db.write_bytes(bytes(data))
    one_line_error(sw("db", "check", "--db", db), "damaged:")
