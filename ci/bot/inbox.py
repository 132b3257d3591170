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

Every commit walked is recorded, message or not, so that none is walked again (a commit that gave nothing
would otherwise stop every later walk at itself). An epoch is anyone's git: each object is asked for its
type and size first and only a blob ``m`` within ``mailbox.MAX_MESSAGE`` is read. A commit without ``m``
or with an empty one is a removal (``NoMessage``: recorded, nothing to set aside); an ``m`` that is a tree,
a gitlink, a symbolic link, missing or over the cap is set aside unread (``Unreadable``, with the reason).
An ``m`` the same as the commit before's (an empty commit, a merge adding nothing) is no new message. Only
first parents are walked (public-inbox's history is linear); a merge's own new ``m`` is read as any commit's.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Iterator

from analyzer.errors import InputError
from ci.bot.mailbox import MAX_MESSAGE, NoMessage, Unreadable

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


_TREE_CAP = 64 << 10            # bytes of a root tree read: public-inbox's holds one or two entries
_HEADER_CAP = 1024              # bytes of one cat-file answer line: "<oid> <type> <size>" or "<name> missing"
_TYPES = ("blob", "tree", "commit", "tag")
_MODES = {b"40000": "a directory (a tree)", b"160000": "a gitlink (a submodule's commit)",
          b"120000": "a symbolic link"}


class _Lost(Exception):
    """git cat-file died or answered out of frame (a damaged object): its answers can no longer be trusted."""


class _Objects:
    """One ``git cat-file --batch-command`` per epoch. Every answer is framed before it is read: ``info``
    first (type and size, or missing), ``contents`` only for what is wanted and within its cap, so an
    object the bot does not read never reaches the pipe."""

    def __init__(self, repo: Path):
        self.proc = subprocess.Popen(["git", "--git-dir", str(repo), "cat-file", "--batch-command"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def close(self) -> None:
        self.stdin.close()
        self.proc.kill()
        self.proc.wait()

    def _answer(self, command: str, name: str) -> tuple[str, str, int] | None:
        try:
            self.stdin.write(f"{command} {name}\n".encode())
            self.stdin.flush()
        except OSError as e:                     # git has exited (a broken pipe)
            raise _Lost(f"git cat-file exited ({e.strerror or e})") from None
        line = self.stdout.readline(_HEADER_CAP)
        text = line.decode("ascii", "replace").rstrip("\n")
        if line.endswith(b"\n") and text in (f"{name} missing", f"{name} ambiguous"):
            return None
        parts = text.split(" ")
        if not line.endswith(b"\n") or len(parts) != 3 or parts[1] not in _TYPES or not parts[2].isdigit():
            raise _Lost(f"git cat-file answered {text[:80]!r} to {command} {name[:12]}")
        return parts[0], parts[1], int(parts[2])

    def info(self, name: str) -> tuple[str, str, int] | None:
        """(oid, type, size) of ``name``; None when it is missing."""
        return self._answer("info", name)

    def contents(self, oid: str, size: int) -> bytes:
        """The object ``info`` said has ``size`` bytes, whole."""
        got = self._answer("contents", oid)
        if got is None or got[2] != size:
            raise _Lost(f"git cat-file: {oid} changed between info and contents")
        data = self.stdout.read(size)
        if len(data) != size or self.stdout.read(1) != b"\n":
            raise _Lost(f"git cat-file: {oid} cut short ({len(data)} of {size} bytes)")
        return data


def _entry(tree: bytes, name: bytes, hash_len: int) -> tuple[bytes, str] | None:
    """(mode, oid) of ``name`` in a tree object's bytes; None when absent. ValueError: a damaged tree."""
    i = 0
    while i < len(tree):
        sp = tree.index(b" ", i)
        nul = tree.index(b"\0", sp)
        end = nul + 1 + hash_len
        if end > len(tree):
            raise ValueError("entry cut short")
        if tree[sp + 1:nul] == name:
            return tree[i:sp], tree[nul + 1:end].hex()
        i = end
    return None


def _m_entry(objects: _Objects, sha: str) -> tuple[bytes, str] | Unreadable | None:
    """(mode, oid) of ``m`` in commit ``sha``'s root tree; None when it has none."""
    tree = objects.info(f"{sha}^{{tree}}")
    if tree is None:
        return Unreadable(f"commit {sha} or its tree is missing from the mirror")
    if tree[2] > _TREE_CAP:
        return Unreadable(f"a root tree of {tree[2]} bytes (public-inbox writes one entry): not read")
    try:
        return _entry(objects.contents(tree[0], tree[2]), b"m", len(sha) // 2)
    except ValueError:
        return Unreadable(f"a damaged root tree {tree[0]}")


def _message(objects: _Objects, sha: str, parent_m: str | None) -> tuple[bytes | Unreadable | NoMessage, str | None]:
    """Commit ``sha``'s message: the blob ``m`` of its tree, read only if it is one, within the cap and not
    its first parent's (``parent_m``: an empty commit, a merge adding nothing); and the oid of its ``m``."""
    entry = _m_entry(objects, sha)
    if entry is None:
        return NoMessage("a commit without m (a removal: public-inbox-learn rm, -edit)"), None
    if isinstance(entry, Unreadable):
        return entry, None
    mode, oid = entry
    if oid == parent_m:
        return NoMessage("m unchanged from the commit before (an empty commit, a merge): no new message"), oid
    if mode not in (b"100644", b"100755"):
        what = _MODES.get(mode, f"an entry of mode {mode.decode('ascii', 'replace')[:8]}")
        return Unreadable(f"m is {what}, not a message (object {oid})"), oid
    blob = objects.info(oid)
    if blob is None:
        return Unreadable(f"m's blob {oid} is missing from the mirror"), oid
    if blob[1] != "blob":
        return Unreadable(f"m is a {blob[1]} object, not a message (object {oid})"), oid
    if blob[2] == 0:
        return NoMessage("an empty m (a purged message's stub)"), oid
    if blob[2] > MAX_MESSAGE:
        return Unreadable(f"a message of {blob[2]} bytes, over the {MAX_MESSAGE >> 20} MiB cap (blob {oid}): "
                          "set aside unread"), oid
    return objects.contents(oid, blob[2]), oid


MAX_LOST = 3                    # commits in a row git cat-file fails on before the epoch, not a commit, is blamed


def _messages(repo: Path, shas: list[str]) -> Iterator[tuple[str, bytes | Unreadable | NoMessage]]:
    """Each commit's message, or why it gives none, through one ``git cat-file --batch-command``. A commit
    git fails on (a damaged object) is set aside and git started again for the next; failing on
    MAX_LOST in a row is a damaged mirror or a broken git, said in one line (nothing of the poll recorded)."""
    if not shas:
        return
    objects, lost = _Objects(repo), 0
    try:
        before = objects.info(f"{shas[0]}^:m")          # the first one's parent (shas are a first-parent chain)
        parent_m = before[0] if before else None
    except _Lost:                                     # (then the first commit tells)
        objects.close()
        objects, parent_m = _Objects(repo), None
    try:
        for sha in shas:
            try:
                got, parent_m = _message(objects, sha, parent_m)
            except _Lost as e:
                lost += 1
                if lost >= MAX_LOST:
                    raise InputError(f"{repo}: git cat-file failed on {lost} commits in a row, the last {sha}: "
                                     f"{e}; is the mirror damaged (git fsck)?") from None
                objects.close()
                objects, parent_m = _Objects(repo), None
                got = Unreadable(f"git could not read it (a damaged object?): {e}")
            else:
                lost = 0
            yield sha, got
    finally:
        objects.close()


def read_inbox(path: Path, known: set[str] = frozenset()) -> Iterator[tuple[str, bytes | Unreadable | NoMessage]]:
    """(``<epoch>:<commit>``, raw message) of every commit since the commits in ``known``; a commit that
    gives no message comes as ``NoMessage`` (a removal) or ``Unreadable`` (set aside), so that it too is
    recorded and never walked again."""
    check_inbox(path)
    for n, repo in epochs(path):
        head = _head(repo)
        if head is None or f"{n}:{head}" in known:
            continue                                 # empty, or nothing new: a frozen epoch costs this only
        for sha, raw in _messages(repo, _new_commits(repo, head, n, known)):
            yield f"{n}:{sha}", raw
