"""A large store for speed measurements: real pipeline results replicated to N commits × M toolchains.

``large_store()`` first makes sure a seed store holds real builds of the example
series (running the pipeline for what is missing), then writes a synthetic tree
``bench-linux`` of ``commits`` commits in one first-parent line, each built under
``toolchains`` toolchains: every build is a copy of a real build's rows (symbols,
functions, remarks, findings; the store's triggers add the function sizes), cycling
through the series' commits so that neighbouring commits differ the way real patches do; each commit is then compared
with its parent through the store as the pipeline does (the seed's findings, tables
computed from the symbols). Every tenth commit starts a ten-patch series. Used by
bench/pipeline_bench.py and the dashboard's bench.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path

from db import bloat_tables
from ci.reports.model import compute_tables, inline_report
from db.store import open_store
from toolchains.registry import all_toolchains
from toolchains.source import cache_dir

BENCH_TREE = "bench-linux"
FORMAT = 4          # bump when the generated layout changes: cached stores are rebuilt
# 4: inline cost (migration 0014): the builds' inline rows and the comparisons' inline reports.
# 3: the matrix page's rows (migration 0013). The format is in the cached files' names: a store (or
# seed) written by this code has a newer schema than older code accepts, so it never takes the
# place of one that other checkouts still read.


def seed_store(path: Path | None = None, toolchains: list[str] | None = None) -> Path:
    """A store with the example series built for real (by the pipeline) under the given toolchains."""
    from ci import pipeline
    from toolchains.example import EXAMPLE_MBOX
    path = path or cache_dir() / "bench" / f"seed-f{FORMAT}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    older = path.with_name("seed.db")
    if not path.exists() and older.exists():      # its builds copied (read only), not made again
        src, dst = sqlite3.connect(f"{older.resolve().as_uri()}?mode=ro", uri=True), sqlite3.connect(path)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
    toolchains = toolchains or [t.name for t in all_toolchains() if t.installed]
    with open_store(path) as store:
        pipeline.run(store, "6.1", mbox=EXAMPLE_MBOX, toolchains=toolchains, progress=lambda s: None)
    return path


def _fingerprint(seed: Path) -> str:
    """Changes when the seed's builds change (new builds, re-analysis): the copy is then made again."""
    conn = sqlite3.connect(seed)
    try:
        n, top, ana = conn.execute("SELECT count(*), max(id), sum(analysis_version) FROM builds").fetchone()
    finally:
        conn.close()
    return f"{n}-{top}-{ana}"


def _sha(i: int) -> str:
    return hashlib.sha1(f"sizewatch-bench-{i}".encode()).hexdigest()


def large_store(path: Path | None = None, commits: int = 1000, toolchains: int = 8, seed: Path | None = None,
                force: bool = False, log=print, upto: int | None = None) -> Path:
    """The replicated store at ``path`` (default <cache>/bench/store-<commits>x<toolchains>-f<FORMAT>.db),
    reused when present. ``upto``: migrated no further than this version (what an older revision's
    server can read, for the dashboard bench's *before*)."""
    path = path or cache_dir() / "bench" / (f"store-{commits}x{toolchains}-f{FORMAT}"
                                            + (f"-upto{upto}" if upto else "") + ".db")
    stamp = path.with_suffix(".done")
    seed = seed or seed_store()
    open_store(seed).close()                       # brings an older seed to the current schema
    want = f"{FORMAT} {commits} {toolchains} {upto} {_fingerprint(seed)}\n"
    if not force and path.exists() and stamp.exists() and stamp.read_text() == want:
        return path
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"), stamp):
        if p.exists():
            p.unlink()
    t0 = time.monotonic()
    open_store(path, upto=upto).close()            # schema
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("ATTACH DATABASE ? AS seed", (str(seed),))
    conn.execute("BEGIN")
    pairs = _replicate(conn, commits, toolchains)
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE seed")
    _compare(seed, path, pairs, upto)
    if upto is None or upto >= 13:                 # the matrix page's rows, as Store.record_build writes them
        with open_store(path, upto=upto) as dst:
            dst.refresh_matrices()
    conn.execute("ANALYZE")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    stamp.write_text(want)
    log(f"large store: {commits} commits x {toolchains} toolchains in {time.monotonic() - t0:.1f} s, "
        f"{os.path.getsize(path) / 1e6:.0f} MB: {path}")
    return path


