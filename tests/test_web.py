"""The dashboard through Flask's test client, on a store filled by a real ``sizewatch run`` of the
example series (gcc-12, clang-19): every page and its JSON twin, the plain-text reports, the
token-guarded re-run (which really starts the pipeline), and bad input (404/400, never 500).
"""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import sizewatch_cmd

pytestmark = pytest.mark.kernel
TOKEN = "s3cret-token"


def copy_store(src: Path, dst: Path) -> Path:
    """A consistent copy of a WAL store (sqlite's backup API), so tests that write do not share it."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()
    return dst


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_path(request, tmp_path_factory) -> Path | str:
    """The example series' store: an sqlite file written by ``sizewatch run``, or a PostgreSQL database
    written by ``sizewatch run --db postgresql://...`` (conftest.example_pg_store); a copy per module."""
    if request.param == "sqlite":
        return copy_store(request.getfixturevalue("example_store")[0], tmp_path_factory.mktemp("web") / "store.db")
    pg = request.getfixturevalue("pg_server")
    return pg.database(template=request.getfixturevalue("example_pg_store")[0])


def own_copy(request, store_path, tmp_path) -> Path | str:
    """A copy of the example store of the same kind as ``store_path``, for a test that writes."""
    if isinstance(store_path, Path):
        return copy_store(request.getfixturevalue("example_store")[0], tmp_path / "store.db")
    pg = request.getfixturevalue("pg_server")
    return pg.database(template=request.getfixturevalue("example_pg_store")[0])


def settings(db, tmp_path: Path, token: str | None = None):
    """Web settings for a test store: the page cache beside an sqlite file, in tmp_path for PostgreSQL."""
    from web.settings import WebSettings
    return WebSettings(db, token=token, jobs_dir=tmp_path / "jobs",
                       pages_file=None if isinstance(db, Path) else tmp_path / "store.pages")


@pytest.fixture(scope="module")
def app(store_path, tmp_path_factory):
    from web.app import create_app
    return create_app(settings(store_path, tmp_path_factory.mktemp("jobs"), TOKEN))


@pytest.fixture(scope="module")
def client(app):
    return app.test_client()


@pytest.fixture(scope="module")
def shas(store_path):
    """The series' base, patch 1 and patch 2 commits."""
    from db.store import open_store
    with open_store(store_path) as s:
        (ser,) = s.list_series()
        return [ser.base_sha] + [p.commit_sha for p in ser.patches]


def get_json(client, path: str, headers: dict | None = None):
    r = client.get(path, headers=headers)
    assert r.status_code == 200, (path, r.data[:300])
    assert r.content_type.startswith("application/json")
    return r.get_json()


def job_json(client, jid) -> dict:
    """A started job's JSON: for the token's holder only (its argv names the tree and the store)."""
    return get_json(client, f"/api/jobs/{jid}", headers={"Authorization": f"Bearer {TOKEN}"})


def get_html(client, path: str) -> str:
    r = client.get(path)
    assert r.status_code == 200, (path, r.data[:300])
    assert r.content_type.startswith("text/html")
    return r.get_data(as_text=True)


def test_index(client, shas, store_path):
    html = get_html(client, "/")
    d = get_json(client, "/api/")
    assert d["toolchains"] == ["gcc-12", "clang-19"]
    (ser,) = d["series"]
    assert ser["patches"] == 2 and ser["not_applied"] == 0 and ser["url"] == "/series/1"
    assert {c["sha"] for c in d["commits"]} == set(shas)
    by_sha = {c["sha"]: c for c in d["commits"]}
    for tc in ("gcc-12", "clang-19"):
        p1, p2 = by_sha[shas[1]]["toolchains"][tc], by_sha[shas[2]]["toolchains"][tc]
        # patch 1 pushes the helpers out of line: its worst finding is that, with a text delta (shrink)
        assert p1["status"] == "ok" and p1["worst"]["severity"] == "warning"
        assert (p1["worst"]["kind"], p1["worst"]["function"]) == ("newly_out_of_line", "__rmqueue_fallback")
        assert p1["text_delta"] < 0 < p2["text_delta"]
        # the series column sums its patches and keeps the worst finding
        assert ser["toolchains"][tc]["text_delta"] == p1["text_delta"] + p2["text_delta"]
        assert ser["toolchains"][tc]["findings"] == p1["findings"] + p2["findings"]
        # the base commit has no parent build: no delta, said so
        assert by_sha[shas[0]]["toolchains"][tc]["text_delta"] is None
    # the page shows the same, in words beside the colours
    assert 'href="/series/1"' in html and f'href="/commit/{shas[2]}"' in html
    # patch 1's worst, once per toolchain; patch 2's pushed_out_of_line is not its worst
    assert html.count("newly out of line") == 2 and "pushed out of line" not in html
    assert "parent not built" in html
    assert re.search(r"text -[\d,]+", html) and re.search(r"text \+[\d,]+", html)
    assert "warning" in html
    # limits are honoured
    assert len(get_json(client, "/api/?commits=1&series=0")["commits"]) == 1


