"""Where hot functions land in a linked image, and why a patch moved them.

"These differences do add up though, until they eventually cross the alignment boundary"
(seed 000): in a ``.o`` a function's offset is relative to its section; after the link one patch
that grows ``get_page_from_freelist`` shifts every function behind it. :mod:`analyzer.align`
judges sizes; this module reads real addresses (a vmlinux, or any ET_EXEC/ET_DYN with symbols):

- :func:`text_map`: the symbols ``nm`` lists with a size in each executable section, in
  ``nm -n`` order (address, then name): the same set the store keeps (``symbols`` rows), so a
  map read back from the store (:func:`text_map_from_rows`) is the map read from the file;
- :func:`layout`: per hot function its address, size, the 16-byte blocks and 64-byte lines it
  spans there, its 64-byte phase, the padding before and after it and its neighbours;
- :func:`compare`: per hot function of a base/head pair, how far it moved and why: a function's
  *footprint* is the distance from its start to the next symbol's start (its size plus the
  padding after it), and a function's address is its section's start, plus the gap before the
  section's first symbol, plus the footprints of every symbol before it. So the shift is exactly
  the sum of the footprint changes before it (functions that grew or shrank past their
  padding, functions that appeared or went), plus any change of the section's start: each
  named, nothing guessed.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, replace

from analyzer.align import CACHE_LINE, FUNCTION_ALIGN, spanned
from analyzer.elf import SHF_ALLOC, SHF_EXECINSTR, ElfImage, load_images, read_symtab
from analyzer.errors import InputError
from analyzer.hotpaths import HotPaths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

ET_EXEC, ET_DYN = 2, 3


@dataclass
class SectionMap:
    """One executable section's sized symbols in ``nm -n`` order (columns: a vmlinux's .text has ~50k)."""
    name: str
    start: int                   # the section's address (sh_addr); the first symbol's when read from the store
    names: list[str] = field(default_factory=list)
    addrs: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    def footprint(self, i: int) -> int:
        """Bytes from symbol i's start to the next symbol's (its size plus the padding after it);
        0 for an alias at the next one's address; the last symbol's is its size."""
        if i + 1 < len(self.addrs):
            return self.addrs[i + 1] - self.addrs[i]
        return self.sizes[i]

    def footprints(self) -> list[int]:
        """:meth:`footprint` of every symbol, in one pass."""
        a = self.addrs
        return [n - p for p, n in zip(a, a[1:])] + ([self.sizes[-1]] if a else [])

    def keys(self) -> list[tuple[str, int]]:
        """(name, n-th of that name in address order): same-named statics of different files stay apart.
        The name is :func:`symbol_key`'s: a ThinLTO-promoted static is one function across builds."""
        from collections import Counter
        names = [symbol_key(n) for n in self.names]
        ordinal = [0] * len(names)
        dups = {n for n, c in Counter(names).items() if c > 1}
        if dups:
            seen: dict[str, int] = {}
            for i, n in enumerate(names):
                if n in dups:
                    ordinal[i] = seen.get(n, 0)
                    seen[n] = ordinal[i] + 1
        return list(zip(names, ordinal))


_LLVM_HASH = re.compile(r"(\.llvm)\.[0-9]+$")


def symbol_key(name: str) -> str:
    """The name a symbol is matched by across two images. Under ThinLTO a static another unit
    imports is promoted as ``name.llvm.<module hash>``, and the hash changes whenever anything in
    its unit does: the same function would read as removed and added in every patch. It is keyed
    as bloat-o-meter names it (its ``.NUMBER`` rule leaves ``name.llvm``); every other name as is."""
    return _LLVM_HASH.sub(r"\1", name) if ".llvm." in name else name


