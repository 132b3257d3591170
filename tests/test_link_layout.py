"""Hot functions at link addresses (analyzer.link_layout) against ``nm -n -S`` of the same file.

Oracle: binutils' nm on the linked image: every address, size and the order of the sized symbols
in the executable sections, each hot function's neighbours and the padding between them. Inputs:
two tiny executables built here (gcc -ffunction-sections, function A grown by a known number of
bytes so that B behind it moves), the tests' tinyconfig vmlinux pair (the example series' base and
patch 1, built once and cached: tests/kernel_images.py) and the Debian dbg vmlinux (slow).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.errors import InputError
from analyzer.hotpaths import HotPaths
from analyzer.link_layout import compare, file_layout, layout, text_map, text_map_from_rows
from link_oracles import assert_moves_are_nm, nm_moves, nm_text

ROOT = Path(__file__).resolve().parent.parent

SYNTH = r"""
void fn_a(void) { __asm__ volatile(".skip %c0, 0x90" :: "i"(GROW)); }
void fn_b(void) { __asm__ volatile("nop; nop; nop"); }
void fn_c(void) { __asm__ volatile("nop"); }
void _start(void) { fn_a(); fn_b(); fn_c(); for (;;) ; }
"""


def build_exe(tmp: Path, grow: int, name: str, align: int = 16) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc missing: scripts/install.sh installs it")
    src = tmp / "synth.c"
    src.write_text(SYNTH)
    exe = tmp / name
    subprocess.run(["gcc", "-O1", "-nostdlib", "-static", "-no-pie", "-ffunction-sections",
                    f"-falign-functions={align}", f"-DGROW={grow}", "-Wl,--section-start=.text=0x401000",
                    "-o", str(exe), str(src)], check=True)
    return exe


def check_against_nm(path: Path, hot: HotPaths) -> None:
    """The whole text map and every hot function's placement against nm -n -S."""
    want = nm_text(path)
    tm = text_map(path)
    got = {name: list(zip(m.names, m.addrs, m.sizes)) for name, m in tm.sections.items() if len(m)}
    assert got == want
    lay = layout(tm, hot)
    assert lay.functions
    for f in lay.functions:
        rows = want[f.section]
        i = rows.index((f.name, f.address, f.size)) if f.ordinal == 0 else \
            [k for k, r in enumerate(rows) if r[0] == f.name][f.ordinal]
        assert rows[i] == (f.name, f.address, f.size)
        prev = next((r for r in reversed(rows[:i]) if r[1] != f.address), None)
        nxt = next((r for r in rows[i + 1:] if r[1] != f.address), None)
        assert (f.prev.name, f.prev.address, f.prev.size) == prev if prev else f.prev is None
        assert (f.next.name, f.next.address, f.next.size) == nxt if nxt else f.next is None
        if prev:
            assert f.pad_before == f.address - prev[1] - prev[2]
        if nxt:
            assert f.pad_after == nxt[1] - f.address - f.size
        assert f.phase == f.address % 64
        assert f.lines == (f.address + f.size - 1) // 64 - f.address // 64 + 1
        assert f.blocks == (f.address + f.size - 1) // 16 - f.address // 16 + 1


def nm_addr(path: Path, name: str) -> tuple[int, int]:
    for sec in nm_text(path).values():
        for n, a, s in sec:
            if n == name:
                return a, s
    raise AssertionError(name)


def test_synthetic_growth_moves_the_function_behind(tmp_path):
    """fn_a grows by 40 bytes: fn_b behind it moves by what nm says, and the cause names fn_a."""
    base, head = build_exe(tmp_path, 4, "base"), build_exe(tmp_path, 44, "head")
    hot = HotPaths(("fn_b", "fn_c"))
    check_against_nm(base, hot)
    check_against_nm(head, hot)
    (ab, sb), (ah, sh) = nm_addr(base, "fn_b"), nm_addr(head, "fn_b")
    assert ah != ab, "the growth must cross a 16-byte boundary for this test to mean anything"
    _, tb = file_layout(base, hot)
    _, th = file_layout(head, hot)
    moves = {m.name: m for m in compare(tb, th, hot)}
    b = moves["fn_b"]
    assert b.shift == ah - ab and b.size_delta == sh - sb == 0
    assert [c.name for c in b.causes] == ["fn_a"] and b.causes[0].change == "grew"
    assert b.causes[0].size_delta == nm_addr(head, "fn_a")[1] - nm_addr(base, "fn_a")[1] == 40
    assert b.causes[0].footprint_delta == b.shift
    assert b.by_functions == 40 and b.by_functions + b.by_padding == b.shift and b.unexplained == 0
    assert b.why == f"moved by fn_a {b.shift:+d}"
    assert_moves_are_nm(moves.values(), nm_moves(base, head, hot.__contains__))
    assert moves["fn_c"].shift == b.shift and moves["fn_c"].causes == b.causes


