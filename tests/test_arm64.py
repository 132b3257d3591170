"""Every analysis on arm64 objects and images (issue 30), against the real tools: objects compiled
from tests/fixtures/*.c by aarch64-linux-gnu-gcc-12 and clang-19 --target=aarch64-linux-gnu, read
by binutils' aarch64-linux-gnu-objdump/-readelf/-nm, pyelftools relocating the DWARF itself, and
the kernel's bloat-o-meter running the cross nm (``-p aarch64-linux-gnu-``)."""
from __future__ import annotations

import json
import re
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
from pyelftools_dwarf import pyelftools_dwarf
from test_dwarf_walk import assert_same
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
    """The walker and libdw over our AArch64 relocation against pyelftools applying the relocations
    itself (``relocate_dwarf_sections=True``, tests/pyelftools_dwarf.py): the same units,
    subprograms and inlined instances, addresses included."""
    from analyzer.dwarf.reference import read_units
    obj = a64(cc, FIXTURES / "inline_cases.c", *FLAG_SETS[flags], name=f"a64-walk-{cc}-{flags}.o")
    relocs = readelf_relocs(obj)
    debug = {t for (s, t) in relocs if s.startswith(".rela.debug_")}
    # what these compilers put into debug sections: the two absolute types (handled beside PREL*)
    assert debug == {"R_AARCH64_ABS64", "R_AARCH64_ABS32"}, debug
    assert relocs[(".rela.debug_info", "R_AARCH64_ABS32")] > 0
    img = load_images(obj)[0]
    table = read_symtab(img)
    ref_units = read_units(pyelftools_dwarf(obj), None)
    for engine in ("fast", NATIVE):
        got = read_dwarf(img, table, engine=engine)
        assert_same(ref_units, got)
        assert any(i.ranges for u in got.units for i in u.inlined)


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
    same numbers. (The alignment unit is each .text.* section's sh_addralign: 16 under gcc-12, 4
    under clang-19; tests/test_func_align.py holds it against readelf.)"""
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


# --- likely paths ----------------------------------------------------------------------------

_A64_FUNC = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_A64_SECTION = re.compile(r"^Disassembly of section (\S+):$")
_A64_LINE = re.compile(r"^\s*([0-9a-f]+):\t(\S+)\s*(.*?)(?:\t([0-9a-f]+): (R_AARCH64_\w+)\t(\S+))?$")
_A64_ALIASES = {("b.hs", "b.cs"), ("b.lo", "b.cc")}


class A64Objdump:
    """``aarch64-linux-gnu-objdump -dr -w`` of one file: per section, instructions and relocations."""

    def __init__(self, path):
        out = subprocess.run([PREFIX + "objdump", "-dr", "-w", "--no-show-raw-insn", str(path)],
                             capture_output=True, text=True, check=True).stdout
        self.insns: dict[str, dict[int, tuple[str, str]]] = {}
        self.order: dict[str, list[int]] = {}
        self.relocs: dict[str, dict[int, tuple[str, str]]] = {}
        self.funcs: dict[str, tuple[str, int]] = {}
        sec = ""
        for line in out.splitlines():
            if m := _A64_SECTION.match(line):
                sec = m.group(1)
                self.insns[sec], self.order[sec], self.relocs[sec] = {}, [], {}
            elif m := _A64_FUNC.match(line):
                self.funcs[m.group(2)] = (sec, int(m.group(1), 16))
            elif m := _A64_LINE.match(line):
                addr = int(m.group(1), 16)
                self.insns[sec][addr] = (m.group(2), m.group(3).split("//")[0].strip())
                self.order[sec].append(addr)
                if m.group(5):
                    self.relocs[sec][int(m.group(4), 16)] = (m.group(5), m.group(6))

    def next_addr(self, sec: str, addr: int) -> int | None:
        order = self.order[sec]
        i = order.index(addr)
        return order[i + 1] if i + 1 < len(order) else None

    def branch_target(self, sec: str, addr: int) -> str:
        """The called symbol: the CALL26/JUMP26 relocation at the instruction (a section symbol +
        addend: the function there, by objdump's own labels), else objdump's <name>."""
        r = self.relocs[sec].get(addr)
        if r is not None:
            name, _, add = r[1].partition("+")
            if name in self.insns:         # a section symbol
                off = int(add or "0", 16)
                return next(f for f, (s, a) in sorted(self.funcs.items(), key=lambda kv: -kv[1][1])
                            if s == name and a <= off)
            return name
        m = re.search(r"<([^+>]+)>", self.insns[sec][addr][1])
        return m.group(1) if m else ""


def check_against_a64_objdump(path, dump: A64Objdump) -> None:
    """Every instruction on our path is objdump's at that address (same mnemonic), each step is
    objdump's next instruction or its printed branch target, every call's target is the relocation
    (or the resolved immediate) objdump prints, and the path ends on what objdump shows."""
    sec = path.section
    listing = dump.insns[sec]
    calls = {c.address: c for c in path.calls}
    for k, ins in enumerate(path.instructions):
        assert ins.address in listing, f"{path.function}: {ins.address:#x} is not an instruction for objdump"
        mnem, ops = listing[ins.address]
        assert ins.mnemonic == mnem or (ins.mnemonic, mnem) in _A64_ALIASES, (path.function, hex(ins.address))
        assert ins.size == 4
        if ins.kind in ("call", "tail") and not calls[ins.address].target.startswith("*"):
            assert calls[ins.address].target == dump.branch_target(sec, ins.address), (path.function, hex(ins.address))
        if k + 1 < len(path.instructions):
            step = path.instructions[k + 1].address
            if ins.kind == "jmp" or ins.taken:
                m = re.search(r"([0-9a-f]+) <[^>]+>$", ops)
                assert m and int(m.group(1), 16) == step, (path.function, hex(ins.address), ops, hex(step))
            else:
                assert step == dump.next_addr(sec, ins.address), (path.function, hex(ins.address))
    last = listing[path.instructions[-1].address][0]
    assert {"ret": last in ("ret", "retaa", "retab"), "tail": last in ("b", "br"), "trap": last in ("brk", "udf"),
            "switch": last == "br", "cold": last == "b"}.get(path.end, True), (path.function, path.end, last)
    mnems = [listing[i.address][0] for i in path.instructions]
    assert mnems.count("bl") == len([c for c in path.calls if c.kind == "call"])
    indirect = [listing[c.address][0] for c in path.calls if c.kind == "indirect"]
    assert set(indirect) <= {"blr", "br"} and indirect.count("blr") == mnems.count("blr")


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("flags", ["plain", "kernel"])
def test_likely_paths_known_by_construction(a64, cc, flags):
    from analyzer.likely_path import likely_path
    obj = a64(cc, FIXTURES / "likely_path.c", *(KERNEL_FLAGS if flags == "kernel" else ()),
              name=f"a64-likely-{cc}-{flags}.o")
    dump = A64Objdump(obj)
    p = likely_path(str(obj), "lp_expect")
    assert [c.target for c in p.calls] == ["fast_step"] and p.end == "ret"
    assert p.branches == 1 and "slow_report" not in {i.target for i in p.instructions}
    assert p.frame == 16          # stp x29, x30, [sp, #-16]!
    p2 = likely_path(str(obj), "lp_two_sides")
    assert [c.target for c in p2.calls] == ["fast_step"] and p2.end == "ret"
    # clang saves x19 in the prologue; gcc only on the unlikely side (shrink-wrapped)
    assert p2.pushes == (["x19"] if cc == "clang-19" else [])
    p3 = likely_path(str(obj), "lp_cold_call")
    assert p3.calls == [] and p3.end == "ret"
    p4 = likely_path(str(obj), "lp_tail")
    assert [(c.target, c.kind) for c in p4.calls] == [("fast_step", "tail")] and p4.end == "tail"
    for q in (p, p2, p3, p4):
        check_against_a64_objdump(q, dump)
        assert q.bytes == 4 * q.insns and q.lines
        assert q.lines == sorted({a // 64 * 64 for i in q.instructions for a in range(i.address, i.address + 4)})
    if flags == "kernel":         # pac-ret: signed on entry, authenticated before the ret
        assert "paciasp" in [i.mnemonic for i in p.instructions] and p.instructions[-2].mnemonic == "autiasp"


BUG_C = """
extern int fast_step(int v);
#define BUG() do { asm volatile("brk #0x800"); __builtin_unreachable(); } while (0)
/* told the trap is likely: the compilers lay BUG()'s brk out as the fall-through */
int lp_bug(int x)
{
	if (__builtin_expect(x < 0, 1))
		BUG();
	return fast_step(x) + 1;
}
extern void (*hook)(int);
void lp_hook(int x) { hook(x); hook(x + 1); }
"""


@pytest.mark.parametrize("cc", COMPILERS)
def test_brk_is_never_the_likely_side_and_indirect_calls(a64, tmp_path, cc):
    from analyzer.likely_path import likely_path
    src = tmp_path / "bug.c"
    src.write_text(BUG_C)
    obj = a64(cc, src, *KERNEL_FLAGS, name=f"a64-bug-{cc}.o")
    dump = A64Objdump(obj)
    p = likely_path(str(obj), "lp_bug")
    branch = next(i for i in p.instructions if i.kind == "jcc")
    sec, start = dump.funcs["lp_bug"]
    falls_into_brk = dump.insns[sec][dump.next_addr(sec, branch.address)][0] == "brk"
    assert falls_into_brk or cc == "clang-19"     # gcc lays the "likely" brk out as the fall-through
    assert branch.taken == falls_into_brk and p.end == "ret" and [c.target for c in p.calls] == ["fast_step"]
    check_against_a64_objdump(p, dump)
    h = likely_path(str(obj), "lp_hook")
    assert [c.kind for c in h.calls] == ["indirect", "indirect"] and h.end == "tail"   # blr, then br
    assert all(c.target.startswith("*x") for c in h.calls)
    check_against_a64_objdump(h, dump)


def test_a_jump_table_ends_the_path_without_a_call(a64, tmp_path):
    """``adr`` to a label of the function, then ``br``: a switch's table, not an indirect tail call."""
    from analyzer.hotpaths import HotPaths
    from analyzer.likely_path import hot_likely_paths
    n = 24
    src = tmp_path / "switch.c"
    src.write_text("".join(f"void e{i}(int);\n" for i in range(n)) + "int lp_switch(int x)\n{\n\tswitch (x) {\n"
                   + "".join(f"\tcase {i}: e{i}(x + {3 * i}); break;\n" for i in range(n))
                   + "\tdefault: return 3;\n\t}\n\treturn 0;\n}\n")
    for cc in COMPILERS:
        obj = a64(cc, src, *KERNEL_FLAGS, name=f"a64-switch-{cc}.o")
        dump = A64Objdump(obj)
        assert "adr" in [m for m, _ in dump.insns[".text"].values()]     # a table indeed
        (path,) = hot_likely_paths(obj, HotPaths(["lp_switch"]))
        check_against_a64_objdump(path, dump)
        if cc == "gcc-12":       # gcc lays the default case (return 3) out as the fall-through
            assert path.end == "ret" and path.calls == []
        else:                    # clang falls through into the table
            assert path.end == "switch" and path.calls == [] and path.instructions[-1].mnemonic == "br"
            assert path.instructions[-1].kind == "switch"


@pytest.mark.parametrize("cc", COMPILERS)
def test_likely_paths_in_a_linked_file(linked, cc):
    from analyzer.likely_path import likely_path
    exe = linked[("likely", cc)]
    dump = A64Objdump(exe)
    for f in ("lp_expect", "lp_two_sides", "lp_cold_call", "lp_tail"):
        p = likely_path(str(exe), f)
        assert p.linked and p.start == dump.funcs[f][1]
        check_against_a64_objdump(p, dump)
    assert [c.target for c in likely_path(str(exe), "lp_expect").calls] == ["fast_step"]
    assert [(c.target, c.kind) for c in likely_path(str(exe), "lp_tail").calls] == [("fast_step", "tail")]


@pytest.mark.parametrize("cc", COMPILERS)
def test_damaged_arm64_objects_give_input_errors(a64, tmp_path, cc):
    import random

    from analyzer.errors import SizewatchError
    from analyzer.hotpaths import HotPaths
    from analyzer.likely_path import hot_likely_paths
    base = a64(cc, FIXTURES / "likely_path.c", *KERNEL_FLAGS, name=f"a64-likely-{cc}.o").read_bytes()
    rng = random.Random(30)
    outcomes = {"ok": 0, "refused": 0}
    for n in range(150):
        data = bytearray(base)
        for _ in range(rng.choice([1, 2, 4, 8, 16])):
            data[rng.randrange(len(data))] = rng.randrange(256)
        mutant = tmp_path / f"m{n}.o"
        mutant.write_bytes(data)
        try:
            hot_likely_paths(mutant, HotPaths(["lp_*"]))
            analyze(mutant)
            outcomes["ok"] += 1
        except SizewatchError as e:
            assert str(e).strip(), n
            outcomes["refused"] += 1
    assert outcomes["ok"] and outcomes["refused"], outcomes


@pytest.mark.parametrize("cc", COMPILERS)
def test_llvm_mca_estimates_arm64_paths(a64, cc):
    """Each region's Total Cycles is what llvm-mca-19 prints for it with the aarch64 triple, every
    path instruction modelled; ``inspect --cost`` without --mcpu takes the arm64 default CPU."""
    from analyzer.likely_path import likely_path
    from toolchains.mca import DEFAULT_MCPU_AARCH64, estimate, mca_source
    obj = a64(cc, FIXTURES / "likely_path.c", *KERNEL_FLAGS, name=f"a64-likely-{cc}.o")
    funcs = ("lp_expect", "lp_two_sides", "lp_cold_call", "lp_tail")
    paths = [likely_path(str(obj), f) for f in funcs]
    est = estimate(paths, "cortex-a76")
    text = subprocess.run(["llvm-mca-19", "-mtriple=aarch64-unknown-linux-gnu", "-mcpu=cortex-a76", "-iterations=1",
                           "--call-latency=100", "--skip-unsupported-instructions=any", "-"],
                          input=mca_source(paths), capture_output=True, text=True, check=True).stdout
    assert [int(x) for x in re.findall(r"^Total Cycles:\s+(\d+)$", text, re.M)] == [est[f].cycles for f in funcs]
    assert [int(x) for x in re.findall(r"^Instructions:\s+(\d+)$", text, re.M)] == [p.insns for p in paths] \
        == [est[f].modelled for f in funcs]
    r = subprocess.run([sys.executable, "-m", "cli", "inspect", "--cost", "--json", "--function", "lp_expect",
                        str(obj)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["functions"]
    assert row["estimate"]["mcpu"] == DEFAULT_MCPU_AARCH64 and row["estimate"]["estimated_cycles"] > 100  # a call
    assert [c["target"] for c in row["calls"]] == ["fast_step"] and row["end"] == "ret"
