"""RELA relocations of a relocatable object, read and applied in bulk with numpy.

pyelftools applies ``.rela.debug_*`` one entry at a time in Python (2.25 s of a
2.6 s DWARF walk on a gcc-12 page_alloc.o with 21k entries); here a whole
section's relocations are one vectorised pass.

Addresses in a ``.o`` are section-relative, so a DWARF ``low_pc`` in ``.text``
and one in ``.text.unlikely`` could both read 0x40. :func:`section_bases` gives
every allocated section a distinct synthetic base (its index << 32, a "virtual
link"), and relocations against symbols add their section's base: after that
one number identifies (section, offset) everywhere (DWARF, symbols, calls).
Linked files (ET_EXEC/ET_DYN) keep their real addresses and their emitted
relocations (``--emit-relocs``) must never be applied again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzer.elf import SHF_ALLOC, SHN_LORESERVE, ElfImage, Section, SymbolTable
from analyzer.errors import InputError

SHT_RELA = 4
SHT_REL = 9

EM_X86_64 = 62
EM_AARCH64 = 183
# x86-64 relocation types: (width in bytes, pc-relative)
R_X86_64 = {
    0: None,            # R_X86_64_NONE
    1: (8, False),      # 64
    2: (4, True),       # PC32
    4: (4, True),       # PLT32
    10: (4, False),     # 32
    11: (4, False),     # 32S
    24: (8, True),      # PC64
}
R_X86_64_NAMES = {1: "R_X86_64_64", 2: "R_X86_64_PC32", 4: "R_X86_64_PLT32", 10: "R_X86_64_32",
                  11: "R_X86_64_32S", 24: "R_X86_64_PC64", 9: "R_X86_64_GOTPCREL",
                  41: "R_X86_64_GOTPCRELX", 42: "R_X86_64_REX_GOTPCRELX"}
# AArch64 data relocations (the ones debug sections use: gcc-12 and clang-19 emit ABS64 and ABS32
# into .debug_*, PREL32 into .eh_frame): (width in bytes, pc-relative). ELF for the Arm 64-bit
# Architecture, 5.7.6 "Static data relocations".
R_AARCH64 = {
    0: None,            # R_AARCH64_NONE
    256: None,          # R_AARCH64_NONE (the withdrawn ELF32 number, still "none" to binutils)
    257: (8, False),    # ABS64
    258: (4, False),    # ABS32
    259: (2, False),    # ABS16
    260: (8, True),     # PREL64
    261: (4, True),     # PREL32
    262: (2, True),     # PREL16
}
R_AARCH64_NAMES = {257: "R_AARCH64_ABS64", 258: "R_AARCH64_ABS32", 259: "R_AARCH64_ABS16",
                   260: "R_AARCH64_PREL64", 261: "R_AARCH64_PREL32", 262: "R_AARCH64_PREL16",
                   275: "R_AARCH64_ADR_PREL_PG_HI21", 277: "R_AARCH64_ADD_ABS_LO12_NC",
                   282: "R_AARCH64_JUMP26", 283: "R_AARCH64_CALL26", 311: "R_AARCH64_ADR_GOT_PAGE",
                   312: "R_AARCH64_LD64_GOT_LO12_NC"}
# per e_machine: (data relocation types, their names for messages)
DATA_RELOCS = {EM_X86_64: (R_X86_64, R_X86_64_NAMES), EM_AARCH64: (R_AARCH64, R_AARCH64_NAMES)}

SECTION_SHIFT = 32


@dataclass
class Relocations:
    """One relocation section's entries as numpy columns."""
    target: Section          # the section the relocations patch
    offset: np.ndarray       # uint64, offset in the target section
    sym: np.ndarray          # uint32 symbol index
    type: np.ndarray         # uint32 relocation type
    addend: np.ndarray       # int64


def section_bases(img: ElfImage) -> np.ndarray:
    """Per section index, the base address its symbols and relocations are placed at."""
    if not img.relocatable:
        return np.zeros(max(len(img.sections), 1), dtype=np.uint64)
    bases = np.zeros(max(len(img.sections), 1), dtype=np.uint64)
    for s in img.sections:
        if s.flags & SHF_ALLOC:
            bases[s.index] = np.uint64(s.index << SECTION_SHIFT)
    return bases


def split_address(img: ElfImage, addr: int) -> tuple[int, int]:
    """(section index, offset in section) of an address made with :func:`section_bases`."""
    if img.relocatable:
        return addr >> SECTION_SHIFT, addr & ((1 << SECTION_SHIFT) - 1)
    for s in img.sections:
        if s.flags & SHF_ALLOC and s.addr <= addr < s.addr + max(s.size, 1):
            return s.index, addr - s.addr
    return 0, addr


