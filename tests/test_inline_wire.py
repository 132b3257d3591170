"""Inline cost through the product (issue 14): stored with each build (0014), compared from the store
in ``sizewatch report`` (text, Markdown, JSON), the commit and function pages and their /api/ twins,
``sizewatch history --inlined``, and the bot's ``[report] inline_growth_*`` knob.

The example series' objects come from the shared cache; ``nm -S`` and bloat-o-meter's table (from
the same report) are the oracles the totals are checked against.
"""
from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

import botlist
from analyzer.inline_cost import CalleeCost, CallerCost, InlineCost, Unattributed, inline_cost
from analyzer.inline_cost_diff import compare

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures" / "inline_cost"
HELPERS = ("__rmqueue_fallback", "__rmqueue_smallest")
TOOLCHAINS = ("gcc-12", "clang-19")


def nm_text_sizes(path: Path) -> dict[str, int]:
    """``nm -S`` function symbols' sizes summed per name (as bloat-o-meter and the analyzer sum them)."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(path)], check=True, capture_output=True,
                         text=True).stdout
    sizes: dict[str, int] = defaultdict(int)
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            sizes[parts[3]] += int(parts[1], 16)
    return dict(sizes)


def run_cli(*args, db: Path) -> subprocess.CompletedProcess:
    from conftest import sizewatch_cmd
    return subprocess.run([*sizewatch_cmd(), *map(str, args), "--db", str(db)], capture_output=True, text=True,
                          timeout=300)


# --- the store: rows in, the same InlineCost out ---------------------------------------------------

def test_store_round_trip(compile_c, tmp_path):
    """What goes into the store (0014) comes back as the same InlineCost, and the rows add up."""
    from db.inline_cost import record_of, to_inline_cost
    from db.models import BuildRecord, Commit, ConfigInfo
    from db.store import open_store
    from ci.pipeline.objects import object_record
    obj = compile_c("gcc-12", FIX / "callers.c", name="wire.o")
    ic = inline_cost(obj)
    rec = object_record(obj, "x.o")
    rec.inline_cost = record_of("x.o", ic)
    with open_store(tmp_path / "s.db") as store:
        bid = store.record_build(BuildRecord("t", Commit("a" * 40, None, "s"), "gcc-12", "gcc-12 1", ConfigInfo("k"),
                                             "x.o", "ok", objects=[rec], analysis_version=5))
        (got,) = store.inline_costs_for(bid)
        back = to_inline_cost([got])
        conn = store.connection()
        rows = conn.execute("SELECT sum(size), sum(inlined), sum(own), sum(undescribed) FROM inline_callers").fetchone()
    want, have = ic.to_dict(), back.to_dict()
    for c in want["callees"].values():
        c["units"] = []                  # the store counts units, it does not name them
    assert have["callees"] == want["callees"] and have["callers"] == want["callers"]
    assert have["files"] == want["files"] and have["unattributed"] == want["unattributed"]
    assert back.inlined_bytes == ic.inlined_bytes and got.callees[0].units == 1
    size, inlined, own, undescribed = rows
    nm = nm_text_sizes(obj)
    assert size == sum(nm[c] for c in ic.callers) and size == inlined + own + undescribed
    assert inlined == ic.inlined_bytes
    # a build without inline cost (an older analysis) reads as none, not as zeros
    with open_store(tmp_path / "s.db") as store:
        bid2 = store.record_build(BuildRecord("t", Commit("b" * 40, "a" * 40, "s"), "gcc-12", "gcc-12 1",
                                              ConfigInfo("k"), "x.o", "ok", objects=[object_record(obj, "x.o")],
                                              analysis_version=4))
        assert store.inline_costs_for(bid2) == []
        assert [p.bytes for p in store.inline_history("scale")] == [ic.callees["scale"].bytes]
        # a comparison's inline cost moves the commit page's stamp (cached pages follow it)
        from ci.reports.model import inline_report
        before = store.change_stamp(commit="b" * 40)
        assert inline_report(store, bid, bid2) is None              # the head has none stored: no table
        store.record_comparison(bid2, bid, [], None, {"callees": []})
        assert store.change_stamp(commit="b" * 40) != before
        assert store.comparison_inline_cost(bid2, bid) == {"callees": []}
    # a function only ever seen inlined (no symbol, no inline facts stored) still has a page: its inlined copies
    from web.app import create_app
    from web.settings import WebSettings
    client = create_app(WebSettings(tmp_path / "s.db", jobs_dir=tmp_path / "jobs")).test_client()
    page = client.get("/function/scale")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "it is only seen inlined" in html and "Inlined copies" in html
    d = client.get("/api/function/scale").get_json()
    assert d["chart"] is None and [c["bytes"] for c in d["inlined"]["current"]] == [ic.callees["scale"].bytes]
    assert d["inlined"]["changes"] == [] and d["inlined"]["points"] == 1     # the other build has no inline cost
    assert client.get("/function/not_here").status_code == 404


def test_vmlinux_scope_is_bounded(tmp_path, compile_c):
    """A vmlinux over the limit is read for the allocator's units only, and says so; objects whole."""
    from ci.pipeline.inline_costs import object_inline_cost
    obj = compile_c("gcc-12", FIX / "callers.c", name="scope.o")
    whole = object_inline_cost(obj, "x.o", whole_limit=0)
    assert whole is not None and whole.scope == () and whole.inlined_bytes == inline_cost(obj).inlined_bytes
    assert object_inline_cost(obj, "mm/") is None                   # directory targets: none
    stripped = tmp_path / "stripped.o"
    subprocess.run(["strip", "-g", "-o", str(stripped), str(obj)], check=True)
    assert object_inline_cost(stripped, "x.o") is None              # no DWARF: none, not an error


