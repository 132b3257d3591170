"""The seed's experiment on mm/page_alloc.o (linux 6.1, example series) under gcc-12 and clang-19:
stock -> patch 1 (__rmqueue_* back to plain "static inline") -> patch 2 (__always_inline)."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from analyzer.calls import call_graph
from analyzer.elf import load_images, read_symtab
from analyzer.findings import compare, findings
from analyzer.inlines import analyze
from inline_oracles import dwarf_inlines, objdump_calls, replay_with_flags, source_at

pytestmark = pytest.mark.kernel
TOOLCHAINS = ("gcc-12", "clang-19")
RMQUEUE = ("__rmqueue_smallest", "__rmqueue_fallback")

REMARK_FLAGS = {
    "gcc-12": lambda d: [f"-fopt-info-inline-missed={d}/inline-missed.txt"],
    "clang-19": lambda d: ["-fsave-optimization-record", f"-foptimization-record-file={d}/remarks.yaml",
                           "-foptimization-record-passes=inline"],
}
REMARK_FILE = {"gcc-12": "inline-missed.txt", "clang-19": "remarks.yaml"}


@pytest.fixture(scope="module", params=TOOLCHAINS)
def series(request, example_series, tmp_path_factory):
    """(toolchain, [stock, patch1, patch2] facts, patch-1 remark file) with each commit's own source."""
    tc = request.param
    built = example_series(tc)
    facts = []
    for b in built:
        root = source_at(b.commit, tmp_path_factory.mktemp(f"src-{tc}"))
        facts.append(analyze(b.object_path, source_root=root))
    out = tmp_path_factory.mktemp(f"remarks-{tc}")
    replay_with_flags(tc, built[1].commit, REMARK_FLAGS[tc](out), out)
    return tc, built, facts, out / REMARK_FILE[tc]


def test_stock_inlines_the_always_inline_helpers(series):
    tc, built, facts, _ = series
    stock = facts[0].functions
    want = dwarf_inlines(built[0].object_path)
    for name in RMQUEUE:
        assert stock[name].declared == "always_inline"
        assert not stock[name].out_of_line and stock[name].inlined_count == sum(want[name].values()) > 0
    assert "get_page_from_freelist" in stock["__rmqueue_smallest"].inlined_into


def test_every_inlined_copy_against_pyelftools(series):
    """Each commit's inlined copies of every function, per function they sit in, exactly as
    pyelftools counts DW_TAG_inlined_subroutine entries after relocating the object's DWARF itself."""
    tc, built, facts, _ = series
    for b, f in zip(built, facts):
        want = {n: dict(c) for n, c in dwarf_inlines(b.object_path).items()}
        got = {n: x.inlined_into for n, x in f.functions.items() if x.inlined_count}
        assert got == want, b.commit
        assert all(x.inlined_count == sum(x.inlined_into.values()) for x in f.functions.values())
        assert len(want) > 300


def test_patch1_leaves_inline_helpers_out_of_line_with_the_reason(series):
    tc, built, facts, remark_file = series
    src = source_at(built[1].commit, remark_file.parent / "decl")
    p1 = analyze(built[1].object_path, source_root=src, remarks=[remark_file])
    for name in RMQUEUE:
        f = p1.functions[name]
        assert f.declared == "inline" and f.out_of_line and f.inlined_count == 0
        assert f.callers and "get_page_from_freelist" in f.callers
        assert f.reasons, name
    smallest = p1.functions["__rmqueue_smallest"]
    if tc.startswith("gcc"):
        assert smallest.reasons[0] == "--param max-inline-insns-single limit reached"
        assert any(d["caller"] == "__rmqueue" and d["reason"] == "--param max-inline-insns-single limit reached"
                   and d["location"].endswith("mm/page_alloc.c:3135:9") for d in smallest.decisions)
    else:
        assert smallest.reasons[0].startswith("too costly to inline (cost=")
    found = {(f.kind, f.function): f for f in findings(p1)}
    for name in RMQUEUE:
        f = found[("hot_not_inlined", name)]
        assert f.details["reason"] == p1.functions[name].reasons[0]
        assert p1.functions[name].reasons[0] in f.message


