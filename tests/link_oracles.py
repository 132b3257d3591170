"""What binutils' ``nm -n -S`` (and ``readelf -S`` for the sections) says about hot functions in
two linked images: where each sits, how many 16-byte blocks and 64-byte lines it spans, its
64-byte phase, how far it moved between the two and why. The tests compare the analyzer's link
layout, the stored moves and the link findings with this, computed here from nm's text alone.

"Why" is accounted the only way addresses allow: a symbol's footprint is the distance from its
start to the next symbol's start in nm's order (its size plus the padding after it; the last
one's is its size), so a function's address is its section's first symbol's address plus the
footprints of every symbol before it, and its shift between two images is the change of that
first address plus, per symbol, what it adds before the function in the head minus in the base.
Symbols are told apart by (name, n-th of that name in the section), as same-named statics are.
"""
from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

LINE, BLOCK = 64, 16


def nm_text(path: Path) -> dict[str, list[tuple[str, int, int]]]:
    """``nm -n -S`` of the sized symbols in each executable section, by section (readelf -S ranges)."""
    st = Path(path).stat()
    return _nm_text(Path(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)          # a vmlinux's nm: a few seconds; keyed by the file's state too
def _nm_text(path: Path, _size: int, _mtime: int) -> dict[str, list[tuple[str, int, int]]]:
    secs = []
    for line in subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        line = line.replace("[ ", "[")
        parts = line.split()
        if len(parts) > 7 and parts[0].startswith("[") and parts[0] != "[Nr]" and "AX" in parts[7:]:
            secs.append((parts[1], int(parts[3], 16), int(parts[5], 16)))
    out: dict[str, list] = {s[0]: [] for s in secs}
    for line in subprocess.run(["nm", "-n", "-S", str(path)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[2] in "aAUN":
            continue
        addr, size, name = int(parts[0], 16), int(parts[1], 16), parts[3]
        if size == 0:
            continue
        for sname, start, ssize in secs:
            if start <= addr < start + ssize:
                out[sname].append((name, addr, size))
                break
    return {k: v for k, v in out.items() if v}


def spans(addr: int, size: int, unit: int) -> int:
    """``unit``-byte blocks that [addr, addr + size) touches."""
    return (addr + size - 1) // unit - addr // unit + 1 if size > 0 else 0


@dataclass
class NmPlace:
    address: int
    size: int
    lines: int
    blocks: int
    phase: int


@dataclass
class NmMove:
    """One hot function (name, ordinal) of a section in two images, by nm."""
    name: str
    ordinal: int
    section: str
    base: NmPlace | None
    head: NmPlace | None
    shift: int = 0
    size_delta: int = 0
    by_section: int = 0
    by_functions: int = 0        # size changes of symbols before it in both images
    by_padding: int = 0          # the rest of their footprint changes (padding after them)
    by_added: int = 0            # footprints of symbols before it now and not in the base
    by_removed: int = 0          # ... before it in the base and not now
    # (symbol, change, size delta, footprint delta), largest |footprint delta| first, then by name
    causes: list[tuple[str, str, int, int]] = field(default_factory=list)


def _keys(rows: list[tuple[str, int, int]]) -> list[tuple[str, int]]:
    """(name, n-th of that name); a ThinLTO-promoted ``NAME.llvm.<hash>`` named as bloat-o-meter's
    ``.NUMBER`` rule leaves it (``NAME.llvm``): its hash changes with anything in its unit."""
    seen: dict[str, int] = {}
    out = []
    for name, _a, _s in rows:
        name = re.sub(r"\.llvm\.[0-9]+$", ".llvm", name)
        out.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return out


def _place(row: tuple[str, int, int]) -> NmPlace:
    _n, a, s = row
    return NmPlace(a, s, spans(a, s, LINE), spans(a, s, BLOCK), a % LINE)


def nm_moves(base: Path, head: Path, is_hot) -> dict[tuple[str, str, int], NmMove]:
    """Every hot function of either image, keyed (section, name, ordinal): its places and, when in
    both, its shift and the symbols before it whose footprint there changed."""
    bt, ht = nm_text(base), nm_text(head)
    out: dict[tuple[str, str, int], NmMove] = {}
    for sec in sorted(bt.keys() | ht.keys()):
        brows, hrows = bt.get(sec, []), ht.get(sec, [])
        bkeys, hkeys = _keys(brows), _keys(hrows)
        bpos, hpos = {k: i for i, k in enumerate(bkeys)}, {k: i for i, k in enumerate(hkeys)}

        def footprints(rows):
            return [rows[i + 1][1] - rows[i][1] if i + 1 < len(rows) else rows[i][2] for i in range(len(rows))]
        bfp, hfp = footprints(brows), footprints(hrows)
        for k in dict.fromkeys([*hkeys, *bkeys]):
            if not is_hot(k[0]):
                continue
            bi, hi = bpos.get(k), hpos.get(k)
            mv = NmMove(k[0], k[1], sec, _place(brows[bi]) if bi is not None else None,
                        _place(hrows[hi]) if hi is not None else None)
            out[(sec, k[0], k[1])] = mv
            if bi is None or hi is None:
                continue
            mv.shift = hrows[hi][1] - brows[bi][1]
            mv.size_delta = hrows[hi][2] - brows[bi][2]
            mv.by_section = hrows[0][1] - brows[0][1]
            before_b = {bkeys[i]: bfp[i] for i in range(bi)}
            before_h = {hkeys[i]: hfp[i] for i in range(hi)}
            causes = []
            for s in before_b.keys() | before_h.keys():
                d = before_h.get(s, 0) - before_b.get(s, 0)
                if not d:
                    continue
                bsize = brows[bpos[s]][2] if s in bpos else 0
                hsize = hrows[hpos[s]][2] if s in hpos else 0
                if s in before_b and s in before_h:
                    change = "grew" if hsize > bsize else "shrank" if hsize < bsize else "padding"
                    mv.by_functions += hsize - bsize
                    mv.by_padding += d - (hsize - bsize)
                elif s in before_h:
                    change = "added" if s not in bpos else "reordered"
                    mv.by_added += d
                else:
                    change = "removed" if s not in hpos else "reordered"
                    mv.by_removed += d
                causes.append((s[0], change, hsize - bsize, d))
            mv.causes = sorted(causes, key=lambda c: (-abs(c[3]), c[0]))
            # nm's addresses are accounted for to the byte
            assert mv.shift == mv.by_section + sum(c[3] for c in causes), mv
    return out


def why(mv: NmMove, kept: int = 12) -> str:
    """The move's explanation in the analyzer's words (analyzer.link_layout.Move.why) from nm's
    figures: own growth, then the four largest causes, how many more, and the section's start."""
    if mv.base is None or mv.head is None:
        return "added" if mv.base is None else "removed"
    parts = []
    if mv.size_delta:
        parts.append(f"own {'growth' if mv.size_delta > 0 else 'shrink'} {mv.size_delta:+d}")
    if mv.shift:
        named = [f"{n} {c} {d:+d}" if c in ("added", "removed", "reordered") else f"{n} {d:+d}"
                 for n, c, _z, d in mv.causes[:4]]
        if len(mv.causes) > 4:
            named.append(f"{len(mv.causes) - 4} more")
        if mv.by_section:
            named.append(f"section start {mv.by_section:+d}")
        parts.append("moved by " + ", ".join(named) if named else "moved")
    return "; ".join(parts)


def assert_moves_are_nm(moves, want: dict[tuple[str, str, int], NmMove], kept: int | None = None) -> None:
    """``moves`` (analyzer.link_layout.Move, as computed or as stored with their ``kept`` largest
    causes) are exactly nm's: the same hot functions, places, shifts, causes, sums and ``why``."""
    got = {(m.section, m.name, m.ordinal): m for m in moves}
    assert len(got) == len(moves) and got.keys() == want.keys()

    def place(p):
        return None if p is None else NmPlace(p.address, p.size, p.lines, p.blocks, p.phase)
    for k, w in want.items():
        m = got[k]
        assert (place(m.base), place(m.head)) == (w.base, w.head), k
        assert (m.shift, m.size_delta, m.by_section, m.unexplained) == (w.shift, w.size_delta, w.by_section, 0), k
        assert (m.by_functions, m.by_padding, m.by_added, m.by_removed) == \
            (w.by_functions, w.by_padding, w.by_added, w.by_removed), k
        causes = w.causes if kept is None else w.causes[:kept]
        assert [(c.name, c.change, c.size_delta, c.footprint_delta) for c in m.causes] == causes, k
        assert m.more_causes == len(w.causes) - len(causes), k
        assert m.why == why(w), k


def link_findings(want: dict[tuple[str, str, int], NmMove]):
    """(kind, function) of the link findings nm's moves call for: link_cache_lines for a hot function
    spanning more 64-byte lines than in the base, link_phase for one whose entry is at another phase."""
    from collections import Counter
    both = [w for w in want.values() if w.base and w.head]
    return Counter([("link_cache_lines", w.name) for w in both if w.head.lines > w.base.lines]
                   + [("link_phase", w.name) for w in both if w.head.phase != w.base.phase])


def assert_link_findings_are_nm(found, want: dict[tuple[str, str, int], NmMove]) -> None:
    """``found``: the stored link findings (kind, function, message, details as ``data["details"]``
    or ``details``): exactly :func:`link_findings`, each with nm's figures and explanation."""
    from collections import Counter
    assert Counter((f.kind, f.function) for f in found) == link_findings(want)
    for f in found:
        d = f.data["details"] if hasattr(f, "data") else f.details
        w = want[(d["section"], d["name"], d["ordinal"])]
        assert (d["base"]["lines"], d["head"]["lines"], d["base"]["phase"], d["head"]["phase"], d["shift"]) == \
            (w.base.lines, w.head.lines, w.base.phase, w.head.phase, w.shift)
        assert d["why"] == why(w) and f.message.endswith(": " + why(w))


def assert_layout_is_nm(placements, path: Path, is_hot) -> None:
    """``placements`` (analyzer.link_layout.HotPlacement, as laid out or as stored) are exactly the
    hot functions nm lists in ``path``'s executable sections, each at nm's address with nm's size,
    blocks, lines, phase, neighbours (the symbols before and after it at another address) and the
    padding between them."""
    want = {}
    for sec, rows in nm_text(path).items():
        for i, ((name, ordinal), row) in enumerate(zip(_keys(rows), rows)):
            if is_hot(name):
                want[(sec, name, ordinal)] = (rows, i)
    got = {(p.section, p.name, p.ordinal): p for p in placements}
    assert len(got) == len(placements) and got.keys() == want.keys()
    for k, (rows, i) in want.items():
        p, (_n, a, s) = got[k], rows[i]
        assert (p.address, p.size, p.blocks, p.lines, p.phase) == (a, s, spans(a, s, BLOCK), spans(a, s, LINE),
                                                                   a % LINE), k
        prev = next((r for r in reversed(rows[:i]) if r[1] != a), None)
        nxt = next((r for r in rows[i + 1:] if r[1] != a), None)
        assert (None if p.prev is None else (p.prev.name, p.prev.address, p.prev.size)) == prev, k
        assert (None if p.next is None else (p.next.name, p.next.address, p.next.size)) == nxt, k
        assert p.pad_before == (None if prev is None else a - prev[1] - prev[2]), k
        assert p.pad_after == (None if nxt is None else nxt[1] - a - s), k
