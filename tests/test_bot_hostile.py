"""Hostile list mail through the real ``sizewatch bot`` (a real maildir, the real linux-6.1 tree
for ``git am``, a real SMTP server on 127.0.0.1): one stranger's message never stops the list,
never reaches more than the capped recipients, never puts control characters in a reply, and
a machine that cannot run the build is never blamed on the patch.

Every series here either does not apply (nothing to build) or cannot build at all, so the
tests cost a few ``git am`` runs each.
"""
from __future__ import annotations

import email.policy
import resource
import sqlite3
import subprocess
import time

import pytest

import botlist
from botlist import LIST, SmtpServer, bot_config, deliver
from test_bot import ok, run_bot, store_rows

VALID_ID = "<valid-after-1@example.org>"


def _dashboard(db):
    from web.app import create_app
    from web.settings import WebSettings
    return create_app(WebSettings(db, jobs_dir=db.with_name("jobs"))).test_client()


def hostile_mails() -> dict[str, bytes]:
    """One of each class the hostile-input campaign found, each a patch to a watched list."""
    na = botlist.not_applying

    def with_id(raw: bytes, value: str) -> bytes:
        return botlist._set_header(raw, "Message-Id", value)

    cc = ", ".join(f"Dev {i} <dev{i}@example.net>" for i in range(5000))
    return {
        "empty-id": with_id(na(msgid="<x@y>", name="Empty Id", addr="e1@example.org", charset="us-ascii"), "<>"),
        "nested-id": with_id(na(msgid="<x@y>", name="Nested Id", addr="e2@example.org", charset="us-ascii"),
                             "<<x>@y>>"),
        "crlf-from": botlist._set_header(na(msgid="<crlf-1@example.org>", name="C", addr="c@example.org",
                                            charset="us-ascii"), "From",
                                         "=?utf-8?q?Evil=0D=0ABcc=3A_victim=40example=2Ecom?= <evil@example.org>"),
        "bad-charset": na(msgid="<charset-1@example.org>", name="D", addr="d@example.org", charset="us-ascii",
                          subject="=?x-no-such-charset?q?abc?= [PATCH] mm: x"),
        "huge-version": na(msgid="<ver-1@example.org>", name="V", addr="v@example.org", charset="us-ascii",
                           subject="[PATCH v99999999999999999999 1/1] mm: x"),
        "huge-total": na(msgid="<total-1@example.org>", name="T", addr="t@example.org", charset="us-ascii",
                         subject="[PATCH 1/100000000] mm: x"),
        "nul-esc-subject": na(msgid="<esc-1@example.org>", name="Esc Ape", addr="esc@example.org",
                              charset="us-ascii", subject="[PATCH] mm: red\x1b[31m alert\x07 and \x00nul"),
        "5000-cc": botlist._set_header(na(msgid="<cc-1@example.org>", name="Cc Bomb", addr="ccbomb@example.org",
                                          charset="us-ascii"), "Cc", cc),
        # two different patches under one Message-ID: the second must not vanish
        "dup-first": na(msgid="<dup-1@example.org>", name="First Dup", addr="first@example.org", charset="us-ascii",
                        subject="[PATCH] mm: the first patch"),
        "dup-second": na(msgid="<dup-1@example.org>", name="Second Dup", addr="second@example.org",
                         charset="us-ascii", subject="[PATCH] mm: a different patch"),
    }


@pytest.mark.parametrize("name", list(hostile_mails()))
def test_parse_never_raises_and_says_why(name, tmp_path):
    """The classes above, through the bot's parser and through the series reader git am's mbox
    goes through (toolchains.series, which raised IndexError/ValueError on the first three)."""
    from analyzer.errors import InputError
    from ci.bot.mailbox import parse_mail
    from toolchains.series import read_mbox
    raw = hostile_mails()[name]
    m = parse_mail(raw, "src", "k", "2026-11-23T10:00:00+00:00")
    want = {"empty-id": "unusable Message-ID '<>'", "nested-id": "unusable Message-ID '<<x>@y>>'",
            "crlf-from": "From header with an encoded CR, LF or NUL", "bad-charset": "undecodable Subject header",
            "huge-version": "version 99999999999999999999 in", "huge-total": "patch count 100000000 in"}
    if name in want:
        assert m.kind == "quarantined" and want[name] in m.note and m.raw == raw
        assert m.version is None and m.total is None
    else:
        assert m.kind == "patch", (m.kind, m.note)
        assert not any(c in m.subject + m.from_name for c in "\x00\x1b\x07\r\n")
    box = tmp_path / "one.mbox"
    box.write_bytes(b"From x Thu Jan  1 00:00:00 1970\n" + raw)
    try:
        series = read_mbox(box)
    except InputError as e:                    # the caps: one line, as every bad input
        assert name in ("huge-version", "huge-total") and "beyond the cap of 1000" in str(e)
    else:
        assert len(series.patches) == 1