def _text_sizes(store_path, sha, tc) -> int:
    from db.store import open_store
    with open_store(store_path) as s:
        (b,) = [b for b in s.builds_for_commit(sha) if b.toolchain == tc]
        return sum(o.text for o in s.objects_for(b.id))


def test_series_page(client, shas, store_path, example_store):
    html = get_html(client, "/series/1")
    d = get_json(client, "/api/series/1")
    assert [p["position"] for p in d["patches"]] == [1, 2]
    assert [p["commit"] for p in d["patches"]] == shas[1:]
    assert d["toolchains"] == ["gcc-12", "clang-19"]
    for p, sha in zip(d["patches"], shas[1:]):
        for tc in d["toolchains"]:
            cell = p["toolchains"][tc]
            parent = shas[shas.index(sha) - 1]
            assert cell["text_delta"] == _text_sizes(store_path, sha, tc) - _text_sizes(store_path, parent, tc)
            assert cell["findings"] == sum(cell["severities"].values()) > 0
    p2 = d["patches"][1]["toolchains"]
    assert all(p2[tc]["severities"].get("warning") for tc in d["toolchains"])
    assert "[PATCH 1/2]" in html and "[PATCH 2/2]" in html and "whole series" in html
    assert f'href="/commit/{shas[2]}#tc-clang-19"' in html
    assert "Cover letter" in html
    # the plain-text report is the pipeline's own report, byte for byte
    txt = client.get("/series/1.txt")
    assert txt.status_code == 200 and txt.content_type.startswith("text/plain")
    assert txt.get_data(as_text=True) == example_store[1].stdout


def test_patch_page(client, shas, example_store):
    sha = shas[2]
    html = get_html(client, f"/commit/{sha}")
    d = get_json(client, f"/api/commit/{sha}")
    assert d["commit"]["sha"] == sha and d["series"][0]["position"] == 2
    assert [t["toolchain"] for t in d["toolchains"]] == ["gcc-12", "clang-19"]
    for t in d["toolchains"]:
        (tab,) = t["tables"]
        rows = {r["name"]: r for r in tab["rows"]}
        assert rows["get_page_from_freelist"]["delta"] > 1000
        assert rows["__rmqueue_smallest"]["new"] is None                 # inlined again: its copy is gone
        assert tab["net"] == tab["new_total"] - tab["old_total"]
        kinds = {(f["kind"], f["function"]) for f in t["inline_changes"]}
        assert ("newly_inlined", "__rmqueue_smallest") in kinds and ("newly_inlined", "__rmqueue_fallback") in kinds
        pushed = [f for f in t["inline_changes"] if f["kind"] == "pushed_out_of_line"]
        assert pushed and pushed[0]["function"] == "steal_suitable_fallback" and pushed[0]["reason"]
        assert pushed[0]["pushed_by"]
        cross = {x["function"]: x for x in t["crossings"]}
        gpff = cross["get_page_from_freelist"]
        assert gpff["head"]["size"] - gpff["base"]["size"] == gpff["delta"] == rows["get_page_from_freelist"]["delta"]
        assert 0 <= gpff["head"]["headroom"] < gpff["head"]["align"]
        assert t["text"]["delta"] is not None
        # the page: table rows sortable, function links, reasons and headroom shown
        assert f'id="tc-{t["toolchain"]}"' in html
        assert f'href="/function/get_page_from_freelist?toolchain={t["toolchain"]}"' in html
        assert pushed[0]["reason"].split()[0].replace("<", "&lt;") in html
        assert f'<td class="num">{gpff["head"]["headroom"]} B</td>' in html
        assert gpff["head"]["align"] == 16                                # x86-64: read from the file, not assumed
        assert (f'{gpff["base"]["blocks"]} → {gpff["head"]["blocks"]} <span class="muted">× 16 B</span>') in html
    assert 'class="grid sortable bloat"' in html and 'data-sort="num"' in html
    assert "/static/sortable.js" in html
    assert f'href="/commit/{sha}.txt"' in html and f'href="/api/commit/{sha}"' in html
    # gcc gives its reason for steal_suitable_fallback in its own words
    gcc = d["toolchains"][0]
    assert "--param max-inline" in [f for f in gcc["inline_changes"] if f["kind"] == "pushed_out_of_line"][0]["reason"]
    # the plain text is the report the pipeline printed for this patch
    txt = client.get(f"/commit/{sha[:10]}.txt").get_data(as_text=True)
    assert txt.splitlines()[0].startswith(f"=== {sha[:12]} ")
    body = txt.split("\n", 1)[1]
    assert body in example_store[1].stdout
    # a prefix finds the same commit; ?toolchains= keeps only those
    assert get_json(client, f"/api/commit/{sha[:8]}")["commit"]["sha"] == sha
    only = get_json(client, f"/api/commit/{sha}?toolchains=clang-19")
    assert [t["toolchain"] for t in only["toolchains"]] == ["clang-19"]


