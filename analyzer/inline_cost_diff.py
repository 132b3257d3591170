"""A patch's inline cost: two :class:`analyzer.inline_cost.InlineCost` compared per callee and per
declaring file (``sizediff --inline-cost``).

Only what changed is listed (bytes or instance counts), biggest |delta| first, each callee with the
callers whose share of it changed most: that is where a patch's inline change landed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from analyzer.inline_cost import InlineCost

TOP_CALLERS = 3


class _Delta:
    """Bytes before (``old``) and after (``new``): the change, and the dict with it."""
    old: int
    new: int

    @property
    def delta(self) -> int:
        return self.new - self.old

    def to_dict(self) -> dict:
        return {**asdict(self), "delta": self.delta}


@dataclass
class CallerDelta(_Delta):
    symbol: str
    old: int
    new: int


@dataclass
class CalleeDelta(_Delta):
    name: str
    decl_file: str | None
    instances_old: int
    instances_new: int
    old: int
    new: int
    callers: list[CallerDelta] = field(default_factory=list)
    including_old: int = 0              # with nested inlines' bytes (see analyzer.inline_cost)
    including_new: int = 0

    def to_dict(self) -> dict:
        return {**super().to_dict(), "callers": [c.to_dict() for c in self.callers]}


@dataclass
class FileDelta(_Delta):
    file: str
    instances_old: int
    instances_new: int
    old: int
    new: int


@dataclass
class InlineCostDiff:
    callees: list[CalleeDelta]
    files: list[FileDelta]
    inlined_old: int
    inlined_new: int
    unattributed_old: dict[str, int]
    unattributed_new: dict[str, int]

    def to_dict(self) -> dict:
        return {"callees": [c.to_dict() for c in self.callees], "files": [f.to_dict() for f in self.files],
                "inlined": {"old": self.inlined_old, "new": self.inlined_new,
                            "delta": self.inlined_new - self.inlined_old},
                "unattributed": {"old": self.unattributed_old, "new": self.unattributed_new}}


def compare(a: InlineCost, b: InlineCost, top: int = TOP_CALLERS) -> InlineCostDiff:
    """Per callee and per declaring file, what changed from ``a`` (base) to ``b`` (head)."""
    rows = []
    for key in a.callees.keys() | b.callees.keys():
        ca, cb = a.callees.get(key), b.callees.get(key)
        old, new = (ca.bytes if ca else 0), (cb.bytes if cb else 0)
        ia, ib = (ca.instances if ca else 0), (cb.instances if cb else 0)
        if old == new and ia == ib and (ca.including if ca else 0) == (cb.including if cb else 0):
            continue
        pa, pb = (ca.callers if ca else {}), (cb.callers if cb else {})
        callers = [CallerDelta(s, pa.get(s, 0), pb.get(s, 0)) for s in pa.keys() | pb.keys()
                   if pa.get(s, 0) != pb.get(s, 0)]
        callers.sort(key=lambda c: (-abs(c.delta), c.symbol))
        rows.append(CalleeDelta((cb or ca).name, (cb or ca).decl_file, ia, ib, old, new, callers[:top],
                                ca.including if ca else 0, cb.including if cb else 0))
    rows.sort(key=lambda r: (-abs(r.delta), -abs(r.instances_new - r.instances_old), r.name))
    files = []
    for key in a.files.keys() | b.files.keys():
        fa, fb = a.files.get(key), b.files.get(key)
        f = FileDelta(key, fa.instances if fa else 0, fb.instances if fb else 0, fa.bytes if fa else 0,
                      fb.bytes if fb else 0)
        if f.delta or f.instances_old != f.instances_new:
            files.append(f)
    files.sort(key=lambda r: (-abs(r.delta), r.file))
    return InlineCostDiff(rows, files, a.inlined_bytes, b.inlined_bytes, a.unattributed.to_dict(),
                          b.unattributed.to_dict())


def _n(v: int) -> str:
    return str(v)


def diff_text(d: InlineCostDiff) -> str:
    """The terminal table: callees (bytes in the innermost callee; incl-delta with nested inlines),
    then declaring files, then totals and what was not attributed."""
    out = ["%-40s %9s %9s %9s %9s %+9s %10s" % ("inlined callee", "inst-old", "inst-new", "old", "new", "delta",
                                                "incl-delta")]
    if not d.callees:
        out.append("(no inlined callee changed)")
    for r in d.callees:
        out.append("%-40s %9d %9d %9d %9d %+9d %+10d" % (r.name, r.instances_old, r.instances_new, r.old, r.new,
                                                       r.delta, r.including_new - r.including_old))
        for c in r.callers:
            out.append("    in %-33s %29s %9d %9d %+9d" % (c.symbol, "", c.old, c.new, c.delta))
    out.append("")
    out.append("%-60s %9s %9s %9s %9s %+9s" % ("declared in", "inst-old", "inst-new", "old", "new", "delta"))
    if not d.files:
        out.append("(no declaring file changed)")
    for f in d.files:
        out.append("%-60s %9d %9d %9d %9d %+9d" % (f.file, f.instances_old, f.instances_new, f.old, f.new, f.delta))
    out.append("")
    out.append("Inlined bytes: Before=%d, After=%d, chg %+d" % (d.inlined_old, d.inlined_new,
                                                                d.inlined_new - d.inlined_old))
    uo, un = d.unattributed_old, d.unattributed_new
    out.append("Not attributed: outside any symbol %d -> %d bytes, no DWARF range in caller symbols %d -> %d "
               "bytes, instances without code %d -> %d, of unnamed origins %d -> %d bytes" % (
                   uo["outside_symbols"], un["outside_symbols"], uo["undescribed"], un["undescribed"],
                   uo["empty_instances"], un["empty_instances"], uo["no_origin_name"], un["no_origin_name"]))
    return "\n".join(out) + "\n"
