"""Pages revalidated and cached by the store's change counters (migration 0012, web.cache): ETags
and 304s, the rendered-page cache shared by server processes, gzip, and no stale page after a write.
Stores here hold real objects compiled by gcc-12 (no kernel needed); the kernel-marked test at the
end writes with a real ``sizewatch run``."""
from __future__ import annotations

import gzip
import json
import re
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ci.pipeline.objects import object_record
from conftest import sizewatch_cmd
from db.models import BuildRecord, Commit, ConfigInfo, FunctionRow, Series, SeriesPatch
from db.store import open_store

FIXTURES = Path(__file__).resolve().parent / "fixtures"
A, B, C = "a" * 40, "b" * 40, "c" * 40


def _record(sha: str, parent: str | None, obj: Path, toolchain: str = "gcc-12") -> BuildRecord:
    o = object_record(obj, "x.o")
    o.functions = [FunctionRow("split_me", 10, "plain", True, 0, 0, 0, {"name": "split_me"})]
    return BuildRecord("t", Commit(sha, parent, f"subject {sha[:4]}", "A <a@b>", "2024-01-01"),
                       toolchain, f"{toolchain} (Debian) 1.0",
                       ConfigInfo("defconfig-x", config_hash="h", config_text="CONFIG_X=y\n"),
                       "x.o", "ok", objects=[o], log="built\n")


@pytest.fixture
def small_store(store_db, compile_c):
    """Three commits under gcc-12, b compared with a, a series of b and c; in an sqlite file or in
    PostgreSQL (store_db: every test here runs on both)."""
    a = compile_c("gcc-12", FIXTURES / "symbols.c", name="cache-a.o")
    b = compile_c("gcc-12", FIXTURES / "symbols.c", "-DV=2", name="cache-b.o")
    db = store_db
    with open_store(db) as s:
        ba = s.record_build(_record(A, None, a))
        bb = s.record_build(_record(B, A, b))
        s.record_build(_record(C, B, b))
        s.record_comparison(bb, ba, [])
        s.record_series(Series("t", "<cover@x>", "[PATCH 0/2] s", base_sha=A,
                               patches=[SeriesPatch(1, "p1", commit_sha=B), SeriesPatch(2, "p2", commit_sha=C)]))
    yield db
    if isinstance(db, str):                 # the servers' page cache of a PostgreSQL store (under the cache dir)
        from web.settings import WebSettings
        cache = WebSettings(db).page_cache
        for p in (cache, cache.with_name(cache.name + "-wal"), cache.with_name(cache.name + "-shm")):
            p.unlink(missing_ok=True)


@pytest.fixture
def app_for(tmp_path):
    from web.app import create_app
    from web.settings import WebSettings
    def app(db, **kw):
        if isinstance(db, str):             # PostgreSQL: the page cache in the test's directory
            kw.setdefault("pages_file", tmp_path / "store.pages")
        return create_app(WebSettings(db, jobs_dir=tmp_path / "jobs", **kw))
    return app


def test_counters_move_with_the_rows_under_each_page(small_store, compile_c):
    a = compile_c("gcc-12", FIXTURES / "symbols.c", name="cache-a.o")
    pages = {"index": {}, "a": {"commit": A}, "b": {"commit": B}, "c": {"commit": C}, "series": {"series": 1}}
    with open_store(small_store) as s:
        before = {k: s.change_stamp(**v) for k, v in pages.items()}
        s.record_build(_record(C, B, a, toolchain="clang-19"))       # a new build of c only
        after = {k: s.change_stamp(**v) for k, v in pages.items()}
        # the store, c's page and the series holding c move; a's and b's pages do not
        assert {k for k in pages if before[k] != after[k]} == {"index", "c", "series"}
        s.record_series(Series("t", "<cover@x>", "[PATCH v2 0/2] s", version=2, base_sha=A,
                               patches=[SeriesPatch(1, "p1", commit_sha=B)]))
        again = {k: s.change_stamp(**v) for k, v in pages.items()}
        # a new version of the series: its page, its patches' pages (they list their series)
        assert {k for k in pages if after[k] != again[k]} == {"index", "b", "c", "series"}


