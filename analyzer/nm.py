"""The symbol list of ``nm --size-sort``, computed from the ELF directly.

bloat-o-meter runs ``nm --size-sort`` and keeps symbols by their type letter;
to be byte-identical we must choose the same symbols and letters as binutils:
``bfd_decode_symclass`` (bfd/syms.c) over the flags ELF symbols get in
``elf_slurp_symbol_table``, and nm's ``filter_symbols``/``sort_symbols_by_size``
(no debugging, absolute or undefined symbols; ELF st_size; size 0 dropped).
Those rules live in :func:`symbol_letter` alone; the readers below apply it
once per distinct (st_info, st_other, st_shndx), not once per symbol.
"""
from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

from analyzer.elf import (SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHN_COMMON, SHN_LORESERVE, SHN_UNDEF,
                          SHN_XINDEX, SHT_NOBITS, SHT_SYMTAB, SHT_SYMTAB_SHNDX, STB_GLOBAL,
                          STB_GNU_UNIQUE, STB_LOCAL, STB_WEAK, STT_FILE, STT_GNU_IFUNC, STT_OBJECT,
                          STT_SECTION, ElfImage, Section, SymbolTable, null_names,
                          strtab_sound, xindex_offset)
from analyzer.errors import InputError

TYPE_CHECKING = False   # typing.TYPE_CHECKING without importing typing (~4 ms of sizediff's start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import TypeVar

    import numpy as np

    V = TypeVar("V")

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


SHT_NULL, SHT_STRTAB, SHT_RELA, SHT_REL = 0, 3, 4, 9


def section_letters(img: ElfImage) -> list[str | None]:
    """:func:`section_letter` of every section, None for those binutils makes no BFD section of
    (bfd_section_from_shdr): a symbol "defined" there is absolute to nm, and ``--size-sort``
    leaves it out. Those are inactive (SHT_NULL) sections, the symbol table and its
    SHT_SYMTAB_SHNDX, the symbol and section name string tables, and the relocation sections
    that patch another section against the symbol table."""
    secs = img.sections
    n = len(secs)
    symtab = next((s.index for s in secs if s.type == SHT_SYMTAB), -1)
    strtab = secs[symtab].link if symtab >= 0 else -1
    out: list[str | None] = []
    for s in secs:
        t = s.type
        if (t == SHT_NULL or (t == SHT_SYMTAB and not s.flags & SHF_ALLOC) or t == SHT_SYMTAB_SHNDX
                or (t == SHT_STRTAB and s.index in (img.shstrndx, strtab))
                or (t in (SHT_RELA, SHT_REL) and s.link == symtab and not s.flags & SHF_ALLOC
                    and 0 < s.info < n and secs[s.info].type not in (SHT_RELA, SHT_REL, SHT_SYMTAB))):
            out.append(None)
        else:
            out.append(section_letter(s))
    for s in secs:
        # a relocation section bfd takes as one must patch a section it made: one it makes no
        # section of (the symbol table, its SHT_SYMTAB_SHNDX or string tables, an inactive one)
        # fails the whole file ("file format not recognized")
        if (s.type in (SHT_RELA, SHT_REL) and s.link == symtab and symtab >= 0 and not s.flags & SHF_ALLOC
                and 0 < s.info < n and secs[s.info].type not in (SHT_RELA, SHT_REL) and out[s.info] is None):
            raise InputError(f"{img.name}: corrupt relocation section {s.name or s.index} "
                             f"(it patches section {s.info}, which is not one nm reads)")
    return out


