"""``sizewatch run`` end to end on the real linux-source-6.1 tree with the example series, the
store's behaviour under kill -9 and concurrent readers, and bad input.

Objects come from the shared cache (the example_series fixture builds them once per CI run),
so these tests spend their time in the pipeline and the store, not in kbuild.
"""
from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MBOX = ROOT / "toolchains" / "examples" / "rmqueue-always-inline.mbox"
TOOLCHAINS = "gcc-12,clang-19"


def sizewatch_cmd() -> list[str]:
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "cli"]


def run_cli(*args, db: Path, check: bool = False, timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run([*sizewatch_cmd(), *map(str, args), "--db", str(db)], capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sizewatch {' '.join(map(str, args))} failed:\n{proc.stderr}")
    return proc


def run_series(db: Path, *extra, check=True) -> subprocess.CompletedProcess:
    return run_cli("run", "--series", MBOX, "--toolchains", TOOLCHAINS, *extra, db=db, check=check)


@pytest.fixture(scope="module")
def built(example_series):
    """The example series' objects under both toolchains (cached), by toolchain."""
    return {tc: example_series(tc) for tc in TOOLCHAINS.split(",")}


@pytest.fixture(scope="module")
def reference(built, example_store):
    """One uninterrupted run into its own store (conftest's, shared with the dashboard's tests): its
    report is what every other run must print."""
    return example_store


def built_key() -> str:
    from toolchains.kbuild import Config
    return Config().key


def _counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("builds", "objects", "symbols", "commits", "series", "series_patches")}
    finally:
        conn.close()


def _check_consistent(db: Path) -> None:
    """No half-written build: every ok build has its object and symbols, every object a build."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        bad = conn.execute("""SELECT b.id FROM builds b WHERE b.status = 'ok' AND NOT EXISTS
                              (SELECT 1 FROM objects o JOIN symbols s ON s.object_id = o.id WHERE o.build_id = b.id)
                           """).fetchall()
        assert bad == []
        assert conn.execute("SELECT count(*) FROM objects o WHERE NOT EXISTS "
                            "(SELECT 1 FROM builds b WHERE b.id = o.build_id)").fetchone()[0] == 0
    finally:
        conn.close()


@pytest.mark.kernel
def test_series_end_to_end(built, reference, bloat_o_meter, tmp_path):
    db, proc = reference
    out = proc.stdout
    assert "6 built, 0 re-analyzed, 0 already stored, 0 failed" in proc.stderr
    from db.store import open_store
    with open_store(db) as store:        # the facts and remarks behind the findings are stored too
        b = store.find_build("linux-6.1", built["gcc-12"][1].commit, "gcc-12", built_key(), "mm/page_alloc.o")
        fn = {f.name: f for f in store.functions_for(b.id)}
        assert fn["__rmqueue_smallest"].declared == "inline" and fn["__rmqueue_smallest"].out_of_line
        assert fn["__rmqueue_smallest"].facts["reasons"]
        assert any(r.callee == "__rmqueue_smallest" and not r.passed for r in store.remarks_for(b.id))
        assert "__rmqueue_smallest" in store.object_facts(b.id)["mm/page_alloc.o"]["functions"]
    # per patch and toolchain (clang-19 stock -> patch 1 included): the table is exactly the kernel's
    # scripts/bloat-o-meter on the two objects, under its own heading
    pairs = 0
    for tc, objs in built.items():
        for old, new in zip(objs, objs[1:]):
            ref = bloat_o_meter(old.object_path, new.object_path)
            assert ref.returncode == 0 and ref.stdout.startswith(b"add/remove: "), ref.stderr
            want = ref.stdout.decode()
            (patch,) = [p for p in out.split("=== ")[1:] if p.split()[1] == new.commit[:12]]
            section = patch.split(f"--- {tc} ")[1].split("\n--- ")[0]
            assert want in section, f"{tc} {new.subject}: bloat-o-meter's table missing from the report"
            pairs += 1
    assert pairs == 4
    patches = out.split("\n=== ")[1:]
    assert len(patches) == 2
    for tc in TOOLCHAINS.split(","):
        p1 = patches[0].split(f"--- {tc} ")[1].split("\n--- ")[0]
        p2 = patches[1].split(f"--- {tc} ")[1].split("\n--- ")[0]
        # patch 1: the helpers appear out of line; patch 2: they go and get_page_from_freelist grows
        for fn in ("__rmqueue_smallest", "__rmqueue_fallback"):
            assert any(ln.split()[0] == fn and ln.split()[1] == "-" for ln in p1.splitlines() if ln.strip()), (tc, fn)
            assert any(ln.split()[0] == fn and ln.split()[2] == "-" for ln in p2.splitlines() if ln.strip()), (tc, fn)
        gpff = [ln for ln in p2.splitlines() if ln.startswith("get_page_from_freelist ")]
        assert gpff and int(gpff[0].split()[-1]) > 1000, tc
        # the findings: patch 1 pushes the helpers out of line with the compiler's own reason,
        # patch 2 inlines them again, pushes steal_suitable_fallback out and grows get_page_from_freelist
        reason = "--param max-inline-insns" if tc.startswith("gcc") else "too costly to inline (cost="
        for fn in ("__rmqueue_smallest", "__rmqueue_fallback"):
            line = [ln for ln in p1.splitlines() if ln.startswith(f"  newly_out_of_line: {fn} is now out of line")]
            assert line and "; compiler: " in line[0] and reason in line[0], (tc, fn, p1)
            assert f"  newly_inlined: {fn} is now inlined" in p2, (tc, fn)
        assert "  pushed_out_of_line: steal_suitable_fallback " in p2, tc
        assert "  boundary_crossing: hot get_page_from_freelist grew" in p2, tc
    # a second run builds nothing and prints the same report from the store
    again = run_series(db)
    assert "0 built, 0 re-analyzed, 6 already stored" in again.stderr
    assert again.stdout == out
    # report and history from the store alone
    sha2 = built["gcc-12"][2].commit
    rep = run_cli("report", sha2[:10], "--toolchains", "gcc-12", db=db, check=True)
    assert bloat_o_meter(built["gcc-12"][1].object_path, built["gcc-12"][2].object_path).stdout.decode() in rep.stdout
    series = run_cli("report", "1", db=db, check=True)
    assert series.stdout == out
    js = run_cli("report", sha2, "--json", db=db, check=True)
    import json
    doc = json.loads(js.stdout)
    assert {t["toolchain"] for t in doc["toolchains"]} == {"gcc-12", "clang-19"}
    md = run_cli("report", "1", "--markdown", db=db, check=True)
    assert "| `get_page_from_freelist` |" in md.stdout
    hist = run_cli("history", "get_page_from_freelist", "--toolchain", "clang-19", db=db, check=True)
    rows = [ln.split() for ln in hist.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == [c.commit[:12] for c in built["clang-19"]]
    assert all(r[1] == "clang-19" for r in rows)
    sizes = [int(r[2]) for r in rows]
    assert sizes[2] - sizes[1] > 1000                       # patch 2 grows it


@pytest.mark.kernel
def test_range_run_matches_series(built, reference, tmp_path):
    """A commit range over the applied patches gives the same tables (same shas, same store rows)."""
    db, proc = reference
    base, p1, p2 = (c.commit for c in built["gcc-12"])
    got = run_cli("run", f"{base}..{p2}", "--toolchains", TOOLCHAINS, db=db, check=True)
    assert "0 built" in got.stderr
    for chunk in got.stdout.split("=== ")[1:]:
        body = chunk.split("\n", 1)[1]
        assert body in proc.stdout


OLD_ANALYSIS = textwrap.dedent("""
    import sys
    import ci.pipeline.analysis
    ci.pipeline.analysis.ANALYSIS_VERSION = 0          # as if stored by a sizewatch without inline analysis
    from cli.main import main
    main(sys.argv[1:])
""")


@pytest.mark.kernel
def test_builds_of_an_older_analysis_are_reanalyzed_without_rebuilding(built, reference, tmp_path):
    db = tmp_path / "s.db"
    proc = subprocess.run([sys.executable, "-c", OLD_ANALYSIS, "run", "--series", str(MBOX), "--toolchains",
                           TOOLCHAINS, "--db", str(db)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    again = run_series(db)
    assert "0 built, 6 re-analyzed, 0 already stored" in again.stderr
    assert "(kbuild" not in again.stderr                  # the objects came from the cache
    assert again.stdout == reference[1].stdout
    assert _counts(db) == _counts(reference[0])


KILL_WRAPPER = textwrap.dedent("""
    import os, signal, sys
    from db.store import SqliteStore
    calls = {"n": 0}
    orig = SqliteStore._insert_findings
    def dying(conn, build_id, findings, base_build_id=None):
        calls["n"] += 1
        if calls["n"] == int(os.environ["DIE_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)     # kill -9 inside record_build's transaction
        return orig(conn, build_id, findings, base_build_id)
    SqliteStore._insert_findings = staticmethod(dying)
    from cli.main import main
    main(sys.argv[1:])
""")


@pytest.mark.kernel
def test_resume_after_kill_inside_a_transaction(built, reference, tmp_path):
    db = tmp_path / "s.db"
    env = {**os.environ, "DIE_AT": "3"}
    proc = subprocess.run([sys.executable, "-c", KILL_WRAPPER, "run", "--series", str(MBOX), "--toolchains",
                           TOOLCHAINS, "--db", str(db)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == -signal.SIGKILL
    _check_consistent(db)
    c = _counts(db)
    assert c["builds"] == 2 and c["objects"] == 2     # the third build's rows are all gone
    again = run_series(db)
    assert "4 built, 0 re-analyzed, 2 already stored" in again.stderr
    assert again.stdout == reference[1].stdout
    _check_consistent(db)
    assert _counts(db) == _counts(reference[0])


@pytest.mark.kernel
def test_resume_after_kill_of_a_running_sizewatch(built, reference, tmp_path):
    """kill -9 of a real ``sizewatch run`` as soon as it has stored something; the next run completes."""
    db = tmp_path / "s.db"
    p = subprocess.Popen([*sizewatch_cmd(), "run", "--series", str(MBOX), "--toolchains", TOOLCHAINS, "--db", str(db)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    stored = 0
    while time.monotonic() < deadline and p.poll() is None:
        if db.exists():
            try:
                conn = sqlite3.connect(db, timeout=5)
                stored = conn.execute("SELECT count(*) FROM builds").fetchone()[0]
                conn.close()
            except sqlite3.OperationalError:
                stored = 0                               # schema not created yet
            if stored:
                break
        time.sleep(0.005)
    assert p.poll() is None, "the run ended before it was killed: nothing was tested"
    p.send_signal(signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL
    _check_consistent(db)
    before = _counts(db)["builds"]
    assert 0 < before < 6, before             # killed in the middle: some stored, some not
    again = run_series(db)
    assert f"{6 - before} built, 0 re-analyzed, {before} already stored" in again.stderr
    assert again.stdout == reference[1].stdout
    assert _counts(db) == _counts(reference[0])


READER = textwrap.dedent("""
    import sys, time, json
    from db.store import open_store
    from ci.reports.model import commit_report, series_report
    db, stop, sha = sys.argv[1], sys.argv[2], sys.argv[3]
    import os
    s = open_store(db)
    n = errors = 0
    msgs = []
    while not os.path.exists(stop):
        try:
            s.list_commits(); s.list_series()
            if s.get_commit(sha):
                commit_report(s, sha)
            s.function_history("get_page_from_freelist")
            n += 1
        except Exception as e:
            errors += 1
            msgs.append(f"{type(e).__name__}: {e}")
    print(json.dumps({"queries": n, "errors": errors, "messages": msgs[:5]}))
""")

WRITER = textwrap.dedent("""
    import sys
    from ci.pipeline.objects import object_record
    from db.models import BuildRecord, Commit, ConfigInfo
    from db.store import open_store
    db, obj, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = open_store(db)
    rec = object_record(obj, "mm/page_alloc.o")
    for i in range(n):
        sha = f"{i:040x}"
        s.record_build(BuildRecord("stress", Commit(sha, f"{i - 1:040x}" if i else None, f"c{i}"), "gcc-12",
                                   "v", ConfigInfo("k"), "mm/page_alloc.o", "ok", objects=[rec], log="x" * 10000))
    print("wrote", n)
""")


@pytest.mark.kernel
def test_concurrent_readers_while_a_run_writes(built, tmp_path):
    db = tmp_path / "s.db"
    stop = tmp_path / "stop"
    sha = built["gcc-12"][2].commit
    from db.store import open_store
    open_store(db).close()
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(db), str(stop), sha], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(built["gcc-12"][0].object_path), "150"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        run = run_series(db, check=False)          # a real run writing at the same time
        w_out, w_err = writer.communicate(timeout=600)
        # and CLI readers against the finished run while the store is still shared
        rep = run_cli("report", sha, db=db)
    finally:
        stop.touch()
    import json
    results = [json.loads(r.communicate(timeout=120)[0]) for r in readers]
    assert run.returncode == 0 and "locked" not in run.stderr, run.stderr
    assert writer.returncode == 0, w_err
    assert rep.returncode == 0, rep.stderr
    for r in results:
        assert r["errors"] == 0, r["messages"]
        assert r["queries"] > 10
    _check_consistent(db)


def _broken_mbox(tmp_path: Path) -> Path:
    """The example series with patch 2's context changed so that git am rejects it."""
    text = MBOX.read_text()
    first, second = text.split("\nFrom 8bf3e50fb", 1)
    second = second.replace("-static inline\n+static __always_inline\n struct page *__rmqueue_smallest",
                            "-static inline NOT_IN_THE_TREE\n+static __always_inline\n struct page *__rmqueue_smallest")
    out = tmp_path / "broken.mbox"
    out.write_text(first + "\nFrom 8bf3e50fb" + second)
    return out


@pytest.mark.kernel
def test_series_that_does_not_apply(built, tmp_path):
    db = tmp_path / "s.db"
    mbox = _broken_mbox(tmp_path)
    proc = run_cli("run", "--series", mbox, "--toolchains", TOOLCHAINS, db=db)
    assert proc.returncode == 1
    err = [ln for ln in proc.stderr.splitlines() if ln.startswith("sizewatch: patch")]
    assert len(err) == 1 and "does not apply" in err[0] and "Traceback" not in proc.stderr
    assert "[2] [PATCH 2/2]" in proc.stdout and "failed: " in proc.stdout   # reported as such
    from db.store import open_store
    s = open_store(db)
    (ser,) = s.list_series()
    assert ser.status == "failed" and [p.status for p in ser.patches] == ["applied", "failed"]
    assert ser.patches[0].commit_sha == built["gcc-12"][1].commit       # patch 1 was still built
    assert {b.toolchain for b in s.builds_for_commit(ser.patches[0].commit_sha)} == {"gcc-12", "clang-19"}


@pytest.mark.kernel
def test_bad_input_is_one_line(built, tmp_path):
    db = tmp_path / "s.db"
    cases = [
        (("run", "deadbeef..HEAD", "--toolchains", "gcc-12"), "unknown revision"),
        (("run", "--series", tmp_path / "missing.mbox"), "no such mbox"),
        (("run", "--series", Path(__file__)), "no patches"),
        (("run", "HEAD", "--toolchains", "gcc-99"), "unknown toolchain"),
        (("run",), "either a commit range"),
        (("report", "deadbeef"), "no such commit or series"),
        (("report", "12345"), "not in the store"),
        (("history", "no_such_function"), "not found"),
    ]
    for args, msg in cases:
        proc = run_cli(*args, db=db)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("sizewatch: ") and msg in lines[0], (args, proc.stderr)
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(os.urandom(8192))
    for args in (("report", "1"), ("run", "--series", MBOX, "--toolchains", "gcc-12"), ("history", "x")):
        proc = run_cli(*args, db=corrupt)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and "corrupt.db" in lines[0], proc.stderr


def _error_mbox(tmp_path: Path, base: str) -> Path:
    """A one-patch series that makes mm/page_alloc.c fail to compile (an #error line)."""
    import difflib
    from toolchains.git import git
    from toolchains.source import ensure_source
    old = git(ensure_source("6.1").path, "show", f"{base}:mm/page_alloc.c").splitlines(keepends=True)
    new = old[:20] + ["#error sizewatch pipeline test: this patch does not build\n"] + old[20:]
    diff = "".join(difflib.unified_diff(old, new, "a/mm/page_alloc.c", "b/mm/page_alloc.c", n=3))
    out = tmp_path / "error.mbox"
    out.write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Test <test@localhost>\nDate: Sun, 22 Nov 2026 09:00:00 +0000\n"
        "Subject: [PATCH] mm/page_alloc: break the build\nMessage-Id: <error-1@localhost>\n\n"
        "A patch that does not compile.\n---\n"
        f"{diff}\n-- \n2.39.5\n\nbase-commit: {base}\n")
    return out


@pytest.mark.kernel
def test_build_failure_is_a_stored_result(built, tmp_path):
    db = tmp_path / "s.db"
    base = built["gcc-12"][0].commit
    mbox = _error_mbox(tmp_path, base)
    proc = run_cli("run", "--series", mbox, "--toolchains", "gcc-12", db=db)
    assert proc.returncode == 0, proc.stderr                    # a failed build is a result, not a crash
    assert "2 built, 0 re-analyzed, 0 already stored, 1 failed" in proc.stderr
    assert "build failed:" in proc.stdout and "#error sizewatch pipeline test" in proc.stdout
    from db.store import open_store
    with open_store(db) as s:
        (ser,) = s.list_series()
        (b,) = s.builds_for_commit(ser.patches[0].commit_sha)
        assert b.status == "failed" and any("#error" in e for e in b.errors)
        assert s.objects_for(b.id) == []
    again = run_cli("run", "--series", mbox, "--toolchains", "gcc-12", db=db)
    assert "0 built, 0 re-analyzed, 2 already stored" in again.stderr and again.stdout == proc.stdout
