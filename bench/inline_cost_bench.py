"""Inline cost (issue 14): time and peak RSS of the attribution beside ``llvm-dwarfdump-19 --debug-info``
and ``pfunct`` (dwarves, over libdw) on the same files, in one run.

Each measured command is its own process (wall time, CPU time (user + sys) and peak RSS from
``wait4``'s rusage; a peak RSS carries over exec, so a small tool shows this script's ~40 MB), on:
- mm/page_alloc.o of the example series (patch 2, gcc-12 and clang-19; built or from the cache);
- the Debian dbg vmlinux (bench/dbg_vmlinux.py: the newest cached) if it is already in ~/.cache/sizewatch,
  and the newest gcc-12 defconfig vmlinux the pipeline kept there (the issue's second file):
  one unit (``--cu mm/page_alloc.c``: what a patch touching one file costs when the unit is
  named) and the whole kernel, each command with a time limit (``--limit``, default 600 s):
  past it the run is stopped and reported as such, not estimated.
Ours runs with both DWARF engines: ``native`` (libdw, analyzer/dwarf/_libdw.c) and ``fast``
(the pure-Python walker, what a machine without libdw-dev gets).

Issue 14's target for the whole Debian vmlinux is ≤ 15 s and ≤ 1 GB. The machine is shared:
CPU time is printed beside wall time, and the load (``uptime``) before and after.

Usage: python bench/inline_cost_bench.py [--limit SECONDS] [--no-vmlinux] [--no-whole] [--no-pfunct]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OURS = ("import sys; from analyzer.inline_cost import inline_cost; "
        "r = inline_cost(sys.argv[2], sys.argv[3:] or None, engine=sys.argv[1]); "
        "print(len(r.callees), sum(c.instances for c in r.callees.values()), r.inlined_bytes, "
        "r.unattributed.outside_symbols, file=sys.stderr)")


def measure(cmd: list[str], limit: float, lines: int = 1) -> tuple[str, float, float, float, str]:
    """(status, seconds, CPU seconds, peak RSS in MB, the last ``lines`` stderr lines) of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    status = "ok"
    deadline = t + limit
    while True:
        pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, st, ru = os.wait4(proc.pid, 0)
            status = f"stopped after {limit:.0f} s"
            break
        time.sleep(0.05)
    took = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(st)
    err = proc.stderr.read().decode(errors="replace").strip().splitlines() if proc.stderr else []
    if status == "ok" and proc.returncode != 0:
        status = f"failed ({proc.returncode})"
    return status, took, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, "\n".join(err[-lines:])


def row(label: str, cmd: list[str], limit: float) -> None:
    status, took, cpu, rss, last = measure(cmd, limit)
    print(f"{label:58s} {took:8.2f} s {cpu:8.2f} s {rss:8.0f} MB  {status}  {last[:90]}", flush=True)


def ours(engine: str, *args: str) -> list[str]:
    return [sys.executable, "-c", OURS, engine, *args]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=600.0, help="seconds allowed per whole-vmlinux command")
    ap.add_argument("--no-vmlinux", action="store_true", help="only the example objects")
    ap.add_argument("--no-whole", action="store_true", help="the vmlinux's one unit only")
    ap.add_argument("--no-pfunct", action="store_true", help="skip pfunct on the whole vmlinux (minutes, GBs)")
    args = ap.parse_args()
    from analyzer.dwarf import native
    engines = ["native", "fast"] if native.available() else ["fast"]
    if not native.available():
        print("the libdw extension is not built (libdw-dev missing at install): the walker only")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"{'command':58s} {'wall':>10s} {'CPU':>10s} {'peak RSS':>11s}  status  "
          "(ours: callees instances bytes outside)")
    from toolchains.example import build_series
    for tc in ("gcc-12", "clang-19"):
        obj = build_series(tc)[2].object_path
        for engine in engines:
            row(f"inline_cost [{engine}] {tc} page_alloc.o", ours(engine, str(obj)), 120)
        row(f"llvm-dwarfdump-19 --debug-info {tc} page_alloc.o",
            ["llvm-dwarfdump-19", "--debug-info", str(obj)], 120)
        row(f"pfunct {tc} page_alloc.o", ["pfunct", str(obj)], 120)
    if args.no_vmlinux:
        return
    from bench.dbg_vmlinux import cached
    found = cached()
    if found is None:
        print("no Debian dbg vmlinux in the cache (bench/dbg_vmlinux.py fetches one): its rows skipped")
    else:
        vmlinux_rows(f"Debian {found.package} {found.version} vmlinux", found.path, args, engines)
    built = defconfig_vmlinux()
    if built is None:
        print("no defconfig vmlinux in the cache (bench/inline_units_bench.py --defconfig builds one): its rows skipped")
    else:
        vmlinux_rows("defconfig vmlinux", built, args, engines)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def defconfig_vmlinux() -> Path | None:
    """The newest gcc-12 defconfig vmlinux the pipeline kept in the cache (DWARF 5: the preset's)."""
    from toolchains.source import cache_dir
    found = sorted(cache_dir().glob("objects/gcc-12/defconfig-*/*/vmlinux"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def vmlinux_rows(label: str, path: Path, args: argparse.Namespace, engines: list[str]) -> None:
    mb = path.stat().st_size / 1e6
    print(f"{label}: {path} ({mb:.0f} MB)")
    for engine in engines:
        row(f"inline_cost [{engine}] {label} --cu mm/page_alloc.c",
            ours(engine, str(path), "mm/page_alloc.c"), args.limit)
    if args.no_whole:
        return
    row(f"llvm-dwarfdump-19 --debug-info {label} (whole)", ["llvm-dwarfdump-19", "--debug-info", str(path)],
        args.limit)
    if not args.no_pfunct:
        row(f"pfunct {label} (whole)", ["pfunct", str(path)], args.limit)
    for engine in engines:
        row(f"inline_cost [{engine}] {label} (whole)", ours(engine, str(path)), args.limit)


if __name__ == "__main__":
    main()