@pytest.mark.timeout(60)            # a hang guard, not a speed target (bench/hostile_bot.py has the figures)
def test_caps_are_checked_before_any_int_is_built():
    """A 100,000-digit version is refused by its length, before any int is built."""
    from toolchains.series import TagError, patch_tag
    with pytest.raises(TagError, match="beyond the cap of 1000"):
        patch_tag("[PATCH v" + "9" * 100_000 + " 1/2] x")
    assert patch_tag("[PATCH v1000 1000/1000] x") == (1000, 1000, 1000)
    assert patch_tag("[PATCH v0007 01/02] x") == (1, 2, 7)


def test_reply_recipients_are_capped_and_headers_clean():
    from datetime import datetime, timezone
    from ci.bot.mailbox import parse_mail
    from ci.bot.policy import Policy, Watch
    from ci.bot.reply import compose
    m = parse_mail(hostile_mails()["5000-cc"], "src", "k", "2026-11-23T10:00:00+00:00")
    m.cc.insert(0, "Evil <evil@example.org>, Bcc: victim@example.com")      # as a damaged row might hold
    pol = Policy(address=botlist.BOT, watch=Watch(lists=(LIST,)), max_cc=3)
    out = compose(m, "Hi\x1b[2J\x00 there\n", pol, "<r@example.org>", datetime.now(timezone.utc), "k|v1")
    assert out.recipients[:2] == ["ccbomb@example.org", LIST] and len(out.recipients) == 2 + 3
    assert "victim@example.com" not in out.recipients
    head, _, body = out.raw.partition(b"\n\n")
    assert b"\x1b" not in out.raw and b"\x00" not in out.raw and body.startswith(b"Hi[2J there")
    msg = email.message_from_bytes(out.raw, policy=email.policy.default)
    assert [a.addr_spec for a in msg["To"].addresses] == ["ccbomb@example.org"]


def test_hostile_mail_is_quarantined_and_the_list_goes_on(tmp_path):
    md, db = tmp_path / "list", tmp_path / "s.db"
    mails = hostile_mails()
    deliver(md, *mails.values())
    deliver(md, botlist.not_applying(msgid=VALID_ID, name="Valid Dev", addr="valid@example.org",
                                     charset="us-ascii"))
    with SmtpServer() as server:
        cfg = bot_config(tmp_path / "bot.toml", server.port)
        args = ("--maildir", md, "--once", "--policy", cfg)
        first = ok(run_bot(*args, db=db))
        time.sleep(0.5)
        got = server.messages()
        second = ok(run_bot(*args, db=db))                           # nothing is raised again
        time.sleep(0.5)
        assert len(server.messages()) == len(got)
        deliver(md, mails["dup-second"], mails["nul-esc-subject"])
        again = ok(run_bot(*args, db=db))                            # the same messages again, later
        assert "read 2 new messages (2 copy)" in again.stderr
        assert "read 0 new messages" in ok(run_bot(*args, db=db)).stderr     # copies are not read again
        time.sleep(0.5)
        assert len(server.messages()) == len(got)
    assert "read 0 new messages" in second.stderr
    by_reply = {r.message["In-Reply-To"]: r for r in got}
    # the valid series after all of them was tested, once
    assert VALID_ID in by_reply and "does not apply" in by_reply[VALID_ID].message.get_content()
    # usable ones were answered: sanitised subject, capped recipients
    esc = by_reply["<esc-1@example.org>"]
    assert esc.message["Subject"] == "Re: [PATCH] mm: red [31m alert and nul"
    assert not any(c in esc.data.decode("utf-8", "replace") for c in "\x00\x1b\x07")
    bomb = by_reply["<cc-1@example.org>"]
    assert len(bomb.rcpt_tos) == 1 + 1 + 20                          # author, the list, max_cc others
    assert bomb.rcpt_tos[:2] == ["ccbomb@example.org", LIST]
    assert len(bomb.message["Cc"].addresses) == 21
    # the first of two patches under one Message-ID was tested; the second is kept, quarantined
    assert by_reply["<dup-1@example.org>"].rcpt_tos[0] == "first@example.org"
    # nothing else was answered: at most one mail per series, none for the quarantined ones
    assert sorted(by_reply) == sorted([VALID_ID, "<esc-1@example.org>", "<cc-1@example.org>",
                                       "<dup-1@example.org>"])
    assert len(got) == 4
    for r in got:
        assert "evil" not in " ".join(r.rcpt_tos) and "victim" not in " ".join(r.rcpt_tos)
    rows = dict(store_rows(db, "SELECT note, kind FROM bot_messages WHERE kind = 'quarantined'"))
    reasons = " | ".join(rows)
    for why in ("unusable Message-ID '<>'", "unusable Message-ID '<<x>@y>>'", "From header with an encoded CR",
                "undecodable Subject header", "version 99999999999999999999", "patch count 100000000 ",
                "duplicate Message-ID <dup-1@example.org> with different content"):
        assert why in reasons, (why, reasons)
    assert len(rows) == 7
    raws = store_rows(db, "SELECT count(*) FROM bot_messages WHERE kind = 'quarantined' AND raw_z IS NOT NULL")
    assert raws == [(7,)]                                            # kept for the operator
    status = ok(run_bot("status", db=db))
    assert "quarantined or malformed messages: 7" in status.stdout
    assert "duplicate Message-ID <dup-1@example.org>" in status.stdout and "\x1b" not in status.stdout
    assert "mails: 4 (0 decided, 0 held, 4 sent" in status.stdout
    assert "quarantined" in first.stderr and "Traceback" not in first.stderr
    # and on the dashboard
    web = _dashboard(db)
    api = web.get("/api/bot").get_json()
    assert api["set_aside"]["count"] == 7 and api["mail_counts"]["sent"] == 4 and len(api["mails"]) == 4
    assert any("duplicate Message-ID <dup-1@example.org>" in m["reason"] for m in api["set_aside"]["messages"])
    page = web.get("/bot")
    assert page.status_code == 200 and "unusable Message-ID &#39;&lt;&lt;x&gt;@y&gt;&gt;&#39;" in page.get_data(as_text=True)
    assert web.get("/bot?limit=99999999999").status_code == 400


