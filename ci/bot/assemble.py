"""Series from loose list messages, the way b4 assembles them.

Patches and cover letters are grouped by thread within one ``vN``: a message joins the
group of the patch or cover letter it replies to (git send-email threads patches under
the cover letter, or under patch 1 without one; the author of a patch may differ from
the sender). Patches whose parent has not arrived share its Message-ID (per sender) as
their root, so the group and its key stay the same when it does. Fully unthreaded series
(``--no-thread``, or a cover letter sent apart) are joined by sender and patch count.
Replies are not patches (ci.bot.mailbox classifies them) and never join.

A group is ``ready`` with every patch 1..n present (and its cover letter, when the
patches point at one, or once the time-out has passed without it); otherwise it
``waiting``s until the time-out and is then ``incomplete``. A newer version by the same
sender of the same topic (same change-id, same subject without its tags, or posted in
reply to the older one's thread) supersedes an older one, stored or not.

``assemble`` is pure: messages, the stored series and the time in; groups out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from db.botstore import BotMessage, BotSeries

_TAGS = re.compile(r"^\s*(\[[^\]]*\]\s*)+")


def topic(subject: str) -> str:
    """A subject without its leading [PATCH ...] tags, lower-cased: what stays the same across versions."""
    return " ".join(_TAGS.sub("", subject).lower().split())


def _when(iso: str) -> datetime:
    try:
        d = datetime.fromisoformat(iso)
    except ValueError:
        return datetime.now(timezone.utc)
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


@dataclass
class PostedSeries:
    key: str                          # "<root message-id>|vN"
    root: str
    version: int
    sender: str                       # address, lower case
    total: int
    cover: BotMessage | None = None
    patches: list[BotMessage] = field(default_factory=list)      # by position
    duplicates: list[BotMessage] = field(default_factory=list)   # a second message for a position already held
    state: str = "waiting"            # ready | waiting | incomplete | superseded
    missing: list[int] = field(default_factory=list)
    cover_missing: bool = False       # the patches reply to a cover letter that has not arrived
    superseded_by: str | None = None
    first_seen: str = ""

    @property
    def messages(self) -> list[BotMessage]:
        return ([self.cover] if self.cover else []) + self.patches

    @property
    def message_ids(self) -> list[str]:
        return [m.message_id for m in self.messages + self.duplicates]

    @property
    def head(self) -> BotMessage:
        """The cover letter, else the first patch: where series-wide replies go."""
        return self.cover or self.patches[0]

    @property
    def subject(self) -> str:
        return self.head.subject

    @property
    def topic(self) -> str:
        return topic(self.subject)

    @property
    def change_id(self) -> str | None:
        return next((m.change_id for m in self.messages if m.change_id), None)

    @property
    def base_commit(self) -> str | None:
        return next((m.base_commit for m in self.messages if m.base_commit), None)

    @property
    def thread_ids(self) -> set[str]:
        """Every Message-ID this series' messages reply to or reference."""
        out: set[str] = set()
        for m in self.messages:
            out.update(m.references)
            if m.in_reply_to:
                out.add(m.in_reply_to)
        return out

    def to_bot_series(self, state: str | None = None, note: str = "") -> BotSeries:
        return BotSeries(self.key, self.version, self.subject, self.sender, self.total, state or self.state,
                         superseded_by=self.superseded_by, note=note, first_seen=self.first_seen)


@dataclass
class Assembly:
    series: list[PostedSeries]
    superseded_known: list[tuple[str, str]] = field(default_factory=list)   # (stored key, newer key)

    def by_state(self, state: str) -> list[PostedSeries]:
        return [s for s in self.series if s.state == state]