def test_patch_page_patch1_reasons_and_clones(client, shas):
    d = get_json(client, f"/api/commit/{shas[1]}")
    for t in d["toolchains"]:
        out = {f["function"]: f for f in t["inline_changes"] if f["kind"] in ("newly_out_of_line", "pushed_out_of_line")}
        for fn in ("__rmqueue_smallest", "__rmqueue_fallback"):
            assert out[fn]["reason"], (t["toolchain"], fn)          # the compiler's own reason
            assert out[fn]["was"].startswith("inlined") and out[fn]["now"].startswith("out of line")
        for g in t["clone_groups"]:                                 # every group names real clone symbols
            assert len(g["members"]) >= 2 and all(m["name"].startswith(g["function"]) for m in g["members"])
            assert g["delta"] == sum(m["delta"] for m in g["members"])


def test_base_commit_page_says_why_there_is_no_table(client, shas):
    html = get_html(client, f"/commit/{shas[0]}")
    assert "The parent commit was not built under gcc-12" in html


def test_function_page(client, shas, store_path):
    from db.store import open_store
    html = get_html(client, "/function/get_page_from_freelist")
    d = get_json(client, "/api/function/get_page_from_freelist")
    chart = d["chart"]
    assert chart["commits"]["sha"] == shas
    assert [ln["label"] for ln in chart["lines"]] == ["gcc-12", "clang-19"]
    with open_store(store_path) as s:
        for ln in chart["lines"]:
            hist = s.function_history("get_page_from_freelist", ln["toolchain"])
            assert ln["size"] == [p.size for p in hist]
            assert all(chart["states"][st].startswith("out of line") for st in ln["state"])
    # the commits where it changed: patch 1 shrinks it, patch 2 grows it by more than 1000 bytes
    grew = [c for c in d["changes"] if c["commit"] == shas[2]]
    assert len(grew) == 2 and all(c["delta"] > 1000 and c["url"] == f"/commit/{shas[2]}" for c in grew)
    assert {c["commit"] for c in d["changes"]} == set(shas[1:])
    # the page: a canvas, the chart library served by the app, the data beside it, links to the commits
    assert '<canvas id="history-chart"' in html
    assert '<script src="/static/vendor/chart.umd.min.js"></script>' in html
    data = json.loads(re.search(r'<script type="application/json" id="history-data">(.*?)</script>', html, re.S)[1])
    assert data == chart
    assert f'href="/commit/{shas[2]}#tc-gcc-12"' in html
    one = get_json(client, "/api/function/get_page_from_freelist?toolchain=clang-19")
    assert [ln["label"] for ln in one["chart"]["lines"]] == ["clang-19"]
    # a function that is inlined at some commits: its status per point says so
    rs = get_json(client, "/api/function/__rmqueue_smallest")
    states = {chart_state for ln in rs["chart"]["lines"] for chart_state in ln["state"]}
    assert rs["chart"]["states"].index("inlined only") in states
    assert any(ln["size"][2] is None for ln in rs["chart"]["lines"])


