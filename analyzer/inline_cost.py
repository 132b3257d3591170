"""Where inlined code lands: every inlined instance's bytes, attributed to its callee (issue 14).

bloat-o-meter attributes bytes to out-of-line symbols only; an ``__always_inline`` helper copied
into forty callers shows nowhere. Here every DW_TAG_inlined_subroutine of an object (any ``.o``;
a vmlinux whole or restricted to ``cus``) is charged to its callee (the abstract origin, followed
through origin chains to the DIE with the name and DW_AT_decl_file), with the out-of-line symbol
it sits in (the caller) and its compilation unit.

Convention for nested inlining: **every byte is counted once, in the innermost inlined callee**
that covers it (``bytes``); the outer callee also shows the bytes of its instances with their
nested inlines ``including``. Why: summing per callee or per header must add up to the text that
exists (an exclusive count adds up, an inclusive one counts a nested helper's bytes in every
level), while a reader asking "what does inlining ``rmqueue`` cost" wants the inclusive figure.
Innermost is decided by DIE order: the DWARF lists a nested instance after the instance it sits
in, so over one unit the last instance (in DIE order) whose ranges cover a byte owns it.

Totals add up per caller symbol: ``size == inlined + own + undescribed``, where ``undescribed`` is
the symbol's bytes that no DWARF range (subprogram or inlined instance) covers (padding, code
without debug info). Instance bytes outside every function symbol are reported as unattributed,
not dropped; instances without any range (optimised away, or only an entry_pc) are counted.
"""
from __future__ import annotations

import heapq
import posixpath
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from pathlib import Path

from analyzer.dwarf import DwarfFacts, has_dwarf, read_dwarf
from analyzer.dwarf.model import MAX_ORIGIN_HOPS
from analyzer.elf import function_symbols, load_images, read_symtab
from analyzer.errors import InputError
from analyzer.gc_pause import paused_gc
from analyzer.relocs import symbol_addresses


@dataclass
class CalleeCost:
    """One inlined function, summed over all its instances."""
    name: str
    decl_file: str | None
    instances: int = 0
    bytes: int = 0                      # innermost convention, inside caller symbols (see InlineCost)
    including: int = 0                  # the instances' whole ranges, nested inlines included
    empty: int = 0                      # instances with no code range at all
    callers: dict[str, int] = field(default_factory=dict)   # caller symbol -> bytes
    units: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CallerCost:
    """One out-of-line function symbol: its size split into inlined, own and undescribed bytes."""
    symbol: str
    size: int
    inlined: int = 0
    own: int = 0
    undescribed: int = 0                # bytes no DWARF range covers

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FileCost:
    """Inlined bytes summed per declaring file (a header, usually)."""
    file: str
    callees: int = 0
    instances: int = 0
    bytes: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Unattributed:
    outside_symbols: int = 0            # inlined instance bytes in no function symbol
    no_origin_name: int = 0             # bytes of instances whose origin has no name
    empty_instances: int = 0            # instances without a code range (counted, 0 bytes)
    undescribed: int = 0                # caller symbols' bytes no DWARF range covers

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class InlineCost:
    path: str
    units: int
    callees: dict[str, CalleeCost]      # key: "name" or "name@decl_file" when names collide
    callers: dict[str, CallerCost]
    files: dict[str, FileCost]
    unattributed: Unattributed
    inlined_bytes: int = 0              # sum of CalleeCost.bytes (each byte once, inside caller symbols;
                                        # instance bytes outside every symbol: unattributed.outside_symbols)

    def to_dict(self) -> dict:
        return {"path": self.path, "units": self.units, "inlined_bytes": self.inlined_bytes,
                "callees": {k: v.to_dict() for k, v in self.callees.items()},
                "callers": {k: v.to_dict() for k, v in self.callers.items()},
                "files": {k: v.to_dict() for k, v in self.files.items()},
                "unattributed": self.unattributed.to_dict()}


