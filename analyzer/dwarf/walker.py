"""The fast DWARF 4/5 reader: a DIE walk for the two tags the inline facts need.

pyelftools builds a Python object per DIE and per attribute through construct
(0.7 s for the 24k DIEs of a gcc-12 page_alloc.o); the inline facts only need
DW_TAG_subprogram and DW_TAG_inlined_subroutine with a dozen attributes. Here
each abbreviation gets a precomputed byte size when all its forms are fixed,
so every other DIE is skipped with one addition, and only the two tags are
decoded. The file names come from the line table header (:mod:`.lines`) and the
ranges from the range lists (:mod:`.ranges`), decoded by us too, so the walk needs
nothing of pyelftools but its names. :mod:`analyzer.dwarf.reference`
(pyelftools) stays the oracle the tests compare this walker with.

Damaged input: every read is checked against its section (see
:mod:`analyzer.dwarf.encoding`); strings and range lists are cached by offset and
the decoded string bytes are budgeted against the sections' size, so a file cannot
make the walk use more time or memory than its own size allows.
"""
from __future__ import annotations

from collections.abc import Iterator

from analyzer.dwarf import lines, ranges
from analyzer.dwarf.encoding import (ADDRX, AT, FORM, REF_UNIT, STRX, TAG, LebTooLong, UnitHeader,
                                     abbrev_table, corrupt, cstr, fixed, fixed_sizes, form_name, form_shapes,
                                     read_form, uleb, unit_headers)
from analyzer.dwarf.model import CompileUnitFacts, InlinedInstance, Subprogram

INFO = ".debug_info"
TAG_SUBPROGRAM, TAG_INLINED = TAG["subprogram"], TAG["inlined_subroutine"]
UNIT_TAGS = frozenset((TAG["compile_unit"], TAG["partial_unit"]))
AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES = AT["name"], AT["low_pc"], AT["high_pc"], AT["ranges"]
AT_ORIGIN, AT_SPEC, AT_DECL_FILE, AT_DECL_LINE = AT["abstract_origin"], AT["specification"], AT["decl_file"], \
    AT["decl_line"]
AT_INLINE, AT_EXTERNAL, AT_DECLARATION = AT["inline"], AT["external"], AT["declaration"]
AT_LINKAGE, AT_MIPS_LINKAGE = AT["linkage_name"], AT["MIPS_linkage_name"]
AT_CALL_FILE, AT_CALL_LINE, AT_COMP_DIR, AT_PRODUCER = AT["call_file"], AT["call_line"], AT["comp_dir"], \
    AT["producer"]
AT_STMT_LIST = AT["stmt_list"]
AT_STR_OFFSETS_BASE, AT_ADDR_BASE, AT_RNGLISTS_BASE, AT_GNU_ADDR_BASE = AT["str_offsets_base"], AT["addr_base"], \
    AT["rnglists_base"], AT["GNU_addr_base"]
WANTED = frozenset((AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_ORIGIN, AT_SPEC, AT_DECL_FILE, AT_DECL_LINE,
                    AT_INLINE, AT_EXTERNAL, AT_DECLARATION, AT_LINKAGE, AT_MIPS_LINKAGE, AT_CALL_FILE,
                    AT_CALL_LINE))
CU_WANTED = frozenset((AT_NAME, AT_COMP_DIR, AT_PRODUCER, AT_LOW_PC, AT_STR_OFFSETS_BASE, AT_ADDR_BASE,
                       AT_RNGLISTS_BASE, AT_GNU_ADDR_BASE, AT_STMT_LIST))
F_ADDR, F_STRING, F_STRP, F_LINE_STRP = FORM["addr"], FORM["string"], FORM["strp"], FORM["line_strp"]
F_IMPLICIT, F_RNGLISTX, F_ADDRX = FORM["implicit_const"], FORM["rnglistx"], FORM["addrx"]

