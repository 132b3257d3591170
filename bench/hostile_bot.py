"""Hostile mail through the bot, without builds: N generated mailboxes (seeded), each one or more
hostile messages followed by a valid series, delivered to a real maildir and polled by the real
bot (read, parse, quarantine, record, assemble, supersede, watch policy, compose, decide, send to
an in-memory transport) over a real store. Only the build is left out: a ready series is
"tested" by a reply composed with the real ``compose`` and recorded with the real ``decide``.

Per mailbox it checks what the issue asks: the valid series after the hostile mail is tested,
at most one mail per series version, no exception out of a poll, recipients within the cap, no
control character in a reply's headers. At the end: outcome counts, quarantine reasons by class,
tracebacks by class (type and where), time, peak RSS.

    .venv/bin/python bench/hostile_bot.py [--mailboxes 1000] [--seed 12]
"""
from __future__ import annotations

import argparse
import base64
import collections
import os
import random
import re
import resource
import sys
import tempfile
import time
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ci.bot import verdict  # noqa: E402
from ci.bot.policy import Policy, Watch  # noqa: E402
from ci.bot.service import Bot, PollResult, Source  # noqa: E402
from db.store import open_store  # noqa: E402

LIST = "linux-mm@kvack.org"
DIFF = ("diff --git a/mm/page_alloc.c b/mm/page_alloc.c\n--- a/mm/page_alloc.c\n+++ b/mm/page_alloc.c\n"
        "@@ -100,7 +100,7 @@ static void f(void)\n {\n \tint a;\n-\ta = 1;\n+\ta = 2;\n \treturn;\n }\n")
CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class MemoryTransport:
    """Mails handed over, kept in memory (the bench measures the bot, not a relay)."""
    label = "memory"

    def __init__(self) -> None:
        self.sent: list = []

    def send(self, mail, sender: str) -> None:
        self.sent.append(mail)

    def close(self) -> None:
        pass


class NoBuildBot(Bot):
    """The real bot with the build replaced: a ready, watched series gets one reply about its head."""

    def test(self, s, now, res: PollResult) -> None:
        items = [verdict.Reportable("growth", f"bench: {len(s.patches)} patch(es) not built",
                                    function="bench", position=s.patches[0].position)]
        body = f"Hello,\n\nsizewatch (bench) read {len(s.patches)} patch(es) of this series.\n"
        mails = [self._mail(s, items, s.head, body, now, None)] if self._outcome(s, items) == "mail" else []
        self.decide(s, "tested", items, self._outcome(s, items), mails, res, None, "bench")


# --- the generator -------------------------------------------------------------------------------------

def _mail(frm: str, subject: str, mid: str | None, body: str, extra: str = "", to: str = LIST) -> bytes:
    head = f"From: {frm}\nTo: {to}\nSubject: {subject}\nDate: Mon, 23 Nov 2026 10:00:00 +0000\n"
    if mid is not None:
        head += f"Message-Id: {mid}\n"
    return (head + extra + "\n" + body).encode("utf-8", "surrogateescape")


def _patch_body(n: int) -> str:
    return f"Change {n}.\n\nSigned-off-by: Dev <dev@example.org>\n---\n{DIFF}"


