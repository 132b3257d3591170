"""The dashboard against hostile requests and a damaged store (Flask's test client, plus one real
server): every malformed parameter, huge or non-hex id, traversal and bad body is a 400/404 with
one line, never a 500; every answer carries the security headers; a cross-origin POST is refused;
a damaged row shows as unreadable on its page instead of a 500.

The store holds two real builds of a small C file (gcc-12), their comparison and a series, written
through the store's own API, then damaged with sqlite the way a disk or an old tool would.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ci.pipeline.objects import object_record
from db.models import BuildRecord, Commit, ConfigInfo, FindingRow, FunctionRow, Series, SeriesPatch
from db.store import open_store

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOKEN = "hostile-web-token"
BASE, HEAD = "a" * 40, "b" * 40


def _record(sha: str, parent: str | None, obj: Path, status: str = "ok") -> BuildRecord:
    o = object_record(obj, "x.o")
    o.functions = [FunctionRow("split_me", 10, "plain", True, 0, 0, 0, {"name": "split_me"})]
    from analyzer.likely_path_cost import FunctionCost
    o.likely_paths = [FunctionCost("split_me", 12, 40, 2, ("helper",), 1, 0, 3, 1, "ret", 20, 4.0, "skylake-avx512")]
    return BuildRecord("t", Commit(sha, parent, f"subject {sha[:4]}", "A <a@b>", "2024-01-01"), "gcc-12",
                       "gcc-12 (Debian) 12.2", ConfigInfo("defconfig-x", config_hash="h", config_text="CONFIG_X=y\n"),
                       "x.o", status, objects=[o], log="make: built\n", errors=["x.c:1: error: boom"] if status != "ok"
                       else [], analysis_version=1)


def fill(s, compile_c) -> None:
    """The template store the damage tests copy, written through the store's API (sqlite or
    PostgreSQL): two builds, their comparison and a one-patch series."""
    from ci.reports.model import compute_tables
    from db import bloat_tables
    a = compile_c("gcc-12", FIXTURES / "symbols.c", name="web-hostile-a.o")
    b = compile_c("gcc-12", FIXTURES / "symbols.c", "-DV=2", name="web-hostile-b.o")
    b1 = s.record_build(_record(BASE, None, a))
    b2 = s.record_build(_record(HEAD, BASE, b))
    s.record_comparison(b2, b1, [FindingRow("newly_out_of_line", "split_me", "warning", "split_me: out")],
                        bloat_tables.to_stored(compute_tables(s, b1, b2)))
    s.record_series(Series("t", "<cover@x>", "[PATCH 0/1] s", base_sha=BASE,
                           patches=[SeriesPatch(1, "p1", commit_sha=HEAD)]))


@pytest.fixture(scope="module")
def store_path(compile_c, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("webhostile") / "store.db"
    fill(open_store(db), compile_c)
    return db


def _client(db: Path, token: str | None = TOKEN, jobs: Path | None = None):
    from web.app import create_app
    from web.settings import WebSettings
    return create_app(WebSettings(db, token=token, jobs_dir=jobs or db.with_name("jobs"))).test_client()


@pytest.fixture(scope="module")
def client(store_path):
    return _client(store_path)


HOSTILE_GETS = {
    # ids past sqlite's INTEGER, negative, huge, not hex
    "/series/9223372036854775808": 400, "/series/99999999999999999999999": 400, "/series/-1": 404,
    "/api/series/18446744073709551616": 400, "/build/9223372036854775808/log": 400, "/jobs/9223372036854775808": 400,
    "/api/jobs/18446744073709551616": 400, "/series/9223372036854775807": 404, "/api/series/0": 404,
    "/commit/" + "a" * 5000: 400, "/commit/zzzz": 400, "/matrix/" + "f" * 41: 400, "/commit/%ff%fe": 400,
    # traversal
    "/commit/..%2f..%2fetc%2fpasswd": 404, "/static/vendor/..%2f..%2fapp.py": 404, "/static/vendor/%2e%2e": 404,
    "/static/../web/app.py": 404, "/static/vendor/../../db/store.py": 404,
    # names and query parameters
    "/function/" + "x" * 10000: 400, "/function/a%00b": 400, "/?commits=-1": 400, "/?commits=1e9": 400,
    "/?commits=99999999999999999999": 400, "/?commits=%00": 400, "/?tree=%00": 400, "/?tree=" + "a" * 5000: 400,
    f"/matrix/{HEAD}?all=maybe": 400, "/series/1.txt?toolchains=%ff": 400, f"/commit/{HEAD}?target=%0a": 400,
    "/function/split_me?changes=-5": 400, "/function/split_me?toolchain=$(id)": 400,
    # a newline after a good value ("$" matches before a final newline: every check is a whole match)
    "/commit/abcd%0A": 400, f"/commit/{HEAD}?target=mm/page_alloc.o%0A": 400, "/function/split_me%0A": 400,
    "/function/split_me?toolchain=gcc-12%0A": 400, "/?tree=linux-6.1%0A": 400, f"/api/matrix/{HEAD}%0A": 400,
}


def test_hostile_requests_are_400_or_404_with_one_line(client):
    for url, want in HOSTILE_GETS.items():
        r = client.get(url)
        assert r.status_code == want, (url[:80], r.status_code, r.get_data(as_text=True)[:300])
        if url.startswith("/api/"):
            msg = r.get_json()["error"]
            assert "\n" not in msg and len(msg) < 300 and "Traceback" not in msg
    # a one-line message in the API and the text answers
    r = client.get("/api/series/99999999999999999999999")
    assert r.get_json() == {"error": "99999999999999999999999 is not an id: expected a whole number up to "
                                     "9223372036854775807", "status": 400}
    r = client.get("/series/99999999999999999999999.txt")         # the id is refused before any look-up
    assert r.status_code == 400 and b"99999999999999999999999 is not an id: expected a whole number up to " \
        b"9223372036854775807" in r.data, (r.status_code, r.data[:300])
    r = client.get("/series/9223372036854775807.txt")             # a valid id, no such series
    assert r.status_code == 404 and b"no series 9223372036854775807 in the store" in r.data, r.data[:300]


def test_security_headers_on_every_answer(client):
    for url in ["/", "/api/", f"/commit/{HEAD}", f"/commit/{HEAD}.txt", "/static/sizewatch.css", "/series/1",
                "/series/99999999999999999999", "/nothing-here", "/build/1/log"]:
        r = client.get(url)
        h = r.headers
        assert h["X-Content-Type-Options"] == "nosniff", url
        assert h["X-Frame-Options"] == "DENY" and h["Referrer-Policy"] == "same-origin", url
        csp = h["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-eval" not in csp, url
    r = client.post(f"/commit/{HEAD}/rerun")                       # errors carry them too
    assert r.headers["X-Frame-Options"] == "DENY"


def test_the_pages_own_scripts_are_allowed_by_the_policy(client):
    """Every <script> of every page is an external file from this server ('self') or a JSON data
    block, which the policy does not need to allow; no inline handler or inline script."""
    import re
    for url in ["/", f"/commit/{HEAD}", "/series/1", "/function/split_me", f"/matrix/{HEAD}", "/bot"]:
        html = client.get(url).get_data(as_text=True)
        for tag in re.findall(r"<script[^>]*>", html):
            assert re.search(r'src="/static/', tag) or 'type="application/json"' in tag, (url, tag)
        assert not re.search(r"<script>\s*\S", html) and not re.search(r"\son[a-z]+=", html), url
        for src in re.findall(r'<script src="(/static/[^"]+)"', html):
            if "/vendor/" not in src:
                assert client.get(src).status_code == 200, src


def test_a_cross_origin_post_is_refused_and_a_same_origin_one_is_not(store_path, tmp_path):
    c = _client(store_path, jobs=tmp_path / "jobs")
    evil = c.post(f"/commit/{HEAD}/rerun", data={"token": TOKEN}, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403 and "another site" in evil.get_data(as_text=True)
    null = c.post(f"/api/commit/{HEAD}/rerun", headers={"Origin": "null", "Authorization": f"Bearer {TOKEN}"})
    assert null.status_code == 403 and "Origin: null" in null.get_json()["error"]
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())    # nothing started
    # same origin (the dashboard's own form) with a wrong token: past the Origin check, stopped by the token
    same = c.post(f"/commit/{HEAD}/rerun", data={"token": "wrong"}, headers={"Origin": "http://localhost"})
    assert same.status_code == 403 and "valid token" in same.get_data(as_text=True)
    bad_json = c.post(f"/api/commit/{HEAD}/rerun", data="{not json", content_type="application/json",
                      headers={"Authorization": "Bearer wrong"})
    assert bad_json.status_code == 403


def test_a_name_with_a_newline_starts_no_bisect(store_path, tmp_path):
    """``alloc_pages%0A`` is not ``alloc_pages``: refused before any job starts (it once started a second
    bisect of the same function beside the first)."""
    c = _client(store_path, jobs=tmp_path / "jobs")
    form = {"range": f"{BASE[:12]}..{HEAD[:12]}", "toolchain": "gcc-12", "condition": "outlined"}
    for url in ("/api/function/split_me%0A/bisect", "/function/split_me%0A/bisect"):
        r = c.post(url, data=form, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 400 and "is not a function name" in r.get_data(as_text=True), (url, r.status_code)
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())    # nothing started


def test_a_bisect_range_that_is_not_two_commits_is_a_400(store_path, tmp_path):
    c = _client(store_path, jobs=tmp_path / "jobs")
    for spec in (f"{BASE[:12]}..{HEAD[:12]}..{HEAD[:12]}", f"{BASE[:12]}...{HEAD[:12]}"):
        form = {"range": spec, "toolchain": "gcc-12", "condition": "outlined"}
        r = c.post("/api/function/split_me/bisect", data=form, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 400 and r.get_json()["error"] == f"bad range {spec!r}: give BASE..HEAD (two revisions)"
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())


DAMAGE = {
    "errors of build 2": "UPDATE builds SET errors = '[\"x.c:1: err' WHERE id = 2",
    "log of build 2": "UPDATE builds SET log_z = x'00112233' WHERE id = 2",
    "cover letter of series 1": "UPDATE series SET cover_z = x'789c0001'",
    "text that is not UTF-8": "UPDATE commits SET subject = CAST(x'66ff6f' AS TEXT) WHERE id = 2",
    "sections of object": "UPDATE objects SET sections = 'nope'",
    "data of a newly_out_of_line finding": "UPDATE findings SET data = '{'",
    # JSON that reads, with a field of the wrong type (analyzer.finding_details)
    "details of a newly_out_of_line finding": "UPDATE findings SET data = json_set(data, '$.details.reasons', 5)",
    "counts": "UPDATE comparisons SET counts = '{bad'",
    "tables": "UPDATE comparison_tables SET tables_z = x'0102'",
    "likely path calls": "UPDATE likely_paths SET calls = '[broken'",
    # text where a number belongs: sqlite keeps what it cannot convert to INTEGER
    "sizes of object": "UPDATE objects SET text = 'abc'",
    "symbols of build": "UPDATE symbols SET size = 'big'",
}
PAGES = ["/", "/api/", f"/commit/{HEAD}", f"/api/commit/{HEAD}", f"/commit/{HEAD}.txt", f"/matrix/{HEAD}",
         "/series/1", "/api/series/1", "/series/1.txt", "/function/split_me", "/build/2/log", "/map/build/2",
         "/api/map/build/2", f"/api/map/commit/{HEAD}"]


def marked_pages(c, what: str, pages=None) -> list[str]:
    """Every page answers 200 over a store with damaged ``what`` rows; the pages that read them say
    so (the header, the JSON's ``unreadable``, a damage note in the HTML). Returns those pages."""
    marked = []
    for url in pages or PAGES:
        r = c.get(url)
        assert r.status_code == 200, (what, url, r.get_data(as_text=True)[:300])
        body = r.get_data(as_text=True)
        if r.headers.get("X-Sizewatch-Unreadable"):
            marked.append(url)
            if url.startswith("/api/"):
                assert any(what in n for n in r.get_json()["unreadable"]), (url, r.get_json()["unreadable"])
            elif not url.endswith((".txt", "/log")):
                assert 'class="damaged"' in body and what in body, url
    return marked


@pytest.mark.parametrize("what", list(DAMAGE))
def test_a_damaged_row_is_shown_unreadable_not_a_500(store_path, tmp_path, what):
    db = tmp_path / "damaged.db"
    a, b = sqlite3.connect(store_path), sqlite3.connect(db)
    a.backup(b)
    b.execute(DAMAGE[what])
    b.commit()
    a.close()
    b.close()
    c = _client(db, token=None, jobs=tmp_path / "jobs")
    marked = marked_pages(c, what)
    if what in ("counts", "tables"):         # recomputed from the stored findings and symbols: nothing lost
        if what == "counts":
            assert marked == []                # the counts are recomputed without a trace of damage
        healthy = _client(store_path, token=None)
        for url in (f"/commit/{HEAD}.txt", "/api/"):
            assert c.get(url).get_data() == healthy.get(url).get_data(), url
    else:
        assert marked, what
    if what == "errors of build 2":
        assert "[unreadable in the store: errors of build 2]" in c.get(f"/api/commit/{HEAD}").get_data(as_text=True)


def _text_in(src: Path, dst: Path, table: str, column: str) -> Path | None:
    """A copy of ``src`` with text in ``table.column``: in every row, or in one where a unique index
    refuses the same text twice; None when sqlite refuses text there (a rowid alias: INTEGER PRIMARY KEY)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
        key = ", ".join(f'"{r[1]}"' for r in sorted(b.execute(f'PRAGMA table_info("{table}")'), key=lambda r: r[5])
                        if r[5]) or "rowid"
        for where in ("", f' WHERE ({key}) = (SELECT {key} FROM "{table}" LIMIT 1)'):
            try:
                b.execute(f"UPDATE \"{table}\" SET \"{column}\" = 'zz'{where}")
                b.commit()
                return dst
            except sqlite3.IntegrityError as e:
                b.rollback()
                if "datatype mismatch" in str(e):
                    return None
        raise AssertionError(f"{table}.{column}: no row could hold text")
    finally:
        a.close()
        b.close()


def test_text_in_any_number_column_is_marked_not_a_500(store_path, tmp_path):
    """Every INTEGER/REAL column of the schema (read from it: a new migration's columns are covered)
    that holds a value in this store, set to text: every page still answers; a page that shows
    something else than over the sound store says it read damage. A key column holding text is a row
    pointing nowhere: its pages may not find the row (404), but never fail (500)."""
    from db.check import typed_columns
    conn = sqlite3.connect(store_path)
    typed = typed_columns(conn)
    keys = {(t, r[1]) for t in typed for r in conn.execute(f'PRAGMA table_info("{t}")') if r[5] or r[1].endswith("_id")}
    keys |= {(t, r[3]) for t in typed for r in conn.execute(f'PRAGMA foreign_key_list("{t}")')}
    filled = [(t, c) for t, cols in typed.items() for c in cols
              if conn.execute(f'SELECT 1 FROM "{t}" WHERE "{c}" IS NOT NULL LIMIT 1').fetchone()]
    conn.close()
    assert {("objects", "text"), ("symbols", "size"), ("builds", "seconds"), ("likely_paths", "cycles"),
            ("function_sizes", "size")} <= set(filled)
    healthy = _client(store_path, token=None)
    sound = {url: healthy.get(url).get_data() for url in PAGES}
    failed = []
    for t, c in filled:
        db = _text_in(store_path, tmp_path / f"{t}.{c}.db", t, c)
        if db is None:
            continue
        client = _client(db, token=None, jobs=tmp_path / "jobs")
        for url in PAGES:
            r = client.get(url)
            if (t, c) in keys:
                if r.status_code == 500:
                    failed.append((t, c, url, r.status_code))
            elif r.status_code != 200 or (r.get_data() != sound[url] and not r.headers.get("X-Sizewatch-Unreadable")):
                failed.append((t, c, url, r.status_code))
    assert not failed, "\n".join(map(str, failed))


def test_a_real_server_answers_with_the_headers_and_400s(store_path, tmp_path):
    """``sizewatch serve`` on 127.0.0.1: the same answers through the production server (gunicorn).
    ``--port 0``: the server binds a port the kernel picks and prints it (no port picked here and
    released for another process to take before the server binds it)."""
    import os
    import re
    import subprocess
    import urllib.error
    import urllib.request
    from conftest import sizewatch_cmd
    proc = subprocess.Popen([*sizewatch_cmd(), "serve", "--db", str(store_path), "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        line = proc.stderr.readline()            # the banner, printed once gunicorn is ready
        m = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
        assert m, f"sizewatch serve did not start: {line}"
        base = m[1]
        r = urllib.request.urlopen(base + "/", timeout=30)
        assert r.status == 200 and r.headers["X-Frame-Options"] == "DENY"
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
        for url, want in (("/api/series/99999999999999999999", 400), ("/commit/..%2f..%2fetc%2fpasswd", 404)):
            try:
                urllib.request.urlopen(base + url, timeout=5)
                raise AssertionError(url)
            except urllib.error.HTTPError as e:
                assert e.code == want and e.headers["X-Content-Type-Options"] == "nosniff"
        req = urllib.request.Request(base + f"/commit/{HEAD}/rerun", data=b"token=x", method="POST",
                                     headers={"Origin": "http://evil.example"})
        try:
            urllib.request.urlopen(req, timeout=5)
            raise AssertionError("cross-origin POST accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 403
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err