def innermost_segments(instances: list[list[tuple[int, int]]]) -> list[tuple[int, int, int]]:
    """(lo, hi, index) pieces of the instances' ranges, each byte given to the last instance
    (in list order, i.e. DIE order: the innermost) that covers it; adjacent pieces merged."""
    events: list[tuple[int, int, int]] = []
    for i, rngs in enumerate(instances):
        for lo, hi in rngs:
            if hi > lo:
                events.append((lo, 1, i))
                events.append((hi, 0, i))
    events.sort()
    out: list[tuple[int, int, int]] = []
    heap: list[int] = []                 # -index of active instances (lazy deletion)
    count: dict[int, int] = {}
    prev = None
    for pos, kind, i in events:
        while heap and count.get(-heap[0], 0) <= 0:
            heapq.heappop(heap)
        if heap and prev is not None and pos > prev:
            owner = -heap[0]
            if out and out[-1][2] == owner and out[-1][1] == prev:
                out[-1] = (out[-1][0], pos, owner)
            else:
                out.append((prev, pos, owner))
        prev = pos
        if kind == 1:
            count[i] = count.get(i, 0) + 1
            heapq.heappush(heap, -i)
        else:
            count[i] -= 1
    return out


def source_root(unit) -> str | None:
    """The directory a unit's absolute file names share: the source tree's top for a kernel unit
    (its files span ``include/``, ``arch/`` and its own directory), so headers are named
    ``include/linux/mmzone.h`` whichever directory a build's tree sat in (O= builds keep the
    sources outside DW_AT_comp_dir)."""
    paths = {sp.decl_file for sp in unit.subprograms.values() if sp.decl_file and sp.decl_file.startswith("/")}
    if unit.name and unit.name.startswith("/"):
        paths.add(unit.name)
    if not paths:
        return unit.comp_dir
    if len(paths) == 1:
        return posixpath.dirname(next(iter(paths)))
    return posixpath.commonpath(list(paths))


def _unit_roots(units) -> list[str | None]:
    """Each unit's source root; units of one name share the broadest (shortest) of theirs. Under
    LTO a backend that inlined a function imported from another file emits a small unit under that
    file's name holding only the function's abstract DIEs: its one file would make the file's own
    directory its root (``page_alloc.c`` rather than ``mm/page_alloc.c``), and the callee two keys."""
    own = [source_root(u) for u in units]
    best: dict[str, str] = {}
    for u, r in zip(units, own):
        if u.name and r and (u.name not in best or len(r) < len(best[u.name])):
            best[u.name] = r
    return [best.get(u.name, r) if u.name else r for u, r in zip(units, own)]


def relative(path: str | None, root: str | None) -> str | None:
    """A declaring file relative to the unit's source root (see :func:`source_root`)."""
    if path and root and root != "/":
        d = root.rstrip("/") + "/"
        if path.startswith(d):
            return path[len(d):]
    if path and path.startswith("./"):
        return path[2:]
    return path


def _describe(syms: "_Symbols", lo: int, hi: int, described: dict[int, int], touched: set[int]) -> None:
    """Count [lo, hi) (one piece of the union of DWARF ranges) in the symbols it overlaps."""
    for k, n in syms.split(lo, hi)[0]:
        described[k] = described.get(k, 0) + n
        touched.add(k)


