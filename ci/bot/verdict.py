"""Which results of a tested series are worth a human's attention, per the policy's [report] rules.

Only what a patch changed counts: findings against its parent commit, single-object
findings the parent build did not have, a build the parent passed and the patch broke,
growth of the target beyond the thresholds, and growth of an inline function's bytes in the whole
target (all its inlined copies: kernel-wide in a vmlinux) beyond its own thresholds. Each ``Reportable`` has a stable key
(patch, toolchain, kind, function); the sorted keys, hashed, are the series' finding set:
the bot mails once per (series version, finding set).
"""
from __future__ import annotations

import hashlib
import re

from analyzer.kinds import Kind, Scope, severity_of
from ci.bot.policy import ReportRules
from ci.reports.model import PatchReport, Reportable, SeriesReport, ToolchainReport, reportable_order, tree_relative


def _switched_on(rules: ReportRules, kind: str, scope: Scope) -> bool:
    """A stored finding is reported when it is of the scope asked for and its [report] switch
    (named as the kind) is on; kinds without a switch are never mailed."""
    return kind in _SCOPES[scope] and getattr(rules, kind, False) is True


def _demoted(f) -> bool:
    """A finding reported below its kind's severity (a fast path that got shorter is info): news, not
    a flag."""
    return f.severity == "info" and severity_of(f.kind) != "info"


_SCOPES = {s: {k.value for k in Kind if k.scope is s} for s in Scope}


def finding_set(items: list[Reportable]) -> str:
    """The hash that, with the series version, makes a decision unique."""
    return hashlib.sha256("\n".join(sorted(r.key for r in items)).encode()).hexdigest()


def toolchain_findings(p: PatchReport, t: ToolchainReport, rules: ReportRules) -> list[Reportable]:
    """Findings of one patch under one toolchain that the rules select (build errors aside)."""
    out: list[Reportable] = []
    for f in t.changes:
        if _switched_on(rules, f.kind, Scope.CHANGE) and not _demoted(f):
            out.append(Reportable(f.kind, f.message or f.function, p.position, t.toolchain, f.function,
                                  f.details.reasons, f.data))
    for f in t.new_in_build:
        if _switched_on(rules, f.kind, Scope.OBJECT):
            out.append(Reportable(f.kind, f.message or f.function, p.position, t.toolchain, f.function,
                                  f.details.reasons, f.data))
    if t.tables and t.status == "ok" and t.base_status == "ok":
        table = t.tables[0]
        over_bytes = rules.growth_bytes and table.net > rules.growth_bytes
        over_pct = rules.growth_percent and table.percent > rules.growth_percent
        if over_bytes or over_pct:
            limits = " or ".join(x for x in (f"{rules.growth_bytes} bytes" if rules.growth_bytes else "",
                                             f"{rules.growth_percent:g}%" if rules.growth_percent else "") if x)
            out.append(Reportable(Kind.GROWTH.value, f"{t.target} grew by {table.net} bytes ({table.percent:+.2f}%), "
                                            f"over the limit of {limits}", p.position, t.toolchain, t.target,
                                  data={"net": table.net, "percent": table.percent,
                                        "before": table.old_total, "after": table.new_total}))
    out += inline_growth(p, t, rules)
    return out


def inline_growth(p: PatchReport, t: ToolchainReport, rules: ReportRules) -> list[Reportable]:
    """Inline functions whose bytes in the whole target grew by more than ``inline_growth_bytes``, or by
    more than ``inline_growth_percent`` of what they had (a function inlined nowhere before has no
    percentage: bytes alone judge it), from the stored inline cost of both builds."""
    ic = t.inline_cost
    if ic is None or not (rules.inline_growth_bytes or rules.inline_growth_percent):
        return []
    out = []
    for r in ic.diff.callees:
        if r.delta <= 0:
            continue
        pct = r.delta * 100.0 / r.old if r.old else None
        over_bytes = rules.inline_growth_bytes and r.delta > rules.inline_growth_bytes
        over_pct = rules.inline_growth_percent and pct is not None and pct > rules.inline_growth_percent
        if not (over_bytes or over_pct):
            continue
        limits = " or ".join(x for x in (f"{rules.inline_growth_bytes} bytes" if rules.inline_growth_bytes else "",
                                         f"{rules.inline_growth_percent:g}%" if rules.inline_growth_percent else "")
                             if x)
        where = ", ".join(f"{c.symbol} {c.delta:+d}" for c in r.callers)
        growth = f"{pct:+.1f}%" if pct is not None else "inlined nowhere before"
        out.append(Reportable(Kind.INLINE_GROWTH.value,
                              f"inline {r.name} grew by {r.delta} bytes in {t.target} ({r.old} -> {r.new} bytes, "
                              f"{growth}; {r.instances_old} -> {r.instances_new} inlined copies"
                              + (f"; most in {where}" if where else "") + f"), over the limit of {limits}",
                              p.position, t.toolchain, r.name, data={**r.to_dict(), "target": t.target}))
    return out


