"""The analyzer's inline facts and findings (analyzer.inlines / analyzer.findings), as store rows.

Per object the whole ``ObjectFacts`` is kept (zlib JSON) so head-vs-base findings
can be computed later from the store alone; each function also gets a row with
the columns the history and matrix queries read, plus a compact JSON of the
details pages show (reasons, where it was inlined, who calls it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from analyzer import findings as _findings
from analyzer.likely_path_cost import CostThresholds, FunctionCost, compare_costs as _compare_costs, cost_findings
from analyzer.errors import InputError
from analyzer.inlines import ObjectFacts, analyze as _analyze
from analyzer.remarks import MISSED
from db.models import FindingRow, FunctionRow, RemarkRow
from toolchains.mca import DEFAULT_MCPU, build_costs

# Bump when what the analyzer stores changes: builds analyzed by an older version are analyzed
# again from their cached objects (no rebuild). 0 = symbols and sections only.
# 4: the likely paths of hot functions (migration 0011). 5: inline cost (0014, ci.pipeline.inline_costs).
# 6: with the link layout of linked targets too (0015, ci.pipeline.link_layout): one version for both, so a
# build stored with one of them alone is analyzed again. 7: the function alignment read from the
# file (facts' ``align``; arm64 is not x86's 16) and arm64 vmlinux units whole (gcc's DWARF starts
# after the patchable-entry NOPs).
ANALYSIS_VERSION = 7


@dataclass
class Analysis:
    functions: list[FunctionRow] = field(default_factory=list)
    remarks: list[RemarkRow] = field(default_factory=list)
    findings: list[FindingRow] = field(default_factory=list)
    facts: dict | None = None
    note: str = ""
    likely_paths: list[FunctionCost] = field(default_factory=list)


def available() -> bool:
    return True


def finding_row(f: _findings.Finding) -> FindingRow:
    return FindingRow(f.kind, f.function, f.severity, f.message, f.to_dict())


def _compact(f) -> dict:
    """What a function row keeps besides its columns; everything else is in the object's facts blob."""
    d = {"reasons": f.reasons, "decl": f"{f.decl_file}:{f.decl_line}" if f.decl_file else None}
    return {k: v for k, v in d.items() if v}


def analyze(path: Path, source_root: Path | None, remarks: list[Path], mcpu: str = DEFAULT_MCPU,
            cus: tuple[str, ...] | None = None) -> Analysis:
    """Facts, the compilers' missed-inline remarks and the single-object findings of one object;
    the likely paths' cycles are estimated for ``mcpu`` (stored with them). ``cus``: a linked
    file's facts from these compilation units only (ci.pipeline.vmlinux)."""
    facts: ObjectFacts = _analyze(path, source_root=source_root, remarks=list(remarks), cus=cus)
    funcs = [FunctionRow(f.name, f.size, f.declared, f.out_of_line, f.inlined_count, f.inlined_bytes,
                         f.call_count, _compact(f)) for f in facts.functions.values()]
    # Remarks kept: "not inlined" verdicts on functions that have an out-of-line copy here (the ones a
    # reason explains). The rest (~1,000 per page_alloc.o, mostly calls to other files' functions)
    # stay in the report file; each function's own decisions are in the facts blob.
    outl = {f.name for f in facts.functions.values() if f.out_of_line}
    seen, rems = set(), []
    for r in facts.remarks:
        key = (r.callee, r.caller, r.reason)
        if r.decision == MISSED and r.callee in outl and key not in seen:
            seen.add(key)
            rems.append(RemarkRow(r.callee, r.caller, False, r.reason, r.location))
    blob = facts.to_dict()
    blob["remarks"] = []          # already summarised per function (decisions, reasons): 49 -> 34 KB a build
    # hot functions' likely paths, with llvm-mca's estimate when it is installed (one process a build)
    notes = list(facts.notes)
    try:
        costs, mca_note = build_costs(str(path), None, mcpu, required=False)
        notes += [f"no cycle estimates: {mca_note}"] if mca_note else []
    except InputError as e:          # not x86-64 code: the build keeps its other facts
        costs = []
        notes.append(f"no likely paths: {e}")
    return Analysis(funcs, rems, [finding_row(f) for f in _findings.findings(facts)], blob,
                    "; ".join(notes), costs)


def compare(base_facts: dict, head_facts: dict, base_costs: list[FunctionCost] | None = None,
            head_costs: list[FunctionCost] | None = None,
            thresholds: CostThresholds = CostThresholds()) -> list[FindingRow]:
    """Head-vs-base findings (newly inlined / out of line, pushed out of line, boundary crossings),
    and the likely-path cost findings when both builds have likely paths stored."""
    base, head = ObjectFacts.from_dict(base_facts), ObjectFacts.from_dict(head_facts)
    out = [finding_row(f) for f in _findings.compare(base, head)]
    if base_costs and head_costs:
        out += [finding_row(f) for f in cost_findings(_compare_costs(base_costs, head_costs), thresholds,
                                                       base, head)]
    return out
