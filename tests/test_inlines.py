"""Inline facts on small C fixtures compiled by real gcc-12 and clang-19 (tests/fixtures/inline_cases.c)."""
from __future__ import annotations

import json
import os
import subprocess
from collections import Counter

import pytest

from analyzer.calls import call_graph
from analyzer.elf import load_images, read_symtab
from analyzer.findings import findings
from analyzer.inlines import ObjectFacts, analyze
from conftest import FIXTURES
from inline_oracles import dwarf_inlines, objdump_calls

SRC = FIXTURES / "inline_cases.c"
COMPILERS = ("gcc-12", "clang-19")


@pytest.fixture(scope="module", params=COMPILERS)
def case(request, compile_c):
    cc = request.param
    return cc, compile_c(cc, SRC, name=f"inline_cases-{cc}.o")


def kinds(found, name):
    return {f.kind for f in found if f.function == name}


def test_calls_match_objdump(case):
    """Every direct call the analyzer resolves, and only those, as objdump -dr shows them."""
    cc, obj = case
    img = load_images(obj)[0]
    ours = Counter((s.caller, s.target) for s in call_graph(img, read_symtab(img)).sites if s.kind == "call")
    assert ours == objdump_calls(obj)
    assert ours    # the fixture has calls


def test_declarations_from_source(case):
    cc, obj = case
    f = analyze(obj).functions      # DWARF records the fixture's absolute path, which exists
    assert f["tiny"].declared == "inline"
    assert f["forced"].declared == "always_inline"      # __always_inline macro
    assert f["too_big"].declared == "inline"            # "static inline" on the line above the name
    assert f["kept_out"].declared == "noinline"
    assert f["plain_caller"].declared == "plain"
    assert f["addr_taken"].declared == "always_inline"


def test_declarations_unknown_without_source(case, tmp_path):
    cc, obj = case
    facts = analyze(obj, source_root=tmp_path)         # an empty tree: nothing to read
    assert {f.declared for f in facts.functions.values()} == {"unknown"}
    assert facts.functions["too_big"].out_of_line      # the other facts do not depend on the source


def test_inline_function_too_big(case):
    cc, obj = case
    facts = analyze(obj)
    tb = facts.functions["too_big"]
    assert tb.out_of_line and tb.inlined_count == 0
    assert tb.callers == {"call_big_1": 1, "call_big_2": 1, "call_big_3": 1}
    assert "inline_not_inlined" in kinds(findings(facts), "too_big")


def test_small_functions_inlined_with_their_callers(case):
    cc, obj = case
    f = analyze(obj).functions
    want = dwarf_inlines(obj)          # pyelftools relocating the object's DWARF itself
    for name in ("tiny", "forced"):
        assert not f[name].out_of_line
        assert f[name].inlined_into == dict(want[name]), name
        assert f[name].inlined_count == sum(want[name].values()), name
    assert f["tiny"].inlined_into == {"kept_out": 2, "plain_caller": 1}
    assert f["forced"].inlined_into == {"kept_out": 1, "plain_caller": 1}
    assert f["tiny"].inlined_bytes > 0


def test_every_inlined_copy_against_pyelftools(case):
    """Every function's inlined copies, counted per function they sit in, exactly as pyelftools
    (applying the object's relocations itself) finds the DW_TAG_inlined_subroutine entries."""
    cc, obj = case
    want = dwarf_inlines(obj)
    got = {n: f.inlined_into for n, f in analyze(obj).functions.items() if f.inlined_count}
    assert got == {n: dict(c) for n, c in want.items()}
    assert {n: f.inlined_count for n, f in analyze(obj).functions.items() if f.inlined_count} == \
        {n: sum(c.values()) for n, c in want.items()}


def test_address_taken_always_inline(case):
    """Both compilers keep an out-of-line copy of an always_inline function whose address is taken."""
    cc, obj = case
    facts = analyze(obj)
    at = facts.functions["addr_taken"]
    assert at.out_of_line and at.declared == "always_inline" and not at.callers
    assert at.address_taken == 1 and facts.functions["too_big"].address_taken == 0     # addr_taken_ptr
    assert "always_inline_copy" in kinds(findings(facts), "addr_taken")


