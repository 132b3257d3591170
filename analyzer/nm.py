"""The symbol list of ``nm --size-sort``, computed from the ELF directly.

bloat-o-meter runs ``nm --size-sort`` and keeps symbols by their type letter;
to be byte-identical we must choose the same symbols and letters as binutils:
``bfd_decode_symclass`` (bfd/syms.c) over the flags ELF symbols get in
``elf_slurp_symbol_table``, and nm's ``filter_symbols``/``sort_symbols_by_size``
(no debugging, absolute or undefined symbols; ELF st_size; size 0 dropped).
"""
from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyzer.elf import (SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHN_ABS, SHN_COMMON, SHN_UNDEF,
                          SHN_XINDEX, SHT_NOBITS, SHT_SYMTAB, SHT_SYMTAB_SHNDX, STB_GLOBAL,
                          STB_GNU_UNIQUE, STB_LOCAL, STB_WEAK, STT_FILE, STT_GNU_IFUNC, STT_OBJECT,
                          STT_SECTION, ElfImage, Section, SymbolTable)
from analyzer.errors import InputError

if TYPE_CHECKING:
    import numpy as np

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
    """(keep mask, letter codes) for every symbol, as nm --size-sort would list them (numpy columns)."""
    import numpy as np
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


@dataclass
class Listing:
    """``nm --size-sort`` of one image as columns (no per-symbol objects: vmlinux has ~150k)."""
    names: list[str]
    sizes: list[int]
    letters: str                  # one nm type letter per symbol
    sections: list[str]           # defining section name, "" for common symbols

    def symbols(self) -> list[NmSymbol]:
        return [NmSymbol(*t) for t in zip(self.sizes, self.letters, self.names, self.sections)]


def listing(img: ElfImage) -> Listing | None:
    """What ``nm --size-sort`` lists for one image (order not significant); None if stripped.

    Plain struct unpacking, no numpy: sizediff's run time on an object is mostly
    interpreter start-up, and importing numpy alone would double it. The rules are
    those of :func:`letters` (kept in step by the tests against real nm).
    """
    symsec = next((s for s in img.sections if s.type == SHT_SYMTAB), None)
    if symsec is None:
        return None
    e = "<" if img.little else ">"
    # only name, info, shndx and size are needed: pad bytes skip the rest
    fmt = e + ("IBxH8xQ" if img.elfclass == 64 else "I4xIBxH")
    entsize = struct.calcsize(fmt)
    if symsec.entsize != entsize or symsec.size % entsize:
        raise InputError(f"{img.name}: corrupt symbol table (entry size {symsec.entsize})")
    if symsec.link >= len(img.sections):
        raise InputError(f"{img.name}: corrupt symbol table (string table index {symsec.link})")
    strtab = bytes(img.section_bytes(img.sections[symsec.link]))
    raw = img.data[symsec.offset:symsec.offset + symsec.size]
    rows = struct.iter_unpack(fmt, raw)
    if img.elfclass == 32:     # (name, size, info, shndx) -> the ELF64 order
        rows = ((n, i, x, z) for n, z, i, x in rows)
    xsec = next((s for s in img.sections if s.type == SHT_SYMTAB_SHNDX and s.link == symsec.index), None)
    xindex = array("I", bytes(img.section_bytes(xsec))) if xsec is not None else array("I")
    if xsec is not None and img.little != (struct.pack("=I", 1)[0] == 1):
        xindex.byteswap()
    secs = img.sections
    nsec = len(secs)
    low = [section_letter(s) for s in secs]
    up = [c.upper() if c.islower() else c for c in low]
    secnames = [s.name for s in secs]
    text = strtab.decode("ascii") + "\0" if strtab.isascii() else None   # a NUL past the end: find never fails
    nstr = len(strtab)
    names: list[str] = []
    sizes: list[int] = []
    codes: list[str] = []
    where: list[str] = []
    for i, (name, info, shndx, size) in enumerate(rows):
        if not size or i == 0:
            continue
        stype = info & 0xF
        if stype == STT_SECTION or stype == STT_FILE:
            continue
        if shndx == SHN_XINDEX and i < len(xindex):
            shndx = xindex[i]
        if shndx == SHN_UNDEF or shndx == SHN_ABS:
            continue
        bind = info >> 4
        if shndx < nsec:
            code = up[shndx] if bind == STB_GLOBAL else low[shndx]
            sec = secnames[shndx]
        elif shndx == SHN_COMMON:
            code, sec = "?", ""
        else:
            continue
        if bind != STB_LOCAL and bind != STB_GLOBAL:
            code = "?"
            if bind == STB_GNU_UNIQUE:
                code = "u"
            elif bind == STB_WEAK:
                code = "V" if stype == STT_OBJECT else "W"
        if stype == STT_GNU_IFUNC:
            code = "i"
        if shndx == SHN_COMMON:
            code = "C"
        if name >= nstr:
            raise InputError(f"{img.name}: corrupt symbol table (name offset past string table)")
        if text is not None:
            names.append(text[name:text.find("\0", name)])
        else:
            end = strtab.find(b"\0", name)
            names.append(strtab[name:end if end >= 0 else nstr].decode("utf-8", "surrogateescape"))
        sizes.append(size)
        codes.append(code)
        where.append(sec)
    return Listing(names, sizes, "".join(codes), where)


def size_sort(img: ElfImage) -> list[NmSymbol]:
    """What ``nm --size-sort`` lists for one image (order not significant to callers)."""
    got = listing(img)
    return got.symbols() if got else []
