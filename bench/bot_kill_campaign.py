"""Exactly-once mail under kill -9: the real ``sizewatch bot`` (a process of its own, polling every
0.2 s) killed with SIGKILL at random instants (seeded; no hook in the bot) while series
arrive on the list, over and over, then run to completion. The list is a maildir or a public-inbox
v2 inbox (``public-inbox-mda``, tests/inboxes.py), the store an sqlite file or a PostgreSQL database,
the replies go to a real SMTP server on loopback (aiosmtpd, tests/botlist.py).

Builds stay out of it as in the bot's bookkeeping tests: every series fails ``git am`` (one patch,
a cover letter and two patches, a v1 and later its v2 from the same sender), here on a small git
tree of its own (``tree = <path>`` in the bot's config) with a cache of its own (``SIZEWATCH_CACHE``),
so a kill inside git never touches the shared cache's scratch worktrees. A kill takes the bot's
whole process group (its git children too), as a service manager stopping a unit does, or now and
then the bot's process alone, as the OOM killer does (its git children finish on their own).

The oracle is the SMTP server's own log against the store:
  - per series version at most one distinct mail (Message-ID), and every copy beyond the first
    explained: after some kill the server had that Message-ID and the store had not marked it sent
    (the one window SMTP leaves, ci.bot.outgoing: the resent copy is the same Message-ID);
  - nothing lost: once the bot runs to completion every series version still current (not
    superseded) got its mail, no mail is left unsent, no series left open.
Exit status 1 on any failure.

    .venv/bin/python bench/bot_kill_campaign.py [--kills 100] [--seed 28] [--series 40]
        [--store sqlite|postgresql|both] [--source maildir|inbox|both]
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))                 # the list, SMTP and PostgreSQL helpers of the tests

import botlist  # noqa: E402
from botlist import SmtpServer, bot_config  # noqa: E402

GIT_ENV = {"GIT_AUTHOR_NAME": "Tree", "GIT_AUTHOR_EMAIL": "tree@example.org", "GIT_COMMITTER_NAME": "Tree",
           "GIT_COMMITTER_EMAIL": "tree@example.org", "GIT_AUTHOR_DATE": "2026-11-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-11-01T00:00:00Z"}
_MSGID = re.compile(rb"^Message-ID:\s*(<[^>]+>)", re.I | re.M)
_SERIES = re.compile(rb"^X-Sizewatch-Series:\s*(\S+)", re.I | re.M)


def sizewatch_cmd() -> list[str]:
    import shutil
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "cli"]


def make_tree(path: Path, files: int = 2000) -> Path:
    """A git tree with ``mm/page_alloc.c`` (none of the series' context in it) and ``files`` others, so
    git's index work in the scratch worktree takes a while to land a kill in."""
    (path / "mm").mkdir(parents=True)
    (path / "mm" / "page_alloc.c").write_text("".join(f"/* line {i} */\n" for i in range(3000)))
    for i in range(files):
        d = path / f"d{i % 40:02}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.c").write_text(f"int f{i};\n")
    env = {**os.environ, **GIT_ENV}
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(path), *argv], check=True, env=env, capture_output=True)
    return path


@dataclass
class Series:
    key: str                                # the bot's series key: <first message id>|v<version>
    mails: list[bytes]
    superseded_by: str = ""                 # the key of a later version (then mailing it is optional)


