"""The bot's parts without a kernel build: parsing list mail, b4-style assembly, the policy file,
the replies' shape, the outbox, and SMTP with STARTTLS and login against a real server on
127.0.0.1."""
from __future__ import annotations

import email
import email.policy
import mailbox
import ssl
from datetime import datetime, timedelta, timezone

import pytest

import botlist
from analyzer.errors import InputError
from ci.bot.assemble import assemble, topic
from ci.bot.mailbox import parse_mail, read_maildir, read_mbox
from ci.bot.outgoing import OutboxTransport, SendError, SmtpTransport
from ci.bot.policy import Policy, SmtpSettings, duration, parse_policy
from ci.bot.reply import WIDTH, compose, fit, recipients, stable_message_id, table_lines
from db.botstore import BotMail, BotSeries

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)


def parsed(*raws: bytes, at: datetime = T0) -> list:
    return [parse_mail(r, "test", str(i), at.isoformat(), (botlist.BOT,)) for i, r in enumerate(raws)]


# --- parsing ---------------------------------------------------------------------------------------

def test_parse_the_list_as_delivered():
    cover, p1, p2 = parsed(*botlist.series_v1())
    assert (cover.kind, cover.position, cover.total, cover.version) == ("cover", 0, 2, 1)
    assert cover.base_commit == botlist.BASE
    assert (p1.kind, p1.position, p2.position) == ("patch", 1, 2)
    assert p1.in_reply_to == botlist.COVER_ID and p2.references == [botlist.COVER_ID]
    assert p1.from_name == "Aaron Lu" and p1.from_addr == "aaron.lu@intel.com"
    assert p1.to == [botlist.LIST] and "Vlastimil Babka <vbabka@suse.cz>" in p1.cc
    assert p1.list_id == "<linux-mm.kvack.org>"
    assert p1.subject.startswith("[PATCH 1/2] mm/page_alloc: return __rmqueue() etc. to plain static inline")
    assert p1.raw and cover.raw                      # kept for git am
    (reply,) = parsed(botlist.review_reply())
    assert reply.kind == "reply" and reply.raw      # kept: its trailers are folded into the patches (b4)
    v2 = parsed(*botlist.series_v2())
    assert [m.version for m in v2] == [2, 2, 2] and v2[0].in_reply_to == botlist.COVER_ID


def test_parse_non_utf8_and_malformed():
    (jose,) = parsed(botlist.not_applying())
    assert jose.kind == "patch" and jose.from_name == "José Müller" and (jose.position, jose.total) == (1, 1)
    raw8 = "From: Jörg Rödel <joro@example.org>\nSubject: Re: [PATCH] x\nMessage-Id: <r@x>\n\nok".encode("latin-1")
    (joerg,) = parsed(raw8)                          # undeclared 8-bit header bytes: decoded as Latin-1
    assert joerg.from_name == "Jörg Rödel" and joerg.kind == "reply"
    (bad,) = parsed(botlist.MALFORMED)
    assert bad.kind == "malformed" and "Message-ID" in bad.note and bad.message_id.endswith("@sizewatch.invalid>")
    (numbers,) = parsed(b"From: a@b.org\nSubject: [PATCH 3/2] x\nMessage-Id: <n@b>\n\ndiff --git a/x b/x\n")
    assert numbers.kind == "malformed" and "bad patch number" in numbers.note
    (nodiff,) = parsed(b"From: a@b.org\nSubject: [PATCH 1/2] x\nMessage-Id: <d@b>\n\nno diff here\n")
    assert nodiff.kind == "other"
    own = parse_mail(b"From: sizewatch bot <sizewatch-bot@example.org>\nSubject: Re: [PATCH 1/2] x\n"
                     b"Message-Id: <o@b>\n\nhi", own_addresses=(botlist.BOT,))
    assert own.kind == "own"


