"""``sizewatch bot`` end to end: list mail in a maildir / mbox, the real linux-6.1 tree, real
builds under gcc-12 and clang-19, and a real SMTP server on 127.0.0.1 receiving the replies,
which are parsed back with the stdlib email package.

The main scenario starts from a copy of the shared example store (the example series already
built and analyzed), so its time goes to the bot and to building the v2's changed patch. The
other tests use series that do not apply (nothing to build) to check the bot's bookkeeping:
kill -9 between deciding and sending, the daily cap, dry runs, time-outs, bad input.
"""
from __future__ import annotations

import email
import email.policy
import fcntl
import json
import mailbox
import os
import signal
import sqlite3
import subprocess
import time
from itertools import takewhile
from pathlib import Path

import pytest

import botlist
from botlist import BOT, COVER_ID, LIST, SmtpServer, bot_config, deliver
from conftest import sizewatch_cmd

TOOLCHAINS = ("gcc-12", "clang-19")
JOSE_ID = "<20261123101500.777-1-jose@example.org>"


def run_bot(*args, db: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*sizewatch_cmd(), "bot", *map(str, args), "--db", str(db)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def run_after_timeout(args, db: Path, server, sent: int, started: float, timeout: int = 2) -> None:
    """Poll the bot (one ``--once`` run at a time) until its time-out has passed and it sent one
    more mail: none in the first ``timeout - 1`` s after ``started`` (time.monotonic; the store keeps
    arrival times to the second), exactly one after, within 30 s. Then the proof that the time-out
    was reached, from the store: the mail was decided ``timeout`` s or more after the series' first
    message was read (both stamps of the bot's clock, to the second), not at a poll that merely came
    late: a bot mailing at once, or after a shorter time-out, fails here whatever the polls' timing."""
    from datetime import datetime
    deadline = started + timeout + 30
    while True:
        ok(run_bot(*args, db=db))
        now = len(server.messages())
        if time.monotonic() < started + timeout - 1:
            assert now == sent, "mailed before the time-out"
        elif now > sent:
            assert now == sent + 1
            break
        assert time.monotonic() < deadline, "no mail 30 s after the time-out"
        time.sleep(0.2)
    ((reply_to, decided),) = store_rows(db, "SELECT in_reply_to, decided_at FROM bot_mails "
                                            "ORDER BY decided_at DESC LIMIT 1")
    ((first_seen,),) = store_rows(db, "SELECT MIN(received_at) FROM bot_messages WHERE series_key = "
                                      "(SELECT series_key FROM bot_messages WHERE message_id = ?)", reply_to)
    waited = (datetime.fromisoformat(decided) - datetime.fromisoformat(first_seen)).total_seconds()
    assert timeout <= waited <= timeout + 30, (first_seen, decided)


def body(m: email.message.EmailMessage) -> str:
    return m.get_content()


def check_shape(m: email.message.EmailMessage, original: email.message.EmailMessage) -> None:
    """Threading, reply-all recipients, plain text, 78 columns, no quoted text."""
    assert m["From"].addresses[0].addr_spec == BOT
    assert m["Subject"] == "Re: " + " ".join(str(original["Subject"]).split())
    assert m["In-Reply-To"] == original["Message-ID"].strip()
    refs = m["References"].split()
    assert refs[-1] == original["Message-ID"].strip()
    want_refs = str(original.get("References", "")).split() or str(original.get("In-Reply-To", "")).split()
    assert refs[:-1] == want_refs
    to = [a.addr_spec.lower() for a in m["To"].addresses]
    cc = [a.addr_spec.lower() for a in m["Cc"].addresses] if m["Cc"] else []
    assert to == [a.addr_spec.lower() for a in original["From"].addresses]
    want_cc = [a.addr_spec.lower() for h in ("To", "Cc") if original[h] for a in original[h].addresses]
    assert cc == [a for a in dict.fromkeys(want_cc) if a not in to]
    assert BOT not in to + cc
    assert not m.is_multipart() and m.get_content_type() == "text/plain"
    text = body(m)
    assert all(len(ln) <= 78 for ln in text.splitlines()), [ln for ln in text.splitlines() if len(ln) > 78]
    assert not any(ln.startswith(">") and not ln.startswith(">> ") for ln in text.splitlines())   # nothing quoted
    assert text.splitlines()[0].startswith(("Hi ", "Hello"))                                        # no top-posting


def parse(raw: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(raw, policy=email.policy.default)


def store_rows(db: Path | str, sql: str, *args) -> list[tuple]:
    """Rows of the store behind sizewatch's back: an sqlite file or a PostgreSQL URL."""
    from pgserver import RawSql
    conn = RawSql(db)
    try:
        return [tuple(r) for r in conn.execute(sql, args).fetchall()]
    finally:
        conn.close()


# --- the main scenario: the example series on the list, then its v2 -----------------------------------

@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def scenario(request, example_series, tmp_path_factory, output_dir):
    """Four polls by four bot processes against one store and one SMTP server:
    1. the v1 series, a review reply, a series that does not apply (ISO-8859-1 sender), a patch that
       builds with clang-19 but not gcc-12, a malformed message, an incomplete series, an opted-out
       sender, a series for an unwatched list;
    2. nothing new (a restart); 3. the v2, superseding v1; 4. nothing new again."""
    tmp = tmp_path_factory.mktemp("bot")
    if request.param == "sqlite":
        db = tmp / "store.db"
        src = sqlite3.connect(request.getfixturevalue("example_store")[0])
        dst = sqlite3.connect(db)
        src.backup(dst)                                 # the example series' builds, already analyzed
        src.close()
        dst.close()
    else:                                               # the same, written by sizewatch run --db postgresql://
        db = request.getfixturevalue("pg_server").database(template=request.getfixturevalue("example_pg_store")[0])
    md = tmp / "list"
    checks = tmp / "checks"
    v1, v2 = botlist.series_v1(), botlist.series_v2()
    first = [*v1, botlist.review_reply(), botlist.not_applying(), botlist.varargs_patch(), botlist.MALFORMED,
             botlist.incomplete_first(),
             botlist.not_applying(msgid="<optout-1@example.org>", name="No Mail", addr="nomail@example.org",
                                  charset="us-ascii"),
             botlist.not_applying(msgid="<netdev-1@example.org>", name="Net Dev", addr="dev@example.org",
                                  to="netdev@vger.kernel.org", charset="us-ascii")]
    deliver(md, *first)
    with SmtpServer() as server:
        cfg = bot_config(tmp / "bot.toml", server.port)
        args = ("--maildir", md, "--once", "--policy", cfg, "--checks", checks)
        runs = [ok(run_bot(*args, db=db))]
        after = [len(server.wait(4))]
        runs.append(ok(run_bot(*args, db=db)))
        time.sleep(0.5)
        after.append(len(server.messages()))
        deliver(md, *v2)
        runs.append(ok(run_bot(*args, db=db)))
        after.append(len(server.wait(after[-1] + 2)))
        runs.append(ok(run_bot(*args, db=db)))
        time.sleep(0.5)
        after.append(len(server.messages()))
        received = server.messages()
    box = mailbox.mbox(str(output_dir / "bot-replies.mbox"))      # what the list would have seen, for humans
    box.lock()
    box.clear()
    for r in received:
        box.add(b"From sizewatch-bot@example.org Thu Jan  1 00:00:00 1970\n" + r.data.replace(b"\r\n", b"\n"))
    box.flush()
    box.unlock()
    box.close()
    originals = {parse(r)["Message-ID"].strip(): parse(r) for r in first + v2 if parse(r)["Message-ID"]}
    yield {"db": db, "runs": runs, "after": after, "received": received, "originals": originals,
            "checks": checks, "tmp": tmp, "built": {tc: example_series(tc) for tc in TOOLCHAINS}}
    from db.store import beside                         # the series go to git am as data: no mbox is kept
    assert not beside(db, "-series").exists() and not (Path.cwd() / "postgresql:").exists()


def replies_to(scenario, msgid: str) -> list:
    return [r for r in scenario["received"] if r.message["In-Reply-To"] == msgid]


@pytest.mark.kernel
def test_first_poll_replies_in_the_threads(scenario):
    runs, after = scenario["runs"], scenario["after"]
    assert after[0] == 4, [r.message["Subject"] for r in scenario["received"]]
    assert "read 10 new messages" in runs[0].stderr and "1 malformed" in runs[0].stderr
    assert "skipping a malformed message" in runs[0].stderr
    v1 = [parse(r) for r in botlist.series_v1()]
    for original in v1[1:]:
        (got,) = replies_to(scenario, original["Message-ID"])
        check_shape(got.message, original)
        assert got.mail_from == BOT and not got.tls
        assert sorted(got.rcpt_tos) == sorted({"aaron.lu@intel.com", LIST, "akpm@linux-foundation.org",
                                               "vbabka@suse.cz"})
        assert got.message["References"].split()[0] == COVER_ID       # threaded under the cover letter
    assert not replies_to(scenario, COVER_ID)                         # no series-wide result to report
    assert not replies_to(scenario, "<d87adccc-75c4-765c@suse.cz>")   # the review reply is not a patch
    everyone = [a for r in scenario["received"] for a in r.rcpt_tos]
    assert "nomail@example.org" not in everyone and "dev@example.org" not in everyone
    assert "netdev@vger.kernel.org" not in everyone


@pytest.mark.kernel
def test_mail_content_is_the_real_build(scenario, bloat_o_meter):
    from toolchains.build import toolchain_info
    from db.store import open_store
    built = scenario["built"]
    p1_id, p2_id = (parse(r)["Message-ID"] for r in botlist.series_v1()[1:])
    (m1,) = replies_to(scenario, p1_id)
    (m2,) = replies_to(scenario, p2_id)
    t1, t2 = body(m1.message), body(m2.message)
    with open_store(scenario["db"]) as store:
        ser = store.get_series(COVER_ID)
    shas = [p.commit_sha for p in ser.patches]
    # patch 1 is the example's commit; patch 2 got Vlastimil's Reviewed-by from his reply folded in
    # (b4's series logic, as b4 am does): another commit of the same tree, so the same objects
    assert shas[0] == built["gcc-12"][1].commit and shas[1] != built["gcc-12"][2].commit
    from toolchains.source import ensure_source
    assert "Reviewed-by: Vlastimil Babka <vbabka@suse.cz>" in subprocess.run(
        ["git", "-C", str(ensure_source("6.1").path), "log", "-1", "--format=%B", shas[1]],
        capture_output=True, text=True, check=True).stdout
    commits = [built["gcc-12"][0].commit, *shas]
    for tc in TOOLCHAINS:
        version = toolchain_info(tc).version
        for text, (old, new), (old_sha, new_sha) in ((t1, built[tc][:2], commits[:2]), (t2, built[tc][1:], commits[1:])):
            ref = bloat_o_meter(old.object_path, new.object_path)        # the kernel's own script
            assert ref.returncode == 0 and ref.stdout.startswith(b"add/remove: "), ref.stderr
            table = ref.stdout.decode()
            assert table in text, f"{tc}: bloat-o-meter table of {new.subject} missing"
            assert f"bloat-o-meter, {tc}, mm/page_alloc.o (parent -> this patch):" in text
            assert version in text                                   # the exact compiler version
            assert f"http://127.0.0.1:5000/commit/{new_sha}" in text
            assert f"commit:        {new_sha[:12]} as applied by git am (parent {old_sha[:12]})" in text
        # patch 1 pushes the hot helpers out of line, with the compiler's reason; patch 2 grows
        # get_page_from_freelist across cache lines and the object beyond the 1024-byte limit
        p1 = t1.split(f"\n{tc}:\n", 1)[1].split("\n\n")[0]
        assert ">> hot_not_inlined: hot-path inline __rmqueue_smallest is not inlined" in p1
        assert ">> hot_not_inlined: hot-path inline __rmqueue_fallback is not inlined" in p1
        reason = "--param max-inline-insns" if tc.startswith("gcc") else "too costly to inline"
        section = t1.split("The compilers' reasons:\n\n")[1].split(f"{tc}:\n", 1)[1].splitlines()
        reasons = "\n".join(takewhile(lambda ln: ln.startswith("  "), section))
        assert "  __rmqueue_smallest: " in reasons and reason in reasons
        p2 = t2.split(f"\n{tc}:\n", 1)[1].split("\n\n")[0]
        assert ">> boundary_crossing: hot get_page_from_freelist grew" in p2
        assert ">> growth: mm/page_alloc.o grew by" in p2
    for text in (t1, t2):
        assert f"base:          {botlist.BASE} (the series'" in text
        assert "config:        x86_64 defconfig + DEBUG_INFO_DWARF5=y DEBUG_INFO_NONE=n" in text
        assert f"series:        http://127.0.0.1:5000/series/{ser.id}" in text
        assert "  sizewatch run --tree 6.1 --series series.mbx --base 624c6bb3bc79 \\" in text
        assert "      --toolchains gcc-12,clang-19 --targets mm/page_alloc.o" in text
    # the reproduce command prints the same table from the store
    sha2 = shas[1]
    assert f"  sizewatch report {sha2[:12]} --toolchains gcc-12,clang-19" in t2
    rep = subprocess.run([*sizewatch_cmd(), "report", sha2[:12], "--toolchains", "gcc-12", "--db",
                          str(scenario["db"])], capture_output=True, text=True, timeout=120)
    ref = bloat_o_meter(built["gcc-12"][1].object_path, built["gcc-12"][2].object_path)
    assert ref.returncode == 0 and rep.returncode == 0 and ref.stdout.decode() in rep.stdout


@pytest.mark.kernel
def test_a_series_that_does_not_apply_is_said_once_in_its_senders_charset(scenario):
    (got,) = replies_to(scenario, JOSE_ID)
    original = parse(botlist.not_applying())
    check_shape(got.message, original)
    m = got.message
    assert m["To"].addresses[0].display_name == "José Müller"
    assert m.get_content_charset() == "utf-8"
    text = body(m)
    assert text.startswith("Hi José,\n")
    assert "could not test this series: the patch does not apply, so nothing was" in text
    assert "error:         patch failed: mm/page_alloc.c:2582" in text
    states = dict(store_rows(scenario["db"], "SELECT key, state FROM bot_series"))
    assert states[f"{JOSE_ID}|v1"] == "not_applied"
    assert states["<optout-1@example.org>|v1"] == "not_applied"      # tested, recorded, not mailed
    assert store_rows(scenario["db"], "SELECT outcome FROM bot_decisions WHERE series_key = ?",
                      "<optout-1@example.org>|v1") == [("opted_out",)]
    assert states["<netdev-1@example.org>|v1"] == "skipped"
    assert states["<20261123120000.555-1-kim@example.org>|v1"] == "waiting"      # 1 of 3, within the time-out
    kinds = dict(store_rows(scenario["db"], "SELECT kind, count(*) FROM bot_messages GROUP BY kind"))
    assert kinds == {"cover": 2, "patch": 9, "reply": 1, "malformed": 1}
    assert len(replies_to(scenario, JOSE_ID)) == 1                   # and never again in later polls


@pytest.mark.kernel
def test_build_error_under_one_compiler(scenario):
    (got,) = replies_to(scenario, botlist.VARARGS_ID)
    check_shape(got.message, parse(botlist.varargs_patch()))
    text = body(got.message)
    flat = " ".join(text.split())
    assert "/worktrees/" not in text                                 # tree-relative file names
    gcc = text.split("\ngcc-12:\n", 1)[1].split("\n\n")[0]
    clang = text.split("\nclang-19:\n", 1)[1].split("\n\n")[0]
    assert " ".join(gcc.split()).startswith(
        ">> build_error_one_compiler: mm/page_alloc.o does not build with gcc-12 (clang-19 builds it): "
        "mm/page_alloc.c:")
    assert "error: function 'sizewatch_sum' can never be inlined because it uses variable argument lists" in flat
    assert " ".join(clang.split()).startswith(
        ">> always_inline_copy: __always_inline sizewatch_sum has an out-of-line copy sizewatch_sum")
    assert "gcc-12 build errors (mm/page_alloc.o):" in text
    assert "bloat-o-meter, clang-19, mm/page_alloc.o" in text and "bloat-o-meter, gcc-12" not in text
    sha = text.split("commit:        ")[1].split()[0]
    rep = subprocess.run([*sizewatch_cmd(), "report", sha, "--toolchains", "clang-19", "--db", str(scenario["db"])],
                         capture_output=True, text=True, timeout=120)
    table = rep.stdout.split("--- clang-19 ")[1].split("\n", 1)[1].split("findings:")[0]
    assert "sizewatch_sum" in table and table.rstrip("\n") in text          # the real table of the real build
    reasons = text.split("The compilers' reasons:")[1]
    assert "sizewatch_sum: it should never be inlined" in " ".join(reasons.split())


@pytest.mark.kernel
def test_restart_and_v2(scenario):
    runs, after = scenario["runs"], scenario["after"]
    assert after[1] == after[0] and "read 0 new messages" in runs[1].stderr   # a restart reprocesses nothing
    assert "0 mails decided, 0 sent" in runs[1].stderr
    assert after[2] == after[1] + 2, [r.message["Subject"] for r in scenario["received"][after[1]:]]
    assert "read 3 new messages" in runs[2].stderr and "superseded" in runs[2].stderr
    assert after[3] == after[2] and "0 mails decided, 0 sent" in runs[3].stderr
    v2 = [parse(r) for r in botlist.series_v2()]
    for original in v2[1:]:
        (got,) = replies_to(scenario, original["Message-ID"])
        check_shape(got.message, original)
        refs = got.message["References"].split()
        assert refs[:2] == [COVER_ID, botlist.V2_COVER_ID]          # still in the v1 thread, under the v2 cover
        assert "[PATCH v2" in got.message["Subject"]
    states = dict(store_rows(scenario["db"], "SELECT key, state FROM bot_series"))
    assert states[f"{COVER_ID}|v1"] == "superseded" and states[f"{botlist.V2_COVER_ID}|v2"] == "tested"
    # v2's patch 2 is a new commit, built now: its mail's tables are the store's report of that build
    from db.store import open_store
    with open_store(scenario["db"]) as store:
        ser = store.get_series(botlist.V2_COVER_ID)
        assert ser.version == 2 and ser.status == "applied"
        assert ser.patches[0].commit_sha == scenario["built"]["gcc-12"][1].commit   # patch 1 unchanged
        sha = ser.patches[1].commit_sha
        assert sha != scenario["built"]["gcc-12"][2].commit
        rep = subprocess.run([*sizewatch_cmd(), "report", sha, "--toolchains", ",".join(TOOLCHAINS), "--db",
                              str(scenario["db"])], capture_output=True, text=True, timeout=120)
    (got,) = replies_to(scenario, v2[2]["Message-ID"])
    text = body(got.message)
    for tc in TOOLCHAINS:
        table = rep.stdout.split(f"--- {tc} ")[1].split("\n", 1)[1].split("findings:")[0]
        assert f"bloat-o-meter, {tc}, mm/page_alloc.o (parent -> this patch):" in text, tc
        assert table.rstrip("\n") in text, tc
    assert ">> boundary_crossing: hot get_page_from_freelist grew" in text


@pytest.mark.kernel
def test_patchwork_checks(scenario):
    checks = {json.loads(p.read_text())["msgid"]: json.loads(p.read_text())
              for p in scenario["checks"].glob("*.json")}
    p1, p2 = (parse(r)["Message-ID"] for r in botlist.series_v1()[1:])
    for mid in (p1, p2):
        c = checks[mid]
        assert c["state"] == "warning" and c["context"] == "sizewatch"
        assert c["target_url"].startswith("http://127.0.0.1:5000/commit/")
        assert "gcc-12:" in c["description"] and "clang-19:" in c["description"]
    assert checks[JOSE_ID]["state"] == "fail" and "does not apply" in checks[JOSE_ID]["description"]
    va = checks[botlist.VARARGS_ID]
    assert va["state"] == "fail" and "build error one compiler" in va["description"]
    assert "always inline copy" in va["description"]
    assert checks[JOSE_ID]["target_url"].startswith("http://127.0.0.1:5000/series/")
    assert set(checks) >= {p1, p2, JOSE_ID, *(parse(r)["Message-ID"] for r in botlist.series_v2()[1:])}


@pytest.mark.kernel
def test_the_store_holds_every_decision_once(scenario):
    db = scenario["db"]
    mails = store_rows(db, "SELECT state, sent_at, transport FROM bot_mails")
    assert len(mails) == len(scenario["received"]) == scenario["after"][-1]
    assert all(s == "sent" and at and t.startswith("smtp 127.0.0.1:") for s, at, t in mails)
    ids = [r.message["Message-ID"] for r in scenario["received"]]
    assert len(set(ids)) == len(ids)
    assert store_rows(db, "SELECT count(*) FROM bot_decisions")[0][0] == len(
        store_rows(db, "SELECT DISTINCT series_key FROM bot_decisions"))


# --- bookkeeping with series that do not apply (no builds) ------------------------------------------------

@pytest.fixture
def quick(tmp_path):
    """A fresh store and maildir holding one series that does not apply, and an SMTP server."""
    md = tmp_path / "list"
    deliver(md, botlist.not_applying())
    with SmtpServer() as server:
        cfg = bot_config(tmp_path / "bot.toml", server.port)
        yield {"md": md, "db": tmp_path / "s.db", "server": server, "cfg": cfg, "tmp": tmp_path,
               "args": ("--maildir", md, "--once", "--policy", cfg)}


def test_kill_between_decision_and_send_loses_nothing(quick):
    q = quick
    proc = run_bot(*q["args"], db=q["db"], env={"SIZEWATCH_BOT_KILL_AT": "decided"})
    assert proc.returncode == -signal.SIGKILL
    time.sleep(0.3)
    assert q["server"].messages() == []
    assert store_rows(q["db"], "SELECT state FROM bot_mails") == [("decided",)]
    again = ok(run_bot(*q["args"], db=q["db"]))
    assert "1 sent" in again.stderr and "0 mails decided" in again.stderr
    (got,) = q["server"].wait(1)
    assert got.message["In-Reply-To"] == JOSE_ID
    ok(run_bot(*q["args"], db=q["db"]))
    time.sleep(0.3)
    assert len(q["server"].messages()) == 1
    assert store_rows(q["db"], "SELECT state FROM bot_mails") == [("sent",)]


def test_kill_after_the_server_accepted_resends_the_same_message(quick):
    """The one duplicate window SMTP leaves (ci.outgoing): the resent copy is byte-identical."""
    q = quick
    proc = run_bot(*q["args"], db=q["db"], env={"SIZEWATCH_BOT_KILL_AT": "sent"})
    assert proc.returncode == -signal.SIGKILL
    q["server"].wait(1)
    assert store_rows(q["db"], "SELECT state FROM bot_mails") == [("decided",)]
    ok(run_bot(*q["args"], db=q["db"]))
    a, b = q["server"].wait(2)
    assert a.message["Message-ID"] == b.message["Message-ID"] and a.data == b.data
    ok(run_bot(*q["args"], db=q["db"]))
    time.sleep(0.3)
    assert len(q["server"].messages()) == 2


def test_kill_after_writing_the_outbox_leaves_one_copy(quick):
    q = quick
    out = q["tmp"] / "outbox.mbox"
    args = ("--maildir", q["md"], "--once", "--policy", q["cfg"], "--outbox", out)
    proc = run_bot(*args, db=q["db"], env={"SIZEWATCH_BOT_KILL_AT": "sent"})
    assert proc.returncode == -signal.SIGKILL
    assert len(mailbox.mbox(str(out))) == 1
    again = ok(run_bot(*args, db=q["db"]))
    assert "1 sent" in again.stderr
    (m,) = list(mailbox.mbox(str(out)))
    assert m["In-Reply-To"] == JOSE_ID
    assert store_rows(q["db"], "SELECT state, transport FROM bot_mails") == [("sent", f"outbox {out}")]
    assert q["server"].messages() == []


def test_dry_run_records_nothing(quick):
    q = quick
    proc = ok(run_bot(*q["args"], "--dry-run", db=q["db"]))
    assert "1 mails composed (dry run)" in proc.stderr
    m = parse(proc.stdout.split("\n", 1)[1].encode())
    assert m["In-Reply-To"] == JOSE_ID and "does not apply" in m.get_content()
    assert store_rows(q["db"], "SELECT count(*) FROM bot_messages") == [(0,)]
    assert store_rows(q["db"], "SELECT count(*) FROM bot_mails") == [(0,)]
    time.sleep(0.3)
    assert q["server"].messages() == []
    ok(run_bot(*q["args"], db=q["db"]))                              # the real run still mails
    assert len(q["server"].wait(1)) == 1


def test_daily_cap_holds_mails_until_allowed(quick):
    q = quick
    deliver(q["md"], *(botlist.not_applying(msgid=f"<cap-{i}@example.org>", name=f"Dev {i}",
                                            addr=f"dev{i}@example.org", charset="us-ascii") for i in range(2)))
    cfg = bot_config(q["tmp"] / "cap.toml", q["server"].port, daily_cap=2)
    args = ("--maildir", q["md"], "--once", "--policy", cfg)
    first = ok(run_bot(*args, db=q["db"]))
    assert "3 mails decided, 2 sent, 1 held by the daily cap" in first.stderr
    assert len(q["server"].wait(2)) == 2
    second = ok(run_bot(*args, db=q["db"]))
    assert "0 sent, 1 held" in second.stderr
    assert sorted(s for (s,) in store_rows(q["db"], "SELECT state FROM bot_mails")) == ["held", "sent", "sent"]
    cfg3 = bot_config(q["tmp"] / "cap3.toml", q["server"].port, daily_cap=3)
    third = ok(run_bot("--maildir", q["md"], "--once", "--policy", cfg3, db=q["db"]))
    assert "1 sent, 0 held" in third.stderr
    assert len(q["server"].wait(3)) == 3


def test_incomplete_series_is_reported_once_after_the_time_out(quick):
    q = quick
    md = q["tmp"] / "list2"
    deliver(md, botlist.incomplete_first())
    cfg = bot_config(q["tmp"] / "t.toml", q["server"].port, incomplete_timeout="2s")
    args = ("--maildir", md, "--once", "--policy", cfg, "--checks", q["tmp"] / "checks")
    t0 = time.monotonic()
    first = ok(run_bot(*args, db=q["db"]))
    assert "1 waiting" in first.stderr
    run_after_timeout(args, q["db"], q["server"], 0, t0)
    (got,) = q["server"].messages()
    original = parse(botlist.incomplete_first())
    check_shape(got.message, original)
    text = got.message.get_content()
    assert "received 1 of the 3 patches of this series (v1) but not 2/3, 3/3 within 2" in text.replace("\n", " ")
    ok(run_bot(*args, db=q["db"]))
    time.sleep(0.3)
    assert len(q["server"].messages()) == 1
    (check,) = [json.loads(p.read_text()) for p in (q["tmp"] / "checks").glob("*.json")]
    assert check["state"] == "warning" and check["msgid"] == original["Message-ID"]
    assert check["description"] == "not tested: 2/3, 3/3 never arrived"


def test_v1_and_v2_posted_together_only_v2_is_tested(quick):
    q = quick
    md = q["tmp"] / "list3"
    v1 = botlist.not_applying(msgid="<tidy-v1@example.org>", subject="[PATCH] mm: tidy a comment")
    v2 = botlist.not_applying(msgid="<tidy-v2@example.org>", subject="[PATCH v2] mm: tidy a comment",
                              in_reply_to="<tidy-v1@example.org>")
    deliver(md, v1, v2)
    proc = ok(run_bot("--maildir", md, "--once", "--policy", q["cfg"], db=q["db"]))
    assert "superseded by a newer version, not tested" in proc.stderr
    (got,) = q["server"].wait(1)
    assert got.message["In-Reply-To"] == "<tidy-v2@example.org>"
    assert got.message["References"].split() == ["<tidy-v1@example.org>", "<tidy-v2@example.org>"]
    states = dict(store_rows(q["db"], "SELECT key, state FROM bot_series"))
    assert states == {"<tidy-v1@example.org>|v1": "superseded", "<tidy-v2@example.org>|v2": "not_applied"}


def test_mbox_mirror_and_one_series_on_the_command_line(quick):
    q = quick
    box = q["tmp"] / "mirror.mbox"
    botlist.append_mbox(box, botlist.not_applying())
    first = ok(run_bot("--mbox", box, "--once", "--policy", q["cfg"], db=q["db"]))
    assert "read 1 new messages" in first.stderr
    botlist.append_mbox(box, botlist.review_reply())
    second = ok(run_bot("--mbox", box, "--once", "--policy", q["cfg"], db=q["db"]))
    assert "read 1 new messages (1 reply)" in second.stderr
    assert len(q["server"].wait(1)) == 1
    # --series: one series now, without waiting for its missing patches
    one = q["tmp"] / "one.mbox"
    botlist.append_mbox(one, botlist.incomplete_first("<single-2@example.org>"))
    ok(run_bot("--series", one, "--policy", q["cfg"], db=q["db"]))
    msgs = q["server"].wait(2)
    assert msgs[-1].message["In-Reply-To"] == "<single-2@example.org>"
    assert "but not 2/3, 3/3" in msgs[-1].message.get_content().replace("\n", " ")


def test_smtp_tls_login_and_the_password_stays_secret(tmp_path):
    import trustme          # setup.cfg's test extra: the TLS tests never skip
    import ssl
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    md = tmp_path / "list"
    deliver(md, botlist.not_applying())
    secret = "pw-7f3a-never-printed"
    db = tmp_path / "s.db"
    with SmtpServer(tls=ctx, users={"sizewatch": secret}) as server:
        smtp = {"host": "127.0.0.1", "port": server.port, "username": "sizewatch", "ca_file": str(tmp_path / "ca.pem")}
        cfg = bot_config(tmp_path / "bot.toml", smtp=smtp)
        args = ("--maildir", md, "--once", "--policy", cfg)
        bad = run_bot(*args, db=db, env={"SIZEWATCH_SMTP_PASSWORD": "wrong-" + secret})
        assert bad.returncode == 1 and "Traceback" not in bad.stderr
        assert "login as 'sizewatch' refused" in bad.stderr and "1 mail(s) kept for the next run" in bad.stderr
        assert store_rows(db, "SELECT state FROM bot_mails") == [("decided",)]
        good = ok(run_bot(*args, db=db, env={"SIZEWATCH_SMTP_PASSWORD": secret}))
        (got,) = server.wait(1)
        assert got.tls and got.login == "sizewatch"
    for text in (bad.stdout, bad.stderr, good.stdout, good.stderr):
        assert secret not in text
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_bad_input_is_one_line(quick, tmp_path):
    q = quick
    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_text("[report]\ngrowth_byte = 10\n")
    tc_cfg = bot_config(tmp_path / "tc.toml", toolchains=["gcc-99"])
    cases = [
        (("--maildir", tmp_path / "missing", "--once"), "no such maildir"),
        (("--mbox", tmp_path / "missing.mbox", "--once"), "no such mbox file"),
        (("--once",), "exactly one of --maildir"),
        (("--maildir", q["md"], "--mbox", tmp_path / "x", "--once"), "exactly one of --maildir"),
        (("--maildir", q["md"], "--once", "--policy", bad_cfg), "unknown key 'growth_byte'"),
        (("--maildir", q["md"], "--once", "--policy", tmp_path / "none.toml"), "cannot read the bot config"),
        (("--maildir", q["md"], "--once", "--outbox", tmp_path / "o", "--smtp", "127.0.0.1"), "not both"),
        (("--maildir", q["md"], "--once", "--policy", tc_cfg), "unknown toolchain 'gcc-99'"),
        (("--maildir", q["md"], "--once", "--outbox", tmp_path), "is a directory"),
    ]
    for args, msg in cases:
        proc = run_bot(*args, db=q["db"])
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("sizewatch: ") and msg in lines[0], \
            (args, proc.stderr)
    # the relay is down: the mail is kept and the run says so (exit 1), nothing lost
    with botlist.refused_port() as port:
        down = bot_config(tmp_path / "down.toml", port)
        proc = run_bot("--maildir", q["md"], "--once", "--policy", down, db=q["db"])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "connection refused; 1 mail(s) kept for the next run" in proc.stderr
    assert store_rows(q["db"], "SELECT state FROM bot_mails") == [("decided",)]
    # one bot per store
    with open(f"{q['db']}.bot.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = run_bot(*q["args"], db=q["db"])
    assert proc.returncode == 1 and "another sizewatch bot is running" in proc.stderr
    ok(run_bot(*q["args"], db=q["db"]))
    assert len(q["server"].wait(1)) == 1


def test_base_commit_not_in_the_tree_falls_back_to_the_configured_base(quick):
    q = quick
    md = q["tmp"] / "list4"
    unknown = botlist.not_applying(msgid="<far-1@example.org>").replace(
        f"base-commit: {botlist.BASE}".encode(), b"base-commit: 0123456789abcdef0123456789abcdef01234567")
    none = botlist.not_applying(msgid="<none-1@example.org>", name="Other Dev", addr="other@example.org").replace(
        f"\nbase-commit: {botlist.BASE}\n".encode(), b"\n")
    deliver(md, unknown, none)
    cfg = bot_config(q["tmp"] / "base.toml", q["server"].port, base=botlist.BASE[:12])
    proc = ok(run_bot("--maildir", md, "--once", "--dry-run", "--policy", cfg, db=q["db"]))
    mails = {parse(chunk.split("\n", 1)[1].encode())["In-Reply-To"]: parse(chunk.split("\n", 1)[1].encode())
             for chunk in proc.stdout.split("\nFrom sizewatch-bot@example.org ") if chunk.strip()}
    far = " ".join(mails["<far-1@example.org>"].get_content().split())
    assert f"base: {botlist.BASE} (base-commit: 0123456789ab is not in the tree; the bot's base " \
           f"{botlist.BASE[:12]})" in far
    plain = " ".join(mails["<none-1@example.org>"].get_content().split())
    assert f"base: {botlist.BASE} (no base-commit: in the series; the bot's base {botlist.BASE[:12]})" in plain


def test_polling_service_picks_up_new_mail_and_stops_on_sigterm(quick):
    q = quick
    p = subprocess.Popen([*sizewatch_cmd(), "bot", "--maildir", str(q["md"]), "--interval", "1s", "--policy",
                          str(q["cfg"]), "--db", str(q["db"])], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert len(q["server"].wait(1, timeout=60)) == 1              # the first poll
        deliver(q["md"], botlist.not_applying(msgid="<later-1@example.org>", name="Late Dev",
                                              addr="late@example.org", charset="us-ascii"))
        got = q["server"].wait(2, timeout=60)                         # a later poll, same process
        assert got[-1].message["In-Reply-To"] == "<later-1@example.org>"
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and "Traceback" not in err
    assert err.count("sizewatch: bot: read") >= 2


def test_a_cover_letter_arriving_after_the_series_was_handled_changes_nothing(quick):
    q = quick
    md = q["tmp"] / "list5"
    cover_id = "<late-0@example.org>"
    parts = [botlist.not_applying(msgid=f"<late-{i}@example.org>", subject=f"[PATCH {i}/2] mm: two steps, step {i}",
                                  in_reply_to=cover_id) for i in (1, 2)]
    deliver(md, *parts)
    cfg = bot_config(q["tmp"] / "late.toml", q["server"].port, incomplete_timeout="2s")
    args = ("--maildir", md, "--once", "--policy", cfg)
    t0 = time.monotonic()
    assert "1 waiting" in ok(run_bot(*args, db=q["db"])).stderr        # the patches point at a cover letter
    run_after_timeout(args, q["db"], q["server"], 0, t0)                # tested without it after the time-out
    (got,) = q["server"].messages()
    assert got.message["In-Reply-To"] == "<late-1@example.org>"
    assert "patch 1/2 does not apply" in " ".join(got.message.get_content().split())
    cover = (f"From: José Müller <jose@example.org>\nTo: {LIST}\nSubject: [PATCH 0/2] mm: two steps\n"
             f"Message-Id: {cover_id}\nDate: Mon, 23 Nov 2026 10:14:00 +0100\n\nTwo steps.\n").encode()
    deliver(md, cover)
    late = ok(run_bot(*args, db=q["db"]))
    assert "late message(s) for <late-0@example.org>|v1 (not_applied), ignored" in late.stderr
    time.sleep(0.3)
    assert len(q["server"].messages()) == 1
    assert store_rows(q["db"], "SELECT state FROM bot_series") == [("not_applied",)]
    assert store_rows(q["db"], "SELECT series_key FROM bot_messages WHERE message_id = ?", cover_id) == \
        [("<late-0@example.org>|v1",)]