def _compare(seed: Path, path: Path, pairs: list[tuple[int, int, int, int]], upto: int | None = None) -> None:
    """Each commit compared with its parent through ``Store.record_comparison``, as the pipeline records
    it: the seed's findings for the same pair of seed builds (none where the seed has no such
    comparison), the bloat-o-meter tables and the inline-cost report, computed from the seed's rows (a
    replica's rows are its seed build's) once per pair of seed builds."""
    done: dict[tuple[int, int], tuple[list, dict]] = {}
    with open_store(seed) as src, open_store(path, upto=upto) as dst:
        for head, base, seed_head, seed_base in pairs:
            if (seed_head, seed_base) not in done:
                findings = [f for f in src.findings_for(seed_head, seed_base) if f.base_build_id == seed_base]
                inline = inline_report(src, seed_base, seed_head) if upto is None or upto >= 14 else None
                done[(seed_head, seed_base)] = (findings, bloat_tables.to_stored(
                    compute_tables(src, seed_base, seed_head)), inline.to_dict() if inline else None)
            dst.record_comparison(head, base, *done[(seed_head, seed_base)])


def _replicate(conn: sqlite3.Connection, n_commits: int, n_toolchains: int) -> list[tuple[int, int, int, int]]:
    """Writes the replica; returns its comparisons as (build, base build, seed build, seed base build)."""
    seed_builds = conn.execute("""
        SELECT b.id, tc.name, tc.family, c.sha, c.generation, c.id FROM seed.builds b
        JOIN seed.commits c ON c.id = b.commit_id JOIN seed.toolchains tc ON tc.id = b.toolchain_id
        WHERE b.status = 'ok' ORDER BY c.generation, c.id""").fetchall()
    if not seed_builds:
        raise RuntimeError("the seed store holds no successful builds")
    seed_commits = [(g, sha) for g, _, sha in sorted({(g or 0, cid, sha) for _, _, _, sha, g, cid in seed_builds})]
    by_tc: dict[str, dict[str, int]] = {}
    family: dict[str, str] = {}
    for bid, tc, fam, sha, _, _ in seed_builds:
        by_tc.setdefault(tc, {})[sha] = bid
        family[tc] = fam
    # only seed toolchains with every seed commit built can stand in for others
    complete = [tc for tc, m in by_tc.items() if len(m) == len(seed_commits)]
    names = [t.name for t in all_toolchains()][:n_toolchains]
    while len(names) < n_toolchains:
        names.append(f"clang-{100 + len(names)}")
    source = {}
    for i, name in enumerate(names):
        same = [tc for tc in complete if tc == name] or \
               [tc for tc in complete if tc.split("-")[0] == name.split("-")[0]] or complete
        source[name] = same[i % len(same)]
    inline = conn.execute("SELECT 1 FROM main.sqlite_master WHERE name = 'inline_costs'").fetchone() is not None
    conn.execute("INSERT OR IGNORE INTO names(name) SELECT name FROM seed.names")
    conn.execute("CREATE TEMP TABLE nmap AS SELECT sn.id AS old, mn.id AS new FROM seed.names sn "
                 "JOIN main.names mn ON mn.name = sn.name")
    conn.execute("CREATE UNIQUE INDEX temp.nmap_old ON nmap(old)")
    conn.execute("INSERT INTO trees(name, path) VALUES (?, '')", (BENCH_TREE,))
    tree_id = conn.execute("SELECT id FROM trees WHERE name = ?", (BENCH_TREE,)).fetchone()[0]
    cfg = conn.execute("SELECT key, arch, base, fragment, config_hash, config_z FROM seed.configs LIMIT 1").fetchone()
    conn.execute("INSERT INTO configs(key, arch, base, fragment, config_hash, config_z) VALUES (?, ?, ?, ?, ?, ?)", cfg)
    cfg_id = conn.execute("SELECT max(id) FROM configs").fetchone()[0]
    tc_ids = {}
    for name in names:
        ver, fam = conn.execute("SELECT version, family FROM seed.toolchains WHERE name = ? LIMIT 1",
                                (source[name],)).fetchone()
        version = ver if name == source[name] else f"{name} (replica of {ver})"
        conn.execute("INSERT INTO toolchains(name, version, family) VALUES (?, ?, ?)", (name, version, fam))
        tc_ids[name] = conn.execute("SELECT max(id) FROM toolchains").fetchone()[0]
    subjects = dict(conn.execute("SELECT sha, subject FROM seed.commits"))
    build_ids: dict[tuple[int, str], int] = {}
    parent = None
    for i in range(n_commits):
        sha = _sha(i)
        src_sha = seed_commits[i % len(seed_commits)][1]
        conn.execute("INSERT INTO commits(tree_id, sha, parent_sha, subject, author, date, generation) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (tree_id, sha, parent, f"bench commit {i}: {subjects.get(src_sha, '')}"[:200],
                      "sizewatch bench <bench@localhost>",
                      time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(1_600_000_000 + 3600 * i)), i + 1))
        cid = conn.execute("SELECT max(id) FROM commits").fetchone()[0]
        for name in names:
            src = by_tc[source[name]][src_sha]
            build_ids[(i, name)] = _copy_build(conn, src, cid, tc_ids[name], cfg_id, inline)
        parent = sha
    # each build against its parent's, and the seed builds they replicate (compared by _compare)
    pairs = []
    for i in range(1, n_commits):
        src_head_sha = seed_commits[i % len(seed_commits)][1]
        src_base_sha = seed_commits[(i - 1) % len(seed_commits)][1]
        for name in names:
            pairs.append((build_ids[(i, name)], build_ids[(i - 1, name)],
                          by_tc[source[name]][src_head_sha], by_tc[source[name]][src_base_sha]))
    # every tenth commit opens a ten-patch series on the commit before it
    for start in range(1, n_commits, 10):
        shas = [_sha(i) for i in range(start, min(start + 10, n_commits))]
        conn.execute("INSERT INTO series(tree_id, message_id, version, subject, author, date, base_sha, status, "
                     "created_at) VALUES (?, ?, 1, ?, 'sizewatch bench <bench@localhost>', '', ?, 'applied', '')",
                     (tree_id, f"<bench-{start}@localhost>", f"[PATCH 0/{len(shas)}] bench series {start}",
                      _sha(start - 1)))
        sid = conn.execute("SELECT max(id) FROM series").fetchone()[0]
        conn.executemany("INSERT INTO series_patches(series_id, position, message_id, subject, commit_sha, status) "
                         "VALUES (?, ?, ?, ?, ?, 'applied')",
                         [(sid, k + 1, f"<bench-{start}-{k + 1}@localhost>",
                           f"[PATCH {k + 1}/{len(shas)}] bench patch", s) for k, s in enumerate(shas)])
    return pairs


