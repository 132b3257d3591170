"""Time vmlinux per patch: sizewatch's builds and analysis beside kbuild's own make, per toolchain.

For each toolchain and config (``allocator`` by default; ``--defconfig`` adds defconfig, whose
first build is ~21-23 min with -j2 on a 2-core machine), on the example series
(toolchains/examples/rmqueue-always-inline.mbox: base, patch 1, patch 2):

  1. sizewatch's first build of the base's vmlinux (configure, prepare, make vmlinux) in a private
     cache with an empty build dir, then its per-patch rebuilds (kbuild's incremental make in the
     persistent build dir, the vmlinux copied into the results dir);
  2. beside it, kbuild by hand in a scratch O= dir with the same .config: ``make vmlinux`` from
     scratch, then ``touch mm/page_alloc.c`` and ``make vmlinux`` again (the floor of any
     per-patch rebuild);
  3. the analysis of a vmlinux pair as the pipeline does it (``sizewatch run``): per file the
     symbols and sections (ci.pipeline.objects), the allocator unit's inline facts and likely
     paths (ci.pipeline.vmlinux), then the bloat-o-meter tables of the pair; in a child process so
     its peak RSS is its own; beside it the kernel's scripts/bloat-o-meter and ``size`` on the
     same two files.

Builds run one at a time with -j2 (``--jobs``). The private cache links the shared source tree
and worktrees and is deleted afterwards (``--keep`` keeps it). ``--lto thin`` builds the configs
with clang ThinLTO (issue 30: every patch relinks vmlinux.o through ThinLTO's backends, with
ld.lld's inline remarks kept as sizewatch's pipeline does; the by-hand make gets the same LD);
``--arch arm64`` builds the arm64 twins of the configs with the cross toolchains (issue 30);
``--commits 2`` stops after patch 1.

    .venv/bin/python bench/vmlinux_bench.py [--toolchains gcc-12,clang-19] [--defconfig] [--skip-anchor]
    .venv/bin/python bench/vmlinux_bench.py --toolchains clang-19 --lto thin --commits 2
    .venv/bin/python bench/vmlinux_bench.py --toolchains gcc-12 --arch arm64
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolchains.build import BuildOptions, build_commit, layout  # noqa: E402
from toolchains.example import series_commits  # noqa: E402
from toolchains.git import ensure_worktree  # noqa: E402
from toolchains.kbuild import make_cmd, preset  # noqa: E402
from toolchains.locks import file_lock  # noqa: E402
from toolchains.registry import load  # noqa: E402
from toolchains.source import cache_dir  # noqa: E402


LTO = ""                     # --lto: "" or "thin"
ARCH = "x86_64"              # --arch: x86_64 or arm64 (the cross toolchains of the registry)


def config_of(name: str):
    return preset(name, arch=ARCH, lto=LTO)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def private_cache(tree: Path, toolchains: list[str], configs: list[str]) -> Path:
    """A cache of its own: the source tree and the (tc, config) worktrees linked, no build dirs."""
    shared = cache_dir()
    tmp = Path(tempfile.mkdtemp(prefix="sizewatch-vmlbench-", dir=shared))
    (tmp / tree.name).symlink_to(tree)
    (tmp / "worktrees").mkdir()
    for tc in toolchains:
        for c in configs:
            lay = layout(tree, tc, config_of(c), BuildOptions())
            lay.worktree.parent.mkdir(parents=True, exist_ok=True)
            if not lay.worktree.exists():            # first use of this (tc, config): make it once
                with file_lock(lay.worktree_lock):
                    ensure_worktree(tree, lay.worktree, "HEAD")
            (tmp / "worktrees" / lay.name).symlink_to(lay.worktree)
    return tmp


def sizewatch_builds(tree: Path, shas: list[str], tc: str, config: str, cache: Path, jobs: int) -> list[tuple]:
    """(sha, method, seconds, vmlinux) of the base (first build) and each patch."""
    opts = BuildOptions(cache=cache, reports=bool(LTO), jobs=jobs, timeout=4 * 3600, memory=None)
    out = []
    for sha in shas:
        t0 = time.perf_counter()
        b = build_commit(tree, sha, tc, ["vmlinux"], config_of(config), opts)
        dt = time.perf_counter() - t0
        r = b.targets[0]
        if not r.ok:
            sys.exit(f"bench: {tc} {config} {sha[:12]}: {r.status}: {(r.errors or b.errors)[:1]}")
        out.append((sha, r.method, dt, r.path))
        print(f"    sizewatch {'first build' if len(out) == 1 else 'patch ' + str(len(out) - 1):12} "
              f"{dt:8.1f} s  ({r.method}; {r.path.stat().st_size / 1e6:.0f} MB)", flush=True)
    return out


def kbuild_by_hand(tree: Path, sha: str, tc: str, config: str, cache: Path, private_build: Path,
                   jobs: int) -> tuple[float, float]:
    """``make vmlinux`` from scratch in a scratch O= dir with the .config sizewatch used, then
    ``touch mm/page_alloc.c`` and ``make vmlinux`` again: (scratch s, incremental s)."""
    shared = layout(tree, tc, config_of(config), BuildOptions())
    o = Path(tempfile.mkdtemp(prefix="anchor-", dir=cache))
    shutil.copy(private_build / ".config", o / ".config")
    if LTO:                          # where make_cmd's LD writes ld.lld's remarks, as in sizewatch's build dir
        from toolchains.inline_report import LTO_DIR
        (o / LTO_DIR).mkdir()
    t = load(tc, ARCH)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "KBUILD"))}

    def make(*targets: str) -> float:
        t0 = time.perf_counter()
        p = subprocess.run(make_cmd(shared.worktree, o, t, config_of(config), *targets, jobs=jobs),
                           capture_output=True, text=True, env=env)
        if p.returncode:
            sys.exit(f"bench: make {' '.join(targets)}: {p.stderr[-500:]}")
        return time.perf_counter() - t0

    with file_lock(shared.worktree_lock), file_lock(shared.lock):     # the worktree stays at sha
        ensure_worktree(tree, shared.worktree, sha)
        make("olddefconfig")
        scratch = make("vmlinux")
        print(f"    make vmlinux from scratch  {scratch:8.1f} s", flush=True)
        os.utime(shared.worktree / "mm" / "page_alloc.c")
        incr = make("vmlinux")
        print(f"    touch page_alloc.c; make   {incr:8.1f} s", flush=True)
    shutil.rmtree(o, ignore_errors=True)
    return scratch, incr


def analyze_pair(old: Path, new: Path) -> dict:
    """The pipeline's reading of two vmlinux files (what _record and compare_all do), timed."""
    from analyzer import bloat
    from ci.pipeline import vmlinux
    from ci.pipeline.objects import object_record
    from ci.reports.model import symbol_set
    t = {"symbols_sections": 0.0, "allocator_unit": 0.0}
    recs = []
    for p in (old, new):
        t0 = time.perf_counter()
        rec = object_record(p, "vmlinux")
        t1 = time.perf_counter()
        res = vmlinux.analyze_vmlinux(p, None, [])
        t2 = time.perf_counter()
        t["symbols_sections"] += t1 - t0
        t["allocator_unit"] += t2 - t1
        recs.append((rec, res))
    t0 = time.perf_counter()
    tables = bloat.diff(symbol_set(recs[0][0].symbols), symbol_set(recs[1][0].symbols))
    t["bloat_tables"] = time.perf_counter() - t0
    t["total"] = sum(t.values())
    t["functions"] = len(recs[1][1].functions)
    t["symbols"] = len(recs[1][0].symbols)
    t["net"] = tables[0].net
    t["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return t


def analysis_beside_tools(old: Path, new: Path) -> None:
    p = subprocess.run([sys.executable, __file__, "--analyze-pair", str(old), str(new)], capture_output=True,
                       text=True)
    if p.returncode:
        sys.exit(f"bench: analysis failed: {p.stderr[-800:]}")
    a = json.loads(p.stdout)
    bom = ROOT / "tests" / "conftest.py"
    sys.path.insert(0, str(bom.parent))
    from conftest import extract_from_tarball  # the oracle script, extracted once into the cache
    script = extract_from_tarball("6.12", "scripts/bloat-o-meter")
    cross = ["-p", "aarch64-linux-gnu-"] if ARCH == "arm64" else []      # the cross nm reads arm64 files
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(script), *cross, str(old), str(new)], capture_output=True, check=True)
    tb = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([(cross[1] if cross else "") + "size", str(old), str(new)], capture_output=True, check=True)
    ts = time.perf_counter() - t0
    print(f"    analysis of the pair (pipeline): {a['total']:.2f} s  = symbols+sections {a['symbols_sections']:.2f}"
          f" + allocator unit facts {a['allocator_unit']:.2f} + tables {a['bloat_tables']:.2f};"
          f" peak RSS {a['max_rss_mb']:.0f} MB; {a['symbols']} symbols, {a['functions']} allocator functions",
          flush=True)
    print(f"    beside it: scripts/bloat-o-meter {tb:.2f} s, size {ts:.3f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toolchains", default="gcc-12")
    ap.add_argument("--defconfig", action="store_true", help="also defconfig (first build ~21-23 min each)")
    ap.add_argument("--skip-anchor", action="store_true", help="no make-by-hand builds (halves the time)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the private cache")
    ap.add_argument("--lto", choices=["none", "thin"], default="none", help="thin: clang ThinLTO (clang toolchains)")
    ap.add_argument("--arch", choices=["x86_64", "arm64"], default="x86_64",
                    help="arm64: cross builds (gcc-12-aarch64-linux-gnu, clang --target)")
    ap.add_argument("--commits", type=int, default=3, help="the series' first N commits (2: base and patch 1)")
    ap.add_argument("--analyze-pair", nargs=2, metavar=("OLD", "NEW"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.analyze_pair:
        print(json.dumps(analyze_pair(Path(args.analyze_pair[0]), Path(args.analyze_pair[1]))))
        return
    global LTO, ARCH
    LTO = "" if args.lto == "none" else args.lto
    ARCH = args.arch
    tcs = [t for t in args.toolchains.split(",") if t]
    configs = ["allocator"] + (["defconfig"] if args.defconfig else [])
    tree, shas = series_commits()
    shas = shas[:max(2, args.commits)]
    print(f"vmlinux bench: {', '.join(tcs)} x {', '.join(configs)}{' ThinLTO' if LTO else ''}{' ' + ARCH}, example series ({len(shas)} commits), "
          f"-j{args.jobs}, {os.cpu_count()} cores\n  load at start: {uptime()}", flush=True)
    cache = private_cache(tree, tcs, configs)
    try:
        for config in configs:
            for tc in tcs:
                print(f"  {tc} {config}:", flush=True)
                builds = sizewatch_builds(tree, shas, tc, config, cache, args.jobs)
                if not args.skip_anchor:
                    lay = layout(tree, tc, config_of(config), BuildOptions(cache=cache))
                    scratch, incr = kbuild_by_hand(tree, shas[0], tc, config, cache, lay.build_dir, args.jobs)
                    per_patch = [b[2] for b in builds[1:]]
                    print(f"    first build / make from scratch: {builds[0][2] / scratch:.2f}x;"
                          f" per patch / incremental make: "
                          f"{', '.join(f'{p / incr:.2f}x' for p in per_patch)}", flush=True)
                analysis_beside_tools(builds[-2][3], builds[-1][3])
                print(f"    load: {uptime()}", flush=True)
    finally:
        if args.keep:
            print(f"private cache kept: {cache}")
        else:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
