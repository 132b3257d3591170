"""Likely-path cost: llvm-mca estimates (toolchains.mca), `sizewatch inspect --cost`, `sizediff --cost`."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from analyzer.likely_path_cost import FunctionCost, compare_costs
from analyzer.likely_path import likely_path
from conftest import FIXTURES, sizediff_cmd, sizewatch_cmd
from toolchains.mca import McaError, estimate, mca_source

KERNEL_FLAGS = ("-fno-pic", "-fcf-protection=none", "-fno-stack-protector", "-mno-red-zone")
FIXTURE_FUNCS = ("lp_expect", "lp_two_sides", "lp_cold_call", "lp_tail")
STOCK, P1, P2 = ("624c6bb3bc79aa6ce98943c44440da1d9528d236", "ad5feeb534adbb920c3aa0bdcdfab29484eb9013",
                 "8a214ad3f7917c48143853b42fe22fe305209d18")   # the example series (stock, patch 1, patch 2)


@pytest.fixture(scope="module")
def fixture_obj(compile_c):
    return compile_c("gcc-12", FIXTURES / "likely_path.c", *KERNEL_FLAGS, name="likely-cost-gcc-12.o")


def test_estimate_is_llvm_mcas_own_figure(fixture_obj):
    """One process for all paths; each region's Total Cycles is what llvm-mca prints for it."""
    paths = [likely_path(str(fixture_obj), f) for f in FIXTURE_FUNCS]
    est = estimate(paths, "znver3")
    text = subprocess.run(["llvm-mca-19", "-mcpu=znver3", "-iterations=1", "--call-latency=100",
                           "--skip-unsupported-instructions=any", "-"], input=mca_source(paths),
                          capture_output=True, text=True, check=True).stdout
    printed = [int(x) for x in re.findall(r"^Total Cycles:\s+(\d+)$", text, re.M)]
    insns = [int(x) for x in re.findall(r"^Instructions:\s+(\d+)$", text, re.M)]
    assert printed == [est[f].cycles for f in FIXTURE_FUNCS]
    assert insns == [p.insns for p in paths] == [est[f].modelled for f in FIXTURE_FUNCS]
    assert all(e.cycles > 0 and e.mcpu == "znver3" for e in est.values())


def test_estimate_errors(fixture_obj, monkeypatch, tmp_path):
    paths = [likely_path(str(fixture_obj), "lp_expect")]
    with pytest.raises(McaError, match="unknown CPU 'nosuchcore'"):
        estimate(paths, "nosuchcore")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(McaError, match="llvm-mca-19 not found"):
        estimate(paths)


def test_inspect_cost_text_and_json(fixture_obj):
    run = lambda *a, **kw: subprocess.run([*sizewatch_cmd(), "inspect", "--cost", str(fixture_obj), *a],
                                          capture_output=True, text=True, **kw)
    hot = fixture_obj.parent / "hot-lp.txt"
    hot.write_text("!replace\nlp_*\n")
    p = run("--hot", str(hot))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "CALL fast_step" in out and "[cold: lp_expect.cold folded]" in out
    assert "TAIL CALL fast_step: path ends" in out and "64-byte line 0x80" in out
    assert "an estimate, not a measurement" in out and "slow_report" not in out
    j = run("--function", "lp_expect", "--json", "--mcpu", "znver3")
    d = json.loads(j.stdout)
    f = d["functions"][0]
    assert f["function"] == "lp_expect" and [c["target"] for c in f["calls"]] == ["fast_step"]
    assert f["estimate"]["mcpu"] == "znver3" and f["estimate"]["estimated_cycles"] > 0
    assert f["insns"] == len(f["instructions"]) == likely_path(str(fixture_obj), "lp_expect").insns


