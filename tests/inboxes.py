"""Real public-inbox v2 inboxes for the bot's tests and benches: made and fed with Debian's tools
(``public-inbox-init -V2``, ``public-inbox-mda``, ``-purge``, ``-learn rm``), mirrored as lore is
followed (``git clone --mirror``, ``git fetch``), and epochs given what an inbox's git can hold but
public-inbox never writes: hand-made commits whose ``m`` is a tree, a gitlink, a symbolic link, a
missing object, an empty or oversized blob, binary garbage or an undeclared 8-bit mail; merges, empty
commits, commits without ``m``, force-pushed (rewritten) history (``plant``).

Shared by ``tests/test_bot_inbox.py`` and ``bench/inbox_campaign.py``.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

LIST = "linux-mm@kvack.org"
GIT_ID = {"GIT_AUTHOR_NAME": "Hand Made", "GIT_AUTHOR_EMAIL": "hand@example.org",
          "GIT_COMMITTER_NAME": "Hand Made", "GIT_COMMITTER_EMAIL": "hand@example.org"}
TOOLS = ("public-inbox-init", "public-inbox-mda", "public-inbox-purge", "public-inbox-learn")

ROLL_OVER = ('my $orig = \\&PublicInbox::V2Writable::new; '
             '{ no warnings "redefine"; *PublicInbox::V2Writable::new = sub { my $s = $orig->(@_); '
             '$s->{rotate_bytes} = 1; $s }; } '
             'local @ARGV = ("--no-precheck"); do "/usr/bin/public-inbox-mda"; die $@ if $@;')


class Inbox:
    """A public-inbox v2 inbox for LIST and a mirror of it (what the bot reads)."""

    def __init__(self, tmp: Path, indexlevel: str | None = None):
        missing = [t for t in TOOLS if shutil.which(t) is None]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} missing: scripts/install.sh installs public-inbox")
        self.dir, self.mirror = tmp / "inbox", tmp / "mirror"
        (tmp / "home").mkdir()
        self.env = {**os.environ, "PI_CONFIG": str(tmp / "pi-config"), "HOME": str(tmp / "home"),
                    "ORIGINAL_RECIPIENT": LIST, **GIT_ID}
        level = ("-L", indexlevel) if indexlevel else ()
        self.run("public-inbox-init", "-V2", *level, "linux-mm", str(self.dir),
                 "http://lore.example.org/linux-mm", LIST)
        self.run("git", "config", "-f", self.env["PI_CONFIG"], "publicinboxmda.spamcheck", "none")

    def run(self, *argv: str, stdin: bytes | None = None) -> str:
        proc = subprocess.run(argv, input=stdin, capture_output=True, env=self.env, timeout=120)
        assert proc.returncode == 0, (argv, proc.stderr.decode(errors="replace"))
        return proc.stdout.decode()

    def epochs(self) -> list[Path]:
        return sorted((self.dir / "git").glob("*.git"), key=lambda p: int(p.name.split(".")[0]))

    def post(self, *raws: bytes, new_epoch: bool = False) -> None:
        """Deliver with public-inbox-mda; ``new_epoch``: the first one starts a new epoch (public-inbox's
        own roll-over, its size limit lowered to 1 byte; the limit is checked against packed bytes, so the
        head commit is packed first: a pack of its own, which needs no walk of objects planted missing)."""
        for i, raw in enumerate(raws):
            if new_epoch and i == 0:
                self.git("pack-objects", "-q", str(self.epochs()[-1] / "objects" / "pack" / "pack"),
                         stdin=self.git("rev-parse", "refs/heads/master").encode() + b"\n")
                self.run("perl", "-MPublicInbox::V2Writable", "-e", ROLL_OVER, stdin=raw)
            else:
                self.run("public-inbox-mda", "--no-precheck", stdin=raw)

    def purge(self, raw: bytes) -> None:
        self.run("public-inbox-purge", str(self.dir), stdin=raw)

    def remove(self, raw: bytes) -> None:
        """public-inbox's own removal commit (``m`` moved to ``d``): ``public-inbox-learn rm``."""
        self.run("public-inbox-learn", "rm", stdin=raw)

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

    # --- hand-made git objects: what an epoch can hold that public-inbox never writes --------------
    def git(self, *args: str, stdin: bytes | None = None) -> str:
        """git on the newest epoch of the inbox (not the mirror: it fetches what is planted)."""
        return self.run("git", "--git-dir", str(self.epochs()[-1]), *args, stdin=stdin).strip()

    def blob(self, data: bytes) -> str:
        return self.git("hash-object", "-w", "--stdin", stdin=data)

    def tree(self, *entries: tuple[str, str, str]) -> str:
        """A tree of (mode, oid, name) entries, objects that are not there allowed (``--missing``)."""
        kind = {"040000": "tree", "160000": "commit"}
        text = "".join(f"{mode} {kind.get(mode, 'blob')} {oid}\t{name}\n" for mode, oid, name in entries)
        return self.git("mktree", "--missing", stdin=text.encode())

    def commit(self, tree: str, *parents: str, message: str = "hand-made") -> str:
        """A commit on top of master (or of ``parents``), master moved to it."""
        args = [a for p in (parents or ("refs/heads/master",)) for a in ("-p", p)]
        sha = self.git("commit-tree", tree, *args, "-m", message)
        self.git("update-ref", "refs/heads/master", sha)
        return sha

    def rewrite(self, n: int) -> None:
        """Force-push: the last ``n`` commits made again (same trees, new commits), master moved to them."""
        head = self.git("rev-parse", "refs/heads/master")
        old = self.git("rev-list", "--first-parent", "--reverse", f"-{n}", head).split()
        parent = self.git("rev-list", "--first-parent", "--skip", str(len(old)), "-1", head)  # '' past the root
        for c in old:
            parent = self.git("commit-tree", f"{c}^{{tree}}", *(("-p", parent) if parent else ()),
                              "-m", f"rewritten {c[:12]}")
        self.git("update-ref", "refs/heads/master", parent)


