"""The report model (``ci.reports.model``) as text (terminal), Markdown (to paste) and JSON (for tools).

Each toolchain's table is bloat-o-meter's own text, regenerated from the store.
"""
from __future__ import annotations

import json

from analyzer import formats
from analyzer.kinds import Kind
from analyzer import link_views
from ci.reports import runtime_views
from ci.reports.model import InlineReport, PatchReport, SeriesReport, ToolchainReport, finding_order

INLINE_CALLEES = 10                     # rows of the inline-cost table in text and mail (JSON: all)
INLINE_FILES = 8
_NAME = 31                              # name column: longer names get a line of their own (78 columns)


def _row(name: str, cols: tuple, indent: str = "  ") -> list[str]:
    nums = " %8s %8s %8s %8s %8s" % cols
    if len(name) > _NAME - len(indent) + 2:
        return [indent + name, " " * (_NAME + 2) + nums]
    return [f"{indent}{name:<{_NAME + 2 - len(indent)}}{nums}"]


def inline_lines(ic: InlineReport, callees: int = INLINE_CALLEES, files: int = INLINE_FILES,
                 more: str = "sizewatch report --json") -> list[str]:
    """The inline-cost table (at most 78 columns): per inlined callee instances and bytes before and
    after, biggest change first, with the callers whose share changed most; per declaring file the
    same; then the totals (they add up: inlined + own + no DWARF range = the callers' symbol sizes)
    and what could not be attributed."""
    d = ic.diff
    head = ("inst-old", "inst-new", "old", "new", "delta")
    out = [f"inlined code (bytes, each in its innermost callee), parent -> this commit"
           + (f", {ic.scope}" if ic.scope else "") + ":"]
    out += _row("inlined callee", head)
    for r in d.callees[:callees]:
        out += _row(r.name, (r.instances_old, r.instances_new, r.old, r.new, f"{r.delta:+d}"))
        for c in r.callers:
            out += _row(f"in {c.symbol}", ("", "", c.old, c.new, f"{c.delta:+d}"), "      ")
    if not d.callees:
        out.append("  (no inlined callee changed)")
    elif len(d.callees) > callees:
        out.append(f"  ... {len(d.callees) - callees} more callees changed ({more})")
    out += _row("declared in", head)
    for f in d.files[:files]:
        out += _row(f.file, (f.instances_old, f.instances_new, f.old, f.new, f"{f.delta:+d}"))
    if not d.files:
        out.append("  (no declaring file changed)")
    elif len(d.files) > files:
        out.append(f"  ... {len(d.files) - files} more files changed ({more})")
    o, n = ic.old, ic.new
    out.append(f"  inlined bytes: {d.inlined_old} -> {d.inlined_new} ({d.inlined_new - d.inlined_old:+d}), in "
               f"{o.callers} -> {n.callers} caller symbols")
    out.append(f"  caller symbols: {o.size} -> {n.size} bytes = inlined {o.inlined} -> {n.inlined}")
    out.append(f"    + own code {o.own} -> {n.own} + no DWARF range {o.undescribed} -> {n.undescribed}")
    uo, un = d.unattributed_old, d.unattributed_new
    out.append(f"  not attributed: inlined bytes outside any symbol {uo['outside_symbols']} -> "
               f"{un['outside_symbols']},")
    out.append(f"    of unnamed origins {uo['no_origin_name']} -> {un['no_origin_name']}; instances without "
               f"code {uo['empty_instances']} -> {un['empty_instances']}")
    return out


def _finding_lines(t: ToolchainReport, limit_single: int = 12) -> list[str]:
    """Changes against the parent first, then what is new in this build; the rest only counted."""
    out = [f"  {f.kind}: {f.message or f.function}" for f in t.ordered_changes]
    changed = {f.function for f in t.changes if f.kind != Kind.BOUNDARY_CROSSING}
    # a function already reported as changed is not repeated (the JSON keeps every finding)
    single = sorted([f for f in t.new_in_build if f.function not in changed], key=finding_order)
    shown = single[:limit_single]
    out += [f"  [in this build] {f.kind}: {f.message or f.function}" for f in shown]
    if len(single) > len(shown):
        out.append(f"  [in this build] ... {len(single) - len(shown)} more (sizewatch report --json)")
    if t.carried:
        out.append(f"  ({t.carried} more finding(s) of this build are in the parent build too)")
    return out


def toolchain_text(t: ToolchainReport) -> str:
    head = f"--- {t.toolchain} ({t.toolchain_version}) {t.target} [{t.config_key}]"
    lines = [head]
    if t.status != "ok":
        lines.append(f"build {t.status}:")
        lines += [f"  {e}" for e in (t.errors or ["(no compiler error lines)"])]
    elif t.base_status is None:
        lines.append("parent not built under this toolchain: no size table")
    elif t.base_status != "ok":
        lines.append(f"parent build {t.base_status}: no size table")
    else:
        lines.append(t.bloat_text.rstrip("\n"))
    if t.size_text:
        lines.append(t.size_text.rstrip("\n"))
    f = _finding_lines(t)
    if f:
        lines.append("findings:")
        lines += f
    elif t.status == "ok" and not t.analyzed:
        lines.append("findings: inline analysis not stored for this build")
    elif t.status == "ok" and t.base_status == "ok":
        lines.append("findings: none")
    lines += link_views.lines(t.link_moves)
    if t.inline_cost is not None and t.inline_cost.changed:     # after the findings: where their bytes went
        lines += inline_lines(t.inline_cost)
    if t.runtime is not None:
        lines += runtime_views.lines(t.runtime)
    return "\n".join(lines) + "\n"


