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

from pathlib import PurePosixPath

from analyzer.dwarf.model import CompileUnitFacts, DwarfFacts, Subprogram
from analyzer.dwarf.reference import DEBUG_SECTIONS
from analyzer.dwarf.walker import Walker, scan_unit_names
from analyzer.elf import ElfImage, SymbolTable
from analyzer.errors import InputError
from analyzer.relocs import relocated_bytes, symbol_addresses

SHF_COMPRESSED = 0x800


def has_dwarf(img: ElfImage) -> bool:
    return img.section_by_name(".debug_info") is not None


def load_sections(img: ElfImage, table: SymbolTable | None) -> dict[str, bytes]:
    """The debug sections' bytes by name, with their relocations applied (for a .o)."""
    symaddr = symbol_addresses(img, table) if (table is not None and img.relocatable) else None
    raw: dict[str, bytes] = {}
    for name in DEBUG_SECTIONS:
        sec = img.section_by_name(name)
        if sec is None or sec.nobits:
            continue
        if sec.flags & SHF_COMPRESSED:
            raise InputError(f"{img.name}: compressed debug sections are not supported ({name})")
        raw[name] = relocated_bytes(img, sec, table, symaddr)
    return raw


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

    ``engine="fast"`` walks the DIEs with :mod:`analyzer.dwarf.walker`; ``"pyelftools"``
    decodes them with pyelftools (slower; kept as the reference the tests compare with).
    """
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
    allsp: dict[int, Subprogram] = {}
    for u in units:
        allsp.update(u.subprograms)
    if cus:
        found = {w for w in cus if any(cu_matches(u.name, (w,)) for u in units)}
        missing = [w for w in cus if w not in found]
        if missing:
            raise InputError(f"{img.name}: no compilation unit named {', '.join(missing)} in the DWARF")
    return DwarfFacts(units, allsp)


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
