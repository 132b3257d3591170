"""The link-address table of hot functions (analyzer.link_layout moves), one wording for every rendering:
``sizediff --link``, ``sizewatch report`` (text, Markdown), the bot's mail and the dashboard.

Per hot function that changed: its address in this build, size, 64-byte lines spanned and 64-byte
phase (parent -> this patch), how far it moved and why (its own growth, or moved by the functions
before it whose footprint changed), then the functions whose neighbours in the section changed.
Text and mail print :func:`lines`; Markdown :func:`markdown`; the dashboard and JSON read :func:`rows`.
"""
from __future__ import annotations

from analyzer.link_layout import HotPlacement, Move


def changed(moves: list[Move] | None) -> list[Move]:
    """The hot functions whose address, size, lines or phase changed, or that came or went."""
    return [m for m in moves or [] if m.base is None or m.head is None or m.shift or m.size_delta
            or m.lines_delta or m.phase_changed]


def _pair(old, new) -> str:
    """``old->new``, one figure when equal or when the function is in one build only (the reason says which)."""
    if old is None or new is None or old == new:
        return f"{new if old is None else old}"
    return f"{old}->{new}"


def _near(p: HotPlacement | None) -> str:
    if p is None:
        return "(absent)"
    return f"{p.prev.name if p.prev else '(start)'} | {p.name} | {p.next.name if p.next else '(end)'}"


def rows(moves: list[Move] | None) -> list[dict]:
    """One dict per changed hot function (the dashboard's table and the renderings below)."""
    out = []
    for m in changed(moves):
        b, h = m.base, m.head
        at = h or b
        out.append({"function": m.name, "section": m.section, "address": f"{at.address:#x}",
                    "base_address": f"{b.address:#x}" if b else None,
                    "size": [b.size if b else None, h.size if h else None],
                    "lines": [b.lines if b else None, h.lines if h else None],
                    "phase": [b.phase if b else None, h.phase if h else None],
                    "pad_before": [b.pad_before if b else None, h.pad_before if h else None],
                    "shift": m.shift, "why": m.why, "unexplained": m.unexplained,
                    "causes": [c.to_dict() for c in m.causes], "more_causes": m.more_causes,
                    "neighbours": [_near(b), _near(h)], "neighbours_changed": m.neighbours_changed})
    return out


def lines(moves: list[Move] | None, indent: str = "  ", sides: str = "parent -> this patch") -> list[str]:
    """The table as text lines, 78 columns for names up to 24 characters ([] when the target has no link
    layout or no parent to compare with). The reason of each row is on the line below it."""
    if moves is None:
        return []
    got = rows(moves)
    same = len(moves) - len(got)
    out = [f"link addresses of hot functions ({sides}):"]
    if got:
        w = max(24, *(len(r["function"]) for r in got)) if len(got) > 1 else max(24, len(got[0]["function"]))
        out.append(f"{indent}{'function':<{w}} {'address':<16} {'size':>10} {'lines':>8} {'phase':>8} {'shift':>5}")
        for r in got:
            out.append(f"{indent}{r['function']:<{w}} {r['address'][2:]:<16} {_pair(*r['size']):>10} "
                       f"{_pair(*r['lines']):>8} {_pair(*r['phase']):>8} {r['shift']:>+5d}".rstrip())
            if r["why"]:
                out.append(f"{indent}    {r['why']}")
    if same:
        out.append(f"{indent}({same} hot function{'s' if same != 1 else ''} at the same address, size and phase)")
    moved = [r for r in got if r["neighbours_changed"] and "(absent)" not in r["neighbours"]]
    if moved:
        out.append(f"{indent}neighbours (previous | function | next), {sides}:")
        for r in moved:
            out.append(f"{indent}    {r['neighbours'][0]}")
            out.append(f"{indent} -> {r['neighbours'][1]}")
    return out


def markdown(moves: list[Move] | None, sides: str = "parent -> this patch") -> list[str]:
    if moves is None:
        return []
    got = rows(moves)
    out = ["", f"Link addresses of hot functions ({sides}):", ""]
    if got:
        out += ["| function | address | size | lines | phase | shift | why |", "|---|---|---|---|---|---|---|"]
        out += [f"| `{r['function']}` | `{r['address']}` | {_pair(*r['size'])} | {_pair(*r['lines'])} | "
                f"{_pair(*r['phase'])} | {r['shift']:+d} | {r['why']} |" for r in got]
    same = len(moves) - len(got)
    if same:
        out.append(f"\n{same} hot function(s) at the same address, size and phase.")
    out.append("")
    return out