# ranges whose offset tables start right after their section's unit header when a unit has no
# DW_AT_*_base attribute: the header is 8 bytes (32-bit DWARF) or 16 (64-bit) for .debug_str_offsets
# and .debug_addr, 12 or 20 for .debug_rnglists
_DEFAULT_BASE = {"str_offsets_base": {4: 8, 8: 16}, "addr_base": {4: 8, 8: 16}, "rnglists_base": {4: 12, 8: 20}}


class Walker:
    """Decodes units of one file's (relocated) debug sections."""

    def __init__(self, raw: dict[str, bytes], little: bool):
        self.info = raw.get(INFO, b"")
        self.abbrev = raw.get(".debug_abbrev", b"")
        self.str = raw.get(".debug_str", b"")
        self.line = raw.get(".debug_line", b"")
        self.line_str = raw.get(".debug_line_str", b"")
        self.str_offsets = raw.get(".debug_str_offsets", b"")
        self.addr = raw.get(".debug_addr", b"")
        self.rnglists = raw.get(".debug_rnglists", b"")
        self.ranges = raw.get(".debug_ranges", b"")
        self.bo = "little" if little else "big"
        self._abbrevs: dict[tuple[int, int, int], dict] = {}
        self._forms: dict[tuple[int, int], tuple[dict, dict]] = {}
        self._strings: dict[tuple[int, int], str] = {}
        self.file_tables: dict[int, list[str | None]] = {}
        # decoded string bytes allowed: overlapping string offsets must not turn a small file
        # into gigabytes of copies
        self._string_budget = 8 * (len(self.str) + len(self.line_str) + len(self.line) + len(self.info)) + (1 << 20)
        # the same for bytes parsed again and again: abbreviation tables, line table headers and
        # range lists that many units point into (real files parse each about once)
        self._abbrev_budget = 8 * len(self.abbrev) + (1 << 20)
        self.line_budget = 8 * len(self.line) + (1 << 20)
        self.range_budget = 8 * (len(self.rnglists) + len(self.ranges)) + (1 << 20)

    # --- tables ---------------------------------------------------------------------------
    def forms(self, asz: int, osz: int) -> tuple[dict, dict]:
        key = (asz, osz)
        got = self._forms.get(key)
        if got is None:
            shapes = form_shapes(asz, osz)
            got = self._forms[key] = (shapes, fixed_sizes(shapes))
        return got

    def abbrevs(self, off: int, asz: int, osz: int) -> dict:
        """code -> (tag, has children, attributes, byte size or None, decode plan) of one
        abbreviation table.

        The plan is the attributes the walk has to look at: every one that takes bytes, and of
        those that take none (flag_present, implicit_const) only the last of each wanted
        attribute, so an abbreviation with a million zero-width attributes costs no more per
        DIE than its bytes.
        """
        key = (off, asz, osz)
        tab = self._abbrevs.get(key)
        if tab is not None:
            return tab
        _shapes, sizes = self.forms(asz, osz)
        tab = {}
        parsed, entries = abbrev_table(self.abbrev, off, with_length=True)
        self._abbrev_budget -= parsed
        if self._abbrev_budget < 0:
            raise corrupt(".debug_abbrev", off, "abbreviation tables overlap beyond any real file "
                                                "(parse budget spent)")
        for code, (tag, children, attrs) in entries.items():
            size: int | None = 0
            for _at, fm, _c in attrs:
                w = sizes.get(fm)
                if w is None:
                    size = None
                    break
                size += w
            tab[code] = (tag, children, attrs, size, _plan(attrs, sizes))
        self._abbrevs[key] = tab
        return tab

    def units(self) -> Iterator[UnitHeader]:
        return unit_headers(self.info, self.bo)

    # --- values of other sections ---------------------------------------------------------
    def _cstr(self, b: bytes, p: int, section: str, which: int) -> str:
        key = (which, p)
        s = self._strings.get(key)
        if s is None:
            s = cstr(b, p, section)
            self._string_budget -= len(s) + 1
            if self._string_budget < 0:
                raise corrupt(section, p, "strings overlap beyond any real file (decoded string budget spent)")
            self._strings[key] = s
        return s

    def string(self, fm: int, v, cu: dict) -> str | None:
        if fm == F_STRP:
            return self._cstr(self.str, v, ".debug_str", 0)
        if fm == F_LINE_STRP:
            return self._cstr(self.line_str, v, ".debug_line_str", 1)
        if fm == F_STRING:
            return v.decode("utf-8", "surrogateescape")
        if fm in STRX:
            osz = cu["osz"]
            off = fixed(self.str_offsets, cu["str_offsets_base"] + v * osz, osz, ".debug_str_offsets", self.bo)
            return self._cstr(self.str, off, ".debug_str", 0)
        return None

    def address(self, fm: int, v, cu: dict) -> int:
        asz = cu["asz"]
        if fm in ADDRX:
            return fixed(self.addr, cu["addr_base"] + v * asz, asz, ".debug_addr", self.bo)
        if not isinstance(v, int) or not 0 <= v < (1 << (8 * asz)) - 1:   # a block, a negative sdata...
            what = f"address {v:#x}" if isinstance(v, int) else "address in a block form"
            raise corrupt(INFO, cu["offset"], f"{what} outside the {8 * asz}-bit address space")
        return v

    def range_list(self, fm: int, v, cu: dict) -> list[tuple[int, int]]:
        return ranges.range_list(self, fm, v, cu)

    def file_table(self, off: int, cu: dict) -> list[str | None]:
        """File names by DW_AT_decl_file index (see :mod:`analyzer.dwarf.lines`)."""
        return lines.file_table(self, off, cu)

    # --- units ----------------------------------------------------------------------------
    def unit_context(self, u: UnitHeader) -> tuple[int, dict, dict]:
        """(position after the top DIE, the top DIE's attributes we use, the unit's bases) ."""
        shapes, _sizes = self.forms(u.address_size, u.offset_size)
        tab = self.abbrevs(u.abbrev_offset, u.address_size, u.offset_size)
        b, bo, p = self.info, self.bo, u.die_offset
        try:
            code, p = uleb(b, p)
            ent = tab.get(code)
            if ent is None:
                raise corrupt(INFO, u.die_offset, f"abbreviation code {code} missing from the table at "
                                                  f".debug_abbrev+{u.abbrev_offset:#x}")
            tag, children, _attrs, _size, plan = ent
            raw_cu = {}
            for at, fm, const in plan:
                v, p = (const, p) if fm == F_IMPLICIT else read_form(b, p, fm, shapes, bo)
                if at in CU_WANTED:
                    raw_cu[at] = (fm, v)
        except IndexError:
            raise corrupt(INFO, u.die_offset, "unit DIE runs past the end of the section") from None
        except LebTooLong as e:
            raise corrupt(INFO, e.pos, str(e)) from None
        if p > u.end:
            raise corrupt(INFO, u.die_offset, f"unit DIE runs past the end of its unit ({u.end:#x})")
        cu = {"ver": u.version, "asz": u.address_size, "osz": u.offset_size, "tag": tag, "children": children,
              "offset": u.offset}
        for key, ats in (("str_offsets_base", (AT_STR_OFFSETS_BASE,)), ("addr_base", (AT_ADDR_BASE, AT_GNU_ADDR_BASE)),
                         ("rnglists_base", (AT_RNGLISTS_BASE,))):
            at = next((a for a in ats if a in raw_cu), None)
            cu[key] = raw_cu[at][1] if at is not None else _DEFAULT_BASE[key][u.offset_size]
            if not isinstance(cu[key], int):
                raise corrupt(INFO, u.die_offset, f"{key} is not an offset")
        if AT_LOW_PC in raw_cu:
            cu["low_pc"] = self.address(*raw_cu[AT_LOW_PC], cu)
        return p, raw_cu, cu

    def walk(self, u: UnitHeader) -> CompileUnitFacts | None:
        """The inline facts of one unit (None for a unit that is not a compile or partial unit)."""
        p, raw_cu, cu = self.unit_context(u)
        if cu["tag"] not in UNIT_TAGS:
            return None
        off, asz, osz, end = u.offset, u.address_size, u.offset_size, u.end
        shapes, _sizes = self.forms(asz, osz)
        tab = self.abbrevs(u.abbrev_offset, asz, osz)
        name = self.string(*raw_cu[AT_NAME], cu) if AT_NAME in raw_cu else None
        facts = CompileUnitFacts(name, self.string(*raw_cu[AT_COMP_DIR], cu) if AT_COMP_DIR in raw_cu else None,
                                 self.string(*raw_cu[AT_PRODUCER], cu) if AT_PRODUCER in raw_cu else None)
        stmt = raw_cu.get(AT_STMT_LIST)
        files = self.file_table(stmt[1], cu) if stmt is not None and isinstance(stmt[1], int) else []
        nfiles = len(files)
        if not cu["children"]:
            return facts
        b, bo = self.info, self.bo
        ranges: dict[tuple[int, int], list[tuple[int, int]]] = {}     # shared by DIEs naming one list
        # stack entries: (tag, offset, origin)
        stack: list[tuple[int, int, int | None]] = []
        container = None
        container_depth = -1
        die_off = p
        try:
            while p < end:
                die_off = p
                code, p = uleb(b, p)
                if code == 0:
                    if not stack:
                        break
                    _t, o, _og = stack.pop()
                    if o == container and len(stack) == container_depth:
                        container, container_depth = None, -1
                    continue
                ent = tab.get(code)
                if ent is None:
                    raise corrupt(INFO, die_off, f"abbreviation code {code} missing from the table at "
                                                 f".debug_abbrev+{u.abbrev_offset:#x}")
                tag, has_kids, _attrs, size, plan = ent
                if tag != TAG_SUBPROGRAM and tag != TAG_INLINED:
                    if size is not None:
                        p += size
                    else:
                        for _at, fm, _const in plan:
                            if fm != F_IMPLICIT:
                                _v, p = read_form(b, p, fm, shapes, bo)
                    if p > end:
                        raise corrupt(INFO, die_off, f"DIE runs past the end of its unit ({end:#x})")
                    if has_kids:
                        stack.append((tag, die_off, None))
                    continue
                a = {}
                for at, fm, const in plan:
                    if fm == F_IMPLICIT:
                        v = const
                    else:
                        v, p = read_form(b, p, fm, shapes, bo)
                    if at in WANTED:
                        a[at] = (fm, v)
                if p > end:
                    raise corrupt(INFO, die_off, f"DIE runs past the end of its unit ({end:#x})")
                for at, (fm, v) in a.items():       # numbers where numbers are used: never a block
                    if not isinstance(v, int) and at not in (AT_NAME, AT_LINKAGE, AT_MIPS_LINKAGE):
                        raise corrupt(INFO, die_off, f"{_at_name(at)} in {form_name(fm)}, not a number")
                origin = None
                for key in (AT_ORIGIN, AT_SPEC):
                    if key in a:
                        fm, v = a[key]
                        origin = v + off if fm in REF_UNIT else v
                        break
                rng: list[tuple[int, int]] = []
                if AT_RANGES in a:
                    rkey = a[AT_RANGES]
                    rng = ranges.get(rkey)
                    if rng is None:
                        rng = ranges[rkey] = self.range_list(*rkey, cu)
                elif AT_LOW_PC in a:
                    lo = self.address(*a[AT_LOW_PC], cu)
                    if AT_HIGH_PC in a:
                        fm, hv = a[AT_HIGH_PC]
                        hi = self.address(fm, hv, cu) if (fm == F_ADDR or fm in ADDRX) else lo + hv
                        if hi >> (8 * asz):
                            raise corrupt(INFO, die_off, f"DW_AT_high_pc past the {8 * asz}-bit address space")
                        rng = [(lo, hi)] if hi > lo else []
                    else:
                        rng = [(lo, lo + 1)]
                if tag == TAG_SUBPROGRAM:
                    nm = a.get(AT_NAME)
                    ln = a.get(AT_LINKAGE) or a.get(AT_MIPS_LINKAGE)
                    df = a.get(AT_DECL_FILE)
                    dfv = df[1] if df is not None else None
                    sp = Subprogram(
                        die_off, self.string(*nm, cu) if nm else None, self.string(*ln, cu) if ln else None,
                        files[dfv] if isinstance(dfv, int) and 0 <= dfv < nfiles else None,
                        a[AT_DECL_LINE][1] if AT_DECL_LINE in a else None,
                        a[AT_INLINE][1] if AT_INLINE in a else None,
                        bool(a[AT_EXTERNAL][1]) if AT_EXTERNAL in a else False,
                        bool(a[AT_DECLARATION][1]) if AT_DECLARATION in a else False,
                        rng, origin)
                    facts.subprograms[die_off] = sp
                    if rng and container is None and has_kids:
                        container, container_depth = die_off, len(stack)
                elif origin is not None:
                    parent = next((o for t, _o, o in reversed(stack) if t == TAG_INLINED), None)
                    cf = a.get(AT_CALL_FILE)
                    cfv = cf[1] if cf is not None else None
                    facts.inlined.append(InlinedInstance(
                        origin, container, parent, rng,
                        files[cfv] if isinstance(cfv, int) and 0 <= cfv < nfiles else None,
                        a[AT_CALL_LINE][1] if AT_CALL_LINE in a else None))
                if has_kids:
                    stack.append((tag, die_off, origin))
        except IndexError:
            raise corrupt(INFO, die_off, "DIE runs past the end of the section") from None
        except LebTooLong as e:
            raise corrupt(INFO, e.pos, str(e)) from None
        return facts

    # --- every DIE, every attribute (the tests' window on the decoding) -------------------
    def dies(self, u: UnitHeader) -> list[tuple[int, int, int, list[tuple[int, int, object]]]]:
        """(offset, depth, tag, [(attribute, form, value)]) of every DIE of a unit, values
        resolved as far as the encoding allows: strings to text, addrx to addresses,
        unit-relative references to .debug_info offsets, rnglistx to .debug_rnglists offsets,
        implicit_const to its constant. The inline facts do not need it: it shows the tests
        every form the walk decodes."""
        _p, _raw, cu = self.unit_context(u)
        shapes, _sizes = self.forms(u.address_size, u.offset_size)
        tab = self.abbrevs(u.abbrev_offset, u.address_size, u.offset_size)
        b, bo, p, depth = self.info, self.bo, u.die_offset, 0
        out = []
        die_off = p
        try:
            while p < u.end:
                die_off = p
                code, p = uleb(b, p)
                if code == 0:
                    depth -= 1
                    if depth <= 0:
                        break
                    continue
                ent = tab.get(code)
                if ent is None:
                    raise corrupt(INFO, die_off, f"abbreviation code {code} missing")
                tag, has_kids, attrs, _size, _plan = ent
                vals = []
                for at, fm, const in attrs:
                    v, p = (const, p) if fm == F_IMPLICIT else read_form(b, p, fm, shapes, bo)
                    if fm in REF_UNIT:
                        v += u.offset
                    elif fm == F_RNGLISTX:      # to the list's offset in .debug_rnglists, as pyelftools gives it
                        v = cu["rnglists_base"] + fixed(self.rnglists, cu["rnglists_base"] + v * u.offset_size,
                                                        u.offset_size, ".debug_rnglists", bo)
                    elif fm in ADDRX:
                        v = self.address(fm, v, cu)
                    elif fm in STRX or fm in (F_STRP, F_LINE_STRP, F_STRING):
                        v = self.string(fm, v, cu)
                    vals.append((at, fm, v))
                if p > u.end:
                    raise corrupt(INFO, die_off, f"DIE runs past the end of its unit ({u.end:#x})")
                out.append((die_off, depth, tag, vals))
                if has_kids:
                    depth += 1
                elif depth == 0:
                    break
        except IndexError:
            raise corrupt(INFO, die_off, "DIE runs past the end of the section") from None
        except LebTooLong as e:
            raise corrupt(INFO, e.pos, str(e)) from None
        return out


