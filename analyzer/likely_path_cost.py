"""Static cost of hot functions' likely paths: per-build facts, base/head changes, and their text.

A :class:`FunctionCost` is what is stored per build and compared per patch: the likely path's
measures (analyzer.likely_path) plus, when llvm-mca ran, its estimated cycles. Estimates are
passed in as plain numbers so this module stays pure (llvm-mca runs in toolchains.mca).
"""
from __future__ import annotations

from dataclasses import dataclass

from analyzer.clones import parse as parse_clone
from analyzer.likely_path import LINE, LikelyPath


@dataclass(frozen=True)
class FunctionCost:
    function: str
    insns: int
    bytes: int
    branches: int
    calls: tuple[str, ...]          # targets of calls on the path, in path order (tail calls too)
    pushes: int                     # callee-saved registers pushed
    frame: int                      # stack frame bytes (sub rsp)
    memory: int                     # instructions with a memory operand
    lines: int                      # 64-byte lines touched
    end: str
    cycles: int | None = None       # llvm-mca "Total Cycles", one pass (an estimate)
    rthroughput: float | None = None
    mcpu: str | None = None

    @classmethod
    def of(cls, path: LikelyPath, cycles: int | None = None, rthroughput: float | None = None,
           mcpu: str | None = None) -> "FunctionCost":
        return cls(path.function, path.insns, path.bytes, path.branches, tuple(c.target for c in path.calls),
                   len(path.pushes), path.frame, path.memory_operands, len(path.lines), path.end,
                   cycles, rthroughput, mcpu)

    def to_dict(self) -> dict:
        return {"function": self.function, "insns": self.insns, "bytes": self.bytes, "branches": self.branches,
                "calls": list(self.calls), "pushes": self.pushes, "frame": self.frame, "memory": self.memory,
                "lines": self.lines, "end": self.end, "estimated_cycles": self.cycles,
                "block_rthroughput": self.rthroughput, "mcpu": self.mcpu}


MEASURES = ("insns", "bytes", "branches", "calls", "pushes", "frame", "memory", "lines", "cycles")
LABELS = {"insns": "insns", "bytes": "bytes", "branches": "cond.br", "calls": "calls", "pushes": "pushes",
          "frame": "frame", "memory": "mem.ops", "lines": "lines", "cycles": "est.cycles"}


def measure(c: FunctionCost | None, name: str) -> int | float | None:
    if c is None:
        return None
    if name == "calls":
        return len(c.calls)
    return getattr(c, name)


@dataclass(frozen=True)
class CostChange:
    """One hot function's likely path in base and head (either may be absent)."""
    function: str
    base: FunctionCost | None
    head: FunctionCost | None
    new_calls: tuple[str, ...] = ()      # call targets on head's path that base's path did not have
    gone_calls: tuple[str, ...] = ()

    def delta(self, name: str) -> int | float | None:
        a, b = measure(self.base, name), measure(self.head, name)
        if name == "cycles" and self.cpus_differ:
            return None                 # estimates for two CPU models are not comparable
        return None if a is None or b is None else b - a

    @property
    def cpus_differ(self) -> bool:
        """Both paths have cycle estimates, made for different CPU models."""
        return (self.base is not None and self.head is not None and self.base.cycles is not None
                and self.head.cycles is not None and self.base.mcpu != self.head.mcpu)

    def to_dict(self) -> dict:
        return {"function": self.function, "base": self.base.to_dict() if self.base else None,
                "head": self.head.to_dict() if self.head else None, "new_calls": list(self.new_calls),
                "gone_calls": list(self.gone_calls),
                "delta": {m: self.delta(m) for m in MEASURES}}


def compare_costs(base: list[FunctionCost], head: list[FunctionCost]) -> list[CostChange]:
    """Pair functions by symbol name, then unpaired ones by source function (a renamed clone)."""
    bmap = {c.function: c for c in base}
    pairs: dict[str, FunctionCost | None] = {h.function: bmap.get(h.function) for h in head}
    used = {b.function for b in pairs.values() if b is not None}
    spare: dict[str, FunctionCost] = {}
    for b in base:
        if b.function not in used:
            spare.setdefault(parse_clone(b.function).base, b)
    for h in head:
        if pairs[h.function] is None:
            b = spare.pop(parse_clone(h.function).base, None)
            if b is not None:
                pairs[h.function] = b
                used.add(b.function)
    out = [_change(h.function, pairs[h.function], h) for h in head]
    out += [_change(b.function, b, None) for b in base if b.function not in used]
    return out


def _change(name: str, b: FunctionCost | None, h: FunctionCost | None) -> CostChange:
    bc = list(b.calls) if b else []
    hc = list(h.calls) if h else []
    new = [c for c in dict.fromkeys(hc) if hc.count(c) > bc.count(c)] if b and h else []
    gone = [c for c in dict.fromkeys(bc) if bc.count(c) > hc.count(c)] if b and h else []
    return CostChange(name, b, h, tuple(new), tuple(gone))


def _cell(v) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def _dcell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:+.1f}"
    return f"{v:+d}" if v else "0"


