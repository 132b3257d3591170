"""Link addresses through the pipeline: a vmlinux pair recorded, compared, stored and shown.

The two linked kernels are the tests' tinyconfig vmlinux at the example series' base and patch 1
(gcc-12, built once and cached by tests/kernel_images.py). They go through the pipeline's own
``_record`` (analysis and store, one transaction per build) and ``compare_all`` (moves, findings,
tables), then every view: ``sizewatch report`` text, Markdown and JSON, the bot's mail block, the
dashboard's commit page and function page. Oracle: ``nm -n -S`` of the same two files.
The build of vmlinux per patch is the ``vmlinux`` helper's part of issue 13: the images here stand in
for what ``build_all`` hands ``_record``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from test_link_layout import nm_addr

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.kernel, pytest.mark.slow]


@pytest.fixture(scope="module")
def linked_store(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "tests"))
    from kernel_images import CONFIG, TOOLCHAIN, tiny_vmlinux
    from ci.pipeline import builder
    from ci.pipeline.run import _record, compare_all, report
    from ci.pipeline.plan import plan_range
    from db.store import open_store
    from toolchains.source import Tree
    images = tiny_vmlinux()
    path = tmp_path_factory.mktemp("link") / "store.db"
    store = open_store(path)
    tree = Tree("linux-6.1", images.tree)
    plan = plan_range(store, tree, f"{images.shas[0]}..{images.shas[1]}")
    assert [c.sha for c in plan.to_build] == images.shas
    from toolchains.build import toolchain_info
    compiler = toolchain_info(TOOLCHAIN, CONFIG.arch)
    tc, version = compiler
    for commit, vmlinux in zip(plan.to_build, images.vmlinux):
        done = builder.Built(commit.sha, TOOLCHAIN, version, tc.family, builder.config_key(CONFIG), "", None, "ok",
                             "cached", 0.0, "", [], {"vmlinux": vmlinux})
        _record(store, tree, commit, done, "vmlinux")
    assert compare_all(store, plan, [compiler], ["vmlinux"], CONFIG) == 1
    assert compare_all(store, plan, [compiler], ["vmlinux"], CONFIG) == 0      # nothing left to do
    return store, path, plan, images, report(store, plan, [TOOLCHAIN], ["vmlinux"])


def test_stored_layout_is_nm(linked_store):
    """Each build's stored layout: every hot function nm -n -S lists, at nm's address with its size,
    blocks, lines, phase, neighbours and padding (tests/link_oracles.py)."""
    store, _, plan, images, _ = linked_store
    from analyzer.hotpaths import HotPaths
    from ci.pipeline import builder
    from kernel_images import CONFIG, TOOLCHAIN
    from link_oracles import assert_layout_is_nm
    for commit, vmlinux in zip(plan.to_build, images.vmlinux):
        b = store.find_build(plan.tree.name, commit.sha, TOOLCHAIN, builder.config_key(CONFIG), "vmlinux")
        lay = store.link_layout_for(b.id)["vmlinux"]
        assert lay and [p.address for p in lay] == sorted(p.address for p in lay)
        assert_layout_is_nm(lay, vmlinux, HotPaths().__contains__)


def test_moves_and_findings(linked_store):
    store, _, plan, images, reports = linked_store
    (rep,) = reports
    (t,) = rep.toolchains
    assert t.target == "vmlinux" and t.link_moves
    base, head = images.vmlinux
    for m in t.link_moves:
        if m.base and m.head and m.ordinal == 0:
            assert m.shift == nm_addr(head, m.name)[0] - nm_addr(base, m.name)[0]
            assert m.unexplained == 0
            # at most 5 causes a move here: none trimmed away, so the causes listed sum to the shift
            assert m.more_causes == 0 and sum(c.footprint_delta for c in m.causes) + m.by_section == m.shift
    ap = next(m for m in t.link_moves if m.name == "__alloc_pages")
    assert ap.shift and ap.size_delta == 0 and "get_page_from_freelist" in ap.why
    kinds = {(f.kind, f.function) for f in t.changes}
    # a hot function's entry at another 64-byte phase is a finding exactly when nm says so
    for m in t.link_moves:
        if m.base and m.head and m.ordinal == 0:
            phases = nm_addr(base, m.name)[0] % 64, nm_addr(head, m.name)[0] % 64
            assert (("link_phase", m.name) in kinds) == (phases[0] != phases[1]), (m.name, phases)
    # in the allocator images __alloc_pages is 3648 bytes (57 cache lines) earlier: the same 64-byte
    # phase, no finding; a link_phase finding for exactly the moves whose phase changed
    assert not ap.phase_changed and ("link_phase", "__alloc_pages") not in kinds
    assert {fn for k, fn in kinds if k == "link_phase"} == {m.name for m in t.link_moves if m.phase_changed} == \
        {"__free_pages", "free_unref_page", "free_unref_page_list", "get_page_from_freelist", "rmqueue_bulk"}
    gp = next(m for m in t.link_moves if m.name == "get_page_from_freelist")
    assert gp.lines_delta < 0 and ("link_cache_lines", "get_page_from_freelist") not in kinds
    for f in t.changes:
        if f.kind == "link_cache_lines":
            d = f.data["details"]
            assert d["head"]["lines"] > d["base"]["lines"]


def test_report_renderings(linked_store):
    from ci.reports import mail, text
    _, _, _, _, reports = linked_store
    out = text.text(reports)
    assert "link addresses of hot functions (parent -> this patch):" in out
    (t,) = reports[0].toolchains
    ap = next(m for m in t.link_moves if m.name == "__alloc_pages")
    rows = out.splitlines()
    i = next(k for k, ln in enumerate(rows) if ln.split()[:1] == ["__alloc_pages"])
    assert rows[i].split() == ["__alloc_pages", f"{ap.head.address:x}", str(ap.head.size),
                               f"{ap.base.lines}->{ap.head.lines}" if ap.lines_delta else str(ap.head.lines),
                               f"{ap.base.phase}->{ap.head.phase}" if ap.phase_changed else str(ap.head.phase),
                               f"{ap.shift:+d}"]
    assert rows[i + 1].strip().startswith("moved by") and "get_page_from_freelist" in rows[i + 1]
    md = text.markdown(reports)
    assert "| function | address | size | lines | phase | shift | why |" in md and "`__alloc_pages`" in md
    doc = text.to_json(reports)
    assert '"link_moves": [' in doc and '"causes"' in doc
    block = mail.link_block(t)
    assert block and all(len(ln) <= mail.WIDTH for ln in block)
    assert any("__alloc_pages" in ln for ln in block)


def test_dashboard_pages(linked_store, tmp_path):
    from web.app import create_app
    from web.settings import WebSettings
    _, path, plan, _, _ = linked_store
    app = create_app(WebSettings(path, token=None, jobs_dir=tmp_path / "jobs"))
    client = app.test_client()
    sha = plan.commits[0].sha
    r = client.get(f"/api/commit/{sha}")
    assert r.status_code == 200
    (tc,) = r.get_json()["toolchains"]
    assert tc["link"]["compared"] and any(row["function"] == "__alloc_pages" for row in tc["link"]["rows"])
    html = client.get(f"/commit/{sha}").get_data(as_text=True)
    assert "Hot functions at their link addresses" in html and "__alloc_pages" in html
    fr = client.get("/api/function/__alloc_pages").get_json()
    assert fr["link"] and fr["link"]["changes"][0]["commit"] == sha
    ch = fr["link"]["changes"][0]
    assert ch["shift"] == int(ch["address"][1], 16) - int(ch["address"][0], 16) != 0
    page = client.get("/function/__alloc_pages").get_data(as_text=True)
    assert "At its link address" in page and ch["address"][1] in page


def test_bot_rules_and_mail(linked_store):
    """The [report] switches named as the kinds: link_cache_lines mailed by default, link_phase when
    switched on; the mail's findings block carries the link table under the flagged findings."""
    from ci.bot.policy import ReportRules
    from ci.bot.verdict import series_findings
    from ci.reports import mail
    from ci.reports.model import SeriesReport
    from db.models import Series
    _, _, _, _, reports = linked_store
    p = reports[0]
    p.position = 1
    rep = SeriesReport(Series("linux-6.1", "<m>"), [p])
    (t,) = p.toolchains
    lines = {f.function for f in t.changes if f.kind == "link_cache_lines"}
    assert lines == {m.name for m in t.link_moves if m.base and m.head and m.lines_delta > 0}
    # gcc-12's tinyconfig pair: two hot functions span one more cache line at patch 1
    assert lines == {"free_unref_page", "free_unref_page_list"}
    got = series_findings(rep, ReportRules())
    assert {r.function for r in got if r.kind == "link_cache_lines"} == lines
    assert not [r for r in got if r.kind == "link_phase"]
    loud = series_findings(rep, ReportRules(link_phase=True))
    assert {r.function for r in loud if r.kind == "link_phase"} == \
        {m.name for m in t.link_moves if m.phase_changed}
    # the mail flags what the rules select: the two link_cache_lines findings
    block = mail.findings_block(p, got, [t])
    assert all(len(ln) <= mail.WIDTH for ln in block)
    assert {ln.split()[3] for ln in block if ln.startswith(">> link_cache_lines: hot ")} == lines, block
    assert any("link addresses of hot functions" in ln for ln in block)