# kind -> (bot message kind, a part of its note) for what ``plant`` makes; None: any (a parser's call)
PLANTS = {
    "tree": ("quarantined", "m is a directory (a tree)"),
    "gitlink": ("quarantined", "m is a gitlink"),
    "symlink": ("quarantined", "m is a symbolic link"),
    "missing": ("quarantined", "is missing from the mirror"),
    "huge": ("quarantined", "over the 32 MiB cap"),
    "empty-m": ("no_message", "an empty m"),
    "no-m": ("no_message", "a commit without m"),
    "removal": ("no_message", "a commit without m"),
    "garbage": (None, None),
    "latin1-mail": (None, None),
    "merge": ("other", None),
    "empty-commit": ("no_message", "m unchanged from the commit before"),
    "force-push": (None, None),
}


def _latin1_mail(i: int) -> bytes:
    return (f"From: Ren\xe9e M\xfcller <renee{i}@example.org>\nTo: {LIST}\nSubject: Re: caf\xe9 {i}\n"
            f"Message-Id: <latin1-{i}@example.org>\nDate: Mon, 23 Nov 2026 10:00:00 +0000\n\n"
            "d\xe9j\xe0 vu, sans charset d\xe9clar\xe9\n").encode("latin-1")


def plant(inbox: Inbox, kind: str, i: int, rnd: random.Random, huge: int = 40 << 20) -> None:
    """Put one ``kind`` (a key of PLANTS) on the newest epoch's master; ``i`` makes its ids unique."""
    g = inbox
    if kind == "tree":
        g.commit(g.tree(("040000", g.tree(("100644", g.blob(b"x\n"), "m")), "m")))
    elif kind == "gitlink":
        g.commit(g.tree(("160000", g.git("rev-parse", "refs/heads/master"), "m")))
    elif kind == "symlink":
        g.commit(g.tree(("120000", g.blob(b"../../../../etc/passwd"), "m")))
    elif kind == "missing":
        g.commit(g.tree(("100644", f"{rnd.getrandbits(160):040x}", "m")))
    elif kind == "huge":                      # a mail's head, then a hole: a sparse file, over the cap
        path = g.dir / f"huge-{i}.eml"
        with open(path, "wb") as f:
            f.write(f"From: Big <big{i}@example.org>\nTo: {LIST}\nSubject: [PATCH] huge {i}\n"
                    f"Message-Id: <huge-{i}@x>\n\n".encode())
            f.truncate(huge)
        oid = g.git("hash-object", "-w", str(path))
        path.unlink()
        g.commit(g.tree(("100644", oid, "m")))
    elif kind == "empty-m":
        g.commit(g.tree(("100644", g.blob(b""), "m")))
    elif kind == "no-m":
        g.commit(g.tree())
    elif kind == "removal":                   # public-inbox's own: the message delivered, then removed
        raw = _latin1_mail(i).replace(b"latin1-", b"removed-")
        g.post(raw)
        g.remove(raw)
    elif kind == "garbage":
        g.commit(g.tree(("100644", g.blob(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 5000)))), "m")))
    elif kind == "latin1-mail":
        g.commit(g.tree(("100644", g.blob(_latin1_mail(i)), "m")))
    elif kind == "merge":                     # a side commit (second parent, never walked) merged with a message
        side = g.git("commit-tree", g.tree(("100644", g.blob(_latin1_mail(i + 10 ** 6)), "m")), "-m", "side")
        mail = (f"From: Merger <merge{i}@example.org>\nTo: {LIST}\nSubject: merged {i}\n"
                f"Message-Id: <merge-{i}@example.org>\n\nmerged\n").encode()
        g.commit(g.tree(("100644", g.blob(mail), "m")), "refs/heads/master", side, message="merge")
    elif kind == "empty-commit":
        g.commit(g.git("rev-parse", "refs/heads/master^{tree}"))
    elif kind == "force-push":
        g.rewrite(rnd.randint(1, 3))
    else:
        raise ValueError(kind)
