"""What the mailing-list bot keeps in the store (migration 0006): messages read, series
assembled, decisions taken and mails composed and sent.

``BotStore`` is the interface; a store hands out its implementation as ``store.bot``
(``SqliteBotStore`` for the sqlite store, sharing its connections and transactions), so the
pipeline's store and the bot's tables stay two concepts over one database.

Exactly-once replies rest on two writes: ``bot_decide`` records the decision, every mail
it produces (whole message, stable Message-ID) and the series' new state in one
transaction, keyed by (series version, finding set) so a second decision on the same
findings inserts nothing; ``bot_mark_sent`` flips one mail to ``sent`` after the transport
accepted it. Whatever is ``decided`` or ``held`` is sent on the next run.
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Iterable

from db.sqlite import Connections, compress, loads, retry_busy, unreadable

# bot_series states after which the series' messages are not assembled again
FINAL_STATES = ("tested", "not_applied", "incomplete", "superseded", "skipped", "quarantined")
# not final: "waiting" (more patches may come), "infra_failure" (the machine failed: tried again)
UNSENT = ("decided", "held")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class BotMessage:
    """One message read from the list: its headers as the bot uses them, and for patches and
    cover letters the raw bytes (to write the series out for ``git am``)."""
    message_id: str
    kind: str                                   # patch | cover | reply | other | own | malformed | quarantined | copy
    subject: str = ""
    from_name: str = ""
    from_addr: str = ""
    to: list[str] = field(default_factory=list)         # "Name <addr>" as decoded
    cc: list[str] = field(default_factory=list)
    list_id: str = ""
    date: str = ""
    in_reply_to: str | None = None
    references: list[str] = field(default_factory=list)
    version: int | None = None
    position: int | None = None
    total: int | None = None
    base_commit: str | None = None
    change_id: str | None = None
    note: str = ""
    source: str = ""
    source_key: str = ""
    received_at: str = ""
    raw: bytes = b""
    series_key: str | None = None

    @property
    def from_header(self) -> str:
        return f"{self.from_name} <{self.from_addr}>" if self.from_name else self.from_addr


@dataclass
class BotSeries:
    key: str
    version: int = 1
    subject: str = ""
    sender: str = ""
    total: int = 0
    state: str = "waiting"
    series_id: int | None = None
    superseded_by: str | None = None
    note: str = ""
    first_seen: str = ""
    updated_at: str = ""
    message_ids: list[str] = field(default_factory=list)   # filled by bot_series_list

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class BotMail:
    message_id: str
    in_reply_to: str
    subject: str
    recipients: list[str]
    raw: bytes
    state: str = "decided"
    transport: str = ""
    attempts: int = 0
    last_error: str = ""
    decided_at: str = ""
    sent_at: str | None = None
    decision_id: int | None = None
    series_key: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("raw")
        return d


@dataclass
class BotDecision:
    id: int
    series_key: str
    finding_set: str
    findings: list[dict]
    outcome: str
    decided_at: str
    created: bool = False               # True when this call recorded it (False: it was already there)


class BotStore(ABC):
    """The bot's part of the store interface."""

    @abstractmethod
    def known_keys(self, source: str) -> set[str]:
        """Source keys (maildir keys, mbox message hashes) already read from ``source``."""

    @abstractmethod
    def known_ids(self, message_ids: Iterable[str]) -> set[str]:
        """Which of these Message-IDs the bot has already recorded (from any source)."""

    @abstractmethod
    def record_messages(self, messages: list[BotMessage]) -> int:
        """Record newly read messages (a Message-ID already recorded is left alone); returns how many were new."""

    @abstractmethod
    def open_messages(self) -> list[BotMessage]:
        """Patches and cover letters not yet part of a finished series (with their raw bytes)."""

    @abstractmethod
    def messages(self, message_ids: Iterable[str]) -> list[BotMessage]: ...

    @abstractmethod
    def set_aside(self, limit: int = 100) -> tuple[int, list[BotMessage]]:
        """Messages quarantined or malformed (how many, and the newest ``limit`` without raw bytes):
        what the operator should look at."""

    @abstractmethod
    def series_list(self, states: Iterable[str] | None = None,
                    senders: Iterable[str] | None = None) -> list[BotSeries]:
        """Series (with their message ids), optionally only in these states / from these senders."""

    @abstractmethod
    def get_series(self, key: str) -> BotSeries | None: ...

    @abstractmethod
    def save_series(self, series: BotSeries, message_ids: Iterable[str] = ()) -> None:
        """Insert or update a series and tie its messages to it."""

    @abstractmethod
    def supersede(self, key: str, by: str) -> int:
        """Mark a series superseded by a newer version; its unsent mails are dropped (returns how many)."""

    @abstractmethod
    def decide(self, series: BotSeries, finding_set: str, findings: list[dict], outcome: str,
               mails: list[BotMail], message_ids: Iterable[str] = ()) -> BotDecision:
        """Record the decision, its mails and the series' state (its messages tied to it) in one
        transaction, once per (series, finding set): when that decision exists already no decision or
        mail is written. A final state is never stored apart from its decision (a crash between the
        two left a series settled without a mail: never tested again, never mailed)."""

    @abstractmethod
    def unsent_mails(self) -> list[BotMail]:
        """Mails decided (or held by the daily cap) and not yet sent, oldest first."""

    @abstractmethod
    def mark_sent(self, message_id: str, transport: str) -> None: ...

    @abstractmethod
    def mark_unsent(self, message_id: str, state: str, error: str = "") -> None:
        """A failed or held attempt: state ``decided`` (retry) or ``held`` (daily cap), with the error."""

    @abstractmethod
    def sent_since(self, since: str) -> int:
        """How many mails were sent at or after ``since`` (ISO 8601 UTC): the daily cap counts these."""

    @abstractmethod
    def mails(self, series_key: str | None = None) -> list[BotMail]: ...

    @abstractmethod
    def decisions(self, series_key: str) -> list[BotDecision]: ...

    @abstractmethod
    def replies_to(self, message_ids: Iterable[str]) -> list[BotMessage]:
        """Stored replies (with their text) to any of these messages: where review trailers come from."""

    @abstractmethod
    def rekey(self, source: str, keys: dict[str, str]) -> None:
        """Messages already stored, found again in ``source`` under a new key (message id -> key): a
        public-inbox mirror whose history was rewritten holds them at new commits."""

    @abstractmethod
    def message_counts(self) -> list[tuple[str, str, int, str]]:
        """(source, kind, messages, last received_at) for everything read: what ``bot --status`` shows."""


