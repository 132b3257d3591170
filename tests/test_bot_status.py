"""``sizewatch bot status`` and the dashboard's ``/bot`` + ``/api/bot``: after real bot runs (series that
do not apply, a v1 superseded by its v2, an incomplete series, a daily cap that holds a mail) against a
real SMTP server, the status must say what the store holds and what the server received, mail by mail.
No builds: every series here fails ``git am`` or never completes.
"""
from __future__ import annotations

import json

import botlist
from botlist import SmtpServer, bot_config, deliver
from test_bot import ok, parse, run_bot, store_rows


def test_status_says_what_the_store_holds_and_what_was_sent(tmp_path):
    md, db = tmp_path / "list", tmp_path / "s.db"
    deliver(md, botlist.not_applying(), botlist.incomplete_first(),
            botlist.not_applying(msgid="<tidy-v1@example.org>", subject="[PATCH] mm: tidy a comment",
                                 name="Ann", addr="ann@example.org", charset="us-ascii"),
            botlist.not_applying(msgid="<tidy-v2@example.org>", subject="[PATCH v2] mm: tidy a comment",
                                 name="Ann", addr="ann@example.org", charset="us-ascii",
                                 in_reply_to="<tidy-v1@example.org>"),
            botlist.not_applying(msgid="<cap-1@example.org>", name="Dev", addr="dev@example.org", charset="us-ascii"))
    with SmtpServer() as server:
        cfg = bot_config(tmp_path / "bot.toml", server.port, daily_cap=2)
        ok(run_bot("--maildir", md, "--once", "--policy", cfg, db=db))
        received = server.wait(2)

    st = json.loads(ok(run_bot("status", "--json", "--policy", cfg, db=db)).stdout)
    # messages: the store's count by kind
    kinds = dict(store_rows(db, "SELECT kind, count(*) FROM bot_messages GROUP BY kind"))
    assert st["messages"] == sum(kinds.values()) == 5 and st["messages_by_kind"] == kinds
    assert len(st["sources"]) == 1 and st["sources"][0]["total"] == 5
    # series: each with the store's state; the counts list every state the issue names
    states = dict(store_rows(db, "SELECT key, state FROM bot_series"))
    assert {s["key"]: s["state"] for s in st["series"]} == states
    assert sorted(states.values()) == ["not_applied"] * 3 + ["superseded", "waiting"]
    for name in ("waiting", "incomplete", "superseded", "tested", "not_applied", "quarantined"):
        assert st["series_counts"][name] == list(states.values()).count(name)
    v1 = next(s for s in st["series"] if s["key"].startswith("<tidy-v1@"))
    assert v1["superseded_by"].startswith("<tidy-v2@") and v1["label"] == "superseded"
    # mails: decided/held/sent as stored; a sent mail's text is what the SMTP server received
    mstates = dict(store_rows(db, "SELECT message_id, state FROM bot_mails"))
    assert {m["message_id"]: m["state"] for m in st["mails"]} == mstates
    assert sorted(mstates.values()) == ["held", "sent", "sent"]
    assert st["mail_counts"]["sent"] == 2 and st["mail_counts"]["held"] == 1
    for r in received:
        m = next(x for x in st["mails"] if x["message_id"] == r.message["Message-ID"])
        assert m["state"] == "sent" and m["transport"].startswith("smtp 127.0.0.1:")
        assert parse(r.data.replace(b"\r\n", b"\n")).get_content().strip() in m["text"]
        assert f"In-Reply-To: {r.message['In-Reply-To']}" in m["text"]
    held = next(m for m in st["mails"] if m["state"] == "held")
    assert "does not apply" in held["text"]
    # the policy in force is the config's
    assert st["policy_source"] == str(cfg) and st["policy"]["daily_cap"] == 2
    assert st["policy"]["watch"]["lists"] == [botlist.LIST] and "password" not in st["policy"]["smtp"]

    # the text form says the same
    out = ok(run_bot("status", "--policy", cfg, db=db)).stdout
    assert "messages read: 5 (" in out
    assert "series: 5 (1 waiting, 0 incomplete, 1 superseded, 0 tested, 3 not applied, 0 quarantined" in out
    assert "mails: 3 (0 decided, 1 held, 2 sent" in out
    assert f"policy in force ({cfg}):" in out and "daily cap 2" in out
    assert parse(received[0].data).get_content().splitlines()[0] in out

    # the dashboard: the same data at /api/bot, the page shows states and the mails' text
    from web.app import create_app
    from web.settings import WebSettings
    client = create_app(WebSettings(db, bot_config=cfg, jobs_dir=tmp_path / "jobs")).test_client()
    api = client.get("/api/bot")
    assert api.status_code == 200
    ids = dict(store_rows(db, "SELECT key, series_id FROM bot_series WHERE series_id IS NOT NULL"))
    assert len(ids) == 3
    assert api.get_json() == {**st, "links": {"json": "/api/bot", "series": {k: f"/series/{i}" for k, i in ids.items()}}}
    page = client.get("/bot")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert html.count('class="bot-series"') == 5 and html.count('class="bot-mail"') == 3
    assert 'data-state="held"' in html and "not applied" in html and "daily_cap" not in html
    for m in st["mails"]:
        assert m["message_id"].replace("<", "&lt;").replace(">", "&gt;") in html
    # without a config the page says it shows the defaults
    plain = create_app(WebSettings(db, jobs_dir=tmp_path / "jobs2")).test_client().get("/api/bot").get_json()
    assert plain["policy_source"] == "" and plain["policy"]["daily_cap"] == 50