def _plan(attrs: tuple, sizes: dict[int, int]) -> tuple:
    """The attributes a DIE walk must look at (see :meth:`Walker.abbrevs`)."""
    keep = WANTED | CU_WANTED
    out = []
    seen: set[int] = set()
    for at, fm, const in reversed(attrs):
        if sizes.get(fm) == 0:           # flag_present, implicit_const: no bytes
            if at not in keep or at in seen:
                continue
        seen.add(at)
        out.append((at, fm, const))
    return tuple(reversed(out))


def _at_name(at: int) -> str:
    return next((f"DW_AT_{k}" for k, v in AT.items() if v == at), f"attribute {at:#x}")



def scan_unit_names(raw: dict[str, bytes], little: bool) -> list[tuple[int, str | None]]:
    """(unit offset, DW_AT_name) of every unit in .debug_info, decoding only each top DIE.

    pyelftools parses a unit's whole abbreviation table to read its first DIE
    (10 s over a vmlinux's 2,000+ units); here only the abbreviation table up to the
    top DIE's entry is read, and the top DIE's attributes.
    """
    w = Walker(raw, little)
    out: list[tuple[int, str | None]] = []
    entries: dict[tuple[int, int], tuple] = {}
    for u in w.units():
        b, p = w.info, u.die_offset
        try:
            code, p = uleb(b, p)
        except (IndexError, LebTooLong):
            raise corrupt(INFO, u.die_offset, "unit DIE runs past the end of the section") from None
        key = (u.abbrev_offset, code)
        shapes, sizes = w.forms(u.address_size, u.offset_size)
        plan = entries.get(key)
        if plan is None:
            parsed, tab = abbrev_table(w.abbrev, u.abbrev_offset, want=code, with_length=True)
            w._abbrev_budget -= parsed
            if w._abbrev_budget < 0:
                raise corrupt(".debug_abbrev", u.abbrev_offset, "abbreviation tables overlap beyond any real file "
                                                                "(parse budget spent)")
            if code not in tab:
                raise corrupt(INFO, u.die_offset, f"abbreviation code {code} missing from the table at "
                                                  f".debug_abbrev+{u.abbrev_offset:#x}")
            plan = entries[key] = _plan(tab[code][2], sizes)
        cu = {"ver": u.version, "asz": u.address_size, "osz": u.offset_size, "offset": u.offset}
        raw_cu = {}
        try:
            for at, fm, const in plan:
                v, p = (const, p) if fm == F_IMPLICIT else read_form(b, p, fm, shapes, w.bo)
                if at in (AT_NAME, AT_STR_OFFSETS_BASE):
                    raw_cu[at] = (fm, v)
        except (IndexError, LebTooLong):
            raise corrupt(INFO, u.die_offset, "unit DIE runs past the end of the section") from None
        if p > u.end:
            raise corrupt(INFO, u.die_offset, f"unit DIE runs past the end of its unit ({u.end:#x})")
        sob = raw_cu.get(AT_STR_OFFSETS_BASE)
        cu["str_offsets_base"] = sob[1] if sob is not None else _DEFAULT_BASE["str_offsets_base"][u.offset_size]
        name = w.string(*raw_cu[AT_NAME], cu) if AT_NAME in raw_cu else None
        out.append((u.offset, name))
    return out

