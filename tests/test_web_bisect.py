"""The function page's "find where this changed": the form starts a real ``sizewatch bisect`` job on the
server's store (the example series, already stored: nothing is built) and the job's page shows the
commit, bloat-o-meter's row and the compiler's reasons; bad input is a 400, no token a 403."""
from __future__ import annotations

import time

import pytest

from test_web import TOKEN, copy_store, get_html, job_json

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def setup(request, tmp_path_factory):
    """The example store as an sqlite file, or as the PostgreSQL database sizewatch run wrote (a copy):
    the bisect job then reads it through $SIZEWATCH_DB."""
    from db.store import open_store
    from web.app import create_app
    from web.settings import WebSettings
    if request.param == "sqlite":
        db = copy_store(request.getfixturevalue("example_store")[0],
                        tmp_path_factory.mktemp("web-bisect") / "store.db")
    else:
        db = request.getfixturevalue("pg_server").database(
            template=request.getfixturevalue("example_pg_store")[0])
    with open_store(db) as s:
        (ser,) = s.list_series()
        shas = [ser.base_sha] + [p.commit_sha for p in ser.patches]
    jobs = tmp_path_factory.mktemp("jobs")
    app = create_app(WebSettings(db, token=TOKEN, jobs_dir=jobs, pages_file=jobs / "store.pages"))
    return app.test_client(), shas


def test_function_page_bisects(setup):
    client, (base, p1, p2) = setup
    page = get_html(client, "/function/__rmqueue_smallest")
    assert 'action="/function/__rmqueue_smallest/bisect"' in page and "Find where this changed" in page
    r = client.post("/function/__rmqueue_smallest/bisect",
                    data={"token": TOKEN, "range": f"{base[:12]}..{p1[:12]}", "toolchain": "gcc-12",
                          "condition": "outlined"})
    assert r.status_code == 303 and r.headers["Location"].startswith("/jobs/")
    jid = r.headers["Location"].rsplit("/", 1)[1]
    deadline = time.monotonic() + 600
    while (st := job_json(client, jid))["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert st["state"] == "done", st["log"][-2000:]
    assert f"\n{p1} " in st["log"] and "has an out-of-line copy" in st["log"]
    assert "__rmqueue_smallest                             -     432    +432" in st["log"]
    assert "0 built" in st["log"]
    assert "argv" in st and "--outlined" in st["argv"]
    # grew by N, through the JSON twin
    r = client.post("/api/function/get_page_from_freelist/bisect", headers={"Authorization": f"Bearer {TOKEN}"},
                    data={"range": f"{p1}..{p2}", "toolchain": "clang-19", "condition": "grew_by", "bytes": "100"})
    argv = r.get_json()["job"]["argv"]
    assert r.status_code == 202 and argv[argv.index("--target") + 1] == "mm/page_alloc.o"
    jid = r.get_json()["job"]["id"]
    while (st := job_json(client, jid))["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert st["state"] == "done" and f"\n{p2} " in st["log"] and "grew by at least 100 bytes" in st["log"]


@pytest.mark.parametrize("data, status, msg", [
    ({"range": "abc", "toolchain": "gcc-12", "condition": "outlined"}, 400, b"expected A..B"),
    ({"range": "zz..yy", "toolchain": "gcc-12", "condition": "outlined"}, 400,
     b"is not a commit id: expected 4 to 40 hex digits"),
    ({"range": "deadbeef..{p}", "toolchain": "gcc-12", "condition": "outlined"}, 404,
     b"no commit deadbeef in the store"),
    ({"range": "{b}..{p}", "toolchain": "gcc 12", "condition": "outlined"}, 400,
     b"expected a toolchain name like gcc-12"),
    ({"range": "{b}..{p}", "toolchain": "gcc-12", "condition": "smaller"}, 400,
     b"expected one of grew_by, outlined, inlined, crossed_line"),
    ({"range": "{b}..{p}", "toolchain": "gcc-12", "condition": "grew_by", "bytes": "-3"}, 400,
     b"expected a positive whole number of bytes"),
])
def test_bisect_bad_input(setup, data, status, msg):
    client, (base, p1, _) = setup
    data = {k: v.format(b=base[:12], p=p1[:12]) for k, v in data.items()}
    r = client.post("/function/__rmqueue_smallest/bisect", data={"token": TOKEN, **data})
    assert r.status_code == status and msg in r.data, (r.status_code, r.data[-600:])
    assert client.post("/function/__rmqueue_smallest/bisect",
                       data={"token": "nope", "range": f"{base}..{p1}", "toolchain": "gcc-12",
                             "condition": "outlined"}).status_code == 403
