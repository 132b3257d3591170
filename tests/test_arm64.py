"""Every analysis on arm64 objects and images (issue 30), against the real tools: objects compiled
from tests/fixtures/*.c by aarch64-linux-gnu-gcc-12 and clang-19 --target=aarch64-linux-gnu, read
by binutils' aarch64-linux-gnu-objdump/-readelf/-nm, pyelftools relocating the DWARF itself, and
the kernel's bloat-o-meter running the cross nm (``-p aarch64-linux-gnu-``)."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from analyzer.calls import call_graph
from analyzer.dwarf import read_dwarf
from analyzer.elf import load_images, read_symtab
from analyzer.findings import findings
from analyzer.inlines import ObjectFacts, analyze
from conftest import FIXTURES, NATIVE, ROOT
from inline_oracles import dwarf_inlines, objdump_calls_a64
from test_dwarf_walk import _normalised, assert_same
from test_sizediff import MODES, assert_same_as_oracle

PREFIX = "aarch64-linux-gnu-"
GCC = "aarch64-linux-gnu-gcc-12"
COMPILERS = ("gcc-12", "clang-19")
# what arm64 kbuild passes that changes code or relocations: no PIC, no unwind tables, integer
# registers only, return-address signing (paciasp/autiasp), ftrace's patchable entry nops
KERNEL_FLAGS = ("-fno-pic", "-fno-asynchronous-unwind-tables", "-mgeneral-regs-only", "-mbranch-protection=pac-ret",
                "-fpatchable-function-entry=2", "-fno-stack-protector")


@pytest.fixture(scope="session")
def a64(compile_c):
    """Compile a fixture for aarch64 with the named toolchain (cross gcc-12 or clang-19)."""
    def cc(toolchain: str, source, *flags: str, name: str):
        if toolchain == "gcc-12":
            return compile_c(GCC, source, *flags, name=name)
        return compile_c("clang-19", source, "--target=aarch64-linux-gnu", *flags, name=name)
    return cc


def readelf_relocs(obj) -> Counter:
    """(relocation section, type) -> count, from binutils' aarch64-linux-gnu-readelf -rW."""
    out = subprocess.run([PREFIX + "readelf", "-rW", str(obj)], capture_output=True, text=True, check=True).stdout
    counts: Counter = Counter()
    sec = ""
    for line in out.splitlines():
        if line.startswith("Relocation section"):
            sec = line.split("'")[1]
        elif len(line.split()) > 2 and line.split()[2].startswith("R_AARCH64_"):
            counts[(sec, line.split()[2])] += 1
    return counts


# --- DWARF: relocations of .debug_* ----------------------------------------------------------

FLAG_SETS = {"dwarf5": (), "dwarf4": ("-gdwarf-4",), "dwarf5-fs": ("-ffunction-sections",),
             "kernel": KERNEL_FLAGS}


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("flags", list(FLAG_SETS), ids=list(FLAG_SETS))
def test_dwarf_against_pyelftools_relocating_itself(a64, cc, flags):
    """The walker over our AArch64 relocation against pyelftools applying the relocations itself
    (``relocate_dwarf_sections=True``): the same units, subprograms and inlined instances; and
    the walker and libdw against pyelftools decoding our relocated bytes."""
    from elftools.elf.elffile import ELFFile

    from analyzer.dwarf.reference import read_units
    obj = a64(cc, FIXTURES / "inline_cases.c", *FLAG_SETS[flags], name=f"a64-walk-{cc}-{flags}.o")
    relocs = readelf_relocs(obj)
    debug = {t for (s, t) in relocs if s.startswith(".rela.debug_")}
    # what these compilers put into debug sections: the two absolute types (handled beside PREL*)
    assert debug == {"R_AARCH64_ABS64", "R_AARCH64_ABS32"}, debug
    assert relocs[(".rela.debug_info", "R_AARCH64_ABS32")] > 0
    img = load_images(obj)[0]
    table = read_symtab(img)
    fast = read_dwarf(img, table)
    with open(obj, "rb") as f:
        ref_units = read_units(ELFFile(f).get_dwarf_info(relocate_dwarf_sections=True), None)
    assert _normalised(fast.units) == _normalised(ref_units)
    assert any(i.ranges for u in fast.units for i in u.inlined)
    ref = read_dwarf(img, table, engine="pyelftools")
    for engine in ("fast", NATIVE):
        assert_same(ref, read_dwarf(img, table, engine=engine))