_MSG_COLS = ("message_id, source, source_key, kind, subject, from_name, from_addr, recipients, date, in_reply_to, "
             "refs, version, position, total, tags, note, received_at, raw_z, series_key")
_MAIL_COLS = ("m.message_id, m.in_reply_to, m.subject, m.recipients, m.raw_z, m.state, m.transport, m.attempts, "
              "m.last_error, m.decided_at, m.sent_at, m.decision_id, d.series_key")
_SERIES_COLS = ("key, version, subject, sender, total, state, series_id, superseded_by, note, first_seen, "
                "updated_at")


def _msg_row(m: BotMessage) -> tuple:
    return (m.message_id, m.source, m.source_key, m.kind, m.subject, m.from_name, m.from_addr,
            json.dumps({"to": m.to, "cc": m.cc, "list_id": m.list_id}), m.date, m.in_reply_to,
            json.dumps(m.references), m.version, m.position, m.total,
            json.dumps({k: v for k, v in (("base_commit", m.base_commit), ("change_id", m.change_id)) if v}),
            m.note, m.received_at or _now(), compress(m.raw) if m.raw else None, m.series_key)


def _msg(row: tuple) -> BotMessage:
    import zlib
    (mid, source, skey, kind, subject, fname, faddr, rcpt, date, irt, refs, ver, pos, total, tags, note,
     received, raw_z, series_key) = row
    r, t = loads(rcpt, f"recipients of message {mid}"), loads(tags, f"tags of message {mid}")
    try:
        raw = zlib.decompress(raw_z) if raw_z else b""
    except zlib.error:
        raw = b""
        note = f"{note} {unreadable(f'raw bytes of message {mid}')}".strip()
    refs_list = loads(refs, f"references of message {mid}", list)
    return BotMessage(mid, kind, subject, fname, faddr, r.get("to", []), r.get("cc", []), r.get("list_id", ""),
                      date, irt, [x for x in refs_list if not x.startswith("[unreadable")], ver, pos, total,
                      t.get("base_commit"), t.get("change_id"), note, source, skey, received, raw, series_key)


def _mail(row: tuple) -> BotMail:
    import zlib
    mid, irt, subject, rcpt, raw_z, state, transport, attempts, err, decided, sent, did, skey = row
    return BotMail(mid, irt, subject, json.loads(rcpt), zlib.decompress(raw_z), state, transport, attempts, err,
                   decided, sent, did, skey)