def _applying_patch(msgid: str) -> bytes:
    """A one-line comment change that applies to the test base: a build would be needed."""
    import difflib
    from toolchains.git import git
    from toolchains.source import ensure_source
    old = git(ensure_source("6.1").path, "show", f"{botlist.BASE}:mm/page_alloc.c").splitlines(keepends=True)
    at = next(i for i, ln in enumerate(old) if ln.startswith("unsigned long __get_free_pages("))
    new = old[:at] + [f"/* sizewatch infrastructure test {msgid} */\n"] + old[at:]
    diff = "".join(difflib.unified_diff(old, new, "a/mm/page_alloc.c", "b/mm/page_alloc.c", n=3))
    return (f"From: Infra Test <infra@example.org>\nTo: {LIST}\nSubject: [PATCH] mm: a comment\n"
            f"Date: Mon, 23 Nov 2026 15:00:00 +0100\nMessage-Id: {msgid}\n\nA comment.\n\n"
            "Signed-off-by: Infra Test <infra@example.org>\n---\n"
            f"{diff}-- \n2.39.5\n\nbase-commit: {botlist.BASE}\n").encode()


def _low_hard_limit() -> None:
    # the build's 4 GiB address-space limit cannot be set under a 3 GiB hard limit (prlimit: EPERM)
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def test_a_build_limit_that_cannot_be_set_is_never_mailed_as_the_patchs_error(tmp_path):
    md, db = tmp_path / "list", tmp_path / "s.db"
    msgid = f"<infra-{time.time_ns()}@example.org>"                  # a new commit: nothing cached
    deliver(md, _applying_patch(msgid))
    from conftest import sizewatch_cmd
    import os
    with SmtpServer() as server:
        cfg = bot_config(tmp_path / "bot.toml", server.port)
        cmd = [*sizewatch_cmd(), "bot", "--maildir", str(md), "--once", "--policy", str(cfg), "--db", str(db)]
        runs = [subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=_low_hard_limit,
                               env={**os.environ}) for _ in range(2)]
        time.sleep(0.5)
        assert server.messages() == []                               # nothing blamed on the patch
    for proc in runs:
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "infrastructure failure, retried next poll" in proc.stderr
        assert "prlimit: failed to set the AS resource limit" in proc.stderr
    assert store_rows(db, "SELECT state FROM bot_series") == [("infra_failure",)]
    assert store_rows(db, "SELECT count(*) FROM bot_mails") == [(0,)]
    assert store_rows(db, "SELECT count(*) FROM builds WHERE status != 'ok'") == [(0,)]   # no result kept
    status = ok(run_bot("status", db=db))
    assert "infrastructure failures (nothing mailed; tried again each poll): 1" in status.stdout
    assert "prlimit" in status.stdout
    (infra,) = _dashboard(db).get("/api/bot").get_json()["infra_failures"]
    assert infra["key"] == f"{msgid}|v1" and "prlimit: failed to set the AS resource limit" in infra["note"]


def test_a_long_missing_list_is_said_as_runs():
    from ci.bot.reply import positions
    assert positions([2, 3], 3) == "2/3, 3/3"                      # as before for real series
    assert positions(list(range(2, 1001)), 1000) == "2/1000-1000/1000"
    many = positions(list(range(1, 1001, 2)), 1000)
    assert many.startswith("1/1000, 3/1000") and many.endswith("and 492 more runs") and len(many) < 200