def test_prel32_in_a_debug_section(a64, tmp_path):
    """R_AARCH64_PREL32 (S + A - P), which .eh_frame carries, applied where a debug section has it:
    assembled by gas from ``.4byte sym - .``, checked against pyelftools' own relocation."""
    from elftools.elf.elffile import ELFFile

    from analyzer.elf import read_symtab as symtab
    from analyzer.relocs import relocated_bytes, section_bases, symbol_addresses
    src = tmp_path / "prel.s"
    src.write_text(".text\n.globl f\nf: nop\nret\n.section .debug_frame,\"\",%progbits\n"
                   ".8byte f\n.4byte f\n.4byte f - .\n.4byte f + 4 - .\n.2byte 0\n")
    obj = tmp_path / "prel.o"
    subprocess.run([PREFIX + "as", "-o", str(obj), str(src)], check=True)
    assert {t for (s, t) in readelf_relocs(obj) if s == ".rela.debug_frame"} == {
        "R_AARCH64_ABS64", "R_AARCH64_ABS32", "R_AARCH64_PREL32"}
    img = load_images(obj)[0]
    table = symtab(img)
    ours = relocated_bytes(img, img.section_by_name(".debug_frame"), table)
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        theirs = elf.get_dwarf_info(relocate_dwarf_sections=True).debug_frame_sec.stream.getvalue()
    base = int(section_bases(img)[img.section_by_name(".text").index])
    assert int(symbol_addresses(img, table).max()) >= base
    # pyelftools places every section at 0; ours at index << 32: equal once the base is taken off
    u64, u32 = int.from_bytes(ours[0:8], "little"), int.from_bytes(ours[8:12], "little")
    assert (u64 - base, (u32 - base) & 0xFFFFFFFF) == (int.from_bytes(theirs[0:8], "little"),
                                                        int.from_bytes(theirs[8:12], "little"))
    # pc-relative: S + A - P in 32 bits: f at 0 (its base's low 32 bits are 0), P 12 and 16
    assert ours[12:20] == theirs[12:20] == (-12).to_bytes(4, "little", signed=True) * 2
    assert ours[20:] == theirs[20:] == bytes(2)


# --- calls -----------------------------------------------------------------------------------

SOURCES = ("inline_cases", "clone_cases", "likely_path", "symbols")


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("flags", ["plain", "fs", "kernel"])
def test_calls_match_objdump(a64, cc, flags):
    """Every ``bl`` the analyzer resolves and every ``b`` to another function (a tail call), and only
    those, as aarch64-linux-gnu-objdump -dr shows them: via CALL26/JUMP26 relocations and via
    immediates gas resolved."""
    fl = {"plain": (), "fs": ("-ffunction-sections",), "kernel": KERNEL_FLAGS}[flags]
    vias: Counter = Counter()
    for src in SOURCES:
        obj = a64(cc, FIXTURES / f"{src}.c", *fl, name=f"a64-calls-{src}-{cc}-{flags}.o")
        img = load_images(obj)[0]
        graph = call_graph(img, read_symtab(img))
        assert graph.undecodable == 0
        calls = Counter((s.caller, s.target) for s in graph.sites if s.kind == "call")
        assert calls == objdump_calls_a64(obj), src
        assert Counter((s.caller, s.target) for s in graph.sites) == objdump_calls_a64(obj, ("bl", "b")), src
        vias.update(s.via for s in graph.sites)
        if src == "likely_path":
            assert ("lp_tail", "fast_step") in {(s.caller, s.target) for s in graph.sites if s.kind == "tail"}
    assert vias["reloc"] > 10
    if flags != "fs":
        assert vias["immediate"] > 0       # calls within one section: no relocation left by gas