def nm_order(addrs: list[int], names: list[str]) -> list[int]:
    """Indices in ``nm -n`` order: by address, equal addresses by name bytes (binutils' numeric_forward,
    then non_numeric_forward); only the rare runs of equal addresses pay for comparing names."""
    order = sorted(range(len(addrs)), key=addrs.__getitem__)
    i, n = 0, len(order)
    while i < n:
        j = i + 1
        a = addrs[order[i]]
        while j < n and addrs[order[j]] == a:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(order[i:j], key=lambda k: names[k].encode("utf-8", "surrogateescape"))
        i = j
    return order


@dataclass
class TextMap:
    """The executable sections of one linked image, by name."""
    sections: dict[str, SectionMap] = field(default_factory=dict)


def _linked_image(path: str | os.PathLike) -> ElfImage:
    images = load_images(path)
    if len(images) != 1:
        raise InputError(f"{path}: an archive, not a linked image (link addresses need vmlinux or an executable)")
    img = images[0]
    if img.e_type not in (ET_EXEC, ET_DYN):
        raise InputError(f"{path}: not a linked image (ELF type {img.e_type}): a .o has no link addresses")
    return img


def text_map(path: str | os.PathLike) -> TextMap:
    """The sized symbols nm lists in each executable section of a linked image, in ``nm -n`` order.

    The file is mapped, never read whole; symbols are decoded as numpy columns."""
    import numpy as np
    from analyzer.nm import letters
    img = _linked_image(path)
    table = read_symtab(img)
    if table is None:
        raise InputError(f"{path}: no symbols (stripped file?): link addresses need the symbol table")
    keep, _ = letters(table)
    nsec = len(img.sections)
    code = np.zeros(max(nsec, 1), dtype=bool)
    for s in img.sections:
        code[s.index] = bool(s.flags & SHF_EXECINSTR) and bool(s.flags & SHF_ALLOC)
    sh = table.shndx
    ok = keep & (sh < nsec)
    ok[ok] &= code[sh[ok]]
    idx = np.flatnonzero(ok)
    names = table.names(idx)
    vals = table.entries["value"][idx]
    secs = sh[idx]
    sizes = table.entries["size"][idx]
    out = TextMap()
    vl, sl, zl = vals.tolist(), secs.tolist(), sizes.tolist()
    order = nm_order(vl, names)
    for i in order:
        sec = img.sections[sl[i]]
        m = out.sections.get(sec.name)
        if m is None:
            m = out.sections[sec.name] = SectionMap(sec.name, sec.addr)
        m.names.append(names[i])
        m.addrs.append(vl[i])
        m.sizes.append(zl[i])
    return out


def text_map_from_rows(rows: Iterable[tuple[str, str, int, int]], starts: dict[str, int] | None = None) -> TextMap:
    """A map from stored rows (name, section, address, size): what :func:`text_map` read when the
    build was analyzed. ``starts``: section start addresses (else the first symbol's address)."""
    by: dict[str, tuple[list[str], list[int], list[int]]] = {}
    for name, sec, addr, size in rows:
        cols = by.get(sec)
        if cols is None:
            cols = by[sec] = ([], [], [])
        cols[0].append(name)
        cols[1].append(addr)
        cols[2].append(size)
    out = TextMap()
    for sec, (names, addrs, sizes) in by.items():
        order = nm_order(addrs, names)
        m = SectionMap(sec, 0, [names[i] for i in order], [addrs[i] for i in order], [sizes[i] for i in order])
        m.start = (starts or {}).get(sec, m.addrs[0])
        out.sections[sec] = m
    return out


@dataclass(frozen=True)
class Neighbour:
    name: str
    address: int
    size: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HotPlacement:
    """A hot function at its link address."""
    name: str
    ordinal: int                 # n-th symbol of that name in the section (same-named statics)
    section: str
    address: int
    size: int
    blocks: int                  # 16-byte blocks [address, address+size) touches
    lines: int                   # 64-byte cache lines it touches
    phase: int                   # address % 64: where its entry sits in its first cache line
    pad_before: int | None       # bytes between the previous symbol's end and its start (None: first)
    pad_after: int | None        # bytes between its end and the next symbol's start (None: last)
    prev: Neighbour | None
    next: Neighbour | None

    @property
    def end(self) -> int:
        return self.address + self.size

    @property
    def first_line(self) -> int:
        return self.address // CACHE_LINE * CACHE_LINE

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "HotPlacement":
        nb = {k: Neighbour(**d[k]) if d.get(k) else None for k in ("prev", "next")}
        return cls(**{**{k: d[k] for k in cls.__dataclass_fields__ if k in d and k not in nb}, **nb})


