"""The dashboard on a PostgreSQL store beside the same dashboard on the sqlite store, in one run:
p50/p95 of the pages of bench/web_bench.py with 1,000 commits x 8 toolchains (bench/benchstore.py),
measured by ``wrk`` against two real ``sizewatch serve`` on loopback. Target (issue 16): p95 <= 50 ms,
one user (1 connection), warm. Cold pages (never asked before: stamp, queries, render) beside them.

The PostgreSQL store is the sqlite bench store's rows copied with COPY into a fresh database of a
PostgreSQL 15 this script starts in a temporary directory (tests/pgserver.py; triggers off during
the copy: their tables are copied too), then ANALYZEd. That the pipeline itself writes PostgreSQL is
tested (tests/test_pg_store.py); copying is only the fast way to 1,000 x 8 builds. Quote the figures
with the load.

    .venv/bin/python bench/pg_web_bench.py [--seconds 5] [--commits 1000] [--toolchains 8]
                                           [--pages index,patch,...] [--modes warm,cold] [--conns 1,4]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import web_bench  # noqa: E402
from benchstore import large_store, seed_store  # noqa: E402
from db.store import open_store  # noqa: E402
from web.settings import WebSettings  # noqa: E402

# copied in this order (references point back only); symbols, functions, remarks: the bulk
TABLES = ["schema_migrations", "change_counters", "trees", "commits", "toolchains", "configs", "names", "builds",
          "objects", "symbols", "functions", "remarks", "findings", "comparisons", "comparison_tables",
          "function_sizes", "likely_paths", "series", "series_patches", "matrix_tables", "matrix_rows",
          "bot_series", "bot_messages", "bot_decisions", "bot_mails"]


def copy_store(src: Path, url: str, log=print) -> dict[str, int]:
    """Every row of the sqlite store into the (migrated, empty) PostgreSQL store at ``url``."""
    import psycopg
    open_store(url).close()                                   # the schema, by the store's own migrations
    lite = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
    counts = {}
    with psycopg.connect(url) as pg:
        pg.execute("SET session_replication_role = replica")  # no triggers: their tables are copied as they are
        for t in ("schema_migrations", "change_counters"):
            pg.execute(f"DELETE FROM {t}")
        for t in TABLES:
            cols = [r[1] for r in lite.execute(f'PRAGMA table_info("{t}")')]
            if not cols:
                continue
            t0 = time.monotonic()
            quoted = ", ".join(f'"{c}"' for c in cols)
            n = 0
            with pg.cursor().copy(f'COPY {t} ({quoted}) FROM STDIN') as cp:
                for row in lite.execute(f'SELECT {quoted} FROM "{t}"'):
                    cp.write_row(row)
                    n += 1
            counts[t] = n
            log(f"  copied {t}: {n:,} rows in {time.monotonic() - t0:.1f} s")
        for t in TABLES:
            if pg.execute("SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = 'id' "
                          "AND is_identity = 'YES'", (t,)).fetchone():
                pg.execute(f"SELECT setval(pg_get_serial_sequence('{t}', 'id'), coalesce(max(id), 0) + 1, false) "
                           f"FROM {t}")
        pg.commit()
    lite.close()
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("VACUUM ANALYZE")
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--toolchains", type=int, default=8)
    ap.add_argument("--pages", default="", help="comma-separated page keys (default: all)")
    ap.add_argument("--modes", default="warm,cold", help="comma-separated, of warm, cold, herd")
    ap.add_argument("--conns", default="1,4", help="connections (1: one user)")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("bench: wrk missing (scripts/install.sh installs it)")
    from pgserver import PgServer
    seed = seed_store(toolchains=[t for t in web_bench.MATRIX if shutil.which(t)])
    t0 = time.monotonic()
    path = large_store(commits=args.commits, toolchains=args.toolchains, seed=seed, log=lambda s: None)
    print(f"sqlite store: {path} ({os.path.getsize(path) / 1e6:.0f} MB, ready in {time.monotonic() - t0:.0f} s)")
    _commits, _n_tc, _picks, pages = web_bench.page_plan(path, args.commits)
    if args.pages:
        keep = set(args.pages.split(","))
        pages = [p for p in pages if p[0] in keep]
    modes = [m for m in args.modes.split(",") if m]
    web_bench.CONNECTIONS = tuple(int(c) for c in args.conns.split(","))

    server = PgServer()
    try:
        url = server.database()
        t0 = time.monotonic()
        counts = copy_store(path, url)
        size = server_size(url)
        print(f"PostgreSQL 15 store: {url} ({sum(counts.values()):,} rows copied in {time.monotonic() - t0:.0f} s, "
              f"{size / 1e6:.0f} MB)")
        print(f"machine: {os.cpu_count()} cores shared by the servers, PostgreSQL, wrk and whatever else runs; "
              f"load at start {web_bench.load()}")
        results = {}
        for name, db in (("sqlite", path), ("postgresql", url)):
            cache = WebSettings(db).page_cache
            for p in (cache, cache.with_name(cache.name + "-wal"), cache.with_name(cache.name + "-shm")):
                p.unlink(missing_ok=True)                   # each server starts with an empty page cache
            proc, base = web_bench.start_server([*web_bench.SIZEWATCH, "serve", "--db", str(db), "--host",
                                                 "127.0.0.1", "--port", "0"])
            try:
                print(f"{name}: `sizewatch serve --db {'<file>' if name == 'sqlite' else url}` on {base}")
                results[name] = web_bench.measure(name, proc, base, db, pages, args.seconds, modes)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        cache = WebSettings(url).page_cache                 # the PostgreSQL store goes with the server
        for p in (cache, cache.with_name(cache.name + "-wal"), cache.with_name(cache.name + "-shm")):
            p.unlink(missing_ok=True)
    finally:
        server.stop()
    print(f"\nwrk, {args.seconds} s per page, mode and concurrency; p50/p95 in ms; "
          f"cpu: the server's share of the {os.cpu_count()} cores (PostgreSQL's own processes not counted)")
    print(f"  {'page':32} {'mode':5} {'conns':>5} | {'sqlite p50':>11} {'p95':>7} {'req/s':>7} | "
          f"{'postgresql p50':>14} {'p95':>7} {'req/s':>7}  errors(pg)")
    worst = 0.0
    for key, label, _ in pages:
        for mode in modes:
            for conns in web_bench.CONNECTIONS:
                a, b = results["sqlite"][(key, mode, conns)], results["postgresql"][(key, mode, conns)]
                line = (f"  {label:32} {mode:5} {conns:>5} | {a['p50']:>11.1f} {a['p95']:>7.1f} "
                        f"{a['requests'] / args.seconds:>7.1f} | {b['p50']:>14.1f} {b['p95']:>7.1f} "
                        f"{b['requests'] / args.seconds:>7.1f}  {b['errors']} conn/timeout, {b['non2xx']} non-2xx")
                if conns == 1 and mode == "warm":
                    worst = max(worst, b["p95"])
                    if b["p95"] > 50:
                        line += "  OVER 50 ms"
                print(line, flush=True)
    print(f"postgresql, worst p95 warm at 1 connection: {worst:.1f} ms (target 50); load at end {web_bench.load()}")


def server_size(url: str) -> int:
    import psycopg
    with psycopg.connect(url) as pg:
        return pg.execute("SELECT pg_database_size(current_database())").fetchone()[0]


if __name__ == "__main__":
    main()
