"""A minimal DWARF 4/5 DIE walker for the two tags the inline facts need.

pyelftools builds a Python object per DIE and per attribute through construct
(0.7 s for the 24k DIEs of a gcc-12 page_alloc.o); the inline facts only need
DW_TAG_subprogram and DW_TAG_inlined_subroutine with a dozen attributes. Here
each abbreviation gets a precomputed byte size when all its forms are fixed,
so every other DIE is skipped with one addition, and only the two tags are
decoded. The pyelftools reader in :mod:`analyzer.dwarf` stays as the oracle
the tests compare this walker with.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.errors import InputError

if TYPE_CHECKING:
    from analyzer.dwarf import CompileUnitFacts

TAG_SUBPROGRAM, TAG_INLINED = 0x2E, 0x1D
TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT = 0x11, 0x3C
AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES = 0x03, 0x11, 0x12, 0x55
AT_ORIGIN, AT_SPEC, AT_DECL_FILE, AT_DECL_LINE = 0x31, 0x47, 0x3A, 0x3B
AT_INLINE, AT_EXTERNAL, AT_DECLARATION, AT_LINKAGE, AT_MIPS_LINKAGE = 0x20, 0x3F, 0x3C, 0x6E, 0x2007
AT_CALL_FILE, AT_CALL_LINE, AT_COMP_DIR, AT_PRODUCER = 0x58, 0x59, 0x1B, 0x25
AT_STR_OFFSETS_BASE, AT_ADDR_BASE, AT_RNGLISTS_BASE, AT_GNU_ADDR_BASE = 0x72, 0x73, 0x74, 0x2133
WANTED = {AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_ORIGIN, AT_SPEC, AT_DECL_FILE, AT_DECL_LINE, AT_INLINE,
          AT_EXTERNAL, AT_DECLARATION, AT_LINKAGE, AT_MIPS_LINKAGE, AT_CALL_FILE, AT_CALL_LINE}
CU_WANTED = {AT_NAME, AT_COMP_DIR, AT_PRODUCER, AT_LOW_PC, AT_STR_OFFSETS_BASE, AT_ADDR_BASE,
             AT_RNGLISTS_BASE, AT_GNU_ADDR_BASE}

F_ADDR, F_STRING, F_STRP, F_LINE_STRP, F_IMPLICIT = 0x01, 0x08, 0x0E, 0x1F, 0x21
REF_LOCAL = {0x11, 0x12, 0x13, 0x14, 0x15}
STRX = {0x1A, 0x25, 0x26, 0x27, 0x28, 0x1F02}
ADDRX = {0x1B, 0x29, 0x2A, 0x2B, 0x2C, 0x1F01}


def _fixed_sizes(asz: int, osz: int) -> dict[int, int]:
    return {0x01: asz, 0x05: 2, 0x06: 4, 0x07: 8, 0x0B: 1, 0x0C: 1, 0x0E: osz, 0x10: osz, 0x11: 1, 0x12: 2,
            0x13: 4, 0x14: 8, 0x17: osz, 0x19: 0, 0x1C: 4, 0x1D: osz, 0x1E: 16, 0x1F: osz, 0x20: 8, 0x21: 0,
            0x24: 8, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1, 0x2A: 2, 0x2B: 3, 0x2C: 4,
            0x1F20: osz, 0x1F21: osz}


class Walker:
    """Decodes units of one file's (relocated) debug sections."""

    def __init__(self, raw: dict[str, bytes], little: bool):
        self.info = raw.get(".debug_info", b"")
        self.abbrev = raw.get(".debug_abbrev", b"")
        self.str = raw.get(".debug_str", b"")
        self.line_str = raw.get(".debug_line_str", b"")
        self.str_offsets = raw.get(".debug_str_offsets", b"")
        self.addr = raw.get(".debug_addr", b"")
        self.rnglists = raw.get(".debug_rnglists", b"")
        self.ranges = raw.get(".debug_ranges", b"")
        self.bo = "little" if little else "big"
        self.e = "<" if little else ">"
        self._abbrevs: dict[tuple[int, int, int], dict] = {}

    # --- primitives ---------------------------------------------------------------------
    def _int(self, b: bytes, p: int, n: int) -> int:
        return int.from_bytes(b[p:p + n], self.bo)

    @staticmethod
    def _uleb(b: bytes, p: int) -> tuple[int, int]:
        c = b[p]
        if c < 0x80:
            return c, p + 1
        r, shift = c & 0x7F, 7
        while True:
            p += 1
            c = b[p]
            r |= (c & 0x7F) << shift
            if c < 0x80:
                return r, p + 1
            shift += 7

    @staticmethod
    def _sleb(b: bytes, p: int) -> tuple[int, int]:
        r = shift = 0
        while True:
            c = b[p]
            p += 1
            r |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                if c & 0x40:
                    r -= 1 << shift
                return r, p

    def _cstr(self, b: bytes, p: int) -> str:
        z = b.index(b"\0", p)
        return b[p:z].decode("utf-8", "surrogateescape")

    def abbrevs(self, off: int, asz: int, osz: int) -> dict:
        key = (off, asz, osz)
        tab = self._abbrevs.get(key)
        if tab is not None:
            return tab
        fixed = _fixed_sizes(asz, osz)
        tab = {}
        b, p = self.abbrev, off
        uleb = self._uleb
        while True:
            code, p = uleb(b, p)
            if code == 0:
                break
            tag, p = uleb(b, p)
            children = b[p] != 0
            p += 1
            attrs = []
            size = 0
            while True:
                at, p = uleb(b, p)
                fm, p = uleb(b, p)
                const = None
                if fm == F_IMPLICIT:
                    const, p = self._sleb(b, p)
                if at == 0 and fm == 0:
                    break
                attrs.append((at, fm, const))
                if size is not None:
                    size = size + fixed[fm] if fm in fixed else None
            tab[code] = (tag, children, tuple(attrs), size)
        self._abbrevs[key] = tab
        return tab

    def value(self, fm: int, p: int, asz: int, osz: int):
        """(value, next position) of one attribute; strings and references stay raw (offsets/indices)."""
        b = self.info
        if fm == 0x01:
            return self._int(b, p, asz), p + asz
        if fm in (0x0B, 0x11, 0x0C, 0x25, 0x29):
            return b[p], p + 1
        if fm in (0x05, 0x12, 0x26, 0x2A):
            return self._int(b, p, 2), p + 2
        if fm in (0x06, 0x13, 0x1C, 0x28, 0x2C):
            return self._int(b, p, 4), p + 4
        if fm in (0x07, 0x14, 0x20, 0x24):
            return self._int(b, p, 8), p + 8
        if fm in (0x0E, 0x1F, 0x10, 0x17, 0x1D, 0x1F20, 0x1F21):
            return self._int(b, p, osz), p + osz
        if fm in (0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02):
            return self._uleb(b, p)
        if fm == 0x0D:
            return self._sleb(b, p)
        if fm == 0x19:
            return True, p
        if fm == 0x08:
            z = b.index(b"\0", p)
            return b[p:z], z + 1
        if fm in (0x18, 0x09):
            n, p = self._uleb(b, p)
            return None, p + n
        if fm == 0x0A:
            return None, p + 1 + b[p]
        if fm == 0x03:
            return None, p + 2 + self._int(b, p, 2)
        if fm == 0x04:
            return None, p + 4 + self._int(b, p, 4)
        if fm in (0x27, 0x2B):
            return self._int(b, p, 3), p + 3
        if fm == 0x1E:
            return None, p + 16
        if fm == 0x16:
            real, p = self._uleb(b, p)
            return self.value(real, p, asz, osz)
        raise InputError(f"unsupported DWARF form {fm:#x} at .debug_info+{p:#x}")

    # --- units --------------------------------------------------------------------------
    def units(self):
        """(offset, version, address size, offset size, abbrev offset, first DIE, end) per unit."""
        b, n, pos = self.info, len(self.info), 0
        while pos < n:
            if pos + 4 > n:
                raise InputError(f"truncated .debug_info (unit header at {pos:#x})")
            length = self._int(b, pos, 4)
            hdr = 4
            osz = 4
            if length == 0xFFFFFFFF:
                length, hdr, osz = self._int(b, pos + 4, 8), 12, 8
            end = pos + hdr + length
            if length < 7 or end > n:
                raise InputError(f"truncated .debug_info (unit at {pos:#x} runs past the section end)")
            ver = self._int(b, pos + hdr, 2)
            p = pos + hdr + 2
            if ver >= 5:
                utype, asz = b[p], b[p + 1]
                abbr = self._int(b, p + 2, osz)
                p += 2 + osz
                if utype in (2, 6):
                    p += 8 + osz
                elif utype in (4, 5):
                    p += 8
            elif ver in (2, 3, 4):
                abbr, asz = self._int(b, p, osz), b[p + osz]
                p += osz + 1
            else:
                raise InputError(f"unsupported DWARF version {ver} (unit at {pos:#x})")
            yield pos, ver, asz, osz, abbr, p, end
            pos = end

    def string(self, fm: int, v, cu: dict) -> str | None:
        if fm == F_STRP:
            return self._cstr(self.str, v)
        if fm == F_LINE_STRP:
            return self._cstr(self.line_str, v)
        if fm == F_STRING:
            return v.decode("utf-8", "surrogateescape")
        if fm in STRX:
            osz = cu["osz"]
            so = cu.get("str_offsets_base", 8) + v * osz
            return self._cstr(self.str, self._int(self.str_offsets, so, osz))
        return None

    def address(self, fm: int, v, cu: dict) -> int:
        if fm in ADDRX:
            asz = cu["asz"]
            return self._int(self.addr, cu.get("addr_base", 8) + v * asz, asz)
        return v

    def range_list(self, fm: int, v, cu: dict) -> list[tuple[int, int]]:
        asz = cu["asz"]
        base = cu.get("low_pc", 0)
        out = []
        if cu["ver"] >= 5:
            b = self.rnglists
            if fm == 0x23:    # rnglistx: an index into the unit's offset table
                rb = cu.get("rnglists_base", 12)
                p = rb + self._int(b, rb + v * cu["osz"], cu["osz"])
            else:
                p = v
            while True:
                kind = b[p]
                p += 1
                if kind == 0:
                    break
                if kind == 1:
                    i, p = self._uleb(b, p)
                    base = self.address(0x1B, i, cu)
                elif kind == 2:
                    i, p = self._uleb(b, p)
                    j, p = self._uleb(b, p)
                    out.append((self.address(0x1B, i, cu), self.address(0x1B, j, cu)))
                elif kind == 3:
                    i, p = self._uleb(b, p)
                    ln, p = self._uleb(b, p)
                    s = self.address(0x1B, i, cu)
                    out.append((s, s + ln))
                elif kind == 4:
                    s, p = self._uleb(b, p)
                    t, p = self._uleb(b, p)
                    out.append((base + s, base + t))
                elif kind == 5:
                    base = self._int(b, p, asz)
                    p += asz
                elif kind == 6:
                    out.append((self._int(b, p, asz), self._int(b, p + asz, asz)))
                    p += 2 * asz
                elif kind == 7:
                    s = self._int(b, p, asz)
                    ln, p = self._uleb(b, p + asz)
                    out.append((s, s + ln))
                else:
                    raise InputError(f"corrupt .debug_rnglists (entry kind {kind} at {p - 1:#x})")
        else:
            b, p = self.ranges, v
            top = (1 << (8 * asz)) - 1
            while True:
                s, t = self._int(b, p, asz), self._int(b, p + asz, asz)
                p += 2 * asz
                if s == 0 and t == 0:
                    break
                if s == top:
                    base = t
                    continue
                out.append((base + s, base + t))
        return [(a, c) for a, c in out if c > a]

    def walk(self, unit, file_table) -> "CompileUnitFacts":
        from analyzer.dwarf import CompileUnitFacts, InlinedInstance, Subprogram
        off, ver, asz, osz, abbr, p, end = unit
        tab = self.abbrevs(abbr, asz, osz)
        b = self.info
        uleb = self._uleb
        value = self.value
        code, p = uleb(b, p)
        tag, children, attrs, _size = tab[code]
        cu = {"ver": ver, "asz": asz, "osz": osz}
        raw_cu = {}
        for at, fm, const in attrs:
            v, p = (const, p) if fm == F_IMPLICIT else value(fm, p, asz, osz)
            if at in CU_WANTED:
                raw_cu[at] = (fm, v)
        for at, key in ((AT_STR_OFFSETS_BASE, "str_offsets_base"), (AT_ADDR_BASE, "addr_base"),
                        (AT_GNU_ADDR_BASE, "addr_base"), (AT_RNGLISTS_BASE, "rnglists_base")):
            if at in raw_cu:
                cu[key] = raw_cu[at][1]
        if AT_LOW_PC in raw_cu:
            cu["low_pc"] = self.address(*raw_cu[AT_LOW_PC], cu)
        name = self.string(*raw_cu[AT_NAME], cu) if AT_NAME in raw_cu else None
        facts = CompileUnitFacts(name, self.string(*raw_cu[AT_COMP_DIR], cu) if AT_COMP_DIR in raw_cu else None,
                                 self.string(*raw_cu[AT_PRODUCER], cu) if AT_PRODUCER in raw_cu else None)
        files = file_table(off)
        nfiles = len(files)
        # stack entries: (tag, offset, origin)
        stack: list[tuple[int, int, int | None]] = []
        container = None
        container_depth = -1
        if not children:
            return facts
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
                raise InputError(f"corrupt DWARF: abbreviation {code} missing (DIE at .debug_info+{die_off:#x})")
            tag, has_kids, attrs, size = ent
            if tag != TAG_SUBPROGRAM and tag != TAG_INLINED:
                if size is not None:
                    p += size
                else:
                    for at, fm, const in attrs:
                        if fm != F_IMPLICIT:
                            _v, p = value(fm, p, asz, osz)
                if has_kids:
                    stack.append((tag, die_off, None))
                continue
            a = {}
            for at, fm, const in attrs:
                if fm == F_IMPLICIT:
                    v = const
                else:
                    v, p = value(fm, p, asz, osz)
                if at in WANTED:
                    a[at] = (fm, v)
            origin = None
            for key in (AT_ORIGIN, AT_SPEC):
                if key in a:
                    fm, v = a[key]
                    origin = v + off if fm in REF_LOCAL else v
                    break
            rng: list[tuple[int, int]] = []
            if AT_RANGES in a:
                rng = self.range_list(*a[AT_RANGES], cu)
            elif AT_LOW_PC in a:
                lo = self.address(*a[AT_LOW_PC], cu)
                if AT_HIGH_PC in a:
                    fm, hv = a[AT_HIGH_PC]
                    hi = self.address(fm, hv, cu) if (fm == F_ADDR or fm in ADDRX) else lo + hv
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
                    files[dfv] if dfv is not None and 0 <= dfv < nfiles else None,
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
                    files[cfv] if cfv is not None and 0 <= cfv < nfiles else None,
                    a[AT_CALL_LINE][1] if AT_CALL_LINE in a else None))
            if has_kids:
                stack.append((tag, die_off, origin))
        return facts