# --- the policy knob -----------------------------------------------------------------------------

def _cost(bytes_: dict[str, int], instances: int = 2) -> InlineCost:
    callees = {n: CalleeCost(n, "include/linux/mmzone.h", instances if b else 0, b, b,
                             callers={"get_page_from_freelist": b} if b else {}) for n, b in bytes_.items()}
    total = sum(bytes_.values())
    return InlineCost("x", 1, callees, {"get_page_from_freelist": CallerCost("get_page_from_freelist", total + 10,
                                                                             total, 10)},
                      {}, Unattributed(), total)


def _report(old: dict[str, int], new: dict[str, int]):
    from ci.reports.model import InlineReport, InlineTotals, PatchReport, SeriesReport, ToolchainReport
    from db.models import Commit, Series
    a, b = _cost(old), _cost(new)
    t = ToolchainReport("gcc-12", "gcc-12 1.0", "vmlinux", "k", "ok", 2, 1, "ok",
                        inline_cost=InlineReport(compare(a, b), InlineTotals.of(a), InlineTotals.of(b)))
    return SeriesReport(Series("t", "<m>"), [PatchReport(Commit("a" * 40, "b" * 40), 1, "s", "applied", "", [t])])


def test_policy_inline_growth_is_parsed_and_checked():
    from analyzer.errors import InputError
    from ci.bot.policy import parse_policy
    p = parse_policy("[report]\ninline_growth_bytes = 40\ninline_growth_percent = 5\n")
    assert p.report.inline_growth_bytes == 40 and p.report.inline_growth_percent == 5.0
    assert parse_policy("").report.inline_growth_bytes == 0 and parse_policy("").report.inline_growth_percent == 0
    with pytest.raises(InputError, match=r"inline_growth_bytes: must not be negative"):
        parse_policy("[report]\ninline_growth_bytes = -1\n")
    with pytest.raises(InputError, match=r"inline_growth_bytes: expected an int"):
        parse_policy("[report]\ninline_growth_bytes = \"40\"\n")
    with pytest.raises(InputError, match=r"inline_growth_percent: must be a percentage >= 0"):
        parse_policy("[report]\ninline_growth_percent = -2.5\n")
    with pytest.raises(InputError, match=r"inline_growth_percent: must be a percentage >= 0"):
        parse_policy("[report]\ninline_growth_percent = inf\n")
    readme = "".join(f.read_text() for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    assert "inline_growth_bytes = 0" in readme and "inline_growth_percent = 0.0" in readme


def test_inline_growth_mails_past_the_threshold_only():
    from ci.bot.policy import ReportRules
    from ci.bot.verdict import justified, series_findings
    grow = _report({"zone_watermark_ok": 400, "steady": 50}, {"zone_watermark_ok": 440, "steady": 50})
    # +40 bytes (+10 %): at the byte limit nothing, one byte under it a mail
    assert series_findings(grow, ReportRules(inline_growth_bytes=40)) == []
    (r,) = series_findings(grow, ReportRules(inline_growth_bytes=39))
    assert (r.kind, r.function, r.toolchain, r.position) == ("inline_growth", "zone_watermark_ok", "gcc-12", 1)
    assert "grew by 40 bytes in vmlinux (400 -> 440 bytes, +10.0%" in r.message
    assert "most in get_page_from_freelist +40" in r.message and "over the limit of 39 bytes" in r.message
    # the percentage: 10 % is not past 10 %, past 9.9 % it is
    assert series_findings(grow, ReportRules(inline_growth_percent=10.0)) == []
    assert [x.function for x in series_findings(grow, ReportRules(inline_growth_percent=9.9))] == ["zone_watermark_ok"]
    # off by default; shrinking never mails
    assert series_findings(grow, ReportRules()) == []
    shrink = _report({"zone_watermark_ok": 440}, {"zone_watermark_ok": 400})
    assert series_findings(shrink, ReportRules(inline_growth_bytes=1, inline_growth_percent=1)) == []
    # newly inlined (nothing before): no percentage, bytes alone judge it
    new = _report({"fresh": 0}, {"fresh": 120})
    assert series_findings(new, ReportRules(inline_growth_percent=1.0)) == []
    (r,) = series_findings(new, ReportRules(inline_growth_bytes=100))
    assert "inlined nowhere before" in r.message
    # a justification trailer silences it as it silences growth
    kept, silenced = justified(series_findings(grow, ReportRules(inline_growth_bytes=1)), {1: "worth it"})
    assert kept == [] and [x.kind for x in silenced[1]] == ["inline_growth"]


def test_mail_shows_the_inline_table_when_flagged():
    from ci.bot.policy import Policy, ReportRules
    from ci.bot.reply import TestContext, findings_body
    from ci.bot.verdict import series_findings
    from ci.bot.mailbox import parse_mail
    from toolchains.kbuild import Config
    rep = _report({"zone_watermark_ok": 400}, {"zone_watermark_ok": 900})
    p = rep.patches[0]
    ctx = TestContext("linux-6.1", "6.1", "c" * 40, "base", 1, [("gcc-12", "gcc-12 1.0")], ["vmlinux"], Config())
    original = parse_mail(botlist.series_v1()[2], "test", "0", "2026-11-23T10:00:00+00:00", (botlist.BOT,))
    flagged = series_findings(rep, ReportRules(inline_growth_bytes=100))
    text = findings_body(original, p, flagged, ctx, Policy(address=botlist.BOT))
    assert ">> inline_growth: inline zone_watermark_ok grew by 500 bytes" in text
    assert "inlined code, gcc-12, vmlinux:" in text
    row = [ln for ln in text.splitlines() if ln.startswith("  zone_watermark_ok ")]
    assert row and row[0].split()[1:] == ["2", "2", "400", "900", "+500"]
    assert all(len(ln) <= 78 for ln in text.splitlines())
    # not flagged (knob off): no table
    quiet = findings_body(original, p, [], ctx, Policy(address=botlist.BOT))
    assert "inlined code, gcc-12" not in quiet


# --- the example series, end to end ----------------------------------------------------------------

@pytest.fixture(scope="module")
def built(example_series):
    return {tc: example_series(tc) for tc in TOOLCHAINS}


def _build_ids(db: Path, built) -> dict[tuple[str, int], int]:
    from db.store import open_store
    from toolchains.kbuild import Config
    out = {}
    with open_store(db, read_only=True) as store:
        for tc, objs in built.items():
            for i, o in enumerate(objs):
                out[(tc, i)] = store.find_build("linux-6.1", o.commit, tc, Config().key, "mm/page_alloc.o").id
    return out


@pytest.mark.kernel
def test_stored_rows_add_up_and_match_the_object(built, example_store):
    """Per build: the stored rows are the analyzer's reading of the object, the callers' sizes are nm -S's,
    and inlined + own + no DWARF range = size; patch 2 has __rmqueue_* instances, patch 1 none."""
    from db.inline_cost import to_inline_cost
    from db.store import open_store
    db, _ = example_store
    ids = _build_ids(db, built)
    with open_store(db, read_only=True) as store:
        for (tc, i), bid in ids.items():
            (rec,) = store.inline_costs_for(bid)
            fresh = inline_cost(built[tc][i].object_path)
            back = to_inline_cost([rec])
            assert {k: (c.instances, c.bytes, c.including, c.callers) for k, c in back.callees.items()} == \
                {k: (c.instances, c.bytes, c.including, c.callers) for k, c in fresh.callees.items()}, (tc, i)
            nm = nm_text_sizes(built[tc][i].object_path)
            for c in rec.callers:
                assert c.size == nm[c.symbol], (tc, i, c.symbol)
                assert c.inlined + c.own + c.undescribed == c.size
            assert sum(c.inlined for c in rec.callers) == rec.inlined_bytes == sum(c.bytes for c in rec.callees)
            assert rec.scope == () and rec.units == 1
            names = {c.name: c for c in rec.callees}
            for fn in HELPERS:
                if i == 1:
                    assert fn not in names or names[fn].bytes == 0, (tc, fn)
                else:
                    assert names[fn].instances > 0 and names[fn].bytes > 0, (tc, i, fn)


@pytest.mark.kernel
def test_report_json_api_and_history_agree(built, example_store, bloat_o_meter):
    """Patch 2: __rmqueue_* instances appear in the report's inline table with bytes that sit in the
    callers bloat-o-meter's table shows growing; the JSON API, the text, and history --inlined say
    the same numbers, and the totals add up to nm -S's sizes."""
    db, _ = example_store
    ids = _build_ids(db, built)
    for tc in TOOLCHAINS:
        base, p1, p2 = built[tc]
        rep = json.loads(run_cli("report", p2.commit, "--toolchains", tc, "--json", db=db).stdout)
        (t,) = rep["toolchains"]
        ic = t["inline_cost"]
        rows = {r["name"]: r for r in ic["callees"]}
        table = {r["name"]: r for r in t["tables"][0]["rows"]}
        nm = nm_text_sizes(p2.object_path)
        for fn in HELPERS:
            r = rows[fn]
            assert r["instances_old"] == 0 < r["instances_new"] and r["old"] == 0 < r["new"], (tc, fn)
            assert table[fn]["new"] is None and table[fn]["old"] > 0        # its out-of-line copy is gone
            assert r["callers"] and sum(c["new"] for c in r["callers"]) <= r["new"]
            for c in r["callers"]:
                # the callers it landed in grew in bloat-o-meter's table, and hold at least these bytes
                assert table[c["symbol"]]["delta"] > 0 and c["new"] <= table[c["symbol"]]["new"], (tc, fn, c)
                assert table[c["symbol"]]["new"] == nm[c["symbol"]]
        # totals: inlined + own + no DWARF range == the callers' nm -S sizes, before and after
        new, old = ic["totals"]["new"], ic["totals"]["old"]
        assert new["inlined"] + new["own"] + new["undescribed"] == new["size"]
        assert old["inlined"] + old["own"] + old["undescribed"] == old["size"]
        assert ic["inlined"]["new"] == new["inlined"] and ic["inlined"]["old"] == old["inlined"]
        from db.store import open_store
        with open_store(db, read_only=True) as store:
            (rec,) = store.inline_costs_for(ids[(tc, 2)])
        assert new["size"] == sum(nm[c.symbol] for c in rec.callers) and new["callers"] == len(rec.callers)
        # the text report prints the same rows, at most 78 columns
        text = run_cli("report", p2.commit, "--toolchains", tc, db=db).stdout
        section = text.split("inlined code (bytes, each in its innermost callee), parent -> this commit:")[1]
        for fn in HELPERS:
            line = [ln for ln in section.splitlines() if ln.split()[:1] == [fn]][0]
            r = rows[fn]
            assert line.split()[1:] == [str(r["instances_old"]), str(r["instances_new"]), "0", str(r["new"]),
                                        f"+{r['new']}"], (tc, line)
        assert f"caller symbols: {old['size']} -> {new['size']} bytes = inlined {old['inlined']} -> " \
               f"{new['inlined']}" in section
        assert all(len(ln) <= 78 for ln in section.split("\n--- ")[0].splitlines())
        md = run_cli("report", p2.commit, "--toolchains", tc, "--markdown", db=db).stdout
        assert f"| `{HELPERS[0]}` | mm/page_alloc.c | 0 → {rows[HELPERS[0]]['instances_new']} | 0 |" in md
        # history --inlined: the same bytes at each commit (0 at patch 1), in history order
        for fn in HELPERS:
            hist = json.loads(run_cli("history", fn, "--inlined", "--toolchain", tc, "--json", db=db).stdout)
            assert [h["commit_sha"] for h in hist] == [base.commit, p1.commit, p2.commit]
            assert hist[1]["bytes"] == 0 and hist[1]["instances"] == 0
            assert hist[2]["bytes"] == rows[fn]["new"] and hist[2]["instances"] == rows[fn]["instances_new"]
            assert hist[2]["decl_files"] == ["mm/page_alloc.c"]
    bad = run_cli("history", "no_such_inline_fn", "--inlined", db=db)
    assert bad.returncode == 1 and bad.stderr.strip() == \
        "sizewatch: no_such_inline_fn: not inlined in any stored build with an inline cost"


@pytest.mark.kernel
def test_commit_and_function_pages(built, example_store, tmp_path):
    from web.app import create_app
    from web.settings import WebSettings
    from test_web import copy_store
    db = copy_store(example_store[0], tmp_path / "store.db")
    client = create_app(WebSettings(db, jobs_dir=tmp_path / "jobs")).test_client()
    p2 = built["gcc-12"][2]
    api = client.get(f"/api/commit/{p2.commit}?toolchains=gcc-12").get_json()
    rep = json.loads(run_cli("report", p2.commit, "--toolchains", "gcc-12", "--json", db=db).stdout)
    (t,) = api["toolchains"]
    assert t["inline_cost"] == rep["toolchains"][0]["inline_cost"]        # the page's data is the report's
    html = client.get(f"/commit/{p2.commit}").get_data(as_text=True)
    assert "Where inlined code landed" in html
    assert '<a href="/function/__rmqueue_fallback?toolchain=gcc-12">__rmqueue_fallback</a>' in html
    new = t["inline_cost"]["totals"]["new"]
    assert f"caller symbols of {t['inline_cost']['totals']['old']['size']} → {new['size']} bytes" in html
    fn = client.get("/api/function/__rmqueue_smallest").get_json()
    cur = {c["toolchain"]: c for c in fn["inlined"]["current"]}
    row = next(r for r in t["inline_cost"]["callees"] if r["name"] == "__rmqueue_smallest")
    assert cur["gcc-12"]["bytes"] == row["new"] and cur["gcc-12"]["instances"] == row["instances_new"]
    # where it changed: patch 1 (inlined nowhere) and patch 2 (back), under each toolchain
    assert {(c["commit"], c["toolchain"]) for c in fn["inlined"]["changes"]} == \
        {(o.commit, tc) for tc in TOOLCHAINS for o in built[tc][1:]}
    page = client.get("/function/__rmqueue_smallest").get_data(as_text=True)
    assert "Inlined copies" in page and f">{row['new']}<" in page
    assert client.get("/function/no_such_fn_anywhere").status_code == 404


@pytest.mark.kernel
def test_stored_comparison_is_the_rows_comparison(built, example_store, tmp_path):
    """The inline comparison the pipeline stores with a pair (0014) is what comparing the two builds'
    rows gives; a damaged one is compared again from the rows (the same report) and db check names it."""
    from ci.reports.model import inline_report, stored_inline_report
    from db.check import check_store
    from db.store import open_store
    from test_web import copy_store
    db = copy_store(example_store[0], tmp_path / "store.db")
    ids = _build_ids(db, built)
    with open_store(db) as store:
        for tc in TOOLCHAINS:
            for i in (1, 2):
                head, base = ids[(tc, i)], ids[(tc, i - 1)]
                assert store.comparison_inline_cost(head, base) is not None, (tc, i)
                assert stored_inline_report(store, base, head).to_dict() == \
                    inline_report(store, base, head).to_dict(), (tc, i)
        head, base = ids[("gcc-12", 2)], ids[("gcc-12", 1)]
        want = inline_report(store, base, head).to_dict()
        store.connection().execute("UPDATE comparison_inline_costs SET report_z = x'00ff' WHERE build_id = ?", (head,))
        assert store.comparison_inline_cost(head, base) is None
        assert stored_inline_report(store, base, head).to_dict() == want
    res = check_store(db)
    assert not res.ok and "comparison_inline_costs.report_z not readable zlib data" in res.line()


@pytest.mark.kernel
@pytest.mark.slow
def test_vmlinux_whole_and_restricted():
    """A vmlinux (the tests' tinyconfig one, cached by tests/kernel_images.py): read whole under the
    limit, every unit; over it, the allocator's unit only, with the scope stored and reported."""
    from kernel_images import tiny_vmlinux
    from ci.pipeline.inline_costs import RESTRICTED_UNITS, object_inline_cost
    from db.inline_cost import scope_note, to_inline_cost
    vmlinux = tiny_vmlinux().vmlinux[0]
    whole = object_inline_cost(vmlinux, "vmlinux")
    assert whole.scope == () and whole.units > 100
    part = object_inline_cost(vmlinux, "vmlinux", whole_limit=0)
    assert part.scope == RESTRICTED_UNITS and part.units == 1
    assert scope_note([part]) == "restricted to the units mm/page_alloc.c"
    # kernel-wide: a helper of the allocator's header is inlined in more units than page_alloc.c's
    w, p = to_inline_cost([whole]), to_inline_cost([part])
    assert w.callees["__rmqueue_smallest"].bytes == p.callees["__rmqueue_smallest"].bytes > 0
    assert max(c.units for c in whole.callees if c.decl_file == "include/linux/mmzone.h") > 1
    assert w.inlined_bytes > p.inlined_bytes
    nm = nm_text_sizes(vmlinux)           # a name's copies DWARF never touches are not callers: bounded by nm
    for c in whole.callers:
        assert c.size <= nm[c.symbol] and c.inlined + c.own + c.undescribed == c.size
    assert sum(c.size == nm[c.symbol] for c in whole.callers) > 0.95 * len(whole.callers)