def test_clang_recursive_and_varargs_always_inline_copies(compile_c):
    """clang builds recursive and variadic __always_inline functions out of line without a word."""
    obj = compile_c("clang-19", SRC, name="inline_cases-clang-19-ai.o")
    facts = analyze(obj)
    found = findings(facts)
    for name in ("recurse", "vsum"):
        f = facts.functions[name]
        assert f.out_of_line and f.declared == "always_inline"
        assert "use_clang_only" in f.callers
        assert "always_inline_copy" in kinds(found, name)
    assert facts.functions["recurse"].callers == dict(
        (c, n) for (c, t), n in objdump_calls(obj).items() if t == "recurse")   # the recursive call remains
    assert facts.functions["recurse"].callers.get("recurse", 0) >= 1


def test_gcc_refuses_variadic_always_inline(tmp_path):
    """gcc errors out instead (reported by the build, not by the analyzer)."""
    r = subprocess.run(["gcc-12", "-c", "-O2", "-o", str(tmp_path / "bad.o"), str(FIXTURES / "always_inline_bad.c")],
                       capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    assert r.returncode == 1
    assert "error: function 'vsum' can never be inlined because it uses variable argument lists" in r.stderr
    assert not (tmp_path / "bad.o").exists()


def test_clones_tied_to_source_function(compile_c):
    obj = compile_c("gcc-12", SRC, name="inline_cases-gcc-12-clones.o")
    f = analyze(obj).functions
    wm = f["with_mode"]
    assert [p.symbol for p in wm.pieces] == ["with_mode.constprop.0"] and wm.pieces[0].clones == ["constprop"]
    assert wm.callers == {"call_mode_a": 1, "call_mode_b": 1}      # tail jumps count as calls
    pc = f["plain_caller"]
    assert {p.symbol for p in pc.pieces} == {"plain_caller", "plain_caller.cold"}
    assert pc.size == sum(p.size for p in pc.pieces) and pc.section == ".text"
    assert next(p for p in pc.pieces if p.clones == ["cold"]).section == ".text.unlikely"
    assert "plain_caller" not in f["plain_caller"].callers      # jumps into its own .cold piece are not calls


def test_cross_section_calls_through_relocations(case):
    """Calls into .text.unlikely resolve through symbol and section-symbol relocations."""
    cc, obj = case
    img = load_images(obj)[0]
    sites = call_graph(img, read_symtab(img)).sites
    to_cold = [s for s in sites if s.target in ("report_failure", "static_cold")]
    assert {s.target for s in to_cold} == {"report_failure", "static_cold"}
    for s in to_cold:      # gas resolves a call to a local function in the same section: no relocation
        local_same_section = cc.startswith("gcc") and s.target == "static_cold" and s.section == ".text.unlikely"
        assert s.via == ("immediate" if local_same_section else "reloc"), s
    assert {s.caller.split(".")[0] for s in to_cold} == {"plain_caller"}


def test_facts_roundtrip_json(case):
    cc, obj = case
    facts = analyze(obj)
    again = ObjectFacts.from_dict(json.loads(json.dumps(facts.to_dict())))
    assert again == facts
    from analyzer.findings import Finding
    for f in findings(facts):
        assert Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f


def test_isra_and_part_clones(compile_c):
    obj = compile_c("gcc-12", FIXTURES / "clone_cases.c", name="clone_cases-gcc-12.o")
    f = analyze(obj).functions
    isra = f["isra_me"]
    assert [p.symbol for p in isra.pieces] == ["isra_me.constprop.0.isra.0"]
    assert isra.pieces[0].clones == ["constprop", "isra"]
    assert isra.callers == {"use_isra1": 1, "use_isra2": 1} and isra.declared == "noinline"
    part = f["part_me"]
    assert [p.symbol for p in part.pieces] == ["part_me.part.0"] and part.pieces[0].clones == ["part"]
    want = dwarf_inlines(obj)["part_me"]          # the split-off head is inlined into each user
    assert part.out_of_line and part.inlined_into == dict(want)
    assert set(want) == {"use_part1", "use_part2", "use_part3", "use_part4"}
    assert part.inlined_count == sum(want.values())
    assert part.callers == dict((c, n) for (c, t), n in objdump_calls(obj, ("call", "jmp")).items()
                                if t == "part_me.part.0")
    assert set(part.callers) == {"use_part1", "use_part2", "use_part3", "use_part4"}
