"""Inline cost per compilation unit, and the merge of units into one InlineCost (issue 14, per patch).

A one-file patch relinks the whole vmlinux: addresses, ``.debug_str`` and line-table offsets all
shift, but what one unit's inlined instances cost (callee → caller → bytes, instances, declaring
files, the callers' split) does not depend on where the linker put it. :class:`UnitCost` holds
exactly that, address-free, so a cache (ci layer) can keep it per unit and only the units whose
content changed are decoded again (:func:`inline_cost_by_unit`); :func:`merge` sums them into the
same :class:`~analyzer.inline_cost.InlineCost` a whole decode gives (sets, not sums, for a callee's
units). A unit is only given a UnitCost when it is self-contained: every abstract origin it names
is in the unit itself (no ``DW_FORM_ref_addr`` into another unit, whose content a per-unit key
would not cover) and every callee has a name. Otherwise, and when two units' DWARF ranges fall in
one symbol (their sum would count it twice), the file is attributed whole.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.dwarf import DwarfFacts, has_dwarf
from analyzer.dwarf.model import MAX_ORIGIN_HOPS, CompileUnitFacts
from analyzer.dwarf.read import read_dwarf_selected
from analyzer.dwarf.read import unit_names as _unit_names
from analyzer.elf import load_images, read_symtab
from analyzer.errors import InputError
from analyzer.gc_pause import paused_gc
from analyzer.inline_cost import (CalleeCost, CallerCost, InlineCost, Unattributed, _Symbols, attribute, finish,
                                  innermost_segments, open_with_dwarf, relative, source_root)

UNIT_COST_FORMAT = 1            # bump when UnitCost or the attribution it holds changes meaning


@dataclass(slots=True)
class UnitCallee:
    """One callee's instances inside one unit."""
    name: str
    decl_file: str | None
    instances: int = 0
    bytes: int = 0
    including: int = 0
    empty: int = 0
    callers: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class UnitSymbol:
    """One function symbol some DWARF range of the unit falls in."""
    symbol: str
    size: int
    inlined: int = 0
    described: int = 0                  # bytes of the symbol the unit's ranges cover