class _Symbols:
    """Function symbols with code, by address: the callers."""

    def __init__(self, img, table):
        e = table.entries
        idx = function_symbols(img, table)
        addrs = symbol_addresses(img, table)[idx].tolist()
        sizes = e["size"][idx].tolist()
        names = table.names(idx)
        seen: dict[int, tuple[int, str, int]] = {}
        for a, s, n in zip(addrs, sizes, names):          # aliases: one name per address
            got = seen.get(a)
            if got is None or (n.startswith("__pfx_"), n) < (got[1].startswith("__pfx_"), got[1]):
                seen[a] = (a, n, s)
        rows = sorted(seen.values())
        self.lo = [a for a, _n, _s in rows]
        self.hi = [a + s for a, _n, s in rows]
        self.name = [n for _a, n, _s in rows]

    def split(self, lo: int, hi: int) -> tuple[list[tuple[int, int]], int]:
        """([(symbol index, bytes)], bytes outside any symbol) of the span [lo, hi)."""
        out, outside, p = [], 0, lo
        k = bisect_right(self.lo, p) - 1
        while p < hi:
            if k >= 0 and p < self.hi[k]:
                e = min(hi, self.hi[k])
                out.append((k, e - p))
                p = e
            nxt = k + 1
            if p >= hi:
                break
            if nxt < len(self.lo) and self.lo[nxt] <= p:
                k = nxt
                continue
            e = min(hi, self.lo[nxt]) if nxt < len(self.lo) else hi
            outside += e - p
            p = e
            k = nxt
        return out, outside


def open_with_dwarf(path: str | Path):
    """One ELF file's image and symbol table, refused in one line when it is an archive, stripped or
    has no DWARF: what inline attribution needs (whole or unit by unit)."""
    images = load_images(path)
    if len(images) != 1:
        raise InputError(f"{path}: archives are not supported here; give one object file")
    img = images[0]
    table = read_symtab(img)
    if table is None:
        raise InputError(f"{path}: no symbol table (stripped file)")
    if not has_dwarf(img):
        raise InputError(f"{path}: no DWARF (.debug_info): build with debug info to see inlined code")
    return img, table


def inline_cost(path: str | Path, cus: tuple[str, ...] | list[str] | None = None,
                engine: str = "auto") -> InlineCost:
    """The inlined bytes of one ELF file (``cus``: only these compilation units of a vmlinux).

    ``engine``: as :func:`analyzer.dwarf.read_dwarf` (``"auto"``: libdw where it is built)."""
    img, table = open_with_dwarf(path)
    with paused_gc():
        dw = read_dwarf(img, table, tuple(cus) if cus else None, engine=engine)
        return attribute(str(path), dw, _Symbols(img, table))


