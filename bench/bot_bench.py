"""The mail bot's own cost, timed: reading a list mirror and assembling series (no builds).

A synthetic maildir of SERIES patch series as a busy list carries them (a cover letter, 1-6
patches threaded under it, review replies, every tenth series missing a patch, every fifth
followed by a v2), all to a list the bot is not configured to watch, so every ready series
is assembled and recorded as skipped without a build. Timed, in one process:

  first poll    every message read, parsed, recorded; every series assembled
  idle poll     nothing new: what a polling bot spends per interval on this mirror
  +1% new       a poll after 1% more messages arrive

Beside them, the floor: Python's mailbox + email parsing of the same messages alone.

    .venv/bin/python bench/bot_bench.py [--series 2000]
"""
from __future__ import annotations

import argparse
import email
import email.policy
import mailbox
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ci.bot.service import Bot, Source  # noqa: E402
from ci.bot.policy import Policy, Watch  # noqa: E402
from db.store import open_store  # noqa: E402

DIFF = ("diff --git a/mm/page_alloc.c b/mm/page_alloc.c\n--- a/mm/page_alloc.c\n+++ b/mm/page_alloc.c\n"
        "@@ -100,7 +100,7 @@ static void f(void)\n {\n \tint a;\n-\ta = 1;\n+\ta = 2;\n \treturn;\n }\n")


def messages(n_series: int, seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    out: list[bytes] = []
    for s in range(n_series):
        versions = [1, 2] if s % 5 == 0 else [1]
        for v in versions:
            total = rnd.randint(1, 6)
            tag = "PATCH" if v == 1 else f"PATCH v{v}"
            who = f"dev{s % 300}@example.org"
            cover = f"<s{s}v{v}.0@example.org>"
            subj = f"mm: change number {s}"
            out.append((f"From: Dev {s % 300} <{who}>\nTo: other-list@example.org\nSubject: [{tag} 0/{total}] "
                        f"{subj}\nMessage-Id: {cover}\nDate: Mon, 23 Nov 2026 10:00:00 +0000\n\ncover\n").encode())
            for p in range(1, total + 1):
                if s % 10 == 3 and p == total and total > 1:
                    continue                                  # never arrives: the series waits
                out.append((f"From: Dev {s % 300} <{who}>\nTo: other-list@example.org\nSubject: [{tag} {p}/{total}] "
                            f"{subj}: part {p}\nMessage-Id: <s{s}v{v}.{p}@example.org>\nIn-Reply-To: {cover}\n"
                            f"References: {cover}\nDate: Mon, 23 Nov 2026 10:00:0{p} +0000\n\npart {p}\n\n"
                            f"Signed-off-by: Dev <{who}>\n---\n{DIFF}").encode())
                for r in range(rnd.randint(0, 3)):
                    out.append((f"From: Reviewer {r} <rev{r}@example.org>\nTo: {who}\nCc: other-list@example.org\n"
                                f"Subject: Re: [{tag} {p}/{total}] {subj}: part {p}\n"
                                f"Message-Id: <s{s}v{v}.{p}.r{r}@example.org>\nIn-Reply-To: <s{s}v{v}.{p}@example.org>\n"
                                f"References: {cover} <s{s}v{v}.{p}@example.org>\n\n> part {p}\n\n"
                                f"Reviewed-by: Reviewer {r} <rev{r}@example.org>\n").encode())
    return out


def deliver(md: Path, raws: list[bytes]) -> None:
    box = mailbox.Maildir(str(md), create=True)
    for raw in raws:
        box.add(raw)
    box.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=2000)
    args = ap.parse_args()
    raws = messages(args.series)
    extra = messages(max(1, args.series // 100), seed=2)
    extra = [r.replace(b"@example.org>", b"@late.example.org>") for r in extra]
    with tempfile.TemporaryDirectory() as tmp:
        md = Path(tmp) / "list"
        deliver(md, raws)
        t0 = time.perf_counter()
        box = mailbox.Maildir(str(md), factory=None, create=False)
        for key in box.keys():
            email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)["Subject"]
        floor = time.perf_counter() - t0
        policy = Policy(watch=Watch(lists=("linux-mm@kvack.org",)), incomplete_timeout=Policy().incomplete_timeout)
        with open_store(Path(tmp) / "bench.db") as store:
            bot = Bot(store, policy, None, log=lambda s: None)
            src = Source("maildir", md)
            t0 = time.perf_counter()
            first = bot.poll(src)
            t_first = time.perf_counter() - t0
            t0 = time.perf_counter()
            idle = bot.poll(src)
            t_idle = time.perf_counter() - t0
            deliver(md, extra)
            t0 = time.perf_counter()
            more = bot.poll(src)
            t_more = time.perf_counter() - t0
        states: dict[str, int] = {}
        for v in first.series.values():
            states[v] = states.get(v, 0) + 1
        print(f"mirror: {len(raws)} messages, {args.series} series ({', '.join(f'{n} {k}' for k, n in states.items())})")
        print(f"{'':28}{'seconds':>9}{'msgs/s':>10}")
        print(f"{'parse only (mailbox+email)':28}{floor:9.2f}{len(raws) / floor:10.0f}")
        print(f"{'bot first poll':28}{t_first:9.2f}{first.read / t_first:10.0f}")
        print(f"{'bot idle poll':28}{t_idle:9.2f}{'':>10}   read {idle.read}")
        print(f"{'bot poll, +1% new':28}{t_more:9.2f}{more.read / t_more:10.0f}   read {more.read}")


if __name__ == "__main__":
    main()
