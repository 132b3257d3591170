"""Link addresses (issue 13): time and peak RSS of a vmlinux pair's analysis beside ``nm -n`` on the same files.

Each measured command is its own process (wall time, peak RSS from ``wait4``), run ``--runs`` times
after one warm-up (the page cache holds the files for both sides alike); the best and the median
are printed. Measured, per pair of linked images:
- ``nm -n -S`` of both files (the anchor: what a developer types to see the addresses);
- ours, link layout only: both text maps, both hot-function layouts and the comparison with every
  move's causes (analyzer.link_layout);
- ours, what the pipeline reads from a vmlinux pair besides: nm's symbol list with addresses and
  size(1)'s sections of both files (ci.pipeline.objects.object_record, with the file's SHA-256),
  plus the link layout and comparison;
- from the store: the comparison the pipeline makes (ci.pipeline.link_layout.compare_builds: stored symbols of
  the hot functions' sections, both maps, moves and findings) on a store holding the pair.

Pairs: the tests' tinyconfig vmlinux at the example series' base and patch 1 (gcc-12; built once and
cached by tests/kernel_images.py) and, when it is in the cache, the Debian dbg vmlinux
(590 MB with DWARF) against itself. Issue 13's goal: a vmlinux pair's analysis ≤ 5 s in all.
Prints the load (``uptime``) before and after.

Usage: python bench/link_layout_bench.py [--runs N] [--no-debian]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

# each prints, last, the seconds of the work itself (imports excluded: the pipeline has them loaded)
LAYOUT = ("import sys, time; from analyzer.link_layout import file_layout, compare; t = time.perf_counter(); "
          "(la, ta), (lb, tb) = file_layout(sys.argv[1]), file_layout(sys.argv[2]); m = compare(ta, tb); "
          "print(f'{time.perf_counter() - t:.3f} s work;', len(la.functions), len(lb.functions), 'hot,', "
          "sum(1 for x in m if x.shift), 'moved', file=sys.stderr)")
PIPELINE = ("import sys, time; from analyzer.link_layout import file_layout, compare; "
            "from ci.pipeline.objects import object_record; t = time.perf_counter(); "
            "recs = [object_record(p, 'vmlinux') for p in sys.argv[1:3]]; "
            "(la, ta), (lb, tb) = file_layout(sys.argv[1]), file_layout(sys.argv[2]); m = compare(ta, tb); "
            "print(f'{time.perf_counter() - t:.3f} s work;', sum(len(r.symbols) for r in recs), 'symbols', "
            "file=sys.stderr)")
FROM_STORE = ("import sys, time; from db.store import open_store; from ci.pipeline.link_layout import compare_builds; "
              "s = open_store(sys.argv[1], read_only=True); t = time.perf_counter(); "
              "m, f = compare_builds(s, int(sys.argv[2]), int(sys.argv[3])); "
              "print(f'{time.perf_counter() - t:.3f} s work;', len(m), 'moves,', len(f), 'findings', file=sys.stderr)")


def measure(cmd: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, last stderr line) of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, st, ru = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t
    err = proc.stderr.read().decode(errors="replace").strip().splitlines()
    if os.waitstatus_to_exitcode(st) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}: {err[-1] if err else ''}")
    return took, ru.ru_maxrss / 1024, err[-1] if err else ""


def row(label: str, cmd: list[str], runs: int) -> tuple[float, float | None]:
    """(median wall seconds, median work seconds as the command printed them; None for nm)."""
    measure(cmd)                                    # warm-up: the files in the page cache for every side
    got = [measure(cmd) for _ in range(runs)]
    secs = [g[0] for g in got]
    work = [float(g[2].split(" s work")[0]) for g in got if " s work" in g[2]]
    print(f"{label:54s} wall best {min(secs):6.3f} median {statistics.median(secs):6.3f} s "
          f"{max(g[1] for g in got):5.0f} MB  {got[-1][2][:70]}", flush=True)
    return statistics.median(secs), statistics.median(work) if work else None


def nm_cmd(a: Path, b: Path) -> list[str]:
    return ["sh", "-c", f"nm -n -S '{a}' >/dev/null && nm -n -S '{b}' >/dev/null"]


def stored_pair(a: Path, b: Path, tmp: Path) -> tuple[Path, int, int]:
    """A store holding the pair as the pipeline writes it (symbols and link layouts), for the store-side row."""
    from ci.pipeline import analysis, link_layout
    from ci.pipeline.objects import object_record
    from db.models import BuildRecord, Commit, ConfigInfo
    from db.store import open_store
    path = tmp / "bench.db"
    ids = []
    with open_store(path) as store:
        for i, (sha, img) in enumerate((("a" * 40, a), ("b" * 40, b))):
            obj = object_record(img, "vmlinux")
            obj.link_layout = link_layout.layout(img, "vmlinux")
            ids.append(store.record_build(BuildRecord(
                "bench", Commit(sha, "a" * 40 if i else None), "tc", "tc 1", ConfigInfo("bench"), "vmlinux", "ok",
                objects=[obj], analysis_version=analysis.ANALYSIS_VERSION)))
    return path, ids[0], ids[1]


def pair(label: str, a: Path, b: Path, runs: int) -> None:
    print(f"\n{label}: {a.stat().st_size / 1e6:.0f} MB + {b.stat().st_size / 1e6:.0f} MB")
    nm, _ = row("nm -n -S, both files", nm_cmd(a, b), runs)
    ours, ours_work = row("ours: link layout + comparison (both files)",
                          [sys.executable, "-c", LAYOUT, str(a), str(b)], runs)
    full, full_work = row("ours: + symbols, sections, SHA-256 (object_record x2)",
                          [sys.executable, "-c", PIPELINE, str(a), str(b)], runs)
    with tempfile.TemporaryDirectory() as tmp:
        db, ia, ib = stored_pair(a, b, Path(tmp))
        store, store_work = row("ours: comparison from the store (compare_builds)",
                                [sys.executable, "-c", FROM_STORE, str(db), str(ia), str(ib)], runs)
    print(f"  wall, ours / nm -n -S: {ours / nm:.2f}x (link layout alone: {ours_work:.2f} s of work); "
          f"a pair as the pipeline reads it: {full_work:.2f} s of work from the files + {store_work:.2f} s from "
          f"the store (goal: a vmlinux pair's analysis <= 5 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-debian", action="store_true", help="the tinyconfig pair only")
    args = ap.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print("(each row: its own process per run, interpreter start-up included; python -c pass takes "
          f"{measure([sys.executable, '-c', 'pass'])[0]:.3f} s)")
    from kernel_images import tiny_vmlinux
    base, head = tiny_vmlinux().vmlinux
    pair("tinyconfig vmlinux, example series base -> patch 1 (gcc-12)", base, head, args.runs)
    if not args.no_debian:
        from bench.dbg_vmlinux import cached
        deb = cached()
        if deb is not None:
            pair(f"Debian {deb.package} {deb.version} vmlinux against itself", deb.path, deb.path, args.runs)
        else:
            print("\nno Debian dbg vmlinux in the cache (bench/dbg_vmlinux.py fetches one): skipped")
    print("\nload:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