@dataclass
class UnitCost:
    """What one unit adds to an InlineCost, free of addresses and section offsets."""
    unit: str                           # as in CalleeCost.units
    length: int                         # the unit's bytes in .debug_info (a check on a cache's key)
    callees: list[UnitCallee] = field(default_factory=list)
    symbols: list[UnitSymbol] = field(default_factory=list)
    outside_symbols: int = 0
    empty_instances: int = 0

    def to_dict(self) -> dict:
        """Compact (a vmlinux has 2,000+ units, each read back per build): a callee is
        ``[name, decl_file, instances, bytes, including, empty, [caller, bytes, ...]]``, a symbol
        ``[symbol, size, inlined, described]``."""
        return {"format": UNIT_COST_FORMAT, "unit": self.unit, "length": self.length,
                "outside_symbols": self.outside_symbols, "empty_instances": self.empty_instances,
                "callees": [[c.name, c.decl_file, c.instances, c.bytes, c.including, c.empty,
                             [x for kv in c.callers.items() for x in kv]] for c in self.callees],
                "symbols": [[s.symbol, s.size, s.inlined, s.described] for s in self.symbols]}

    @classmethod
    def from_dict(cls, d: object) -> UnitCost:
        """The UnitCost ``to_dict`` wrote; InputError for anything else (a damaged entry: every
        field's type and every count's sign is checked, and the sums a real unit keeps: a callee's
        callers add up to its bytes, a symbol's inlined bytes are within its described bytes within
        its size, the callees' bytes per caller equal the symbols' inlined bytes). A forgery that
        keeps those sums (a callee renamed, bytes moved between two callees of one caller) passes
        here: whoever keeps entries must authenticate them (the ci layer's cache signs them).
        Read for every cached unit of a vmlinux per build (94k callee rows on Debian's): the
        checks are written out inline, one pass per row."""
        try:
            if type(d) is not dict or d.keys() != _FIELDS or d["format"] != UNIT_COST_FORMAT:
                raise ValueError("not this format")
            callees = []
            by_symbol: dict[str, int] = {}
            empty = 0
            for row in _list(d["callees"]):
                if type(row) is not list or len(row) != 7:
                    raise ValueError("callee row")
                name, decl, instances, nbytes, including, nempty, flat = row
                if (type(name) is not str or (decl is not None and type(decl) is not str)
                        or not type(instances) is type(nbytes) is type(including) is type(nempty) is int
                        or min(instances, nbytes, including, nempty) < 0 or nempty > instances
                        or type(flat) is not list or len(flat) % 2):
                    raise ValueError("callee counts")
                if len(flat) == 2:      # the common case: one caller
                    k, v = flat
                    if type(k) is not str or type(v) is not int or v != nbytes:
                        raise ValueError("callee counts")
                    callers = {k: v}
                    by_symbol[k] = by_symbol.get(k, 0) + v
                else:
                    callers = dict(zip(flat[::2], flat[1::2]))
                    total = 0
                    for k, v in callers.items():
                        if type(k) is not str or type(v) is not int or v < 0:
                            raise ValueError("callee counts")
                        total += v
                        by_symbol[k] = by_symbol.get(k, 0) + v
                    if total != nbytes or 2 * len(callers) != len(flat):
                        raise ValueError("callee counts")
                empty += nempty
                callees.append(UnitCallee(name, decl, instances, nbytes, including, nempty, callers))
            symbols = []
            inlined: dict[str, int] = {}
            for row in _list(d["symbols"]):
                if type(row) is not list or len(row) != 4:
                    raise ValueError("symbol row")
                symbol, size, nin, described = row
                if (type(symbol) is not str or not type(size) is type(nin) is type(described) is int
                        or not 0 <= nin <= described <= size):
                    raise ValueError("symbol counts")
                inlined[symbol] = inlined.get(symbol, 0) + nin
                symbols.append(UnitSymbol(symbol, size, nin, described))
            if ({k: v for k, v in by_symbol.items() if v} != {k: v for k, v in inlined.items() if v}
                    or empty != _n(d["empty_instances"])):
                raise ValueError("callers and symbols disagree")
            return cls(_str(d["unit"]), _n(d["length"]), callees, symbols, _n(d["outside_symbols"]), empty)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"not a unit inline cost ({e.__class__.__name__}: {e})") from None


_FIELDS = {"format", "unit", "length", "callees", "symbols", "outside_symbols", "empty_instances"}


def _list(v: object) -> list:
    if type(v) is not list:
        raise ValueError("list")
    return v


def _str(v: object) -> str:
    if type(v) is not str:
        raise ValueError("string")
    return v


def _n(v: object) -> int:
    if type(v) is not int or v < 0:
        raise ValueError("count")
    return v


def _self_contained(u: CompileUnitFacts) -> bool:
    """Every origin chain of the unit's instances stays inside the unit."""
    own = u.subprograms
    for inst in u.inlined:
        off, hops = inst.origin, 0
        while off is not None:
            sp = own.get(off)
            if sp is None or hops > MAX_ORIGIN_HOPS:
                return False
            off, hops = sp.origin, hops + 1
    return True