@pytest.fixture(scope="module")
def linked(a64, tmp_path_factory):
    """Linked arm64 executables (binutils' cross ld): no relocations left, targets from immediates."""
    out = tmp_path_factory.mktemp("a64-linked")
    stubs = out / "stubs.c"
    stubs.write_text("void slow_report(int v) {}\nint fast_step(int v) { return v; }\n"
                     "int other_step(int v) { return -v; }\nvoid side_effect(long *p) {}\n")
    made = {}
    for cc in COMPILERS:
        lp = a64(cc, FIXTURES / "likely_path.c", *KERNEL_FLAGS, name=f"a64-likely-{cc}.o")
        ic = a64(cc, FIXTURES / "inline_cases.c", name=f"a64-inline-{cc}.o")
        for key, objs, entry in (("likely", [lp, stubs], "lp_expect"), ("inline", [ic], "plain_caller")):
            exe = out / f"{key}-{cc}"
            subprocess.run([GCC, "-O2", "-nostdlib", "-static", f"-Wl,-e,{entry}", "-o", str(exe),
                            *map(str, objs)], check=True)
            made[(key, cc)] = exe
    return made


@pytest.mark.parametrize("cc", COMPILERS)
def test_linked_calls_and_inlines(linked, cc):
    for key in ("likely", "inline"):
        exe = linked[(key, cc)]
        img = load_images(exe)[0]
        assert not img.relocatable
        sites = call_graph(img, read_symtab(img)).sites
        assert {s.via for s in sites} == {"immediate"}
        assert Counter((s.caller, s.target) for s in sites) == objdump_calls_a64(exe, ("bl", "b"))
    facts = analyze(linked[("inline", cc)])
    assert facts.linked and facts.placed and facts.arch == "aarch64"
    want = dwarf_inlines(linked[("inline", cc)])
    assert {n: f.inlined_into for n, f in facts.functions.items() if f.inlined_count} == \
        {n: dict(c) for n, c in want.items()}
    assert facts.functions["too_big"].callers == {"call_big_1": 1, "call_big_2": 1, "call_big_3": 1}


# --- inline facts (analyzer.inlines, sizewatch inspect) ---------------------------------------

