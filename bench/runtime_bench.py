"""The runtime measurement (issue 26): time of one measurement beside the same QEMU boot without
the counting plugin, in one run.

Per round, on the tests' allocator vmlinux (gcc-12, the example series' base; built once and
cached by tests/kernel_images.py):
- ``measure``: the whole ``sizewatch measure`` work, orders 0-8 at the default pairs (copying the
  vmlinux, its symbols and the unit's DWARF, the likely paths, the module build, the boot, the
  counts placed in functions);
- ``boot+plugin``: the same guest (same initramfs and module) booted with the plugin counting;
- ``boot``: the anchor, the same QEMU command without the plugin.
Every figure is wall time and the CPU time of the children (QEMU, make, gcc), min / median / max.
Issue 26's goals: a measurement ≤ 15 s at load ≤ 2, and the plugin's boot ≤ 1.3x the plain boot.
Prints the load (``uptime``) before and after.

Usage: python bench/runtime_bench.py [--runs N] [--pairs N]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(fn) -> tuple[float, float]:
    c0, t0 = _children_cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, _children_cpu() - c0


def show(name: str, xs: list[tuple[float, float]]) -> None:
    w = [x[0] for x in xs]
    c = [x[1] for x in xs]
    print(f"  {name:<12} wall {min(w):6.2f} / {statistics.median(w):6.2f} / {max(w):6.2f} s   "
          f"child CPU {min(c):6.2f} / {statistics.median(c):6.2f} / {max(c):6.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=10000)
    args = ap.parse_args()
    from kernel_images import CONFIG, allocator_vmlinux
    from toolchains.build import BuildOptions, layout
    from toolchains.registry import load
    from toolchains.runtime import guest, qemu
    from toolchains.runtime.measure import DEFAULT_ORDERS, measure_vmlinux
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    images = allocator_vmlinux("gcc-12", 1)
    vmlinux = images.vmlinux[0]
    bd = layout(images.tree, "gcc-12", CONFIG, BuildOptions()).build_dir
    params = f"orders={','.join(map(str, DEFAULT_ORDERS))} pairs={args.pairs}"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ko = guest.build_module(bd, load("gcc-12"), work)
        initrd = guest.initramfs(work / "i.cpio", ko, params)
        results: dict[str, list[tuple[float, float]]] = {"measure": [], "boot+plugin": [], "boot": []}
        last = None
        for _ in range(args.runs):
            def m():
                nonlocal last
                last = measure_vmlinux(bd, vmlinux, "gcc-12", DEFAULT_ORDERS, args.pairs)
            results["measure"].append(timed(m))
            for name, count in (("boot+plugin", True), ("boot", False)):
                def b(count=count):
                    run = qemu.boot(vmlinux, initrd, work, 300, count=count)
                    assert run.ended == "done", run.console[-500:]
                results[name].append(timed(b))
    print(f"allocator vmlinux (gcc-12, base), orders 0-8, {args.pairs} pairs per order, {args.runs} runs, "
          f"min / median / max:")
    for name, xs in results.items():
        show(name, xs)
    ratio = statistics.median(x[0] for x in results["boot+plugin"]) / statistics.median(x[0] for x in results["boot"])
    print(f"  plugin / plain boot (median wall): {ratio:.2f}x")
    if last is not None:
        print("  per pair:", ", ".join(f"order {o.order} {o.instructions:g}" for o in last.orders))
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
