"""Time the build layer on the example series × every installed toolchain, beside the bare compiler.

For each installed registry toolchain and each commit of toolchains/examples/rmqueue-always-inline.mbox
(base, patch 1, patch 2), mm/page_alloc.o is built the way `sizewatch build` does, in a private
cache whose build dirs are copies of the shared prepared ones with the object's record removed
(so the first commit goes through make, as right after prepare; the later ones replay):

  1. the series, toolchains in parallel: total wall time, and per build the method and time;
  2. the bare compiler: each commit's compile command alone (no objtool, no report flags,
     one at a time), the floor any build of that object has to pay;
     ratio total wall / sum of bare compiles (target <= 2x after prepare);
  2b. per replayed object, one at a time and alternating with the bare compile of the same
     commit (so load from elsewhere hits both alike): the whole replay as build_commit does it
     (sandbox, compile with the inline report flags, objtool, fixdep, check-local-export,
     keeping object and report) / the bare compile (target <= 1.15x);
  3. the same series again: wall time and how many compiles it ran (target: none);
  4. beside it, what one does by hand: `make mm/page_alloc.o` at every commit (kbuild,
     no inline reports), one toolchain after the other.

    .venv/bin/python bench/toolchain_bench.py [--toolchains gcc-12,clang-19] [--runs N] [--skip-make] [--keep]
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolchains import cmdfile  # noqa: E402
from toolchains.build import BuildOptions, build_commit, layout  # noqa: E402
from toolchains.example import series_commits  # noqa: E402
from toolchains.kbuild import Config  # noqa: E402
from toolchains.locks import file_lock  # noqa: E402
from toolchains.parallel_builds import build_matrix  # noqa: E402
from toolchains.registry import all_toolchains  # noqa: E402
from toolchains.source import cache_dir  # noqa: E402
from toolchains.git import ensure_worktree  # noqa: E402

PA = "mm/page_alloc.o"


def prepared(tree: Path, shas: list[str], toolchains: list[str]) -> None:
    """Make sure every shared build dir is prepared (timed apart: the bench starts after prepare)."""
    for tc in toolchains:
        t0 = time.perf_counter()
        b = build_commit(tree, shas[0], tc, [PA], options=BuildOptions(reports=False))
        dt = time.perf_counter() - t0
        if dt > 20:
            print(f"  prepared {tc} ({dt:.0f} s, not counted)", flush=True)
        if b.status != "ok":
            sys.exit(f"bench: {tc} does not build the base: {b.errors[:1]}")


def private_cache(tree: Path, toolchains: list[str]) -> tuple[Path, Path]:
    """A cache of its own: the source tree and worktrees linked, the prepared build dirs copied
    with mm/page_alloc.o's object, record and stamp removed."""
    shared = cache_dir()
    tmp = Path(tempfile.mkdtemp(prefix="sizewatch-tcbench-", dir=shared))
    (tmp / tree.name).symlink_to(tree)
    (tmp / "worktrees").mkdir()
    (tmp / "build").mkdir()
    for tc in toolchains:
        lay = layout(tree, tc, Config(), BuildOptions())
        (tmp / "worktrees" / lay.name).symlink_to(lay.worktree)
        dest = tmp / "build" / lay.name
        with file_lock(lay.worktree_lock), file_lock(lay.lock):
            subprocess.run(["cp", "-a", str(lay.build_dir), str(dest)], check=True)
        for f in (PA, "mm/.page_alloc.o.cmd", "mm/.page_alloc.o.sizewatch"):
            (dest / f).unlink(missing_ok=True)
    return tmp, tmp / tree.name


def bare_compile(tree: Path, sha: str, tc: str, build_dir: Path, worktree: Path) -> float:
    """The compile command of the object's record, alone, into a scratch file; seconds."""
    lay = layout(tree, tc, Config(), BuildOptions())
    rec = cmdfile.read(build_dir, PA)
    args = shlex.split(rec.compile_part)
    with tempfile.TemporaryDirectory() as scratch:
        out = []
        for a in args:
            if a.startswith("-Wp,-MMD,"):
                a = f"-Wp,-MMD,{scratch}/dep.d"
            elif a == PA:
                a = f"{scratch}/bare.o"
            out.append(a)
        with file_lock(lay.worktree_lock):
            ensure_worktree(tree, worktree, sha)
            t0 = time.perf_counter()
            subprocess.run(out, cwd=build_dir, check=True, capture_output=True)
            return time.perf_counter() - t0


