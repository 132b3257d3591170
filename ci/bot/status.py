"""What the bot is doing, read from the store: ``sizewatch bot status`` and the dashboard's ``/bot``.

Everything comes from the bot's tables (messages read, series and their states, mails decided,
held or sent with their text) plus the policy the caller runs with, and first what needs the
operator: series the machine failed (``infra_failure``: retried each poll) or set aside
(``quarantined``), and the messages quarantined or malformed with their reasons. Every text from
a stranger is cleaned of control characters (a hostile subject must not drive the operator's
terminal). States are read as the store
has them, not from a fixed list: a state this sizewatch does not name (one a newer bot writes)
is still counted and shown, under its own name.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import timedelta
from email import message_from_bytes, policy as email_policy

import re

from ci.bot.mailbox import MAX_MESSAGE, clean_text
from ci.bot.policy import Policy
from db.store import Store

# the order the states are listed in; any other state the store holds follows, by name
SERIES_STATES = ("waiting", "incomplete", "superseded", "tested", "not_applied", "quarantined", "infra_failure",
                 "skipped", "error")
MAIL_STATES = ("decided", "held", "sent", "dropped")
# not a policy setting: what every reader does before it reads a message (ci.bot.mailbox, ci.bot.inbox)
SIZE_RULE = f"messages over {MAX_MESSAGE >> 20} MiB are set aside unread (quarantined, with their size)"


def label(state: str) -> str:
    """A state as people say it: ``not_applied`` -> ``not applied``."""
    return state.replace("_", " ")


@dataclass
class MessageSource:
    source: str
    kinds: dict[str, int]
    total: int
    last_read: str


@dataclass
class SeriesState:
    key: str
    version: int
    subject: str
    sender: str
    state: str
    label: str
    patches_expected: int
    messages: int
    note: str
    superseded_by: str | None
    series_id: int | None           # the pipeline's series (dashboard /series/<id>) once applied
    first_seen: str
    updated_at: str


@dataclass
class MailState:
    message_id: str
    in_reply_to: str
    subject: str
    recipients: list[str]
    state: str
    label: str
    transport: str
    attempts: int
    last_error: str
    decided_at: str
    sent_at: str | None
    series_key: str
    text: str                       # the whole mail as it is (re)sent: headers and body


@dataclass
class BotStatus:
    messages: int
    messages_by_kind: dict[str, int]
    sources: list[MessageSource]
    series_counts: dict[str, int]   # every state in SERIES_STATES, then any other the store has
    series: list[SeriesState]
    mail_counts: dict[str, int]
    mails: list[MailState]
    policy: dict
    policy_source: str              # the config file, or '' for the defaults
    infra_failures: list[dict] = field(default_factory=list)       # series the machine failed: retried
    quarantined_series: list[dict] = field(default_factory=list)   # series set aside: not tried again
    set_aside: dict = field(default_factory=dict)                  # quarantined or malformed messages
    max_message_bytes: int = MAX_MESSAGE                           # the readers' cap, and the rule as said
    size_rule: str = SIZE_RULE

    def to_dict(self) -> dict:
        return asdict(self)


def policy_dict(policy: Policy) -> dict:
    """The policy as plain data: durations in seconds, never the SMTP password."""
    def conv(v):
        if is_dataclass(v):
            return {f.name: conv(getattr(v, f.name)) for f in fields(v) if f.name != "password"}
        if isinstance(v, timedelta):
            return int(v.total_seconds())
        if isinstance(v, tuple):
            return list(v)
        return v
    return conv(policy)


def _ordered(counts: dict[str, int], known: tuple[str, ...]) -> dict[str, int]:
    return {**{s: counts.get(s, 0) for s in known}, **{s: counts[s] for s in sorted(counts) if s not in known}}


_CONTROL_KEEP_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def mail_text(raw: bytes) -> str:
    """The mail as a reader sees it: its headers, then the decoded body."""
    msg = message_from_bytes(raw, policy=email_policy.default)
    head = "".join(f"{k}: {v}\n" for k, v in msg.items())
    body = msg.get_body(("plain",)) if msg.is_multipart() else msg
    try:
        text = body.get_content() if body is not None else ""
    except (LookupError, ValueError):
        text = raw.decode("utf-8", "replace")
    return _CONTROL_KEEP_LINES.sub("", head + "\n" + text)


def _operator(store: Store, series, limit: int) -> tuple[list[dict], list[dict], dict]:
    """What needs the operator: failed and quarantined series, set-aside messages with reasons."""
    def rows(state: str) -> list[dict]:
        return [{"key": clean_text(s.key)[:200], "subject": clean_text(s.subject)[:200], "sender": clean_text(s.sender),
                 "version": s.version, "updated_at": s.updated_at, "note": clean_text(s.note)[:500]}
                for s in series if s.state == state]
    n, msgs = store.bot.set_aside(limit)
    aside = {"count": n, "shown": len(msgs),
             "messages": [{"kind": m.kind, "message_id": clean_text(m.message_id)[:200],
                           "received_at": m.received_at, "subject": clean_text(m.subject)[:200],
                           "from": clean_text(m.from_addr)[:200], "reason": clean_text(m.note)[:500],
                           "source": m.source, "key": clean_text(m.source_key)[:100]} for m in msgs]}
    return rows("infra_failure"), rows("quarantined"), aside


def bot_status(store: Store, policy: Policy, limit: int = 100) -> BotStatus:
    bot = store.bot
    sources: dict[str, MessageSource] = {}
    by_kind: dict[str, int] = {}
    for source, kind, n, last in bot.message_counts():
        src = sources.setdefault(source, MessageSource(source, {}, 0, ""))
        src.kinds[kind] = n
        src.total += n
        src.last_read = max(src.last_read, last or "")
        by_kind[kind] = by_kind.get(kind, 0) + n
    stored = bot.series_list()
    series = [SeriesState(s.key, s.version, clean_text(s.subject), clean_text(s.sender), s.state, label(s.state),
                          s.total, len(s.message_ids), clean_text(s.note), s.superseded_by, s.series_id,
                          s.first_seen, s.updated_at)
              for s in stored]
    counts: dict[str, int] = {}
    for s in series:
        counts[s.state] = counts.get(s.state, 0) + 1
    mails = [MailState(m.message_id, m.in_reply_to, clean_text(m.subject), m.recipients, m.state, label(m.state), m.transport,
                       m.attempts, m.last_error, m.decided_at, m.sent_at, m.series_key, mail_text(m.raw))
             for m in bot.mails()]
    mcounts: dict[str, int] = {}
    for m in mails:
        mcounts[m.state] = mcounts.get(m.state, 0) + 1
    return BotStatus(sum(by_kind.values()), dict(sorted(by_kind.items())), list(sources.values()),
                     _ordered(counts, SERIES_STATES), series, _ordered(mcounts, MAIL_STATES), mails,
                     policy_dict(policy), policy.source, *_operator(store, stored, limit))


def text(st: BotStatus, with_mails: bool = True) -> str:
    """What ``sizewatch bot status`` prints."""
    out = [f"messages read: {st.messages}"
           + (f" ({', '.join(f'{n} {k}' for k, n in st.messages_by_kind.items())})" if st.messages else "")]
    for src in st.sources:
        out.append(f"  {src.source}: {src.total}, last read {src.last_read}")
    out.append("")
    out.append(f"series: {len(st.series)} (" + ", ".join(f"{n} {label(k)}" for k, n in st.series_counts.items()) + ")")
    for s in st.series:
        extra = f" -> {s.superseded_by}" if s.superseded_by else ""
        note = f": {s.note}" if s.note else ""
        out.append(f"  {s.label:12} v{s.version} {s.messages}/{s.patches_expected} {s.subject[:70]} "
                   f"({s.sender}){extra}{note}")
    for part, title in ((st.infra_failures, "infrastructure failures (nothing mailed; tried again each poll)"),
                        (st.quarantined_series, "quarantined series (nothing mailed; not tried again)")):
        if part:
            out.append(f"{title}: {len(part)}")
            out += [f"  {x['key'][:100]}  {x['updated_at']}  {x['subject'][:60]!r}: {x['note'][:200]}" for x in part]
    aside = st.set_aside
    out.append(f"quarantined or malformed messages: {aside['count']}"
               + (f" (the newest {aside['shown']})" if aside["count"] > aside["shown"] else ""))
    out += [f"  {m['kind']:11} {m['message_id'][:80]}  {m['received_at']}  {m['subject'][:60]!r}: {m['reason'][:200]}"
            + (f" (at {m['key']})" if m["key"] else "") for m in aside["messages"]]
    out.append("")
    out.append(f"mails: {len(st.mails)} (" + ", ".join(f"{n} {label(k)}" for k, n in st.mail_counts.items()) + ")")
    for m in st.mails:
        when = f"sent {m.sent_at} via {m.transport}" if m.sent_at else f"decided {m.decided_at}"
        err = f", last error: {m.last_error}" if m.last_error else ""
        out.append(f"  {m.label:8} {m.message_id} {m.subject[:70]} ({when}{err})")
    out.append("")
    out.append(f"policy in force ({st.policy_source or 'defaults: no --policy given'}):")
    p = st.policy
    out.append(f"  tree {p['tree']}, base {p['base']}, toolchains {', '.join(p['toolchains'])}, "
               f"targets {', '.join(p['targets'])}, config {p['config']}")
    out.append(f"  incomplete after {p['incomplete_timeout']} s, daily cap {p['daily_cap']}, "
               f"dry run {'on' if p['dry_run'] else 'off'}")
    w = p["watch"]
    out.append(f"  watch lists: {', '.join(w['lists']) or 'every list'}; senders: {', '.join(w['senders']) or 'everyone'}"
               f"; opted out: {', '.join(w['opt_out']) or 'nobody'}")
    out.append("  report: " + ", ".join(f"{k}={v}" for k, v in p["report"].items()))
    out.append(f"  {st.size_rule}")
    if with_mails and st.mails:
        for m in st.mails:
            out.append("")
            out.append(f"--- {m.label} mail {m.message_id} ---")
            out.append(m.text.rstrip("\n"))
    return "\n".join(out) + "\n"
