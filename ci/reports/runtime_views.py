"""A ``RuntimeReport`` as text (terminal and mail, at most 78 columns) and Markdown: the seed's
page_bench table per order, in executed instructions per alloc/free pair under emulation, parent ->
this commit, with the functions that changed under each order."""
from __future__ import annotations

from analyzer.runtime import PathCheck
from analyzer.runtime_views import _size
from ci.reports.runtime import RuntimeReport

FUNCTIONS = 6                           # changed functions shown per order (JSON: all)
CAVEAT = "counted under emulation (QEMU TCG): executed instructions, not cycles"


def num(x: float) -> str:
    return f"{x:.0f}" if x == int(x) else f"{x:.2f}"


def signed(x: float) -> str:
    return "0" if x == 0 else ("+" if x > 0 else "") + num(x)


PATHS_HEAD = "executed vs likely path per call (instructions run off it/on it not run):"


def _grouped(disagreements: list[tuple[int, PathCheck]]) -> list[str]:
    """One entry per function and difference, with the orders it was seen at (the same numbers
    at every order are said once)."""
    seen: dict[tuple[str, int, int], list[int]] = {}
    for k, p in disagreements:
        seen.setdefault((p.function, len(p.off_likely), len(p.not_executed)), []).append(k)
    return [f"{name} {off}/{miss} (order{'s' if len(ks) > 1 else ''} {','.join(map(str, ks))})"
            for (name, off, miss), ks in seen.items()]


def _wrap(items: list[str], width: int = 74, indent: str = "    ") -> list[str]:
    out, cur = [], indent
    for it in items:
        piece = it + "; "
        if len(cur) + len(piece) > width and cur.strip():
            out.append(cur.rstrip("; ").rstrip())
            cur = indent
        cur += piece
    if cur.strip():
        out.append(cur.rstrip().rstrip(";"))
    return out


def _head(r: RuntimeReport) -> list[str]:
    h = r.head
    return [f"fast path: executed instructions per alloc/free pair in {h.unit}",
            f"  alloc_pages(GFP_KERNEL, order) + __free_pages, {h.pairs} pairs per order,",
            f"  {h.emulator or 'QEMU TCG'}",
            f"  {CAVEAT}"]


def lines(r: RuntimeReport, functions: int = FUNCTIONS, more: str = "sizewatch report --json") -> list[str]:
    """The table, or the one line of a failed measurement."""
    h = r.head
    if h.status != "ok":
        return [f"fast path: measurement failed: {h.message}"]
    out = _head(r)
    if r.base is not None and r.base.status != "ok":
        out.append(f"  parent's measurement failed: {r.base.message}")
    if r.diff is None or not r.diff.orders:
        out.append(f"  {'order':>5} {'size':>5} {'insns':>8} {'lines':>6}  (this commit{'' if r.base else '; parent not measured'})")
        for o in h.orders:
            out.append(f"  {o.order:>5} {_size(o.order):>5} {num(o.instructions):>8} {o.lines:>6}")
    else:
        out.append(f"  {'order':>5} {'size':>5} {'insns old':>10} {'new':>8} {'delta':>7} {'%':>7} "
                   f"{'lines old':>10} {'new':>5}")
        for d in r.diff.orders:
            out.append(f"  {d.order:>5} {_size(d.order):>5} {num(d.instructions[0]):>10} {num(d.instructions[1]):>8} "
                       f"{signed(d.delta):>7} {signed(d.percent) + '%':>7} {d.lines[0]:>10} {d.lines[1]:>5}")
            for f in d.functions[:functions]:
                calls = (f"calls {num(f.calls[1])}" if f.calls[0] == f.calls[1]
                         else f"calls {num(f.calls[0])} -> {num(f.calls[1])}")
                out.append(f"        {f.name[:30]:<30} {num(f.instructions[0]):>7} -> {num(f.instructions[1]):<7} "
                           f"{signed(f.delta):>6}  {calls}")
                if f.lines[0] != f.lines[1]:
                    out.append(f"          its 64-byte lines run on every pair: {f.lines[0]} -> {f.lines[1]}")
            if len(d.functions) > functions:
                out.append(f"        ... {len(d.functions) - functions} more functions changed ({more})")
    if r.disagreements:
        out += ["  " + PATHS_HEAD, *_wrap(_grouped(r.disagreements))]
    return out


def markdown(r: RuntimeReport) -> list[str]:
    h = r.head
    if h.status != "ok":
        return [f"Fast path: **measurement failed**: {h.message}", ""]
    out = [f"Fast path, executed instructions per `alloc_pages` + `__free_pages` pair in {h.unit} "
           f"({h.emulator or 'QEMU TCG'}, {h.pairs} pairs per order; {CAVEAT}):", ""]
    if r.base is not None and r.base.status != "ok":
        out += [f"Parent's measurement failed: {r.base.message}", ""]
    if r.diff is None or not r.diff.orders:
        out += ["| order | size | instructions | lines |", "|---:|---:|---:|---:|"]
        out += [f"| {o.order} | {_size(o.order)} | {num(o.instructions)} | {o.lines} |" for o in h.orders]
    else:
        out += ["| order | size | instructions | delta | % | lines | functions that changed (calls per pair) |",
                "|---:|---:|---:|---:|---:|---:|---|"]
        for d in r.diff.orders:
            fns = ", ".join(f"`{f.name}` {signed(f.delta)} ({num(f.calls[1])})" for f in d.functions[:FUNCTIONS])
            if len(d.functions) > FUNCTIONS:
                fns += f", … {len(d.functions) - FUNCTIONS} more"
            out.append(f"| {d.order} | {_size(d.order)} | {num(d.instructions[0])} → {num(d.instructions[1])} | "
                       f"{signed(d.delta)} | {signed(d.percent)}% | {d.lines[0]} → {d.lines[1]} | {fns} |")
    out.append("")
    if r.disagreements:
        out += [PATHS_HEAD[0].upper() + PATHS_HEAD[1:], "", *(f"- `{g.split(' ', 1)[0]}` {g.split(' ', 1)[1]}"
                                                             for g in _grouped(r.disagreements)), ""]
    return out
