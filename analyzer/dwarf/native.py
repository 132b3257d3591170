"""The native engine: elfutils' libdw walks the DIEs (``analyzer.dwarf._libdw``, optional).

Measured on the Debian 6.1 cloud vmlinux (163 MB of .debug_info, 14.3 M DIEs): the pure-Python
walker takes 16 s to decode it, libdw 1.3 s (bench/inline_cost_bench.py). The C part only walks
and hands over subprograms and inlined instances as tuples; everything else stays here and is
shared with the walker, so both engines give equal :class:`~analyzer.dwarf.model.CompileUnitFacts`:
file indexes are named by the walker's line table reader (:mod:`.lines`), units are selected by
the same name rule.

libelf never sees the stranger's file: :func:`pack_elf` writes a minimal ELF image holding only
the debug sections' bytes (already relocated for a ``.o``, by :mod:`analyzer.relocs`), so section
headers, relocations and compression are ours to check before libdw reads a byte. Where the
extension is not built (no ``libdw-dev`` at install time) :func:`available` is false and the
callers use the walker.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator

from analyzer.dwarf import lines
from analyzer.dwarf.encoding import unit_headers
from analyzer.dwarf.model import CompileUnitFacts, InlinedInstance, Subprogram
from analyzer.dwarf.walker import Walker
from analyzer.errors import InputError

try:
    from analyzer.dwarf import _libdw
except ImportError:     # built without libdw-dev: the pure-Python walker is used
    _libdw = None

# what libdw needs to walk DIEs, name them and read their ranges (no location lists)
SECTIONS = (".debug_info", ".debug_abbrev", ".debug_str", ".debug_line", ".debug_line_str",
            ".debug_str_offsets", ".debug_addr", ".debug_rnglists", ".debug_ranges")
# what the line table reader needs in Python (file names)
LINE_SECTIONS = (".debug_line", ".debug_line_str", ".debug_str", ".debug_str_offsets")
_DEFAULT_STR_OFFSETS_BASE = {4: 8, 8: 16}


class Unsuitable(InputError):
    """A file libdw would read at a cost out of proportion to its size (abbreviation tables
    that overlap, abbreviations with hundreds of attributes): ``engine="auto"`` reads it with
    the walker instead, whose budgets bound that work."""


def available() -> bool:
    """True when the libdw extension is built (``libdw-dev`` was installed at ``pip install``)."""
    return _libdw is not None


def pack_elf(sections: dict, machine: int) -> bytearray:
    """A little-endian ELF64 image holding these sections' bytes (name -> bytes or memoryview)
    and nothing else: what libdw reads."""
    names = [n for n in SECTIONS if n in sections]
    shstr = b"\0" + b"".join(n.encode() + b"\0" for n in names) + b".shstrtab\0"
    ehsize, shentsize = 64, 64
    off = ehsize
    layout = []
    for n in names:
        size = len(sections[n])
        layout.append((n, off, size))
        off += size
    shstr_off = off
    off += len(shstr)
    shoff = (off + 7) & ~7
    nsec = len(names) + 2
    img = bytearray(shoff + nsec * shentsize)
    img[0:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<HHIQQQIHHHHHH", img, 16, 2, machine, 1, 0, 0, shoff, 0, ehsize, 0, 0,
                     shentsize, nsec, nsec - 1)
    name_off = 1
    for i, (n, o, size) in enumerate(layout, start=1):
        img[o:o + size] = sections[n]
        struct.pack_into("<IIQQQQIIQQ", img, shoff + i * shentsize, name_off, 1, 0, 0, o, size, 0, 0, 1, 0)
        name_off += len(n) + 1
    img[shstr_off:shstr_off + len(shstr)] = shstr
    struct.pack_into("<IIQQQQIIQQ", img, shoff + (nsec - 1) * shentsize, name_off, 3, 0, 0, shstr_off,
                     len(shstr), 0, 0, 1, 0)
    return img


class NativeReader:
    """The units of one file's debug sections, decoded by libdw."""

    def __init__(self, sections: dict, little: bool, machine: int):
        if _libdw is None:
            raise InputError("the native DWARF reader is not built (install libdw-dev, then reinstall sizewatch)")
        if not little:
            raise InputError("the native DWARF reader reads little-endian files only")
        # every unit header within the section, checked as the walker checks it: libdw reads a
        # unit whose length runs past the section's end up to that end, as if it were whole
        for _u in unit_headers(sections.get(".debug_info", b""), "little"):   # absent: NOBITS
            pass
        size = {n: len(sections[n]) for n in SECTIONS if n in sections}
        # the walker's budgets (analyzer.dwarf.walker): decoded string bytes, and range list
        # entries (at least 16 bytes of a list each in .debug_ranges, 2 in .debug_rnglists)
        strings = 8 * sum(size.get(n, 0) for n in (".debug_str", ".debug_line_str", ".debug_line",
                                                   ".debug_info")) + (1 << 20)
        ranges = 8 * (size.get(".debug_rnglists", 0) + size.get(".debug_ranges", 0)) + (1 << 20)
        try:
            self._r = _libdw.Reader(pack_elf(sections, machine), strings, ranges)
        except _libdw.Unsuitable as e:
            raise Unsuitable(f"not read with libdw: {e}") from None
        except _libdw.DwarfError as e:
            raise InputError(f"corrupt DWARF (libdw: {e})") from None
        # the file names come from the walker's line table reader: both engines name files alike
        self._lines = Walker({n: bytes(sections[n]) for n in LINE_SECTIONS if n in sections}, little)

    def unit_names(self) -> list[tuple[int, str | None]]:
        try:
            return self._r.units()
        except _libdw.DwarfError as e:
            raise InputError(f"corrupt DWARF (libdw: {e})") from None

    def unit(self, offset: int) -> CompileUnitFacts | None:
        """One unit's subprograms and inlined instances (None: not a compile or partial unit)."""
        try:
            got = self._r.unit(offset)
        except _libdw.DwarfError as e:
            raise InputError(f"corrupt DWARF (libdw: {e})") from None
        if got is None:
            return None
        ver, asz, osz, name, comp_dir, producer, stmt, sob, sps, insts = got
        cu = {"ver": ver, "asz": asz, "osz": osz, "offset": offset,
              "str_offsets_base": sob if sob is not None else _DEFAULT_STR_OFFSETS_BASE.get(osz, 8)}
        files = lines.file_table(self._lines, stmt, cu) if stmt is not None else []
        nf = len(files)
        facts = CompileUnitFacts(name, comp_dir, producer)
        spd = facts.subprograms
        for off, nm, ln, df, dl, inl, ext, decl, rng, og in sps:
            spd[off] = Subprogram(off, nm, ln, files[df] if df is not None and df < nf else None, dl, inl, ext,
                                  decl, rng, og)
        facts.inlined = [InlinedInstance(og, ct, po, rng, files[cf] if cf is not None and cf < nf else None, cl)
                         for og, ct, po, rng, cf, cl in insts]
        return facts

    def units(self, wanted: set[int] | None = None) -> Iterator[CompileUnitFacts]:
        for off, _name in self.unit_names():
            if wanted is not None and off not in wanted:
                continue
            facts = self.unit(off)
            if facts is not None:
                yield facts