def test_counters_and_migrations(small_store, tmp_path):
    from db import migrate
    from pgserver import RawSql
    conn = RawSql(small_store).conn
    n = conn.execute("SELECT n FROM change_counters WHERE scope = 'schema'").fetchone()[0]
    d = tmp_path / "mig"
    d.mkdir()
    for m in migrate.MIGRATIONS_DIR.glob("*.sql"):              # with the PostgreSQL twins
        (d / m.name).write_text(m.read_text())
    (d / "0999_more.sql").write_text("CREATE TABLE more (x INTEGER);\n")
    assert migrate.migrate(conn, directory=d) == [999]
    assert conn.execute("SELECT n FROM change_counters WHERE scope = 'schema'").fetchone()[0] == n + 1
    # a commit row re-recorded unchanged bumps nothing; a changed subject bumps its commit
    c = conn.execute("SELECT n FROM change_counters WHERE scope = 'store'").fetchone()[0]
    conn.execute("UPDATE commits SET subject = subject")
    assert conn.execute("SELECT n FROM change_counters WHERE scope = 'store'").fetchone()[0] == c
    conn.execute("UPDATE commits SET subject = 'new' WHERE sha = ?", (A,))
    assert conn.execute("SELECT n FROM change_counters WHERE scope = 'store'").fetchone()[0] == c + 1
    conn.close()


def test_etag_304_and_fresh_after_a_write(small_store, app_for, compile_c):
    client = app_for(small_store).test_client()
    pages = [f"/commit/{C}", f"/api/commit/{C}", f"/commit/{C}.txt", f"/matrix/{C}", "/series/1", "/api/series/1",
             "/", "/api/", "/function/split_me", "/api/function/split_me"]
    etags = {}
    for p in pages:
        r = client.get(p)
        assert r.status_code == 200, p
        assert r.headers["Cache-Control"] == "public, no-cache" and "Accept-Encoding" in r.headers["Vary"]
        assert r.headers["X-Sizewatch-Cache"] == "miss"
        etags[p] = r.headers["ETag"]
        assert etags[p].startswith('W/"')
        again = client.get(p)
        assert again.headers["X-Sizewatch-Cache"] == "hit" and again.data == r.data and again.headers["ETag"] == etags[p]
        assert client.get(p, headers={"If-None-Match": etags[p]}).status_code == 304
    assert len(set(etags.values())) == len(pages)          # one key per URL
    assert "clang-19" not in client.get(f"/commit/{C}").get_data(as_text=True)
    # untouched: b's page keeps its ETag across a write to c
    b_tag = client.get(f"/commit/{B}").headers["ETag"]
    a = compile_c("gcc-12", FIXTURES / "symbols.c", name="cache-a.o")
    with open_store(small_store) as s:
        s.record_build(_record(C, B, a, toolchain="clang-19"))
    for p in pages:
        r = client.get(p, headers={"If-None-Match": etags[p]})
        assert r.status_code == 200 and r.headers["ETag"] != etags[p], p
        assert r.headers["X-Sizewatch-Cache"] == "miss"
    assert "clang-19" in client.get(f"/commit/{C}").get_data(as_text=True)
    assert "clang-19" in client.get("/series/1").get_data(as_text=True)
    assert client.get(f"/commit/{B}", headers={"If-None-Match": b_tag}).status_code == 304
    # errors are never cached or tagged
    r = client.get("/commit/dddddddd")
    assert r.status_code == 404 and "ETag" not in r.headers


