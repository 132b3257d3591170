"""How numbers, shas and findings read on the pages (Jinja filters): every colour has a word beside it."""
from __future__ import annotations

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


def register(app) -> None:
    app.jinja_env.filters.update(num=num, delta=delta, delta_class=delta_class, short=short,
                                 severity_badge=severity_badge, status_badge=status_badge)