def test_synthetic_growth_inside_the_padding_moves_nothing(tmp_path):
    """fn_a grows 1 byte into its own padding: fn_b stays, no cause (the seed's 'no change in size vmlinux')."""
    base, head = build_exe(tmp_path, 4, "base"), build_exe(tmp_path, 5, "head")
    hot = HotPaths(("fn_a", "fn_b"))
    _, tb = file_layout(base, hot)
    _, th = file_layout(head, hot)
    moves = {m.name: m for m in compare(tb, th, hot)}
    assert moves["fn_b"].shift == 0 and moves["fn_b"].causes == [] and moves["fn_b"].why == ""
    a = moves["fn_a"]
    assert a.size_delta == 1 and a.shift == 0 and a.why == "own growth +1"
    assert a.head.pad_after == a.base.pad_after - 1


def test_store_rows_give_the_same_map(tmp_path):
    """The map rebuilt from (name, section, address, size) rows, as the store keeps them, is the file's."""
    exe = build_exe(tmp_path, 4, "base")
    tm = text_map(exe)
    rows = [(n, s, a, z) for s, m in tm.sections.items() for n, a, z in zip(m.names, m.addrs, m.sizes)]
    again = text_map_from_rows(reversed(rows), {s: m.start for s, m in tm.sections.items()})
    assert {s: (m.start, m.names, m.addrs, m.sizes) for s, m in again.sections.items()} == \
        {s: (m.start, m.names, m.addrs, m.sizes) for s, m in tm.sections.items()}


def test_bad_inputs_are_one_line_errors(tmp_path, compile_c):
    obj = compile_c("gcc-12", ROOT / "tests" / "fixtures" / "inline_cases.c", name="rel.o")
    with pytest.raises(InputError, match="not a linked image"):
        text_map(obj)
    exe = build_exe(tmp_path, 4, "base")
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(exe)], check=True)
    with pytest.raises(InputError, match="no symbols"):
        text_map(stripped)
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF" + b"\0" * 8)
    with pytest.raises(InputError):
        text_map(junk)


@pytest.mark.kernel
@pytest.mark.slow
def test_tinyconfig_vmlinux_pair_against_nm():
    """The example series' base and patch 1 linked (tinyconfig, gcc-12): every hot function's address,
    size, neighbours and padding as nm -n -S says, and every shift, cause and explanation as nm's
addresses account for them byte by byte."""
    sys.path.insert(0, str(ROOT / "tests"))
    from kernel_images import tiny_vmlinux
    base, head = tiny_vmlinux().vmlinux
    hot = HotPaths()
    check_against_nm(base, hot)
    check_against_nm(head, hot)
    _, tb = file_layout(base, hot)
    _, th = file_layout(head, hot)
    moves = compare(tb, th, hot)
    # every move, cause and explanation as nm -n -S of the two files gives them (tests/link_oracles.py)
    assert_moves_are_nm(moves, nm_moves(base, head, hot.__contains__))
    # the seed's patch grows the fast path's callers: __alloc_pages, behind get_page_from_freelist, moves
    gp = next(m for m in moves if m.name == "get_page_from_freelist")
    assert gp.size_delta == nm_addr(head, gp.name)[1] - nm_addr(base, gp.name)[1] != 0
    ap = next(m for m in moves if m.name == "__alloc_pages")
    assert ap.shift and "get_page_from_freelist" in [c.name for c in ap.causes]


@pytest.mark.slow
def test_debian_dbg_vmlinux_against_nm():
    """A real distribution kernel (bench/dbg_vmlinux.py, ~600 MB with DWARF): the whole text map
    equals nm -n -S, and the hot functions laid out are the default list's that nm finds there."""
    from dbg_oracles import dbg_image
    path = dbg_image().path
    check_against_nm(path, HotPaths())
    lay, tm = file_layout(path)
    want = {n for rows in nm_text(path).values() for n, _a, _s in rows if n in HotPaths()}
    assert want and {f.name for f in lay.functions} == want
    moves = compare(tm, tm)
    assert all(m.shift == 0 and not m.causes for m in moves)