def test_what_the_machine_fails_at_is_an_infrastructure_error(tmp_path):
    """Wrapper messages and a full disk are the machine's; a compiler's diagnostics are the patch's."""
    from toolchains.errors import InfrastructureError
    from toolchains.process import Limits, run
    from toolchains.sandbox import Sandbox

    def sh(script: str, limits: Limits = Limits(None, None)):
        return run(["sh", "-c", script], tmp_path, Sandbox(False), limits)

    for script, why in (("echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2; exit 1",
                         "bwrap: Creating new namespace failed"),
                        ("echo 'cc1: fatal error: x.o: No space left on device' >&2; exit 1", "No space left on device"),
                        ("echo 'ld: final link failed: Disk quota exceeded' >&2; exit 1", "Disk quota exceeded")):
        with pytest.raises(InfrastructureError, match=why):
            sh(script)
    failed = sh("echo 'mm/page_alloc.c:12:3: error: bwrap: prlimit: a patch can say anything' >&2; exit 1")
    assert failed.status == "failed"                              # the patch's own error, reported as such
    with pytest.raises(InfrastructureError, match="cannot start"):
        run(["/nonexistent/sizewatch-no-such-wrapper"], tmp_path, Sandbox(False), Limits(None, None))
    ok = sh("true", Limits(None, 1 << 30))                        # prlimit that can be set: no error
    assert ok.status == "ok"


def test_a_seeded_campaign_of_hostile_mailboxes(tmp_path):
    """bench/hostile_bot.py's generator, a few hundred messages: every valid series tested, each
    message read once, no traceback, at most one mail per series (the bench's own exit status)."""
    import sys
    from pathlib import Path as _P
    bench = _P(__file__).resolve().parent.parent / "bench" / "hostile_bot.py"
    proc = subprocess.run([sys.executable, str(bench), "--mailboxes", "80", "--seed", "3"], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid series tested: 80 of 80" in proc.stdout and "tracebacks: 0" in proc.stdout
    assert "(each once: yes)" in proc.stdout and "series with more than one mail: 0" in proc.stdout


def test_maildir_entries_that_must_not_be_read_whole(tmp_path):
    """A FIFO (would block the bot forever), a symlink, a 40 MB message: set aside with the reason,
    and the valid series after them is tested."""
    import os as _os
    md, db = tmp_path / "list", tmp_path / "s.db"
    deliver(md, botlist.not_applying(msgid=VALID_ID, name="Valid Dev", addr="valid@example.org", charset="us-ascii"))
    _os.mkfifo(md / "new" / "0000.fifo")
    (tmp_path / "secret").write_text("not for the bot\n")
    _os.symlink(tmp_path / "secret", md / "new" / "0001.link")
    with open(md / "new" / "0002.huge", "wb") as f:          # sparse: 40 MB claimed, nothing written
        f.write(b"From: a@b.org\nSubject: [PATCH] x\nMessage-Id: <huge@x>\n\n")
        f.truncate(40 << 20)
    with SmtpServer() as server:
        cfg = bot_config(tmp_path / "bot.toml", server.port)
        proc = subprocess.run([*__import__("conftest").sizewatch_cmd(), "bot", "--maildir", str(md), "--once",
                               "--policy", str(cfg), "--db", str(db)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        (got,) = server.wait(1)
    assert got.message["In-Reply-To"] == VALID_ID
    notes = sorted(n for (n,) in store_rows(db, "SELECT note FROM bot_messages WHERE kind = 'quarantined'"))
    assert any("not a regular file (p)" in n for n in notes), notes
    assert any("a symbolic link in the maildir: not followed" in n for n in notes), notes     # O_NOFOLLOW
    assert any("a message of 41943040 bytes, over the 32 MiB cap" in n for n in notes), notes
    import zlib
    raws = [zlib.decompress(z) for (z,) in store_rows(db, "SELECT raw_z FROM bot_messages WHERE raw_z IS NOT NULL")]
    assert raws and not any(b"not for the bot" in r for r in raws)       # the link was not followed


def test_sources_that_are_not_mail_are_named_for_what_they_are(tmp_path):
    import os
    fifo, folder, elf = tmp_path / "fifo", tmp_path / "dir", tmp_path / "a.o"
    os.mkfifo(fifo)
    folder.mkdir()
    elf.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57))
    db = tmp_path / "s.db"
    for args, msg in [(["--mbox", fifo], "not an mbox file: not a regular file (p)"),
                      (["--mbox", folder], "not an mbox file: a directory"),
                      (["--series", elf], "no mail in it (--series takes an mbox")]:
        proc = run_bot(*args, "--once", "--dry-run", db=db)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and msg in proc.stderr, (args, proc.stderr)

