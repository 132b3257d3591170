"""``read_dwarf``: the inline facts of one ELF image's DWARF, by the fast walker or pyelftools.

The debug sections are relocated by :mod:`analyzer.relocs` (numpy, one pass per section)
instead of pyelftools applying 21k relocations in Python; the DIEs are walked by
:mod:`analyzer.dwarf.walker` (pyelftools stays available as ``engine="pyelftools"``, the
reference the tests compare with). Addresses use the relocs module's "virtual link"
(section index << 32 in a .o), so they match symbol addresses. For a vmlinux only the
named CUs are decoded: unit headers are walked and only each unit's top DIE is read for
its name.
"""
from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import PurePosixPath

from analyzer.dwarf.model import CompileUnitFacts, DwarfFacts, Subprogram
from analyzer.dwarf.reference import DEBUG_SECTIONS
from analyzer.dwarf.walker import Walker, scan_unit_names
from analyzer.elf import ElfImage, SymbolTable
from analyzer.errors import InputError
from analyzer.gc_pause import paused_gc
from analyzer.relocs import relocated_bytes, symbol_addresses

SHF_COMPRESSED = 0x800


def has_dwarf(img: ElfImage) -> bool:
    return img.section_by_name(".debug_info") is not None


def load_sections(img: ElfImage, table: SymbolTable | None,
                  names: tuple[str, ...] = DEBUG_SECTIONS) -> dict[str, bytes]:
    """The debug sections' bytes by name, with their relocations applied (for a .o)."""
    symaddr = symbol_addresses(img, table) if (table is not None and img.relocatable) else None
    raw: dict[str, bytes] = {}
    for name in names:
        sec = _debug_section(img, name)
        if sec is not None:
            raw[name] = relocated_bytes(img, sec, table, symaddr)
    return raw


def section_views(img: ElfImage, table: SymbolTable | None, names: tuple[str, ...]) -> dict:
    """As :func:`load_sections`, but a linked file's sections are views of the mapped file, not
    copies (a vmlinux's debug sections are 200+ MB)."""
    if img.relocatable:
        return load_sections(img, table, names)
    return {name: img.section_bytes(sec) for name in names if (sec := _debug_section(img, name)) is not None}


def _debug_section(img: ElfImage, name: str):
    sec = img.section_by_name(name)
    if sec is None or sec.nobits:
        return None
    if sec.flags & SHF_COMPRESSED:
        raise InputError(f"{img.name}: compressed debug sections are not supported ({name})")
    return sec


def native_usable(img: ElfImage) -> bool:
    """The libdw engine is built and reads this file (little-endian; x86-64 relocations for a .o)."""
    from analyzer.dwarf import native
    return native.available() and img.little


def cu_matches(name: str | None, wanted: tuple[str, ...]) -> bool:
    """A CU named ``/abs/linux/mm/page_alloc.c`` or ``mm/page_alloc.c`` matches ``mm/page_alloc.c``."""
    if not name:
        return False
    p = PurePosixPath(name)
    for w in wanted:
        wp = PurePosixPath(w)
        if p == wp or (len(p.parts) >= len(wp.parts) and p.parts[-len(wp.parts):] == wp.parts):
            return True
    return False


def read_dwarf(img: ElfImage, table: SymbolTable | None, cus: tuple[str, ...] | None = None,
               engine: str = "fast") -> DwarfFacts:
    """Decode subprograms and inlined instances of every CU (or only those named in ``cus``).

    ``engine="fast"`` walks the DIEs with :mod:`analyzer.dwarf.walker`; ``"native"`` with
    elfutils' libdw (:mod:`analyzer.dwarf.native`, where built); ``"auto"`` the native one where
    it is built and reads the file, else the walker (which also has the last word on a file libdw
    refuses: its errors name the section and offset); ``"pyelftools"`` decodes them with
    pyelftools (slower; kept as the reference the tests compare with).
    """
    with paused_gc():
        return _read_dwarf(img, table, cus, engine)


def _read_dwarf(img: ElfImage, table: SymbolTable | None, cus: tuple[str, ...] | None, engine: str) -> DwarfFacts:
    if engine == "auto":
        if native_usable(img):
            try:
                units = _native(img, table, cus)
            except InputError:
                # a file libdw refuses, or would read at a cost out of proportion (Unsuitable):
                # the walker decides, within its budgets, and its message names section and offset
                pass
            else:
                return _facts(img, units, cus)      # (a unit not found is said once, here)
        engine = "fast"
    if engine == "native":
        return _facts(img, _native(img, table, cus), cus)
    raw = load_sections(img, table)
    try:
        wanted = ({off for off, name in scan_unit_names(raw, img.little) if cu_matches(name, cus)}
                  if cus else None)
        if engine == "fast":
            units = _walk(raw, img.little, wanted)
        else:
            units = _reference(raw, img, wanted)
    except InputError as e:
        raise InputError(f"{img.name}: {e}") from None
    return _facts(img, units, cus)


Select = Callable[[list[tuple[int, str | None]]], set[int]]


