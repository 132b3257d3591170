"""Hostile public-inbox epochs through the bot, without builds: N generated rounds (seeded), each one
hand-made commit of what an epoch's git can hold but public-inbox never writes (``tests/inboxes.py``
``plant``: m a tree, a gitlink, a symbolic link, a missing object, an empty or oversized (sparse) blob,
binary garbage, an undeclared 8-bit mail; a merge, an empty commit, a commit without m, public-inbox's
own removal, a force-push rewriting the last commits) then a valid series delivered with
``public-inbox-mda`` into a real ``public-inbox-init -V2`` inbox, epochs rolled over by public-inbox
itself every ``--per-epoch`` rounds. The real bot polls it (bench/hostile_bot.py's NoBuildBot: read,
record, assemble, compose, decide, send to memory; only the build is left out) after most rounds, after
several at once now and then.

It checks what issue 25 asks: no exception out of a poll, every valid series tested, at most one mail
per series version, every first-parent commit of every epoch recorded (so never walked again: a last
poll reads nothing). It prints time per poll, peak RSS (an oversized m is never read: the RSS stays
the bot's own), outcomes by kind and set-aside reasons by class; exit status 1 on any failure.

    .venv/bin/python bench/inbox_campaign.py [--rounds 60] [--seed 25] [--per-epoch 20] [--huge-mib 40]
"""
from __future__ import annotations

import argparse
import collections
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))                 # the inbox helpers are shared with the tests

from hostile_bot import LIST, MemoryTransport, NoBuildBot, valid_series  # noqa: E402
from inboxes import PLANTS, Inbox, plant  # noqa: E402

from ci.bot.policy import Policy, Watch  # noqa: E402
from ci.bot.service import Source  # noqa: E402
from db.store import open_store  # noqa: E402


FIRST = (f"From: First <first@example.org>\nTo: {LIST}\nSubject: the list opens\nMessage-Id: <first@example.org>\n"
         "Date: Mon, 23 Nov 2026 10:00:00 +0000\n\nhello\n").encode()


def reason_class(note: str) -> str:
    """A reason without its particulars: object ids, numbers."""
    return " ".join(re.sub(r"\d+", "N", re.sub(r"\b[0-9a-f]{40}([0-9a-f]{24})?\b", "<oid>", note)).split())[:100]


def kinds(rnd: random.Random, rounds: int) -> list[str]:
    """Every kind once per len(PLANTS) rounds, in a shuffled order: a short campaign still has each."""
    out: list[str] = []
    while len(out) < rounds:
        block = list(PLANTS)
        rnd.shuffle(block)
        out += block
    return out[:rounds]


