"""The pipeline and the store, timed.

1. ``sizewatch run`` on the example series × 5 toolchains (gcc-11, gcc-12, clang-14,
   clang-16, clang-19), end to end: cold (empty store, no built objects; prepared
   build dirs reused unless --full-cold) and warm (same store again: no builds,
   the report regenerated from the store).
2. Report queries on a store of 1,000 commits × 8 toolchains (ci.benchstore.large_store:
   real pipeline results replicated): one commit's report (8 bloat-o-meter tables as
   stored with the comparisons, plus findings), a 10-patch series report, a
   function's history, the toolchain matrix, the index lists. Target: a report
   query <= 50 ms. Beside it, the reference: bloat-o-meter run on the object pairs
   the report covers (what a user does without the store).

    .venv/bin/python bench/pipeline_bench.py [--skip-pipeline] [--full-cold] [--runs N]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchstore import BENCH_TREE, large_store, seed_store  # noqa: E402
from ci.reports.model import commit_report, series_report  # noqa: E402
from db.store import open_store  # noqa: E402
from toolchains.kbuild import Config  # noqa: E402
from toolchains.source import cache_dir, ensure_source  # noqa: E402

MATRIX = ["gcc-11", "gcc-12", "clang-14", "clang-16", "clang-19"]
MBOX = ROOT / "toolchains" / "examples" / "rmqueue-always-inline.mbox"


def _sizewatch(args: list[str], env: dict) -> tuple[float, str, str]:
    t0 = time.perf_counter()
    proc = subprocess.run([str(ROOT / ".venv/bin/sizewatch"), *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"bench: sizewatch {' '.join(args[:2])} failed: {proc.stderr.strip()[-300:]}")
    return wall, proc.stdout, proc.stderr


def private_cache(full_cold: bool, targets: list[str]) -> Path:
    """A cache dir of its own with nothing built in it.

    Default: the shared source tree and per-toolchain worktrees linked, the prepared
    build dirs copied with the targets' objects deleted, so every target compiles
    (kbuild, after prepare). --full-cold: only the source tree is linked; prepare runs
    and worktrees are checked out (about 1.5 GB each) as on a fresh machine.
    """
    shared = cache_dir()
    src = ensure_source("6.1")
    tmp = Path(tempfile.mkdtemp(prefix="sizewatch-bench-", dir=shared))
    (tmp / src.path.name).symlink_to(src.path)
    if not full_cold:
        (tmp / "build").mkdir()
        (tmp / "worktrees").mkdir()
        for name in [f"{tc}-{Config().key}" for tc in MATRIX] + ["am-linux-6.1"]:
            wt = shared / "worktrees" / name
            if wt.exists():
                (tmp / "worktrees" / name).symlink_to(wt)
            d = shared / "build" / name
            if d.exists():
                subprocess.run(["cp", "-a", str(d), str(tmp / "build" / name)], check=True)
                for t in targets:
                    (tmp / "build" / name / t).unlink(missing_ok=True)
    return tmp


def bench_pipeline(full_cold: bool) -> list[str]:
    cache = private_cache(full_cold, ["mm/page_alloc.o"])
    db = cache / "bench.db"
    env = {**os.environ, "SIZEWATCH_CACHE": str(cache), "SIZEWATCH_DB": str(db)}
    args = ["run", "--series", str(MBOX), "--toolchains", ",".join(MATRIX), "--targets", "mm/page_alloc.o"]
    try:
        cold, out1, err1 = _sizewatch(args, env)
        warm, out2, err2 = _sizewatch(args, env)
        os.unlink(db)
        restore, out3, err3 = _sizewatch(args, env)       # objects cached, store empty: analysis + store cost
    finally:
        subprocess.run(["git", "-C", str(ensure_source("6.1").path), "worktree", "prune"], capture_output=True)
        shutil.rmtree(cache, ignore_errors=True)
    same = out1 == out2 == out3
    return [
        f"pipeline: example series x {len(MATRIX)} toolchains ({', '.join(MATRIX)}), mm/page_alloc.o",
        f"  cold ({'nothing prepared' if full_cold else 'build dirs prepared, no objects'}, empty store): {cold:7.1f} s"
        f"   [{err1.strip().splitlines()[-1]}]",
        f"  warm (same store again):                   {warm:7.2f} s   [{err2.strip().splitlines()[-1]}]",
        f"  objects cached, empty store:               {restore:7.2f} s",
        f"  reports identical across the three runs: {same}",
    ]


def _times(fn, runs: int) -> tuple[float, float, float]:
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1000)
    ts.sort()
    return ts[0], statistics.median(ts), ts[min(len(ts) - 1, int(len(ts) * 0.95))]


def bench_queries(runs: int) -> list[str]:
    t0 = time.perf_counter()
    seed = seed_store(toolchains=[t for t in MATRIX if shutil.which(t)])
    path = large_store(seed=seed, log=lambda s: None)
    made = time.perf_counter() - t0
    store = open_store(path)
    commits = store.list_commits(limit=1000, tree=BENCH_TREE)
    n_builds = sum(1 for _ in commits[:1]) and len(store.builds_for_commit(commits[0].sha))
    rnd = random.Random(5)
    picks = [rnd.choice(commits).sha for _ in range(runs)]
    it = iter(picks * 2)
    series = store.list_series(limit=100, tree=BENCH_TREE)
    sit = iter([rnd.choice(series).id for _ in range(runs * 2)])
    rows = [
        ("commit report (8 toolchains)", lambda: commit_report(store, next(it), BENCH_TREE)),
        ("series report (10 patches)", lambda: series_report(store, next(sit))),
        ("function history (8,000 builds)", lambda: store.function_history("get_page_from_freelist")),
        ("function history, one toolchain", lambda: store.function_history("get_page_from_freelist", "clang-19")),
        ("toolchain matrix (one commit)", lambda: store.toolchain_matrix(picks[0], BENCH_TREE)),
        ("index: 50 commits + 50 series", lambda: (store.list_commits(50), store.list_series(50))),
    ]
    size_mb = os.path.getsize(path) / 1e6
    out = [f"store: {len(commits)} commits x {n_builds} toolchains, {size_mb:.0f} MB ({path}); "
           f"ready in {made:.1f} s",
           f"  {'query':34} {'min ms':>8} {'median':>8} {'p95':>8}  (target: report <= 50 ms)"]
    for label, fn in rows:
        lo, med, p95 = _times(fn, runs)
        out.append(f"  {label:34} {lo:8.1f} {med:8.1f} {p95:8.1f}")
    out.append(reference_line(runs, seed))
    return out


def reference_line(runs: int, seed: Path) -> str:
    """bloat-o-meter on the object pairs one commit report covers (what the store replaces)."""
    from sizediff_bench import oracle
    with open_store(seed) as store:
        (ser, *_) = store.list_series(tree="linux-6.1")
        p1, p2 = (p.commit_sha for p in ser.patches[:2])
    key = Config().key
    pairs = []
    for tc in MATRIX:
        objs = [cache_dir() / "objects" / tc / key / sha / "mm" / "page_alloc.o" for sha in (p1, p2)]
        if all(o.exists() for o in objs):
            pairs.append(objs)
    ts = []
    for _ in range(min(runs, 5)):
        t0 = time.perf_counter()
        for old, new in pairs:
            subprocess.run([sys.executable, str(oracle()), str(old), str(new)], capture_output=True, check=True)
        ts.append((time.perf_counter() - t0) * 1000)
    return (f"  reference: bloat-o-meter on the {len(pairs)} object pairs of one report: "
            f"median {statistics.median(ts):.0f} ms (and it needs the objects)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-pipeline", action="store_true", help="only the store queries")
    ap.add_argument("--full-cold", action="store_true", help="cold run prepares the build dirs too")
    ap.add_argument("--runs", type=int, default=50)
    a = ap.parse_args()
    if not a.skip_pipeline:
        print("\n".join(bench_pipeline(a.full_cold)), flush=True)
    print("\n".join(bench_queries(a.runs)), flush=True)


if __name__ == "__main__":
    main()
