"""Measurements under emulation (analyzer.runtime) built from data, for the store, report, bot and web
tests: figures of the shape ``toolchains.runtime`` measures on the allocator vmlinux (per alloc/free
pair, 10000 pairs per order), order 0 served from the per-cpu lists, order 4 from the buddy lists."""
from __future__ import annotations

from analyzer.runtime import Runtime

# executed instructions per pair of the measured unit's functions (mm/page_alloc.c)
ORDER0 = {"get_page_from_freelist": 137, "free_unref_page": 83, "__alloc_pages": 73, "free_pcp_prepare": 37,
          "free_unref_page_commit": 30, "__free_pages": 13, "should_fail_alloc_page": 2}          # 375
ORDER4 = {"__free_one_page": 402, "__rmqueue_smallest": 311, "get_page_from_freelist": 298,
          "__free_pages_ok": 145, "prep_new_page": 96, "__alloc_pages": 73, "free_one_page": 62,
          "__free_pages": 13}                                                                     # 1400
OUTSIDE = {4: {"_raw_spin_lock_irqsave": 18.0}}          # not the unit's: listed, not counted in per_pair
ADDRESS = 0xFFFFFFFF81234000


def _fn(name: str, ins: float, unit: bool, pairs: int, calls: float = 1.0) -> dict:
    return {"address": ADDRESS + 0x400 * sorted({*ORDER0, *ORDER4, "_raw_spin_lock_irqsave", name}).index(name),
            "unit": unit, "instructions": ins, "calls": calls, "lines": max(1, round(ins * 3.6 / 64)),
            "total": round(ins * pairs)}


def order_dict(k: int, fns: dict[str, float], pairs: int = 10000, calls: dict[str, float] | None = None,
               disagree: tuple[str, ...] = ()) -> dict:
    functions = {n: _fn(n, i, True, pairs, (calls or {}).get(n, 1.0)) for n, i in fns.items() if i}
    functions.update({n: _fn(n, i, False, pairs) for n, i in OUTSIDE.get(k, {}).items()})
    unit = [f for f in functions.values() if f["unit"]]
    per = round(sum(f["instructions"] for f in unit), 2)
    paths = []
    for n in ("get_page_from_freelist", "__alloc_pages"):
        if n in functions:
            ex = round(functions[n]["instructions"])
            paths.append({"function": n, "calls": 1.0, "executed": ex, "likely": ex - 3 if n in disagree else ex,
                          "off_likely": [ADDRESS + 0x31, ADDRESS + 0x35, ADDRESS + 0x3a] if n in disagree else [],
                          "not_executed": []})
    return {"order": k, "pairs": pairs, "per_pair": {"instructions": per, "lines": sum(f["lines"] for f in unit)},
            "unit_total": round(per * pairs), "window_total": round(per * pairs) + 1234,
            "functions": functions, "paths": paths}


def runtime(change: dict[int, dict[str, float]] | None = None, orders: tuple[int, ...] = (0, 4),
            pairs: int = 10000, calls: dict[int, dict[str, float]] | None = None,
            disagree: dict[int, tuple[str, ...]] | None = None) -> Runtime:
    """A measurement: the base figures, with ``change[order][function]`` added per pair."""
    out = {}
    for k in orders:
        fns = dict(ORDER0 if k < 4 else ORDER4)
        for n, d in (change or {}).get(k, {}).items():
            fns[n] = round(fns.get(n, 0) + d, 2)
        out[str(k)] = order_dict(k, fns, pairs, (calls or {}).get(k), (disagree or {}).get(k, ()))
    return Runtime.from_dict({"status": "ok", "unit": "mm/page_alloc.c", "pairs": pairs, "orders": out,
                              "emulator": "qemu-system-x86_64 7.2.22 (TCG, 1 vCPU)", "seconds": 41.5})


def failed(line: str = "guest did not reach the benchmark: last console line 'Kernel panic - not syncing: "
                       "VFS: Unable to mount root fs'") -> Runtime:
    return Runtime("failed", line, console="[    1.234] Kernel panic - not syncing: VFS: Unable to mount root fs\n")
