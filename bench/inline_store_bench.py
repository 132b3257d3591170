"""What storing inline cost (migration 0014) adds to a build, beside what the pipeline already stores.

Per file, each side its own process (wall time, peak RSS from ``wait4``), into a fresh store:
- anchor: the build row as before issue 14 (``object_record``: nm's symbols and sections), written
  with ``Store.record_build``;
- ours: the same plus ``ci.pipeline.inline_costs.object_inline_cost`` (the attribution) and its rows;
then the report's side: reading both stored inline costs back and comparing them
(``ci.reports.model.inline_report``), and the store's size and row counts.

Files: the example series' mm/page_alloc.o (gcc-12, patch 2; from the cache), the tinyconfig
vmlinux of the cache if present, and the pinned Debian dbg vmlinux if present (``--no-debian``
skips it: ~20 s and ~1 GB). Prints the load (``uptime``).

Usage: python bench/inline_store_bench.py [--no-debian]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CACHE = Path(os.environ.get("SIZEWATCH_CACHE", Path.home() / ".cache" / "sizewatch"))

WRITE = """
import sys, time
from ci.pipeline.objects import object_record
from ci.pipeline.inline_costs import object_inline_cost
from db.models import BuildRecord, Commit, ConfigInfo
from db.store import open_store
path, target, db, sha, with_inline = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
rec = object_record(path, target)
for sym in rec.symbols:     # a vmlinux's st_value (0xffffffff8...) does not fit sqlite's INTEGER: the
    sym.offset &= (1 << 63) - 1   # store of main refuses it (the vmlinux work's); the bench writes it masked
if with_inline:
    rec.inline_cost = object_inline_cost(path, target)
with open_store(db) as s:
    s.record_build(BuildRecord("t", Commit(sha, "0" * 40 if sha != "0" * 40 else None, "s"), "tc", "tc 1",
                               ConfigInfo("k"), target, "ok", objects=[rec], analysis_version=5))
"""

READ = """
import sys, time
from ci.reports.model import inline_report
from db.store import open_store
with open_store(sys.argv[1], read_only=True) as s:
    t = time.perf_counter()
    r = inline_report(s, 1, 2)
    print(f"{time.perf_counter() - t:.2f} s, {len(r.diff.callees)} callees differ", file=sys.stderr)
"""


def measure(cmd: list[str]) -> tuple[float, float, str]:
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, ru = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace").strip()
    proc.stderr.close()
    if status != 0:
        raise SystemExit(f"{' '.join(cmd[:3])}... failed: {err[-500:]}")
    return time.perf_counter() - t, ru.ru_maxrss / 1024, err.splitlines()[-1] if err else ""


def rows(db: Path) -> str:
    import sqlite3
    conn = sqlite3.connect(db)
    try:
        n = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
             for t in ("inline_callees", "inline_callee_callers", "inline_callers", "inline_files")}
    finally:
        conn.close()
    return ", ".join(f"{k} {v}" for k, v in n.items())


def bench(label: str, path: Path, target: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sizes = {}
        for side, flag in (("anchor (symbols only)", "0"), ("with inline cost", "1")):
            db = Path(tmp) / f"{flag}.db"
            secs, rss, _ = measure([sys.executable, "-c", WRITE, str(path), target, str(db), "0" * 40, flag])
            sizes[flag] = db.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob(f"{flag}.db-*"))
            print(f"  {side:22} build row written: {secs:6.2f} s, {rss:7.0f} MB peak RSS, store "
                  f"{sizes[flag] / 1e6:6.1f} MB")
        db = Path(tmp) / "1.db"
        measure([sys.executable, "-c", WRITE, str(path), target, str(db), "1" * 40, "1"])   # a second build
        secs, rss, line = measure([sys.executable, "-c", READ, str(db)])
        print(f"  report's side: two builds' inline cost read and compared: {line} "
              f"({secs:.2f} s with start-up, {rss:.0f} MB)")
        print(f"  rows per build: {rows(Path(tmp) / '1.db').replace(', ', ' / ')} (two builds)")
        print(f"  inline cost adds {(sizes['1'] - sizes['0']) / 1e6:.1f} MB to the store per build")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-debian", action="store_true")
    args = ap.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    files = []
    objs = sorted((CACHE / "objects" / "gcc-12").glob("defconfig-*/*/mm/page_alloc.o"))
    if objs:
        files.append(("page_alloc.o (gcc-12, defconfig)", objs[0], "mm/page_alloc.o"))
    tiny = sorted((CACHE / "objects" / "gcc-12").glob("tinyconfig-*/*/vmlinux"))
    if tiny:
        files.append(("tinyconfig vmlinux (gcc-12)", tiny[0], "vmlinux"))
    deb = sorted((CACHE / "dbg").glob("*/vmlinux"))
    if deb and not args.no_debian:
        files.append((f"Debian {deb[0].parent.name} vmlinux", deb[0], "vmlinux"))
    for label, path, target in files:
        print(f"{label}: {path} ({path.stat().st_size / 1e6:.0f} MB)")
        bench(label, path, target)


if __name__ == "__main__":
    main()
