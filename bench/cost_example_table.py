"""The README's likely-path table: ``sizewatch inspect --cost --json`` on mm/page_alloc.o of the example
series (stock, patch 1, patch 2) under each compiler, as Markdown. Objects come from the cache
(``toolchains.example.build_series`` builds what is missing: one kernel build at a time).

Each cell: likely-path instructions / calls / 64-byte lines / llvm-mca estimated cycles (skylake-avx512).

Usage: python bench/cost_example_table.py [--toolchains gcc-11,gcc-12,clang-14,clang-16,clang-19]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FUNCTIONS = ("get_page_from_freelist", "rmqueue_bulk", "__rmqueue_pcplist", "__rmqueue_smallest", "__alloc_pages")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--toolchains", default="gcc-11,gcc-12,clang-14,clang-16,clang-19")
    args = ap.parse_args()
    from toolchains.example import build_series
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent)) or "sizewatch"
    print(f"<!-- load {os.getloadavg()[0]:.1f}; {exe} inspect --cost OBJ --json -->")
    print("| function | compiler | stock | patch 1 (`static inline`) | patch 2 (`__always_inline`) | `__rmqueue*` calls on the path |")
    print("|---|---|---|---|---|---|")
    for fn in FUNCTIONS:
        for tc in args.toolchains.split(","):
            cells, rq = [], []
            for label, built in zip(("stock", "patch 1", "patch 2"), build_series(tc)):
                out = subprocess.run([exe, "inspect", "--cost", str(built.object_path), "--json"],
                                     capture_output=True, text=True, check=True).stdout
                f = next((x for x in json.loads(out)["functions"] if x["function"] == fn), None)
                if f is None:
                    cells.append("not out of line")
                    continue
                est = f["estimate"]["estimated_cycles"] if f["estimate"] else "-"
                cells.append(f"{f['insns']} / {len(f['calls'])} / {f['lines']} / {est}")
                called = sorted({c["target"] for c in f["calls"] if "rmqueue" in c["target"]})
                if called:
                    rq.append(f"{label}: {', '.join(called)}")
            if all(c == "not out of line" for c in cells):
                continue
            print(f"| {fn} | {tc} | " + " | ".join(cells) + f" | {'; '.join(rq) or 'none'} |")


if __name__ == "__main__":
    main()