def test_a_base64_patch_is_found_and_made_ready_for_git_am(tmp_path):
    import base64
    from ci.bot.mailbox import am_ready
    from toolchains.series import read_mbox as read_series
    plain = botlist.not_applying()
    head, _, text = plain.partition(b"\n\n")
    raw = head.replace(b"Content-Transfer-Encoding: 8bit", b"Content-Transfer-Encoding: base64") + b"\n\n" + \
        base64.encodebytes(text)
    assert b"diff --git" not in raw
    (m,) = parsed(raw)
    assert m.kind == "patch" and m.from_name == "José Müller" and m.base_commit == botlist.BASE
    ready = am_ready(raw)
    assert b"\ndiff --git a/mm/page_alloc.c" in ready and "Tidy up the comment".encode() in ready
    box = tmp_path / "s.mbox"
    box.write_bytes(b"From x Thu Jan  1 00:00:00 1970\n" + ready)
    (p,) = read_series(box).patches
    assert p.subject == "[PATCH] mm/page_alloc: tidy __rmqueue_smallest()" and "José" in p.author
    assert am_ready(plain) == plain


def test_read_maildir_and_mbox(tmp_path):
    md = tmp_path / "md"
    botlist.deliver(md, *botlist.series_v1())
    got = list(read_maildir(md))
    assert len(got) == 3
    assert list(read_maildir(md, {k for k, _ in got})) == []
    box = tmp_path / "list.mbox"
    botlist.append_mbox(box, *botlist.series_v1())
    first = list(read_mbox(box))
    botlist.append_mbox(box, botlist.review_reply())
    assert len(list(read_mbox(box, {k for k, _ in first}))) == 1
    with pytest.raises(InputError, match="no such maildir"):
        list(read_maildir(tmp_path / "nope"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="not a maildir"):
        list(read_maildir(tmp_path / "plain"))


# --- assembly --------------------------------------------------------------------------------------

def test_assemble_a_threaded_series_ignoring_replies():
    msgs = parsed(*botlist.series_v1(), botlist.review_reply())
    (s,) = assemble(msgs, [], T0, timedelta(hours=1)).series
    assert s.state == "ready" and s.key == f"{botlist.COVER_ID}|v1"
    assert s.cover.message_id == botlist.COVER_ID and [p.position for p in s.patches] == [1, 2]
    assert s.sender == "aaron.lu@intel.com" and s.base_commit == botlist.BASE



@pytest.mark.parametrize("case", ["series_v1", "not_applying", "from_line_in_body"])
def test_a_series_handed_on_as_data_is_the_one_an_mbox_gave(case, tmp_path):
    """The bot gives the pipeline its assembled messages as data (ci.bot.service.am_series): the same
    series, byte for byte, that writing them to an mbox with Python's mailbox and reading it back
    with toolchains.series.read_mbox gave (the way it went before)."""
    from ci.bot.mailbox import am_ready
    from ci.bot.service import AM_FROM, am_series
    from toolchains.series import read_mbox as read_series
    raws = {"series_v1": botlist.series_v1, "not_applying": lambda: [botlist.not_applying()],
            "from_line_in_body": lambda: [botlist.not_applying().replace(b"\n---\n", b"\nFrom here on it is\n>From quoted\n---\n", 1)]}[case]()
    (s,) = assemble(parsed(*raws), [], T0, timedelta(hours=1)).series
    pairs = [(m, am_ready(m.raw)) for m in s.messages]
    box = mailbox.mbox(str(tmp_path / "s.mbox"), create=True)
    for _, raw in pairs:
        box.add(f"From {AM_FROM}\n".encode() + raw)
    box.close()
    want, got = read_series(tmp_path / "s.mbox"), am_series(s, pairs)
    assert (got.cover is None) == (want.cover is None) == (case != "series_v1")
    assert got.base_commit == want.base_commit
    for g, w in zip(([got.cover] if got.cover else []) + got.patches, ([want.cover] if want.cover else []) + want.patches):
        assert (g.message_id, g.subject, g.author, g.date, g.position, g.version, g.raw) == \
               (w.message_id, w.subject, w.author, w.date, w.position, w.version, w.raw)
    # the cover letter's text is what the series row keeps; a patch's text and count are not read on
    # this path (the bot counts an untagged patch as 1/1, the mbox reader leaves its count unknown)
    assert got.cover is None or got.cover.body == want.cover.body != ""
    assert [p.total for p in got.patches] == [m.total for m in s.patches]
    assert len(got.patches) == len(want.patches) == len(s.patches)
    if case == "from_line_in_body":
        assert b"\n>From here on it is\n>From quoted\n" in got.patches[0].raw     # mboxo: only "From " is escaped

def test_missing_patches_wait_then_time_out_and_the_key_is_stable():
    cover, p1, p2 = botlist.series_v1()
    early = parsed(p1, at=T0)
    (s,) = assemble(early, [], T0 + timedelta(minutes=5), timedelta(hours=1)).series
    assert s.state == "waiting" and s.missing == [2]
    assert s.key == f"{botlist.COVER_ID}|v1"          # keyed on the cover letter before it arrives
    (late,) = assemble(early, [], T0 + timedelta(hours=2), timedelta(hours=1)).series
    assert late.state == "incomplete" and late.missing == [2]
    # patches complete but the cover letter they reply to not yet here: wait for it (until the time-out)
    both = parsed(p1, p2, at=T0)
    (w,) = assemble(both, [], T0, timedelta(hours=1)).series
    assert w.state == "waiting" and w.cover_missing and not w.missing
    (r,) = assemble(both, [], T0 + timedelta(hours=1), timedelta(hours=1)).series
    assert r.state == "ready" and r.cover is None
    (full,) = assemble(both + parsed(cover), [], T0, timedelta(hours=1)).series
    assert full.state == "ready" and full.key == s.key


def test_newer_versions_supersede_older_ones():
    v1, v2 = parsed(*botlist.series_v1()), parsed(*botlist.series_v2())
    asm = assemble(v1 + v2, [], T0, timedelta(hours=1))
    states = {s.version: s for s in asm.series}
    assert states[1].state == "superseded" and states[1].superseded_by == states[2].key
    assert states[2].state == "ready"
    # a v1 already tested (stored) is reported superseded when v2 arrives
    known = [BotSeries(f"{botlist.COVER_ID}|v1", 1, states[1].subject, "aaron.lu@intel.com", 2, "tested",
                       message_ids=[m.message_id for m in v1])]
    asm2 = assemble(v2, known, T0, timedelta(hours=1))
    assert asm2.superseded_known == [(known[0].key, states[2].key)]
    # a late v1 after a stored v2 is superseded on arrival, by the subject (no thread link needed)
    stored_v2 = [BotSeries(states[2].key, 2, states[2].subject, "aaron.lu@intel.com", 2, "tested")]
    (late,) = assemble(v1, stored_v2, T0, timedelta(hours=1)).series
    assert late.state == "superseded" and late.superseded_by == states[2].key
    assert topic("[PATCH v3 0/7] mm: Foo  bar") == topic("[RFC PATCH 0/7] MM: foo bar") == "mm: foo bar"


def test_unthreaded_series_and_a_separately_sent_cover_letter():
    def msg(pos: int, total: int = 3) -> bytes:
        kind = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n" if pos else "cover\n"
        return (f"From: Kim <kim@example.org>\nSubject: [PATCH {pos}/{total}] thing {pos}\n"
                f"Message-Id: <u{pos}@example.org>\n\n{kind}").encode()
    (s,) = assemble(parsed(msg(2), msg(0), msg(3), msg(1)), [], T0, timedelta(hours=1)).series
    assert s.state == "ready" and s.cover is not None and [p.position for p in s.patches] == [1, 2, 3]
    # the example as git format-patch wrote it: patch 2 replies to patch 1, the cover letter apart
    cover = botlist._example_parts()[0]
    box = mailbox.mbox(str(botlist.EXAMPLE), create=False)
    (e,) = assemble(parsed(cover, *(box.get_bytes(k) for k in box.keys())), [], T0, timedelta(hours=1)).series
    assert e.state == "ready" and e.cover is not None and len(e.patches) == 2


# --- policy ----------------------------------------------------------------------------------------

def test_policy_file():
    p = parse_policy("""
        [bot]
        address = "bot@example.org"
        dashboard_url = "https://sizewatch.example.org/"
        toolchains = ["gcc-11", "clang-16"]
        incomplete_timeout = "90m"
        daily_cap = 3
        [watch]
        lists = ["linux-mm@kvack.org"]
        senders = ["*@intel.com"]
        opt_out = ["quiet@intel.com"]
        [report]
        growth_bytes = 512
        growth_percent = 1
        boundary_crossing = false
        [smtp]
        host = "mail.example.org"
        port = 587
        username = "bot"
        password = "hunter2"
        [outbox]
        path = "/tmp/out.mbox"
    """, "t.toml")
    assert p.address == "bot@example.org" and p.dashboard_url == "https://sizewatch.example.org"
    assert p.toolchains == ("gcc-11", "clang-16") and p.incomplete_timeout == timedelta(minutes=90)
    assert p.report.growth_percent == 1.0 and not p.report.boundary_crossing and p.report.hot_not_inlined
    assert p.watch.watches_list(["Linux MM <linux-mm@kvack.org>"], []) and not p.watch.watches_list(["x@y"], [])
    assert p.watch.watches_list([], ["Linux MM <linux-mm.kvack.org>"])
    assert p.watch.watches_sender("aaron.lu@intel.com") and not p.watch.watches_sender("x@example.org")
    assert p.watch.opted_out("Quiet@intel.com")
    assert p.smtp.secret() == "hunter2" and "hunter2" not in repr(p)
    assert Policy().watch.watches_list([], []) and Policy().watch.watches_sender("anyone@x")
    assert duration(45, "x") == timedelta(seconds=45) and duration("2d", "x") == timedelta(days=2)


def test_min_compilers_is_checked():
    from analyzer.errors import InputError
    from ci.bot.policy import parse_policy
    assert parse_policy("[bot]\ntoolchains = ['gcc-12', 'clang-19']\n[report]\nmin_compilers = 2\n").report.min_compilers == 2
    for text, msg in (("[report]\nmin_compilers = 0\n", "must be at least 1"),
                      ("[bot]\ntoolchains = ['gcc-12']\n[report]\nmin_compilers = 2\n", "more than the 1 toolchains")):
        with pytest.raises(InputError, match=msg):
            parse_policy(text)


@pytest.mark.parametrize("text, msg", [
    ("[bot]\ntoolchain = ['gcc-12']\n", "unknown key 'toolchain'"),
    ("[reprot]\n", "unknown section [reprot]"),
    ("[report]\ngrowth_bytes = 'big'\n", "growth_bytes: expected an int"),
    ("[bot]\ndaily_cap = -1\n", "must not be negative"),
    ("[bot]\nincomplete_timeout = 'soon'\n", "expected a duration"),
    ("[bot]\naddress = 'nobody'\n", "not a mail address"),
    ("[bot\n", "not valid TOML"),
    ("[report]\ncost_lines = -1\n", "[report].cost_lines: must not be negative"),
    ("[report]\ncost_lines = 1.5\n", "cost_lines: expected an int"),
    ("[report]\ncost_cycles_percent = -5\n", "cost_cycles_percent: must be a percentage >= 0"),
    ("[report]\ncost_cycles_percent = nan\n", "cost_cycles_percent: must be a percentage >= 0"),
    ("[report]\ncost_cycles_percent = '5%'\n", "cost_cycles_percent: expected a float"),
    ("[report]\ncost_mcpu = 'sky lake'\n", "cost_mcpu: not a CPU name"),
])
def test_policy_errors(text, msg):
    with pytest.raises(InputError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(text, "bot.toml")


def test_policy_cost_thresholds():
    from analyzer.likely_path_cost import CostThresholds
    assert Policy().report.cost_thresholds == CostThresholds()
    r = parse_policy("[report]\ncost_mcpu = 'znver3'\ncost_lines = 2\ncost_cycles_percent = 5\n").report
    assert r.cost_mcpu == "znver3" and r.cost_thresholds == CostThresholds(lines=2, cycles_percent=5.0)


def test_smtp_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("SIZEWATCH_SMTP_PASSWORD", "from-env")
    assert SmtpSettings(username="u").secret() == "from-env"


# --- replies ---------------------------------------------------------------------------------------

def test_reply_headers_recipients_and_width():
    (p2,) = parsed(botlist.series_v1()[2])
    p2.cc.append(f"The Bot <{botlist.BOT}>")          # the bot itself is never a recipient
    p2.cc.append("LINUX-MM@kvack.org")                # nor is anyone twice
    to, cc = map(lambda xs: [str(x) for x in xs], recipients(p2, botlist.BOT))
    assert to == ["Aaron Lu <aaron.lu@intel.com>"]
    assert cc == ["linux-mm@kvack.org", "Andrew Morton <akpm@linux-foundation.org>", "Vlastimil Babka <vbabka@suse.cz>"]
    body = "Hi Aaron,\n\n" + "\n".join(fit(["x" * 100, "word " * 30])) + "\n"
    mid = stable_message_id("k|v1", "f" * 64, p2.message_id, botlist.BOT)
    assert mid == stable_message_id("k|v1", "f" * 64, p2.message_id, botlist.BOT) and mid.endswith("@example.org>")
    out = compose(p2, body, Policy(address=botlist.BOT), mid, T0, "k|v1", 2)
    msg = email.message_from_bytes(out.raw, policy=email.policy.default)
    assert msg["Subject"] == "Re: " + p2.subject
    assert msg["In-Reply-To"] == p2.message_id
    assert msg["References"].split() == [botlist.COVER_ID, p2.message_id]
    assert msg["Message-ID"] == mid and msg["Auto-Submitted"] == "auto-generated"
    assert out.recipients == ["aaron.lu@intel.com", "linux-mm@kvack.org", "akpm@linux-foundation.org",
                              "vbabka@suse.cz"]
    assert msg.get_content_type() == "text/plain" and not msg.is_multipart()
    assert all(len(ln) <= WIDTH for ln in msg.get_content().splitlines())
    head, _, text = out.raw.decode().partition("\n\n")
    assert all(len(ln) <= 78 for ln in text.splitlines())
    for ln in head.splitlines():                     # headers fold too; only a lone Message-ID may not
        assert len(ln) <= 78 or (ln.split(":")[0] in ("In-Reply-To", "References") and len(ln.split()) == 2), ln


def test_bloat_table_rows_with_long_names_keep_their_columns():
    from analyzer.bloat import Comparison, Row
    from ci.reports.model import ToolchainReport
    long = "a_very_long_function_name_that_the_kernel_really_has_somewhere_x"
    t = ToolchainReport("gcc-12", "v", "mm/page_alloc.o", "k", "ok", 1, 0, "ok",
                        tables=[Comparison("Function", 52, 0, 51, 0, 65, 0,
                                           [Row(long, 10, 20, 10), Row("short", None, 5, 5)]
                                           + [Row(f"f{i}", 1, 2, 1) for i in range(50)], 100, 165)])
    lines = table_lines(t, 40, "http://dash/commit/x")
    assert all(len(ln) <= WIDTH for ln in lines)
    i = lines.index(long)
    assert lines[i + 1].split() == ["10", "20", "+10"] and len(lines[i + 1]) == 64
    assert any(ln.startswith("... 12 more rows: http://dash/commit/x") for ln in lines)
    assert lines[-1].startswith("Total:")


# --- transports ------------------------------------------------------------------------------------

def _mail(mid: str = "<m1@example.org>") -> BotMail:
    raw = (f"From: bot <{botlist.BOT}>\nTo: a@example.org\nSubject: Re: x\nMessage-ID: {mid}\n"
           "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\nbody ü\n").encode()
    return BotMail(mid, "<x@y>", "Re: x", ["a@example.org"], raw)


def test_outbox_appends_each_message_once(tmp_path):
    box = tmp_path / "out.mbox"
    t = OutboxTransport(box)
    t.send(_mail(), botlist.BOT)
    t.send(_mail(), botlist.BOT)                     # a resend after a crash: no second copy
    t.send(_mail("<m2@example.org>"), botlist.BOT)
    got = mailbox.mbox(str(box))
    assert [m["Message-ID"] for m in got] == ["<m1@example.org>", "<m2@example.org>"]
    with pytest.raises(SendError, match="is a directory"):
        OutboxTransport(tmp_path)


def test_smtp_with_starttls_and_login(tmp_path, monkeypatch):
    import trustme          # setup.cfg's test extra: the TLS tests never skip
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    monkeypatch.setenv("SIZEWATCH_SMTP_PASSWORD", "s3cret-pw")
    with botlist.SmtpServer(tls=ctx, users={"bot": "s3cret-pw"}) as server:
        base = SmtpSettings(host="127.0.0.1", port=server.port, username="bot", ca_file=str(ca_file), timeout=10)
        t = SmtpTransport(base)
        t.send(_mail(), botlist.BOT)
        t.close()
        (got,) = server.wait(1)
        assert got.tls and got.login == "bot" and got.rcpt_tos == ["a@example.org"]
        assert got.message["Message-ID"] == "<m1@example.org>" and got.message.get_content() == "body ü\n"
        assert b"\n" not in got.data.replace(b"\r\n", b"") and b"\r\r" not in got.data   # CRLF on the wire
        from dataclasses import replace
        monkeypatch.setenv("SIZEWATCH_SMTP_PASSWORD", "wrong")
        with pytest.raises(SendError) as e:
            SmtpTransport(base).send(_mail(), botlist.BOT)
        assert "login as 'bot' refused" in str(e.value) and "wrong" not in str(e.value)
        with pytest.raises(SendError, match="certificate verify failed|CERTIFICATE_VERIFY_FAILED"):
            SmtpTransport(replace(base, ca_file="")).send(_mail(), botlist.BOT)    # an untrusted cert is refused
        with pytest.raises(SendError, match="offers no login .AUTH. before TLS"):
            SmtpTransport(replace(base, starttls=False)).send(_mail(), botlist.BOT)
    with pytest.raises(SendError, match="connection refused"):
        SmtpTransport(SmtpSettings(host="127.0.0.1", port=server.port, starttls=False, timeout=5)).send(
            _mail(), botlist.BOT)


# --- verdicts --------------------------------------------------------------------------------------

def _tc(name: str, status: str = "ok", base: str | None = "ok", net: int = 0, findings=(), errors=()):
    from analyzer.bloat import Comparison, Row
    from db.models import FindingRow
    from ci.reports.model import ToolchainReport
    tables = [Comparison("Function", 0, 0, 1, 0, max(net, 0), max(-net, 0), [Row("f", 100, 100 + net, net)],
                         10_000, 10_000 + net)] if status == "ok" and base == "ok" else []
    rows = [FindingRow(k, fn, "", f"{k} {fn}", {"details": {"reasons": [r]} if r else {}}, b)
            for k, fn, b, r in findings]
    return ToolchainReport(name, f"{name} 1.0", "mm/page_alloc.o", "k", status, 1, 0 if base else None, base,
                           tables, rows, list(errors))


def test_verdicts_follow_the_rules():
    from ci.bot.policy import ReportRules
    from ci.bot.verdict import finding_set, series_findings
    from db.models import Commit, Series
    from ci.reports.model import PatchReport, SeriesReport

    def report(*tcs):
        return SeriesReport(Series("t", "<m>"), [PatchReport(Commit("a" * 40, "b" * 40), 1, "s", "applied", "",
                                                             list(tcs))])
    rules = ReportRules(growth_bytes=100, growth_percent=2.0)
    # a build gcc-12 breaks and clang-19 passes: under one compiler; both broken: build_error
    one = series_findings(report(_tc("gcc-12", "failed", errors=["/x/worktrees/gcc-12-k/mm/a.c:1:2: error: no"]),
                                 _tc("clang-19")), rules)
    assert [(r.kind, r.toolchain) for r in one] == [("build_error_one_compiler", "gcc-12")]
    assert one[0].message == "mm/page_alloc.o does not build with gcc-12 (clang-19 builds it): mm/a.c:1:2: error: no"
    both = series_findings(report(_tc("gcc-12", "failed"), _tc("clang-19", "failed")), rules)
    assert {r.kind for r in both} == {"build_error"}
    assert series_findings(report(_tc("gcc-12", "failed", base="failed"), _tc("clang-19")), rules) == []
    # growth: over N bytes or over P percent; at or under both, nothing
    assert [r.kind for r in series_findings(report(_tc("gcc-12", net=150)), rules)] == ["growth"]
    assert series_findings(report(_tc("gcc-12", net=100)), rules) == []
    assert [r.kind for r in series_findings(report(_tc("gcc-12", net=150)), ReportRules(growth_percent=1.0))] \
        == ["growth"]
    assert series_findings(report(_tc("gcc-12", net=150)), ReportRules(growth_percent=2.0)) == []
    # findings: changes against the parent and this build's own, as switched on; carried ones never
    finds = [("boundary_crossing", "get_page_from_freelist", 7, None), ("pushed_out_of_line", "x", 7, "why"),
             ("always_inline_copy", "y", None, "never"), ("hot_not_inlined", "z", None, "cost")]
    got = series_findings(report(_tc("gcc-12", findings=finds)), ReportRules())
    assert [r.kind for r in got] == ["always_inline_copy", "hot_not_inlined", "boundary_crossing"]
    assert got[0].reasons == ("never",)
    quiet = ReportRules(boundary_crossing=False, always_inline_copy=False, pushed_out_of_line=True)
    assert [r.kind for r in series_findings(report(_tc("gcc-12", findings=finds)), quiet)] == \
        ["hot_not_inlined", "pushed_out_of_line"]
    carried = _tc("gcc-12", findings=[("always_inline_copy", "y", None, None)])
    carried.findings[0].data["_carried"] = True                   # the parent build has it too
    assert series_findings(report(carried), ReportRules()) == []
    # the finding set is order-free and changes with the findings
    assert finding_set(got) == finding_set(list(reversed(got))) != finding_set(got[:1])
    # K of N: with min_compilers = 2 only what two compilers agree on (kind, function, patch) is kept;
    # build breakage under one compiler is still reported
    gcc = [("always_inline_copy", "y", None, "never"), ("hot_not_inlined", "z", None, "cost")]
    clang = [("always_inline_copy", "y", None, "never"), ("hot_not_inlined", "w", None, "cost")]
    two = report(_tc("gcc-12", findings=gcc, net=150), _tc("clang-19", findings=clang, net=50))
    assert len(series_findings(two, ReportRules(growth_bytes=100))) == 5
    agreed = series_findings(two, ReportRules(growth_bytes=100, min_compilers=2))
    assert sorted((r.kind, r.function, r.toolchain) for r in agreed) == \
        [("always_inline_copy", "y", "clang-19"), ("always_inline_copy", "y", "gcc-12")]
    broken = report(_tc("gcc-12", "failed"), _tc("clang-19"))
    assert [r.kind for r in series_findings(broken, ReportRules(min_compilers=2))] == ["build_error_one_compiler"]


def test_justification_trailer_silences_growth_for_that_patch_and_the_mail_says_so():
    from analyzer.errors import InputError
    from ci.bot.policy import ListRules, ReportRules, parse_policy
    from ci.bot.reply import TestContext, findings_body
    from ci.bot.verdict import justified, series_findings, trailer_value
    from ci.reports.model import PatchReport, SeriesReport
    from db.models import Commit, Series
    from toolchains.kbuild import Config
    pol = parse_policy('[lists."linux-mm@kvack.org"]\njustification_trailer = "Size-Justification"\n')
    (p2,) = parsed(botlist.series_v1()[2])
    assert pol.list_rules(p2.to + p2.cc, [p2.list_id]) == ListRules("Size-Justification")
    assert pol.list_rules(["netdev@vger.kernel.org"], []) == ListRules()
    with pytest.raises(InputError, match="not a trailer name"):
        parse_policy('[lists."x@y"]\njustification_trailer = "Size Justification:"\n')
    with pytest.raises(InputError, match="unknown key"):
        parse_policy('[lists."x@y"]\njustification = "Size-Justification"\n')
    # the trailer is read from the commit message only, not from the diff below ---
    body = ("mm: grow on purpose\n\nWorth it.\n\nSize-Justification: +1.5 KB buys 4% on the page allocator bench\n"
            "Signed-off-by: A <a@example.org>\n---\n mm/page_alloc.c | 2 +-\n")
    assert trailer_value(body, "Size-Justification") == "+1.5 KB buys 4% on the page allocator bench"
    assert trailer_value("x\n---\n+Size-Justification: in the diff\n", "Size-Justification") is None
    assert trailer_value(body, "") is None
    # growth and boundary crossings of that patch are silenced; its other findings and other patches stay
    finds = [("boundary_crossing", "get_page_from_freelist", 7, None), ("always_inline_copy", "y", None, "never")]

    def patch(pos):
        return PatchReport(Commit(str(pos) * 40, "b" * 40), pos, "s", "applied", "",
                           [_tc("gcc-12", net=2000, findings=finds)])
    report = SeriesReport(Series("t", "<m>"), [patch(1), patch(2)])
    items = series_findings(report, ReportRules(growth_bytes=100))
    kept, silenced = justified(items, {2: "worth it"})
    assert sorted((r.position, r.kind) for r in kept) == [(1, "always_inline_copy"), (1, "boundary_crossing"),
                                                          (1, "growth"), (2, "always_inline_copy")]
    assert sorted(r.kind for r in silenced[2]) == ["boundary_crossing", "growth"]
    ctx = TestContext("linux-6.1", "6.1", "c" * 40, "base", 1, [("gcc-12", "gcc-12 1.0")], ["mm/page_alloc.o"],
                      Config())
    mine = [r for r in kept if r.position == 2]
    text = findings_body(p2, report.patches[1], mine, ctx, Policy(address=botlist.BOT),
                         ("Size-Justification", "worth it", 2))
    assert "Not flagged: 2 growth findings of this patch, justified by its Size-Justification: worth it" in \
        " ".join(text.split())
    assert ">> always_inline_copy" in text and ">> growth" not in text


def test_shrinks_note_only_when_asked():
    from ci.bot.policy import ReportRules, parse_policy
    from ci.bot.reply import TestContext, findings_body
    from ci.bot.verdict import series_findings
    from ci.reports.model import PatchReport, SeriesReport
    from db.models import Commit, Series
    from toolchains.kbuild import Config
    assert parse_policy("[report]\nshrinks_note = true\n").report.shrinks_note is True
    finds = [("always_inline_copy", "y", None, "never")]
    p = PatchReport(Commit("a" * 40, "b" * 40), 1, "s", "applied", "",
                    [_tc("gcc-12", net=-300, findings=finds), _tc("clang-19", net=40, findings=finds)])
    items = series_findings(SeriesReport(Series("t", "<m>"), [p]), ReportRules())
    ctx = TestContext("linux-6.1", "6.1", "c" * 40, "base", 1, [("gcc-12", "gcc-12 1.0"), ("clang-19", "clang 1")],
                      ["mm/page_alloc.o"], Config())
    (p2,) = parsed(botlist.series_v1()[2])
    quiet = findings_body(p2, p, items, ctx, Policy(address=botlist.BOT))
    assert "shrinks" not in quiet
    noted = findings_body(p2, p, items, ctx, Policy(address=botlist.BOT, report=ReportRules(shrinks_note=True)))
    assert "Good news: this patch shrinks mm/page_alloc.o by 300 bytes under gcc-12." in " ".join(noted.split())
    assert "clang-19." not in noted.split("Good news")[1].split("\n\n")[0]
