"""An object's inline cost (analyzer.inline_cost) as store rows and back (migration 0014).

Reports read the store, never objects: a comparison of two builds' inline cost is made from the
rows written with each build, so ``InlineCost`` goes in as an :class:`InlineCostRecord` and comes
back out as an ``InlineCost`` that ``analyzer.inline_cost_diff.compare`` takes. Every (callee,
caller) pair is kept, so the callers that changed are exact; a callee's units are kept as a count.
"""
from __future__ import annotations

from analyzer.inline_cost import CalleeCost, CallerCost, FileCost, InlineCost, Unattributed
from db.models import InlineCalleeRow, InlineCostRecord


def record_of(path: str, ic: InlineCost, scope: tuple[str, ...] = ()) -> InlineCostRecord:
    """What the store keeps of ``ic`` (the inline cost of the object at ``path``)."""
    callees = [InlineCalleeRow(c.name, c.decl_file, c.instances, c.bytes, c.including, c.empty, len(c.units),
                               dict(c.callers)) for c in ic.callees.values()]
    # copied field by field: asdict's deep copy took 0.5 s for a vmlinux's 45k callers
    return InlineCostRecord(path, ic.units, callees,
                            [CallerCost(c.symbol, c.size, c.inlined, c.own, c.undescribed) for c in ic.callers.values()],
                            [FileCost(f.file, f.callees, f.instances, f.bytes) for f in ic.files.values()],
                            Unattributed(**ic.unattributed.to_dict()), ic.inlined_bytes, tuple(scope))


def _keys(names: list[tuple[str, str | None]]) -> list[str]:
    """The analyzer's callee keys: the plain name unless two declarations share it."""
    count: dict[str, int] = {}
    for name, _ in names:
        count[name] = count.get(name, 0) + 1
    return [name if count[name] == 1 else f"{name}@{decl or '?'}" for name, decl in names]


def to_inline_cost(records: list[InlineCostRecord], label: str = "store") -> InlineCost | None:
    """One InlineCost of a build's objects (a directory target has several: callees and callers summed
    by key, as the analyzer sums one vmlinux's units, files summed from the callees as the analyzer
    does); None when none was stored."""
    if not records:
        return None
    callees: dict[tuple[str, str | None], CalleeCost] = {}
    units: dict[tuple[str, str | None], int] = {}
    callers: dict[str, CallerCost] = {}
    files: dict[str, FileCost] = {}
    un = Unattributed()
    for rec in records:
        for r in rec.callees:
            k = (r.name, r.decl_file)
            c = callees.setdefault(k, CalleeCost(r.name, r.decl_file))
            c.instances += r.instances
            c.bytes += r.bytes
            c.including += r.including
            c.empty += r.empty
            units[k] = units.get(k, 0) + r.units
            for s, n in r.callers.items():
                c.callers[s] = c.callers.get(s, 0) + n
        for r in rec.callers:
            cc = callers.setdefault(r.symbol, CallerCost(r.symbol, 0))
            cc.size += r.size
            cc.inlined += r.inlined
            cc.own += r.own
            cc.undescribed += r.undescribed
        for k, v in rec.unattributed.to_dict().items():
            setattr(un, k, getattr(un, k) + v)
    ordered = sorted(callees, key=lambda k: (k[0], k[1] or ""))
    out = {}
    for key, k in zip(_keys(ordered), ordered):
        c = callees[k]
        c.callers = dict(sorted(c.callers.items(), key=lambda kv: (-kv[1], kv[0])))
        out[key] = c
        f = files.setdefault(c.decl_file or "?", FileCost(c.decl_file or "?"))     # as the analyzer sums them
        f.callees += 1
        f.instances += c.instances
        f.bytes += c.bytes
    path = records[0].path if len(records) == 1 else label
    return InlineCost(path, sum(r.units for r in records), out, callers, dict(sorted(files.items())), un,
                      sum(c.bytes for c in out.values()))


def scope_note(records: list[InlineCostRecord]) -> str:
    """'' for whole files; else which units a restricted vmlinux read was limited to."""
    units = sorted({u for r in records for u in r.scope})
    return f"restricted to the units {', '.join(units)}" if units else ""
