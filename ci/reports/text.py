"""The report model (``ci.reports.model``) as text (terminal), Markdown (to paste) and JSON (for tools).

Each toolchain's table is bloat-o-meter's own text, regenerated from the store.
"""
from __future__ import annotations

import json

from analyzer import formats
from analyzer.kinds import Kind
from ci.reports.model import PatchReport, SeriesReport, ToolchainReport, finding_order


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
        for f in sorted(t.changes + t.new_in_build, key=finding_order):
            where = "" if f.base_build_id is not None else " (in this build)"
            out.append(f"- **{f.kind}**{where}: {f.message or f.function}")
        if t.carried:
            out.append(f"- {t.carried} more finding(s) of this build are in the parent build too")
        out.append("")
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
