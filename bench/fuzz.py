"""Hostile-input campaign: mutated ELF objects, archives and special files through
``sizediff`` and ``sizewatch inspect``, side by side with ``nm`` on the same files.

Sources: mm/page_alloc.o of the example series (gcc-12, built through the project's
own kbuild driver) and a small C file built by gcc-12 and clang-19. Each case is one
seeded mutant (tests/elf_mutants.py: byte flips, field overwrites in the ELF header,
section headers, symbols and relocations, truncations, string tables without NUL,
broken SHT_SYMTAB_SHNDX, archive header edits, FIFOs, directories, symlink loops,
devices, a sparse file claiming millions of sections). Every entry point runs in a
forked child with a timeout, so a hang or a blow-up is measured, not suffered.

Printed: counts per outcome (ok / InputError / traceback / timeout) per entry point,
each traceback class with a case that shows it, the slowest and largest cases, peak
RSS growth against nm's peak RSS on the same file, and whether our symbol list agrees
with ``nm --size-sort`` where nm reads the file without complaint.
Targets (issue 12): 0 tracebacks, 0 timeouts past 10 s, RSS <= 2x nm's.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import elf_mutants as em  # noqa: E402

RSS_FLOOR_KB = 32 << 10     # growth below this is interpreter noise, not the file's doing


def sources(work: Path, kernel: bool) -> list[tuple[str, Path]]:
    out = [(p.stem, p) for p in em.compile_samples(work)]
    if kernel:
        from toolchains.example import build_series
        out.append(("page_alloc.o(gcc-12)", build_series("gcc-12")[2].object_path))
    return out


def uptime() -> str:
    return os.popen("uptime").read().strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10_000, help="cases (default %(default)s)")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: run all cases)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before a case counts as a hang")
    ap.add_argument("--inspect-kernel-every", type=int, default=10, metavar="K",
                    help="run inspect on every K-th page_alloc.o mutant (~0.3 s each); sizediff runs on all")
    ap.add_argument("--no-kernel", action="store_true", help="small objects only (no page_alloc.o)")
    args = ap.parse_args()
    print(f"# hostile ELF campaign: seed {args.seed}, up to {args.n} cases, timeout {args.timeout:.0f} s, "
          f"{os.cpu_count()} cores; load: {uptime()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="sizewatch-fuzz-"))
    try:
        srcs = sources(work, not args.no_kernel)
        print("# sources: " + ", ".join(f"{name} ({p.stat().st_size} bytes)" for name, p in srcs), flush=True)
        run(args, srcs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load at the end: {uptime()}")


def run(args, srcs: list[tuple[str, Path]], work: Path) -> None:
    datas = [p.read_bytes() for _, p in srcs]
    em.preload()
    print(f"# forking process after imports: {em._rss_kb() >> 10} MB RSS (the children start from it; "
          f"'growth' below is over it)", flush=True)
    counts: dict[str, Counter] = defaultdict(Counter)
    kinds: dict[str, Counter] = defaultdict(Counter)
    tracebacks: dict[str, list[str]] = defaultdict(list)
    slow: list[tuple[float, str]] = []
    big: list[tuple[int, int, str]] = []
    over_nm: list[str] = []
    agree = Counter()
    refused: list[tuple[str, str]] = []
    t_start = time.perf_counter()
    done = 0
    for case in range(args.n):
        if args.minutes and time.perf_counter() - t_start > args.minutes * 60:
            break
        where = work / f"case-{case}"
        where.mkdir()
        try:
            m = em.make(args.seed, case, datas, where)
            import random
            src_i = random.Random(args.seed * 1_000_003 + case).randrange(len(srcs))  # make()'s choice
            src_name, src_path = srcs[src_i]
            label = f"case {case} ({src_name}, {m.kind}: {m.detail})"
            nm_rc, nm_rows, nm_rss, nm_s = em.nm_listing(m.path) if m.path.exists() else (1, None, 0, 0.0)
            results = [em.run_forked("sizediff", em.entry_sizediff, src_path, m.path, timeout=args.timeout)]
            kernel = src_name.startswith("page_alloc")
            if not kernel or case % args.inspect_kernel_every == 0:
                results.append(em.run_forked("inspect", em.entry_inspect, m.path, timeout=args.timeout))
            for r in results:
                counts[r.entry][r.status] += 1
                kinds[m.kind.split("+")[0]][f"{r.entry} {r.status}"] += 1
                if r.status in ("traceback", "timeout"):
                    tracebacks[f"{r.entry}: {r.detail.split(': ', 1)[0] if r.status == 'traceback' else 'timeout'}"
                               ].append(f"{label} -> {r.detail}")
                slow.append((r.seconds, f"{r.entry} {label}: {r.status} {r.detail[:80]}"))
                big.append((r.rss_growth_kb, nm_rss, f"{r.entry} {label}: {r.status}"))
                if r.rss_growth_kb > RSS_FLOOR_KB and r.rss_growth_kb > 2 * nm_rss:
                    over_nm.append(f"{r.entry} {label}: +{r.rss_growth_kb >> 10} MB vs nm {nm_rss >> 10} MB")
            sd = results[0]
            if nm_rows is not None and sd.status == "ok" and not em.comparable(sd.listing):
                agree["not comparable: a symbol name holds a newline"] += 1
            elif nm_rows is not None and sd.status == "ok":
                agree["same list as nm" if sd.listing == nm_rows else "DIFFERENT from nm"] += 1
                if sd.listing != nm_rows and agree["DIFFERENT from nm"] <= 5:
                    print(f"  differs from nm: {label}", flush=True)
            elif nm_rows is not None:
                agree["nm reads it cleanly, we refuse it"] += 1
                refused.append((label, sd.detail))
            elif sd.status == "ok":
                agree["nm fails or warns, we read it"] += 1
            else:
                agree["both refuse"] += 1
            slow.sort(reverse=True)
            del slow[5:]
            big.sort(reverse=True)
            del big[5:]
        finally:
            shutil.rmtree(where, ignore_errors=True)
        done += 1
        if done % 500 == 0:
            print(f"  {done} cases, {time.perf_counter() - t_start:.0f} s, "
                  + "; ".join(f"{e} {dict(c)}" for e, c in counts.items()), flush=True)
    wall = time.perf_counter() - t_start
    print(f"\n{done} cases in {wall:.0f} s ({wall / max(done, 1) * 1000:.0f} ms a case)")
    for entry, c in counts.items():
        print(f"{entry:<9} " + "  ".join(f"{k} {c[k]}" for k in ("ok", "InputError", "traceback", "timeout")))
    print("by mutator: " + "; ".join(f"{k}: {dict(v)}" for k, v in sorted(kinds.items())))
    print("symbol list vs nm --size-sort: " + ", ".join(f"{k} {v}" for k, v in agree.most_common()))
    classes = Counter(" ".join(re.sub(r"0x[0-9a-f]+|\d+", "N", detail.split(": ", 1)[-1]).split()[:4])
                      for _label, detail in refused)
    for cls, k in classes.most_common():
        print(f"  nm reads it, we refuse: {k:5d}  {cls}")
    for label, detail in refused[:5]:
        print(f"    e.g. {label}: {detail[:200]}")
    print(f"traceback/timeout classes: {len(tracebacks)}")
    for cls, cases in sorted(tracebacks.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(cases):5d}  {cls}\n         e.g. {cases[0][:400]}")
    print("slowest runs:")
    for s, what in slow:
        print(f"  {s:6.2f} s  {what}")
    print("largest RSS growth (ours over the forking process, nm's peak RSS):")
    for kb, nm_kb, what in big:
        print(f"  +{kb >> 10:5d} MB (nm {nm_kb >> 10} MB)  {what}")
    print(f"runs over 2x nm's peak RSS (and over {RSS_FLOOR_KB >> 10} MB): {len(over_nm)}")
    for line in over_nm[:10]:
        print(f"  {line}")


if __name__ == "__main__":
    main()
