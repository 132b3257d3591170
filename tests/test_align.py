"""Alignment and cache-line figures: arithmetic against brute force, placement in .o vs linked files."""
from __future__ import annotations

import subprocess

import pytest

from analyzer.align import crossed, placement, spanned
from analyzer.inlines import analyze
from conftest import FIXTURES


def brute(start: int, size: int, unit: int) -> int:
    return len({a // unit for a in range(start, start + size)})


@pytest.mark.parametrize("start", [0, 1, 15, 16, 48, 63, 64, 100])
@pytest.mark.parametrize("size", [1, 15, 16, 17, 63, 64, 65, 129, 2236, 3781])
def test_spans_match_brute_force(start, size):
    assert spanned(start, size, 16) == brute(start, size, 16)
    assert spanned(start, size, 64) == brute(start, size, 64)
    p = placement(size, start, placed=True)
    assert (p.blocks, p.lines) == (brute(start, size, 16), brute(start, size, 64))
    end = start + size
    assert p.headroom == next(n for n in range(16) if (end + n) % 16 == 0)
    assert p.line_headroom == next(n for n in range(64) if (end + n) % 64 == 0)


def test_size_based_figures():
    p = placement(2236)
    assert (p.offset, p.placed, p.padded, p.blocks, p.lines, p.headroom) == (None, False, 2240, 140, 35, 4)
    assert crossed(placement(2236), placement(2240)) == []                       # still 140 units, 35 lines
    assert crossed(placement(2200), placement(2210)) == ["alignment"]                # 138 -> 139 units, 35 lines
    assert crossed(placement(2240), placement(2250)) == ["alignment", "cache_line"]


def _nm(path):
    out = {}
    for line in subprocess.run(["nm", "-S", str(path)], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT":
            out[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return out


def test_relocatable_without_function_sections_is_size_based(compile_c):
    obj = compile_c("gcc-12", FIXTURES / "inline_cases.c", name="align-plain.o")
    facts = analyze(obj)
    assert not facts.placed and any("placement changes at link" in n for n in facts.notes)
    tb = facts.functions["too_big"]
    assert tb.placement.offset is None and tb.placement.lines == -(-tb.size // 64)


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
def test_function_sections_are_placed(compile_c, cc):
    obj = compile_c(cc, FIXTURES / "inline_cases.c", "-ffunction-sections", name=f"align-fs-{cc}.o")
    facts = analyze(obj)
    assert facts.placed
    tb = facts.functions["too_big"]
    assert tb.section == ".text.too_big" and tb.placement.placed and tb.placement.offset == 0


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
def test_linked_executable_uses_addresses(tmp_path, cc):
    exe = tmp_path / "prog"
    subprocess.run([cc, "-O2", "-g", "-o", str(exe), str(FIXTURES / "inline_cases.c"), str(FIXTURES / "cu_main.c")],
                   check=True)
    facts = analyze(exe)
    assert facts.linked and facts.placed
    nm = _nm(exe)
    for name in ("too_big", "plain_caller", "helper_main", "call_big_1"):
        f = facts.functions[name]
        addr, size = nm[f.pieces[0].symbol]
        p = f.pieces[0].placement
        assert (p.offset, p.size) == (addr, size)
        assert (p.blocks, p.lines) == (brute(addr, size, 16), brute(addr, size, 64))