def _copy_inline_cost(conn: sqlite3.Connection, oid: int, new_oid: int) -> None:
    """An object's inline-cost rows (0014), names mapped."""
    conn.execute("INSERT INTO inline_costs(object_id, units, scope, inlined_bytes, outside_symbols, no_origin_name, "
                 "empty_instances, undescribed) SELECT ?, units, scope, inlined_bytes, outside_symbols, "
                 "no_origin_name, empty_instances, undescribed FROM seed.inline_costs WHERE object_id = ?",
                 (new_oid, oid))
    conn.execute("INSERT INTO inline_callees(object_id, pos, name_id, decl_file_id, instances, bytes, including, "
                 "empty, callers, units) SELECT ?, c.pos, n.new, d.new, c.instances, c.bytes, c.including, c.empty, "
                 "c.callers, c.units FROM seed.inline_callees c JOIN nmap n ON n.old = c.name_id "
                 "LEFT JOIN nmap d ON d.old = c.decl_file_id WHERE c.object_id = ?", (new_oid, oid))
    conn.execute("INSERT INTO inline_callee_callers(object_id, pos, caller_id, bytes) SELECT ?, p.pos, n.new, p.bytes "
                 "FROM seed.inline_callee_callers p JOIN nmap n ON n.old = p.caller_id WHERE p.object_id = ?",
                 (new_oid, oid))
    conn.execute("INSERT INTO inline_callers(object_id, name_id, size, inlined, own, undescribed) "
                 "SELECT ?, n.new, c.size, c.inlined, c.own, c.undescribed FROM seed.inline_callers c "
                 "JOIN nmap n ON n.old = c.name_id WHERE c.object_id = ?", (new_oid, oid))
    conn.execute("INSERT INTO inline_files(object_id, file_id, callees, instances, bytes) "
                 "SELECT ?, n.new, f.callees, f.instances, f.bytes FROM seed.inline_files f "
                 "JOIN nmap n ON n.old = f.file_id WHERE f.object_id = ?", (new_oid, oid))