def read_dwarf_selected(img: ElfImage, table: SymbolTable | None, select: Select,
                        engine: str = "auto") -> tuple[DwarfFacts, dict[int, CompileUnitFacts]]:
    """Decode only the units ``select`` picks from the file's ``[(unit offset, DW_AT_name)]`` (every
    unit header, in file order; each top DIE read for its name only): what a per-unit cache decodes
    when most units are known already. Returns the facts and the decoded units by offset.
    ``engine`` as :func:`read_dwarf` (no pyelftools)."""
    chosen: list[set[int]] = []
    asked = select

    def once(units: list[tuple[int, str | None]]) -> set[int]:
        """``select`` asked once, whichever engine reads the units (a cache's lookups are not
        repeated when the walker takes over from libdw)."""
        if not chosen:
            chosen.append(asked(units))
        return chosen[0]

    if engine == "auto":
        if native_usable(img):
            try:
                return _native_selected(img, table, once)
            except InputError:
                pass            # as read_dwarf: the walker decides
        engine = "fast"
    select = once
    if engine == "native":
        return _native_selected(img, table, select)
    if engine != "fast":
        raise InputError(f"unknown DWARF engine {engine!r} for a selected decode")
    raw = load_sections(img, table)
    try:
        wanted = select(scan_unit_names(raw, img.little))
        w = Walker(raw, img.little)
        by_off = {}
        for u in w.units():
            if u.offset in wanted and (facts := w.walk(u)) is not None:
                by_off[u.offset] = facts
    except InputError as e:
        raise InputError(f"{img.name}: {e}") from None
    return _facts(img, list(by_off.values()), None), by_off


def unit_names(img: ElfImage, table: SymbolTable | None) -> list[tuple[int, str | None]]:
    """(offset, DW_AT_name) of every unit, each top DIE read for its name only (libdw where built)."""
    if native_usable(img):
        try:
            return native_reader(img, table).unit_names()
        except InputError:
            pass                # as read_dwarf: the walker's scan decides
    raw = load_sections(img, table, (".debug_info", ".debug_abbrev", ".debug_str", ".debug_line_str",
                                     ".debug_str_offsets"))
    try:
        return scan_unit_names(raw, img.little)
    except InputError as e:
        raise InputError(f"{img.name}: {e}") from None


def _native_selected(img: ElfImage, table: SymbolTable | None,
                     select: Select) -> tuple[DwarfFacts, dict[int, CompileUnitFacts]]:
    r = native_reader(img, table)
    try:
        by_off = {}
        for off in sorted(select(r.unit_names())):
            if (facts := r.unit(off)) is not None:
                by_off[off] = facts
    except InputError as e:
        raise InputError(f"{img.name}: {e}") from None
    return _facts(img, list(by_off.values()), None), by_off


def _facts(img: ElfImage, units: list[CompileUnitFacts], cus: tuple[str, ...] | None) -> DwarfFacts:
    allsp: dict[int, Subprogram] = {}
    for u in units:
        allsp.update(u.subprograms)
    if cus:
        found = {w for w in cus if any(cu_matches(u.name, (w,)) for u in units)}
        missing = [w for w in cus if w not in found]
        if missing:
            raise InputError(f"{img.name}: no compilation unit named {', '.join(missing)} in the DWARF")
    return DwarfFacts(units, allsp)


def native_reader(img: ElfImage, table: SymbolTable | None):
    """A :class:`analyzer.dwarf.native.NativeReader` over this image's debug sections."""
    from analyzer.dwarf.native import SECTIONS, NativeReader
    if img.section_by_name(".debug_info") is None:
        raise InputError(f"{img.name}: no .debug_info")
    try:
        reader = NativeReader(section_views(img, table, SECTIONS), img.little, img.machine)
    except InputError as e:
        raise InputError(f"{img.name}: {e}") from None
    _give_back_pages(img)
    return reader


def _give_back_pages(img: ElfImage) -> None:
    """libdw reads its own copy of the debug sections: the mapped file's pages read to make it
    (200 MB of a vmlinux) are given back instead of staying resident for the rest of the run;
    later reads of the file (its symbols) map their pages again."""
    m = getattr(img.data, "obj", None)
    if isinstance(m, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        try:
            m.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):
            pass


def _native(img: ElfImage, table: SymbolTable | None, cus: tuple[str, ...] | None) -> list[CompileUnitFacts]:
    r = native_reader(img, table)
    try:
        wanted = {off for off, name in r.unit_names() if cu_matches(name, cus)} if cus else None
        return list(r.units(wanted))
    except InputError as e:
        raise InputError(f"{img.name}: {e}") from None


def _walk(raw: dict[str, bytes], little: bool, wanted: set[int] | None) -> list[CompileUnitFacts]:
    w = Walker(raw, little)
    units = []
    for u in w.units():
        if wanted is not None and u.offset not in wanted:
            continue
        facts = w.walk(u)
        if facts is not None:
            units.append(facts)
    return units


def _reference(raw: dict[str, bytes], img: ElfImage, wanted: set[int] | None) -> list[CompileUnitFacts]:
    from analyzer.dwarf.reference import dwarf_info, read_units
    try:
        di = dwarf_info(raw, img.little, img.elfclass // 8, img.machine_name)
        return read_units(di, sorted(wanted) if wanted is not None else None)
    except InputError:
        raise
    except Exception as e:  # pyelftools raises assorted errors on garbage: one line, never a traceback
        reason = str(e).strip().splitlines()[0] if str(e).strip() else "unreadable"
        raise InputError(f"corrupt DWARF (pyelftools: {type(e).__name__}: {reason})") from None
