"""The sqlite store: migrations, atomic writes, queries, and stored symbols reproducing
bloat-o-meter's tables (checked against sizediff and the kernel's bloat-o-meter on real objects)."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ci.pipeline.objects import object_record
from db import migrate as migrate_mod
from db.errors import StoreError
from db.models import BuildRecord, Commit, ConfigInfo, FindingRow, FunctionRow, RemarkRow, Series, SeriesPatch
from ci.reports.model import commit_report, series_report, symbol_set
from db.store import open_store
from analyzer import bloat, formats

from pgserver import RawSql

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _objects(compile_c):
    """Two real objects that differ: the symbols fixture base (V=1) and head (V=2)."""
    a = compile_c("gcc-12", FIXTURES / "symbols.c", name="store-a.o")
    b = compile_c("gcc-12", FIXTURES / "symbols.c", "-DV=2", name="store-b.o")
    return a, b


def _record(path, sha, parent, obj_path, toolchain="gcc-12", findings=(), status="ok", analysis=1):
    obj = object_record(obj_path, "x.o") if obj_path else None
    if obj is not None:
        obj.functions = [FunctionRow("split_me", 10, "plain", True, 0, 0, 0, {"name": "split_me"})]
        obj.remarks = [RemarkRow("helper", "split_me", False, "call is unlikely", "x.c:3:1")]
        obj.facts = {"path": str(obj_path), "functions": {"split_me": {"size": 10}}}
    rec = BuildRecord("t", Commit(sha, parent, f"subject {sha[:4]}", "A <a@b>", f"2024-01-0{len(sha) % 9}"),
                      toolchain, f"{toolchain} (Debian) 1.0", ConfigInfo("defconfig-x", config_hash="h",
                                                                          config_text="CONFIG_X=y\n"),
                      "x.o", status, objects=[obj] if obj else [], findings=list(findings),
                      log="make: built\n" * 50, errors=[] if status == "ok" else ["x.c:1: error: boom"],
                      analysis_version=analysis)
    return rec


def test_a_new_store_file_is_never_seen_empty(tmp_path):
    """sqlite creates the file at open and writes its first page an fsync later; a process killed in
    between (issue 28's kill campaign met it: ``sizewatch bot`` killed as it started on a new store) left
    a zero-byte file every later run refuses. A thread watching the name while stores are created sees
    no empty file, and no temporary file is left beside them."""
    import os
    import threading
    sizes: list[int] = []
    for i in range(10):
        db = tmp_path / f"s{i}.db"
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                try:
                    sizes.append(os.stat(db).st_size)
                except FileNotFoundError:
                    continue
        t = threading.Thread(target=watch)
        t.start()
        try:
            open_store(db).close()
        finally:
            stop.set()
            t.join()
        assert open_store(db).schema_version == max(m.version for m in migrate_mod.available())
    assert sizes and 0 not in sizes, f"an empty store file seen {sizes.count(0)} times"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_migrations_from_empty_file(tmp_path):
    db = tmp_path / "s.db"
    db.touch()                          # sqlite takes an empty file as an empty database; sizewatch does not
    with pytest.raises(StoreError, match="s.db: an empty file, not a sizewatch store"):
        open_store(db)
    assert db.read_bytes() == b""
    db.unlink()
    s = open_store(db)
    versions = [m.version for m in migrate_mod.available()]
    assert s.schema_version == max(versions)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == max(versions)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    applied = [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert applied == versions
    s.close()
    # opening again applies nothing and keeps the data
    assert migrate_mod.migrate(sqlite3.connect(db, isolation_level=None)) == []


def _raw_build(db: Path | str, sym_names: list[str]) -> None:
    """A build written with plain SQL in the columns every schema version has (as an old sizewatch wrote it)."""
    conn = RawSql(db)
    conn.script("""
        INSERT INTO trees(name) VALUES ('t');
        INSERT INTO commits(tree_id, sha, subject) VALUES (1, 'abcd1234', 'old commit');
        INSERT INTO toolchains(name, version) VALUES ('gcc-12', 'v');
        INSERT INTO configs(key) VALUES ('k');
        INSERT INTO builds(commit_id, toolchain_id, config_id, target, status) VALUES (1, 1, 1, 'x.o', 'ok');
        INSERT INTO objects(build_id, path) VALUES (1, 'x.o');
    """)
    for i, n in enumerate(sym_names):
        conn.execute("INSERT INTO names(name) VALUES (?)", (n,))
        conn.execute("INSERT INTO symbols(object_id, name_id, size, letter) VALUES (1, ?, ?, 'T')", (i + 1, 10 + i))
    conn.close()


def test_migration_from_previous_version_keeps_data(store_db, compile_c):
    a, _ = _objects(compile_c)
    db = store_db
    versions = [m.version for m in migrate_mod.available()]
    prev = versions[-2]
    old = open_store(db, upto=prev)
    assert old.schema_version == prev
    old.close()
    _raw_build(db, ["f", "g"])
    new = open_store(db)
    assert new.schema_version == versions[-1]
    (b,) = new.builds_for_commit("abcd1234")
    assert b.status == "ok" and new.get_commit("abcd").subject == "old commit"
    assert [(r.name, r.size) for r in new.symbols_for(b.id)] == [("f", 10), ("g", 11)]
    # the migrated store takes new results
    bid = new.record_build(_record(db, "a" * 40, "abcd1234", a))
    assert len(new.symbols_for(bid)) == len(object_record(a, "x.o").symbols)
    sid = new.record_series(Series("t", "<m@x>", "s", patches=[SeriesPatch(1, "p", commit_sha="a" * 40)]))
    assert new.get_series(sid).patches[0].commit_sha == "a" * 40
    assert [h.commit_sha for h in new.function_history("f")] == ["abcd1234"]


def test_migration_from_version_1_marks_builds_for_reanalysis(store_db):
    """Version 2 added inline facts: builds stored before it count as not analyzed."""
    db = store_db
    s = open_store(db, upto=1)
    conn = RawSql(db)
    conn.script("""
        INSERT INTO trees(name) VALUES ('t');
        INSERT INTO commits(tree_id, sha) VALUES (1, 'abcd1234');
        INSERT INTO toolchains(name, version) VALUES ('gcc-12', 'v');
        INSERT INTO configs(key) VALUES ('k');
        INSERT INTO builds(commit_id, toolchain_id, config_id, target, status) VALUES (1, 1, 1, 'x.o', 'ok');
    """)
    conn.close()
    s.close()
    s = open_store(db)
    assert s.has_build("t", "abcd1234", "gcc-12", "k", "x.o")
    assert not s.has_build("t", "abcd1234", "gcc-12", "k", "x.o", analysis_version=1)


def test_migration_files_with_gaps_and_late_low_numbers(tmp_path):
    d = tmp_path / "mig"
    shutil.copytree(migrate_mod.MIGRATIONS_DIR, d)
    (d / "0100_bot.sql").write_text("CREATE TABLE bot_mail (id INTEGER PRIMARY KEY, body TEXT);\n")
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    got = migrate_mod.migrate(conn, directory=d)
    assert got[-1] == 100
    # a file numbered below the highest applied one, added later, is still applied
    (d / "0050_late.sql").write_text("-- a comment\nCREATE INDEX bot_body ON bot_mail(body);\n")
    assert migrate_mod.migrate(conn, directory=d) == [50]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 100
    # a broken migration leaves the schema at the previous version
    (d / "0300_bad.sql").write_text("CREATE TABLE ok_part (x);\nCREATE TABLE bot_mail (x);\n")
    with pytest.raises(StoreError, match="0300_bad.sql"):
        migrate_mod.migrate(conn, directory=d)
    assert migrate_mod.version(conn) == 100
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'ok_part'").fetchone()[0] == 0


def test_record_build_is_atomic(store_db, compile_c):
    a, b = _objects(compile_c)
    s = open_store(store_db)
    good = s.record_build(_record(None, "a" * 40, None, a))
    bad = _record(None, "a" * 40, None, b, findings=[FindingRow("x", data={"bad": object()})])
    with pytest.raises(TypeError):
        s.record_build(bad)                             # fails after objects and symbols were inserted
    # the earlier result is intact, nothing of the failed one is there
    kept = s.find_build("t", "a" * 40, "gcc-12", "defconfig-x", "x.o")
    assert kept.id == good
    assert len(s.symbols_for(good)) == len(object_record(a, "x.o").symbols)
    bad2 = _record(None, "b" * 40, "a" * 40, b, findings=[FindingRow("x", data={"bad": object()})])
    with pytest.raises(TypeError):
        s.record_build(bad2)
    conn = RawSql(store_db)
    assert conn.execute("SELECT count(*) FROM commits WHERE sha = ?", ("b" * 40,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM builds").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM objects").fetchone()[0] == 1
    n_sym = conn.execute("SELECT count(*) FROM symbols").fetchone()[0]
    assert n_sym == len(object_record(a, "x.o").symbols)
    # the names cache must not keep ids of the rolled-back transaction
    s.record_build(_record(None, "c" * 40, "a" * 40, b))
    assert {r.name for r in s.symbols_for(s.find_build("t", "c" * 40, "gcc-12", "defconfig-x", "x.o").id)} == \
        {r.name for r in object_record(b, "x.o").symbols}


def test_record_build_replaces_same_key(store_db, compile_c):
    a, b = _objects(compile_c)
    s = open_store(store_db)
    first = s.record_build(_record(None, "a" * 40, None, a))
    second = s.record_build(_record(None, "a" * 40, None, b))
    assert first != second and s.get_build(first) is None
    conn = RawSql(store_db)
    assert conn.execute("SELECT count(*) FROM symbols").fetchone()[0] == len(object_record(b, "x.o").symbols)
    assert conn.execute("SELECT count(*) FROM functions").fetchone()[0] == 1


def test_stored_symbols_reproduce_sizediff(store_db, compile_c, sizediff, bloat_o_meter):
    a, b = _objects(compile_c)
    s = open_store(store_db)
    s.record_build(_record(None, "a" * 40, None, a))
    s.record_build(_record(None, "b" * 40, "a" * 40, b,
                           findings=[FindingRow("inline_not_inlined", "helper", "warning", "not inlined")]))
    rep = commit_report(s, "bbbb")
    (tc,) = rep.toolchains
    assert tc.base_status == "ok"
    want = sizediff(a, b)
    assert want.returncode == 0
    assert tc.bloat_text.encode() == want.stdout == bloat_o_meter(a, b).stdout
    for mode in ("c", "d", "t"):
        got = formats.bloat_text(bloat.diff(symbol_set(s.symbols_for(tc.base_build_id)),
                                            symbol_set(s.symbols_for(tc.build_id)), mode))
        assert got.encode() == sizediff(f"-{mode}", a, b).stdout
    assert [f.kind for f in tc.findings] == ["inline_not_inlined"]


def test_queries(store_db, compile_c):
    a, b = _objects(compile_c)
    s = open_store(store_db)
    b1 = s.record_build(_record(None, "a" * 40, None, a))
    b2 = s.record_build(_record(None, "b" * 40, "a" * 40, b))
    b3 = s.record_build(_record(None, "b" * 40, "a" * 40, b, toolchain="clang-19"))
    fail = s.record_build(_record(None, "c" * 40, "b" * 40, None, status="failed"))
    assert s.has_build("t", "a" * 40, "gcc-12", "defconfig-x", "x.o", "gcc-12 (Debian) 1.0", analysis_version=1)
    assert not s.has_build("t", "a" * 40, "gcc-12", "defconfig-x", "x.o", "gcc-12 (Debian) 2.0")
    assert s.has_build("t", "c" * 40, "gcc-12", "defconfig-x", "x.o", analysis_version=9)  # failures are results
    assert s.get_build(fail).errors == ["x.c:1: error: boom"]
    assert s.build_log(b1) == "make: built\n" * 50
    assert [b.id for b in s.builds_for_commit("b" * 40)] == [b3, b2]     # ordered by toolchain name
    assert s.get_commit("a" * 40).subject == "subject aaaa"
    assert s.get_commit("ffff") is None and s.get_commit("not-hex") is None
    assert [c.sha for c in s.list_commits()] == ["c" * 40, "b" * 40, "a" * 40]
    hist = s.function_history("split_me")
    assert [(h.commit_sha[0], h.toolchain) for h in hist] == [("a", "gcc-12"), ("b", "clang-19"), ("b", "gcc-12")]
    assert all(h.size and h.declared == "plain" and h.out_of_line for h in hist)
    assert [h.toolchain for h in s.function_history("split_me", toolchain="clang-19")] == ["clang-19"]
    assert s.function_history("no_such_function") == []
    assert s.remarks_for(b2)[0].reason == "call is unlikely"
    assert s.functions_for(b2)[0].facts == {"name": "split_me"}
    assert s.object_facts(b2) == {"x.o": {"path": str(b), "functions": {"split_me": {"size": 10}}}}
    assert s.object_facts(fail) == {}
    matrix = {r.name: r for r in s.toolchain_matrix("b" * 40)}
    assert set(matrix["split_me"].cells) == {"gcc-12", "clang-19"}
    s.record_comparison(b2, b1, [FindingRow("newly_inlined", "helper")])
    assert s.has_comparison(b2, b1) and not s.has_comparison(b3, b1)
    assert [f.kind for f in s.findings_for(b2, b1)] == ["newly_inlined"]
    assert s.findings_for(b2) == []
    sid = s.record_series(Series("t", "<cover@x>", "[PATCH 0/2] s", cover="hello",
                                 base_sha="a" * 40, patches=[SeriesPatch(1, "p1", commit_sha="b" * 40),
                                                             SeriesPatch(2, "p2", status="failed", error="no")]))
    assert s.get_series("cover@x").id == sid and s.get_series(str(sid)).cover == "hello"
    assert [x.id for x in s.series_for_commit("b" * 40)] == [sid]
    assert [x.id for x in s.list_series()] == [sid]
    rep = series_report(s, sid)
    assert [p.status for p in rep.patches] == ["applied", "failed"]
    assert {t.toolchain: t.base_status for t in rep.patches[0].toolchains} == {"gcc-12": "ok", "clang-19": None}
    # re-recording a series replaces its patches
    s.record_series(Series("t", "<cover@x>", "[PATCH 0/2] s", base_sha="a" * 40,
                           patches=[SeriesPatch(1, "p1", commit_sha="b" * 40)]))
    assert len(s.get_series(sid).patches) == 1


def test_corrupt_or_unusable_file(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not an sqlite database at all" * 100)
    with pytest.raises(StoreError, match="bad.db"):
        open_store(bad)
    with pytest.raises(StoreError, match="directory"):
        open_store(tmp_path)


def test_default_path(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZEWATCH_DB", str(tmp_path / "env.db"))
    from db.store import default_path
    assert default_path() == tmp_path / "env.db"
    monkeypatch.delenv("SIZEWATCH_DB")
    monkeypatch.setenv("SIZEWATCH_CACHE", str(tmp_path / "cache"))
    assert default_path() == tmp_path / "cache" / "sizewatch.db"