def hostile(rnd: random.Random, i: int) -> tuple[str, list[bytes]]:
    """One hostile class and its message(s); ids unique per mailbox unless the class is about ids."""
    u = f"h{i}"
    frm = f"Hostile {i} <hostile{i}@example.net>"
    subj = f"[PATCH] mm: hostile {i}"
    body = _patch_body(i)
    kind = rnd.choice([
        "empty-id", "nested-id", "id-with-space", "huge-id", "no-id", "two-ids", "crlf-from", "nul-from",
        "bad-b64-from", "unknown-charset-subject", "huge-version", "huge-total", "huge-position", "zero-total",
        "position-past-total", "nul-esc-subject", "huge-subject", "5000-cc", "crlf-in-cc", "group-cc",
        "10k-references", "self-reply", "reply-cycle", "no-diff", "garbage-bytes", "binary-body",
        "bad-base64-body", "bad-qp-body", "broken-multipart", "unknown-body-charset", "many-headers",
        "no-separator", "from-lines-inside", "duplicate-id-different", "duplicate-id-same", "same-position-twice",
        "cover-claims-1000", "v2-in-reply-to-v1", "huge-body", "nested-tags", "negative-numbers",
        "utf8-overlong", "header-1mb"])
    mid = f"<{u}@example.net>"
    if kind == "empty-id":
        return kind, [_mail(frm, subj, "<>", body)]
    if kind == "nested-id":
        return kind, [_mail(frm, subj, f"<<{u}>@y>>", body)]
    if kind == "id-with-space":
        return kind, [_mail(frm, subj, f"<{u} x@example.net>", body)]
    if kind == "huge-id":
        return kind, [_mail(frm, subj, "<" + "x" * 20000 + f"{u}@example.net>", body)]
    if kind == "no-id":
        return kind, [_mail(frm, subj, None, body)]
    if kind == "two-ids":
        return kind, [_mail(frm, subj, mid, body, extra=f"Message-Id: <{u}.2@example.net>\n")]
    if kind == "crlf-from":
        return kind, [_mail(f"=?utf-8?q?Evil=0D=0ABcc=3A_v{i}=40example=2Ecom?= <e{i}@example.net>", subj, mid, body)]
    if kind == "nul-from":
        return kind, [_mail(f"=?utf-8?q?Nul=00Name?= <n{i}@example.net>", subj, mid, body)]
    if kind == "bad-b64-from":
        return kind, [_mail(f"=?utf-8?b?!!!notbase64?= <b{i}@example.net>", subj, mid, body)]
    if kind == "unknown-charset-subject":
        return kind, [_mail(frm, f"=?x-nope-{i}?q?abc?= {subj}", mid, body)]
    if kind == "huge-version":
        return kind, [_mail(frm, f"[PATCH v{'9' * rnd.randint(20, 5000)} 1/1] mm: x {i}", mid, body)]
    if kind == "huge-total":
        return kind, [_mail(frm, f"[PATCH 1/{10 ** rnd.randint(4, 30)}] mm: x {i}", mid, body)]
    if kind == "huge-position":
        return kind, [_mail(frm, f"[PATCH {10 ** rnd.randint(19, 40)}/2] mm: x {i}", mid, body)]
    if kind == "zero-total":
        return kind, [_mail(frm, f"[PATCH 0/0] mm: x {i}", mid, body)]
    if kind == "position-past-total":
        return kind, [_mail(frm, f"[PATCH 7/3] mm: x {i}", mid, body)]
    if kind == "nul-esc-subject":
        return kind, [_mail(frm, f"[PATCH] mm: \x00\x1b[2J\x1b]0;pwned\x07 {i}\r", mid, body)]
    if kind == "huge-subject":
        return kind, [_mail(frm, "[PATCH] " + "word " * 20000, mid, body)]
    if kind == "5000-cc":
        cc = ", ".join(f"d{k} <d{k}@example.com>" for k in range(5000))
        return kind, [_mail(frm, subj, mid, body, extra=f"Cc: {cc}\n")]
    if kind == "crlf-in-cc":
        cc = "=?utf-8?q?a=0D=0ABcc=3A_x=40evil=2Ecom?= <a@example.com>"
        return kind, [_mail(frm, subj, mid, body, extra=f"Cc: {cc}\n")]
    if kind == "group-cc":
        return kind, [_mail(frm, subj, mid, body, extra="Cc: undisclosed:;, grp: a@example.com, b@example.com;\n")]
    if kind == "10k-references":
        refs = " ".join(f"<r{k}.{u}@example.net>" for k in range(10000))
        return kind, [_mail(frm, subj, mid, body, extra=f"References: {refs}\nIn-Reply-To: <r9999.{u}@example.net>\n")]
    if kind == "self-reply":
        return kind, [_mail(frm, "[PATCH 1/2] mm: self", mid, body, extra=f"In-Reply-To: {mid}\nReferences: {mid}\n")]
    if kind == "reply-cycle":
        a, b = f"<{u}.a@example.net>", f"<{u}.b@example.net>"
        return kind, [_mail(frm, "[PATCH 1/2] mm: cyc", a, body, extra=f"In-Reply-To: {b}\n"),
                      _mail(frm, "[PATCH 2/2] mm: cyc", b, body, extra=f"In-Reply-To: {a}\n")]
    if kind == "no-diff":
        return kind, [_mail(frm, subj, mid, "no diff at all\n")]
    if kind == "garbage-bytes":
        return kind, [bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 4000)))]
    if kind == "binary-body":
        return kind, [_mail(frm, subj, mid, "") + bytes(rnd.getrandbits(8) for _ in range(3000))]
    if kind == "bad-base64-body":
        return kind, [_mail(frm, subj, mid, "@@@@not base64 at all ====\n",
                            extra="Content-Transfer-Encoding: base64\nContent-Type: text/plain; charset=utf-8\n")]
    if kind == "bad-qp-body":
        return kind, [_mail(frm, subj, mid, "=ZZ=\n=0" + body, extra="Content-Transfer-Encoding: quoted-printable\n")]
    if kind == "broken-multipart":
        return kind, [_mail(frm, subj, mid, "--b\nContent-Type: text/plain\n\n" + body + "\n--b",
                            extra='MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="b\n')]
    if kind == "unknown-body-charset":
        return kind, [_mail(frm, subj, mid, body, extra="Content-Type: text/plain; charset=x-unknown-42\n")]
    if kind == "many-headers":
        return kind, [_mail(frm, subj, mid, body, extra="".join(f"X-H{k}: v\n" for k in range(10000)))]
    if kind == "no-separator":
        return kind, [f"From: {frm}\nSubject: {subj}\nMessage-Id: {mid}\n{DIFF}".encode()]
    if kind == "from-lines-inside":
        return kind, [_mail(frm, subj, mid, "From nobody Mon Jan 1 00:00:00 2000\nFrom: x@y\n\n" + body)]
    if kind == "duplicate-id-different":
        return kind, [_mail(frm, subj, mid, body), _mail(f"Other {i} <o{i}@example.net>", f"[PATCH] mm: other {i}",
                                                         mid, _patch_body(i + 100000))]
    if kind == "duplicate-id-same":
        m = _mail(frm, subj, mid, body)
        return kind, [m, m]
    if kind == "same-position-twice":
        c = f"<{u}.0@example.net>"
        return kind, [_mail(frm, "[PATCH 0/1] mm: twice", c, "cover\n"),
                      _mail(frm, "[PATCH 1/1] mm: twice a", f"<{u}.1@example.net>", body, extra=f"In-Reply-To: {c}\n"),
                      _mail(frm, "[PATCH 1/1] mm: twice b", f"<{u}.2@example.net>", _patch_body(i + 7),
                            extra=f"In-Reply-To: {c}\n")]
    if kind == "cover-claims-1000":
        c = f"<{u}.0@example.net>"
        return kind, [_mail(frm, "[PATCH 0/1000] mm: big", c, "cover\n"),
                      _mail(frm, "[PATCH 1/1000] mm: big", f"<{u}.1@example.net>", body, extra=f"In-Reply-To: {c}\n")]
    if kind == "v2-in-reply-to-v1":
        return kind, [_mail(frm, subj, mid, body),
                      _mail(frm, f"[PATCH v2] mm: hostile {i}", f"<{u}.v2@example.net>", body,
                            extra=f"In-Reply-To: {mid}\n")]
    if kind == "huge-body":
        return kind, [_mail(frm, subj, mid, body + ("+" + "x" * 100 + "\n") * 20000)]
    if kind == "nested-tags":
        return kind, [_mail(frm, "[PATCH [PATCH v2 1/1] 1/1]] [RFC] " * 50, mid, body)]
    if kind == "negative-numbers":
        return kind, [_mail(frm, "[PATCH v-1 -1/-2] mm: neg", mid, body)]
    if kind == "utf8-overlong":
        return kind, [_mail(frm, subj, mid, body).replace(b"hostile", b"host\xc0\xafile\xff\xfe", 1)]
    if kind == "header-1mb":
        return kind, [_mail(frm, subj, mid, body, extra="X-Long: " + "a" * (1 << 20) + "\n")]
    raise AssertionError(kind)


