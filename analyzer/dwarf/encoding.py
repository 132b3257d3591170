"""DWARF's byte encoding, in one place: names, LEB128, forms, unit and abbreviation headers.

Names come from pyelftools' tables (``FORM["strx1"] == 0x25``), so the walker, the unit
scan and the tests' writer spell forms, attributes and tags the way the standard does and
never as hex. Every reader here is bounded: it checks what it reads against the section
and fails with :func:`corrupt` (an ``InputError`` naming the section, the offset and the
reason) instead of an ``IndexError``, a silent short read or a loop that does not advance.
"""
from __future__ import annotations

from dataclasses import dataclass

from elftools.dwarf.enums import (ENUM_DW_AT, ENUM_DW_FORM, ENUM_DW_LNCT, ENUM_DW_RLE, ENUM_DW_TAG,
                                  ENUM_DW_UT)

from analyzer.errors import InputError


def _named(table: dict, prefix: str) -> dict[str, int]:
    return {k[len(prefix):]: v for k, v in table.items() if k.startswith(prefix) and isinstance(v, int)}


FORM = _named(ENUM_DW_FORM, "DW_FORM_")
AT = _named(ENUM_DW_AT, "DW_AT_")
TAG = _named(ENUM_DW_TAG, "DW_TAG_")
UT = _named(ENUM_DW_UT, "DW_UT_")
LNCT = _named(ENUM_DW_LNCT, "DW_LNCT_")
RLE = _named(ENUM_DW_RLE, "DW_RLE_")
FORM_NAME = {v: k for k, v in FORM.items()}

# a LEB128 longer than this is not a number any producer writes: refuse it rather than
# build a huge integer out of a run of 0x80 bytes (quadratic time)
MAX_LEB_BYTES = 20


def corrupt(section: str, offset: int, reason: str) -> InputError:
    """The one shape of every DWARF error: where it is and what is wrong, on one line."""
    return InputError(f"corrupt DWARF in {section} at {offset:#x}: {reason}")


def form_name(fm: int) -> str:
    name = FORM_NAME.get(fm)
    return f"DW_FORM_{name}" if name else f"form {fm:#x}"


# --- LEB128 ------------------------------------------------------------------------------

def uleb(b: bytes, p: int) -> tuple[int, int]:
    """(value, next position). Past the end of ``b`` raises IndexError: callers that know
    the section name turn it into :func:`corrupt`."""
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
        if shift >= 7 * MAX_LEB_BYTES:
            raise LebTooLong(p)


def sleb(b: bytes, p: int) -> tuple[int, int]:
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
        if shift >= 7 * MAX_LEB_BYTES:
            raise LebTooLong(p)


class LebTooLong(ValueError):
    """A LEB128 of more than MAX_LEB_BYTES bytes (mapped to :func:`corrupt` by the callers)."""

    def __init__(self, pos: int):
        super().__init__(f"LEB128 longer than {MAX_LEB_BYTES} bytes")
        self.pos = pos


def cstr(b: bytes, p: int, section: str) -> str:
    """The NUL-terminated string at ``p`` of a string section."""
    if not 0 <= p < len(b):
        raise corrupt(section, p, f"string offset past the end of the section ({len(b):#x} bytes)")
    z = b.find(b"\0", p)
    if z < 0:
        raise corrupt(section, p, "string without a terminating NUL")
    return b[p:z].decode("utf-8", "surrogateescape")


def fixed(b: bytes, p: int, n: int, section: str, bo: str) -> int:
    """An n-byte unsigned integer at ``p``, checked against the section's end."""
    if p < 0 or p + n > len(b):
        raise corrupt(section, p, f"{n}-byte value past the end of the section ({len(b):#x} bytes)")
    return int.from_bytes(b[p:p + n], bo)


# --- forms -------------------------------------------------------------------------------

# how each form is laid out: a fixed width, or one of these shapes
K_FIXED, K_ULEB, K_SLEB, K_CSTR, K_BLOCK, K_BLOCK1, K_BLOCK2, K_BLOCK4, K_PRESENT, K_DATA16, K_INDIRECT, \
    K_IMPLICIT = range(12)

_WIDTH = {"data1": 1, "ref1": 1, "flag": 1, "strx1": 1, "addrx1": 1,
          "data2": 2, "ref2": 2, "strx2": 2, "addrx2": 2,
          "strx3": 3, "addrx3": 3,
          "data4": 4, "ref4": 4, "ref_sup4": 4, "strx4": 4, "addrx4": 4,
          "data8": 8, "ref8": 8, "ref_sig8": 8, "ref_sup8": 8}
