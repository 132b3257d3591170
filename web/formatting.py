"""How numbers, shas, findings and cells read on the pages (Jinja filters): every colour has a word beside it."""
from __future__ import annotations

from flask import current_app
from jinja2.filters import do_truncate
from markupsafe import Markup, escape

SEVERITY_LABEL = {"error": "error", "warning": "warning", "notice": "notice", "info": "info"}
SEVERITY_MARK = {"error": "✖", "warning": "▲", "notice": "●", "info": "·"}
STATUS_LABEL = {"ok": "built", "failed": "build failed", "timeout": "build timed out", "killed": "build killed"}


def num(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def delta(v: int | None) -> str:
    if v is None:
        return "–"
    return f"{v:+,}" if v else "±0"


def delta_class(v: int | None) -> str:
    if not v:
        return "zero"
    return "grow" if v > 0 else "shrink"


def short(sha: str | None, n: int = 12) -> str:
    return (sha or "")[:n]


def severity_badge(severity: str | None, text: str | None = None) -> Markup:
    sev = severity if severity in SEVERITY_LABEL else "info"
    label = text if text is not None else SEVERITY_LABEL[sev]
    return Markup(f'<span class="badge sev-{sev}" title="{escape(sev)}">{SEVERITY_MARK[sev]} {escape(label)}</span>')


def status_badge(status: str | None) -> Markup:
    if status in (None, "ok"):
        return Markup('<span class="badge ok">✓ built</span>')
    label = STATUS_LABEL.get(status or "", status or "")
    return Markup(f'<span class="badge bad">✖ {escape(label)}</span>')


def finding_counts(severities: dict[str, int]) -> Markup:
    """``2 warning 1 notice``, each count in its severity's colour."""
    return Markup("".join(f'<span class="count sev-{escape(k)}" title="{n} {escape(k)} finding(s)">{n} {escape(k)}'
                          f'</span> ' for k, n in severities.items()))


def worst_finding(w: dict | None) -> Markup:
    """A cell's worst finding: its kind as a badge and the function, linked."""
    if not w:
        return Markup("")
    fn = escape(w["function"])
    return Markup(f'<span class="worst">{severity_badge(w["severity"], w["kind"].replace("_", " "))} '
                  f'<a class="fn" href="/function/{fn}">{fn}</a></span>')


def build_cell(c: dict | None, href: str) -> Markup:
    """One commit under one toolchain (web.pages.cells.cell): status, text delta, counts, worst finding."""
    if c is None:
        return Markup('<td class="cell empty" title="not built under this toolchain">not built</td>')
    href = escape(href)
    if c["status"] != "ok":
        err = c["error"]
        err = (f'<div class="err" title="{escape(err)}">{escape(do_truncate(current_app.jinja_env, err, 70))}</div>'
               if err else "")
        return Markup(f'<td class="cell failed"><a href="{href}">{status_badge(c["status"])}</a>{err}</td>')
    w, d = c["worst"], c["text_delta"]
    change = (f'<span class="muted" title="the parent is {escape(c["base"])}">parent {escape(c["base"])}</span>'
              if d is None else f"text {delta(d)}")
    found = finding_counts(c["severities"]) if c["findings"] else '<span class="muted">no findings</span>'
    return Markup(f'<td class="cell sev-cell-{escape(w["severity"]) if w else "none"}">\n'
                  f'  <a href="{href}" class="delta {delta_class(d)}" title="size(1) text: {num(c["text"])} bytes">'
                  f'{change}</a>\n  <div>{found}</div>\n' + (f'  <div>{worst_finding(w)}</div>\n' if w else "") +
                  '</td>')


def build_cells(cells: dict[str, dict], toolchains: list[str], url: str) -> Markup:
    """A row of the index or series page: the commit's cell under each toolchain. In Python, not a
    Jinja macro: a page has ~200 of them, and a macro call cost ~25 µs (a third of the index's render)."""
    return Markup("\n".join(build_cell(cells.get(tc), f"{url}#tc-{tc.replace(' ', '-')}") for tc in toolchains))


def per_pair(v) -> str:
    """An executed-instruction figure per alloc/free pair (380, 137.50); anything else (a value the
    store could not read: its marker) as given, escaped by the template."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "–" if v is None else str(v)
    return f"{v:,.0f}" if v == int(v) else f"{v:,.2f}"


def register(app) -> None:
    app.jinja_env.filters.update(num=num, delta=delta, delta_class=delta_class, short=short, per_pair=per_pair,
                                 severity_badge=severity_badge, status_badge=status_badge,
                                 finding_counts=finding_counts, worst_finding=worst_finding,
                                 build_cells=build_cells)
