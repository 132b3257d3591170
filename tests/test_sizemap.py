"""analyzer.sizemap on hand-made symbol lists: where each function goes, aliases counted once, the bytes
outside functions as leaves, and the diff's signed deltas adding up to the change in text."""
from __future__ import annotations

from analyzer.sizemap import NOT_FUNCTIONS, Sym, build_map, diff_map, tree_relative

WT = "/cache/worktrees/gcc-12-x"


def _find(node: dict, *path: str) -> dict:
    for name in path:
        node = next(c for c in node["children"] if c["name"] == name)
    return node


def test_build_map_places_functions_by_declaration_and_adds_up_to_text():
    syms = [Sym("alloc", 100, "T", ".text", 0), Sym("alloc_alias", 100, "T", ".text", 0),   # alias: once
            Sym("helper.part.0", 40, "t", ".text", 112), Sym("list_add", 20, "t", ".text", 160),
            Sym("asm_stub", 8, "t", ".text", 192), Sym("init_me", 30, "t", ".init.text", 0),
            Sym("table", 64, "r", ".rodata", 0), Sym("counter", 8, "d", ".data", 0)]
    decls = {"alloc": f"{WT}/mm/page_alloc.c:10", "helper": f"{WT}/mm/page_alloc.c:20",
             "list_add": f"{WT}/include/linux/list.h:5", "init_me": f"{WT}/mm/page_alloc.c:99",
             "builtin": "/usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h:1"}
    sections = {".text": 208, ".init.text": 30, ".rodata": 64, ".data": 8}
    text = 208 + 30 + 64                                            # size(1): code and read-only data
    root = build_map(syms, decls, "mm/page_alloc.o", text, sections).to_dict()
    assert root["value"] == text
    page_alloc = _find(root, "mm", "page_alloc.c")
    assert {c["name"]: c["value"] for c in page_alloc["children"]} == \
        {"alloc": 100, "helper.part.0": 40, "init_me": 30, "asm_stub": 8}      # no declaration: the unit's file
    assert _find(root, "include", "linux", "list.h", "list_add")["path"] == "include/linux/list.h"
    other = {c["name"]: c["value"] for c in _find(root, NOT_FUNCTIONS)["children"]}
    assert other == {"padding and unnamed code in .text": 208 - 168, "read-only data, strings and tables": 64}
    assert tree_relative(decls, "mm/page_alloc.c")["builtin"].startswith("/usr/lib/gcc/")   # outside the tree


def test_diff_map_deltas_add_up_to_the_text_change():
    old = [Sym("a", 100, "T", ".text", 0), Sym("b", 50, "t", ".text", 112), Sym("gone", 30, "t", ".text", 176)]
    new = [Sym("a", 160, "T", ".text", 0), Sym("b", 50, "t", ".text", 160), Sym("born", 20, "t", ".text", 224)]
    decls = {n: f"{WT}/mm/x.c:1" for n in ("a", "b", "gone", "born")}
    root = diff_map(old, new, decls, "mm/x.o", 220, 260, {".text": 220}, {".text": 260}).to_dict()
    fns = {c["name"]: (c["delta"], c["value"], c["old"]) for c in _find(root, "mm", "x.c")["children"]}
    assert fns == {"a": (60, 60, 100), "gone": (-30, 30, 30), "born": (20, 20, None)}
    assert root["delta"] == 260 - 220
