"""The dashboard's runtime views (issue 26), Flask's test client over a store written as the pipeline
writes it (made measurements, tests/runtime_data): the commit page and ``/api/commit`` show per measured
vmlinux build the page_bench table parent -> this commit with the "not cycles" note and a failed
measurement's one line; the function page its instructions and calls per pair along history per
toolchain; damaged values are marked unreadable, never a 500; escaping and headers as every page."""
from __future__ import annotations

import sqlite3

import pytest

from db.store import open_store
from runtime_data import failed, runtime
from test_runtime_store import A, B, _vmlinux

C = "c" * 40
NOT_CYCLES = "counted under emulation (QEMU TCG): executed instructions, not cycles"


def fill(s) -> None:
    grow = {0: {"get_page_from_freelist": 6}, 4: {"__rmqueue_smallest": 40}}
    for tc, head in (("gcc-12", runtime(grow)), ("clang-19", failed())):
        s.record_build(_vmlinux(A, None, runtime(), toolchain=tc))
        s.record_build(_vmlinux(B, A, head, toolchain=tc))
    s.record_build(_vmlinux(C, B, runtime({0: {"get_page_from_freelist": 6, "__alloc_pages": -3}}), toolchain="gcc-12"))


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "store.db"
    with open_store(path) as s:
        fill(s)
    return path


def _client(db):
    from web.app import create_app
    from web.settings import WebSettings
    return create_app(WebSettings(db, jobs_dir=db.with_name("jobs"))).test_client()


def test_commit_page_and_api(db):
    c = _client(db)
    doc = c.get(f"/api/commit/{B}").get_json()
    by = {t["toolchain"]: t for t in doc["toolchains"]}
    rt = by["gcc-12"]["runtime"]
    assert (rt["status"], rt["compared"], rt["note"], rt["pairs"]) == ("ok", True, NOT_CYCLES, 10000)
    o0, o4 = rt["orders"]
    assert (o0["order"], o0["size"], o0["instructions"], o0["delta"], o0["percent"], o0["lines"]) == \
        (0, "4K", [375, 381], 6, 1.6, [23, 23])
    assert o4["functions"] == [{"name": "__rmqueue_smallest", "unit": True, "instructions": [311, 351], "delta": 40,
                                "calls": [1, 1], "lines": [17, 20]}]
    assert by["clang-19"]["runtime"]["status"] == "failed" and by["clang-19"]["runtime"]["orders"] == []
    assert [f["kind"] for f in by["gcc-12"]["other_changes"]] == ["fastpath_instructions", "fastpath_lines"]
    r = c.get(f"/commit/{B}")
    html = r.get_data(as_text=True)
    assert r.status_code == 200 and r.headers["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" in r.headers
    assert "Fast path under emulation" in html and NOT_CYCLES in html
    assert '<td class="num">375 → 381</td>' in html and '<td class="num">1,400 → 1,440</td>' in html
    assert '<a href="/function/__rmqueue_smallest?toolchain=gcc-12">__rmqueue_smallest</a> 311 → 351' in html
    assert "Measurement failed: guest did not reach the benchmark: last console line &#39;Kernel panic" in html
    assert "fastpath instructions" in html              # the finding, with the other changes
    # the first commit: this commit's figures alone
    first = c.get(f"/api/commit/{A}").get_json()["toolchains"][0]["runtime"]
    assert first["compared"] is False and first["base_status"] is None
    assert first["orders"][0]["instructions"] == [None, 375]
    assert "The parent was not measured." in c.get(f"/commit/{A}").get_data(as_text=True)


def test_function_page_history(db):
    c = _client(db)
    doc = c.get("/api/function/get_page_from_freelist").get_json()
    ru = doc["runtime"]
    assert ru["note"] == NOT_CYCLES and ru["orders"] == ["0", "4"]
    (gcc,) = [ln for ln in ru["lines"] if ln["toolchain"] == "gcc-12"]
    assert [r["commit"] for r in gcc["rows"]] == [C, B, A]          # newest first
    assert [r["orders"]["0"]["instructions"] for r in gcc["rows"]] == [143, 143, 137]
    assert [r["orders"]["0"]["delta"] for r in gcc["rows"]] == [0, 6, None]
    assert gcc["rows"][0]["orders"]["0"]["calls"] == 1
    (clang,) = [ln for ln in ru["lines"] if ln["toolchain"] == "clang-19"]
    assert [r["commit"] for r in clang["rows"]] == [A]              # a failed measurement has no figures
    html = c.get("/function/get_page_from_freelist").get_data(as_text=True)
    assert "Executed per alloc/free pair" in html and NOT_CYCLES in html
    assert "143 (1) <span class=\"delta grow\">+6</span>" in html
    assert c.get("/api/function/get_page_from_freelist?changes=1").get_json()["runtime"]["lines"][1]["rows"][0][
        "commit"] == C
    assert c.get("/function/no_such_fn").status_code == 404


def _damage(db, sql: str) -> None:
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()


def test_damaged_measurement_is_marked(db):
    bid = sqlite3.connect(db).execute("SELECT b.id FROM builds b JOIN commits c ON c.id = b.commit_id "
                                      "WHERE c.sha = ? ORDER BY b.id LIMIT 1", (B,)).fetchone()[0]
    _damage(db, f"UPDATE runtimes SET data = '{{' WHERE build_id = {bid}")
    c = _client(db)
    r = c.get(f"/api/commit/{B}")
    assert r.status_code == 200 and r.headers.get("X-Sizewatch-Unreadable")
    doc = r.get_json()
    assert any(f"runtime measurement of build {bid}" in n for n in doc["unreadable"])
    (t,) = [t for t in doc["toolchains"] if t["build_id"] == bid]
    assert t["runtime"]["status"] == "failed"
    assert t["runtime"]["message"] == f"[unreadable in the store: runtime measurement of build {bid}]"
    html = c.get(f"/commit/{B}").get_data(as_text=True)
    assert 'class="damaged"' in html and f"Measurement failed: [unreadable in the store: runtime measurement" in html


def test_damaged_history_values_are_marked(db):
    _damage(db, "UPDATE runtime_functions SET instructions = 'x<b>', calls = x'00' WHERE page_order = 0")
    c = _client(db)
    r = c.get("/function/get_page_from_freelist")
    html = r.get_data(as_text=True)
    assert r.status_code == 200 and r.headers.get("X-Sizewatch-Unreadable")
    assert 'class="damaged"' in html and "<b>" not in html
    assert "[unreadable in the store: runtime of " in html
    doc = c.get("/api/function/get_page_from_freelist").get_json()
    row = doc["runtime"]["lines"][1]["rows"][0]["orders"]
    assert row["0"]["instructions"].startswith("[unreadable in the store: runtime of cccccccccccc (gcc-12), order 0")
    assert row["0"]["delta"] is None and row["4"]["instructions"] == 298