def build_breakage(p: PatchReport, rules: ReportRules) -> list[Reportable]:
    """A build the parent passed and this patch failed: under every compiler, or only some."""
    judged = [t for t in p.toolchains if t.base_status == "ok"]
    broken = [t for t in judged if t.status != "ok"]
    if not broken:
        return []
    every = len(broken) == len(judged)
    kind = (Kind.BUILD_ERROR if every else Kind.BUILD_ERROR_ONE_COMPILER).value
    if not getattr(rules, kind):
        return []
    fine = sorted({t.toolchain for t in judged if t.status == "ok"})
    out = []
    for t in broken:
        first = tree_relative(t.errors[0]) if t.errors else f"build {t.status}"
        where = f" ({', '.join(fine)} {'builds' if len(fine) == 1 else 'build'} it)" if fine else ""
        out.append(Reportable(kind, f"{t.target} does not build with {t.toolchain}{where}: {first}",
                              p.position, t.toolchain, t.target,
                              data={"errors": [tree_relative(e) for e in t.errors], "status": t.status}))
    return out


def agreed(items: list[Reportable], k: int) -> list[Reportable]:
    """The findings that at least ``k`` compilers agree on: the same kind about the same function
    (or target) in the same patch, under k different toolchains. One compiler's quirk stays quiet
    when the policy asks for agreement (``[report] min_compilers``)."""
    if k <= 1:
        return items
    votes: dict[tuple, set[str]] = {}
    for r in items:
        votes.setdefault((r.position, r.kind, r.function), set()).add(r.toolchain)
    return [r for r in items if len(votes[(r.position, r.kind, r.function)]) >= k]


def series_findings(report: SeriesReport, rules: ReportRules) -> list[Reportable]:
    """Everything reportable in a tested series, in mail order. Build breakage is reported whatever
    ``min_compilers`` says: a patch that breaks the build under one compiler is broken."""
    out: list[Reportable] = []
    for p in report.patches:
        if p.commit is None:
            continue
        out += build_breakage(p, rules)
        found: list[Reportable] = []
        for t in p.toolchains:
            found += toolchain_findings(p, t, rules)
        out += agreed(found, rules.min_compilers)
    return sorted(out, key=reportable_order)


# what a justification trailer silences: the patch's growth, not what it breaks or pushes out of line
JUSTIFIABLE = (Kind.GROWTH.value, Kind.INLINE_GROWTH.value, Kind.BOUNDARY_CROSSING.value)


def trailer_value(body: str, name: str) -> str | None:
    """``name:``'s value in a patch's commit message (before the ``---`` line), or None."""
    if not name:
        return None
    message = body.split("\n---\n", 1)[0]
    m = re.search(rf"(?mi)^{re.escape(name)}:[ \t]*(\S.*?)\s*$", message)
    return m.group(1) if m else None


def justified(items: list[Reportable], trailers: dict[int, str]) -> tuple[list[Reportable], dict[int, list[Reportable]]]:
    """The findings left once patches that carry the list's justification trailer (position -> its
    value) have their growth findings silenced, and those silenced per patch (the mail says so)."""
    kept, silenced = [], {}
    for r in items:
        if r.position in trailers and r.kind in JUSTIFIABLE:
            silenced.setdefault(r.position, []).append(r)
        else:
            kept.append(r)
    return kept, silenced
