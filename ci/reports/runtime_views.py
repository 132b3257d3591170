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


def _path_line(order: int, p: PathCheck, sep: str = " ") -> str:
    return (f"order {order}, {p.function}: executed path differs from the likely path:{sep}"
            f"{len(p.off_likely)} instructions run on every call but off it, {len(p.not_executed)} on it not run "
            f"on every call")


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
            if len(d.functions) > functions:
                out.append(f"        ... {len(d.functions) - functions} more functions changed ({more})")
    out += [ln for k, p in r.disagreements for ln in ("  " + _path_line(k, p, "\n    ")).split("\n")]
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
    out += [f"- {_path_line(k, p)}" for k, p in r.disagreements]
    if r.disagreements:
        out.append("")
    return out
