"""The mailing-list bot: read new list messages, assemble series, test each ready one patch
by patch through the pipeline, decide what is worth a mail, and reply in the thread.

One poll:
  1. send what an earlier run decided but did not send (a crash, a refused connection,
     the daily cap);
  2. read the messages the store has not seen from the maildir / mbox and record them;
  3. assemble series (ci.bot.assemble) from every patch and cover letter not yet settled;
  4. per series: superseded, waiting, not watched, incomplete (time-out passed), or ready:
     apply with git am (ci.pipeline.plan_messages: the messages as data, no file), build and compare each patch with its
     parent under the configured toolchains (build_all / compare_all), report from the
     store, select what the policy reports (ci.bot.verdict);
  5. record the decision with its composed mails in one transaction (exactly once per
     series version and finding set), then send them and mark each sent.

A crash anywhere loses nothing: before 5 the series is still open and is tested again
(its builds are in the store, so that is quick); after 5 its mails are ``decided`` and
step 1 of the next run sends them. A duplicate is possible only if the process dies
between the SMTP server accepting DATA and the store marking the mail sent; the resent
copy has the same Message-ID, so receivers can drop it (ci.bot.outgoing explains the outbox,
which has no such window).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Iterator

from analyzer.errors import InputError
from ci import pipeline
from toolchains.build import toolchain_info
from ci.pipeline.measure import Measure, check_available
from toolchains.mca import check_cpu
from ci.bot import verdict
from ci.bot.assemble import Assembly, PostedSeries, assemble, readiness
from ci.bot.inbox import check_inbox, read_inbox
from ci.bot.trailers import am_patches
from toolchains.series import MboxSeries, Message, mbox_entry
from ci.bot.mailbox import (NoMessage, Unreadable, am_ready, body_text, check_maildir, check_mbox, content_key,
                            malformed_id, mbox_has_messages, parse_mail, quarantine, read_maildir, read_mbox)
from ci.bot.outgoing import SendError, Transport
from ci.bot.patchwork import CONTEXT, Check, patch_check, write_check
from ci.bot.policy import Policy
from ci.bot.reply import (Outgoing, TestContext, compose, findings_body, incomplete_body, not_applied_body,
                      stable_message_id)
from ci.reports.model import SeriesReport, series_report
from db.botstore import FINAL_STATES, BotMail, BotMessage, BotSeries
from db.pg import StoreUnavailable
from db.store import Store
from toolchains.errors import BuildError, InfrastructureError
from toolchains.git import resolve
from toolchains.source import open_tree

AM_FROM = "sizewatch-bot Thu Jan  1 00:00:00 1970"    # the From_ line of each message given to git am
KILL_ENV = "SIZEWATCH_BOT_KILL_AT"          # test hook: "decided" or "sent" (see _crash_point)


def _crash_point(name: str) -> None:
    """SIZEWATCH_BOT_KILL_AT=decided|sent makes the process SIGKILL itself right there: how the
    tests put a real kill -9 between deciding and sending, and between sending and recording it."""
    if os.environ.get(KILL_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)



def am_series(s: PostedSeries, messages: list[tuple[BotMessage, bytes]]) -> MboxSeries:
    """The series as ``git am`` takes it, handed to the pipeline as data (no mbox written and read
    back): ``messages`` are :meth:`Bot.am_messages`' (the cover letter first), headers as the bot read
    them (``ci.bot.mailbox``), bytes as git am is given them (``toolchains.series.mbox_entry``); the
    cover letter's text (what the series row keeps), not the patches'."""
    msgs = [Message(m.message_id, " ".join(m.subject.split()), m.from_header, m.date, mbox_entry(raw, AM_FROM),
                    0 if m.kind == "cover" else m.position, m.total, m.version or 1,
                    body_text(raw) if m.kind == "cover" else "")
            for m, raw in messages]
    cover = msgs[0] if msgs and messages[0][0].kind == "cover" else None
    return MboxSeries(None, cover, msgs[1:] if cover else msgs, s.base_commit)


@dataclass(frozen=True)
class Source:
    kind: str                                  # maildir | mbox | inbox (public-inbox v2)
    path: Path
    immediate: bool = False                    # one series from the command line: no waiting

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.path.resolve()}"

    def check(self) -> None:
        """One-line error now when the maildir / mbox / inbox is not there."""
        {"maildir": check_maildir, "mbox": check_mbox, "inbox": check_inbox}[self.kind](self.path)
        if self.immediate and not mbox_has_messages(self.path):
            raise InputError(f"{self.path}: no mail in it (--series takes an mbox of the series, e.g. from b4 am)")

    def read(self, known: set[str]) -> Iterator[tuple[str, bytes | Unreadable | NoMessage]]:
        reader = {"maildir": read_maildir, "mbox": read_mbox, "inbox": read_inbox}[self.kind]
        return reader(self.path, known)


@dataclass
class PollResult:
    read: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    series: dict[str, str] = field(default_factory=dict)      # key -> what happened to it this poll
    decided: int = 0                           # mails newly decided
    sent: int = 0
    held: int = 0
    failed: int = 0
    dropped: int = 0
    dry_run: list[Outgoing] = field(default_factory=list)
    checks: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.kinds.items()) if n)
        states: dict[str, int] = {}
        for v in self.series.values():
            states[v] = states.get(v, 0) + 1
        st = ", ".join(f"{n} {k}" for k, n in sorted(states.items()))
        mails = (f"{len(self.dry_run)} mails composed (dry run)" if self.dry_run else
                 f"{self.decided} mails decided, {self.sent} sent, {self.held} held by the daily cap, "
                 f"{self.failed} failed, {self.dropped} dropped")
        return (f"bot: read {self.read} new messages ({kinds or 'none'}); series: {st or 'none'}; {mails}")


def _iso(d: datetime) -> str:
    return d.astimezone(timezone.utc).isoformat(timespec="seconds")


class Bot:
    """One bot over one store, policy and transport (None: dry run, or nothing configured)."""

    def __init__(self, store: Store, policy: Policy, transport: Transport | None,
                 log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
                 checks_dir: Path | None = None, builds: Callable[..., pipeline.RunStats] | None = None):
        self.store, self.policy, self.transport, self.log = store, policy, transport, log
        # stage 2: in this process, or through build workers (ci.queue.coordinator.QueuedBuilds)
        self.builds = builds or pipeline.build_all
        self.dry = policy.dry_run
        self.checks_dir = checks_dir or (Path(policy.checks_dir) if policy.checks_dir else None)
        # looked up once (unknown or missing toolchains fail up front), carried into every series' builds
        self.compilers = [toolchain_info(tc, policy.arch) for tc in policy.toolchains]
        check_cpu(policy.report.cost_mcpu)         # ... and a CPU llvm-mca does not know
        if policy.measure:
            check_available()                      # ... and a measurement this sizewatch cannot make
        self.tree = open_tree(policy.tree)
        self.base_sha = resolve(self.tree.path, policy.base)

    # --- 1 and 5: sending ------------------------------------------------------------------------
    def flush(self, res: PollResult) -> None:
        """Send every decided (or held) mail not yet sent, within the daily cap."""
        if self.dry:
            return
        pending = self.store.bot.unsent_mails()
        if not pending:
            return
        if self.transport is None:
            res.errors.append(f"{len(pending)} mail(s) waiting to be sent but no transport is configured "
                              "(--outbox FILE or --smtp HOST[:PORT])")
            return
        cap = self.policy.daily_cap
        day = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        sent_today = self.store.bot.sent_since(_iso(day)) if cap else 0
        held = sent = 0
        try:
            for mail in pending:
                if cap and sent_today >= cap:
                    if mail.state != "held":
                        self.store.bot.mark_unsent(mail.message_id, "held", f"daily cap of {cap} mails reached")
                    held += 1
                    continue
                try:
                    self.transport.send(mail, self.policy.address)
                except SendError as e:
                    self.store.bot.mark_unsent(mail.message_id, "decided", str(e))
                    res.failed += 1
                    res.errors.append(f"{e}; {len(pending) - sent} mail(s) kept for the next run")
                    break                                  # the relay is down or refusing: try again next poll
                _crash_point("sent")
                self._mark_sent(mail)
                res.sent += 1
                sent += 1
                sent_today += 1
                self.log(f"bot: sent {mail.message_id} ({mail.subject[:60]}) via {self.transport.label}")
        finally:
            res.held = held                                # what is held now (a poll flushes twice)
            self.transport.close()

    def _mark_sent(self, mail: BotMail) -> None:
        """Record a mail the relay accepted. A PostgreSQL session cut meanwhile (a restart, a proxy)
        would leave it ``decided`` and send it again next poll: the write is tried again on a new
        session for a few seconds first, narrowing SMTP's duplicate window back to a crash."""
        for attempt in range(6):
            try:
                self.store.bot.mark_sent(mail.message_id, self.transport.label)
                return
            except StoreUnavailable:
                if attempt == 5:
                    raise
                time.sleep(0.25 * (attempt + 1))

    # --- 2: reading -----------------------------------------------------------------------------
    def ingest(self, source: Source, now: datetime, res: PollResult) -> list[BotMessage]:
        label, stamp = source.label, _iso(now)
        known = self.store.bot.known_keys(label)
        parsed: dict[str, BotMessage] = {}
        copies: list[BotMessage] = []                  # the same message again: recorded, so never read again
        for key, raw in source.read(known):
            res.read += 1
            if isinstance(raw, NoMessage):
                m = _no_message(label, key, raw.reason, stamp)
            elif isinstance(raw, Unreadable):
                m = quarantine(BotMessage(malformed_id(f"{label}\0{key}".encode()), "other", source=label,
                                          source_key=key, received_at=stamp), raw.reason, raw.head)
            else:
                try:
                    m = parse_mail(raw, label, key, stamp, (self.policy.address,))
                except Exception as e:         # noqa: BLE001 - a parser bug must not stop the list
                    m = quarantine(BotMessage(malformed_id(raw), "other", source=label, source_key=key,
                                              received_at=stamp), f"cannot parse: {type(e).__name__}: {e}"[:300], raw)
            if m.message_id in parsed:
                m = self._duplicate(parsed[m.message_id], m)
                if m.message_id in parsed:
                    copies.append(_copy(m))
                    res.kinds["copy"] = res.kinds.get("copy", 0) + 1
                    continue
            if m.kind == "malformed":
                self.log(f"bot: skipping a malformed message ({m.note}) in {source.path}")
            elif m.kind == "quarantined":
                self.log(f"bot: quarantined {m.message_id} ({m.note}) from {source.path}")
            res.kinds[m.kind] = res.kinds.get(m.kind, 0) + 1
            parsed[m.message_id] = m
        seen = {mid: old for mid, old in
                ((o.message_id, o) for o in self.store.bot.messages(self.store.bot.known_ids(parsed)))}
        new = []
        moved: dict[str, str] = {}                     # inbox: known messages at new commits (a force-push)
        for mid, m in parsed.items():
            if mid in seen:
                dup = self._duplicate(seen[mid], m)
                if dup is m and source.kind == "inbox":
                    moved[mid] = m.source_key
                    res.kinds[m.kind] -= 1
                    continue
                if dup is m or self.store.bot.known_ids([dup.message_id]):   # a copy of one already read
                    copies.append(_copy(m))
                    res.kinds[m.kind] -= 1
                    res.kinds["copy"] = res.kinds.get("copy", 0) + 1
                    continue
                self.log(f"bot: quarantined {dup.message_id} ({dup.note}) from {source.path}")
                res.kinds[m.kind] -= 1
                res.kinds["quarantined"] = res.kinds.get("quarantined", 0) + 1
                m = dup
            new.append(m)
        if not self.dry and (new or copies):
            self.store.bot.record_messages(new + copies)
        if not self.dry and moved:
            # a rewritten (force-pushed) inbox holds known messages at new commits: remember where,
            # so the next poll does not walk back over them again
            self.store.bot.rekey(label, moved)
        return new

    @staticmethod
    def _duplicate(first: BotMessage, again: BotMessage) -> BotMessage:
        """A second message under a Message-ID already read. The same patch twice (two copies,
        a resend) is ``again`` itself and is dropped; different content is kept apart, quarantined
        under an id of its own, so a second patch is never silently lost."""
        if content_key(first) == content_key(again):
            return again
        raw = again.raw or b""
        dup = BotMessage(malformed_id(repr((again.message_id, content_key(again))).encode()), "other",
                         again.subject, again.from_name, again.from_addr, source=again.source,
                         source_key=again.source_key, received_at=again.received_at)
        return quarantine(dup, f"duplicate Message-ID {again.message_id[:200]} with different content "
                               f"(the first, {first.kind}, is kept)", raw)

    # --- 3 and 4 ----------------------------------------------------------------------------------
    def poll(self, source: Source, now: datetime | None = None) -> PollResult:
        now = now or datetime.now(timezone.utc)
        res = PollResult()
        self.flush(res)
        new = self.ingest(source, now, res)
        msgs = self.store.bot.open_messages()
        if self.dry:                                   # nothing was recorded: add what was just read
            have = {m.message_id for m in msgs}
            msgs += [m for m in new if m.kind in ("patch", "cover") and m.message_id not in have]
        # stored series matter only for supersede checks, which are per sender
        known = self.store.bot.series_list(senders={m.from_addr.lower() for m in msgs}) if msgs else []
        asm: Assembly = assemble(msgs, known, now, self.policy.incomplete_timeout)
        if source.immediate:                           # a series given on the command line does not wait
            label = source.label
            for s in asm.by_state("waiting"):
                if all(m.source == label for m in s.messages):
                    readiness(s, now, timedelta(0))
        for old, by in asm.superseded_known:
            if not self.dry:
                res.dropped += self.store.bot.supersede(old, by)
            res.series[old] = "superseded"
            self.log(f"bot: {old} superseded by {by}")
        for s in asm.series:
            done = self.store.bot.get_series(s.key)
            if done is not None and done.state in FINAL_STATES:
                # a late message of a finished series (its cover letter after the time-out, a resent
                # patch): tied to it, never a new series
                if not self.dry:
                    self.store.bot.save_series(done, s.message_ids)
                self.log(f"bot: {len(s.message_ids)} late message(s) for {s.key} ({done.state}), ignored")
                continue
            try:
                self.handle(s, now, res)
            except (BuildError, OSError) as e:     # the machine, not the patch: tried again next poll
                why = str(e) if isinstance(e, BuildError) else f"{e.strerror or e} ({getattr(e, 'filename', '')})"
                res.errors.append(f"{s.subject[:70]}: infrastructure failure, retried next poll: {why}")
                res.series[s.key] = "infra_failure"
                self.log(f"bot: {s.key}: infrastructure failure (nothing mailed, retried next poll): {why}")
                if not self.dry:
                    self.store.bot.save_series(s.to_bot_series("infra_failure", why), s.message_ids)
            except InputError as e:                # the series itself cannot be used: set aside once
                self._quarantine_series(s, str(e), res)
            except StoreUnavailable:               # the store, not the series: nothing decided, tested next poll
                raise
            except Exception as e:                 # noqa: BLE001 - a bug on one series must not stop the list
                self.log("".join(traceback.format_exception(e)).rstrip())
                self._quarantine_series(s, f"internal error: {type(e).__name__}: {e}", res)
        self.flush(res)
        return res

    def _quarantine_series(self, s: PostedSeries, why: str, res: PollResult) -> None:
        why = " ".join(why.split())[:500]
        res.errors.append(f"{s.subject[:70]}: quarantined: {why}")
        res.series[s.key] = "quarantined"
        self.log(f"bot: {s.key}: quarantined (nothing mailed): {why}")
        self._save(s, "quarantined", why)

    def _save(self, s: PostedSeries, state: str, note: str = "") -> None:
        if not self.dry:
            self.store.bot.save_series(s.to_bot_series(state, note), s.message_ids)

    def watched(self, s: PostedSeries) -> str:
        """'' when the policy watches this series, else why not."""
        w = self.policy.watch
        addrs = [a for m in s.messages for a in m.to + m.cc]
        if not w.watches_list(addrs, [m.list_id for m in s.messages if m.list_id]):
            return "not sent to a watched list"
        if not w.watches_sender(s.sender):
            return f"sender {s.sender} not watched"
        return ""

    def handle(self, s: PostedSeries, now: datetime, res: PollResult) -> None:
        label = f"{s.subject[:70]} (v{s.version}, {len(s.patches)}/{s.total} patches, {s.sender})"
        if s.state == "superseded":
            self._save(s, "superseded", f"superseded by {s.superseded_by}")
            res.series[s.key] = "superseded"
            self.log(f"bot: {label}: superseded by a newer version, not tested")
            return
        if s.state == "waiting":
            self._save(s, "waiting", "missing " + ", ".join(map(str, s.missing)) if s.missing else "no cover letter yet")
            res.series[s.key] = "waiting"
            return
        why = self.watched(s)
        if why:
            self._save(s, "skipped", why)
            res.series[s.key] = "skipped"
            self.log(f"bot: {label}: skipped ({why})")
            return
        if s.state == "incomplete":
            self.incomplete(s, now, res)
        else:
            self.test(s, now, res)

    # --- decisions --------------------------------------------------------------------------------
    def decide(self, s: PostedSeries, state: str, items: list[verdict.Reportable], outcome: str,
               mails: list[Outgoing], res: PollResult, series_id: int | None = None, note: str = "") -> None:
        if self.dry:
            res.dry_run += mails if outcome == "mail" else []
            res.series[s.key] = state
            return
        rec: BotSeries = s.to_bot_series(state, note)
        rec.series_id = series_id
        # the series' final state, its messages, the decision and its mails: one transaction
        d = self.store.bot.decide(rec, verdict.finding_set(items), [r.to_dict() for r in items], outcome,
                                  [BotMail(m.message_id, m.in_reply_to, m.subject, m.recipients, m.raw)
                                   for m in mails] if outcome == "mail" else [], s.message_ids)
        res.series[s.key] = state
        if d.created:
            n = len(mails) if outcome == "mail" else 0
            res.decided += n
            self.log(f"bot: {s.subject[:70]} (v{s.version}): {state}, {len(items)} reportable finding(s), "
                     f"{outcome}" + (f" ({n} mail{'s' if n != 1 else ''})" if n else ""))
            if n:
                _crash_point("decided")

    def _outcome(self, s: PostedSeries, items: list, wanted: bool = True) -> str:
        if not items or not wanted:
            return "quiet"
        return "opted_out" if self.policy.watch.opted_out(s.sender) else "mail"

    def _mail(self, s: PostedSeries, items: list, original: BotMessage, body: str, now: datetime,
              position: int | None) -> Outgoing:
        mid = stable_message_id(s.key, verdict.finding_set(items), original.message_id, self.policy.address)
        return compose(original, body, self.policy, mid, now, s.key, position)

    def incomplete(self, s: PostedSeries, now: datetime, res: PollResult) -> None:
        head = s.head
        items = [verdict.Reportable("incomplete", f"patches {', '.join(map(str, s.missing))} of {s.total} "
                                                  f"missing", function=",".join(map(str, s.missing)))]
        outcome = self._outcome(s, items, self.policy.report.incomplete)
        mails = []
        if outcome == "mail":
            body = incomplete_body(head, s.version, s.total, [p.position or 0 for p in s.patches], s.missing,
                                   _human(self.policy.incomplete_timeout), self.policy)
            mails.append(self._mail(s, items, head, body, now, None))
        self.decide(s, "incomplete", items, outcome, mails, res, note=items[0].message)
        if self.checks_dir is not None and not self.dry:
            why = f"not tested: {', '.join(f'{m}/{s.total}' for m in s.missing)} never arrived"
            for p in s.patches:
                write_check(self.checks_dir, Check(p.message_id, "warning", CONTEXT, why, self.policy.dashboard_url))

    def am_messages(self, s: PostedSeries) -> list[tuple[BotMessage, bytes]]:
        """The cover letter, then the patches as ``b4 am`` gives them: reviewers' trailers from the
        stored replies folded in (ci.bot.trailers); as posted when b4 cannot assemble them."""
        covers = [m for m in s.messages if m.kind == "cover"]
        patches = [m for m in s.messages if m.kind != "cover"]
        replies = self.store.bot.replies_to(m.message_id for m in s.messages)
        folded, why = am_patches([m.raw for m in s.messages] + [r.raw for r in replies], s.version)
        if folded is not None and len(folded) != len(patches):
            folded, why = None, f"b4 gave {len(folded)} patches for {len(patches)}"
        if folded is None:
            self.log(f"bot: {s.subject[:60]}: applying the patches as posted ({why})")
            folded = [am_ready(m.raw) for m in patches]
        return [(m, am_ready(m.raw)) for m in covers] + list(zip(patches, folded))

    def context(self, ser, s: PostedSeries) -> TestContext:
        if s.base_commit and ser.base_sha.startswith(s.base_commit):
            note = "the series' base-commit:"
        elif s.base_commit:
            note = f"base-commit: {s.base_commit[:12]} is not in the tree; the bot's base {self.policy.base}"
        else:
            note = f"no base-commit: in the series; the bot's base {self.policy.base}"
        return TestContext(self.tree.name, self.policy.tree, ser.base_sha, note, ser.id,
                           [(c.name, c.version) for c in self.compilers], list(self.policy.targets),
                           self.policy.kbuild_config)

    def test(self, s: PostedSeries, now: datetime, res: PollResult) -> None:
        pol = self.policy
        plan = pipeline.plan_messages(self.store, self.tree, am_series(s, self.am_messages(s)), base=pol.base)
        ser = plan.series
        ctx = self.context(ser, s)
        toolchains, targets = list(pol.toolchains), list(pol.targets)
        by_pos = {m.position: m for m in s.patches}
        if ser.status != "applied":
            failed = next(p for p in ser.patches if p.status == "failed")
            items = [verdict.Reportable("not_applied", f"patch {failed.position}/{s.total} does not apply: "
                                                       f"{failed.error}", function=str(failed.position))]
            outcome = self._outcome(s, items, pol.report.not_applied)
            mails = []
            if outcome == "mail":
                body = not_applied_body(s.head, failed.position, s.total, failed.error, ctx, pol, failed.subject)
                mails.append(self._mail(s, items, s.head, body, now, None))
            self.decide(s, "not_applied", items, outcome, mails, res, ser.id, items[0].message)
            report = series_report(self.store, ser.id, toolchains, targets)
            self.checks(report, by_pos, items, f"patch {failed.position} does not apply")
            return
        self.log(f"bot: testing {s.subject[:70]} (v{s.version}, {len(s.patches)} patches) on "
                 f"{self.tree.name} {ser.base_sha[:12]} with {', '.join(toolchains)}")
        extra = {"measure": Measure()} if pol.measure else {}
        stats = self.builds(self.store, plan, self.compilers, targets, pol.kbuild_config, progress=self.log,
                            mcpu=pol.report.cost_mcpu, keep_vmlinux=pol.keep_vmlinux, **extra)
        if stats.parked:                           # the machines, not the patch: nothing mailed, tried later
            raise InfrastructureError(f"{len(stats.parked)} build job(s) parked in the queue: {stats.parked[0]}")
        pipeline.compare_all(self.store, plan, self.compilers, targets, pol.kbuild_config,
                             pol.report.cost_thresholds, progress=self.log)
        report = pipeline.report(self.store, plan, toolchains, targets, pol.report.runtime_thresholds)
        assert isinstance(report, SeriesReport)
        items = verdict.series_findings(report, pol.report)
        trailer = pol.list_rules(s.head.to + s.head.cc, [s.head.list_id]).justification_trailer
        given = {pos: v for pos, m in by_pos.items() if m.raw
                 and (v := verdict.trailer_value(body_text(m.raw), trailer)) is not None}
        items, silenced = verdict.justified(items, given)
        outcome = self._outcome(s, items)
        mails = []
        if outcome == "mail":
            for p in report.patches:
                mine = [r for r in items if r.position == p.position]
                if not mine or p.position not in by_pos:
                    continue
                why = (trailer, given[p.position], len(silenced[p.position])) if p.position in silenced else None
                body = findings_body(by_pos[p.position], p, mine, ctx, pol, why)
                mails.append(self._mail(s, items, by_pos[p.position], body, now, p.position))
        self.decide(s, "tested", items, outcome, mails, res, ser.id,
                    f"{len(items)} reportable finding(s)")
        self.checks(report, by_pos, items)

    def checks(self, report: SeriesReport, by_pos: dict, items: list, blocked: str = "") -> None:
        if self.checks_dir is None or self.dry:
            return
        series_url = f"{self.policy.dashboard_url}/series/{report.series.id}"
        for p in report.patches:
            m = by_pos.get(p.position)
            if m is None:
                continue
            write_check(self.checks_dir, patch_check(p, m.message_id, items, list(self.policy.toolchains),
                                                     self.policy.dashboard_url, series_url, blocked))