def make_series(rnd: random.Random, n: int) -> list[list[Series]]:
    """``n`` series versions in batches of deliveries: a v2 never before its v1."""
    out: list[Series] = []
    later: list[Series] = []
    i = 0
    while len(out) + len(later) < n:
        who = dict(name=f"Dev {i}", addr=f"dev{i}@example.org", charset="us-ascii")
        kind = rnd.choice(("one", "one", "three", "v1v2"))
        if kind == "one":
            mid = f"<one-{i}@example.org>"
            out.append(Series(f"{mid}|v1", [botlist.not_applying(msgid=mid, subject=f"[PATCH] mm: change {i}", **who)]))
        elif kind == "three":                 # a cover letter and two patches
            cover = f"<cover-{i}@example.org>"
            head = (f"From: Dev {i} <dev{i}@example.org>\nTo: {botlist.LIST}\nSubject: [PATCH 0/2] mm: two steps {i}\n"
                    f"Message-Id: {cover}\nDate: Mon, 23 Nov 2026 10:14:00 +0100\n\nTwo steps.\n").encode()
            parts = [botlist.not_applying(msgid=f"<part-{i}-{k}@example.org>", in_reply_to=cover,
                                          subject=f"[PATCH {k}/2] mm: two steps {i}, step {k}", **who) for k in (1, 2)]
            out.append(Series(f"{cover}|v1", [head, *parts]))
        else:
            v1, v2 = f"<v1-{i}@example.org>", f"<v2-{i}@example.org>"
            first = Series(f"{v1}|v1", [botlist.not_applying(msgid=v1, subject=f"[PATCH] mm: tidy {i}", **who)],
                           superseded_by=f"{v2}|v2")
            out.append(first)
            later.append(Series(f"{v2}|v2", [botlist.not_applying(msgid=v2, subject=f"[PATCH v2] mm: tidy {i}",
                                                                  in_reply_to=v1, **who)]))
        i += 1
    batches: list[list[Series]] = []
    pool = out
    while pool or later:
        take = min(len(pool), rnd.randint(1, 3))
        batches.append(pool[:take])
        pool = pool[take:]
        if later and (not pool or rnd.random() < 0.4):      # v2s follow their v1s
            pool.append(later.pop(0))
    return [b for b in batches if b]


class List:
    """Where the series are posted and what the bot is told to read."""

    def __init__(self, kind: str, work: Path):
        self.kind = kind
        if kind == "maildir":
            self.path = work / "list"
            self.path.mkdir()
            for sub in ("new", "cur", "tmp"):
                (self.path / sub).mkdir()
        else:
            from inboxes import Inbox
            (work / "pi").mkdir()
            self.inbox = Inbox(work / "pi", indexlevel="basic")
            self.path = self.inbox.dir

    def post(self, series: list[Series]) -> None:
        raws = [m for s in series for m in s.mails]
        if self.kind == "maildir":
            botlist.deliver(self.path, *raws)
        else:
            self.inbox.post(*raws)


@dataclass
class Figures:
    store: str
    source: str
    seed: int
    series: int = 0
    superseded: int = 0                      # v1s their v2 supersedes (mailing them is optional)
    runs: int = 0
    lone_kills: int = 0                      # the bot's process alone killed, its git children left running
    kills: int = 0
    polls: int = 0
    refused: int = 0                         # runs that found the last one's lock still held
    received: int = 0                        # mails the SMTP server accepted
    distinct: int = 0
    duplicates: int = 0                      # copies beyond the first, same Message-ID
    window: int = 0                          # kills inside SMTP's window (server has it, store does not)
    unexplained: int = 0                     # duplicates no window accounts for
    second_mails: int = 0                    # series versions with two different mails
    lost: int = 0                            # current series versions without their mail
    optional_mailed: int = 0                 # superseded v1s mailed before their v2 came
    infra: int = 0                           # polls that met an infrastructure failure
    tracebacks: int = 0
    final_runs: int = 0
    startup: float = 0.0                     # a start and a poll of nothing: kills come from 0.6 x this on
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"bot kill campaign: {self.store} store, {self.source}, seed {self.seed}: {self.series} series "
                f"versions, {self.seconds:.0f} s (a start {self.startup:.1f} s)",
                f"  runs {self.runs}, killed {self.kills} ({self.lone_kills} the bot alone), polls {self.polls}, refused (last bot's lock) {self.refused}, "
                f"infrastructure failures {self.infra}, tracebacks {self.tracebacks}",
                f"  mails {self.received} ({self.distinct} distinct), duplicates {self.duplicates} "
                f"(SMTP window hits {self.window}, unexplained {self.unexplained}), "
                f"series with two different mails {self.second_mails}",
                f"  lost {self.lost}; superseded v1s mailed before their v2 {self.optional_mailed}; "
                f"runs to completion {self.final_runs}"] + [f"  FAIL {f}" for f in self.failures[:20]]


def _store_sent(db: str) -> set[bytes]:
    from pgserver import RawSql
    if "://" not in db and not Path(db).exists():     # killed before it made the store: sqlite would make it
        return set()
    conn = RawSql(db)
    try:
        return {m.encode() for (m,) in conn.execute("SELECT message_id FROM bot_mails WHERE state = 'sent'",
                                                   ()).fetchall()}
    except Exception as e:                     # noqa: BLE001 - killed before its first migration: no table yet
        if "bot_mails" in str(e):
            return set()
        raise
    finally:
        conn.close()


