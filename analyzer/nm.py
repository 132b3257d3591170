"""The symbol list of ``nm --size-sort``, computed from the ELF directly.

bloat-o-meter runs ``nm --size-sort`` and keeps symbols by their type letter;
to be byte-identical we must choose the same symbols and letters as binutils:
``bfd_decode_symclass`` (bfd/syms.c) over the flags ELF symbols get in
``elf_slurp_symbol_table``, and nm's ``filter_symbols``/``sort_symbols_by_size``
(no debugging, absolute or undefined symbols; ELF st_size; size 0 dropped).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzer.elf import (SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHN_ABS, SHN_COMMON, SHN_UNDEF,
                          SHT_NOBITS, STB_GLOBAL, STB_GNU_UNIQUE, STB_LOCAL, STB_WEAK, STT_FILE,
                          STT_GNU_IFUNC, STT_OBJECT, STT_SECTION, ElfImage, Section, SymbolTable,
                          read_symtab)

# coff_section_type(): the only name-based letters left in binutils' table.
_NAMED = ((".drectve", "i"), (".edata", "e"), (".idata", "i"), (".pdata", "p"))
_DEBUG_PREFIXES = (".debug", ".gnu.linkonce.wi.", ".zdebug", ".line", ".stab", ".gdb_index")


def section_letter(sec: Section) -> str:
    """nm's lower-case letter for a symbol defined in this section."""
    for prefix, letter in _NAMED:
        rest = sec.name[len(prefix):len(prefix) + 1]
        if sec.name.startswith(prefix) and rest in (".", "$", ""):
            return letter
    has_contents = sec.type != SHT_NOBITS
    if sec.flags & SHF_EXECINSTR:
        return "t"
    load = bool(sec.flags & SHF_ALLOC) and has_contents
    if load:                                  # SEC_DATA
        return "r" if not sec.flags & SHF_WRITE else "d"
    if not has_contents:
        return "b"
    if sec.name.startswith(_DEBUG_PREFIXES):  # SEC_DEBUGGING
        return "N"
    if not sec.flags & SHF_WRITE:              # contents, read-only
        return "n"
    return "?"


@dataclass(frozen=True)
class NmSymbol:
    size: int
    letter: str
    name: str
    section: str      # "" for common symbols


def letters(table: SymbolTable) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, letter codes) for every symbol, as nm --size-sort would list them."""
    e = table.entries
    shndx = table.shndx
    nsec = len(table.image.sections)
    bind = e["info"] >> 4
    stype = e["info"] & 0xF
    # Per-section letter table, indexed by section number.
    sec_letters = np.frombuffer("".join(section_letter(s) for s in table.image.sections).encode()
                                or b"?", dtype=np.uint8)
    valid = shndx < nsec
    base = np.full(len(e), ord("?"), dtype=np.uint8)
    base[valid] = sec_letters[shndx[valid]]
    glob = bind == STB_GLOBAL
    code = np.where(glob, base - 32 * ((base >= ord("a")) & (base <= ord("z"))), base).astype(np.uint8)
    code[(bind != STB_LOCAL) & (bind != STB_GLOBAL)] = ord("?")
    code[bind == STB_GNU_UNIQUE] = ord("u")
    weak = bind == STB_WEAK
    is_obj = stype == STT_OBJECT
    code[weak & is_obj] = ord("V")
    code[weak & ~is_obj] = ord("W")
    code[stype == STT_GNU_IFUNC] = ord("i")
    common = shndx == SHN_COMMON
    code[common] = ord("C")
    keep = (
        (e["size"] != 0)
        & (stype != STT_SECTION) & (stype != STT_FILE)
        & (shndx != SHN_UNDEF) & (shndx != SHN_ABS)
        & (valid | common)
    )
    keep[0] = False  # the null symbol is not a symbol to bfd
    return keep, code


def size_sort(img: ElfImage) -> list[NmSymbol]:
    """What ``nm --size-sort`` lists for one image (order not significant to callers)."""
    table = read_symtab(img)
    if table is None:
        return []
    keep, code = letters(table)
    idx = np.flatnonzero(keep)
    names = table.names(idx)
    sizes = table.entries["size"][idx].tolist()
    chars = code[idx].tobytes().decode("ascii")
    secnames = [s.name for s in img.sections]
    nsec = len(secnames)
    secs = [secnames[i] if i < nsec else "" for i in table.shndx[idx].tolist()]
    return [NmSymbol(s, c, n, sec) for s, c, n, sec in zip(sizes, chars, names, secs)]
