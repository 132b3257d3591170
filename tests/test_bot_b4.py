"""The bot tests what ``b4 am`` gives: the example series and a review reply (``Reviewed-by:`` for patch
2/2) on the list; the bot folds the trailer in with b4's own series logic, and the commits it builds are
the ones the real ``b4 am`` command makes of the same thread. The mail's "To reproduce" block is then
run as printed (bash, line continuations and all), with one substitution: ``b4 am`` reads the thread
from the local list (``-m``) instead of lore, which tests cannot reach.
"""
from __future__ import annotations

import mailbox
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

import botlist
from botlist import bot_config, deliver
from conftest import sizewatch_cmd
from test_bot import ok, run_bot

pytestmark = pytest.mark.kernel
REVIEW = "Reviewed-by: Vlastimil Babka <vbabka@suse.cz>"


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True).stdout


def test_trailers_folded_as_b4_am_does_and_the_reproduce_block_runs(example_store, example_series, tmp_path):
    from toolchains.source import ensure_source
    tree = ensure_source("6.1").path
    db = tmp_path / "store.db"
    src, dst = sqlite3.connect(example_store[0]), sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    md, out = tmp_path / "list", tmp_path / "outbox.mbox"
    thread = [*botlist.series_v1(), botlist.review_reply()]
    deliver(md, *thread)
    ok(run_bot("--maildir", md, "--once", "--policy", bot_config(tmp_path / "bot.toml"), "--outbox", out, db=db))

    from db.store import open_store
    with open_store(db) as store:
        ser = store.get_series(botlist.COVER_ID)
    p1, p2 = (p.commit_sha for p in ser.patches)
    ex = example_series("gcc-12")
    assert p1 == ex[1].commit                                   # nobody reviewed patch 1: the same commit
    assert p2 != ex[2].commit and _git(tree, "diff", ex[2].commit, p2) == ""    # same tree, new message
    msg2 = _git(tree, "log", "-1", "--format=%B", p2)
    assert REVIEW in msg2 and REVIEW not in _git(tree, "log", "-1", "--format=%B", p1)

    # the oracle: the real b4 am on the same thread; git am would make the same commits of its output
    if shutil.which("b4", path=os.path.dirname(sizewatch_cmd()[0])) is None and shutil.which("b4") is None:
        pytest.fail("b4 missing: setup.cfg installs it")
    b4 = shutil.which("b4", path=os.path.dirname(sizewatch_cmd()[0])) or shutil.which("b4")
    local = tmp_path / "thread.mbox"
    botlist.append_mbox(local, *thread)
    am = subprocess.run([b4, "am", "-m", str(local), "-o", "-", botlist.COVER_ID.strip("<>")], capture_output=True,
                        cwd=tmp_path, timeout=120)
    assert am.returncode == 0, am.stderr.decode()
    (tmp_path / "b4.mbox").write_bytes(am.stdout)
    patches = [m for m in mailbox.mbox(str(tmp_path / "b4.mbox")) if "diff --git" in m.as_string()]
    assert len(patches) == 2
    for m, sha in zip(patches, (p1, p2)):
        info = subprocess.run(["git", "mailinfo", str(tmp_path / "msg"), str(tmp_path / "patch")],
                              input=m.as_bytes(), capture_output=True, check=True).stdout.decode()
        fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
        body = (tmp_path / "msg").read_text()
        want = fields["Subject"] + "\n\n" + body
        assert _git(tree, "log", "-1", "--format=%B", sha).strip() == want.strip()
        assert _git(tree, "log", "-1", "--format=%an <%ae>|%aD", sha).strip() == \
            f"{fields['Author']} <{fields['Email']}>|{fields['Date']}"

    # the reproduce block of patch 2's mail, run as printed
    mail = next(m for m in mailbox.mbox(str(out)) if "2/2" in str(m["Subject"]))
    text = mail.get_payload(decode=True).decode()
    block = text.split("To reproduce:\n\n", 1)[1].split("\n\n", 1)[0]
    assert f"sizewatch report {p2[:12]} --toolchains gcc-12,clang-19" in block
    script = block.replace("b4 am -o -", f"b4 am -m {local} -o -", 1)
    env = {**os.environ, "SIZEWATCH_DB": str(db),
           "PATH": f"{os.path.dirname(sizewatch_cmd()[0])}:{os.environ.get('PATH', '')}"}
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=1800)
    assert run.returncode == 0, run.stderr
    assert re.search(r"--- gcc-12 .*\n", run.stdout) and "get_page_from_freelist" in run.stdout
    assert "0 built" in run.stderr                              # the same commits: all found in the store
