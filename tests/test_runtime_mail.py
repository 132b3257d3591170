"""The bot's mail about a measured series (issue 26): the page_bench table per measured compiler,
said plainly to be executed instructions under QEMU TCG and not cycles, 78 columns; the fast-path
findings flagged with >>. Made data through the store, as the pipeline writes it."""
from __future__ import annotations

import botlist
from ci.bot.mailbox import parse_mail
from ci.bot.policy import Policy
from ci.bot import reply
from ci.bot.verdict import series_findings
from ci.reports.model import series_report
from db.models import Series, SeriesPatch
from db.store import open_store
from runtime_data import failed, runtime
from test_runtime_store import A, B, _vmlinux
from toolchains.kbuild import Config

import pytest

C = "c" * 40


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "s.db") as s:
        for tc in ("gcc-12", "clang-19"):
            s.record_build(_vmlinux(A, None, runtime(), toolchain=tc))
        s.record_build(_vmlinux(B, A, runtime({0: {"get_page_from_freelist": 6}, 4: {"__rmqueue_smallest": 40}}),
                                toolchain="gcc-12"))
        s.record_build(_vmlinux(B, A, failed(), toolchain="clang-19"))
        s.record_build(_vmlinux(C, B, runtime(), toolchain="gcc-12"))
        s.record_build(_vmlinux(C, B, runtime(), toolchain="clang-19"))
        s.record_series(Series("t", "<series@x>", "[PATCH 0/2] mm: fast path", base_sha=A, patches=[
            SeriesPatch(1, "mm: grow", commit_sha=B), SeriesPatch(2, "mm: back", commit_sha=C)]))
        yield s


def _mail(store, position: int) -> tuple[str, list]:
    policy = Policy(address=botlist.BOT)
    rep = series_report(store, "<series@x>", runtime=policy.report.runtime_thresholds)
    items = series_findings(rep, policy.report)
    p = rep.patches[position - 1]
    ctx = reply.TestContext("linux-6.1", "6.1", A, "base-commit", 1, [("gcc-12", "gcc-12 1.0"), ("clang-19", "clang-19 1.0")],
                      ["vmlinux"], Config())
    original = parse_mail(botlist.series_v1()[2], "test", "0", "2026-11-23T10:00:00+00:00", (botlist.BOT,))
    return reply.findings_body(original, p, [r for r in items if r.position == position], ctx, policy), items


def test_measured_series_mail(store):
    text, items = _mail(store, 1)
    lines = text.splitlines()
    assert all(len(ln) <= 78 for ln in lines)
    assert "counted the page allocator's executed instructions under emulation" in " ".join(lines[:6])
    assert ">> fastpath_instructions: the fast path executes more instructions per" in text
    assert ">> fastpath_lines: the fast path touches more 64-byte instruction lines" in text
    i = lines.index("fast path under emulation, gcc-12, vmlinux (parent -> this patch):")
    assert " ".join(lines[i + 2:i + 5]).startswith("These are instructions executed per alloc/free pair, counted "
                                                    "exactly in a QEMU TCG guest (emulation): not cycles, not time "
                                                    "on hardware.")
    rows = {ln.split()[0]: ln.split() for ln in lines[i:i + 20] if ln.strip()[:1].isdigit()}
    assert rows["0"] == ["0", "4K", "375", "381", "+6", "+1.60%", "23", "23"]
    assert rows["4"] == ["4", "64K", "1400", "1440", "+40", "+2.86%", "78", "81"]
    assert "  counted under emulation (QEMU TCG): executed instructions, not cycles" in lines
    # the other compiler's failed measurement: its one line, under its own heading
    j = lines.index("fast path under emulation, clang-19, vmlinux (parent -> this patch):")
    assert lines[j + 2].startswith("fast path: measurement failed: guest did not reach the benchmark")
    assert "      --toolchains gcc-12 --targets vmlinux --measure" in lines
    # patch 2 goes back down: info, nothing flagged, so the bot has nothing to mail about it
    assert [r for r in items if r.position == 2] == []
