"""ELF images and their symbol tables, read in bulk.

pyelftools iterates symbols one Python object at a time (5.7 s for a vmlinux);
here the section headers and the symbol table are decoded with numpy in one
go, which is what makes ``sizediff`` faster than ``nm | bloat-o-meter``.
Archives (``built-in.a``, including thin ones) yield one image per member
(:mod:`analyzer.archive`). Files come from strangers: every offset, size and
count is checked against the file (and against what a sparse file really
stores) before anything is built per entry; a bad one is an ``InputError``,
except for damage ``nm`` reads without a word, which is read the way binutils
reads it (:func:`strtab_sound`, :func:`xindex_offset`).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path


from analyzer.errors import InputError
from analyzer.files import open_input

TYPE_CHECKING = False   # typing.TYPE_CHECKING without importing typing (~4 ms of sizediff's start-up)
if TYPE_CHECKING:   # numpy is imported where used: sizediff's symbol listing does without it
    from collections.abc import Callable

    import numpy as np

# Section header types and flags we need.
SHT_NOBITS = 8
SHT_SYMTAB = 2
SHT_SYMTAB_SHNDX = 18
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF

STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_TLS = 0, 1, 2, 3, 4, 5, 6
STT_GNU_IFUNC = 10

EM_NAMES = {3: "i386", 62: "x86_64", 183: "aarch64", 40: "arm", 243: "riscv", 21: "ppc64",
            20: "ppc", 22: "s390", 8: "mips", 258: "loongarch"}


# slots: ~120 bytes a section, a file may claim millions; not frozen (never mutated, hashed
# by value all the same): a frozen dataclass's __init__ took 2.7 us a section against 0.4
@dataclass(slots=True, unsafe_hash=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int

    @property
    def alloc(self) -> bool:
        return bool(self.flags & SHF_ALLOC)

    @property
    def code(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)

    @property
    def nobits(self) -> bool:
        return self.type == SHT_NOBITS


@dataclass
class ElfImage:
    """One ELF file (or archive member): header facts, sections and raw bytes."""
    name: str
    data: memoryview
    elfclass: int          # 32 or 64
    little: bool
    e_type: int            # 1 REL, 2 EXEC, 3 DYN
    machine: int
    sections: list[Section] = field(default_factory=list)
    shstrndx: int = 0      # the section name table's index

    @property
    def machine_name(self) -> str:
        return EM_NAMES.get(self.machine, f"machine {self.machine}")

    @property
    def relocatable(self) -> bool:
        return self.e_type == 1

    def section_bytes(self, sec: Section) -> memoryview:
        if sec.nobits:
            return memoryview(b"")
        return self.data[sec.offset:sec.offset + sec.size]

    def section_by_name(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None


def _sym_dtype(elfclass: int, little: bool) -> np.dtype:
    import numpy as np
    e = "<" if little else ">"
    if elfclass == 64:
        return np.dtype([("name", e + "u4"), ("info", "u1"), ("other", "u1"), ("shndx", e + "u2"),
                         ("value", e + "u8"), ("size", e + "u8")])
    return np.dtype([("name", e + "u4"), ("value", e + "u4"), ("size", e + "u4"),
                     ("info", "u1"), ("other", "u1"), ("shndx", e + "u2")])


# LLVM bitcode: raw (``BC\xc0\xde``) or in its wrapper header (magic 0x0B17C0DE, little-endian):
# what clang writes for every ``.o`` under -flto (a ThinLTO kernel's units).
BITCODE_MAGIC = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")


def parse_elf(data: memoryview | bytes, name: str, real_size: int | None = None) -> ElfImage:
    """Decode the ELF header and section table, checking every range against the file size.

    ``real_size``: the bytes the file really stores (less than ``len(data)`` for a sparse
    file); no table may claim more than that, so a hole cannot make us build millions of
    entries from nothing.
    """
    data = memoryview(data)
    n = len(data)
    real = n if real_size is None else min(real_size, n)
    if n < 16 or bytes(data[:4]) != b"\x7fELF":
        if bytes(data[:4]) in BITCODE_MAGIC:
            raise InputError(f"{name}: LLVM bitcode, not machine code (an LTO object: ld.lld makes its code "
                             f"when it links): compare the linked vmlinux instead")
        raise InputError(f"{name}: not an ELF file")
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise InputError(f"{name}: corrupt ELF header (class {ei_class}, data {ei_data})")
    elfclass = 64 if ei_class == 2 else 32
    little = ei_data == 1
    e = "<" if little else ">"
    hdr_fmt = e + ("HHIQQQIHHHHHH" if elfclass == 64 else "HHIIIIIHHHHHH")
    hdr_size = 16 + struct.calcsize(hdr_fmt)
    if n < hdr_size:
        raise InputError(f"{name}: truncated ELF file ({n} bytes, header needs {hdr_size})")
    (e_type, e_machine, _ver, _entry, _phoff, e_shoff, _flags, _ehsize, _phentsize, _phnum,
     e_shentsize, e_shnum, e_shstrndx) = struct.unpack_from(hdr_fmt, data, 16)
    img = ElfImage(name, data, elfclass, little, e_type, e_machine)
    if e_shoff == 0:
        return img
    sh_fmt = e + ("IIQQQQIIQQ" if elfclass == 64 else "IIIIIIIIII")
    sh_size = struct.calcsize(sh_fmt)
    if e_shentsize != sh_size:
        raise InputError(f"{name}: corrupt ELF header (section header size {e_shentsize})")
    if e_shoff + sh_size > n:
        raise InputError(f"{name}: truncated ELF file (section headers at {e_shoff:#x} past end {n:#x})")
    if e_shnum == 0:  # more than SHN_LORESERVE sections: the count is in section 0
        e_shnum = struct.unpack_from(sh_fmt, data, e_shoff)[5]
        if e_shnum == 0:
            raise InputError(f"{name}: corrupt ELF header (section headers at {e_shoff:#x} but no sections)")
    if e_shstrndx == SHN_XINDEX:
        e_shstrndx = struct.unpack_from(sh_fmt, data, e_shoff)[6]
    table = e_shnum * sh_size
    if e_shoff + table > n:
        raise InputError(f"{name}: truncated ELF file ({e_shnum} section headers at {e_shoff:#x} "
                         f"past end {n:#x})")
    if table > real:
        raise InputError(f"{name}: corrupt ELF file ({e_shnum} section headers need {table} bytes, "
                         f"the file stores only {real}: sparse file)")
    if e_shstrndx >= e_shnum:
        raise InputError(f"{name}: corrupt ELF header (section name table index {e_shstrndx} "
                         f"of {e_shnum} sections)")
    img.shstrndx = e_shstrndx
    raw = struct.iter_unpack(sh_fmt, data[e_shoff:e_shoff + table])
    strs = struct.unpack_from(sh_fmt, data, e_shoff + e_shstrndx * sh_size)
    shstr = b"" if strs[1] == SHT_NOBITS else bytes(data[strs[4]:strs[4] + strs[5]])
    if shstr and shstr[-1] != 0:      # nm 2.40: "file format not recognized" (a symbol table's: see strtab_sound)
        raise InputError(f"{name}: corrupt section name table (section {e_shstrndx} does not end with NUL)")
    names: dict[int, str] = {}      # one str per distinct name offset
    sections = img.sections
    for i, (nm, typ, flags, addr, off, size, link, info, align, entsize) in enumerate(raw):
        if typ != SHT_NOBITS and typ != 0:
            if off + size > n:
                raise InputError(f"{name}: truncated ELF file (section {i} at {off:#x}+{size:#x} past end {n:#x})")
            if size > real:
                raise InputError(f"{name}: corrupt ELF file (section {i} claims {size} bytes, "
                                 f"the file stores only {real}: sparse file)")
        sname = names.get(nm)
        if sname is None:
            end = shstr.find(b"\0", nm)
            sname = names[nm] = shstr[nm:end if end >= 0 else len(shstr)].decode("utf-8", "surrogateescape")
        sections.append(Section(i, sname, typ, flags, addr, off, size, link, info, align, entsize))
    return img


@dataclass
class SymbolTable:
    """The raw .symtab as numpy columns plus its string table (no per-symbol objects)."""
    image: ElfImage
    entries: np.ndarray       # structured: name, info, other, shndx, value, size
    shndx: np.ndarray         # section indices with SHN_XINDEX resolved
    strtab: bytes
    _nul_cache: np.ndarray | None = field(default=None, repr=False)

    def names(self, idx: np.ndarray) -> list[str]:
        """Decode the names of the given symbol indices (the NUL ends found in bulk)."""
        import numpy as np
        offs = self.entries["name"][idx]
        if not len(offs):
            return []
        if not strtab_sound(self.strtab):       # binutils rejects the whole table: see null_names
            return null_names(offs.tolist())
        nuls = self._nuls()          # ends with len(strtab): a table without a final NUL ends there
        ends = nuls[np.searchsorted(nuls, offs)]
        if self.strtab.isascii():
            text = self.strtab.decode("ascii")
            return [text[o:e] for o, e in zip(offs.tolist(), ends.tolist())]
        raw = self.strtab
        return [raw[o:e].decode("utf-8", "surrogateescape") for o, e in zip(offs.tolist(), ends.tolist())]

    def _nuls(self) -> np.ndarray:
        import numpy as np
        if self._nul_cache is None:
            nuls = np.flatnonzero(np.frombuffer(self.strtab, dtype=np.uint8) == 0)
            self._nul_cache = np.append(nuls, len(self.strtab))
        return self._nul_cache

    def all_names(self) -> list[str]:
        import numpy as np
        return self.names(np.arange(len(self.entries)))


def read_symtab(img: ElfImage) -> SymbolTable | None:
    """The static symbol table, or None for a stripped file."""
    import numpy as np
    symsec = next((s for s in img.sections if s.type == SHT_SYMTAB), None)
    if symsec is None:
        return None
    dt = _sym_dtype(img.elfclass, img.little)
    if symsec.entsize != dt.itemsize or symsec.size % dt.itemsize:
        raise InputError(f"{img.name}: corrupt symbol table (entry size {symsec.entsize})")
    if symsec.link >= len(img.sections):
        raise InputError(f"{img.name}: corrupt symbol table (string table index {symsec.link})")
    entries = np.frombuffer(img.data, dtype=dt, count=symsec.size // dt.itemsize, offset=symsec.offset)
    strsec = img.sections[symsec.link]
    strtab = bytes(img.section_bytes(strsec))
    if (strtab_sound(strtab) and len(entries)
            and int(entries["name"].max()) >= max(len(strtab), 1)):
        raise InputError(f"{img.name}: corrupt symbol table (name offset past string table)")
    shndx = entries["shndx"].astype(np.uint32)
    big = shndx == SHN_XINDEX
    xoff = xindex_offset(img, symsec, len(entries), lambda: bool(big.any()))
    if xoff is not None and big.any():
        x = np.frombuffer(img.data, dtype=("<u4" if img.little else ">u4"), count=len(entries), offset=xoff)
        shndx = shndx.copy()
        shndx[big] = x[big]
    return SymbolTable(img, entries, shndx, strtab)


def strtab_sound(strtab: bytes | memoryview) -> bool:
    """Does the symbol string table end with NUL? binutils 2.40 (bfd_elf_get_str_section) rejects
    one that does not as a whole, silently: see :func:`null_names`."""
    return not len(strtab) or strtab[-1] == 0


def null_names(offsets: list[int]) -> list[str]:
    """Symbol names as nm shows them from a rejected string table: bfd_elf_string_from_elf_section
    gives "" for offset 0 without looking at the table and NULL for any other, which
    bfd_elf_sym_name turns into "(null)"."""
    return ["(null)" if o else "" for o in offsets]


def xindex_offset(img: ElfImage, symsec: Section, nsyms: int, needed: Callable[[], bool]) -> int | None:
    """Where the symbols' SHT_SYMTAB_SHNDX entries are read from, as bfd_elf_get_elf_syms reads them;
    None when there are none to read.

    binutils takes the last SHT_SYMTAB_SHNDX linked to the symbol table, or else the last one
    of all; one of size 0 counts as none. It then reads 4 bytes per symbol from the section's
    offset whatever the section's size says (a size not a multiple of 4, or too short, is
    read past), and fails only when that runs past the end of the file, or when a symbol
    needs an index (SHN_XINDEX) and there is no table.
    """
    xsecs = [s for s in img.sections if s.type == SHT_SYMTAB_SHNDX]
    xsec = next((s for s in reversed(xsecs) if s.link == symsec.index), xsecs[-1] if xsecs else None)
    if xsec is None or xsec.size == 0:
        if needed():       # asked only here: most files have no SHT_SYMTAB_SHNDX at all
            raise InputError(f"{img.name}: corrupt symbol table (a symbol's section index is in an "
                             f"SHT_SYMTAB_SHNDX section, and there is none)")
        return None
    if xsec.offset + 4 * nsyms > len(img.data):
        raise InputError(f"{img.name}: truncated ELF file (extended section index table "
                         f"{xsec.name or xsec.index}: {nsyms} entries at {xsec.offset:#x} past end "
                         f"{len(img.data):#x})")
    return xsec.offset


# --- files and archives -------------------------------------------------------------------

def load_images(path: str | os.PathLike) -> list[ElfImage]:
    """All ELF images in a file: one for an object/executable, one per member for an archive."""
    path = Path(path)
    got = open_input(path)
    if bytes(got.data[:8]) in (b"!<arch>\n", b"!<thin>\n"):
        from analyzer import archive     # only archives pay for importing it
        return [parse_elf(m.data, m.label, m.real_size) for m in archive.members(path, got.data, got.real_size)]
    if len(got.data) == 0:
        raise InputError(f"{path}: empty file, not an ELF file")
    return [parse_elf(got.data, str(path), got.real_size)]


def function_symbols(img: ElfImage, table: SymbolTable) -> np.ndarray:
    """Indices of function symbols with code (STT_FUNC, size > 0, in an executable section): the
    callers of inline facts and of inline cost alike."""
    import numpy as np
    e = table.entries
    st = e["info"] & 0xF
    nsec = len(img.sections)
    exec_secs = np.zeros(max(nsec, 1), dtype=bool)
    for s in img.sections:
        exec_secs[s.index] = bool(s.flags & SHF_EXECINSTR)
    sh = table.shndx
    ok = (st == 2) & (e["size"] > 0) & (sh > 0) & (sh < nsec)
    ok[ok] &= exec_secs[sh[ok]]
    return np.flatnonzero(ok)
