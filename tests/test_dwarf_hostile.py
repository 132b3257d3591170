"""Damaged DWARF: one InputError naming the section, the offset and what is wrong, never a
traceback, a hang or a blow-up in memory.

Each class of damage has a case built from tests/dwarfwriter.py output with the exact reason
expected; then a seeded mutator (truncations, bit flips, 0xff/0x80 runs, random words) runs a
few hundred variants of the writer's files through ``read_dwarf`` and ``analyze`` and accepts
only success or a one-line InputError, each within bounded memory (tracemalloc) and a hang guard (pytest-timeout).
"""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import pytest
from dwarfwriter import DwarfAttrib, DwarfDie, DwarfUnit, dwarf_layout, dwarf_sections, elf_file, uleb
from test_dwarf_synthetic import facts_units, form_units

from analyzer.dwarf import read_dwarf
from analyzer.dwarf.walker import Walker
from analyzer.elf import load_images, read_symtab
from analyzer.errors import InputError
from analyzer.inlines import analyze

ROOT = Path(__file__).resolve().parent.parent
SYMBOLS = [("get_page", 0x100, 0x80), ("caller", 0x400, 0x40)]


def write(tmp_path: Path, secs: dict[str, bytes], name: str = "bad.o") -> Path:
    path = tmp_path / name
    path.write_bytes(elf_file(secs, SYMBOLS))
    return path


def read(path: Path, engine: str = "fast"):
    img = load_images(path)[0]
    return read_dwarf(img, read_symtab(img), engine=engine)


# hostile DWARF must not make the work outgrow the file: a hang is caught by the timeout, the
# memory a blow-up needs (the overlapping strings would decode to 600 MB) by tracemalloc
pytestmark = pytest.mark.timeout(300)
MEMORY_BOUND = 64 << 20


@contextmanager
def memory_bound(limit: int = MEMORY_BOUND):
    """Peak memory allocated inside the block (Python and numpy) stays under ``limit``."""
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit, f"peak {peak >> 20} MB"


