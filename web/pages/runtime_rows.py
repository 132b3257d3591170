"""The fast path measured under emulation (issue 26) as page data: a commit's page_bench table per
measured vmlinux build (``ci.reports.runtime.RuntimeReport``), and a function's instructions and calls
per pair along history (``Store.runtime_history``). Executed instructions under QEMU TCG, not cycles:
every page that shows them says so (``NOTE``). A value the store could not read is its marker."""
from __future__ import annotations

import math

from analyzer.runtime_views import _size
from ci.reports.runtime import RuntimeReport
from ci.reports.runtime_views import CAVEAT
from db.models import RuntimePoint
from db.sqlite import unreadable

NOTE = CAVEAT


def _fn_row(f) -> dict:
    return {"name": f.name, "unit": f.unit, "instructions": list(f.instructions), "delta": f.delta,
            "calls": list(f.calls), "lines": list(f.lines)}


def commit_runtime(r: RuntimeReport | None) -> dict | None:
    """None: not measured. Else the head's status and line, and per order the row parent -> this
    commit (only this commit's figures when the parent was not measured or its measurement failed)."""
    if r is None:
        return None
    h = r.head
    out = {"status": h.status, "message": h.message, "unit": h.unit, "emulator": h.emulator, "pairs": h.pairs,
           "note": NOTE, "compared": bool(r.diff and r.diff.orders),
           "base_status": r.base.status if r.base else None, "base_message": r.base.message if r.base else "",
           "orders": [], "paths_disagree": [{"order": k, "function": p.function, "off_likely": len(p.off_likely),
                                             "not_executed": len(p.not_executed)} for k, p in r.disagreements]}
    if h.status != "ok":
        return out
    if out["compared"]:
        out["orders"] = [{"order": d.order, "size": _size(d.order), "instructions": list(d.instructions),
                          "delta": d.delta, "percent": d.percent, "lines": list(d.lines), "lines_delta": d.lines_delta,
                          "functions": [_fn_row(f) for f in d.functions]} for d in r.diff.orders]
    else:
        out["orders"] = [{"order": o.order, "size": _size(o.order), "instructions": [None, o.instructions],
                          "delta": None, "percent": None, "lines": [None, o.lines], "lines_delta": None,
                          "functions": []} for o in h.orders]
    return out


def _figure(v, what: str, kind: type):
    """A stored number as read, or the unreadable marker (noted) when the row holds something else."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return unreadable(what)
    return kind(v)


def function_runtime(points: list[RuntimePoint], limit: int) -> dict | None:
    """Per (toolchain, target) line the measured builds, newest first (at most ``limit`` each), with per
    order the function's instructions, calls and lines per pair and the change from the line's previous
    point; None when no measurement has the function."""
    if not points:
        return None
    lines: dict[tuple[str, str], list[dict]] = {}
    orders: set[int] = set()
    for p in points:                    # history order
        rows = lines.setdefault((p.toolchain, p.target), [])
        prev = rows[-1]["orders"] if rows else {}
        cur = {}
        for k, (ins, calls, ln) in sorted(p.orders.items()):
            what = f"runtime of {p.commit_sha[:12]} ({p.toolchain}), order {k}"
            ins, calls, ln = (_figure(ins, what, float), _figure(calls, what, float), _figure(ln, what, int))
            old = prev.get(str(k), {}).get("instructions")
            delta = (round(ins - old, 2) if isinstance(ins, float) and isinstance(old, float) else None)
            cur[str(k)] = {"instructions": ins, "calls": calls, "lines": ln, "delta": delta}
            orders.add(k)
        rows.append({"commit": p.commit_sha, "subject": p.subject, "date": p.date, "version": p.toolchain_version,
                     "build_id": p.build_id, "orders": cur, "url": f"/commit/{p.commit_sha}#tc-{p.toolchain}"})
    return {"note": NOTE, "orders": [str(k) for k in sorted(orders)],
            "lines": [{"toolchain": tc, "target": tg, "points": len(rows),
                       "rows": rows[::-1][:limit] if limit else []} for (tc, tg), rows in sorted(lines.items())]}
