"""What the bot's operator needs to see, from the store alone: series by state, the ones the
machine failed (``infra_failure``: retried each poll) or set aside (``quarantined``), the
messages quarantined or malformed with their reasons, and the mails by state. Shown by
``sizewatch bot --status`` and the dashboard's ``/bot`` page; every text is cleaned of control
characters (a hostile subject must not drive the operator's terminal)."""
from __future__ import annotations

from ci.bot.mailbox import clean_text
from db.store import Store


def bot_status(store: Store, limit: int = 100) -> dict:
    series = store.bot.series_list()
    states: dict[str, int] = {}
    for s in series:
        states[s.state] = states.get(s.state, 0) + 1

    def rows(state: str) -> list[dict]:
        return [{"key": clean_text(s.key)[:200], "subject": clean_text(s.subject)[:200], "sender": s.sender,
                 "version": s.version, "updated_at": s.updated_at, "note": clean_text(s.note)[:500]}
                for s in series if s.state == state]
    n, msgs = store.bot.set_aside(limit)
    mails: dict[str, int] = {}
    for m in store.bot.mails():
        mails[m.state] = mails.get(m.state, 0) + 1
    return {"series": dict(sorted(states.items())), "infra_failures": rows("infra_failure"),
            "quarantined_series": rows("quarantined"),
            "set_aside": {"count": n, "shown": len(msgs),
                          "messages": [{"kind": m.kind, "message_id": clean_text(m.message_id)[:200],
                                        "received_at": m.received_at, "subject": clean_text(m.subject)[:200],
                                        "from": clean_text(m.from_addr)[:200], "reason": clean_text(m.note)[:500],
                                        "source": m.source} for m in msgs]},
            "mails": dict(sorted(mails.items()))}