def _copy(m: BotMessage) -> BotMessage:
    """A second copy of a message already read (two deliveries, a resend): a row of its own, without
    the bytes, so its maildir key / mbox hash is known and it is not read on every poll."""
    h = hashlib.sha256(f"{m.source}\0{m.source_key}".encode()).hexdigest()[:24]
    return BotMessage(f"<copy-{h}@sizewatch.invalid>", "copy", m.subject, m.from_name, m.from_addr,
                      note=f"a copy of {m.message_id[:200]}", source=m.source, source_key=m.source_key,
                      received_at=m.received_at)


def _no_message(source: str, key: str, reason: str, stamp: str) -> BotMessage:
    """A source entry that holds no message (a public-inbox removal commit): a row of its own, so it is
    not read again, of a kind of its own, so that it is neither a message nor set aside."""
    h = hashlib.sha256(f"{source}\0{key}".encode()).hexdigest()[:24]
    return BotMessage(f"<none-{h}@sizewatch.invalid>", "no_message", note=reason, source=source, source_key=key,
                      received_at=stamp)


def _human(d: timedelta) -> str:
    s = int(d.total_seconds())
    for unit, n in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= n and s % n == 0:
            return f"{s // n} {unit}{'s' if s // n != 1 else ''}"
    return f"{s} second{'s' if s != 1 else ''}"


@contextmanager
def instance_lock(store: Store) -> Iterator[None]:
    """One bot per store: a second one would race the first for the same unsent mails."""
    where = getattr(store, "path", None)
    if where is None:
        yield
        return
    if hasattr(store, "exclusive"):             # PostgreSQL: bots on other machines too (db.store.PgStore)
        with store.exclusive("bot") as got:
            if not got:
                raise InputError(f"another sizewatch bot is running on {where}")
            yield
        return
    path = Path(f"{where}.bot.lock")
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"another sizewatch bot is running on {where}") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