def test_patch2_inlines_them_and_pushes_steal_suitable_fallback_out(series):
    tc, built, facts, _ = series
    p1, p2 = facts[1], facts[2]
    found = {(f.kind, f.function): f for f in compare(p1, p2)}
    for name in RMQUEUE:
        assert ("newly_inlined", name) in found
        assert p2.functions[name].declared == "always_inline" and not p2.functions[name].out_of_line
    push = found[("pushed_out_of_line", "steal_suitable_fallback")]
    assert "__rmqueue_fallback" in push.details["pushed_by"]
    assert p1.functions["steal_suitable_fallback"].inlined_into == dict(dwarf_inlines(built[1].object_path)[
        "steal_suitable_fallback"]) and p1.functions["steal_suitable_fallback"].inlined_count >= 1
    assert not p1.functions["steal_suitable_fallback"].out_of_line
    assert p2.functions["steal_suitable_fallback"].out_of_line
    assert p2.functions["steal_suitable_fallback"].declared == "plain"


def test_get_page_from_freelist_crosses_boundaries(series):
    tc, built, facts, _ = series
    p1, p2 = facts[1], facts[2]
    b, h = p1.functions["get_page_from_freelist"], p2.functions["get_page_from_freelist"]
    nm = {}
    for i in (1, 2):   # sizes straight from nm
        out = subprocess.run(["nm", "-S", str(built[i].object_path)], capture_output=True, text=True).stdout
        nm[i] = sum(int(l.split()[1], 16) for l in out.splitlines()
                    if l.split()[-1].split(".")[0] == "get_page_from_freelist")
    assert (b.size, h.size) == (nm[1], nm[2]) and h.size - b.size > 1000
    cross = next(f for f in compare(p1, p2) if f.kind == "boundary_crossing" and f.function == "get_page_from_freelist")
    d = cross.details
    assert d["base"]["lines"] == -(-b.pieces[0].size // 64) and d["head"]["lines"] > d["base"]["lines"]
    assert d["head"]["padded"] == -(-h.pieces[0].size // 16) * 16
    assert d["head"]["headroom"] == d["head"]["padded"] - h.pieces[0].size
    assert not d["placed"]            # a .o without -ffunction-sections: size-based figures


def test_kernel_calls_match_objdump(series):
    tc, built, facts, _ = series
    obj = built[1].object_path
    img = load_images(obj)[0]
    ours = Counter((s.caller, s.target) for s in call_graph(img, read_symtab(img)).sites if s.kind == "call")
    assert ours == objdump_calls(obj)
    assert ours[("get_page_from_freelist", "__rmqueue_smallest")] == 3


def test_cli_inspect_and_sizediff_inlines(series):
    tc, built, facts, remark_file = series
    exe = [sys.executable, "-m", "cli"]
    r = subprocess.run([*exe, "inspect", str(built[1].object_path), "--remarks", str(remark_file), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["facts"]["functions"]["__rmqueue_smallest"]["out_of_line"]
    assert doc["facts"]["functions"]["__rmqueue_smallest"]["reasons"]
    r = subprocess.run([sys.executable, "-m", "cli.sizediff", "--inlines", "--align",
                        str(built[1].object_path), str(built[2].object_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "pushed_out_of_line: steal_suitable_fallback" in r.stdout
    assert "get_page_from_freelist *" in r.stdout
    r = subprocess.run([sys.executable, "-m", "cli.sizediff", "--inlines", "--json",
                        str(built[1].object_path), str(built[2].object_path)], capture_output=True, text=True)
    kinds = {f["kind"] for f in json.loads(r.stdout)["inlines"]["findings"]}
    assert {"newly_inlined", "pushed_out_of_line", "boundary_crossing"} <= kinds


def test_exported_and_callback_functions_have_their_address_taken(series):
    """EXPORT_SYMBOL puts a reference in ___ksymtab+NAME: every exported function shows as address taken."""
    tc, built, facts, _ = series
    out = subprocess.run(["readelf", "-S", "-W", str(built[0].object_path)], capture_output=True, text=True).stdout
    exported = {line.split("___ksymtab+")[1].split()[0] for line in out.splitlines() if "] ___ksymtab+" in line}
    funcs = facts[0].functions
    exported_funcs = {n for n in exported if n in funcs and funcs[n].out_of_line}
    assert len(exported_funcs) >= 15
    assert all(funcs[n].address_taken >= 1 for n in exported_funcs)
    assert funcs["free_compound_page"].address_taken >= 1          # a compound page destructor pointer
    assert funcs["get_page_from_freelist"].address_taken == 0
