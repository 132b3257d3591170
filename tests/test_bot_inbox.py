"""``sizewatch bot --inbox``: a real public-inbox v2 inbox made with Debian's public-inbox tools
(``public-inbox-init -V2``, ``public-inbox-mda``, ``public-inbox-purge``), mirrored the way lore is
followed (``git clone --mirror`` of each epoch, ``git fetch`` after), read by the bot poll by poll.

The list: the example series and a series that does not apply; later, in a new epoch, a review reply
and the example's v2; then the first message is purged (public-inbox rewrites that epoch's history:
the mirror is force-updated) and one more patch arrives. The epoch roll-over is public-inbox's own:
its V2Writable with the epoch size limit (1 GiB on lore) lowered to 1 byte for the one delivery that
must start epoch 1, after its head is packed (the limit is checked against packed bytes).

Issue 25: an epoch is anyone's git. Hand-made commits (``inboxes.plant``) whose ``m`` is a tree, a
gitlink, a symbolic link, a missing or damaged object, an empty or oversized blob, merges, commits without
``m``: the bot reads past each, records it as read (never walked again) and tests the series after it.
"""
from __future__ import annotations

import mailbox
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import botlist
from botlist import bot_config
from inboxes import PLANTS, Inbox, plant
from test_bot import ok, parse, run_bot, store_rows


@pytest.mark.kernel
def test_inbox_polled_by_commit_across_epochs_and_a_forced_update(example_store, tmp_path):
    db = tmp_path / "store.db"
    src, dst = sqlite3.connect(example_store[0]), sqlite3.connect(db)
    src.backup(dst)                                         # the example series' builds, already analyzed
    src.close()
    dst.close()
    out = tmp_path / "outbox.mbox"
    cfg = bot_config(tmp_path / "bot.toml")
    inbox = Inbox(tmp_path)
    args = ("--inbox", inbox.mirror, "--once", "--policy", cfg, "--outbox", out)
    tidy = botlist.not_applying(msgid="<tidy-v1@example.org>", subject="[PATCH] mm: tidy a comment",
                                name="Ann", addr="ann@example.org", charset="us-ascii")

    # 1: four messages in epoch 0
    inbox.post(tidy, *botlist.series_v1())
    inbox.sync()
    assert [p.name for p in inbox.epochs()] == ["0.git"] and len(inbox.commits(0)) == 4
    first = ok(run_bot(*args, db=db))
    assert "read 4 new messages" in first.stderr
    keys = dict(store_rows(db, "SELECT message_id, source_key FROM bot_messages"))
    mirror_commits = inbox.commits(0, inbox.mirror)
    assert sorted(keys.values()) == sorted(f"0:{c}" for c in mirror_commits)     # one message per commit
    mails = [m["In-Reply-To"] for m in mailbox.mbox(str(out))]
    v1 = [parse(r) for r in botlist.series_v1()]
    assert "<tidy-v1@example.org>" in mails and all(p["Message-ID"] in mails for p in v1[1:])

    # 2: nothing new
    again = ok(run_bot(*args, db=db))
    assert "read 0 new messages" in again.stderr and "0 mails decided" in again.stderr

    # 3: the review reply and the v2 start epoch 1 (public-inbox's roll-over); only they are read
    inbox.post(botlist.review_reply(), *botlist.series_v2(), new_epoch=True)
    inbox.sync()
    assert [p.name for p in inbox.epochs()] == ["0.git", "1.git"]
    assert len(inbox.commits(1)) == 4 and len(inbox.commits(0)) == 4
    third = ok(run_bot(*args, db=db))
    assert "read 4 new messages" in third.stderr and "superseded" in third.stderr, third.stderr
    epoch1 = {k for (k,) in store_rows(db, "SELECT source_key FROM bot_messages") if k.startswith("1:")}
    assert epoch1 == {f"1:{c}" for c in inbox.commits(1, inbox.mirror)}
    states = dict(store_rows(db, "SELECT key, state FROM bot_series"))
    assert states[f"{botlist.COVER_ID}|v1"] == "superseded" and states[f"{botlist.V2_COVER_ID}|v2"] == "tested"
    sent_before = len(mailbox.mbox(str(out)))

    # 4: the first message is purged: epoch 0's history is rewritten and the mirror force-updated;
    # one more patch arrives. The rewritten commits hold known messages: nothing is handled twice.
    old0 = inbox.commits(0, inbox.mirror)
    inbox.purge(tidy)
    inbox.post(botlist.not_applying(msgid="<late-1@example.org>", name="Late", addr="late@example.org",
                                    charset="us-ascii"))
    inbox.sync()
    new0 = inbox.commits(0, inbox.mirror)
    assert new0 != old0 and old0[-1] not in new0                # a forced update, not a fast-forward
    fourth = ok(run_bot(*args, db=db))
    assert "Traceback" not in fourth.stderr
    assert store_rows(db, "SELECT count(*) FROM bot_messages WHERE message_id = '<late-1@example.org>'") == [(1,)]
    box = list(mailbox.mbox(str(out)))
    assert len(box) == sent_before + 1 and box[-1]["In-Reply-To"] == "<late-1@example.org>"
    # the known messages still there point at their rewritten commits (the purged one keeps its old
    # commit; the empty m purge left in its place is recorded, as no message): the next poll walks nothing
    rows0 = [(k, kind, note) for k, kind, note in store_rows(
        db, "SELECT source_key, kind, note FROM bot_messages WHERE message_id != '<tidy-v1@example.org>'")
        if k.startswith("0:")]
    keys0 = {k for k, kind, _ in rows0 if kind != "no_message"}
    assert len(keys0) == 3 and keys0 <= {f"0:{c}" for c in new0}
    (purged,) = [(k, note) for k, kind, note in rows0 if kind == "no_message"]
    assert purged[0] in {f"0:{c}" for c in new0} and purged[1] == "an empty m (a purged message's stub)", purged
    fifth = ok(run_bot(*args, db=db))
    assert "read 0 new messages" in fifth.stderr and "0 mails decided" in fifth.stderr