def test_servers_with_and_without_a_token_share_the_cache_not_the_pages(small_store, app_for):
    """The page cache beside the store is shared by every server on it; a page with the re-run form
    (a server with a token) is never sent by a read-only server, nor the other way round."""
    ro, rw = app_for(small_store).test_client(), app_for(small_store, token="t0k").test_client()
    for first, second in ((rw, ro), (ro, rw)):
        url = f"/commit/{C}?target=order{id(first)}.o"         # a parameter of the page: its own key
        a, b = first.get(url), second.get(url)
        assert a.headers["X-Sizewatch-Cache"] == b.headers["X-Sizewatch-Cache"] == "miss"
        assert a.headers["ETag"] != b.headers["ETag"]
    assert 'name="token"' in rw.get(f"/commit/{C}").get_data(as_text=True)
    assert "read-only" in ro.get(f"/commit/{C}").get_data(as_text=True)
    assert 'name="token"' not in ro.get(f"/commit/{C}").get_data(as_text=True)


def test_gzip_for_pages_and_static_files(small_store, app_for):
    client = app_for(small_store).test_client()
    for p in [f"/commit/{B}", "/api/", "/static/sizewatch.css", "/static/vendor/chart.umd.min.js"]:
        plain = client.get(p)
        zipped = client.get(p, headers={"Accept-Encoding": "gzip, br"})
        assert plain.status_code == zipped.status_code == 200, p
        assert "Content-Encoding" not in plain.headers
        assert zipped.headers["Content-Encoding"] == "gzip", p
        assert gzip.decompress(zipped.data) == plain.data, p
        assert len(zipped.data) < len(plain.data) / 2, p


def test_page_cache_is_bounded(small_store, app_for):
    app = app_for(small_store, pages_bytes=64 << 10)
    client = app.test_client()
    for n in range(300):                     # 300 distinct pages of ~1-2 kB compressed each
        assert client.get(f"/commit/{B}?target=t{n}.o").status_code == 200
    cache = app.extensions["sizewatch.pages"]
    cache.trim()
    pages, size = cache.stats()
    assert 0 < size <= 64 << 10 and pages < 300
    assert client.get(f"/commit/{B}?target=t299.o").headers["X-Sizewatch-Cache"] == "hit"     # the newest stay


def test_only_the_parameters_a_page_reads_make_its_key(small_store, app_for):
    """Issue 27: 300 ``/?junk=N`` made 300 cache entries (and could evict real pages). Parameters a
    page does not read are left out of its key: they are the same page, one entry."""
    app = app_for(small_store, pages_bytes=64 << 10)
    client = app.test_client()
    real = client.get(f"/commit/{B}")
    assert real.headers["X-Sizewatch-Cache"] == "miss"
    cache = app.extensions["sizewatch.pages"]
    before = cache.stats()[0]
    first = client.get("/?junk=0")
    for n in range(1, 300):
        r = client.get(f"/?junk={n}&utm_source=x{n}")
        assert r.status_code == 200 and r.headers["X-Sizewatch-Cache"] == "hit" and r.data == first.data
        assert r.headers["ETag"] == first.headers["ETag"] == client.get("/").headers["ETag"]
    assert cache.stats()[0] == before + 1
    assert client.get(f"/commit/{B}?junk=1").headers["X-Sizewatch-Cache"] == "hit"   # the real page stayed
    # a parameter the page reads is its own page, its value included (the first one, as the page reads it)
    assert client.get("/?commits=1").headers["ETag"] != first.headers["ETag"]
    assert client.get("/?commits=1&commits=2").headers["ETag"] == client.get("/?commits=1").headers["ETag"]
    assert client.get("/?commits=2").headers["ETag"] != client.get("/?commits=1").headers["ETag"]