def _entry_link(path: Path):
    """What the pipeline does with a linked image: the map, the layout, a comparison with itself."""
    from analyzer.link_layout import compare as cmp, file_layout as fl
    lay, tm = fl(path, HotPaths(("fn_*",)))
    moves = cmp(tm, tm, HotPaths(("fn_*",)))
    return str(len(lay.functions) + len(moves)), None


def test_damaged_linked_images_are_one_line_errors(tmp_path):
    """200 seeded mutants of the synthetic executables (tests/elf_mutants.py's mutators): each is read
    or refused with a one-line SizewatchError, never a traceback, a hang or unbounded memory."""
    import elf_mutants as em
    sources = [build_exe(tmp_path, 4, "base").read_bytes(), build_exe(tmp_path, 44, "head").read_bytes()]
    bad, outcomes = [], {}
    for case in range(200):
        where = tmp_path / f"case-{case}"
        where.mkdir()
        m = em.make(7, case, sources, where)
        r = em.run_forked("link", _entry_link, m.path, timeout=10)
        outcomes[r.status] = outcomes.get(r.status, 0) + 1
        if r.status not in ("ok", "InputError") or (r.status == "InputError" and "\n" in r.detail):
            bad.append(f"case {case} ({m.kind}: {m.detail}): {r.status} {r.detail}")
        elif r.rss_growth_kb > 200_000:
            bad.append(f"case {case} ({m.kind}: {m.detail}): {r.rss_growth_kb} kB")
    assert not bad, "\n".join(bad[:20])
    assert outcomes.get("ok", 0) > 20 and outcomes.get("InputError", 0) > 20, outcomes


def test_sizediff_link(tmp_path, sizediff, compile_c):
    """``sizediff --link OLD NEW``: the table, the findings, the JSON; a .o is refused in one line."""
    import json
    base, head = build_exe(tmp_path, 4, "base"), build_exe(tmp_path, 44, "head")
    hot = tmp_path / "hot.txt"
    hot.write_text("!replace\nfn_b\nfn_c\n")
    r = sizediff("--link", "--hot", hot, base, head)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    (ab, _), (ah, _) = nm_addr(base, "fn_b"), nm_addr(head, "fn_b")
    row = next(ln for ln in out.splitlines() if ln.split()[:1] == ["fn_b"])
    assert row.split()[1] == f"{ah:x}" and row.split()[-1] == f"{ah - ab:+d}"
    assert f"moved by fn_a {ah - ab:+d}" in out
    doc = json.loads(sizediff("--link", "--json", "--hot", hot, base, head).stdout)
    moves = {m["name"]: m for m in doc["link"]["moves"]}
    assert moves["fn_b"]["shift"] == ah - ab and moves["fn_b"]["causes"][0]["name"] == "fn_a"
    obj = compile_c("gcc-12", ROOT / "tests" / "fixtures" / "inline_cases.c", name="rel2.o")
    bad = sizediff("--link", obj, obj)
    assert bad.returncode == 1 and bad.stderr.decode().count("\n") == 1 and b"not a linked image" in bad.stderr


def test_thinlto_promoted_statics_are_one_function_across_builds():
    """Under ThinLTO a static another unit imports is promoted as ``NAME.llvm.<module hash>`` (the cached
    clang-19 ThinLTO allocator vmlinux has 655 such symbols), and the hash changes with anything in its unit.
    A hot function behind one that kept its size but got a new hash did not move because of it, and one
    that grew is that function growing: never a removal and an addition."""
    from analyzer.link_layout import SectionMap, TextMap, symbol_key
    assert symbol_key("__drain_all_pages.llvm.2654406233376974601") == "__drain_all_pages.llvm"
    assert symbol_key("foo.isra.0") == "foo.isra.0" and symbol_key("foo.llvm.x1") == "foo.llvm.x1"
    base = TextMap({".text": SectionMap(".text", 0x1000, ["a.llvm.111", "b.llvm.222", "rmqueue"],
                                        [0x1000, 0x1040, 0x1080], [0x30, 0x40, 0x100])})
    head = TextMap({".text": SectionMap(".text", 0x1000, ["a.llvm.999", "b.llvm.333", "rmqueue"],
                                        [0x1000, 0x1040, 0x10c0], [0x30, 0x70, 0x100])})
    (mv,) = compare(base, head, HotPaths(("rmqueue",)))
    assert (mv.name, mv.shift) == ("rmqueue", 0x40)
    assert [(c.name, c.change, c.size_delta, c.footprint_delta) for c in mv.causes] == [("b.llvm", "grew", 0x30, 0x40)]
    assert (mv.by_added, mv.by_removed, mv.unexplained) == (0, 0, 0)
