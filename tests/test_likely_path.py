"""The likely path (analyzer.likely_path) checked against objdump -dr on the same bytes, and on
small C functions whose likely path is known by construction."""
from __future__ import annotations

import re
import subprocess

import pytest

from analyzer.errors import InputError
from analyzer.hotpaths import HotPaths
from analyzer.likely_path import hot_likely_paths, likely_path
from conftest import FIXTURES

KERNEL_FLAGS = ("-fno-pic", "-fcf-protection=none", "-fno-stack-protector", "-mno-red-zone")

_INSN = re.compile(r"^\s*([0-9a-f]+):\t(.*)$")
_FUNC = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_SECTION = re.compile(r"^Disassembly of section (\S+):$")
_PREFIXES = ("lock", "rep", "repz", "repnz", "repe", "repne", "cs", "ds", "data16", "notrack", "bnd")


class Objdump:
    """``objdump -dr -w`` of one object, parsed: per section, instructions and relocations."""

    def __init__(self, path):
        out = subprocess.run(["objdump", "-dr", "-w", "--no-show-raw-insn", str(path)],
                             capture_output=True, text=True, check=True).stdout
        self.insns: dict[str, dict[int, tuple[str, str]]] = {}
        self.order: dict[str, list[int]] = {}
        self.relocs: dict[str, dict[int, tuple[str, str]]] = {}
        self.funcs: dict[str, tuple[str, int]] = {}
        sec = ""
        for line in out.splitlines():
            if m := _SECTION.match(line):
                sec = m.group(1)
                self.insns[sec], self.order[sec], self.relocs[sec] = {}, [], {}
                continue
            if m := _FUNC.match(line):
                self.funcs[m.group(2)] = (sec, int(m.group(1), 16))
                continue
            text = line
            # -w puts a relocation on the instruction's own line after a tab
            rel = re.search(r"\t\s*([0-9a-f]+): (R_X86_64_\w+)\t(\S+)$", line)
            if rel:
                self.relocs[sec][int(rel.group(1), 16)] = (rel.group(2), rel.group(3))
                text = line[:rel.start()]
            if m := _INSN.match(text):
                addr = int(m.group(1), 16)
                body = m.group(2).split("#")[0].strip()
                words = body.split()
                while words and words[0] in _PREFIXES and len(words) > 1:
                    words = words[1:]
                mnem = words[0] if words else ""
                self.insns[sec][addr] = (mnem, " ".join(words[1:]))
                self.order[sec].append(addr)

    def next_addr(self, sec: str, addr: int) -> int | None:
        order = self.order[sec]
        i = order.index(addr)
        return order[i + 1] if i + 1 < len(order) else None

    def call_target(self, sec: str, addr: int, size: int) -> str:
        """The called symbol as objdump shows it: the relocation at the rel32 field, else <name>."""
        r = self.relocs[sec].get(addr + size - 4)
        if r is not None:
            return re.sub(r"[-+]0x[0-9a-f]+$", "", r[1])
        m = re.search(r"<([^+>]+)>", self.insns[sec][addr][1])
        return m.group(1) if m else ""


def _same_mnemonic(ours: str, theirs: str) -> bool:
    ours = ours.split()[-1]       # capstone keeps prefixes in the mnemonic ("lock add")
    return ours == theirs or ours[:-1] == theirs or theirs[:-1] == ours or (ours, theirs) in {
        ("cdqe", "cltq"), ("cqo", "cqto"), ("cdq", "cltd"), ("cwde", "cwtl"), ("nop", "xchg")}


