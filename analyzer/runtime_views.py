"""One measurement (``analyzer.runtime.Runtime``) as the text ``sizewatch measure`` prints: the
seed's page_bench table, in executed instructions per alloc/free pair."""
from __future__ import annotations

from analyzer.runtime import OrderRun, Runtime

PAGE = 4096


def _size(order: int) -> str:
    b = PAGE << order
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"


def _num(x: float) -> str:
    return f"{x:.0f}" if x == int(x) else f"{x:.2f}"


def _top(o: OrderRun, n: int) -> str:
    fs = [f for f in o.functions.values() if f.unit][:n]
    return ", ".join(f"{f.name} {_num(f.instructions)}" for f in fs)


def runtime_text(r: Runtime, functions: bool = False, top: int = 4) -> str:
    """The table per order; with ``functions`` every listed function per order, and where a hot
    function's executed path left its static likely path."""
    if r.status != "ok":
        out = [f"measurement failed: {r.message}"]
        if r.console:
            out += ["", "last console lines:", *("  " + ln for ln in r.console.splitlines()[-10:])]
        return "\n".join(out) + "\n"
    out = [f"Executed instructions per alloc_pages(GFP_KERNEL, order) + __free_pages pair, inside {r.unit}",
           f"({r.emulator}; {r.pairs} pairs per order; counted under emulation: instructions, not cycles)",
           "",
           f"{'order':>5} {'size':>5} {'insns/pair':>11} {'lines':>6}  biggest functions (insns/pair)"]
    for o in r.orders:
        out.append(f"{o.order:>5} {_size(o.order):>5} {_num(o.instructions):>11} {o.lines:>6}  {_top(o, top)}")
    out.append("")
    out.append("lines: distinct 64-byte instruction lines of the unit executed on every pair (I-cache footprint)")
    if functions:
        for o in r.orders:
            out += ["", f"order {o.order} ({_size(o.order)}): {_num(o.instructions)} instructions per pair",
                    f"  {'function':<36} {'insns/pair':>10} {'calls':>6} {'lines':>5}  unit"]
            for f in o.functions.values():
                out.append(f"  {f.name[:36]:<36} {_num(f.instructions):>10} {_num(f.calls):>6} {f.lines:>5}  "
                           f"{'yes' if f.unit else '-'}")
            for p in o.paths:
                if not p.agree:
                    out.append(f"  {p.function}: executed path differs from the static likely path: "
                               f"{len(p.off_likely)} instruction(s) run on every call are off it, "
                               f"{len(p.not_executed)} on it are not run on every call")
    return "\n".join(out) + "\n"