def symbol_letter(info: int, shndx: int, section_letters: list[str | None], xindex: bool = False) -> str | None:
    """nm's type letter for a symbol with this st_info and st_shndx, or None when
    ``nm --size-sort`` leaves it out whatever its size (section and file symbols,
    undefined, absolute, an index past the section table). ``xindex``: shndx came
    from SHT_SYMTAB_SHNDX, so it is a section index even in the reserved range.
    ``section_letters`` holds :func:`section_letters` of the image."""
    stype, bind = info & 0xF, info >> 4
    if stype == STT_SECTION or stype == STT_FILE or shndx == SHN_UNDEF:
        return None
    if shndx >= SHN_LORESERVE and not xindex:   # of the reserved indices nm lists only commons
        return "C" if shndx == SHN_COMMON else None
    if shndx >= len(section_letters) or section_letters[shndx] is None:
        return None
    if stype == STT_GNU_IFUNC:
        return "i"
    if bind == STB_LOCAL:
        return section_letters[shndx]
    if bind == STB_GLOBAL:
        return section_letters[shndx].upper()
    if bind == STB_WEAK:
        return "V" if stype == STT_OBJECT else "W"
    return "u" if bind == STB_GNU_UNIQUE else "?"


@dataclass(frozen=True)
class NmSymbol:
    size: int
    letter: str
    name: str
    section: str      # "" for common symbols