def test_inbox_bad_input(tmp_path):
    db = tmp_path / "s.db"
    (tmp_path / "plain").mkdir()
    for path, msg in [(tmp_path / "missing", "no such public-inbox directory"),
                      (tmp_path / "plain", "not a public-inbox v2 inbox (no git/N.git epochs)")]:
        proc = run_bot("--inbox", path, "--once", db=db)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and msg in proc.stderr, proc.stderr
    both = run_bot("--inbox", tmp_path, "--mbox", tmp_path / "x", db=db)
    assert both.returncode == 1 and "give exactly one of" in both.stderr


def _after(i: int, what: str) -> bytes:
    """A one-patch series that does not apply (git am only, no build), one per hand-made commit."""
    return botlist.not_applying(msgid=f"<after-{i}@example.org>", subject=f"[PATCH] mm: after {what}",
                                name=f"Dev {i}", addr=f"dev{i}@example.org", charset="us-ascii")


def test_commits_that_give_no_message_are_read_past_recorded_and_the_list_goes_on(tmp_path):
    """Each kind of commit public-inbox never writes (and its own removal), then a series delivered with
    public-inbox-mda; ``sizewatch bot --inbox`` run twice: no traceback, every commit recorded once with
    what it was, every series answered once, the second run reads nothing; a later series is the only
    thing the third run reads (the walk stops at the recorded commits)."""
    inbox = Inbox(tmp_path)
    db, out = tmp_path / "s.db", tmp_path / "outbox.mbox"
    args = ("--inbox", inbox.dir, "--once", "--policy", bot_config(tmp_path / "bot.toml"), "--outbox", out)
    rnd = random.Random(25)
    inbox.post(_after(0, "nothing"))
    kinds = [k for k in PLANTS if k not in ("force-push", "empty-commit")]
    planted: dict[str, str] = {}                        # source key -> kind
    for i, kind in enumerate(kinds, 1):
        plant(inbox, kind, i, rnd)
        planted["0:" + inbox.git("rev-parse", "refs/heads/master")] = kind
        inbox.post(_after(i, kind))
    plant(inbox, "empty-commit", 0, rnd)                # the last series' message again, at a new commit
    inbox.post(_after(len(kinds) + 1, "an empty commit"))

    first = ok(run_bot(*args, db=db))
    second = ok(run_bot(*args, db=db))
    assert "read 0 new messages" in second.stderr and "0 mails decided" in second.stderr, second.stderr
    rows = {k: (kind, note) for k, kind, note in store_rows(db, "SELECT source_key, kind, note FROM bot_messages")}
    commits = inbox.git("rev-list", "--first-parent", "--reverse", "HEAD").split()
    assert set(rows) == {f"0:{c}" for c in commits}, "every first-parent commit recorded"
    for key, kind in planted.items():
        want_kind, want_note = PLANTS[kind]
        got_kind, got_note = rows[key]
        assert want_kind is None or got_kind == want_kind, (kind, rows[key])
        assert want_note is None or want_note in got_note, (kind, rows[key])
    assert rows[f"0:{commits[-2]}"] == ("no_message", "m unchanged from the commit before (an empty commit, a "
                                                      "merge): no new message")
    replies = [m["In-Reply-To"] for m in mailbox.mbox(str(out))]
    assert sorted(replies) == sorted(f"<after-{i}@example.org>" for i in range(len(kinds) + 2)), replies
    assert all("does not apply" in m.get_payload(decode=True).decode() for m in mailbox.mbox(str(out)))

    # a removal is read, not set aside; the operator is told the size cap
    status = ok(run_bot("status", db=db)).stdout
    quarantined = sum(1 for kind, _ in rows.values() if kind in ("quarantined", "malformed"))
    assert f"quarantined or malformed messages: {quarantined}\n" in status
    assert "no_message" in status.splitlines()[0] and "a commit without m" not in status
    assert "messages over 32 MiB are set aside unread" in status
    assert "m is a directory (a tree)" in status and "over the 32 MiB cap (blob " in status
    tree_key = next(k for k, kind in planted.items() if kind == "tree")
    assert f"m is a directory (a tree), not a message (object {inbox.git('rev-parse', tree_key[2:] + ':m')}) " \
           f"(at {tree_key})" in status
    from test_bot_hostile import _dashboard
    web = _dashboard(db)
    api = web.get("/api/bot").get_json()
    assert api["max_message_bytes"] == 32 << 20 and api["size_rule"].startswith("messages over 32 MiB are set aside")
    assert api["set_aside"]["count"] == quarantined and api["messages_by_kind"]["no_message"] == 4
    assert tree_key in {m["key"] for m in api["set_aside"]["messages"]}
    page = web.get("/bot").get_data(as_text=True)
    assert "messages over 32 MiB are set aside unread" in page and f"(at <code>{tree_key}</code>)" in page

    inbox.post(_after(99, "all that"))
    third = ok(run_bot(*args, db=db))
    assert "read 1 new messages" in third.stderr and "1 mails decided" in third.stderr, third.stderr
    assert "Traceback" not in first.stderr + second.stderr + third.stderr


