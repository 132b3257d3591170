"""DWARF as pyelftools reads a file by itself: the oracle input for the DWARF tests, none of it
through the analyzer's relocation (analyzer.relocs).

A relocatable object's debug sections are relocated by pyelftools' own ``relocate_dwarf_sections``
(the default of ``ELFFile.get_dwarf_info``); a linked image's are read as they are (its emitted
relocations must not be applied again). pyelftools relocates a ``.o`` against symbol values that
are offsets in their section, so a ``low_pc`` in ``.text`` and one in ``.text.unlikely`` could both
read 0x40 and byte sets of different sections would overlap. :func:`placed_copy` therefore gives
each allocated section its own range first, as a linker places sections: a copy of the object
whose symbols defined in allocated section ``i`` carry ``i << 32`` plus their value (the
placement the analyzer documents in analyzer.relocs, so addresses compare as they are). Only
symbol values change; which relocation applies, its width, symbol and addend are pyelftools'.
"""
from __future__ import annotations

import hashlib
import struct
import tempfile
from pathlib import Path

SHF_ALLOC = 0x2
SHN_LORESERVE = 0xFF00
SHIFT = 32
_DIR: list[Path] = []          # one private directory per test process (mkdtemp: 0700, removed at exit)


def _placed_dir() -> Path:
    if not _DIR:
        import atexit
        import shutil
        d = Path(tempfile.mkdtemp(prefix="sizewatch-placed-"))
        atexit.register(shutil.rmtree, d, True)
        _DIR.append(d)
    return _DIR[0]


def placed_copy(obj: Path) -> Path:
    """A copy of the relocatable ELF64 ``obj`` (in this process's private temp dir, named by its content) whose
    symbols in allocated sections are moved to ``index << 32`` + their value."""
    from elftools.elf.elffile import ELFFile
    data = bytearray(Path(obj).read_bytes())
    out = _placed_dir() / f"{hashlib.sha256(data).hexdigest()[:24]}.o"
    if out.is_file():
        return out
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        assert elf.header["e_type"] == "ET_REL" and elf.elfclass == 64, obj
        order = "<" if elf.little_endian else ">"
        alloc = {i for i, s in enumerate(elf.iter_sections()) if s["sh_flags"] & SHF_ALLOC}
        symtab = elf.get_section_by_name(".symtab")
        base, size = symtab["sh_offset"], symtab["sh_entsize"]
        for n in range(symtab.num_symbols()):
            at = base + n * size                   # Elf64_Sym: name 4, info 1, other 1, shndx 2, value 8
            shndx = struct.unpack_from(order + "H", data, at + 6)[0]
            if shndx in alloc and shndx < SHN_LORESERVE:
                value = struct.unpack_from(order + "Q", data, at + 8)[0]
                struct.pack_into(order + "Q", data, at + 8, (shndx << SHIFT) + value)
    tmp = out.with_suffix(f".{id(data)}.tmp")
    tmp.write_bytes(data)
    tmp.rename(out)
    return out


def pyelftools_dwarf(path: Path):
    """pyelftools' DWARFInfo of ``path``: a ``.o`` placed (:func:`placed_copy`) and relocated by
    pyelftools itself, a linked image unrelocated. The sections are read into memory: the file
    is closed on return."""
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        relocatable = ELFFile(f).header["e_type"] == "ET_REL"
    with open(placed_copy(path) if relocatable else path, "rb") as f:
        return ELFFile(f).get_dwarf_info(relocate_dwarf_sections=relocatable)
