"""Subprograms and inlined instances from DWARF (4 and 5), per compilation unit.

The debug sections are relocated by :mod:`analyzer.relocs` (numpy, one pass per
section) instead of pyelftools applying 21k relocations in Python; the DIEs are
walked by :mod:`analyzer.dwarf_walk` (pyelftools stays available as
``engine="pyelftools"``, the reference the tests compare with, and reads the line
tables). Addresses use the relocs module's "virtual link" (section index << 32
in a .o), so they match symbol addresses. For a vmlinux only the named CUs are
decoded: unit headers are walked and only each unit's top DIE is read for its name.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from analyzer.elf import ElfImage, SymbolTable
from analyzer.errors import InputError
from analyzer.relocs import relocated_bytes, symbol_addresses

DEBUG_SECTIONS = (".debug_info", ".debug_aranges", ".debug_abbrev", ".debug_str", ".debug_line",
                  ".debug_ranges", ".debug_addr", ".debug_str_offsets", ".debug_line_str",
                  ".debug_rnglists", ".debug_loclists", ".debug_loc")


@dataclass
class Subprogram:
    """A DW_TAG_subprogram (abstract or concrete); ``origin`` points at the root declaration."""
    offset: int
    name: str | None = None
    linkage_name: str | None = None
    decl_file: str | None = None
    decl_line: int | None = None
    inline: int | None = None            # DW_AT_inline (1 inlined, 3 declared_inlined...)
    external: bool = False
    declaration: bool = False
    ranges: list[tuple[int, int]] = field(default_factory=list)
    origin: int | None = None            # DW_AT_abstract_origin / DW_AT_specification target


@dataclass
class InlinedInstance:
    """One DW_TAG_inlined_subroutine: whose code (``origin``) was copied into which function."""
    origin: int                          # DIE offset of the inlined function (before root resolution)
    container: int | None                # DIE offset of the enclosing concrete subprogram
    parent_origin: int | None            # the inlined function it sits in directly (nested inlining)
    ranges: list[tuple[int, int]]
    call_file: str | None = None
    call_line: int | None = None

    @property
    def size(self) -> int:
        return sum(hi - lo for lo, hi in self.ranges)


@dataclass
class CompileUnitFacts:
    name: str
    comp_dir: str | None
    producer: str | None
    subprograms: dict[int, Subprogram] = field(default_factory=dict)
    inlined: list[InlinedInstance] = field(default_factory=list)


@dataclass
class DwarfFacts:
    units: list[CompileUnitFacts]
    subprograms: dict[int, Subprogram]             # all units, by DIE offset

    def root(self, offset: int) -> Subprogram | None:
        """Follow abstract_origin/specification to the DIE holding name and declaration."""
        sp = self.subprograms.get(offset)
        seen = 0
        while sp is not None and sp.origin is not None and sp.origin in self.subprograms and seen < 16:
            sp = self.subprograms[sp.origin]
            seen += 1
        return sp

    def name_of(self, offset: int) -> str | None:
        sp = self.subprograms.get(offset)
        seen = 0
        while sp is not None and seen < 16:
            if sp.name:
                return sp.name
            sp = self.subprograms.get(sp.origin) if sp.origin is not None else None
            seen += 1
        return None

    def decl_of(self, offset: int) -> tuple[str | None, int | None]:
        sp = self.subprograms.get(offset)
        seen = 0
        while sp is not None and seen < 16:
            if sp.decl_line is not None:
                return sp.decl_file, sp.decl_line
            sp = self.subprograms.get(sp.origin) if sp.origin is not None else None
            seen += 1
        return None, None


def has_dwarf(img: ElfImage) -> bool:
    return img.section_by_name(".debug_info") is not None


def _dwarfinfo(img: ElfImage, table: SymbolTable | None):
    from elftools.common.exceptions import ELFError
    from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo
    symaddr = symbol_addresses(img, table) if (table is not None and img.relocatable) else None
    secs: dict[str, DebugSectionDescriptor | None] = {}
    raw: dict[str, bytes] = {}
    for name in DEBUG_SECTIONS:
        sec = img.section_by_name(name)
        if sec is None or sec.nobits:
            secs[name] = None
            continue
        if sec.flags & 0x800:   # SHF_COMPRESSED
            raise InputError(f"{img.name}: compressed debug sections are not supported ({name})")
        data = relocated_bytes(img, sec, table, symaddr)
        raw[name] = data
        secs[name] = DebugSectionDescriptor(io.BytesIO(data), name, sec.offset, len(data), sec.addr)
    try:
        di = DWARFInfo(
            config=DwarfConfig(little_endian=img.little, default_address_size=img.elfclass // 8,
                               machine_arch=img.machine_name),
            debug_info_sec=secs[".debug_info"], debug_aranges_sec=secs[".debug_aranges"],
            debug_abbrev_sec=secs[".debug_abbrev"], debug_frame_sec=None, eh_frame_sec=None,
            debug_str_sec=secs[".debug_str"], debug_loc_sec=secs[".debug_loc"], debug_ranges_sec=secs[".debug_ranges"],
            debug_line_sec=secs[".debug_line"], debug_pubtypes_sec=None, debug_pubnames_sec=None,
            debug_addr_sec=secs[".debug_addr"], debug_str_offsets_sec=secs[".debug_str_offsets"],
            debug_line_str_sec=secs[".debug_line_str"], debug_loclists_sec=secs[".debug_loclists"],
            debug_rnglists_sec=secs[".debug_rnglists"], debug_sup_sec=None, gnu_debugaltlink_sec=None,
            debug_types_sec=None)
    except (ELFError, Exception) as e:  # pyelftools raises assorted errors on garbage
        raise InputError(f"{img.name}: corrupt DWARF ({type(e).__name__}: {e})") from None
    di.sizewatch_raw = raw
    return di


def _s(v) -> str | None:
    if v is None:
        return None
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


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

    ``engine="fast"`` walks the DIEs with :mod:`analyzer.dwarf_walk`; ``"pyelftools"``
    decodes them with pyelftools (slower; kept as the reference the tests compare with).
    """
    di = _dwarfinfo(img, table)
    units: list[CompileUnitFacts] = []
    allsp: dict[int, Subprogram] = {}
    try:
        if engine == "fast":
            from analyzer.dwarf_walk import Walker
            w = Walker(di.sizewatch_raw, img.little)
            if cus:
                wanted = {off for off, name in scan_unit_names(di.sizewatch_raw, img.little) if cu_matches(name, cus)}
            for unit in w.units():
                if cus and unit[0] not in wanted:
                    continue
                facts = w.walk(unit, lambda off: _file_table(di, di.get_CU_at(off)))
                units.append(facts)
                allsp.update(facts.subprograms)
        else:
            if cus:
                offsets = [off for off, name in scan_unit_names(di.sizewatch_raw, img.little)
                           if cu_matches(name, cus)]
                selected = (di.get_CU_at(off) for off in offsets)
            else:
                selected = di.iter_CUs()
            for cu in selected:
                top = cu.get_top_DIE()
                if top.tag not in ("DW_TAG_compile_unit", "DW_TAG_partial_unit"):
                    continue
                cuname = _s(top.attributes["DW_AT_name"].value) if "DW_AT_name" in top.attributes else None
                units.append(_read_cu(di, cu, top, cuname, allsp))
    except InputError as e:
        raise InputError(f"{img.name}: {e}") from None
    except Exception as e:  # truncated/corrupt DWARF: one line, never a traceback
        raise InputError(f"{img.name}: corrupt DWARF ({type(e).__name__}: {e})") from None
    if cus:
        found = {w for w in cus if any(cu_matches(u.name, (w,)) for u in units)}
        missing = [w for w in cus if w not in found]
        if missing:
            raise InputError(f"{img.name}: no compilation unit named {', '.join(missing)} in the DWARF")
    return DwarfFacts(units, allsp)


