"""A patch's runtime measurement in ``sizewatch report`` (text, Markdown, JSON): the page_bench table
per order, parent -> this commit, the functions that changed with their calls per pair, a failed
measurement's one line, and where an executed path left its static likely path."""
from __future__ import annotations

import json

import pytest

from ci.reports import text as render
from ci.reports.model import commit_report
from db.store import open_store
from runtime_data import failed, runtime
from test_runtime_store import A, B, _vmlinux

C = "c" * 40


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "s.db") as s:
        s.record_build(_vmlinux(A, None, runtime(orders=(0, 4, 8))))
        s.record_build(_vmlinux(B, A, runtime({0: {"get_page_from_freelist": 6, "free_pcp_prepare": -1},
                                               4: {"__rmqueue_smallest": 31.5}}, orders=(0, 4, 8),
                                              calls={0: {"get_page_from_freelist": 2}},
                                              disagree={0: ("get_page_from_freelist",)})))
        s.record_build(_vmlinux(C, B, failed()))
        yield s


def test_text_table_per_order(store):
    out = render.text(commit_report(store, B))
    lines = out.splitlines()
    i = lines.index("fast path: executed instructions per alloc/free pair in mm/page_alloc.c")
    assert lines[i + 1:i + 4] == ["  alloc_pages(GFP_KERNEL, order) + __free_pages, 10000 pairs per order,",
                                  "  qemu-system-x86_64 7.2.22 (TCG, 1 vCPU)",
                                  "  counted under emulation (QEMU TCG): executed instructions, not cycles"]
    rows = {ln.split()[0]: ln.split() for ln in lines[i + 3:] if ln.strip() and ln.split()[0].isdigit()}
    assert rows["0"] == ["0", "4K", "375", "380", "+5", "+1.33%", "23", "23"]
    assert rows["4"] == ["4", "64K", "1400", "1431.50", "+31.50", "+2.25%", "78", "80"]
    assert rows["8"] == ["8", "1M", "1400", "1400", "0", "0%", "78", "78"]
    fn = [ln.split() for ln in lines if ln.startswith("        get_page_from_freelist")]
    assert fn == [["get_page_from_freelist", "137", "->", "143", "+6", "calls", "1", "->", "2"]]
    assert [ln.split()[:5] for ln in lines if ln.startswith("        free_pcp_prepare")] == \
        [["free_pcp_prepare", "37", "->", "36", "-1"]]
    j = lines.index("  executed vs likely path per call (instructions run off it/on it not run):")
    assert lines[j + 1] == "    get_page_from_freelist 3/0 (order 0)"
    assert [ln for ln in lines[i:j + 2] if len(ln) > 78] == []


def test_first_commit_and_failed_measurements(store):
    first = render.text(commit_report(store, A)).splitlines()
    assert any(ln.split()[:4] == ["0", "4K", "375", "23"] for ln in first)
    assert any("parent not measured" in ln for ln in first)
    broken = render.text(commit_report(store, C))
    assert "fast path: measurement failed: guest did not reach the benchmark: last console line 'Kernel panic" in broken
    assert "Traceback" not in broken


def test_markdown_and_json(store):
    md = render.markdown(commit_report(store, B))
    assert "| 0 | 4K | 375 → 380 | +5 | +1.33% | 23 → 23 | `get_page_from_freelist` +6 (2), `free_pcp_prepare` -1 (1) |" in md
    assert "executed instructions, not cycles" in md
    assert "- `get_page_from_freelist` 3/0 (order 0)" in md
    doc = json.loads(render.to_json(commit_report(store, B)))
    (t,) = doc["toolchains"]
    rt = t["runtime"]
    assert rt["status"] == "ok" and rt["orders"]["0"]["per_pair"]["instructions"] == 380
    assert rt["orders"]["0"]["functions"]["get_page_from_freelist"]["instructions"] == 143
    assert rt["orders"]["4"]["functions"]["__rmqueue_smallest"]["instructions"] == 342.5
    assert rt["base"]["orders"]["0"]["per_pair"]["instructions"] == 375
    (o0, o4, o8) = rt["comparison"]["orders"]
    assert (o0["instructions"], o0["delta"], o0["percent"], o0["lines"]) == ([375, 380], 5, 1.33, [23, 23])
    assert [f["name"] for f in o0["functions"]] == ["get_page_from_freelist", "free_pcp_prepare"]
    assert o8["functions"] == [] and rt["paths_disagree"][0]["function"] == "get_page_from_freelist"
    failed_doc = json.loads(render.to_json(commit_report(store, C)))["toolchains"][0]["runtime"]
    assert failed_doc["status"] == "failed" and failed_doc["message"].startswith("guest did not reach")
    assert failed_doc["comparison"] == {"base_status": "ok", "head_status": "failed", "changed": False, "orders": [],
                                        "message": failed_doc["message"]}


def test_unmeasured_builds_say_nothing(tmp_path):
    with open_store(tmp_path / "s.db") as s:
        s.record_build(_vmlinux(A, None))
        s.record_build(_vmlinux(B, A))
        rep = commit_report(s, B)
    assert rep.toolchains[0].runtime is None and "fast path" not in render.text(rep)
    assert "runtime" not in json.loads(render.to_json(rep))["toolchains"][0]