def patch_text(p: PatchReport) -> str:
    label = f"[{p.position}] " if p.position is not None else ""
    if p.commit is None:
        return f"=== {label}{p.subject}\n{p.status}: {p.error or 'not applied'}\n"
    parent = p.commit.parent_sha[:12] if p.commit.parent_sha else "none"
    out = [f"=== {label}{p.commit.sha[:12]} {p.subject or p.commit.subject} (parent {parent})"]
    if not p.toolchains:
        out.append("no builds stored for this commit")
    for t in p.toolchains:
        out.append(toolchain_text(t))
    return "\n".join(out).rstrip("\n") + "\n"


def series_text(r: SeriesReport) -> str:
    s = r.series
    out = [f"Series {s.id}: {s.subject} (v{s.version}, {len(s.patches)} patches, base {s.base_sha[:12]})",
           f"  message-id {s.message_id}; {s.status}" + (f": {s.error}" if s.error else ""), ""]
    out += [patch_text(p) for p in r.patches]
    return "\n".join(out)


def text(report: SeriesReport | list[PatchReport] | PatchReport) -> str:
    if isinstance(report, SeriesReport):
        return series_text(report)
    if isinstance(report, PatchReport):
        return patch_text(report)
    return "\n".join(patch_text(p) for p in report)


def _md_patch(p: PatchReport) -> list[str]:
    label = f"[{p.position}] " if p.position is not None else ""
    if p.commit is None:
        return [f"### {label}{p.subject}", "", f"**{p.status}**: {p.error or 'not applied'}", ""]
    out = [f"### {label}`{p.commit.sha[:12]}` {p.subject or p.commit.subject}", ""]
    for t in p.toolchains:
        out.append(f"#### {t.toolchain} — {t.toolchain_version} — `{t.target}`")
        out.append("")
        if t.status != "ok":
            out += [f"**build {t.status}**", "", "```", *t.errors, "```", ""]
        elif t.tables:
            out.append(formats.to_markdown(t.tables))
        else:
            out += ["no size table (parent not built)", ""]
        if t.size_text:
            out += ["```", t.size_text.rstrip("\n"), "```", ""]
        if t.inline_cost is not None and t.inline_cost.changed:
            out += _md_inline(t.inline_cost)
        if t.runtime is not None:
            out += runtime_views.markdown(t.runtime)
        for f in sorted(t.changes + t.new_in_build, key=finding_order):
            where = "" if f.base_build_id is not None else " (in this build)"
            out.append(f"- **{f.kind}**{where}: {f.message or f.function}")
        if t.carried:
            out.append(f"- {t.carried} more finding(s) of this build are in the parent build too")
        out += link_views.markdown(t.link_moves)
        out.append("")
    return out


def _md_inline(ic: InlineReport) -> list[str]:
    d = ic.diff
    out = ["Inlined code (bytes, each in its innermost callee), parent → this commit"
           + (f", {ic.scope}" if ic.scope else "") + ":",
           "", "| inlined callee | declared in | instances | old | new | delta | callers that changed most |",
           "|---|---|---:|---:|---:|---:|---|"]
    for r in d.callees[:INLINE_CALLEES]:
        callers = ", ".join(f"`{c.symbol}` {c.delta:+d}" for c in r.callers)
        out.append(f"| `{r.name}` | {r.decl_file or '?'} | {r.instances_old} → {r.instances_new} | {r.old} | "
                   f"{r.new} | {r.delta:+d} | {callers} |")
    if len(d.callees) > INLINE_CALLEES:
        out.append(f"| … {len(d.callees) - INLINE_CALLEES} more | | | | | | |")
    out += ["", "| declared in | instances | old | new | delta |", "|---|---:|---:|---:|---:|"]
    for f in d.files[:INLINE_FILES]:
        out.append(f"| {f.file} | {f.instances_old} → {f.instances_new} | {f.old} | {f.new} | {f.delta:+d} |")
    if len(d.files) > INLINE_FILES:
        out.append(f"| … {len(d.files) - INLINE_FILES} more | | | | |")
    uo, un = d.unattributed_old, d.unattributed_new
    o, n = ic.old, ic.new
    out += ["", f"Inlined bytes {d.inlined_old} → {d.inlined_new} ({d.inlined_new - d.inlined_old:+d}) in "
                f"{o.callers} → {n.callers} caller symbols of {o.size} → {n.size} bytes = inlined {o.inlined} → "
                f"{n.inlined} + own code {o.own} → {n.own} + no DWARF range {o.undescribed} → {n.undescribed}; "
                f"not attributed: {uo['outside_symbols']} → {un['outside_symbols']} inlined bytes outside any symbol, "
                f"{uo['no_origin_name']} → {un['no_origin_name']} of unnamed origins, "
                f"{uo['empty_instances']} → {un['empty_instances']} instances without code.", ""]
    return out


def markdown(report: SeriesReport | list[PatchReport] | PatchReport) -> str:
    if isinstance(report, SeriesReport):
        s = report.series
        out = [f"## {s.subject}", "", f"base `{s.base_sha[:12]}`, {len(s.patches)} patches, {s.status}", ""]
        for p in report.patches:
            out += _md_patch(p)
        return "\n".join(out)
    reports = [report] if isinstance(report, PatchReport) else report
    return "\n".join(line for p in reports for line in _md_patch(p))


def to_json(report: SeriesReport | list[PatchReport] | PatchReport) -> str:
    if isinstance(report, (SeriesReport, PatchReport)):
        doc = report.to_dict()
    else:
        doc = {"patches": [p.to_dict() for p in report]}
    return json.dumps(doc, indent=2) + "\n"