def attribute(path: str, dw: DwarfFacts, syms: _Symbols) -> InlineCost:
    """The attribution over decoded DWARF and the function symbols (see the module docstring)."""
    callees: dict[tuple[str, str | None], CalleeCost] = {}
    inlined_at: dict[int, int] = {}                 # symbol index -> inlined bytes
    touched: set[int] = set()                       # symbols some DWARF range falls in
    described: dict[int, int] = {}                  # symbol index -> bytes some DWARF range covers
    un = Unattributed()
    names: dict[tuple[int, str | None], tuple[str | None, str | None]] = {}

    # each unit's source root, found by the offset of its first subprogram: a declaring file is
    # made relative to the root of the unit that declares it (an origin in another unit, named by
    # DW_FORM_ref_addr, is declared there)
    unit_roots = _unit_roots(dw.units)
    roots = [(min(u.subprograms), unit_roots[i]) for i, u in enumerate(dw.units) if u.subprograms]
    roots.sort()
    root_starts = [o for o, _r in roots]

    def declaring_root(offset: int, fallback: str | None) -> str | None:
        sp, seen = dw.subprograms.get(offset), 0
        while sp is not None and sp.decl_line is None and sp.origin is not None and seen < MAX_ORIGIN_HOPS:
            sp, seen = dw.subprograms.get(sp.origin), seen + 1
        if sp is None:
            return fallback
        i = bisect_right(root_starts, sp.offset) - 1
        return roots[i][1] if i >= 0 else fallback

    def callee_of(origin: int, root: str | None) -> tuple[str | None, str | None]:
        got = names.get((origin, root))
        if got is None:
            got = names[(origin, root)] = (dw.name_of(origin),
                                           relative(dw.decl_of(origin)[0], declaring_root(origin, root)))
        return got

    spans: list[tuple[int, int]] = []              # every DWARF range: their union is what is described

    for i, u in enumerate(dw.units):
        unit = u.name or "?"
        root = unit_roots[i]
        unit = relative(unit, root) if unit.startswith("/") else unit
        for sp in u.subprograms.values():
            spans.extend(sp.ranges)
        insts = u.inlined
        keys = []
        for inst in insts:
            name, decl = callee_of(inst.origin, root)
            key = (name or f"<origin {inst.origin:#x}>", decl)
            keys.append(key)
            c = callees.get(key)
            if c is None:
                c = callees[key] = CalleeCost(key[0], decl)
            c.instances += 1
            size = inst.size
            c.including += size
            if size == 0:
                c.empty += 1
                un.empty_instances += 1
            if unit not in c.units:
                c.units.append(unit)
            spans.extend(inst.ranges)
        for lo, hi, i in innermost_segments([inst.ranges for inst in insts]):
            c = callees[keys[i]]
            parts, outside = syms.split(lo, hi)
            un.outside_symbols += outside
            if keys[i][0].startswith("<origin "):
                un.no_origin_name += hi - lo
            for k, n in parts:
                c.bytes += n
                nm = syms.name[k]
                c.callers[nm] = c.callers.get(nm, 0) + n
                inlined_at[k] = inlined_at.get(k, 0) + n

    # the described bytes of each symbol: the union of all ranges, split at the symbols once
    spans.sort()
    start = end = None
    for lo, hi in spans:
        if end is not None and lo <= end:
            end = max(end, hi)
            continue
        if end is not None:
            _describe(syms, start, end, described, touched)
        start, end = lo, hi
    if end is not None:
        _describe(syms, start, end, described, touched)

    # symbols of one name (static functions of many units in a vmlinux) are summed, as
    # bloat-o-meter sums them: a caller is a name, as in its table
    callers: dict[str, CallerCost] = {}
    for k in sorted(touched):
        size = syms.hi[k] - syms.lo[k]
        undescribed = size - described.get(k, 0)
        inlined = inlined_at.get(k, 0)
        cc = callers.setdefault(syms.name[k], CallerCost(syms.name[k], 0))
        cc.size += size
        cc.inlined += inlined
        cc.undescribed += undescribed
        cc.own += size - inlined - undescribed
        un.undescribed += undescribed

    return finish(path, len(dw.units), callees, callers, un)


def finish(path: str, units: int, callees: dict[tuple[str, str | None], CalleeCost],
           callers: dict[str, CallerCost], un: Unattributed) -> InlineCost:
    """The InlineCost of summed callees (by (name, declaring file)) and callers: callees keyed by
    name (``name@file`` where two declarations share one), callers' lists sorted, files summed.
    Shared by the whole-file attribution and the per-unit merge (:mod:`analyzer.inline_units`)."""
    # keys: the plain name unless two declarations share it (static inlines of two headers)
    by_name: dict[str, int] = {}
    for name, _decl in callees:
        by_name[name] = by_name.get(name, 0) + 1
    out: dict[str, CalleeCost] = {}
    files: dict[str, FileCost] = {}
    for (name, decl), c in sorted(callees.items(), key=_by_name_and_file):
        if len(c.callers) > 1:          # most callees have one caller: nothing to sort
            c.callers = dict(sorted(c.callers.items(), key=_by_bytes))
        if len(c.units) > 1:
            c.units.sort()
        out[name if by_name[name] == 1 else f"{name}@{decl or '?'}"] = c
        d = decl or "?"
        f = files.get(d)
        if f is None:
            f = files[d] = FileCost(d)
        f.callees += 1
        f.instances += c.instances
        f.bytes += c.bytes
    # callers by name: the same order however the callers were found (by address in a whole
    # decode, unit by unit in a merge)
    return InlineCost(path, units, out, dict(sorted(callers.items())), dict(sorted(files.items())), un,
                      sum(c.bytes for c in out.values()))


def _by_name_and_file(kv: tuple[tuple[str, str | None], CalleeCost]) -> tuple[str, str]:
    return kv[0][0], kv[0][1] or ""


def _by_bytes(kv: tuple[str, int]) -> tuple[int, str]:
    return -kv[1], kv[0]
