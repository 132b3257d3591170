"""The flags the product exists for, from one object's facts or a base/head pair.

Kinds (``analyzer.kinds``): always_inline_copy, inline_not_inlined, hot_not_inlined (one
object, ``Scope.OBJECT``); newly_inlined, newly_out_of_line, pushed_out_of_line,
boundary_crossing (base vs head, ``Scope.CHANGE``); link_cache_lines, link_phase (a linked
image's base vs head, from ``analyzer.link_layout`` moves: :func:`link_compare`). Messages name no compiler, so the same finding reads the same for
every toolchain; the details dict carries the numbers and the compiler's reason.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from analyzer.align import crossed, placement
from analyzer.hotpaths import HotPaths
from analyzer.inlines import FunctionFacts, ObjectFacts
from analyzer.kinds import Kind, severity_of
from analyzer.link_layout import Move


@dataclass
class Finding:
    kind: str
    function: str
    message: str
    severity: str = ""
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.severity:
            self.severity = severity_of(self.kind)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        return cls(d["kind"], d.get("function", ""), d.get("message", ""), d.get("severity", ""),
                   dict(d.get("details", {})))


def _callers(f: FunctionFacts) -> str:
    taken = ", address taken" if f.address_taken else ""
    if not f.callers:
        return "no direct callers" + taken
    items = sorted(f.callers.items(), key=lambda kv: (-kv[1], kv[0]))
    return "called from " + ", ".join(f"{c} ({n})" if n > 1 else c for c, n in items) + taken


def _reason(f: FunctionFacts) -> str:
    return f"; compiler: {f.reasons[0]}" if f.reasons else ""


def _base_details(f: FunctionFacts) -> dict:
    return {"size": f.size, "declared": f.declared, "callers": dict(f.callers), "call_sites": f.call_count,
            "address_taken": f.address_taken,
            "symbols": [p.symbol for p in f.pieces], "inlined_count": f.inlined_count,
            "reasons": list(f.reasons), "reason": f.reasons[0] if f.reasons else None}


def findings(obj: ObjectFacts, hot: HotPaths | None = None) -> list[Finding]:
    """Flags about one object: forced-inline copies, inline functions and hot paths left out of line."""
    hot = hot or HotPaths()
    out: list[Finding] = []
    for f in obj.functions.values():
        if not f.out_of_line:
            continue
        d = _base_details(f)
        what = f"out-of-line copy {'/'.join(p.symbol for p in f.pieces)} ({f.size} bytes), {_callers(f)}"
        if f.declared == "always_inline":
            out.append(Finding(Kind.ALWAYS_INLINE_COPY.value, f.name,
                               f"__always_inline {f.name} has an {what}{_reason(f)}", details=d))
        elif f.name in hot and f.callers and f.declared in ("inline", "unknown") and (
                f.declared == "inline" or f.dw_inline in (1, 3)):
            out.append(Finding(Kind.HOT_NOT_INLINED.value, f.name,
                               f"hot-path inline {f.name} is not inlined: {what}{_reason(f)}", details=d))
        elif f.declared == "inline" and f.callers:
            out.append(Finding(Kind.INLINE_NOT_INLINED.value, f.name,
                               f"inline {f.name} is not inlined: {what}{_reason(f)}", details=d))
    return out


def _status(f: FunctionFacts | None) -> str:
    if f is None:
        return "absent"
    if f.out_of_line:
        return "out of line" + (f", inlined {f.inlined_count}x" if f.inlined_count else "")
    return f"inlined {f.inlined_count}x"


def compare(base: ObjectFacts, head: ObjectFacts, hot: HotPaths | None = None) -> list[Finding]:
    """Head-vs-base changes of inline status and of hot functions' alignment footprint."""
    hot = hot or HotPaths()
    out: list[Finding] = []
    newly_inlined: list[str] = []
    newly_ool: list[str] = []
    for name in sorted(base.functions.keys() | head.functions.keys()):
        b, h = base.functions.get(name), head.functions.get(name)
        if b is None or h is None:
            continue
        if b.out_of_line and not h.out_of_line and h.inlined_count:
            newly_inlined.append(name)
        elif not b.out_of_line and b.inlined_count and h.out_of_line:
            newly_ool.append(name)
    for name in newly_inlined:
        b, h = base.functions[name], head.functions[name]
        into = sorted(h.inlined_into.items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(Finding(Kind.NEWLY_INLINED.value, name,
                           f"{name} is now inlined ({h.inlined_count}x into "
                           f"{', '.join(k for k, _ in into)}); its {b.size}-byte out-of-line copy is gone",
                           details={"base": _status(b), "head": _status(h), "base_size": b.size,
                                    "inlined_into": dict(h.inlined_into), "inlined_bytes": h.inlined_bytes,
                                    "declared_base": b.declared, "declared_head": h.declared}))
    for name in newly_ool:
        b, h = base.functions[name], head.functions[name]
        d = {"base": _status(b), "head": _status(h), "size": h.size, "callers": dict(h.callers),
             "declared_base": b.declared, "declared_head": h.declared,
             "reasons": list(h.reasons), "reason": h.reasons[0] if h.reasons else None}
        # pushed: its declaration is unchanged, and a function it used to be inlined into is now inlined itself
        pushers = sorted(n for n in newly_inlined if n in b.inlined_into)
        if not pushers and b.declared == h.declared:
            # else: newly inlined functions now sitting in the same callers as its new call sites
            pushers = sorted(n for n in newly_inlined if set(head.functions[n].inlined_into) & set(h.callers))
        if pushers and b.declared == h.declared:
            d["pushed_by"] = pushers
            out.append(Finding(Kind.PUSHED_OUT_OF_LINE.value, name,
                               f"{name} ({h.declared}, unchanged) is now out of line ({h.size} bytes, "
                               f"{_callers(h)}) after {', '.join(pushers)} became inlined{_reason(h)}",
                               details=d))
        else:
            out.append(Finding(Kind.NEWLY_OUT_OF_LINE.value, name,
                               f"{name} is now out of line ({h.size} bytes, {_callers(h)}), "
                               f"was inlined {b.inlined_count}x{_reason(h)}", details=d))
    for name in sorted(base.functions.keys() & head.functions.keys()):
        b, h = base.functions[name], head.functions[name]
        if name not in hot or not (b.out_of_line and h.out_of_line) or h.size <= b.size:
            continue
        pb = b.placement or placement(b.size, align=base.align)
        ph = h.placement or placement(h.size, align=head.align)
        if not (head.placed and base.placed):      # offsets change at link: compare size-based figures
            pb, ph = placement(b.size, align=base.align), placement(h.size, align=head.align)
        which = crossed(pb, ph)
        if not which:
            continue
        parts = []
        if "alignment" in which:
            parts.append(f"{pb.blocks} -> {ph.blocks} x {ph.align}-byte units (padded {pb.padded} -> {ph.padded})")
        if "cache_line" in which:
            parts.append(f"{pb.lines} -> {ph.lines} cache lines")
        out.append(Finding(Kind.BOUNDARY_CROSSING.value, name,
                           f"hot {name} grew {b.size} -> {h.size} bytes (+{h.size - b.size}) and crossed "
                           f"{' and '.join(parts)}; headroom now {ph.headroom} bytes to the next "
                           f"{ph.align}-byte boundary, {ph.line_headroom} to the next cache line",
                           details={"base": pb.to_dict(), "head": ph.to_dict(), "crossed": which,
                                    "delta": h.size - b.size, "placed": base.placed and head.placed}))
    return out


def _at(p) -> str:
    return f"{p.address:#x}"


def link_compare(moves: list[Move], causes: int = 12) -> list[Finding]:
    """Hot functions of a linked image that span more 64-byte lines, or whose entry sits at another
    64-byte phase, than in the base image; each says why (own growth, or moved by what grew before it)."""
    out: list[Finding] = []
    for mv in moves:
        b, h = mv.base, mv.head
        if b is None or h is None:
            continue
        why = mv.why
        details = mv.trimmed(causes).to_dict()
        if h.lines > b.lines:
            out.append(Finding(Kind.LINK_CACHE_LINES.value, mv.name,
                               f"hot {mv.name} now spans {h.lines} 64-byte lines at {_at(h)} "
                               f"(was {b.lines} at {_at(b)}; {b.size} -> {h.size} bytes, phase {b.phase} -> "
                               f"{h.phase}): {why}", details=details))
        if b.phase != h.phase:
            out.append(Finding(Kind.LINK_PHASE.value, mv.name,
                               f"hot {mv.name} entry moved from phase {b.phase} to {h.phase} of its 64-byte line "
                               f"({_at(b)} -> {_at(h)}, {mv.shift:+d} bytes): {why}", details=details))
    return out
