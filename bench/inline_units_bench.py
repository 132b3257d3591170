"""Inline cost per patch (issue 14): a vmlinux's attribution with the per-unit cache cold, warm (every
unit cached) and after a one-file change, beside the whole decode, in one run.

Each row is its own process (wall, CPU and peak RSS from ``wait4``, as bench/inline_cost_bench.py);
the last column is a digest of the result's ``to_dict()``: a cached row must show the whole
decode's digest.
- the tinyconfig vmlinux of the example series' base and patch 1 (tests/kernel_images.py), each
  built again in the shared build dir (kbuild rebuilds the changed objects, ~15-60 s each) so that
  the unit keys are the real object hashes (``ci.pipeline.unit_cache.object_keys``; the time to
  take them is printed): patch 1 read with the base's cache is the real one-file patch;
- the pinned Debian dbg vmlinux (bench/dbg_vmlinux.py) if it is in ~/.cache/sizewatch: no build dir,
  so keys stand in for object hashes (unit name + build-id) and the one-unit change is simulated
  by deleting mm/page_alloc.c's entry.
Quote the figures with the load printed before and after (the machine is shared).

Usage: python bench/inline_units_bench.py [--no-tiny] [--no-debian]
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
WHOLE = ("import sys; from analyzer.inline_cost import inline_cost; " + DIGEST +
         "print('whole', d(inline_cost(sys.argv[1])), file=sys.stderr)")
CACHED = ("import sys, json; from pathlib import Path; from ci.pipeline.inline_costs import cached_inline_cost; "
          "from ci.pipeline.unit_cache import UnitCache; " + DIGEST +
          "r = cached_inline_cost(Path(sys.argv[1]), json.load(open(sys.argv[2])), UnitCache(Path(sys.argv[3]))); "
          "print(f'decoded {r.decoded} reused {r.reused}', d(r.cost), file=sys.stderr)")


def row(label: str, code: str, *args: str) -> None:
    status, took, cpu, rss, last = measure([sys.executable, "-c", code, *map(str, args)], 600)
    print(f"{label:52s} {took:7.2f} s {cpu:7.2f} s {rss:7.0f} MB  {status}  {last[:70]}", flush=True)


def stand_in_keys(path: Path) -> dict[str, str]:
    from analyzer.inline_units import unit_names
    from ci.pipeline.unit_cache import build_id
    bid = (build_id(path) or b"").hex()
    return {n: hashlib.sha256(f"{bid}\0{n}".encode()).hexdigest() for n in unit_names(path) if n}


def tiny(tmp: Path) -> None:
    from ci.pipeline.builder import build
    from tests.kernel_images import CONFIG, TOOLCHAIN
    from ci.pipeline.unit_cache import object_keys
    from toolchains.build import BuildOptions, layout
    from toolchains.example import series_commits
    tree, shas = series_commits()
    opts = BuildOptions(reports=False, jobs=2, timeout=2400, use_cache=False, out_root=tmp / "out")
    cache = tmp / "tiny-units"
    for i, sha in enumerate(shas[:2]):
        t = time.perf_counter()
        b = build(tree, sha, TOOLCHAIN, ["vmlinux"], CONFIG, options=opts)
        took = time.perf_counter() - t
        if b.status != "ok" or "vmlinux" not in b.unit_keys:
            print(f"tinyconfig vmlinux at {sha[:12]}: {b.status} {b.errors[:1]} (no unit keys): skipped")
            return
        path = b.objects["vmlinux"]
        keys = tmp / f"tiny-{i}.json"
        keys.write_text(json.dumps(b.unit_keys["vmlinux"]))
        lay = layout(tree, TOOLCHAIN, CONFIG, opts)
        t, c = time.perf_counter(), time.process_time()
        again = object_keys(path, lay.build_dir, lay.worktree)     # what the build thread took: timed here
        keys_took, keys_cpu = time.perf_counter() - t, time.process_time() - c
        name = "base" if i == 0 else "patch 1"
        print(f"tiny {name} {sha[:12]}: build {took:.1f} s ({b.method}); {len(b.unit_keys['vmlinux'])} unit keys "
              f"(object hashes) in {keys_took:.2f} s wall / {keys_cpu:.2f} s CPU"
              f"{'' if again == b.unit_keys['vmlinux'] else ' (differ!)'}", flush=True)
        row(f"tiny {name}: whole decode", WHOLE, path)
        if i == 0:
            row(f"tiny {name}: by unit, cold (empty cache)", CACHED, path, keys, cache)
        else:
            row(f"tiny {name}: by unit, base's cache (the real patch)", CACHED, path, keys, cache)
        row(f"tiny {name}: by unit, warm (every unit cached)", CACHED, path, keys, cache)


def debian(tmp: Path) -> None:
    from bench.dbg_vmlinux import cached
    found = cached()
    if found is None:
        print("no pinned Debian dbg vmlinux in the cache (bench/dbg_vmlinux.py fetches one): skipped")
        return
    keys = tmp / "debian.json"
    keys.write_text(json.dumps(stand_in_keys(found)))
    cache = tmp / "debian-units"
    row("debian: whole decode", WHOLE, found)
    row("debian: by unit, cold (empty cache)", CACHED, found, keys, cache)
    row("debian: by unit, warm (every unit cached)", CACHED, found, keys, cache)
    gone = 0
    for f in cache.glob("*/*.json"):
        if json.loads(f.read_bytes().split(b"\n", 1)[1])["unit"] == "mm/page_alloc.c":
            f.unlink()
            gone += 1
    row(f"debian: by unit, {gone} unit changed (mm/page_alloc.c)", CACHED, found, keys, cache)
    size = sum(f.stat().st_size for f in cache.glob("*/*.json"))
    print(f"debian: cache entries {len(list(cache.glob('*/*.json')))}, {size / 1e6:.1f} MB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-tiny", action="store_true", help="skip the tinyconfig pair (two incremental builds)")
    ap.add_argument("--no-debian", action="store_true", help="skip the Debian dbg vmlinux")
    args = ap.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"{'command':52s} {'wall':>9s} {'CPU':>9s} {'peak RSS':>10s}  status  (units decoded/reused, digest)")
    with tempfile.TemporaryDirectory(prefix="sizewatch-units-bench-") as d:
        if not args.no_tiny:
            tiny(Path(d))
        if not args.no_debian:
            debian(Path(d))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
