"""Direct calls and tail jumps of every function, from x86-64 or AArch64 machine code (capstone).

x86-64: a ``call``/``jmp``/``jcc`` rel32 target is, in order: the relocation at the
rel32 field (``R_X86_64_PLT32``/``PC32`` against a symbol, or a section
symbol plus addend: target = S + A + 4), else the immediate itself (gas
resolves calls within a section in gcc objects and leaves no relocation).
AArch64: ``bl`` is a call; ``b``, ``b.cond``, ``cbz``/``cbnz``, ``tbz``/``tbnz`` leaving the
function are tail jumps. The target is the relocation at the instruction itself
(``R_AARCH64_CALL26``/``JUMP26``, or ``CONDBR19``/``TSTBR14``: target = S + A), else the
branch immediate (a linked file, or a branch gas resolved within its section).
Addresses use the relocs module's virtual link, so a jump from ``.text`` to
``foo.cold`` in ``.text.unlikely`` resolves like any other.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analyzer.clones import parse as parse_clone
from analyzer.elf import SHF_EXECINSTR, SHT_NOBITS, ElfImage, SymbolTable
from analyzer.errors import InputError
from analyzer.relocs import read_relocations, section_bases, symbol_addresses

EM_X86_64 = 62
EM_AARCH64 = 183
_BRANCH_RELOCS = (2, 4)        # R_X86_64_PC32, R_X86_64_PLT32
# R_AARCH64_TSTBR14, CONDBR19, JUMP26, CALL26: the relocations a branch instruction carries
_A64_BRANCH_RELOCS = (279, 280, 282, 283)
BRANCH_RELOCS = {EM_X86_64: _BRANCH_RELOCS, EM_AARCH64: _A64_BRANCH_RELOCS}
_A64_JUMPS = frozenset(("b", "cbz", "cbnz", "tbz", "tbnz"))


def capstone_for(img: ElfImage, what: str = "disassembly"):
    """A capstone disassembler for the image's machine (x86-64 or AArch64), else an InputError."""
    import capstone
    if img.machine == EM_X86_64:
        return capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    if img.machine == EM_AARCH64:
        if not img.little:
            raise InputError(f"{img.name}: {what} of big-endian aarch64 code is not supported")
        return capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    raise InputError(f"{img.name}: {what} supports x86-64 and aarch64 only, not {img.machine_name}")


def a64_branch(mnem: str, op: str) -> tuple[str, int | None] | None:
    """("call" | "jump", immediate target or None) of an AArch64 direct branch as capstone
    prints it (``bl #0x40``, ``b.ne #0x14``, ``cbz x0, #0x40``, ``tbnz w0, #0x1f, #0x1c``);
    None for anything else (indirect branches ``br``/``blr`` included)."""
    if mnem == "bl":
        kind = "call"
    elif mnem in _A64_JUMPS or mnem.startswith("b."):
        kind = "jump"
    else:
        return None
    imm = op.rpartition("#")[2]
    try:
        return kind, int(imm, 16)
    except ValueError:
        return kind, None


@dataclass(frozen=True)
class CallSite:
    caller: str           # function symbol holding the instruction
    target: str           # called function symbol (or undefined symbol name)
    section: str
    offset: int           # instruction offset in its section
    kind: str             # 'call' | 'tail' (jmp/jcc leaving the function)
    via: str              # 'reloc' | 'immediate'

    def to_dict(self) -> dict:
        return {"caller": self.caller, "target": self.target, "section": self.section,
                "offset": self.offset, "kind": self.kind, "via": self.via}


