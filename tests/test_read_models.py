"""What the store computes at write time for its readers (migrations 0009, 0010): bloat-o-meter
tables and cell counts kept with a comparison, and function_sizes per (source function, build).
Each must read back exactly as computing it from the rows does, and a store written before must
give the same answers (backfilled, or computed on read)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ci.reports import text as render
from ci.pipeline.objects import object_record
from db import bloat_tables
from db import migrate as migrate_mod
from db.models import BuildRecord, Commit, ConfigInfo, FindingRow, FunctionRow
from ci.reports.model import commit_report, compute_tables
from db.store import open_store
from analyzer import formats

from pgserver import RawSql

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _build(s, sha: str, parent: str | None, obj_path: Path, toolchain: str = "gcc-12",
           findings: list[FindingRow] = (), generation: int = 1) -> int:
    obj = object_record(obj_path, "x.o")
    obj.functions = [FunctionRow("split_me", 10, "inline", True, 2), FunctionRow("helper", 0, "inline", False, 3)]
    return s.record_build(BuildRecord("t", Commit(sha, parent, f"subject {sha[:4]}", generation=generation),
                                      toolchain, f"{toolchain} 1.0", ConfigInfo("cfg"), "x.o", "ok",
                                      objects=[obj], findings=list(findings), analysis_version=1))


def _objects(compile_c):
    return (compile_c("gcc-12", FIXTURES / "symbols.c", name="rm-a.o"),
            compile_c("gcc-12", FIXTURES / "symbols.c", "-DV=2", name="rm-b.o"))


def test_comparison_keeps_tables_and_counts(store_db, compile_c):
    a, b = _objects(compile_c)
    db = store_db
    s = open_store(db)
    copy = FindingRow("always_inline_copy", "helper", "warning", "helper: out-of-line copy")
    b1 = _build(s, "a" * 40, None, a, findings=[copy])
    b2 = _build(s, "b" * 40, "a" * 40, b, generation=2,
                findings=[copy, FindingRow("inline_not_inlined", "other", "notice", "other: not inlined")])
    computed = compute_tables(s, b1, b2)
    # clones among the changed rows (scale.constprop.0 -> scale, work.part.0), so the kept sizes matter
    assert any(len(g.members) > 1 or g.members[0].name != g.base for g in formats.clone_groups(computed[0]))
    s.record_comparison(b2, b1, [FindingRow("newly_out_of_line", "split_me", "warning", "split_me: out")],
                        bloat_tables.to_stored(computed))
    stored = bloat_tables.from_stored(s.comparison_tables(b2, b1))
    # what every reader prints of the tables is the same, clone groups included
    assert formats.bloat_text(stored) == formats.bloat_text(computed)
    assert formats.grouped_text(stored) == formats.grouped_text(computed)
    assert [formats.table_dict(t) for t in stored] == [formats.table_dict(t) for t in computed]
    with_stored = render.patch_text(commit_report(s, "b" * 40))
    summary = s.build_summaries(["b" * 40])
    assert summary[0].carried == 1 and summary[0].severities == {"warning": 1, "notice": 1}
    assert summary[0].worst.kind == "newly_out_of_line"
    # as a store from before 0009 has it: no tables, no counts; the same report and cells
    conn = RawSql(db)
    conn.execute("DELETE FROM comparison_tables")
    conn.execute("UPDATE comparisons SET counts = NULL")
    conn.close()
    assert s.comparison_tables(b2, b1) is None
    assert render.patch_text(commit_report(s, "b" * 40)) == with_stored
    assert s.build_summaries(["b" * 40]) == summary
    # tables of another format are not read (computed again)
    assert bloat_tables.from_stored({**bloat_tables.to_stored(computed), "format": -1}) is None


def test_function_sizes_match_the_migration_backfill(store_db, compile_c):
    """New rows get their function_sizes from the triggers, rows stored before from the migration's
    backfill: the same table (on PostgreSQL: 0010's .pg.sql twin, its triggers and its backfill)."""
    a, b = _objects(compile_c)
    db = store_db
    s = open_store(db)
    for i, (obj, tc) in enumerate([(a, "gcc-12"), (b, "gcc-12"), (b, "clang-19")]):
        _build(s, f"{i:040x}", None, obj, toolchain=tc, generation=i + 1)
    conn = RawSql(db)
    written = conn.execute("SELECT * FROM function_sizes ORDER BY name_id, build_id").fetchall()
    assert len(written) > 10
    (m,) = [m for m in migrate_mod.available() if m.version == 10]
    conn.execute("DELETE FROM function_sizes")
    if conn.pg:
        backfill = m.pg_path.read_text().split("CREATE FUNCTION")[0]
        conn.conn.script("\n".join(ln for ln in backfill.splitlines() if not ln.lstrip().startswith("DELETE")))
        assert conn.execute("SELECT * FROM function_sizes ORDER BY name_id, build_id").fetchall() == written
        conn.close()
        return
    for stmt in m.statements():
        sql = "\n".join(ln for ln in stmt.splitlines() if not ln.lstrip().startswith("--"))
        if sql.lstrip().upper().startswith("INSERT"):
            conn.execute(sql)
    assert conn.execute("SELECT * FROM function_sizes ORDER BY name_id, build_id").fetchall() == written
    conn.close()


@pytest.mark.parametrize("schema", [8, None], ids=["written-before-0009", "written-by-an-older-sizewatch"])
def test_history_from_rows_written_by_an_older_sizewatch(store_db, schema):
    """Symbols and facts written with plain SQL as an older sizewatch does, into a store at schema 8
    (then migrated: backfilled) or into a migrated one (the triggers): a function's history counts its
    clones, reads its facts, and agrees with the history summed from the symbols."""
    db = store_db
    open_store(db, upto=schema).close()
    conn = RawSql(db)
    conn.script("""
        INSERT INTO trees(name) VALUES ('t');
        INSERT INTO commits(tree_id, sha, subject, generation) VALUES (1, 'aaaa0001', 'one', 1),
                                                                      (1, 'aaaa0002', 'two', 2);
        INSERT INTO toolchains(name, version) VALUES ('gcc-12', 'v1'), ('clang-19', 'v2');
        INSERT INTO configs(key) VALUES ('k');
        INSERT INTO builds(commit_id, toolchain_id, config_id, target, status) VALUES
            (1, 1, 1, 'x.o', 'ok'), (2, 1, 1, 'x.o', 'ok'), (2, 2, 1, 'x.o', 'ok');
        INSERT INTO objects(build_id, path) VALUES (1, 'x.o'), (2, 'x.o'), (3, 'x.o');
        INSERT INTO names(name) VALUES ('split_me'), ('split_me.cold'), ('split_me.part.0'), ('data_x'),
                                       ('.Ltmp'), ('other');
    """)
    sym = [(1, 1, 40, "T"), (1, 2, 12, "t"), (1, 4, 8, "D"), (1, 5, 3, "t"),
           (2, 1, 44, "T"), (2, 2, 12, "t"), (2, 3, 9, "t"), (2, 6, 5, "T"),
           (3, 3, 20, "t"), (3, 6, 7, "W")]
    conn.conn.executemany("INSERT INTO symbols(object_id, name_id, size, letter) VALUES (?, ?, ?, ?)", sym)
    conn.conn.executemany("INSERT INTO functions(object_id, name_id, declared, out_of_line, inlined_count) "
                     "VALUES (?, ?, ?, ?, ?)", [(1, 1, "inline", 1, 0), (3, 1, "inline", 0, 4), (3, 6, "plain", 1, 0)])
    conn.close()
    s = open_store(db)
    got = [(h.commit_sha, h.toolchain, h.size, h.declared, h.out_of_line, h.inlined_count)
           for h in s.function_history("split_me")]
    assert got == [("aaaa0001", "gcc-12", 52, "inline", True, 0),
                   ("aaaa0002", "clang-19", 20, "inline", False, 4),       # only its .part.0 copy is left
                   ("aaaa0002", "gcc-12", 65, None, None, None)]
    assert [h.size for h in s.function_history("split_me.cold")] == [12, 12]   # one clone: from the symbols
    assert [h.size for h in s.function_history("other", toolchain="clang-19")] == [7]
    assert s.function_history("data_x") == [] and s.function_history("Ltmp") == []
    series = s.function_series("split_me")
    assert [c.sha for c in series.commits] == ["aaaa0001", "aaaa0002"] and series.points == 3
    lines = {ln.toolchain: ln for ln in series.lines}
    assert lines["gcc-12"].size == [52, 65] and lines["clang-19"].size == [None, 20]
    assert lines["clang-19"].inlined_count == [None, 4] and lines["gcc-12"].out_of_line == [True, None]
    # the columns hold what the points say, for a plain name and for a clone's name alike
    for name in ("split_me", "split_me.cold", "other"):
        points = {(h.commit_sha, h.toolchain): (h.build_id, h.size, h.declared) for h in s.function_history(name)}
        fs = s.function_series(name)
        cols = {(c.sha, ln.toolchain): (ln.build_id[i], ln.size[i], ln.declared[i])
                for ln in fs.lines for i, c in enumerate(fs.commits) if ln.has(i)}
        assert cols == points
