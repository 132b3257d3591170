"""The report model (``ci.reports.model``) as plain-text mail: 78 columns, nothing quoted.

Prose is wrapped, bloat-o-meter rows with long symbol names put the name on a line of its
own with the numbers in their columns below, and tables are cut at a row limit with a
pointer to the dashboard. ``fit`` re-checks every finished line. The bot's replies
(``ci.bot.reply``) are made of these blocks plus their headers and greeting.
"""
from __future__ import annotations

import re
import textwrap

from analyzer import link_views
from analyzer.kinds import Kind
from ci.reports import runtime_views
from ci.reports.model import PatchReport, Reportable, ToolchainReport, reportable_order
from ci.reports.text import inline_lines

WIDTH = 78


def para(text: str, indent: str = "", first: str | None = None) -> list[str]:
    """Wrapped prose (words never split, so URLs stay whole when they fit on a line)."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent if first is None else first, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [""]


def fit(lines: list[str]) -> list[str]:
    """The last guard of the 78-column rule: any line still too long is wrapped at its words,
    and a single token longer than a line is split."""
    out: list[str] = []
    for ln in lines:
        if len(ln) <= WIDTH:
            out.append(ln)
            continue
        lead = re.match(r"\s*", ln).group(0)
        out += textwrap.wrap(ln, WIDTH, subsequent_indent=lead + "  ", break_long_words=True,
                             break_on_hyphens=False)
    return out


def _flagged(r: Reportable) -> list[str]:
    return para(f"{r.kind}: {r.message}", "     ", ">> ")


def findings_block(p: PatchReport, items: list[Reportable], affected: list[ToolchainReport]) -> list[str]:
    """Per toolchain: the flagged findings (>>), then the other changes against the parent."""
    out: list[str] = []
    for t in affected:
        mine = sorted([r for r in items if r.toolchain == t.toolchain], key=reportable_order)
        out.append(f"{t.toolchain}:")
        for r in mine:
            out += _flagged(r)
        flagged = {r.function for r in mine}          # a flagged function's other findings say the same again
        others = [f for f in t.changes if f.function not in flagged]
        for f in others[:8]:
            out += para(f"{f.kind}: {f.message or f.function}", "     ", "   ")
        if len(others) > 8:
            out.append(f"   ... {len(others) - 8} more changes on the dashboard")
        if t.link_changed:                  # a linked target: where its hot functions landed, and why
            out.append("")
            out += link_block(t)
        out.append("")
    return out


def link_block(t: ToolchainReport) -> list[str]:
    """The link-address table (analyzer.link_views), long lines wrapped under their own indent."""
    out: list[str] = []
    for ln in link_views.lines(t.link_moves, ""):
        ln = "  " + ln
        lead = ln[:len(ln) - len(ln.lstrip())]
        out += [ln] if len(ln) <= WIDTH else para(ln.strip(), lead + "  ", lead)
    return out


def table_lines(t: ToolchainReport, max_rows: int, url: str) -> list[str]:
    """bloat-o-meter's own text, narrow enough for mail."""
    lines = t.bloat_text.rstrip("\n").splitlines()
    out: list[str] = []
    rows = 0
    hidden = 0
    for ln in lines:
        is_row = not ln.startswith(("add/remove:", "Total:")) and not ln.startswith(t.tables[0].title + " ")
        if is_row:
            rows += 1
            if rows > max_rows:
                hidden += 1
                continue
        if ln.startswith("Total:") and hidden:
            out.append(f"... {hidden} more rows: {url}")
            hidden = 0
        if len(ln) > WIDTH and is_row:
            name, old, new, delta = ln.rsplit(None, 3)
            out += [name, "%-40s %7s %7s %7s" % ("", old, new, delta)]
        else:
            out.append(ln)
    return out


def size_block(t: ToolchainReport) -> list[str]:
    """binutils ``size``'s lines for a linked target (the parent, this patch, the change), tabs
    expanded as a mail reader would; [] for objects."""
    if not t.size_text:
        return []
    return [ln.expandtabs(8) for ln in t.size_text.rstrip("\n").splitlines()] + [""]


def reasons_block(items: list[Reportable], affected: list[ToolchainReport]) -> list[str]:
    """The compilers' inline decisions behind the findings (first reason per function)."""
    out: list[str] = []
    for t in affected:
        seen: dict[str, str] = {}
        for r in items:
            if r.toolchain == t.toolchain and r.reasons and r.function not in seen:
                seen[r.function] = r.reasons[0]
        for f in t.changes:
            if f.details.reason and f.function not in seen:
                seen[f.function] = f.details.reason
        if not seen:
            continue
        out.append(f"{t.toolchain}:")
        for fn, reason in sorted(seen.items()):
            out += para(f"{fn}: {reason}", "      ", "  ")
    return out


def inline_block(t: ToolchainReport, items: list[Reportable], max_rows: int, url: str) -> list[str]:
    """The inline-cost table of a toolchain, when the policy flagged an inline function's growth
    under it (``[report] inline_growth_bytes`` / ``inline_growth_percent``): where the bytes landed."""
    if t.inline_cost is None or not any(r.kind == Kind.INLINE_GROWTH and r.toolchain == t.toolchain
                                        and (r.data or {}).get("target", t.target) == t.target for r in items):
        return []
    lines = inline_lines(t.inline_cost, callees=max(1, max_rows // 8), files=max(1, max_rows // 8), more=url)
    return [f"inlined code, {t.toolchain}, {t.target}:", "", *lines[1:], ""]


def runtime_block(t: ToolchainReport, url: str) -> list[str]:
    """A measured vmlinux's page_bench table (``ci.reports.runtime_views``), said plainly to be
    executed instructions under emulation: a reader must not take it for cycles; [] when not measured."""
    if t.runtime is None:
        return []
    out = [f"fast path under emulation, {t.toolchain}, {t.target} (parent -> this patch):", ""]
    if t.runtime.head.status == "ok":
        out += para("These are instructions executed per alloc/free pair, counted exactly in a QEMU TCG "
                    "guest (emulation): not cycles, not time on hardware.")
        out.append("")
    for ln in runtime_views.lines(t.runtime, functions=4, more=url):
        lead = ln[:len(ln) - len(ln.lstrip())]
        out += [ln] if len(ln) <= WIDTH else para(ln.strip(), lead + "  ", lead)
    return out + [""]
