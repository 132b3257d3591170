"""Patch series from an mbox: the messages in order, and ``git am`` one patch at a time so a
patch that does not apply is known by position (the ones before it still get built).

Committer identity and dates are pinned (``--committer-date-is-author-date`` and
toolchains.source.GIT_ENV), so the same series on the same base always yields the
same commit shas and a second run finds its results in the store.
"""
from __future__ import annotations

import email
import email.policy
import mailbox
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.errors import InputError
from toolchains.errors import BuildError
from toolchains.source import git
from toolchains.worktree import ensure_worktree, resolve

_PATCH_TAG = re.compile(r"\[([^\]]*\bPATCH\b[^\]]*)\]", re.I)
_VERSION = re.compile(r"(?:^|\s)v(\d+)(?:\s|$)", re.I)
_NUMBER = re.compile(r"(?:^|\s)(\d+)/(\d+)(?:\s|$)")
_UNIFIED = re.compile(rb"\n--- \S[^\n]*\n\+\+\+ \S[^\n]*\n@@ ")      # a plain unified diff (no "diff --git")


@dataclass
class Message:
    message_id: str
    subject: str
    author: str
    date: str
    raw: bytes                       # the message as an mbox entry (From_ line included)
    position: int | None = None      # n of [PATCH n/m]; 0 for a cover letter
    total: int | None = None
    version: int = 1
    body: str = ""

    @property
    def is_patch(self) -> bool:
        return self.position != 0 and (b"\ndiff --git " in self.raw or _UNIFIED.search(self.raw) is not None)


@dataclass
class MboxSeries:
    path: Path
    cover: Message | None
    patches: list[Message] = field(default_factory=list)
    base_commit: str | None = None   # the base-commit: trailer

    @property
    def message_id(self) -> str:
        return (self.cover or self.patches[0]).message_id

    @property
    def subject(self) -> str:
        return (self.cover or self.patches[0]).subject

    @property
    def version(self) -> int:
        return (self.cover or self.patches[0]).version


def _tag(subject: str) -> tuple[int | None, int | None, int]:
    """(n, m, version) of a ``[PATCH vN n/m]`` subject tag."""
    m = _PATCH_TAG.search(subject)
    if not m:
        return None, None, 1
    v = _VERSION.search(m.group(1))
    n = _NUMBER.search(m.group(1))
    return (int(n.group(1)) if n else None, int(n.group(2)) if n else None, int(v.group(1)) if v else 1)


def _message(raw: bytes, from_line: str) -> Message:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    subject = " ".join(str(msg.get("Subject", "")).split())
    pos, total, ver = _tag(subject)
    try:
        body = msg.get_body(("plain",))
        text = body.get_content() if body is not None else ""
    except (KeyError, LookupError, ValueError):
        text = raw.decode("utf-8", "replace")
    return Message(str(msg.get("Message-Id", "")).strip(), subject, str(msg.get("From", "")),
                   str(msg.get("Date", "")), b"From " + from_line.encode() + b"\n" + raw, pos, total, ver, text)


def read_mbox(path: Path, cover: Path | None = None) -> MboxSeries:
    """The patches of an mbox in [PATCH n/m] order (file order when unnumbered), and its cover letter."""
    if not path.is_file():
        raise InputError(f"{path}: no such mbox file")
    box = mailbox.mbox(str(path), create=False)
    msgs = []
    for key in box.keys():
        raw = box.get_bytes(key)
        from_line = box.get_message(key).get_from() or "sizewatch Mon Jan  1 00:00:00 2000"
        msgs.append(_message(raw, from_line))
    if cover is not None:
        if not cover.is_file():
            raise InputError(f"{cover}: no such file")
        data = cover.read_bytes()
        if data.startswith(b"From "):          # an mbox entry (git format-patch --cover-letter output)
            cbox = mailbox.mbox(str(cover), create=False)
            msgs[:0] = [_message(cbox.get_bytes(k), cbox.get_message(k).get_from() or "") for k in cbox.keys()]
        else:
            msgs.insert(0, _message(data, "sizewatch Mon Jan  1 00:00:00 2000"))
    covers = [m for m in msgs if m.position == 0 and not m.is_patch]
    patches = [m for m in msgs if m.is_patch]
    if not patches:
        raise InputError(f"{path}: no patches found (not a git format-patch mbox?)")
    if all(p.position for p in patches):
        patches.sort(key=lambda p: p.position)
    else:
        for i, p in enumerate(patches, 1):
            p.position = p.position or i
    base = None
    for m in [*covers, *patches]:
        found = re.search(rb"^base-commit: ([0-9a-f]{7,40})\s*$", m.raw, re.M)
        if found:
            base = found.group(1).decode()
            break
    return MboxSeries(path, covers[0] if covers else None, patches, base)


@dataclass
class Applied:
    position: int
    subject: str
    message_id: str
    author: str
    commit: str | None               # None when it did not apply (or an earlier one did not)
    status: str                      # applied | failed | skipped
    error: str = ""


def pick_base(tree: Path, series: MboxSeries, base: str | None) -> str:
    """The series' base-commit when the tree has it, else the user's --base."""
    if series.base_commit:
        got = git(tree, "rev-parse", "--verify", "--quiet", series.base_commit + "^{commit}", check=False).strip()
        if got:
            return got
    if base:
        return resolve(tree, base)
    if series.base_commit:
        raise BuildError(f"{series.path.name}: base-commit {series.base_commit[:12]} is not in {tree}; give --base")
    raise BuildError(f"{series.path.name}: no base-commit: trailer; give --base")


def apply(tree: Path, series: MboxSeries, base_sha: str, scratch: Path) -> list[Applied]:
    """``git am`` each patch in a scratch worktree at ``base_sha``; stop at the first that fails."""
    wt = ensure_worktree(tree, scratch, base_sha)
    git(wt, "am", "--abort", check=False)
    git(wt, "checkout", "-q", "--detach", "--force", base_sha)
    out: list[Applied] = []
    failed = False
    for p in series.patches:
        if failed:
            out.append(Applied(p.position, p.subject, p.message_id, p.author, None, "skipped",
                               "an earlier patch did not apply"))
            continue
        with tempfile.NamedTemporaryFile(suffix=".mbox") as f:
            f.write(p.raw)
            f.flush()
            res = git(wt, "am", "-q", "--committer-date-is-author-date", f.name, check=False,
                      env={"GIT_COMMITTER_NAME": "sizewatch", "GIT_COMMITTER_EMAIL": "sizewatch@localhost"})
        del res
        rebase_apply = Path(wt, git(wt, "rev-parse", "--git-path", "rebase-apply").strip())
        if rebase_apply.exists():
            err = _am_error(wt)
            git(wt, "am", "--abort", check=False)
            out.append(Applied(p.position, p.subject, p.message_id, p.author, None, "failed", err))
            failed = True
            continue
        out.append(Applied(p.position, p.subject, p.message_id, p.author,
                           git(wt, "rev-parse", "HEAD").strip(), "applied"))
    return out


def _am_error(wt: Path) -> str:
    """Why git am stopped: re-run its apply step with --check for the first failing hunk."""
    patch = Path(wt, git(wt, "rev-parse", "--git-path", "rebase-apply/patch").strip())
    if patch.exists():
        from subprocess import run
        proc = run(["git", "-C", str(wt), "apply", "--check", str(patch)], capture_output=True, text=True)
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        if lines:
            return "; ".join(ln[len("error: "):] for ln in lines[:2])
    return "git am failed"