@pytest.fixture(scope="module", params=[(cc, fl) for cc in COMPILERS for fl in ("plain", "kernel")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def case(request, a64):
    cc, fl = request.param
    return cc, a64(cc, FIXTURES / "inline_cases.c", *(KERNEL_FLAGS if fl == "kernel" else ()),
                   name=f"a64-inline_cases-{cc}-{fl}.o")


def kinds(found, name):
    return {f.kind for f in found if f.function == name}


def test_inline_facts(case):
    """The x86 suite's facts (tests/test_inlines.py) on arm64: declarations, inlined copies exactly
    as pyelftools finds them, out-of-line copies and their callers as objdump shows the calls."""
    cc, obj = case
    facts = analyze(obj)
    assert facts.arch == "aarch64" and facts.has_dwarf and not facts.linked
    f = facts.functions
    want = dwarf_inlines(obj)
    assert {n: x.inlined_into for n, x in f.items() if x.inlined_count} == {n: dict(c) for n, c in want.items()}
    assert f["tiny"].inlined_into == {"kept_out": 2, "plain_caller": 1} and f["tiny"].inlined_bytes > 0
    assert f["forced"].inlined_into == {"kept_out": 1, "plain_caller": 1}
    assert (f["tiny"].declared, f["forced"].declared, f["kept_out"].declared, f["plain_caller"].declared) == (
        "inline", "always_inline", "noinline", "plain")
    calls = objdump_calls_a64(obj, ("bl", "b"))
    for name, fn in f.items():
        if fn.out_of_line:       # objdump's calls and tail calls into any of its pieces, by caller
            want_callers: Counter = Counter()
            for (c, t), n in calls.items():
                if t in {p.symbol for p in fn.pieces}:
                    want_callers[c] += n
            assert fn.callers == dict(want_callers), name
    assert f["too_big"].callers == {"call_big_1": 1, "call_big_2": 1, "call_big_3": 1}
    assert "inline_not_inlined" in kinds(findings(facts), "too_big")
    at = f["addr_taken"]         # adrp + add :lo12: (or the GOT's ldr) naming it: one reference
    assert at.out_of_line and not at.callers and at.address_taken == 1 and f["too_big"].address_taken == 0
    assert "always_inline_copy" in kinds(findings(facts), "addr_taken")
    assert f["with_mode"].callers == {"call_mode_a": 1, "call_mode_b": 1}       # b: tail calls count
    again = ObjectFacts.from_dict(json.loads(json.dumps(facts.to_dict())))
    assert again == facts


@pytest.mark.parametrize("cc", COMPILERS)
def test_placement_with_function_sections(a64, cc):
    """Offsets and sizes of every piece as aarch64-linux-gnu-nm prints them; 64-byte lines from the
    same numbers. (The alignment unit stays 16 bytes: gcc's aarch64 default, while clang-19 aligns
    arm64 functions to 4: readelf shows each .text.* section's sh_addralign.)"""
    obj = a64(cc, FIXTURES / "inline_cases.c", "-ffunction-sections", name=f"a64-inline-fs-{cc}.o")
    facts = analyze(obj)
    assert facts.placed
    nm = {}
    for line in subprocess.run([PREFIX + "nm", "-S", str(obj)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            nm[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    pieces = [p for fn in facts.functions.values() for p in fn.pieces]
    assert pieces
    for p in pieces:
        assert (p.offset, p.size) == nm[p.symbol]
        assert p.placement.lines == (p.offset + p.size - 1) // 64 - p.offset // 64 + 1


def test_inspect_command(case):
    cc, obj = case
    r = subprocess.run([sys.executable, "-m", "cli", "inspect", "--json", str(obj)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["facts"]["arch"] == "aarch64" and got["facts"]["functions"]["too_big"]["callers"]
    assert any(x["kind"] == "always_inline_copy" and x["function"] == "addr_taken" for x in got["findings"])


# --- sizediff: byte-identical to bloat-o-meter running the cross nm ---------------------------

@pytest.fixture(scope="module")
def arm_pairs(a64):
    return [(cc, a64(cc, FIXTURES / "symbols.c", "-DV=1", name=f"a64-sym-{cc}-1.o"),
             a64(cc, FIXTURES / "symbols.c", "-DV=2", name=f"a64-sym-{cc}-2.o")) for cc in COMPILERS]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "".join(m) or "default")
def test_sizediff_matches_bloat_o_meter_with_the_cross_nm(arm_pairs, sizediff, bloat_o_meter, mode):
    """bloat-o-meter ``-p aarch64-linux-gnu-`` runs binutils' aarch64-linux-gnu-nm; ours reads the
    ELF. Both oracle versions, both directions, gcc against clang too."""
    for _cc, old, new in arm_pairs:
        assert_same_as_oracle(sizediff, bloat_o_meter, old, new, "-p", PREFIX, *mode)
        assert_same_as_oracle(sizediff, bloat_o_meter, new, old, "-p", PREFIX, *mode)
    (_, g1, _), (_, c1, _) = arm_pairs
    out = assert_same_as_oracle(sizediff, bloat_o_meter, g1, c1, "-p", PREFIX, *mode)
    assert out.startswith("add/remove: ")