def test_store_check_and_damage(linked_store, tmp_path):
    """``sizewatch db check`` reads the new JSON columns; a damaged move row is named there and shown
    as the others (the report still renders)."""
    import sqlite3
    from ci.reports import text
    from ci.reports.model import commit_report
    from db.check import check_store
    from db.store import open_store
    _, path, plan, _, _ = linked_store
    assert check_store(path).ok, check_store(path).line()
    copy = tmp_path / "damaged.db"
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:     # the WAL's rows too
        src.backup(dst)
    with sqlite3.connect(copy) as c:
        n = c.execute("UPDATE link_moves SET data = '{not json' WHERE pos = 0").rowcount
    assert n == 1
    res = check_store(copy)
    assert not res.ok and "link_moves" in res.line()
    with open_store(copy, read_only=True) as store:
        rep = commit_report(store, plan.commits[0].sha)
        (t,) = rep.toolchains
        assert t.link_moves is not None and len(t.link_moves) > 1
        assert "link addresses of hot functions" in text.patch_text(rep)


def test_sizewatch_report_command(linked_store):
    """``sizewatch report COMMIT --db STORE`` as a user runs it prints the link table (text and JSON)."""
    import json
    import subprocess
    from conftest import sizewatch_cmd
    from ci.reports import text
    from ci.reports.model import commit_report
    from db.store import open_store
    _, path, plan, _, reports = linked_store
    sha = plan.commits[0].sha
    r = subprocess.run([*sizewatch_cmd(), "report", sha[:12], "--db", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "link addresses of hot functions (parent -> this patch):" in r.stdout
    with open_store(path, read_only=True) as store:       # the command is a rendering of the stored report
        assert r.stdout == text.patch_text(commit_report(store, sha))
    doc = json.loads(subprocess.run([*sizewatch_cmd(), "report", sha, "--json", "--db", str(path)],
                                    capture_output=True, text=True, check=True).stdout)
    (tc,) = doc["toolchains"]
    assert tc["target"] == "vmlinux" and any(m["name"] == "__alloc_pages" and m["shift"] for m in tc["link_moves"])


def test_stored_moves_and_findings_are_nm(linked_store):
    """Every stored move is what ``nm -n -S`` of the two files says (tests/link_oracles.py): each hot
    function's address, size, 16-byte blocks, 64-byte lines and phase in both images, its shift, the
    symbols before it whose footprint changed (kind, size change, bytes moved: the explanation),
    the by_* sums and the text of ``why``; the link findings are exactly the moves nm shows spanning
    more lines (link_cache_lines) or at another phase (link_phase), with those figures."""
    from analyzer.hotpaths import HotPaths
    from ci.pipeline import builder
    from ci.pipeline.link_layout import CAUSES_KEPT
    from kernel_images import CONFIG, TOOLCHAIN
    from link_oracles import assert_link_findings_are_nm, assert_moves_are_nm, link_findings, nm_moves
    store, _, plan, images, reports = linked_store
    want = nm_moves(*images.vmlinux, HotPaths().__contains__)
    key = builder.config_key(CONFIG)
    b, h = (store.find_build(plan.tree.name, c.sha, TOOLCHAIN, key, "vmlinux") for c in plan.to_build)
    assert_moves_are_nm(store.link_moves_for(h.id, b.id), want, CAUSES_KEPT)
    # the pair means something: hot functions moved, some because a function before them changed size
    assert any(w.shift for w in want.values())
    assert any(c[1] in ("grew", "shrank") for w in want.values() for c in w.causes)
    (t,) = reports[0].toolchains
    assert link_findings(want)
    assert_link_findings_are_nm([f for f in t.changes if f.kind in ("link_cache_lines", "link_phase")], want)
