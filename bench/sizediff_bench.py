"""sizediff against scripts/bloat-o-meter, side by side in one run.

Pairs: mm/page_alloc.o before/after the example series (gcc-12, built through
the project's own kbuild driver) and two consecutive Debian vmlinux images with
full DWARF (linux-image-*-dbg). For each pair and mode both tools run on the
same files (one warm-up each, then N runs in alternating order); every output must
be byte-identical, else the bench exits 1; wall time (median of N) and peak RSS of
each are printed with the ratio. Targets: <= 0.5x bloat-o-meter's time
on the object pair, <= 0.25x on vmlinux.
"""
from __future__ import annotations

import argparse
import os
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

import dbg_vmlinux  # noqa: E402
from toolchains.source import cache_dir  # noqa: E402


def oracle(version: str = "6.12") -> Path:
    dest = cache_dir() / "oracles" / version / "bloat-o-meter"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tarball = f"/usr/src/linux-source-{version}.tar.xz"
        subprocess.run(f"tar -xJOf {tarball} linux-source-{version}/scripts/bloat-o-meter > {dest}.tmp",
                       shell=True, check=True)
        os.rename(f"{dest}.tmp", dest)
    return dest


def timed(cmd: list[str]) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS (KiB) and stdout of one run."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            sys.exit(f"bench: {' '.join(cmd[:3])} failed: {err.read().decode(errors='replace').strip()[-200:]}")
        return wall, usage.ru_maxrss, out.read()


def run_pair(label: str, old: Path, new: Path, modes: list[list[str]], n: int) -> tuple[list[str], int]:
    """Each mode: one untimed warm-up run of each tool (page cache, imports), then ``n`` timed runs
    of each in alternating order (the tool that goes first changes every round), every output
    compared. Returns the printed lines and how many modes gave different outputs."""
    lines = []
    differ = 0
    # the sizediff installed beside this Python (a worktree has no .venv of its own), else the checkout's
    sizediff = [shutil.which("sizediff", path=str(Path(sys.executable).parent)) or str(ROOT / ".venv/bin/sizediff")]
    bom = [sys.executable, str(oracle())]
    for mode in modes:
        args = [*mode, str(old), str(new)]
        tools = {"ref": [*bom, *args], "ours": [*sizediff, *args]}
        for cmd in tools.values():
            timed(cmd)
        times: dict[str, list[float]] = {"ref": [], "ours": []}
        rss = {"ref": 0, "ours": 0}
        outs: dict[str, set[bytes]] = {"ref": set(), "ours": set()}
        for i in range(n):
            for key in (("ref", "ours") if i % 2 == 0 else ("ours", "ref")):
                t, r, out = timed(tools[key])
                times[key].append(t)
                rss[key] = max(rss[key], r)
                outs[key].add(out)
        same = len(outs["ref"]) == 1 and outs["ref"] == outs["ours"]
        differ += not same
        ref_out = next(iter(outs["ref"]))
        mo, mr = statistics.median(times["ours"]), statistics.median(times["ref"])
        lines.append(f"{label:<34} {' '.join(mode) or '(default)':<10} bloat-o-meter {mr:7.3f} s  "
                     f"sizediff {mo:7.3f} s  ratio {mo / mr:5.2f}x  output {'identical' if same else 'DIFFERENT'} "
                     f"({len(ref_out.splitlines())} lines); peak RSS {rss['ref'] >> 10} MB vs {rss['ours'] >> 10} MB")
        print(lines[-1], flush=True)
    return lines, differ


# Two Debian cloud kernels with full DWARF, ~600 MB vmlinux each (apt-get download): by default
# the two newest ABIs apt knows of the newest one's series (bench/dbg_vmlinux.available()).


def default_packages() -> list[str]:
    pkgs = dbg_vmlinux.available()
    series = pkgs[-1].name.split("-")[2].split(".")[:2]
    same = [p.name for p in pkgs if p.name.split("-")[2].split(".")[:2] == series]
    return (same if len(same) >= 2 else [p.name for p in pkgs])[-2:]


def object_pair() -> tuple[Path, Path]:
    from toolchains.example import build_series
    built = build_series("gcc-12")
    return built[1].object_path, built[2].object_path   # patch 1 -> patch 2: the seed's change


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="runs per tool and mode (median reported)")
    ap.add_argument("--no-vmlinux", action="store_true", help="skip the ~560 MB dbg download")
    ap.add_argument("--packages", nargs=2, metavar="PKG",
                    help="the two Debian dbg packages to compare (default: the two newest of one series)")
    args = ap.parse_args()
    print(f"# sizediff vs scripts/bloat-o-meter (linux-source-6.12), median of {args.n} runs, "
          f"{os.cpu_count()} cores")
    print(f"# load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    old, new = object_pair()
    differ = run_pair("mm/page_alloc.o (gcc-12 series)", old, new, [[], ["-c"]], args.n)[1]
    if not args.no_vmlinux:
        pkgs = args.packages or default_packages()
        a, b = (dbg_vmlinux.vmlinux(p) for p in pkgs)
        label = "vmlinux " + " -> ".join(p.removeprefix("linux-image-").split("-")[0 if "+" in p else 1] for p in pkgs)
        print(f"# {pkgs[0]} ({a.stat().st_size >> 20} MB) -> {pkgs[1]} ({b.stat().st_size >> 20} MB)")
        differ += run_pair(label, a, b, [[], ["-c"]], max(1, args.n // 2 + 1))[1]
    print(f"# load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    if differ:
        sys.exit(f"bench: sizediff's output differs from bloat-o-meter's in {differ} mode(s)")


if __name__ == "__main__":
    main()
