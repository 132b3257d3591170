"""The dashboard's pages timed under load, before and after, in one run: p50/p95 of each page with
1,000 commits x 8 toolchains in the store (bench/benchstore.py: real pipeline results replicated,
~1.6 GB), measured by ``wrk`` (Debian) against real servers on loopback. Target (issue 18): p95 <= 50
ms for every page at 4 connections warm, <= 150 ms cold; at 16 connections no errors.

*before* is the code of a git revision (default: where this branch left ``main``; one waitress
process, nothing cached),
exported with ``git archive`` and served by ``python -m cli serve`` from that copy; *after* is this
checkout's ``sizewatch serve`` (gunicorn, a worker per core, change-counter ETags, the shared page
cache). The two never run at once; each page is hit for --seconds with a rotating list of URLs
(random commits and series) at 1, 4 and 16 connections:

- warm: every URL of the list was answered once before (for *after*: it is in the page cache);
- cold: every request is a page not seen before (its URL made unique with ``?cold=N``), which is
  what a reader meets first after ``sizewatch run`` wrote under the page: stamp read, render,
  compression, cache write; every connection on its own new page (the worst case);
- herd: all connections on one page (the list's first URL), a new page every second
  (``?herd=<second>``): what happens when a mail goes out and its readers open its link at once;
- write: "write, then read": a real write to the builds under the
  page (the same triggers a new build fires), then one request, 20 times, one connection.

The server's CPU share is its processes' CPU time during the run over the run's wall time and the
machine's cores (the load tool runs on the same cores). Beside it, the reference: the same report
through the CLI (``sizewatch report SHA``). Quote the figures with ``uptime``'s load.

    .venv/bin/python bench/web_bench.py [--seconds 5] [--commits 1000] [--toolchains 8] [--before REV]
                                        [--pages index,patch,...] [--modes warm,cold,herd,write] [--no-before]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sqlite3
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
CONNECTIONS = (1, 4, 16)

LUA = """
local paths = {%s}
local mode = "%s"
local i = 0
local n = 0
local counter = 1
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end
request = function()
  i = i %% #paths + 1
  local p = paths[i]
  local sep = string.find(p, "?", 1, true) and "&" or "?"
  if mode == "cold" then
    n = n + 1
    p = string.format("%%s%%scold=%%d-%%d-%%d", p, sep, tid or 0, n, math.random(1, 1000000000))
  elseif mode == "herd" then
    p = string.format("%%s%%sherd=%%d", p, sep, os.time())
  end
  return wrk.format("GET", p, {["Accept-Encoding"] = "gzip"})