def _file_table(di, cu) -> list[str | None]:
    """File names by DW_AT_decl_file index (DWARF 5: 0 is the primary file; 4: 1-based)."""
    lp = di.line_program_for_CU(cu)
    if lp is None:
        return []
    hdr = lp.header
    dirs = [_s(d.DW_LNCT_path if hasattr(d, "DW_LNCT_path") else d) for d in hdr.include_directory]
    out: list[str | None] = []
    v5 = hdr.version >= 5
    if not v5:
        out.append(None)
        dirs = [None, *dirs]
    for fe in hdr.file_entry:
        name = _s(fe.name if hasattr(fe, "name") else fe.DW_LNCT_path)
        di_ = fe.dir_index if hasattr(fe, "dir_index") else fe.DW_LNCT_directory_index
        d = dirs[di_] if 0 <= di_ < len(dirs) else None
        if name and not name.startswith("/") and d:
            name = f"{d.rstrip('/')}/{name}"
        out.append(name)
    return out


def _ranges(di, cu, die, attrs, base: int) -> list[tuple[int, int]]:
    lo = attrs.get("DW_AT_low_pc")
    if "DW_AT_ranges" in attrs:
        rl = di.range_lists()
        if rl is None:
            return []
        ra = attrs["DW_AT_ranges"]
        if ra.form == "DW_FORM_rnglistx":
            off = ra.value   # pyelftools resolves rnglistx to a section offset in .value for DIE attrs
        else:
            off = ra.value
        entries = rl.get_range_list_at_offset(off, cu=cu)
        out = []
        cur = base
        for e in entries:
            if hasattr(e, "base_address"):
                cur = e.base_address
                continue
            if e.is_absolute:
                out.append((e.begin_offset, e.end_offset))
            else:
                out.append((cur + e.begin_offset, cur + e.end_offset))
        return [(a, b) for a, b in out if b > a]
    if lo is not None:
        hi = attrs.get("DW_AT_high_pc")
        if hi is None:
            return [(lo.value, lo.value + 1)]
        hv = hi.value
        if hi.form != "DW_FORM_addr" and not hi.form.startswith("DW_FORM_addrx"):
            hv = lo.value + hv
        return [(lo.value, hv)] if hv > lo.value else []
    return []