def symbol_addresses(img: ElfImage, table: SymbolTable) -> np.ndarray:
    """st_value plus the section base of every symbol (uint64)."""
    bases = section_bases(img)
    sh = table.shndx
    ok = sh < min(len(bases), SHN_LORESERVE)
    out = table.entries["value"].astype(np.uint64)
    out[ok] += bases[sh[ok]]
    return out


def read_relocations(img: ElfImage, target: Section, nsyms: int | None = None) -> Relocations | None:
    """The RELA section that patches ``target`` (None if there is none).

    ``nsyms``: the symbol table's length; a relocation naming a symbol past it is corrupt
    (callers index their symbol columns with these numbers).
    """
    rel = next((s for s in img.sections if s.type in (SHT_RELA, SHT_REL) and s.info == target.index), None)
    if rel is None:
        return None
    if rel.type == SHT_REL:
        raise InputError(f"{img.name}: REL relocations for {target.name} are not supported (only RELA)")
    e = "<" if img.little else ">"
    if img.elfclass == 64:
        dt = np.dtype([("offset", e + "u8"), ("info", e + "u8"), ("addend", e + "i8")])
    else:
        dt = np.dtype([("offset", e + "u4"), ("info", e + "u4"), ("addend", e + "i4")])
    if rel.size % dt.itemsize or rel.offset + rel.size > len(img.data):
        raise InputError(f"{img.name}: corrupt relocation section {rel.name}")
    raw = np.frombuffer(img.data, dtype=dt, count=rel.size // dt.itemsize, offset=rel.offset)
    info = raw["info"].astype(np.uint64)
    if img.elfclass == 64:
        sym, typ = (info >> np.uint64(32)).astype(np.uint32), (info & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    else:
        sym, typ = (info >> np.uint64(8)).astype(np.uint32), (info & np.uint64(0xFF)).astype(np.uint32)
    if nsyms is not None and len(sym) and int(sym.max()) >= nsyms:
        raise InputError(f"{img.name}: corrupt relocation in {rel.name} (symbol index {int(sym.max())} "
                         f"past the symbol table of {nsyms})")
    return Relocations(target, raw["offset"].astype(np.uint64), sym, typ, raw["addend"].astype(np.int64))


def relocated_bytes(img: ElfImage, sec: Section, table: SymbolTable | None,
                    symaddr: np.ndarray | None = None) -> bytes:
    """The contents of a (debug) section with its relocations applied: S + A (or S + A - P).

    Only relocatable objects are patched; a linked file's bytes are returned as they are.
    """
    data = bytes(img.section_bytes(sec))
    if not img.relocatable or table is None:
        return data
    rel = read_relocations(img, sec, len(table.entries))
    if rel is None or not len(rel.offset):
        return data
    if img.machine not in DATA_RELOCS:
        raise InputError(f"{img.name}: applying relocations for {img.machine_name} is not supported "
                         "(x86-64 and aarch64 only)")
    types, type_names = DATA_RELOCS[img.machine]
    if symaddr is None:
        symaddr = symbol_addresses(img, table)
    known = np.isin(rel.type, np.fromiter((k for k in types), dtype=np.uint32))
    if not known.all():
        bad = int(rel.type[~known][0])
        raise InputError(f"{img.name}: unknown relocation type {type_names.get(bad, bad)} in {sec.name}")
    # every patched field inside the section, checked unsigned (an offset of 2**63 or more
    # would turn negative as an index and patch from the end)
    top = max(types) + 1
    width = np.fromiter((types[t][0] if types.get(t) else 0 for t in range(top)),
                        dtype=np.uint64, count=top)[rel.type]
    patched = width > 0
    offs, size = rel.offset[patched], np.uint64(len(data))
    if bool(((offs >= size) | (offs + width[patched] > size)).any()):   # the first: no overflow below
        raise InputError(f"{img.name}: corrupt relocation in {sec.name} (offset past section end)")
    value = symaddr[rel.sym].astype(np.int64) + rel.addend
    pcrel = np.isin(rel.type, np.array([t for t, v in types.items() if v and v[1]], dtype=np.uint32))
    value[pcrel] -= rel.offset[pcrel].astype(np.int64)
    buf = np.frombuffer(bytearray(data), dtype=np.uint8)
    uval = value.astype(np.uint64)
    for width in (2, 4, 8):
        mask = np.isin(rel.type, np.array([t for t, v in types.items() if v and v[0] == width],
                                          dtype=np.uint32))
        if not mask.any():
            continue
        offs = rel.offset[mask].astype(np.int64)     # checked above: 0 <= offs <= len - width
        v = uval[mask]
        for k in range(width):
            byte = ((v >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)
            buf[offs + (k if img.little else width - 1 - k)] = byte
    return buf.tobytes()
