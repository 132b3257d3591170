"""Golden outputs of the example series: what ``sizewatch report``, the bot's mail and ``sizewatch
inspect`` print, byte for byte, kept in tests/golden/*.golden (``pytest --update-golden`` rewrites
them; review the diff). A change in any renderer, in the report model or in the analysis shows
up here as a readable diff of real output.

Only what is not the product's own doing is masked: the cache directory (it differs per machine)
and the exact compiler version lines (Debian may ship a point release; the version is asserted
against the installed compiler instead).
"""
from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

import botlist
from conftest import EXAMPLE_TOOLCHAINS, sizewatch_cmd

pytestmark = pytest.mark.kernel

TOOLCHAINS = EXAMPLE_TOOLCHAINS.split(",")


def _versions() -> dict[str, str]:
    from toolchains.registry import load
    return {tc: load(tc).version() for tc in TOOLCHAINS}


def _masked(text: str) -> str:
    """The machine's cache path and the compilers' exact version lines as placeholders."""
    from toolchains.source import cache_dir
    text = text.replace(str(cache_dir()), "<cache>")
    for tc, version in _versions().items():
        text = text.replace(version, f"<{tc} version>")
    return text


def _sizewatch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([*sizewatch_cmd(), *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def _series_id(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        (sid,) = conn.execute("SELECT id FROM series ORDER BY id LIMIT 1").fetchone()
    finally:
        conn.close()
    return str(sid)


def test_report_text(example_store, golden):
    db, _ = example_store
    got = _sizewatch("report", _series_id(db), "--db", str(db)).stdout
    for tc, version in _versions().items():
        assert f"--- {tc} ({version})" in got          # the real compiler, before it is masked
    golden("report-example-series.txt", _masked(got))


def test_report_markdown(example_store, golden):
    db, _ = example_store
    golden("report-example-series.md", _masked(_sizewatch("report", _series_id(db), "--markdown", "--db",
                                                          str(db)).stdout))


def test_bot_mail(example_store, tmp_path, golden):
    """The example series posted to the list, tested by the bot (builds from the store), in a dry run:
    the mails it would send, headers that do not depend on the day included."""
    db = tmp_path / "store.db"
    shutil.copy(example_store[0], db)
    md = tmp_path / "list"
    botlist.deliver(md, *botlist.series_v1())
    cfg = botlist.bot_config(tmp_path / "bot.toml")
    out = _sizewatch("bot", "--maildir", str(md), "--once", "--dry-run", "--policy", str(cfg), "--db", str(db)).stdout
    assert out.startswith("From "), out[:200]
    out = re.sub(r"(?m)^Date: .*$", "Date: <date>", out)
    golden("bot-mail-example-series.mbox", _masked(out))


@pytest.fixture(scope="module")
def patch2_source(example_series):
    """A checkout of patch 2 for the declarations. Without ``--source``, inspect reads the files DWARF
    names: the build's worktree, which holds whatever commit was built there last."""
    from toolchains.git import ensure_worktree
    from toolchains.source import cache_dir, ensure_source
    commit = example_series(TOOLCHAINS[0])[2].commit
    return ensure_worktree(ensure_source("6.1").path, cache_dir() / "worktrees" / "golden", commit)


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_inspect(example_series, patch2_source, toolchain, golden):
    """Patch 2 (the __always_inline change) as ``sizewatch inspect`` shows it."""
    obj = example_series(toolchain)[2].object_path
    got = _sizewatch("inspect", str(obj), "--source", str(patch2_source)).stdout
    golden(f"inspect-{toolchain}-patch2.txt", _masked(got))
