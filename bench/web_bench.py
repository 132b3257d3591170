"""The dashboard's pages timed under load: p50/p95/p99 latency of each page with 1,000 commits ×
8 toolchains in the store (ci.benchstore.large_store: real pipeline results replicated), measured
by ``wrk`` (Debian) against a real ``sizewatch serve`` (waitress) on loopback. Target: p95 <= 50 ms.

Each page is hit for --seconds with a rotating list of URLs (random commits and series, so no
page is served twice in a row from the same rows), first with one connection (a user's latency),
then with --connections at once (several users on the 2-core box). Beside it, the reference: the
same report through the CLI (``sizewatch report SHA``), what a user runs without the dashboard.

    .venv/bin/python bench/web_bench.py [--seconds 8] [--connections 4] [--commits 1000] [--toolchains 8]
                                        [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchstore import BENCH_TREE, large_store, seed_store  # noqa: E402
from db.store import open_store  # noqa: E402

MATRIX = ["gcc-11", "gcc-12", "clang-14", "clang-16", "clang-19"]
SIZEWATCH = [str(ROOT / ".venv/bin/sizewatch")] if (ROOT / ".venv/bin/sizewatch").exists() else \
    [sys.executable, "-m", "cli"]

LUA = """
local paths = {%s}
local i = 0
request = function()
  i = i %% #paths + 1
  return wrk.format("GET", paths[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %%d %%.2f %%.2f %%.2f %%.2f %%d\\n", summary.requests,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def start_server(db: Path, threads: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*SIZEWATCH, "serve", "--db", str(db), "--host", "127.0.0.1", "--port", "0",
                             "--threads", str(threads)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
    if not m:
        proc.kill()
        sys.exit(f"bench: sizewatch serve did not start: {line.strip()}")
    # keep reading what the server logs: a full pipe would stop it in the middle of a run
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, m[1]


def wrk(base: str, paths: list[str], seconds: int, connections: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(LUA % ", ".join(f'"{p}"' for p in paths))
        script = f.name
    try:
        out = subprocess.run(["wrk", "-t", "1" if connections < 2 else "2", "-c", str(connections), "-d",
                              f"{seconds}s", "--timeout", "10s", "-s", script, base + "/"],
                             capture_output=True, text=True, timeout=seconds + 60)
    finally:
        os.unlink(script)
    m = re.search(r"^RESULT (\d+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) (\d+)$", out.stdout, re.M)
    if not m:
        sys.exit(f"bench: wrk gave no result: {out.stdout[-500:]} {out.stderr[-500:]}")
    n, p50, p95, p99, top, errors = m.groups()
    return {"requests": int(n), "p50": float(p50), "p95": float(p95), "p99": float(p99), "max": float(top),
            "errors": int(errors)}


def settle(result: dict) -> None:
    """Wait until the requests wrk left in flight are answered, so that each page is timed alone.

    wrk stops at its deadline with up to --connections requests still being served; the next
    run's first requests would queue behind them (at 4 connections they take up to a second:
    that was the "long tail" of the single-connection run that followed). None of them takes
    longer than the slowest one wrk saw, and the server is idle after that.
    """
    time.sleep(min(result["max"] / 1000 + 0.2, 15))


def cli_reference(db: Path, shas: list[str], runs: int = 5) -> str:
    ts = []
    for sha in shas[:runs]:
        t0 = time.perf_counter()
        subprocess.run([*SIZEWATCH, "report", sha, "--db", str(db)], capture_output=True, check=True)
        ts.append((time.perf_counter() - t0) * 1000)
    return (f"  reference: `sizewatch report SHA` (the same patch report from the CLI, process start included): "
            f"median {statistics.median(ts):.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--toolchains", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="the server's request threads (sizewatch serve's default)")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench: wrk missing (scripts/install.sh installs it)")
    seed = seed_store(toolchains=[t for t in MATRIX if shutil.which(t)])
    path = large_store(commits=args.commits, toolchains=args.toolchains, seed=seed, log=lambda s: None)
    with open_store(path) as store:               # migrations applied here, not during the first request
        commits = [c.sha for c in store.list_commits(limit=args.commits, tree=BENCH_TREE)]
        series = [s.id for s in store.list_series(limit=1000, tree=BENCH_TREE)]
        n_tc = len({b.toolchain for b in store.builds_for_commit(commits[0])})
    rnd = random.Random(6)
    picks = [rnd.choice(commits) for _ in range(200)]
    pages = [
        ("index (20 commits, 6 series)", ["/"]),
        ("series page (10 patches)", [f"/series/{rnd.choice(series)}" for _ in range(200)]),
        ("patch page", [f"/commit/{s}" for s in picks]),
        ("patch as text", [f"/commit/{s}.txt" for s in picks]),
        ("patch as JSON", [f"/api/commit/{s}" for s in picks]),
        (f"function page ({len(commits) * n_tc:,} points)", ["/function/get_page_from_freelist"]),
        ("function page, one toolchain", ["/function/get_page_from_freelist?toolchain=clang-19"]),
        ("toolchain matrix", [f"/matrix/{s}" for s in picks]),
    ]
    proc, base = start_server(path, args.threads)
    try:
        for _, paths in pages:                      # every page answers 200 before it is timed
            for p in paths[:3]:
                with urllib.request.urlopen(base + p, timeout=60) as r:
                    assert r.status == 200, p
        print(f"store: {len(commits)} commits x {n_tc} toolchains, {os.path.getsize(path) / 1e6:.0f} MB ({path})")
        print(f"server: sizewatch serve (waitress, {args.threads} threads) on {base}; load: wrk, {args.seconds} s "
              f"per page and concurrency; {os.cpu_count()} cores shared by server and load tool")
        print(f"  {'page':36} {'conns':>5} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
              f"  (target: p95 <= 50 ms)")
        worst = 0.0
        for name, paths in pages:
            for conns in (1, args.connections):
                r = wrk(base, paths, args.seconds, conns)
                settle(r)
                if conns == 1:
                    worst = max(worst, r["p95"])
                flag = "" if r["p95"] <= 50 else "  over target"
                err = f"  {r['errors']} errors" if r["errors"] else ""
                print(f"  {name:36} {conns:>5} {r['requests'] / args.seconds:>7.1f} {r['p50']:>8.1f} {r['p95']:>8.1f} "
                      f"{r['p99']:>8.1f} {r['max']:>8.1f}{flag}{err}", flush=True)
        print(f"  worst single-user p95: {worst:.1f} ms")
        print(cli_reference(path, picks))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