def _read_cu(di, cu, top, cuname, allsp: dict[int, Subprogram]) -> CompileUnitFacts:
    ta = top.attributes
    facts = CompileUnitFacts(cuname, _s(ta["DW_AT_comp_dir"].value) if "DW_AT_comp_dir" in ta else None,
                             _s(ta["DW_AT_producer"].value) if "DW_AT_producer" in ta else None)
    files = _file_table(di, cu)
    base = ta["DW_AT_low_pc"].value if "DW_AT_low_pc" in ta else 0
    cu_off = cu.cu_offset
    # stack of (has_children marker): (tag, die offset, origin offset)
    stack: list[tuple[str, int, int | None]] = []
    container: int | None = None
    container_depth = -1
    for die in cu.iter_DIEs():
        if die.is_null():
            if stack:
                tag, off, _o = stack.pop()
                if off == container and len(stack) == container_depth:
                    container, container_depth = None, -1
            continue
        tag = die.tag
        if tag == "DW_TAG_subprogram" or tag == "DW_TAG_inlined_subroutine":
            a = die.attributes
            origin = None
            for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
                if key in a:
                    at = a[key]
                    origin = at.value + (cu_off if at.form in ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4",
                                                               "DW_FORM_ref8", "DW_FORM_ref_udata") else 0)
                    break
            rng = _ranges(di, cu, die, a, base)
            if tag == "DW_TAG_subprogram":
                df = a.get("DW_AT_decl_file")
                sp = Subprogram(
                    die.offset,
                    _s(a["DW_AT_name"].value) if "DW_AT_name" in a else None,
                    _s(a["DW_AT_linkage_name"].value) if "DW_AT_linkage_name" in a else None,
                    files[df.value] if df is not None and 0 <= df.value < len(files) else None,
                    a["DW_AT_decl_line"].value if "DW_AT_decl_line" in a else None,
                    a["DW_AT_inline"].value if "DW_AT_inline" in a else None,
                    bool(a["DW_AT_external"].value) if "DW_AT_external" in a else False,
                    bool(a["DW_AT_declaration"].value) if "DW_AT_declaration" in a else False,
                    rng, origin)
                facts.subprograms[die.offset] = sp
                allsp[die.offset] = sp
                if rng and container is None and die.has_children:
                    container, container_depth = die.offset, len(stack)
            elif origin is not None:
                parent = next((o for t, _off, o in reversed(stack) if t == "DW_TAG_inlined_subroutine"), None)
                cf = a.get("DW_AT_call_file")
                facts.inlined.append(InlinedInstance(
                    origin, container, parent, rng,
                    files[cf.value] if cf is not None and 0 <= cf.value < len(files) else None,
                    a["DW_AT_call_line"].value if "DW_AT_call_line" in a else None))
            if die.has_children:
                stack.append((tag, die.offset, origin))
        elif die.has_children:
            stack.append((tag, die.offset, None))
    return facts


# --- CU names without pyelftools: one abbrev entry and one DIE per unit ---------------------------

def _uleb(b: bytes, i: int) -> tuple[int, int]:
    r = shift = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << shift
        if c < 0x80:
            return r, i
        shift += 7


def _sleb(b: bytes, i: int) -> tuple[int, int]:
    r = shift = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            if c & 0x40:
                r -= 1 << shift
            return r, i


_FIXED = {0x0b: 1, 0x05: 2, 0x06: 4, 0x07: 8, 0x1e: 16, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8, 0x0c: 1,
          0x19: 0, 0x21: 0, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1, 0x2a: 2, 0x2b: 3, 0x2c: 4,
          0x20: 8}