def check_against_objdump(obj, path, dump: Objdump) -> None:
    """Every instruction on our path is objdump's instruction at that address (same mnemonic, same
    length), each step is objdump's fall-through or its printed branch target, and every call's
    target is the relocation objdump prints."""
    sec = path.section
    listing = dump.insns[sec]
    calls = {c.address: c for c in path.calls}
    for k, ins in enumerate(path.instructions):
        assert ins.address in listing, f"{path.function}: {ins.address:#x} is not an instruction for objdump"
        mnem, ops = listing[ins.address]
        assert _same_mnemonic(ins.mnemonic, mnem), (path.function, hex(ins.address), ins.mnemonic, mnem)
        nxt = dump.next_addr(sec, ins.address)
        if nxt is not None:
            assert ins.size == nxt - ins.address, (path.function, hex(ins.address))
        if ins.kind == "call":
            want = dump.call_target(sec, ins.address, ins.size)
            assert calls[ins.address].target == want, (path.function, hex(ins.address), want)
        if ins.kind == "tail":
            assert calls[ins.address].target == dump.call_target(sec, ins.address, ins.size)
        if k + 1 < len(path.instructions):
            step = path.instructions[k + 1].address
            if ins.kind == "jmp" or ins.taken:
                m = re.match(r"([0-9a-f]+) <", ops)
                assert m and int(m.group(1), 16) == step, (path.function, hex(ins.address), ops, hex(step))
            else:
                assert step == nxt, (path.function, hex(ins.address))
    last = path.instructions[-1]
    lm = listing[last.address][0]
    if path.end == "ret":
        assert lm == "ret" or (lm == "jmp" and dump.call_target(sec, last.address, last.size) == "__x86_return_thunk")
    elif path.end == "tail":
        assert lm == "jmp"
    elif path.end == "trap":
        assert lm in ("ud2", "int3")
    # counts: calls on the path are objdump's calls at those addresses, none other
    assert len([i for i in path.instructions if listing[i.address][0] == "call"]) == \
        len([c for c in path.calls if c.kind != "tail" and not c.target.startswith("*")]) + \
        len([c for c in path.calls if c.kind == "indirect" and c.target.startswith("*")])


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
def test_fixture_paths_known_by_construction(compile_c, cc):
    obj = compile_c(cc, FIXTURES / "likely_path.c", *KERNEL_FLAGS, name=f"likely-{cc}.o")
    dump = Objdump(obj)
    p = likely_path(str(obj), "lp_expect")
    assert [c.target for c in p.calls] == ["fast_step"] and p.end == "ret"
    assert p.branches == 1 and "slow_report" not in {i.target for i in p.instructions}
    if cc == "gcc-12":     # gcc moves the unlikely block to lp_expect.cold in .text.unlikely
        assert p.cold_exits == 1 and [i.target for i in p.instructions if i.cold] == ["lp_expect.cold"]
    p2 = likely_path(str(obj), "lp_two_sides")
    assert [c.target for c in p2.calls] == ["fast_step"] and p2.end == "ret" and p2.pushes == ["rbx"]
    p3 = likely_path(str(obj), "lp_cold_call")
    assert p3.calls == [] and p3.end == "ret"
    if cc == "gcc-12":
        assert p3.cold_exits == 1
    p4 = likely_path(str(obj), "lp_tail")
    assert [(c.target, c.kind) for c in p4.calls] == [("fast_step", "tail")] and p4.end == "tail"
    for q in (p, p2, p3, p4):
        check_against_objdump(obj, q, dump)
        assert q.bytes == sum(i.size for i in q.instructions) and q.lines


def test_lines_and_frame(compile_c):
    obj = compile_c("gcc-12", FIXTURES / "likely_path.c", *KERNEL_FLAGS, name="likely-gcc-12.o")
    p = likely_path(str(obj), "lp_expect")
    assert p.frame == 8 and p.start == 0 and p.lines == [0]
    p2 = likely_path(str(obj), "lp_tail")     # at 0x90 in .text: line 0x80
    assert p2.start == 0x90 and p2.lines == [0x80]


def test_errors(compile_c, tmp_path):
    obj = compile_c("gcc-12", FIXTURES / "likely_path.c", *KERNEL_FLAGS, name="likely-gcc-12.o")
    with pytest.raises(InputError, match="no function 'nope'"):
        likely_path(str(obj), "nope")
    bad = tmp_path / "x.o"
    bad.write_bytes(b"not elf")
    with pytest.raises(InputError, match="not an ELF file"):
        likely_path(str(bad), "f")


@pytest.mark.kernel
@pytest.mark.parametrize("toolchain", ["gcc-12", "clang-19"])
def test_hot_functions_against_objdump(example_series, toolchain):
    for built in example_series(toolchain):
        dump = Objdump(built.object_path)
        paths = hot_likely_paths(str(built.object_path), HotPaths())
        assert len(paths) >= 5
        for p in paths:
            check_against_objdump(built.object_path, p, dump)