def unit_cost(u: CompileUnitFacts, length: int, syms: _Symbols) -> UnitCost | None:
    """One unit's share of the attribution (as :func:`analyzer.inline_cost.attribute` over it);
    None when it is not self-contained (see the module docstring)."""
    if not _self_contained(u):
        return None
    dw = DwarfFacts([u], u.subprograms)
    root = source_root(u)
    unit = u.name or "?"
    unit = relative(unit, root) if unit.startswith("/") else unit
    callees: dict[tuple[str, str | None], UnitCallee] = {}
    keys = []
    out = UnitCost(unit, length)
    spans: list[tuple[int, int]] = []
    for sp in u.subprograms.values():
        spans.extend(sp.ranges)
    for inst in u.inlined:
        name = dw.name_of(inst.origin)
        if name is None:
            return None                 # keyed by a DIE offset in the whole attribution: not address-free
        decl = relative(dw.decl_of(inst.origin)[0], root)      # declared in this unit: its root
        key = (name, decl)
        keys.append(key)
        c = callees.get(key)
        if c is None:
            c = callees[key] = UnitCallee(name, decl)
        c.instances += 1
        c.including += inst.size
        if inst.size == 0:
            c.empty += 1
            out.empty_instances += 1
        spans.extend(inst.ranges)
    inlined_at: dict[int, int] = {}
    for lo, hi, i in innermost_segments([inst.ranges for inst in u.inlined]):
        c = callees[keys[i]]
        parts, outside = syms.split(lo, hi)
        out.outside_symbols += outside
        for k, n in parts:
            c.bytes += n
            nm = syms.name[k]
            c.callers[nm] = c.callers.get(nm, 0) + n
            inlined_at[k] = inlined_at.get(k, 0) + n
    described: dict[int, int] = {}
    spans.sort()
    start = end = None
    for lo, hi in spans + [(None, None)]:
        if lo is not None and end is not None and lo <= end:
            end = max(end, hi)
            continue
        if end is not None:
            for k, n in syms.split(start, end)[0]:
                described[k] = described.get(k, 0) + n
        start, end = lo, hi
    out.callees = list(callees.values())
    out.symbols = [UnitSymbol(syms.name[k], syms.hi[k] - syms.lo[k], inlined_at.get(k, 0), n)
                   for k, n in sorted(described.items())]
    return out


def merge(path: str, parts: list[UnitCost], syms: _Symbols | None = None) -> InlineCost | None:
    """The InlineCost of these units (each unit of the file once). None when ``syms`` (the file's
    function symbols) shows two units' ranges in one symbol: the sum would count it twice.
    Sums go into plain lists first and become dataclasses once per callee and caller (a vmlinux's
    merge sees 94k callee rows for 33k callees)."""
    acc: dict[tuple[str, str | None], list] = {}    # [instances, bytes, including, empty, callers, units]
    sums: dict[str, list[int]] = {}                 # caller -> [size, inlined, undescribed]
    outside = empty = 0
    with paused_gc():
        for p in parts:
            outside += p.outside_symbols
            empty += p.empty_instances
            unit = p.unit
            for uc in p.callees:
                key = (uc.name, uc.decl_file)
                a = acc.get(key)
                if a is None:
                    acc[key] = [uc.instances, uc.bytes, uc.including, uc.empty, dict(uc.callers), {unit}]
                    continue
                a[0] += uc.instances
                a[1] += uc.bytes
                a[2] += uc.including
                a[3] += uc.empty
                got = a[4]
                for s, n in uc.callers.items():
                    got[s] = got.get(s, 0) + n
                a[5].add(unit)              # a callee's units: a set, not a sum
            for sym in p.symbols:
                t = sums.get(sym.symbol)
                if t is None:
                    sums[sym.symbol] = [sym.size, sym.inlined, sym.size - sym.described]
                else:
                    t[0] += sym.size
                    t[1] += sym.inlined
                    t[2] += sym.size - sym.described
        if syms is not None:
            total: dict[str, int] = {}
            for lo, hi, name in zip(syms.lo, syms.hi, syms.name):
                total[name] = total.get(name, 0) + hi - lo
            if any(t[0] > total.get(name, 0) for name, t in sums.items()):
                return None
        callers = {name: CallerCost(name, size, inl, size - inl - und, und) for name, (size, inl, und) in sums.items()}
        un = Unattributed(outside_symbols=outside, empty_instances=empty,
                          undescribed=sum(t[2] for t in sums.values()))
        callees = {k: CalleeCost(k[0], k[1], a[0], a[1], a[2], a[3], a[4], list(a[5])) for k, a in acc.items()}
        return finish(path, len(parts), callees, callers, un)


Reuse = Callable[[int, str, int], "UnitCost | None"]