def first_parents(inbox: Inbox) -> set[str]:
    """``<epoch>:<commit>`` of every first-parent commit of every epoch: what the bot must have recorded."""
    out = set()
    for n, repo in enumerate(inbox.epochs()):
        shas = subprocess.run(["git", "--git-dir", str(repo), "rev-list", "--first-parent", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.split()
        out |= {f"{n}:{c}" for c in shas}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--per-epoch", type=int, default=20, help="rounds before public-inbox starts a new epoch")
    ap.add_argument("--huge-mib", type=int, default=40, help="size of the oversized m (a sparse file)")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    plan = kinds(rnd, args.rounds)
    tracebacks: collections.Counter = collections.Counter()
    examples: dict[str, str] = {}
    by_kind: collections.Counter = collections.Counter()
    failures: list[str] = []
    polls: list[tuple[float, str]] = []
    make = deliver = 0.0
    delivered = 0
    series: dict[str, str] = {}                           # series key -> the plant before it
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="inbox-campaign-") as tmp:
        root = Path(tmp)
        inbox = Inbox(root, indexlevel="basic")
        policy = Policy(address="sizewatch-bot@example.org", watch=Watch(lists=(LIST,)), daily_cap=0)
        transport = MemoryTransport()
        with open_store(root / "bot.db") as store:
            bot = NoBuildBot(store, policy, transport, log=lambda s: None)
            src = Source("inbox", inbox.dir)
            now = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)
            pending: list[str] = []

            def poll(what: str) -> int:
                """One poll; how many entries it read."""
                nonlocal now
                now += timedelta(minutes=1)
                t0 = time.perf_counter()
                try:
                    res = bot.poll(src, now)
                except Exception as e:                # noqa: BLE001 - what the bench is looking for
                    tb = traceback.extract_tb(e.__traceback__)[-1]
                    cls = f"{type(e).__name__} at {Path(tb.filename).name}:{tb.lineno}"
                    tracebacks[cls] += 1
                    examples.setdefault(cls, f"after {what}: {str(e)[:200]}")
                    return -1
                polls.append((time.perf_counter() - t0, what))
                by_kind.update({k: n for k, n in res.kinds.items() if n})
                return res.read

            inbox.post(FIRST)                             # an epoch to plant on
            delivered += 1
            for i, kind in enumerate(plan):
                key, good = valid_series(i, rnd)
                t0 = time.perf_counter()
                if i > 0 and i % args.per_epoch == 0:    # public-inbox's roll-over: the cover starts an epoch
                    inbox.post(good.pop(0), new_epoch=True)
                    delivered += 1
                t1 = time.perf_counter()
                plant(inbox, kind, i, rnd, huge=args.huge_mib << 20)
                t2 = time.perf_counter()
                inbox.post(*good)
                make, deliver = make + (t2 - t1), deliver + (t1 - t0) + (time.perf_counter() - t2)
                delivered += len(good)
                series[key] = kind
                pending.append(kind)
                if rnd.random() < 0.75 or i == len(plan) - 1:
                    poll("+".join(pending))
                    pending = []
            again = poll("nothing new")
            states = dict(store.connection().execute("SELECT key, state FROM bot_series"))
            recorded = store.bot.known_keys(src.label)
            want = first_parents(inbox)
            reasons = collections.Counter(reason_class(n) for (n,) in store.connection().execute(
                "SELECT note FROM bot_messages WHERE kind IN ('quarantined', 'malformed', 'no_message')"))
            stored = collections.Counter(k for (k,) in store.connection().execute("SELECT kind FROM bot_messages"))
            epochs = len(inbox.epochs())
    for key, kind in series.items():
        if states.get(key) != "tested":
            failures.append(f"the series after {kind} ({key}) is {states.get(key)!r}")
    per_series = collections.Counter(m.raw.split(b"X-Sizewatch-Series: ", 1)[1].split(b"\n", 1)[0]
                                     for m in transport.sent)
    repeated = {k: n for k, n in per_series.items() if n > 1}
    unrecorded = want - recorded
    if unrecorded:
        failures.append(f"{len(unrecorded)} commits never recorded, e.g. {sorted(unrecorded)[0]}")
    if again:
        failures.append(f"the last poll read {again} messages again")
    elapsed = time.perf_counter() - t_start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times = sorted(polls, reverse=True)
    tested = sum(1 for k in series if states.get(k) == "tested")
    print(f"inbox campaign: {args.rounds} rounds (seed {args.seed}) over {epochs} epochs, each a hand-made commit "
          f"then a valid series; oversized m {args.huge_mib} MiB")
    print(f"  time {elapsed:.1f} s: making commits {make:.1f} s, public-inbox-mda {deliver:.1f} s, "
          f"{len(polls)} polls {sum(t for t, _ in polls):.1f} s "
          f"(mean {sum(t for t, _ in polls) / max(1, len(polls)) * 1000:.0f} ms); peak RSS {peak:.0f} MiB")
    print(f"  kinds planted: {dict(sorted(collections.Counter(plan).items()))}")
    print(f"  messages delivered {delivered}; recorded by kind: {dict(sorted(stored.items()))}")
    print(f"  commits recorded: {len(want & recorded)} of {len(want)} (all: {'yes' if not unrecorded else 'NO'}); "
          f"read again by a last poll: {again}")
    print(f"  series by state: {dict(sorted(collections.Counter(states.values()).items()))}")
    print(f"  valid series tested: {tested} of {len(series)}")
    print(f"  mails sent: {len(transport.sent)}; series with more than one mail: {len(repeated)}")
    print("  set aside or without a message, by reason:")
    for r, n in reasons.most_common():
        print(f"    {n:5}  {r}")
    print(f"  tracebacks: {sum(tracebacks.values())}")
    for cls, n in tracebacks.most_common():
        print(f"    {n:5}  {cls}: {examples[cls]}")
    print("  slowest polls: " + ", ".join(f"{t * 1000:.0f} ms (after {w})" for t, w in times[:4]))
    for f in failures[:20]:
        print(f"  FAIL {f}")
    return 1 if failures or tracebacks or repeated else 0


if __name__ == "__main__":
    sys.exit(main())