class SqliteBotStore(BotStore):
    """The sqlite implementation over the store's connections (one transaction per call)."""

    def __init__(self, db: Connections):
        self._db = db

    def _conn(self):
        return self._db.connection()

    def _tx(self):
        return self._db.transaction()

    @retry_busy
    def known_keys(self, source: str) -> set[str]:
        return {k for (k,) in self._conn().execute("SELECT source_key FROM bot_messages WHERE source = ?", (source,))}

    @retry_busy
    def known_ids(self, message_ids: Iterable[str]) -> set[str]:
        ids = list(dict.fromkeys(message_ids))
        out: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            q = f"SELECT message_id FROM bot_messages WHERE message_id IN ({','.join('?' * len(chunk))})"
            out.update(m for (m,) in self._conn().execute(q, chunk))
        return out

    def record_messages(self, messages: list[BotMessage]) -> int:
        with self._tx() as conn:
            # rows inserted (a message already stored is ignored): the rowcount of every statement, summed
            cur = conn.executemany(f"INSERT OR IGNORE INTO bot_messages({_MSG_COLS}) VALUES "
                                   f"({','.join('?' * 19)})", [_msg_row(m) for m in messages])
            return max(cur.rowcount, 0) if cur is not None else 0

    @retry_busy
    def open_messages(self) -> list[BotMessage]:
        rows = self._conn().execute(
            f"SELECT {_MSG_COLS} FROM bot_messages WHERE kind IN ('patch', 'cover') AND (series_key IS NULL OR "
            f"series_key IN (SELECT key FROM bot_series WHERE state NOT IN "
            f"({','.join('?' * len(FINAL_STATES))}))) ORDER BY received_at, rowid", FINAL_STATES)
        return [_msg(r) for r in rows]

    @retry_busy
    def messages(self, message_ids: Iterable[str]) -> list[BotMessage]:
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return []
        rows = self._conn().execute(f"SELECT {_MSG_COLS} FROM bot_messages WHERE message_id IN "
                                    f"(SELECT value FROM json_each(?)) ORDER BY rowid", (json.dumps(ids),))
        return [_msg(r) for r in rows]

    @retry_busy
    def set_aside(self, limit: int = 100) -> tuple[int, list[BotMessage]]:
        cols = _MSG_COLS.replace("raw_z", "NULL")
        n = self._conn().execute("SELECT count(*) FROM bot_messages WHERE kind IN ('quarantined', 'malformed')"
                                 ).fetchone()[0]
        rows = self._conn().execute(f"SELECT {cols} FROM bot_messages WHERE kind IN ('quarantined', 'malformed') "
                                    "ORDER BY received_at DESC, rowid DESC LIMIT ?", (limit,))
        return n, [_msg(r) for r in rows]

    @retry_busy
    def series_list(self, states: Iterable[str] | None = None,
                    senders: Iterable[str] | None = None) -> list[BotSeries]:
        q, where, args = f"SELECT {_SERIES_COLS} FROM bot_series", [], []
        if states is not None:
            where.append("state IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(list(states)))
        if senders is not None:
            where.append("sender IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(sorted({s.lower() for s in senders})))
        if where:
            q += " WHERE " + " AND ".join(where)
        out = [BotSeries(*r) for r in self._conn().execute(q + " ORDER BY first_seen, key", args)]
        members: dict[str, list[str]] = {}
        for mid, key in self._conn().execute(
                "SELECT message_id, series_key FROM bot_messages WHERE series_key IN (SELECT value FROM json_each(?)) "
                "ORDER BY position, rowid", (json.dumps([s.key for s in out]),)):
            members.setdefault(key, []).append(mid)
        for s in out:
            s.message_ids = members.get(s.key, [])
        return out

    @retry_busy
    def get_series(self, key: str) -> BotSeries | None:
        row = self._conn().execute(f"SELECT {_SERIES_COLS} FROM bot_series WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        s = BotSeries(*row)
        s.message_ids = [m for (m,) in self._conn().execute(
            "SELECT message_id FROM bot_messages WHERE series_key = ? ORDER BY position, rowid", (key,))]
        return s

    @staticmethod
    def _upsert_series(conn, s: BotSeries) -> None:
        now = _now()
        conn.execute(
            f"INSERT INTO bot_series({_SERIES_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET version = excluded.version, subject = excluded.subject, "
            "sender = excluded.sender, total = excluded.total, state = excluded.state, "
            "series_id = coalesce(excluded.series_id, bot_series.series_id), "
            "superseded_by = coalesce(excluded.superseded_by, bot_series.superseded_by), note = excluded.note, "
            "updated_at = excluded.updated_at",
            (s.key, s.version, s.subject, s.sender, s.total, s.state, s.series_id, s.superseded_by, s.note,
             s.first_seen or now, now))

    def save_series(self, series: BotSeries, message_ids: Iterable[str] = ()) -> None:
        with self._tx() as conn:
            self._upsert_series(conn, series)
            conn.executemany("UPDATE bot_messages SET series_key = ? WHERE message_id = ?",
                             [(series.key, m) for m in message_ids])

    def supersede(self, key: str, by: str) -> int:
        with self._tx() as conn:
            conn.execute("UPDATE bot_series SET state = 'superseded', superseded_by = ?, updated_at = ? "
                         "WHERE key = ?", (by, _now(), key))
            cur = conn.execute("UPDATE bot_mails SET state = 'dropped', last_error = ? WHERE state IN ('decided', "
                               "'held') AND decision_id IN (SELECT id FROM bot_decisions WHERE series_key = ?)",
                               (f"superseded by {by}", key))
            return cur.rowcount

    def decide(self, series: BotSeries, finding_set: str, findings: list[dict], outcome: str,
               mails: list[BotMail], message_ids: Iterable[str] = ()) -> BotDecision:
        now = _now()
        with self._tx() as conn:
            self._upsert_series(conn, series)
            conn.executemany("UPDATE bot_messages SET series_key = ? WHERE message_id = ?",
                             [(series.key, m) for m in message_ids])
            cur = conn.execute("INSERT INTO bot_decisions(series_key, finding_set, findings, outcome, decided_at) "
                               "VALUES (?, ?, ?, ?, ?) ON CONFLICT(series_key, finding_set) DO NOTHING",
                               (series.key, finding_set, json.dumps(findings), outcome, now))
            created = cur.rowcount == 1
            did, found, out, when = conn.execute(
                "SELECT id, findings, outcome, decided_at FROM bot_decisions WHERE series_key = ? AND finding_set = ?",
                (series.key, finding_set)).fetchone()
            if created:
                conn.executemany(
                    "INSERT OR IGNORE INTO bot_mails(message_id, decision_id, in_reply_to, subject, recipients, raw_z, "
                    "state, decided_at) VALUES (?, ?, ?, ?, ?, ?, 'decided', ?)",
                    [(m.message_id, did, m.in_reply_to, m.subject, json.dumps(m.recipients), compress(m.raw), now)
                     for m in mails])
            return BotDecision(did, series.key, finding_set, json.loads(found), out, when, created)

    @retry_busy
    def unsent_mails(self) -> list[BotMail]:
        rows = self._conn().execute(
            f"SELECT {_MAIL_COLS} FROM bot_mails m JOIN bot_decisions d ON d.id = m.decision_id "
            "WHERE m.state IN ('decided', 'held') ORDER BY m.decided_at, m.rowid")
        return [_mail(r) for r in rows]

    def mark_sent(self, message_id: str, transport: str) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE bot_mails SET state = 'sent', transport = ?, sent_at = ?, attempts = attempts + 1, "
                         "last_error = '' WHERE message_id = ?", (transport, _now(), message_id))

    def mark_unsent(self, message_id: str, state: str, error: str = "") -> None:
        if state not in UNSENT:
            raise ValueError(state)
        with self._tx() as conn:
            conn.execute("UPDATE bot_mails SET state = ?, last_error = ?, attempts = attempts + ? "
                         "WHERE message_id = ? AND state IN ('decided', 'held')",
                         (state, error, 0 if state == "held" else 1, message_id))

    @retry_busy
    def sent_since(self, since: str) -> int:
        return self._conn().execute("SELECT count(*) FROM bot_mails WHERE state = 'sent' AND sent_at >= ?",
                                    (since,)).fetchone()[0]

    @retry_busy
    def mails(self, series_key: str | None = None) -> list[BotMail]:
        q = f"SELECT {_MAIL_COLS} FROM bot_mails m JOIN bot_decisions d ON d.id = m.decision_id"
        args: list = []
        if series_key is not None:
            q += " WHERE d.series_key = ?"
            args.append(series_key)
        return [_mail(r) for r in self._conn().execute(q + " ORDER BY m.decided_at, m.rowid", args)]

    @retry_busy
    def decisions(self, series_key: str) -> list[BotDecision]:
        rows = self._conn().execute("SELECT id, series_key, finding_set, findings, outcome, decided_at FROM "
                                    "bot_decisions WHERE series_key = ? ORDER BY id", (series_key,))
        return [BotDecision(i, k, fs, json.loads(f), o, d) for i, k, fs, f, o, d in rows]

    @retry_busy
    def message_counts(self) -> list[tuple[str, str, int, str]]:
        return [tuple(r) for r in self._conn().execute(
            "SELECT source, kind, count(*), max(received_at) FROM bot_messages GROUP BY source, kind "
            "ORDER BY source, kind")]

    def rekey(self, source: str, keys: dict[str, str]) -> None:
        if keys:
            with self._tx() as conn:
                conn.executemany("UPDATE bot_messages SET source_key = ? WHERE message_id = ? AND source = ?",
                                 [(k, mid, source) for mid, k in keys.items()])

    @retry_busy
    def replies_to(self, message_ids: Iterable[str]) -> list[BotMessage]:
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return []
        rows = self._conn().execute(f"SELECT {_MSG_COLS} FROM bot_messages WHERE kind = 'reply' AND raw_z IS NOT NULL "
                                    f"AND in_reply_to IN (SELECT value FROM json_each(?)) ORDER BY rowid",
                                    (json.dumps(ids),))
        return [_msg(r) for r in rows]
