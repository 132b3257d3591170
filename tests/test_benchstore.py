"""The replicated bench store (also used by the dashboard's bench): real rows copied, reports work."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))   # the bench store lives with the benches

from benchstore import BENCH_TREE, large_store
from ci.pipeline.inline_costs import object_inline_cost
from ci.pipeline.objects import object_record
from db.models import BuildRecord, Commit, ConfigInfo, FindingRow, FunctionRow
from ci.reports.model import commit_report, series_report
from db.store import open_store
from analyzer import bloat, formats

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_large_store_replicates_real_rows(tmp_path, compile_c):
    objs = [compile_c(cc, FIXTURES / "symbols.c", f"-DV={v}", name=f"bs-{cc}-{v}.o")
            for cc in ("gcc-12", "clang-19") for v in (1, 2)]
    seed = tmp_path / "seed.db"
    with open_store(seed) as s:
        for i, cc in enumerate(("gcc-12", "clang-19")):
            prev = None
            for k, sha in enumerate(("a" * 40, "b" * 40)):
                obj = object_record(objs[2 * i + k], "x.o")
                obj.functions = [FunctionRow("split_me", 10 + k, "inline", bool(k))]
                # (symbols.c's DWARF is not read by the attribution: an object with inlining stands in)
                obj.inline_cost = object_inline_cost(compile_c(cc, FIXTURES / "inline_cost" / "callers.c",
                                                               f"-DV={k}", name=f"bs-ic-{cc}-{k}.o"), "x.o")
                assert obj.inline_cost is not None
                bid = s.record_build(BuildRecord("t", Commit(sha, prev, f"c{k}", generation=k + 1), cc, "v " + cc,
                                                 ConfigInfo("cfg"), "x.o", "ok", objects=[obj], analysis_version=1))
                if prev:
                    s.record_comparison(bid, pbid, [FindingRow("newly_out_of_line", "split_me")])
                prev, pbid = sha, bid
    path = large_store(tmp_path / "big.db", commits=30, toolchains=8, seed=seed, log=lambda s: None)
    store = open_store(path)
    commits = store.list_commits(limit=100, tree=BENCH_TREE)
    assert len(commits) == 30
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM builds").fetchone()[0] == 30 * 8
    assert conn.execute("SELECT count(DISTINCT name) FROM toolchains").fetchone()[0] == 8
    # the matrix page's rows, as the pipeline's writes leave them (every target, and x.o)
    assert conn.execute("SELECT count(*) FROM matrix_tables").fetchone()[0] == 30 * 2
    # commit 1 replicates seed commit b over seed commit a: the table is the real one
    c1 = [c for c in commits if c.generation == 2][0]
    rep = commit_report(store, c1.sha, BENCH_TREE)
    assert len(rep.toolchains) == 8
    gcc = [t for t in rep.toolchains if t.toolchain == "gcc-12"][0]
    want = formats.bloat_text(bloat.diff(bloat.read_symbols(objs[0]), bloat.read_symbols(objs[1])))
    assert gcc.bloat_text == want
    assert [f.kind for f in gcc.findings] == ["newly_out_of_line"]
    # the inline cost rows and the comparison's inline report, copied with the builds
    assert conn.execute("SELECT count(*) FROM inline_costs").fetchone()[0] == 30 * 8
    assert gcc.inline_cost is not None and store.comparison_inline_cost(gcc.build_id, gcc.base_build_id)
    assert gcc.inline_cost.new.size == sum(c.size for c in store.inline_costs_for(gcc.build_id)[0].callers)
    hist = store.function_history("split_me", toolchain="clang-19", tree=BENCH_TREE)
    assert len(hist) == 30 and [h.out_of_line for h in hist[:2]] == [False, True]
    (ser, *_) = store.list_series(tree=BENCH_TREE)
    assert len(series_report(store, ser.id).patches) == len(ser.patches) > 0
    # reused when asked again with the same shape
    mtime = path.stat().st_mtime_ns
    assert large_store(tmp_path / "big.db", commits=30, toolchains=8, seed=seed, log=lambda s: None) == path
    assert path.stat().st_mtime_ns == mtime