end
init = function(args)
  math.randomseed(os.time() * 1000 + (tid or 0))
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %%d %%.2f %%.2f %%.2f %%.2f %%d %%d\\n", summary.requests,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, e.connect + e.read + e.write + e.timeout, e.status))
end
"""


# --- servers ---------------------------------------------------------------------------------------
def export_revision(rev: str, into: Path) -> Path:
    """The code of ``rev`` as plain files (git archive: no worktree, nothing in the repository changes)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def start_server(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
    if not m:
        proc.kill()
        sys.exit(f"bench: the server did not start: {line.strip()} {proc.stderr.read()[-800:]}")
    # keep reading what the server logs: a full pipe would stop it in the middle of a run
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, m[1]


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and all its children now alive."""
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


# --- load ------------------------------------------------------------------------------------------
def wrk(base: str, paths: list[str], seconds: int, connections: int, mode: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(LUA % (", ".join(f'"{p}"' for p in paths), mode))
        script = f.name
    try:
        out = subprocess.run(["wrk", "-t", "1" if connections < 2 else "2", "-c", str(connections), "-d",
                              f"{seconds}s", "--timeout", "10s", "-s", script, base + "/"],
                             capture_output=True, text=True, timeout=seconds + 60)
    finally:
        os.unlink(script)
    m = re.search(r"^RESULT (\d+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) (\d+) (\d+)$", out.stdout, re.M)
    if not m:
        sys.exit(f"bench: wrk gave no result: {out.stdout[-500:]} {out.stderr[-500:]}")
    n, p50, p95, p99, top, errors, status = m.groups()
    return {"requests": int(n), "p50": float(p50), "p95": float(p95), "p99": float(p99), "max": float(top),
            "errors": int(errors), "non2xx": int(status)}


def settle(result: dict) -> None:
    """Wait until the requests wrk left in flight are answered, so that each page is timed alone."""
    time.sleep(min(result["max"] / 1000 + 0.2, 15))


def get(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept-Encoding": "gzip"}), timeout=60) as r:
        r.read()
        assert r.status == 200, url
    return (time.perf_counter() - t0) * 1000


def write_then_read(db: Path, base: str, paths: list[str], rounds: int = 20) -> tuple[float, float]:
    """p50/p95 of the first request after a write under the page: the builds of the page's commit
    (for the pages over the whole store: one build) are rewritten (UPDATE: the triggers of a new build)."""
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    ts = []
    try:
        for k in range(rounds):
            p = paths[k % len(paths)]
            m = re.search(r"/(?:commit|matrix)/([0-9a-f]{40})", p)
            with_conn = conn.execute
            if m:
                with_conn("UPDATE builds SET seconds = seconds WHERE commit_id IN "
                          "(SELECT id FROM commits WHERE sha = ?)", (m[1],))
            elif (s := re.search(r"/series/(\d+)", p)):
                with_conn("UPDATE builds SET seconds = seconds WHERE commit_id IN (SELECT c.id FROM commits c "
                          "JOIN series_patches sp ON sp.commit_sha = c.sha WHERE sp.series_id = ? LIMIT 1)", (int(s[1]),))
            else:
                with_conn("UPDATE builds SET seconds = seconds WHERE id = (SELECT max(id) FROM builds)")
            ts.append(get(base + p))
    finally:
        conn.close()
    ts.sort()
    return statistics.median(ts), ts[min(len(ts) - 1, int(len(ts) * 0.95))]


def cli_reference(db: Path, shas: list[str], runs: int = 5) -> str:
    ts = []
    for sha in shas[:runs]:
        t0 = time.perf_counter()
        subprocess.run([*SIZEWATCH, "report", sha, "--db", str(db)], capture_output=True, check=True)
        ts.append((time.perf_counter() - t0) * 1000)
    return (f"reference: `sizewatch report SHA` (the same patch report from the CLI, process start included): "
            f"median {statistics.median(ts):.0f} ms")


def load() -> str:
    return open("/proc/loadavg").read().split(" ", 3)[:3].__str__()


def measure(name: str, proc: subprocess.Popen, base: str, db: Path, pages: list[tuple[str, str, list[str]]],
            seconds: int, modes: list[str]) -> dict:
    """{(page, mode, conns): result} for one server."""
    out = {}
    for key, label, paths in pages:
        for p in paths:                             # every URL answers 200 once: the warm runs are warm
            get(base + p)
        for mode in modes:
            if mode == "write":
                out[(key, "write", 1)] = dict(zip(("p50", "p95"), write_then_read(db, base, paths)))
                continue
            for conns in CONNECTIONS:
                c0, t0 = cpu_seconds(proc.pid), time.monotonic()
                r = wrk(base, paths[:1] if mode == "herd" else paths, seconds, conns, mode)
                r["cpu"] = (cpu_seconds(proc.pid) - c0) / ((time.monotonic() - t0) * (os.cpu_count() or 1))
                settle(r)
                out[(key, mode, conns)] = r
        print(f"  [{name}] {label}: done (load {load()})", file=sys.stderr, flush=True)
    return out


def page_plan(path: Path, commits: int) -> tuple[list[str], int, list[str], list[tuple[str, str, list[str]]]]:
    """(commits, toolchains per commit, the commits picked, the pages measured as (key, label, URLs))
    of the bench store at ``path``, drawn with one seed: every bench asks for the same pages."""
    with open_store(path) as store:               # migrations applied here, not during the first request
        shas = [c.sha for c in store.list_commits(limit=commits, tree=BENCH_TREE)]
        series = [s.id for s in store.list_series(limit=1000, tree=BENCH_TREE)]
        n_tc = len({b.toolchain for b in store.builds_for_commit(shas[0])})
    rnd = random.Random(6)
    picks = [rnd.choice(shas) for _ in range(200)]
    pages = [
        ("index", "index (20 commits, 6 series)", ["/"]),
        ("series", "series page (10 patches)", [f"/series/{rnd.choice(series)}" for _ in range(200)]),
        ("patch", "patch page", [f"/commit/{s}" for s in picks]),
        ("text", "patch as text", [f"/commit/{s}.txt" for s in picks]),
        ("json", "patch as JSON", [f"/api/commit/{s}" for s in picks]),
        ("function", f"function page ({len(shas) * n_tc:,} points)", ["/function/get_page_from_freelist"]),
        ("function1", "function page, one toolchain", ["/function/get_page_from_freelist?toolchain=clang-19"]),
        ("matrix", "toolchain matrix", [f"/matrix/{s}" for s in picks]),
    ]
    return shas, n_tc, picks, pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--toolchains", type=int, default=8)
    ap.add_argument("--before", default=None,
                    help="git revision measured as 'before' (its own serve command); default: where this branch left main")
    ap.add_argument("--no-before", action="store_true", help="measure this checkout only")
    ap.add_argument("--pages", default="", help="comma-separated page keys (default: all)")
    ap.add_argument("--modes", default="warm,cold,herd,write", help="comma-separated, of warm, cold, herd, write")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench: wrk missing (scripts/install.sh installs it)")
    seed = seed_store(toolchains=[t for t in MATRIX if shutil.which(t)])
    path = large_store(commits=args.commits, toolchains=args.toolchains, seed=seed, log=lambda s: None)
    commits, n_tc, picks, pages = page_plan(path, args.commits)
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= {"warm", "cold", "herd", "write"}:
        sys.exit(f"bench: --modes {args.modes}: expected warm, cold, herd, write")
    if args.pages:
        keep = set(args.pages.split(","))
        pages = [p for p in pages if p[0] in keep]
    for p in (path.with_name(path.name + ".pages"), path.with_name(path.name + ".pages-wal"),
              path.with_name(path.name + ".pages-shm")):
        p.unlink(missing_ok=True)                 # the after server starts with an empty page cache

    print(f"store: {len(commits)} commits x {n_tc} toolchains, {os.path.getsize(path) / 1e6:.0f} MB ({path})")
    print(f"machine: {os.cpu_count()} cores shared by the server, wrk and whatever else runs; load at start "
          f"{load()}")
    results = {}
    servers = []
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_before:
            args.before = args.before or subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
                                                        capture_output=True, text=True, check=True).stdout.strip()
            code = export_revision(args.before, Path(tmp) / "before")
            env = dict(os.environ, PYTHONPATH=str(code))
            # an older revision refuses a store with newer migrations: it gets the same store written
            # no further than its own schema (the same rows, without what the newer migrations add)
            theirs = max(int(m.name[:4]) for m in (code / "db" / "migrations").glob("[0-9]*.sql"))
            ours = max(int(m.name[:4]) for m in (ROOT / "db" / "migrations").glob("[0-9]*.sql"))
            before_db = path if theirs >= ours else large_store(commits=args.commits, toolchains=args.toolchains,
                                                                 seed=seed, log=lambda s: None, upto=theirs)
            if before_db != path:
                print(f"before's store: migrated to {theirs} (this checkout: {ours}): {before_db}")
                for p in (before_db.with_name(before_db.name + ".pages"),):
                    p.unlink(missing_ok=True)
            servers.append(("before", [sys.executable, "-m", "cli", "serve", "--db", str(before_db), "--host",
                                       "127.0.0.1", "--port", "0"], code, env, before_db))
        servers.append(("after", [*SIZEWATCH, "serve", "--db", str(path), "--host", "127.0.0.1", "--port", "0"],
                        None, None, path))
        for name, cmd, cwd, env, db in servers:
            proc, base = start_server(cmd, cwd, env)
            try:
                if name == "before":
                    print(f"before: {args.before} ({subprocess.run(['git', '-C', str(ROOT), 'rev-parse', '--short', args.before], capture_output=True, text=True).stdout.strip()}), its own `serve` on {base}")
                else:
                    print(f"after: this checkout, `sizewatch serve` on {base} (gunicorn, a worker per core)")
                results[name] = measure(name, proc, base, db, pages, args.seconds, modes)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    names = [n for n, *_ in servers]
    print(f"\nwrk, {args.seconds} s per page, mode and concurrency; p50/p95 in ms; "
          f"cpu: the server's share of the {os.cpu_count()} cores")
    head = f"  {'page':32} {'mode':5} {'conns':>5}"
    for n in names:
        head += f" | {n + ' p50':>11} {'p95':>7} {'req/s':>7} {'cpu':>4}"
    print(head + "  errors(after)")
    worst = {}
    for key, label, _ in pages:
        for mode in [m for m in modes if m != "write"]:
            for conns in CONNECTIONS:
                line = f"  {label:32} {mode:5} {conns:>5}"
                for n in names:
                    r = results[n][(key, mode, conns)]
                    line += (f" | {r['p50']:>11.1f} {r['p95']:>7.1f} {r['requests'] / args.seconds:>7.1f} "
                             f"{r['cpu'] * 100:>3.0f}%")
                a = results["after"][(key, mode, conns)]
                line += f"  {a['errors']} conn/timeout, {a['non2xx']} non-2xx"
                if conns == 4:
                    limit = 50 if mode == "warm" else 150
                    if a["p95"] > limit:
                        line += f"  OVER {limit} ms"
                    worst[mode] = max(worst.get(mode, 0), a["p95"])
                print(line, flush=True)
        if "write" in modes:
            line = f"  {label:32} {'write':5} {1:>5}"
            for n in names:
                r = results[n][(key, "write", 1)]
                line += f" | {r['p50']:>11.1f} {r['p95']:>7.1f} {'':>7} {'':>4}"
            print(line + "  (a write under the page, then one request; 20 rounds)")
    print("after, worst p95 at 4 connections: " + ", ".join(
        f"{m} {worst[m]:.1f} ms (target {50 if m == 'warm' else 150})" for m in modes if m in worst))
    print(cli_reference(path, picks))
    print(f"load at end {load()}")


if __name__ == "__main__":
    main()
