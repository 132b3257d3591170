"""Time the likely-path cost analysis (issue 15) beside ``objdump -dr`` of the same object.

mm/page_alloc.o of the example series (gcc-12 and clang-19, patch 2; built and cached by
toolchains.example): every hot function's likely path in-process (target: <= 0.2 s on top of
``inspect``), the one llvm-mca process for all of them, and ``objdump -dr`` of the whole file.

Usage: python bench/cost_bench.py [--runs N]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from analyzer_bench import timed  # noqa: E402  one median-of-runs timer for the benches


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from analyzer.likely_path import hot_likely_paths
    from toolchains.example import build_series
    from toolchains.mca import estimate
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cpus")
    for tc in ("gcc-12", "clang-19"):
        obj = str(build_series(tc)[-1].object_path)
        hot_likely_paths(obj)                   # capstone import and page cache warm
        t_ours, paths = timed(lambda: hot_likely_paths(obj), args.runs)
        t_mca, _ = timed(lambda: estimate(paths), args.runs)
        t_objdump, _ = timed(lambda: subprocess.run(["objdump", "-dr", obj], capture_output=True, check=True),
                             args.runs)
        n = sum(p.insns for p in paths)
        print(f"{tc:9} {len(paths)} hot functions, {n} path instructions: likely paths {t_ours * 1000:.0f} ms, "
              f"llvm-mca (one process) {t_mca * 1000:.0f} ms, objdump -dr whole file {t_objdump * 1000:.0f} ms")


if __name__ == "__main__":
    main()
