"""Range lists (DW_AT_ranges): DWARF 4's .debug_ranges and DWARF 5's .debug_rnglists.

Functions of a :class:`~analyzer.dwarf.walker.Walker` (its sections, its address pool and
its budget): every entry is read within its section, and the entries decoded over the whole
file are budgeted against the sections' size, so lists that many units share cannot cost
more than the file.
"""
from __future__ import annotations

from typing import Protocol

from analyzer.dwarf.encoding import FORM, RLE, LebTooLong, corrupt, fixed, uleb

F_RNGLISTX, F_ADDRX = FORM["rnglistx"], FORM["addrx"]


class Reader(Protocol):
    """What range lists need of the walker: the sections, the address pool, a budget."""
    rnglists: bytes
    ranges: bytes
    bo: str
    range_budget: int

    def address(self, fm: int, v, cu: dict) -> int: ...


def range_list(w: Reader, fm: int, v, cu: dict) -> list[tuple[int, int]]:
    """The (low, high) pairs of the list a DW_AT_ranges value names (an offset, or a
    DW_FORM_rnglistx index into the unit's offset table), empty ranges dropped."""
    try:
        return _decode(w, fm, v, cu)
    except IndexError:
        sec = ".debug_rnglists" if cu["ver"] >= 5 else ".debug_ranges"
        raise corrupt(sec, v, "range list runs past the end of the section") from None
    except LebTooLong as e:
        raise corrupt(".debug_rnglists", e.pos, str(e)) from None


def _decode(w: Reader, fm: int, v, cu: dict) -> list[tuple[int, int]]:
    asz, bo = cu["asz"], w.bo
    p = v
    base = cu.get("low_pc", 0)
    out = []
    if cu["ver"] >= 5:
        b, sec = w.rnglists, ".debug_rnglists"
        if fm == F_RNGLISTX:    # an index into the unit's offset table
            rb = cu["rnglists_base"]
            p = rb + fixed(b, rb + v * cu["osz"], cu["osz"], sec, bo)
        else:
            p = v
        if not 0 <= p < len(b):
            raise corrupt(sec, p, f"range list offset past the end of the section ({len(b):#x} bytes)")
        while True:
            kind = b[p]
            p += 1
            if kind == RLE["end_of_list"]:
                break
            if kind == RLE["base_addressx"]:
                i, p = uleb(b, p)
                base = w.address(F_ADDRX, i, cu)
            elif kind == RLE["startx_endx"]:
                i, p = uleb(b, p)
                j, p = uleb(b, p)
                out.append((w.address(F_ADDRX, i, cu), w.address(F_ADDRX, j, cu)))
            elif kind == RLE["startx_length"]:
                i, p = uleb(b, p)
                ln, p = uleb(b, p)
                s = w.address(F_ADDRX, i, cu)
                out.append((s, s + ln))
            elif kind == RLE["offset_pair"]:
                s, p = uleb(b, p)
                t, p = uleb(b, p)
                out.append((base + s, base + t))
            elif kind == RLE["base_address"]:
                base = fixed(b, p, asz, sec, bo)
                p += asz
            elif kind == RLE["start_end"]:
                out.append((fixed(b, p, asz, sec, bo), fixed(b, p + asz, asz, sec, bo)))
                p += 2 * asz
            elif kind == RLE["start_length"]:
                s = fixed(b, p, asz, sec, bo)
                ln, p = uleb(b, p + asz)
                out.append((s, s + ln))
            else:
                raise corrupt(sec, p - 1, f"unknown range list entry kind {kind}")
    else:
        b, p, sec = w.ranges, v, ".debug_ranges"
        top = (1 << (8 * asz)) - 1
        while True:
            s, t = fixed(b, p, asz, sec, bo), fixed(b, p + asz, asz, sec, bo)
            p += 2 * asz
            if s == 0 and t == 0:
                break
            if s == top:
                base = t
                continue
            out.append((base + s, base + t))
    w.range_budget -= 2 * asz * len(out) + 1
    if w.range_budget < 0:
        raise corrupt(sec, v, "range lists overlap beyond any real file (decode budget spent)")
    top = 1 << (8 * asz)
    if any(c >= top for _a, c in out):
        raise corrupt(sec, v, f"range past the {8 * asz}-bit address space")
    return [(a, c) for a, c in out if c > a]