def fails_with(path: Path, reason: str) -> str:
    with pytest.raises(InputError) as e:
        read(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg
    assert re.search(reason, msg), msg
    return msg


@pytest.fixture()
def v5():
    return dwarf_layout(facts_units(5, 4))


def test_unit_length_past_the_section(tmp_path, v5):
    secs, _labels = v5
    info = bytearray(secs[".debug_info"])
    info[0:4] = (0x7FFF0000).to_bytes(4, "little")
    fails_with(write(tmp_path, {**secs, ".debug_info": bytes(info)}),
               r"corrupt DWARF in \.debug_info at 0x0: unit length 0x7fff0000 past the end of the section")


def test_truncated_unit(tmp_path, v5):
    secs, _labels = v5
    fails_with(write(tmp_path, {**secs, ".debug_info": secs[".debug_info"][:-7]}),
               r"corrupt DWARF in \.debug_info at 0x[0-9a-f]+: unit length 0x[0-9a-f]+ past the end of the section")
    # a unit whose length ends inside its first DIE
    info = bytearray(secs[".debug_info"])
    info[0:4] = (14).to_bytes(4, "little")
    fails_with(write(tmp_path, {**secs, ".debug_info": bytes(info)}), r"unit DIE runs past the end of its unit")


def test_abbreviation_code_missing(tmp_path, v5):
    secs, labels = v5
    info = bytearray(secs[".debug_info"])
    info[labels["smallest"]] = 0x7F
    fails_with(write(tmp_path, {**secs, ".debug_info": bytes(info)}),
               rf"at {labels['smallest']:#x}: abbreviation code 127 missing from the table at \.debug_abbrev\+0x0")


def test_unknown_form(tmp_path, v5):
    secs, _labels = v5
    abbrev = bytearray(secs[".debug_abbrev"])
    assert abbrev[:5] == bytes([1, 0x11, 1, 0x25, 0x0E])       # compile_unit: producer in strp
    abbrev[4] = 0x7E
    fails_with(write(tmp_path, {**secs, ".debug_abbrev": bytes(abbrev)}),
               r"corrupt DWARF in \.debug_info at 0x[0-9a-f]+: unknown form 0x7e")


def test_leb128_off_the_end_and_too_long(tmp_path, v5):
    secs, _labels = v5
    fails_with(write(tmp_path, {**secs, ".debug_abbrev": bytes([1, 0x11, 1, 0x25, 0x8E])}),
               r"corrupt DWARF in \.debug_abbrev at 0x0: abbreviation table at 0x0 runs past the end of the section")
    fails_with(write(tmp_path, {**secs, ".debug_abbrev": bytes([1, 0x11, 1]) + b"\x80" * 30 + b"\x01\x0e\0\0\0"}),
               r"corrupt DWARF in \.debug_abbrev at 0x[0-9a-f]+: LEB128 longer than 20 bytes")


def test_offsets_past_their_sections(tmp_path, v5):
    secs, _labels = v5
    fails_with(write(tmp_path, {**secs, ".debug_str": b"\0"}),
               r"corrupt DWARF in \.debug_str at 0x[0-9a-f]+: string offset past the end of the section \(0x1 bytes\)")
    fails_with(write(tmp_path, {**secs, ".debug_str": secs[".debug_str"].rstrip(b"\0") + b"x"}),
               r"\.debug_str at 0x[0-9a-f]+: string without a terminating NUL")
    fails_with(write(tmp_path, {**secs, ".debug_str_offsets": secs[".debug_str_offsets"][:10]}),
               r"corrupt DWARF in \.debug_str_offsets at 0x[0-9a-f]+: 4-byte value past the end of the section")
    fails_with(write(tmp_path, {**secs, ".debug_addr": secs[".debug_addr"][:9]}),
               r"corrupt DWARF in \.debug_addr at 0x8: 8-byte value past the end of the section")
    fails_with(write(tmp_path, {**secs, ".debug_rnglists": secs[".debug_rnglists"][:16]}),
               r"corrupt DWARF in \.debug_rnglists at 0x[0-9a-f]+: ")
    fails_with(write(tmp_path, {**secs, ".debug_abbrev": b""}),
               r"corrupt DWARF in \.debug_abbrev at 0x0: abbreviation table offset past the end of the section")
    line = secs[".debug_line"]
    fails_with(write(tmp_path, {**secs, ".debug_line": line[:3]}),
               r"corrupt DWARF in \.debug_line at 0x0: 4-byte value past the end of the section")
    v4, _l = dwarf_layout(facts_units(4, 8))
    fails_with(write(tmp_path, {**v4, ".debug_ranges": v4[".debug_ranges"][:20]}),
               r"corrupt DWARF in \.debug_ranges at 0x[0-9a-f]+: 8-byte value past the end of the section")


def test_absurd_counts_and_sizes(tmp_path, v5):
    secs, _labels = v5
    line = secs[".debug_line"]
    fmt = bytes([3, 1, 0x1F, 2, 0x0F, 5, 0x1E, 2])  # file name format (path line_strp, dir udata, MD5 data16), 2 files
    k = line.index(fmt) + len(fmt) - 1
    fails_with(write(tmp_path, {**secs, ".debug_line": line[:k] + uleb(1 << 40) + line[k + 1:]}),
               r"corrupt DWARF in \.debug_line at 0x[0-9a-f]+: 1099511627776 file name entries in a header of \d+ bytes")
    forms, _l = dwarf_layout(form_units(4, 4))
    info = forms[".debug_info"]
    k = info.index(b"\x03\x00\x00\x00\x04\x05\x06")               # the block4 attribute's length
    bad = info[:k] + (0xFFFFFFF0).to_bytes(4, "little") + info[k + 4:]
    fails_with(write(tmp_path, {**forms, ".debug_info": bad}),
               r"corrupt DWARF in \.debug_info at 0x[0-9a-f]+: block of 4294967280 bytes past the end of the section")
    # a high_pc that carries the range past 2**64
    cu = DwarfDie("compile_unit", [DwarfAttrib("name", "string", "x.c")], [
        DwarfDie("subprogram", [DwarfAttrib("name", "string", "f"), DwarfAttrib("low_pc", "addr", 1 << 63),
                                DwarfAttrib("high_pc", "data8", 1 << 63)])])
    fails_with(write(tmp_path, dwarf_sections([DwarfUnit(cu, 4)])), r"DW_AT_high_pc past the 64-bit address space")


def test_reference_loop(tmp_path):
    """abstract_origin chains that loop: the facts are read, names resolve to None, nothing hangs."""
    cu = DwarfDie("compile_unit", [DwarfAttrib("name", "string", "loop.c")], [
        DwarfDie("subprogram", [DwarfAttrib("abstract_origin", "ref4", "b")], label="a"),
        DwarfDie("subprogram", [DwarfAttrib("abstract_origin", "ref4", "a")], label="b"),
        DwarfDie("subprogram", [DwarfAttrib("name", "string", "get_page"), DwarfAttrib("low_pc", "addr", 0x100),
                                DwarfAttrib("high_pc", "data4", 0x80)], [
            DwarfDie("inlined_subroutine", [DwarfAttrib("abstract_origin", "ref4", "a"),
                                            DwarfAttrib("low_pc", "addr", 0x110),
                                            DwarfAttrib("high_pc", "data4", 4)])])])
    secs, labels = dwarf_layout([DwarfUnit(cu, 5)])
    path = write(tmp_path, secs)
    with memory_bound():
        facts = read(path)
    assert facts.name_of(labels["a"]) is None and facts.decl_of(labels["a"]) == (None, None)
    assert facts.root(labels["a"]).offset in (labels["a"], labels["b"])
    with memory_bound():
        analyze(path)


def test_overlapping_strings_are_bounded(tmp_path):
    """3,000 names pointing into one 200 KB string without NULs would decode to 600 MB."""
    names = [f"n{i:05d}" for i in range(3000)]
    cu = DwarfDie("compile_unit", [DwarfAttrib("name", "string", "strings.c")],
                  [DwarfDie("subprogram", [DwarfAttrib("name", "strp", n), DwarfAttrib("decl_line", "data1", 1)])
                   for n in names])
    secs = dwarf_sections([DwarfUnit(cu, 4)])
    secs[".debug_str"] = b"\0" + b"A" * 200_000 + b"\0"
    with memory_bound():
        fails_with(write(tmp_path, secs), r"corrupt DWARF in \.debug_str at 0x[0-9a-f]+: strings overlap")


def test_pyelftools_engine_gives_a_reason(tmp_path, v5):
    secs, _labels = v5
    abbrev = bytearray(secs[".debug_abbrev"])
    abbrev[4] = 0x7E
    path = write(tmp_path, {**secs, ".debug_abbrev": bytes(abbrev)})
    with pytest.raises(InputError) as e:
        read(path, engine="pyelftools")
    msg = str(e.value)
    assert "corrupt DWARF (pyelftools: " in msg and "\n" not in msg and not re.search(r": \)$", msg), msg


def test_cli_one_line(tmp_path, v5):
    secs, labels = v5
    info = bytearray(secs[".debug_info"])
    info[labels["smallest"]] = 0x7F
    path = write(tmp_path, {**secs, ".debug_info": bytes(info)})
    r = subprocess.run([sys.executable, "-m", "cli", "inspect", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"corrupt DWARF in .debug_info at {labels['smallest']:#x}: abbreviation code 127 missing" in lines[0]


# --- the mutator ------------------------------------------------------------------------------

def mutants(n: int, seed: int = 20261126):
    """(case id, sections) of ``n`` seeded mutations of the writer's files: one DWARF section
    truncated or with a few bytes replaced; the ELF container stays valid."""
    bases = [dwarf_sections(make(v, o)) for make in (facts_units, form_units) for v, o in
             ((4, 4), (4, 8), (5, 4), (5, 8))]
    for i in range(n):
        rnd = random.Random(seed + i)
        secs = dict(rnd.choice(bases))
        name = rnd.choice(sorted(secs))
        b = bytearray(secs[name])
        op = rnd.choice(["truncate", "flip", "ff", "0x80", "zero", "word", "dword"])
        if op == "truncate":
            b = b[:rnd.randrange(len(b) + 1)]
        else:
            for _ in range(rnd.randint(1, 4)):
                if not b:
                    break
                k = rnd.randrange(len(b))
                if op == "flip":
                    b[k] ^= 1 << rnd.randrange(8)
                elif op in ("ff", "0x80"):
                    b[k:k + rnd.randint(1, 12)] = (b"\xff" if op == "ff" else b"\x80") * rnd.randint(1, 12)
                elif op == "zero":
                    b[k] = 0
                else:
                    w = 4 if op == "word" else 8
                    b[k:k + w] = rnd.getrandbits(8 * w).to_bytes(w, "little")
        secs[name] = bytes(b)
        yield f"{i}:{name}:{op}", secs


@pytest.mark.timeout(600)          # a hang guard: 400 mutants, each read twice
def test_mutated_dwarf(tmp_path):
    outcomes: dict[str, int] = {}
    for case, secs in mutants(400):
        path = write(tmp_path, secs, "mutant.o")
        for run in (lambda: read(path), lambda: analyze(path, cus=["mm/page_alloc.c"])):
            try:
                run()
                outcomes["ok"] = outcomes.get("ok", 0) + 1
            except InputError as e:
                msg = str(e)
                assert "\n" not in msg and msg.startswith(f"{path}: "), (case, msg)
                reason = msg[len(f"{path}: "):]
                assert reason.strip() and not reason.rstrip().endswith(":") and "()" not in reason, (case, msg)
                outcomes["InputError"] = outcomes.get("InputError", 0) + 1
        try:        # the walker's every-attribute window (the synthetic tests' reader) too
            w = Walker(secs, True)
            for h in w.units():
                w.dies(h)
        except InputError as e:
            assert "\n" not in str(e) and str(e).strip(), (case, str(e))
    assert outcomes.get("ok", 0) > 40 and outcomes.get("InputError", 0) > 200, outcomes


# --- work that would grow faster than the file: bounded --------------------------------------------

def _v4_unit(body: bytes, abbrev_offset: int = 0) -> bytes:
    rest = (4).to_bytes(2, "little") + abbrev_offset.to_bytes(4, "little") + bytes([8]) + body
    return len(rest).to_bytes(4, "little") + rest


def _bounded(tmp_path, secs: dict[str, bytes], reason: str | None) -> None:
    path = write(tmp_path, secs)
    with memory_bound():
        if reason is None:
            read(path)
        else:
            fails_with(path, reason)


def zero_width_attributes() -> dict[str, bytes]:
    """200k flag_present attributes in one abbreviation, used by 20k one-byte DIEs."""
    abbrev = bytes([1, 0x11, 1, 0x03, 0x08, 0, 0]) + bytes([2, 0x2E, 0]) + bytes([0x3F, 0x19]) * 200_000 + b"\0\0\0"
    info = _v4_unit(bytes([1]) + b"x.c\0" + bytes([2]) * 20_000 + b"\0")
    return {".debug_info": info, ".debug_abbrev": abbrev, ".debug_str": b"\0"}


def overlapping_abbreviation_tables() -> dict[str, bytes]:
    """10k units each pointing into the middle of one 20k-entry abbreviation table."""
    entries = b"".join(bytes([0x80 | (c & 0x7F), 0x80 | ((c >> 7) & 0x7F), c >> 14, 0x24, 0, 0, 0])
                       for c in range(1 << 14, (1 << 14) + 20_000))
    abbrev = entries + bytes([1, 0x11, 0, 0, 0]) + b"\0"
    info = b"".join(_v4_unit(bytes([1]), 7 * k) for k in range(0, 20_000, 2))
    return {".debug_info": info, ".debug_abbrev": abbrev, ".debug_str": b"\0"}


def range_list_shared_by_every_unit() -> dict[str, bytes]:
    """20k units whose subprogram names one 50k-entry range list."""
    abbrev = bytes([1, 0x11, 1, 0, 0]) + bytes([2, 0x2E, 0, 0x55, 0x17, 0, 0]) + b"\0"
    info = _v4_unit(bytes([1, 2]) + (0).to_bytes(4, "little") + b"\0") * 20_000
    ranges = b"".join((16 * k).to_bytes(8, "little") + (16 * k + 8).to_bytes(8, "little")
                      for k in range(1, 50_001)) + bytes(16)
    return {".debug_info": info, ".debug_abbrev": abbrev, ".debug_str": b"\0", ".debug_ranges": ranges}


def test_zero_width_attributes_cost_no_more_than_their_bytes(tmp_path):
    _bounded(tmp_path, zero_width_attributes(), None)


def test_overlapping_abbreviation_tables(tmp_path):
    _bounded(tmp_path, overlapping_abbreviation_tables(),
             r"corrupt DWARF in \.debug_abbrev at 0x[0-9a-f]+: abbreviation tables overlap")


def test_range_list_shared_by_every_unit(tmp_path):
    _bounded(tmp_path, range_list_shared_by_every_unit(),
             r"corrupt DWARF in \.debug_ranges at 0x0: range lists overlap")


# --- the libdw engine: the same damage, in a child process ------------------------------------

def native_campaign(tmp: str, n: int) -> dict:
    """Run in a child (see test_native_engine_hostile): every mutant, and the three files whose
    work would outgrow them, through the libdw engine, and through inline_cost's "auto" engine
    (libdw, or the walker for a file libdw would read at a cost out of proportion). Returns
    outcome counts and the growth cases' messages; an exception other than a one-line
    InputError propagates (the child fails)."""
    from analyzer.inline_cost import inline_cost
    tmp_path = Path(tmp)
    outcomes: dict[str, int] = {}
    cases = list(mutants(n)) + [(f.__name__, f()) for f in (zero_width_attributes, overlapping_abbreviation_tables,
                                                             range_list_shared_by_every_unit)]
    for case, secs in cases:
        path = write(tmp_path, secs, "mutant.o")
        for run in (lambda: read(path, engine="native"), lambda: inline_cost(path)):     # "auto" falls back
            try:
                run()
                outcomes["ok"] = outcomes.get("ok", 0) + 1
            except InputError as e:
                msg = str(e)
                assert "\n" not in msg and msg.startswith(f"{path}: ") and msg[len(f"{path}: "):].strip(), (case, msg)
                outcomes["InputError"] = outcomes.get("InputError", 0) + 1
                if not case[0].isdigit():
                    outcomes.setdefault(case, msg)
    return outcomes


@pytest.mark.libdw
@pytest.mark.timeout(600)
def test_native_engine_hostile(tmp_path):
    """A crash inside libdw would end the process, not raise: the campaign runs in a child,
    whose exit status, outcomes and peak RSS are checked. The files built to outgrow their size
    are refused by the extension's checks and budgets (overlapping abbreviation tables, an
    abbreviation with 200k attributes: minutes in libdw; one range list named by 20k units)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[2]); import test_dwarf_hostile as t; "
            "out = t.native_campaign(sys.argv[1], 400); "
            "out['rss_mb'] = [int(ln.split()[1]) for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][0] // 1024; "
            "print(json.dumps(out))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(ROOT / "tests")], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out.get("ok", 0) > 40 and out.get("InputError", 0) > 200, out
    assert "abbreviation tables overlap" in out["overlapping_abbreviation_tables"], out
    assert "more attributes than any compiler writes" in out["zero_width_attributes"], out
    assert "range lists overlap" in out["range_list_shared_by_every_unit"], out
    assert out["rss_mb"] < 400, out