@dataclass
class ByUnit:
    """An InlineCost computed unit by unit, and what a cache needs from it."""
    cost: InlineCost
    fresh: dict[int, UnitCost]          # unit offset -> the UnitCost decoded this time (to keep)
    names: dict[int, str | None]        # unit offset -> DW_AT_name, every unit of the file
    reused: int = 0                     # units taken from ``reuse``
    decoded: int = 0                    # units decoded (all of them when attributed whole)
    whole: bool = False                 # attributed whole (a unit not self-contained, or overlapping)


def inline_cost_by_unit(path: str | Path, reuse: Reuse, engine: str = "auto") -> ByUnit:
    """:func:`analyzer.inline_cost.inline_cost` of a whole file, decoding only the units
    ``reuse(offset, name, length)`` has no :class:`UnitCost` for; the result is equal to a whole
    decode (``to_dict()``). ``reuse`` is asked once per unit with a name no other unit has; what it
    returns must be the UnitCost of that very unit content (the caller's key says so, and the
    caller vouches that it wrote it: nothing here can tell a consistent forgery); here it is
    checked against the file (the unit's length, its symbols' names and sizes) and a mismatch is
    decoded instead."""
    with paused_gc():
        return _by_unit(path, reuse, engine)


def _by_unit(path: str | Path, reuse: Reuse, engine: str) -> ByUnit:
    img, table = open_with_dwarf(path)
    info_size = img.section_by_name(".debug_info").size
    names: dict[int, str | None] = {}
    lengths: dict[int, int] = {}
    cached: dict[int, UnitCost] = {}
    syms = _Symbols(img, table)
    sizes: dict[str, set[int]] = {}
    for lo, hi, name in zip(syms.lo, syms.hi, syms.name):
        sizes.setdefault(name, set()).add(hi - lo)

    def fits(uc: UnitCost, length: int) -> bool:
        """A cached entry agrees with this file: the unit's length, its symbols' names and sizes."""
        return (uc.length == length and all(s.size in sizes.get(s.symbol, ()) for s in uc.symbols)
                and all(nm in sizes for c in uc.callees for nm in c.callers))

    def select(units: list[tuple[int, str | None]]) -> set[int]:
        offs = [o for o, _n in units]
        seen: dict[str | None, int] = {}
        for _o, name in units:
            seen[name] = seen.get(name, 0) + 1
        for i, (off, name) in enumerate(units):
            names[off] = name
            lengths[off] = (offs[i + 1] if i + 1 < len(offs) else info_size) - off
            if name is None or seen[name] > 1:
                continue                # a name two units share keys neither
            got = reuse(off, name, lengths[off])
            if got is not None and fits(got, lengths[off]):
                cached[off] = got
        return {o for o in offs if o not in cached}

    dw, by_off = read_dwarf_selected(img, table, select, engine=engine)
    fresh: dict[int, UnitCost] = {}
    whole = False
    for off, u in by_off.items():
        uc = unit_cost(u, lengths[off], syms)
        if uc is None:
            whole = True
            break
        fresh[off] = uc
    cost = None
    if not whole:
        parts = [cached[o] if o in cached else fresh[o] for o in sorted(set(cached) | set(fresh))]
        cost = merge(str(path), parts, syms)
    if cost is None:                    # attributed whole, as inline_cost does
        dw, by_off = read_dwarf_selected(img, table, lambda units: {o for o, _n in units}, engine=engine)
        cost = attribute(str(path), dw, syms)
        fresh = {o: uc for o, u in by_off.items() if (uc := unit_cost(u, lengths[o], syms)) is not None}
        return ByUnit(cost, fresh, names, 0, len(by_off), True)
    return ByUnit(cost, fresh, names, len(cached), len(by_off), False)


def unit_names(path: str | Path) -> list[str | None]:
    """DW_AT_name of every unit of a file, in file order (what a cache derives its keys from)."""
    images = load_images(path)
    if len(images) != 1:
        raise InputError(f"{path}: archives are not supported here; give one object file")
    img = images[0]
    if not has_dwarf(img):
        raise InputError(f"{path}: no DWARF (.debug_info)")
    return [name for _off, name in _unit_names(img, read_symtab(img))]