def cost_table_text(changes: list[CostChange], mcpu: str | None = None) -> str:
    """One block per function: each measure before, after and the difference."""
    out = []
    head = "Likely-path cost of hot functions (static; est.cycles: llvm-mca estimate" + \
        (f" for {mcpu}" if mcpu else "") + ", not a measurement)"
    out.append(head)
    for ch in changes:
        out.append("")
        state = " (new)" if ch.base is None else " (gone)" if ch.head is None else ""
        out.append(f"{ch.function}{state}")
        out.append("  %-10s %8s %8s %8s" % ("measure", "old", "new", "delta"))
        for m in MEASURES:
            a, b = measure(ch.base, m), measure(ch.head, m)
            if m == "cycles" and a is None and b is None:
                continue
            out.append("  %-10s %8s %8s %8s" % (LABELS[m], _cell(a), _cell(b), _dcell(ch.delta(m))))
        if ch.new_calls:
            out.append("  new calls on the path: " + ", ".join(ch.new_calls))
        if ch.gone_calls:
            out.append("  calls gone from the path: " + ", ".join(ch.gone_calls))
        if ch.cpus_differ:
            out.append(f"  est.cycles not compared: estimated for {ch.base.mcpu} (old) and {ch.head.mcpu} (new)")
    return "\n".join(out) + "\n"


@dataclass
class EstimateText:
    cycles: int
    rthroughput: float
    mcpu: str
    modelled: int
    call_latency: int


def path_text(path: LikelyPath, est: EstimateText | None = None, note: str | None = None) -> str:
    """The likely path as annotated disassembly: 64-byte line boundaries, calls, branches, the
    places where cold code was left out, and a summary."""
    where = "link address" if path.linked else f"{path.section} offset"
    out = [f"{path.function}  ({where} {path.start:#x}, {path.size} bytes; likely path below)"]
    prev_line = None
    prev_end = None
    for i in path.instructions:
        if prev_end is not None and i.address != prev_end:
            out.append("        ...  (jumped to %#x)" % i.address)
        line = i.address // LINE * LINE
        if line != prev_line:
            out.append(f"  ---- 64-byte line {line:#x} " + "-" * 40)
            prev_line = line
        note_s = ""
        if i.kind == "call":
            note_s = f"CALL {i.target or i.operands}"
        elif i.kind == "tail":
            note_s = f"TAIL CALL {i.target or i.operands}: path ends"
        elif i.kind == "ret":
            note_s = "return: path ends"
        elif i.kind == "trap":
            note_s = "trap: path ends"
        elif i.kind == "switch":
            note_s = "switch jump table: path ends (no case is likelier in the code)"
        elif i.kind == "alt":
            note_s = "alternative (patched at boot): falls through"
        elif i.cold:
            note_s = f"[cold: {i.target} folded]" + (" path ends" if i.kind == "jmp" else "")
        elif i.taken:
            note_s = "taken (the fall-through is a BUG() trap)"
        elif i.kind == "jcc":
            note_s = "branch: falls through"
        elif i.kind == "jmp":
            note_s = "jump"
        if i.memory and not note_s:
            note_s = "mem"
        end_line = (i.address + i.size - 1) // LINE * LINE
        if end_line != line:
            note_s = (note_s + "; " if note_s else "") + f"crosses into line {end_line:#x}"
            prev_line = end_line
        text = f"    {i.address:6x}:  {i.mnemonic:<8} {i.operands}"
        out.append(f"{text:<62} ; {note_s}" if note_s else text)
        prev_end = i.address + i.size
    if path.end == "loop":
        out.append("        (jumps back onto the path: one pass of a loop)")
    elif path.end == "end":
        out.append("        (runs off the end of the function)")
    out.append("")
    out += summary_lines(path, est, note)
    return "\n".join(out) + "\n"


def summary_lines(path: LikelyPath, est: EstimateText | None = None, note: str | None = None) -> list[str]:
    calls = ", ".join(f"{c.target}@{c.address:#x}" + ("" if c.kind == "call" else f" ({c.kind})")
                      for c in path.calls) or "none"
    lines = path.lines
    shown = " ".join(f"{a:#x}" for a in lines[:12]) + (" ..." if len(lines) > 12 else "")
    out = [
        f"  likely path: {path.insns} instructions, {path.bytes} bytes, {path.branches} conditional branches"
        f" ({path.cold_exits} into cold parts), {len(path.calls)} calls; ends: {path.end}",
        f"  calls: {calls}",
        f"  callee-saved registers pushed: {len(path.pushes)}" + (f" ({' '.join(path.pushes)})" if path.pushes else "")
        + f"; stack frame: {path.frame} bytes; memory operands: {path.memory_operands}",
        f"  64-byte lines: {len(lines)} ({'link addresses' if path.linked else 'section offsets'}: {shown})",
    ]
    if est is not None:
        out.append(f"  estimated cycles: {est.cycles} (llvm-mca-19, -mcpu={est.mcpu}, one pass, calls at "
                   f"{est.call_latency} cycles; block rthroughput {est.rthroughput:.1f}): an estimate, "
                   "not a measurement")
    elif note:
        out.append(f"  estimated cycles: {note}")
    return out