def test_inspect_cost_errors(fixture_obj, tmp_path):
    bad = tmp_path / "bad.o"
    bad.write_bytes(b"\x7fELF")
    base = [*sizewatch_cmd(), "inspect", "--cost"]
    for args, msg in (([str(bad)], "not an ELF file|truncated|corrupt"),
                      ([str(fixture_obj), "--function", "nope"], "no function 'nope'"),
                      ([str(fixture_obj), "--function", "lp_expect", "--mcpu", "nosuchcore"], "unknown CPU")):
        p = subprocess.run([*base, *args], capture_output=True, text=True)
        assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert re.search(msg, p.stderr), p.stderr
    # without llvm-mca: asked for (--mcpu) is an error; not asked for, the rest is shown with a note
    env = dict(os.environ, PATH=str(tmp_path))
    p = subprocess.run([*base, str(fixture_obj), "--function", "lp_expect", "--mcpu", "znver3"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "llvm-mca-19 not found" in p.stderr and len(p.stderr.splitlines()) == 1
    p = subprocess.run([*base, str(fixture_obj), "--function", "lp_expect"], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "CALL fast_step" in p.stdout and "estimated cycles: llvm-mca-19 not found" in p.stdout


def test_compare_costs_pairs_clones():
    a = FunctionCost("rmqueue.constprop.0", 10, 40, 1, ("f",), 1, 0, 2, 1, "ret", 20)
    b = FunctionCost("rmqueue", 12, 48, 1, ("f", "g"), 1, 0, 2, 2, "ret", 30)
    (ch,) = compare_costs([a], [b])
    assert ch.base is a and ch.new_calls == ("g",) and ch.delta("lines") == 1 and ch.delta("cycles") == 10


@pytest.mark.kernel
def test_sizediff_cost_example_series(example_series):
    """Seed 000 on gcc-12: after patch 2 no likely path calls __rmqueue_smallest, which is gone."""
    stock, p1, p2 = example_series("gcc-12")
    p = subprocess.run([*sizediff_cmd(), "--cost", "--json", str(p1.object_path), str(p2.object_path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = {r["function"]: r for r in json.loads(p.stdout)["cost"]["functions"]}
    assert rows["__rmqueue_smallest"]["head"] is None and rows["__rmqueue_fallback"]["head"] is None
    assert "__rmqueue_smallest" in rows["rmqueue_bulk"]["base"]["calls"]
    assert "__rmqueue_smallest" in rows["rmqueue_bulk"]["gone_calls"]
    direct = {f: likely_path(str(p2.object_path), f) for f in ("get_page_from_freelist", "rmqueue_bulk")}
    for f, lp in direct.items():
        assert rows[f]["head"]["insns"] == lp.insns and rows[f]["head"]["lines"] == len(lp.lines)
    t = subprocess.run([*sizediff_cmd(), "--cost", str(p1.object_path), str(p2.object_path)],
                       capture_output=True, text=True)
    assert "Likely-path cost of hot functions" in t.stdout and "__rmqueue_smallest (gone)" in t.stdout
    # the plain bloat-o-meter path is unchanged: no cost table without --cost
    plain = subprocess.run([*sizediff_cmd(), str(p1.object_path), str(p2.object_path)], capture_output=True, text=True)
    assert "Likely-path" not in plain.stdout and t.stdout.startswith(plain.stdout)




def _fc(name, calls=("f",), insns=10, nbytes=40, lines=1, cycles=100):
    return FunctionCost(name, insns, nbytes, 1, tuple(calls), 1, 0, 2, lines, "ret", cycles, 10.0, "skylake-avx512")


def test_cost_findings_thresholds():
    from analyzer.likely_path_cost import CostThresholds, cost_findings
    base = [_fc("a"), _fc("b"), _fc("c"), _fc("d")]
    head = [_fc("a", calls=("f", "g")), _fc("b", nbytes=80, lines=2), _fc("c", cycles=109), _fc("d", lines=2)]
    got = {(f.kind, f.function) for f in cost_findings(compare_costs(base, head))}
    # d moved across a line without any change to its path: placement, not a finding
    assert got == {("likely_path_call", "a"), ("likely_path_lines", "b")}
    head[2] = _fc("c", cycles=110)
    got = {(f.kind, f.function) for f in cost_findings(compare_costs(base, head))}
    assert ("likely_path_cycles", "c") in got
    quiet = CostThresholds(new_call=False, lines=2, cycles_percent=0)
    assert cost_findings(compare_costs(base, head), quiet) == []


@pytest.mark.kernel
def test_pipeline_stores_paths_and_findings(example_store):
    """The example series run: every build has its hot functions' likely paths; patch 1 under gcc-12
    (__rmqueue* back to plain static inline, built out of line) puts a call to __rmqueue_smallest on
    rmqueue_bulk's likely path, with gcc's reason for not inlining it."""
    from db.store import open_store
    db, _ = example_store
    store = open_store(db)
    builds = [b for c in (STOCK, P1, P2) for b in store.builds_for_commit(c)]
    assert len(builds) == 6
    for b in builds:
        paths = store.likely_paths_for(b.id)["mm/page_alloc.o"]
        names = {p.function for p in paths}
        assert "get_page_from_freelist" in names and all(p.insns > 0 for p in paths)
        assert all(p.cycles and p.mcpu == "skylake-avx512" for p in paths)
    p1 = next(b for b in store.builds_for_commit(P1) if b.toolchain == "gcc-12")
    base = next(b for b in store.builds_for_commit(STOCK) if b.toolchain == "gcc-12")
    found = [f for f in store.findings_for(p1.id, base.id) if f.kind == "likely_path_call"]
    rb = next(f for f in found if f.function == "rmqueue_bulk")
    assert "__rmqueue_smallest (no longer inlined; compiler: " in rb.message
    assert rb.data["details"]["callee_reasons"]["__rmqueue_smallest"]


@pytest.mark.kernel
def test_commit_page_shows_likely_path_table(example_store, tmp_path):
    """The patch page (HTML and /api/) carries the per-function table, equal to the stored paths."""
    import sqlite3
    from db.store import open_store
    from web.app import create_app
    from web.settings import WebSettings
    db = tmp_path / "store.db"
    with sqlite3.connect(example_store[0]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    client = create_app(WebSettings(db, token=None, jobs_dir=tmp_path / "jobs")).test_client()
    d = client.get(f"/api/commit/{P1}").get_json()
    t = next(t for t in d["toolchains"] if t["toolchain"] == "gcc-12")
    rows = {r["function"]: r for r in t["likely_paths"]}
    stored = {c.function: c for c in open_store(db).likely_paths_for(t["build_id"])["mm/page_alloc.o"]}
    assert rows["rmqueue_bulk"]["insns"]["new"] == stored["rmqueue_bulk"].insns
    assert "__rmqueue_smallest" in rows["rmqueue_bulk"]["new_calls"]
    assert rows["__rmqueue_smallest"]["insns"]["old"] is None        # out of line only from patch 1 on
    html = client.get(f"/commit/{P1}").get_data(as_text=True)
    assert "Likely-path cost of hot functions" in html and "not a measurement" in html
    # the function page plots the likely path's instructions and estimated cycles across commits
    f = client.get("/api/function/rmqueue_bulk?toolchain=gcc-12").get_json()
    (line,) = f["cost_chart"]["lines"]
    assert [v for v in line["insns"] if v is not None] == [131, 66, 131]     # stock, patch 1, patch 2
    assert all(c for c in line["cycles"] if c is not None)
    page = client.get("/function/rmqueue_bulk").get_data(as_text=True)
    assert 'id="cost-chart"' in page and client.get("/static/cost_chart.js").status_code == 200


def test_cost_thresholds_are_checked():
    from analyzer.likely_path_cost import CostThresholds
    from analyzer.errors import InputError
    for kw, msg in (({"lines": -1}, "cost lines threshold"), ({"lines": 1.5}, "cost lines threshold"),
                    ({"cycles_percent": -1}, "cost cycles threshold"),
                    ({"cycles_percent": float("nan")}, "cost cycles threshold")):
        with pytest.raises(InputError, match=msg):
            CostThresholds(**kw)


def test_cycles_for_different_cpus_are_not_compared():
    """A base estimated for skylake-avx512 and a head for znver3: no cycles finding, and it is named."""
    from dataclasses import replace
    from analyzer.likely_path_cost import CostThresholds, cost_findings, mcpu_mismatches
    base, head = [_fc("c")], [replace(_fc("c", cycles=200), mcpu="znver3")]
    changes = compare_costs(base, head)
    assert cost_findings(changes, CostThresholds(cycles_percent=1)) == []
    assert mcpu_mismatches(changes) == ["c"]
    assert mcpu_mismatches(compare_costs(base, [_fc("c", cycles=200)])) == []
    assert [f.kind for f in cost_findings(compare_costs(base, [_fc("c", cycles=200)]))] == ["likely_path_cycles"]


@pytest.mark.parametrize("args, msg", [
    (["--cost-mcpu", "nosuchcore"], "unknown CPU 'nosuchcore'"),
    (["--cost-mcpu", "sky lake"], "bad CPU name"),
    (["--cost-lines", "-1"], "cost lines threshold"),
    (["--cost-cycles-percent", "nan"], "cost cycles threshold"),
])
def test_run_refuses_bad_cost_settings(tmp_path, args, msg):
    """Refused in one line before any tree is opened or build started."""
    p = subprocess.run([*sizewatch_cmd(), "run", "HEAD~1..HEAD", "--db", str(tmp_path / "s.db"), *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.kernel
def test_run_thresholds_change_stored_findings(example_store, tmp_path):
    """The same stored builds under other thresholds: ``sizewatch run`` again (nothing is built) makes
    the likely-path findings the thresholds give, computed here from the stored paths, and a run with
    the defaults gives the original findings back."""
    import sqlite3
    from analyzer.likely_path_cost import CostThresholds, cost_findings
    from conftest import EXAMPLE_MBOX, EXAMPLE_TOOLCHAINS
    from db.store import open_store
    db = tmp_path / "store.db"
    with sqlite3.connect(example_store[0]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    kinds = ("likely_path_call", "likely_path_lines", "likely_path_cycles")

    def stored() -> set:
        with open_store(db, read_only=True) as st:
            out = set()
            for sha, parent in ((P1, STOCK), (P2, P1)):
                for b in st.builds_for_commit(sha):
                    base = next(x for x in st.builds_for_commit(parent) if x.toolchain == b.toolchain)
                    out |= {(sha, b.toolchain, f.kind, f.function) for f in st.findings_for(b.id, base.id)
                            if f.kind in kinds and f.base_build_id == base.id}
            return out

    def expected(th: CostThresholds) -> set:
        with open_store(db, read_only=True) as st:
            out = set()
            for sha, parent in ((P1, STOCK), (P2, P1)):
                for b in st.builds_for_commit(sha):
                    base = next(x for x in st.builds_for_commit(parent) if x.toolchain == b.toolchain)
                    bp, hp = st.likely_paths_for(base.id), st.likely_paths_for(b.id)
                    for path in hp:
                        out |= {(sha, b.toolchain, f.kind, f.function)
                                for f in cost_findings(compare_costs(bp[path], hp[path]), th)}
            return out

    def run(*args):
        p = subprocess.run([*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), "--toolchains",
                            EXAMPLE_TOOLCHAINS, "--db", str(db), *args], capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr
        assert "0 built, 0 re-analyzed" in p.stderr
        return p

    original = stored()
    assert original == expected(CostThresholds())
    run("--cost-lines", "0", "--cost-cycles-percent", "0")
    quiet = stored()
    assert quiet == expected(CostThresholds(lines=0, cycles_percent=0))
    assert {k for _, _, k, _ in quiet} <= {"likely_path_call"}
    run("--cost-cycles-percent", "0.5")
    eager = stored()
    assert eager == expected(CostThresholds(cycles_percent=0.5))
    assert len({x for x in eager if x[2] == "likely_path_cycles"}) > \
        len({x for x in original if x[2] == "likely_path_cycles"})
    p = run()
    assert stored() == original
    assert "likely_path" in p.stdout or original == set()


def test_cost_table_does_not_compare_cycles_across_cpus():
    from dataclasses import replace
    from analyzer.likely_path_cost import cost_table_text
    ch = compare_costs([_fc("c")], [replace(_fc("c", cycles=200), mcpu="znver3")])
    assert ch[0].delta("cycles") is None and ch[0].delta("insns") == 0
    text = cost_table_text(ch)
    assert "est.cycles not compared: estimated for skylake-avx512 (old) and znver3 (new)" in text
    assert "+100" not in text
