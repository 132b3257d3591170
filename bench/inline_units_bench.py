"""Inline cost per patch (issue 14): a vmlinux's attribution with the per-unit cache cold, warm (every
unit cached) and after a one-file change, beside the whole decode, in one run.

Each row is its own process (wall, CPU and peak RSS from ``wait4``, as bench/inline_cost_bench.py;
the process also imports sizewatch and digests the result); the last column gives the seconds of
the attribution itself (what the pipeline's worker spends per vmlinux, its imports long done) and
a digest of the result's ``to_dict()``: a cached row must show the whole decode's digest.
- the vmlinux of the example series' base and patch 1 under the allocator config (and under
  defconfig with ``--defconfig``: the issue's defconfig-size kernel), each built again in the
  persistent build dir (kbuild rebuilds the changed objects, ~15-60 s each once the dir exists)
  so that the unit keys are the real object hashes (``ci.pipeline.unit_cache.object_keys``; the
  time to take them is printed): patch 1 read with the base's cache is the real one-file patch;
- the Debian dbg vmlinux (bench/dbg_vmlinux.py: the newest cached) if it is in ~/.cache/sizewatch: no build dir,
  so keys stand in for object hashes (unit name + build-id) and the one-unit change is simulated
  by deleting mm/page_alloc.c's entry.
Quote the figures with the load printed before and after (the machine is shared).

Usage: python bench/inline_units_bench.py [--no-allocator] [--defconfig] [--no-debian]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.inline_cost_bench import measure  # noqa: E402

DIGEST = ("import hashlib, json; d = lambda r: hashlib.sha256(json.dumps(r.to_dict(), sort_keys=True)"
          ".encode()).hexdigest()[:12]; ")
# the child's own peak RSS (VmHWM of its image): wait4's figure carries the parent's peak over
# exec, and this process has read a whole vmlinux itself (the unit keys) before the later rows
PEAK = ("print('peak', [int(ln.split()[1]) for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][0], "
        "file=sys.stderr)")
# the attribution's own seconds (after imports, before the digest) are printed beside the digest
WHOLE = ("import sys, time; from analyzer.inline_cost import inline_cost; " + DIGEST +
         "t = time.perf_counter(); r = inline_cost(sys.argv[1]); t = time.perf_counter() - t; "
         "print(f'in-process {t:.2f} s, whole', d(r), file=sys.stderr); " + PEAK)
CACHED = DIGEST.replace("; ", "\n") + """
import json, os, sys, time
from pathlib import Path
from ci.pipeline.inline_costs import cached_inline_cost
from ci.pipeline.unit_cache import UnitCache
from db.inline_cost import record_of
from db.models import BuildRecord, Commit, ConfigInfo, ObjectRecord
from db.store import open_store
t = time.perf_counter()
r = cached_inline_cost(Path(sys.argv[1]), json.load(open(sys.argv[2])), UnitCache(Path(sys.argv[3])))
t = time.perf_counter() - t
s = time.perf_counter()     # what the pipeline does next: the store's rows, written with the build
rec = record_of("vmlinux", r.cost)
with open_store(sys.argv[4]) as st:
    st.record_build(BuildRecord("bench", Commit(os.urandom(20).hex(), None, "bench"), "tc", "tc 1",
                                ConfigInfo("k"), "vmlinux", "ok", objects=[ObjectRecord("vmlinux", inline_cost=rec)],
                                analysis_version=6))