@dataclass
class LinkLayout:
    """The hot functions of one linked image, in address order."""
    functions: list[HotPlacement] = field(default_factory=list)
    sections: dict[str, int] = field(default_factory=dict)       # section holding a hot function -> start

    def to_dict(self) -> dict:
        return {"functions": [f.to_dict() for f in self.functions], "sections": dict(self.sections)}


def hot_filter(hot: HotPaths) -> Callable[[str], bool]:
    """``name in hot`` for tens of thousands of names: one regex over every pattern finds the names
    that start like a hot one (a clone's base is a prefix of its name), and only those are checked
    with the hot list's own rule (clone suffixes parsed)."""
    import fnmatch
    import re
    prefix = re.compile("|".join(fnmatch.translate(p).removesuffix("\\Z") for p in hot.patterns) or "(?!)")
    match = prefix.match

    def is_hot(name: str) -> bool:
        return match(name) is not None and name in hot
    return is_hot


def _neighbour(m: SectionMap, i: int) -> Neighbour | None:
    return Neighbour(m.names[i], m.addrs[i], m.sizes[i]) if 0 <= i < len(m) else None


def placement_at(m: SectionMap, i: int, ordinal: int) -> HotPlacement:
    """Symbol i of a section map at its address. Neighbours skip aliases (symbols at the same address)."""
    a, z = m.addrs[i], m.sizes[i]
    p = i - 1
    while p >= 0 and m.addrs[p] == a:
        p -= 1
    n = i + 1
    while n < len(m) and m.addrs[n] == a:
        n += 1
    prev, nxt = _neighbour(m, p), _neighbour(m, n)
    return HotPlacement(m.names[i], ordinal, m.name, a, z, spanned(a, z, FUNCTION_ALIGN), spanned(a, z, CACHE_LINE),
                        a % CACHE_LINE, None if prev is None else a - (prev.address + prev.size),
                        None if nxt is None else nxt.address - (a + z), prev, nxt)


def layout(tm: TextMap, hot: HotPaths | None = None) -> LinkLayout:
    """The placement of every symbol of ``tm`` that the hot list names (clones included)."""
    is_hot = hot_filter(hot or HotPaths())
    out = LinkLayout()
    for m in tm.sections.values():
        for i, name in enumerate(m.names):
            if is_hot(name):          # its ordinal: same-named symbols before it (a C-level count)
                out.functions.append(placement_at(m, i, m.names[:i].count(name)))
                out.sections[m.name] = m.start
    out.functions.sort(key=lambda f: (f.address, f.name))
    return out


def file_layout(path: str | os.PathLike, hot: HotPaths | None = None) -> tuple[LinkLayout, TextMap]:
    """:func:`layout` of a file, with the map it was read from (kept for :func:`compare`)."""
    tm = text_map(path)
    return layout(tm, hot), tm


# --- base vs head ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cause:
    """A symbol before a hot function whose footprint there changed."""
    name: str
    change: str                  # grew | shrank | padding (same size, other padding) | added | removed | reordered
    size_delta: int              # head size - base size (the whole size when added/removed)
    footprint_delta: int         # what it moved the hot function by

    def to_dict(self) -> dict:
        return asdict(self)

    def label(self) -> str:
        if self.change in ("added", "removed", "reordered"):
            return f"{self.name} {self.change} {self.footprint_delta:+d}"
        return f"{self.name} {self.footprint_delta:+d}"