def test_the_p1_reproduction_twice(tmp_path):
    """The issue's own steps: a commit whose m is a tree, a series after it, ``bot --inbox DIR --once`` twice."""
    inbox = Inbox(tmp_path)
    db, out = tmp_path / "s.db", tmp_path / "outbox.mbox"
    args = ("--inbox", inbox.dir, "--once", "--policy", bot_config(tmp_path / "bot.toml"), "--outbox", out)
    inbox.post(_after(0, "nothing"))
    script = ("t=$(printf '100644 blob %s\\tm\\n' $(echo x | git --git-dir $E hash-object -w --stdin) "
              "| git --git-dir $E mktree)\n"
              "c=$(printf '040000 tree %s\\tm\\n' $t | git --git-dir $E mktree "
              "| xargs -I{} git --git-dir $E commit-tree {} -p master -m x)\n"
              "git --git-dir $E update-ref refs/heads/master $c\n")
    subprocess.run(["sh", "-ec", script], check=True, env={**inbox.env, "E": str(inbox.epochs()[0])})
    inbox.post(_after(1, "a tree"))
    runs = [ok(run_bot(*args, db=db)) for _ in range(2)]
    assert "read 3 new messages" in runs[0].stderr and "read 0 new messages" in runs[1].stderr
    replies = sorted(m["In-Reply-To"] for m in mailbox.mbox(str(out)))
    assert replies == ["<after-0@example.org>", "<after-1@example.org>"]


def test_what_git_cannot_read_is_set_aside_and_a_broken_epoch_said_in_one_line(tmp_path):
    """A damaged object (a loose blob cut short: git cat-file dies mid-answer) is set aside with the reason
    and git started again for the next commit; an epoch git fails on commit after commit is one line."""
    from analyzer.errors import InputError
    from ci.bot.inbox import MAX_LOST, read_inbox
    from ci.bot.mailbox import Unreadable
    inbox = Inbox(tmp_path, indexlevel="basic")
    inbox.post(_after(0, "nothing"))
    good = inbox.git("rev-parse", "refs/heads/master")
    blob = inbox.blob(b"From: a@example.org\nSubject: cut short\nMessage-Id: <cut@x>\n\n" + bytes(range(256)) * 64)
    inbox.commit(inbox.tree(("100644", blob, "m")))
    cut = inbox.git("rev-parse", "refs/heads/master")
    inbox.post(_after(1, "a damaged blob"))
    loose = inbox.epochs()[0] / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(loose.read_bytes()[:40])
    got = dict(read_inbox(inbox.dir))
    assert isinstance(got[f"0:{good}"], bytes) and b"after-1@" in list(got.values())[-1]
    assert isinstance(got[f"0:{cut}"], Unreadable) and "git could not read it" in got[f"0:{cut}"].reason
    for _ in range(MAX_LOST):                             # now commit after commit
        inbox.commit(inbox.tree(("100644", blob, "m")))
    with pytest.raises(InputError, match=f"git cat-file failed on {MAX_LOST} commits in a row"):
        list(read_inbox(inbox.dir, set(got)))


def test_a_seeded_inbox_campaign(tmp_path):
    """bench/inbox_campaign.py's generator, 20 rounds (every hand-made kind at least once) over three epochs:
    no traceback, every valid series tested and mailed once, every commit recorded (the bench's exit status)."""
    import re
    bench = Path(__file__).resolve().parent.parent / "bench" / "inbox_campaign.py"
    proc = subprocess.run([sys.executable, str(bench), "--rounds", "20", "--seed", "3", "--per-epoch", "8"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "over 3 epochs" in out and "valid series tested: 20 of 20" in out
    assert "tracebacks: 0" in out and "series with more than one mail: 0" in out
    assert "(all: yes); read again by a last poll: 0" in out
    planted = dict(re.findall(r"'([a-z0-9-]+)': (\d+)", out.split("kinds planted: ", 1)[1].split("\n", 1)[0]))
    assert set(planted) == set(PLANTS), out
