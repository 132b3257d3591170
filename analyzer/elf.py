"""ELF images and their symbol tables, read in bulk.

pyelftools iterates symbols one Python object at a time (5.7 s for a vmlinux);
here the section headers and the symbol table are decoded with numpy in one
go, which is what makes ``sizediff`` faster than ``nm | bloat-o-meter``.
Archives (``built-in.a``, including thin ones) yield one image per member.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path


from analyzer.errors import InputError

TYPE_CHECKING = False   # typing.TYPE_CHECKING without importing typing (~4 ms of sizediff's start-up)
if TYPE_CHECKING:   # numpy is imported where used: sizediff's symbol listing does without it
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


@dataclass(frozen=True)
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


def parse_elf(data: memoryview | bytes, name: str) -> ElfImage:
    """Decode the ELF header and section table, checking every range against the file size."""
    data = memoryview(data)
    n = len(data)
    if n < 16 or bytes(data[:4]) != b"\x7fELF":
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
        e_shnum = struct.unpack_from(sh_fmt, data, e_shoff)[5 if elfclass == 64 else 5]
    if e_shstrndx == SHN_XINDEX:
        e_shstrndx = struct.unpack_from(sh_fmt, data, e_shoff)[6]
    if e_shoff + e_shnum * sh_size > n:
        raise InputError(f"{name}: truncated ELF file (section headers at {e_shoff:#x} past end {n:#x})")
    raw = [struct.unpack_from(sh_fmt, data, e_shoff + i * sh_size) for i in range(e_shnum)]
    for i, r in enumerate(raw):
        if r[1] != SHT_NOBITS and r[1] != 0 and r[4] + r[5] > n:
            raise InputError(f"{name}: truncated ELF file (section {i} at {r[4]:#x}+{r[5]:#x} past end {n:#x})")
    if e_shstrndx >= e_shnum:
        raise InputError(f"{name}: corrupt ELF header (section name table index {e_shstrndx})")
    strs = raw[e_shstrndx]
    shstr = bytes(data[strs[4]:strs[4] + strs[5]])
    for i, (nm, typ, flags, addr, off, size, link, info, align, entsize) in enumerate(raw):
        end = shstr.find(b"\0", nm)
        sname = shstr[nm:end if end >= 0 else len(shstr)].decode("utf-8", "surrogateescape")
        img.sections.append(Section(i, sname, typ, flags, addr, off, size, link, info, align, entsize))
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
        nuls = self._nuls()
        pos = np.searchsorted(nuls, offs)
        ends = np.where(pos < len(nuls), nuls[np.minimum(pos, len(nuls) - 1)], len(self.strtab))
        if self.strtab.isascii():
            text = self.strtab.decode("ascii")
            return [text[o:e] for o, e in zip(offs.tolist(), ends.tolist())]
        raw = self.strtab
        return [raw[o:e].decode("utf-8", "surrogateescape") for o, e in zip(offs.tolist(), ends.tolist())]

    def _nuls(self) -> np.ndarray:
        import numpy as np
        if self._nul_cache is None:
            self._nul_cache = np.flatnonzero(np.frombuffer(self.strtab, dtype=np.uint8) == 0)
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
    if len(entries) and int(entries["name"].max()) >= max(len(strtab), 1):
        raise InputError(f"{img.name}: corrupt symbol table (name offset past string table)")
    shndx = entries["shndx"].astype(np.uint32)
    xsec = next((s for s in img.sections if s.type == SHT_SYMTAB_SHNDX and s.link == symsec.index), None)
    if xsec is not None:
        x = np.frombuffer(img.data, dtype=("<u4" if img.little else ">u4"), count=xsec.size // 4,
                          offset=xsec.offset)
        big = shndx == SHN_XINDEX
        if big.any():
            shndx = shndx.copy()
            shndx[big] = x[: len(shndx)][big]
    return SymbolTable(img, entries, shndx, strtab)


# --- files and archives -------------------------------------------------------------------

def _map(path: Path) -> memoryview:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return memoryview(b"")
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None


def _archive_members(path: Path, data: memoryview) -> list[ElfImage]:
    thin = bytes(data[:8]) == b"!<thin>\n"
    pos, n = 8, len(data)
    longnames = b""
    out: list[ElfImage] = []
    while pos < n:
        if pos + 60 > n:
            raise InputError(f"{path}: truncated archive member header at {pos:#x}")
        hdr = bytes(data[pos:pos + 60])
        if hdr[58:60] != b"`\n":
            raise InputError(f"{path}: broken archive member header at {pos:#x}")
        name = hdr[:16].decode("latin-1").rstrip()
        try:
            size = int(hdr[48:58].decode("ascii").strip())
        except ValueError:
            raise InputError(f"{path}: broken archive member size at {pos:#x}") from None
        body = pos + 60
        if name in ("/", "/SYM64/"):           # symbol index
            pos = body + size + (size & 1)
            continue
        if name == "//":                        # long name table (always stored, even in thin archives)
            longnames = bytes(data[body:body + size])
            pos = body + size + (size & 1)
            continue
        if name.startswith("/") and name[1:2].isdigit():
            # "/<offset>" into the long name table; binutils reads the number with strtol and
            # ignores the rest: `ar cDPrST` (kbuild's) writes e.g. "/0             /" for mm/page_alloc.o
            digits = name[1:len(name) - len(name[1:].lstrip("0123456789"))]
            off = int(digits)
            end = longnames.find(b"/\n", off)
            name = longnames[off:end if end >= 0 else None].decode("utf-8", "surrogateescape")
        else:
            name = name.rstrip("/")
        if thin:
            member_path = Path(name) if os.path.isabs(name) else path.parent / name
            mdata = _map(member_path)
            label = f"{path}({name})"
            out.append(_image_or_nested(member_path, mdata, label))
            pos = body
        else:
            if body + size > n:
                raise InputError(f"{path}: truncated archive member {name}")
            label = f"{path}({name})"
            out.append(parse_elf(data[body:body + size], label))
            pos = body + size + (size & 1)
    return out


def _image_or_nested(path: Path, data: memoryview, label: str) -> ElfImage:
    if bytes(data[:8]) in (b"!<arch>\n", b"!<thin>\n"):
        raise InputError(f"{label}: nested archives are not supported")
    return parse_elf(data, label)


def load_images(path: str | os.PathLike) -> list[ElfImage]:
    """All ELF images in a file: one for an object/executable, one per member for an archive."""
    path = Path(path)
    data = _map(path)
    if bytes(data[:8]) in (b"!<arch>\n", b"!<thin>\n"):
        return _archive_members(path, data)
    if len(data) == 0:
        raise InputError(f"{path}: empty file, not an ELF file")
    return [parse_elf(data, str(path))]