def test_vendored_chart_library(client):
    r = client.get("/static/vendor/chart.umd.min.js")
    assert r.status_code == 200 and "javascript" in r.content_type
    assert b"Chart" in r.data[:5000] and len(r.data) > 100_000
    assert client.get("/static/sortable.js").status_code == 200
    assert client.get("/static/history_chart.js").status_code == 200
    assert client.get("/static/sizewatch.css").status_code == 200


def test_matrix_page(client, shas):
    sha = shas[2]
    html = get_html(client, f"/matrix/{sha}")
    d = get_json(client, f"/api/matrix/{sha}")
    assert d["toolchains"] == ["gcc-12", "clang-19"]
    assert d["rows"] and d["functions"] >= len(d["rows"])
    for r in d["rows"]:                                        # only functions that differ
        a, b = r["cells"].get("gcc-12"), r["cells"].get("clang-19")
        assert a is None or b is None or (a["size"], a["out_of_line"], bool(a["inlined_count"])) != \
            (b["size"], b["out_of_line"], bool(b["inlined_count"]))
    spreads = [r["spread"] for r in d["rows"]]
    assert spreads == sorted(spreads, reverse=True)
    assert "get_page_from_freelist" in {r["function"] for r in d["rows"]}
    full = get_json(client, f"/api/matrix/{sha}?all=1")
    assert full["differing"] > d["differing"] and len(full["rows"]) == min(full["differing"], full["limit"])
    everything = get_json(client, f"/api/matrix/{sha}?all=1&limit={full['differing']}")
    assert len(everything["rows"]) == full["differing"] > len(d["rows"])
    assert 'href="/function/get_page_from_freelist"' in html and "show all" in html


MATRIX_QUERIES = ("", "?all=1", "?all=1&limit=7&offset=5", "?limit=3&offset=2", "?offset=100000",
                  "?target=mm/page_alloc.o", "?target=mm/page_alloc.o&all=1&limit=1000", "?target=mm/no_such.o")


def _matrix_pages(app, sha: str) -> dict:
    """HTML and JSON of the matrix page under each query, rendered afresh (no page cache)."""
    out = {}
    for q in MATRIX_QUERIES:
        for kind in ("matrix", "api/matrix"):
            with app.test_request_context(f"/{kind}/{sha}{q}"):
                from web.pages import matrix
                fn = matrix.page if kind == "matrix" else matrix.api
                r = app.make_response(fn(sha))
                out[kind + q] = r.get_data(as_text=True)
    return out