def _copy_build(conn: sqlite3.Connection, src: int, commit_id: int, toolchain_id: int, config_id: int,
                inline: bool = False) -> int:
    conn.execute("INSERT INTO builds(commit_id, toolchain_id, config_id, target, status, method, seconds, started_at, "
                 "log_z, errors, analysis_version) SELECT ?, ?, ?, target, status, method, seconds, started_at, log_z, "
                 "errors, analysis_version FROM seed.builds WHERE id = ?", (commit_id, toolchain_id, config_id, src))
    bid = conn.execute("SELECT max(id) FROM builds").fetchone()[0]
    for (oid,) in conn.execute("SELECT id FROM seed.objects WHERE build_id = ?", (src,)).fetchall():
        conn.execute("INSERT INTO objects(build_id, path, sha256, text, data, bss, sections, facts_z) "
                     "SELECT ?, path, sha256, text, data, bss, sections, facts_z FROM seed.objects WHERE id = ?",
                     (bid, oid))
        new_oid = conn.execute("SELECT max(id) FROM objects").fetchone()[0]
        conn.execute("INSERT INTO symbols(object_id, name_id, size, letter, section_id, offset) "
                     "SELECT ?, n.new, s.size, s.letter, sec.new, s.offset FROM seed.symbols s "
                     "JOIN nmap n ON n.old = s.name_id LEFT JOIN nmap sec ON sec.old = s.section_id "
                     "WHERE s.object_id = ?", (new_oid, oid))
        conn.execute("INSERT INTO functions(object_id, name_id, size, declared, out_of_line, inlined_count, "
                     "inlined_bytes, callers, facts) SELECT ?, n.new, f.size, f.declared, f.out_of_line, "
                     "f.inlined_count, f.inlined_bytes, f.callers, f.facts FROM seed.functions f "
                     "JOIN nmap n ON n.old = f.name_id WHERE f.object_id = ?", (new_oid, oid))
        conn.execute("INSERT INTO remarks(object_id, callee_id, caller_id, passed, reason, location) "
                     "SELECT ?, ce.new, cr.new, r.passed, r.reason, r.location FROM seed.remarks r "
                     "LEFT JOIN nmap ce ON ce.old = r.callee_id LEFT JOIN nmap cr ON cr.old = r.caller_id "
                     "WHERE r.object_id = ?", (new_oid, oid))
        if inline:
            _copy_inline_cost(conn, oid, new_oid)
    conn.execute("INSERT INTO findings(build_id, base_build_id, kind, function, severity, message, data) "
                 "SELECT ?, NULL, kind, function, severity, message, data FROM seed.findings "
                 "WHERE build_id = ? AND base_build_id IS NULL", (bid, src))
    return bid