def test_each_cached_page_reads_only_its_key_parameters(small_store, app_for):
    """web.cache.PARAMS against what each cached endpoint really reads from the query string: a
    parameter read but not listed would make two different pages share one key."""
    from flask import request
    from werkzeug.datastructures import ImmutableMultiDict
    from web.cache import PARAMS, STAMPS
    read: set[str] = set()

    class Recording(ImmutableMultiDict):
        def get(self, key, *a, **kw):
            read.add(key)
            return super().get(key, *a, **kw)

        def getlist(self, key, *a, **kw):
            read.add(key)
            return super().getlist(key, *a, **kw)

        def __getitem__(self, key):
            read.add(key)
            return super().__getitem__(key)

        def __contains__(self, key):
            read.add(key)
            return super().__contains__(key)

        def __iter__(self):
            read.add("*")
            return super().__iter__()

        def items(self, *a, **kw):
            read.add("*")
            return super().items(*a, **kw)

        def to_dict(self, *a, **kw):
            read.add("*")
            return super().to_dict(*a, **kw)

    app = app_for(small_store, pages_bytes=0)         # every request rendered
    app.request_class = type("Req", (app.request_class,), {"parameter_storage_class": Recording})
    seen: dict[str, set[str]] = {}

    @app.after_request
    def note(resp):
        seen.setdefault(request.endpoint, set()).update(read - {"*"} if "*" not in read else {"*"})
        return resp
    client = app.test_client()
    urls = ["/", "/api/", "/function/split_me", "/api/function/split_me", f"/commit/{C}", f"/api/commit/{C}",
            f"/commit/{C}.txt", f"/matrix/{C}", f"/api/matrix/{C}", "/series/1", "/api/series/1", "/series/1.txt"]
    query = "?" + "&".join(f"{n}=1" for n in sorted({n for names in PARAMS.values() for n in names}))
    for url in urls:
        for q in ("", query):
            read.clear()
            client.get(url + q)
    assert set(seen) >= set(STAMPS) and set(PARAMS) == set(STAMPS)
    for ep in STAMPS:
        assert seen[ep] <= set(PARAMS[ep]), (ep, seen[ep])