def test_status_bad_input(tmp_path):
    db = tmp_path / "s.db"
    for args, msg, code in [(["--maildir", tmp_path, "status"], "bot status reads the store only", 1),
                            (["status", "--maildir", tmp_path], "No such option '--maildir'", 2),
                            (["--json", "--maildir", tmp_path], "--json goes with sizewatch bot status", 1),
                            (["status", "--policy", tmp_path / "missing.toml"], "cannot read the bot config", 1),
                            (["--policy", tmp_path / "a.toml", "--config", tmp_path / "b.toml", "--once"],
                             "give --policy only (--config is its old name)", 1)]:
        proc = run_bot(*args, db=db)
        lines = proc.stderr.splitlines()
        assert proc.returncode == code and msg in lines[-1], (args, proc.stderr)
        assert len(lines) == 1 + ("--config" in map(str, args)), (args, proc.stderr)    # + the deprecation line
    missing = run_bot("status", db=tmp_path / "none.db")          # a reader never creates a store
    assert missing.returncode == 1 and "no store there yet" in missing.stderr and not (tmp_path / "none.db").exists()
    from db.store import open_store
    open_store(db).close()
    empty = ok(run_bot("status", db=db)).stdout
    assert empty.startswith("messages read: 0\n") and "policy in force (defaults: no --policy given)" in empty


def test_the_old_spellings_work_for_one_release_with_one_line_each(tmp_path):
    """``bot --status`` and ``bot --config`` (scripts may use them): the same output as ``bot status`` and
    ``--policy``, and one deprecation line on stderr per old spelling."""
    db, cfg = tmp_path / "s.db", bot_config(tmp_path / "bot.toml", daily_cap=3)
    from db.store import open_store
    open_store(db).close()
    new = ok(run_bot("status", "--json", "--policy", cfg, db=db))
    old = ok(run_bot("--status", "--json", "--config", cfg, db=db))
    assert old.stdout == new.stdout and json.loads(new.stdout)["policy"]["daily_cap"] == 3 and new.stderr == ""
    assert old.stderr.splitlines() == [
        "sizewatch: bot --config is deprecated and goes in the next release: use --policy",
        "sizewatch: bot --status is deprecated and goes in the next release: use sizewatch bot status"]
    # before the subcommand, --db and --policy are handed on to it
    assert ok(run_bot("--policy", cfg, "status", "--json", db=db)).stdout == new.stdout
    md = tmp_path / "list"
    deliver(md, botlist.not_applying(name="Ann", charset="us-ascii"))
    polled = ok(run_bot("--maildir", md, "--once", "--dry-run", "--config", cfg, db=db))
    assert polled.stderr.splitlines()[0] == "sizewatch: bot --config is deprecated and goes in the next release: use --policy"