def valid_series(i: int, rnd: random.Random) -> tuple[str, list[bytes]]:
    """A well-formed series after the hostile mail: a cover letter and 1-3 patches threaded under it."""
    total = rnd.randint(1, 3)
    frm = f"Valid Dev {i} <valid{i}@example.org>"
    cover = f"<valid{i}.0@example.org>"
    out = [_mail(frm, f"[PATCH 0/{total}] mm: valid change {i}", cover, "cover letter\n")]
    for p in range(1, total + 1):
        out.append(_mail(frm, f"[PATCH {p}/{total}] mm: valid change {i} part {p}", f"<valid{i}.{p}@example.org>",
                         _patch_body(i * 10 + p), extra=f"In-Reply-To: {cover}\nReferences: {cover}\n"))
    return f"{cover}|v1", out


def _deliver(md: Path, raws: list[bytes]) -> None:
    import mailbox
    box = mailbox.Maildir(str(md), create=True)
    for raw in raws:
        box.add(raw)
    box.close()


def _reason_class(note: str) -> str:
    """A quarantine reason without its particulars (ids, numbers, subjects)."""
    n = re.sub(r"'[^']*'|\"[^\"]*\"|<[^>]*>|\d+", "_", note)
    return " ".join(n.split())[:90]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mailboxes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    classes: collections.Counter = collections.Counter()
    tracebacks: collections.Counter = collections.Counter()
    examples: dict[str, str] = {}
    kinds: collections.Counter = collections.Counter()
    failures: list[str] = []
    slowest: list[tuple[float, int, str]] = []
    delivered = read = 0
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hostile-bot-") as tmp:
        root = Path(tmp)
        md = root / "list"
        before_cwd = set(os.listdir("."))
        policy = Policy(address="sizewatch-bot@example.org", watch=Watch(lists=(LIST,)), daily_cap=0)
        transport = MemoryTransport()
        with open_store(root / "bot.db") as store:
            bot = NoBuildBot(store, policy, transport, log=lambda s: None)
            src = Source("maildir", md)
            now = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)
            for i in range(args.mailboxes):
                kind, bad = hostile(rnd, i)
                classes[kind] += 1
                key, good = valid_series(i, rnd)
                _deliver(md, bad + good)
                delivered += len(bad) + len(good)
                now += timedelta(minutes=1)
                sent_before = len(transport.sent)
                t0 = time.perf_counter()
                try:
                    res = bot.poll(src, now)
                except Exception as e:               # noqa: BLE001 - what the bench is looking for
                    tb = traceback.extract_tb(e.__traceback__)[-1]
                    cls = f"{type(e).__name__} at {Path(tb.filename).name}:{tb.lineno}"
                    tracebacks[cls] += 1
                    examples.setdefault(cls, f"mailbox {i} ({kind}): {str(e)[:200]}")
                    continue
                dt = time.perf_counter() - t0
                slowest = sorted(slowest + [(dt, i, kind)], reverse=True)[:5]
                for k, n in res.kinds.items():
                    kinds[k] += n
                read += res.read
                if res.series.get(key) != "tested":
                    failures.append(f"mailbox {i} ({kind}): the valid series was {res.series.get(key)!r}")
                new = transport.sent[sent_before:]
                for m in new:
                    head = m.raw.split(b"\n\n", 1)[0]
                    if CONTROL.search(head.replace(b"\n", b"")):
                        failures.append(f"mailbox {i} ({kind}): a control character in a reply's headers")
                    if len(m.recipients) > 2 + policy.max_cc + len(policy.watch.lists):
                        failures.append(f"mailbox {i} ({kind}): {len(m.recipients)} recipients")
            per_series = collections.Counter(m.raw.split(b"X-Sizewatch-Series: ", 1)[1].split(b"\n", 1)[0]
                                             for m in transport.sent)
            repeated = {k: n for k, n in per_series.items() if n > 1}
            n_q, _ = store.bot.set_aside(0)
            reasons = collections.Counter(_reason_class(n) for (n,) in store.connection().execute(
                "SELECT note FROM bot_messages WHERE kind IN ('quarantined', 'malformed')"))
            states = collections.Counter(s for (s,) in store.connection().execute("SELECT state FROM bot_series"))
            outside = set(os.listdir(".")) - before_cwd
            ours = sorted(p.name for p in root.iterdir())
    elapsed = time.perf_counter() - t_start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()
    print(f"hostile bot campaign: {args.mailboxes} mailboxes (seed {args.seed}), each hostile mail then a valid series")
    print(f"  time {elapsed:.1f} s ({elapsed / max(1, args.mailboxes) * 1000:.1f} ms per mailbox), "
          f"peak RSS {peak:.0f} MiB, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"  messages delivered {delivered}, read {read} (each once: {'yes' if read == delivered else 'NO'}); "
          f"by kind: {dict(sorted(kinds.items()))}")
    print(f"  series by state: {dict(sorted(states.items()))}")
    print(f"  mails sent: {len(transport.sent)}; series with more than one mail: {len(repeated)}")
    print(f"  valid series tested: {args.mailboxes - len([f for f in failures if 'valid series' in f])}"
          f" of {args.mailboxes}")
    print(f"  quarantined or malformed messages: {n_q}; reasons:")
    for r, n in reasons.most_common():
        print(f"    {n:5}  {r}")
    print(f"  tracebacks: {sum(tracebacks.values())}" + ("" if not tracebacks else ""))
    for cls, n in tracebacks.most_common():
        print(f"    {n:5}  {cls}: {examples[cls]}")
    print(f"  slowest polls: " + ", ".join(f"{dt * 1000:.0f} ms (mailbox {i}, {k})" for dt, i, k in slowest))
    print(f"  hostile classes generated: {len(classes)}; files outside the bot's dir: {sorted(outside) or 'none'}; "
          f"in it: {', '.join(ours)}")
    for f in failures[:20]:
        print(f"  FAIL {f}")
    return 1 if failures or tracebacks or repeated or outside or read != delivered else 0


if __name__ == "__main__":
    sys.exit(main())