@pytest.mark.kernel
def test_example_series_rmqueue_inlined(example_series):
    """Seed 000: after patch 2 __rmqueue_smallest/__rmqueue_fallback are inlined, so no path calls them
    (patch 1 left them out of line: rmqueue_bulk's path calls __rmqueue_smallest)."""
    stock, p1, p2 = example_series("gcc-12")
    calls = lambda b: {c.target for p in hot_likely_paths(str(b.object_path)) for c in p.calls}
    assert "__rmqueue_smallest" in calls(p1)
    assert not {"__rmqueue_smallest", "__rmqueue_fallback"} & calls(p2)
    gp = {b: likely_path(str(b.object_path), "get_page_from_freelist") for b in (p1, p2)}
    assert not {"__rmqueue_smallest", "__rmqueue_fallback"} & {c.target for c in gp[p2].calls}



@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
def test_linked_file(compile_c, tmp_path, cc):
    """In a linked file the path has link addresses, the lines are real 64-byte lines, and calls are
    named from the resolved immediates (no relocations left)."""
    obj = compile_c(cc, FIXTURES / "likely_path.c", *KERNEL_FLAGS, name=f"likely-{cc}.o")
    stubs = tmp_path / "stubs.c"
    stubs.write_text("void slow_report(int v) {}\nint fast_step(int v) { return v; }\n"
                     "int other_step(int v) { return -v; }\nvoid side_effect(long *p) {}\n")
    exe = tmp_path / f"linked-{cc}"
    subprocess.run([cc, "-O2", "-nostdlib", "-static", "-Wl,-e,lp_expect", "-o", str(exe), str(obj), str(stubs)],
                   check=True)
    dump = Objdump(exe)
    for f in ("lp_expect", "lp_two_sides", "lp_tail"):
        p = likely_path(str(exe), f)
        assert p.linked and p.start == dump.funcs[f][1]
        check_against_objdump(exe, p, dump)
        assert p.lines == sorted({a // 64 * 64 for i in p.instructions for a in range(i.address, i.address + i.size)})
    assert [c.target for c in likely_path(str(exe), "lp_expect").calls] == ["fast_step"]
    assert [(c.target, c.kind) for c in likely_path(str(exe), "lp_tail").calls] == [("fast_step", "tail")]


@pytest.mark.parametrize("cc", ["gcc-12", "clang-19"])
def test_damaged_objects_give_input_errors(compile_c, tmp_path, cc):
    """Seeded byte flips of a real object: the likely path is found or the file is refused with a
    SizewatchError, never another exception (a section index or a relocation's symbol past its table)."""
    import random

    from analyzer.errors import SizewatchError
    obj = compile_c(cc, FIXTURES / "likely_path.c", *KERNEL_FLAGS, name=f"likely-{cc}.o")
    base = obj.read_bytes()
    rng = random.Random(15)
    outcomes = {"ok": 0, "refused": 0}
    for n in range(150):
        data = bytearray(base)
        for _ in range(rng.choice([1, 2, 4, 8, 16])):
            data[rng.randrange(len(data))] = rng.randrange(256)
        mutant = tmp_path / f"m{n}.o"
        mutant.write_bytes(data)
        try:
            hot_likely_paths(mutant, HotPaths(["lp_*"]))
            outcomes["ok"] += 1
        except SizewatchError as e:
            assert str(e).strip(), n
            outcomes["refused"] += 1
    assert outcomes["ok"] and outcomes["refused"], outcomes


SWITCH_C = """
void ext(int);
int lp_switch(int x)
{
    switch (x) {
    case 0: ext(1); break;
    case 1: ext(5); break;
    case 2: ext(9); break;
    case 3: ext(11); break;
    case 4: ext(2); break;
    case 5: ext(7); break;
    default: return 3;
    }
    return 0;
}
"""


@pytest.mark.parametrize("cc", ["gcc-12"])        # clang-19 turns this switch into a lookup of ext's argument
def test_a_jump_table_ends_the_path_without_a_call(compile_c, tmp_path, cc):
    """``jmp *table(,%reg,8)`` is a switch, not a tail call: the path ends there and counts no call
    (objdump shows the jump through the table's relocation into .rodata)."""
    src = tmp_path / "switch.c"
    src.write_text(SWITCH_C)
    obj = compile_c(cc, src, *KERNEL_FLAGS, name=f"switch-{cc}.o")
    dump = subprocess.run(["objdump", "-dr", "-w", str(obj)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"jmp\s+\*0x0\(,%r\w+,8\)\s+\S+: R_X86_64_32S\s+\.rodata", dump), dump   # a table indeed
    (path,) = hot_likely_paths(obj, HotPaths(["lp_switch"]))
    assert path.end == "switch" and path.calls == [] and path.instructions[-1].kind == "switch"