def letters(table: SymbolTable) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, letter codes) for every symbol, as nm --size-sort would list them (numpy columns).

    :func:`symbol_letter` runs once per distinct (st_info, section index) pair.
    """
    import numpy as np
    e = table.entries
    sec_letters = section_letters(table.image)
    xindex = e["shndx"] == SHN_XINDEX
    keys = e["info"].astype(np.uint64) | table.shndx.astype(np.uint64) << 8 | xindex.astype(np.uint64) << 40
    words = np.unique(keys)
    per_word = [symbol_letter(w & 0xFF, w >> 8 & 0xFFFFFFFF, sec_letters, bool(w >> 40)) or "\0"
                for w in words.tolist()]
    code = np.frombuffer("".join(per_word).encode(), dtype=np.uint8)[np.searchsorted(words, keys)]
    keep = (e["size"] != 0) & (code != 0)
    if len(keep):
        keep[0] = False  # the null symbol is not a symbol to bfd
    return keep, np.where(code != 0, code, ord("?")).astype(np.uint8)


def _word_value(img: ElfImage, value: Callable[[str, int], V | None]) -> Callable[[int], V | None]:
    """``value(letter, shndx)`` of a symbol from its raw st_info/st_other/st_shndx word
    (bits 32 and up: an SHN_XINDEX symbol's real section index); None if nm leaves it out."""
    order = "little" if img.little else "big"
    fields = struct.Struct(("<" if img.little else ">") + "BBH")
    letters_ = section_letters(img)

    def of(word: int) -> V | None:
        info, _other, shndx = fields.unpack((word & 0xFFFFFFFF).to_bytes(4, order))
        if word >> 32:
            shndx = word >> 32
        letter = symbol_letter(info, shndx, letters_, xindex=bool(word >> 32))
        return None if letter is None else value(letter, shndx)
    return of


def columns(img: ElfImage, value: Callable[[str, int], V | None]
            ) -> tuple[list[str], list[int], list[V]] | None:
    """Names, sizes and ``value(letter, section index)`` of the symbols ``nm --size-sort`` lists,
    leaving out those whose value is None (their names are never decoded); None if stripped.

    Plain struct unpacking, no numpy: sizediff's run time on an object is mostly
    interpreter start-up, and importing numpy alone would double it.
    """
    symsec = next((s for s in img.sections if s.type == SHT_SYMTAB), None)
    if symsec is None:
        return None
    e = "<" if img.little else ">"
    # name, the info/other/shndx word and size: pad bytes skip the rest
    fmt = e + ("II8xQ" if img.elfclass == 64 else "I4xII")
    entsize = struct.calcsize(fmt)
    if symsec.entsize != entsize or symsec.size % entsize:
        raise InputError(f"{img.name}: corrupt symbol table (entry size {symsec.entsize})")
    if symsec.link >= len(img.sections):
        raise InputError(f"{img.name}: corrupt symbol table (string table index {symsec.link})")
    strtab = img.section_bytes(img.sections[symsec.link])
    sound = strtab_sound(strtab)       # else nm shows every name as "(null)" (or "" for offset 0)
    # the null symbol (entry 0) is not a symbol to bfd
    rows: Iterable[tuple[int, int, int]] = struct.iter_unpack(
        fmt, img.data[symsec.offset + entsize:symsec.offset + symsec.size])
    if img.elfclass == 32:     # (name, size, word) -> the ELF64 order
        rows = ((n, w, z) for n, z, w in rows)
    nsyms = symsec.size // entsize
    xoff = xindex_offset(img, symsec, nsyms, lambda: _any_xindex(img, symsec, nsyms))
    if xoff is not None:
        rows = _resolve_xindex(img, xoff, nsyms, rows)
    value_of = _word_value(img, value)
    # memoized per word: a vmlinux has ~119k symbols but ~120 distinct words,
    # so the per-symbol cost is one lookup in a plain dict
    memo: dict[int, V | None] = {}
    text = str(strtab, "latin-1")            # one char per byte, one copy (vmlinux: 2.4 MB)
    if not text:                             # strtab_sound: a NUL at the end, find never fails
        text = "\0"
    nstr = len(strtab)
    if not sound:       # no name is read from it: offset 0 gives "", any other (made 1 below) "(null)"
        text, nstr = "\0" + null_names([1])[0] + "\0", 1
    find = text.find
    names: list[str] = []
    sizes: list[int] = []
    values: list[V] = []
    for name, word, size in rows:
        if size:
            try:
                v = memo[word]
            except KeyError:
                v = memo[word] = value_of(word)
            if v is not None:
                if name >= nstr:
                    if sound:
                        raise InputError(f"{img.name}: corrupt symbol table (name offset past string table)")
                    name = 1                         # "(null)"
                names.append(text[name:find("\0", name)])
                sizes.append(size)
                values.append(v)
    if not text.isascii():
        names = [n.encode("latin-1").decode("utf-8", "surrogateescape") for n in names]
    return names, sizes, values


def _any_xindex(img: ElfImage, symsec: Section, nsyms: int) -> bool:
    """Does any symbol (the null one too: bfd swaps it in) have st_shndx SHN_XINDEX? Two strided byte
    slices (st_shndx's two bytes of every entry), so no per-symbol Python work."""
    step, at = (24, 6) if img.elfclass == 64 else (16, 14)
    start, end = symsec.offset + at, symsec.offset + nsyms * step
    lo = img.data[start:end:step].tobytes()
    if b"\xff" not in lo:
        return False
    hi = img.data[start + 1:end:step].tobytes()
    return any(a == 0xFF and b == 0xFF for a, b in zip(lo, hi))


def _resolve_xindex(img: ElfImage, xoff: int, nsyms: int, rows: Iterable[tuple[int, int, int]]
                    ) -> Iterator[tuple[int, int, int]]:
    """The rows with an SHN_XINDEX symbol's section index (from SHT_SYMTAB_SHNDX) in bits 32+ of its word."""
    xindex = array("I", bytes(img.data[xoff:xoff + 4 * nsyms]))
    if img.little != (struct.pack("=I", 1)[0] == 1):
        xindex.byteswap()
    shift = 16 if img.little else 0           # where st_shndx sits in the word
    for i, (name, word, size) in enumerate(rows, 1):
        if word >> shift & 0xFFFF == SHN_XINDEX:     # xindex_offset: one entry per symbol
            word |= xindex[i] << 32
        yield name, word, size


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
    """What ``nm --size-sort`` lists for one image (order not significant); None if stripped."""
    secnames = [s.name for s in img.sections]
    got = columns(img, lambda letter, shndx: (letter, "" if letter == "C" else secnames[shndx]))
    if got is None:
        return None
    names, sizes, kinds = got
    return Listing(names, sizes, "".join(k[0] for k in kinds), [k[1] for k in kinds])


def size_sort(img: ElfImage) -> list[NmSymbol]:
    """What ``nm --size-sort`` lists for one image (order not significant to callers)."""
    got = listing(img)
    return got.symbols() if got else []