@dataclass
class Move:
    """One hot function in the base and head images."""
    name: str
    ordinal: int
    section: str
    base: HotPlacement | None    # None: not in the base image
    head: HotPlacement | None
    shift: int = 0               # head address - base address
    size_delta: int = 0
    causes: list[Cause] = field(default_factory=list)   # by |footprint change|, largest first
    by_functions: int = 0        # the shift from sizes of functions before it (grew/shrank)
    by_padding: int = 0          # ... from padding between them (alignment, unsized bytes)
    by_added: int = 0            # ... from symbols now before it that were not
    by_removed: int = 0          # ... from symbols no longer before it
    by_section: int = 0          # ... from the section's start or the bytes before its first symbol
    unexplained: int = 0         # shift - all of the above (0: every byte accounted for)
    more_causes: int = 0         # causes left out by :meth:`trimmed` (their bytes stay in the by_* sums)

    @property
    def moved(self) -> bool:
        return self.shift != 0

    @property
    def lines_delta(self) -> int:
        return (self.head.lines if self.head else 0) - (self.base.lines if self.base else 0)

    @property
    def phase_changed(self) -> bool:
        return bool(self.base and self.head and self.base.phase != self.head.phase)

    @property
    def why(self) -> str:
        """own growth / moved by <fn +N, ...> / both; '' when it stayed where it was, the same size."""
        if self.base is None or self.head is None:
            return "added" if self.base is None else "removed"
        parts = []
        if self.size_delta:
            parts.append(f"own {'growth' if self.size_delta > 0 else 'shrink'} {self.size_delta:+d}")
        if self.shift:
            named = [c.label() for c in self.causes[:4]]
            more = len(self.causes) - len(named) + self.more_causes
            if more > 0:
                named.append(f"{more} more")
            rest = self.by_section + self.unexplained
            if rest:
                named.append(f"section start {rest:+d}")
            parts.append("moved by " + ", ".join(named) if named else "moved")
        return "; ".join(parts)

    @property
    def neighbours_changed(self) -> bool:
        def names(p: HotPlacement | None) -> tuple:
            return (p.prev.name if p and p.prev else None, p.next.name if p and p.next else None)
        return names(self.base) != names(self.head)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(moved=self.moved, lines_delta=self.lines_delta, phase_changed=self.phase_changed, why=self.why,
                 neighbours_changed=self.neighbours_changed)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Move":
        return cls(d["name"], d.get("ordinal", 0), d.get("section", ""),
                   HotPlacement.from_dict(d["base"]) if d.get("base") else None,
                   HotPlacement.from_dict(d["head"]) if d.get("head") else None,
                   d.get("shift", 0), d.get("size_delta", 0), [Cause(**c) for c in d.get("causes", [])],
                   d.get("by_functions", 0), d.get("by_padding", 0), d.get("by_added", 0), d.get("by_removed", 0),
                   d.get("by_section", 0), d.get("unexplained", 0), d.get("more_causes", 0))

    def trimmed(self, n: int = 12) -> "Move":
        """The same move keeping its ``n`` largest causes (what is stored and shown)."""
        if len(self.causes) <= n:
            return self
        return replace(self, causes=self.causes[:n], more_causes=self.more_causes + len(self.causes) - n)