def scan_unit_names(raw: dict[str, bytes], little: bool) -> list[tuple[int, str | None]]:
    """(unit offset, DW_AT_name) of every unit in .debug_info, decoding only each top DIE.

    pyelftools parses a unit's whole abbreviation table to read its first DIE
    (10 s over a vmlinux's 2,000+ units); here only the abbreviation entry of
    the top DIE is read, and its attributes up to the name.
    """
    import struct as _st
    info, abbrev = raw.get(".debug_info", b""), raw.get(".debug_abbrev", b"")
    strs, lstrs = raw.get(".debug_str", b""), raw.get(".debug_line_str", b"")
    stroffs = raw.get(".debug_str_offsets", b"")
    e = "<" if little else ">"
    out: list[tuple[int, str | None]] = []
    pos, n = 0, len(info)
    abbrev_cache: dict[tuple[int, int], list] = {}
    while pos + 11 <= n:
        start = pos
        (length,) = _st.unpack_from(e + "I", info, pos)
        off = 4
        dwarf64 = length == 0xFFFFFFFF
        if dwarf64:
            (length,) = _st.unpack_from(e + "Q", info, pos + 4)
            off = 12
        end = pos + off + length
        if length == 0 or end > n:
            raise InputError(f"truncated .debug_info (unit at {start:#x} runs past the section end)")
        osz = 8 if dwarf64 else 4
        (version,) = _st.unpack_from(e + "H", info, pos + off)
        p = pos + off + 2
        if version >= 5:
            utype, asz = info[p], info[p + 1]
            p += 2
            abbr_off = int.from_bytes(info[p:p + osz], "little" if little else "big")
            p += osz
            if utype in (2, 6):           # type / split type units: signature + type offset
                p += 8 + osz
            elif utype in (4, 5):         # skeleton / split compile: dwo id
                p += 8
        elif version in (2, 3, 4):
            abbr_off = int.from_bytes(info[p:p + osz], "little" if little else "big")
            asz = info[p + osz]
            p += osz + 1
        else:
            raise InputError(f"unsupported DWARF version {version} (unit at {start:#x})")
        code, p = _uleb(info, p)
        key = (abbr_off, code)
        spec = abbrev_cache.get(key)
        if spec is None:
            q = abbr_off
            while True:
                c, q = _uleb(abbrev, q)
                if c == 0:
                    raise InputError(f"corrupt .debug_abbrev (no entry {code} at {abbr_off:#x})")
                _tag, q = _uleb(abbrev, q)
                q += 1
                attrs = []
                while True:
                    at, q = _uleb(abbrev, q)
                    fm, q = _uleb(abbrev, q)
                    if fm == 0x21:
                        _v, q = _sleb(abbrev, q)
                    if at == 0 and fm == 0:
                        break
                    attrs.append((at, fm))
                if c == code:
                    spec = attrs
                    break
            abbrev_cache[key] = spec
        name = None
        name_strx = None
        stroff_base = 8 if dwarf64 else 8
        for at, fm in spec:
            val = None
            if fm in (0x0e, 0x1f, 0x17):              # strp, line_strp, sec_offset
                val = int.from_bytes(info[p:p + osz], "little" if little else "big")
                p += osz
            elif fm == 0x08:                          # string
                z = info.index(b"\0", p)
                val = info[p:z]
                p = z + 1
            elif fm == 0x01:
                p += asz
            elif fm in (0x0f, 0x1a, 0x1b, 0x23, 0x22):   # udata, strx, addrx, rnglistx, loclistx
                val, p = _uleb(info, p)
            elif fm == 0x0d:
                _v, p = _sleb(info, p)
            elif fm in (0x18, 0x09):                  # exprloc, block
                ln, p = _uleb(info, p)
                p += ln
            elif fm == 0x0a:
                p += 1 + info[p]
            elif fm == 0x03:
                p += 2 + int.from_bytes(info[p:p + 2], "little" if little else "big")
            elif fm == 0x04:
                p += 4 + int.from_bytes(info[p:p + 4], "little" if little else "big")
            elif fm in (0x10,):                       # ref_addr
                p += osz
            elif fm in _FIXED:
                w = _FIXED[fm]
                if fm in (0x25, 0x26, 0x27, 0x28):
                    val = int.from_bytes(info[p:p + w], "little" if little else "big")
                p += w
            else:
                raise InputError(f"unsupported DWARF form {fm:#x} in unit at {start:#x}")
            if at == 0x03:
                if fm == 0x0e:
                    name = strs[val:strs.index(b"\0", val)]
                elif fm == 0x1f:
                    name = lstrs[val:lstrs.index(b"\0", val)]
                elif fm == 0x08:
                    name = val
                elif fm in (0x1a, 0x25, 0x26, 0x27, 0x28):
                    name_strx = val
            elif at == 0x72 and val is not None:      # DW_AT_str_offsets_base
                stroff_base = val
        if name is None and name_strx is not None and stroffs:
            so = stroff_base + name_strx * osz
            sp = int.from_bytes(stroffs[so:so + osz], "little" if little else "big")
            name = strs[sp:strs.index(b"\0", sp)]
        out.append((start, name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name))
        pos = end
    return out