s = time.perf_counter() - s
print(f"in-process {t:.2f} s + stored {s:.2f} s, decoded {r.decoded} reused {r.reused}", d(r.cost), file=sys.stderr)
""" + PEAK


def row(label: str, code: str, *args: str) -> None:
    status, took, cpu, rss, last = measure([sys.executable, "-c", code, *map(str, args)], 600, lines=2)
    result, _nl, peak = last.partition("\n")
    if peak.startswith("peak "):
        rss, last = int(peak.split()[1]) / 1024, result
    else:                               # failed before printing it: the error's last line
        last = peak or result
    print(f"{label:52s} {took:7.2f} s {cpu:7.2f} s {rss:7.0f} MB  {status}  {last[:110]}", flush=True)


def stand_in_keys(path: Path) -> dict[str, str]:
    from analyzer.inline_units import unit_names
    from ci.pipeline.unit_cache import build_id
    bid = (build_id(path) or b"").hex()
    return {n: hashlib.sha256(f"{bid}\0{n}".encode()).hexdigest() for n in unit_names(path) if n}


def kernel(tmp: Path, config_name: str) -> None:
    """The example series' base and patch 1 built as vmlinux under ``config_name`` in its persistent
    build dir (kbuild rebuilds the changed objects), then read whole and unit by unit."""
    from ci.pipeline.builder import build
    from ci.pipeline.unit_cache import hashes_path, object_keys
    from tests.kernel_images import TOOLCHAIN
    from toolchains.build import BuildOptions, layout
    from toolchains.example import series_commits
    from toolchains.kbuild import preset
    config = preset(config_name)
    tree, shas = series_commits()
    opts = BuildOptions(reports=False, jobs=2, timeout=4 * 3600, use_cache=False, out_root=tmp / "out")
    cache = tmp / f"{config_name}-units"
    for i, sha in enumerate(shas[:2]):
        t = time.perf_counter()
        b = build(tree, sha, TOOLCHAIN, ["vmlinux"], config, options=opts)
        took = time.perf_counter() - t
        if b.status != "ok" or "vmlinux" not in b.unit_keys:
            print(f"{config_name} vmlinux at {sha[:12]}: {b.status} {b.errors[:1]} (no unit keys): skipped")
            return
        path = b.objects["vmlinux"]
        keys = tmp / f"{config_name}-{i}.json"
        keys.write_text(json.dumps(b.unit_keys["vmlinux"]))
        lay = layout(tree, TOOLCHAIN, config, opts)
        name = f"{config_name} {'base' if i == 0 else 'patch 1'}"
        print(f"{name} {sha[:12]}: build {took:.1f} s ({b.method}); {len(b.unit_keys['vmlinux'])} unit keys",
              flush=True)
        # the keys again, as the build thread took them: every object read (memo removed), then
        # with the memo that call left (only objects changed within SETTLED_NS are read)
        for memo in ("every object read", "memo warm"):
            if memo == "every object read":
                hashes_path(lay.build_dir).unlink(missing_ok=True)
            t, c = time.perf_counter(), time.process_time()
            again = object_keys(path, lay.build_dir, lay.worktree)
            print(f"  unit keys, {memo}: {time.perf_counter() - t:.2f} s wall / {time.process_time() - c:.2f} s CPU"
                  f"{'' if again == b.unit_keys['vmlinux'] else ' (differ!)'}", flush=True)
        row(f"{name}: whole decode", WHOLE, path)
        if i == 0:
            row(f"{name}: by unit, cold (empty cache)", CACHED, path, keys, cache, tmp / "store.db")
        else:
            row(f"{name}: by unit, base's cache (the real patch)", CACHED, path, keys, cache, tmp / "store.db")
        row(f"{name}: by unit, warm (every unit cached)", CACHED, path, keys, cache, tmp / "store.db")


def debian(tmp: Path) -> None:
    from bench.dbg_vmlinux import cached
    img = cached()
    if img is None:
        print("no Debian dbg vmlinux in the cache (bench/dbg_vmlinux.py fetches one): skipped")
        return
    print(f"debian: {img.package} {img.version}")
    found = img.path
    keys = tmp / "debian.json"
    keys.write_text(json.dumps(stand_in_keys(found)))
    cache = tmp / "debian-units"
    row("debian: whole decode", WHOLE, found)
    row("debian: by unit, cold (empty cache)", CACHED, found, keys, cache, tmp / "store.db")
    row("debian: by unit, warm (every unit cached)", CACHED, found, keys, cache, tmp / "store.db")
    gone = 0
    for f in cache.glob("*/*.json"):
        if json.loads(f.read_bytes().split(b"\n", 1)[1])["unit"] == "mm/page_alloc.c":
            f.unlink()
            gone += 1
    row(f"debian: by unit, {gone} unit changed (mm/page_alloc.c)", CACHED, found, keys, cache, tmp / "store.db")
    size = sum(f.stat().st_size for f in cache.glob("*/*.json"))
    print(f"debian: cache entries {len(list(cache.glob('*/*.json')))}, {size / 1e6:.1f} MB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-allocator", action="store_true",
                    help="skip the allocator-config pair (two incremental builds, ~1 min each)")
    ap.add_argument("--defconfig", action="store_true",
                    help="also the defconfig pair (a first build ~15-25 min, then ~1 min per commit)")
    ap.add_argument("--no-debian", action="store_true", help="skip the Debian dbg vmlinux")
    args = ap.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"{'command':52s} {'wall':>9s} {'CPU':>9s} {'peak RSS':>10s}  status  (units decoded/reused, digest)")
    with tempfile.TemporaryDirectory(prefix="sizewatch-units-bench-") as d:
        if not args.no_allocator:
            kernel(Path(d), "allocator")
        if args.defconfig:
            kernel(Path(d), "defconfig")
        if not args.no_debian:
            debian(Path(d))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