class _Pair:
    """One section in base and head as numpy columns over the union of their keys: what each
    symbol adds to the address of whatever follows it, in either image."""

    def __init__(self, bm: SectionMap, hm: SectionMap):
        import numpy as np
        self.bm, self.hm = bm, hm
        self.bk, self.hk = bm.keys(), hm.keys()
        self.bidx = {k: i for i, k in enumerate(self.bk)}
        self.hidx = {k: i for i, k in enumerate(self.hk)}
        union = self.bk + [k for k in self.hk if k not in self.bidx]
        self.union = union
        n = len(union)
        big = np.iinfo(np.int64).max
        self.posb = np.full(n, big, dtype=np.int64)
        self.posh = np.full(n, big, dtype=np.int64)
        fb, fh = bm.footprints(), hm.footprints()
        # footprints are differences of 64-bit addresses (a damaged file's may not fit in int64):
        # Python integers then, slower but exact
        both = fb + fh
        fits = max(both, default=0) < 1 << 62 and min(both, default=0) > -(1 << 62)
        kind = np.int64 if fits else object
        self.fpb = np.zeros(n, dtype=kind)
        self.fph = np.zeros(n, dtype=kind)
        self.posb[:len(self.bk)] = np.arange(len(self.bk))
        self.fpb[:len(self.bk)] = fb
        uidx = {k: u for u, k in enumerate(union)}
        hu = np.fromiter((uidx[k] for k in self.hk), dtype=np.int64, count=len(self.hk))
        self.posh[hu] = np.arange(len(self.hk))
        self.fph[hu] = fh

    def explain(self, mv: Move, bi: int, hi: int) -> None:
        """The move's causes: every symbol whose contribution to the function's address differs."""
        import numpy as np
        bm, hm = self.bm, self.hm
        inb, inh = self.posb < bi, self.posh < hi
        contrib = np.where(inh, self.fph, 0) - np.where(inb, self.fpb, 0)
        causes = []
        for u in np.flatnonzero(contrib).tolist():
            k = self.union[u]
            d = int(contrib[u])
            if inb[u] and inh[u]:
                dz = hm.sizes[self.hidx[k]] - bm.sizes[self.bidx[k]]
                causes.append(Cause(k[0], "grew" if dz > 0 else "shrank" if dz < 0 else "padding", dz, d))
                mv.by_functions += dz
                mv.by_padding += d - dz
            elif inh[u]:            # before it now: new, or was after it
                gone = k not in self.bidx
                dz = hm.sizes[self.hidx[k]] - (0 if gone else bm.sizes[self.bidx[k]])
                causes.append(Cause(k[0], "added" if gone else "reordered", dz, d))
                mv.by_added += d
            else:                   # no longer before it: gone, or now after it
                gone = k not in self.hidx
                dz = (0 if gone else hm.sizes[self.hidx[k]]) - bm.sizes[self.bidx[k]]
                causes.append(Cause(k[0], "removed" if gone else "reordered", dz, d))
                mv.by_removed += d
        lead_b = bm.addrs[0] if len(bm) else bm.start
        lead_h = hm.addrs[0] if len(hm) else hm.start
        mv.by_section = lead_h - lead_b
        mv.unexplained = mv.shift - (mv.by_functions + mv.by_padding + mv.by_added + mv.by_removed + mv.by_section)
        mv.causes = sorted(causes, key=lambda c: (-abs(c.footprint_delta), c.name))


def compare(base: TextMap, head: TextMap, hot: HotPaths | None = None) -> list[Move]:
    """Per hot function (in head address order, then those only in the base): its move and its causes."""
    is_hot = hot_filter(hot or HotPaths())
    out: list[Move] = []
    for sec in sorted(base.sections.keys() | head.sections.keys()):
        bm = base.sections.get(sec) or SectionMap(sec, 0)
        hm = head.sections.get(sec) or SectionMap(sec, 0)
        if not any(is_hot(n) for n in hm.names) and not any(is_hot(n) for n in bm.names):
            continue
        pair = _Pair(bm, hm)
        wanted = [k for k in pair.hk if is_hot(k[0])]
        bkeys, hkeys = pair.bidx, pair.hidx
        wanted += [k for k in pair.bk if k not in hkeys and is_hot(k[0])]
        for k in wanted:
            bi, hi = bkeys.get(k), hkeys.get(k)
            bp = placement_at(bm, bi, k[1]) if bi is not None else None
            hp = placement_at(hm, hi, k[1]) if hi is not None else None
            mv = Move(k[0], k[1], sec, bp, hp)
            if bp and hp:
                mv.shift, mv.size_delta = hp.address - bp.address, hp.size - bp.size
                pair.explain(mv, bi, hi)
            out.append(mv)
    return out
