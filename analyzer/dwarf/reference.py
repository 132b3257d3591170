"""The reference DWARF reader: pyelftools decodes the DIEs and the line tables.

Slower than :mod:`analyzer.dwarf.walker` (a Python object per DIE through construct),
it is kept as the oracle the tests compare the walker with (``read_dwarf(...,
engine="pyelftools")``). It reads the same relocated section bytes as the walker.
"""
from __future__ import annotations

import io

from analyzer.dwarf.model import CompileUnitFacts, InlinedInstance, Subprogram

DEBUG_SECTIONS = (".debug_info", ".debug_aranges", ".debug_abbrev", ".debug_str", ".debug_line",
                  ".debug_ranges", ".debug_addr", ".debug_str_offsets", ".debug_line_str",
                  ".debug_rnglists", ".debug_loclists", ".debug_loc")
_UNIT_RELATIVE = ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8", "DW_FORM_ref_udata")


def dwarf_info(raw: dict[str, bytes], little: bool, address_size: int, machine: str):
    """A pyelftools DWARFInfo over already relocated section bytes (``raw``: name -> bytes)."""
    from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo
    secs = {name: (DebugSectionDescriptor(io.BytesIO(raw[name]), name, 0, len(raw[name]), 0)
                   if name in raw else None) for name in DEBUG_SECTIONS}
    return DWARFInfo(
        config=DwarfConfig(little_endian=little, default_address_size=address_size, machine_arch=machine),
        debug_info_sec=secs[".debug_info"], debug_aranges_sec=secs[".debug_aranges"],
        debug_abbrev_sec=secs[".debug_abbrev"], debug_frame_sec=None, eh_frame_sec=None,
        debug_str_sec=secs[".debug_str"], debug_loc_sec=secs[".debug_loc"], debug_ranges_sec=secs[".debug_ranges"],
        debug_line_sec=secs[".debug_line"], debug_pubtypes_sec=None, debug_pubnames_sec=None,
        debug_addr_sec=secs[".debug_addr"], debug_str_offsets_sec=secs[".debug_str_offsets"],
        debug_line_str_sec=secs[".debug_line_str"], debug_loclists_sec=secs[".debug_loclists"],
        debug_rnglists_sec=secs[".debug_rnglists"], debug_sup_sec=None, gnu_debugaltlink_sec=None,
        debug_types_sec=None)


def read_units(di, offsets: list[int] | None) -> list[CompileUnitFacts]:
    """Facts of the units at ``offsets`` (all units when None) decoded by pyelftools."""
    selected = (di.get_CU_at(off) for off in offsets) if offsets is not None else di.iter_CUs()
    units: list[CompileUnitFacts] = []
    for cu in selected:
        top = cu.get_top_DIE()
        if top.tag not in ("DW_TAG_compile_unit", "DW_TAG_partial_unit"):
            continue
        cuname = _s(top.attributes["DW_AT_name"].value) if "DW_AT_name" in top.attributes else None
        units.append(_read_cu(di, cu, top, cuname))
    return units


def _s(v) -> str | None:
    if v is None:
        return None
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


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
        # pyelftools resolves rnglistx to a section offset in .value, like sec_offset
        entries = rl.get_range_list_at_offset(ra.value, cu=cu)
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


def _read_cu(di, cu, top, cuname) -> CompileUnitFacts:
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
                    origin = at.value + (cu_off if at.form in _UNIT_RELATIVE else 0)
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