@dataclass(frozen=True)
class CostThresholds:
    """When a likely-path change is a finding (defaults: the issue's; settable by ``sizewatch run
    --cost-*`` and the bot's ``[report]`` so a list can ask for more or less noise)."""
    new_call: bool = True           # any call on head's path that base's path did not have
    lines: int = 1                  # this many more 64-byte lines (0: never a finding)
    cycles_percent: float = 10.0    # estimated cycles grew by this much (0: never a finding)

    def __post_init__(self) -> None:
        # checked here so every caller (command line, bot config, tests) gets the same one-line error
        from analyzer.errors import InputError
        if isinstance(self.lines, bool) or not isinstance(self.lines, int) or self.lines < 0:
            raise InputError(f"cost lines threshold: expected a whole number of 64-byte lines >= 0, got {self.lines!r}")
        pct = self.cycles_percent
        if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not (0 <= pct < float("inf")):
            raise InputError(f"cost cycles threshold: expected a percentage >= 0, got {pct!r}")


def mcpu_mismatches(changes: list[CostChange]) -> list[str]:
    """Functions whose base and head cycle estimates are for different CPU models: their cycles are
    not compared (no cycles finding), and the caller says so rather than staying silent."""
    return [ch.function for ch in changes if ch.cpus_differ]


def _newly_out_of_line(target: str, base_facts, head_facts) -> tuple[bool, list[str]]:
    """Did ``target`` become a call because it stopped being inlined? (and the compiler's reasons)"""
    if head_facts is None:
        return False, []
    name = parse_clone(target).base
    h = head_facts.functions.get(name)
    if h is None or not h.out_of_line:
        return False, []
    b = base_facts.functions.get(name) if base_facts is not None else None
    was_inlined = b is None or not b.out_of_line
    return was_inlined, list(h.reasons)


def cost_findings(changes: list[CostChange], thresholds: CostThresholds = CostThresholds(),
                  base_facts=None, head_facts=None) -> list:
    """Findings from base/head likely-path changes; ``*_facts`` (analyzer.inlines.ObjectFacts) join
    the compiler's inline reasons to a call that appeared because its callee is no longer inlined."""
    from analyzer.findings import Finding
    from analyzer.kinds import Kind
    out = []
    for ch in changes:
        b, h = ch.base, ch.head
        if b is None or h is None:
            continue
        details = {"base_path": b.to_dict(), "head_path": h.to_dict()}
        if thresholds.new_call and ch.new_calls:
            parts, reasons = [], {}
            for t in ch.new_calls:
                ool, rs = _newly_out_of_line(t, base_facts, head_facts)
                if ool:
                    parts.append(f"{t} (no longer inlined" + (f"; compiler: {rs[0]}" if rs else "") + ")")
                    reasons[t] = rs
                else:
                    parts.append(t)
            out.append(Finding(Kind.LIKELY_PATH_CALL.value, ch.function,
                               f"hot {ch.function}'s likely path now calls {', '.join(parts)} "
                               f"({len(b.calls)} -> {len(h.calls)} calls, {b.insns} -> {h.insns} instructions)",
                               details={**details, "new_calls": list(ch.new_calls), "callee_reasons": reasons}))
        # in a .o the lines are section offsets: a path whose bytes did not change but moved because
        # code before it changed size is placement, not this patch's doing on the path
        moved_only = (b.insns, b.bytes, b.calls) == (h.insns, h.bytes, h.calls)
        if thresholds.lines and h.lines - b.lines >= thresholds.lines and not moved_only:
            out.append(Finding(Kind.LIKELY_PATH_LINES.value, ch.function,
                               f"hot {ch.function}'s likely path touches {b.lines} -> {h.lines} 64-byte lines "
                               f"({b.bytes} -> {h.bytes} bytes, {b.insns} -> {h.insns} instructions)",
                               details=details))
        if (thresholds.cycles_percent and b.cycles and h.cycles is not None and b.mcpu == h.mcpu
                and (h.cycles - b.cycles) * 100.0 / b.cycles >= thresholds.cycles_percent):
            pct = (h.cycles - b.cycles) * 100.0 / b.cycles
            out.append(Finding(Kind.LIKELY_PATH_CYCLES.value, ch.function,
                               f"hot {ch.function}'s likely path: estimated {b.cycles} -> {h.cycles} cycles "
                               f"(+{pct:.0f} %, llvm-mca for {h.mcpu}; an estimate, not a measurement)",
                               details={**details, "percent": round(pct, 1)}))
    return out


def from_dict(d: dict) -> FunctionCost:
    return FunctionCost(d["function"], d["insns"], d["bytes"], d["branches"], tuple(d["calls"]), d["pushes"],
                        d["frame"], d["memory"], d["lines"], d["end"], d.get("estimated_cycles"),
                        d.get("block_rthroughput"), d.get("mcpu"))