def start_server(db: Path, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*sizewatch_cmd(), "serve", "--db", str(db), "--host", "127.0.0.1", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
    if not m:
        proc.kill()
        pytest.fail(f"sizewatch serve did not start: {line}{proc.stderr.read()}")
    return proc, m[1]


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def fetch(url: str, **headers) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_two_servers_several_workers_agree_after_a_write(small_store, compile_c):
    """Two ``sizewatch serve`` (gunicorn, two worker processes each) on one store: the same page,
    the same ETag from every process; after a build is written, new content from all of them."""
    servers = [start_server(small_store, "--workers", "2"), start_server(small_store, "--workers", "2")]
    try:
        url = f"/commit/{C}"
        first = [fetch(base + url, **{"Accept-Encoding": "gzip"}) for _, base in servers for _ in range(4)]
        assert {st for st, _, _ in first} == {200}
        assert len({h["ETag"] for _, h, _ in first}) == 1
        assert len({gzip.decompress(body) for _, _, body in first}) == 1
        assert {h["X-Sizewatch-Cache"] for _, h, _ in first[1:]} == {"hit"}      # shared by the processes
        assert b"clang-19" not in gzip.decompress(first[0][2])
        tag = first[0][1]["ETag"]
        a = compile_c("gcc-12", FIXTURES / "symbols.c", name="cache-a.o")
        with open_store(small_store) as s:
            s.record_build(_record(C, B, a, toolchain="clang-19"))
        after = [fetch(base + url, **{"If-None-Match": tag}) for _, base in servers for _ in range(4)]
        assert {st for st, _, _ in after} == {200}
        assert len({h["ETag"] for _, h, _ in after}) == 1 and after[0][1]["ETag"] != tag
        assert all(b"clang-19" in body for _, _, body in after)
        assert fetch(servers[0][1] + url, **{"If-None-Match": after[0][1]["ETag"]})[0] == 304
    finally:
        errs = [stop(p) for p, _ in servers]
    assert not any("Traceback" in e for e in errs), errs


RENDERED = re.compile(r"page rendered: (\S+) key (\w+) \((claimed|waited ([\d.]+) s for another render|no page cache)\) "
                      r"in (\d+) ms")


def test_readers_of_a_new_page_wait_for_one_render(small_store):
    """A mail goes out: many readers at once ask two servers (two workers each) for the same page no
    one has rendered yet. One request renders it; the others get its bytes (waited for, or from the
    cache): the same body and ETag for all.

    The renders are counted in the servers' own log (``--log-level info``: a line per render and why),
    not inferred from timing: every ``miss`` answer is a logged render, exactly one render per page
    claimed it, and any other render is one the log shows waiting the whole WAIT_FOR_RENDER first
    (a loaded machine may take that long to render; a reader that did not wait would be the bug).
    A second claim is only right after the first render outlived its claim (CLAIM_SECONDS)."""
    from concurrent.futures import ThreadPoolExecutor
    from web.cache import WAIT_FOR_RENDER
    from web.pagecache import CLAIM_SECONDS
    servers = [start_server(small_store, "--workers", "2", "--threads", "4", "--log-level", "info"),
               start_server(small_store, "--workers", "2", "--threads", "4", "--log-level", "info")]
    states = {}
    try:
        for round_ in range(3):
            url = f"/commit/{C}?target=herd{round_}.o"        # a new page each round
            with ThreadPoolExecutor(16) as pool:
                got = list(pool.map(lambda i: fetch(servers[i % 2][1] + url), range(16)))
            assert {st for st, _, _ in got} == {200}
            assert len({body for _, _, body in got}) == 1 and len({h["ETag"] for _, h, _ in got}) == 1
            states[url] = [h["X-Sizewatch-Cache"] for _, h, _ in got]
            assert set(states[url]) <= {"miss", "waited", "hit"}, states[url]
    finally:
        errs = [stop(p) for p, _ in servers]
    assert not any("Traceback" in e for e in errs), errs
    renders = [m for e in errs for m in RENDERED.finditer(e)]
    for url, seen in states.items():
        mine = [m for m in renders if m[1] == url]
        assert len(mine) == seen.count("miss") >= 1, (url, seen, [m[0] for m in mine])
        claimed = [m for m in mine if m[3] == "claimed"]
        assert len(claimed) == 1 or max(int(m[5]) for m in claimed) > CLAIM_SECONDS * 1000, [m[0] for m in mine]
        for m in mine:
            assert m[3] == "claimed" or float(m[4]) >= WAIT_FOR_RENDER - 0.1, m[0]     # gave up only after the wait


def test_serve_reports_a_busy_port_in_one_line(small_store):
    proc, base = start_server(small_store)
    try:
        port = base.rsplit(":", 1)[1]
        r = subprocess.run([*sizewatch_cmd(), "serve", "--db", str(small_store), "--host", "127.0.0.1", "--port", port],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot listen" in r.stderr
    finally:
        stop(proc)


@pytest.mark.kernel
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_page_is_new_right_after_sizewatch_run(request, kind, tmp_path):
    """The issue's case: readers hold a patch page (and its series) from two server processes; a
    ``sizewatch run`` stores a new build for that commit; the next read from either process is the
    new page (new ETag, the new toolchain's table), never the cached one."""
    from conftest import EXAMPLE_MBOX, EXAMPLE_TOOLCHAINS
    from pgserver import RawSql
    if kind == "sqlite":
        db = tmp_path / "store.db"
        src, dst = sqlite3.connect(request.getfixturevalue("example_store")[0]), sqlite3.connect(db)
        src.backup(dst)
        src.close()
        dst.close()
    else:                                   # the example store written by sizewatch run --db postgresql://
        db = request.getfixturevalue("pg_server").database(template=request.getfixturevalue("example_pg_store")[0])
    with open_store(db) as s:
        (ser,) = s.list_series()
        head = ser.patches[-1].commit_sha
    # the head patch without its clang-19 build, as when the run had not got to it yet
    dst = RawSql(db)
    if kind == "sqlite":
        dst.execute("PRAGMA foreign_keys = ON")
    dst.execute("DELETE FROM builds WHERE commit_id = (SELECT id FROM commits WHERE sha = ?) AND toolchain_id = "
                "(SELECT id FROM toolchains WHERE name = 'clang-19')", (head,))
    dst.close()
    servers = [start_server(db), start_server(db)]
    try:
        urls = [f"/commit/{head}", f"/api/commit/{head}", f"/series/{ser.id}"]
        before = {u: [fetch(base + u) for _, base in servers] for u in urls}
        for u in urls:
            assert [st for st, _, _ in before[u]] == [200, 200]
            assert before[u][0][2] == before[u][1][2] and before[u][0][1]["ETag"] == before[u][1][1]["ETag"]
        assert [t["toolchain"] for t in json.loads(before[urls[1]][0][2])["toolchains"]] == ["gcc-12"]
        run = subprocess.run([*sizewatch_cmd(), "run", "--series", str(EXAMPLE_MBOX), "--toolchains", EXAMPLE_TOOLCHAINS,
                              "--db", str(db)], capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr
        for u in urls:
            after = [fetch(base + u, **{"If-None-Match": before[u][0][1]["ETag"]}) for _, base in servers]
            assert [st for st, _, _ in after] == [200, 200], u
            assert after[0][2] == after[1][2] and after[0][1]["ETag"] == after[1][1]["ETag"] != before[u][0][1]["ETag"]
            assert after[0][2] != before[u][0][2]
        got = json.loads(fetch(servers[1][1] + urls[1])[2])
        assert [t["toolchain"] for t in got["toolchains"]] == ["gcc-12", "clang-19"]
        assert got["toolchains"][1]["status"] == "ok"
    finally:
        errs = [stop(p) for p, _ in servers]
        if kind == "postgresql":
            from web.settings import WebSettings
            WebSettings(db).page_cache.unlink(missing_ok=True)
    assert not any("Traceback" in e for e in errs), errs


def test_matrix_is_paged(tmp_path, compile_c, app_for):
    """The matrix shows a page of rows by spread; the pages together are the whole ranking."""
    gcc = compile_c("gcc-12", FIXTURES / "inline_cases.c", name="mx-gcc.o")
    clang = compile_c("clang-19", FIXTURES / "inline_cases.c", name="mx-clang.o")
    db = tmp_path / "m.db"
    with open_store(db) as s:
        s.record_build(_record(A, None, gcc))
        s.record_build(_record(A, None, clang, toolchain="clang-19"))
    client = app_for(db).test_client()
    whole = client.get(f"/api/matrix/{A}?limit=1000").get_json()
    n = whole["differing"]
    assert n >= 3 and len(whole["rows"]) == n
    got = []
    for off in range(0, n, 2):
        page = client.get(f"/api/matrix/{A}?limit=2&offset={off}").get_json()
        assert page["offset"] == off and page["limit"] == 2
        got += page["rows"]
    assert got == whole["rows"]
    html = client.get(f"/matrix/{A}?limit=2&offset=2").get_data(as_text=True)
    assert 'rel="next" href="?limit=2&amp;offset=4"' in html and 'rel="prev" href="?limit=2&amp;offset=0"' in html
    assert "No rows past" in client.get(f"/matrix/{A}?offset={n + 5}").get_data(as_text=True)
    assert client.get(f"/api/matrix/{A}?offset=x").status_code == 400


# --- the page cache's file is never followed (issue 27) ------------------------------------------

def _store_state(db: Path) -> tuple[str, list]:
    import hashlib
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master"))
    conn.close()
    return hashlib.sha256(db.read_bytes()).hexdigest(), tables


def _cache_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "page cache" in line]


@pytest.mark.parametrize("store_db", ["sqlite"], indirect=True)
@pytest.mark.parametrize("kind", ["link to the store", "dangling link", "garbage"])
def test_a_planted_page_cache_is_replaced_never_followed(small_store, kind, tmp_path):
    """Real gunicorn, two workers, a read-only ``serve``: ``<db>.pages`` a link to the store (the
    cache's tables were created inside the store, and ``db check`` said ok), a dangling link (sqlite
    created its target), a garbage file (each worker rendered every request for its whole life).
    Now: the store untouched, no target made, a new regular cache file that serves hits, one line."""
    db = Path(small_store)
    pages = db.with_name(db.name + ".pages")
    target = tmp_path / "made-by-sqlite.db"
    if kind == "link to the store":
        pages.symlink_to(db)
    elif kind == "dangling link":
        pages.symlink_to(target)
    else:
        pages.write_bytes(b"not a database\n" * 1000)
    before = _store_state(db)
    proc, base = start_server(db, "--workers", "2")
    try:
        got = [fetch(base + f"/commit/{C}") for _ in range(6)]
    finally:
        err = stop(proc)
    assert {st for st, _, _ in got} == {200} and len({body for _, _, body in got}) == 1
    states = [h["X-Sizewatch-Cache"] for _, h, _ in got]
    assert states[0] == "miss" and set(states[1:]) == {"hit"}, (states, err)
    assert _store_state(db) == before                      # not a byte, not a table
    assert not target.exists()
    assert pages.is_file() and not pages.is_symlink()
    with sqlite3.connect(f"file:{pages}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT count(*) FROM pages").fetchone()[0] == 1
    lines = _cache_lines(err)
    assert len(lines) == 1 and "replaced by a new file" in lines[0], err
    assert ("symbolic link (not followed)" if "link" in kind else "damaged") in lines[0]
    assert "Traceback" not in err
    check = subprocess.run([*sizewatch_cmd(), "db", "check", "--db", str(db)], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stderr


def test_a_fifo_a_side_link_or_damage_in_use_is_replaced_a_directory_refused(tmp_path, caplog):
    """The other things a name can be: a FIFO (never opened, so never blocking), a link at sqlite's
    ``-wal`` (sqlite refuses it, which left the cache off for good), a file damaged while in use
    (replaced once its damage is seen, and only that file), a directory (not ours to delete: pages
    are rendered per request, one line)."""
    import logging
    import os
    from web.pagecache import PageCache
    precious = tmp_path / "precious.db"
    precious.write_bytes(b"keep me")
    fifo = tmp_path / "fifo.pages"
    os.mkfifo(fifo)
    side = tmp_path / "side.pages"
    PageCache(side, 1 << 20).put("k", "text/plain", b"x")
    for s in ("-wal", "-shm"):
        side.with_name(side.name + s).unlink(missing_ok=True)
    side.with_name(side.name + "-wal").symlink_to(precious)
    with caplog.at_level(logging.WARNING, logger="sizewatch.web"):
        for path in (fifo, side):
            caplog.clear()
            cache = PageCache(path, 1 << 20)
            cache.put("k", "text/plain", b"body")
            assert cache.get("k") == ("text/plain", b"body")
            assert path.is_file() and not path.is_symlink() and len(caplog.records) == 1, caplog.text
        assert precious.read_bytes() == b"keep me"
        assert not side.with_name(side.name + "-wal").is_symlink()
        # damaged under a running cache: the query fails (a miss), the next one has a new file
        caplog.clear()
        live = tmp_path / "live.pages"
        cache = PageCache(live, 64 << 20)
        for i in range(300):
            cache.put(f"k{i}", "text/plain", os.urandom(3000))
        conn = cache._conn()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")     # all in the file ...
        conn.execute("PRAGMA cache_size = 1")               # ... and read from it again
        with live.open("r+b") as f:                         # every page but the header's garbage
            f.seek(4096)
            f.write(b"garbage!" * ((live.stat().st_size - 4096) // 8))
        assert cache.get("k1") is None                      # seen: this connection dropped ...
        assert cache.get("k150") is None                    # ... and the next one's file is new
        cache.put("k", "text/plain", b"again")
        assert cache.get("k") == ("text/plain", b"again")
        assert len(caplog.records) == 1 and "damaged" in caplog.text
        caplog.clear()
        directory = tmp_path / "dir.pages"
        directory.mkdir()
        cache = PageCache(directory, 1 << 20)
        cache.put("k", "text/plain", b"body")
        assert cache.get("k") is None and cache.get("k") is None and directory.is_dir()
        assert len(caplog.records) == 1 and "is a directory" in caplog.text