def test_matrix_precomputed_rows_equal_per_request(app, store_path, shas):
    """The rows ranked when the builds were written (0013) give byte-identical HTML and JSON to the
    same page ranked per request from the builds' own rows (the store with its matrix tables removed)."""
    from db.store import open_store
    with open_store(store_path) as s:
        stored = s.connection().execute("SELECT count(*) FROM matrix_tables").fetchone()[0]
        assert stored >= 6                      # 3 commits x (every target, mm/page_alloc.o)
        for sha in shas:
            c = s.get_commit(sha)
            assert s.matrix_table(sha, c.tree, None, False, 100, 0) is not None
    stored_pages = {sha: _matrix_pages(app, sha) for sha in shas}
    assert '"rows":[]' not in stored_pages[shas[2]]["api/matrix"].replace(" ", "")
    with open_store(store_path) as s:            # on the test's own copy: put the tables back after
        with s.transaction() as conn:
            conn.execute("DELETE FROM matrix_rows")
            conn.execute("DELETE FROM matrix_tables")
        assert s.matrix_table(shas[2], s.get_commit(shas[2]).tree, None, False, 100, 0) is None
    try:
        for sha in shas:
            assert _matrix_pages(app, sha) == stored_pages[sha]
    finally:                                     # what a store from before 0013 is given
        p = subprocess.run([*sizewatch_cmd(), "db", "matrix", "--db", str(store_path)], capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0 and f"matrix rows ranked for {len(shas)} commits" in p.stdout, p.stderr
    for sha in shas:
        assert _matrix_pages(app, sha) == stored_pages[sha]


def test_matrix_follows_a_new_build(request, store_path, tmp_path, shas):
    """A new build of the commit (same toolchain: it replaces the old one) re-ranks its matrix in the
    build's transaction: the cached page shows the new size at once, equal to the per-request ranking."""
    from db.models import BuildRecord, ConfigInfo, ObjectRecord
    from db.store import open_store
    from web.app import create_app
    from web.settings import WebSettings
    db = own_copy(request, store_path, tmp_path)
    app = create_app(settings(db, tmp_path))
    client = app.test_client()
    sha = shas[2]
    before = get_json(client, f"/api/matrix/{sha}?all=1&limit=10000")
    row = next(r for r in before["rows"] if r["function"] == "get_page_from_freelist")
    old = row["cells"]["clang-19"]["size"]
    with open_store(db) as s:
        b = next(x for x in s.builds_for_commit(sha) if x.toolchain == "clang-19")
        objs = []
        for o in s.objects_for(b.id):
            o.symbols = [sym if sym.name != "get_page_from_freelist" else
                         type(sym)(sym.name, sym.size + 4096, sym.letter, sym.section, sym.offset)
                         for sym in s.symbols_for(b.id)]
            o.functions = s.functions_for(b.id)
            objs.append(o)
        commit = s.get_commit(sha)
        s.record_build(BuildRecord(b.tree, commit, b.toolchain, b.toolchain_version,
                                   ConfigInfo(b.config_key, config_hash=b.config_hash), b.target, "ok",
                                   objects=objs, analysis_version=b.analysis_version))
    after = get_json(client, f"/api/matrix/{sha}?all=1&limit=10000")
    new_row = next(r for r in after["rows"] if r["function"] == "get_page_from_freelist")
    assert new_row["cells"]["clang-19"]["size"] == old + 4096
    assert new_row["spread"] == abs(new_row["cells"]["clang-19"]["size"] - new_row["cells"]["gcc-12"]["size"])
    assert after["rows"].index(new_row) <= before["rows"].index(row)      # a wider spread ranks it higher
    pages = _matrix_pages(app, sha)
    with open_store(db) as s:
        with s.transaction() as conn:
            conn.execute("DELETE FROM matrix_tables")
    assert _matrix_pages(app, sha) == pages


def test_matrix_damaged_rows(request, store_path, tmp_path, shas):
    """A damaged stored row: the page is ranked from the builds instead (same bytes), db check names it."""
    from db.check import check_store
    from web.app import create_app
    from web.settings import WebSettings
    from pgserver import RawSql
    db = own_copy(request, store_path, tmp_path)
    app = create_app(settings(db, tmp_path))
    good = _matrix_pages(app, shas[2])
    conn = RawSql(db)
    conn.execute("UPDATE matrix_rows SET cells = '{\"gcc-12\": [1, ' WHERE pos = 0")
    conn.close()
    assert _matrix_pages(app, shas[2]) == good
    res = check_store(db)
    assert not res.ok and "matrix_rows.cells not JSON" in res.line()


def test_build_log(client, shas, store_path):
    from db.store import open_store
    with open_store(store_path) as s:
        b = s.builds_for_commit(shas[2])[0]
    r = client.get(f"/build/{b.id}/log")
    assert r.status_code == 200 and r.content_type.startswith("text/plain")
    assert r.get_data(as_text=True).startswith(f"# build {b.id}: {shas[2]}")


def test_actions_need_the_token(client, app, shas, store_path, tmp_path):
    sha = shas[2]
    for headers, data in [({}, None), ({"Authorization": "Bearer wrong"}, None), ({"X-Sizewatch-Token": ""}, None),
                          ({}, {"token": "s3cret"}), ({"Authorization": f"Basic {TOKEN}"}, None)]:
        r = client.post(f"/api/commit/{sha}/rerun", headers=headers, data=data)
        assert r.status_code == 403, (headers, data)
        assert "token" in r.get_json()["error"]
    r = client.post(f"/commit/{sha}/rerun", data={"token": "nope"})
    assert r.status_code == 403 and b"valid token" in r.data
    assert client.get(f"/commit/{sha}/rerun").status_code == 405
    assert not app.extensions["sizewatch.jobs"].all()                # nothing was started
    # a server without a token refuses even the right one, and says it is read-only
    from web.app import create_app
    from web.settings import WebSettings
    ro = create_app(settings(store_path, tmp_path)).test_client()
    r = ro.post(f"/api/commit/{sha}/rerun", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 403 and "without a token" in r.get_json()["error"]
    assert "read-only" in ro.get(f"/commit/{sha}").get_data(as_text=True)
    assert 'name="token"' in get_html(client, f"/commit/{sha}")


def test_rerun_starts_the_pipeline(client, app, shas):
    """With the token, a re-run really runs ``sizewatch run parent..sha`` against the server's store."""
    sha = shas[2]
    r = client.post(f"/api/commit/{sha}/rerun", headers={"Authorization": f"Bearer {TOKEN}"},
                    data={"toolchains": "gcc-12,clang-19"})
    assert r.status_code == 202, r.data
    job = r.get_json()["job"]
    argv = job["argv"]
    assert argv[argv.index("--toolchains") + 1] == "gcc-12,clang-19"
    assert argv[argv.index("--targets") + 1] == "mm/page_alloc.o"
    db = app.extensions["sizewatch.settings"].db
    if isinstance(db, Path):
        assert argv[argv.index("--db") + 1] == str(db)
    else:                       # a PostgreSQL URL goes to the job in $SIZEWATCH_DB: no password in an argv
        assert "--db" not in argv and db not in " ".join(argv)
    assert f"{shas[1]}..{sha}" in job["argv"]
    deadline = time.monotonic() + 600
    while True:
        st = job_json(client, job["id"])
        if st["state"] != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert st["state"] == "done", st["log"][-2000:]
    assert "0 built, 0 re-analyzed, 4 already stored" in st["log"]       # both commits, both toolchains
    assert f"=== {sha[:12]} " in st["log"]                                # and its report
    page = get_html(client, f"/jobs/{job['id']}")
    assert "done" in page and "already stored" in page
    # the job's JSON (argv: the tree's and the store's paths) answers the token's holder only
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-Sizewatch-Token": TOKEN[:-1]}):
        r = client.get(f"/api/jobs/{job['id']}", headers=headers)
        assert r.status_code == 403 and "a valid token" in r.get_json()["error"], (headers, r.data[:200])
        assert "argv" not in r.get_data(as_text=True) and str(db) not in r.get_data(as_text=True)
    assert client.get(f"/api/jobs/{job['id']}", headers={"X-Sizewatch-Token": TOKEN}).status_code == 200
    r = client.get("/api/jobs/99999", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 404 and "no job 99999" in r.get_json()["error"]
    # an unknown toolchain is refused before anything starts
    r = client.post(f"/commit/{sha}/rerun", data={"token": TOKEN, "toolchains": "gcc-99"})
    assert r.status_code == 400 and b"unknown toolchain" in r.data


BAD = [
    ("/commit/zzzz", 400, "not a commit id"),
    ("/commit/abc", 400, "not a commit id"),
    ("/commit/" + "a" * 41, 400, "not a commit id"),
    ("/commit/deadbeefdeadbeef", 404, "no commit deadbeefdeadbeef"),
    ("/api/commit/deadbeef", 404, "no commit deadbeef"),
    ("/commit/deadbeef.txt", 404, "no commit deadbeef"),
    ("/series/999", 404, "no series 999"),
    ("/api/series/999", 404, "no series 999"),
    ("/series/999.txt", 404, "no series 999"),
    ("/series/abc", 404, "nothing at /series/abc"),
    ("/series/-1", 404, "nothing at"),
    ("/function/no_such_function_anywhere", 404, "no function no_such_function_anywhere"),
    ("/api/function/no_such_function_anywhere", 404, "no function"),
    ("/function/get_page_from_freelist?toolchain=gcc-99", 404, "under gcc-99"),
    ("/function/1abc", 400, "not a function name"),
    ("/function/a%20b", 400, "not a function name"),
    ("/function/get_page_from_freelist?toolchain=..%2Fetc", 400, "toolchain"),
    ("/function/get_page_from_freelist?changes=lots", 400, "changes"),
    ("/function/get_page_from_freelist?target=%3Cscript%3E", 400, "target"),
    ("/matrix/deadbeef", 404, "no commit deadbeef"),
    ("/matrix/xyz", 400, "not a commit id"),
    ("/?commits=abc", 400, "commits"),
    ("/?commits=-1", 400, "commits"),
    ("/?commits=100000", 400, "commits"),
    ("/api/?series=1.5", 400, "series"),
    ("/?tree=a%20b", 400, "tree"),
    ("/jobs/99", 404, "no job 99"),
    ("/api/jobs/99", 403, "a valid token"),
    ("/build/999999/log", 404, "no build 999999"),
    ("/no/such/page", 404, "nothing at"),
    ("/static/vendor/other.js", 404, "no vendored file"),
]


def test_bad_input_is_a_clear_4xx(client, shas):
    bad = BAD + [
        (f"/matrix/{shas[2]}?all=maybe", 400, "all="),
        (f"/commit/{shas[2]}?toolchains=gcc-12;rm", 400, "toolchains"),
        (f"/api/commit/{shas[2]}?target=a%20b", 400, "target"),
    ]
    for path, status, words in bad:
        r = client.get(path)
        assert r.status_code == status, (path, r.status_code, r.data[:200])
        text = r.get_data(as_text=True)
        if path.startswith("/api/"):
            assert r.get_json()["status"] == status and words in r.get_json()["error"], (path, text)
        elif path.endswith(".txt"):
            assert r.content_type.startswith("text/plain") and words in text, (path, text)
        else:
            assert r.content_type.startswith("text/html") and f"<h1>{status}" in text, (path, text)
            assert words in text.replace("&#39;", "'").replace("&lt;", "<"), (path, text)


def test_no_input_makes_a_500(client, shas):
    """Odd paths and parameters on every route: each answer is a deliberate 2xx/3xx/4xx."""
    junk = ["", "0", "-", "%00", "%ff%fe", "é", "a" * 5000, "..%2F..%2Fetc%2Fpasswd", "'; DROP TABLE commits;--",
            "0x10", "1e9", "deadbeef" * 6, "<b>", " ", "%0a"]
    for j in junk:
        for path in (f"/commit/{j}", f"/commit/{j}.txt", f"/matrix/{j}", f"/function/{j}", f"/series/{j}",
                     f"/api/commit/{j}", f"/api/function/{j}", f"/?commits={j}&series={j}&tree={j}",
                     f"/function/get_page_from_freelist?toolchain={j}&target={j}&changes={j}",
                     f"/commit/{shas[2]}?toolchains={j}&target={j}", f"/matrix/{shas[2]}?all={j}&target={j}",
                     f"/jobs/{j}", f"/build/{j}/log"):
            r = client.get(path)
            assert r.status_code < 500, (path, r.status_code, r.data[:300])
    for path in (f"/api/commit/{shas[2]}/rerun", "/api/commit/zz/rerun", "/commit/deadbeef/rerun"):
        assert client.post(path).status_code == 403            # the token is checked first: nothing leaks


def test_serve_command_bad_input(tmp_path):
    from db.store import open_store
    open_store(tmp_path / "empty.db").close()
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database" * 1000)
    for args, words in [(["--db", str(tmp_path / "missing.db")], "no store there yet"),
                        (["--db", str(tmp_path), "--port", "1"], "is a directory"),
                        (["--port", "99999"], "99999"),
                        (["--db", str(corrupt)], "corrupt.db"),
                        (["--db", str(tmp_path / "empty.db"), "--token-file", str(tmp_path / "nofile")],
                         "cannot read the token file")]:
        proc = subprocess.run([*sizewatch_cmd(), "serve", *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        assert words in proc.stderr, (args, proc.stderr)


def test_token_file(tmp_path):
    from web.settings import read_token
    f = tmp_path / "token"
    f.write_text("abc123\nsecond line ignored\n")
    assert read_token(None, f) == "abc123"
    assert read_token("given", f) == "given"
    assert read_token("  ", None) is None                     # a blank token keeps actions disabled
    with pytest.raises(ValueError, match="cannot read the token file"):
        read_token(None, tmp_path / "missing")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