_OFFSET = ("strp", "line_strp", "ref_addr", "sec_offset", "strp_sup", "GNU_ref_alt", "GNU_strp_alt")
_ULEB = ("udata", "ref_udata", "strx", "addrx", "loclistx", "rnglistx", "GNU_addr_index", "GNU_str_index")
_SHAPE = {"sdata": K_SLEB, "string": K_CSTR, "block": K_BLOCK, "exprloc": K_BLOCK, "block1": K_BLOCK1,
          "block2": K_BLOCK2, "block4": K_BLOCK4, "flag_present": K_PRESENT, "data16": K_DATA16,
          "indirect": K_INDIRECT, "implicit_const": K_IMPLICIT}

STRX = frozenset(FORM[n] for n in ("strx", "strx1", "strx2", "strx3", "strx4", "GNU_str_index"))
ADDRX = frozenset(FORM[n] for n in ("addrx", "addrx1", "addrx2", "addrx3", "addrx4", "GNU_addr_index"))
REF_UNIT = frozenset(FORM[n] for n in ("ref1", "ref2", "ref4", "ref8", "ref_udata"))   # unit-relative


def form_shapes(asz: int, osz: int) -> dict[int, tuple[int, int]]:
    """form code -> (shape, width) for a unit's address and offset sizes; width is the byte
    count of a K_FIXED form (0 otherwise). A code missing here is a form we cannot decode."""
    out: dict[int, tuple[int, int]] = {FORM["addr"]: (K_FIXED, asz)}
    out.update({FORM[n]: (K_FIXED, w) for n, w in _WIDTH.items()})
    out.update({FORM[n]: (K_FIXED, osz) for n in _OFFSET})
    out.update({FORM[n]: (K_ULEB, 0) for n in _ULEB})
    out.update({FORM[n]: (s, 16 if s == K_DATA16 else 0) for n, s in _SHAPE.items()})
    return out


