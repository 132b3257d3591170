"""One report model, rendered everywhere (issue 29): for every patch of the example series,
``sizewatch report --json``, the commit page's JSON and the bot's mail show the same tables,
likely-path measures and text totals, because all of them render ``ci.reports.model``."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import botlist
from conftest import sizewatch_cmd


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*sizewatch_cmd(), *args], capture_output=True, text=True, timeout=900)


def _rows(table: dict) -> list[tuple]:
    return [(r["name"], r["old"], r["new"], r["delta"]) for r in table["rows"]]


def test_report_page_and_mail_agree(example_store, tmp_path):
    from test_web import settings
    from web.app import create_app
    db = tmp_path / "store.db"
    shutil.copy(example_store[0], db)
    p = _run("report", "--db", str(db), "1", "--json")
    assert p.returncode == 0, p.stderr
    patches = json.loads(p.stdout)["patches"]
    client = create_app(settings(db, tmp_path)).test_client()
    md = tmp_path / "list"
    botlist.deliver(md, *botlist.series_v1())
    cfg = botlist.bot_config(tmp_path / "bot.toml")
    mail = _run("bot", "--maildir", str(md), "--once", "--dry-run", "--policy", str(cfg), "--db", str(db)).stdout
    assert mail.startswith("From "), mail[:300]
    compared = 0
    for patch in patches:
        page = client.get(f"/api/commit/{patch['commit']['sha']}").get_json()
        by_key = {(t["toolchain"], t["target"], t["config"]): t for t in page["toolchains"]}
        for t in patch["toolchains"]:
            if t["status"] != "ok" or not t["tables"]:
                continue
            shown = by_key[(t["toolchain"], t["target"], t["config"])]
            assert [_rows(x) for x in shown["tables"]] == [_rows(x) for x in t["tables"]]
            keys = ("title", "add", "remove", "grow", "shrink", "up", "down", "old_total", "new_total", "net")
            assert [[x[k] for k in keys] for x in shown["tables"]] == [[x[k] for k in keys] for x in t["tables"]]
            assert shown["likely_paths"] == t["likely_paths"] and shown["text"] == t["text"]
            # the mail quotes each table as bloat-o-meter prints it: every row of it, as in the report
            for line in t["bloat_text"].splitlines()[1:]:
                if re.match(r"^\S+\s+(-|\d+)\s+(-|\d+)\s+[+-]\d+$", line):
                    assert line in mail, (t["toolchain"], line)
            compared += 1
    assert compared == sum(1 for p in patches for t in p["toolchains"] if t["status"] == "ok" and t["tables"]) >= 4
