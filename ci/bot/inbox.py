"""Messages from a public-inbox v2 mirror: the git layout lore serves and ``grokmirror`` / ``git clone
--mirror`` fetch. An inbox is a list of epochs ``git/0.git``, ``git/1.git``... (bare repositories); each
commit of an epoch adds one message, the blob ``m`` in its tree (a commit without ``m`` removes one:
public-inbox-purge, -edit).

Reading is incremental by commit: a message's key is ``<epoch>:<commit>``, and an epoch is walked from
its head back only until the first commit already read, so a poll costs one ``rev-parse`` per old epoch
(no re-reading of frozen epochs) and the new commits of the current one. A new epoch (roll-over) is read
from its first commit. A force-pushed mirror (history rewritten, e.g. after a purge) is walked back to
the last commit both histories share; messages it replays are the same Message-IDs, which the bot
already has (``BotStore.known_ids``), so nothing is handled twice.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Iterator

from analyzer.errors import InputError

_EPOCH = re.compile(r"(\d+)\.git")               # a whole directory name (fullmatch)


def epochs(path: Path) -> list[tuple[int, Path]]:
    """The inbox's epochs in order: (number, bare repository)."""
    git_dir = path / "git"
    if not git_dir.is_dir():
        return []
    out = []
    for p in git_dir.iterdir():
        m = _EPOCH.fullmatch(p.name)
        if m and p.is_dir():
            out.append((int(m.group(1)), p))
    return sorted(out)


def check_inbox(path: Path) -> None:
    """One-line error now when ``path`` is not a public-inbox v2 inbox or mirror."""
    if not path.is_dir():
        raise InputError(f"{path}: no such public-inbox directory")
    if not epochs(path):
        raise InputError(f"{path}: not a public-inbox v2 inbox (no git/N.git epochs)")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True)


def _head(repo: Path) -> str | None:
    """The epoch's newest commit (public-inbox writes refs/heads/master; a mirror keeps it); None if empty."""
    for ref in ("HEAD", "refs/heads/master", "refs/heads/main"):
        proc = _git(repo, "rev-parse", "--verify", "--quiet", ref + "^{commit}")
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.decode().strip()
    return None


def _new_commits(repo: Path, head: str, n: int, known: set[str]) -> list[str]:
    """Commits from ``head`` back to the first one already read, oldest first (first-parent order:
    public-inbox's history is linear)."""
    proc = subprocess.Popen(["git", "--git-dir", str(repo), "rev-list", "--first-parent", head],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    new: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            sha = line.strip()
            if f"{n}:{sha}" in known:
                break
            new.append(sha)
    finally:
        proc.kill()
        proc.wait()
    new.reverse()
    return new


def _blobs(repo: Path, shas: list[str]) -> Iterator[tuple[str, bytes | None]]:
    """Each commit's message blob ``m`` through one ``git cat-file --batch`` (None: the commit has no ``m``)."""
    if not shas:
        return
    proc = subprocess.Popen(["git", "--git-dir", str(repo), "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for sha in shas:
            proc.stdin.write(f"{sha}:m\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().decode().split()
            if len(header) != 3 or header[1] != "blob":
                yield sha, None                      # "<sha>:m missing": a removal commit
                continue
            size = int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)                      # the newline after the content
            yield sha, data
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()


def read_inbox(path: Path, known: set[str] = frozenset()) -> Iterator[tuple[str, bytes]]:
    """(``<epoch>:<commit>``, raw message) of every message added since the commits in ``known``."""
    check_inbox(path)
    for n, repo in epochs(path):
        head = _head(repo)
        if head is None or f"{n}:{head}" in known:
            continue                                 # empty, or nothing new: a frozen epoch costs this only
        for sha, raw in _blobs(repo, _new_commits(repo, head, n, known)):
            if raw:                                  # no m, or an empty one (a purged message's stub)
                yield f"{n}:{sha}", raw