def compiles_in(builds) -> int:
    return sum(1 for b in builds for t in b.targets if t.method in ("replay", "kbuild"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toolchains", help="comma-separated (default: every installed one)")
    ap.add_argument("--skip-make", action="store_true", help="skip the make-at-every-commit reference")
    ap.add_argument("--keep", action="store_true", help="keep the private cache")
    ap.add_argument("--runs", type=int, default=3, help="replay/bare pairs per replayed object (median reported)")
    a = ap.parse_args()
    tcs = a.toolchains.split(",") if a.toolchains else [t.name for t in all_toolchains() if t.installed]
    tree, shas = series_commits()
    cores = os.cpu_count() or 1
    print(f"toolchain bench: example series ({len(shas)} commits) x {', '.join(tcs)}; {cores} cores; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    prepared(tree, shas, tcs)
    tmp, ptree = private_cache(tree, tcs)
    try:
        opts = BuildOptions(cache=tmp)
        t0 = time.perf_counter()
        builds = build_matrix(ptree, shas, tcs, [PA], options=opts)
        wall = time.perf_counter() - t0
        bad = [b.summary() for b in builds if b.status != "ok"]
        if bad:
            sys.exit("bench: builds failed: " + "; ".join(bad))
        t0 = time.perf_counter()
        again = build_matrix(ptree, shas, tcs, [PA], options=opts)
        wall2 = time.perf_counter() - t0

        bare: dict[tuple[str, str], float] = {}
        for b in builds:
            bare[(b.toolchain, b.sha)] = bare_compile(ptree, b.sha, b.toolchain, b.build_dir, b.worktree)

        print(f"\n{'toolchain':9} {'commit':12} {'method':7} {'build s':>8} {'of it report s':>14} "
              f"{'bare cc s':>9} {'ratio':>6}")
        replays = []
        for b in builds:
            t = b.targets[0]
            step = t.seconds + t.report_seconds
            cc = bare[(b.toolchain, b.sha)]
            print(f"{b.toolchain:9} {b.sha[:12]} {t.method:7} {step:8.2f} {t.report_seconds:14.2f} {cc:9.2f} "
                  f"{step / cc:6.2f}")
            if t.method == "replay":
                replays.append(step / cc)
        per_object = []
        for b in builds:
            if b.targets[0].method != "replay":
                continue
            ro = replace(opts, mode="replay", use_cache=False, out_root=tmp / "replays")
            pairs = []
            for _ in range(a.runs):
                cc = bare_compile(ptree, b.sha, b.toolchain, b.build_dir, b.worktree)
                t0 = time.perf_counter()
                r = build_commit(ptree, b.sha, b.toolchain, [PA], options=ro)
                dt = time.perf_counter() - t0
                assert r.targets[0].method == "replay" and r.status == "ok", r.summary()
                pairs.append((dt, cc))
            dt, cc = sorted(pairs)[len(pairs) // 2]
            per_object.append((b.toolchain, b.sha, dt, cc))
        total_bare = sum(bare.values())
        steps = sum(t.seconds + t.report_seconds for b in builds for t in b.targets)
        workers = min(len(tcs), cores)
        print(f"\nseries x {len(tcs)} toolchains, {workers} at a time, inline reports on:")
        print(f"  total wall                      {wall:7.1f} s")
        print(f"  sum of bare compiler times      {total_bare:7.1f} s   (one at a time)")
        # the series ran {workers} builds at once: its wall time is set against the serial compiler
        # times per core used, never divided by them as if it had run one at a time
        print(f"  wall x {workers} cores / bare            {wall * workers / total_bare:7.2f} x  "
              "(target <= 2x after prepare: build steps cost per compiler second)")
        print(f"  sum of build steps / bare       {steps / total_bare:7.2f} x")
        if replays:
            print(f"  replayed objects in the series run (2 builds at once): replay / bare compile: median "
                  f"{sorted(replays)[len(replays) // 2]:.2f} x, max {max(replays):.2f} x")
        if per_object:
            print("\nper replayed object, one at a time, alternating with its bare compile "
                  + (f"(median of {a.runs} pairs):" if a.runs > 1 else "(one pair each: not a median):"))
            ratios = []
            for tc, sha, dt, cc in per_object:
                ratios.append(dt / cc)
                print(f"  {tc:9} {sha[:12]}  replay {dt:5.2f} s  bare {cc:5.2f} s  {dt / cc:5.2f} x")
            ratios.sort()
            print(f"  replay / bare: median {ratios[len(ratios) // 2]:.2f} x, max {ratios[-1]:.2f} x  "
                  f"(target <= 1.15x)")
        print(f"  second run of the series        {wall2:7.2f} s, {compiles_in(again)} compiles "
              f"(target: none), methods: {sorted({b.method for b in again})}")

        if not a.skip_make:
            mo = replace(opts, mode="kbuild", reports=False, use_cache=False, out_root=tmp / "make")
            t0 = time.perf_counter()
            for tc in tcs:
                for sha in shas:
                    b = build_commit(ptree, sha, tc, [PA], options=mo)
                    if b.status != "ok":
                        sys.exit(f"bench: make failed: {b.summary()}")
            mwall = time.perf_counter() - t0
            print(f"\nbeside it: make {PA} at every commit, one build at a time, no inline reports:")
            print(f"  total wall                      {mwall:7.1f} s   ({mwall / total_bare:.2f} x bare)")
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        if a.keep:
            print(f"\nprivate cache kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
