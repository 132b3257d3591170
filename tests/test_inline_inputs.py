"""Linked files restricted to compilation units, and bad inputs: one clear line, never a traceback."""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from analyzer.dwarf import scan_unit_names
from analyzer.elf import load_images
from analyzer.errors import InputError
from analyzer.inlines import analyze
from conftest import FIXTURES, libdw_built

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", params=["gcc-12", "clang-19"])
def exe(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("exe") / f"prog-{request.param}"
    subprocess.run([request.param, "-O2", "-g", "-o", str(out), str(FIXTURES / "inline_cases.c"),
                    str(FIXTURES / "cu_main.c")], check=True)
    return out


def pyelftools_unit_names(path: Path) -> list[tuple[int, str]]:
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        di = ELFFile(f).get_dwarf_info(relocate_dwarf_sections=False)
        return [(cu.cu_offset, cu.get_top_DIE().attributes["DW_AT_name"].value.decode()) for cu in di.iter_CUs()]


def test_unit_scan_matches_pyelftools(exe):
    from analyzer.dwarf import load_sections
    from analyzer.elf import read_symtab
    img = load_images(exe)[0]
    raw = load_sections(img, read_symtab(img))
    assert scan_unit_names(raw, True) == pyelftools_unit_names(exe)


def test_restricted_to_named_unit(exe):
    whole = analyze(exe)
    main = analyze(exe, cus=["cu_main.c"])
    assert main.units and all(u.endswith("cu_main.c") for u in main.units)
    assert {"main", "helper_main"} <= set(main.functions)
    assert "too_big" not in main.functions and "plain_caller" not in main.functions
    assert main.functions["twice"].inlined_into == {"helper_main": 1}
    dis = subprocess.run(["objdump", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
    calls = [ln for ln in dis.split("<main>:\n", 1)[1].split("\n\n")[0].splitlines() if ln.endswith("<helper_main>")]
    assert main.functions["helper_main"].callers == {"main": 1} and len(calls) == 1, calls    # objdump -d
    # the same facts as in the unrestricted analysis, for the functions of that unit
    for name in ("main", "helper_main", "twice"):
        a, b = main.functions[name], whole.functions[name]
        assert (a.size, a.inlined_count, a.inlined_into, a.declared) == (b.size, b.inlined_count, b.inlined_into,
                                                                           b.declared)
    cases = analyze(exe, cus=[str(FIXTURES / "inline_cases.c")])
    assert "too_big" in cases.functions and "main" not in cases.functions
    with pytest.raises(InputError, match="no compilation unit named mm/page_alloc.c"):
        analyze(exe, cus=["mm/page_alloc.c"])


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "cli", "inspect", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)


def assert_one_line_error(r, text):
    assert r.returncode == 1
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_no_debug_info_still_gives_symbols_and_calls(compile_c):
    obj = compile_c("gcc-12", FIXTURES / "inline_cases.c", "-g0", name="nodebug.o")
    facts = analyze(obj)
    assert not facts.has_dwarf and any("no DWARF" in n for n in facts.notes)
    tb = facts.functions["too_big"]
    assert tb.out_of_line and tb.declared == "unknown" and sum(tb.callers.values()) == 3
    r = run_cli(obj)
    assert r.returncode == 0 and "note: no DWARF" in r.stdout


def _section(path: Path, name: str):
    img = load_images(path)[0]
    return img.section_by_name(name)


def test_truncated_dwarf(compile_c, tmp_path):
    obj = compile_c("gcc-12", FIXTURES / "inline_cases.c", name="trunc.o")
    bad = tmp_path / "trunc.o"
    shutil.copy(obj, bad)
    sec = _section(bad, ".debug_info")
    data = bytearray(bad.read_bytes())
    struct.pack_into("<I", data, sec.offset, sec.size * 4)       # first unit claims to run past the end
    bad.write_bytes(data)
    with pytest.raises(InputError, match="DWARF|debug_info"):
        analyze(bad)
    assert_one_line_error(run_cli(bad), "trunc.o")
    # every engine refuses it alike: libdw alone would read the unit up to the section's end
    from analyzer.dwarf import read_dwarf
    from analyzer.elf import read_symtab
    from analyzer.inline_cost import inline_cost
    img = load_images(bad)[0]
    for engine in ["fast", "auto", "native"]:
        if engine == "native" and not libdw_built():    # no libdw-dev here: nothing to check
            continue
        with pytest.raises(InputError, match=r"unit length 0x[0-9a-f]+ past the end of the section"):
            read_dwarf(img, read_symtab(img), None, engine=engine)
    with pytest.raises(InputError, match=r"unit length 0x[0-9a-f]+ past the end of the section"):
        inline_cost(bad)


def test_debug_info_without_bytes(compile_c, tmp_path):
    """.debug_info made SHT_NOBITS: no units to read, and every engine and command says so
    calmly (libdw's engine once raised a KeyError here)."""
    from elftools.elf.elffile import ELFFile
    from analyzer.dwarf import read_dwarf
    from analyzer.elf import read_symtab
    from analyzer.inline_cost import inline_cost
    obj = compile_c("gcc-12", FIXTURES / "inline_cases.c", name="nobits.o")
    bad = tmp_path / "nobits.o"
    shutil.copy(obj, bad)
    with open(bad, "rb") as f:
        elf = ELFFile(f)
        idx = next(i for i, sec in enumerate(elf.iter_sections()) if sec.name == ".debug_info")
        where = elf["e_shoff"] + idx * elf["e_shentsize"] + 4
    data = bytearray(bad.read_bytes())
    struct.pack_into("<I", data, where, 8)                      # sh_type = SHT_NOBITS
    bad.write_bytes(data)
    img = load_images(bad)[0]
    for engine in ["fast", "auto", "native"]:
        if engine == "native" and not libdw_built():    # no libdw-dev here: nothing to check
            continue
        assert read_dwarf(img, read_symtab(img), None, engine=engine).units == [], engine
    assert inline_cost(bad).units == 0
    analyze(bad)
    r = run_cli(bad)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_garbage_dwarf(compile_c, tmp_path):
    obj = compile_c("clang-19", FIXTURES / "inline_cases.c", name="garbage.o")
    bad = tmp_path / "garbage.o"
    shutil.copy(obj, bad)
    sec = _section(bad, ".debug_abbrev")
    data = bytearray(bad.read_bytes())
    data[sec.offset:sec.offset + sec.size] = b"\xff" * sec.size
    bad.write_bytes(data)
    assert_one_line_error(run_cli(bad), "corrupt DWARF")


def test_unknown_relocation_type(compile_c, tmp_path):
    obj = compile_c("gcc-12", FIXTURES / "inline_cases.c", name="reloc.o")
    bad = tmp_path / "reloc.o"
    shutil.copy(obj, bad)
    rela = _section(bad, ".rela.debug_info")
    data = bytearray(bad.read_bytes())
    struct.pack_into("<I", data, rela.offset + 8, 99)      # r_info type of the first entry
    bad.write_bytes(data)
    assert_one_line_error(run_cli(bad), "unknown relocation type 99 in .debug_info")


def test_wrong_arch_stripped_missing(compile_c, tmp_path):
    other = compile_c("clang-19", FIXTURES / "inline_cases.c", "--target=riscv64-linux-gnu", name="riscv.o")
    assert_one_line_error(run_cli(other), "riscv objects are not supported (x86-64 and aarch64 only)")
    stripped = tmp_path / "stripped.o"
    subprocess.run(["strip", "-o", str(stripped), str(compile_c("gcc-12", FIXTURES / "inline_cases.c"))], check=True)
    assert_one_line_error(run_cli(stripped), "no symbol table")
    assert_one_line_error(run_cli(tmp_path / "missing.o"), "no such file")
    notelf = tmp_path / "x.o"
    notelf.write_text("hello")
    assert_one_line_error(run_cli(notelf), "not an ELF file")
    ok = compile_c("gcc-12", FIXTURES / "inline_cases.c")
    assert_one_line_error(run_cli(ok, "--remarks", tmp_path / "none.txt"), "none.txt: no such file")
    assert_one_line_error(run_cli(other, "--remarks", tmp_path / "none.txt"), "riscv objects are not supported")


def test_sizediff_inlines_bad_input(compile_c, tmp_path):
    ok = compile_c("gcc-12", FIXTURES / "inline_cases.c", name="ok.o")
    r = subprocess.run([sys.executable, "-m", "cli.sizediff", "--inlines", str(ok),
                        str(tmp_path / "missing.o")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "no such file" in r.stderr


@pytest.mark.slow
def test_debian_dbg_vmlinux_page_alloc_unit():
    """A real vmlinux with full DWARF (bench/dbg_vmlinux.py): only mm/page_alloc.c is decoded, and
    every fact of it is what independent tools say of that file: inlined copies per caller as
    pyelftools reads them, out-of-line pieces as nm lists them, call sites as objdump disassembles them."""
    from dbg_oracles import dbg_image, nm_functions, objdump_callers
    from inline_oracles import dwarf_inlines
    path = dbg_image().path
    facts = analyze(path, cus=["mm/page_alloc.c"])
    assert facts.linked and facts.placed and facts.units == [u for u in facts.units if u.endswith("mm/page_alloc.c")]
    f = facts.functions
    want = dwarf_inlines(path, "mm/page_alloc.c")        # pyelftools on the same unit (~20-50 s)
    assert want and {n for n, fn in f.items() if fn.inlined_count} == set(want)
    for name, callers in want.items():
        assert f[name].inlined_into == dict(callers) and f[name].inlined_count == sum(callers.values()), name
    nm = nm_functions(path)
    pieces = [(p.symbol, p.placement.offset, p.size) for fn in f.values() for p in fn.pieces]
    assert pieces and all(fn.out_of_line == bool(fn.pieces) for fn in f.values())
    for sym, addr, size in pieces:
        assert (addr, size) in nm.get(sym, []), sym
        lines = (addr + size - 1) // 64 - addr // 64 + 1 if size else 0
        assert next(p for fn in f.values() for p in fn.pieces if p.symbol == sym).placement.lines == lines, sym
    calls = objdump_callers(path, pieces)
    for name, fn in f.items():
        if fn.out_of_line:
            want_callers = Counter()
            for sym in {p.symbol for p in fn.pieces}:
                want_callers.update(calls.get(sym, {}))
            assert fn.callers == dict(want_callers), name
    assert any(fn.callers for fn in f.values())