@dataclass
class CallGraph:
    sites: list[CallSite]
    undecodable: int = 0          # bytes capstone could not decode (skipped)
    branch_fields: set[tuple[int, int]] = field(default_factory=set)   # (section index, rel32 offset)

    def callers_of(self, name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.sites:
            if s.target == name:
                out[s.caller] = out.get(s.caller, 0) + 1
        return out


class _Resolver:
    """Address -> function symbol name over the whole (virtually linked) image."""

    def __init__(self, img: ElfImage, table: SymbolTable, names: list[str]):
        self.symaddr = symbol_addresses(img, table)
        st = table.entries["info"] & 0xF
        sizes = table.entries["size"]
        idx = np.flatnonzero(((st == 2) | (st == 0)) & (table.shndx != 0) & (table.shndx < 0xFF00)
                             & (sizes > 0))
        order = np.argsort(self.symaddr[idx], kind="stable")
        self.idx = idx[order]
        self.start = self.symaddr[self.idx]            # uint64: kernel addresses are above 2**63
        self.end = self.start + sizes[self.idx].astype(np.uint64)
        self.names = names

    def at(self, addr: int) -> str | None:
        if addr < 0 or addr >= 1 << 64:
            return None
        i = int(np.searchsorted(self.start, np.uint64(addr), side="right")) - 1
        # the innermost sized symbol containing addr (look back over a few overlapping ones)
        for j in range(i, max(i - 8, -1), -1):
            if int(self.start[j]) <= addr < int(self.end[j]):
                return self.names[int(self.idx[j])]
        return None


def call_graph(img: ElfImage, table: SymbolTable, only: set[int] | None = None) -> CallGraph:
    """Every direct call/tail jump in the function symbols (or the symbol indices in ``only``)."""
    md = capstone_for(img)
    a64 = img.machine == EM_AARCH64
    branch_relocs = BRANCH_RELOCS[img.machine]
    names = table.all_names()
    res = _Resolver(img, table, names)
    bases = section_bases(img)
    sites: list[CallSite] = []
    undecodable = 0
    relmaps: dict[int, dict[int, tuple[int, int]]] = {}
    branch_fields: set[tuple[int, int]] = set()
    st = table.entries["info"] & 0xF
    sizes = table.entries["size"]
    nsec = len(img.sections)
    for si in res.idx.tolist():
        if st[si] != 2 or (only is not None and si not in only):
            continue
        shn = int(table.shndx[si])
        if shn >= nsec:
            continue
        sec = img.sections[shn]
        if not sec.flags & SHF_EXECINSTR or sec.type == SHT_NOBITS:
            continue
        sbase = int(bases[shn]) if img.relocatable else sec.addr
        if shn not in relmaps:
            relmap: dict[int, tuple[int, int]] = {}
            if img.relocatable:
                rel = read_relocations(img, sec, len(table.entries))
                if rel is not None:
                    m = np.isin(rel.type, np.array(branch_relocs, dtype=np.uint32))
                    relmap = dict(zip(rel.offset[m].tolist(), zip(rel.sym[m].tolist(), rel.addend[m].tolist())))
            relmaps[shn] = relmap
        relmap = relmaps[shn]
        fstart = int(res.symaddr[si])
        size = int(sizes[si])
        fend = fstart + size
        foff = fstart - sbase
        if foff < 0 or foff + size > sec.size:
            raise InputError(f"{img.name}: corrupt symbol {names[si]} (past the end of {sec.name})")
        code = bytes(img.data[sec.offset + foff:sec.offset + foff + size])
        caller = names[si]
        caller_base = parse_clone(caller).base
        pos = 0
        while pos < size:
            last = pos
            for addr, isize, mnem, op in md.disasm_lite(code[pos:], fstart + pos):
                last = addr - fstart + isize
                if a64:
                    br = a64_branch(mnem, op)
                    if br is None:
                        continue
                    is_call = br[0] == "call"
                    fld = addr - sbase             # the relocation patches the instruction itself
                    r = relmap.get(fld)
                    imm, adjust = br[1], 0         # target = S + A
                else:
                    c = mnem[0]
                    if (c != "c" and c != "j") or not op.startswith("0x"):
                        continue
                    if mnem != "call" and c != "j":
                        continue
                    is_call = mnem == "call"
                    fld = addr - sbase + isize - 4
                    r = relmap.get(fld) if isize >= 5 else None
                    imm, adjust = int(op, 16), 4   # target = S + A + 4 (the rel32 field ends the insn)
                branch_fields.add((shn, fld))
                via = "immediate"
                target_name = None
                target: int | None
                if r is not None:
                    sym, addend = r
                    if int(table.shndx[sym]) == 0:
                        target_name, target = names[sym], None
                    else:
                        target = int(res.symaddr[sym]) + addend + adjust
                    via = "reloc"
                else:
                    target = imm
                    if target is None:
                        continue
                if target is not None:
                    if not is_call and fstart <= target < fend:
                        continue      # a branch inside the function
                    target_name = res.at(target)
                    if target_name is None:
                        continue
                    if not is_call and parse_clone(target_name).base == caller_base:
                        continue      # a jump into the function's own .cold/.part piece
                sites.append(CallSite(caller, target_name, sec.name, addr - sbase,
                                      "call" if is_call else "tail", via))
            if last >= size:
                break
            # capstone stops at an undecodable byte (x86) or word (aarch64): skip it and resume
            step = 4 if a64 else 1
            undecodable += step
            pos = last + step
    return CallGraph(sites, undecodable, branch_fields)


# Sections whose references to a function mean "its address is taken" (function pointers,
# export tables), unlike the kernel's code metadata (ORC, alternatives, jump tables, bug table...).
# x86-64: R_X86_64_64, PC32, 32, 32S. AArch64 in code: the low half of an address formed by
# adrp + add (ADD_ABS_LO12_NC), adr (ADR_PREL_LO21) or loaded from the GOT (LD64_GOT_LO12_NC):
# one per reference (the adrp's page relocation is its other half); in data ABS64, ABS32, PREL32.
_X86_REFS = frozenset((1, 2, 10, 11))
_A64_CODE_REFS = frozenset((274, 277, 312))
_A64_DATA_REFS = frozenset((257, 258, 261))
_POINTER_SECTIONS = (".data", ".rodata", ".init.data", ".ref.data", ".init.rodata", "__ksymtab", "___ksymtab")


def address_references(img: ElfImage, table: SymbolTable, graph: CallGraph) -> dict[str, int]:
    """Function symbols whose start address is taken: relocations to them from code (not a
    call/jump operand) or from data. Relocatable objects only (a linked file has resolved them)."""
    if not img.relocatable:
        return {}
    a64 = img.machine == EM_AARCH64
    names = table.all_names()
    res = _Resolver(img, table, names)
    starts: dict[int, str] = {}
    st = table.entries["info"] & 0xF
    for si in res.idx.tolist():
        if st[si] == 2:
            starts.setdefault(int(res.symaddr[si]), names[si])
    out: dict[str, int] = {}
    for rsec in img.sections:
        if rsec.type != 4 or not (0 < rsec.info < len(img.sections)):
            continue
        target = img.sections[rsec.info]
        if not target.flags & 0x2:
            continue
        is_code = bool(target.flags & SHF_EXECINSTR)
        if not is_code and not target.name.startswith(_POINTER_SECTIONS):
            continue
        rel = read_relocations(img, target, len(table.entries))
        if rel is None:
            continue
        kinds = _A64_CODE_REFS if a64 and is_code else _A64_DATA_REFS if a64 else _X86_REFS
        for off, sym, typ, add in zip(rel.offset.tolist(), rel.sym.tolist(), rel.type.tolist(),
                                      rel.addend.tolist()):
            if typ not in kinds or int(table.shndx[sym]) == 0:
                continue
            if is_code and (target.index, off) in graph.branch_fields:
                continue
            addr = int(res.symaddr[sym]) + add + (4 if typ == 2 and is_code and not a64 else 0)   # rip-relative operand
            name = starts.get(addr)
            if name is not None:
                out[name] = out.get(name, 0) + 1
    return out