def _rows(db: str, sql: str) -> list[tuple]:
    from pgserver import RawSql
    conn = RawSql(db)
    try:
        return [tuple(r) for r in conn.execute(sql, ()).fetchall()]
    finally:
        conn.close()


def campaign(db: str, source: str, work: Path, seed: int = 28, kills: int = 30, series: int = 12,
             delay: tuple[float, float] = (0.6, 2.5), log=lambda s: None) -> Figures:
    """One campaign on store ``db`` (an sqlite path or a PostgreSQL URL) reading a ``source`` list
    (maildir | inbox) made under ``work``. Each kill comes ``delay[0]`` x a start's time to a start's
    time + ``delay[1]`` s after the bot started (a start measured first, on the empty list)."""
    t0 = time.monotonic()
    rnd = random.Random(seed)
    fig = Figures("postgresql" if "://" in db else "sqlite", source, seed)
    batches = make_series(rnd, series)
    every = [s for b in batches for s in b]
    fig.series = len(every)
    fig.superseded = sum(1 for s in every if s.superseded_by)
    tree = make_tree(work / "tree")
    lst = List(source, work)
    logs = work / "logs"
    logs.mkdir()
    env = {**os.environ, "SIZEWATCH_CACHE": str(work / "cache")}
    env.pop(KILL_ENV, None)
    with SmtpServer() as server:
        cfg = bot_config(work / "bot.toml", server.port, tree=str(tree), base="HEAD", daily_cap=0)
        argv = [*sizewatch_cmd(), "bot", f"--{source}", str(lst.path), "--policy", str(cfg), "--db", db]
        copies: collections.Counter = collections.Counter()        # Message-ID -> copies the server had
        hits: collections.Counter = collections.Counter()          # Message-ID -> window hits

        def received() -> collections.Counter:
            return collections.Counter(_MSGID.search(r.data).group(1) for r in server.messages())

        def run(n: int, once: bool, kill_after: float | None) -> str:
            out = logs / f"run-{n}.err"
            with open(out, "wb") as err:
                p = subprocess.Popen([*argv, *(["--once"] if once else ["--interval", "0.2s"])], env=env,
                                     stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
                killed = False
                try:
                    if kill_after is None:
                        p.wait(timeout=300)
                    else:
                        mid = rnd.random() < 0.5 and batches
                        t = kill_after * rnd.random() if mid else kill_after
                        time.sleep(t)
                        if mid:                                    # a delivery while the bot polls
                            lst.post(batches.pop(0))
                            time.sleep(max(0.0, kill_after - t))
                        if p.poll() is None:
                            if rnd.random() < 0.3:                  # the bot alone (the OOM killer's way)
                                os.kill(p.pid, signal.SIGKILL)
                                fig.lone_kills += 1
                            else:                                   # and its git children (a service manager's)
                                os.killpg(p.pid, signal.SIGKILL)
                            killed = True
                        p.wait(timeout=60)
                finally:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                        p.wait()
            fig.runs += 1
            text = out.read_text(errors="replace")
            fig.polls += text.count("sizewatch: bot: read ")
            fig.infra += text.count("infrastructure failure, retried next poll")
            fig.refused += "another sizewatch bot is running" in text
            if "Traceback" in text:
                fig.tracebacks += 1
                fig.failures.append(f"run {n}: a traceback: {text[text.index('Traceback'):][:600]}")
            if killed:
                fig.kills += 1
                time.sleep(0.1)                      # the server has finished with what was accepted
                now, sent = received(), _store_sent(db)
                for mid, c in now.items():
                    if c > copies[mid] and mid not in sent:        # accepted this run, not recorded as sent
                        hits[mid] += 1
                        fig.window += 1
                        log(f"run {n}: killed inside SMTP's window for {mid.decode()}")
                copies.update(now - copies)
            elif p.returncode != 0 and "another sizewatch bot is running" not in text:
                fig.failures.append(f"run {n} exited {p.returncode}: {text[-600:]}")
            else:
                copies.update(received() - copies)
            return text

        t = time.monotonic()                       # the bot was running before the series came:
        run(0, once=True, kill_after=None)           # its store made, and how long a start takes here
        fig.startup = time.monotonic() - t
        lo, hi = delay
        n = 1
        while fig.kills < kills:
            if batches and rnd.random() < 0.6:
                lst.post(batches.pop(0))
            run(n, once=False, kill_after=rnd.uniform(lo * fig.startup, fig.startup + hi))
            n += 1
            log(f"run {n}: {fig.kills} kills, {sum(copies.values())} mails")
        while batches:
            lst.post(batches.pop(0))
        for k in range(8):                           # to completion: until a poll finds nothing to do
            text = run(n, once=True, kill_after=None)
            n += 1
            fig.final_runs += 1
            unsent = _rows(db, "SELECT count(*) FROM bot_mails WHERE state NOT IN ('sent', 'dropped')")[0][0]
            if ("read 0 new messages" in text and "0 mails decided, 0 sent" in text and not unsent
                    and "infrastructure failure" not in text):
                break
        time.sleep(0.3)
        got = server.messages()
    by_series: dict[bytes, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in got:
        by_series[_SERIES.search(r.data).group(1)][_MSGID.search(r.data).group(1)] += 1
    fig.received = len(got)
    for key, ids in by_series.items():
        fig.distinct += len(ids)
        if len(ids) > 1:
            fig.second_mails += 1
            fig.failures.append(f"{key.decode()}: {len(ids)} different mails")
        for mid, c in ids.items():
            fig.duplicates += c - 1
            if c - 1 > hits[mid]:
                fig.unexplained += c - 1 - hits[mid]
                fig.failures.append(f"{mid.decode()} ({key.decode()}) reached the server {c} times, "
                                    f"{hits[mid]} explained by a kill in SMTP's window")
    for s in every:
        mailed = s.key.encode() in by_series
        if s.superseded_by:
            fig.optional_mailed += mailed
        elif not mailed:
            fig.lost += 1
            fig.failures.append(f"{s.key}: never mailed")
    open_series = _rows(db, "SELECT key, state FROM bot_series WHERE state IN ('waiting', 'infra_failure')")
    if open_series:
        fig.failures.append(f"series left open: {open_series[:5]}")
    unsent = _rows(db, "SELECT message_id, state FROM bot_mails WHERE state NOT IN ('sent', 'dropped')")
    if unsent:
        fig.failures.append(f"mails left unsent: {unsent[:5]}")
    states = dict(_rows(db, "SELECT key, state FROM bot_series"))
    for s in every:
        want = "superseded" if s.superseded_by else "not_applied"
        if states.get(s.key) != want:
            fig.failures.append(f"{s.key} is {states.get(s.key)!r}, not {want}")
    fig.seconds = time.monotonic() - t0
    return fig


KILL_ENV = "SIZEWATCH_BOT_KILL_AT"                 # the bot's own kill hook: never set here


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--series", type=int, default=40, help="series versions posted over the campaign")
    ap.add_argument("--store", choices=("sqlite", "postgresql", "both"), default="both")
    ap.add_argument("--source", choices=("maildir", "inbox", "both"), default="both")
    ap.add_argument("--max-delay", type=float, default=2.5, help="a kill comes up to a start's time + this many s "
                                                                 "after a start")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    stores = ("sqlite", "postgresql") if args.store == "both" else (args.store,)
    sources = ("maildir", "inbox") if args.source == "both" else (args.source,)
    pg = None
    failed = False
    try:
        if "postgresql" in stores:
            from pgserver import PgServer
            pg = PgServer()
        for i, (store, source) in enumerate((st, so) for st in stores for so in sources):
            with tempfile.TemporaryDirectory(prefix="bot-kill-") as tmp:
                work = Path(tmp)
                db = pg.database() if store == "postgresql" else str(work / "store.db")
                fig = campaign(db, source, work, seed=args.seed + i, kills=args.kills, series=args.series,
                               delay=(0.6, args.max_delay), log=print if args.verbose else (lambda s: None))
                print("\n".join(fig.lines()), flush=True)
                failed |= bool(fig.failures)
                if pg is not None and store == "postgresql":
                    pg.drop(db)
    finally:
        if pg is not None:
            pg.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
