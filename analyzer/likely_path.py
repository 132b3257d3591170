"""The likely path through a hot function, and what it costs statically.

The seeds argue about cycles on the allocator's fast path: a call that stayed a call, a branch,
a spill, one more cache line. Compilers already say which way they expect each branch to go
through *layout*: the expected successor of a conditional branch is its fall-through, and blocks
they consider unlikely are moved out of line (``.text.unlikely``, ``foo.cold`` parts, or after
the function's return). So the likely path is read from the bytes alone: from the entry follow
fall-through and unconditional jumps, leave out jumps into cold parts, stop at a return, a tail
call, a trap, or a jump back to an instruction already on the path (one pass of a loop). Two
kernel idioms the compilers cannot see through are read as the kernel means them: a block that
ends in BUG()'s ``ud2`` is never the likely side of a branch (like a noreturn call), and a
``static_cpu_has()`` jump into ``.altinstr_aux`` is patched away at boot (the path falls through).

On arm64 the same reading: ``b.cond``/``cbz``/``cbnz``/``tbz``/``tbnz`` are the conditional
branches, ``b`` inside the function a jump and to another function a tail call, ``bl`` a call,
``blr`` an indirect call, ``ret``/``retaa``/``retab`` a return, ``brk`` (BUG()'s ``brk #0x800``),
``udf`` and ``hlt`` traps; a ``br`` whose path formed a base with ``adr`` to a label inside the
function is a switch's jump table, any other ``br`` an indirect tail call. Callee-saved
registers are the x19-x29 stored to the stack (``stp``/``str`` with ``sp`` as base); the frame
is every byte ``sub sp, sp, #N`` and pre-indexed stores (``stp x29, x30, [sp, #-N]!``) lower the
stack pointer by: arm64 has no pushes, so the register save area is in it.

Addresses are section offsets in a relocatable object (lines are then 64-byte lines of the
section, which gcc aligns to 16 and the linker may place anywhere: an upper bound of what the
linked code touches) and link addresses in a linked file (the lines are real).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from analyzer.calls import _A64_BRANCH_RELOCS, _BRANCH_RELOCS, EM_AARCH64, EM_X86_64, _Resolver, a64_branch
from analyzer.clones import parse as parse_clone
from analyzer.elf import SHF_EXECINSTR, SHT_NOBITS, ElfImage, load_images, read_symtab
from analyzer.errors import InputError
from analyzer.hotpaths import HotPaths
from analyzer.relocs import read_relocations, section_bases, split_address, symbol_addresses

LINE = 64
CALLEE_SAVED = ("%rbx", "%rbp", "%r12", "%r13", "%r14", "%r15")
# Kernel thunks: a jump to the return thunk is a return; the indirect thunks are indirect calls.
RETURN_THUNKS = ("__x86_return_thunk", "__x86_return_thunk_", "zen_untrain_ret", "srso_return_thunk")
INDIRECT_THUNK = "__x86_indirect_thunk_"
_ALT_SECTIONS = (".altinstr_aux", ".altinstr_replacement")
_TRAPS = ("ud2", "int3", "hlt", "ud1", "ud0")
# arm64: traps (BUG() is brk #0x800), the other branches, what reads or writes memory, callee-saved
_A64_TRAPS = frozenset(("brk", "udf", "hlt"))
_A64_BRANCHES = frozenset(("cbz", "cbnz", "tbz", "tbnz"))
_A64_MEMORY = ("ld", "st", "cas", "swp")
A64_CALLEE_SAVED = frozenset(f"x{n}" for n in range(19, 30))
_COND_JUMPS = frozenset(("jo", "jno", "jb", "jae", "je", "jne", "jbe", "ja", "js", "jns", "jp", "jnp",
                         "jl", "jge", "jle", "jg", "jcxz", "jecxz", "jrcxz", "loop", "loope", "loopne"))


# an indirect jmp through a scaled index (``jmp *0x0(,%rax,8)``, ``notrack jmp *(%rdx,%rax,8)``): a
# switch's jump table, not a tail call (kernels build with -fno-jump-tables under retpoline, so it is rare)
_JUMP_TABLE = re.compile(r"\(\s*(%[a-z0-9]+)?\s*,\s*%[a-z0-9]+\s*,\s*[248]\s*\)")


@dataclass(frozen=True)
class PathInsn:
    """One instruction on the likely path, in path order."""
    address: int          # section offset (.o) or link address (linked file)
    size: int
    mnemonic: str
    operands: str         # AT&T, as capstone prints them
    kind: str             # "" | "jcc" | "jmp" | "call" | "ret" | "tail" | "trap" | "alt" | "switch"
    target: str | None = None   # the called/jumped-to symbol (calls, tail calls, cold jumps)
    cold: bool = False    # a conditional jump into an out-of-line unlikely part (left out)
    memory: bool = False  # has a memory operand that is accessed (not lea/nop)
    taken: bool = False   # a conditional jump the path takes (its fall-through is a BUG() trap)

    def to_dict(self) -> dict:
        return {"address": self.address, "size": self.size, "mnemonic": self.mnemonic,
                "operands": self.operands, "kind": self.kind, "target": self.target,
                "cold": self.cold, "memory": self.memory, "taken": self.taken}


@dataclass(frozen=True)
class PathCall:
    address: int
    target: str           # symbol name, or "*indirect" for an indirect call without a thunk
    kind: str             # "call" | "tail" | "indirect"

    def to_dict(self) -> dict:
        return {"address": self.address, "target": self.target, "kind": self.kind}


@dataclass
class LikelyPath:
    """The likely path of one function and its static measures."""
    function: str
    section: str
    start: int                      # entry address (section offset or link address)
    size: int                       # the whole function symbol's size
    linked: bool                    # addresses are link addresses (else section offsets)
    instructions: list[PathInsn]
    end: str                        # why the walk stopped: ret | tail | switch | loop | trap | cold | end | undecodable
    calls: list[PathCall] = field(default_factory=list)
    pushes: list[str] = field(default_factory=list)   # callee-saved registers pushed
    frame: int = 0                  # bytes taken by `sub $N, %rsp` (pushes not included)
    arch: str = "x86_64"            # the code's machine (analyzer.elf's name): "x86_64" | "aarch64"

    @property
    def insns(self) -> int:
        return len(self.instructions)

    @property
    def bytes(self) -> int:
        return sum(i.size for i in self.instructions)

    @property
    def branches(self) -> int:
        """Conditional branches on the path (each a chance to leave it)."""
        return sum(1 for i in self.instructions if i.kind == "jcc")

    @property
    def cold_exits(self) -> int:
        return sum(1 for i in self.instructions if i.cold)

    @property
    def memory_operands(self) -> int:
        return sum(1 for i in self.instructions if i.memory)

    @property
    def lines(self) -> list[int]:
        """Start addresses of the 64-byte lines the path's instruction bytes touch."""
        out: set[int] = set()
        for i in self.instructions:
            out.update(range(i.address // LINE * LINE, i.address + i.size, LINE))
        return sorted(out)

    def summary(self) -> dict:
        return {"function": self.function, "section": self.section, "start": self.start,
                "linked": self.linked, "insns": self.insns, "bytes": self.bytes,
                "branches": self.branches, "cold_exits": self.cold_exits,
                "calls": [c.to_dict() for c in self.calls], "pushes": list(self.pushes),
                "frame": self.frame, "memory_operands": self.memory_operands,
                "lines": len(self.lines), "line_addresses": self.lines, "end": self.end}

    def to_dict(self) -> dict:
        d = self.summary()
        d["size"] = self.size
        d["instructions"] = [i.to_dict() for i in self.instructions]
        return d


def _is_cold_section(name: str) -> bool:
    return name.startswith(".text.unlikely") or name.startswith(".text.cold")


class _Object:
    """What the walk needs of one ELF image: code bytes, relocations, symbol resolution."""

    def __init__(self, img: ElfImage):
        if img.machine not in (EM_X86_64, EM_AARCH64) or (img.machine == EM_AARCH64 and not img.little):
            raise InputError(f"{img.name}: the likely path needs x86-64 or little-endian aarch64 code, "
                             f"not {img.machine_name}")
        table = read_symtab(img)
        if table is None:
            raise InputError(f"{img.name}: no symbol table (stripped?)")
        import capstone
        self.img = img
        self.table = table
        self.names = table.all_names()
        self.res = _Resolver(img, table, self.names)
        self.bases = section_bases(img)
        self.symaddr = symbol_addresses(img, table)
        self.a64 = img.machine == EM_AARCH64
        if self.a64:
            self.md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
        else:
            self.md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
            self.md.syntax = capstone.CS_OPT_SYNTAX_ATT
        self.md.detail = True
        self._relmaps: dict[int, dict[int, tuple[int, int]]] = {}

    def functions(self) -> list[tuple[int, str]]:
        """(symbol index, name) of every sized function symbol in executable code."""
        st = self.table.entries["info"] & 0xF
        out = []
        for si in self.res.idx.tolist():
            if st[si] != 2:
                continue
            shn = int(self.table.shndx[si])
            if shn >= len(self.img.sections):       # SHN_ABS, SHN_COMMON, or a damaged index: not code here
                continue
            sec = self.img.sections[shn]
            if sec.flags & SHF_EXECINSTR and sec.type != SHT_NOBITS:
                out.append((si, self.names[si]))
        return out

    def relmap(self, shn: int) -> dict[int, tuple[int, int]]:
        if shn not in self._relmaps:
            relmap: dict[int, tuple[int, int]] = {}
            if self.img.relocatable:
                rel = read_relocations(self.img, self.img.sections[shn])
                if rel is not None:
                    kinds = _A64_BRANCH_RELOCS if self.a64 else _BRANCH_RELOCS
                    m = np.isin(rel.type, np.array(kinds, dtype=np.uint32))
                    if m.any() and int(rel.sym[m].max()) >= len(self.names):
                        raise InputError(f"{self.img.name}: a relocation of {self.img.sections[shn].name} names "
                                         f"symbol {int(rel.sym[m].max())}, past the symbol table's {len(self.names)}")
                    relmap = dict(zip(rel.offset[m].tolist(), zip(rel.sym[m].tolist(), rel.addend[m].tolist())))
            self._relmaps[shn] = relmap
        return self._relmaps[shn]

    def _block_traps(self, code: bytes, off: int, pc: int) -> bool:
        """Does the straight-line block at ``pc`` end in a trap (BUG(): ``ud2``)? The compilers
        do not know that an asm ``ud2`` never returns, so they may lay it out as fall-through;
        like a call to a noreturn function it is never the likely way."""
        for _, _, mnem, _ in self.md.disasm_lite(code[off:off + 64], pc):
            if mnem.startswith(_TRAPS):
                return True
            if mnem.startswith(("j", "ret", "call", "loop")):
                return False
        return False

    def walk(self, si: int) -> LikelyPath:
        if self.a64:
            return self._walk_a64(si)
        img = self.img
        shn = int(self.table.shndx[si])
        if shn >= len(img.sections):
            raise InputError(f"{img.name}: symbol {self.names[si]} is not in a section of this file (index {shn})")
        sec = img.sections[shn]
        sbase = int(self.bases[shn]) if img.relocatable else sec.addr
        fstart = int(self.symaddr[si])
        size = int(self.table.entries["size"][si])
        fend = fstart + size
        foff = fstart - sbase
        name = self.names[si]
        if foff < 0 or foff + size > sec.size:
            raise InputError(f"{img.name}: corrupt symbol {name} (past the end of {sec.name})")
        code = bytes(img.data[sec.offset + foff:sec.offset + foff + size])
        relmap = self.relmap(shn)
        base = parse_clone(name).base
        # shown addresses: section offsets in a .o, link addresses in a linked file
        shown = (lambda a: a - sbase) if img.relocatable else (lambda a: a)
        insns: list[PathInsn] = []
        calls: list[PathCall] = []
        pushes: list[str] = []
        frame = 0
        seen: set[int] = set()
        pc = fstart
        end = "end"
        import capstone.x86 as x86
        while True:
            if pc in seen:
                end = "loop"
                break
            if not fstart <= pc < fend:
                end = "end"
                break
            seen.add(pc)
            off = pc - fstart
            got = next(self.md.disasm(code[off:off + 16], pc, 1), None)
            if got is None:
                end = "undecodable"
                break
            mnem, ops, isize = got.mnemonic, got.op_str, got.size
            memory = (not mnem.startswith(("lea", "nop", "prefetch"))
                      and any(o.type == x86.X86_OP_MEM for o in got.operands))
            kind = ""
            target_name: str | None = None
            cold = False
            nxt = pc + isize
            groups = set(got.groups)
            is_call = x86.X86_GRP_CALL in groups
            is_jump = x86.X86_GRP_JUMP in groups
            is_ret = x86.X86_GRP_RET in groups or mnem.startswith(("ret", "iret", "sysret"))
            taken = False
            if mnem.startswith(_TRAPS):
                kind = "trap"
            elif is_ret:
                kind = "ret"
            elif is_call or is_jump:
                direct = ops.startswith("0x") or ops.startswith("$0x")
                target: int | None = None
                if direct:
                    fld = pc - sbase + isize - 4
                    r = relmap.get(fld) if isize >= 5 else None
                    if r is not None:
                        sym, addend = r
                        if int(self.table.shndx[sym]) == 0:
                            target_name = self.names[sym]
                        else:
                            target = int(self.symaddr[sym]) + addend + 4
                    else:
                        target = int(ops.lstrip("$"), 16)
                inside = target is not None and fstart <= target < fend
                if target is not None and not inside:
                    target_name = self.res.at(target)
                cold_target = False
                tsec_name = ""
                if target is not None and not inside:
                    tsec, _ = split_address(img, target)
                    tsec_name = img.sections[tsec].name if 0 < tsec < len(img.sections) else ""
                    cold_target = _is_cold_section(tsec_name) or (
                        target_name is not None and parse_clone(target_name).is_cold)
                    if target_name is None and not 0 < tsec < len(img.sections):
                        raise InputError(f"{img.name}: a jump at {pc:#x} in {name} leads to {target:#x}, "
                                         "outside every section")
                    if target_name is None:
                        target_name = f"{tsec_name}+{target - int(self.bases[tsec]) if img.relocatable else target:#x}"
                if is_call:
                    kind = "call"
                    if not direct:
                        calls.append(PathCall(shown(pc), ops if ops.startswith("*") else "*" + ops, "indirect"))
                    else:
                        tn = target_name or f"{target:#x}"
                        calls.append(PathCall(shown(pc), tn, "indirect" if tn.startswith(INDIRECT_THUNK) else "call"))
                elif direct and not inside and tsec_name.startswith(_ALT_SECTIONS):
                    kind = "alt"      # static_cpu_has(): a jmp that alternatives patch at boot
                elif mnem.startswith("jmp"):
                    if not direct and _JUMP_TABLE.search(ops):
                        kind = "switch"   # a switch's jump table: which case is likely is not in the code
                    elif not direct:
                        kind = "tail"
                        calls.append(PathCall(shown(pc), ops if ops.startswith("*") else "*" + ops, "indirect"))
                    elif inside:
                        kind = "jmp"
                    elif target_name is not None and target_name.startswith(RETURN_THUNKS):
                        kind = "ret"
                    elif cold_target or (target_name and parse_clone(target_name).base == base):
                        kind = "jmp"
                        cold = True
                    else:
                        kind = "tail"
                        calls.append(PathCall(shown(pc), target_name or f"{target:#x}",
                                              "indirect" if (target_name or "").startswith(INDIRECT_THUNK) else "tail"))
                elif mnem in _COND_JUMPS:
                    kind = "jcc"
                    cold = cold_target or (target_name is not None and not inside
                                           and parse_clone(target_name).base == base)
                    if inside and not cold and self._block_traps(code, nxt - fstart, nxt):
                        taken = True
            if mnem.startswith("push") and ops in CALLEE_SAVED:
                pushes.append(ops.lstrip("%"))
            elif mnem.startswith("sub") and ops.endswith(", %rsp") and ops.startswith("$"):
                frame += int(ops[1:ops.index(",")], 0)
            elif mnem.startswith("add") and ops.endswith(", %rsp") and ops.startswith("$-"):
                frame += -int(ops[1:ops.index(",")], 0)
            if (is_call or is_jump) and direct and target is not None and img.relocatable:
                ops = f"{shown(target):#x}" if inside or target_name is None else ops
            if (is_call or is_jump) and direct and img.relocatable and not inside:
                ops = target_name or ops
            insns.append(PathInsn(shown(pc), isize, mnem, ops, kind, target_name, cold, memory, taken))
            if kind in ("ret", "tail", "trap", "switch"):
                end = kind
                break
            if taken:
                pc = target  # type: ignore[assignment]
                continue
            if kind == "jmp":
                if cold:
                    end = "cold"
                    break
                pc = target  # type: ignore[assignment]
                continue
            pc = nxt
        return LikelyPath(name, sec.name, shown(fstart), size, not img.relocatable, insns, end, calls,
                          pushes, frame)


    def _a64_block_traps(self, code: bytes, off: int, pc: int) -> bool:
        """arm64 twin of :meth:`_block_traps`: the straight-line block at ``pc`` ends in ``brk``
        (BUG()), ``udf`` or ``hlt`` before any branch."""
        for _, _, mnem, _ in self.md.disasm_lite(code[off:off + 64], pc):
            if mnem in _A64_TRAPS:
                return True
            if mnem.startswith("b") or mnem in _A64_BRANCHES or mnem.startswith("ret"):
                return False
        return False

    def _walk_a64(self, si: int) -> LikelyPath:
        import capstone.arm64 as arm64
        img = self.img
        shn = int(self.table.shndx[si])
        if shn >= len(img.sections):
            raise InputError(f"{img.name}: symbol {self.names[si]} is not in a section of this file (index {shn})")
        sec = img.sections[shn]
        sbase = int(self.bases[shn]) if img.relocatable else sec.addr
        fstart = int(self.symaddr[si])
        size = int(self.table.entries["size"][si])
        fend = fstart + size
        foff = fstart - sbase
        name = self.names[si]
        if foff < 0 or foff + size > sec.size:
            raise InputError(f"{img.name}: corrupt symbol {name} (past the end of {sec.name})")
        code = bytes(img.data[sec.offset + foff:sec.offset + foff + size])
        relmap = self.relmap(shn)
        base = parse_clone(name).base
        shown = (lambda a: a - sbase) if img.relocatable else (lambda a: a)
        insns: list[PathInsn] = []
        calls: list[PathCall] = []
        pushes: list[str] = []
        frame = 0
        seen: set[int] = set()
        table_base = False        # an adr to a label of this function: a jump table's base
        pc = fstart
        end = "end"
        while True:
            if pc in seen:
                end = "loop"
                break
            if not fstart <= pc < fend:
                end = "end"
                break
            seen.add(pc)
            off = pc - fstart
            got = next(self.md.disasm(code[off:off + 4], pc, 1), None)
            if got is None:
                end = "undecodable"
                break
            mnem, ops, isize = got.mnemonic, got.op_str, got.size
            memory = mnem != "prfm" and (mnem.startswith(_A64_MEMORY)
                                         or any(o.type == arm64.ARM64_OP_MEM for o in got.operands))
            kind = ""
            target_name: str | None = None
            cold = False
            taken = False
            nxt = pc + isize
            br = a64_branch(mnem, ops)
            target: int | None = None
            inside = False
            if mnem in _A64_TRAPS:
                kind = "trap"
            elif mnem in ("ret", "retaa", "retab", "eret"):
                kind = "ret"
            elif mnem in ("blr", "blraa", "blraaz", "blrab", "blrabz"):
                kind = "call"
                calls.append(PathCall(shown(pc), "*" + ops, "indirect"))
            elif mnem in ("br", "braa", "braaz", "brab", "brabz"):
                if table_base:
                    kind = "switch"   # a switch's jump table: which case is likely is not in the code
                else:
                    kind = "tail"
                    calls.append(PathCall(shown(pc), "*" + ops, "indirect"))
            elif br is not None:
                r = relmap.get(pc - sbase)
                if r is not None:
                    sym, addend = r
                    if int(self.table.shndx[sym]) == 0:
                        target_name = self.names[sym]
                    else:
                        target = int(self.symaddr[sym]) + addend
                else:
                    target = br[1]
                inside = target is not None and fstart <= target < fend
                cold_target = False
                if target is not None and not inside:
                    target_name = self.res.at(target)
                    tsec, _ = split_address(img, target)
                    tsec_name = img.sections[tsec].name if 0 < tsec < len(img.sections) else ""
                    cold_target = _is_cold_section(tsec_name) or (
                        target_name is not None and parse_clone(target_name).is_cold)
                    if target_name is None and not 0 < tsec < len(img.sections):
                        raise InputError(f"{img.name}: a branch at {pc:#x} in {name} leads to {target:#x}, "
                                         "outside every section")
                    if target_name is None:
                        target_name = f"{tsec_name}+{target - int(self.bases[tsec]) if img.relocatable else target:#x}"
                own_piece = target_name is not None and not inside and parse_clone(target_name).base == base
                if target is None and target_name is None:
                    raise InputError(f"{img.name}: a branch at {pc:#x} in {name} has no target")
                if br[0] == "call":
                    kind = "call"
                    calls.append(PathCall(shown(pc), target_name or f"{target:#x}", "call"))
                elif mnem == "b":
                    if inside:
                        kind = "jmp"
                    elif cold_target or own_piece:
                        kind = "jmp"
                        cold = True
                    else:
                        kind = "tail"
                        calls.append(PathCall(shown(pc), target_name or f"{target:#x}", "tail"))
                else:
                    kind = "jcc"
                    cold = cold_target or own_piece
                    if inside and not cold and self._a64_block_traps(code, nxt - fstart, nxt):
                        taken = True
                if img.relocatable:
                    # operands as objdump shows a .o: section offsets inside, symbols outside
                    shown_target = f"{shown(target):#x}" if inside else (target_name or "")
                    ops = ops[:ops.rfind("#")] + shown_target if "#" in ops else shown_target
            elif mnem == "adr":
                t = got.operands[-1].imm if got.operands else None
                if t is not None and fstart <= t < fend:
                    table_base = True
            # saved callee-saved registers and the stack the function takes
            if mnem in ("stp", "str") and got.operands and got.operands[-1].type == arm64.ARM64_OP_MEM \
                    and got.operands[-1].mem.base == arm64.ARM64_REG_SP:
                for o in got.operands[:-1]:
                    if o.type == arm64.ARM64_OP_REG:
                        reg = got.reg_name(o.reg)
                        if reg in A64_CALLEE_SAVED:
                            pushes.append(reg)
                if got.writeback and got.operands[-1].mem.disp < 0:
                    frame += -got.operands[-1].mem.disp
            elif mnem == "sub" and len(got.operands) == 3 and all(
                    o.type == arm64.ARM64_OP_REG and o.reg == arm64.ARM64_REG_SP for o in got.operands[:2]) \
                    and got.operands[2].type == arm64.ARM64_OP_IMM:
                o = got.operands[2]
                frame += o.imm << (o.shift.value if o.shift.type == arm64.ARM64_SFT_LSL else 0)
            insns.append(PathInsn(shown(pc), isize, mnem, ops, kind, target_name, cold, memory, taken))
            if kind in ("ret", "tail", "trap", "switch"):
                end = kind
                break
            if taken:
                pc = target  # type: ignore[assignment]
                continue
            if kind == "jmp":
                if cold:
                    end = "cold"
                    break
                pc = target  # type: ignore[assignment]
                continue
            pc = nxt
        return LikelyPath(name, sec.name, shown(fstart), size, not img.relocatable, insns, end, calls,
                          pushes, frame, "aarch64")


def _image(path: str) -> ElfImage:
    images = load_images(path)
    if len(images) != 1:
        raise InputError(f"{path}: an archive; give one object or a linked file")
    return images[0]


def likely_path(path: str, function: str) -> LikelyPath:
    """The likely path of ``function`` (a symbol name) in the object or linked file at ``path``."""
    obj = _Object(_image(path))
    for si, name in obj.functions():
        if name == function:
            return obj.walk(si)
    raise InputError(f"{path}: no function {function!r} (not a sized function symbol)")


def hot_likely_paths(path: str, hot: HotPaths | None = None) -> list[LikelyPath]:
    """The likely paths of every hot function in the file (clones included, ``.cold`` parts not),
    in address order."""
    hot = hot or HotPaths()
    obj = _Object(_image(path))
    out = []
    for si, name in obj.functions():
        if name in hot and not parse_clone(name).is_cold:
            out.append(obj.walk(si))
    return out
