"""Terminal and JSON renderings of inline facts, findings and alignment changes.

Shared by ``sizewatch inspect`` and ``sizediff --inlines/--align``; plain
functions over the analyzer's dataclasses.
"""
from __future__ import annotations

from analyzer.align import crossed, placement
from analyzer.func_align import X86, FunctionAlign
from analyzer.findings import Finding
from analyzer.hotpaths import HotPaths
from analyzer.inlines import FunctionFacts, ObjectFacts


def _status(f: FunctionFacts | None) -> str:
    if f is None:
        return "-"
    parts = []
    if f.out_of_line:
        parts.append("out of line" + (f" ({f.call_count} calls)" if f.call_count else ""))
    if f.inlined_count:
        parts.append(f"inlined {f.inlined_count}x")
    return ", ".join(parts) or "unused"


def findings_text(found: list[Finding]) -> list[str]:
    if not found:
        return ["findings: none"]
    order = {"error": 0, "warning": 1, "notice": 2, "info": 3}
    out = [f"findings ({len(found)}):"]
    for f in sorted(found, key=lambda f: (order.get(f.severity, 9), f.kind, f.function)):
        out.append(f"  [{f.severity}] {f.kind}: {f.message}")
    return out


def inspect_text(obj: ObjectFacts, found: list[Finding], hot: HotPaths, show_all: bool = False) -> str:
    """One object's facts: the findings, then the inline-relevant functions as a table."""
    out = [f"{obj.path}: {obj.arch}, {'linked' if obj.linked else 'relocatable'}"
           + (f", {obj.producer.split(' -')[0]}" if obj.producer else "")
           + (f", units: {', '.join(obj.units)}" if obj.units and len(obj.units) <= 4 else
              f", {len(obj.units)} units" if obj.units else "")]
    for n in obj.notes:
        out.append(f"note: {n}")
    out += findings_text(found)
    rows = [f for f in obj.functions.values()
            if show_all or f.declared in ("inline", "always_inline", "noinline") or f.name in hot]
    out.append("")
    out.append("%-36s %-13s %6s %-26s %7s %s" % ("function", "declared", "size", "status", "inl.B",
                                                 "callers / inlined into"))
    for f in rows:
        where = f.callers if f.out_of_line else f.inlined_into
        top = ", ".join(f"{k}" + (f"({v})" if v > 1 else "") for k, v in
                        sorted(where.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
        if len(where) > 4:
            top += f", +{len(where) - 4}"
        clones = [p.symbol for p in f.pieces if p.clones]
        name = f.name + (f" [{', '.join(c[len(f.name):] for c in clones)}]" if clones else "")
        out.append("%-36s %-13s %6s %-26s %7s %s" % (name, f.declared, f.size or "-", _status(f),
                                                     f.inlined_bytes or "-", top))
        if f.out_of_line and f.reasons and f.declared in ("inline", "always_inline"):
            out.append("%-36s   compiler: %s" % ("", f.reasons[0]))
    return "\n".join(out) + "\n"


def inline_changes(base: ObjectFacts, head: ObjectFacts) -> list[dict]:
    """Functions whose inline status changed (out of line, inlined at all, declaration), base -> head."""
    rows = []
    for name in sorted(base.functions.keys() | head.functions.keys()):
        b, h = base.functions.get(name), head.functions.get(name)
        sb, sh = _status(b), _status(h)
        if (b and h and b.out_of_line == h.out_of_line and bool(b.inlined_count) == bool(h.inlined_count)
                and b.declared == h.declared):
            continue      # same status (only the number of inlined copies or calls moved)
        if b is None and h is not None and not h.out_of_line and not h.inlined_count:
            continue
        rows.append({"function": name, "base": sb, "head": sh,
                     "declared_base": b.declared if b else None, "declared_head": h.declared if h else None,
                     "base_size": b.size if b else 0, "head_size": h.size if h else 0,
                     "base_inlined_bytes": b.inlined_bytes if b else 0,
                     "head_inlined_bytes": h.inlined_bytes if h else 0})
    return rows


def inline_changes_text(rows: list[dict], found: list[Finding]) -> str:
    out = findings_text(found) + ["", "%-36s %-30s %-30s %s" % ("function", "base", "head", "declared")]
    for r in rows:
        d = r["declared_head"] or r["declared_base"] or "-"
        if r["declared_base"] and r["declared_head"] and r["declared_base"] != r["declared_head"]:
            d = f"{r['declared_base']} -> {r['declared_head']}"
        out.append("%-36s %-30s %-30s %s" % (r["function"], r["base"], r["head"], d))
    return "\n".join(out) + "\n"


def align_changes(base: ObjectFacts, head: ObjectFacts, hot: HotPaths) -> list[dict]:
    """Every out-of-line function whose size changed, with its alignment units (the file's own
    function alignment: 16 bytes on x86-64, what the compiler applied on arm64), cache lines and headroom."""
    rows = []
    placed = base.placed and head.placed
    for name in sorted(base.functions.keys() & head.functions.keys()):
        b, h = base.functions[name], head.functions[name]
        if not (b.out_of_line and h.out_of_line) or b.size == h.size:
            continue
        pb = b.placement if placed and b.placement else placement(b.size, align=base.align)
        ph = h.placement if placed and h.placement else placement(h.size, align=head.align)
        rows.append({"function": name, "hot": name in hot, "base_size": b.size, "head_size": h.size,
                     "delta": h.size - b.size, "base": pb.to_dict(), "head": ph.to_dict(),
                     "crossed": crossed(pb, ph), "placed": placed})
    rows.sort(key=lambda r: (-abs(r["delta"]), r["function"]))
    return rows


def align_text(rows: list[dict], placed: bool, align: FunctionAlign = X86) -> str:
    """The alignment view; ``align``: the head file's function alignment (its unit names the columns)."""
    out = [f"{align.label()}" + (": no padding, every byte of growth moves what follows"
                                  if align.padless else "")]
    u = align.unit
    if not placed:
        out.append(f"note: relocatable objects: offsets change at link; {u}-byte units and cache lines are size-based")
    out.append("%-36s %6s %6s %+6s %9s %9s %9s %s" % ("function", "old", "new", "delta", f"{u}B units",
                                                     "lines", "headroom", "crossed"))
    for r in rows:
        b, h = r["base"], r["head"]
        out.append("%-36s %6d %6d %+6d %9s %9s %9s %s" % (
            r["function"] + (" *" if r["hot"] else ""), r["base_size"], r["head_size"], r["delta"],
            f"{b['blocks']}->{h['blocks']}", f"{b['lines']}->{h['lines']}",
            f"{h['headroom']}/{h['line_headroom']}", ",".join(r["crossed"]) or "-"))
    out.append("(* hot path; headroom: bytes before the next function moves / to the next 64-byte boundary in head)")
    return "\n".join(out) + "\n"
