"""``sizewatch inspect OBJ --json`` as a user runs it (the whole process), beside ``objdump -dr OBJ``.

Both commands run in turn (A B A B ...) after one warm-up run each, on the same object
(mm/page_alloc.o of the example series' patch 1, built or taken from the cache), and the
figures are wall-clock medians with min and max. It also lists which web modules the
command imported (``python -X importtime``): the target is none.

Target: median ≤ 0.4 s for the gcc-12 object. Exit status 1 when the command fails.

Usage: python bench/inspect_bench.py [--runs N] [--toolchain gcc-12] [OBJ]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WEB = ("flask", "jinja2", "werkzeug", "gunicorn", "web")


def sizewatch() -> list[str]:
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "cli"]


def once(cmd: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"inspect_bench: {' '.join(cmd)} failed: {proc.stderr.decode(errors='replace').strip()[-300:]}")
    return took


def web_imports(obj: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "cli", "inspect", str(obj), "--json"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    names = [ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")]
    return sorted({n for n in names if n.split(".")[0] in WEB})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("obj", nargs="?", type=Path)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--toolchain", default="gcc-12")
    a = ap.parse_args()
    obj = a.obj
    if obj is None:
        from toolchains.example import build_series
        obj = build_series(a.toolchain)[1].object_path
    ours = [*sizewatch(), "inspect", str(obj), "--json"]
    ref = ["objdump", "-dr", str(obj)]
    once(ours)
    once(ref)                                     # warm-up: page cache, pyc files
    t_ours, t_ref = [], []
    for _ in range(a.runs):
        t_ours.append(once(ours))
        t_ref.append(once(ref))
    med = statistics.median(t_ours)
    print(f"object: {obj} ({obj.stat().st_size / 1e6:.2f} MB); {a.runs} runs each, alternating, after a warm-up")
    for label, ts in (("sizewatch inspect --json", t_ours), ("objdump -dr", t_ref)):
        print(f"  {label:26s} median {statistics.median(ts):6.3f} s   min {min(ts):6.3f}   max {max(ts):6.3f}")
    print(f"  ratio (median of pairs)    {statistics.median(o / r for o, r in zip(t_ours, t_ref)):6.1f}x")
    web = web_imports(obj)
    print(f"  web modules imported: {', '.join(web) if web else 'none'}")
    print(f"  target: median <= 0.4 s: {'met' if med <= 0.4 else 'NOT met'}; no web modules: "
          f"{'met' if not web else 'NOT met'}")


if __name__ == "__main__":
    main()