def fixed_sizes(shapes: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Byte size of every form whose size does not depend on the bytes (lets a DIE be skipped
    with one addition)."""
    out = {fm: w for fm, (k, w) in shapes.items() if k in (K_FIXED, K_DATA16)}
    out.update({fm: 0 for fm, (k, _w) in shapes.items() if k in (K_PRESENT, K_IMPLICIT)})
    return out


def read_form(b: bytes, p: int, fm: int, shapes: dict, bo: str, section: str = ".debug_info"):
    """(value, next position) of one attribute value. Strings stay raw (bytes of an inline
    string, or the offset/index), references stay as written, blocks are returned as bytes,
    data16 as bytes. The caller checks the returned position against its unit's end."""
    sh = shapes.get(fm)
    if sh is None:
        raise corrupt(section, p, f"unknown {form_name(fm)}")
    kind, n = sh
    if kind == K_FIXED:
        return int.from_bytes(b[p:p + n], bo), p + n
    if kind == K_ULEB:
        return uleb(b, p)
    if kind == K_SLEB:
        return sleb(b, p)
    if kind == K_CSTR:
        z = b.find(b"\0", p)
        if z < 0:
            raise corrupt(section, p, "inline string without a terminating NUL")
        return b[p:z], z + 1
    if kind == K_BLOCK:
        ln, p = uleb(b, p)
    elif kind == K_BLOCK1:
        ln, p = b[p], p + 1
    elif kind == K_BLOCK2:
        ln, p = int.from_bytes(b[p:p + 2], bo), p + 2
    elif kind == K_BLOCK4:
        ln, p = int.from_bytes(b[p:p + 4], bo), p + 4
    elif kind == K_PRESENT:
        return True, p
    elif kind == K_DATA16:
        return b[p:p + 16], p + 16
    elif kind == K_INDIRECT:
        real, q = uleb(b, p)
        if real == fm or real == FORM["implicit_const"]:
            raise corrupt(section, p, f"DW_FORM_indirect naming {form_name(real)}")
        return read_form(b, q, real, shapes, bo, section)
    else:   # K_IMPLICIT has its value in the abbreviation, never in the DIE
        return None, p
    if p + ln > len(b):
        raise corrupt(section, p, f"block of {ln} bytes past the end of the section")
    return b[p:p + ln], p + ln


# --- unit headers ------------------------------------------------------------------------

@dataclass(frozen=True)
class UnitHeader:
    """One unit of .debug_info: where it is and how its values are sized."""
    offset: int            # of the unit header in .debug_info (pyelftools' cu_offset)
    version: int
    unit_type: int         # DW_UT_* (DWARF 5); compile for older versions
    address_size: int
    offset_size: int       # 4 (32-bit DWARF) or 8 (64-bit DWARF)
    abbrev_offset: int
    die_offset: int        # first DIE
    end: int               # one past the unit's last byte


def unit_headers(info: bytes, bo: str):
    """Every unit header of .debug_info in order, each checked against the section."""
    n, pos = len(info), 0
    sec = ".debug_info"
    while pos < n:
        if pos + 4 > n:
            raise corrupt(sec, pos, "unit header past the end of the section")
        length, hdr, osz = int.from_bytes(info[pos:pos + 4], bo), 4, 4
        if length == 0xFFFFFFFF:
            if pos + 12 > n:
                raise corrupt(sec, pos, "64-bit unit header past the end of the section")
            length, hdr, osz = int.from_bytes(info[pos + 4:pos + 12], bo), 12, 8
        elif length >= 0xFFFFFFF0:
            raise corrupt(sec, pos, f"reserved unit length {length:#x}")
        end = pos + hdr + length
        if end > n:
            raise corrupt(sec, pos, f"unit length {length:#x} past the end of the section ({n:#x} bytes)")
        p = pos + hdr
        if length < 2:
            raise corrupt(sec, pos, f"unit length {length} too short for a unit header")
        ver = int.from_bytes(info[p:p + 2], bo)
        p += 2
        if ver >= 5:
            if ver > 5:
                raise InputError(f"unsupported DWARF version {ver} (unit at .debug_info+{pos:#x})")
            need = 2 + osz
            utype = info[p] if p < end else 0
            if utype in (UT["type"], UT["split_type"]):
                need += 8 + osz
            elif utype in (UT["skeleton"], UT["split_compile"]):
                need += 8
            if p + need > end:
                raise corrupt(sec, pos, f"unit length {length:#x} too short for a DWARF {ver} unit header")
            asz, abbr = info[p + 1], int.from_bytes(info[p + 2:p + 2 + osz], bo)
            p += need
        elif ver in (2, 3, 4):
            if p + osz + 1 > end:
                raise corrupt(sec, pos, f"unit length {length:#x} too short for a DWARF {ver} unit header")
            utype = UT["compile"]
            abbr, asz = int.from_bytes(info[p:p + osz], bo), info[p + osz]
            p += osz + 1
        else:
            raise InputError(f"unsupported DWARF version {ver} (unit at .debug_info+{pos:#x})")
        if asz not in (1, 2, 4, 8):
            raise corrupt(sec, pos, f"address size {asz} (1, 2, 4 or 8 expected)")
        yield UnitHeader(pos, ver, utype, asz, osz, abbr, p, end)
        pos = end


# --- abbreviations -----------------------------------------------------------------------

Abbrev = tuple   # (tag, has_children, ((attribute, form, implicit const), ...))


def abbrev_entry(b: bytes, p: int) -> tuple[int, Abbrev | None, int]:
    """(code, entry, next position) of the abbreviation declaration at ``p``; code 0 ends a
    table (entry None). IndexError past the section's end: see :func:`abbrev_table`."""
    code, p = uleb(b, p)
    if code == 0:
        return 0, None, p
    tag, p = uleb(b, p)
    children = b[p] != 0
    p += 1
    attrs = []
    implicit = FORM["implicit_const"]
    while True:
        at, p = uleb(b, p)
        fm, p = uleb(b, p)
        const = None
        if fm == implicit:
            const, p = sleb(b, p)
        if at == 0 and fm == 0:
            break
        attrs.append((at, fm, const))
    return code, (tag, children, tuple(attrs)), p


def abbrev_table(b: bytes, off: int, want: int | None = None, with_length: bool = False):
    """The abbreviation table at ``off`` (all of it, or up to the entry ``want``), as a dict
    code -> entry; with ``with_length``, (bytes parsed, that dict)."""
    sec = ".debug_abbrev"
    if not 0 <= off < len(b):
        raise corrupt(sec, off, f"abbreviation table offset past the end of the section ({len(b):#x} bytes)")
    tab: dict[int, Abbrev] = {}
    p = off
    try:
        while True:
            start = p
            code, ent, p = abbrev_entry(b, p)
            if ent is None:
                return (p - off, tab) if with_length else tab
            if code in tab:
                raise corrupt(sec, start, f"abbreviation code {code} declared twice in the table at {off:#x}")
            tab[code] = ent
            if code == want:
                return (p - off, tab) if with_length else tab
    except IndexError:
        raise corrupt(sec, p, f"abbreviation table at {off:#x} runs past the end of the section") from None
    except LebTooLong as e:
        raise corrupt(sec, e.pos, str(e)) from None
