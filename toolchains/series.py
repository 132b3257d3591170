"""Patch series from an mbox (``git format-patch`` output): the patches in ``[PATCH n/m]`` order,
the cover letter, and the ``base-commit:`` trailer. ``toolchains.git.am`` applies them; the
bot's list reader (``ci.bot.mailbox``) reads the same subject tags and trailers from here.
"""
from __future__ import annotations

import email
import email.policy
import mailbox
import re
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.errors import InputError

_PATCH_TAG = re.compile(r"\[([^\]]*\bPATCH\b[^\]]*)\]", re.I)
_VERSION = re.compile(r"(?:^|\s)v(\d+)(?:\s|$)", re.I)
_NUMBER = re.compile(r"(?:^|\s)(\d+)/(\d+)(?:\s|$)")

# Caps on what a subject tag may claim. A series is assembled into lists indexed by patch number,
# and the numbers are stored as sqlite INTEGERs (64 bits): a stranger's ``[PATCH 1/100000000]`` or
# ``v99999999999999999999`` must be refused, not allocated or overflowed. The largest mm series
# posted so far have a few hundred patches and no series reached v100.
MAX_PATCHES = 1000
MAX_VERSION = 1000
_UNIFIED = re.compile(rb"\n--- \S[^\n]*\n\+\+\+ \S[^\n]*\n@@ ")      # a plain unified diff (no "diff --git")
_BASE = re.compile(r"^base-commit: *([0-9a-f]{7,40})\s*$", re.M)


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
    path: Path | None                # the mbox it was read from; None: handed on as messages (the bot)
    cover: Message | None
    patches: list[Message] = field(default_factory=list)
    base_commit: str | None = None   # the base-commit: trailer

    @property
    def name(self) -> str:
        """What a message about the series names it by: its mbox's file name, else its Message-ID."""
        return self.path.name if self.path is not None else f"series {self.message_id}"

    @property
    def message_id(self) -> str:
        return (self.cover or self.patches[0]).message_id

    @property
    def subject(self) -> str:
        return (self.cover or self.patches[0]).subject

    @property
    def version(self) -> int:
        return (self.cover or self.patches[0]).version


def base_commit_of(text: str | bytes) -> str | None:
    """The ``base-commit:`` trailer ``git format-patch --base`` writes, if the message has one."""
    found = _BASE.search(text.decode("latin-1") if isinstance(text, bytes) else text)
    return found.group(1) if found else None


class TagError(InputError):
    """A ``[PATCH vN n/m]`` tag whose numbers are beyond the caps (MAX_PATCHES, MAX_VERSION)."""


def _bounded(digits: str, cap: int, what: str, subject: str) -> int:
    # compared as text first: int() of a 100,000-digit number is itself slow
    if len(digits.lstrip("0")) > len(str(cap)) or int(digits) > cap:
        shown = digits if len(digits) <= 24 else digits[:20] + "..."
        raise TagError(f"{what} {shown} in {subject[:80]!r} is beyond the cap of {cap}")
    return int(digits)


def patch_tag(subject: str) -> tuple[int | None, int | None, int]:
    """(n, m, version) of a ``[PATCH vN n/m]`` subject tag; TagError past the caps."""
    m = _PATCH_TAG.search(subject)
    if not m:
        return None, None, 1
    v = _VERSION.search(m.group(1))
    n = _NUMBER.search(m.group(1))
    ver = _bounded(v.group(1), MAX_VERSION, "version", subject) if v else 1
    if not n:
        return None, None, ver
    return (_bounded(n.group(1), MAX_PATCHES, "patch number", subject),
            _bounded(n.group(2), MAX_PATCHES, "patch count", subject), ver)


def _head(msg: email.message.Message, name: str) -> str:
    """A header as text. The default policy parses structured headers when they are read and
    raises on some hostile values (``Message-ID: <>``, an encoded CR/LF in From); those are
    taken as written, unfolded."""
    try:
        return str(msg.get(name, ""))
    except Exception:          # noqa: BLE001 - any parser failure: the raw value is what git am sees too
        raw = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), "")
        return " ".join(str(raw).split())


def mbox_entry(raw: bytes, from_line: str) -> bytes:
    """A message as one entry of an mbox file, what ``git am`` is given: the ``From_`` line, then the
    message with each line that starts ``From `` written ``>From `` (mboxo, as Python's mailbox and
    ``git format-patch`` mboxes have it), ending in a newline."""
    body = raw.replace(b"\nFrom ", b"\n>From ")
    return b"From " + from_line.encode() + b"\n" + body + (b"" if body.endswith(b"\n") else b"\n")


def _message(raw: bytes, from_line: str) -> Message:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    subject = " ".join(_head(msg, "Subject").split())
    pos, total, ver = patch_tag(subject)
    try:
        body = msg.get_body(("plain",))
        text = body.get_content() if body is not None else ""
    except (KeyError, LookupError, ValueError, AssertionError, TypeError, IndexError):
        text = raw.decode("utf-8", "replace")
    return Message(_head(msg, "Message-Id").strip(), subject, _head(msg, "From"),
                   _head(msg, "Date"), b"From " + from_line.encode() + b"\n" + raw, pos, total, ver, text)


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
    base = next((b for b in map(base_commit_of, (m.raw for m in [*covers, *patches])) if b), None)
    return MboxSeries(path, covers[0] if covers else None, patches, base)