class _Groups:
    """Union-find over message ids (and the ids of parents that have not arrived)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def assemble(messages: list[BotMessage], known: list[BotSeries], now: datetime,
             timeout: timedelta) -> Assembly:
    """Group patches and cover letters into series and say which are ready to test."""
    usable = [m for m in messages if m.kind in ("patch", "cover")]
    by_id = {m.message_id: m for m in usable}
    parts: dict[int, list[BotMessage]] = {}
    for m in usable:
        parts.setdefault(m.version or 1, []).append(m)
    out: list[PostedSeries] = []
    for version, msgs in parts.items():
        uf = _Groups()
        for m in msgs:
            uf.find(m.message_id)
            parent = m.in_reply_to
            if not parent:
                continue
            p = by_id.get(parent)
            if p is not None and (p.version or 1) == version:
                uf.union(parent, m.message_id)
            elif p is None and m.kind == "patch" and (m.total or 1) > 1:
                # the cover letter (or patch 1) has not arrived: its id joins the patches, per sender
                uf.union(f"{parent}|{m.from_addr.lower()}", m.message_id)
        groups: dict[str, list[BotMessage]] = {}
        for m in msgs:
            groups.setdefault(uf.find(m.message_id), []).append(m)
        _join_unthreaded(groups)
        for members in groups.values():
            out.append(_series(members, version, by_id))
    for s in out:
        readiness(s, now, timeout)
    superseded_known = _supersede(out, known)
    return Assembly(sorted(out, key=lambda s: (s.first_seen, s.key)), superseded_known)


def _top(ms: list[BotMessage]) -> BotMessage:
    return min(ms, key=lambda m: (m.position if m.position is not None else 1, m.received_at))


def _join_unthreaded(groups: dict[str, list[BotMessage]]) -> None:
    """Messages without any thread header (``--no-thread``, or a cover letter sent apart) join the
    group of the same sender and patch count whose first message has no parent either, when they
    hold different positions."""
    def loose(ms: list[BotMessage]) -> bool:
        return all(not m.in_reply_to and not m.references for m in ms)

    for k in sorted([k for k, ms in groups.items() if loose(ms)], key=lambda k: (_top(groups[k]).position or 0)):
        if k not in groups:
            continue
        me = groups[k]
        top = _top(me)
        if (top.total or 1) < 2:
            continue
        held = {m.position for m in me}
        fits = [j for j, ms in groups.items() if j != k and _top(ms).from_addr.lower() == top.from_addr.lower()
                and _top(ms).total == top.total and not _top(ms).in_reply_to
                and held.isdisjoint({m.position for m in ms})]
        if fits:
            best = min(fits, key=lambda j: abs(_when(_top(groups[j]).received_at) - _when(top.received_at)))
            groups[best].extend(groups.pop(k))


def _series(members: list[BotMessage], version: int, by_id: dict[str, BotMessage]) -> PostedSeries:
    members = sorted(members, key=lambda m: (m.received_at, m.position or 0))
    covers = [m for m in members if m.kind == "cover"]
    patches: dict[int, BotMessage] = {}
    dups: list[BotMessage] = []
    for m in members:
        if m.kind != "patch":
            continue
        if m.position in patches:
            dups.append(m)
        else:
            patches[m.position or 1] = m
    cover = covers[0] if covers else None
    dups += covers[1:]
    totals = [m.total for m in ([cover] if cover else []) + list(patches.values()) if m.total]
    total = cover.total if cover and cover.total else max(set(totals), key=totals.count) if totals else 1
    ordered = [patches[p] for p in sorted(patches)]
    parents = {m.in_reply_to for m in ordered if m.in_reply_to}
    missing_parent = sorted(p for p in parents if p not in by_id)
    if cover is not None:
        root = cover.message_id
    elif missing_parent and total > 1:
        root = missing_parent[0]                         # the cover letter's id, before it arrives
    else:
        root = min(ordered, key=lambda m: m.position or 0).message_id if ordered else members[0].message_id
    sender = (cover or _top(members)).from_addr.lower()
    s = PostedSeries(f"{root}|v{version}", root, version, sender, total, cover, ordered, dups,
                     first_seen=min(m.received_at for m in members))
    s.cover_missing = cover is None and total > 1 and root in missing_parent
    return s


def readiness(s: PostedSeries, now: datetime, timeout: timedelta) -> None:
    """Set ``state`` and ``missing`` from the patches present and the time since the first arrived."""
    present = {m.position for m in s.patches}
    s.missing = [p for p in range(1, s.total + 1) if p not in present]
    timed_out = now - _when(s.first_seen) >= timeout
    if not s.patches:
        s.state = "incomplete" if timed_out else "waiting"
    elif s.missing:
        s.state = "incomplete" if timed_out else "waiting"
    elif s.cover_missing and not timed_out:
        s.state = "waiting"
    else:
        s.state = "ready"


def _related(new: PostedSeries, old_sender: str, old_topic: str, old_change: str | None,
             old_ids: set[str]) -> bool:
    if new.sender != old_sender:
        return False
    if new.change_id and old_change and new.change_id == old_change:
        return True
    return new.topic == old_topic or bool(new.thread_ids & old_ids)


def _supersede(out: list[PostedSeries], known: list[BotSeries]) -> list[tuple[str, str]]:
    """Mark older versions superseded by the newest related one; return stored series made obsolete."""
    def newest(sender: str, top: str, change: str | None, ids: set[str], version: int, key: str) -> str | None:
        found = [(o.version, o.key) for o in out
                 if o.key != key and o.version > version and _related(o, sender, top, change, ids)]
        found += [(k.version, k.key) for k in known
                  if k.key != key and k.version > version and k.state != "skipped" and k.sender == sender
                  and topic(k.subject) == top]
        return max(found)[1] if found else None

    for s in out:
        by = newest(s.sender, s.topic, s.change_id, set(s.message_ids) | {s.root}, s.version, s.key)
        if by:
            s.state, s.superseded_by = "superseded", by
    done: list[tuple[str, str]] = []
    for k in known:
        if k.state in ("superseded", "skipped", "waiting"):      # waiting ones are re-assembled in ``out``
            continue
        ids = set(k.message_ids) | {k.key.split("|", 1)[0]}
        found = [(o.version, o.key) for o in out if o.state != "superseded" and o.version > k.version
                 and _related(o, k.sender, topic(k.subject), None, ids)]
        if found:
            done.append((k.key, max(found)[1]))
    return done
