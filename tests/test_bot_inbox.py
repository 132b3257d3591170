"""``sizewatch bot --inbox``: a real public-inbox v2 inbox made with Debian's public-inbox tools
(``public-inbox-init -V2``, ``public-inbox-mda``, ``public-inbox-purge``), mirrored the way lore is
followed (``git clone --mirror`` of each epoch, ``git fetch`` after), read by the bot poll by poll.

The list: the example series and a series that does not apply; later, in a new epoch, a review reply
and the example's v2; then the first message is purged (public-inbox rewrites that epoch's history:
the mirror is force-updated) and one more patch arrives. The epoch roll-over is public-inbox's own:
its V2Writable with the epoch size limit (1 GiB on lore) lowered to 1 byte for the one delivery that
must start epoch 1, after a ``git repack`` (the limit is checked against packed bytes).
"""
from __future__ import annotations

import mailbox
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

import botlist
from botlist import LIST, bot_config
from test_bot import ok, parse, run_bot, store_rows

pytestmark = pytest.mark.kernel

ROLL_OVER = ('my $orig = \\&PublicInbox::V2Writable::new; '
             '{ no warnings "redefine"; *PublicInbox::V2Writable::new = sub { my $s = $orig->(@_); '
             '$s->{rotate_bytes} = 1; $s }; } '
             'local @ARGV = ("--no-precheck"); do "/usr/bin/public-inbox-mda"; die $@ if $@;')


class Inbox:
    """A public-inbox v2 inbox for LIST and a mirror of it (what the bot reads)."""

    def __init__(self, tmp: Path):
        for tool in ("public-inbox-init", "public-inbox-mda", "public-inbox-purge"):
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} missing: scripts/install.sh installs public-inbox")
        self.dir, self.mirror = tmp / "inbox", tmp / "mirror"
        (tmp / "home").mkdir()
        self.env = {**os.environ, "PI_CONFIG": str(tmp / "pi-config"), "HOME": str(tmp / "home"),
                    "ORIGINAL_RECIPIENT": LIST}
        self.run("public-inbox-init", "-V2", "linux-mm", str(self.dir), "http://lore.example.org/linux-mm", LIST)
        self.run("git", "config", "-f", self.env["PI_CONFIG"], "publicinboxmda.spamcheck", "none")

    def run(self, *argv: str, stdin: bytes | None = None) -> None:
        proc = subprocess.run(argv, input=stdin, capture_output=True, env=self.env, timeout=120)
        assert proc.returncode == 0, (argv, proc.stderr.decode(errors="replace"))

    def epochs(self) -> list[Path]:
        return sorted((self.dir / "git").glob("*.git"), key=lambda p: int(p.name.split(".")[0]))

    def post(self, *raws: bytes, new_epoch: bool = False) -> None:
        for i, raw in enumerate(raws):
            if new_epoch and i == 0:
                self.run("git", "--git-dir", str(self.epochs()[-1]), "repack", "-adq")
                self.run("perl", "-MPublicInbox::V2Writable", "-e", ROLL_OVER, stdin=raw)
            else:
                self.run("public-inbox-mda", "--no-precheck", stdin=raw)

    def purge(self, raw: bytes) -> None:
        self.run("public-inbox-purge", str(self.dir), stdin=raw)

    def sync(self) -> None:
        """Mirror every epoch: a clone for a new one, a (forced, pruning) fetch for the others."""
        for epoch in self.epochs():
            dest = self.mirror / "git" / epoch.name
            if dest.exists():
                self.run("git", "--git-dir", str(dest), "fetch", "-q", "--prune")
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                self.run("git", "clone", "-q", "--mirror", str(epoch), str(dest))

    def commits(self, epoch: int, where: Path | None = None) -> list[str]:
        repo = (where or self.dir) / "git" / f"{epoch}.git"
        return subprocess.run(["git", "--git-dir", str(repo), "rev-list", "--reverse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.split()


def test_inbox_polled_by_commit_across_epochs_and_a_forced_update(example_store, tmp_path):
    db = tmp_path / "store.db"
    src, dst = sqlite3.connect(example_store[0]), sqlite3.connect(db)
    src.backup(dst)                                         # the example series' builds, already analyzed
    src.close()
    dst.close()
    out = tmp_path / "outbox.mbox"
    cfg = bot_config(tmp_path / "bot.toml")
    inbox = Inbox(tmp_path)
    args = ("--inbox", inbox.mirror, "--once", "--config", cfg, "--outbox", out)
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
    # commit): the next poll walks nothing
    keys0 = {k for (k,) in store_rows(db, "SELECT source_key FROM bot_messages WHERE message_id != '<tidy-v1@example.org>'")
             if k.startswith("0:")}
    assert len(keys0) == 3 and keys0 <= {f"0:{c}" for c in new0}
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
